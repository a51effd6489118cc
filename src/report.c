// SPDX-License-Identifier: GPL-2.0
/*
 * The report: text for people, JSON for merge and other programs, a systemd
 * [Service] drop-in; what container users paste is in containers.c.  Every
 * format reads the same marks and the same recommendation rules
 * (recommend.c: hw_limit_advice() and the rest).
 */
#define _GNU_SOURCE	/* vasprintf */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"

/* An observed amount of bytes: "8M", "4.2M", "800K", "512". */
static void human(uint64_t v, char *buf, size_t size)
{
	static const char suffix[] = "KMGT";
	int u = -1;

	if (v == HW_UNLIMITED) {
		snprintf(buf, size, "unlimited");
		return;
	}
	while (u < 3 && v >= (1ULL << (10 * (u + 2))))
		u++;
	if (u < 0)
		snprintf(buf, size, "%llu", (unsigned long long)v);
	else if (v % (1ULL << (10 * (u + 1))) == 0)
		snprintf(buf, size, "%llu%c",
			 (unsigned long long)(v >> (10 * (u + 1))), suffix[u]);
	else
		snprintf(buf, size, "%.1f%c", v / (double)(1ULL << (10 * (u + 1))),
			 suffix[u]);
}

/* A limit's value as its Units say: bytes get K/M/G. */
static void limit_value(int i, uint64_t v, bool recommended, char *buf,
			size_t size)
{
	if (v == HW_UNLIMITED)
		snprintf(buf, size, "unlimited");
	else if (hw_limits[i].kind == HW_BYTES)
		recommended ? hw_format_bytes(v, buf, size) : human(v, buf, size);
	else
		snprintf(buf, size, "%" PRIu64, v);
}

void hw_cap_list(FILE *out, uint64_t mask, const char *sep, bool strip)
{
	const char *s = "";

	for (int c = 0; c <= HW_CAP_LAST; c++)
		if (mask & (1ULL << c)) {
			fprintf(out, "%s%s", s, hw_cap_name(c) + (strip ? 4 : 0));
			s = sep;
		}
}

void hw_access_str(unsigned int acc, char *buf)
{
	int n = 0;

	if (acc & HW_ACC_READ)
		buf[n++] = 'r';
	if (acc & HW_ACC_WRITE)
		buf[n++] = 'w';
	if (acc & HW_ACC_MKNOD)
		buf[n++] = 'm';
	buf[n] = '\0';
}

void hw_devices_list_line(const struct hw_device *d, char *buf, size_t size)
{
	char maj[12], min[12], acc[4];

	snprintf(maj, sizeof(maj), d->major == HW_ANY ? "*" : "%u", d->major);
	snprintf(min, sizeof(min), d->minor == HW_ANY ? "*" : "%u", d->minor);
	hw_access_str(d->access, acc);
	snprintf(buf, size, "%c %s:%s %s", d->type, maj, min, acc);
}

const char *hw_run_summary(const struct hw_marks *m, char *buf, size_t size)
{
	if (m->exit_status < 0)
		snprintf(buf, size, "%d process%s read", m->processes,
			 m->processes == 1 ? "" : "es");
	else
		snprintf(buf, size, "%s %d, %.2f s",
			 m->timed_out ? "stopped by --timeout, status" : "exit status",
			 m->exit_status, m->seconds);
	return buf;
}

/* One row of the text table, without trailing blanks. */
static void row(FILE *out, const char *name, const char *peak,
		const char *limit, const char *rec, const char *flag)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%-24s %-12s %-12s %-14s %s",
			 name, peak, limit, rec, flag);

	while (n > 0 && line[n - 1] == ' ')
		line[--n] = '\0';
	fprintf(out, "%s\n", line);
}

/* Which marks only processes that have exited had: the cgroup kept them. */
static void exited_line(FILE *out, const struct hw_marks *m)
{
	const char *sep = "";

	fprintf(out, "From processes that have exited (kept by the cgroup): ");
	for (int i = 0; i < HW_NLIMITS; i++)
		if (m->lim[i].exited) {
			fprintf(out, "%s%s", sep, hw_limits[i].proc_name);
			sep = ", ";
		}
	if (m->cap_used_exited) {
		fprintf(out, "%s", sep);
		hw_cap_list(out, m->cap_used_exited, " ", false);
		sep = ", ";
	}
	fprintf(out, "%s.\n", *sep ? "; the rest from the processes living now" :
		"nothing above what the processes living now have");
}

