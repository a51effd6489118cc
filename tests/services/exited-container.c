// SPDX-License-Identifier: GPL-2.0
/*
 * A container that has exited, under systemd's cgroup manager (podman's
 * default where systemd runs): its scope, and the cgroup with it, went,
 * but a slice given as its parent (--cgroup-parent=NAME.slice) stays, and
 * keeps the marks of the removed cgroup below it.  highwater cgroup reads
 * them: the descriptor at 100 and the chown's CAP_CHOWN, after the
 * container is gone.  (With cgroupfs, the same is checked in the plain
 * boot: tests/guest/highwater-container.c.)
 */
#define _GNU_SOURCE
#include "containers.h"

#define IMAGE "localhost/highwater-test-exited"
#define SLICE "hwexited.slice"

int main(void)
{
	struct hw_marks m;
	int status;

	printf("TAP version 13\n");
	if (access("/usr/bin/podman", X_OK) || access("/bin/busybox", X_OK)) {
		printf("1..1\nok 1 # SKIP podman or busybox-static is not installed\n");
		return 0;
	}
	tap_ok(!make_image("/tmp/hw-exited-root", "", "", IMAGE), "podman imports an image of busybox");
	status = exited_container_marks(IMAGE, SLICE, SLICE, &m);
	tap_ok(!status && m.lim[hw_limit_index("nofile")].peak == 101 && m.cap_used == 1ULL << 0 &&
	       m.pids_peak >= 2,
	       "the container exited; highwater cgroup " SLICE ": open files 101, CAP_CHOWN, %llu tasks (%.200s)",
	       (unsigned long long)m.pids_peak, err);
	tap_ok(!sh("podman rmi -f " IMAGE " && systemctl stop " SLICE),
	       "the image is removed and the slice stopped");
	printf("1..%d\n", tap_n);
	return tap_exit();
}
