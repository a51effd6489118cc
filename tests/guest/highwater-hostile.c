// SPDX-License-Identifier: GPL-2.0
/*
 * highwater run against workloads that push back (workloads/hostile.c): a
 * fork bomb under --pids-max, an OOM kill under --memory-max, a process that
 * moves out of the cgroup, one that ignores SIGTERM, 5,000 short-lived
 * processes, and highwater itself killed with SIGKILL.  Each has its
 * expected report: a limit run into is never turned into a setting, what
 * escaped is said, nothing is left behind.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

static char out[65536], err[65536], report[65536];
static const char *report_path = "/tmp/highwater-hostile.json";

/* highwater run -f FORMAT -o REPORT_PATH OPTIONS... -- CMD...; JSON into m */
static int run(struct hw_marks *m, const char *format, char *const opts[],
	       char *const cmd[])
{
	char *argv[40] = { (char *)built("highwater"), "run", "-f", (char *)format,
			   "-o", (char *)report_path };
	char msg[200];
	int i = 6, status;

	for (int j = 0; opts[j] && i < 20; j++)
		argv[i++] = opts[j];
	argv[i++] = "--";
	for (int j = 0; cmd[j] && i < 39; j++)
		argv[i++] = cmd[j];
	argv[i] = NULL;
	unlink(report_path);
	status = spawn_capture(argv, out, sizeof(out), err, sizeof(err));
	if (hw_read_file(report_path, report, sizeof(report)) < 0)
		report[0] = '\0';
	hw_marks_init(m);
	if (!strcmp(format, "json") && hw_json_read(report, m, msg, sizeof(msg))) {
		tap_diag("no report: %s", err);
		hw_marks_init(m);
	}
	return status;
}

static int exited_with(int status, int code)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == code;
}

/* No directory under the cgroup2 root whose name starts with @prefix. */
static int no_cgroup_left(const char *prefix)
{
	DIR *d = opendir("/sys/fs/cgroup");
	struct dirent *de;
	int left = 0;

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix))) {
			tap_diag("left behind: /sys/fs/cgroup/%s", de->d_name);
			left++;
		}
	if (d)
		closedir(d);
	return !left;
}

static int note_has(const struct hw_marks *m, const char *s)
{
	for (int i = 0; i < m->nnotes; i++)
		if (strstr(m->notes[i], s))
			return 1;
	tap_diag("no note with \"%s\" among %d", s, m->nnotes);
	for (int i = 0; i < m->nnotes; i++)
		tap_diag("  note: %s", m->notes[i]);
	return 0;
}

static void fork_bomb(void)
{
	struct hw_marks m;
	int status = run(&m, "json", (char *[]){ "--pids-max", "50", NULL },
			 (char *[]){ (char *)built("workloads/hostile"), "bomb", NULL });
	long long refused = key_value(out, "refused");

	tap_ok(exited_with(status, 0) && m.have_pids_peak && m.pids_peak == 50 &&
	       m.pids_max == 50,
	       "fork bomb under --pids-max 50: stopped there, pids.peak %llu, pids.max %llu (%s)",
	       (unsigned long long)m.pids_peak, (unsigned long long)m.pids_max, err);
	tap_ok(refused > 0 && (long long)m.pids_refused == refused &&
	       note_has(&m, "forks were refused at the cgroup's task limit"),
	       "fork bomb: the report counts the %llu refused forks (truth %lld), and says so",
	       (unsigned long long)m.pids_refused, refused);
	run(&m, "systemd", (char *[]){ "--pids-max", "50", NULL },
	    (char *[]){ (char *)built("workloads/hostile"), "bomb", NULL });
	tap_ok(strstr(report, "# TasksMax=") && !strstr(report, "\nTasksMax="),
	       "fork bomb: the systemd drop-in leaves TasksMax= commented out");
	tap_ok(no_cgroup_left("highwater-"), "fork bomb: no cgroup left");
}

static void oom_kill(void)
{
	struct hw_marks m;
	int status = run(&m, "json", (char *[]){ "--memory-max", "16M", NULL },
			 (char *[]){ (char *)built("workloads/hostile"), "hog", "64", NULL });

	tap_ok(exited_with(status, 128 + SIGKILL) && m.memory_oom_kills == 1 &&
	       m.memory_max == 16 << 20 && note_has(&m, "the OOM killer killed 1 process of the cgroup"),
	       "OOM kill under --memory-max 16M: status 137, memory.events oom_kill %llu in the report",
	       (unsigned long long)m.memory_oom_kills);
	run(&m, "systemd", (char *[]){ "--memory-max", "16M", NULL },
	    (char *[]){ (char *)built("workloads/hostile"), "hog", "64", NULL });
	tap_ok(strstr(report, "# MemoryMax=") && !strstr(report, "\nMemoryMax=") &&
	       !strstr(report, "\nMemoryHigh="),
	       "OOM kill: the systemd drop-in sets no MemoryMax=");
}

static void leaves_cgroup(void)
{
	const char *other = "/sys/fs/cgroup/highwater-test-escape";
	struct hw_marks m;
	int status;

	mkdir(other, 0755);
	status = run(&m, "json", (char *[]){ NULL },
		     (char *[]){ "sh", "-c",
				 "echo $$ > /sys/fs/cgroup/highwater-test-escape/cgroup.procs && exec sleep 0.2",
				 NULL });
	tap_ok(exited_with(status, 0) && m.processes == 1 &&
	       note_has(&m, "cgroup marks: 1 process left the workload's cgroup (pid ") &&
	       note_has(&m, "(sleep) moved to /highwater-test-escape)"),
	       "a process that moves out of the cgroup is named in the report");
	tap_ok(m.moved_out == 1 && hw_caps_not_derived(&m) &&
	       !hw_limit_advice(&m, RLIMIT_NOFILE, 25).emit,
	       "it took the rlimits and bounding set along: processes.moved_out %llu, neither is set",
	       (unsigned long long)m.moved_out);
	remove_cgroup(other);
}

