// SPDX-License-Identifier: GPL-2.0
/*
 * Reading a highwater/1 JSON report back into marks, for merge.  A small
 * recursive-descent parser of the JSON the report writes: objects, arrays,
 * strings, numbers, true, false, null.  Unknown keys are skipped, so a later
 * highwater/1 writer may add fields.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"

struct parser {
	const char *p;
	char *err;
	size_t errsize;
	struct hw_marks *m;
	bool schema_seen;
};

static int fail(struct parser *ps, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct parser *ps, const char *fmt, ...)
{
	va_list ap;

	if (!ps->err[0]) {
		va_start(ap, fmt);
		vsnprintf(ps->err, ps->errsize, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Up to 20 characters at the parser, on one line, for messages. */
static const char *near(const struct parser *ps)
{
	static char buf[24];
	int n = 0;

	for (const char *p = ps->p; *p && n < 20; p++)
		buf[n++] = (unsigned char)*p < 0x20 ? ' ' : *p;
	buf[n] = '\0';
	return buf;
}

static void ws(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

static int expect(struct parser *ps, char c)
{
	ws(ps);
	if (*ps->p != c)
		return fail(ps, "expected '%c' at \"%s\"", c, near(ps));
	ps->p++;
	return 0;
}

/* A string into @buf (escapes \" \\ \/ \n \t \uXXXX of ASCII). */
static int string(struct parser *ps, char *buf, size_t size)
{
	size_t n = 0;

	if (expect(ps, '"'))
		return -1;
	while (*ps->p && *ps->p != '"') {
		char c = *ps->p++;

		if (c == '\\') {
			c = *ps->p++;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'u') {
				unsigned int u;

				if (sscanf(ps->p, "%4x", &u) != 1 || u > 0x7f)
					return fail(ps, "unsupported \\u escape");
				c = u;
				ps->p += 4;
			} else if (c != '"' && c != '\\' && c != '/') {
				return fail(ps, "bad escape \\%c", c);
			}
		}
		if (n + 1 < size)
			buf[n++] = c;
	}
	if (expect(ps, '"'))
		return -1;
	buf[n] = '\0';
	return 0;
}

/*
 * A number, "unlimited", or null into @v; @have says which.  Returns -1 on
 * anything else.
 */
static int value_u64(struct parser *ps, bool *have, uint64_t *v)
{
	char *end;

	ws(ps);
	if (!strncmp(ps->p, "null", 4)) {
		ps->p += 4;
		*have = false;
		*v = 0;
		return 0;
	}
	if (*ps->p == '"') {
		char s[32];

		if (string(ps, s, sizeof(s)))
			return -1;
		if (strcmp(s, "unlimited"))
			return fail(ps, "expected a number or \"unlimited\", got \"%s\"", s);
		*v = HW_UNLIMITED;
		*have = true;
		return 0;
	}
	if (!isdigit((unsigned char)*ps->p))
		return fail(ps, "expected a number at \"%s\"", near(ps));
	*v = strtoull(ps->p, &end, 10);
	ps->p = end;
	*have = true;
	return 0;
}

static int skip_value(struct parser *ps, int depth);

static int skip_container(struct parser *ps, char close, int depth)
{
	ps->p++;
	ws(ps);
	if (*ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			char key[128];

			if (string(ps, key, sizeof(key)) || expect(ps, ':'))
				return -1;
		}
		if (skip_value(ps, depth + 1))
			return -1;
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		return expect(ps, close);
	}
}

static int skip_value(struct parser *ps, int depth)
{
	char buf[4096];

	if (depth > 16)
		return fail(ps, "nested too deeply");
	ws(ps);
	switch (*ps->p) {
	case '{':
		return skip_container(ps, '}', depth);
	case '[':
		return skip_container(ps, ']', depth);
	case '"':
		return string(ps, buf, sizeof(buf));
	}
	if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "null", 4)) {
		ps->p += 4;
		return 0;
	}
	if (!strncmp(ps->p, "false", 5)) {
		ps->p += 5;
		return 0;
	}
	if (*ps->p == '-' || isdigit((unsigned char)*ps->p)) {
		strtod(ps->p, (char **)&ps->p);
		return 0;
	}
	return fail(ps, "unexpected \"%s\"", near(ps));
}

