// SPDX-License-Identifier: GPL-2.0
/*
 * Every output format, JSON read back, and merge, on marks shaped like a
 * run of workloads/demo (with the series) and like a run on mainline.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "../tap.h"
#include "hw.h"

static char *render(const struct hw_marks *m, enum hw_format f, int margin)
{
	static char *buf;
	size_t size;
	FILE *out;

	free(buf);
	out = open_memstream(&buf, &size);
	hw_report(out, m, f, margin);
	fclose(out);
	return buf;
}

/* Does @text hold @line as a whole line? */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || !p[n]))
			return 1;
	tap_diag("no line \"%s\" in:\n%s", line, text);
	return 0;
}

static int lacks(const char *text, const char *s)
{
	if (strstr(text, s)) {
		tap_diag("unexpected \"%s\" in:\n%s", s, text);
		return 0;
	}
	return 1;
}

static void set_limit(struct hw_marks *m, const char *key, uint64_t peak,
		      uint64_t soft)
{
	struct hw_limit *l = &m->lim[hw_limit_index(key)];

	l->have_peak = l->have_limit = true;
	l->peak = peak;
	l->soft = soft;
	l->hard = soft;
}

/* A run of workloads/demo as root on the patched kernel. */
static void demo_marks(struct hw_marks *m)
{
	struct hw_device null = { 'c', 1, 3, HW_ACC_READ | HW_ACC_WRITE, "/dev/null" };
	struct hw_device zero = { 'c', 1, 5, HW_ACC_READ, "/dev/zero" };
	struct hw_device odd = { 'c', 240, HW_ANY, HW_ACC_MKNOD, "" };

	hw_marks_init(m);
	strcpy(m->command, "demo");
	m->exit_status = 0;
	m->seconds = 0.35;
	m->processes = 1;
	m->have_limits_peak = true;
	for (int i = 0; i < HW_NLIMITS; i++)
		if (hw_limits[i].kind != HW_UNTRACKED)
			set_limit(m, hw_limits[i].key, 0, HW_UNLIMITED);
	set_limit(m, "nofile", 203, 1024);
	set_limit(m, "memlock", 65536, 8 << 20);
	set_limit(m, "nice", 25, 0);
	set_limit(m, "as", 35913728, HW_UNLIMITED);
	set_limit(m, "fsize", 1048576, HW_UNLIMITED);
	set_limit(m, "cpu", 1, HW_UNLIMITED);
	m->have_cap_used = m->have_cap_amb = m->have_uid = true;
	m->cap_used = 1ULL << 10 | 1ULL << 23;	/* NET_BIND_SERVICE, SYS_NICE */
	m->uid = 0;
	m->have_pids_peak = true;
	m->pids_peak = 9;
	m->have_memory_peak = m->have_memory_file = true;
	m->memory_peak = 34000000;
	m->memory_file = 20480;
	m->maxrss = 34500000;
	hw_parse_devices("", m);
	hw_add_device(m, &null);
	hw_add_device(m, &zero);
	hw_add_device(m, &odd);
}

static void text_format(const struct hw_marks *m)
{
	char *t = render(m, HW_TEXT, 25);

	tap_ok(strstr(t, "Max open files           203          1024         1024") != NULL,
	       "text: open files peak 203, limit 1024, recommended 1024");
	tap_ok(strstr(t, "Max nice priority        25           0            25             OVER the limit") != NULL &&
	       strstr(t, "OVER: the run hit the limit") != NULL,
	       "text: a peak over the soft limit is flagged and explained");
	tap_ok(lacks(t, "Max core file size       0            unlimited    -  (*)         AT"),
	       "text: a zero peak is never flagged");
	tap_ok(has_line(t, "Capabilities used: CAP_NET_BIND_SERVICE CAP_SYS_NICE") &&
	       strstr(t, "Devices accessed:  /dev/null rw, /dev/zero r") != NULL,
	       "text: capability names and device paths");
	tap_ok(strstr(t, "Tasks (pids.peak)        9            unlimited    12") != NULL &&
	       strstr(t, "Memory (memory.peak)     32.4M        unlimited    41M") != NULL,
	       "text: tasks and memory with their recommendations");
}

