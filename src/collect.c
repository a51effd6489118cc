// SPDX-License-Identifier: GPL-2.0
/*
 * Reading the marks: a process's /proc files and a cgroup's files.  What a
 * kernel does not offer becomes a note saying so, never a made-up number.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hw.h"

/*
 * Read a whole (small) file into @buf; returns its length, or -errno, and
 * -EFBIG when it does not fit: a value cut short is never taken for the
 * file.  @buf then holds what fitted, for callers that only show it.
 */
int hw_read_file(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;
	char more;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			close(fd);
			return n;
		}
		len += n;
	}
	buf[len] = '\0';
	if (len == size - 1) {
		do
			n = read(fd, &more, 1);
		while (n < 0 && errno == EINTR);
		if (n > 0) {
			close(fd);
			return -EFBIG;
		}
	}
	close(fd);
	return len;
}

/*
 * Read a whole file of any size (cgroup.procs of a large service) into a
 * buffer from malloc(), which the caller frees; returns its length or -errno.
 */
ssize_t hw_read_file_alloc(const char *path, char **bufp)
{
	size_t size = 65536;
	char *buf = NULL;
	int r;

	for (;;) {
		char *b = realloc(buf, size);

		if (!b) {
			free(buf);
			return -ENOMEM;
		}
		buf = b;
		r = hw_read_file(path, buf, size);
		if (r != -EFBIG)
			break;
		size *= 4;
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	*bufp = buf;
	return r;
}

/*
 * The cgroup v2 path of process @pid (0: this one), from the "0::PATH" line
 * of /proc/PID/cgroup, which follows any v1 hierarchy's.  0, -ENOENT when
 * the process is on no cgroup v2, or -errno.
 */
int hw_cgroup_of(int pid, char *buf, size_t size)
{
	char path[64], text[4096], *save;
	int r;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/cgroup");
	r = hw_read_file(path, text, sizeof(text));
	if (r < 0)
		return r;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, "0::", 3)) {
			snprintf(buf, size, "%s", line + 3);
			return 0;
		}
	return -ENOENT;
}

/*
 * The marks of process @pid (also a zombie not yet reaped), maximized into
 * @m.  @top: this is the command itself, whose limits and credentials the
 * report shows.  Returns 0, or -errno when the process cannot be read.
 */
int hw_collect_process(int pid, struct hw_marks *m, bool top)
{
	char path[64], buf[8192];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/limits_peak", pid);
	r = hw_read_file(path, buf, sizeof(buf));
	if (r == -ENOENT) {
		/* A kernel without the series: limits only, no peaks. */
		snprintf(path, sizeof(path), "/proc/%d/limits", pid);
		r = hw_read_file(path, buf, sizeof(buf));
		if (r >= 0)
			hw_note(m, "rlimit peaks: this kernel has no /proc/PID/limits_peak (it lacks the highwater series)");
	}
	if (r < 0)
		return r;
	if (hw_parse_limits(buf, m, top)) {
		hw_note(m, "rlimit peaks: %s has a format this highwater does not know", path);
	}

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	r = hw_read_file(path, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (hw_parse_status(buf, m, top))
		hw_note(m, "%s has a format this highwater does not know", path);
	else if (!strstr(buf, "\nCapUsd:"))
		hw_note(m, "capabilities used: /proc/PID/status has no CapUsd line (kernel without the highwater series)");
	m->processes++;
	return 0;
}

/* The cgroup2 mount point, from /proc/self/mountinfo. */
int hw_cgroup2_mount(char *buf, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024], mnt[512], fstype[64];

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(sep + 3, "%63s", fstype) != 1 ||
		    strcmp(fstype, "cgroup2"))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %511s", mnt) == 1) {
			fclose(f);
			snprintf(buf, size, "%s", mnt);
			return 0;
		}
	}
	fclose(f);
	return -ENOENT;
}

