// SPDX-License-Identifier: GPL-2.0
/*
 * What container users paste: docker/podman run flags, a compose service
 * fragment, a fragment of the OCI runtime spec's config.json, and a
 * Kubernetes container's fields.  All four come from one plan (plan_make):
 * the same advice as the systemd drop-in (recommend.c), cut to what
 * containers can set, so that the formats never disagree on a value.
 */
#define _GNU_SOURCE	/* vasprintf */
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"

/* Devices every docker/podman container gets without --device. */
static bool docker_default_device(const char *name)
{
	static const char *const defaults[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
		"/dev/urandom", "/dev/tty", "/dev/console", "/dev/ptmx",
		"char-pts",
	};

	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (!strcmp(name, defaults[i]))
			return true;
	return false;
}

static void __attribute__((noreturn)) out_of_memory(void)
{
	hw_warn("out of memory while writing the report");
	exit(HW_EX_SOFTWARE);
}

static char *xvasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0)
		out_of_memory();
	return s;
}

/* One device as the plan holds it: its name here, if the host had one. */
struct plan_device {
	const struct hw_device *dev;
	char name[256];		/* "/dev/fuse", "char-pts"; "" if none */
	char rule[64];		/* "c 10:229 rw" */
	char access[4];		/* "rw" */
	bool is_default;	/* a container has it without asking */
};

/*
 * The settings a container gets, each with its reason when it is not set.
 * rlimits: @set[i] and @value[i] for the limits every container runtime
 * knows (docker's --ulimit names); the OCI spec takes any (@oci_only[i]).
 */
struct plan {
	bool set[HW_NLIMITS], oci_only[HW_NLIMITS];
	uint64_t value[HW_NLIMITS];
	const char *why[HW_NLIMITS];	/* peak measured, not set: why */
	bool pids_set;
	uint64_t pids;
	const char *pids_why;		/* NULL: not measured or set */
	bool memory_set;
	struct hw_memory_advice memory;
	const char *memory_why;
	int ndevices;
	struct plan_device *devices;
};

static void plan_make(struct plan *p, const struct hw_marks *m, int margin)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < HW_NLIMITS; i++) {
		struct hw_advice a = hw_limit_advice(m, i, margin);

		if (hw_limits[i].kind == HW_UNTRACKED)
			continue;
		p->value[i] = a.value;
		if (a.emit && !hw_limits[i].docker) {
			p->oci_only[i] = true;
			p->why[i] = "docker and compose have no ulimit for it; use the memory limit";
		} else if (a.emit) {
			p->set[i] = true;
		} else if (m->lim[i].have_peak) {
			p->why[i] = a.why;
		}
	}
	if (m->have_pids_peak) {
		p->pids_why = hw_tasks_not_derived(m);
		p->pids_set = !p->pids_why;
		p->pids = hw_recommend(HW_COUNT, m->pids_peak, margin);
	}
	if (m->have_memory_peak) {
		p->memory_why = hw_memory_not_derived(m);
		p->memory_set = !p->memory_why;
		p->memory = hw_memory_advice(m, margin);
	}
	if (m->have_devices && m->ndevices) {
		p->devices = calloc(m->ndevices, sizeof(*p->devices));
		if (!p->devices)
			out_of_memory();
		for (int i = 0; i < m->ndevices; i++) {
			struct plan_device *d = &p->devices[i];

			d->dev = &m->devices[i];
			if (hw_device_name(d->dev, d->name, sizeof(d->name)))
				d->name[0] = '\0';
			hw_devices_list_line(d->dev, d->rule, sizeof(d->rule));
			hw_access_str(d->dev->access, d->access);
			d->is_default = d->name[0] && docker_default_device(d->name);
		}
		p->ndevices = m->ndevices;
	}
}

static void plan_free(struct plan *p)
{
	free(p->devices);
}

/* "41M" as systemd and docker read it (1024-based), and Kubernetes' "41Mi". */
static void bytes(uint64_t v, bool kubernetes, char *buf, size_t size)
{
	size_t n;

	hw_format_bytes(v, buf, size);
	n = strlen(buf);
	if (kubernetes && n && strchr("KMGT", buf[n - 1]) && n + 2 <= size)
		strcpy(buf + n, "i");
}

/*
 * dockerd refuses a memory limit below 6 MiB ("Minimum memory limit allowed
 * is 6MB"), for run and compose alike; podman and the OCI runtimes take it.
 */
#define DOCKER_MIN_MEMORY (6ULL << 20)

