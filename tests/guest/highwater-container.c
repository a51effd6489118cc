// SPDX-License-Identifier: GPL-2.0
/*
 * highwater container: a podman container (crun, Debian's packages) in the
 * guest, from an image imported from a busybox root file system, whose
 * processes spike their descriptors and use CAP_CHOWN, one of them exiting
 * before the report.  highwater container NAME finds its cgroup through
 * podman inspect and reports exactly those marks, in its formats; a
 * container that does not exist, or no longer runs, gets an error that says
 * so.
 *
 * Without systemd in the guest, podman runs with cgroupfs and a file for
 * its events (a containers.conf in CONTAINERS_CONF, which highwater's own
 * podman inspect reads too), and the guest kernel has no seccomp: the
 * container runs with --security-opt seccomp=unconfined.
 */
#define _GNU_SOURCE
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

/* An image of busybox alone, imported from a tar of its root file system. */
static int make_image(void)
{
	return sh("set -e; r=/tmp/hw-rootfs; rm -rf $r; mkdir -p $r/bin $r/etc $r/tmp "
		  "$r/dev $r/proc $r/sys $r/run; cp /bin/busybox $r/bin/; "
		  "for c in sh sleep touch chown; do ln -s busybox $r/bin/$c; done; "
		  ": > $r/etc/passwd; : > $r/etc/group; "
		  "tar -C $r -cf /tmp/hw-rootfs.tar .; podman import -q /tmp/hw-rootfs.tar " IMAGE);
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

/* The workload again, fresh, with @flags: its status (0: it ran to the end) */
static int workload_with(const char *flags)
{
	return spawn_sh(out, sizeof(out), err, sizeof(err),
			"podman run --rm --network none --security-opt seccomp=unconfined %s " IMAGE
			" sh -c 'touch /tmp/f && chown 1234 /tmp/f && exec 100</dev/null && echo done' "
			"| grep -qx done", flags);
}

/*
 * The closed loop with podman: the container's workload, run again in a new
 * container with the flags --format docker gave, passes; with each flag set
 * just below the peak it came from (a --ulimit to its peak less one,
 * --pids-limit likewise, a --cap-add taken out), it fails.  --memory is
 * left as it is: a container's memory varies from run to run by more.
 */
static void closed_loop(const struct hw_marks *m)
{
	static char text[sizeof(out)];
	char flags[8192] = "", *flag[64], repl[512];
	int n = 0;
	size_t len = 0;

	if (highwater("docker", NAME)) {
		tap_ok(0, "highwater container -f docker %s (%.200s)", NAME, err);
		return;
	}
	snprintf(text, sizeof(text), "%s", out);
	for (char *l = strtok(text, "\n"); l && n < 64; l = strtok(NULL, "\n")) {
		if (*l == '#')
			continue;
		l[strcspn(l, "\\")] = '\0';	/* " \" continues the line */
		flag[n++] = l;
		len += snprintf(flags + len, sizeof(flags) - len, "%s ", l);
	}
	tap_ok(n > 0 && !workload_with(flags), "podman run with the flags: the workload passes (%s)",
	       flags);
	for (int i = 0; i < n; i++) {
		char others[8192] = "", key[32];
		unsigned long long v;
		size_t ol = 0;
		int li;

		if (sscanf(flag[i], "--ulimit %31[a-z]=%llu", key, &v) == 2 &&
		    (li = hw_limit_index(key)) >= 0 && m->lim[li].peak)
			snprintf(repl, sizeof(repl), "--ulimit %s=%llu:%llu", key,
				 (unsigned long long)m->lim[li].peak - 1,
				 (unsigned long long)m->lim[li].peak - 1);
		else if (!strncmp(flag[i], "--pids-limit=", 13) && m->pids_peak > 1)
			snprintf(repl, sizeof(repl), "--pids-limit=%llu",
				 (unsigned long long)m->pids_peak - 1);
		else if (!strncmp(flag[i], "--cap-drop=ALL", 14))
			repl[0] = '\0';	/* below: each --cap-add taken out in turn */
		else
			continue;
		if (!repl[0]) {
			for (const char *c = strstr(flag[i], "--cap-add="); c;
			     c = strstr(c + 1, "--cap-add=")) {
				size_t w = strcspn(c, " ");

				/* the flag without this --cap-add */
				snprintf(repl, sizeof(repl), "%.*s%s", (int)(c - flag[i]), flag[i],
					 c + w + (c[w] == ' '));
				ol = 0;
				for (int j = 0; j < n; j++)
					ol += snprintf(others + ol, sizeof(others) - ol, "%s ",
						       j == i ? repl : flag[j]);
				tap_ok(workload_with(others) != 0,
				       "podman run without %.*s: the workload fails", (int)w, c);
			}
			continue;
		}
		for (int j = 0; j < n; j++)
			ol += snprintf(others + ol, sizeof(others) - ol, "%s ", j == i ? repl : flag[j]);
		tap_ok(workload_with(others) != 0, "podman run with %s instead of %s: the workload fails",
		       repl, flag[i]);
	}
}

/*
 * The workload in a bundle of crun's own: `crun spec`'s config.json with
 * the fragment at @fragment merged in by jq (objects merged, the
 * fragment's arrays and values in place of the template's), the busybox
 * root file system writable, then the fragment changed by the jq program
 * @change ("." for none).  Its status: 0 when the workload ran to the end.
 */
static int crun_with(const char *fragment, const char *change)
{
	return spawn_sh(out, sizeof(out), err, sizeof(err),
			"set -e; b=/tmp/hw-bundle; rm -rf $b; mkdir -p $b; cp -a /tmp/hw-rootfs $b/rootfs; "
			"cd $b; crun spec; jq '%s' %s > frag.json; "
			"jq -s '.[0] * .[1] | .process.terminal = false | .root.readonly = false | "
			".process.args = [\"sh\", \"-c\", \"touch /tmp/f && chown 1234 /tmp/f && "
			"exec 100</dev/null && echo done\"]' config.json frag.json > merged.json; "
			"mv merged.json config.json; crun delete -f hw-crun-loop 2>/dev/null || :; "
			"crun run --bundle $b hw-crun-loop | grep -qx done",
			change, fragment);
}

/*
 * The closed loop with crun and --format oci: the workload passes with the
 * fragment, and fails with the open files rlimit, the pids limit and each
 * capability just below what they came from.
 */
static void closed_loop_oci(const struct hw_marks *m)
{
	const char *frag = "/tmp/hw-oci.json";
	char change[256];
	FILE *f;
	int status;

	if (highwater("oci", NAME) || !(f = fopen(frag, "w"))) {
		tap_ok(0, "highwater container -f oci %s (%.200s)", NAME, err);
		return;
	}
	fputs(out, f);
	fclose(f);
	status = crun_with(frag, ".");
	tap_ok(!status, "crun run with the OCI fragment merged into crun spec's: the workload passes (%.300s)",
	       err);
	snprintf(change, sizeof(change),
		 ".process.rlimits |= map(if .type == \"RLIMIT_NOFILE\" then .soft = %llu | .hard = %llu else . end)",
		 (unsigned long long)m->lim[hw_limit_index("nofile")].peak - 1,
		 (unsigned long long)m->lim[hw_limit_index("nofile")].peak - 1);
	tap_ok(crun_with(frag, change) != 0, "crun run with RLIMIT_NOFILE at the peak less one: fails");
	snprintf(change, sizeof(change), ".linux.resources.pids.limit = %llu",
		 (unsigned long long)m->pids_peak - 1);
	tap_ok(m->pids_peak > 1 && crun_with(frag, change) != 0,
	       "crun run with pids.limit %llu, the peak less one: fails",
	       (unsigned long long)m->pids_peak - 1);
	for (int c = 0; c <= HW_CAP_LAST; c++) {
		if (!(m->cap_used & (1ULL << c)))
			continue;
		snprintf(change, sizeof(change),
			 ".process.capabilities |= map_values(map(select(. != \"%s\")))",
			 hw_cap_name(c));
		tap_ok(crun_with(frag, change) != 0, "crun run without %s in any set: fails",
		       hw_cap_name(c));
	}
	unlink(frag);
	sh("rm -rf /tmp/hw-bundle");
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
					   "--rm", "--network", "none", "--security-opt",
					   "seccomp=unconfined", IMAGE, "sh", "-c", ":", NULL },
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
	tap_ok(!make_image(), "podman imports an image of busybox");

	/*
	 * The container: a child that uses CAP_CHOWN and exits, a descriptor
	 * at 100 in the main process (nofile peak 101), then a long sleep.
	 */
	status = sh("podman run -d --name " NAME " --network none --security-opt seccomp=unconfined "
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
	closed_loop(&m);
	closed_loop_oci(&m);

	status = highwater("text", "hw-test-no-such-container");
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_NOINPUT &&
	       strstr(err, "no container hw-test-no-such-container"),
	       "a container that does not exist: exit 66 and why (%.200s)", err);

	sh("podman stop -t 0 " NAME);
	status = highwater("text", NAME);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_NOINPUT &&
	       strstr(err, "is not running"),
	       "a stopped container: exit 66, it is not running and its cgroup went with it (%.200s)",
	       err);
	sh("podman rm -f " NAME);
	run_podman();
	tap_ok(!sh("podman rmi -f " IMAGE), "the container and its image are removed");
	printf("1..%d\n", tap_n);
	return tap_exit();
}
