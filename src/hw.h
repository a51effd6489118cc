/* SPDX-License-Identifier: GPL-2.0 */
/*
 * highwater: the marks a workload left in the kernel, and what to make of
 * them.  One struct hw_marks holds everything a report needs; the parsers
 * fill it, the recommendation rules read it, the formats print it.
 */
#ifndef HW_H
#define HW_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <stdint.h>
#include <stdio.h>

#define HW_UNLIMITED UINT64_MAX	/* "unlimited" in /proc/PID/limits */
#define HW_ANY UINT32_MAX	/* "*" in devices.accessed */
#define HW_NLIMITS 16		/* RLIMIT_NLIMITS */
#define HW_CAP_LAST 40		/* CAP_CHECKPOINT_RESTORE in 6.12 */
#define HW_MAX_DEVICES 256
#define HW_MAX_NOTES 16
#define HW_SCHEMA "highwater/1"

/* Exit codes for highwater's own failures (sysexits.h) */
#define HW_EX_USAGE 64		/* bad option or argument */
#define HW_EX_DATAERR 65	/* a file to merge is not a highwater report */
#define HW_EX_NOINPUT 66	/* no such process, cgroup or file */
#define HW_EX_UNAVAILABLE 69	/* no cgroup2 mount, cgroup could not be made */
#define HW_EX_SOFTWARE 70	/* fork or another system call failed */
#define HW_EX_IOERR 74		/* a file could not be read or written */
#define HW_EX_NOPERM 77		/* not allowed to read or create it */
#define HW_EX_TIMEOUT 124	/* run: --timeout expired, as timeout(1) */
#define HW_EX_CANNOT_RUN 126	/* run: CMD found but not executable, as env(1) */
#define HW_EX_NOT_FOUND 127	/* run: CMD not found, as env(1) */

/* How a limit's peak becomes a recommended value */
enum hw_kind {
	HW_BYTES,	/* margin, rounded to K/M/G */
	HW_COUNT,	/* margin, rounded to two significant digits */
	HW_EXACT,	/* a permission (nice, rtprio): the peak itself */
	HW_UNTRACKED,	/* RSS, LOCKS: Linux does not enforce them */
};

struct hw_limit_info {
	const char *key;	/* JSON key, docker --ulimit name: "nofile" */
	const char *proc_name;	/* row name in /proc/PID/limits */
	const char *systemd;	/* LimitNOFILE */
	enum hw_kind kind;
	/* Why the systemd/docker output comments the line out, if it does */
	const char *caveat;
	/* Why a peak of 0 is no limit to set (it would refuse the first use) */
	const char *if_zero;
	bool docker;		/* docker has --ulimit KEY */
	/* The least value to recommend, and why (programs that size from it) */
	uint64_t floor;
	const char *floor_why;
};

extern const struct hw_limit_info hw_limits[HW_NLIMITS];
int hw_limit_index(const char *key);
const char *hw_cap_name(int cap);	/* "CAP_NET_BIND_SERVICE" */
int hw_cap_from_name(const char *name);	/* -1 if unknown */

struct hw_limit {
	bool have_peak;		/* the kernel reported a Peak for it */
	bool have_limit;	/* soft/hard are known */
	uint64_t peak;
	uint64_t soft, hard;	/* HW_UNLIMITED for unlimited */
	/* The peak is of a process that has exited: its cgroup kept it */
	bool exited;
};

/* DEVCG_ACC_* bits, as devices.accessed prints them: r, w, m */
#define HW_ACC_READ 1
#define HW_ACC_WRITE 2
#define HW_ACC_MKNOD 4

struct hw_device {
	char type;		/* 'c' or 'b' */
	uint32_t major, minor;	/* HW_ANY for "*" */
	unsigned int access;	/* HW_ACC_* */
	/*
	 * Its name on the host that was measured ("/dev/null", "char-pts"),
	 * found when the marks were read there and carried in the JSON
	 * report; "" when that host had none.  Never looked up elsewhere.
	 */
	char name[64];
};

struct hw_marks {
	/* What was measured */
	char command[512];
	int exit_status;	/* -1 when not a run */
	bool timed_out;
	double seconds;
	int processes;		/* processes whose marks were read */

