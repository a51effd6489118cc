// SPDX-License-Identifier: GPL-2.0
/*
 * highwater container: podman containers (crun, Debian's packages) in the
 * guest, from images imported from root file systems made of the host's
 * files.
 *
 * A busybox container whose processes spike their descriptors and use
 * CAP_CHOWN, one of them exiting before the report: highwater container
 * NAME finds its cgroup through podman inspect and reports exactly those
 * marks; a container that does not exist, or no longer runs, gets an error
 * that says so; highwater run -- podman run says the container's processes
 * left its cgroup.
 *
 * The closed loops, on the project's demo workload and on the host's nginx
 * under ab with a reload: each is profiled in a container of podman's
 * defaults, then run again in a new container under what --format docker
 * gives (podman) and what --format oci gives merged into crun spec's
 * config.json (crun), and passes; with each setting just below its peak
 * (an rlimit, the pids limit, a capability taken out, a device taken out
 * of the OCI list) it fails where it needs that setting, which the
 * workload's own message shows.  --format compose is read back by a real
 * compose parser (docker-compose config).
 *
 * Without systemd in the guest, podman runs with cgroupfs and a file for
 * its events (a containers.conf in CONTAINERS_CONF, which highwater's own
 * podman inspect reads too); the containers run with podman's default
 * seccomp profile, as users' do.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stddef.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

#define NAME "hw-test-c1"
#define IMAGE "localhost/highwater-test-busybox"

static char out[1 << 16], err[1 << 16];

/* sh -c, output in out and err; a failure is shown */
static int sh(const char *cmd)
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
 * podman as @image.
 */