/* The memory limit docker's flags and compose's key take: at least 6 MiB. */
static uint64_t docker_memory(FILE *out, const struct plan *p, const char *flag)
{
	if (p->memory.max >= DOCKER_MIN_MEMORY)
		return p->memory.max;
	fprintf(out, "# %s raised to 6 MiB, the least dockerd takes (podman takes less)\n", flag);
	return DOCKER_MIN_MEMORY;
}

static void memory_comment(FILE *out, const struct hw_marks *m,
			   const struct plan *p, const char *flag)
{
	char val[48];

	if (!m->have_memory_peak) {
		fprintf(out, "# %s: no memory.peak was measured\n", flag);
		return;
	}
	if (p->memory_why) {
		fprintf(out, "# %s: not set: %s\n", flag, p->memory_why);
		return;
	}
	fprintf(out, "# %s is memory.peak plus the margin (page cache included, as the limit counts it)\n", flag);
	if (p->memory.high) {
		hw_format_bytes(p->memory.high, val, sizeof(val));
		fprintf(out, "# The part that is not page cache, plus the margin, is %s: memory.high\n"
			"# (podman: --cgroup-conf=memory.high=%s; docker and Kubernetes have no setting for it)\n",
			val, val);
	}
}

static void notes(FILE *out, const struct hw_marks *m)
{
	for (int i = 0; i < m->nnotes; i++)
		fprintf(out, "# unavailable: %s\n", m->notes[i]);
}

static void header(FILE *out, const struct hw_marks *m, int margin, const char *what)
{
	char buf[160];

	fprintf(out, "# highwater: %s for: %s\n", what, m->command);
	fprintf(out, "# Measured: %s. Margin %d%%.\n",
		hw_run_summary(m, buf, sizeof(buf)), margin);
	if (m->timed_out)
		fprintf(out, "# The run was stopped by --timeout: peaks are those reached until then.\n");
}

/* Why a limit is not set, for the formats with comments. */
static void ulimit_comments(FILE *out, const struct plan *p, const char *what)
{
	for (int i = 0; i < HW_NLIMITS; i++)
		if (p->why[i])
			fprintf(out, "# %s %s: not set: %s\n", what, hw_limits[i].key, p->why[i]);
}

/* --- docker and podman: run flags --------------------------------------- */

/*
 * The flags, printed after the comments that explain them, one per line with
 * a continuation: as many as the marks need (a container may use hundreds of
 * devices), none dropped.
 */
struct flag_list {
	char **v;
	size_t n, cap;
};

static void __attribute__((format(printf, 2, 3)))
flag_add(struct flag_list *fl, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	if (fl->n == fl->cap) {
		fl->cap = fl->cap ? 2 * fl->cap : 32;
		fl->v = realloc(fl->v, fl->cap * sizeof(*fl->v));
		if (!fl->v)
			out_of_memory();
	}
	fl->v[fl->n++] = s;
}

static void flags_print(FILE *out, struct flag_list *fl)
{
	for (size_t i = 0; i < fl->n; i++) {
		fprintf(out, "%s%s\n", fl->v[i], i + 1 < fl->n ? " \\" : "");
		free(fl->v[i]);
	}
	free(fl->v);
}

void hw_report_docker(FILE *out, const struct hw_marks *m, int margin)
{
	struct flag_list fl = { 0 };
	struct plan p;
	char val[48];

	plan_make(&p, m, margin);
	header(out, m, margin, "docker/podman run flags");
	ulimit_comments(out, &p, "--ulimit");
	for (int i = 0; i < HW_NLIMITS; i++)
		if (p.set[i])
			flag_add(&fl, "--ulimit %s=%" PRIu64 ":%" PRIu64,
				 hw_limits[i].key, p.value[i], p.value[i]);
	if (p.pids_why)
		fprintf(out, "# --pids-limit: not set: %s\n", p.pids_why);
	else if (p.pids_set)
		flag_add(&fl, "--pids-limit=%" PRIu64, p.pids);
	memory_comment(out, m, &p, "--memory");
	if (p.memory_set) {
		bytes(docker_memory(out, &p, "--memory"), false, val, sizeof(val));
		flag_add(&fl, "--memory=%s", val);
	}
	if (!hw_caps_not_derived(m)) {
		char *caps = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&caps, &len);

		if (!f)
			out_of_memory();
		fprintf(f, "--cap-drop=ALL");
		for (int c = 0; c <= HW_CAP_LAST; c++)
			if (m->cap_used & (1ULL << c))
				fprintf(f, " --cap-add=%s", hw_cap_name(c) + 4);
		if (fclose(f))
			out_of_memory();
		flag_add(&fl, "%s", caps);
		free(caps);
	} else {
		fprintf(out, "# --cap-drop/--cap-add: not set: %s\n", hw_caps_not_derived(m));
	}
	for (int i = 0; i < p.ndevices; i++) {
		const struct plan_device *d = &p.devices[i];

		if (d->is_default)
			continue;
		if (d->name[0] == '/')
			flag_add(&fl, "--device=%s:%s:%s", d->name, d->name, d->access);
		else
			flag_add(&fl, "--device-cgroup-rule='%s'", d->rule);
	}
	if (m->have_devices)
		fprintf(out, "# Devices every container has (/dev/null, /dev/zero, ...) need no flag.\n");
	else
		fprintf(out, "# --device: devices accessed were not measured\n");
	notes(out, m);
	flags_print(out, &fl);
	plan_free(&p);
}

