// SPDX-License-Identifier: GPL-2.0
/*
 * Run last in the guest, after every other test: ask kmemleak (when the
 * kernel has it, kernel/config/debug.config) for unreferenced objects.  An
 * object allocated by the series' code (its allocation backtrace names one of
 * the functions below) fails the test; other reports are listed, and fail it
 * too, unless they come from early boot, which the suite did not cause.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "spawn.h"

#define KMEMLEAK "/sys/kernel/debug/kmemleak"

/* Functions of the series that allocate, or that hold what others allocate. */
static const char *const ours[] = {
	"devcg_accessed", "devcgroup_accessed", "cgroup_devices_accessed",
	"limits_peak", "rlimit_", "cap_record_used", "cap_used",
};

int main(void)
{
	static char buf[1 << 20];
	int n_reports = 0, n_ours = 0, n_boot = 0;
	char *p, *next;
	FILE *f;
	size_t len;

	if (access(KMEMLEAK, W_OK)) {
		printf("# no %s: skipped\n", KMEMLEAK);
		return 4;
	}
	tap_plan(2);
	/* Two scans: an object is reported once it stays unreferenced. */
	for (int i = 0; i < 2; i++) {
		if (write_file(KMEMLEAK, "scan")) {
			tap_ok(0, "scan");
			return tap_exit();
		}
		sleep(1);
	}
	f = fopen(KMEMLEAK, "r");
	len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[len] = '\0';

	for (p = strstr(buf, "unreferenced object"); p; p = next) {
		char first[160];
		int mine = 0, boot;

		next = strstr(p + 1, "unreferenced object");
		if (next)
			next[-1] = '\0';
		n_reports++;
		for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
			if (strstr(p, ours[i]))
				mine = 1;
		/* comm "swapper/0", pid 0 or 1: allocated while booting. */
		boot = strstr(p, "comm \"swapper") != NULL;
		n_ours += mine;
		n_boot += boot && !mine;
		if (!boot || mine) {
			sscanf(p, "%159[^\n]", first);
			tap_diag("%s%s", mine ? "series: " : "", first);
			if (mine)
				printf("%s\n", p);
		}
	}
	tap_diag("kmemleak: %d reports, %d from early boot, %d from the series",
		 n_reports, n_boot, n_ours);
	tap_ok(n_ours == 0, "no leak allocated by the series' code");
	tap_ok(n_reports - n_boot == 0, "no leak from anything the suite ran");
	return tap_exit();
}
