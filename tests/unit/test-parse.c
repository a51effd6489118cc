// SPDX-License-Identifier: GPL-2.0
/*
 * The parsers, on fixture files taken from a guest running the series
 * (*.series, memory.stat, devices.accessed) and from a mainline kernel
 * (*.mainline), plus hand-made ones for the edges.
 *
 *   test-parse FIXTURE_DIR
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "hw.h"

static const char *fixtures;

static const char *fixture(const char *name)
{
	static char text[65536];
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", fixtures, name);
	if (hw_read_file(path, text, sizeof(text)) < 0) {
		tap_diag("cannot read %s", path);
		text[0] = '\0';
	}
	return text;
}

static void limits_with_series(void)
{
	struct hw_marks m;
	int nofile = hw_limit_index("nofile"), rss = hw_limit_index("rss");
	int nice = hw_limit_index("nice"), stack = hw_limit_index("stack");

	hw_marks_init(&m);
	tap_ok(hw_parse_limits(fixture("limits_peak.series"), &m, true) == 0 &&
	       m.have_limits_peak, "limits_peak of a patched kernel parses");
	tap_ok(m.lim[nofile].have_peak && m.lim[nofile].peak == 4 &&
	       m.lim[nofile].soft == 1024 && m.lim[nofile].hard == 4096,
	       "Max open files: peak 4, soft 1024, hard 4096");
	tap_ok(!m.lim[rss].have_peak && m.lim[rss].have_limit &&
	       m.lim[rss].soft == HW_UNLIMITED,
	       "Max resident set: '-' is no peak, 'unlimited' is HW_UNLIMITED");
	tap_ok(m.lim[nice].have_peak && m.lim[nice].peak == 0 &&
	       m.lim[nice].soft == 0,
	       "Max nice priority: a row without units parses");
	tap_ok(m.lim[stack].peak == 135168 && m.lim[stack].soft == 8388608,
	       "Max stack size: bytes");
}

static void limits_mainline(void)
{
	struct hw_marks m;
	int nofile = hw_limit_index("nofile");
	bool any_peak = false;

	hw_marks_init(&m);
	tap_ok(hw_parse_limits(fixture("limits.mainline"), &m, true) == 0 &&
	       !m.have_limits_peak, "/proc/PID/limits of mainline parses, without peaks");
	for (int i = 0; i < HW_NLIMITS; i++)
		any_peak |= m.lim[i].have_peak;
	tap_ok(!any_peak && m.lim[nofile].have_limit,
	       "mainline: limits known, no peak made up");
}

static void limits_maximum(void)
{
	struct hw_marks m;
	int nofile = hw_limit_index("nofile"), memlock = hw_limit_index("memlock");

	hw_marks_init(&m);
	hw_parse_limits(fixture("limits_peak.over"), &m, true);
	hw_parse_limits(fixture("limits_peak.series"), &m, false);
	tap_ok(m.lim[nofile].peak == 257 && m.lim[nofile].soft == 256,
	       "two processes: the larger peak, the top process's limit");
	tap_ok(m.lim[memlock].peak == 65536, "Max locked memory: 65536");
	hw_marks_init(&m);
	tap_ok(hw_parse_limits("Name: not limits\n", &m, true) == -1,
	       "a file that is not a limits table is refused");
	tap_ok(hw_parse_limits("Limit                     Soft Limit           Hard Limit           Units     Peak\n"
			       "Max open files            lots                 4096                 files     3\n",
			       &m, true) == -1, "a bad number is refused");
}

static void status(void)
{
	struct hw_marks m;

	hw_marks_init(&m);
	tap_ok(hw_parse_status(fixture("status.series"), &m, true) == 0 &&
	       m.have_cap_used && m.cap_used == 0,
	       "status of a patched kernel: CapUsd 0 is known, and none");
	tap_ok(m.vm_peak == 3052 * 1024 && m.vm_hwm == 1584 * 1024,
	       "VmPeak and VmHWM in bytes");
	hw_marks_init(&m);
	tap_ok(hw_parse_status(fixture("status.mainline"), &m, true) == 0 &&
	       !m.have_cap_used, "status of mainline: no CapUsd, none made up");
	hw_marks_init(&m);
	hw_parse_status(fixture("status.series-ambient"), &m, true);
	tap_ok(m.cap_used == 1ULL << 10 && m.have_cap_amb &&
	       m.cap_amb == 1ULL << 10 && m.have_uid && m.uid == 1000,
	       "CapUsd, CapAmb and the real uid of the command");
	hw_parse_status(fixture("status.series"), &m, false);
	tap_ok(m.cap_used == 1ULL << 10 && m.uid == 1000,
	       "another process: CapUsd is a union, uid stays the command's");
}

static void memory_stat(void)
{
	uint64_t v = 0;

	tap_ok(hw_parse_memory_stat(fixture("memory.stat"), "file", &v) == 0 &&
	       v == 1052672, "memory.stat: file 1052672");
	tap_ok(hw_parse_memory_stat(fixture("memory.stat"), "anon", &v) == 0 &&
	       v == 0, "memory.stat: anon 0 (the first line)");
	tap_ok(hw_parse_memory_stat(fixture("memory.stat"), "fil", &v) == -1,
	       "memory.stat: a key prefix is not a key");
}

/* Does a line of @m allow device @d with its access? */
static int allowed(const struct hw_marks *m, const struct hw_device *d)
{
	for (int i = 0; i < m->ndevices; i++) {
		const struct hw_device *e = &m->devices[i];

		if (e->type == d->type &&
		    (e->major == HW_ANY || e->major == d->major) &&
		    (e->minor == HW_ANY || e->minor == d->minor) &&
		    (e->access & d->access) == d->access)
			return 1;
	}
	return 0;
}

