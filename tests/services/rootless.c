// SPDX-License-Identifier: GPL-2.0
/*
 * Rootless podman: a user's container under the user's own systemd
 * (user@UID.service, lingering, its cgroup delegated), as a desktop or a
 * CI runner starts them.  Its root is the user's uid outside and holds its
 * capabilities in the container's user namespace only; a capability it
 * uses there is one the container needs (--cap-add), as for a rootful one.
 *
 * Run as root, this program makes the user (with subordinate ids, from
 * useradd, or given here where it gives none), gives its container storage a file system of its own (podman's
 * overlay driver refuses the guest's overlay root), lets it linger, and
 * runs itself again as the user, with the user's runtime directory and
 * bus.  As the user: a busybox container that opens a descriptor at 100
 * and chowns a file (CAP_CHOWN) is profiled with highwater container, found
 * in its cgroup under user@UID.service, then run again under the flags
 * --format docker gave: it passes, and fails with each just below its
 * peak.
 */
#define _GNU_SOURCE
#include <pwd.h>

#include "containers.h"

#define USER "hw-rootless"
#define IMAGE "localhost/highwater-test-rootless"

/* As root: the user, its storage and its systemd; 0 or the failure said */
static int make_user(struct passwd **pw)
{
	char cmd[512];

	if (sh("id " USER " >/dev/null 2>&1 || useradd -m -s /bin/sh " USER) ||
	    !(*pw = getpwnam(USER)))
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "set -e; grep -q '^" USER ":' /etc/subuid && grep -q '^" USER ":' /etc/subgid || "
		 "usermod --add-subuids 200000-265535 --add-subgids 200000-265535 " USER "; "
		 "d=%s/.local/share/containers; "
		 "mkdir -p $d; mountpoint -q $d || mount -t tmpfs -o mode=0700 hw-rootless $d; "
		 "chown -R " USER ": %s/.local; loginctl enable-linger " USER "; "
		 "for i in $(seq 120); do [ -S /run/user/%u/bus ] && exit 0; sleep 0.5; done; "
		 "echo no bus for " USER "; exit 1",
		 (*pw)->pw_dir, (*pw)->pw_dir, (unsigned)(*pw)->pw_uid);
	return sh(cmd);
}

static void as_user(void)
{
	static struct workload w = {
		.name = "hw-rootless-c1", .image = IMAGE, .rootfs = "/tmp/hw-rootless-root",
		.cmd = "touch /tmp/f && chown 1234 /tmp/f && exec 100</dev/null && echo done",
		.steps = {
			{ "nofile", "sh: 3: Bad file descriptor" },
			{ "pids", "can't fork" },
			{ "CHOWN", "chown: /tmp/f: Operation not permitted" },
		},
	};
	char want[128];
	struct hw_marks m;
	int status, found = 0;
	time_t t0;

	printf("TAP version 13\n");
	tap_ok(!make_image(w.rootfs, "", "", w.image), "the user's podman imports an image of busybox");
	status = sh("podman run -d --name hw-rootless-c1 --network none " IMAGE
		    " sh -c 'touch /tmp/f; chown 1234 /tmp/f; exec 100</dev/null; sleep 600'");
	tap_ok(!status, "podman run -d, rootless, starts the container");
	for (t0 = time(NULL); !status && !found && time(NULL) - t0 < 60; usleep(200000)) {
		if (highwater("json", w.name))
			continue;
		hw_marks_init(&m);
		found = !hw_json_read(out, &m, err, sizeof(err)) &&
			m.lim[hw_limit_index("nofile")].peak == 101;
	}
	tap_ok(found && m.cap_used == 1ULL << 0,
	       "highwater container as the user: open files 101, capabilities used exactly CAP_CHOWN "
	       "(%#llx; used in the container's user namespace) (%.200s)",
	       (unsigned long long)m.cap_used, found ? "" : err);
	snprintf(want, sizeof(want), "\ncgroup: /user.slice/user-%u.slice/user@%u.service/",
		 (unsigned)getuid(), (unsigned)getuid());
	status = highwater("text", w.name);
	tap_ok(!status && strstr(out, want) && strstr(out, "libpod-"),
	       "its cgroup is the container's own, under the user's systemd (%.300s)", out);
	if (found && !formats_of(&w))
		closed_loop(&w, &m);
	sh("podman rm -f -t 0 hw-rootless-c1");
	tap_ok(!sh("podman rmi -f " IMAGE), "the container and its image are removed");
	printf("1..%d\n", tap_n);
	exit(tap_exit());
}

int main(int argc, char **argv)
{
	char runtime[64], bus[96], home[PATH_MAX + 8], self[PATH_MAX];
	struct passwd *pw;
	ssize_t n;

	if (argc > 1 && !strcmp(argv[1], "--as-user"))
		as_user();
	if (access("/usr/bin/podman", X_OK) || access("/usr/bin/newuidmap", X_OK) ||
	    access("/bin/busybox", X_OK)) {
		printf("TAP version 13\n1..1\nok 1 # SKIP podman, uidmap or busybox-static is not installed\n");
		return 0;
	}
	if (make_user(&pw)) {
		printf("TAP version 13\n1..1\nnot ok 1 the user " USER " for rootless podman: %s\n",
		       tail(err, 300));
		return 1;
	}
	snprintf(runtime, sizeof(runtime), "XDG_RUNTIME_DIR=/run/user/%u", (unsigned)pw->pw_uid);
	snprintf(bus, sizeof(bus), "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/%u/bus",
		 (unsigned)pw->pw_uid);
	snprintf(home, sizeof(home), "HOME=%s", pw->pw_dir);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	fflush(stdout);
	/* the user's containers are made in its own directories: start there */
	if (chdir(pw->pw_dir))
		perror(pw->pw_dir);
	execlp("runuser", "runuser", "-u", USER, "--", "env", runtime, bus, home,
	       self, "--as-user", (char *)NULL);
	printf("TAP version 13\n1..1\nnot ok 1 runuser: %s\n", strerror(errno));
	return 1;
}
