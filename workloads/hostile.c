// SPDX-License-Identifier: GPL-2.0
/*
 * hostile: workloads that push against the profiler, for
 * tests/guest/highwater-hostile.c.
 *
 *   hostile bomb      every process forks until a fork fails anywhere,
 *                     then all exit after a second; refuses to start
 *                     unless its cgroup has a pids.max (it would take the
 *                     machine)
 *   hostile many N    N orphans, one after another, each exiting at once
 *   hostile hog MB    allocates and touches MB mebibytes, one at a time
 *
 * Prints "hostile: truth KEY=VALUE" lines: refused=N (bomb: forks that
 * failed with EAGAIN), children=N (many), hogged=MB (hog, if not killed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Does this process's cgroup have a task limit? */
static int has_pids_max(void)
{
	char line[4096], path[4200], max[32] = "";
	FILE *f = fopen("/proc/self/cgroup", "r");
	int v2 = 0;

	/* The "0::PATH" line: v1 hierarchies, if any are mounted, come first. */
	while (f && !v2 && fgets(line, sizeof(line), f))
		v2 = !strncmp(line, "0::", 3);
	if (f)
		fclose(f);
	if (!v2)
		return 0;
	line[strcspn(line, "\n")] = '\0';
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/pids.max", line + 3);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(max, sizeof(max), f))
		max[0] = '\0';
	fclose(f);
	return max[0] >= '1' && max[0] <= '9';
}

static int bomb(void)
{
	int pipefd[2], refused = 0;
	pid_t top = getpid();

	if (!has_pids_max()) {
		fprintf(stderr, "hostile: refusing to fork-bomb a cgroup without pids.max\n");
		return 2;
	}
	/* Each process that saw a fork fail writes one byte. */
	if (pipe(pipefd))
		return 1;
	for (;;) {
		struct pollfd stop = { pipefd[0], POLLIN, 0 };
		pid_t pid;

		/*
		 * Once any fork failed, nobody forks again: the bomb ends,
		 * instead of going on in the slots the first ones free as
		 * they exit (on a slow kernel it could go on for ever).
		 */
		if (poll(&stop, 1, 0) > 0)
			break;
		pid = fork();
		if (pid == 0)
			continue;	/* the child forks on, too */
		if (pid < 0) {
			if (errno != EAGAIN) {
				perror("hostile: fork");
				_exit(1);
			}
			if (write(pipefd[1], "x", 1) != 1)
				_exit(1);
			break;
		}
	}
	sleep(1);
	if (getpid() != top)
		_exit(0);
	close(pipefd[1]);
	while (wait(NULL) > 0)
		;
	/* The processes still running when their parent exited are ours now
	 * only under a subreaper; count what reached the pipe. */
	for (char c; read(pipefd[0], &c, 1) == 1;)
		refused++;
	printf("hostile: truth refused=%d\n", refused);
	return 0;
}

/*
 * Each child forks a grandchild and exits: the grandchildren are orphans,
 * reaped by whoever is the subreaper (highwater run), one by one.
 */
static int many(int n)
{
	int done = 0;

	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("hostile: fork");
			return 1;
		}
		if (pid == 0)
			_exit(fork() < 0);
		if (waitpid(pid, NULL, 0) == pid)
			done++;
	}
	printf("hostile: truth children=%d\n", done);
	return 0;
}

static int hog(long mb)
{
	for (long i = 0; i < mb; i++) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("hostile: mmap");
			return 1;
		}
		memset(p, 1, 1 << 20);
	}
	printf("hostile: truth hogged=%ld\n", mb);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 2 && !strcmp(argv[1], "bomb"))
		return bomb();
	if (argc == 3 && !strcmp(argv[1], "many"))
		return many(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "hog"))
		return hog(atol(argv[2]));
	fprintf(stderr, "usage: hostile bomb | many N | hog MB\n");
	return 2;
}
