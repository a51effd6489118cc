// SPDX-License-Identifier: GPL-2.0
/*
 * highwater run: CMD in a fresh cgroup v2 leaf, highwater as its child
 * subreaper, until CMD and every descendant are gone.  Each process's marks
 * are read while it is a zombie (waitid WNOWAIT), before it is reaped; the
 * cgroup's before it is removed, with what it kept of the processes that
 * could not be read (rlimits.peak, capabilities.used).  The cgroup goes on
 * every path.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hw.h"

struct cg {
	char mount[256];
	char parent[768];	/* absolute directory */
	char leaf[1024];	/* absolute directory, "" when none */
	char aside[1040];	/* where highwater moved itself out of parent, or "" */
	bool enabled_pids, enabled_memory;	/* to undo in the parent */
};

static int write_file(const char *dir, const char *file, const char *text)
{
	char path[1200];
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* Enable @ctrl for the parent's children; note why not, if it fails. */
static bool enable_controller(struct cg *cg, const char *ctrl,
			      struct hw_marks *m)
{
	char path[1024], buf[512], plus[32];
	int r;

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg->parent);
	if (hw_read_file(path, buf, sizeof(buf)) >= 0) {
		for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
			if (!strcmp(t, ctrl))
				return false;	/* already on: nothing to undo */
	}
	snprintf(plus, sizeof(plus), "+%s", ctrl);
	r = write_file(cg->parent, "cgroup.subtree_control", plus);
	if (!r)
		return true;
	if (r == -EBUSY)
		hw_note(m, "%s peak: cannot enable the %s controller under %s: it has processes of its own (use --cgroup-parent)",
			ctrl[0] == 'p' ? "task" : "memory", ctrl, cg->parent);
	else if (r == -ENOENT || r == -EINVAL)
		hw_note(m, "%s peak: the %s controller is not available under %s",
			ctrl[0] == 'p' ? "task" : "memory", ctrl, cg->parent);
	else
		hw_note(m, "%s peak: cannot enable the %s controller under %s: %s",
			ctrl[0] == 'p' ? "task" : "memory", ctrl, cg->parent,
			strerror(-r));
	return false;
}

/*
 * The leaves of highwater runs that were killed (SIGKILL leaves no chance to
 * clean up) under @parent: removed when empty, named with what to do when
 * not.  A leaf whose highwater still runs is left alone.
 */
