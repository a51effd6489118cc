// SPDX-License-Identifier: GPL-2.0
/*
 * Parsers for the kernel files highwater reads: /proc/PID/limits and
 * limits_peak, /proc/PID/status, memory.stat, devices.accessed.  They work
 * on text so that the unit tests can feed them fixture files.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"

static const char *const cap_names[HW_CAP_LAST + 1] = {
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
};

const char *hw_cap_name(int cap)
{
	return cap >= 0 && cap <= HW_CAP_LAST ? cap_names[cap] : NULL;
}

int hw_cap_from_name(const char *name)
{
	for (int i = 0; i <= HW_CAP_LAST; i++)
		if (!strcasecmp(cap_names[i], name) ||
		    !strcasecmp(cap_names[i] + 4, name))
			return i;
	return -1;
}

void hw_marks_init(struct hw_marks *m)
{
	memset(m, 0, sizeof(*m));
	m->exit_status = -1;
	m->pids_max = HW_UNLIMITED;
	m->memory_max = HW_UNLIMITED;
}

void hw_warn(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "highwater: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

bool hw_has_note(const struct hw_marks *m, const char *prefix)
{
	for (int i = 0; i < m->nnotes; i++)
		if (!strncmp(m->notes[i], prefix, strlen(prefix)))
			return true;
	return false;
}

void hw_note(struct hw_marks *m, const char *fmt, ...)
{
	char line[sizeof(m->notes[0])];
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(line, sizeof(line), fmt, ap) >= (int)sizeof(line))
		strcpy(line + sizeof(line) - 4, "...");
	va_end(ap);
	for (int i = 0; i < m->nnotes; i++)
		if (!strcmp(m->notes[i], line))
			return;
	if (m->nnotes < HW_MAX_NOTES - 1) {
		strcpy(m->notes[m->nnotes++], line);
		return;
	}
	/* The last line counts what did not fit, this note included. */
	if (!m->notes_dropped++)
		m->notes_dropped += m->nnotes - (HW_MAX_NOTES - 1);
	m->nnotes = HW_MAX_NOTES;
	snprintf(m->notes[HW_MAX_NOTES - 1], sizeof(m->notes[0]),
		 "%d more notes not kept (a report keeps %d)", m->notes_dropped, HW_MAX_NOTES - 1);
}

