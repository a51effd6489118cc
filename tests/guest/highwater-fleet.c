// SPDX-License-Identifier: GPL-2.0
/*
 * A fleet, simulated with real parts: three "hosts" (a cgroup tree each, in
 * the guest), each with a web.service (fd-spike at a different load) and a
 * demo.service (the demo workload) run for real, each exported by
 * `highwater export` into a textfile directory of its own, read by a
 * node_exporter of its own, all three scraped by one Prometheus with the
 * project's rules (contrib/prometheus/highwater.rules.yml).  Through
 * Prometheus's HTTP API:
 *
 *  - the recording rules give, per unit, the peaks of `highwater merge` over
 *    the three hosts' JSON reports, and the settings of its systemd format
 *    (every Limit*=, TasksMax=, MemoryMax=, CapabilityBoundingSet=), exactly
 *    and nothing more;
 *  - the alerts fire exactly where a host was set up to deserve one: host3's
 *    web.service at 763 of 800 descriptors, host1's demo.service at 9 of 10
 *    tasks, host2's demo.service with CAP_NET_BIND_SERVICE used but out of
 *    the bounding set of its living process, and with a nice peak of 25
 *    (demo goes to -5, as root, with CAP_SYS_NICE) over the soft
 *    RLIMIT_NICE of 0 its living process has.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <json-c/json.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "spawn.h"
#include "http.h"
#include "hw.h"

#define ROOT "/sys/fs/cgroup/hw-fleet"
#define DIR "/tmp/hw-fleet"
#define NHOSTS 3
#define PROM_PORT 9090
#define EXPORTER_PORT 9101	/* host N's is 9100 + N */

static const char *const units[] = { "web.service", "demo.service" };
static const int web_load[NHOSTS] = { 300, 1500, 700 };	/* fd-spike's descriptors */

static char out[1 << 16], err[1 << 16];
static pid_t daemons[NHOSTS + 1], holders[2];

/* Prometheus's instant query of @expr: its result array (to put), or NULL. */
static json_object *query(const char *expr)
{
	static char body[4 << 20];
	char path[4096], *p = path + sprintf(path, "/api/v1/query?query=");
	json_object *root, *data, *result;

	for (const unsigned char *s = (const unsigned char *)expr; *s && p < path + sizeof(path) - 4; s++)
		p += isalnum(*s) || strchr("-_.~", *s) ? sprintf(p, "%c", *s) : sprintf(p, "%%%02X", *s);
	if (http_get(PROM_PORT, path, body, sizeof(body)) != 200)
		return NULL;
	root = json_tokener_parse(body);
	if (!root || !json_object_object_get_ex(root, "data", &data) ||
	    !json_object_object_get_ex(data, "result", &result)) {
		json_object_put(root);
		return NULL;
	}
	json_object_get(result);
	json_object_put(root);
	return result;
}

static const char *label(json_object *sample, const char *name)
{
	json_object *metric, *v;

	if (!json_object_object_get_ex(sample, "metric", &metric) ||
	    !json_object_object_get_ex(metric, name, &v))
		return "";
	return json_object_get_string(v);
}

static double sample_value(json_object *sample)
{
	json_object *v;

	if (!json_object_object_get_ex(sample, "value", &v))
		return -1;
	return strtod(json_object_get_string(json_object_array_get_idx(v, 1)), NULL);
}

/* Wait until @expr has at least @n samples; how many it has then. */
static int wait_for(const char *expr, int n, int seconds)
{
	int have = 0;

	for (int i = 0; i < seconds * 2; i++) {
		json_object *r = query(expr);

		have = r ? (int)json_object_array_length(r) : 0;
		json_object_put(r);
		if (have >= n)
			break;
		usleep(500000);
	}
	return have;
}

/* The value of @expr's first sample, or -1. */
static double value_of(const char *expr)
{
	json_object *r = query(expr);
	double v = r && json_object_array_length(r) ? sample_value(json_object_array_get_idx(r, 0)) : -1;

	json_object_put(r);
	return v;
}

/*
 * Wait until @expr (a rule's samples) was last evaluated after @t0, when
 * every host's samples were in: the rules are evaluated every second, and
 * one evaluation before the last host's first scrape has only the others'.
 */
