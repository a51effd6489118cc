// SPDX-License-Identifier: GPL-2.0
/*
 * ops: one microbenchmark per path the series hooks, run inside the guest.
 *
 *   ops [-v] [NAME...]
 *
 * Under QEMU's -icount shift=0,sleep=off the guest clock advances one
 * nanosecond per guest instruction, so the CLOCK_MONOTONIC time of a loop,
 * divided by its iterations, is the instructions per operation, the same
 * from run to run.  Each line: "NAME INSTRUCTIONS_PER_OP".  Each benchmark
 * runs a tenth of its iterations to warm up (first-touch costs, caches of
 * the kernel), then the rest in ROUNDS rounds, of which the median counts
 * (-v prints every round to stderr); an operation that fails ends the
 * program with status 1.
 *
 * Operations run SCHED_FIFO at priority 1, so that the scheduler decides the
 * same way in every round: after a fork or a thread's creation the parent
 * runs until it waits, then the child.  Under SCHED_OTHER, EEVDF lets the
 * child preempt the parent or not by the history of the run queue's virtual
 * time, and fork's rounds fell on levels 1.5% apart in proportions that
 * changed from boot to boot.  The caller gives RCU's grace-period kthread a
 * higher priority (rcutree.kthread_prio=2), so that grace periods still end
 * and their callbacks (which free the child's task, a VMA, a file) still run
 * inside the round.  The two operations that measure a SCHED_OTHER task's own
 * path (setpriority lowering its nice value, sched_setscheduler from
 * SCHED_OTHER) run SCHED_OTHER.
 *
 * Runs as root, in a non-root cgroup v2 (the caller moves it there) so that
 * the device check has a cgroup to record into.  Programs it runs come from
 * $OPS_BIN (static builds of true, highwater and workloads/demo).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 5
#define MAX_ROUNDS 200
#define DIE(what) do { fprintf(stderr, "ops: %s: %s\n", what, strerror(errno)); exit(1); } while (0)

static char tmpfile_path[] = "/tmp/ops.XXXXXX";
static int tmp_fd = -1;

static void op_open_close(void)
{
	int fd = open(tmpfile_path, O_RDONLY);

	if (fd < 0)
		DIE("open");
	close(fd);
}

static void op_dup2_high(void)
{
	if (dup2(0, 900) != 900)
		DIE("dup2");
	close(900);
}

static void op_pipe(void)
{
	int p[2];

	if (pipe(p))
		DIE("pipe");
	close(p[0]);
	close(p[1]);
}

static void op_socket(void)
{
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (s < 0)
		DIE("socket");
	close(s);
}

static void op_fork_wait(void)
{
	pid_t pid = fork();

	if (pid < 0)
		DIE("fork");
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
}

/*
 * The child raises its open-files mark (a descriptor at 900) and exits:
 * exit folds the marks it raised into its cgroup and every ancestor but
 * the root (rlimits.peak), and the walk up stops at the first level that
 * holds the value already.
 */
static void op_fork_exit_fold(void)
{
	pid_t pid = fork();

	if (pid < 0)
		DIE("fork");
	if (pid == 0) {
		if (dup2(0, 900) != 900)
			_exit(1);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

/*
 * As op_fork_exit_fold, but each child raises its file-size mark above every
 * child's before it (ftruncate of the temporary file, one page longer each
 * time): a fold that raises every level above, the worst case of a fold at
 * exit into all the ancestors.
 */
static void op_fork_exit_new_max(void)
{
	static off_t size;
	pid_t pid;

	size += 4096;
	pid = fork();
	if (pid < 0)
		DIE("fork");
	if (pid == 0)
		_exit(ftruncate(tmp_fd, size) ? 1 : 0);
	waitpid(pid, NULL, 0);
}

/* A read of the row's cgroup's rlimits.peak (enter_cgroup opens it). */
static int peak_fd = -1;

static void op_read_rlimits_peak(void)
{
	char buf[4096];

	if (pread(peak_fd, buf, sizeof(buf), 0) <= 0)
		DIE("read of rlimits.peak");
}

static void *thread_fn(void *arg)
{
	return arg;
}

static void op_thread(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, thread_fn, NULL))
		DIE("pthread_create");
	pthread_join(t, NULL);
}

