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
#include "containers.h"

#define NAME "hw-test-c1"
#define IMAGE "localhost/highwater-test-busybox"

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

	status = exited_container_marks(IMAGE, "/hw-test-parent", "/hw-test-parent", &m);
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
	if (found && !advice_checked_elsewhere(&w) && !formats_of(&w)) {
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
	status = status || advice_checked_elsewhere(&w) || formats_of(&w);
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