static int cg_read(const char *dir, const char *file, char *buf, size_t size)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return hw_read_file(path, buf, size);
}

/* A number file of the cgroup ("max" too): 0, or -1 when absent or bad. */
static int cg_read_u64(const char *dir, const char *file, uint64_t *val)
{
	char buf[64];

	if (cg_read(dir, file, buf, sizeof(buf)) < 0)
		return -1;
	return hw_parse_u64(buf, val);
}

/*
 * rlimits.peak and capabilities.used of the cgroup at @dir: 0, -ENOENT on a
 * kernel without the series' per-cgroup marks, -EPROTO for a format this
 * highwater does not know, or another -errno.
 */
static int read_cgroup_marks(const char *dir, uint64_t peak[HW_NLIMITS],
			     bool have[HW_NLIMITS], uint64_t *caps)
{
	char buf[4096];
	int r;

	r = cg_read(dir, "rlimits.peak", buf, sizeof(buf));
	if (r < 0)
		return r;
	if (hw_parse_rlimits_peak(buf, peak, have))
		return -EPROTO;
	r = cg_read(dir, "capabilities.used", buf, sizeof(buf));
	if (r < 0)
		return r;
	return hw_parse_cap_mask(buf, caps) ? -EPROTO : 0;
}

/*
 * Take into @m what the cgroup's marks have above it: the limits raised (a
 * bit each, returned) and the capabilities new to @m (*@caps_new).
 */
static unsigned int merge_cgroup_marks(struct hw_marks *m,
				       const uint64_t peak[HW_NLIMITS],
				       const bool have[HW_NLIMITS], uint64_t caps,
				       uint64_t *caps_new)
{
	unsigned int raised = 0;

	for (int i = 0; i < HW_NLIMITS; i++) {
		struct hw_limit *l = &m->lim[i];

		if (!have[i] || (l->have_peak && l->peak >= peak[i]))
			continue;
		l->have_peak = true;
		l->peak = peak[i];
		raised |= 1U << i;
	}
	m->have_limits_peak = true;
	hw_note_unnamed_caps(m, caps, "capabilities.used");
	*caps_new = caps & ~m->cap_used;
	m->cap_used |= caps;
	m->have_cap_used = true;
	return raised;
}

/*
 * rlimits.peak and capabilities.used of the cgroup at @dir, which keep the
 * marks of the processes that exited there, whoever reaped them.  The living
 * processes' marks are in @m already: what the cgroup has above them is of
 * processes that exited, and is shown so.
 */
void hw_collect_cgroup_marks(const char *dir, struct hw_marks *m)
{
	uint64_t peak[HW_NLIMITS] = { 0 }, caps = 0;
	bool have[HW_NLIMITS] = { false };
	unsigned int raised;
	int r;

	r = read_cgroup_marks(dir, peak, have, &caps);
	if (r == -ENOENT) {
		hw_note(m, "marks of exited processes: no rlimits.peak in the cgroup (kernel without the series' per-cgroup marks): rlimit peaks and capabilities are of living processes only");
		return;
	}
	if (r) {
		hw_note(m, "marks of exited processes: cannot read %s/rlimits.peak and capabilities.used: %s",
			dir, r == -EPROTO ? "a format this highwater does not know" : strerror(-r));
		return;
	}
	m->have_cgroup_marks = true;
	raised = merge_cgroup_marks(m, peak, have, caps, &m->cap_used_exited);
	if (!cg_read_u64(dir, "processes.moved_out", &m->moved_out))
		m->have_moved_out = true;
	else
		hw_note(m, "processes moved out: no processes.moved_out in the cgroup (a series before it): whether processes took the unit's rlimits and bounding set to other cgroups is unknown");
	for (int i = 0; i < HW_NLIMITS; i++)
		if (raised & (1U << i))
			m->lim[i].exited = true;
}

