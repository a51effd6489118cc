// SPDX-License-Identifier: GPL-2.0
/*
 * The policy: what each limit is, which peaks become settings and which do
 * not (and why), and how: a safety margin, then rounding up (never down) to
 * K/M/G for bytes and to two significant digits for counts.  Every format
 * (report.c) asks here.  Device numbers become /dev paths, or /proc/devices
 * group names.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "hw.h"

#define NPROC_CAVEAT "it counts every process of the user (and none for root): prefer TasksMax= (docker: --pids-limit)"

#define MEMORY_CAVEAT "systemd advises against it (mappings never touched count): prefer MemoryMax= (docker: --memory)"

/* Indexed by RLIMIT_*: the rows of /proc/PID/limits, in its order. */
_Static_assert(HW_NLIMITS == RLIM_NLIMITS, "one row per rlimit");
const struct hw_limit_info hw_limits[HW_NLIMITS] = {
	[RLIMIT_CPU] = { "cpu", "Max cpu time", "LimitCPU", HW_COUNT,
	  .caveat = "CPU seconds grow with run time: the peak of one run is no limit",
	  .docker = true },
	/*
	 * The peak is the size the files reached, not what the program
	 * needs: a log or a database appended to across restarts grows past
	 * it and the next write is killed by SIGXFSZ (nginx's workers and
	 * redis-server were, on their own logs, under their first drop-in).
	 */
	[RLIMIT_FSIZE] = { "fsize", "Max file size", "LimitFSIZE", HW_BYTES,
	  .caveat = "files written to grow across runs (logs, databases): the size one run "
	  "reached is no limit, and a write past it is killed by SIGXFSZ",
	  .docker = true },
	[RLIMIT_DATA] = { "data", "Max data size", "LimitDATA", HW_BYTES,
	  .caveat = MEMORY_CAVEAT, .docker = true },
	[RLIMIT_STACK] = { "stack", "Max stack size", "LimitSTACK", HW_BYTES,
	  .caveat = "glibc sizes new threads' stacks from it; set it only to raise it",
	  .docker = true },
	[RLIMIT_CORE] = { "core", "Max core file size", "LimitCORE", HW_BYTES,
	  .if_zero = "no core dump in this run", .docker = true },
	[RLIMIT_RSS] = { "rss", "Max resident set", "LimitRSS", HW_UNTRACKED, .docker = false },
	[RLIMIT_NPROC] = { "nproc", "Max processes", "LimitNPROC", HW_COUNT,
	  .caveat = NPROC_CAVEAT, .docker = true },
	/*
	 * Programs size themselves from it: redis-server refuses to start
	 * below 33 (maxclients + 32 reserved), PostgreSQL counts how many
	 * descriptors it may open.  Below 1024 a limit saves nothing (each
	 * open file costs its file) and breaks them.
	 */
	[RLIMIT_NOFILE] = { "nofile", "Max open files", "LimitNOFILE", HW_COUNT, .docker = true,
	  .floor = 1024, .floor_why = "raised to 1024, the soft limit every process starts with: "
	  "programs size themselves from it (redis-server will not start below 33)" },
	[RLIMIT_MEMLOCK] = { "memlock", "Max locked memory", "LimitMEMLOCK", HW_BYTES, .docker = true },
	[RLIMIT_AS] = { "as", "Max address space", "LimitAS", HW_BYTES, .caveat = MEMORY_CAVEAT },
	[RLIMIT_LOCKS] = { "locks", "Max file locks", "LimitLOCKS", HW_UNTRACKED, .docker = false },
	[RLIMIT_SIGPENDING] = { "sigpending", "Max pending signals", "LimitSIGPENDING", HW_COUNT,
	  .if_zero = "no signal was queued in this run; 0 would refuse queued realtime signals",
	  .docker = true },
	[RLIMIT_MSGQUEUE] = { "msgqueue", "Max msgqueue size", "LimitMSGQUEUE", HW_BYTES, .docker = true },
	[RLIMIT_NICE] = { "nice", "Max nice priority", "LimitNICE", HW_EXACT, .docker = true },
	[RLIMIT_RTPRIO] = { "rtprio", "Max realtime priority", "LimitRTPRIO", HW_EXACT, .docker = true },
	[RLIMIT_RTTIME] = { "rttime", "Max realtime timeout", "LimitRTTIME", HW_COUNT,
	  .if_zero = "no realtime thread in this run", .docker = true },
};

int hw_limit_index(const char *key)
{
	for (int i = 0; i < HW_NLIMITS; i++)
		if (!strcmp(hw_limits[i].key, key))
			return i;
	return -1;
}

/* @v plus @margin percent, rounded up; saturates instead of wrapping. */
static uint64_t add_margin(uint64_t v, int margin)
{
	uint64_t r;

	if (__builtin_mul_overflow(v, 100 + (uint64_t)margin, &r) ||
	    __builtin_add_overflow(r, 99, &r))
		return HW_UNLIMITED;
	return r / 100;
}