static void systemd_format(struct hw_marks *m)
{
	char *t = render(m, HW_SYSTEMD, 25);

	tap_ok(has_line(t, "[Service]") && has_line(t, "LimitNOFILE=1024") &&
	       has_line(t, "LimitMEMLOCK=80K") && has_line(t, "LimitNICE=25") &&
	       strstr(t, "# LimitFSIZE=1280K  (not set: files written to grow across runs"),
	       "systemd: Limit*= lines with margin and units");
	tap_ok(strstr(t, "# LimitAS=43M  (not set: systemd advises against it (mappings never touched count): prefer MemoryMax= (docker: --memory))") &&
	       strstr(t, "# LimitCPU=") && strstr(t, "# LimitNPROC") &&
	       lacks(t, "\nLimitAS=") && lacks(t, "\nLimitCPU="),
	       "systemd: LimitAS, LimitCPU, LimitNPROC only as comments, with why");
	tap_ok(has_line(t, "TasksMax=12") && has_line(t, "MemoryMax=41M") &&
	       strstr(t, "includes page cache") != NULL,
	       "systemd: TasksMax=, MemoryMax=, and how memory was decided");
	tap_ok(has_line(t, "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_SYS_NICE") &&
	       lacks(t, "AmbientCapabilities="),
	       "systemd: bounding set; no ambient capabilities for root");
	tap_ok(has_line(t, "DevicePolicy=closed") && has_line(t, "DeviceAllow=/dev/null rw") &&
	       has_line(t, "DeviceAllow=/dev/zero r"),
	       "systemd: DevicePolicy=closed and DeviceAllow= by path");

	m->uid = 1000;
	m->cap_amb = 1ULL << 10;
	t = render(m, HW_SYSTEMD, 25);
	tap_ok(has_line(t, "AmbientCapabilities=CAP_NET_BIND_SERVICE"),
	       "systemd: unprivileged with an ambient capability: AmbientCapabilities=");
	m->uid = 0;
	m->cap_amb = 0;
	m->cap_used = 0;
	t = render(m, HW_SYSTEMD, 25);
	tap_ok(has_line(t, "CapabilityBoundingSet="),
	       "systemd: no capability used: an empty bounding set");
	m->cap_used = 1ULL << 10 | 1ULL << 23;
	t = render(m, HW_SYSTEMD, 0);
	tap_ok(has_line(t, "LimitNOFILE=1024") && has_line(t, "TasksMax=9"),
	       "systemd: --margin 0");
	m->lim[hw_limit_index("fsize")].peak = 0;
	t = render(m, HW_SYSTEMD, 25);
	tap_ok(strstr(t, "# LimitFSIZE=0  (not set: files written to grow across runs") &&
	       lacks(t, "\nLimitFSIZE="),
	       "systemd: no LimitFSIZE=, not even 0, which would kill the first write");
	m->lim[hw_limit_index("fsize")].peak = 1048576;
}

static void docker_format(const struct hw_marks *m)
{
	char *t = render(m, HW_DOCKER, 25);

	tap_ok(has_line(t, "--ulimit nofile=1024:1024 \\") &&
	       has_line(t, "--ulimit memlock=81920:81920 \\"),
	       "docker: --ulimit in raw units, soft:hard");
	tap_ok(has_line(t, "--pids-limit=12 \\") && has_line(t, "--memory=41M \\"),
	       "docker: --pids-limit and --memory");
	tap_ok(strstr(t, "--cap-drop=ALL --cap-add=NET_BIND_SERVICE --cap-add=SYS_NICE") != NULL,
	       "docker: --cap-drop=ALL, then what was used");
	tap_ok(has_line(t, "--device-cgroup-rule='c 240:* m'") &&
	       lacks(t, "--device=/dev/null"),
	       "docker: no flag for default devices, a cgroup rule where no node exists");
	tap_ok(lacks(t, "--ulimit as=") && strstr(t, "# --ulimit as: not set") != NULL,
	       "docker: no --ulimit as (docker has none)");
}

/*
 * The other container formats: the same values as docker's flags (the
 * same plan), in each one's own syntax.
 */
