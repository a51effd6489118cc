// SPDX-License-Identifier: GPL-2.0
/*
 * highwater run, end to end in the guest: every peak it reports for the
 * demo workload against the truth the workload prints, a daemon that
 * outlives its parent, exit statuses, --timeout and signals leaving nothing
 * behind, and the systemd output through systemd's own parser.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

static char out[65536], err[65536], report[65536];
static const char *report_path = "/tmp/highwater-run.json";

/* highwater run -f json -o REPORT_PATH ARGS... ; the parsed report in m */
static int hw_json_run(struct hw_marks *m, char *const cmd[])
{
	char *argv[32] = { (char *)built("highwater"), "run", "-f", "json", "-o",
			   (char *)report_path, "--" };
	char msg[200];
	int i = 7, status;

	for (int j = 0; cmd[j] && i < 31; j++)
		argv[i++] = cmd[j];
	argv[i] = NULL;
	status = spawn_capture(argv, out, sizeof(out), err, sizeof(err));
	if (hw_read_file(report_path, report, sizeof(report)) < 0 ||
	    hw_json_read(report, m, msg, sizeof(msg))) {
		tap_diag("no report: %s", err);
		hw_marks_init(m);
	}
	return status;
}

/* No highwater-* cgroup left under the cgroup2 root. */
static int no_cgroup_left(void)
{
	DIR *d = opendir("/sys/fs/cgroup");
	struct dirent *de;
	int left = 0;

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, "highwater-", 10)) {
			tap_diag("left behind: /sys/fs/cgroup/%s", de->d_name);
			left++;
		}
	if (d)
		closedir(d);
	return !left;
}

/* No process whose command line starts with @prefix. */
static int no_process_left(const char *prefix)
{
	return !processes_named(prefix, 1);
}

static int has_device(const struct hw_marks *m, char type, unsigned int major,
		      unsigned int minor, unsigned int access)
{
	for (int i = 0; i < m->ndevices; i++)
		if (m->devices[i].type == type && m->devices[i].major == major &&
		    m->devices[i].minor == minor && m->devices[i].access == access)
			return 1;
	return 0;
}

#define PEAK(m, key) ((long long)(m).lim[hw_limit_index(key)].peak)

static void demo(void)
{
	struct hw_marks m;
	int status = hw_json_run(&m, (char *[]){ (char *)built("workloads/demo"), NULL });
	long long nofile = key_value(out, "nofile"), tasks = key_value(out, "tasks");

	tap_ok(status == 0 && m.exit_status == 0 && nofile > 0,
	       "demo: ran, exit status 0 (status %#x; %s)", status, err);
	tap_diag("truth: %s", strstr(out, "truth") ? strstr(out, "truth") : "-");
	tap_ok(PEAK(m, "nofile") == nofile,
	       "demo: open files peak %lld = the truth %lld", PEAK(m, "nofile"), nofile);
	tap_ok(m.have_pids_peak && (long long)m.pids_peak == tasks,
	       "demo: pids.peak %llu = the truth %lld", (unsigned long long)m.pids_peak, tasks);
	tap_ok(m.have_memory_peak && (long long)m.memory_peak >= key_value(out, "memory_min") &&
	       m.memory_peak < 2ULL * key_value(out, "memory_min"),
	       "demo: memory.peak %llu within [%lld, twice that)",
	       (unsigned long long)m.memory_peak, key_value(out, "memory_min"));
	tap_ok(PEAK(m, "stack") >= key_value(out, "stack_min") &&
	       PEAK(m, "stack") < key_value(out, "stack_min") + (256 << 10),
	       "demo: stack peak %lld within 256K above %lld", PEAK(m, "stack"),
	       key_value(out, "stack_min"));
	tap_ok(PEAK(m, "fsize") == key_value(out, "fsize"),
	       "demo: file size peak %lld = the truth %lld", PEAK(m, "fsize"),
	       key_value(out, "fsize"));
	tap_ok(PEAK(m, "memlock") == key_value(out, "memlock"),
	       "demo: locked memory peak %lld = the truth %lld", PEAK(m, "memlock"),
	       key_value(out, "memlock"));
	tap_ok(PEAK(m, "msgqueue") >= key_value(out, "msgqueue_min") &&
	       PEAK(m, "msgqueue") <= key_value(out, "msgqueue_min") + 1024,
	       "demo: msgqueue peak %lld: the queue's %lld bytes plus its bookkeeping",
	       PEAK(m, "msgqueue"), key_value(out, "msgqueue_min"));
	tap_ok(PEAK(m, "nice") == key_value(out, "nice"),
	       "demo: nice peak %lld = the truth %lld", PEAK(m, "nice"), key_value(out, "nice"));
	tap_ok(m.have_cap_used && m.cap_used == (1ULL << 10 | 1ULL << 23),
	       "demo: capabilities used are exactly NET_BIND_SERVICE and SYS_NICE (%#llx)",
	       (unsigned long long)m.cap_used);
	tap_ok(m.have_devices && m.ndevices == 2 &&
	       has_device(&m, 'c', 1, 3, HW_ACC_READ | HW_ACC_WRITE) &&
	       has_device(&m, 'c', 1, 5, HW_ACC_READ),
	       "demo: devices accessed are exactly c 1:3 rw and c 1:5 r");
	tap_ok(m.nnotes == 0, "demo: no mark unavailable on the patched kernel (%s)",
	       m.nnotes ? m.notes[0] : "none");
	tap_ok(no_cgroup_left(), "demo: the cgroup is removed");
}