static int make_image(const char *dir, const char *progs, const char *setup, const char *image)
{
	int status = spawn_sh(out, sizeof(out), err, sizeof(err),
			      "set -e; r=%s; rm -rf $r; mkdir -p $r/bin $r/etc $r/tmp $r/dev $r/proc $r/sys $r/run; "
			      "cp /bin/busybox $r/bin/; "
			      "for c in sh sleep touch chown; do ln -s busybox $r/bin/$c; done; "
			      ": > $r/etc/passwd; : > $r/etc/group; "
			      "for p in %s; do from=${p%%%%:*} to=${p#*:}; mkdir -p $r${to%%/*}; cp $from $r$to; "
			      "  for l in $(ldd $from | grep -o '/[^ ]*'); do "
			      "    mkdir -p $r${l%%/*}; cp -L $l $r$l; done; done\n%s\n"
			      "tar -C $r -cf $r.tar .; podman import -q $r.tar %s; rm $r.tar",
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
static int cgroup_device_bpf(void)
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

static int highwater(const char *format, const char *name)
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
static int formats_of(struct workload *w)
{
	static const struct {
		const char *format;
		size_t offset;
	} formats[] = {
		{ "docker", offsetof(struct workload, docker) },
		{ "oci", offsetof(struct workload, oci) },
		{ "compose", offsetof(struct workload, compose) },
	};

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		int status = highwater(formats[i].format, w->name);

		tap_ok(!status && strlen(out) < sizeof(w->docker),
		       "highwater container -f %s %s (%.200s)", formats[i].format, w->name, err);
		if (status || strlen(out) >= sizeof(w->docker))
			return -1;
		snprintf((char *)w + formats[i].offset, sizeof(w->docker), "%s", out);
	}
	return 0;
}

/* It failed where it should: what it says for @setting is in err */
static bool failed_at(const struct workload *w, const char *setting)
{
	for (const struct step *s = w->steps; s->setting; s++)
		if (!strcmp(s->setting, setting))
			return strstr(err, s->says) != NULL;
	tap_diag("%s: no step for %s", w->name, setting);
	return false;
}

/* The last @n bytes of @s: where a failing run says why */
static const char *tail(const char *s, size_t n)
{
	size_t len = strlen(s);

	return len > n ? s + len - n : s;
}

/* A server's run starts with nothing answering on its port (it would pass for it) */
#define PORT_FREE \
	"! ab -q -n 1 -s 2 http://127.0.0.1/ >/dev/null 2>&1 || { echo port 80 is taken; exit 2; }; "

/* The workload again, fresh, in podman with @flags: 0 when it ran to the end */
static int workload_with(const struct workload *w, const char *flags)
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
 * The closed loop with podman: the workload, run again in a new container
 * with the flags --format docker gave, passes; with each flag set just
 * below the peak it came from (a --ulimit to its peak less one,
 * --pids-limit likewise, a --cap-add taken out), it fails.  --memory is
 * left as it is: a container's memory varies from run to run by more.
 */
static void closed_loop(const struct workload *w, const struct hw_marks *m)
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
static int crun_with(const struct workload *w, const char *fragment, const char *change)
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
static void closed_loop_oci(const struct workload *w, const struct hw_marks *m)
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
 * A container that has exited: its own cgroup went with it, but the marks
 * of a removed cgroup stay in its parent.  The container, run with a
 * parent cgroup of its own, exits; highwater cgroup reads the parent:
 * the descriptor at 100, the chown's CAP_CHOWN and nothing else.
 */
static void exited_container(void)
{
	struct hw_marks m;
	int status;

	status = sh("podman run --rm --network none --cgroup-parent=/hw-test-parent " IMAGE
		    " sh -c 'touch /tmp/f; chown 1234 /tmp/f; exec 100</dev/null'");
	hw_marks_init(&m);
	if (!status)
		status = spawn_capture((char *[]){ (char *)built("highwater"), "cgroup", "-f", "json",
						   "/hw-test-parent", NULL },
				       out, sizeof(out), err, sizeof(err));
	if (!status)
		status = hw_json_read(out, &m, err, sizeof(err));
	tap_ok(!status && m.lim[hw_limit_index("nofile")].peak == 101 && m.cap_used == 1ULL << 0 &&
	       m.pids_peak >= 2 && access("/sys/fs/cgroup/hw-test-parent/cgroup.procs", F_OK) == 0,
	       "a container that exited, from a parent cgroup of its own: open files 101, CAP_CHOWN, "
	       "%llu tasks (%.200s)", (unsigned long long)m.pids_peak, err);
	if (rmdir("/sys/fs/cgroup/hw-test-parent"))
		tap_diag("rmdir /sys/fs/cgroup/hw-test-parent: %s", strerror(errno));

	/* Without a cgroup of its own, its caller's marks would be taken for its own */
	status = sh("podman run -d --name hw-test-c2 --network none --cgroups=disabled " IMAGE
		    " sleep 600");
	if (!status)
		status = highwater("text", "hw-test-c2");
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_UNAVAILABLE &&
	       strstr(err, "has no cgroup of its own"),
	       "a container run with --cgroups=disabled: exit 69, it has no cgroup of its own (%.300s)",
	       err);
	sh("podman rm -f -t 0 hw-test-c2");
}

/*
 * highwater run -- podman run: the container's processes live in the
 * container's cgroup, and conmon moves to one of its own.  The report says
 * that processes left, where the first went and how to report on it, and
 * sets no rlimit and no bounding set: the container took podman's along.
 */