static void compose_format(const struct hw_marks *m)
{
	char *t = render(m, HW_COMPOSE, 25);

	tap_ok(has_line(t, "ulimits:") && has_line(t, "  nofile:") &&
	       has_line(t, "    soft: 1024") && has_line(t, "    hard: 1024") &&
	       has_line(t, "pids_limit: 12") && has_line(t, "mem_limit: 41m"),
	       "compose: ulimits soft and hard, pids_limit, mem_limit as docker's flags");
	tap_ok(has_line(t, "cap_drop: [ALL]") &&
	       has_line(t, "cap_add: [NET_BIND_SERVICE, SYS_NICE]") &&
	       has_line(t, "device_cgroup_rules:") && has_line(t, "  - \"c 240:* m\"") &&
	       lacks(t, "/dev/null") && lacks(t, "\nas:") &&
	       strstr(t, "# ulimits: as: not set") != NULL &&
	       strstr(t, "# podman-compose 1.0.3 (Debian 12) passes neither pids_limit nor device_cgroup_rules") != NULL,
	       "compose: capabilities, a device rule, no default device, no as; what podman-compose drops");
}

/* dockerd refuses a memory limit under 6 MiB: docker and compose get 6 MiB. */
static void docker_small_memory(const struct hw_marks *demo)
{
	static struct hw_marks m;
	char *t, *c;

	m = *demo;
	m.memory_peak = 668 << 10;
	m.memory_file = 0;
	t = strdup(render(&m, HW_DOCKER, 25));
	c = strdup(render(&m, HW_COMPOSE, 25));
	tap_ok(has_line(t, "--memory=6144K \\") &&
	       strstr(t, "# --memory raised to 6 MiB, the least dockerd takes") &&
	       has_line(c, "mem_limit: 6144k") && strstr(render(&m, HW_OCI, 25), "\"limit\": 855040"),
	       "docker and compose: a 668K peak gets dockerd's least, 6 MiB, and says so; OCI keeps 835K");
	free(t);
	free(c);
}

static json_object *path(json_object *o, const char *const keys[])
{
	for (int i = 0; o && keys[i]; i++)
		if (!json_object_object_get_ex(o, keys[i], &o))
			return NULL;
	return o;
}

static int array_length(json_object *a)
{
	return json_object_is_type(a, json_type_array) ? (int)json_object_array_length(a) : -1;
}

static void oci_format(const struct hw_marks *m)
{
	json_object *root = json_tokener_parse(render(m, HW_OCI, 25)), *rl, *dev, *caps;
	int nofile = -1, ok_devices = 0;

	rl = path(root, (const char *const[]){ "process", "rlimits", NULL });
	for (int i = 0; i < array_length(rl); i++) {
		json_object *e = json_object_array_get_idx(rl, i), *v;

		if (json_object_object_get_ex(e, "type", &v) &&
		    !strcmp(json_object_get_string(v), "RLIMIT_NOFILE") &&
		    json_object_object_get_ex(e, "soft", &v))
			nofile = json_object_get_int(v);
	}
	caps = path(root, (const char *const[]){ "process", "capabilities", "bounding", NULL });
	tap_ok(array_length(path(root, (const char *const[]){ "process", "capabilities",
						"ambient", NULL })) == 0 &&
	       array_length(path(root, (const char *const[]){ "process", "capabilities",
						"inheritable", NULL })) == 0,
	       "oci: empty ambient and inheritable sets, so that none of a template's stays");
	tap_ok(root && nofile == 1024 && array_length(caps) == 2 &&
	       !strcmp(json_object_get_string(json_object_array_get_idx(caps, 0)),
		       "CAP_NET_BIND_SERVICE") &&
	       json_object_get_int64(path(root, (const char *const[]){ "linux", "resources",
				     "memory", "limit", NULL })) == 41 << 20 &&
	       json_object_get_int(path(root, (const char *const[]){ "linux", "resources",
				   "pids", "limit", NULL })) == 12,
	       "oci: RLIMIT_NOFILE 1024 (the floor), bounding set, memory and pids limits as docker's");
	dev = path(root, (const char *const[]){ "linux", "resources", "devices", NULL });
	for (int i = 0; i < array_length(dev); i++) {
		json_object *e = json_object_array_get_idx(dev, i), *v;
		bool allow = json_object_object_get_ex(e, "allow", &v) && json_object_get_boolean(v);
		const char *acc = json_object_object_get_ex(e, "access", &v) ?
				  json_object_get_string(v) : "";
		bool has_minor = json_object_object_get_ex(e, "minor", &v);

		ok_devices += i == 0 ? !allow && !strcmp(acc, "rwm") :
			      i == 1 ? allow && !strcmp(acc, "rw") && json_object_get_int(v) == 3 :
			      i == 3 ? allow && !strcmp(acc, "m") && !has_minor : allow;
	}
	tap_ok(array_length(dev) == 4 && ok_devices == 4,
	       "oci: devices deny all, then allow each recorded one (a wildcard minor left out)");
	json_object_put(root);
}