	/* Per process (maximum over the processes measured) */
	bool have_limits_peak;	/* some /proc/PID/limits_peak was read */
	struct hw_limit lim[HW_NLIMITS];
	bool have_cap_used;
	uint64_t cap_used;	/* CapUsd */
	bool have_cap_amb;
	uint64_t cap_amb;	/* CapAmb of the command itself */
	bool have_cap_bnd;
	uint64_t cap_bnd;	/* CapBnd of the first process read (export) */
	bool have_uid;
	unsigned int uid;	/* real uid of the command itself */
	uint64_t vm_peak, vm_hwm, maxrss;	/* bytes; 0: unknown */

	/* Per cgroup */
	char cgroup[512];	/* path relative to the cgroup2 mount, or "" */
	/* rlimits.peak and capabilities.used, which keep exited processes' */
	bool have_cgroup_marks;
	uint64_t cap_used_exited;	/* used only by processes that exited */
	/*
	 * processes.moved_out: processes that left the cgroup while running
	 * its program (sshd's sessions, moved to session scopes by logind).
	 * They took its rlimits and bounding set along, and what they used
	 * where they went is not in its marks.
	 */
	bool have_moved_out;
	uint64_t moved_out;
	bool have_pids_peak, have_memory_peak, have_memory_file, have_devices;
	uint64_t pids_peak;
	uint64_t pids_max;	/* HW_UNLIMITED for max */
	uint64_t memory_peak, memory_max;
	/* export --interval: memory.peak and pids.peak since the previous export (their reset) */
	bool have_memory_window, have_tasks_window;
	uint64_t memory_window, tasks_window;
	uint64_t memory_file;	/* page cache at the end: memory.stat file less shmem */
	uint64_t memory_shmem;	/* shared memory at the end: memory.stat shmem */
	/*
	 * The cgroup's own limits, run into: forks refused at pids.max
	 * (pids.events "max"), reclaim forced at memory.max and OOM kills
	 * (memory.events "max", "oom_kill").  A peak that ran into its limit
	 * is the limit, not the need: no setting is made from it.
	 */
	uint64_t pids_refused, memory_max_events, memory_oom_kills;
	int ndevices;
	struct hw_device devices[HW_MAX_DEVICES];

	/*
	 * Marks that could not be read, and why: one line each.  A full table
	 * gives its last line to a count of the notes not kept, and a note too
	 * long for a line ends in "...": nothing is lost without a word.
	 */
	int nnotes, notes_dropped;
	char notes[HW_MAX_NOTES][200];
};

