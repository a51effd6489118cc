// SPDX-License-Identifier: GPL-2.0
/*
 * Debian's services under systemd (issue 19), in a guest booted by
 * vm/run --systemd, and a sandboxing service of the test's own (units.h).
 * For each service, as its package ships it:
 *
 *  1. restart the unit (a new cgroup, marks from zero) and drive its load;
 *  2. highwater unit NAME --format systemd, installed as the drop-in
 *     /etc/systemd/system/NAME.d/highwater.conf: the unit restarts, the same
 *     load passes, systemd-analyze verify accepts the unit;
 *  3. one directive at a time set just below the peak it came from (a limit
 *     to its peak less one, a capability taken out of the bounding set, a
 *     device taken out of the allow list): the service or its load must
 *     fail.  Where it does not, the reason must be in the findings table
 *     below (a peak the kernel counts but the program survives without);
 *     an unexplained one fails the test: the marks were too high.
 *
 * systemd-analyze security's exposure before and after the drop-in is
 * printed as a table.  The drop-in is removed at the end: the next service
 * sees the system as shipped.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"
#include "units.h"

static char out[1 << 16], err[1 << 16];

/*
 * Tightenings that do not fail, and why: findings about a program or about
 * systemd, each with the evidence that must be there for it to explain the
 * hold (shell, run after the load; "%1$s" is the unit, "%2$s" its cgroup
 * directory, "%3$s" the directive as set).  A tightening that holds without an explanation whose evidence
 * is there fails the test: the mark it came from was too high.
 */
static const struct {
	const char *unit, *directive, *why, *evidence;
} findings[] = {
	{ "nginx.service", "LimitNOFILE=",
	  "nginx answers EMFILE from accept() by pausing accepts and serving the connections it holds",
	  "grep -q 'Too many open files' /var/log/nginx/error.log" },
	{ "postgresql@15-main.service", "LimitNOFILE=",
	  "postgres probes its descriptors at start, dup() up to max_files_per_process (1000) or "
	  "its limit less one, and sizes its descriptor cache from what it found (fd.c, "
	  "count_usable_fds()): this run's probe stopped below the limit (rlimits.peak nofile within it)",
	  "d='%3$s'; awk -v v=\"${d#*=}\" '$1 == \"nofile\" && $2 <= v { f = 1 } END { exit !f }' "
	  "%2$s/rlimits.peak" },
	{ "postgresql@15-main.service", "CapabilityBoundingSet without CAP_DAC_READ_SEARCH",
	  "pg_ctlcluster, as root, looks for postmaster.pid in the cluster's data directory (mode 700, "
	  "owner postgres) to tell whether the cluster runs; refused, it sees no file and starts the "
	  "cluster, as it would anyway when the cluster is stopped",
	  "[ \"$(stat -c '%%a %%U' /var/lib/postgresql/15/main)\" = '700 postgres' ] && "
	  "grep -q 'check_pidfile_running' /usr/bin/pg_ctlcluster" },
	{ "*", "LimitNOFILE=",
	  "this run never tried a descriptor at the limit (its rlimits.peak nofile is within it): "
	  "how many connections a worker holds at once differs from run to run",
	  "d='%3$s'; awk -v v=\"${d#*=}\" '$1 == \"nofile\" && $2 <= v { f = 1 } END { exit !f }' "
	  "%2$s/rlimits.peak" },
	{ "nginx.service", "TasksMax=",
	  "the peak is a reload's new workers beside the old ones; refused, nginx keeps the old workers",
	  "grep -q 'fork() failed' /var/log/nginx/error.log" },
	{ "nginx.service", "TasksMax=",
	  "no fork was refused in this run (pids.events max 0): the peak was nginx -s reload beside "
	  "the old and the new workers, an overlap of a few milliseconds this run did not repeat",
	  "grep -qx 'max 0' %2$s/pids.events" },
	{ "redis-server.service", "TasksMax=",
	  "the fifth task is jemalloc's background purging thread; refused, jemalloc purges in the "
	  "allocating threads instead (the service ran without jemalloc_bg_thd)",
	  "! grep -qx jemalloc_bg_thd "
	  "/proc/$(systemctl show -p MainPID --value %1$s)/task/*/comm" },
	{ "redis-server.service", "without DeviceAllow=",
	  "PrivateDevices=: systemd makes the unit's private /dev nodes in its cgroup before execve "
	  "(the mknod recorded) and bind-mounts the host's nodes when mknod is refused; "
	  "an over-recording by the series, open",
	  "systemctl show -p PrivateDevices --value %1$s | grep -qx yes" },
	{ "ssh.service", "TasksMax=",
	  "no fork was refused in this run (pids.events max 0): the peak is logins overlapping "
	  "(each an sshd and its privilege-separated child until logind moves it), and this "
	  "run's logins overlapped less",
	  "grep -qx 'max 0' %2$s/pids.events" },
	{ "ssh.service", "without DeviceAllow=/dev/tty",
	  "/dev/tty is the opener's controlling terminal and no process of the unit has one: the open "
	  "passed the device check (recorded) and then failed with ENXIO; refused by the policy it "
	  "fails with EPERM, a failed open either way",
	  "for p in $(cat %2$s/cgroup.procs); do [ \"$(ps -o tty= -p $p)\" = '?' ] || exit 1; done" },
	{ "hw-sandbox.service", "CapabilityBoundingSet without CAP_DAC_OVERRIDE",
	  "bwrap's --proc set-up asks access(W_OK) of /proc/sys, sysrq-trigger, irq and bus "
	  "(allowed by CAP_DAC_OVERRIDE) and, refused, takes them for read-only already "
	  "(bubblewrap.c), in the new user namespace with the full set the kernel gives it, "
	  "before it keeps only its caller's: a probe through access(), which the kernel cannot "
	  "tell from a use; an over-recording, open",
	  "e() { c=$(mktemp -d /sys/fs/cgroup/hw-evidence.XXXXXX); sh -c \"echo \\$\\$ >$c/cgroup.procs; "
	  "exec bwrap --unshare-user --uid 0 --gid 0 --ro-bind / / $1 -- true\" >/dev/null 2>&1; "
	  "u=$(cat $c/capabilities.used); rmdir $c; echo $u; }; "
	  "[ $(( 0x$(e '--proc /proc') & 2 )) = 2 ] && [ $(( 0x$(e '') & 2 )) = 0 ]" },
	{ NULL, NULL, NULL, NULL },
};