/* Round up to two significant digits: 379 -> 380, 1234 -> 1300. */
uint64_t hw_round_count(uint64_t v)
{
	uint64_t step = 1;

	while (v / step >= 100)
		step *= 10;
	if (v % step == 0)
		return v;
	if (v / step * step > UINT64_MAX - step)
		return HW_UNLIMITED;
	return (v / step + 1) * step;
}

static const struct {
	char suffix;
	uint64_t size;
} units[] = {
	{ 'T', 1ULL << 40 }, { 'G', 1ULL << 30 }, { 'M', 1ULL << 20 },
	{ 'K', 1ULL << 10 },
};

/*
 * Bytes in the largest unit that still shows at least two digits, rounded
 * up: 60.4 MiB -> 61M, 1.2 GiB -> 1229M, 12.3 GiB -> 13G, 5000 -> 5K.
 */
static uint64_t bytes_unit(uint64_t v, char *suffix)
{
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (v >= 10 * units[i].size) {
			*suffix = units[i].suffix;
			return units[i].size;
		}
	*suffix = v >= 1024 ? 'K' : '\0';
	return v >= 1024 ? 1024 : 1;
}

uint64_t hw_bytes_rounded(uint64_t v)
{
	char suffix;
	uint64_t unit;

	if (v == HW_UNLIMITED)
		return v;
	unit = bytes_unit(v, &suffix);
	return (v + unit - 1) / unit * unit;
}

void hw_format_bytes(uint64_t v, char *buf, size_t size)
{
	char suffix;
	uint64_t unit;

	if (v == HW_UNLIMITED) {
		snprintf(buf, size, "infinity");
		return;
	}
	unit = bytes_unit(v, &suffix);
	if (suffix)
		snprintf(buf, size, "%" PRIu64 "%c", (v + unit - 1) / unit, suffix);
	else
		snprintf(buf, size, "%" PRIu64, v);
}

uint64_t hw_recommend(enum hw_kind kind, uint64_t peak, int margin)
{
	switch (kind) {
	case HW_BYTES:
		return hw_bytes_rounded(add_margin(peak, margin));
	case HW_COUNT:
		return hw_round_count(add_margin(peak, margin));
	case HW_EXACT:
		return peak;
	default:
		return HW_UNLIMITED;
	}
}

struct hw_advice hw_limit_advice(const struct hw_marks *m, int i, int margin)
{
	const struct hw_limit_info *info = &hw_limits[i];
	const struct hw_limit *l = &m->lim[i];
	struct hw_advice a = { 0 };

	if (info->kind == HW_UNTRACKED) {
		a.why = "Linux does not enforce this limit";
		return a;
	}
	if (!l->have_peak) {
		a.why = "not measured on this kernel";
		return a;
	}
	a.value = hw_recommend(info->kind, l->peak, margin);
	if (info->caveat)
		a.why = info->caveat;
	else if (hw_inherited_not_derived(m))
		a.why = hw_inherited_not_derived(m);
	else if (info->if_zero && l->peak == 0)
		a.why = info->if_zero;
	else
		a.emit = true;
	if (a.emit && a.value < info->floor) {
		a.value = info->floor;
		a.raised = info->floor_why;
	}
	return a;
}

/*
 * MemoryMax= from memory.peak plus the margin: memory.peak counts page
 * cache, so a limit at the peak never made this run reclaim.  MemoryHigh=
 * from the part that is not cache (memory.peak less the page cache still
 * charged at the end, but at least the largest RSS), plus the margin: above
 * it the kernel reclaims cache instead of failing.
 */
struct hw_memory_advice hw_memory_advice(const struct hw_marks *m, int margin)
{
	struct hw_memory_advice a = { 0 };

	a.max = hw_recommend(HW_BYTES, m->memory_peak, margin);
	if (m->have_memory_file) {
		a.not_cache = m->memory_peak > m->memory_file ?
			      m->memory_peak - m->memory_file : 0;
		if (a.not_cache < m->maxrss)
			a.not_cache = m->maxrss < m->memory_peak ? m->maxrss : m->memory_peak;
		a.high = hw_recommend(HW_BYTES, a.not_cache, margin);
		if (a.high >= a.max)
			a.high = 0;
	}
	return a;
}

/*
 * Why no task or memory limit is derived from this run, or NULL: the
 * workload ran into the cgroup's own limit, so its peak is that limit and
 * its need is more (the notes give the counts).
 */
const char *hw_tasks_not_derived(const struct hw_marks *m)
{
	return m->pids_refused ?
	       "forks were refused at the task limit, the need is higher (see the notes)" : NULL;
}

/*
 * Shared memory (tmpfs, System V and POSIX shm, shared anonymous mappings)
 * is filled by the data a service touches, up to a size of its own
 * configuration: PostgreSQL's shared buffers grow as its tables do.  A
 * MemoryMax= from one run's peak OOM-killed postgresql@15-main a few runs
 * later, its pgbench tables longer.  When shared memory is more than a
 * quarter of the peak, no memory limit is derived.
 */