static void daemon_outlives_parent(void)
{
	struct hw_marks m;
	int status = hw_json_run(&m, (char *[]){ (char *)built("workloads/daemon"), NULL });
	long long truth = key_value(out, "nofile");

	tap_ok(status == 0 && truth > 0 && m.seconds >= 0.3,
	       "daemon: highwater waited for the daemon (%.2f s, truth %lld)", m.seconds, truth);
	tap_ok(PEAK(m, "nofile") == truth,
	       "daemon: its open files peak %lld is in the report (truth %lld)",
	       PEAK(m, "nofile"), truth);
	tap_ok(m.pids_peak >= 2, "daemon: pids.peak %llu counts it",
	       (unsigned long long)m.pids_peak);
}

static void exit_statuses(void)
{
	struct hw_marks m;
	int status;

	status = hw_json_run(&m, (char *[]){ "sh", "-c", "exit 7", NULL });
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 7 && m.exit_status == 7,
	       "exit status 7 passed through");
	status = hw_json_run(&m, (char *[]){ "sh", "-c", "kill -9 $$", NULL });
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 128 + 9,
	       "killed by signal 9: 137");
	status = spawn_capture((char *[]){ (char *)built("highwater"), "run", "--",
					   "/nonexistent/cmd", NULL },
			       out, sizeof(out), err, sizeof(err));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
	       strstr(err, "cannot run '/nonexistent/cmd': No such file or directory"),
	       "a command not found: 127 and why");
	close(open("/tmp/highwater-noexec", O_CREAT | O_WRONLY, 0644));
	status = spawn_capture((char *[]){ (char *)built("highwater"), "run", "--",
					   "/tmp/highwater-noexec", NULL },
			       out, sizeof(out), err, sizeof(err));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 126 &&
	       strstr(err, "Permission denied"), "a file that cannot run: 126 and why (%s)", err);
	unlink("/tmp/highwater-noexec");
	tap_ok(no_cgroup_left(), "no cgroup left after failed commands");
}

static void timeout_kills_everything(void)
{
	struct hw_marks m;
	struct timespec t0, t1;
	int status;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	status = spawn_capture((char *[]){ (char *)built("highwater"), "run", "-t", "1",
					   "-f", "json", "-o", (char *)report_path, "--",
					   "sh", "-c", "sleep 1001 & (sleep 1001 &) ; sleep 1001",
					   NULL }, out, sizeof(out), err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	hw_read_file(report_path, report, sizeof(report));
	hw_json_read(report, &m, err, sizeof(err));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 124 && m.timed_out,
	       "--timeout 1: status 124, the report says so");
	tap_ok(t1.tv_sec - t0.tv_sec < 10, "--timeout 1: over in %ld s",
	       (long)(t1.tv_sec - t0.tv_sec));
	tap_ok(no_process_left("sleep 1001") && no_cgroup_left(),
	       "--timeout: no process and no cgroup left behind");
}

static void signal_forwarded(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(built("highwater"), "highwater", "run", "--", "sleep", "1002",
		      (char *)NULL);
		_exit(99);
	}
	/* once the command runs: then the signal must reach it */
	for (int i = 0; i < 500 && !processes_named("sleep 1002", 0); i++)
		usleep(20000);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM &&
	       no_process_left("sleep 1002") && no_cgroup_left(),
	       "SIGTERM to highwater reaches the command (status %#x), nothing left", status);
}

