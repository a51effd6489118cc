// SPDX-License-Identifier: GPL-2.0
/*
 * highwater export in the guest: a tree of 1,000 cgroups and one with a
 * living process that holds a spike of descriptors (25 cgroups on the
 * checkers' kernels), exported for node_exporter's textfile collector.  The process's peak is in the metrics
 * exactly, every cgroup has its samples, the file appears whole (written
 * aside, renamed), and the time 1,000 cgroups take is printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

#define ROOT "/sys/fs/cgroup/highwater-test-export"


static char out[1 << 20], err[65536];
static char metrics[8 << 20];

static int count_lines(const char *text, const char *prefix)
{
	int n = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		n += !strncmp(p, prefix, strlen(prefix));
	return n;
}

static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	tap_diag("no line \"%s\"", line);
	return 0;
}

/*
 * contrib/'s units, as installed with highwater where the unit says: what
 * systemd-analyze verify makes of them (1 clean; 0 not; -1 no systemd).
 */
static int units_verify(char *complaints, size_t size)
{
	static const char *const units[] = { "highwater-export.service", "highwater-export.timer",
					     "highwater-export-windows.service" };
	char src[PATH_MAX], dst[300], text[4096], *at;
	int status;

	if (access("/usr/bin/systemd-analyze", X_OK))
		return -1;
	for (int i = 0; i < 3; i++) {
		FILE *f;

		/* build/highwater -> contrib/UNIT */
		snprintf(src, sizeof(src), "%s", built("highwater"));
		*strrchr(src, '/') = '\0';
		snprintf(src + strlen(src), sizeof(src) - strlen(src), "/../contrib/%s", units[i]);
		snprintf(dst, sizeof(dst), "/tmp/%s", units[i]);
		if (hw_read_file(src, text, sizeof(text)) < 0 || !(f = fopen(dst, "w")))
			return 0;
		at = strstr(text, "/usr/local/bin/highwater");
		if (at) {	/* the binary where this test has it */
			fwrite(text, 1, at - text, f);
			fputs(built("highwater"), f);
			fputs(at + strlen("/usr/local/bin/highwater"), f);
		} else {
			fputs(text, f);
		}
		fclose(f);
	}
	status = spawn_capture((char *[]){ "systemd-analyze", "verify", "--man=no",
					   "/tmp/highwater-export.service",
					   "/tmp/highwater-export.timer",
					   "/tmp/highwater-export-windows.service", NULL },
			       out, sizeof(out), complaints, size);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(complaints, "highwater-export");
}

int main(void)
{
	char path[300], line[400];
	struct timespec t0, t1;
	int status, nofile = 0, made = 0, cgroups = on_checker_kernel() ? 25 : 1000;
	char want[64];
	double seconds;
	pid_t pid;
	DIR *d;

	tap_plan(5);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory");
	mkdir(ROOT, 0755);
	write_file(ROOT "/cgroup.subtree_control", "+pids +memory");
	for (int i = 0; i < cgroups; i++) {
		snprintf(path, sizeof(path), ROOT "/c%04d.scope", i);
		made += !mkdir(path, 0755);
	}
	mkdir(ROOT "/holder.service", 0755);
	pid = fork_fd_holder(ROOT "/holder.service/cgroup.procs", &nofile);
	mkdir("/tmp/highwater-textfile", 0755);
	unlink("/tmp/highwater-textfile/highwater.prom");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	status = spawn_capture((char *[]){ (char *)built("highwater"), "export",
					   "--textfile-dir", "/tmp/highwater-textfile",
					   "highwater-test-export", NULL },
			       out, sizeof(out), err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	seconds = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (hw_read_file("/tmp/highwater-textfile/highwater.prom", metrics, sizeof(metrics)) < 0)
		metrics[0] = '\0';

	snprintf(want, sizeof(want), "highwater_export_cgroups %d", cgroups + 2);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && made == cgroups &&
	       count_lines(metrics, "highwater_tasks_peak{") == cgroups + 2 &&
	       has_line(metrics, want),
	       "export of %d cgroups (and their parent and one more): every one has its samples, in %.2f s (%s)",
	       cgroups, seconds, err);
	snprintf(line, sizeof(line),
		 "highwater_rlimit_peak{cgroup=\"/highwater-test-export/holder.service\",unit=\"holder.service\",limit=\"nofile\"} %d",
		 nofile);
	tap_ok(has_line(metrics, line) &&
	       has_line(metrics, "highwater_tasks_peak{cgroup=\"/highwater-test-export/holder.service\",unit=\"holder.service\"} 1"),
	       "export: the living process's descriptor peak %d and the cgroup's task peak, exactly", nofile);
	d = opendir("/tmp/highwater-textfile");
	status = 0;
	while (d && readdir(d))
		status++;
	if (d)
		closedir(d);
	tap_ok(status == 3, "export: only highwater.prom in the textfile directory (%d entries), nothing left aside",
	       status);
	status = spawn_capture((char *[]){ (char *)built("highwater"), "export",
					   "--textfile-dir", "/nonexistent/dir", "highwater-test-export", NULL },
			       out, sizeof(out), err, sizeof(err));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == HW_EX_IOERR &&
	       strstr(err, "cannot write /nonexistent/dir/.highwater.prom"),
	       "export to a directory that does not exist: an error that names it (%s)", err);

	status = units_verify(err, sizeof(err));
	if (status < 0)
		tap_ok(1, "# SKIP systemd-analyze is not installed");
	else
		tap_ok(status, "contrib/highwater-export.service, .timer and highwater-export-windows.service: systemd-analyze verify accepts them%s%s",
		       err[0] ? ": " : "", err);

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	remove_cgroup(ROOT "/holder.service");
	for (int i = 0; i < cgroups; i++) {
		snprintf(path, sizeof(path), ROOT "/c%04d.scope", i);
		rmdir(path);
	}
	remove_cgroup(ROOT);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "-memory -pids");
	return tap_exit();
}
