// SPDX-License-Identifier: GPL-2.0
/*
 * contrib/prometheus/highwater.rules.yml against highwater merge, where the
 * guest's fleet test (tests/guest/highwater-fleet.c) cannot go: hosts whose
 * unit's processes moved out, refused a fork at the task limit or had an
 * OOM kill, a limit at 0 on some hosts only, realtime seconds.  Three hosts'
 * marks are exported by hw_export_write() as `highwater export` writes them,
 * given to `promtool test rules` as each host's series, and every recording
 * rule's result must be what merge's reports derive from the same marks:
 * hw_merge_marks(), then the advice every format asks for.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "hw.h"

#define NHOSTS 3
#define NUNITS 3
#define MARGIN 25

static const char *const units[NUNITS] = { "a.service", "b.service", "c.service" };
static struct hw_marks marks[NHOSTS][NUNITS];

static void set_peak(struct hw_marks *m, const char *key, uint64_t peak)
{
	int i = hw_limit_index(key);

	m->lim[i].have_peak = true;
	m->lim[i].peak = peak;
	m->have_limits_peak = true;
}

/* The fleet: what differs between hosts is what the rules must get right. */
static void fleet(void)
{
	static const uint64_t nofile[NHOSTS] = { 300, 2000, 700 };

	for (int h = 0; h < NHOSTS; h++)
		for (int u = 0; u < NUNITS; u++) {
			struct hw_marks *m = &marks[h][u];

			hw_marks_init(m);
			snprintf(m->cgroup, sizeof(m->cgroup), "/system.slice/%s", units[u]);
			set_peak(m, "nofile", nofile[h] / (u + 1));
			set_peak(m, "memlock", h == 1 ? 10 : 70000);
			set_peak(m, "sigpending", h == 1 ? 5 : 0);	/* 0: none set on that host */
			set_peak(m, "cpu", 3);				/* never set: a caveat */
			set_peak(m, "nice", h + 20);			/* exactly */
			if (h == 2)
				set_peak(m, "rttime", 1500000);		/* microseconds; seconds in Prometheus */
			m->have_cap_used = true;
			m->cap_used = 1ULL << (h == 1 ? 23 : 10);	/* SYS_NICE, NET_BIND_SERVICE */
			m->have_pids_peak = true;
			m->pids_peak = 3 + 4 * h;
			m->pids_max = HW_UNLIMITED;
			m->have_memory_peak = true;
			m->memory_peak = 1000000 * (h + 1);
			m->memory_max = HW_UNLIMITED;
			m->have_moved_out = true;
		}
	marks[1][1].moved_out = 2;		/* b.service: sshd's logins on host2 */
	marks[2][2].pids_refused = 2;		/* c.service: a fork refused on host3 */
	marks[0][2].memory_oom_kills = 1;	/* and an OOM kill on host1 */
}

/*
 * Each host's export as promtool's input series: every sample with an
 * instance label, its value held for the test's ten minutes.  +Inf (no
 * limit) is left out: no recording rule reads one.
 */
static void input_series(FILE *out)
{
	for (int h = 0; h < NHOSTS; h++) {
		char *text;
		size_t size;
		FILE *f = open_memstream(&text, &size);

		hw_export_write(f, marks[h], NUNITS, 0.1, MARGIN);
		fclose(f);
		for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
			char *value = strrchr(line, ' '), *brace;

			if (line[0] == '#' || !value || !strcmp(value + 1, "+Inf"))
				continue;
			*value++ = '\0';
			brace = strchr(line, '{');
			fprintf(out, "      - series: '");
			if (brace)
				fprintf(out, "%.*s{instance=\"host%d\",%s", (int)(brace - line), line, h + 1, brace + 1);
			else
				fprintf(out, "%s{instance=\"host%d\"}", line, h + 1);
			fprintf(out, "'\n        values: '%sx10'\n", value);
		}
		free(text);
	}
}

static void expect(FILE *out, const char *rule, const char *labels, double v)
{
	fprintf(out, "          - labels: '%s{%s}'\n            value: %.17g\n", rule, labels, v);
}