void hw_marks_init(struct hw_marks *m);
bool hw_has_note(const struct hw_marks *m, const char *prefix);
void hw_note(struct hw_marks *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void hw_note_unnamed_caps(struct hw_marks *m, uint64_t mask, const char *what);

/* parse.c: text of kernel files into marks; 0 or -1 (bad format) */
int hw_parse_limits(const char *text, struct hw_marks *m, bool top);
int hw_parse_status(const char *text, struct hw_marks *m, bool top);
int hw_parse_memory_stat(const char *text, const char *key, uint64_t *val);
int hw_parse_devices(const char *text, struct hw_marks *m);
int hw_parse_u64(const char *text, uint64_t *val);	/* "max" too */
int hw_parse_rlimits_peak(const char *text, uint64_t peak[HW_NLIMITS],
			  bool have[HW_NLIMITS]);
int hw_parse_cap_mask(const char *text, uint64_t *val);
void hw_add_device(struct hw_marks *m, const struct hw_device *d);
void hw_merge_marks(struct hw_marks *into, const struct hw_marks *from);

/* collect.c: read the marks of a process and of a cgroup */
int hw_read_file(const char *path, char *buf, size_t size);	/* -errno, -EFBIG */
ssize_t hw_read_file_alloc(const char *path, char **bufp);	/* malloc()ed */
int hw_cgroup_of(int pid, char *buf, size_t size);	/* 0: this process */
int hw_collect_process(int pid, struct hw_marks *m, bool top);
int hw_collect_cgroup(const char *dir, struct hw_marks *m);
/*
 * The marks a cgroup kept of its exited processes (rlimits.peak,
 * capabilities.used), for cgroup and unit, shown as the exited ones'.
 */
void hw_collect_cgroup_marks(const char *dir, struct hw_marks *m);
/* For run: what the cgroup has above the processes run could read */
void hw_collect_run_cgroup_marks(const char *dir, struct hw_marks *m, int unread);
/* All of the above for cgroup, unit and export: 0 or -errno */
int hw_collect_cgroup_all(const char *mount, const char *dir, struct hw_marks *m);
int hw_cgroup2_mount(char *buf, size_t size);

/*
 * recommend.c: the policy.  What a format makes of a limit's peak: a value
 * to set, or why not (a caveat, a zero, not measured); of memory.peak
 * MemoryMax= and, when the cache part is large, MemoryHigh=; and why no
 * task or memory limit comes from a run that ran into its cgroup's own.
 */
struct hw_advice {
	bool emit;		/* a setting to apply */
	uint64_t value;		/* the recommended value */
	const char *why;	/* why not, when !emit */
	const char *raised;	/* why value is above peak + margin, or NULL */
};
struct hw_advice hw_limit_advice(const struct hw_marks *m, int i, int margin);

struct hw_memory_advice {
	uint64_t max, high;	/* high: 0 when not worth a line */
	uint64_t not_cache;
};
struct hw_memory_advice hw_memory_advice(const struct hw_marks *m, int margin);
const char *hw_tasks_not_derived(const struct hw_marks *m);	/* NULL: fine */
const char *hw_memory_not_derived(const struct hw_marks *m);
const char *hw_inherited_not_derived(const struct hw_marks *m);
const char *hw_caps_not_derived(const struct hw_marks *m);	/* a bounding set */
uint64_t hw_recommend(enum hw_kind kind, uint64_t peak, int margin);
uint64_t hw_round_count(uint64_t v);
void hw_format_bytes(uint64_t v, char *buf, size_t size);	/* "61M" */
uint64_t hw_bytes_rounded(uint64_t v);	/* the value hw_format_bytes shows */
int hw_device_name(const struct hw_device *d, char *buf, size_t size);
void hw_name_devices(struct hw_marks *m);
int hw_parse_device_id(const char *s, struct hw_device *d);

/* report.c */
enum hw_format { HW_TEXT, HW_JSON, HW_SYSTEMD, HW_DOCKER, HW_COMPOSE, HW_OCI,
		 HW_KUBERNETES };
int hw_format_from_name(const char *name);
const char *hw_format_names(void);	/* "text, json, ..." for messages */
void hw_report(FILE *out, const struct hw_marks *m, enum hw_format f,
	       int margin);
/* report.c's pieces the container formats share */
void hw_cap_list(FILE *out, uint64_t mask, const char *sep, bool strip);
void hw_access_str(unsigned int acc, char *buf);	/* "rw": 4 bytes */
void hw_devices_list_line(const struct hw_device *d, char *buf, size_t size);
const char *hw_run_summary(const struct hw_marks *m, char *buf, size_t size);

/* containers.c: docker/podman flags, compose, OCI config.json, Kubernetes */
void hw_report_docker(FILE *out, const struct hw_marks *m, int margin);
void hw_report_compose(FILE *out, const struct hw_marks *m, int margin);
void hw_report_oci(FILE *out, const struct hw_marks *m, int margin);
void hw_report_kubernetes(FILE *out, const struct hw_marks *m, int margin);

/* json.c: read back what hw_report(HW_JSON) wrote; 0 or -1 with a message */
int hw_json_read(const char *text, struct hw_marks *m, char *err,
		 size_t errsize);

/* run.c */
struct hw_run_opts {
	const char *cgroup_parent;	/* NULL: highwater's own cgroup */
	double timeout;			/* seconds, 0: none */
	/* SIGKILL this long after SIGTERM, SIGINT or SIGHUP was passed on */
	double kill_after;
	/* pids.max and memory.max of the workload's cgroup, 0: not set */
	uint64_t pids_max, memory_max;
	bool quiet;
};
#define HW_KILL_AFTER 10.0	/* seconds, --kill-after's default */
int hw_run(char **argv, const struct hw_run_opts *o, struct hw_marks *m);

/*
 * export.c: every cgroup under @roots (default system.slice, machine.slice)
 * in Prometheus's text format, to @out or atomically to
 * TEXTFILE_DIR/highwater.prom; 0 or an exit code.  With @interval (seconds),
 * again every @interval until it fails or is stopped, each export with the
 * memory and tasks peaks of the interval.  hw_export_write writes the marks of @n
 * cgroups read in @seconds.
 */
int hw_export(char **roots, int nroots, FILE *out, const char *textfile_dir, int margin,
	      double interval);
void hw_export_write(FILE *out, const struct hw_marks *m, int n, double seconds, int margin);

/* parse.c: "highwater: ..." on stderr */
void hw_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