static void kubernetes_format(const struct hw_marks *m)
{
	char *t = render(m, HW_KUBERNETES, 25);

	tap_ok(has_line(t, "securityContext:") && has_line(t, "    drop: [\"ALL\"]") &&
	       has_line(t, "    add: [\"NET_BIND_SERVICE\", \"SYS_NICE\"]") &&
	       has_line(t, "    memory: \"41Mi\""),
	       "kubernetes: capabilities without the CAP_ prefix, memory in Mi");
	tap_ok(strstr(t, "# Kubernetes has no field for rlimits") && strstr(t, "nofile 1024") &&
	       strstr(t, "podPidsLimit is per pod (12") && strstr(t, "c 240:* m") &&
	       lacks(t, "ulimit"),
	       "kubernetes: what it has no field for, in comments");
}

/*
 * A container that used many devices gets a flag for each one: the flags were
 * kept in a table of 48, and every device past it was silently left out.
 */
static void docker_many_devices(const struct hw_marks *demo)
{
	static struct hw_marks m;
	char line[64], *t;
	int found = 0;

	m = *demo;
	for (uint32_t minor = 0; minor < 100; minor++) {
		struct hw_device d = { 'c', 4000, minor, HW_ACC_READ | HW_ACC_WRITE, "" };

		hw_add_device(&m, &d);
	}
	t = render(&m, HW_DOCKER, 25);
	for (int minor = 0; minor < 100; minor++) {
		snprintf(line, sizeof(line), "--device-cgroup-rule='c 4000:%d rw'%s",
			 minor, minor < 99 ? " \\" : "");
		found += has_line(t, line);
	}
	tap_ok(found == 100 && has_line(t, "--ulimit nofile=1024:1024 \\"),
	       "docker: a flag for each of 100 devices, none dropped (%d found)", found);
}

static void mainline(void)
{
	struct hw_marks m;
	char *t;

	hw_marks_init(&m);
	strcpy(m.command, "true");
	m.exit_status = 0;
	hw_parse_limits("Limit                     Soft Limit           Hard Limit           Units     \n"
			"Max open files            1024                 4096                 files     \n", &m, true);
	hw_note(&m, "rlimit peaks: this kernel has no /proc/PID/limits_peak (it lacks the highwater series)");
	m.have_memory_peak = true;
	m.memory_peak = 1 << 20;
	t = render(&m, HW_TEXT, 25);
	tap_ok(strstr(t, "Max open files           n/a          1024         -") != NULL &&
	       strstr(t, "unavailable: rlimit peaks: this kernel has no /proc/PID/limits_peak") != NULL,
	       "mainline, text: n/a and why, never a number");
	t = render(&m, HW_SYSTEMD, 25);
	tap_ok(has_line(t, "# LimitNOFILE: not measured on this kernel") &&
	       lacks(t, "\nLimitNOFILE=") && has_line(t, "MemoryMax=1280K") &&
	       has_line(t, "# CapabilityBoundingSet: not set: capabilities used were not measured") &&
	       lacks(t, "DevicePolicy=closed"),
	       "mainline, systemd: what was measured, comments for the rest");
	t = render(&m, HW_JSON, 25);
	tap_ok(strstr(t, "\"nofile\": {\"peak\": null, \"soft\": 1024, \"hard\": 4096}") &&
	       strstr(t, "\"used\": null") && strstr(t, "\"devices\": null"),
	       "mainline, json: null for what was not measured");
}

static void json_roundtrip(const struct hw_marks *m)
{
	struct hw_marks back;
	char err[200];
	char *t = render(m, HW_JSON, 25);
	int ok;

	ok = hw_json_read(t, &back, err, sizeof(err)) == 0;
	if (!ok)
		tap_diag("%s", err);
	for (int i = 0; ok && i < HW_NLIMITS; i++) {
		ok = back.lim[i].have_peak == m->lim[i].have_peak &&
		     back.lim[i].peak == m->lim[i].peak &&
		     back.lim[i].soft == m->lim[i].soft;
		if (!ok)
			tap_diag("%s differs", hw_limits[i].key);
	}
	ok = ok && back.cap_used == m->cap_used && back.pids_peak == m->pids_peak &&
	     back.memory_peak == m->memory_peak && back.memory_file == m->memory_file &&
	     back.ndevices == m->ndevices && back.devices[2].minor == HW_ANY &&
	     back.exit_status == 0 && !strcmp(back.command, "demo");
	tap_ok(ok, "json: everything read back as written");
	/* render() reuses its buffer: keep the first text apart */
	t = strdup(t);
	if (strcmp(render(&back, HW_JSON, 25), t))
		tap_diag("written first:\n%s\nwritten again:\n%s", t, render(&back, HW_JSON, 25));
	tap_ok(t && !strcmp(render(&back, HW_JSON, 25), t),
	       "json: read back and written again, byte for byte");
	free(t);
}