static void op_mmap_munmap(void)
{
	void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		DIE("mmap");
	munmap(p, 65536);
}

static void op_brk(void)
{
	if (sbrk(65536) == (void *)-1)
		DIE("sbrk");
	sbrk(-65536);
}

static char lock_page[4096] __attribute__((aligned(4096)));

static void op_mlock(void)
{
	if (mlock(lock_page, sizeof(lock_page)))
		DIE("mlock");
	munlock(lock_page, sizeof(lock_page));
}

static void op_write_extend(void)
{
	static off_t size;

	if (write(tmp_fd, "x", 1) != 1)
		DIE("write");
	if (++size == 4096) {	/* keep the file small: truncate now and then */
		ftruncate(tmp_fd, 0);
		lseek(tmp_fd, 0, SEEK_SET);
		size = 0;
	}
}

static void op_ftruncate(void)
{
	if (ftruncate(tmp_fd, 8192))
		DIE("ftruncate");
	ftruncate(tmp_fd, 0);
}

/* Raising priority asks capable(CAP_SYS_NICE), which root passes. */
static void op_setpriority(void)
{
	if (setpriority(PRIO_PROCESS, 0, -1))
		DIE("setpriority -1");
	setpriority(PRIO_PROCESS, 0, 0);
}

static void op_open_dev_null(void)
{
	int fd = open("/dev/null", O_RDONLY);

	if (fd < 0)
		DIE("open /dev/null");
	close(fd);
}

static void op_sigqueue(void)
{
	union sigval v = { 0 };
	siginfo_t si;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN);
	if (sigqueue(getpid(), SIGRTMIN, v))
		DIE("sigqueue");
	if (sigwaitinfo(&set, &si) != SIGRTMIN)
		DIE("sigwaitinfo");
}

static void op_mq(void)
{
	struct mq_attr attr = { .mq_maxmsg = 4, .mq_msgsize = 64 };
	mqd_t q = mq_open("/ops-bench", O_CREAT | O_RDWR, 0600, &attr);

	if (q == (mqd_t)-1)
		DIE("mq_open");
	mq_close(q);
	mq_unlink("/ops-bench");
}

static void op_sched_setscheduler(void)
{
	struct sched_param fifo = { .sched_priority = 1 }, other = { 0 };

	if (sched_setscheduler(0, SCHED_FIFO, &fifo))
		DIE("sched_setscheduler FIFO");
	sched_setscheduler(0, SCHED_OTHER, &other);
}

static int __attribute__((noinline)) recurse(int depth)
{
	volatile char frame[1024];

	frame[0] = depth;
	return depth ? recurse(depth - 1) + frame[0] : 0;
}

/* A fresh process grows its main stack by 256 KiB, a page fault at a time. */
static void op_stack_growth(void)
{
	pid_t pid = fork();

	if (pid < 0)
		DIE("fork");
	if (pid == 0) {
		recurse(256);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

static void run_quiet(char *const argv[])
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		DIE("fork");
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || status) {
		errno = ECHILD;
		DIE(argv[0]);
	}
}

/*
 * Programs run from tmpfs, static, so that no exec waits for the 9p host
 * file system (under -icount an idle vCPU warps the clock to its next
 * timer): $OPS_BIN holds true, highwater and demo, copied to /tmp/ops-bin.
 */
static char bin_true[] = "/tmp/ops-bin/true", bin_hw[] = "/tmp/ops-bin/highwater",
	    bin_demo[] = "/tmp/ops-bin/demo";