/*
 * Past HW_MAX_DEVICES distinct devices the list widens, as the kernel's does,
 * and says so: before, every device past it was dropped, and a merged report
 * could leave out a device the service needs.
 */
static void widened(void)
{
	static struct hw_marks m;
	int all = 1;

	hw_marks_init(&m);
	hw_parse_devices("", &m);
	for (uint32_t i = 0; i < 300; i++) {
		struct hw_device d = { 'c', 4000, i, i % 2 ? HW_ACC_READ : HW_ACC_WRITE, "" };

		hw_add_device(&m, &d);
	}
	for (uint32_t i = 0; i < 300; i++)
		all &= allowed(&m, &(struct hw_device){ 'c', 4000, i,
							i % 2 ? HW_ACC_READ : HW_ACC_WRITE, "" });
	tap_ok(all && m.ndevices <= HW_MAX_DEVICES && hw_has_note(&m, "exact devices"),
	       "300 devices of one major: every one still allowed (4000:*), and a note");
	hw_marks_init(&m);
	hw_parse_devices("", &m);
	for (uint32_t i = 0; i < HW_MAX_DEVICES; i++)
		hw_add_device(&m, &(struct hw_device){ 'b', 8 + i, 0, HW_ACC_READ, "" });
	hw_add_device(&m, &(struct hw_device){ 'c', 7, 1, HW_ACC_WRITE, "" });
	all = allowed(&m, &(struct hw_device){ 'c', 7, 1, HW_ACC_WRITE, "" });
	for (uint32_t i = 0; i < HW_MAX_DEVICES; i++)
		all &= allowed(&m, &(struct hw_device){ 'b', 8 + i, 0, HW_ACC_READ, "" });
	tap_ok(all && m.ndevices <= HW_MAX_DEVICES,
	       "a full list of block devices and a new char device: all still allowed");
}

/*
 * A file larger than the buffer is an error, not its first part: a merge of a
 * large report, or cgroup.procs of a large service, was cut silently.
 */
static void read_file_sizes(void)
{
	static char big[5000], buf[4096];
	char path[] = "/tmp/hw-test-read-XXXXXX", *all = NULL;
	int fd = mkstemp(path), r1, r2;
	ssize_t r3;

	memset(big, 'x', sizeof(big));
	if (fd < 0 || write(fd, big, 4095) != 4095)
		return (void)tap_ok(0, "read_file: cannot write %s", path);
	r1 = hw_read_file(path, buf, sizeof(buf));
	if (write(fd, big, sizeof(big) - 4095) != (ssize_t)(sizeof(big) - 4095))
		return (void)tap_ok(0, "read_file: cannot write %s", path);
	close(fd);
	r2 = hw_read_file(path, buf, sizeof(buf));
	r3 = hw_read_file_alloc(path, &all);
	tap_ok(r1 == 4095 && r2 == -EFBIG && r3 == 5000 && all && strlen(all) == 5000,
	       "read_file: a file that just fits is read, a larger one is -EFBIG; the growing reader reads it whole (%d %d %zd)",
	       r1, r2, r3);
	free(all);
	unlink(path);
}