/* DevicePolicy=closed allows these whatever DeviceAllow= says (systemd.resource-control(5)) */
static const char *const implicit_devices[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", NULL,
};

/* sh -c of a printf-made command, output in out and err */
#define sh(...) spawn_sh(out, sizeof(out), err, sizeof(err), __VA_ARGS__)

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static char dropin_dir[256], dropin[300];
static time_t applied_at;	/* when the last drop-in was applied */

/* Install text as the unit's drop-in (NULL: remove it) and restart the unit. */
static int apply(const char *unit, const char *text)
{
	/* Stopped first: what the journal says from applied_at on is this start's */
	if (sh("timeout 180 systemctl stop %s", unit))
		return -1;
	applied_at = time(NULL);
	if (text) {
		mkdir(dropin_dir, 0755);
		if (write_text(dropin, text))
			return -1;
	} else {
		unlink(dropin);
	}
	if (sh("systemctl daemon-reload"))
		return -1;
	/* Bounded: postgresql@.service waits for its start with no limit */
	return sh("timeout 180 systemctl start %s && systemctl is-active -q %s", unit, unit);
}

static char load_err[sizeof(err)];	/* what the last load said on stderr */

/* The load, and the unit still active after it. */
static int load_passes(const struct service *s)
{
	int failed = sh("%s", s->load);

	memcpy(load_err, err, sizeof(err));
	return !failed && !sh("systemctl is-active -q %s", s->unit);
}

/* "Overall exposure level for X: 9.6 UNSAFE" → "9.6 UNSAFE" */
static void exposure(const char *unit, char *buf, size_t size)
{
	const char *p;

	snprintf(buf, size, "?");
	if (sh("systemd-analyze security --no-pager %s", unit) && !strstr(out, "Overall"))
		return;
	p = strstr(out, "Overall exposure level");
	if (p && (p = strchr(p, ':')))
		snprintf(buf, size, "%.*s", (int)strcspn(p + 2, "\n\x1b"), p + 2);
}

static char cgroup_dir[600];

/*
 * Does a finding explain that @directive held for @unit, its evidence there?
 * Its reason, or NULL.
 */
static const char *finding(const char *unit, const char *directive)
{
	char cmd[1024];

	for (size_t i = 0; findings[i].unit; i++) {
		if ((strcmp(findings[i].unit, "*") && strcmp(findings[i].unit, unit)) ||
		    strncmp(findings[i].directive, directive, strlen(findings[i].directive)))
			continue;
		snprintf(cmd, sizeof(cmd), findings[i].evidence, unit, cgroup_dir, directive);
		if (!sh("%s", cmd))
			return findings[i].why;
		tap_diag("%s: %s held; finding \"%s\" has no evidence (%s)", unit, directive,
			 findings[i].why, cmd);
	}
	return NULL;
}

