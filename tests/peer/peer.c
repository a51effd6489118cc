// SPDX-License-Identifier: GPL-2.0
/*
 * The kprobe peer (issue 19): the services of tests/services, started by
 * systemd and driven by the same loads, seen at once by the kernel's marks
 * (each unit's capabilities.used) and by a tracer on cap_capable(), the
 * check under every capable(), ns_capable() and has_capability() (bpftrace,
 * kprobes, as bench/tracker.bt).  For each unit and capability the two
 * disagree on, the reason, from what the tracer saw:
 *
 *  - checks made with CAP_OPT_NOAUDIT only: probes, whose refusal the
 *    kernel answers with a fallback (proc.rst lists them);
 *  - checks made only by systemd's child before the service's execve()
 *    (its comm is "(NAME)"): the set-up the unit's bounding set does not
 *    limit (cgroup-v2.rst, capabilities.used);
 *  - checks made with credentials the kernel borrowed (overlayfs working
 *    on the layers below with its mounter's), told by the stack;
 *  - checks the marks leave out by rule, told by a known stack (the owner
 *    of a user namespace needs no capability in it);
 *  - a capability the kernel records without a cap_capable() call: the
 *    CAP_SETFCAP a user namespace's creator had, sampled when it made it.
 *
 * A difference with none of these reasons fails: either the marks or this
 * list is wrong.  The stacks are seven frames deep: a borrowed check whose
 * overlayfs frame is deeper counts as the process's own, and fails.  Needs kprobes and BPF: run by tests/peer/run on the
 * bench kernel (make peer), which has them; the guest kernel does not.
 */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"
#include "../services/units.h"

#define TRACE "/tmp/hw-peer.trace"

/*
 * Every successful cap_capable(), by cgroup id, comm, capability with the
 * options of the check (bits 8 on: bit 9 is CAP_OPT_NOAUDIT) and the kernel
 * stack, counted.  The key of the pending check has bit 16 set, so that
 * capability 0 with no option is not 0.
 */
static const char program[] =
	"kprobe:cap_capable { @asked[tid] = 0x10000 | arg2 | (arg3 << 8); }\n"
	"kretprobe:cap_capable /@asked[tid]/ {\n"
	"  if (retval == 0) { @ok[cgroup, comm, @asked[tid] & 0xffff, kstack(7)] = count(); }\n"
	"  delete(@asked[tid]);\n"
	"}\n"
	"END { clear(@asked); }\n";

/*
 * Checks made with credentials the kernel borrowed for the operation
 * (override_creds()), by a function on the stack: not the process's own,
 * and not recorded (proc.rst).  access() is not among them: it borrows the
 * real user's credentials only when they differ from the process's, and
 * root's access() checks with its own.  overlayfs runs its own checks on the
 * overlay's inode with the caller's (ovl_permission()'s first
 * generic_permission(), ovl_setattr()'s setattr_prepare()) and the rest
 * with its mounter's.
 */
static const struct {
	const char *function, *whose;
} borrowed[] = {
	{ "ovl_", "overlayfs's, with its mounter's credentials" },
	{ "backing_file_", "a backing file's, with its opener's credentials" },
};
static const char *const own_in_borrowed[] = {
	"generic_permission < ovl_permission", "setattr_prepare < ovl_setattr",
};

/*
 * Checks whose success a tracer on cap_capable() cannot tell from a use,
 * recognised by their stack in a unit, each with the reason the marks
 * leave them out.
 */
static const struct {
	const char *unit;
	int cap;
	const char *stack, *why;
} known[] = {
	{ "hw-sandbox.service", CAP_SYS_PTRACE,
	  "cap_ptrace_access_check < ptrace_may_access < proc_ns_get_link",
	  "bwrap opens its child's /proc/PID/ns links; the child's user namespace is one bwrap "
	  "made, and cap_capable() gives its owner every capability there without any in effect "
	  "(the owner's rule, patch 28)" },
};

static char trace[1 << 22];	/* bpftrace's output */

/* One line of bpftrace's map: @ok[ID, COMM, KEY, \n\tfunc+off\n...\n]: N */
struct check {
	unsigned long long cgroup_id, n;
	unsigned int key;
	char comm[32], stack[400];
};

static struct check checks[8192];
static int nchecks;

static void parse_trace(void)
{
	for (char *p = strstr(trace, "@ok["); p && nchecks < 8192; p = strstr(p + 1, "@ok[")) {
		struct check *c = &checks[nchecks];
		char *end = strstr(p, "]: ");
		size_t len = 0;

		if (!end || sscanf(p, "@ok[%llu, %31[^,], %u,", &c->cgroup_id, c->comm, &c->key) != 3)
			continue;
		c->n = strtoull(end + 3, NULL, 10);
		for (char *f = strchr(p, '\n'); f && f < end; f = strchr(f + 1, '\n')) {
			f += strspn(f, "\n\t ");
			if (f >= end || len >= sizeof(c->stack))
				break;
			len += snprintf(c->stack + len, sizeof(c->stack) - len, "%s%.*s",
					len ? " < " : "", (int)strcspn(f, "+\n"), f);
		}
		nchecks++;
	}
}