/*
 * For run, which reaped every process of the workload and read its marks
 * while it was a zombie, except those it may not read (a set-user-ID or
 * set-group-ID program started by a user's highwater: @unread of them).  The
 * workload's cgroup kept every process's marks: what it has above the
 * processes read is theirs, taken here and said so.
 */
void hw_collect_run_cgroup_marks(const char *dir, struct hw_marks *m, int unread)
{
	uint64_t peak[HW_NLIMITS] = { 0 }, caps = 0, caps_new;
	bool have[HW_NLIMITS] = { false };
	char what[256] = "";
	unsigned int raised;
	size_t n = 0;
	int r;

	r = read_cgroup_marks(dir, peak, have, &caps);
	/* Those run did not reap count too: a container's, reaped by conmon */
	if (!r && !cg_read_u64(dir, "processes.moved_out", &m->moved_out))
		m->have_moved_out = true;
	if (r) {
		if (unread)
			hw_note(m, "%d process%s of the workload could not be read (permission denied: run highwater as root to read a set-user-ID or set-group-ID program's marks), and the cgroup's marks of them are %s: their rlimit peaks and capabilities are missing",
				unread, unread == 1 ? "" : "es",
				r == -ENOENT ? "not kept by this kernel (no rlimits.peak)" :
				r == -EPROTO ? "in a format this highwater does not know" :
				"unreadable");
		return;
	}
	raised = merge_cgroup_marks(m, peak, have, caps, &caps_new);
	for (int i = 0; i < HW_NLIMITS; i++) {
		if (!(raised & (1U << i)) || !peak[i])
			continue;
		n += snprintf(what + n, sizeof(what) - n, "%s%s", n ? ", " : "",
			      hw_limits[i].key);
		if (n >= sizeof(what))
			n = sizeof(what) - 1;
	}
	if (unread || n || caps_new)
		hw_note(m, "%d process%s of the workload could not be read (permission denied); the cgroup kept the marks of every process: %s%s%s taken from it",
			unread, unread == 1 ? "" : "es", n ? what : "",
			n && caps_new ? ", " : "",
			caps_new ? "capabilities" : n ? "" : "nothing above the others'");
}

/*
 * The page cache the kernel can drop from memory.stat: "file" less "shmem".
 * "file" counts tmpfs and shared anonymous memory too (PostgreSQL's shared
 * buffers, /dev/shm), which without swap is never reclaimed: a MemoryHigh=
 * below it throttles the service to a standstill (postgresql@15-main did
 * not start under one).  Without a "shmem" line, nothing is taken as cache.
 */
static void read_page_cache(const char *stat, struct hw_marks *m)
{
	uint64_t file, shmem;

	if (hw_parse_memory_stat(stat, "file", &file) ||
	    hw_parse_memory_stat(stat, "shmem", &shmem))
		return;
	m->memory_file = file > shmem ? file - shmem : 0;
	m->memory_shmem = shmem;
	m->have_memory_file = true;
}

/*
 * The marks of the cgroup at @dir: pids.peak, memory.peak, the page cache
 * part of its memory (read_page_cache()), the devices accessed (named from
 * this host), and the limits set on it.  Returns 0, or -errno when @dir
 * cannot be read at all.
 */