/* What merge's reports of each unit set, as each rule's expected samples. */
static int expected(FILE *out)
{
	static const char *const rules[] = {
		"unit_limit:highwater_rlimit_recommended:max", "unit:highwater_tasks_recommended:max",
		"unit:highwater_memory_max_recommended_bytes:max", "unit_capability:highwater_capability_used:max",
		"unit_limit:highwater_rlimit_peak:max",
	};
	int n = 0;

	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		fprintf(out, "      - expr: '%s'\n        eval_time: 5m\n        exp_samples:\n", rules[r]);
		for (int u = 0; u < NUNITS; u++) {
			struct hw_marks merged;
			char labels[128];

			hw_marks_init(&merged);
			for (int h = 0; h < NHOSTS; h++)
				hw_merge_marks(&merged, &marks[h][u]);
			for (int i = 0; r == 0 && i < HW_NLIMITS; i++) {
				struct hw_advice a = hw_limit_advice(&merged, i, MARGIN);

				if (!a.emit)
					continue;
				snprintf(labels, sizeof(labels), "unit=\"%s\",limit=\"%s\"", units[u], hw_limits[i].key);
				expect(out, rules[r], labels, i == RLIMIT_RTTIME ? a.value / 1e6 : (double)a.value);
				n++;
			}
			for (int i = 0; r == 4 && i < HW_NLIMITS; i++) {
				if (!merged.lim[i].have_peak)
					continue;
				snprintf(labels, sizeof(labels), "unit=\"%s\",limit=\"%s\"", units[u], hw_limits[i].key);
				expect(out, rules[r], labels,
				       i == RLIMIT_RTTIME ? merged.lim[i].peak / 1e6 : (double)merged.lim[i].peak);
				n++;
			}
			snprintf(labels, sizeof(labels), "unit=\"%s\"", units[u]);
			if (r == 1 && !hw_tasks_not_derived(&merged))
				expect(out, rules[r], labels, hw_recommend(HW_COUNT, merged.pids_peak, MARGIN)), n++;
			if (r == 2 && !hw_memory_not_derived(&merged))
				expect(out, rules[r], labels, hw_memory_advice(&merged, MARGIN).max), n++;
			for (int c = 0; r == 3 && !hw_caps_not_derived(&merged) && c <= HW_CAP_LAST; c++)
				if (merged.cap_used & 1ULL << c) {
					snprintf(labels, sizeof(labels), "unit=\"%s\",capability=\"%s\"",
						 units[u], hw_cap_name(c));
					expect(out, rules[r], labels, 1);
					n++;
				}
		}
	}
	return n;
}

int main(int argc, char **argv)
{
	char rules[4096], test[] = "/tmp/highwater-rules-XXXXXX", cmd[8300], out[8192] = "";
	int fd, status, n;
	FILE *f, *p;
	size_t len;

	tap_plan(2);
	snprintf(rules, sizeof(rules), "%s/../../contrib/prometheus/highwater.rules.yml",
		 argc > 1 ? argv[1] : "tests/fixtures");
	if (system("command -v promtool >/dev/null 2>&1")) {
		tap_ok(1, "# SKIP promtool is not installed (apt-get install prometheus; tests/run does)");
		tap_ok(1, "# SKIP promtool is not installed");
		return tap_exit();
	}
	fleet();
	fd = mkstemp(test);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		tap_ok(0, "a temporary file for promtool's test");
		return tap_exit();
	}
	fprintf(f, "rule_files:\n  - %s\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n",
		realpath(rules, NULL) ?: rules);
	input_series(f);
	fprintf(f, "    promql_expr_test:\n");
	n = expected(f);
	fclose(f);
	tap_ok(n > 20, "merge's settings for three units on three hosts: %d samples expected", n);

	snprintf(cmd, sizeof(cmd), "promtool test rules %s 2>&1", test);
	p = popen(cmd, "r");
	len = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
	out[len] = '\0';
	status = p ? pclose(p) : -1;
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "promtool test rules: the recording rules give merge's peaks, Limit*=, TasksMax=, MemoryMax= and capabilities, none where merge sets none (%s)",
	       out);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		unlink(test);
	else
		tap_diag("the test file is kept: %s", test);
	return tap_exit();
}