static char out[1 << 16], err[1 << 16];

/* sh -c of a printf-made command, output in out and err */
#define sh(...) spawn_sh(out, sizeof(out), err, sizeof(err), __VA_ARGS__)

/* What each unit's run left: its cgroup's id and capabilities.used */
struct run {
	const struct service *s;
	unsigned long long cgroup_id, cap_used;
	bool ran;
};

/* The unit as shipped, restarted (a new cgroup), prepared once, loaded. */
static bool drive(const struct service *s, struct run *r)
{
	char dir[600], path[700], text[64];
	struct stat st;

	r->s = s;
	if (s->unit_file && (unit_install(s) || sh("systemctl daemon-reload")))
		return false;
	if (sh("timeout 180 systemctl restart %s", s->unit))
		return false;
	if (s->prepare && sh("%s", s->prepare))
		tap_diag("%s: preparing the load failed: %.300s", s->unit, err);
	if (sh("timeout 180 systemctl restart %s && systemctl show -p ControlGroup --value %s",
	       s->unit, s->unit))
		return false;
	snprintf(dir, sizeof(dir), "/sys/fs/cgroup%.*s", (int)strcspn(out, "\n"), out);
	if (stat(dir, &st))
		return false;
	r->cgroup_id = st.st_ino;	/* a cgroup's id is its directory's inode */
	if (sh("%s", s->load)) {
		tap_diag("%s: the load failed: %.300s", s->unit, err);
		return false;
	}
	snprintf(path, sizeof(path), "%s/capabilities.used", dir);
	if (hw_read_file(path, text, sizeof(text)) < 0)
		return false;
	r->cap_used = strtoull(text, NULL, 16);
	return r->ran = true;
}

