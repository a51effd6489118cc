// SPDX-License-Identifier: GPL-2.0
/*
 * Reading a highwater/1 JSON report back into marks, for merge, with json-c.
 * Unknown keys are skipped, so that a later highwater/1 writer may add
 * fields; a known key with a value of the wrong kind, a number out of range
 * or a string too long to keep is an error that names the key, never a value
 * cut or made up.
 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "hw.h"

struct reader {
	char *err;
	size_t errsize;
};

static int fail(struct reader *rd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct reader *rd, const char *fmt, ...)
{
	va_list ap;

	if (!rd->err[0]) {
		va_start(ap, fmt);
		vsnprintf(rd->err, rd->errsize, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/*
 * A count: a whole number, "unlimited" or null (@have false).  json-c gives
 * UINT64_MAX for anything above it, so that is refused as out of range: the
 * writer says "unlimited" for it.
 */
static int get_u64(struct reader *rd, const char *key, struct json_object *v,
		   bool *have, uint64_t *val)
{
	*have = false;
	*val = 0;
	switch (json_object_get_type(v)) {
	case json_type_null:
		return 0;
	case json_type_string:
		if (strcmp(json_object_get_string(v), "unlimited"))
			return fail(rd, "\"%s\": expected a number or \"unlimited\", got \"%.40s\"",
				    key, json_object_get_string(v));
		*val = HW_UNLIMITED;
		break;
	case json_type_int:
		if (json_object_get_int64(v) < 0)
			return fail(rd, "\"%s\": negative number %lld", key,
				    (long long)json_object_get_int64(v));
		*val = json_object_get_uint64(v);
		if (*val == UINT64_MAX)
			return fail(rd, "\"%s\": number out of range", key);
		break;
	default:
		return fail(rd, "\"%s\": expected a whole number, got %.40s", key,
			    json_object_to_json_string(v));
	}
	*have = true;
	return 0;
}

/* A string that fits @size with its NUL, and holds no NUL of its own. */
static int get_string(struct reader *rd, const char *key, struct json_object *v,
		      char *buf, size_t size)
{
	size_t len;

	if (!json_object_is_type(v, json_type_string))
		return fail(rd, "\"%s\": expected a string", key);
	len = json_object_get_string_len(v);
	if (len >= size || memchr(json_object_get_string(v), '\0', len))
		return fail(rd, "\"%s\": a string of %zu bytes, longer than the %zu kept, or with a NUL",
			    key, len, size - 1);
	memcpy(buf, json_object_get_string(v), len + 1);
	return 0;
}

static int get_bool(struct reader *rd, const char *key, struct json_object *v, bool *val)
{
	if (!json_object_is_type(v, json_type_boolean))
		return fail(rd, "\"%s\": expected true or false", key);
	*val = json_object_get_boolean(v);
	return 0;
}

/*
 * An array of strings, or null (@have false): @item for each, which returns
 * 0 or an error message.
 */
static int string_array(struct reader *rd, const char *key, struct json_object *v,
			bool *have, void *ctx, const char *(*item)(const char *s, void *ctx))
{
	*have = false;
	if (json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_array))
		return fail(rd, "\"%s\": expected an array of strings", key);
	*have = true;
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *s = json_object_array_get_idx(v, i);
		char buf[512];
		const char *why;

		if (get_string(rd, key, s, buf, sizeof(buf)))
			return -1;
		why = item(buf, ctx);
		if (why)
			return fail(rd, "\"%s\": %s \"%s\"", key, why, buf);
	}
	return 0;
}

static const char *cap_item(const char *s, void *ctx)
{
	uint64_t *mask = ctx;
	int c = hw_cap_from_name(s);

	if (c < 0)
		return "unknown capability";
	*mask |= 1ULL << c;
	return NULL;
}

static const char *device_item(const char *s, void *ctx)
{
	char line[600];

	snprintf(line, sizeof(line), "%s\n", s);
	return hw_parse_devices(line, ctx) ? "bad device" : NULL;
}

static const char *note_item(const char *s, void *ctx)
{
	hw_note(ctx, "%s", s);
	return NULL;
}