/* highwater show PID: a live process holding a spike of descriptors */
static void show_process(void)
{
	int nofile = 0, status;
	bool read_ok, named = false, moved;
	struct hw_marks m;
	char pidstr[16], msg[200], cgroup[4096] = "(unreadable)", want[4200];
	pid_t pid;

	/* in a cgroup of its own, so that the name show gives is not the root's */
	mkdir("/sys/fs/cgroup/highwater-test-show", 0755);
	pid = fork_fd_holder("/sys/fs/cgroup/highwater-test-show/cgroup.procs", &nofile);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	moved = !hw_cgroup_of(pid, cgroup, sizeof(cgroup)) &&
		!strcmp(cgroup, "/highwater-test-show");
	snprintf(want, sizeof(want), "highwater cgroup %s", cgroup);
	status = spawn_capture((char *[]){ (char *)built("highwater"), "show", "-f", "json",
					   pidstr, NULL }, out, sizeof(out), err, sizeof(err));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rmdir("/sys/fs/cgroup/highwater-test-show");
	read_ok = status == 0 && hw_json_read(out, &m, msg, sizeof(msg)) == 0;
	tap_ok(read_ok && PEAK(m, "nofile") == nofile && m.exit_status == -1 && m.vm_hwm > 0,
	       "show PID: open files peak %lld = the truth %d, VmHWM %llu",
	       PEAK(m, "nofile"), nofile, (unsigned long long)m.vm_hwm);
	for (int i = 0; read_ok && i < m.nnotes; i++) {
		const char *at = strstr(m.notes[i], want);

		named |= at && !strcmp(at, want);
	}
	tap_ok(named && moved,
	       "show PID names the process's cgroup for its cgroup marks: '%s'", want);
}

/*
 * highwater cgroup PATH and unit NAME: a cgroup the demo ran in, after its
 * processes exited, reaped by this test (outside the cgroup), not by
 * highwater.  The cgroup kept their marks (rlimits.peak, capabilities.used):
 * the report has the demo's exact values and says they are of processes that
 * exited.
 */
static void show_cgroup(void)
{
	const char *cg = "/sys/fs/cgroup/highwater-test.service";
	static char text[16384], truth[4096];
	struct hw_marks m;
	char msg[200];
	int status;

	write_file("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory");
	mkdir(cg, 0755);
	spawn_capture((char *[]){ "sh", "-c", "echo $$ > /sys/fs/cgroup/highwater-test.service/cgroup.procs && exec \"$0\"",
				  (char *)built("workloads/demo"), NULL },
		      truth, sizeof(truth), err, sizeof(err));
	status = spawn_capture((char *[]){ (char *)built("highwater"), "cgroup", "-f", "json",
					   "highwater-test.service", NULL },
			       out, sizeof(out), err, sizeof(err));
	/* Read before tap_ok: its arguments are evaluated in no set order. */
	if (status || hw_json_read(out, &m, msg, sizeof(msg)))
		hw_marks_init(&m);
	tap_ok(status == 0 && m.pids_peak == 9 && m.memory_peak >= 32 << 20 && m.ndevices == 2 &&
	       has_device(&m, 'c', 1, 5, HW_ACC_READ) && m.processes == 0,
	       "cgroup PATH: pids.peak %llu, memory.peak %llu, %d devices of the demo it ran",
	       (unsigned long long)m.pids_peak, (unsigned long long)m.memory_peak, m.ndevices);
	tap_ok(m.have_cgroup_marks && key_value(truth, "nofile") > 0 &&
	       PEAK(m, "nofile") == key_value(truth, "nofile") &&
	       PEAK(m, "fsize") == key_value(truth, "fsize") &&
	       PEAK(m, "memlock") == key_value(truth, "memlock") &&
	       PEAK(m, "nice") == key_value(truth, "nice") &&
	       m.lim[hw_limit_index("nofile")].exited,
	       "cgroup PATH: the exited demo's nofile %lld, fsize %lld, memlock %lld, nice %lld are the truth, from the cgroup",
	       PEAK(m, "nofile"), PEAK(m, "fsize"), PEAK(m, "memlock"), PEAK(m, "nice"));
	tap_ok(m.have_cap_used && m.cap_used == (1ULL << 10 | 1ULL << 23) &&
	       m.cap_used_exited == m.cap_used,
	       "cgroup PATH: capabilities used by the exited demo are exactly NET_BIND_SERVICE and SYS_NICE (%#llx)",
	       (unsigned long long)m.cap_used);
	status = spawn_capture((char *[]){ (char *)built("highwater"), "unit", "highwater-test", NULL },
			       text, sizeof(text), err, sizeof(err));
	tap_ok(status == 0 && strstr(text, "highwater-test.service") &&
	       strstr(text, "have exited (kept by the cgroup)") &&
	       !strstr(text, "no process is left"),
	       "unit NAME without systemd: found in the cgroup tree, reported as cgroup PATH with the exited processes' marks (%s)", err);
	status = spawn_capture((char *[]){ (char *)built("highwater"), "unit", "-f", "systemd",
					   "highwater-test", NULL },
			       text, sizeof(text), err, sizeof(err));
	tap_ok(status == 0 && strstr(text, "LimitNOFILE=") &&
	       strstr(text, "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_SYS_NICE"),
	       "unit NAME -f systemd: limits and the bounding set of processes that have all exited");
	remove_cgroup(cg);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "-memory -pids");
}