static void merge(const struct hw_marks *m)
{
	struct hw_marks a, b;
	struct hw_device tty = { 'c', 5, 0, HW_ACC_READ, "/dev/tty" };
	char err[200];

	a = *m;
	b = *m;
	b.lim[hw_limit_index("nofile")].peak = 500;
	b.lim[hw_limit_index("memlock")].peak = 4096;
	b.cap_used = 1ULL << 21;
	b.pids_peak = 3;
	b.memory_peak = 50000000;
	hw_add_device(&b, &tty);
	b.devices[0].access |= HW_ACC_MKNOD;
	hw_merge_marks(&a, &b);
	tap_ok(a.lim[hw_limit_index("nofile")].peak == 500 &&
	       a.lim[hw_limit_index("memlock")].peak == 65536 &&
	       a.pids_peak == 9 && a.memory_peak == 50000000,
	       "merge: the maximum of each peak");
	tap_ok(a.cap_used == (1ULL << 10 | 1ULL << 23 | 1ULL << 21) &&
	       a.ndevices == 4 && a.devices[0].access == (HW_ACC_READ | HW_ACC_WRITE | HW_ACC_MKNOD),
	       "merge: the union of capabilities and devices");
	tap_ok(hw_json_read("{\"schema\": \"highwater/2\"}", &b, err, sizeof(err)) == -1 &&
	       strstr(err, "highwater/2"), "json: another schema is refused, by name");
	tap_ok(hw_json_read("{\"rlimits\": {}}", &b, err, sizeof(err)) == -1 &&
	       hw_json_read("{\"schema\": \"highwater/1\", \"rlimits\": {\"nofile\": {\"peak\": -3}}}",
			    &b, err, sizeof(err)) == -1 &&
	       hw_json_read("not json", &b, err, sizeof(err)) == -1 &&
	       hw_json_read("{\"schema\": \"highwater/1\"", &b, err, sizeof(err)) == -1,
	       "json: no schema, a negative peak, not JSON, truncated: refused");
	/* Found by tests/fuzz: the hand-written reader read past the end here. */
	tap_ok(hw_json_read("{\n \"\\ud_", &b, err, sizeof(err)) == -1 &&
	       hw_json_read("{\"schema\": \"highwater/1\", \"tasks\": {\"peak\": 18446744073709551616}}",
			    &b, err, sizeof(err)) == -1 && strstr(err, "out of range") &&
	       hw_json_read("{\"schema\": \"highwater/1\", \"tasks\": {\"peak\": 1.5}}",
			    &b, err, sizeof(err)) == -1,
	       "json: a cut escape, a number past 2^64-1, a fraction for a count: refused (%s)", err);
	tap_ok(hw_json_read("{\"schema\": \"highwater/1\", \"future\": [1, {\"x\": null}]}",
			    &b, err, sizeof(err)) == 0,
	       "json: unknown members are skipped");
}

/*
 * Device names are those of the host measured, carried in the report: one
 * read elsewhere names a device only where that host did ("c 1:5" is
 * /dev/zero here, but the report did not name it), and keeps major:minor.
 */