static void run_podman(void)
{
	struct hw_marks m;
	bool noted = false;
	int status;

	status = spawn_capture((char *[]){ (char *)built("highwater"), "run", "-f", "json",
					   "-o", "/tmp/hw-run-podman.json", "--", "podman", "run",
					   "--rm", "--network", "none", IMAGE, "sh", "-c", ":", NULL },
			       out, sizeof(out), err, sizeof(err));
	hw_marks_init(&m);
	if (hw_read_file("/tmp/hw-run-podman.json", out, sizeof(out)) < 0 ||
	    hw_json_read(out, &m, err, sizeof(err)))
		tap_diag("no report: %.300s", err);
	for (int i = 0; i < m.nnotes; i++)
		noted |= strstr(m.notes[i], "left the workload's cgroup") &&
			 strstr(m.notes[i], "highwater container NAME");
	if (!noted || status)
		for (int i = 0; i < m.nnotes; i++)
			tap_diag("status %#x, note: %s", status, m.notes[i]);
	tap_ok(!status && m.moved_out >= 1 && noted && hw_caps_not_derived(&m) &&
	       !hw_limit_advice(&m, hw_limit_index("nofile"), 25).emit,
	       "highwater run -- podman run: %llu processes moved out, said so, no rlimit or bounding set",
	       (unsigned long long)m.moved_out);
	unlink("/tmp/hw-run-podman.json");
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
static void compose_check(const struct workload *w)
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

/*
 * The project's demo workload in a container, profiled, then run again
 * under what --format docker and --format oci give for it.  In podman's
 * defaults it stops at its last step: nice -5 needs CAP_SYS_NICE or an
 * RLIMIT_NICE of 25, and a container has neither; every other step ran,
 * and the report says what the last needs (the refusal's peak).
 */
static void demo_loops(void)
{
	static struct workload w = {
		.name = "hw-test-demo", .image = "localhost/highwater-test-demo",
		.rootfs = "/tmp/hw-demo-root", .cmd = "demo -q && echo done",
		.steps = {
			{ "nofile", "demo: opening descriptors: Too many open files" },
			{ "memlock", "demo: mlock: " },
			{ "msgqueue", "demo: mq_open: " },
			{ "nice", "demo: setpriority to nice -5: Permission denied" },
			{ "pids", "demo: forking children: Resource temporarily unavailable" },
			{ "NET_BIND_SERVICE", "demo: binding port 80: Permission denied" },
		},
	};
	int nice = hw_limit_index("nice"), status, found = 0;
	bool refused;
	char progs[PATH_MAX + 16];
	struct hw_marks m;
	time_t t0;

	snprintf(progs, sizeof(progs), "%s:/bin/demo", built("workloads/demo"));
	tap_ok(!make_image(w.rootfs, progs, "", w.image),
	       "podman imports an image of the demo workload (%.200s)", err);
	status = sh("podman run -d --name hw-test-demo --network none "
		    "localhost/highwater-test-demo sh -c 'demo -q; sleep 600'");
	for (t0 = time(NULL); !status && !found && time(NULL) - t0 < 60; usleep(200000)) {
		if (highwater("json", w.name))
			continue;
		hw_marks_init(&m);
		found = !hw_json_read(out, &m, err, sizeof(err)) && m.lim[nice].peak == 25;
	}
	sh("podman logs hw-test-demo 2>&1");
	refused = strstr(out, "setpriority to nice -5: Permission denied");
	tap_ok(found && m.lim[hw_limit_index("nofile")].peak == 203 &&
	       m.lim[hw_limit_index("memlock")].peak == 64 << 10 && m.pids_peak == 10 &&
	       m.cap_used == 1ULL << 10 && !m.lim[nice].soft &&
	       refused,
	       "the demo in podman's defaults: every step, refused at nice -5 (peak 25, limit 0): "
	       "nofile 203, memlock 64K, 10 tasks (sh, the demo, 8 children), CAP_NET_BIND_SERVICE (%.200s)",
	       out);
	if (found && !formats_of(&w)) {
		compose_check(&w);
		closed_loop(&w, &m);
		closed_loop_oci(&w, &m);
	}
	sh("podman rm -f -t 0 hw-test-demo");
	tap_ok(!sh("podman rmi -f localhost/highwater-test-demo"), "the demo's container and image are removed");
}

/*
 * nginx from the host's package in a container of its own: its binary and
 * libraries, a configuration with one worker (so a reload's overlap is one
 * process) serving a file on port 80 of the host's network, as root with
 * its workers as www-data.  The load: ab with 20 connections kept alive
 * (so the worker holds all 20 at once: the descriptors' peak is the same
 * in every run), a reload, and ab again.
 */
#define NGINX_LOAD \
	"i=0; until ab -q -n 1 -s 2 http://127.0.0.1/ >/dev/null 2>&1; do " \
	"  $logs 2>&1 | grep -q '\\[emerg\\]' && { echo nginx stopped at an error; exit 1; }; " \
	"  i=$((i + 1)); [ $i -lt 50 ] || { echo nginx did not answer; exit 1; }; sleep 0.2; done; " \
	"load() { ab -k -c 20 -n 1000 -s 10 http://127.0.0.1/ >/tmp/hw-ab.out 2>&1; " \
	"  grep -q \"^Complete requests: *1000\" /tmp/hw-ab.out && " \
	"  grep -q \"^Failed requests: *0\" /tmp/hw-ab.out && " \
	"  ! grep -q \"^Non-2xx responses\" /tmp/hw-ab.out || { cat /tmp/hw-ab.out; return 1; }; }; " \
	"load && $reload && sleep 2 && load"

static void nginx_loops(void)
{
	static struct workload w = {
		.name = "hw-test-nginx", .image = "localhost/highwater-test-nginx",
		.rootfs = "/tmp/hw-nginx-root", .cmd = "exec /usr/sbin/nginx -g \"daemon off;\"",
		.load = NGINX_LOAD,
		.steps = {
			{ "nofile", "failed (24: Too many open files)" },
			{ "pids", "fork() failed while spawning \"worker process\" (11: Resource temporarily unavailable)" },
			{ "NET_BIND_SERVICE", "bind() to 0.0.0.0:80 failed (13: Permission denied)" },
			{ "SETUID", "setuid(33) failed (1: Operation not permitted)" },
			{ "SETGID", "setgid(33) failed (1: Operation not permitted)" },
			{ "CHOWN", "chown(\"/var/lib/nginx/body\", 33) failed (1: Operation not permitted)" },
		},
	};
	int status;
	struct hw_marks m;

	status = make_image(w.rootfs, "/usr/sbin/nginx:/usr/sbin/nginx",
			    "mkdir -p $r/etc/nginx $r/var/lib/nginx $r/var/log/nginx $r/srv; "
			    "printf 'root:x:0:0::/root:/bin/sh\\nwww-data:x:33:33::/var/www:/bin/false\\n' > $r/etc/passwd; "
			    "printf 'root:x:0:\\nwww-data:x:33:\\n' > $r/etc/group; "
			    "echo hello > $r/srv/index.html; "
			    "printf 'user www-data;\\nworker_processes 1;\\npid /run/nginx.pid;\\n"
			    "events { worker_connections 64; }\\n"
			    "http { access_log off; server { listen 80; root /srv; } }\\n' > $r/etc/nginx/nginx.conf",
			    w.image);
	tap_ok(!status, "podman imports an image of the host's nginx (%.200s)", err);
	if (status)
		return;
	status = spawn_sh(out, sizeof(out), err, sizeof(err),
			  "podman run -d --name %s --network host %s sh -c '%s' && "
			  "reload='podman kill -s HUP %s' logs='podman logs %s' && ( %s ) >&2",
			  w.name, w.image, w.cmd, w.name, w.name, w.load);
	hw_marks_init(&m);
	if (!status && !highwater("json", w.name))
		status = hw_json_read(out, &m, err, sizeof(err));
	else
		status = status ? status : -1;
	tap_ok(!status && m.lim[hw_limit_index("nofile")].peak >= 23 && m.pids_peak == 3 &&
	       (m.cap_used & (1ULL << 10 | 1ULL << 6 | 1ULL << 7)) == (1ULL << 10 | 1ULL << 6 | 1ULL << 7),
	       "nginx in podman's defaults under ab and a reload: open files %llu (20 connections and "
	       "its own), 3 tasks (a reload's overlap), CAP_NET_BIND_SERVICE, CAP_SETUID and CAP_SETGID "
	       "among %#llx (%.300s)",
	       (unsigned long long)m.lim[hw_limit_index("nofile")].peak,
	       (unsigned long long)m.cap_used, err);
	status = status || formats_of(&w);
	/* it holds port 80: gone before the loops start their own */
	sh("podman rm -f -t 0 hw-test-nginx");
	if (!status) {
		compose_check(&w);
		closed_loop(&w, &m);
		closed_loop_oci(&w, &m);
	}
	tap_ok(!sh("podman rmi -f localhost/highwater-test-nginx"), "nginx's container and image are removed");
}

int main(void)
{
	int status, found = 0;
	struct hw_marks m;
	time_t t0;

	/* The plan at the end: the closed loop has a test per flag */
	printf("TAP version 13\n");
	if (access("/usr/bin/podman", X_OK) || access("/bin/busybox", X_OK) ||
	    !cgroup_device_bpf()) {
		printf("1..1\nok 1 # SKIP %s\n", access("/usr/bin/podman", X_OK) ||
		       access("/bin/busybox", X_OK) ? "podman or busybox-static is not installed" :
		       "no cgroup BPF in this kernel: crun cannot allow a container's devices");
		return 0;
	}
	if (sh("printf '[engine]\\ncgroup_manager = \"cgroupfs\"\\nevents_logger = \"file\"\\n' "
	       "> /tmp/hw-containers.conf") ||
	    setenv("CONTAINERS_CONF", "/tmp/hw-containers.conf", 1))
		return 1;
	tap_ok(!make_image("/tmp/hw-rootfs", "", "", IMAGE), "podman imports an image of busybox (%.200s)",
	       err);

	/*
	 * The container: a child that uses CAP_CHOWN and exits, a descriptor
	 * at 100 in the main process (nofile peak 101), then a long sleep.
	 */
	status = sh("podman run -d --name " NAME " --network none "
		    IMAGE " sh -c 'touch /tmp/f; chown 1234 /tmp/f; exec 100</dev/null; "
		    "echo ready > /tmp/ready; sleep 600'");
	tap_ok(!status, "podman run -d starts the container (crun)");

	/* Ready once the descriptor is open: podman exec would add a process. */
	for (t0 = time(NULL); !found && time(NULL) - t0 < 60; usleep(200000)) {
		if (highwater("json", NAME))
			continue;
		memset(&m, 0, sizeof(m));
		found = !hw_json_read(out, &m, err, sizeof(err)) &&
			m.lim[hw_limit_index("nofile")].peak == 101;
	}
	tap_ok(found, "highwater container %s: open files peak 101, the descriptor at 100 (%.200s)",
	       NAME, found ? "" : err);
	tap_ok(found && m.cap_used == (1ULL << 0),
	       "capabilities used: exactly CAP_CHOWN (%#llx), the exited chown's, kept in the container's cgroup",
	       (unsigned long long)m.cap_used);
	status = highwater("text", NAME);
	tap_ok(!status && strstr(out, "container " NAME " (podman)") &&
	       strstr(out, "\ncgroup: /libpod_parent/libpod-"),
	       "the text report names the container and its cgroup");
	status = highwater("docker", NAME);
	tap_ok(!status && strstr(out, "--cap-drop=ALL") && strstr(out, "--cap-add=CHOWN") &&
	       strstr(out, "--ulimit nofile="),
	       "--format docker: --cap-drop=ALL --cap-add=CHOWN and an open files --ulimit");

	status = highwater("text", "hw-test-no-such-container");
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_NOINPUT &&
	       strstr(err, "no container hw-test-no-such-container"),
	       "a container that does not exist: exit 66 and why (%.200s)", err);

	sh("podman stop -t 0 " NAME);
	status = highwater("text", NAME);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_NOINPUT &&
	       strstr(err, "is not running") && strstr(err, "--cgroup-parent=/NAME"),
	       "a stopped container: exit 66, it is not running and its cgroup went with it (%.200s)",
	       err);
	sh("podman rm -f " NAME);
	exited_container();
	run_podman();
	tap_ok(!sh("podman rmi -f " IMAGE), "the container and its image are removed");
	demo_loops();
	nginx_loops();
	printf("1..%d\n", tap_n);
	return tap_exit();
}
