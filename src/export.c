// SPDX-License-Identifier: GPL-2.0
/*
 * highwater export: the marks of every cgroup under some roots in the
 * Prometheus text exposition format (version 0.0.4), for node_exporter's
 * textfile collector.  One family at a time, each with its HELP and TYPE,
 * every cgroup a sample labelled cgroup="/system.slice/nginx.service" and
 * unit="nginx.service"; values in base units (bytes, seconds), "+Inf" for
 * no limit.  The file is written aside and renamed, so that a scrape never
 * reads half of it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hw.h"

struct cgroups {
	struct hw_marks *m;
	int n, size;
};

/*
 * @items (@n used of *@size, each @each bytes) with room for one more:
 * doubled when full, *@size updated; NULL when out of memory (@items is
 * then still the caller's).
 */
static void *grow(void *items, int *size, int n, size_t each)
{
	int want = *size ? 2 * *size : 64;
	void *more;

	if (n < *size)
		return items;
	more = realloc(items, (size_t)want * each);
	if (more)
		*size = want;
	return more;
}

/* @dir and every cgroup below it (32 levels at most), in tree order. */
static int walk(const char *mount, const char *dir, struct cgroups *cgs, int depth)
{
	struct hw_marks *m;
	struct dirent *de;
	DIR *d;
	int r;

	m = grow(cgs->m, &cgs->size, cgs->n, sizeof(*cgs->m));
	if (!m)
		return -ENOMEM;
	cgs->m = m;
	hw_marks_init(&cgs->m[cgs->n]);
	r = hw_collect_cgroup_all(mount, dir, &cgs->m[cgs->n]);
	if (r == -ENOENT)
		return 0;	/* removed meanwhile */
	if (r)
		return r;
	cgs->n++;
	if (depth >= 32 || !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		char path[1200];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		r = walk(mount, path, cgs, depth + 1);
		if (r)
			break;
	}
	closedir(d);
	return r;
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', out);
		if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

/* The unit a cgroup is: its last component when systemd named it so. */
static const char *unit_of(const char *cgroup)
{
	static const char *const kinds[] = { ".service", ".scope", ".slice", ".socket",
					     ".mount", ".swap" };
	const char *name = strrchr(cgroup, '/');
	size_t n;

	name = name ? name + 1 : cgroup;
	n = strlen(name);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (n > strlen(kinds[i]) && !strcmp(name + n - strlen(kinds[i]), kinds[i]))
			return name;
	return "";
}

/* name{cgroup="...",unit="..."[,EXTRA] */
static void series(FILE *out, const char *name, const struct hw_marks *m)
{
	fprintf(out, "%s{cgroup=\"", name);
	label_value(out, m->cgroup[0] ? m->cgroup : "/");
	fputs("\",unit=\"", out);
	label_value(out, unit_of(m->cgroup));
	fputc('"', out);
}

static void value(FILE *out, uint64_t v)
{
	if (v == HW_UNLIMITED)
		fputs("} +Inf\n", out);
	else
		fprintf(out, "} %" PRIu64 "\n", v);
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * A limit's value in base units: RLIMIT_RTTIME is in microseconds, which
 * Prometheus wants as seconds; the others are bytes, seconds or counts.
 */
static void limit_sample(FILE *out, int i, uint64_t v)
{
	if (i == RLIMIT_RTTIME && v != HW_UNLIMITED)
		fprintf(out, "} %" PRIu64 ".%06" PRIu64 "\n", v / 1000000, v % 1000000);
	else
		value(out, v);
}

/* An rlimit family: the peak (@soft false) or the soft limit of each limit known. */
static void rlimit_family(FILE *out, const struct cgroups *cgs, bool soft,
			  const char *name, const char *help)
{
	family(out, name, "gauge", help);
	for (int c = 0; c < cgs->n; c++)
		for (int i = 0; i < HW_NLIMITS; i++) {
			const struct hw_limit *l = &cgs->m[c].lim[i];

			if (!(soft ? l->have_limit : l->have_peak))
				continue;
			series(out, name, &cgs->m[c]);
			fprintf(out, ",limit=\"%s\"", hw_limits[i].key);
			limit_sample(out, i, soft ? l->soft : l->peak);
		}
}

/*
 * One family of a cgroup number: @have and @v are read at the offsets given,
 * so that the table below says everything about each.
 */
struct number_family {
	const char *name, *type, *help;
	size_t have, v;	/* offsets in struct hw_marks; have 0: always */
};

#define AT(field) offsetof(struct hw_marks, field)
/* The field of *@m at offset @off, of @type. */
#define MARK(m, off, type) (*(type *)((const char *)(m) + (off)))

static const struct number_family numbers[] = {
	{ "highwater_tasks_peak", "gauge", "pids.peak: the most tasks the cgroup had at once.",
	  AT(have_pids_peak), AT(pids_peak) },
	{ "highwater_tasks_max", "gauge", "pids.max: the cgroup's task limit; +Inf for none.",
	  AT(have_pids_peak), AT(pids_max) },
	{ "highwater_tasks_refused_total", "counter", "Forks refused at the cgroup's task limit (pids.events max).",
	  AT(have_pids_peak), AT(pids_refused) },
	{ "highwater_processes_moved_out_total", "counter", "processes.moved_out: processes that left the cgroup while running its program, taking its rlimits and bounding set along.",
	  AT(have_moved_out), AT(moved_out) },
	{ "highwater_memory_peak_bytes", "gauge", "memory.peak: the most memory charged to the cgroup, page cache included.",
	  AT(have_memory_peak), AT(memory_peak) },
	{ "highwater_memory_max_bytes", "gauge", "memory.max: the cgroup's memory limit; +Inf for none.",
	  AT(have_memory_peak), AT(memory_max) },
	{ "highwater_memory_max_events_total", "counter", "Times the cgroup reached memory.max and was made to reclaim (memory.events max).",
	  AT(have_memory_peak), AT(memory_max_events) },
	{ "highwater_memory_oom_kills_total", "counter", "Processes of the cgroup the OOM killer killed (memory.events oom_kill).",
	  AT(have_memory_peak), AT(memory_oom_kills) },
};

static void cgroup_numbers(FILE *out, const struct cgroups *cgs)
{
	for (size_t f = 0; f < sizeof(numbers) / sizeof(numbers[0]); f++) {
		family(out, numbers[f].name, numbers[f].type, numbers[f].help);
		for (int c = 0; c < cgs->n; c++) {
			if (numbers[f].have && !MARK(&cgs->m[c], numbers[f].have, const bool))
				continue;
			series(out, numbers[f].name, &cgs->m[c]);
			value(out, MARK(&cgs->m[c], numbers[f].v, const uint64_t));
		}
	}
}

static void capabilities(FILE *out, const struct cgroups *cgs)
{
	family(out, "highwater_capability_used", "gauge",
	       "1 for each capability a process of the cgroup used (CapUsd, capabilities.used).");
	for (int c = 0; c < cgs->n; c++)
		for (int cap = 0; cap <= 63; cap++) {
			const char *name = hw_cap_name(cap);

			if (!cgs->m[c].have_cap_used || !(cgs->m[c].cap_used & (1ULL << cap)))
				continue;
			series(out, "highwater_capability_used", &cgs->m[c]);
			if (name)
				fprintf(out, ",capability=\"%s\"", name);
			else	/* past the last this highwater knows */
				fprintf(out, ",capability=\"%d\"", cap);
			value(out, 1);
		}
}

static void devices(FILE *out, const struct cgroups *cgs)
{
	family(out, "highwater_device_accessed", "gauge",
	       "1 for each device the cgroup's processes opened or created (devices.accessed), with its access r, w, m.");
	for (int c = 0; c < cgs->n; c++)
		for (int i = 0; i < cgs->m[c].ndevices; i++) {
			const struct hw_device *d = &cgs->m[c].devices[i];
			char id[64], access[4] = "", *a = access;

			if (d->major == HW_ANY)
				snprintf(id, sizeof(id), "%c *:*", d->type);
			else if (d->minor == HW_ANY)
				snprintf(id, sizeof(id), "%c %u:*", d->type, d->major);
			else
				snprintf(id, sizeof(id), "%c %u:%u", d->type, d->major, d->minor);
			if (d->access & HW_ACC_READ)
				*a++ = 'r';
			if (d->access & HW_ACC_WRITE)
				*a++ = 'w';
			if (d->access & HW_ACC_MKNOD)
				*a++ = 'm';
			series(out, "highwater_device_accessed", &cgs->m[c]);
			fprintf(out, ",device=\"%s\",access=\"%s\",name=\"", id, access);
			label_value(out, d->name);
			fputc('"', out);
			value(out, 1);
		}
}

/*
 * The settings highwater would write for each cgroup (report.c's, from the
 * same advice): an rlimit's where it would set one, TasksMax= and MemoryMax=
 * unless the cgroup ran into its own limit.  Each is monotonic in its peak,
 * so the maximum over hosts of these is what highwater merge derives from
 * the hosts' reports: Prometheus's recording rules need no copy of the
 * margin and rounding (contrib/prometheus/highwater.rules.yml).
 */
static void recommended(FILE *out, const struct cgroups *cgs, int margin)
{
	family(out, "highwater_rlimit_recommended", "gauge",
	       "The soft limit highwater would set (the peak plus the margin, rounded up), where it would set one; bytes, seconds or counts.");
	for (int c = 0; c < cgs->n; c++)
		for (int i = 0; i < HW_NLIMITS; i++) {
			struct hw_advice a = hw_limit_advice(&cgs->m[c], i, margin);

			if (!a.emit)
				continue;
			series(out, "highwater_rlimit_recommended", &cgs->m[c]);
			fprintf(out, ",limit=\"%s\"", hw_limits[i].key);
			limit_sample(out, i, a.value);
		}
	family(out, "highwater_tasks_recommended", "gauge",
	       "The task limit highwater would set (TasksMax=, --pids-limit): pids.peak plus the margin, rounded up.");
	for (int c = 0; c < cgs->n; c++)
		if (cgs->m[c].have_pids_peak && !hw_tasks_not_derived(&cgs->m[c])) {
			series(out, "highwater_tasks_recommended", &cgs->m[c]);
			value(out, hw_recommend(HW_COUNT, cgs->m[c].pids_peak, margin));
		}
	family(out, "highwater_memory_max_recommended_bytes", "gauge",
	       "The memory limit highwater would set (MemoryMax=, --memory): memory.peak plus the margin, rounded up.");
	for (int c = 0; c < cgs->n; c++)
		if (cgs->m[c].have_memory_peak && !hw_memory_not_derived(&cgs->m[c])) {
			series(out, "highwater_memory_max_recommended_bytes", &cgs->m[c]);
			value(out, hw_memory_advice(&cgs->m[c], margin).max);
		}
}

/*
 * The bounding set of the cgroup's first living process, as node_exporter
 * shows a unit's state: every capability, 1 in the set and 0 not, so that
 * an alert can join it with highwater_capability_used.
 */
static void bounding_set(FILE *out, const struct cgroups *cgs)
{
	family(out, "highwater_capability_bounding", "gauge",
	       "1 for each capability in the bounding set of the cgroup's first living process (CapBnd), 0 for each not.");
	for (int c = 0; c < cgs->n; c++)
		for (int cap = 0; cgs->m[c].have_cap_bnd && cap <= HW_CAP_LAST; cap++) {
			series(out, "highwater_capability_bounding", &cgs->m[c]);
			fprintf(out, ",capability=\"%s\"", hw_cap_name(cap));
			value(out, !!(cgs->m[c].cap_bnd & (1ULL << cap)));
		}
}

void hw_export_write(FILE *out, const struct hw_marks *m, int n, double seconds, int margin)
{
	const struct cgroups cgs = { (struct hw_marks *)m, n, n };

	rlimit_family(out, &cgs, false, "highwater_rlimit_peak",
		      "The smallest soft limit every check of the cgroup's processes, living and exited, would have passed (limits_peak, rlimits.peak); bytes, seconds or counts.");
	rlimit_family(out, &cgs, true, "highwater_rlimit_soft",
		      "The soft limit of the cgroup's first living process (/proc/PID/limits); +Inf for none.");
	recommended(out, &cgs, margin);
	cgroup_numbers(out, &cgs);
	capabilities(out, &cgs);
	bounding_set(out, &cgs);
	devices(out, &cgs);
	family(out, "highwater_export_cgroups", "gauge", "Cgroups this export read.");
	fprintf(out, "highwater_export_cgroups %d\n", n);
	family(out, "highwater_export_duration_seconds", "gauge", "How long this export took to read them.");
	fprintf(out, "highwater_export_duration_seconds %.3f\n", seconds);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Windows (--interval).  The marks are maxima since each cgroup was made;
 * memory.peak (6.12) and pids.peak (the series' patch 43) can restart for a
 * reader: a write to the open file makes reads through that descriptor show
 * the peak since then, from the usage then.  The loop holds one of each per
 * cgroup, sorted by path: at each export it reads the last interval's peak
 * and restarts it.  A cgroup first seen gets its descriptors and its first
 * windows at the next export.
 */
static const struct window_kind {
	const char *file, *family, *help;
	const char *needs;	/* for a restart */
	size_t have, have_window, window;	/* offsets in struct hw_marks */
} window_kinds[] = {
	{ "memory.peak", "highwater_memory_peak_window_bytes",
	  "The most memory charged to the cgroup since the previous export (memory.peak restarted at each); from the cgroup's second export on.",
	  "Linux 6.12 or later", AT(have_memory_peak), AT(have_memory_window), AT(memory_window) },
	{ "pids.peak", "highwater_tasks_peak_window",
	  "The most tasks the cgroup had at once since the previous export (pids.peak restarted at each); from the cgroup's second export on.",
	  "the highwater kernel series, patch 43", AT(have_pids_peak), AT(have_tasks_window),
	  AT(tasks_window) },
};
#define NKINDS (sizeof(window_kinds) / sizeof(window_kinds[0]))

struct window {
	char *path;	/* the cgroup's memory.peak or pids.peak */
	int fd;
	bool seen;	/* by this export's walk */
};

struct windows {
	struct window *w;
	int n, size;
};

static int window_cmp(const void *a, const void *b)
{
	return strcmp(((const struct window *)a)->path, ((const struct window *)b)->path);
}

/*
 * Open @path, a file of kind @k, and restart its peak: a new window, or -1
 * (said once a kind).  A kernel that cannot restart the kind is not asked
 * again.
 */
static int window_open(const char *path, unsigned int k, bool *unsupported)
{
	static bool told[NKINDS];
	const struct window_kind *kind = &window_kinds[k];
	int fd = open(path, O_RDWR | O_CLOEXEC), e;
	struct stat st;

	if (fd >= 0 && pwrite(fd, "reset\n", 6, 0) != 6) {
		e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	if (fd >= 0 || errno == ENOENT || errno == ENODEV)
		return fd;	/* ENOENT, ENODEV: the cgroup was removed since the walk */
	e = errno;
	/* A kernel without the restart shows the file read-only (root may open it: EINVAL). */
	if (!stat(path, &st) && !(st.st_mode & 0222)) {
		unsupported[k] = true;
		hw_warn("%s takes no restart on this kernel (it needs %s): no %s for any cgroup",
			kind->file, kind->needs, kind->family);
	} else if (!told[k]) {
		told[k] = true;
		hw_warn("cannot restart %s: %s: no %s for it%s", path, strerror(e), kind->family,
			e == EACCES || e == EPERM ? " (a restart is a write: as root)" :
			e == EMFILE ? " (two descriptors a cgroup: raise the hard LimitNOFILE=)" : "");
	}
	return -1;
}

/*
 * The last interval's peaks of every cgroup in @cgs that has them, into its
 * marks, and a new interval started; windows of removed cgroups closed.
 */
static int window_peaks(const char *mount, struct cgroups *cgs, struct windows *ws)
{
	static bool unsupported[NKINDS];
	int known = ws->n, kept = 0;

	for (int i = 0; i < ws->n; i++)
		ws->w[i].seen = false;
	for (int c = 0; c < cgs->n; c++)
		for (unsigned int k = 0; k < NKINDS; k++) {
			const struct window_kind *kind = &window_kinds[k];
			struct hw_marks *m = &cgs->m[c];
			struct window key = { 0 }, *w;
			char path[1200], buf[32];
			ssize_t len;

			if (!MARK(m, kind->have, bool) || unsupported[k])
				continue;
			snprintf(path, sizeof(path), "%s%s/%s", mount, m->cgroup, kind->file);
			key.path = path;
			w = bsearch(&key, ws->w, known, sizeof(*w), window_cmp);
			if (w) {
				w->seen = true;
				len = pread(w->fd, buf, sizeof(buf) - 1, 0);
				if (len > 0) {
					buf[len] = '\0';
					MARK(m, kind->have_window, bool) =
						!hw_parse_u64(buf, &MARK(m, kind->window, uint64_t));
				}
				/* Restarted at once; a cgroup made again under the same name fails the read. */
				if (len > 0 && pwrite(w->fd, "reset\n", 6, 0) == 6)
					continue;
				close(w->fd);
				w->fd = window_open(path, k, unsupported);
				MARK(m, kind->have_window, bool) = false;
				continue;
			}
			w = grow(ws->w, &ws->size, ws->n, sizeof(*ws->w));
			if (!w)
				return -ENOMEM;
			ws->w = w;
			w = &ws->w[ws->n];
			w->path = strdup(path);
			if (!w->path)
				return -ENOMEM;
			w->fd = window_open(path, k, unsupported);
			w->seen = true;
			ws->n++;
		}
	/* Close what was not seen (removed cgroups) or not opened, keep the rest sorted. */
	for (int i = 0; i < ws->n; i++) {
		struct window *w = &ws->w[i];

		if (w->seen && w->fd >= 0) {
			ws->w[kept++] = *w;
		} else {
			if (w->fd >= 0)
				close(w->fd);
			free(w->path);
		}
	}
	ws->n = kept;
	qsort(ws->w, ws->n, sizeof(*ws->w), window_cmp);
	return 0;
}

/* export --interval's own families: each cgroup's peaks of the interval. */
static void interval_family(FILE *out, const struct cgroups *cgs, double interval)
{
	for (unsigned int k = 0; k < NKINDS; k++) {
		const struct window_kind *kind = &window_kinds[k];

		family(out, kind->family, "gauge", kind->help);
		for (int c = 0; c < cgs->n; c++)
			if (MARK(&cgs->m[c], kind->have_window, bool)) {
				series(out, kind->family, &cgs->m[c]);
				value(out, MARK(&cgs->m[c], kind->window, uint64_t));
			}
	}
	family(out, "highwater_export_interval_seconds", "gauge",
	       "The time between two exports (--interval): the window of the *_window families.");
	fprintf(out, "highwater_export_interval_seconds %g\n", interval);
}

/* DIR/highwater.prom, written aside and renamed; 0 or an exit code. */
static int write_textfile(const char *textfile_dir, const struct cgroups *cgs, double seconds,
			  int margin, double interval)
{
	char tmp[1100], final[1100];
	FILE *out;
	bool bad;
	int r;

	snprintf(final, sizeof(final), "%s/highwater.prom", textfile_dir);
	snprintf(tmp, sizeof(tmp), "%s/.highwater.prom.%d", textfile_dir, (int)getpid());
	out = fopen(tmp, "we");
	if (!out) {
		r = errno;
		hw_warn("cannot write %s: %s", tmp, strerror(r));
		return r == EACCES || r == EPERM ? HW_EX_NOPERM : HW_EX_IOERR;
	}
	hw_export_write(out, cgs->m, cgs->n, seconds, margin);
	if (interval)
		interval_family(out, cgs, interval);
	bad = fflush(out) || fsync(fileno(out));
	if (fclose(out))
		bad = true;
	if (bad || rename(tmp, final)) {
		hw_warn("cannot write %s: %s", final, strerror(errno));
		unlink(tmp);
		return HW_EX_IOERR;
	}
	return 0;
}

/*
 * Sleep until @next (CLOCK_MONOTONIC); true if a signal of @stop (blocked)
 * came first or was pending.
 */
static bool wait_or_stop(const sigset_t *stop, const struct timespec *next)
{
	for (;;) {
		double left = next->tv_sec + next->tv_nsec / 1e9 - now();
		struct timespec t = { 0 };

		if (left > 0) {
			t.tv_sec = (time_t)left;
			t.tv_nsec = (long)((left - (double)t.tv_sec) * 1e9);
		}
		if (sigtimedwait(stop, NULL, &t) > 0)
			return true;
		if (errno == EAGAIN)
			return false;	/* the time came (EINTR: another signal) */
	}
}

/*
 * Read every cgroup under @roots (relative to the cgroup2 mount; default
 * system.slice and machine.slice, those that exist) and write them to @out,
 * or with @textfile_dir to DIR/highwater.prom, written aside and renamed;
 * with @interval, again every @interval seconds, with the windows above.
 * 0 or an exit code, with a message.
 */
int hw_export(char **roots, int nroots, FILE *out, const char *textfile_dir, int margin,
	      double interval)
{
	static char *defaults[] = { "system.slice", "machine.slice" };
	struct windows ws = { 0 };
	char mount[256], dir[1024], **dirs;
	struct timespec next;
	sigset_t stop;
	int r = 0, ndirs = 0;

	if (hw_cgroup2_mount(mount, sizeof(mount))) {
		hw_warn("no cgroup2 file system is mounted (mount -t cgroup2 none /sys/fs/cgroup)");
		return HW_EX_UNAVAILABLE;
	}
	if (!nroots) {
		roots = defaults;
		nroots = 2;
	}
	dirs = calloc(nroots, sizeof(*dirs));
	if (!dirs)
		return HW_EX_SOFTWARE;
	for (int i = 0; i < nroots; i++) {
		struct stat st;

		snprintf(dir, sizeof(dir), "%s/%s", mount, roots[i][0] == '/' ? roots[i] + 1 : roots[i]);
		if (!strncmp(roots[i], mount, strlen(mount)))
			snprintf(dir, sizeof(dir), "%s", roots[i]);
		if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
			if (roots == defaults)
				continue;	/* no containers here, say */
			hw_warn("%s is not a cgroup (give paths under %s, or relative to it)", dir, mount);
			r = HW_EX_NOINPUT;
			goto out;
		}
		if (!(dirs[ndirs++] = strdup(dir))) {
			r = HW_EX_SOFTWARE;
			goto out;
		}
	}
	if (!ndirs)
		hw_warn("neither system.slice nor machine.slice is under %s: nothing to export (give the roots)", mount);

	sigemptyset(&stop);
	if (interval) {
		struct rlimit nofile;

		/* A descriptor per cgroup held: the soft limit (1024 by default) up to the hard one. */
		if (!getrlimit(RLIMIT_NOFILE, &nofile) && nofile.rlim_cur < nofile.rlim_max) {
			nofile.rlim_cur = nofile.rlim_max;
			setrlimit(RLIMIT_NOFILE, &nofile);
		}
		/*
		 * SIGTERM (systemctl stop) and SIGINT end the daemon between
		 * exports: one arriving during an export waits for its
		 * rename, so no file is left half written or aside.
		 */
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		sigprocmask(SIG_BLOCK, &stop, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		struct cgroups cgs = { 0 };
		double start = now();

		for (int i = 0; i < ndirs && !r; i++)
			r = walk(mount, dirs[i], &cgs, 0);
		if (!r && interval)
			r = window_peaks(mount, &cgs, &ws);
		if (r) {
			hw_warn("cannot read the cgroups: %s", strerror(-r));
			free(cgs.m);
			r = r == -ENOMEM ? HW_EX_SOFTWARE : HW_EX_IOERR;
			break;
		}
		if (textfile_dir) {
			r = write_textfile(textfile_dir, &cgs, now() - start, margin, interval);
		} else {
			hw_export_write(out, cgs.m, cgs.n, now() - start, margin);
			if (fflush(out)) {
				hw_warn("cannot write the metrics: %s", strerror(errno));
				r = HW_EX_IOERR;
			}
		}
		free(cgs.m);
		if (r || !interval)
			break;
		/*
		 * On the interval's grid, so that a slow export does not shift
		 * the next; one longer than the interval skips the times it
		 * overran rather than exporting back to back.
		 */
		do {
			next.tv_sec += (time_t)interval;
			next.tv_nsec += (long)((interval - (time_t)interval) * 1e9);
			if (next.tv_nsec >= 1000000000L) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000L;
			}
		} while (next.tv_sec + next.tv_nsec / 1e9 < now());
		if (wait_or_stop(&stop, &next))
			break;
	}
out:
	for (int i = 0; i < ws.n; i++) {
		close(ws.w[i].fd);
		free(ws.w[i].path);
	}
	free(ws.w);
	for (int i = 0; i < ndirs; i++)
		free(dirs[i]);
	free(dirs);
	return r;
}
