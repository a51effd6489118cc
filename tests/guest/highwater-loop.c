// SPDX-License-Identifier: GPL-2.0
/*
 * Close the loop: the limits highwater recommends for the demo workload,
 * applied to it (prlimit for rlimits, a cgroup with pids.max and memory.max,
 * setpriv for the capability bounding set), let it run to success; each
 * limit set just below the observed peak makes it fail at that step.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

#define CG "/sys/fs/cgroup/highwater-loop"

static char out[65536], err[65536];

struct limits {
	uint64_t nofile, memlock, msgqueue, nice, fsize;	/* rlimits */
	uint64_t tasks, memory;		/* pids.max, memory.max */
	char caps[256];			/* setpriv --bounding-set */
};

/* "LimitNOFILE=260", "MemoryMax=41M": the value in bytes or units */
static uint64_t dropin_value(const char *dropin, const char *key)
{
	char pat[64], *end;
	const char *p;
	uint64_t v;

	snprintf(pat, sizeof(pat), "\n%s=", key);
	p = strstr(dropin, pat);
	if (!p)
		return 0;
	v = strtoull(p + strlen(pat), &end, 10);
	switch (*end) {
	case 'K': return v << 10;
	case 'M': return v << 20;
	case 'G': return v << 30;
	}
	return v;
}

/* "CAP_NET_BIND_SERVICE CAP_SYS_NICE" -> "-all,+net_bind_service,+sys_nice" */
static void setpriv_caps(const char *dropin, char *buf, size_t size)
{
	const char *p = strstr(dropin, "\nCapabilityBoundingSet=");
	char line[512], *save, *tok;
	int n;

	n = snprintf(buf, size, "-all");
	if (!p)
		return;
	snprintf(line, sizeof(line), "%s", p + 23);
	line[strcspn(line, "\n")] = '\0';
	for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		n += snprintf(buf + n, size - n, ",+");
		for (const char *c = tok + 4; *c && n < (int)size - 1; c++)
			buf[n++] = *c >= 'A' && *c <= 'Z' ? *c + 32 : *c;
		buf[n] = '\0';
	}
}

/* Run the demo under @l; its wait status, stderr in err. */
static int run_limited(const struct limits *l)
{
	char a_nofile[64], a_memlock[64], a_msgq[64], a_nice[64], a_fsize[64];
	char bset[300], num[32];
	int status;

	snprintf(a_nofile, sizeof(a_nofile), "--nofile=%" PRIu64, l->nofile);
	snprintf(a_memlock, sizeof(a_memlock), "--memlock=%" PRIu64, l->memlock);
	snprintf(a_msgq, sizeof(a_msgq), "--msgqueue=%" PRIu64, l->msgqueue);
	snprintf(a_nice, sizeof(a_nice), "--nice=%" PRIu64, l->nice);
	if (l->fsize == UINT64_MAX)
		snprintf(a_fsize, sizeof(a_fsize), "--fsize=unlimited");
	else
		snprintf(a_fsize, sizeof(a_fsize), "--fsize=%" PRIu64, l->fsize);
	snprintf(bset, sizeof(bset), "--bounding-set=%s", l->caps);

	remove_cgroup(CG);
	if (mkdir(CG, 0755)) {
		tap_diag("mkdir %s: %s", CG, strerror(errno));
		return -1;
	}
	snprintf(num, sizeof(num), "%" PRIu64, l->tasks);
	write_file(CG "/pids.max", num);
	snprintf(num, sizeof(num), "%" PRIu64, l->memory);
	write_file(CG "/memory.max", num);
	write_file(CG "/memory.swap.max", "0");
	/* spawn_capture's child joins the cgroup through this shell */
	status = spawn_capture((char *[]){ "sh", "-c",
		"echo $$ > " CG "/cgroup.procs && exec \"$@\"", "sh",
		"prlimit", a_nofile, a_memlock, a_msgq, a_nice, a_fsize,
		"setpriv", bset, "--", (char *)built("workloads/demo"), "-q", NULL },
		out, sizeof(out), err, sizeof(err));
	remove_cgroup(CG);
	return status;
}

static int failed_at(int status, const char *step)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		tap_diag("it ran to success");
		return 0;
	}
	if (step && !strstr(err, step)) {
		tap_diag("status %#x, stderr: %s", status, err);
		return 0;
	}
	return 1;
}