/*
 * One tightening: the drop-in with line number `line` replaced by
 * `replacement` ("" drops it).  Where it failed ("restart", "load"), or
 * NULL when the service held.
 */
static const char *tighten(const struct service *s, char **lines, int nlines, int line,
			   const char *replacement)
{
	static char text[1 << 15];
	size_t len = 0;

	if (s->logs)
		sh("for f in %s; do : > $f; done", s->logs);

	for (int i = 0; i < nlines; i++) {
		const char *l = i == line ? replacement : lines[i];

		if (*l)
			len += snprintf(text + len, sizeof(text) - len, "%s\n", l);
	}
	if (apply(s->unit, text))
		return "restart";
	if (!load_passes(s))
		return "load";
	return NULL;
}

/*
 * Why it failed, on one line: the last lines of the service's own logs and
 * the unit's last warnings (a signal, an exit status) in the journal.
 */
static const char *last_words(const struct service *s)
{
	static char words[600];

	sh("{ tail -q -n 2 %s; journalctl -q --no-pager -o cat -p warning -n 2 -u %s --since @%lld; } "
	   "2>/dev/null | tr '\\n' ' '", s->logs ? s->logs : "/dev/null", s->unit,
	   (long long)applied_at);
	snprintf(words, sizeof(words), "%.400s", out);
	return words;
}

static uint64_t dropin_memory_peak;	/* memory.peak of the run with the drop-in */

/*
 * The tightenings, for the table printed at the end: each directive's peak,
 * what the drop-in recommended (with which the load passed: tightening
 * starts only then), the value below the peak and what it did.
 */
static struct {
	char unit[40], peak[24], recommended[64], directive[80], outcome[24];
} tightenings[128];
static int ntightenings;

static void report_tightening(const struct service *s, const char *peak, const char *recommended,
			      const char *directive, const char *where)
{
	const char *why = where ? NULL : finding(s->unit, directive);

	if (ntightenings < 128) {
		snprintf(tightenings[ntightenings].unit, 40, "%s", s->unit);
		snprintf(tightenings[ntightenings].peak, 24, "%s", peak);
		snprintf(tightenings[ntightenings].recommended, 64, "%s", recommended);
		snprintf(tightenings[ntightenings].directive, 80, "%s", directive);
		snprintf(tightenings[ntightenings].outcome, 24, "%s%s",
			 where ? "fails at " : why ? "holds, explained" : "holds, UNEXPLAINED",
			 where ? where : "");
		ntightenings++;
	}

	/* What the load said first: a load that fails says why on stderr */
	if (where && !strcmp(where, "load"))
		for (char *c = load_err; *c; c++)
			if (*c == '\n')
				*c = ' ';
	tap_ok(where || why, "%s: %s %s%s%s%.300s%s", s->unit, directive,
	       where ? "fails at " : why ? "holds: " : "holds, and no finding explains it",
	       where ? where : why ? why : "", where ? ": " : "",
	       where && !strcmp(where, "load") ? load_err : "", where ? last_words(s) : "");
}