/*
 * Iterate the members of an object: @member is called with each key, the
 * parser at its value, and must consume the value.
 */
static int object(struct parser *ps, void *ctx,
		  int (*member)(struct parser *ps, const char *key, void *ctx))
{
	char key[128];

	if (expect(ps, '{'))
		return -1;
	ws(ps);
	if (*ps->p == '}') {
		ps->p++;
		return 0;
	}
	for (;;) {
		if (string(ps, key, sizeof(key)) || expect(ps, ':') ||
		    member(ps, key, ctx))
			return -1;
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		return expect(ps, '}');
	}
}

/* An array of strings (or null: @have false); @item for each. */
static int string_array(struct parser *ps, bool *have, void *ctx,
			int (*item)(struct parser *ps, const char *s, void *ctx))
{
	char s[256];

	ws(ps);
	if (!strncmp(ps->p, "null", 4)) {
		ps->p += 4;
		*have = false;
		return 0;
	}
	*have = true;
	if (expect(ps, '['))
		return -1;
	ws(ps);
	if (*ps->p == ']') {
		ps->p++;
		return 0;
	}
	for (;;) {
		if (string(ps, s, sizeof(s)) || item(ps, s, ctx))
			return -1;
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		return expect(ps, ']');
	}
}

static int limit_member(struct parser *ps, const char *key, void *ctx)
{
	struct hw_limit *l = ctx;
	bool have;
	uint64_t v;

	if (strcmp(key, "peak") && strcmp(key, "soft") && strcmp(key, "hard"))
		return skip_value(ps, 0);
	if (value_u64(ps, &have, &v))
		return -1;
	if (!strcmp(key, "peak")) {
		l->have_peak = have;
		l->peak = v;
	} else if (have) {
		l->have_limit = true;
		*(strcmp(key, "soft") ? &l->hard : &l->soft) = v;
	}
	return 0;
}

static int rlimits_member(struct parser *ps, const char *key, void *ctx)
{
	struct hw_marks *m = ctx;
	int i = hw_limit_index(key);

	if (i < 0)
		return skip_value(ps, 0);
	if (object(ps, &m->lim[i], limit_member))
		return -1;
	if (m->lim[i].have_peak)
		m->have_limits_peak = true;
	return 0;
}

static int cap_item(struct parser *ps, const char *s, void *ctx)
{
	uint64_t *mask = ctx;
	int c = hw_cap_from_name(s);

	if (c < 0)
		return fail(ps, "unknown capability \"%s\"", s);
	*mask |= 1ULL << c;
	return 0;
}

static int caps_member(struct parser *ps, const char *key, void *ctx)
{
	struct hw_marks *m = ctx;
	bool have;
	uint64_t v;

	if (!strcmp(key, "used"))
		return string_array(ps, &m->have_cap_used, &m->cap_used, cap_item);
	if (!strcmp(key, "ambient"))
		return string_array(ps, &m->have_cap_amb, &m->cap_amb, cap_item);
	if (!strcmp(key, "uid")) {
		if (value_u64(ps, &have, &v))
			return -1;
		m->have_uid = have;
		m->uid = v;
		return 0;
	}
	return skip_value(ps, 0);
}

static int tasks_member(struct parser *ps, const char *key, void *ctx)
{
	struct hw_marks *m = ctx;
	bool have;
	uint64_t v;

	if (strcmp(key, "peak") && strcmp(key, "max"))
		return skip_value(ps, 0);
	if (value_u64(ps, &have, &v))
		return -1;
	if (!strcmp(key, "peak")) {
		m->have_pids_peak = have;
		m->pids_peak = v;
	} else if (have) {
		m->pids_max = v;
	}
	return 0;
}

static int memory_member(struct parser *ps, const char *key, void *ctx)
{
	static const char *const keys[] = {
		"peak", "file", "max", "maxrss", "vm_hwm", "vm_peak",
	};
	struct hw_marks *m = ctx;
	bool have;
	uint64_t v;
	int k;

	for (k = 0; k < 6 && strcmp(key, keys[k]); k++)
		;
	if (k == 6)
		return skip_value(ps, 0);
	if (value_u64(ps, &have, &v))
		return -1;
	if (!have)
		return 0;
	switch (k) {
	case 0: m->memory_peak = v; m->have_memory_peak = true; break;
	case 1: m->memory_file = v; m->have_memory_file = true; break;
	case 2: m->memory_max = v; break;
	case 3: m->maxrss = v; break;
	case 4: m->vm_hwm = v; break;
	case 5: m->vm_peak = v; break;
	}
	return 0;
}