int hw_collect_cgroup(const char *dir, struct hw_marks *m)
{
	char buf[16384];
	int r;

	r = cg_read(dir, "cgroup.procs", buf, sizeof(buf));
	if (r < 0)
		return r;

	if (!cg_read_u64(dir, "pids.peak", &m->pids_peak)) {
		m->have_pids_peak = true;
		cg_read_u64(dir, "pids.max", &m->pids_max);
		if (cg_read(dir, "pids.events", buf, sizeof(buf)) >= 0)
			hw_parse_memory_stat(buf, "max", &m->pids_refused);
		if (m->pids_refused)
			hw_note(m, "task peak: %" PRIu64 " forks were refused at the cgroup's task limit (pids.events): the workload needs more tasks than it could have, and no task limit is derived from this run",
				m->pids_refused);
	} else if (!hw_has_note(m, "task peak:")) {
		hw_note(m, "task peak: no pids.peak (pids controller not enabled for the cgroup, or a kernel before 6.1)");
	}

	if (!cg_read_u64(dir, "memory.peak", &m->memory_peak)) {
		m->have_memory_peak = true;
		cg_read_u64(dir, "memory.max", &m->memory_max);
		if (cg_read(dir, "memory.stat", buf, sizeof(buf)) >= 0)
			read_page_cache(buf, m);
		if (cg_read(dir, "memory.events", buf, sizeof(buf)) >= 0) {
			hw_parse_memory_stat(buf, "max", &m->memory_max_events);
			hw_parse_memory_stat(buf, "oom_kill", &m->memory_oom_kills);
		}
		if (m->memory_oom_kills)
			hw_note(m, "memory peak: the OOM killer killed %" PRIu64 " process%s of the cgroup (memory.events): the workload needs more memory than it had, and no memory limit is derived from this run",
				m->memory_oom_kills, m->memory_oom_kills > 1 ? "es" : "");
		else if (m->memory_max_events)
			hw_note(m, "memory peak: the cgroup reached its memory limit %" PRIu64 " times and was made to reclaim (memory.events): its peak is that limit, and no memory limit is derived from this run",
				m->memory_max_events);
	} else if (!hw_has_note(m, "memory peak:")) {
		hw_note(m, "memory peak: no memory.peak (memory controller not enabled for the cgroup, or a kernel before 5.19)");
	}

	r = cg_read(dir, "devices.accessed", buf, sizeof(buf));
	if (r >= 0) {
		if (hw_parse_devices(buf, m))
			hw_note(m, "devices accessed: %s/devices.accessed has a format this highwater does not know", dir);
		hw_name_devices(m);
	} else {
		hw_note(m, "devices accessed: the cgroup has no devices.accessed (kernel without the highwater series)");
	}
	return 0;
}

/*
 * Every process in @dir and below, maximized into @m.  Returns how many
 * could not be read for lack of permission (limits_peak is readable only
 * by whoever may ptrace the process); one that exits meanwhile is no loss.
 */
static int collect_tree(const char *dir, struct hw_marks *m, int depth)
{
	char path[1200], *procs;
	struct dirent *de;
	int denied = 0, r;
	DIR *d;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (hw_read_file_alloc(path, &procs) > 0) {
		for (char *t = strtok(procs, "\n"); t; t = strtok(NULL, "\n")) {
			r = hw_collect_process(atoi(t), m, false);
			denied += r == -EACCES || r == -EPERM;
		}
		free(procs);
	}
	if (depth > 32 || !(d = opendir(dir)))
		return denied;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			denied += collect_tree(path, m, depth + 1);
		}
	closedir(d);
	return denied;
}

/*
 * Everything highwater reads of the cgroup at @dir, under the cgroup2 mount
 * @mount: its living processes' marks (the first one's limits), its own
 * files, and the marks it kept of the processes that exited in it.  0, or
 * -errno when the cgroup cannot be read.
 */
int hw_collect_cgroup_all(const char *mount, const char *dir, struct hw_marks *m)
{
	int r, denied;

	snprintf(m->cgroup, sizeof(m->cgroup), "%s", dir + strlen(mount));
	/* The living processes first: the cgroup's marks above theirs are of exited ones. */
	denied = collect_tree(dir, m, 0);
	if (denied)
		hw_note(m, "%d process%s of the cgroup could not be read (permission denied): their marks are missing; run highwater as root or as their user",
			denied, denied == 1 ? "" : "es");
	r = hw_collect_cgroup(dir, m);
	if (r)
		return r;
	hw_collect_cgroup_marks(dir, m);
	if (!m->processes && !m->have_cgroup_marks)
		hw_note(m, "rlimit peaks and capabilities: no process is left in the cgroup to read them from");
	return 0;
}