static int rlimits(struct reader *rd, struct json_object *obj, struct hw_marks *m)
{
	if (!json_object_is_type(obj, json_type_object))
		return fail(rd, "\"rlimits\": expected an object");
	json_object_object_foreach(obj, name, lim) {
		int i = hw_limit_index(name);
		struct hw_limit *l;
		bool have;
		uint64_t v;

		if (i < 0)
			continue;
		if (!json_object_is_type(lim, json_type_object))
			return fail(rd, "\"%s\": expected an object", name);
		l = &m->lim[i];
		json_object_object_foreach(lim, key, val) {
			if (!strcmp(key, "exited")) {
				if (get_bool(rd, key, val, &l->exited))
					return -1;
				m->have_cgroup_marks = true;
				continue;
			}
			if (strcmp(key, "peak") && strcmp(key, "soft") && strcmp(key, "hard"))
				continue;
			if (get_u64(rd, key, val, &have, &v))
				return -1;
			if (!strcmp(key, "peak")) {
				l->have_peak = have;
				l->peak = v;
				m->have_limits_peak |= have;
			} else if (have) {
				l->have_limit = true;
				*(strcmp(key, "soft") ? &l->hard : &l->soft) = v;
			}
		}
	}
	return 0;
}

static int capabilities(struct reader *rd, struct json_object *obj, struct hw_marks *m)
{
	bool have;
	uint64_t v;

	if (!json_object_is_type(obj, json_type_object))
		return fail(rd, "\"capabilities\": expected an object");
	json_object_object_foreach(obj, key, val) {
		int r = 0;

		if (!strcmp(key, "used")) {
			r = string_array(rd, key, val, &m->have_cap_used, &m->cap_used, cap_item);
		} else if (!strcmp(key, "used_exited")) {
			r = string_array(rd, key, val, &have, &m->cap_used_exited, cap_item);
			m->have_cgroup_marks = true;
		} else if (!strcmp(key, "ambient")) {
			r = string_array(rd, key, val, &m->have_cap_amb, &m->cap_amb, cap_item);
		} else if (!strcmp(key, "uid")) {
			r = get_u64(rd, key, val, &m->have_uid, &v);
			m->uid = v;
		}
		if (r)
			return -1;
	}
	return 0;
}

/* "tasks" and "memory": numbers by key, each with where it goes. */
struct number {
	const char *key;
	size_t value, have;	/* offsets in struct hw_marks; have 0: none */
};

#define MARK(field) offsetof(struct hw_marks, field)

static const struct number tasks_numbers[] = {
	{ "peak", MARK(pids_peak), MARK(have_pids_peak) },
	{ "max", MARK(pids_max), 0 },
	{ "refused", MARK(pids_refused), 0 },
	{ "moved_out", MARK(moved_out), MARK(have_moved_out) },
	{ NULL, 0, 0 },
};

static const struct number memory_numbers[] = {
	{ "peak", MARK(memory_peak), MARK(have_memory_peak) },
	{ "file", MARK(memory_file), MARK(have_memory_file) },
	{ "shmem", MARK(memory_shmem), 0 },
	{ "max", MARK(memory_max), 0 },
	{ "max_events", MARK(memory_max_events), 0 },
	{ "oom_kills", MARK(memory_oom_kills), 0 },
	{ "maxrss", MARK(maxrss), 0 },
	{ "vm_hwm", MARK(vm_hwm), 0 },
	{ "vm_peak", MARK(vm_peak), 0 },
	{ NULL, 0, 0 },
};

static int numbers(struct reader *rd, const char *what, struct json_object *obj,
		   const struct number *table, struct hw_marks *m)
{
	if (!json_object_is_type(obj, json_type_object))
		return fail(rd, "\"%s\": expected an object", what);
	json_object_object_foreach(obj, key, val) {
		const struct number *n;
		bool have;
		uint64_t v;

		for (n = table; n->key && strcmp(n->key, key); n++)
			;
		if (!n->key)
			continue;
		if (get_u64(rd, key, val, &have, &v))
			return -1;
		if (!have)	/* null: not measured, the default stays */
			continue;
		*(uint64_t *)((char *)m + n->value) = v;
		if (n->have)
			*(bool *)((char *)m + n->have) = true;
	}
	return 0;
}