static void copy_programs(void)
{
	const char *from = getenv("OPS_BIN");
	const char *names[] = { "true", "highwater", "demo" };
	char src[4096], dst[4096], buf[65536];

	if (!from)
		return;
	mkdir("/tmp/ops-bin", 0755);
	for (int i = 0; i < 3; i++) {
		int in, out;
		ssize_t n;

		snprintf(src, sizeof(src), "%s/%s", from, names[i]);
		snprintf(dst, sizeof(dst), "/tmp/ops-bin/%s", names[i]);
		in = open(src, O_RDONLY);
		out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
		if (in < 0 || out < 0)
			DIE(src);
		while ((n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, n) != n)
				DIE(dst);
		close(in);
		close(out);
	}
}

static void op_exec_true(void)
{
	run_quiet((char *[]){ bin_true, NULL });
}

/* highwater run -- true: what profiling a trivial program adds */
static void op_highwater_true(void)
{
	run_quiet((char *[]){ bin_hw, "run", "-p", "/", "--", bin_true, NULL });
}

/* The whole-program workload: workloads/demo touches every hooked path. */
static void op_demo(void)
{
	run_quiet((char *[]){ bin_demo, "-q", NULL });
}

/*
 * Rows that run in a cgroup of their own, made for them and removed after:
 * @depth levels below the root (each level one "ops-N" directory; only
 * the first has the pids and memory controllers the root's
 * subtree_control gives), and with @devices devices recorded in
 * devices.accessed before the row, /dev/null the last of them, so that a
 * lookup of /dev/null walks @devices entries.  The others are character
 * devices of major 240 (local use, no driver here): opening one fails
 * with ENXIO after the device check has recorded it.
 */
static char home_cgroup[512];

static void write_str(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		DIE(path);
	close(fd);
}

/* false: the row's cgroup has no rlimits.peak to read (no series) */
static bool enter_cgroup(const char *name, int depth, int devices, int children)
{
	char dir[4096] = "/sys/fs/cgroup", path[4200], pid[16];
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f || !fgets(home_cgroup, sizeof(home_cgroup), f) ||
	    strncmp(home_cgroup, "0::", 3))
		DIE("/proc/self/cgroup (cgroup v2 only)");
	fclose(f);
	home_cgroup[strcspn(home_cgroup, "\n")] = '\0';
	for (int l = 1; l <= depth; l++) {
		size_t n = strlen(dir);

		snprintf(dir + n, sizeof(dir) - n, "/ops-%s-%d", name, l);
		if (mkdir(dir, 0755))
			DIE(dir);
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	write_str(path, pid);
	for (int d = 0; d < devices - 1; d++) {
		snprintf(path, sizeof(path), "/dev/ops-bench-%d", d);
		unlink(path);
		if (mknod(path, S_IFCHR | 0600, makedev(240, d)))
			DIE(path);
		if (open(path, O_RDONLY) >= 0 || errno != ENXIO)
			DIE("open of a device with no driver did not fail with ENXIO");
		unlink(path);
	}
	if (devices)
		op_open_dev_null();
	for (int c = 0; c < children; c++) {
		snprintf(path, sizeof(path), "%s/child-%d", dir, c);
		if (mkdir(path, 0755))
			DIE(path);
	}
	if (children) {
		snprintf(path, sizeof(path), "%s/rlimits.peak", dir);
		peak_fd = open(path, O_RDONLY);
		if (peak_fd < 0 && errno == ENOENT)
			return false;
		if (peak_fd < 0)
			DIE(path);
	}
	return true;
}