static void device_names_from_report(void)
{
	static const char report[] =
		"{\"schema\": \"highwater/1\", \"devices\": [\"c 1:3 rw\", \"c 1:5 r\", \"c 136:* rw\"],\n"
		" \"device_names\": {\"c 1:3\": \"/dev/null\", \"c 136:*\": \"char-pts\"}}";
	struct hw_marks m;
	char err[200], *t = NULL;

	if (hw_json_read(report, &m, err, sizeof(err)))
		tap_diag("%s", err);
	else
		t = render(&m, HW_SYSTEMD, 25);
	tap_ok(t && has_line(t, "DeviceAllow=/dev/null rw") && has_line(t, "DeviceAllow=char-pts rw") &&
	       lacks(t, "/dev/zero") && strstr(t, "# c 1:5 r: the host measured had no node"),
	       "a report's devices: named as the host measured named them, never after this host's /dev");
	tap_ok(t && strstr(render(&m, HW_JSON, 25),
			   "\"device_names\": {\"c 1:3\": \"/dev/null\", \"c 136:*\": \"char-pts\"}"),
	       "json: device names written back as read");
	tap_ok(hw_json_read("{\"schema\": \"highwater/1\", \"devices\": [\"c 1:3 rw\"], "
			    "\"device_names\": {\"c 1:9\": \"/dev/x\"}}", &m, err, sizeof(err)) == -1 &&
	       strstr(err, "c 1:9"),
	       "json: a name for a device the report does not list is refused (%s)", err);
}

/*
 * A run that ran into its cgroup's limits (a fork bomb under pids.max, an
 * OOM kill under memory.max): the peaks are the limits, not the needs, so
 * no format may turn them into a setting, and JSON and merge keep why.
 */
static void limits_run_into(const struct hw_marks *demo)
{
	struct hw_marks m = *demo, back, merged;
	char err[200], *t;

	m.pids_peak = m.pids_max = 50;
	m.pids_refused = 1234;
	m.memory_peak = m.memory_max = 64 << 20;
	m.memory_oom_kills = 2;
	t = render(&m, HW_SYSTEMD, 25);
	tap_ok(has_line(t, "# TasksMax=63  (not set: forks were refused at the task limit, the need is higher (see the notes))") &&
	       has_line(t, "# MemoryMax=80M  (not set: the OOM killer killed processes at the memory limit, the need is higher (see the notes))") &&
	       lacks(t, "\nTasksMax=") && lacks(t, "\nMemoryMax=") && lacks(t, "\nMemoryHigh="),
	       "limits run into: systemd sets neither TasksMax= nor MemoryMax=");
	t = render(&m, HW_DOCKER, 25);
	tap_ok(lacks(t, "--pids-limit=") && lacks(t, "--memory=") &&
	       has_line(t, "# --pids-limit: not set: forks were refused at the task limit, the need is higher (see the notes)"),
	       "limits run into: docker sets neither --pids-limit nor --memory");
	t = render(&m, HW_TEXT, 25);
	tap_ok(strstr(t, "HIT the limit") != NULL, "limits run into: the text says HIT the limit");
	m.memory_oom_kills = 0;
	m.memory_max_events = 7;
	t = render(&m, HW_SYSTEMD, 25);
	tap_ok(has_line(t, "# MemoryMax=80M  (not set: the memory limit was reached and forced reclaim, the need may be higher (see the notes))"),
	       "limits run into: reclaim at memory.max alone is enough to set no MemoryMax=");
	m.memory_oom_kills = 2;
	t = render(&m, HW_JSON, 25);
	tap_ok(hw_json_read(t, &back, err, sizeof(err)) == 0 && back.pids_refused == 1234 &&
	       back.memory_oom_kills == 2 && back.memory_max_events == 7,
	       "limits run into: JSON keeps the counts (%s)", err);
	hw_marks_init(&merged);
	hw_merge_marks(&merged, demo);
	hw_merge_marks(&merged, &back);
	t = render(&merged, HW_SYSTEMD, 25);
	tap_ok(merged.pids_refused == 1234 && lacks(t, "\nTasksMax=") && lacks(t, "\nMemoryMax="),
	       "limits run into: a merge with a clean run sets no limit either");
}

/*
 * export: the Prometheus text of two cgroups, exact where it matters: base
 * units, +Inf for no limit, label values escaped, each family once.
 */