static int device_item(struct parser *ps, const char *s, void *ctx)
{
	struct hw_marks *m = ctx;
	char line[300];

	snprintf(line, sizeof(line), "%s\n", s);
	if (hw_parse_devices(line, m))
		return fail(ps, "bad device \"%s\"", s);
	return 0;
}

/* "device_names": {"c 1:3": "/dev/null"}: names of listed devices only */
static int device_name_member(struct parser *ps, const char *key, void *ctx)
{
	struct hw_marks *m = ctx;
	struct hw_device id;
	char name[sizeof(id.name)];

	if (string(ps, name, sizeof(name)))
		return -1;
	if (hw_parse_device_id(key, &id) || id.major == HW_ANY)
		return fail(ps, "bad device \"%s\" in \"device_names\"", key);
	for (int i = 0; i < m->ndevices; i++) {
		struct hw_device *d = &m->devices[i];

		if (d->type == id.type && d->major == id.major && d->minor == id.minor) {
			strcpy(d->name, name);
			return 0;
		}
	}
	return fail(ps, "\"device_names\" names \"%s\", which \"devices\" does not list", key);
}

static int note_item(struct parser *ps, const char *s, void *ctx)
{
	(void)ps;
	hw_note(ctx, "%s", s);
	return 0;
}

static int top_member(struct parser *ps, const char *key, void *ctx)
{
	struct hw_marks *m = ctx;
	char buf[512];
	bool have;
	uint64_t v;

	if (!strcmp(key, "schema")) {
		if (string(ps, buf, sizeof(buf)))
			return -1;
		if (strcmp(buf, HW_SCHEMA))
			return fail(ps, "schema \"%s\", not \"%s\"", buf, HW_SCHEMA);
		ps->schema_seen = true;
		return 0;
	}
	if (!strcmp(key, "command"))
		return string(ps, m->command, sizeof(m->command));
	if (!strcmp(key, "cgroup"))
		return string(ps, m->cgroup, sizeof(m->cgroup));
	if (!strcmp(key, "processes") || !strcmp(key, "exit_status")) {
		if (value_u64(ps, &have, &v))
			return -1;
		if (have && key[0] == 'p')
			m->processes = v;
		else if (have)
			m->exit_status = v;
		return 0;
	}
	if (!strcmp(key, "seconds")) {
		ws(ps);
		m->seconds = strtod(ps->p, (char **)&ps->p);
		return 0;
	}
	if (!strcmp(key, "timed_out")) {
		ws(ps);
		m->timed_out = !strncmp(ps->p, "true", 4);
		return skip_value(ps, 0);
	}
	if (!strcmp(key, "rlimits"))
		return object(ps, m, rlimits_member);
	if (!strcmp(key, "capabilities"))
		return object(ps, m, caps_member);
	if (!strcmp(key, "tasks"))
		return object(ps, m, tasks_member);
	if (!strcmp(key, "memory"))
		return object(ps, m, memory_member);
	if (!strcmp(key, "devices"))
		return string_array(ps, &m->have_devices, m, device_item);
	if (!strcmp(key, "device_names"))
		return object(ps, m, device_name_member);
	if (!strcmp(key, "unavailable"))
		return string_array(ps, &have, m, note_item);
	return skip_value(ps, 0);
}

int hw_json_read(const char *text, struct hw_marks *m, char *err,
		 size_t errsize)
{
	struct parser ps = { text, err, errsize, m, false };

	err[0] = '\0';
	hw_marks_init(m);
	if (object(&ps, m, top_member))
		return -1;
	ws(&ps);
	if (*ps.p)
		return fail(&ps, "text after the report");
	if (!ps.schema_seen)
		return fail(&ps, "no \"schema\": \"%s\" member", HW_SCHEMA);
	return 0;
}