static void remove_stale_leaves(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[1400], comm[32], *end;
		long pid;

		if (strncmp(de->d_name, "highwater-", 10))
			continue;
		pid = strtol(de->d_name + 10, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		if (hw_read_file(path, comm, sizeof(comm)) >= 0 && !strcmp(comm, "highwater\n"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", parent, de->d_name);
		if (!rmdir(path))
			hw_warn("removed %s, left by a highwater run that was killed", path);
		else if (errno == EBUSY)
			hw_warn("%s, left by a highwater run that was killed, still holds processes: stop them with 'echo 1 > %s/cgroup.kill', then 'rmdir %s'",
				path, path, path);
	}
	if (d)
		closedir(d);
}

/* --pids-max, --memory-max: the workload's limits, set before it starts. */
static int apply_limits(struct cg *cg, const struct hw_run_opts *o)
{
	static const struct {
		const char *file, *option;
		size_t offset;
	} limits[] = {
		{ "pids.max", "--pids-max", offsetof(struct hw_run_opts, pids_max) },
		{ "memory.max", "--memory-max", offsetof(struct hw_run_opts, memory_max) },
	};

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		uint64_t v = *(const uint64_t *)((const char *)o + limits[i].offset);
		char text[32];
		int r;

		if (!v)
			continue;
		if (!cg->leaf[0]) {
			hw_warn("%s needs the workload's cgroup, which could not be made (above)",
				limits[i].option);
			return -1;
		}
		snprintf(text, sizeof(text), "%" PRIu64, v);
		r = write_file(cg->leaf, limits[i].file, text);
		if (r) {
			hw_warn("cannot set %s/%s to %s for %s: %s", cg->leaf, limits[i].file,
				text, limits[i].option, strerror(-r));
			return -1;
		}
	}
	return 0;
}

/*
 * How many processes @dir's cgroup has of its own (2 for "more than one"),
 * and whether highwater is the one.  -errno when it cannot be read.
 */
static int own_processes(const char *dir, bool *only_self)
{
	char path[1200], buf[64];
	int len, n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	len = hw_read_file(path, buf, sizeof(buf));
	if (len == -EFBIG)
		return 2;
	if (len < 0)
		return len;
	for (char *t = strtok(buf, "\n"); t; t = strtok(NULL, "\n"))
		n++;
	*only_self = n == 1 && atoi(buf) == (int)getpid();
	return n > 1 ? 2 : n;
}

/*
 * cgroup v2 gives no domain controller (memory) to the children of a cgroup
 * with processes of its own, but the root's, and a threaded one (pids)
 * enabled there makes it a thread root, whose children take no process at
 * all.  So the parent must have none: highwater alone in it (under
 * systemd-run --scope -p Delegate=yes) moves itself to a cgroup beside the
 * leaf, and back when the run is over; with others there (a login
 * session's, a service's), the leaf gets no controller, and a note says
 * what to do.  True when controllers may be enabled.
 */
static bool parent_without_processes(struct cg *cg, struct hw_marks *m)
{
	bool only_self = false;
	char pid[32];
	int n;

	if (!strcmp(cg->parent, cg->mount))
		return true;
	n = own_processes(cg->parent, &only_self);
	if (n == 0)
		return true;
	if (only_self) {
		snprintf(cg->aside, sizeof(cg->aside), "%s/highwater-%d.self", cg->parent,
			 (int)getpid());
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		if (!mkdir(cg->aside, 0755) && !write_file(cg->aside, "cgroup.procs", pid))
			return true;
		rmdir(cg->aside);
		cg->aside[0] = '\0';
	}
	hw_note(m, "task peak: %s has %s processes of its own, and cgroup v2 then gives its children no controller: run highwater under systemd-run --scope -p Delegate=yes (--user when not root), or give --cgroup-parent a cgroup without processes",
		cg->parent + strlen(cg->mount), n < 0 ? "unknown" : only_self ? "highwater's" : "other");
	hw_note(m, "memory peak: not measured either, as the task peak says");
	return false;
}

/*
 * Make the leaf.  On failure the run goes on without cgroup marks, and the
 * notes say why and what to do.
 */
static void cgroup_setup(struct cg *cg, const char *parent, struct hw_marks *m)
{
	char own[512];
	int r;

	cg->leaf[0] = cg->aside[0] = '\0';
	r = hw_cgroup2_mount(cg->mount, sizeof(cg->mount));
	if (r) {
		hw_note(m, "cgroup marks (tasks, memory, devices): no cgroup2 file system is mounted (mount -t cgroup2 none /sys/fs/cgroup)");
		hw_warn("no cgroup2 mount: running without cgroup marks");
		return;
	}
	if (parent) {
		if (parent[0] == '/' && !strncmp(parent, cg->mount, strlen(cg->mount)))
			snprintf(cg->parent, sizeof(cg->parent), "%s", parent);
		else
			snprintf(cg->parent, sizeof(cg->parent), "%s/%s", cg->mount,
				 parent[0] == '/' ? parent + 1 : parent);
	} else {
		if (hw_cgroup_of(0, own, sizeof(own))) {
			hw_note(m, "cgroup marks: highwater's own cgroup is not on cgroup v2 (give --cgroup-parent)");
			return;
		}
		snprintf(cg->parent, sizeof(cg->parent), "%s%s", cg->mount,
			 strcmp(own, "/") ? own : "");
	}
	remove_stale_leaves(cg->parent);
	snprintf(cg->leaf, sizeof(cg->leaf), "%s/highwater-%d", cg->parent,
		 (int)getpid());
	if (mkdir(cg->leaf, 0755)) {
		r = errno;
		hw_note(m, "cgroup marks (tasks, memory, devices): cannot create %s: %s", cg->leaf,
			strerror(r));
		hw_warn("cannot create the cgroup %s: %s; running without cgroup marks (%s)",
			cg->leaf, strerror(r),
			r == EACCES || r == EPERM || r == EROFS ?
			"run as root, or give a cgroup you may write with --cgroup-parent, e.g. under systemd-run --user -p Delegate=yes --scope" :
			"check --cgroup-parent");
		cg->leaf[0] = '\0';
		return;
	}
	if (parent_without_processes(cg, m)) {
		cg->enabled_pids = enable_controller(cg, "pids", m);
		cg->enabled_memory = enable_controller(cg, "memory", m);
	}
	snprintf(m->cgroup, sizeof(m->cgroup), "%s", cg->leaf + strlen(cg->mount));
}

/* Remove the leaf (now empty) and undo what was enabled in the parent. */
static void cgroup_cleanup(struct cg *cg)
{
	if (!cg->leaf[0])
		return;
	for (int i = 0; rmdir(cg->leaf) && errno == EBUSY && i < 200; i++)
		usleep(5000);	/* the last exits are still being accounted */
	if (access(cg->leaf, F_OK) == 0)
		hw_warn("could not remove the cgroup %s: %s", cg->leaf, strerror(errno));
	if (cg->enabled_memory)
		write_file(cg->parent, "cgroup.subtree_control", "-memory");
	if (cg->enabled_pids)
		write_file(cg->parent, "cgroup.subtree_control", "-pids");
	if (cg->aside[0]) {
		char pid[32];

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		if (write_file(cg->parent, "cgroup.procs", pid) || rmdir(cg->aside))
			hw_warn("could not return to %s from %s: %s", cg->parent, cg->aside,
				strerror(errno));
		cg->aside[0] = '\0';
	}
	cg->leaf[0] = '\0';
}

/* Signal every process that has highwater as an ancestor (no cgroup). */
static void signal_descendants(int sig)
{
	static pid_t ppid[1 << 22];	/* pid_max is at most 4194304 */
	char path[64], buf[512];
	pid_t self = getpid(), pids[4096];
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) && n < 4096) {
		pid_t pid = atoi(de->d_name);
		char *p;

		if (pid <= 0 || pid >= (1 << 22))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (hw_read_file(path, buf, sizeof(buf)) < 0)
			continue;
		p = strrchr(buf, ')');	/* the name may hold anything */
		if (!p || sscanf(p + 2, "%*c %d", &ppid[pid]) != 1)
			continue;
		pids[n++] = pid;
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		for (pid_t a = ppid[pids[i]], hops = 0; a > 0 && hops < 64; hops++) {
			if (a == self) {
				kill(pids[i], sig);
				break;
			}
			a = a < (1 << 22) ? ppid[a] : 0;
		}
}