static bool evaluated_after(const char *expr, double t0, int seconds)
{
	char q[256];

	snprintf(q, sizeof(q), "min(timestamp(%s))", expr);
	for (int i = 0; i < seconds * 2; i++) {
		if (value_of(q) > t0)
			return true;
		usleep(500000);
	}
	tap_diag("%s: not evaluated again since every host's samples were in", expr);
	return false;
}

/*
 * Run @argv in @cgroup to its end, with a soft RLIMIT_NOFILE of @nofile
 * (0: as is).  Its wait status.
 */
static int run_in(const char *cgroup, int nofile, char *const argv[])
{
	char procs[300];
	int status;
	pid_t pid;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		if (write_file(procs, "0"))
			_exit(126);
		if (nofile && setrlimit(RLIMIT_NOFILE, &(struct rlimit){ nofile, nofile }))
			_exit(126);
		dup2(devnull, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/*
 * A process that stays in @cgroup: with a soft RLIMIT_NOFILE of @nofile and
 * @fds descriptors open, or (@drop_cap >= 0) without @drop_cap in its
 * bounding set.  Its PID once it is ready, or -1.
 */
static pid_t holder(const char *cgroup, int nofile, int fds, int drop_cap)
{
	char procs[300], ok = 0;
	int ready[2];
	pid_t pid;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		ok = !write_file(procs, "0") &&
		     !setrlimit(RLIMIT_NOFILE, &(struct rlimit){ nofile, 4096 }) &&
		     (drop_cap < 0 || !prctl(PR_CAPBSET_DROP, drop_cap, 0, 0, 0));
		for (int i = 0; ok && i < fds; i++)
			ok = open("/dev/null", O_RDONLY) >= 0;
		if (write(ready[1], &ok, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	if (pid < 0 || read(ready[0], &ok, 1) != 1 || !ok) {
		if (pid > 0)
			kill(pid, SIGKILL);
		pid = -1;
	}
	close(ready[0]);
	return pid;
}

static pid_t start_daemon(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		setsid();
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* A systemd setting as merge writes it ("81920", "80K", "41M"), in base units. */
static double setting_value(const char *s)
{
	static const char suffixes[] = "KMGT";
	char *end;
	double v = strtod(s, &end);
	const char *x = *end ? strchr(suffixes, *end) : NULL;

	for (int i = 0; x && i <= x - suffixes; i++)
		v *= 1024;
	return v;
}

/* The value of "\nKEY=" in @text (an uncommented line), or NULL. */
static const char *setting(const char *text, const char *key)
{
	static char v[512];
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s=", key);
	p = strstr(text, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	snprintf(v, sizeof(v), "%.*s", (int)strcspn(p, "\n"), p);
	return v;
}

/*
 * @rule's samples for @unit (a label @by each, "" for one per unit) against
 * @want, NULL-terminated "LABEL=VALUE" pairs of base units: the same set,
 * the same values.  Says what differs.
 */
static int same(const char *rule, const char *unit, const char *by, char **want, int nwant)
{
	char expr[256];
	json_object *r;
	int n, ok = 1;

	snprintf(expr, sizeof(expr), "%s{unit=\"%s\"}", rule, unit);
	r = query(expr);
	n = r ? (int)json_object_array_length(r) : -1;
	if (n != nwant) {
		tap_diag("%s: %d samples, merge has %d", expr, n, nwant);
		ok = 0;
	}
	for (int i = 0; i < n; i++) {
		json_object *s = json_object_array_get_idx(r, i);
		char got[300];
		int found = 0;

		snprintf(got, sizeof(got), "%s=%.17g", by[0] ? label(s, by) : "", sample_value(s));
		for (int j = 0; j < nwant; j++)
			found |= !strcmp(got, want[j]);
		if (!found) {
			tap_diag("%s: %s is not merge's", expr, got);
			ok = 0;
		}
	}
	json_object_put(r);
	return ok;
}

/* One unit: Prometheus's fleet rules against highwater merge over the hosts' reports. */
static void check_unit(const char *unit)
{
	char *argv[NHOSTS + 6] = { (char *)built("highwater"), "merge", "--format", "systemd" };
	char files[NHOSTS][300], *want[64], merged_json[1 << 16], msg[200];
	struct hw_marks m;
	const char *v;
	int n = 0, status;

	for (int h = 0; h < NHOSTS; h++) {
		snprintf(files[h], sizeof(files[h]), DIR "/host%d-%s.json", h + 1, unit);
		argv[4 + h] = files[h];
	}
	status = spawn_capture(argv, out, sizeof(out), err, sizeof(err));
	argv[3] = "json";
	spawn_capture(argv, merged_json, sizeof(merged_json), err, sizeof(err));
	hw_marks_init(&m);
	if (!WIFEXITED(status) || WEXITSTATUS(status) || hw_json_read(merged_json, &m, msg, sizeof(msg))) {
		tap_ok(0, "%s: highwater merge of the hosts' reports: %s", unit, err);
		return;
	}

	/* the peaks: every one merge has, and no other */
	for (int i = 0; i < HW_NLIMITS; i++)
		if (m.lim[i].have_peak) {
			want[n] = malloc(64);
			snprintf(want[n++], 64, "%s=%.17g", hw_limits[i].key,
				 i == RLIMIT_RTTIME ? m.lim[i].peak / 1e6 : (double)m.lim[i].peak);
		}
	tap_ok(n > 0 && same("unit_limit:highwater_rlimit_peak:max", unit, "limit", want, n),
	       "%s: the fleet's peak of each of its %d limits is merge's", unit, n);
	while (n)
		free(want[--n]);

	/* the settings: every Limit*= merge writes, and no other */
	for (int i = 0; i < HW_NLIMITS; i++)
		if ((v = setting(out, hw_limits[i].systemd))) {
			want[n] = malloc(64);
			snprintf(want[n++], 64, "%s=%.17g", hw_limits[i].key, setting_value(v));
		}
	tap_ok(n > 0 && same("unit_limit:highwater_rlimit_recommended:max", unit, "limit", want, n),
	       "%s: the fleet's setting of each limit is merge's %d Limit*= lines", unit, n);
	while (n)
		free(want[--n]);

	{
		char tasks[64] = "(none)", memory[64] = "(none)";

		want[0] = malloc(64);
		want[1] = malloc(64);
		if ((v = setting(out, "TasksMax")))
			snprintf(tasks, sizeof(tasks), "%s", v);
		if ((v = setting(out, "MemoryMax")))
			snprintf(memory, sizeof(memory), "%s", v);
		snprintf(want[0], 64, "=%.17g", setting_value(tasks));
		snprintf(want[1], 64, "=%.17g", setting_value(memory));
		tap_ok(setting(out, "TasksMax") && setting(out, "MemoryMax") &&
		       same("unit:highwater_tasks_recommended:max", unit, "", want, 1) &
		       same("unit:highwater_memory_max_recommended_bytes:max", unit, "", &want[1], 1),
		       "%s: TasksMax=%s and MemoryMax=%s, as merge writes them", unit, tasks, memory);
		free(want[0]);
		free(want[1]);
	}

	v = setting(out, "CapabilityBoundingSet");
	for (char *c = v ? strtok(strdupa(v), " ") : NULL; c; c = strtok(NULL, " ")) {
		want[n] = malloc(64);
		snprintf(want[n++], 64, "%s=1", c);
	}
	/* web.service used none: merge writes an empty set, the rule has no sample */
	tap_ok(v && same("unit_capability:highwater_capability_used:max", unit, "capability", want, n),
	       "%s: the fleet's capabilities are merge's CapabilityBoundingSet=%s", unit, v ?: "(none)");
	while (n)
		free(want[--n]);
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Firing alerts, "NAME instance unit limit-or-capability;" each, sorted. */
static void firing(char *buf, size_t size)
{
	json_object *r = query("ALERTS{alertstate=\"firing\"}");
	int n = r ? (int)json_object_array_length(r) : 0;
	char **lines = calloc(n + 1, sizeof(*lines));

	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		json_object *s = json_object_array_get_idx(r, i);

		if (asprintf(&lines[i], "%s %s %s %s%s;", label(s, "alertname"), label(s, "instance"),
			     label(s, "unit"), label(s, "limit"), label(s, "capability")) < 0)
			lines[i] = NULL;
	}
	qsort(lines, n, sizeof(*lines), by_text);
	for (int i = 0; i < n; i++) {
		if (lines[i] && strlen(buf) + strlen(lines[i]) < size)
			strcat(buf, lines[i]);
		free(lines[i]);
	}
	free(lines);
	json_object_put(r);
}

static void stop_all(void)
{
	for (int i = 0; i <= NHOSTS; i++)
		if (daemons[i] > 0) {
			kill(daemons[i], SIGTERM);
			waitpid(daemons[i], NULL, 0);
		}
	for (int i = 0; i < 2; i++)
		if (holders[i] > 0) {
			kill(holders[i], SIGKILL);
			waitpid(holders[i], NULL, 0);
		}
}

int main(void)
{
	char path[400], dir[300], rules[PATH_MAX], config[2048], alerts[4096];
	int ran = 0, runs = 0, exported = 0, status;
	bool ready;
	double t0;
	FILE *f;

	/*
	 * The rules against merge are the same on every kernel; on the
	 * checkers' kernels, the export's cgroup reads are highwater-export's.
	 */
	if (on_checker_kernel()) {
		printf("TAP version 13\n1..1\nok 1 # SKIP the fleet runs on the guest kernel (make test)\n");
		return 0;
	}
	tap_plan(13);
	if (access("/usr/bin/prometheus", X_OK) || access("/usr/bin/prometheus-node-exporter", X_OK)) {
		tap_ok(0, "prometheus and prometheus-node-exporter are installed (tests/run installs them)");
		return tap_exit();
	}
	snprintf(rules, sizeof(rules), "%s", built("highwater"));
	*strrchr(rules, '/') = '\0';
	strcat(rules, "/../contrib/prometheus/highwater.rules.yml");
	status = spawn_capture((char *[]){ "promtool", "check", "rules", rules, NULL },
			       out, sizeof(out), err, sizeof(err));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "promtool check rules contrib/prometheus/highwater.rules.yml: %.200s%s", out, err);

	/* The hosts' cgroup trees, and the runs */
	mkdir(DIR, 0755);
	write_file("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory");
	mkdir(ROOT, 0755);
	write_file(ROOT "/cgroup.subtree_control", "+pids +memory");
	for (int h = 1; h <= NHOSTS; h++) {
		snprintf(dir, sizeof(dir), ROOT "/host%d", h);
		mkdir(dir, 0755);
		snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
		write_file(path, "+pids +memory");
		snprintf(dir, sizeof(dir), ROOT "/host%d/system.slice", h);
		mkdir(dir, 0755);
		snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
		write_file(path, "+pids +memory");
		for (int u = 0; u < 2; u++) {
			snprintf(path, sizeof(path), "%s/%s", dir, units[u]);
			mkdir(path, 0755);
		}
	}
	/* host1's demo.service may have 10 tasks: demo makes 9 */
	write_file(ROOT "/host1/system.slice/demo.service/pids.max", "10");
	for (int h = 1; h <= NHOSTS; h++) {
		char count[16];

		snprintf(count, sizeof(count), "%d", web_load[h - 1]);
		snprintf(dir, sizeof(dir), ROOT "/host%d/system.slice/web.service", h);
		status = run_in(dir, web_load[h - 1] + 64,
				(char *[]){ (char *)built("workloads/fd-spike"), count, NULL });
		ran += WIFEXITED(status) && WEXITSTATUS(status) == 0, runs++;
		snprintf(dir, sizeof(dir), ROOT "/host%d/system.slice/demo.service", h);
		status = run_in(dir, 0, (char *[]){ (char *)built("workloads/demo"), "-q", NULL });
		ran += WIFEXITED(status) && WEXITSTATUS(status) == 0, runs++;
	}
	/* host3's web.service lives at 763 of 800 descriptors; host2's demo without NET_BIND_SERVICE */
	holders[0] = holder(ROOT "/host3/system.slice/web.service", 800, 758, -1);
	holders[1] = holder(ROOT "/host2/system.slice/demo.service", 1024, 0, CAP_NET_BIND_SERVICE);
	tap_ok(ran == runs && holders[0] > 0 && holders[1] > 0,
	       "the runs: fd-spike (300, 1500, 700 descriptors) and demo on each host (%d of %d passed), and the two living processes",
	       ran, runs);

	/* Each host exports its tree and writes each unit's JSON report */
	for (int h = 1; h <= NHOSTS; h++) {
		char root[64], textdir[64];

		snprintf(root, sizeof(root), "hw-fleet/host%d", h);
		snprintf(textdir, sizeof(textdir), DIR "/host%d", h);
		mkdir(textdir, 0755);
		status = spawn_capture((char *[]){ (char *)built("highwater"), "export",
						   "--textfile-dir", textdir, root, NULL },
				       out, sizeof(out), err, sizeof(err));
		exported += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		for (int u = 0; u < 2; u++) {
			char cg[128], json[128];

			snprintf(cg, sizeof(cg), "/hw-fleet/host%d/system.slice/%s", h, units[u]);
			snprintf(json, sizeof(json), DIR "/host%d-%s.json", h, units[u]);
			status = spawn_capture((char *[]){ (char *)built("highwater"), "cgroup", cg,
							   "--format", "json", "--output", json, NULL },
					       out, sizeof(out), err, sizeof(err));
			exported += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		}
	}
	tap_ok(exported == 3 * NHOSTS, "each host: highwater export to its textfile directory, and a JSON report per unit (%d of %d)",
	       exported, 3 * NHOSTS);

	/* One node_exporter per host, one Prometheus with the rules */
	for (int h = 1; h <= NHOSTS; h++) {
		char listen[64], textdir[128], log[64];

		snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", 9100 + h);
		snprintf(textdir, sizeof(textdir), "--collector.textfile.directory=" DIR "/host%d", h);
		snprintf(log, sizeof(log), DIR "/node-exporter%d.log", h);
		daemons[h] = start_daemon((char *[]){ "prometheus-node-exporter", listen,
						      "--collector.disable-defaults",
						      "--collector.textfile", textdir, NULL }, log);
	}
	snprintf(config, sizeof(config),
		 "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
		 "rule_files:\n  - %s\n"
		 "scrape_configs:\n  - job_name: node\n    static_configs:\n"
		 "      - targets: ['127.0.0.1:9101', '127.0.0.1:9102', '127.0.0.1:9103']\n", rules);
	f = fopen(DIR "/prometheus.yml", "w");
	if (f) {
		fputs(config, f);
		fclose(f);
	}
	daemons[0] = start_daemon((char *[]){ "prometheus", "--config.file=" DIR "/prometheus.yml",
					      "--storage.tsdb.path=" DIR "/data",
					      "--web.listen-address=127.0.0.1:9090", NULL },
				  DIR "/prometheus.log");
	status = wait_for("highwater_export_cgroups", NHOSTS, 240);
	/* Prometheus's clock once every host's samples are in; the rules after it */
	t0 = value_of("vector(time())");
	ready = status == NHOSTS && t0 > 0 &&
		evaluated_after("unit_limit:highwater_rlimit_peak:max", t0, 60) &&
		evaluated_after("ALERTS", t0, 60);
	tap_ok(ready, "Prometheus scrapes the three node_exporters' highwater metrics (%d), and evaluates the rules on them",
	       status);

	for (int u = 0; u < 2; u++)
		check_unit(units[u]);

	firing(alerts, sizeof(alerts));
	tap_ok(!strcmp(alerts,
		       "HighwaterCapabilityOutsideBoundingSet 127.0.0.1:9102 demo.service CAP_NET_BIND_SERVICE;"
		       "HighwaterRlimitNearLimit 127.0.0.1:9102 demo.service nice;"
		       "HighwaterRlimitNearLimit 127.0.0.1:9103 web.service nofile;"
		       "HighwaterTasksNearLimit 127.0.0.1:9101 demo.service ;"),
	       "alerts fire exactly for host3's descriptors, host1's tasks, host2's capability and nice (%s)", alerts);

	stop_all();
	for (int h = 1; h <= NHOSTS; h++)
		for (int u = 0; u < 2; u++) {
			snprintf(path, sizeof(path), ROOT "/host%d/system.slice/%s", h, units[u]);
			rmdir(path);
		}
	for (int h = 1; h <= NHOSTS; h++) {
		snprintf(path, sizeof(path), ROOT "/host%d/system.slice", h);
		rmdir(path);
		snprintf(path, sizeof(path), ROOT "/host%d", h);
		rmdir(path);
	}
	rmdir(ROOT);
	return tap_exit();
}
