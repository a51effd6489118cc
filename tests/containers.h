/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For the tests that run containers (tests/guest/highwater-container.c,
 * rootful; tests/services/rootless.c, a user's podman under systemd): images
 * made of the host's files, highwater container's formats, and the closed
 * loops that run a profiled workload again under them.
 */
#ifndef HW_CONTAINERS_H
#define HW_CONTAINERS_H

#include <ctype.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

static char out[1 << 16], err[1 << 16];

/* sh -c, output in out and err; a failure is shown */
static inline int sh(const char *cmd)
{
	int status = spawn_sh(out, sizeof(out), err, sizeof(err), "%s", cmd);

	if (status)
		tap_diag("%s: status %#x: %.300s", cmd, status, err);
	return status;
}

/*
 * A root file system in @dir with busybox's sh and sleep, each program in
 * @progs ("FROM:TO" pairs, blank-separated) with the libraries ldd names
 * for it, and what the shell text @setup adds (in $r); imported into
 * podman as @image, its files root's as in any image (made by a user, they
 * would be the user's id inside a rootless container, and its root would
 * need CAP_DAC_OVERRIDE to write in them).
 */
static inline int make_image(const char *dir, const char *progs, const char *setup, const char *image)
{
	int status = spawn_sh(out, sizeof(out), err, sizeof(err),
			      "set -e; r=%s; rm -rf $r; mkdir -p $r/bin $r/etc $r/tmp $r/dev $r/proc $r/sys $r/run; "
			      "cp /bin/busybox $r/bin/; "
			      "for c in sh sleep touch chown; do ln -s busybox $r/bin/$c; done; "
			      ": > $r/etc/passwd; : > $r/etc/group; "
			      "for p in %s; do from=${p%%%%:*} to=${p#*:}; mkdir -p $r${to%%/*}; cp $from $r$to; "
			      "  for l in $(ldd $from | grep -o '/[^ ]*'); do "
			      "    mkdir -p $r${l%%/*}; cp -L $l $r$l; done; done\n%s\n"
			      "tar -C $r --owner=0 --group=0 -cf $r.tar .; podman import -q $r.tar %s; rm $r.tar",
			      dir, progs, setup, image);

	if (status)
		tap_diag("the image %s: status %#x: %.300s", image, status, err);
	return status;
}

/*
 * Can a device program be loaded?  On cgroup v2 crun allows a container's
 * devices with one; the debug kernel, the variant without cgroup BPF,
 * cannot run a container.
 */
static inline int cgroup_device_bpf(void)
{
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr = {
		.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE,
		.insns = (unsigned long)prog,
		.insn_cnt = 2,
		.license = (unsigned long)"GPL",
	};
	int fd = syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static inline int highwater(const char *format, const char *name)
{
	return spawn_capture((char *[]){ (char *)built("highwater"), "container", "-f",
					 (char *)format, (char *)name, NULL },
			     out, sizeof(out), err, sizeof(err));
}

/*
 * A workload for the closed loops: the container it was profiled in, its
 * image and root file system, its command (sh -c text), and where it must
 * fail when a setting is just below its peak: what it says then (the
 * setting: a limit's key, "pids", a capability without CAP_).  Without
 * @load, the command prints "done" when the workload ran to the end; with
 * it, the command is a server in the host's network, and @load is shell
 * text run beside it that exits 0 when the server served it ($reload
 * reloads the server).
 */
struct workload {
	const char *name;
	const char *image, *rootfs;
	const char *cmd, *load;
	struct step {
		const char *setting, *says;
	} steps[16];
	/* what highwater container printed for it: --format docker, oci, compose */
	char docker[16384], oci[16384], compose[16384];
};

/* The formats of the profiled container, kept for the loops after it goes */
static inline int formats_of(struct workload *w)
{
	const char *format[] = { "docker", "oci", "compose" };
	char *keep[] = { w->docker, w->oci, w->compose };

	for (size_t i = 0; i < sizeof(format) / sizeof(format[0]); i++) {
		int status = highwater(format[i], w->name);

		tap_ok(!status && strlen(out) < sizeof(w->docker),
		       "highwater container -f %s %s (%.200s)", format[i], w->name, err);
		if (status || strlen(out) >= sizeof(w->docker))
			return -1;
		snprintf(keep[i], sizeof(w->docker), "%s", out);
	}
	return 0;
}

/*
 * A busybox container from @image that opens a descriptor at 100 and
 * chowns a file (CAP_CHOWN), run to its end with @parent as its
 * --cgroup-parent; then highwater cgroup @cgroup, the parent, into @m.
 * Its status: 0 when both ran.
 */
static inline int exited_container_marks(const char *image, const char *parent,
					 const char *cgroup, struct hw_marks *m)
{
	int status = spawn_sh(out, sizeof(out), err, sizeof(err),
			      "podman run --rm --network none --cgroup-parent=%s %s "
			      "sh -c 'touch /tmp/f; chown 1234 /tmp/f; exec 100</dev/null'",
			      parent, image);

	hw_marks_init(m);
	if (!status)
		status = spawn_capture((char *[]){ (char *)built("highwater"), "cgroup", "-f", "json",
						   (char *)cgroup, NULL },
				       out, sizeof(out), err, sizeof(err));
	if (!status)
		status = hw_json_read(out, m, err, sizeof(err));
	return status;
}

/* It failed where it should: what it says for @setting is in err */
static inline bool failed_at(const struct workload *w, const char *setting)
{
	for (const struct step *s = w->steps; s->setting; s++)
		if (!strcmp(s->setting, setting))
			return strstr(err, s->says) != NULL;
	tap_diag("%s: no step for %s", w->name, setting);
	return false;
}

/* The last @n bytes of @s: where a failing run says why */
static inline const char *tail(const char *s, size_t n)
{
	size_t len = strlen(s);

	return len > n ? s + len - n : s;
}

/* A server's run starts with nothing answering on its port (it would pass for it) */
#define PORT_FREE \
	"! ab -q -n 1 -s 2 http://127.0.0.1/ >/dev/null 2>&1 || { echo port 80 is taken; exit 2; }; "

/* The workload again, fresh, in podman with @flags: 0 when it ran to the end */
static inline int workload_with(const struct workload *w, const char *flags)
{
	int status;

	if (!w->load)
		status = spawn_sh(out, sizeof(out), err, sizeof(err),
				  "podman run --rm --network none %s %s "
				  "sh -c '%s' | grep -qx done", flags, w->image, w->cmd);
	else
		status = spawn_sh(out, sizeof(out), err, sizeof(err),
				  "podman rm -f -t 0 hw-loop >/dev/null 2>&1; " PORT_FREE
				  "podman run -d --name hw-loop --network host "
				  "%s %s sh -c '%s' >/dev/null || exit; reload='podman kill -s HUP hw-loop' logs='podman logs hw-loop'; "
				  "( %s ) >&2; s=$?; podman logs hw-loop >&2; "
				  "podman rm -f -t 0 hw-loop >/dev/null; exit $s",
				  flags, w->image, w->cmd, w->load);
	if (status)
		tap_diag("with %s: status %#x: %s", flags, status, tail(err, 600));
	return status;
}

/*
 * On the checkers' kernels (make reliability's debug and KCSAN) a workload's
 * container runs once, profiled, and what follows from the profile does
 * not: the formats, docker-compose's reading of them and the closed loops
 * check highwater's advice, which is the same on every kernel and is
 * checked on the guest kernel in make test, while the kernel paths they take
 * (containers started with limits, the refusals at a limit) are the
 * profile's run's and the kselftests' on those kernels too.  About 30
 * containers and two docker-compose runs fewer: 100 s of the KCSAN
 * kernel's suite.
 */
static inline bool advice_checked_elsewhere(const struct workload *w)
{
	if (!on_checker_kernel())
		return false;
	tap_ok(1, "# SKIP %s: the formats and the closed loops run on the guest kernel (make test)",
	       w->name);
	return true;
}

/*
 * The closed loop with podman: the workload, run again in a new container
 * with the flags --format docker gave, passes; with each flag set just
 * below the peak it came from (a --ulimit to its peak less one,
 * --pids-limit likewise, a --cap-add taken out), it fails.  --memory is
 * left as it is: a container's memory varies from run to run by more.
 */
static inline void closed_loop(const struct workload *w, const struct hw_marks *m)
{
	static char text[sizeof(out)];
	char flags[8192] = "", *flag[64], repl[512];
	int n = 0;
	size_t len = 0;

	snprintf(text, sizeof(text), "%s", w->docker);
	for (char *l = strtok(text, "\n"); l && n < 64; l = strtok(NULL, "\n")) {
		if (*l == '#')
			continue;
		l[strcspn(l, "\\")] = '\0';	/* " \" continues the line */
		flag[n++] = l;
		len += snprintf(flags + len, sizeof(flags) - len, "%s ", l);
	}
	tap_ok(n > 0 && !workload_with(w, flags), "%s: podman run with the flags: the workload passes (%s)",
	       w->name, flags);
	for (int i = 0; i < n; i++) {
		char others[8192] = "", key[32], setting[32];
		unsigned long long v;
		size_t ol = 0;
		int li;

		if (sscanf(flag[i], "--ulimit %31[a-z]=%llu", key, &v) == 2 &&
		    (li = hw_limit_index(key)) >= 0 && m->lim[li].peak) {
			snprintf(repl, sizeof(repl), "--ulimit %s=%llu:%llu", key,
				 (unsigned long long)m->lim[li].peak - 1,
				 (unsigned long long)m->lim[li].peak - 1);
			snprintf(setting, sizeof(setting), "%s", key);
		} else if (!strncmp(flag[i], "--pids-limit=", 13) && m->pids_peak > 1) {
			snprintf(repl, sizeof(repl), "--pids-limit=%llu",
				 (unsigned long long)m->pids_peak - 1);
			snprintf(setting, sizeof(setting), "pids");
		} else if (!strncmp(flag[i], "--cap-drop=ALL", 14))
			repl[0] = '\0';	/* below: each --cap-add taken out in turn */
		else
			continue;
		if (!repl[0]) {
			for (const char *c = strstr(flag[i], "--cap-add="); c;
			     c = strstr(c + 1, "--cap-add=")) {
				size_t cw = strcspn(c, " ");

				/* the flag without this --cap-add */
				snprintf(repl, sizeof(repl), "%.*s%s", (int)(c - flag[i]), flag[i],
					 c + cw + (c[cw] == ' '));
				ol = 0;
				for (int j = 0; j < n; j++)
					ol += snprintf(others + ol, sizeof(others) - ol, "%s ",
						       j == i ? repl : flag[j]);
				snprintf(setting, sizeof(setting), "%.*s", (int)(cw - 10), c + 10);
				tap_ok(workload_with(w, others) != 0 && failed_at(w, setting),
				       "%s: podman run without %.*s: the workload fails where it needs it",
				       w->name, (int)cw, c);
			}
			continue;
		}
		for (int j = 0; j < n; j++)
			ol += snprintf(others + ol, sizeof(others) - ol, "%s ", j == i ? repl : flag[j]);
		tap_ok(workload_with(w, others) != 0 && failed_at(w, setting),
		       "%s: podman run with %s instead of %s: the workload fails where it needs it",
		       w->name, repl, flag[i]);
	}
}

/*
 * The workload in a bundle of crun's own: `crun spec`'s config.json with
 * the fragment at @fragment merged in by jq (objects merged, the
 * fragment's arrays and values in place of the template's), the root file
 * system writable, then the fragment changed by the jq program @change
 * ("." for none).  Its status: 0 when the workload ran to the end.
 */
static inline int crun_with(const struct workload *w, const char *fragment, const char *change)
{
	int status;

	status = spawn_sh(out, sizeof(out), err, sizeof(err),
			  "set -e; b=/tmp/hw-bundle; rm -rf $b; mkdir -p $b; cp -a %s $b/rootfs; "
			  "cd $b; crun spec; jq '%s' %s > frag.json; "
			  "jq -s --arg cmd '%s' --argjson server %s '.[0] * .[1] | .process.terminal = false | "
			  ".root.readonly = false | .process.args = [\"sh\", \"-c\", $cmd] | "
			  "if $server then .linux.namespaces |= map(select(.type != \"network\")) else . end' "
			  "config.json frag.json > merged.json; "
			  "mv merged.json config.json; crun delete -f hw-crun-loop 2>/dev/null || :; "
			  "if [ %d = 0 ]; then crun run --bundle $b hw-crun-loop | grep -qx done; exit; fi; "
			  PORT_FREE "set +e; crun run --detach --bundle $b hw-crun-loop </dev/null >$b/log 2>&1 || "
			  "{ cat $b/log >&2; exit 1; }; reload='crun kill hw-crun-loop HUP' logs=\"cat $b/log\"; ( %s ) >&2; s=$?; "
			  "crun kill hw-crun-loop KILL; sleep 1; crun delete -f hw-crun-loop; cat $b/log >&2; exit $s",
			  w->rootfs, change, fragment, w->cmd, w->load ? "true" : "false",
			  w->load != NULL, w->load ? w->load : ":");
	if (status && strcmp(change, "."))
		tap_diag("with %s: status %#x: %s", change, status, tail(err, 600));
	return status;
}

/*
 * The closed loop with crun and --format oci: the workload passes with the
 * fragment, and fails with each rlimit, the pids limit and each capability
 * just below what they came from, and without each device it accessed.
 */
static inline void closed_loop_oci(const struct workload *w, const struct hw_marks *m)
{
	const char *frag = "/tmp/hw-oci.json";
	char change[512];
	FILE *f;
	int status;

	f = fopen(frag, "w");
	if (!f || fputs(w->oci, f) < 0 || fclose(f)) {
		tap_ok(0, "writing %s: %s", frag, strerror(errno));
		return;
	}
	status = crun_with(w, frag, ".");
	tap_ok(!status, "%s: crun run with the OCI fragment merged into crun spec's: the workload passes (%.300s)",
	       w->name, err);
	for (int i = 0; i < HW_NLIMITS; i++) {
		char type[32];

		if (!m->lim[i].peak)
			continue;
		snprintf(type, sizeof(type), "RLIMIT_%s", hw_limits[i].key);
		for (char *c = type; *c; c++)
			*c = toupper((unsigned char)*c);
		/* only the rlimits the fragment sets */
		if (spawn_sh(out, sizeof(out), err, sizeof(err),
			     "jq -e '.process.rlimits[] | select(.type == \"%s\")' %s", type, frag))
			continue;
		snprintf(change, sizeof(change),
			 ".process.rlimits |= map(if .type == \"%s\" then .soft = %llu | .hard = %llu else . end)",
			 type, (unsigned long long)m->lim[i].peak - 1,
			 (unsigned long long)m->lim[i].peak - 1);
		tap_ok(crun_with(w, frag, change) != 0 && failed_at(w, hw_limits[i].key),
		       "%s: crun run with %s at the peak less one: fails where it needs it",
		       w->name, type);
	}
	snprintf(change, sizeof(change), ".linux.resources.pids.limit = %llu",
		 (unsigned long long)m->pids_peak - 1);
	tap_ok(m->pids_peak > 1 && crun_with(w, frag, change) != 0 && failed_at(w, "pids"),
	       "%s: crun run with pids.limit %llu, the peak less one: fails where it needs it", w->name,
	       (unsigned long long)m->pids_peak - 1);
	for (int c = 0; c <= HW_CAP_LAST; c++) {
		if (!(m->cap_used & (1ULL << c)))
			continue;
		snprintf(change, sizeof(change),
			 ".process.capabilities |= map_values(map(select(. != \"%s\")))",
			 hw_cap_name(c));
		tap_ok(crun_with(w, frag, change) != 0 && failed_at(w, hw_cap_name(c) + 4),
		       "%s: crun run without %s in any set: fails where it needs it",
		       w->name, hw_cap_name(c));
	}
	/*
	 * Each device the fragment allows for reading or writing, taken out:
	 * the workload fails, but for the devices every container has, which
	 * crun allows whatever the spec lists (as runc does).  The mknod-only
	 * entries are crun's own set-up of those nodes, in every container.
	 */
	if (!spawn_sh(out, sizeof(out), err, sizeof(err),
		      "jq -r '.linux.resources.devices[] | select(.allow and (.access | test(\"[rw]\"))) | "
		      ".type + \" \" + (.major | tostring) + \":\" + (.minor | tostring)' %s", frag)) {
		static const char *const every[] = { "c 1:3", "c 1:5", "c 1:7", "c 1:8", "c 1:9", "c 5:0" };
		static char rules[sizeof(out)];

		snprintf(rules, sizeof(rules), "%s", out);
		for (char *r = strtok(rules, "\n"); r; r = strtok(NULL, "\n")) {
			bool always = false;
			char type[2];
			int major, minor;

			if (sscanf(r, "%1s %d:%d", type, &major, &minor) != 3)
				continue;
			for (size_t i = 0; i < sizeof(every) / sizeof(every[0]); i++)
				always |= !strcmp(r, every[i]);
			snprintf(change, sizeof(change),
				 ".linux.resources.devices |= map(select((.type == \"%s\" and .major == %d and .minor == %d) | not))",
				 type, major, minor);
			status = crun_with(w, frag, change);
			if (always)
				tap_ok(!status, "%s: crun run without %s in the device list: passes, crun allows it in every container",
				       w->name, r);
			else
				tap_ok(status && failed_at(w, r),
				       "%s: crun run without %s in the device list: fails where it needs it",
				       w->name, r);
		}
	}
	unlink(frag);
	sh("rm -rf /tmp/hw-bundle");
}

/*
 * --format compose, read by a real compose parser: docker-compose 1.29's
 * `config` checks a compose file against the compose schema and prints it
 * normalised (no daemon needed).  The service with the fragment's keys
 * passes, and its values come back: the pids limit, the memory limit, each
 * rlimit and capability; the same file with a pids_limit that is not a
 * number is refused (the check can fail).  Running it is left to podman:
 * podman-compose 1.0.3, Debian 12's, gives every container a network of
 * its own (none is refused) and passes neither pids_limit nor
 * device_cgroup_rules, as the fragment says.
 */
static inline void compose_check(const struct workload *w)
{
	static char normal[sizeof(out)], text[sizeof(w->compose)];
	char want[256], limit[32] = "";
	unsigned long long soft, hard;
	int status, missing = 0;
	FILE *f;

	if ((mkdir("/tmp/hw-compose", 0755) && errno != EEXIST) ||
	    !(f = fopen("/tmp/hw-compose/compose.yaml", "w"))) {
		tap_ok(0, "/tmp/hw-compose/compose.yaml: %s", strerror(errno));
		return;
	}
	fprintf(f, "services:\n  %s:\n    image: %s\n    network_mode: none\n", w->name + 8, w->image);
	snprintf(text, sizeof(text), "%s", w->compose);
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		fprintf(f, "    %s\n", l);
	fclose(f);
	status = spawn_sh(normal, sizeof(normal), err, sizeof(err),
			  "cd /tmp/hw-compose && docker-compose config");
	/* Each value of the fragment, in the normalised form */
	snprintf(text, sizeof(text), "%s", w->compose);
	for (char *save, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		want[0] = '\0';
		if (!strncmp(l, "pids_limit: ", 12) || !strncmp(l, "mem_limit: ", 11))
			snprintf(want, sizeof(want), "\n    %s\n", l);
		else if (!strncmp(l, "  ", 2) && l[2] != ' ' && sscanf(l + 2, "%31[a-z]:", limit) == 1)
			continue;	/* an rlimit: its soft and hard values follow */
		else if (sscanf(l, "    soft: %llu", &soft) == 1)
			continue;
		else if (sscanf(l, "    hard: %llu", &hard) == 1 && limit[0])
			snprintf(want, sizeof(want), "\n      %s:\n        hard: %llu\n        soft: %llu\n",
				 limit, hard, soft);
		else if (!strncmp(l, "cap_add: [", 10))
			for (char *cs, *c = strtok_r(l + 10, ", ]", &cs); c; c = strtok_r(NULL, ", ]", &cs)) {
				snprintf(want, sizeof(want), "\n    - %s\n", c);
				if (!strstr(normal, want)) {
					tap_diag("not in docker-compose config's output: %s", want);
					missing++;
				}
				want[0] = '\0';
			}
		if (want[0] && !strstr(normal, want)) {
			tap_diag("not in docker-compose config's output: %s", want);
			missing++;
		}
	}
	tap_ok(!status && !missing && strstr(normal, "\n    cap_drop:\n    - ALL\n"),
	       "%s: docker-compose config accepts --format compose's keys and reads back each value (%s)",
	       w->name, tail(err, 300));
	status = spawn_sh(out, sizeof(out), err, sizeof(err),
			  "cd /tmp/hw-compose && sed -i 's/^    pids_limit:/    pid_limit:/' compose.yaml && "
			  "docker-compose config");
	tap_ok(status && strstr(err, "pid_limit"), "%s: and refuses the file with pid_limit for pids_limit (%s)",
	       w->name, tail(err, 200));
	sh("rm -rf /tmp/hw-compose");
}

#endif /* HW_CONTAINERS_H */
