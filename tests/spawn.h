/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For guest tests that run programs: where the built programs are, running
 * one with its output captured, and writing cgroup files.
 */
#ifndef HW_SPAWN_H
#define HW_SPAWN_H

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * build/tests/guest/TEST -> build/NAME ("highwater") or
 * build/tests/workloads/NAME ("workloads/demo").
 */
static inline const char *built(const char *name)
{
	static char paths[8][PATH_MAX];
	static int next;
	char exe[PATH_MAX - 64], *p = paths[next++ % 8];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	exe[n > 0 ? n : 0] = '\0';
	*strrchr(exe, '/') = '\0';	/* build/tests/guest */
	*strrchr(exe, '/') = '\0';	/* build/tests */
	if (!strncmp(name, "workloads/", 10))
		snprintf(p, PATH_MAX, "%s/%s", exe, name);
	else
		snprintf(p, PATH_MAX, "%s/../%s", exe, name);
	return p;
}

/*
 * Run argv; its stdout into out, stderr into err (both NUL-terminated,
 * truncated to their sizes).  Returns the wait status, or -1.
 */
static inline int spawn_capture(char *const argv[], char *out, size_t outsize,
				char *err, size_t errsize)
{
	int po[2], pe[2], status;
	size_t no = 0, ne = 0;
	pid_t pid;

	if (pipe(po) || pipe(pe))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		close(po[1]);
		close(pe[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	for (int open_fds = 2; open_fds;) {
		struct pollfd pfd[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };

		if (poll(pfd, 2, -1) < 0)
			break;
		for (int i = 0; i < 2; i++) {
			char buf[4096], *dst = i ? err : out;
			size_t *len = i ? &ne : &no, size = i ? errsize : outsize;
			ssize_t n;

			if (!(pfd[i].revents & (POLLIN | POLLHUP)) || pfd[i].fd < 0)
				continue;
			n = read(pfd[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(i ? pe[0] : po[0]);
				if (i)
					pe[0] = -1;
				else
					po[0] = -1;
				open_fds--;
				continue;
			}
			if (*len + n >= size)
				n = size - 1 - *len;
			memcpy(dst + *len, buf, n);
			*len += n;
		}
	}
	out[no] = '\0';
	err[ne] = '\0';
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/*
 * sh -c with a command made as printf() makes it; output as spawn_capture()
 * captures it.  The guest tests' sh() helpers are this with their buffers.
 */
static inline int spawn_sh(char *out, size_t outsize, char *err, size_t errsize,
			   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static inline int spawn_sh(char *out, size_t outsize, char *err, size_t errsize,
			   const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return spawn_capture((char *[]){ "sh", "-c", cmd, NULL }, out, outsize, err, errsize);
}

/* The integer after "KEY=" in text, or -1. */
static inline long long key_value(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(text, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

/* Write @text to the file @path (a cgroup file): 0 or -1. */
static inline int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), r;

	if (fd < 0)
		return -1;
	r = write(fd, text, strlen(text)) < 0 ? -1 : 0;
	close(fd);
	return r;
}

/* rmdir a cgroup whose last task was just reaped (EBUSY for a moment). */
static inline int remove_cgroup(const char *dir)
{
	for (int i = 0; rmdir(dir); i++) {
		if (errno == ENOENT)
			return 0;
		if (errno != EBUSY || i == 200)
			return -1;
		usleep(5000);
	}
	return 0;
}

/*
 * A child that joins the cgroup whose cgroup.procs is @procs, opens 50 more
 * descriptors and waits to be killed; *@nofile gets its descriptor peak
 * (the highest it holds plus one), -1 when it did not say.
 */
static inline pid_t fork_fd_holder(const char *procs, int *nofile)
{
	int ready[2], highest = -2;
	pid_t pid;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		write_file(procs, "0");
		for (int i = 0; i < 50; i++) {
			int fd = open("/dev/null", O_RDONLY);

			if (fd > highest)
				highest = fd;
		}
		if (write(ready[1], &highest, sizeof(highest)) < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(ready[0], &highest, sizeof(highest)) != sizeof(highest))
		highest = -2;
	close(ready[0]);
	close(ready[1]);
	*nofile = highest + 1;
	return pid;
}

/*
 * Is this one of the checkers' kernels (kmemleak's debug kernel, KCSAN's)?
 * Tests that make thousands of processes or cgroups make fewer there,
 * where each costs ten times as much and the checkers see the same paths.
 */
static inline int on_checker_kernel(void)
{
	return !access("/sys/kernel/debug/kmemleak", F_OK) ||
	       !access("/sys/kernel/debug/kcsan", F_OK);
}

/*
 * The processes whose command line (arguments joined by spaces) starts with
 * @prefix; with @say, each is listed as a TAP comment.
 */
static inline int processes_named(const char *prefix, int say)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	char path[300], cmd[256];
	int found = 0;

	while (d && (de = readdir(d))) {
		ssize_t n;
		int fd;

		if (atoi(de->d_name) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		fd = open(path, O_RDONLY);
		n = fd < 0 ? -1 : read(fd, cmd, sizeof(cmd) - 1);
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			continue;
		cmd[n] = '\0';
		for (ssize_t i = 0; i < n - 1; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		if (!strncmp(cmd, prefix, strlen(prefix))) {
			if (say)
				printf("# left behind: pid %s: %s\n", de->d_name, cmd);
			found++;
		}
	}
	if (d)
		closedir(d);
	return found;
}

#endif
