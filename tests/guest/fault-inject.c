// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection aimed at the series' recording paths.  The only allocation
 * the marks make is devices.accessed's table, with GFP_NOWAIT on the first
 * access a cgroup records; failslab and fail_page_alloc, limited to this
 * test's tasks (make-it-fail) and to allocations that cannot sleep, refuse it.
 * Every device access must still succeed, and devices.accessed must still be
 * exact: a refused GFP_NOWAIT allocation is a transient shortage, and the
 * kernel allocates the table again where it may sleep rather than widen the
 * record for the cgroup's lifetime.  Runs on a kernel with
 * CONFIG_FAILSLAB and CONFIG_FAIL_PAGE_ALLOC (kernel/config/debug.config);
 * elsewhere it skips.  vm/run fails the run on any report on the console.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "spawn.h"

#define DEBUGFS "/sys/kernel/debug"
#define CGROOT "/sys/fs/cgroup"
#define ROUNDS 50

static int set_attr(const char *injector, const char *attr, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), DEBUGFS "/%s/%s", injector, attr);
	if (write_file(path, val)) {
		tap_diag("cannot write %s to %s: %s", val, path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Aim @injector at every allocation that cannot sleep made by a task with
 * make-it-fail set, or turn it off.  verbose 0: a report per injected fault
 * would put stack traces on the console, which vm/run counts as a crash.
 */
static int aim(const char *injector, int on)
{
	return set_attr(injector, "verbose", "0") ||
	       set_attr(injector, "task-filter", "Y") ||
	       set_attr(injector, "ignore-gfp-wait", "Y") ||
	       set_attr(injector, "interval", "1") ||
	       set_attr(injector, "times", on ? "-1" : "0") ||
	       set_attr(injector, "probability", on ? "100" : "0");
}

/*
 * In a child in @cgroup, with faults injected into its allocations: open
 * /dev/null read-write and /dev/zero read-only, and use them.  The exit
 * status is 0 when every operation succeeded.
 */
static int accesses_under_faults(const char *cgroup)
{
	char path[256], pid[16], buf[16];
	int status, fd;
	pid_t child = fork();

	if (child < 0)
		return -1;
	if (child == 0) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
		snprintf(pid, sizeof(pid), "%d", getpid());
		if (write_file(path, pid) ||
		    write_file("/proc/self/make-it-fail", "1"))
			_exit(10);
		fd = open("/dev/null", O_RDWR);
		if (fd < 0 || write(fd, "x", 1) != 1)
			_exit(11);
		close(fd);
		fd = open("/dev/zero", O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof(buf)) != sizeof(buf))
			_exit(12);
		close(fd);
		write_file("/proc/self/make-it-fail", "0");
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
		return -1;
	if (WEXITSTATUS(status))
		tap_diag("the child failed at step %d", WEXITSTATUS(status));
	return WEXITSTATUS(status);
}

static int read_accessed(const char *cgroup, char *buf, size_t size)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/devices.accessed", cgroup);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* What the accesses of accesses_under_faults() must record, exactly. */
#define EXACT "c 1:3 rw\nc 1:5 r\n"

static int exact(const char *text)
{
	if (strcmp(text, EXACT))
		tap_diag("devices.accessed: %s", text);
	return !strcmp(text, EXACT);
}

static int make_cgroup(char *path, size_t size, const char *name)
{
	snprintf(path, size, CGROOT "/%s", name);
	remove_cgroup(path);
	return mkdir(path, 0755);
}

/*
 * ROUNDS fresh cgroups, each with accesses under @injector: every access
 * succeeds, every file is exact, every cgroup goes away.
 */
static int rounds_under(const char *injector)
{
	char cg[256], text[4096];
	int ok = !aim(injector, 1);

	for (int round = 0; ok && round < ROUNDS; round++)
		ok = !make_cgroup(cg, sizeof(cg), "hw-fault-round") &&
		     accesses_under_faults(cg) == 0 &&
		     !read_accessed(cg, text, sizeof(text)) && exact(text) &&
		     !remove_cgroup(cg);
	aim(injector, 0);
	return ok;
}

int main(void)
{
	char cg[256], text[4096];
	int ok;

	if (access(DEBUGFS "/failslab/probability", W_OK) ||
	    access(DEBUGFS "/fail_page_alloc/probability", W_OK)) {
		printf("# no failslab and fail_page_alloc in debugfs: skipped\n");
		return 4;
	}
	tap_plan(5);

	/*
	 * failslab: the table's GFP_NOWAIT kzalloc() fails; the kernel
	 * allocates it again where it may sleep, which the injector spares.
	 */
	ok = !aim("failslab", 1) && !make_cgroup(cg, sizeof(cg), "hw-failslab") &&
	     accesses_under_faults(cg) == 0;
	aim("failslab", 0);
	tap_ok(ok, "with failslab refusing the table, every access succeeds");
	ok = ok && !read_accessed(cg, text, sizeof(text));
	tap_ok(ok && exact(text),
	       "devices.accessed exact after the retry: c 1:3 rw, c 1:5 r");
	remove_cgroup(cg);

	/* Many cgroups, each refused: no crash, nothing left (kmemleak). */
	tap_ok(rounds_under("failslab"),
	       "%d cgroups under failslab: accesses succeed, exact", ROUNDS);
	/* fail_page_alloc: pages for the table's slab are refused. */
	tap_ok(rounds_under("fail_page_alloc"),
	       "%d cgroups under fail_page_alloc: accesses succeed, exact",
	       ROUNDS);

	/* Without faults, the same accesses give the same lines. */
	ok = !make_cgroup(cg, sizeof(cg), "hw-nofault") &&
	     accesses_under_faults(cg) == 0 &&
	     !read_accessed(cg, text, sizeof(text));
	tap_ok(ok && exact(text), "without faults: exactly c 1:3 rw, c 1:5 r");
	remove_cgroup(cg);
	return tap_exit();
}
