// SPDX-License-Identifier: GPL-2.0
/*
 * highwater export --interval: the memory and tasks peaks of each interval.
 * A process holds 8 MiB in its cgroup, and once touches 64 MiB more and
 * frees them while 20 children of it live.  The windows that saw the spike
 * have it, also when another reader restarts its own memory.peak and
 * pids.peak right after (patches 42 and 43), a later one does not (while
 * the cumulative peaks keep it), every window holds what stayed (the
 * memory charged, the one task), a removed cgroup's descriptors are
 * closed, and SIGTERM ends it between exports.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

#define ROOT "/sys/fs/cgroup/highwater-test-window"
#define JOB ROOT "/job.service"
#define TEXTFILES "/tmp/highwater-window"
#define PROM TEXTFILES "/highwater.prom"
#define MIB (1ULL << 20)
#define HELD (8 * MIB)
#define SPIKE (64 * MIB)
#define TASKS 20	/* children alive during the spike */

static char metrics[1 << 20], out[65536], err[65536];

/* Set-up that failed: TAP's bail-out, which fails the test. */
static void bail(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A sample of the job's cgroup in the last export read, or -1. */
static long long job_sample(const char *family)
{
	char line[300];
	const char *p;

	snprintf(line, sizeof(line),
		 "\n%s{cgroup=\"/highwater-test-window/job.service\",unit=\"job.service\"} ", family);
	p = strstr(metrics, line);
	return p ? atoll(p + strlen(line)) : -1;
}

/*
 * Wait for the daemon's next export (a new file renamed in: a new inode)
 * and read it: 0, or -1 after 60 s without one.
 */
static int next_export(void)
{
	static ino_t last;
	struct stat st;

	for (int i = 0; i < 1200; i++) {
		if (!stat(PROM, &st) && st.st_ino != last &&
		    hw_read_file(PROM, metrics, sizeof(metrics)) >= 0) {
			last = st.st_ino;
			return 0;
		}
		usleep(50000);
	}
	return -1;
}

/* Touch @size bytes of fresh anonymous memory, charged to the cgroup. */
static void *touch(size_t size)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	for (size_t i = 0; i < size; i += 4096)
		p[i] = 1;
	return p;
}

/* TASKS children that live until @go is closed; 0 or -1. */
static int fork_children(pid_t *pid, int go[2])
{
	char c;

	for (int i = 0; i < TASKS; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			return -1;
		if (pid[i] == 0) {
			close(go[1]);
			_exit(read(go[0], &c, 1) != 0);	/* EOF: go */
		}
	}
	return 0;
}

/*
 * The worker: joins JOB, holds HELD; each byte on @cmd: a spike of SPIKE
 * bytes with TASKS children alive, all gone before the reply.
 */
static pid_t worker(int cmd, int reply)
{
	pid_t pid = fork(), kids[TASKS];
	char c;

	if (pid)
		return pid;
	if (write_file(JOB "/cgroup.procs", "0") || !touch(HELD))
		_exit(1);
	while (write(reply, "r", 1) == 1 && read(cmd, &c, 1) == 1) {
		int go[2], status;
		void *p;

		if (pipe(go) || fork_children(kids, go))
			_exit(1);
		close(go[0]);
		p = touch(SPIKE);
		if (!p)
			_exit(1);
		munmap(p, SPIKE);
		close(go[1]);
		for (int i = 0; i < TASKS; i++)
			if (waitpid(kids[i], &status, 0) != kids[i] || status)
				_exit(1);
	}
	_exit(0);
}

/* The daemon's descriptors of @file (memory.peak, pids.peak). */
static int peak_fds(pid_t daemon, const char *file)
{
	char dir[64], path[400], target[400];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", daemon);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		ssize_t len;

		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = '\0';
			n += !!strstr(target, file);
		}
	}
	if (d)
		closedir(d);
	return n;
}

