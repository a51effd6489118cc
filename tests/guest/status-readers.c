// SPDX-License-Identifier: GPL-2.0
/*
 * Existing programs that read /proc/PID/status and /proc/PID/limits keep
 * working on the patched kernel: procps (ps, top, pgrep) and prlimit.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

/* Run cmd; ok when it exits 0 and its output contains want. */
static int output_has(const char *cmd, const char *want)
{
	char line[1024];
	int found = 0, status;
	FILE *p = popen(cmd, "r");

	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, want))
			found = 1;
	status = pclose(p);
	if (!found || status)
		tap_diag("%s: status %d, '%s' %sfound", cmd, status, want,
			 found ? "" : "not ");
	return found && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void)
{
	char cmd[256];

	tap_plan(5);
	snprintf(cmd, sizeof(cmd), "ps -o pid,stat,comm -p %d", getpid());
	tap_ok(output_has(cmd, "status-readers"), "ps reads this process");
	tap_ok(output_has("ps -eo pid,user,rss,comm", "init"), "ps -e lists init");
	tap_ok(output_has("top -b -n 1", "PID"), "top -b -n 1 runs");
	snprintf(cmd, sizeof(cmd), "pgrep -u root -x status-readers");
	tap_ok(output_has(cmd, ""), "pgrep finds this process");
	snprintf(cmd, sizeof(cmd), "prlimit --pid %d --nofile", getpid());
	tap_ok(output_has(cmd, "NOFILE"), "prlimit parses /proc/PID/limits");
	return tap_exit();
}