static void report_text(FILE *out, const struct hw_marks *m, int margin)
{
	char peak[32], limit[32], rec[48], buf[160];
	bool footnote = false, over = false;

	fprintf(out, "highwater: %s (%s)\n", m->command,
		hw_run_summary(m, buf, sizeof(buf)));
	if (m->cgroup[0])
		fprintf(out, "cgroup: %s\n", m->cgroup);
	fprintf(out, "\n");
	row(out, "Resource", "Peak", "Limit", "Recommended", "");
	for (int i = 0; i < HW_NLIMITS; i++) {
		const struct hw_limit *l = &m->lim[i];
		struct hw_advice a = hw_limit_advice(m, i, margin);
		const char *flag = "";

		if (hw_limits[i].kind == HW_UNTRACKED)
			continue;
		if (l->have_peak)
			limit_value(i, l->peak, false, peak, sizeof(peak));
		else
			snprintf(peak, sizeof(peak), "n/a");
		if (l->have_limit)
			limit_value(i, l->soft, false, limit, sizeof(limit));
		else
			snprintf(limit, sizeof(limit), "?");
		if (a.emit) {
			limit_value(i, a.value, true, rec, sizeof(rec));
		} else if (l->have_peak) {
			snprintf(rec, sizeof(rec), "-  (*)");
			footnote = true;
		} else {
			snprintf(rec, sizeof(rec), "-");
		}
		if (l->have_peak && l->have_limit && l->soft != HW_UNLIMITED &&
		    l->peak > 0) {
			if (l->peak > l->soft) {
				flag = "OVER the limit";
				over = true;
			}
			else if (l->peak == l->soft)
				flag = "AT the limit";
		}
		row(out, hw_limits[i].proc_name, peak, limit, rec, flag);
	}

	if (m->have_pids_peak) {
		snprintf(peak, sizeof(peak), "%" PRIu64, m->pids_peak);
		limit_value(RLIMIT_NPROC, m->pids_max, false, limit, sizeof(limit));
		snprintf(rec, sizeof(rec), "%" PRIu64,
			 hw_recommend(HW_COUNT, m->pids_peak, margin));
		row(out, "Tasks (pids.peak)", peak, limit,
			hw_tasks_not_derived(m) ? "-" : rec,
			hw_tasks_not_derived(m) ? "HIT the limit" :
			m->pids_max != HW_UNLIMITED && m->pids_peak >= m->pids_max ?
			"AT the limit" : "");
	}
	if (m->have_memory_peak) {
		struct hw_memory_advice ma = hw_memory_advice(m, margin);

		human(m->memory_peak, peak, sizeof(peak));
		human(m->memory_max, limit, sizeof(limit));
		hw_format_bytes(ma.max, rec, sizeof(rec));
		row(out, "Memory (memory.peak)", peak, limit,
			hw_memory_not_derived(m) ? "-" : rec,
			m->memory_oom_kills || m->memory_max_events ? "HIT the limit" :
			hw_memory_not_derived(m) ? "shared memory" :
			m->memory_max != HW_UNLIMITED && m->memory_peak >= m->memory_max ?
			"AT the limit" : "");
		if (m->have_memory_file) {
			human(m->memory_file, peak, sizeof(peak));
			row(out, "  page cache at the end", peak, "", "", "");
			if (ma.high) {
				human(ma.not_cache, peak, sizeof(peak));
				hw_format_bytes(ma.high, rec, sizeof(rec));
				row(out, "  not cache (for High)", peak, "", rec, "");
			}
		}
	}
	if (m->maxrss || m->vm_hwm) {
		human(m->maxrss > m->vm_hwm ? m->maxrss : m->vm_hwm, peak,
		      sizeof(peak));
		row(out, "Largest process RSS", peak, "", "", "");
	}
	if (m->vm_peak) {
		human(m->vm_peak, peak, sizeof(peak));
		row(out, "Largest VmPeak", peak, "", "", "");
	}

	fprintf(out, "\nCapabilities used: ");
	if (!m->have_cap_used)
		fprintf(out, "n/a");
	else if (!m->cap_used)
		fprintf(out, "none");
	else
		hw_cap_list(out, m->cap_used, " ", false);
	fprintf(out, "\nDevices accessed:  ");
	if (!m->have_devices)
		fprintf(out, "n/a");
	else if (!m->ndevices)
		fprintf(out, "none");
	for (int i = 0; i < m->ndevices; i++) {
		char name[256], acc[4];

		hw_device_name(&m->devices[i], name, sizeof(name));
		hw_access_str(m->devices[i].access, acc);
		fprintf(out, "%s%s %s", i ? ", " : "", name, acc);
	}
	fprintf(out, "\n\nRecommended: the peak plus a %d%% margin, rounded up;"
		" nice and realtime priority exactly.\n", margin);
	if (footnote)
		fprintf(out, "(*) measured, but not a limit to set from this run: --format systemd says why.\n");
	if (over)
		fprintf(out, "OVER: the run hit the limit, or went past it with a capability (CAP_SYS_NICE, CAP_IPC_LOCK, root).\n");
	if (m->have_memory_peak)
		fprintf(out, "Memory: MemoryMax from memory.peak, which includes page cache%s.\n",
			hw_memory_advice(m, margin).high ? "; MemoryHigh from the part that is not cache" : "");
	if (m->have_cgroup_marks && m->exit_status < 0)	/* not a run */
		exited_line(out, m);
	if (m->timed_out)
		fprintf(out, "The run was stopped by --timeout: the peaks are those reached until then.\n");
	for (int i = 0; i < m->nnotes; i++)
		fprintf(out, "unavailable: %s\n", m->notes[i]);
}