int main(void)
{
	int cmd[2], reply[2], status, exports, fds, pids_fds, other, other_pids, left;
	long long first = -1, w, spiked = -1, after = -1, cumulative = -1, low = -1;
	long long tasks_first = -1, tasks_spiked = -1, tasks_low = -1, tasks_after = -1;
	struct dirent *de;
	pid_t work, daemon;
	char c;
	DIR *d;

	tap_plan(9);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids");
	mkdir(ROOT, 0755);
	write_file(ROOT "/cgroup.subtree_control", "+memory +pids");
	mkdir(JOB, 0755);
	mkdir(TEXTFILES, 0755);
	unlink(PROM);
	if (pipe2(cmd, O_CLOEXEC) || pipe2(reply, O_CLOEXEC))
		bail("pipe");
	work = worker(cmd[0], reply[1]);
	if (work < 0 || read(reply[0], &c, 1) != 1)
		bail("the worker did not start");

	daemon = fork();
	if (daemon == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		execl(built("highwater"), "highwater", "export", "--interval", "1",
		      "--textfile-dir", TEXTFILES, "highwater-test-window", (char *)NULL);
		_exit(127);
	}

	/* The first export opens the descriptor; the second has a window. */
	for (exports = 0; exports < 4 && first < 0; exports++)
		if (!next_export()) {
			first = job_sample("highwater_memory_peak_window_bytes");
			tasks_first = job_sample("highwater_tasks_peak_window");
		}
	tap_ok(first >= (long long)HELD && first < (long long)(HELD + SPIKE / 2) &&
	       strstr(metrics, "\nhighwater_export_interval_seconds 1\n"),
	       "a window from the cgroup's second export on: %lld bytes, at least the %llu held, without a spike",
	       first, HELD);
	tap_ok(tasks_first == 1, "its tasks window: %lld, the one worker (patch 43)", tasks_first);

	/*
	 * A spike right after an export: the windows restarted before the file
	 * was written.  An export during the spike splits it across two
	 * windows, each restarted from the usage then: their maximum is it.
	 */
	if (write(cmd[1], "s", 1) != 1 || read(reply[0], &c, 1) != 1)
		bail("the worker did not spike");
	/*
	 * Another reader restarts its own files: the daemon's windows keep the
	 * spike (patches 42 and 43).
	 */
	other = open(JOB "/memory.peak", O_RDWR | O_CLOEXEC);
	if (other < 0 || write(other, "reset\n", 6) != 6)
		bail("another reader's restart of memory.peak");
	other_pids = open(JOB "/pids.peak", O_RDWR | O_CLOEXEC);
	if (other_pids < 0 || write(other_pids, "reset\n", 6) != 6)
		bail("another reader's restart of pids.peak");
	for (int i = 0; i < 2 && !next_export(); i++) {
		w = job_sample("highwater_memory_peak_window_bytes");
		spiked = w > spiked ? w : spiked;
		w = job_sample("highwater_tasks_peak_window");
		tasks_spiked = w > tasks_spiked ? w : tasks_spiked;
	}
	cumulative = job_sample("highwater_memory_peak_bytes");
	tap_ok(spiked >= (long long)(HELD + SPIKE),
	       "the windows over the spike, restarted by another reader after it: %lld bytes, at least %llu held and spiked",
	       spiked, HELD + SPIKE);
	tap_ok(tasks_spiked == TASKS + 1,
	       "their tasks windows: %lld, the worker and its %d children", tasks_spiked, TASKS);
	close(other);
	close(other_pids);

	/* Later windows restart without it; the cumulative peak keeps it. */
	for (int i = 0; i < 5 && (low < 0 || tasks_low < 0) && !next_export(); i++) {
		w = job_sample("highwater_memory_peak_window_bytes");
		if (w >= 0 && w < (long long)(HELD + SPIKE / 2))
			low = w;
		after = job_sample("highwater_memory_peak_bytes");
		w = job_sample("highwater_tasks_peak_window");
		if (w >= 0 && w < TASKS)
			tasks_low = w;
		tasks_after = job_sample("highwater_tasks_peak");
	}
	tap_ok(low >= (long long)HELD && cumulative >= (long long)(HELD + SPIKE) &&
	       after >= cumulative,
	       "a later window without the spike: %lld bytes (at least the %llu still held); memory.peak since the cgroup was made still %lld",
	       low, HELD, after);
	tap_ok(tasks_low == 1 && tasks_after == TASKS + 1,
	       "a later tasks window without it: %lld (the worker); pids.peak since the cgroup was made still %lld",
	       tasks_low, tasks_after);

	/* A removed cgroup: its window gone from the file, its descriptor closed. */
	fds = peak_fds(daemon, "/memory.peak");
	pids_fds = peak_fds(daemon, "/pids.peak");
	kill(work, SIGKILL);
	waitpid(work, NULL, 0);
	remove_cgroup(JOB);
	next_export();
	next_export();
	tap_ok(fds == 2 && peak_fds(daemon, "/memory.peak") == 1 &&
	       pids_fds == 2 && peak_fds(daemon, "/pids.peak") == 1 &&
	       job_sample("highwater_memory_peak_window_bytes") < 0 &&
	       job_sample("highwater_tasks_peak_window") < 0 &&
	       strstr(metrics, "highwater_memory_peak_window_bytes{cgroup=\"/highwater-test-window\"") &&
	       strstr(metrics, "highwater_tasks_peak_window{cgroup=\"/highwater-test-window\""),
	       "a removed cgroup: its descriptors closed (memory.peak %d, then %d; pids.peak %d, then %d), its samples gone, its parent's windows still there",
	       fds, peak_fds(daemon, "/memory.peak"), pids_fds, peak_fds(daemon, "/pids.peak"));

	/* Right after an export's rename, or within one: it ends after it. */
	kill(daemon, SIGTERM);
	waitpid(daemon, &status, 0);
	d = opendir(TEXTFILES);
	left = 0;
	while (d && (de = readdir(d)))
		left += !strncmp(de->d_name, ".highwater.prom.", 16);
	if (d)
		closedir(d);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && !left && !access(PROM, R_OK),
	       "SIGTERM ends the daemon between exports: exit 0 (status 0x%x), the file there, none left aside (%d)",
	       status, left);

	status = spawn_capture((char *[]){ (char *)built("highwater"), "export", "--interval", "1",
					   "highwater-test-window", NULL },
			       out, sizeof(out), err, sizeof(err));
	w = WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_USAGE && strstr(err, "--textfile-dir");
	status = spawn_capture((char *[]){ (char *)built("highwater"), "export", "--interval", "0",
					   "--textfile-dir", TEXTFILES, NULL },
			       out, sizeof(out), err + strlen(err), sizeof(err) - strlen(err));
	tap_ok(w && WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_USAGE &&
	       strstr(err, "--interval takes seconds"),
	       "--interval without --textfile-dir, or of 0: usage errors that say what to give (%s)", err);

	unlink(PROM);
	rmdir(TEXTFILES);
	remove_cgroup(ROOT);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "-memory -pids");
	return tap_exit();
}