/* Signal every process in the cgroup at @dir. */
static void signal_cgroup(const char *dir, int sig)
{
	char path[1100], *procs = NULL;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (hw_read_file_alloc(path, &procs) < 0)
		return;
	for (char *t = strtok(procs, "\n"); t; t = strtok(NULL, "\n"))
		kill(atoi(t), sig);
	free(procs);
}

/*
 * Signal the workload: CMD while it lives and everything in its cgroup;
 * SIGKILL through cgroup.kill, and also to every descendant, which reaches
 * the processes that moved out of the cgroup.
 */
static void signal_workload(struct cg *cg, pid_t cmd, bool cmd_alive, int sig)
{
	if (cmd_alive)
		kill(cmd, sig);
	if (sig != SIGKILL) {
		if (cg->leaf[0])
			signal_cgroup(cg->leaf, sig);
		return;
	}
	if (cg->leaf[0])
		write_file(cg->leaf, "cgroup.kill", "1");
	signal_descendants(sig);
}

/*
 * A process that moved out of the workload's cgroup (root may): its limits
 * and capabilities are still read, at its exit, but what it did in the other
 * cgroup is not in the task, memory and devices marks.  The first one is
 * named, the others counted.
 */
static void check_left_cgroup(pid_t pid, const struct cg *cg, int *left,
			      char *first, size_t size)
{
	const char *leaf = cg->leaf + strlen(cg->mount);
	char now_in[1024], comm[64] = "?\n", path[64];
	size_t n = strlen(leaf);

	if (!cg->leaf[0] || hw_cgroup_of(pid, now_in, sizeof(now_in)))
		return;
	if (!strncmp(now_in, leaf, n) && (!now_in[n] || now_in[n] == '/'))
		return;
	if (!(*left)++) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		hw_read_file(path, comm, sizeof(comm));
		comm[strcspn(comm, "\n")] = '\0';
		snprintf(first, size, "pid %d (%s) moved to %s", (int)pid, comm, now_in);
	}
}