/* Each directive of the drop-in, set just below what it was made from. */
static void tighten_all(const struct service *s, char *text, const struct hw_marks *m)
{
	char *lines[256], repl[4096], peak_s[24];
	int n = 0;

	for (char *l = strtok(text, "\n"); l && n < 256; l = strtok(NULL, "\n"))
		lines[n++] = l;
	for (int i = 0; i < n; i++) {
		char *eq = strchr(lines[i], '='), key[64];
		const char *where;
		int li = -1;

		if (lines[i][0] == '#' || lines[i][0] == '[' || !eq || eq - lines[i] >= 64)
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - lines[i]), lines[i]);
		for (int j = 0; j < HW_NLIMITS; j++)
			if (hw_limits[j].systemd && !strcmp(hw_limits[j].systemd, key))
				li = j;
		if (li >= 0) {
			uint64_t peak = m->lim[li].peak;

			if (!peak) {
				tap_diag("%s: %s=0 is already the least", s->unit, key);
				continue;
			}
			snprintf(repl, sizeof(repl), "%s=%llu", key, (unsigned long long)peak - 1);
			snprintf(peak_s, sizeof(peak_s), "%llu", (unsigned long long)peak);
			where = tighten(s, lines, n, i, repl);
			report_tightening(s, peak_s, lines[i], repl, where);
		} else if (!strcmp(key, "TasksMax") && m->pids_peak > 1) {
			snprintf(repl, sizeof(repl), "TasksMax=%llu",
				 (unsigned long long)m->pids_peak - 1);
			snprintf(peak_s, sizeof(peak_s), "%llu", (unsigned long long)m->pids_peak);
			report_tightening(s, peak_s, lines[i], repl, tighten(s, lines, n, i, repl));
		} else if (!strcmp(key, "MemoryMax") && m->memory_peak) {
			/* The lower of the profile's peak and the drop-in run's */
			uint64_t peak = m->memory_peak, v;

			if (dropin_memory_peak && dropin_memory_peak < peak)
				peak = dropin_memory_peak;
			v = (peak - peak / 16) & ~4095ULL;

			/*
			 * Recorded, not tested: a service's memory differs from
			 * run to run by more than this step, and memory.peak
			 * counts page cache the kernel reclaims at the limit
			 * (mainline's memory.peak is tested by test_peaks).
			 */
			snprintf(repl, sizeof(repl), "MemoryMax=%llu", (unsigned long long)v);
			where = tighten(s, lines, n, i, repl);
			sh("echo $(cat %s/memory.peak) $(awk '$1 == \"max\" { print $2 }' %s/memory.events)",
			   cgroup_dir, cgroup_dir);
			tap_diag("%s: %s (15/16 of the lower of two runs' peaks, %llu) %s%s; this run: "
				 "memory.peak and memory.events max %.*s", s->unit, repl,
				 (unsigned long long)peak, where ? "fails at " : "holds",
				 where ? where : "", (int)strcspn(out, "\n"), out);
		} else if (!strcmp(key, "CapabilityBoundingSet") && eq[1]) {
			/* Each capability out of the set, one at a time */
			char caps[4096], *save, *cap;

			snprintf(caps, sizeof(caps), "%s", eq + 1);
			for (cap = strtok_r(caps, " ", &save); cap; cap = strtok_r(NULL, " ", &save)) {
				char others[4096] = "", what[128];
				size_t len = 0;

				for (const char *c = eq + 1; *c;) {
					size_t w = strcspn(c, " ");

					if (w && (w != strlen(cap) || strncmp(c, cap, w)))
						len += snprintf(others + len, sizeof(others) - len,
								"%s%.*s", len ? " " : "", (int)w, c);
					c += w + (c[w] == ' ');
				}
				snprintf(repl, sizeof(repl), "CapabilityBoundingSet=%s", others);
				snprintf(what, sizeof(what), "CapabilityBoundingSet without %s", cap);
				report_tightening(s, "used", "in the set", what,
						  tighten(s, lines, n, i, repl));
			}
		} else if (!strcmp(key, "DeviceAllow")) {
			char what[256];
			bool implicit = false;

			for (int d = 0; implicit_devices[d]; d++)
				implicit |= !strncmp(eq + 1, implicit_devices[d], strlen(implicit_devices[d])) &&
					    eq[1 + strlen(implicit_devices[d])] == ' ';
			if (implicit) {
				tap_diag("%s: %s: DevicePolicy=closed allows it anyway", s->unit, lines[i]);
				continue;
			}

			snprintf(what, sizeof(what), "without %s", lines[i]);
			report_tightening(s, "accessed", lines[i], what, tighten(s, lines, n, i, ""));
		}
	}
}

/* "CAP_CHOWN CAP_SETUID", or "none" */
static void caps_used(const struct hw_marks *m, char *buf, size_t size)
{
	size_t len = 0;

	snprintf(buf, size, "none");
	for (int c = 0; c <= HW_CAP_LAST; c++)
		if (m->cap_used & (1ULL << c) && len < size)
			len += snprintf(buf + len, size - len, "%s%s", len ? " " : "", hw_cap_name(c));
}