/*
 * limits_peak is readable only by whoever may ptrace the process: nobody
 * reading a cgroup with a root process in it gets no marks of it, and a note
 * that says so and what to do, not a report that silently lacks them.
 */
static void cgroup_unreadable_process(void)
{
	const char *cg = "/sys/fs/cgroup/highwater-test-denied";
	struct hw_marks m;
	int nofile = 0, status;
	char msg[200];
	pid_t pid;

	mkdir(cg, 0755);
	pid = fork_fd_holder("/sys/fs/cgroup/highwater-test-denied/cgroup.procs", &nofile);
	status = spawn_capture((char *[]){ "setpriv", "--reuid=65534", "--regid=65534",
					   "--clear-groups", (char *)built("highwater"), "cgroup",
					   "-f", "json", (char *)cg, NULL },
			       out, sizeof(out), err, sizeof(err));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rmdir(cg);
	if (status || hw_json_read(out, &m, msg, sizeof(msg)))
		hw_marks_init(&m);
	tap_ok(status == 0 && m.processes == 0 &&
	       hw_has_note(&m, "1 process of the cgroup could not be read (permission denied)"),
	       "cgroup PATH as nobody, a root process inside: no marks read, a note says why (%s)",
	       err);
}

/*
 * highwater run as a user, in a cgroup delegated to it (as systemd delegates
 * a user's slice), of a set-group-ID program: only root may read the
 * program's marks, so run takes them from the workload's cgroup, which kept
 * them (rlimits.peak, capabilities.used), and says so.  They must be those
 * a root run, which reads the program itself, reports.  unix_chkpwd (PAM's
 * helper, set-group-ID shadow) run with no arguments refuses the same way
 * for both and keeps its group to the end; a set-user-ID mount did not: in
 * a whole suite it gave up its privileges before it exited, and its zombie
 * became readable.
 */
static void run_setgid_as_user(void)
{
	const char *cg = "/sys/fs/cgroup/highwater-test-deleg";
	const char *prog = access("/usr/sbin/unix_chkpwd", X_OK) ? "/sbin/unix_chkpwd" :
			   "/usr/sbin/unix_chkpwd";
	static const char *const owned[] = { "", "/cgroup.procs", "/cgroup.subtree_control",
					     "/cgroup.threads", "/client", "/client/cgroup.procs" };
	struct hw_marks root, user;
	char path[512], msg[200];
	struct stat st;
	int status;

	if (stat(prog, &st) || st.st_gid == 65534 || !(st.st_mode & S_ISGID)) {
		tap_ok(1, "# SKIP %s is not set-group-ID here", prog);
		tap_ok(1, "# SKIP %s is not set-group-ID here", prog);
		return;
	}
	mkdir(cg, 0755);
	snprintf(path, sizeof(path), "%s/client", cg);
	mkdir(path, 0755);
	for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", cg, owned[i]);
		if (chown(path, 65534, 65534))
			tap_diag("chown %s: %s", path, strerror(errno));
	}
	status = hw_json_run(&root, (char *[]){ (char *)prog, NULL });
	tap_ok(WIFEXITED(status) && root.exit_status == WEXITSTATUS(status) &&
	       root.processes == 1 && PEAK(root, "nofile") > 0,
	       "run as root of %s: its marks read (open files peak %lld, status %d)",
	       prog, PEAK(root, "nofile"), root.exit_status);
	/* The user's highwater starts in client/, its workload's cgroup beside it. */
	unlink("/tmp/highwater-run-user.json");
	snprintf(path, sizeof(path), "echo $$ > %s/client/cgroup.procs && exec setpriv"
		 " --reuid=65534 --regid=65534 --clear-groups %s run -p /highwater-test-deleg"
		 " -f json -o /tmp/highwater-run-user.json -- %s", cg, built("highwater"), prog);
	status = spawn_capture((char *[]){ "sh", "-c", path, NULL }, out, sizeof(out),
			       err, sizeof(err));
	if (hw_read_file("/tmp/highwater-run-user.json", report, sizeof(report)) < 0 ||
	    hw_json_read(report, &user, msg, sizeof(msg))) {
		tap_diag("no report: %s", err);
		hw_marks_init(&user);
	}
	for (int i = 0; i < user.nnotes; i++)
		tap_diag("note: %s", user.notes[i]);
	/*
	 * The user holds no capability, so uses none.  Root's run may: under a
	 * kernel with audit (Debian's), unix_chkpwd's audit record is a use of
	 * CAP_AUDIT_WRITE that the user's is refused.
	 */
	tap_ok(WIFEXITED(status) && user.exit_status == root.exit_status &&
	       user.processes == 0 && PEAK(user, "nofile") == PEAK(root, "nofile") &&
	       user.cap_used == 0 &&
	       hw_has_note(&user, "1 process of the workload could not be read (permission denied); the cgroup kept"),
	       "run as a user of set-group-ID %s: its marks from the cgroup (open files %lld as root's run, capabilities %#llx: none, root's %#llx), said so",
	       prog, PEAK(user, "nofile"), (unsigned long long)user.cap_used,
	       (unsigned long long)root.cap_used);
	unlink("/tmp/highwater-run-user.json");
	snprintf(path, sizeof(path), "%s/client", cg);
	remove_cgroup(path);
	remove_cgroup(cg);
}