/* The command as a shell would take it back, "..." at the end if cut. */
static void command_line(char **argv, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; argv[i] && n < size; i++) {
		bool plain = argv[i][0] && !argv[i][strcspn(argv[i], " \t\n'\"\\$`*?;&|<>()")];

		n += snprintf(buf + n, size - n, plain ? "%s%s" : "%s'%s'",
			      i ? " " : "", argv[i]);
	}
	if (n >= size && size > 4)	/* cut short: say so */
		strcpy(buf + size - 4, "...");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What the child tells the parent through the close-on-exec pipe. */
struct child_error {
	int stage;		/* 1: joining the cgroup, 2: exec */
	int err;
};

static void child(char **argv, const struct cg *cg, const sigset_t *old,
		  int fd)
{
	struct child_error ce = { 1, 0 };

	sigprocmask(SIG_SETMASK, old, NULL);
	if (cg->leaf[0]) {
		ce.err = -write_file(cg->leaf, "cgroup.procs", "0");
		if (ce.err) {
			if (write(fd, &ce, sizeof(ce)) < 0)
				_exit(HW_EX_SOFTWARE);
			_exit(HW_EX_SOFTWARE);
		}
	}
	execvp(argv[0], argv);
	ce.stage = 2;
	ce.err = errno;
	if (write(fd, &ce, sizeof(ce)) < 0)
		_exit(HW_EX_SOFTWARE);
	_exit(errno == ENOENT ? HW_EX_NOT_FOUND : HW_EX_CANNOT_RUN);
}