int main(void)
{
	struct hw_marks peaks;
	struct limits rec, l;
	char dropin[16384], json[65536], msg[200];
	int status;

	/*
	 * On the checkers' kernels the recommended limits run, not each one
	 * set below its peak: that checks highwater's advice, the same on
	 * every kernel (make test runs it), and the refusals it reaches are
	 * the kselftests' there too.
	 */
	tap_plan(on_checker_kernel() ? 2 : 11);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory");

	status = spawn_capture((char *[]){ (char *)built("highwater"), "run", "-f", "systemd",
		"-o", "/tmp/loop.conf", "--", (char *)built("workloads/demo"), "-q", NULL },
		out, sizeof(out), err, sizeof(err));
	hw_read_file("/tmp/loop.conf", dropin, sizeof(dropin));
	spawn_capture((char *[]){ (char *)built("highwater"), "run", "-f", "json",
		"-o", "/tmp/loop.json", "--", (char *)built("workloads/demo"), "-q", NULL },
		out, sizeof(out), err, sizeof(err));
	hw_read_file("/tmp/loop.json", json, sizeof(json));
	if (status || hw_json_read(json, &peaks, msg, sizeof(msg))) {
		tap_diag("no profile: %s %s", err, msg);
		hw_marks_init(&peaks);
	}

	rec.nofile = dropin_value(dropin, "LimitNOFILE");
	rec.memlock = dropin_value(dropin, "LimitMEMLOCK");
	rec.msgqueue = dropin_value(dropin, "LimitMSGQUEUE");
	rec.nice = dropin_value(dropin, "LimitNICE");
	/* Not set (files grow across runs): the workload runs without it */
	rec.fsize = strstr(dropin, "\nLimitFSIZE=") ? dropin_value(dropin, "LimitFSIZE") :
		    UINT64_MAX;
	rec.tasks = dropin_value(dropin, "TasksMax");
	rec.memory = dropin_value(dropin, "MemoryMax");
	setpriv_caps(dropin, rec.caps, sizeof(rec.caps));
	tap_diag("recommended: nofile %" PRIu64 ", memlock %" PRIu64 ", msgqueue %" PRIu64
		 ", nice %" PRIu64 ", fsize %" PRIu64 ", tasks %" PRIu64 ", memory %" PRIu64
		 ", bounding set %s", rec.nofile, rec.memlock, rec.msgqueue, rec.nice,
		 rec.fsize, rec.tasks, rec.memory, rec.caps);

	status = run_limited(&rec);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "all recommended limits applied: the workload succeeds (%s)", err);
	if (on_checker_kernel()) {
		tap_ok(1, "# SKIP each limit below its peak: on the guest kernel (make test)");
		goto out;
	}

#define PEAK(key) (peaks.lim[hw_limit_index(key)].peak)
	l = rec;
	l.nofile = PEAK("nofile") - 1;
	tap_ok(failed_at(run_limited(&l), "opening descriptors"),
	       "open files one below the peak: fails opening descriptors");
	l = rec;
	l.tasks = peaks.pids_peak - 1;
	tap_ok(failed_at(run_limited(&l), "forking children"),
	       "pids.max one below pids.peak: fails forking");
	l = rec;
	l.memory = peaks.memory_peak / 2;
	status = run_limited(&l);
	tap_ok(failed_at(status, NULL) && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	       "memory.max at half memory.peak: killed by the OOM killer (status %#x)", status);
	l = rec;
	l.memlock = PEAK("memlock") - 4096;
	tap_ok(failed_at(run_limited(&l), "mlock"),
	       "locked memory a page below the peak: mlock fails");
	l = rec;
	l.msgqueue = PEAK("msgqueue") - 1;
	tap_ok(failed_at(run_limited(&l), "mq_open"),
	       "message queue bytes one below the peak: mq_open fails");
	l = rec;
	l.fsize = PEAK("fsize") - 1;
	status = run_limited(&l);
	tap_ok(failed_at(status, NULL) &&
	       ((WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) ||
		strstr(err, "writing the file")),
	       "file size one below the peak: the write fails (status %#x)", status);
	l = rec;
	snprintf(l.caps, sizeof(l.caps), "-all,+sys_nice");
	tap_ok(failed_at(run_limited(&l), "binding port 80"),
	       "bounding set without CAP_NET_BIND_SERVICE: bind fails");

	/* Without CAP_SYS_NICE, RLIMIT_NICE alone decides. */
	l = rec;
	snprintf(l.caps, sizeof(l.caps), "-all,+net_bind_service");
	status = run_limited(&l);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "without CAP_SYS_NICE, LimitNICE=%" PRIu64 " lets it raise its priority (%s)",
	       l.nice, err);
	l.nice = PEAK("nice") - 1;
	tap_ok(failed_at(run_limited(&l), "setpriority"),
	       "without CAP_SYS_NICE, LimitNICE one below the peak: setpriority fails");
	l = rec;
	l.nice = PEAK("nice") - 1;
	status = run_limited(&l);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "with CAP_SYS_NICE, a lower LimitNICE does not matter (as the OVER flag says)");
out:
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "-memory -pids");
	unlink("/tmp/loop.conf");
	unlink("/tmp/loop.json");
	return tap_exit();
}