/* --- compose: a service's keys ------------------------------------------ */

/* A YAML flow list of capability names without CAP_: [NET_ADMIN, SYS_NICE] */
static void cap_flow_list(FILE *out, uint64_t mask, const char *quote)
{
	const char *sep = "";

	fprintf(out, "[");
	for (int c = 0; c <= HW_CAP_LAST; c++)
		if (mask & (1ULL << c)) {
			fprintf(out, "%s%s%s%s", sep, quote, hw_cap_name(c) + 4, quote);
			sep = ", ";
		}
	fprintf(out, "]\n");
}

void hw_report_compose(FILE *out, const struct hw_marks *m, int margin)
{
	struct plan p;
	char val[48];
	bool any;

	plan_make(&p, m, margin);
	header(out, m, margin, "compose service keys");
	fprintf(out, "# Paste under services: NAME: in compose.yaml.\n");
	ulimit_comments(out, &p, "ulimits:");
	if (p.pids_why)
		fprintf(out, "# pids_limit: not set: %s\n", p.pids_why);
	memory_comment(out, m, &p, "mem_limit");
	if (hw_caps_not_derived(m))
		fprintf(out, "# cap_drop/cap_add: not set: %s\n", hw_caps_not_derived(m));
	if (!m->have_devices)
		fprintf(out, "# devices: devices accessed were not measured\n");
	/* podman_compose.py 1.0.3 has no code for either key */
	fprintf(out, "# podman-compose 1.0.3 (Debian 12) passes neither pids_limit nor device_cgroup_rules to podman: with it, use --format podman's flags.\n");
	notes(out, m);

	any = false;
	for (int i = 0; i < HW_NLIMITS; i++)
		if (p.set[i]) {
			if (!any)
				fprintf(out, "ulimits:\n");
			any = true;
			fprintf(out, "  %s:\n    soft: %" PRIu64 "\n    hard: %" PRIu64 "\n",
				hw_limits[i].key, p.value[i], p.value[i]);
		}
	if (p.pids_set)
		fprintf(out, "pids_limit: %" PRIu64 "\n", p.pids);
	if (p.memory_set) {
		/* compose's byte values: a number with b, k, m or g */
		bytes(docker_memory(out, &p, "mem_limit"), false, val, sizeof(val));
		for (char *c = val; *c; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c += 'a' - 'A';
		fprintf(out, "mem_limit: %s\n", val);
	}
	if (!hw_caps_not_derived(m)) {
		fprintf(out, "cap_drop: [ALL]\ncap_add: ");
		cap_flow_list(out, m->cap_used, "");
	}
	any = false;
	for (int i = 0; i < p.ndevices; i++)
		if (!p.devices[i].is_default && p.devices[i].name[0] == '/') {
			if (!any)
				fprintf(out, "devices:\n");
			any = true;
			fprintf(out, "  - \"%s:%s:%s\"\n", p.devices[i].name,
				p.devices[i].name, p.devices[i].access);
		}
	any = false;
	for (int i = 0; i < p.ndevices; i++)
		if (!p.devices[i].is_default && p.devices[i].name[0] != '/') {
			if (!any)
				fprintf(out, "device_cgroup_rules:\n");
			any = true;
			fprintf(out, "  - \"%s\"\n", p.devices[i].rule);
		}
	plan_free(&p);
}

/* --- OCI runtime spec: a config.json fragment ----------------------------- */

static json_object *jobj(json_object *parent, const char *key)
{
	json_object *o;

	if (json_object_object_get_ex(parent, key, &o))
		return o;
	o = json_object_new_object();
	if (!o || json_object_object_add(parent, key, o))
		out_of_memory();
	return o;
}

static void jadd(json_object *parent, const char *key, json_object *v)
{
	if (!v || json_object_object_add(parent, key, v))
		out_of_memory();
}

static void jappend(json_object *array, json_object *v)
{
	if (!v || json_object_array_add(array, v))
		out_of_memory();
}

static json_object *jarray(void)
{
	json_object *a = json_object_new_array();

	if (!a)
		out_of_memory();
	return a;
}

static json_object *cap_array(uint64_t mask)
{
	json_object *a = jarray();

	for (int c = 0; c <= HW_CAP_LAST; c++)
		if (mask & (1ULL << c))
			jappend(a, json_object_new_string(hw_cap_name(c)));
	return a;
}

static void annotate(json_object *annotations, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void annotate(json_object *annotations, const char *key, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	jadd(annotations, key, json_object_new_string(s));
	free(s);
}

/*
 * The fields of config.json the marks set, to merge into `crun spec`'s
 * (jq -s '.[0] * .[1]' config.json fragment.json: objects merge, arrays are
 * replaced).  JSON has no comments: what is not set, and why, goes in
 * annotations (org.highwater.*), which the runtime keeps as they are.
 */
void hw_report_oci(FILE *out, const struct hw_marks *m, int margin)
{
	json_object *root = json_object_new_object(), *process, *lnx, *res, *ann;
	struct plan p;
	char buf[160], key[96];

	if (!root)
		out_of_memory();
	plan_make(&p, m, margin);
	ann = jobj(root, "annotations");
	process = jobj(root, "process");
	lnx = jobj(root, "linux");
	res = jobj(lnx, "resources");
	annotate(ann, "org.highwater.command", "%s", m->command);
	annotate(ann, "org.highwater.measured", "%s; margin %d%%%s",
		 hw_run_summary(m, buf, sizeof(buf)), margin,
		 m->timed_out ? "; stopped by --timeout: peaks are those reached until then" : "");

	if (m->have_limits_peak) {
		json_object *rl = jarray();

		for (int i = 0; i < HW_NLIMITS; i++) {
			json_object *o;

			if (!p.set[i] && !p.oci_only[i]) {
				if (p.why[i]) {
					snprintf(key, sizeof(key), "org.highwater.rlimit.%s", hw_limits[i].key);
					annotate(ann, key, "not set: %s", p.why[i]);
				}
				continue;
			}
			o = json_object_new_object();
			if (!o)
				out_of_memory();
			snprintf(buf, sizeof(buf), "RLIMIT_%s", hw_limits[i].key);
			for (char *c = buf; *c; c++)
				if (*c >= 'a' && *c <= 'z')
					*c += 'A' - 'a';
			jadd(o, "type", json_object_new_string(buf));
			jadd(o, "hard", json_object_new_uint64(p.value[i]));
			jadd(o, "soft", json_object_new_uint64(p.value[i]));
			jappend(rl, o);
		}
		jadd(process, "rlimits", rl);
	} else {
		annotate(ann, "org.highwater.rlimits", "rlimit peaks were not measured");
	}
	if (!hw_caps_not_derived(m)) {
		json_object *caps = jobj(process, "capabilities");
		uint64_t ambient = 0;

		if (m->have_uid && m->uid != 0 && m->have_cap_amb)
			ambient = m->cap_used & m->cap_amb;
		/*
		 * All five sets, so that none of the template's stays (crun
		 * spec's has ambient capabilities the bounding set would no
		 * longer hold).  A process that is not root keeps capabilities
		 * across its execve() only as ambient ones.
		 */
		jadd(caps, "bounding", cap_array(m->cap_used));
		jadd(caps, "effective", cap_array(m->cap_used));
		jadd(caps, "permitted", cap_array(m->cap_used));
		jadd(caps, "inheritable", cap_array(ambient));
		jadd(caps, "ambient", cap_array(ambient));
	} else {
		annotate(ann, "org.highwater.capabilities", "%s", hw_caps_not_derived(m));
	}
	if (m->have_devices) {
		json_object *allow = jarray(), *nodes = NULL, *deny = json_object_new_object();

		if (!deny)
			out_of_memory();
		jadd(deny, "allow", json_object_new_boolean(0));
		jadd(deny, "access", json_object_new_string("rwm"));
		jappend(allow, deny);
		for (int i = 0; i < p.ndevices; i++) {
			const struct plan_device *d = &p.devices[i];
			json_object *o = json_object_new_object();
			char type[2] = { d->dev->type, '\0' };

			if (!o)
				out_of_memory();
			jadd(o, "allow", json_object_new_boolean(1));
			jadd(o, "type", json_object_new_string(type));
			if (d->dev->major != HW_ANY)
				jadd(o, "major", json_object_new_int64(d->dev->major));
			if (d->dev->minor != HW_ANY)
				jadd(o, "minor", json_object_new_int64(d->dev->minor));
			jadd(o, "access", json_object_new_string(d->access));
			jappend(allow, o);
			/* A node the runtime does not make by default. */
			if (d->name[0] == '/' && !d->is_default && d->dev->major != HW_ANY &&
			    d->dev->minor != HW_ANY) {
				json_object *n = json_object_new_object();

				if (!n)
					out_of_memory();
				if (!nodes)
					nodes = jarray();
				jadd(n, "path", json_object_new_string(d->name));
				jadd(n, "type", json_object_new_string(type));
				jadd(n, "major", json_object_new_int64(d->dev->major));
				jadd(n, "minor", json_object_new_int64(d->dev->minor));
				jappend(nodes, n);
			}
		}
		jadd(res, "devices", allow);
		if (nodes)
			jadd(lnx, "devices", nodes);
	} else {
		annotate(ann, "org.highwater.devices", "devices accessed were not measured");
	}
	if (p.memory_set) {
		json_object *mem = jobj(res, "memory");

		jadd(mem, "limit", json_object_new_uint64(hw_bytes_rounded(p.memory.max)));
		if (p.memory.high) {
			snprintf(key, sizeof(key), "%" PRIu64, hw_bytes_rounded(p.memory.high));
			jadd(jobj(res, "unified"), "memory.high", json_object_new_string(key));
		}
	} else {
		annotate(ann, "org.highwater.memory", "%s",
			 p.memory_why ? p.memory_why : "no memory.peak was measured");
	}
	if (p.pids_set)
		jadd(jobj(res, "pids"), "limit", json_object_new_int64((int64_t)p.pids));
	else
		annotate(ann, "org.highwater.pids", "%s",
			 p.pids_why ? p.pids_why : "no pids.peak was measured");
	for (int i = 0; i < m->nnotes; i++) {
		snprintf(key, sizeof(key), "org.highwater.unavailable.%d", i + 1);
		annotate(ann, key, "%s", m->notes[i]);
	}
	fprintf(out, "%s\n", json_object_to_json_string_ext(root,
		JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
	plan_free(&p);
}

/* --- Kubernetes: a container's securityContext and resources ------------- */

void hw_report_kubernetes(FILE *out, const struct hw_marks *m, int margin)
{
	struct plan p;
	char val[48];
	bool any = false;

	plan_make(&p, m, margin);
	header(out, m, margin, "Kubernetes container fields");
	fprintf(out, "# Paste under the container in spec.containers[].\n");
	memory_comment(out, m, &p, "resources.limits.memory");
	for (int i = 0; i < HW_NLIMITS; i++)
		if (p.set[i] || p.oci_only[i]) {
			fprintf(out, "%s%s %" PRIu64, any ? ", " :
				"# Kubernetes has no field for rlimits; with the margin they would be: ",
				hw_limits[i].key, p.value[i]);
			any = true;
		}
	if (any)
		fprintf(out, " (set them in the image's entrypoint, or the runtime's defaults)\n");
	if (p.pids_set)
		fprintf(out, "# No per-container task limit: the kubelet's podPidsLimit is per pod (%" PRIu64 " for this container)\n",
			p.pids);
	any = false;
	for (int i = 0; i < p.ndevices; i++)
		if (!p.devices[i].is_default) {
			fprintf(out, "%s", any ? ", " :
				"# No field for devices (a device plugin provides them): ");
			if (p.devices[i].name[0])
				fprintf(out, "%s %s", p.devices[i].name, p.devices[i].access);
			else
				fprintf(out, "%s", p.devices[i].rule);
			any = true;
		}
	if (any)
		fprintf(out, "\n");
	if (hw_caps_not_derived(m))
		fprintf(out, "# securityContext.capabilities: not set: %s\n", hw_caps_not_derived(m));
	else if (m->have_uid && m->uid != 0)
		fprintf(out, "# The command ran as uid %u: Kubernetes sets no ambient capabilities, so a\n"
			"# container that runs as a user other than root gets none of these in effect.\n",
			m->uid);
	notes(out, m);
	if (!hw_caps_not_derived(m)) {
		fprintf(out, "securityContext:\n  capabilities:\n    drop: [\"ALL\"]\n    add: ");
		cap_flow_list(out, m->cap_used, "\"");
	}
	if (p.memory_set) {
		bytes(p.memory.max, true, val, sizeof(val));
		fprintf(out, "resources:\n  limits:\n    memory: \"%s\"\n", val);
	}
	plan_free(&p);
}
