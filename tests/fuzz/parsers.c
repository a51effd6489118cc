// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer targets for every parser of text that highwater reads: the
 * kernel's files (limits/limits_peak, status, memory.stat, devices.accessed,
 * the cgroup's flat-keyed and hex files) and its own JSON reports.  Built
 * once per target with -DTARGET=NAME (tests/fuzz/run); each runs under ASan
 * and UBSan, so a crash, a leak, an overflow or undefined behaviour fails it.
 *
 * Besides not crashing, the JSON target checks what a reader must keep: a
 * report it accepts, written again, is read back and written identically.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"

static struct hw_marks marks, again;

/* Every format of a report, so that what a parser let in is printed too. */
static void render_all(const struct hw_marks *m)
{
	static const enum hw_format formats[] = { HW_TEXT, HW_SYSTEMD, HW_DOCKER, HW_JSON };
	FILE *null = fopen("/dev/null", "w");

	for (size_t i = 0; null && i < sizeof(formats) / sizeof(formats[0]); i++)
		hw_report(null, m, formats[i], 25);
	if (null)
		fclose(null);
}

static char *json_of(const struct hw_marks *m)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buf, &size);

	if (!out)
		abort();
	hw_report(out, m, HW_JSON, 25);
	fclose(out);
	return buf;
}

static void fuzz_json(const char *text)
{
	char err[200], *first, *second;

	if (hw_json_read(text, &marks, err, sizeof(err)))
		return;
	render_all(&marks);
	first = json_of(&marks);
	if (hw_json_read(first, &again, err, sizeof(err))) {
		fprintf(stderr, "accepted, written, then refused: %s\n%s\n", err, first);
		abort();
	}
	second = json_of(&again);
	if (strcmp(first, second)) {
		fprintf(stderr, "written twice, not the same:\n%s\n%s\n", first, second);
		abort();
	}
	free(first);
	free(second);
}

static void fuzz_limits(const char *text)
{
	hw_marks_init(&marks);
	if (!hw_parse_limits(text, &marks, true))
		render_all(&marks);
}

static void fuzz_status(const char *text)
{
	hw_marks_init(&marks);
	if (!hw_parse_status(text, &marks, true))
		render_all(&marks);
}

static void fuzz_devices(const char *text)
{
	hw_marks_init(&marks);
	if (!hw_parse_devices(text, &marks))
		render_all(&marks);
}

static void fuzz_flat(const char *text)
{
	uint64_t v, peak[HW_NLIMITS];
	bool have[HW_NLIMITS];

	hw_parse_memory_stat(text, "file", &v);
	hw_parse_u64(text, &v);
	hw_parse_cap_mask(text, &v);
	hw_parse_rlimits_peak(text, peak, have);
}

static const struct {
	const char *name;
	void (*fuzz)(const char *text);
} targets[] = {
	{ "json", fuzz_json },
	{ "limits", fuzz_limits },
	{ "status", fuzz_status },
	{ "devices", fuzz_devices },
	{ "flat", fuzz_flat },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static void (*fuzz)(const char *text);
	char *text;

	if (!fuzz) {
		for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
			if (!strcmp(targets[i].name, TARGET))
				fuzz = targets[i].fuzz;
		if (!fuzz)
			abort();
	}
	if (size > 1 << 16)	/* the kernel's files are far smaller */
		return -1;
	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	fuzz(text);
	free(text);
	return 0;
}
