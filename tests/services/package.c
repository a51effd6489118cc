// SPDX-License-Identifier: GPL-2.0
/*
 * The highwater package (contrib/build-deb, debian/), installed in the
 * systemd guest with apt as a user would (apt install ./highwater_*.deb:
 * apt checks its dependencies against what the system has and needs no
 * network; not --no-download, with which apt 2.6 hands dpkg the bare file
 * name, "Pathname to install is not absolute"): the command and its man page
 * where Debian puts them, and the installed command reading a running
 * unit.  Removed at the end: the service tests that follow see the system
 * as shipped.
 *
 * Then the patched kernel's linux-image and linux-headers packages, when
 * make deb made them (vm/build-debian --packages; CI does not): installed
 * with apt as on a test machine, an out-of-tree module built against the
 * installed headers (kbuild, modpost against their Module.symvers), and
 * both removed.
 */
#define _GNU_SOURCE
#include <glob.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

static char out[1 << 16], err[1 << 16];

#define PEAK(m, key) ((long long)(m).lim[hw_limit_index(key)].peak)

/* sh -c of a printf-made command, output in out and err */
#define sh(...) spawn_sh(out, sizeof(out), err, sizeof(err), __VA_ARGS__)

/*
 * An out-of-tree module calling a helper the series exports: modpost finds
 * it in the installed headers' Module.symvers, or the build fails.
 */
static const char module_c[] =
	"#include <linux/module.h>\n#include <linux/cred.h>\n#include <linux/sched/user.h>\n"
	"static int __init hw_init(void)\n{\n"
	"\treturn user_charge_locked_vm(current_user(), current, 0, false) ? 0 : -ENOMEM;\n}\n"
	"module_init(hw_init);\nMODULE_LICENSE(\"GPL\");\n";

static void kernel_packages(void)
{
	char cmd[2 * PATH_MAX + 256], debs[PATH_MAX], release[128], *p;
	const char *img, *hdr;
	glob_t g, h;

	snprintf(cmd, sizeof(cmd), "%s/linux-image-*-highwater_*.deb",
		 realpath(built("deb"), debs) ?: "?");
	if (glob(cmd, 0, NULL, &g) || g.gl_pathc != 1) {
		tap_ok(1, "# SKIP no kernel packages in build/deb (make deb makes them)");
		return;
	}
	snprintf(cmd, sizeof(cmd), "%s/linux-headers-*-highwater_*.deb", debs);
	if (glob(cmd, 0, NULL, &h) || h.gl_pathc != 1) {
		tap_ok(0, "one linux-headers package beside %s", g.gl_pathv[0]);
		globfree(&g);
		return;
	}
	img = g.gl_pathv[0], hdr = h.gl_pathv[0];
	/* linux-image-RELEASE_VERSION_ARCH.deb */
	snprintf(release, sizeof(release), "%s", strstr(img, "linux-image-") + 12);
	p = strchr(release, '_');
	if (p)
		*p = '\0';
	snprintf(cmd, sizeof(cmd), "apt-get install -y %s %s", img, hdr);
	tap_ok(!sh("%s", cmd), "apt-get install the kernel's packages (%.300s)", err);
	tap_ok(!sh("cmp /boot/vmlinuz-%s %s", release, built("debian.bzImage")),
	       "/boot/vmlinuz-%s is build/debian.bzImage, the kernel tests/debian tests (%.200s)",
	       release, out);
	tap_ok(!sh("rm -rf /tmp/hw-mod && mkdir /tmp/hw-mod && cd /tmp/hw-mod && "
		   "printf '%%s' '%s' >hw_mod.c && echo 'obj-m := hw_mod.o' >Makefile && "
		   "make -C /lib/modules/%s/build M=/tmp/hw-mod modules && test -s hw_mod.ko",
		   module_c, release),
	       "a module calling the series' user_charge_locked_vm() builds against the installed headers (%.300s)", err);
	snprintf(cmd, sizeof(cmd), "/boot/vmlinuz-%s", release);
	tap_ok(!sh("apt-get remove -y linux-image-%s linux-headers-%s", release, release) &&
	       access(cmd, F_OK), "apt-get remove removes them (%.200s)", err);
	globfree(&g);
	globfree(&h);
}

