// SPDX-License-Identifier: GPL-2.0
/*
 * contrib's export units on a host as Debian sets it up: highwater at
 * /usr/local/bin (as the unit says), highwater-export.service and .timer in
 * /etc/systemd/system, and Debian's prometheus-node-exporter.service, which
 * the package enables and which reads /var/lib/prometheus/node-exporter.
 * The service, under its own sandbox (ProtectSystem=strict, PrivateNetwork=
 * ...), writes every system.slice service's marks there; node_exporter
 * serves them on :9100 as they are in the file; the timer starts the
 * service again (every 5 s here, through a drop-in);
 * highwater-export-windows.service, the daemon, replaces the timer and adds
 * each service's memory and tasks peaks of the interval.  (The fleet's rules are
 * tested with three node_exporters and Prometheus in the plain boot:
 * tests/guest/highwater-fleet.c.)
 */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <time.h>

#include "containers.h"
#include "http.h"

#define TEXTFILE "/var/lib/prometheus/node-exporter/highwater.prom"

static char metrics[1 << 20], served[4 << 20];

/* The value of the sample @series ("name{labels}") in @text, or -1. */
static double sample(const char *text, const char *series)
{
	for (const char *p = text; (p = strstr(p, series)); p++)
		if ((p == text || p[-1] == '\n') && p[strlen(series)] == ' ')
			return strtod(p + strlen(series) + 1, NULL);
	return -1;
}

