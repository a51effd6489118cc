// SPDX-License-Identifier: GPL-2.0
/*
 * vm/boot-check.c: /init of the initramfs the prefix walk boots
 * (vm/build-prefixes, vm/run --initrd).  Built static: the initramfs holds
 * it and nothing else (the kernel's own adds /dev/console).
 *
 * Mounts /proc, copies /proc/self/limits_peak and /proc/self/status to the
 * console and says, as vm/job does, "highwater-vm: exit status N": 0 when
 * limits_peak has its header and a line per limit, 1 otherwise.  Then it
 * reboots, which ends QEMU (it runs with -no-reboot).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * show: FILE to stdout; how many lines start with "Limit" (a header) and
 * "Max " (a limit); false if it cannot be read
 */
static int show(const char *file, int *headers, int *limits)
{
	char line[512];
	FILE *f = fopen(file, "r");

	*headers = *limits = 0;
	if (!f) {
		printf("boot-check: %s: %s\n", file, strerror(errno));
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		fputs(line, stdout);
		*headers += !strncmp(line, "Limit", 5);
		*limits += !strncmp(line, "Max ", 4);
	}
	fclose(f);
	return 1;
}

int main(void)
{
	int ok = 1, headers, limits;

	mkdir("/proc", 0555);
	if (mount("proc", "/proc", "proc", 0, NULL)) {
		printf("boot-check: mount /proc: %s\n", strerror(errno));
		ok = 0;
	}
	/* a header line, then one line per limit */
	if (!show("/proc/self/limits_peak", &headers, &limits) ||
	    headers != 1 || limits != RLIM_NLIMITS) {
		printf("boot-check: limits_peak has %d headers and %d limits, not 1 and %d\n",
		       headers, limits, RLIM_NLIMITS);
		ok = 0;
	}
	show("/proc/self/status", &headers, &limits);
	printf("highwater-vm: exit status %d\n", ok ? 0 : 1);
	fflush(stdout);
	sync();
	reboot(RB_AUTOBOOT);
	return 0;
}