int hw_run(char **argv, const struct hw_run_opts *o, struct hw_marks *m)
{
	struct cg cg = { 0 };
	struct child_error ce = { 0 };
	sigset_t set, old;
	int pipefd[2], status = 0, code;
	bool cmd_done = false, killed = false;
	double start, deadline, kill_at = 0;
	char left_first[1200] = "";
	int moved_out = 0;	/* processes that left the cgroup */
	int unread = 0;		/* processes whose marks may not be read */
	const char *passed_on = NULL;	/* the signal that started the grace */
	pid_t cmd;

	/*
	 * Signals wait from the start: a SIGTERM that comes while the cgroup
	 * is being made is passed on to the command once it runs, instead of
	 * killing highwater and leaving the cgroup behind.
	 */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);

	command_line(argv, m->command, sizeof(m->command));
	cgroup_setup(&cg, o->cgroup_parent, m);
	if (apply_limits(&cg, o)) {
		code = -HW_EX_UNAVAILABLE;
		goto fail;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1)) {
		hw_warn("cannot become child subreaper: %s", strerror(errno));
		code = HW_EX_SOFTWARE;
		goto fail;
	}
	if (pipe2(pipefd, O_CLOEXEC)) {
		hw_warn("pipe: %s", strerror(errno));
		code = HW_EX_SOFTWARE;
		goto fail;
	}
	start = now();
	deadline = o->timeout > 0 ? start + o->timeout : 0;
	cmd = fork();
	if (cmd < 0) {
		hw_warn("fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		code = HW_EX_SOFTWARE;
		goto fail;
	}
	if (cmd == 0)
		child(argv, &cg, &old, pipefd[1]);
	close(pipefd[1]);
	if (read(pipefd[0], &ce, sizeof(ce)) != sizeof(ce))
		ce.stage = 0;	/* EOF: exec succeeded */
	close(pipefd[0]);

	/* Reap everything: CMD, and whatever it left behind reparented to us. */
	for (;;) {
		siginfo_t si = { 0 };
		struct timespec ts, *tsp = NULL;
		struct rusage ru;
		int sig, st, r;

		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT)) {
			if (errno == EINTR)
				continue;
			break;	/* ECHILD: every descendant is gone */
		}
		if (si.si_pid) {
			bool top = si.si_pid == cmd;

			check_left_cgroup(si.si_pid, &cg, &moved_out, left_first, sizeof(left_first));

			r = hw_collect_process(si.si_pid, m, top);
			if (r && top && !ce.stage)
				hw_note(m, "could not read the marks of the command (pid %d): %s",
					(int)si.si_pid, strerror(-r));
			unread += r == -EACCES || r == -EPERM;
			if (wait4(si.si_pid, &st, 0, &ru) == si.si_pid) {
				if ((uint64_t)ru.ru_maxrss * 1024 > m->maxrss)
					m->maxrss = (uint64_t)ru.ru_maxrss * 1024;
				if (top) {
					status = st;
					cmd_done = true;
				}
			}
			continue;
		}
		if (!killed && deadline && now() >= deadline) {
			m->timed_out = true;
			killed = true;
		}
		if (!killed && kill_at && now() >= kill_at) {
			hw_note(m, "the workload was still running %g s after %s: highwater killed it with SIGKILL (--kill-after)",
				o->kill_after, passed_on);
			killed = true;
		}
		if (killed || deadline || kill_at) {
			double wake = killed ? now() + 0.1 :
				      !kill_at ? deadline :
				      !deadline || kill_at < deadline ? kill_at : deadline;
			double left = wake - now();

			if (killed)	/* again, for what was forked meanwhile */
				signal_workload(&cg, cmd, !cmd_done, SIGKILL);
			if (left < 0)
				left = 0;
			ts.tv_sec = (time_t)left;
			ts.tv_nsec = (long)((left - ts.tv_sec) * 1e9);
			tsp = &ts;
		}
		sig = sigtimedwait(&set, &si, tsp);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			/* A terminal already signalled the whole foreground group. */
			if (si.si_code != SI_KERNEL)
				signal_workload(&cg, cmd, !cmd_done, sig);
			if (!kill_at && o->kill_after > 0) {
				kill_at = now() + o->kill_after;
				passed_on = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
			}
		}
	}
	if (moved_out)
		hw_note(m, "cgroup marks: %d process%s left the workload's cgroup (%s%s): not in these marks; read that cgroup while it lives (highwater cgroup PATH, highwater container NAME)",
			moved_out, moved_out > 1 ? "es" : "", left_first,
			moved_out > 1 ? ", the first" : "");
	m->seconds = now() - start;
	sigprocmask(SIG_SETMASK, &old, NULL);

	if (cg.leaf[0] && hw_collect_cgroup(cg.leaf, m))
		hw_note(m, "cgroup marks: could not read %s", cg.leaf);
	if (cg.leaf[0])
		hw_collect_run_cgroup_marks(cg.leaf, m, unread);
	if (m->moved_out && !moved_out)	/* none that run reaped: said only here */
		hw_note(m, "cgroup marks: %" PRIu64 " process%s left the workload's cgroup or started outside it (crun's containers): not in these marks; read that cgroup while it lives (highwater container NAME)",
			m->moved_out, m->moved_out > 1 ? "es" : "");
	cgroup_cleanup(&cg);

	if (ce.stage == 1) {
		hw_warn("cannot move the command into its cgroup: %s", strerror(ce.err));
		return HW_EX_SOFTWARE;
	}
	if (ce.stage == 2) {
		hw_warn("cannot run '%s': %s", argv[0], strerror(ce.err));
		code = ce.err == ENOENT ? HW_EX_NOT_FOUND : HW_EX_CANNOT_RUN;
	} else if (m->timed_out) {
		code = HW_EX_TIMEOUT;
	} else if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		code = 128 + WTERMSIG(status);
	} else {
		code = HW_EX_SOFTWARE;
	}
	m->exit_status = code;
	return code;

fail:	/* before the command ran */
	cgroup_cleanup(&cg);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return code;
}