#define HW_SHMEM_SHARE 4

const char *hw_memory_not_derived(const struct hw_marks *m)
{
	if (m->memory_oom_kills)
		return "the OOM killer killed processes at the memory limit, the need is higher (see the notes)";
	if (m->memory_max_events)
		return "the memory limit was reached and forced reclaim, the need may be higher (see the notes)";
	if (m->have_memory_file && m->memory_shmem > m->memory_peak / HW_SHMEM_SHARE)
		return "more than a quarter of it is shared memory (memory.stat shmem: tmpfs, shm, shared mappings such as PostgreSQL's shared buffers), which grows with the data touched up to the service's own configured size, not with this run's load";
	return NULL;
}

/*
 * Why no rlimit or bounding set is derived from a cgroup's marks, or NULL:
 * processes that ran its program left it (sshd's, moved by logind to the
 * user's session scope; a job a daemon moved to a scope of its own), and
 * took both along.  A login session's needs are an administrator's, not in
 * these marks: a bounding set from them would take root's capabilities from
 * every ssh login.  Limits of the cgroup itself (tasks, memory, devices)
 * stay: they do not follow a process out.
 */
const char *hw_inherited_not_derived(const struct hw_marks *m)
{
	return m->moved_out ?
	       "processes that ran here moved to other cgroups (login sessions, scopes) and took it along; their needs there are not in these marks" :
	       NULL;
}

/* Why no bounding set (cap-drop, capabilities) is written, or NULL. */
const char *hw_caps_not_derived(const struct hw_marks *m)
{
	if (!m->have_cap_used)
		return "capabilities used were not measured";
	return hw_inherited_not_derived(m);
}

/*
 * The group name of @major in /proc/devices ("pts" for 136), or NULL.
 */
static int proc_devices_name(char type, uint32_t major, char *buf, size_t size)
{
	FILE *f = fopen("/proc/devices", "r");
	char line[128], name[64];
	bool in_section = false;
	unsigned int maj;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Character", 9))
			in_section = type == 'c';
		else if (!strncmp(line, "Block", 5))
			in_section = type == 'b';
		else if (in_section && sscanf(line, "%u %63s", &maj, name) == 2 &&
			 maj == major) {
			fclose(f);
			snprintf(buf, size, "%s", name);
			return 0;
		}
	}
	fclose(f);
	return -1;
}

/* The shortest path of a node under @dir (two levels deep) for @d. */
static void find_node(const char *dir, const struct hw_device *d, int depth,
		      char *best, size_t size)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char path[512];
	struct stat st;

	if (!dp)
		return;
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			/* /dev/fd and friends are links; skip per-process dirs */
			if (depth < 2)
				find_node(path, d, depth + 1, best, size);
			continue;
		}
		if (!(d->type == 'c' ? S_ISCHR(st.st_mode) : S_ISBLK(st.st_mode)))
			continue;
		if (major(st.st_rdev) != d->major || minor(st.st_rdev) != d->minor)
			continue;
		if (!*best || strlen(path) < strlen(best) ||
		    (strlen(path) == strlen(best) && strcmp(path, best) < 0))
			snprintf(best, size, "%s", path);
	}
	closedir(dp);
}

/*
 * A name systemd's DeviceAllow= and docker's --device understand:
 *   /dev/null      a single device with a node under /dev
 *   char-pts       every minor of a major, by its /proc/devices group
 *   char-*         every device of the type
 * Returns 0, or -1 when the measured host gave it no such name (no node, no
 * group; see hw_name_devices): then @buf gets the devices.list form, "c 240:5".
 */
int hw_device_name(const struct hw_device *d, char *buf, size_t size)
{
	if (d->major == HW_ANY) {
		snprintf(buf, size, "%s-*", d->type == 'c' ? "char" : "block");
		return 0;
	}
	if (d->name[0]) {
		snprintf(buf, size, "%s", d->name);
		return 0;
	}
	if (d->minor == HW_ANY)
		snprintf(buf, size, "%c %u:*", d->type, d->major);
	else
		snprintf(buf, size, "%c %u:%u", d->type, d->major, d->minor);
	return -1;
}

/*
 * Name the devices from this host's /dev and /proc/devices: called where the
 * marks are read, so that a report printed or merged elsewhere keeps the
 * names of the host measured.  A name too long to keep stays unknown.
 */
void hw_name_devices(struct hw_marks *m)
{
	for (int i = 0; i < m->ndevices; i++) {
		struct hw_device *d = &m->devices[i];
		char found[512] = "", group[64];

		if (d->name[0] || d->major == HW_ANY)
			continue;
		if (d->minor == HW_ANY) {
			if (!proc_devices_name(d->type, d->major, group, sizeof(group)))
				snprintf(found, sizeof(found), "%s-%s",
					 d->type == 'c' ? "char" : "block", group);
		} else {
			find_node("/dev", d, 0, found, sizeof(found));
		}
		if (strlen(found) < sizeof(d->name))
			strcpy(d->name, found);
	}
}