int main(void)
{
	char cmd[PATH_MAX + 64], msg[200], debs[PATH_MAX];
	struct hw_marks m;
	glob_t g;

	printf("TAP version 13\n");
	/* It installs a package: only in vm/run's guest, whose root is a tmpfs overlay */
	if (access("/run/systemd/system", F_OK) ||
	    sh("grep -q 'hw_job=' /proc/cmdline && findmnt -n -o FSTYPE / | grep -qx overlay")) {
		printf("1..1\nok 1 # SKIP not in vm/run --systemd's guest\n");
		return 0;
	}
	/* build/deb/highwater_VERSION_ARCH.deb; apt wants a path without "..". */
	snprintf(cmd, sizeof(cmd), "%s/highwater_*_*.deb", realpath(built("deb"), debs) ?: "?");
	if (glob(cmd, 0, NULL, &g) || g.gl_pathc != 1) {
		printf("1..1\nnot ok 1 one package in %s (contrib/build-deb makes it)\n", cmd);
		return 1;
	}
	/*
	 * man-db's trigger rebuilds the whole man index at each dpkg run,
	 * minutes under TCG; without its flag file it does nothing (man -w
	 * reads the directories, not the index).  The guest's overlay only.
	 */
	unlink("/var/lib/man-db/auto-update");
	snprintf(cmd, sizeof(cmd), "apt-get install -y %s", g.gl_pathv[0]);
	tap_ok(!sh("%s", cmd), "%s (%.300s)", cmd, err);
	tap_ok(!sh("/usr/bin/highwater --version") && !strncmp(out, "highwater ", 10) &&
	       !strstr(out, "unknown"), "/usr/bin/highwater --version: %.60s", out);
	tap_ok(!sh("man -w highwater") && strstr(out, "/usr/share/man/man1/highwater.1"),
	       "man -w highwater: %.100s", out);
	tap_ok(!sh("ls /usr/share/doc/highwater/examples/highwater-export.timer") &&
	       !sh("ls /usr/share/doc/highwater/examples/highwater.rules.yml"),
	       "the exporter's timer and the Prometheus rules are among the examples");
	hw_marks_init(&m);
	tap_ok(!sh("highwater unit -f json ssh.service") && !hw_json_read(out, &m, msg, sizeof(msg)) &&
	       m.have_cgroup_marks && m.have_pids_peak,
	       "the installed highwater reads ssh.service's cgroup (%s%.200s)", msg, err);
	/*
	 * From a shell in a service's cgroup, as from a login session's: the
	 * cgroup has other processes, so cgroup v2 gives the workload's no
	 * controller; the run goes on, and a note says what to do.
	 */
	hw_marks_init(&m);
	tap_ok(!sh("highwater run -f json -- sh -c 'exec 5</dev/null'") &&
	       !hw_json_read(out, &m, msg, sizeof(msg)) && m.have_limits_peak && m.have_cap_used &&
	       PEAK(m, "nofile") >= 6 && !m.have_pids_peak &&
	       hw_has_note(&m, "task peak: /system.slice/hw-job.service has other processes of its own"),
	       "the installed highwater runs a command from a cgroup with other processes: rlimit marks, no task peak, a note says what to do (%s%.200s)",
	       msg, err);
	/* As that note says: alone in a delegated scope, it moves itself aside. */
	hw_marks_init(&m);
	tap_ok(!sh("systemd-run --quiet --scope -p Delegate=yes highwater run -f json -- sh -c 'exec 5</dev/null'") &&
	       !hw_json_read(out, &m, msg, sizeof(msg)) && m.have_limits_peak &&
	       PEAK(m, "nofile") >= 6 && m.have_pids_peak && m.have_memory_peak &&
	       !hw_has_note(&m, "task peak:") && !hw_has_note(&m, "memory peak:"),
	       "under systemd-run --scope -p Delegate=yes: every mark, task and memory peaks too (%s%.200s)",
	       msg, err);
	tap_ok(!sh("apt-get remove -y highwater") && access("/usr/bin/highwater", F_OK),
	       "apt-get remove highwater removes it (%.200s)", err);
	globfree(&g);
	kernel_packages();
	printf("1..%d\n", tap_n);
	return tap_exit();
}