static void json_u64(FILE *out, const char *key, bool have, uint64_t v,
		     const char *after)
{
	fprintf(out, "\"%s\": ", key);
	if (!have)
		fprintf(out, "null");
	else if (v == HW_UNLIMITED)
		fprintf(out, "\"unlimited\"");
	else
		fprintf(out, "%" PRIu64, v);
	fprintf(out, "%s", after);
}

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static void json_caps(FILE *out, uint64_t mask)
{
	const char *sep = "";

	fprintf(out, "[");
	for (int c = 0; c <= HW_CAP_LAST; c++)
		if (mask & (1ULL << c)) {
			fprintf(out, "%s\"%s\"", sep, hw_cap_name(c));
			sep = ", ";
		}
	fprintf(out, "]");
}

/* Schema highwater/1: documented in highwater.1, read back by merge. */
static void report_json(FILE *out, const struct hw_marks *m,
			int margin __attribute__((unused)))	/* peaks, not advice */
{
	fprintf(out, "{\n  \"schema\": \"%s\",\n  \"command\": ", HW_SCHEMA);
	json_string(out, m->command);
	fprintf(out, ",\n  \"exit_status\": ");
	if (m->exit_status < 0)
		fprintf(out, "null");
	else
		fprintf(out, "%d", m->exit_status);
	fprintf(out, ",\n  \"timed_out\": %s,\n  \"seconds\": %.3f,\n"
		"  \"processes\": %d,\n  \"cgroup\": ",
		m->timed_out ? "true" : "false", m->seconds, m->processes);
	json_string(out, m->cgroup);
	fprintf(out, ",\n  \"rlimits\": {\n");
	for (int i = 0; i < HW_NLIMITS; i++) {
		const struct hw_limit *l = &m->lim[i];

		fprintf(out, "    \"%s\": {", hw_limits[i].key);
		json_u64(out, "peak", l->have_peak, l->peak, ", ");
		json_u64(out, "soft", l->have_limit, l->soft, ", ");
		json_u64(out, "hard", l->have_limit, l->hard, "");
		if (m->have_cgroup_marks)
			fprintf(out, ", \"exited\": %s", l->exited ? "true" : "false");
		fprintf(out, "}");
		fprintf(out, "%s\n", i < HW_NLIMITS - 1 ? "," : "");
	}
	fprintf(out, "  },\n  \"capabilities\": {\"used\": ");
	if (m->have_cap_used)
		json_caps(out, m->cap_used);
	else
		fprintf(out, "null");
	if (m->have_cgroup_marks) {
		fprintf(out, ", \"used_exited\": ");
		json_caps(out, m->cap_used_exited);
	}
	fprintf(out, ", \"ambient\": ");
	if (m->have_cap_amb)
		json_caps(out, m->cap_amb);
	else
		fprintf(out, "null");
	fprintf(out, ", ");
	json_u64(out, "uid", m->have_uid, m->uid, "},\n");
	fprintf(out, "  \"tasks\": {");
	json_u64(out, "peak", m->have_pids_peak, m->pids_peak, ", ");
	json_u64(out, "max", m->have_pids_peak, m->pids_max, ", ");
	json_u64(out, "refused", m->have_pids_peak, m->pids_refused, ", ");
	json_u64(out, "moved_out", m->have_moved_out, m->moved_out, "},\n");
	fprintf(out, "  \"memory\": {");
	json_u64(out, "peak", m->have_memory_peak, m->memory_peak, ", ");
	json_u64(out, "file", m->have_memory_file, m->memory_file, ", ");
	json_u64(out, "shmem", m->have_memory_file, m->memory_shmem, ", ");
	json_u64(out, "max", m->have_memory_peak, m->memory_max, ", ");
	json_u64(out, "max_events", m->have_memory_peak, m->memory_max_events, ", ");
	json_u64(out, "oom_kills", m->have_memory_peak, m->memory_oom_kills, ", ");
	json_u64(out, "maxrss", m->maxrss, m->maxrss, ", ");
	json_u64(out, "vm_hwm", m->vm_hwm, m->vm_hwm, ", ");
	json_u64(out, "vm_peak", m->vm_peak, m->vm_peak, "},\n");
	fprintf(out, "  \"devices\": ");
	if (!m->have_devices) {
		fprintf(out, "null");
	} else {
		fprintf(out, "[");
		for (int i = 0; i < m->ndevices; i++) {
			char line[64];

			hw_devices_list_line(&m->devices[i], line, sizeof(line));
			fprintf(out, "%s\"%s\"", i ? ", " : "", line);
		}
		fprintf(out, "],\n  \"device_names\": {");
		for (int i = 0, n = 0; i < m->ndevices; i++) {
			char line[64];

			if (!m->devices[i].name[0])
				continue;
			hw_devices_list_line(&m->devices[i], line, sizeof(line));
			*strrchr(line, ' ') = '\0';	/* "c 1:3", no access */
			fprintf(out, "%s\"%s\": ", n++ ? ", " : "", line);
			json_string(out, m->devices[i].name);
		}
		fprintf(out, "}");
	}
	fprintf(out, ",\n  \"unavailable\": [");
	for (int i = 0; i < m->nnotes; i++) {
		fprintf(out, "%s", i ? ", " : "");
		json_string(out, m->notes[i]);
	}
	fprintf(out, "]\n}\n");
}