/* systemd-analyze verify on a unit made of the systemd output */
static int verify_unit(const char *dropin, char *complaints, size_t size)
{
	const char *unit = "/tmp/highwater-verify.service";
	FILE *f = fopen(unit, "w");
	int status;

	fprintf(f, "[Unit]\nDescription=highwater output check\n[Service]\nExecStart=/bin/true\n%s", dropin);
	fclose(f);
	status = spawn_capture((char *[]){ "systemd-analyze", "verify", "--man=no",
					   (char *)unit, NULL },
			       out, sizeof(out), complaints, size);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(complaints, unit);
}

static void systemd_accepts(void)
{
	char dropin[16384], complaints[8192];
	int status;

	if (access("/usr/bin/systemd-analyze", X_OK)) {
		tap_ok(1, "# SKIP systemd-analyze is not installed");
		tap_ok(1, "# SKIP systemd-analyze is not installed");
		return;
	}
	tap_ok(!verify_unit("LimitBOGUS=3\n", complaints, sizeof(complaints)),
	       "systemd-analyze verify refuses a bad key (the check can fail)");
	status = spawn_capture((char *[]){ (char *)built("highwater"), "run", "-f", "systemd",
					   "-o", "/tmp/highwater-dropin.conf", "--",
					   (char *)built("workloads/demo"), "-q", NULL },
			       out, sizeof(out), err, sizeof(err));
	if (hw_read_file("/tmp/highwater-dropin.conf", dropin, sizeof(dropin)) < 0)
		dropin[0] = '\0';
	tap_ok(status == 0 && strstr(dropin, "LimitNOFILE=") &&
	       verify_unit(dropin, complaints, sizeof(complaints)),
	       "systemd-analyze verify accepts the drop-in%s%s",
	       complaints[0] ? ": " : "", complaints);
}

/*
 * Shared memory is not page cache: a workload that leaves 24 MiB in a tmpfs
 * file (PostgreSQL's shared buffers are the same memory) gets no MemoryHigh=
 * below it.  memory.stat's "file" counts it, and a MemoryHigh= taken from
 * "file" left postgresql@15-main throttled at its start.
 */
static void shmem_is_not_cache(void)
{
	struct hw_marks m;
	struct hw_memory_advice a;
	int status;

	status = hw_json_run(&m, (char *[]){ "sh", "-c",
		"head -c 25165824 /dev/zero >/dev/shm/highwater-shmem", NULL });
	unlink("/dev/shm/highwater-shmem");
	a = hw_memory_advice(&m, 25);
	tap_ok(status == 0 && m.have_memory_file && m.memory_file < 4 << 20 &&
	       (a.high == 0 || a.high >= 24 << 20),
	       "shared memory is not cache: page cache %llu, MemoryHigh %llu (0: none), memory.peak %llu",
	       (unsigned long long)m.memory_file, (unsigned long long)a.high,
	       (unsigned long long)m.memory_peak);
}

int main(void)
{
	tap_plan(38);
	demo();
	daemon_outlives_parent();
	exit_statuses();
	timeout_kills_everything();
	signal_forwarded();
	show_process();
	show_cgroup();
	cgroup_unreadable_process();
	run_setgid_as_user();
	systemd_accepts();
	shmem_is_not_cache();
	unlink(report_path);
	return tap_exit();
}