/* "device_names": {"c 1:3": "/dev/null"}: names of listed devices only */
static int device_names(struct reader *rd, struct json_object *obj, struct hw_marks *m)
{
	if (!json_object_is_type(obj, json_type_object))
		return fail(rd, "\"device_names\": expected an object");
	json_object_object_foreach(obj, key, val) {
		struct hw_device id, *d = NULL;
		char name[sizeof(id.name)];

		if (hw_parse_device_id(key, &id) || id.major == HW_ANY)
			return fail(rd, "bad device \"%.40s\" in \"device_names\"", key);
		if (get_string(rd, key, val, name, sizeof(name)))
			return -1;
		for (int i = 0; i < m->ndevices && !d; i++)
			if (m->devices[i].type == id.type && m->devices[i].major == id.major &&
			    m->devices[i].minor == id.minor)
				d = &m->devices[i];
		if (!d)
			return fail(rd, "\"device_names\" names \"%s\", which \"devices\" does not list", key);
		strcpy(d->name, name);
	}
	return 0;
}

static int top_member(struct reader *rd, const char *key, struct json_object *val,
		      struct hw_marks *m)
{
	bool have;
	uint64_t v;

	if (!strcmp(key, "command"))
		return get_string(rd, key, val, m->command, sizeof(m->command));
	if (!strcmp(key, "cgroup"))
		return get_string(rd, key, val, m->cgroup, sizeof(m->cgroup));
	if (!strcmp(key, "processes") || !strcmp(key, "exit_status")) {
		if (get_u64(rd, key, val, &have, &v))
			return -1;
		if (have && v > INT32_MAX)
			return fail(rd, "\"%s\": number out of range", key);
		if (have)
			*(key[0] == 'p' ? &m->processes : &m->exit_status) = (int)v;
		return 0;
	}
	if (!strcmp(key, "seconds")) {
		if (!json_object_is_type(val, json_type_double) &&
		    !json_object_is_type(val, json_type_int))
			return fail(rd, "\"seconds\": expected a number");
		m->seconds = json_object_get_double(val);
		return 0;
	}
	if (!strcmp(key, "timed_out"))
		return get_bool(rd, key, val, &m->timed_out);
	if (!strcmp(key, "rlimits"))
		return rlimits(rd, val, m);
	if (!strcmp(key, "capabilities"))
		return capabilities(rd, val, m);
	if (!strcmp(key, "tasks"))
		return numbers(rd, key, val, tasks_numbers, m);
	if (!strcmp(key, "memory"))
		return numbers(rd, key, val, memory_numbers, m);
	if (!strcmp(key, "devices"))
		return string_array(rd, key, val, &m->have_devices, m, device_item);
	if (!strcmp(key, "unavailable"))
		return string_array(rd, key, val, &have, m, note_item);
	return 0;
}

int hw_json_read(const char *text, struct hw_marks *m, char *err,
		 size_t errsize)
{
	struct reader rd = { err, errsize };
	struct json_tokener *tok = json_tokener_new_ex(32);
	struct json_object *root, *schema, *devices;
	size_t len = strlen(text), end;
	int r = -1;

	err[0] = '\0';
	hw_marks_init(m);
	if (!tok)
		return fail(&rd, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	root = json_tokener_parse_ex(tok, text, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (json_tokener_get_error(tok) == json_tokener_continue)
		fail(&rd, "not JSON: the text ends before the report does");
	else if (!root)
		fail(&rd, "not JSON: %s at byte %zu",
		     json_tokener_error_desc(json_tokener_get_error(tok)), end);
	else if (text[end + strspn(text + end, " \t\r\n")])
		fail(&rd, "text after the report, at byte %zu", end);
	else if (!json_object_is_type(root, json_type_object))
		fail(&rd, "a report is a JSON object");
	else if (!json_object_object_get_ex(root, "schema", &schema))
		fail(&rd, "no \"schema\": \"%s\" member", HW_SCHEMA);
	else if (!json_object_is_type(schema, json_type_string) ||
		 strcmp(json_object_get_string(schema), HW_SCHEMA))
		fail(&rd, "schema \"%.60s\", not \"%s\"", json_object_get_string(schema), HW_SCHEMA);
	else
		r = 0;
	if (!r) {
		/* Devices first: "device_names" names what they list. */
		if (json_object_object_get_ex(root, "devices", &devices))
			r = top_member(&rd, "devices", devices, m);
		json_object_object_foreach(root, key, val) {
			if (r)
				break;
			if (strcmp(key, "devices") && strcmp(key, "device_names"))
				r = top_member(&rd, key, val, m);
		}
		if (!r && json_object_object_get_ex(root, "device_names", &devices))
			r = device_names(&rd, devices, m);
	}
	json_object_put(root);
	json_tokener_free(tok);
	return r;
}