static void report_systemd(FILE *out, const struct hw_marks *m, int margin)
{
	char val[48], buf[160];

	fprintf(out, "# highwater: systemd drop-in for: %s\n", m->command);
	fprintf(out, "# Measured: %s. Margin %d%%.\n",
		hw_run_summary(m, buf, sizeof(buf)), margin);
	fprintf(out, "# Save as /etc/systemd/system/UNIT.service.d/highwater.conf, then run: systemctl daemon-reload\n");
	if (m->timed_out)
		fprintf(out, "# The run was stopped by --timeout: peaks are those reached until then.\n");
	fprintf(out, "[Service]\n");
	for (int i = 0; i < HW_NLIMITS; i++) {
		struct hw_advice a = hw_limit_advice(m, i, margin);

		if (hw_limits[i].kind == HW_UNTRACKED)
			continue;
		if (a.emit) {
			limit_value(i, a.value, true, val, sizeof(val));
			if (a.raised)
				fprintf(out, "# %s: %s\n", hw_limits[i].systemd, a.raised);
			fprintf(out, "%s=%s\n", hw_limits[i].systemd, val);
		} else if (m->lim[i].have_peak) {
			limit_value(i, a.value, true, val, sizeof(val));
			fprintf(out, "# %s=%s  (not set: %s)\n",
				hw_limits[i].systemd, val, a.why);
		} else {
			fprintf(out, "# %s: %s\n", hw_limits[i].systemd, a.why);
		}
	}
	if (m->have_pids_peak && hw_tasks_not_derived(m))
		fprintf(out, "# TasksMax=%" PRIu64 "  (not set: %s)\n",
			hw_recommend(HW_COUNT, m->pids_peak, margin), hw_tasks_not_derived(m));
	else if (m->have_pids_peak)
		fprintf(out, "TasksMax=%" PRIu64 "\n",
			hw_recommend(HW_COUNT, m->pids_peak, margin));
	else
		fprintf(out, "# TasksMax: no pids.peak was measured\n");
	if (m->have_memory_peak && hw_memory_not_derived(m)) {
		hw_format_bytes(hw_memory_advice(m, margin).max, val, sizeof(val));
		fprintf(out, "# MemoryMax=%s  (not set: %s)\n", val, hw_memory_not_derived(m));
	} else if (m->have_memory_peak) {
		struct hw_memory_advice ma = hw_memory_advice(m, margin);
		char peak[32], cache[32];

		human(m->memory_peak, peak, sizeof(peak));
		if (m->have_memory_file) {
			human(m->memory_file, cache, sizeof(cache));
			fprintf(out, "# memory.peak %s includes page cache (%s still charged at the end, memory.stat \"file\" less \"shmem\"):\n"
				"# MemoryMax= is the peak plus the margin; %s\n", peak, cache,
				ma.high ? "MemoryHigh= the part that is not cache plus the margin." :
				"MemoryHigh= is not set, the cache part being too small to matter.");
		} else {
			fprintf(out, "# MemoryMax= is memory.peak (%s) plus the margin.\n", peak);
		}
		if (ma.high) {
			hw_format_bytes(ma.high, val, sizeof(val));
			fprintf(out, "MemoryHigh=%s\n", val);
		}
		hw_format_bytes(ma.max, val, sizeof(val));
		fprintf(out, "MemoryMax=%s\n", val);
	} else {
		fprintf(out, "# MemoryMax: no memory.peak was measured\n");
	}
	if (!hw_caps_not_derived(m)) {
		fprintf(out, "CapabilityBoundingSet=");
		hw_cap_list(out, m->cap_used, " ", false);
		fprintf(out, "\n");
		if (m->have_uid && m->uid != 0 && m->have_cap_amb &&
		    (m->cap_used & m->cap_amb)) {
			fprintf(out, "# The command ran as uid %u with ambient capabilities:\n", m->uid);
			fprintf(out, "AmbientCapabilities=");
			hw_cap_list(out, m->cap_used & m->cap_amb, " ", false);
			fprintf(out, "\n");
		}
	} else {
		fprintf(out, "# CapabilityBoundingSet: not set: %s\n", hw_caps_not_derived(m));
	}
	if (m->have_devices) {
		fprintf(out, "DevicePolicy=closed\n");
		for (int i = 0; i < m->ndevices; i++) {
			char name[256], acc[4];

			hw_access_str(m->devices[i].access, acc);
			if (hw_device_name(&m->devices[i], name, sizeof(name)))
				fprintf(out, "# %s %s: the host measured had no node under /dev or /proc/devices group to name it\n",
					name, acc);
			else
				fprintf(out, "DeviceAllow=%s %s\n", name, acc);
		}
	} else {
		fprintf(out, "# DevicePolicy: devices accessed were not measured\n");
	}
	for (int i = 0; i < m->nnotes; i++)
		fprintf(out, "# unavailable: %s\n", m->notes[i]);
}