static void leave_cgroup(const char *name, int depth, int children)
{
	char dir[4096], pid[16];

	if (peak_fd >= 0)
		close(peak_fd);
	peak_fd = -1;
	for (int c = 0; c < children; c++) {
		size_t n = snprintf(dir, sizeof(dir), "/sys/fs/cgroup");

		for (int k = 1; k <= depth; k++)
			n += snprintf(dir + n, sizeof(dir) - n, "/ops-%s-%d", name, k);
		snprintf(dir + n, sizeof(dir) - n, "/child-%d", c);
		if (rmdir(dir))
			DIE(dir);
	}

	snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s/cgroup.procs", home_cgroup + 3);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	write_str(dir, pid);
	for (int l = depth; l >= 1; l--) {
		size_t n = 0;

		n += snprintf(dir, sizeof(dir), "/sys/fs/cgroup");
		for (int k = 1; k <= l; k++)
			n += snprintf(dir + n, sizeof(dir) - n, "/ops-%s-%d", name, k);
		for (int tries = 0; rmdir(dir); tries++)	/* EBUSY until reaped children go */
			if (errno != EBUSY || tries == 1000)
				DIE(dir);
			else
				usleep(1000);
	}
}

static const struct {
	const char *name;
	void (*fn)(void);
	long iterations;
	int rounds;	/* default ROUNDS; more where deferred work is lumpy */
	bool fair;	/* runs SCHED_OTHER: it measures that policy's path */
	int depth;	/* > 0: in a cgroup of its own, this deep */
	int devices;	/* devices recorded in it before the row */
	int children;	/* empty child cgroups made in it */
} ops[] = {
	{ "open_close", op_open_close, 20000, 10, false, 0, 0, 0 },
	{ "dup2_high", op_dup2_high, 20000, 0, false, 0, 0, 0 },
	{ "pipe", op_pipe, 20000, 0, false, 0, 0, 0 },
	{ "socket", op_socket, 20000, 10, false, 0, 0, 0 },
	{ "fork_wait", op_fork_wait, 4000, 40, false, 0, 0, 0 },
	{ "thread_create_join", op_thread, 20000, 200, false, 0, 0, 0 },
	{ "mmap_munmap", op_mmap_munmap, 20000, 0, false, 0, 0, 0 },
	{ "brk_grow_shrink", op_brk, 20000, 20, false, 0, 0, 0 },
	{ "mlock_munlock", op_mlock, 20000, 20, false, 0, 0, 0 },
	{ "write_extend", op_write_extend, 20000, 0, false, 0, 0, 0 },
	{ "ftruncate", op_ftruncate, 20000, 0, false, 0, 0, 0 },
	{ "setpriority_cap", op_setpriority, 20000, 0, true, 0, 0, 0 },
	{ "open_dev_null", op_open_dev_null, 20000, 20, false, 0, 0, 0 },
	{ "sigqueue", op_sigqueue, 20000, 0, false, 0, 0, 0 },
	{ "mq_open_unlink", op_mq, 5000, 0, false, 0, 0, 0 },
	{ "sched_setscheduler", op_sched_setscheduler, 20000, 0, true, 0, 0, 0 },
	{ "stack_growth_256k", op_stack_growth, 2000, 10, false, 0, 0, 0 },
	{ "demo_workload", op_demo, 10, 0, false, 0, 0, 0 },
	{ "exec_true", op_exec_true, 1000, 20, false, 0, 0, 0 },
	{ "highwater_run_true", op_highwater_true, 200, 10, false, 0, 0, 0 },
	/*
	 * Last: they make and remove cgroups of their own.  With the fold
	 * rows before it, open_dev_null cost 338 instructions more on the
	 * unpatched kernel (10 more on the patched one), in every boot alike:
	 * the rows that were there before run as they did.
	 */
	{ "fork_exit_fold_depth1", op_fork_exit_fold, 4000, 40, false, 1, 0, 0 },
	{ "fork_exit_fold_depth4", op_fork_exit_fold, 4000, 40, false, 4, 0, 0 },
	{ "fork_exit_fold_depth8", op_fork_exit_fold, 4000, 40, false, 8, 0, 0 },
	{ "open_dev_null_1_device", op_open_dev_null, 20000, 20, false, 2, 1, 0 },
	{ "open_dev_null_16_devices", op_open_dev_null, 20000, 20, false, 2, 16, 0 },
	{ "open_dev_null_64_devices", op_open_dev_null, 20000, 20, false, 2, 64, 0 },
	{ "fork_exit_new_max_depth8", op_fork_exit_new_max, 4000, 40, false, 8, 0, 0 },
	{ "read_rlimits_peak_64_children", op_read_rlimits_peak, 2000, 10, false, 1, 0, 64 },
};