int hw_parse_u64(const char *text, uint64_t *val)
{
	char *end;

	while (isspace((unsigned char)*text))
		text++;
	if (!strncmp(text, "max", 3) || !strncmp(text, "unlimited", 9)) {
		*val = HW_UNLIMITED;
		return 0;
	}
	if (!isdigit((unsigned char)*text))
		return -1;
	errno = 0;
	*val = strtoull(text, &end, 10);
	if (errno)
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	return *end ? -1 : 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t add_u64(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * /proc/PID/limits or /proc/PID/limits_peak:
 *   Limit                     Soft Limit           Hard Limit           Units     Peak
 *   Max open files            1024                 524288               files     303
 * The name is the first 25 columns; Units may be empty; Peak is the last
 * field of limits_peak only ("-" for limits Linux does not enforce).
 * Peaks are maximized into @m; soft and hard limits are taken when @top.
 */
int hw_parse_limits(const char *text, struct hw_marks *m, bool top)
{
	bool with_peak = false, header = false;
	const char *line = text;

	while (*line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[256], *tok[6], *save = NULL;
		int ntok = 0, idx = -1;

		if (len >= sizeof(buf))
			return -1;
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl ? nl + 1 : line + len;
		if (!len)
			continue;
		if (!header) {
			if (strncmp(buf, "Limit ", 6))
				return -1;
			header = true;
			with_peak = strstr(buf, "Peak") != NULL;
			continue;
		}
		for (int i = 0; i < HW_NLIMITS; i++) {
			size_t n = strlen(hw_limits[i].proc_name);

			if (!strncmp(buf, hw_limits[i].proc_name, n) &&
			    buf[n] == ' ')
				idx = i;
		}
		if (idx < 0 || len < 26)
			continue;	/* a limit this table does not know */
		for (char *t = strtok_r(buf + 25, " ", &save); t && ntok < 6;
		     t = strtok_r(NULL, " ", &save))
			tok[ntok++] = t;
		if (ntok < 2 + with_peak)
			return -1;

		struct hw_limit *l = &m->lim[idx];
		uint64_t soft, hard, peak;

		if (hw_parse_u64(tok[0], &soft) || hw_parse_u64(tok[1], &hard))
			return -1;
		if (top || !l->have_limit) {
			l->soft = soft;
			l->hard = hard;
			l->have_limit = true;
		}
		if (!with_peak || !strcmp(tok[ntok - 1], "-"))
			continue;
		if (hw_parse_u64(tok[ntok - 1], &peak))
			return -1;
		l->peak = l->have_peak ? max_u64(l->peak, peak) : peak;
		l->have_peak = true;
	}
	if (!header)
		return -1;
	if (with_peak)
		m->have_limits_peak = true;
	return 0;
}

/*
 * The number after "@key" at the start of a line of /proc/PID/status, in
 * @base: 1 found, 0 missing, -1 not a number.
 */
static int status_field(const char *text, const char *key, int base,
			uint64_t *val)
{
	const char *p = strstr(text, key);
	char *end;

	if (!p || (p != text && p[-1] != '\n'))
		return 0;
	*val = strtoull(p + strlen(key), &end, base);
	return end == p + strlen(key) ? -1 : 1;
}

/*
 * Capabilities past HW_CAP_LAST (a kernel newer than this highwater) have no
 * name to print: the reports leave them out, so say so rather than write a
 * bounding set that silently lacks one.
 */
void hw_note_unnamed_caps(struct hw_marks *m, uint64_t mask, const char *what)
{
	mask &= HW_CAP_LAST < 63 ? ~0ULL << (HW_CAP_LAST + 1) : 0;
	for (int c = HW_CAP_LAST + 1; mask && c < 64; c++)
		if (mask & 1ULL << c)
			hw_note(m, "capabilities: %s has capability %d, which this highwater (made for %d capabilities) cannot name: the settings leave it out; add it by hand",
				what, c, HW_CAP_LAST + 1);
}

/*
 * /proc/PID/status: CapUsd (the series), VmPeak, VmHWM; CapAmb and Uid of
 * the command itself (@top), for AmbientCapabilities=.
 */
int hw_parse_status(const char *text, struct hw_marks *m, bool top)
{
	uint64_t v;
	int r;

	if (strncmp(text, "Name:", 5))
		return -1;
	r = status_field(text, "CapUsd:\t", 16, &v);
	if (r < 0)
		return -1;
	if (r) {
		m->cap_used |= v;
		m->have_cap_used = true;
		hw_note_unnamed_caps(m, v, "CapUsd");
	}
	/* The bounding set a cgroup's processes run under: its first one's. */
	if (!m->have_cap_bnd && status_field(text, "CapBnd:\t", 16, &v) > 0) {
		m->cap_bnd = v;
		m->have_cap_bnd = true;
	}
	if (top) {
		r = status_field(text, "CapAmb:\t", 16, &v);
		if (r < 0)
			return -1;
		if (r) {
			m->cap_amb = v;
			m->have_cap_amb = true;
			hw_note_unnamed_caps(m, v, "CapAmb");
		}
		if (status_field(text, "Uid:\t", 10, &v) > 0) {
			m->uid = v;
			m->have_uid = true;
		}
	}
	/* kB; a zombie has no memory map, and no Vm lines */
	v = 0;
	if (status_field(text, "VmPeak:\t", 10, &v) < 0)
		return -1;
	m->vm_peak = max_u64(m->vm_peak, v * 1024);
	v = 0;
	if (status_field(text, "VmHWM:\t", 10, &v) < 0)
		return -1;
	m->vm_hwm = max_u64(m->vm_hwm, v * 1024);
	return 0;
}

/* One "key value" line of memory.stat; 0 found, -1 missing. */
int hw_parse_memory_stat(const char *text, const char *key, uint64_t *val)
{
	size_t n = strlen(key);

	for (const char *line = text; line && *line;) {
		if (!strncmp(line, key, n) && line[n] == ' ') {
			char *end;

			if (!isdigit((unsigned char)line[n + 1]))
				return -1;
			*val = strtoull(line + n + 1, &end, 10);
			return *end == '\n' || !*end ? 0 : -1;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

/*
 * A cgroup's rlimits.peak ("nofile 303" a line) into @peak, indexed as
 * hw_limits, with @have[i] set for each key read.  A key this highwater does
 * not know (a newer kernel's) is skipped.  0, or -1 on a malformed line.
 */
int hw_parse_rlimits_peak(const char *text, uint64_t peak[HW_NLIMITS],
			  bool have[HW_NLIMITS])
{
	while (*text) {
		size_t klen = strspn(text, "abcdefghijklmnopqrstuvwxyz");
		char key[32], *end;
		uint64_t v;
		int i;

		if (!klen || klen >= sizeof(key) || text[klen] != ' ' ||
		    !isdigit((unsigned char)text[klen + 1]))
			return -1;
		errno = 0;
		v = strtoull(text + klen + 1, &end, 10);
		if (errno || (*end != '\n' && *end))
			return -1;
		memcpy(key, text, klen);
		key[klen] = '\0';
		i = hw_limit_index(key);
		if (i >= 0) {
			peak[i] = v;
			have[i] = true;
		}
		text = *end ? end + 1 : end;
	}
	return 0;
}

/* A cgroup's capabilities.used: 16 hexadecimal digits, as CapUsd. */
int hw_parse_cap_mask(const char *text, uint64_t *val)
{
	char *end;

	if (strspn(text, "0123456789abcdef") != 16)
		return -1;
	*val = strtoull(text, &end, 16);
	return (*end == '\n' ? end[1] : *end) ? -1 : 0;	/* one line, or none */
}

/* Does @e, a line of devices.accessed, cover device @d? */
static bool device_covers(const struct hw_device *e, const struct hw_device *d)
{
	return e->type == d->type &&
	       (e->major == HW_ANY || e->major == d->major) &&
	       (e->minor == HW_ANY || e->minor == d->minor);
}

/*
 * Fold the lines @w covers into it, and append it: the list never loses a
 * device, it only gets coarser.  Returns false when @w covered no line and
 * there is no room for it.
 */
static bool fold_into(struct hw_marks *m, struct hw_device w)
{
	int n = 0;

	for (int i = 0; i < m->ndevices; i++) {
		if (device_covers(&w, &m->devices[i]))
			w.access |= m->devices[i].access;
		else
			m->devices[n++] = m->devices[i];
	}
	if (n == HW_MAX_DEVICES)
		return false;
	m->devices[n++] = w;
	m->ndevices = n;
	return true;
}

/* Add @d, merging it into an entry of the same device or one that covers it. */
void hw_add_device(struct hw_marks *m, const struct hw_device *d)
{
	struct hw_device w = *d;
	bool major_listed = false;
	int chars = 0;

	for (int i = 0; i < m->ndevices; i++) {
		struct hw_device *e = &m->devices[i];

		if (e->type == d->type && e->major == d->major &&
		    e->minor == d->minor) {
			e->access |= d->access;
			if (!e->name[0])
				strcpy(e->name, d->name);
			return;
		}
		/* A wider line that allows it already (after a widening, say). */
		if (device_covers(e, d) && (e->access & d->access) == d->access)
			return;
		major_listed |= e->type == d->type && e->major == d->major;
		chars += e->type == 'c';
	}
	if (m->ndevices < HW_MAX_DEVICES) {
		m->devices[m->ndevices++] = *d;
		return;
	}
	/*
	 * Full: widen as the kernel widens devices.accessed past its bound,
	 * and say so.  A device whose major is listed makes that line
	 * major:*; any other device a "c *:*" or "b *:*" line; if that covers
	 * no line, the more numerous type's lines fold into one "*:*" first.
	 */
	hw_note(m, "exact devices: over %d distinct ones, lines widened to major:* or *:* (allowing more than was used)",
		HW_MAX_DEVICES);
	if (major_listed)
		w.minor = HW_ANY;
	else
		w.major = w.minor = HW_ANY;
	w.name[0] = '\0';	/* named where the marks were read, if at all */
	if (fold_into(m, w))
		return;
	fold_into(m, (struct hw_device){ .type = chars * 2 >= m->ndevices ? 'c' : 'b',
					 .major = HW_ANY, .minor = HW_ANY });
	/* Room now: the larger type had at least half of the lines. */
	fold_into(m, w);
}

static int parse_majmin(const char *s, uint32_t *v)
{
	char *end;
	unsigned long n;

	if (!strcmp(s, "*")) {
		*v = HW_ANY;
		return 0;
	}
	if (!isdigit((unsigned char)*s))
		return -1;
	n = strtoul(s, &end, 10);
	if (*end || n >= HW_ANY)
		return -1;
	*v = n;
	return 0;
}

/* "c 1:3" or "c 136:*": a device without its access, as JSON names it */
int hw_parse_device_id(const char *s, struct hw_device *d)
{
	char type, majs[16], mins[16], end;

	memset(d, 0, sizeof(*d));
	if (sscanf(s, "%c %15[^:]:%15s%c", &type, majs, mins, &end) != 3 ||
	    (type != 'c' && type != 'b') ||
	    parse_majmin(majs, &d->major) || parse_majmin(mins, &d->minor))
		return -1;
	d->type = type;
	return 0;
}

/* devices.accessed (and devices.list): "c 1:3 rw" lines */
int hw_parse_devices(const char *text, struct hw_marks *m)
{
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[80], *acc;
		struct hw_device d;

		if (len >= sizeof(buf))
			return -1;
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl ? nl + 1 : line + len;
		if (!len)
			continue;
		/* "c 1:3 rw": the device, then its access after the last space */
		acc = strrchr(buf, ' ');
		if (!acc || !acc[1])
			return -1;
		*acc++ = '\0';
		if (hw_parse_device_id(buf, &d))
			return -1;
		for (char *a = acc; *a; a++) {
			if (*a == 'r')
				d.access |= HW_ACC_READ;
			else if (*a == 'w')
				d.access |= HW_ACC_WRITE;
			else if (*a == 'm')
				d.access |= HW_ACC_MKNOD;
			else
				return -1;
		}
		hw_add_device(m, &d);
	}
	m->have_devices = true;
	return 0;
}

/* Element-wise maximum (unions for capabilities and devices). */
void hw_merge_marks(struct hw_marks *into, const struct hw_marks *from)
{
	for (int i = 0; i < HW_NLIMITS; i++) {
		struct hw_limit *a = &into->lim[i];
		const struct hw_limit *b = &from->lim[i];

		if (b->have_peak && (!a->have_peak || b->peak > a->peak)) {
			a->peak = b->peak;
			a->exited = b->exited;
			a->have_peak = true;
		}
		if (b->have_limit && !a->have_limit) {
			a->soft = b->soft;
			a->hard = b->hard;
			a->have_limit = true;
		}
	}
	into->have_limits_peak |= from->have_limits_peak;
	into->have_cap_used |= from->have_cap_used;
	into->cap_used |= from->cap_used;
	if (from->have_cap_amb) {
		into->cap_amb |= from->cap_amb;
		into->have_cap_amb = true;
	}
	if (from->have_uid && (!into->have_uid || from->uid))
		into->uid = from->uid, into->have_uid = true;
	into->vm_peak = max_u64(into->vm_peak, from->vm_peak);
	into->vm_hwm = max_u64(into->vm_hwm, from->vm_hwm);
	into->maxrss = max_u64(into->maxrss, from->maxrss);
	into->processes += from->processes;
	if (from->have_pids_peak) {
		into->pids_peak = max_u64(into->pids_peak, from->pids_peak);
		into->have_pids_peak = true;
	}
	if (from->have_memory_peak) {
		into->memory_peak = max_u64(into->memory_peak, from->memory_peak);
		into->have_memory_peak = true;
	}
	if (from->have_memory_file) {
		into->memory_file = max_u64(into->memory_file, from->memory_file);
		into->memory_shmem = max_u64(into->memory_shmem, from->memory_shmem);
		into->have_memory_file = true;
	}
	/* Any run that hit a limit keeps the merged limit from being derived. */
	into->pids_refused = add_u64(into->pids_refused, from->pids_refused);
	into->memory_max_events = add_u64(into->memory_max_events, from->memory_max_events);
	into->memory_oom_kills = add_u64(into->memory_oom_kills, from->memory_oom_kills);
	/* Any run whose processes left keeps rlimits and bounding set from being derived */
	into->moved_out = add_u64(into->moved_out, from->moved_out);
	into->have_moved_out |= from->have_moved_out;
	if (from->have_devices) {
		for (int i = 0; i < from->ndevices; i++)
			hw_add_device(into, &from->devices[i]);
		into->have_devices = true;
	}
	if (from->exit_status > into->exit_status)
		into->exit_status = from->exit_status;
	into->timed_out |= from->timed_out;
	if (from->seconds > into->seconds)
		into->seconds = from->seconds;
	for (int i = 0; i < from->nnotes; i++)
		hw_note(into, "%s", from->notes[i]);
}
