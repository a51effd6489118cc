// SPDX-License-Identifier: GPL-2.0
/*
 * demo: a workload that touches many limited resources once, briefly, and
 * prints what it did, so a profile of it can be checked against the truth.
 *
 *   demo [-q]
 *
 * In order, each a short spike that is over when the next begins:
 *   descriptors  opens DEMO_FDS descriptors of /dev/null (read), closes them
 *   processes    forks DEMO_CHILDREN children that all live at once
 *   memory       touches DEMO_MEMORY bytes of anonymous memory, unmaps it
 *   stack        recurses through DEMO_STACK bytes of stack
 *   file size    writes a DEMO_FSIZE-byte file in $TMPDIR (or /tmp)
 *   locked page  mlocks DEMO_MLOCK bytes
 *   message queue  mq_open with 4 messages of 1024 bytes
 *   port         binds TCP port 80 (CAP_NET_BIND_SERVICE unless root-less)
 *   devices      writes to /dev/null, reads from /dev/zero
 *   nice         lowers its nice value to -5 (raises its priority)
 *
 * Any step that fails ends it with status 1 and says which: a limit set
 * below what it needs makes it fail where it should.  The last line is the
 * truth, "demo: truth KEY=VALUE...", in the units of /proc/PID/limits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_FDS 200
#define DEMO_CHILDREN 8
#define DEMO_MEMORY (32 << 20)
#define DEMO_STACK (1 << 20)
#define DEMO_FSIZE (1 << 20)
#define DEMO_MLOCK (64 << 10)
#define DEMO_MQ_MSGS 4
#define DEMO_MQ_SIZE 1024
#define DEMO_PORT 80
#define DEMO_NICE (-5)

static int fail(const char *what)
{
	fprintf(stderr, "demo: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int descriptors(void)
{
	int fds[DEMO_FDS], highest = -1;

	for (int i = 0; i < DEMO_FDS; i++) {
		fds[i] = open("/dev/null", O_RDONLY);
		if (fds[i] < 0)
			fail("opening descriptors");
		if (fds[i] > highest)
			highest = fds[i];
	}
	for (int i = 0; i < DEMO_FDS; i++)
		close(fds[i]);
	return highest + 1;	/* the NOFILE peak */
}

static void processes(void)
{
	int go[2], ready[2];
	pid_t pid[DEMO_CHILDREN];
	char c;

	if (pipe(go) || pipe(ready))
		fail("pipe");
	for (int i = 0; i < DEMO_CHILDREN; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			fail("forking children");
		if (pid[i] == 0) {
			close(go[1]);
			if (write(ready[1], "r", 1) != 1)
				_exit(1);
			_exit(read(go[0], &c, 1) < 0);	/* EOF: go */
		}
	}
	close(go[0]);
	for (int i = 0; i < DEMO_CHILDREN; i++)
		if (read(ready[0], &c, 1) != 1)
			fail("waiting for the children");
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
	for (int i = 0; i < DEMO_CHILDREN; i++) {
		int status;

		if (waitpid(pid[i], &status, 0) != pid[i] || status) {
			errno = ECHILD;
			fail("a child failed");
		}
	}
}

static void memory(void)
{
	char *p = mmap(NULL, DEMO_MEMORY, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mapping memory");
	for (size_t off = 0; off < DEMO_MEMORY; off += 4096)
		p[off] = 1;
	munmap(p, DEMO_MEMORY);
}

static int __attribute__((noinline)) recurse(size_t left)
{
	volatile char frame[4096];

	frame[0] = 1;
	if (left <= sizeof(frame))
		return frame[0];
	return recurse(left - sizeof(frame)) + frame[0];
}

static void file_size(void)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[4096], block[4096] = { 0 };
	int fd;

	snprintf(path, sizeof(path), "%s/highwater-demo.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		fail("creating a file");
	unlink(path);
	for (int i = 0; i < DEMO_FSIZE / 4096; i++)
		if (write(fd, block, sizeof(block)) != sizeof(block))
			fail("writing the file");
	close(fd);
}

static void locked_page(void)
{
	void *p = mmap(NULL, DEMO_MLOCK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mapping the page to lock");
	if (mlock(p, DEMO_MLOCK))
		fail("mlock");
	munlock(p, DEMO_MLOCK);
	munmap(p, DEMO_MLOCK);
}

static void message_queue(void)
{
	struct mq_attr attr = { .mq_maxmsg = DEMO_MQ_MSGS, .mq_msgsize = DEMO_MQ_SIZE };
	char name[64];
	mqd_t q;

	snprintf(name, sizeof(name), "/highwater-demo-%d", (int)getpid());
	q = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
	if (q == (mqd_t)-1)
		fail("mq_open");
	mq_close(q);
	mq_unlink(name);
}

static void privileged_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(DEMO_PORT) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	if (s < 0)
		fail("socket");
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sin, sizeof(sin)))
		fail("binding port 80");
	close(s);
}

static void devices(void)
{
	char buf[64];
	int fd = open("/dev/null", O_WRONLY);

	if (fd < 0 || write(fd, "x", 1) != 1)
		fail("writing /dev/null");
	close(fd);
	fd = open("/dev/zero", O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) != sizeof(buf))
		fail("reading /dev/zero");
	close(fd);
}

int main(int argc, char **argv)
{
	bool quiet = argc > 1 && !strcmp(argv[1], "-q");
	int nofile;

	nofile = descriptors();
	processes();
	memory();
	recurse(DEMO_STACK);
	file_size();
	locked_page();
	message_queue();
	privileged_port();
	devices();
	errno = 0;
	if (setpriority(PRIO_PROCESS, 0, DEMO_NICE))
		fail("setpriority to nice -5");

	if (!quiet)
		printf("demo: did %d descriptors, %d children, %d MiB, %d KiB stack, "
		       "a %d KiB file, %d KiB locked, a message queue, port %d, "
		       "/dev/null and /dev/zero, nice %d\n",
		       DEMO_FDS, DEMO_CHILDREN, DEMO_MEMORY >> 20, DEMO_STACK >> 10,
		       DEMO_FSIZE >> 10, DEMO_MLOCK >> 10, DEMO_PORT, DEMO_NICE);
	printf("demo: truth nofile=%d tasks=%d memory_min=%d stack_min=%d fsize=%d "
	       "memlock=%d msgqueue_min=%d nice=%d\n",
	       nofile, DEMO_CHILDREN + 1, DEMO_MEMORY, DEMO_STACK, DEMO_FSIZE,
	       DEMO_MLOCK, DEMO_MQ_MSGS * DEMO_MQ_SIZE, 20 - DEMO_NICE);
	return 0;
}