/*
 * Return just after a timer tick: CLOCK_MONOTONIC_COARSE, read in the vDSO,
 * changes only at a tick.
 */
static void wait_for_tick(void)
{
	struct timespec c0, c1;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &c0);
	do
		clock_gettime(CLOCK_MONOTONIC_COARSE, &c1);
	while (c1.tv_nsec == c0.tv_nsec && c1.tv_sec == c0.tv_sec);
}

static void set_policy(int policy)
{
	struct sched_param param = { .sched_priority = policy == SCHED_FIFO };

	if (sched_setscheduler(0, policy, &param))
		DIE(policy == SCHED_FIFO ? "sched_setscheduler FIFO (run as root)" :
			"sched_setscheduler OTHER");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	double per_op[MAX_ROUNDS];
	bool verbose = argc > 1 && !strcmp(argv[1], "-v");
	sigset_t set;

	if (verbose) {
		argv++;
		argc--;
	}
	copy_programs();
	tmp_fd = mkstemp(tmpfile_path);
	if (tmp_fd < 0)
		DIE("mkstemp");
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN);
	sigprocmask(SIG_BLOCK, &set, NULL);

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		long long t0, t1;
		long n = ops[i].iterations;
		int rounds = ops[i].rounds ? ops[i].rounds : ROUNDS;
		bool wanted = argc < 2;

		for (int a = 1; a < argc; a++)
			wanted |= !strcmp(argv[a], ops[i].name);
		if (!wanted)
			continue;
		if (rounds > MAX_ROUNDS) {
			fprintf(stderr, "ops: %s: %d rounds, at most %d\n",
				ops[i].name, rounds, MAX_ROUNDS);
			return 1;
		}
		if (ops[i].depth && !enter_cgroup(ops[i].name, ops[i].depth,
						  ops[i].devices, ops[i].children)) {
			leave_cgroup(ops[i].name, ops[i].depth, ops[i].children);
			fprintf(stderr, "ops: %s: skipped, no rlimits.peak (a kernel without the series)\n",
				ops[i].name);
			continue;
		}
		set_policy(ops[i].fair ? SCHED_OTHER : SCHED_FIFO);
		for (long k = 0; k < n / 10 + 1; k++)
			ops[i].fn();
		/*
		 * Rounds (ROUNDS by default), each after the deferred work of
		 * the one before (RCU callbacks, kworkers) has finished (an idle
		 * vCPU costs no instructions), and each started just after a
		 * timer tick, so that the ticks, and the RCU grace periods they
		 * drive, fall at the same points of every round: then rounds
		 * repeat, and so do boots.  The figure is the median round.
		 * SCHED_OTHER work (kworkers) waits for the sleep between
		 * rounds, on every kernel alike.
		 */
		for (int r = 0; r < rounds; r++) {
			usleep(100000);
			wait_for_tick();
			t0 = now_ns();
			for (long k = 0; k < n / rounds; k++)
				ops[i].fn();
			t1 = now_ns();
			per_op[r] = (double)(t1 - t0) / (n / rounds);
			if (verbose)
				fprintf(stderr, "%s round %d %.1f\n", ops[i].name, r, per_op[r]);
		}
		set_policy(SCHED_OTHER);
		if (ops[i].depth)
			leave_cgroup(ops[i].name, ops[i].depth, ops[i].children);
		qsort(per_op, rounds, sizeof(per_op[0]), cmp_double);
		printf("%s %.1f\n", ops[i].name, per_op[(rounds - 1) / 2]);
		fflush(stdout);
	}
	close(tmp_fd);
	unlink(tmpfile_path);
	return 0;
}
