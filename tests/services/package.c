// SPDX-License-Identifier: GPL-2.0
/*
 * The highwater package (contrib/build-deb, debian/), installed in the
 * systemd guest with dpkg as a user would: the command and its man page
 * where Debian puts them, and the installed command reading a running
 * unit.  Removed at the end: the service tests that follow see the system
 * as shipped.
 */
#define _GNU_SOURCE
#include <glob.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

static char out[1 << 16], err[1 << 16];

/* sh -c of a printf-made command, output in out and err */
#define sh(...) spawn_sh(out, sizeof(out), err, sizeof(err), __VA_ARGS__)

int main(void)
{
	char cmd[1024], msg[200];
	struct hw_marks m;
	glob_t g;

	printf("TAP version 13\n");
	/* It installs a package: only in vm/run's guest, whose root is a tmpfs overlay */
	if (access("/run/systemd/system", F_OK) ||
	    sh("grep -q 'hw_job=' /proc/cmdline && findmnt -n -o FSTYPE / | grep -qx overlay")) {
		printf("1..1\nok 1 # SKIP not in vm/run --systemd's guest\n");
		return 0;
	}
	/* build/deb/highwater_VERSION_ARCH.deb */
	snprintf(cmd, sizeof(cmd), "%s/highwater_*_*.deb", built("deb"));
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
	snprintf(cmd, sizeof(cmd), "dpkg -i %s", g.gl_pathv[0]);
	tap_ok(!sh("%s", cmd), "dpkg -i %s (%.300s)", g.gl_pathv[0], err);
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
	tap_ok(!sh("dpkg -r highwater") && access("/usr/bin/highwater", F_OK),
	       "dpkg -r highwater removes it");
	globfree(&g);
	printf("1..%d\n", tap_n);
	return tap_exit();
}
