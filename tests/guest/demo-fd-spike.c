// SPDX-License-Identifier: GPL-2.0
/*
 * The main job's workload: workloads/fd-spike prints its limits_peak, and the
 * "Max open files" Peak must be the spike's true peak, which it also prints.
 * Run in the guest by tests/run, with the workload built into build/workloads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static int run(const char *workload, int count, long *truth, long *peak)
{
	char cmd[512], line[512];
	FILE *p;

	*truth = *peak = -1;
	snprintf(cmd, sizeof(cmd), "%s %d", workload, count);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *s = strstr(line, "the true peak is ");

		if (s)
			*truth = strtol(s + strlen("the true peak is "), NULL, 10);
		if (!strncmp(line, "Max open files ", 15)) {
			s = strrchr(line, ' ');
			*peak = s ? strtol(s + 1, NULL, 10) : -1;
		}
	}
	return pclose(p);
}

int main(int argc, char **argv)
{
	const char *workload = argc > 1 ? argv[1] : "../workloads/fd-spike";
	static const int counts[] = { 1, 300, 1000 };
	long truth, peak;
	unsigned int i;

	tap_plan(3);
	for (i = 0; i < 3; i++) {
		int status = run(workload, counts[i], &truth, &peak);

		if (!tap_ok(status == 0 && truth > 0 && peak == truth,
			    "fd-spike %d: Max open files Peak equals the true peak",
			    counts[i]))
			tap_diag("status %d, true peak %ld, Peak %ld", status, truth, peak);
	}
	return tap_exit();
}