/* A capability this highwater has no name for is a note, not dropped. */
static void unnamed_capability(void)
{
	static struct hw_marks m;
	const char *status = "Name:\tx\nCapUsd:\t0000020000000400\nCapAmb:\t0000000000000000\n";

	hw_marks_init(&m);
	tap_ok(hw_parse_status(status, &m, true) == 0 && m.cap_used == (1ULL << 41 | 1ULL << 10) &&
	       hw_has_note(&m, "capabilities: CapUsd has capability 41"),
	       "CapUsd with capability 41 (past 6.12's last): a note names it (%s)",
	       m.nnotes ? m.notes[0] : "no note");
}

/* Notes past the table and past a line are counted and marked, not lost. */
static void notes_overflow(void)
{
	static struct hw_marks m;
	char long_note[400];

	hw_marks_init(&m);
	for (int i = 0; i < HW_MAX_NOTES + 4; i++)
		hw_note(&m, "note %d", i);
	hw_note(&m, "note 3");	/* kept already: not counted again */
	tap_ok(m.nnotes == HW_MAX_NOTES && !strcmp(m.notes[HW_MAX_NOTES - 2], "note 14") &&
	       !strcmp(m.notes[HW_MAX_NOTES - 1], "5 more notes not kept (a report keeps 15)"),
	       "notes past the table: the last line counts them (%d lines, last '%s')",
	       m.nnotes, m.notes[HW_MAX_NOTES - 1]);
	hw_marks_init(&m);
	memset(long_note, 'n', sizeof(long_note) - 1);
	long_note[sizeof(long_note) - 1] = '\0';
	hw_note(&m, "%s", long_note);
	tap_ok(m.nnotes == 1 && strlen(m.notes[0]) == sizeof(m.notes[0]) - 1 &&
	       !strcmp(m.notes[0] + sizeof(m.notes[0]) - 4, "..."),
	       "a note longer than a line ends in '...'");
}

/* rlimits.peak and capabilities.used of a cgroup, and what they add. */
static void cgroup_marks_files(void)
{
	uint64_t peak[HW_NLIMITS] = { 0 }, caps = 0;
	bool have[HW_NLIMITS] = { false };

	tap_ok(hw_parse_rlimits_peak("cpu 1\nnofile 303\nmemlock 65536\nnewkey 9\n",
				     peak, have) == 0 &&
	       have[0] && peak[0] == 1 && have[7] && peak[7] == 303 &&
	       have[8] && peak[8] == 65536 && !have[1],
	       "rlimits.peak: keys by name, an unknown (newer) key skipped");
	tap_ok(hw_parse_rlimits_peak("nofile\n", peak, have) == -1 &&
	       hw_parse_rlimits_peak("nofile 3x\n", peak, have) == -1 &&
	       hw_parse_rlimits_peak("nofile -1\n", peak, have) == -1,
	       "rlimits.peak: a line without a number is refused");
	tap_ok(hw_parse_cap_mask("0000000000000401\n", &caps) == 0 && caps == 0x401 &&
	       hw_parse_cap_mask("401\n", &caps) == -1 &&
	       hw_parse_cap_mask("0000000000000401 x\n", &caps) == -1,
	       "capabilities.used: 16 hex digits, nothing else");
}

