// SPDX-License-Identifier: GPL-2.0
/*
 * From a peak to a value people write: a safety margin, then rounding up
 * (never down) to K/M/G for bytes and to two significant digits for counts.
 * Device numbers become /dev paths, or /proc/devices group names.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "hw.h"

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
