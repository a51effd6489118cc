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
 *  - a capability the kernel records without a cap_capable() call: the
 *    CAP_SETFCAP a user namespace's creator had, sampled when it made it.
 *
 * A difference with none of these reasons fails: either the marks or this
 * list is wrong.  Needs kprobes and BPF: run by tests/peer/run on the
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
 * Every successful cap_capable(), by cgroup id, comm, capability and the
 * options of the check (bit 1: CAP_OPT_NOAUDIT), counted.  The key of the
 * pending check has bit 16 set, so that capability 0 with no option is
 * not 0.
 */
static const char program[] =
	"kprobe:cap_capable { @asked[tid] = 0x10000 | arg2 | (arg3 << 8); }\n"
	"kretprobe:cap_capable /@asked[tid]/ {\n"
	"  if (retval == 0) { @ok[cgroup, comm, @asked[tid] & 0xffff] = count(); }\n"
	"  delete(@asked[tid]);\n"
	"}\n"
	"END { clear(@asked); }\n";

static char out[1 << 16], err[1 << 16];
static char trace[1 << 22];

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
	FILE *f;

	r->s = s;
	if (s->unit_file) {
		snprintf(path, sizeof(path), "/etc/systemd/system/%s", s->unit);
		f = fopen(path, "w");
		if (!f || fputs(s->unit_file, f) < 0 || fclose(f) || sh("systemctl daemon-reload"))
			return false;
	}
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
	unsigned long long audited, noaudit, setup;	/* counts */
	char comms[256];
};

static void tally(unsigned long long id, int cap, struct seen *v)
{
	memset(v, 0, sizeof(*v));
	for (char *l = trace; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l) {
		unsigned long long cg, n;
		unsigned int key;
		char comm[64];

		/* @ok[1234, nginx, 258]: 3 */
		if (sscanf(l, "@ok[%llu, %63[^,], %u]: %llu", &cg, comm, &key, &n) != 4 ||
		    cg != id || (int)(key & 0xff) != cap)
			continue;
		if (key >> 8 & 2)
			v->noaudit += n;
		else if (comm[0] == '(')
			v->setup += n;
		else
			v->audited += n;
		if (!strstr(v->comms, comm) && strlen(v->comms) + strlen(comm) + 2 < sizeof(v->comms))
			snprintf(v->comms + strlen(v->comms), sizeof(v->comms) - strlen(v->comms),
				 "%s%s", v->comms[0] ? " " : "", comm);
	}
}

/* Why the two disagree on @cap, or NULL when no reason fits */
static const char *why(int cap, bool traced, bool marked, const struct seen *v)
{
	if (traced && !marked) {
		if (!v->audited && !v->setup)
			return "probes only: every check the tracer saw was CAP_OPT_NOAUDIT";
		if (!v->audited)
			return "systemd's set-up only: checks by its child before the service's execve()"
			       " (and probes)";
		return NULL;
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

		tally(r->cgroup_id, cap, &v);
		traced = v.audited || v.noaudit || v.setup;
		if (!traced && !marked)
			continue;
		reason = traced == marked ? "" : why(cap, traced, marked, &v);
		tap_diag("%-24s %-22s %-8s %-6s %6llu %6llu %6llu  %s%s%s", r->s->unit,
			 hw_cap_name(cap), traced ? "traced" : "-", marked ? "marked" : "-",
			 v.audited, v.setup, v.noaudit, v.comms, reason && *reason ? ": " : "",
			 reason ? reason : ": UNEXPLAINED");
		differ += traced != marked;
		unexplained += !reason;
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
	tap_diag("%-24s %-22s %-8s %-6s %6s %6s %6s  %s", "unit", "capability", "tracer", "marks",
		 "checks", "set-up", "noaudit", "comms: why they differ");
	for (int i = 0; i < nruns; i++)
		if (runs[i].ran)
			compare(&runs[i]);
	printf("1..%d\n", tap_n);
	return tap_exit();
}