/* The formats: one writer each, from the same marks and the same policy. */
static const struct format {
	const char *name, *alias;
	void (*write)(FILE *out, const struct hw_marks *m, int margin);
} formats[] = {
	[HW_TEXT] = { "text", NULL, report_text },
	[HW_JSON] = { "json", NULL, report_json },
	[HW_SYSTEMD] = { "systemd", NULL, report_systemd },
	[HW_DOCKER] = { "docker", "podman", hw_report_docker },	/* the same flags */
	[HW_COMPOSE] = { "compose", NULL, hw_report_compose },
	[HW_OCI] = { "oci", NULL, hw_report_oci },
	[HW_KUBERNETES] = { "kubernetes", NULL, hw_report_kubernetes },
};

int hw_format_from_name(const char *name)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (!strcmp(name, formats[i].name) ||
		    (formats[i].alias && !strcmp(name, formats[i].alias)))
			return i;
	return -1;
}

const char *hw_format_names(void)
{
	static char names[160];

	if (!names[0])
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
			size_t n = strlen(names);

			snprintf(names + n, sizeof(names) - n, "%s%s%s%s%s",
				 i ? (i + 1 < sizeof(formats) / sizeof(formats[0]) ? ", " : " or ") : "",
				 formats[i].name, formats[i].alias ? " (or " : "",
				 formats[i].alias ? formats[i].alias : "",
				 formats[i].alias ? ")" : "");
		}
	return names;
}

void hw_report(FILE *out, const struct hw_marks *m, enum hw_format f,
	       int margin)
{
	formats[f].write(out, m, margin);
}
