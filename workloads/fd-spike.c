// SPDX-License-Identifier: GPL-2.0
/*
 * fd-spike: a workload with a transient spike of open descriptors.
 *
 * It opens COUNT descriptors (default 300), closes them all again, and then
 * prints its own /proc/self/limits_peak.  A sampler such as ps or lsof run
 * before or after the spike sees three descriptors; the kernel's mark in the
 * "Max open files" row shows the true peak, which this program also prints.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 300;
	int *fds, highest = -1, i;
	char buf[4096];
	ssize_t n;
	int fd;

	if (count <= 0) {
		fprintf(stderr, "usage: fd-spike [COUNT]  (COUNT > 0 descriptors to open)\n");
		return 2;
	}
	fds = calloc(count, sizeof(*fds));
	if (!fds)
		return 1;
	for (i = 0; i < count; i++) {
		fds[i] = open("/dev/null", O_RDONLY);
		if (fds[i] < 0) {
			fprintf(stderr, "fd-spike: open #%d: %s (lower COUNT or raise ulimit -n)\n",
				i + 1, strerror(errno));
			return 1;
		}
		if (fds[i] > highest)
			highest = fds[i];
	}
	for (i = 0; i < count; i++)
		close(fds[i]);

	printf("fd-spike: opened %d descriptors at once, the highest was %d, so the true peak is %d\n",
	       count, highest, highest + 1);
	fd = open("/proc/self/limits_peak", O_RDONLY);
	if (fd < 0) {
		printf("fd-spike: /proc/self/limits_peak: %s (is this the highwater kernel?)\n",
		       strerror(errno));
		return 1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stdout);
	close(fd);
	return 0;
}