static int write_at(const char *dir, const char *file, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/*
 * A cgroup whose rlimits.peak is above its living processes' marks: those
 * peaks and capabilities are of exited processes, and the report says so.
 */
static void cgroup_marks_exited(void)
{
	char dir[] = "/tmp/hw-test-cgroup-XXXXXX", path[300];
	struct hw_marks m;

	if (!mkdtemp(dir) || write_at(dir, "cgroup.procs", "") ||
	    write_at(dir, "rlimits.peak", "cpu 1\nnofile 303\nmemlock 4096\n") ||
	    write_at(dir, "capabilities.used", "0000000000000401\n"))
		return (void)tap_ok(0, "cannot make a cgroup directory in /tmp");
	hw_marks_init(&m);
	/* A living process had NOFILE 400 and CAP_CHOWN. */
	m.lim[RLIMIT_NOFILE].have_peak = true;
	m.lim[RLIMIT_NOFILE].peak = 400;
	m.have_cap_used = true;
	m.cap_used = 1;
	tap_ok(hw_collect_cgroup(dir, &m) == 0 && (hw_collect_cgroup_marks(dir, &m), 1) && m.have_cgroup_marks &&
	       m.lim[RLIMIT_NOFILE].peak == 400 && !m.lim[RLIMIT_NOFILE].exited &&
	       m.lim[RLIMIT_MEMLOCK].peak == 4096 && m.lim[RLIMIT_MEMLOCK].exited &&
	       m.lim[RLIMIT_CPU].peak == 1 && m.lim[RLIMIT_CPU].exited &&
	       m.cap_used == 0x401 && m.cap_used_exited == 0x400,
	       "cgroup marks above the living processes' are marked exited");
	write_at(dir, "capabilities.used", "zz\n");
	hw_marks_init(&m);
	tap_ok(hw_collect_cgroup(dir, &m) == 0 && (hw_collect_cgroup_marks(dir, &m), 1) && !m.have_cgroup_marks &&
	       !m.lim[RLIMIT_MEMLOCK].have_peak &&
	       hw_has_note(&m, "marks of exited processes: cannot read"),
	       "a malformed capabilities.used: nothing invented, a note says so");
	snprintf(path, sizeof(path), "%s/rlimits.peak", dir);
	unlink(path);
	hw_marks_init(&m);
	tap_ok(hw_collect_cgroup(dir, &m) == 0 && (hw_collect_cgroup_marks(dir, &m), 1) && !m.have_cgroup_marks &&
	       hw_has_note(&m, "marks of exited processes: no rlimits.peak in the cgroup"),
	       "a kernel without the files: a note says only living processes count");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path))
		tap_diag("could not remove %s", dir);
}

static void devices(void)
{
	struct hw_marks m;

	hw_marks_init(&m);
	tap_ok(hw_parse_devices(fixture("devices.accessed"), &m) == 0 &&
	       m.ndevices == 2 && m.devices[0].type == 'c' &&
	       m.devices[0].major == 1 && m.devices[0].minor == 3 &&
	       m.devices[0].access == (HW_ACC_READ | HW_ACC_WRITE) &&
	       m.devices[1].minor == 5 && m.devices[1].access == HW_ACC_READ,
	       "devices.accessed: c 1:3 rw, c 1:5 r");
	hw_marks_init(&m);
	tap_ok(hw_parse_devices(fixture("devices.accessed-widened"), &m) == 0 &&
	       m.ndevices == 4 && m.devices[0].major == HW_ANY &&
	       m.devices[0].access == HW_ACC_MKNOD &&
	       m.devices[2].minor == HW_ANY && m.devices[3].type == 'b',
	       "devices.accessed: wildcards and block devices");
	hw_marks_init(&m);
	tap_ok(hw_parse_devices("", &m) == 0 && m.have_devices && !m.ndevices,
	       "an empty devices.accessed: known, and none");
	tap_ok(hw_parse_devices("x 1:3 rw\n", &m) == -1 &&
	       hw_parse_devices("c 1:3 rwx\n", &m) == -1 &&
	       hw_parse_devices("c one:3 r\n", &m) == -1,
	       "bad type, access letter or number is refused");
	hw_marks_init(&m);
	hw_parse_devices("c 1:3 r\n", &m);
	hw_parse_devices("c 1:3 w\n", &m);
	tap_ok(m.ndevices == 1 && m.devices[0].access == (HW_ACC_READ | HW_ACC_WRITE),
	       "the same device twice: one entry, access letters joined");
	widened();
}

static void numbers(void)
{
	uint64_t v;

	tap_ok(hw_parse_u64("max\n", &v) == 0 && v == HW_UNLIMITED &&
	       hw_parse_u64("41\n", &v) == 0 && v == 41 &&
	       hw_parse_u64("-1", &v) == -1 && hw_parse_u64("4x", &v) == -1,
	       "numbers: max, 41; -1 and 4x refused");
	tap_ok(hw_cap_from_name("CAP_SYS_NICE") == 23 &&
	       hw_cap_from_name("net_bind_service") == 10 &&
	       hw_cap_from_name("CAP_NOPE") == -1 &&
	       !strcmp(hw_cap_name(40), "CAP_CHECKPOINT_RESTORE"),
	       "capability names both ways");
}

int main(int argc, char **argv)
{
	fixtures = argc > 1 ? argv[1] : "tests/fixtures";
	tap_plan(38);
	limits_with_series();
	limits_mainline();
	limits_maximum();
	status();
	memory_stat();
	devices();
	numbers();
	read_file_sizes();
	notes_overflow();
	unnamed_capability();
	cgroup_marks_files();
	cgroup_marks_exited();
	return tap_exit();
}