/* Wait up to 10 s for a process whose command line starts with @prefix. */
static int wait_for_process(const char *prefix)
{
	for (int i = 0; i < 500; i++) {
		if (processes_named(prefix, 0))
			return 1;
		usleep(20000);
	}
	tap_diag("no process '%s' came", prefix);
	return 0;
}

static void ignores_sigterm(void)
{
	struct hw_marks m;
	struct timespec t0, t1;
	char msg[200];
	int status;
	pid_t pid;

	unlink(report_path);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(built("highwater"), "highwater", "run", "-k", "1", "-f", "json",
		      "-o", report_path, "--", "sh", "-c", "trap '' TERM; sleep 1003",
		      (char *)NULL);
		_exit(99);
	}
	wait_for_process("sleep 1003");	/* the trap is set */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	hw_marks_init(&m);
	if (hw_read_file(report_path, report, sizeof(report)) < 0 ||
	    hw_json_read(report, &m, msg, sizeof(msg)))
		hw_marks_init(&m);
	tap_ok(exited_with(status, 128 + SIGKILL) && t1.tv_sec - t0.tv_sec < 5 &&
	       note_has(&m, "still running 1 s after SIGTERM: highwater killed it with SIGKILL"),
	       "a workload that ignores SIGTERM: killed 1 s later, status %#x, and the report says so",
	       status);
	tap_ok(no_cgroup_left("highwater-"), "ignores SIGTERM: no cgroup left");
}

/* 5,000 orphans (100 on the checkers' kernels, where each costs ten times as much) */
static void many_processes(void)
{
	int n = on_checker_kernel() ? 100 : 5000;
	struct timespec t0, t1;
	struct hw_marks m;
	char count[16];
	int status;

	snprintf(count, sizeof(count), "%d", n);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	status = run(&m, "json", (char *[]){ NULL },
		     (char *[]){ (char *)built("workloads/hostile"), "many", count, NULL });
	clock_gettime(CLOCK_MONOTONIC, &t1);
	tap_ok(exited_with(status, 0) && key_value(out, "children") == n &&
	       m.processes == n + 1 && m.nnotes == 0,
	       "%d short-lived orphans: highwater reaped each and read its marks (%d processes), in %ld s",
	       n, m.processes, (long)(t1.tv_sec - t0.tv_sec));
}

/* The first highwater-PID under the cgroup2 root, as "PID"; "" if none. */
static void find_leaf(char *pid, size_t size)
{
	DIR *d = opendir("/sys/fs/cgroup");
	struct dirent *de;

	pid[0] = '\0';
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, "highwater-", 10) &&
		    strspn(de->d_name + 10, "0123456789") == strlen(de->d_name + 10))
			snprintf(pid, size, "%s", de->d_name + 10);
	if (d)
		closedir(d);
}

static void highwater_killed(void)
{
	char pid[32], leaf[300], want[1100], events[300] = "";
	struct hw_marks m;
	pid_t hw;
	int status;

	hw = fork();
	if (hw == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(built("highwater"), "highwater", "run", "--", "sleep", "1004", (char *)NULL);
		_exit(99);
	}
	for (int i = 0; i < 100; i++) {
		find_leaf(pid, sizeof(pid));
		if (pid[0])
			break;
		usleep(20000);
	}
	wait_for_process("sleep 1004");	/* it has joined the leaf */
	kill(hw, SIGKILL);
	waitpid(hw, NULL, 0);
	snprintf(leaf, sizeof(leaf), "/sys/fs/cgroup/highwater-%s", pid);
	status = run(&m, "json", (char *[]){ NULL }, (char *[]){ "true", NULL });
	snprintf(want, sizeof(want),
		 "%s, left by a highwater run that was killed, still holds processes: stop them with 'echo 1 > %s/cgroup.kill', then 'rmdir %s'",
		 leaf, leaf, leaf);
	tap_ok(pid[0] && exited_with(status, 0) && strstr(err, want) && !access(leaf, F_OK),
	       "highwater killed: the next run names its cgroup, still in use, and what to do");
	write_file(strcat(strcpy(want, leaf), "/cgroup.kill"), "1");
	snprintf(want, sizeof(want), "%s/cgroup.events", leaf);
	for (int i = 0; i < 100 && !strstr(events, "populated 0"); i++) {
		usleep(20000);
		if (hw_read_file(want, events, sizeof(events)) < 0)
			break;
	}
	status = run(&m, "json", (char *[]){ NULL }, (char *[]){ "true", NULL });
	snprintf(want, sizeof(want), "removed %s, left by a highwater run that was killed", leaf);
	tap_ok(exited_with(status, 0) && strstr(err, want) && access(leaf, F_OK) &&
	       no_cgroup_left("highwater-"),
	       "highwater killed: once empty, the next run removes its cgroup and says so (%s)",
	       err);
}

int main(void)
{
	tap_plan(13);
	fork_bomb();
	oom_kill();
	leaves_cgroup();
	ignores_sigterm();
	many_processes();
	highwater_killed();
	unlink(report_path);
	return tap_exit();
}
