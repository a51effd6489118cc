// SPDX-License-Identifier: GPL-2.0
/*
 * The command line, on the host: help, every kind of bad input (one clear
 * line, a distinct exit code, nothing left behind), and merge of two real
 * reports taken from guest runs.  Nothing here runs a workload: run is
 * tested in the guest (tests/guest/highwater-run.c).
 *
 *   test-cli FIXTURE_DIR      (build/highwater is FIXTURE_DIR/../../build/highwater)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/stat.h>

#include "tap.h"
#include "spawn.h"
#include "hw.h"

static char hw[PATH_MAX], out[65536], err[65536];
static const char *dir;

/* highwater ARGS...; its exit status (-1 if it did not exit) */
static int hw_cmd(char *const args[])
{
	char *argv[16] = { hw };
	int i = 1, status;

	for (int j = 0; args[j] && i < 15; j++)
		argv[i++] = args[j];
	argv[i] = NULL;
	status = spawn_capture(argv, out, sizeof(out), err, sizeof(err));
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Exactly one line on stderr, saying @what */
static int one_line(const char *what)
{
	char *nl = strchr(err, '\n');

	if (!nl || nl[1] || !strstr(err, what) || strncmp(err, "highwater: ", 11)) {
		tap_diag("stderr: %s", err);
		return 0;
	}
	return 1;
}

static char *fixture(const char *name)
{
	static char paths[4][PATH_MAX];
	static int next;
	char *p = paths[next++ % 4];

	snprintf(p, PATH_MAX, "%s/%s", dir, name);
	return p;
}

int main(int argc, char **argv)
{
	const char *tmp = "/tmp/highwater-cli-test.out";
	struct hw_marks m;
	char text[65536], msg[200];
	int status;

	dir = argc > 1 ? argv[1] : "tests/fixtures";
	snprintf(hw, sizeof(hw), "%s/../../build/highwater", dir);
	tap_plan(22);

	tap_ok(hw_cmd((char *[]){ "--help", NULL }) == 0 &&
	       strstr(out, "usage: highwater run") && strstr(out, "--margin"),
	       "--help: usage on stdout, status 0");
	tap_ok(hw_cmd((char *[]){ NULL }) == HW_EX_USAGE && one_line("no command given"),
	       "no command: 64");
	tap_ok(hw_cmd((char *[]){ "frobnicate", NULL }) == HW_EX_USAGE &&
	       one_line("unknown command 'frobnicate'"), "unknown command: 64");
	tap_ok(hw_cmd((char *[]){ "run", "-f", "yaml", "--", "true", NULL }) == HW_EX_USAGE &&
	       one_line("unknown format 'yaml': use text, json, systemd, docker (or podman), compose, oci or kubernetes"),
	       "unknown format: 64, nothing run");
	tap_ok(hw_cmd((char *[]){ "run", "-m", "lots", "--", "true", NULL }) == HW_EX_USAGE &&
	       one_line("--margin takes a percentage from 0 to 1000, not 'lots'") &&
	       hw_cmd((char *[]){ "show", "-m", "-5", "1", NULL }) == HW_EX_USAGE,
	       "bad margin: 64");
	tap_ok(hw_cmd((char *[]){ "export", "-f", "json", NULL }) == HW_EX_USAGE &&
	       one_line("export writes Prometheus's text format: --format is for reports") &&
	       hw_cmd((char *[]){ "export", "-m", "lots", NULL }) == HW_EX_USAGE &&
	       (status = hw_cmd((char *[]){ "export", "-m", "10", "/nonexistent-cgroup", NULL }),
		status == HW_EX_NOINPUT || status == HW_EX_UNAVAILABLE),
	       "export: --format refused (64), --margin taken (a bad one 64; a good one reaches the roots: 66, or 69 with no cgroup2 mounted)");
	tap_ok(hw_cmd((char *[]){ "export", "--interval", "1", NULL }) == HW_EX_USAGE &&
	       one_line("export --interval writes again and again: give --textfile-dir") &&
	       hw_cmd((char *[]){ "export", "--interval", "0.5", "--textfile-dir", "/tmp", NULL }) == HW_EX_USAGE &&
	       one_line("--interval takes seconds from 1 to a day (or with m or h), not '0.5'") &&
	       hw_cmd((char *[]){ "export", "--interval", "2d", "--textfile-dir", "/tmp", NULL }) == HW_EX_USAGE &&
	       hw_cmd((char *[]){ "show", "--interval", "60", "1", NULL }) == HW_EX_USAGE &&
	       one_line("--interval is an option of export"),
	       "export --interval: without --textfile-dir, under a second, a bad suffix, on another command: 64");
	tap_ok(hw_cmd((char *[]){ "run", "-t", "0", "--", "true", NULL }) == HW_EX_USAGE &&
	       one_line("--timeout takes a positive number of seconds"),
	       "bad timeout: 64");
	tap_ok(hw_cmd((char *[]){ "show", "-t", "5", "1", NULL }) == HW_EX_USAGE &&
	       one_line("--timeout is an option of run"), "run's option on show: 64");
	tap_ok(hw_cmd((char *[]){ "run", NULL }) == HW_EX_USAGE &&
	       one_line("run needs a command to run"), "run without a command: 64");
	tap_ok(hw_cmd((char *[]){ "show", "12abc", NULL }) == HW_EX_USAGE &&
	       one_line("'12abc' is not a process ID"), "show of a non-number: 64");
	tap_ok(hw_cmd((char *[]){ "show", "999999999", NULL }) == HW_EX_NOINPUT &&
	       one_line("no such process"), "show of a process that does not exist: 66");
	tap_ok(hw_cmd((char *[]){ "merge", "/nonexistent.json", NULL }) == HW_EX_NOINPUT &&
	       one_line("cannot read /nonexistent.json: No such file or directory"),
	       "merge of a missing file: 66");
	tap_ok(hw_cmd((char *[]){ "merge", fixture("memory.stat"), NULL }) == HW_EX_DATAERR &&
	       one_line("is not a highwater/1 JSON report"),
	       "merge of a file that is not a report: 65");
	unlink(tmp);
	tap_ok(hw_cmd((char *[]){ "merge", "-o", (char *)tmp, fixture("report-demo.json"),
				  fixture("memory.stat"), NULL }) == HW_EX_DATAERR &&
	       access(tmp, F_OK) && errno == ENOENT,
	       "a failed merge leaves no half-written output file");
	tap_ok(hw_cmd((char *[]){ "show", "-o", "/nonexistent/dir/out", "1", NULL }) == HW_EX_NOINPUT &&
	       one_line("cannot write /nonexistent/dir/out"),
	       "an output file that cannot be created: 66, before anything is read");

	tap_ok(hw_cmd((char *[]){ "merge", "-f", "json", fixture("report-demo.json"),
				  fixture("report-daemon.json"), NULL }) == 0 &&
	       hw_json_read(out, &m, msg, sizeof(msg)) == 0 &&
	       m.lim[hw_limit_index("nofile")].peak == 203 && m.pids_peak == 9 &&
	       m.cap_used == (1ULL << 10 | 1ULL << 23) && m.ndevices == 2,
	       "merge of the demo and daemon reports: the maximum of each mark");
	tap_ok(hw_cmd((char *[]){ "merge", "-f", "systemd", "-m", "0",
				  fixture("report-daemon.json"), fixture("report-demo.json"),
				  NULL }) == 0 &&
	       strstr(out, "\nLimitNOFILE=1024\n") && strstr(out, "\nTasksMax=9\n") &&
	       strstr(out, "# highwater: systemd drop-in for: merge of 2 reports"),
	       "merge to systemd, margin 0: from the merged peaks");
	tap_ok(hw_cmd((char *[]){ "merge", fixture("report-demo.json"), "--format", "systemd",
				  "-m", "0", NULL }) == 0 &&
	       strstr(out, "\nTasksMax=9\n"),
	       "options after the file name, as after a unit name: merge FILE -f systemd");
	hw_read_file(fixture("report-demo.json"), text, sizeof(text));
	tap_ok(hw_cmd((char *[]){ "merge", "-f", "json", fixture("report-demo.json"), NULL }) == 0 &&
	       strstr(out, "\"nofile\": {\"peak\": 203, \"soft\": 1024, \"hard\": 4096}") &&
	       strstr(out, "\"devices\": [\"c 1:3 rw\", \"c 1:5 r\"]"),
	       "merge of one report gives its marks back");

	/*
	 * A container engine that dies of a signal is not "no such container":
	 * a podman that kills itself first on PATH.
	 */
	{
		const char *fake = "/tmp/highwater-cli-engine";
		char path[PATH_MAX + 64];
		const char *old = getenv("PATH");
		FILE *f;

		mkdir(fake, 0755);
		f = fopen("/tmp/highwater-cli-engine/podman", "w");
		if (f) {
			fputs("#!/bin/sh\nkill -9 $$\n", f);
			fclose(f);
		}
		chmod("/tmp/highwater-cli-engine/podman", 0755);
		snprintf(path, sizeof(path), "%s:%s", fake, old ? old : "/usr/bin:/bin");
		setenv("PATH", path, 1);
		tap_ok(hw_cmd((char *[]){ "container", "web", NULL }) == HW_EX_SOFTWARE &&
		       one_line("podman inspect web did not finish (killed by a signal"),
		       "container: an engine killed by a signal is said so, exit 70");
		if (old)
			setenv("PATH", old, 1);
		unlink("/tmp/highwater-cli-engine/podman");
		rmdir(fake);
	}

	/* This machine's own kernel, read-only: a mainline kernel on CI. */
	{
		char pid[16];
		bool series = access("/proc/self/limits_peak", F_OK) == 0;

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		tap_ok(hw_cmd((char *[]){ "show", "-f", "json", pid, NULL }) == 0 &&
		       hw_json_read(out, &m, msg, sizeof(msg)) == 0 && m.vm_hwm > 0 &&
		       m.lim[hw_limit_index("nofile")].have_limit &&
		       m.lim[hw_limit_index("nofile")].have_peak == series &&
		       hw_has_note(&m, "rlimit peaks: this kernel has no /proc/PID/limits_peak") == !series,
		       "show on this machine's kernel (%s the series): limits, VmHWM, %s",
		       series ? "with" : "without",
		       series ? "peaks" : "no peak made up, and the note why");
	}
	return tap_exit();
}