static void one_service(const struct service *s, char table[][160], int *rows)
{
	char before[64], after[64], text[sizeof(out)], what[1024];
	struct hw_marks m;

	snprintf(dropin_dir, sizeof(dropin_dir), "/etc/systemd/system/%s.d", s->unit);
	snprintf(dropin, sizeof(dropin), "%s/highwater.conf", dropin_dir);
	if (s->unit_file && !tap_ok(!unit_install(s), "%s: unit file installed", s->unit))
		return;

	if (!tap_ok(!apply(s->unit, NULL), "%s: starts as shipped", s->unit)) {
		sh("systemctl status --no-pager %s", s->unit);
		tap_diag("%.2000s", out);
		return;
	}
	sh("systemctl show -p ControlGroup --value %s", s->unit);
	snprintf(cgroup_dir, sizeof(cgroup_dir), "/sys/fs/cgroup%.*s", (int)strcspn(out, "\n"), out);
	if (s->prepare && sh("%s", s->prepare))
		tap_diag("%s: preparing the load failed: %.500s", s->unit, err);
	/* The marks of the load alone: a new cgroup after the preparation */
	if (!tap_ok(!apply(s->unit, NULL) && load_passes(s), "%s: the load passes as shipped",
		    s->unit))
		tap_diag("%s: %.1000s", s->unit, load_err);
	exposure(s->unit, before, sizeof(before));

	hw_marks_init(&m);
	if (!tap_ok(!spawn_capture((char *[]){ (char *)built("highwater"), "unit", "-f", "json",
					       (char *)s->unit, NULL },
				   out, sizeof(out), err, sizeof(err)) &&
		    !hw_json_read(out, &m, err, sizeof(err)),
		    "%s: highwater unit reads its marks (%.200s)", s->unit, err))
		return;
	if (!tap_ok(!spawn_capture((char *[]){ (char *)built("highwater"), "unit", "-f", "systemd",
					       (char *)s->unit, NULL },
				   out, sizeof(out), err, sizeof(err)),
		    "%s: highwater unit --format systemd (%.200s)", s->unit, err))
		return;
	snprintf(text, sizeof(text), "%s", out);
	caps_used(&m, what, sizeof(what));
	tap_diag("%s: capabilities used: %s; processes moved out: %llu", s->unit, what,
		 (unsigned long long)m.moved_out);
	tap_diag("%s: the drop-in:\n# %s", s->unit, text);
	if (!tap_ok(!apply(s->unit, text), "%s: restarts with the drop-in", s->unit) ||
	    !tap_ok(load_passes(s), "%s: the same load passes with the drop-in", s->unit)) {
		/* Tightening a drop-in that already breaks the service proves nothing */
		tap_diag("%s: %.1000s", s->unit, load_err);
		tap_diag("%s: %s", s->unit, last_words(s));
		apply(s->unit, NULL);
		return;
	}
	dropin_memory_peak = sh("cat %s/memory.peak", cgroup_dir) ? 0 : strtoull(out, NULL, 10);
	tap_ok(!sh("systemd-analyze verify %s", s->unit), "%s: systemd-analyze verify accepts it (%.300s)",
	       s->unit, err);
	exposure(s->unit, after, sizeof(after));
	snprintf(table[(*rows)++], 160, "%-28s %-16s %s", s->unit, before, after);

	tighten_all(s, text, &m);
	tap_ok(!apply(s->unit, NULL), "%s: restarts as shipped once the drop-in is removed", s->unit);
}

/* services [UNIT...]: all of them, or those whose names start so */
int main(int argc, char **argv)
{
	char table[16][160];
	int rows = 0;

	printf("TAP version 13\n");
	if (access("/run/systemd/system", F_OK)) {
		printf("1..1\nok 1 # SKIP not booted with systemd (vm/run --systemd)\n");
		return 0;
	}
	for (size_t i = 0; i < sizeof(services) / sizeof(services[0]); i++) {
		bool wanted = argc < 2;

		for (int a = 1; a < argc; a++)
			wanted |= !strncmp(services[i].unit, argv[a], strlen(argv[a]));
		if (wanted)
			one_service(&services[i], table, &rows);
	}
	tap_diag("each directive of the drop-in set just below its peak, one at a time:");
	tap_diag("(the load passed with every drop-in: tightening starts only then)");
	tap_diag("%-27s %-9s %-28s %-48s %s", "unit", "peak", "recommended", "tightened to",
		 "outcome");
	for (int i = 0; i < ntightenings; i++)
		tap_diag("%-27s %-9s %-28s %-48s %s", tightenings[i].unit, tightenings[i].peak,
			 tightenings[i].recommended, tightenings[i].directive,
			 tightenings[i].outcome);
	tap_diag("systemd-analyze security, exposure (0 safest, 10 least safe):");
	tap_diag("%-28s %-16s %s", "unit", "as shipped", "with the drop-in");
	for (int i = 0; i < rows; i++)
		tap_diag("%s", table[i]);
	printf("1..%d\n", tap_n);
	return tap_exit();
}
