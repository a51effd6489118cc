// SPDX-License-Identifier: GPL-2.0
/*
 * daemon: double-forks a daemon that outlives its parent, the way a
 * classic service starts.  The command returns at once; the daemon waits
 * DELAY_MS, opens DAEMON_FDS descriptors, closes them and exits.
 *
 * It prints "daemon: truth nofile=N" (the daemon's NOFILE peak) on stdout,
 * from the daemon, so a profiler must wait for the daemon to see it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DELAY_MS 300
#define DAEMON_FDS 100

static void daemon_body(void)
{
	struct timespec delay = { 0, DELAY_MS * 1000000L };
	int fds[DAEMON_FDS], highest = -1;

	nanosleep(&delay, NULL);	/* the parents are gone by now */
	for (int i = 0; i < DAEMON_FDS; i++) {
		fds[i] = open("/dev/null", O_RDONLY);
		if (fds[i] < 0) {
			perror("daemon: open");
			exit(1);
		}
		if (fds[i] > highest)
			highest = fds[i];
	}
	for (int i = 0; i < DAEMON_FDS; i++)
		close(fds[i]);
	printf("daemon: truth nofile=%d\n", highest + 1);
	exit(0);
}

int main(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return 1;
	if (pid == 0) {
		setsid();
		if (fork() == 0)
			daemon_body();
		_exit(0);	/* the daemon is reparented */
	}
	waitpid(pid, NULL, 0);
	return 0;
}