static void prometheus_export(const struct hw_marks *demo)
{
	struct hw_marks two[2];
	char *buf = NULL, *p;
	size_t size;
	FILE *out = open_memstream(&buf, &size);
	int helps = 0, types = 0;

	two[0] = *demo;
	strcpy(two[0].cgroup, "/system.slice/demo.service");
	set_limit(&two[0], "rttime", 1234567, HW_UNLIMITED);
	hw_marks_init(&two[1]);
	strcpy(two[1].cgroup, "/machine.slice/odd\"name\\.scope");
	two[1].have_pids_peak = true;
	two[1].pids_peak = 3;
	two[1].pids_max = 50;
	two[1].pids_refused = 7;
	two[0].have_cap_bnd = true;
	two[0].cap_bnd = 1ULL << 10 | 1ULL << 21;	/* NET_BIND_SERVICE, SYS_ADMIN */
	hw_export_write(out, two, 2, 0.25, 25);
	fclose(out);
	for (p = buf; (p = strstr(p, "# HELP ")); p++)
		helps++;
	for (p = buf; (p = strstr(p, "# TYPE ")); p++)
		types++;
	tap_ok(has_line(buf, "highwater_rlimit_peak{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",limit=\"nofile\"} 203") &&
	       has_line(buf, "highwater_rlimit_peak{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",limit=\"rttime\"} 1.234567") &&
	       has_line(buf, "highwater_rlimit_soft{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",limit=\"nofile\"} 1024") &&
	       has_line(buf, "highwater_rlimit_soft{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",limit=\"as\"} +Inf"),
	       "export: rlimit peaks and soft limits in base units, +Inf for none");
	tap_ok(has_line(buf, "highwater_tasks_peak{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\"} 9") &&
	       has_line(buf, "highwater_tasks_max{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\"} +Inf") &&
	       has_line(buf, "highwater_memory_peak_bytes{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\"} 34000000") &&
	       has_line(buf, "highwater_tasks_refused_total{cgroup=\"/machine.slice/odd\\\"name\\\\.scope\",unit=\"odd\\\"name\\\\.scope\"} 7") &&
	       lacks(buf, "highwater_memory_peak_bytes{cgroup=\"/machine.slice"),
	       "export: tasks and memory, a label value escaped, nothing for what was not measured");
	tap_ok(has_line(buf, "highwater_capability_used{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",capability=\"CAP_NET_BIND_SERVICE\"} 1") &&
	       has_line(buf, "highwater_device_accessed{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",device=\"c 1:3\",access=\"rw\",name=\"/dev/null\"} 1") &&
	       has_line(buf, "highwater_device_accessed{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",device=\"c 240:*\",access=\"m\",name=\"\"} 1"),
	       "export: capabilities and devices, one sample each");
	/* 203 descriptors: 254 with the margin, 260 rounded, raised to 1024 */
	tap_ok(has_line(buf, "highwater_rlimit_recommended{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",limit=\"nofile\"} 1024") &&
	       lacks(buf, "highwater_rlimit_recommended{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",limit=\"cpu\"}") &&
	       has_line(buf, "highwater_tasks_recommended{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\"} 12") &&
	       lacks(buf, "highwater_tasks_recommended{cgroup=\"/machine.slice") &&
	       has_line(buf, "highwater_memory_max_recommended_bytes{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\"} 42991616"),
	       "export: the settings highwater would write (nofile's floor, TasksMax= 12, MemoryMax= 41M), none where it would not (CPU; forks refused)");
	tap_ok(has_line(buf, "highwater_capability_bounding{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",capability=\"CAP_NET_BIND_SERVICE\"} 1") &&
	       has_line(buf, "highwater_capability_bounding{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",capability=\"CAP_CHOWN\"} 0") &&
	       has_line(buf, "highwater_capability_bounding{cgroup=\"/system.slice/demo.service\",unit=\"demo.service\",capability=\"CAP_CHECKPOINT_RESTORE\"} 0") &&
	       lacks(buf, "highwater_capability_bounding{cgroup=\"/machine.slice"),
	       "export: the bounding set, every capability 1 or 0, only where a process was read");
	tap_ok(helps == 18 && types == 18 && has_line(buf, "highwater_export_cgroups 2"),
	       "export: each of the 18 families has one HELP and one TYPE (%d, %d)", helps, types);
	free(buf);
}

/*
 * A cgroup whose processes left it while running its program (ssh.service:
 * logind moves each login's sshd to a session scope): they took its rlimits
 * and bounding set along, so no format writes either; the cgroup's own
 * limits (tasks, memory, devices) stay.  JSON, merge and export keep it.
 */