int main(void)
{
	char cmd[3 * PATH_MAX + 256], src[PATH_MAX];
	double in_file, in_node, tasks, alive;
	char buf[32];
	struct stat st;
	time_t first;
	int status;

	printf("TAP version 13\n");
	if (access("/usr/bin/prometheus-node-exporter", X_OK)) {
		printf("1..1\nok 1 # SKIP prometheus-node-exporter is not installed\n");
		return 0;
	}
	snprintf(src, sizeof(src), "%s", built("highwater"));
	*strrchr(src, '/') = '\0';	/* build/ */
	snprintf(cmd, sizeof(cmd),
		 "install -m 0755 %s/highwater /usr/local/bin/highwater && "
		 "install -m 0644 %s/../contrib/highwater-export.service %s/../contrib/highwater-export.timer "
		 "/etc/systemd/system/ && systemctl daemon-reload", src, src, src);
	tap_ok(!sh(cmd), "highwater in /usr/local/bin, contrib's units in /etc/systemd/system");
	tap_ok(!sh("systemctl is-active prometheus-node-exporter.service"),
	       "Debian's prometheus-node-exporter.service runs, as its package enables it");

	unlink(TEXTFILE);
	status = sh("systemctl start highwater-export.service");
	tap_ok(!status && !sh("systemctl show -P Result highwater-export.service") &&
	       !strcmp(out, "success\n") && hw_read_file(TEXTFILE, metrics, sizeof(metrics)) > 0,
	       "systemctl start highwater-export.service: it succeeds in its sandbox and writes " TEXTFILE);
	in_file = sample(metrics, "highwater_rlimit_peak{cgroup=\"/system.slice/ssh.service\",unit=\"ssh.service\",limit=\"nofile\"}");
	tap_ok(in_file > 0 &&
	       sample(metrics, "highwater_tasks_peak{cgroup=\"/system.slice/nginx.service\",unit=\"nginx.service\"}") > 1 &&
	       sample(metrics, "highwater_capability_used{cgroup=\"/system.slice/nginx.service\",unit=\"nginx.service\",capability=\"CAP_NET_BIND_SERVICE\"}") == 1,
	       "the file has the running services' marks: ssh.service's descriptors (%g), nginx.service's tasks and CAP_NET_BIND_SERVICE",
	       in_file);

	/* node_exporter sorts the labels; the value is the file's */
	status = http_get(9100, "/metrics", served, sizeof(served));
	in_node = status != 200 ? -1 : sample(served, "highwater_rlimit_peak{cgroup=\"/system.slice/ssh.service\",limit=\"nofile\",unit=\"ssh.service\"}");
	tap_ok(in_node == in_file && sample(served, "node_textfile_scrape_error") == 0,
	       "node_exporter on :9100 serves them as they are in the file (%g), no textfile error", in_node);

	/*
	 * The timer starts the service again.  Its OnCalendar=minutely is
	 * every 5 s here, through a drop-in: the test would otherwise wait up
	 * to a minute (systemd-analyze checks the unit as shipped:
	 * guest/highwater-export).
	 */
	first = stat(TEXTFILE, &st) ? 0 : st.st_mtime;
	status = sh("mkdir -p /etc/systemd/system/highwater-export.timer.d && "
		    "printf '[Timer]\\nOnCalendar=\\nOnCalendar=*:*:0/5\\n' "
		    ">/etc/systemd/system/highwater-export.timer.d/often.conf && "
		    "systemctl daemon-reload && systemctl start highwater-export.timer");
	for (int i = 0; !status && i < 30 && !stat(TEXTFILE, &st) && st.st_mtime == first; i++)
		sleep(1);
	tap_ok(!status && !stat(TEXTFILE, &st) && st.st_mtime != first,
	       "highwater-export.timer starts the export again (its calendar every 5 s through a drop-in)");

	/*
	 * The daemon in its sandbox: it stops the timer, writes memory.peak
	 * and pids.peak files and has each service's memory and tasks peaks
	 * of the interval (2 s here, through a drop-in, not the unit's minute)
	 * from its second export on.
	 */
	snprintf(cmd, sizeof(cmd),
		 "install -m 0644 %s/../contrib/highwater-export-windows.service /etc/systemd/system/ && "
		 "mkdir -p /etc/systemd/system/highwater-export-windows.service.d && "
		 "printf '[Service]\\nExecStart=\\nExecStart=/usr/local/bin/highwater export --interval 2 "
		 "--textfile-dir /var/lib/prometheus/node-exporter\\n' "
		 ">/etc/systemd/system/highwater-export-windows.service.d/interval.conf && "
		 "systemctl daemon-reload && systemctl start highwater-export-windows.service", src);
	status = sh(cmd);
	in_file = tasks = -1;
	for (int i = 0; !status && i < 60 && (in_file <= 0 || tasks <= 0); i++) {
		sleep(1);
		if (hw_read_file(TEXTFILE, metrics, sizeof(metrics)) > 0) {
			in_file = sample(metrics, "highwater_memory_peak_window_bytes{cgroup=\"/system.slice/nginx.service\",unit=\"nginx.service\"}");
			tasks = sample(metrics, "highwater_tasks_peak_window{cgroup=\"/system.slice/nginx.service\",unit=\"nginx.service\"}");
		}
	}
	/* A window holds at least what lives: nginx's master and workers. */
	alive = hw_read_file("/sys/fs/cgroup/system.slice/nginx.service/pids.current", buf, sizeof(buf)) > 0 ?
		atof(buf) : -1;
	tap_ok(!status && in_file > 0 && alive >= 2 && tasks >= alive &&
	       !sh("systemctl is-active highwater-export-windows.service") &&
	       sh("systemctl is-active highwater-export.timer") &&
	       sample(metrics, "highwater_export_interval_seconds") == 2,
	       "highwater-export-windows.service: it stops the timer and writes nginx.service's memory and tasks peaks of the interval (%g bytes, %g tasks, %g alive)",
	       in_file, tasks, alive);

	tap_ok(!sh("systemctl stop highwater-export.timer highwater-export-windows.service && "
		   "rm -rf /etc/systemd/system/highwater-export.* /etc/systemd/system/highwater-export-windows.* "
		   "/usr/local/bin/highwater " TEXTFILE " && systemctl daemon-reload"),
	       "the units, the command and the file are removed");
	printf("1..%d\n", tap_n);
	return tap_exit();
}