/* What the tracer saw of one capability in one cgroup */
struct seen {
	unsigned long long checks, setup, noaudit, borrowed, known, other;	/* counts */
	const char *whose;	/* whose credentials the borrowed ones were */
	const char *why;	/* the known checks' reason */
	char comms[256];
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void tally(const char *unit, unsigned long long id, int cap, struct seen *v)
{
	memset(v, 0, sizeof(*v));
	for (int i = 0; i < nchecks; i++) {
		const struct check *c = &checks[i];
		const char *whose = NULL, *why = NULL;

		if (c->cgroup_id != id || (int)(c->key & 0xff) != cap)
			continue;
		for (size_t b = 0; b < N(borrowed); b++)
			if (strstr(c->stack, borrowed[b].function))
				whose = borrowed[b].whose;
		for (size_t o = 0; o < N(own_in_borrowed); o++)
			if (strstr(c->stack, own_in_borrowed[o]))
				whose = NULL;
		for (size_t k = 0; k < N(known); k++)
			if (!strcmp(known[k].unit, unit) && known[k].cap == cap &&
			    strstr(c->stack, known[k].stack))
				why = known[k].why;
		v->checks += c->n;
		if (c->key >> 8 & 2)
			v->noaudit += c->n;
		else if (c->comm[0] == '(')
			v->setup += c->n;
		else if (whose)
			v->borrowed += c->n, v->whose = whose;
		else if (why)
			v->known += c->n, v->why = why;
		else
			v->other += c->n;
		if (!strstr(v->comms, c->comm) &&
		    strlen(v->comms) + strlen(c->comm) + 2 < sizeof(v->comms))
			snprintf(v->comms + strlen(v->comms), sizeof(v->comms) - strlen(v->comms),
				 "%s%s", v->comms[0] ? " " : "", c->comm);
	}
}

/* The stacks of @cap's checks the reasons do not cover */
static void show_stacks(unsigned long long id, int cap)
{
	for (int i = 0; i < nchecks; i++) {
		const struct check *c = &checks[i];

		if (c->cgroup_id == id && (int)(c->key & 0xff) == cap && !(c->key >> 8 & 2) &&
		    c->comm[0] != '(')
			tap_diag("    %s by %s, %llu checks: %s", hw_cap_name(cap), c->comm, c->n,
				 c->stack);
	}
}

/* Why the two disagree on @cap, or NULL when no reason fits */
static const char *why(int cap, bool traced, bool marked, const struct seen *v)
{
	static char reason[400];

	if (traced && !marked) {
		if (v->other)
			return NULL;
		snprintf(reason, sizeof(reason), "%s%s%s%s%s%s%s",
			 v->noaudit ? "probes (CAP_OPT_NOAUDIT); " : "",
			 v->setup ? "systemd's set-up, by its child before the service's execve(); " : "",
			 v->borrowed ? "checks with borrowed credentials, " : "",
			 v->borrowed ? v->whose : "", v->borrowed ? "; " : "",
			 v->known ? v->why : "", v->known ? "; " : "");
		reason[strlen(reason) - 2] = '\0';
		return reason;
	}
	if (marked && !traced && cap == CAP_SETFCAP)
		return "not a cap_capable() call: the CAP_SETFCAP a user namespace's creator had, "
		       "sampled when it made the namespace, lets it map root";
	return NULL;
}

static void compare(const struct run *r)
{
	int differ = 0, unexplained = 0;

	for (int cap = 0; cap <= HW_CAP_LAST; cap++) {
		bool marked = r->cap_used >> cap & 1;
		struct seen v;
		bool traced;
		const char *reason;

		tally(r->s->unit, r->cgroup_id, cap, &v);
		traced = v.checks;
		if (!traced && !marked)
			continue;
		reason = traced == marked ? "" : why(cap, traced, marked, &v);
		tap_diag("%-26s %-20s %-6s %-6s %5llu %6llu %5llu %6llu %5llu  %s%s%s", r->s->unit,
			 hw_cap_name(cap), traced ? "traced" : "-", marked ? "marked" : "-",
			 v.other, v.setup, v.noaudit, v.borrowed, v.known, v.comms,
			 reason && *reason ? ": " : "", reason ? reason : ": UNEXPLAINED");
		differ += traced != marked;
		unexplained += !reason;
		/*
		 * Marked, but each check the tracer saw is one the marks leave
		 * out: the stacks say which the kernel took for its own.
		 */
		if (!reason || (marked && traced && !v.other && !v.known))
			show_stacks(r->cgroup_id, cap);
	}
	tap_ok(!unexplained, "%s: the tracer and capabilities.used differ on %d capabilities, "
	       "%d without a reason", r->s->unit, differ, unexplained);
}

int main(int argc, char **argv)
{
	struct run runs[16] = { 0 };
	int nruns = 0, status;
	pid_t tracer;
	time_t t0;

	printf("TAP version 13\n");
	if (access("/sys/kernel/tracing/kprobe_events", F_OK) &&
	    access("/sys/kernel/debug/tracing/kprobe_events", F_OK)) {
		printf("1..1\nok 1 # SKIP no kprobes in this kernel: run it on the bench kernel (make peer)\n");
		return 0;
	}
	if (access("/run/systemd/system", F_OK)) {
		printf("1..1\nok 1 # SKIP not booted with systemd (vm/run --systemd)\n");
		return 0;
	}
	tracer = fork();
	if (tracer == 0) {
		int fd = open(TRACE, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execlp("bpftrace", "bpftrace", "-e", program, (char *)NULL);
		_exit(127);
	}
	/* bpftrace compiles its program first: slow under TCG */
	for (t0 = time(NULL); time(NULL) - t0 < 300; sleep(1))
		if (hw_read_file(TRACE, trace, sizeof(trace)) > 0 && strstr(trace, "Attaching"))
			break;
	if (!tap_ok(tracer > 0 && strstr(trace, "Attaching"), "bpftrace attaches to cap_capable (%ds)",
		    (int)(time(NULL) - t0))) {
		tap_diag("%.1000s", trace);
		kill(tracer, SIGKILL);
		printf("1..%d\n", tap_n);
		return tap_exit();
	}
	sleep(2);

	for (size_t i = 0; i < sizeof(services) / sizeof(services[0]) && nruns < 16; i++) {
		bool wanted = argc < 2;

		for (int a = 1; a < argc; a++)
			wanted |= !strncmp(services[i].unit, argv[a], strlen(argv[a]));
		if (!wanted)
			continue;
		tap_ok(drive(&services[i], &runs[nruns]), "%s: started as shipped and its load passed",
		       services[i].unit);
		nruns++;
	}

	kill(tracer, SIGINT);
	waitpid(tracer, &status, 0);
	tap_ok(hw_read_file(TRACE, trace, sizeof(trace)) > 0 && strstr(trace, "@ok["),
	       "bpftrace printed what it saw");
	parse_trace();
	tap_diag("%-26s %-20s %-6s %-6s %5s %6s %5s %6s %5s  %s", "unit", "capability", "tracer",
		 "marks", "own", "set-up", "probe", "borrow", "known", "comms: why they differ");
	for (int i = 0; i < nruns; i++)
		if (runs[i].ran)
			compare(&runs[i]);
	printf("1..%d\n", tap_n);
	return tap_exit();
}