static void moved_out(const struct hw_marks *demo)
{
	struct hw_marks m = *demo, back, merged;
	char err[200], *t, *buf = NULL;
	size_t size;
	FILE *out;

	m.have_cgroup_marks = m.have_moved_out = true;
	m.moved_out = 3;
	strcpy(m.cgroup, "/system.slice/ssh.service");
	t = render(&m, HW_SYSTEMD, 25);
	tap_ok(lacks(t, "\nLimitNOFILE=") && lacks(t, "\nCapabilityBoundingSet=") &&
	       has_line(t, "# LimitNOFILE=260  (not set: processes that ran here moved to other cgroups (login sessions, scopes) and took it along; their needs there are not in these marks)") &&
	       has_line(t, "# CapabilityBoundingSet: not set: processes that ran here moved to other cgroups (login sessions, scopes) and took it along; their needs there are not in these marks") &&
	       has_line(t, "TasksMax=12") && has_line(t, "DevicePolicy=closed"),
	       "moved out: systemd sets no Limit*= and no CapabilityBoundingSet=, but TasksMax= and devices");
	t = render(&m, HW_DOCKER, 25);
	tap_ok(lacks(t, "--cap-drop=ALL") && lacks(t, "--ulimit=") && strstr(t, "--pids-limit=12"),
	       "moved out: docker drops no capability and sets no --ulimit");
	t = render(&m, HW_KUBERNETES, 25);
	tap_ok(lacks(t, "securityContext:"), "moved out: kubernetes writes no securityContext");
	t = render(&m, HW_JSON, 25);
	tap_ok(hw_json_read(t, &back, err, sizeof(err)) == 0 && back.moved_out == 3,
	       "moved out: JSON keeps the count (%s)", err);
	hw_marks_init(&merged);
	hw_merge_marks(&merged, demo);
	hw_merge_marks(&merged, &back);
	t = render(&merged, HW_SYSTEMD, 25);
	tap_ok(merged.moved_out == 3 && lacks(t, "\nCapabilityBoundingSet="),
	       "moved out: a merge with a run whose processes stayed sets no bounding set either");
	out = open_memstream(&buf, &size);
	hw_export_write(out, &m, 1, 0.25, 25);
	fclose(out);
	tap_ok(has_line(buf, "highwater_processes_moved_out_total{cgroup=\"/system.slice/ssh.service\",unit=\"ssh.service\"} 3") &&
	       lacks(buf, "highwater_rlimit_recommended{") &&
	       strstr(buf, "highwater_tasks_recommended{cgroup=\"/system.slice/ssh.service\""),
	       "moved out: export gives the count, no recommended rlimit, the task limit");
	free(buf);
}

/*
 * Shared memory more than a quarter of memory.peak (PostgreSQL's shared
 * buffers): no memory limit in any format, and why; JSON keeps the figure.
 */
static void shared_memory(const struct hw_marks *demo)
{
	struct hw_marks m = *demo, back;
	char err[200], *t;

	m.memory_shmem = m.memory_peak / 2;
	t = render(&m, HW_SYSTEMD, 25);
	tap_ok(lacks(t, "\nMemoryMax=") && lacks(t, "\nMemoryHigh=") &&
	       strstr(t, "# MemoryMax=41M  (not set: more than a quarter of it is shared memory"),
	       "shared memory: systemd sets no MemoryMax= and says why");
	t = render(&m, HW_DOCKER, 25);
	tap_ok(lacks(t, "--memory=") && strstr(t, "not set: more than a quarter of it is shared memory"),
	       "shared memory: docker sets no --memory");
	t = render(&m, HW_TEXT, 25);
	tap_ok(strstr(t, "shared memory") && !strstr(t, "HIT the limit"),
	       "shared memory: the text report says so, not that a limit was hit");
	t = render(&m, HW_JSON, 25);
	tap_ok(hw_json_read(t, &back, err, sizeof(err)) == 0 && back.memory_shmem == m.memory_shmem,
	       "shared memory: JSON keeps it (%s)", err);
	m.memory_shmem = m.memory_peak / 8;
	t = render(&m, HW_SYSTEMD, 25);
	tap_ok(has_line(t, "MemoryMax=41M"), "shared memory an eighth of the peak: MemoryMax= is set");
}

int main(void)
{
	struct hw_marks m;

	tap_plan(65);
	demo_marks(&m);
	text_format(&m);
	docker_format(&m);
	docker_many_devices(&m);
	compose_format(&m);
	docker_small_memory(&m);
	oci_format(&m);
	kubernetes_format(&m);
	json_roundtrip(&m);
	merge(&m);
	systemd_format(&m);
	mainline();
	device_names_from_report();
	limits_run_into(&m);
	prometheus_export(&m);
	moved_out(&m);
	shared_memory(&m);
	return tap_exit();
}
