// SPDX-License-Identifier: GPL-2.0
/*
 * highwater: run a workload, read the high-water marks the kernel kept for
 * it, print the limits it needs.  See highwater.1.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hw.h"

#define DEFAULT_MARGIN 25
#ifndef HW_VERSION	/* the Makefile gives git describe's */
#define HW_VERSION "unknown"
#endif

static const char usage[] =
"usage: highwater run [OPTIONS] [--] CMD [ARGS...]   profile CMD until it and its descendants end\n"
"       highwater show [OPTIONS] PID                 the marks of a running process\n"
"       highwater cgroup [OPTIONS] PATH              the marks of a cgroup and its processes\n"
"       highwater unit [OPTIONS] NAME                the same for a systemd unit's cgroup\n"
"       highwater container [OPTIONS] NAME|ID        the same for a running container's\n"
"                                                    (podman, docker)\n"
"       highwater merge [OPTIONS] FILE.json...       the maximum of several JSON reports\n"
"       highwater export [OPTIONS] [CGROUP...]       every cgroup's marks for Prometheus\n"
"\n"
"options:\n"
"  -f, --format FORMAT     text (default), json, systemd, docker (or podman),\n"
"                          compose, oci (config.json), kubernetes\n"
"  -m, --margin PERCENT    safety margin added to peaks (default 25)\n"
"  -o, --output FILE       write the report to FILE instead of standard output\n"
"  -t, --timeout SECONDS   run: stop the workload (cgroup.kill) after SECONDS (s, m, h suffixes)\n"
"  -p, --cgroup-parent DIR run: create the workload's cgroup under DIR\n"
"                          (default: highwater's own cgroup)\n"
"  -k, --kill-after SECONDS run: SIGKILL the workload SECONDS after passing it\n"
"                          SIGTERM, SIGINT or SIGHUP (default 10)\n"
"      --pids-max N        run: the workload's task limit (pids.max)\n"
"      --memory-max SIZE   run: its memory limit (memory.max; K, M, G suffixes)\n"
"      --textfile-dir DIR  export: write DIR/highwater.prom, atomically (node_exporter)\n"
"      --interval SECONDS  export: again every SECONDS (s, m, h suffixes), with each\n"
"                          cgroup's memory and tasks peaks of the interval\n"
"                          (memory.peak and pids.peak restarted)\n"
"  -V, --version           highwater's version\n"
"  -h, --help              this help\n"
"\n"
"exit status: run exits with CMD's status (128+N if killed by signal N, 124 on\n"
"--timeout, 126/127 if CMD cannot be run or found); otherwise 0, or\n"
"64 usage, 65 bad JSON, 66 no such process/cgroup/file, 69 no cgroup2,\n"
"70 system error, 74 I/O error, 77 permission denied.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "highwater: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see highwater --help)\n");
	return HW_EX_USAGE;
}

static int errno_exit(int err)
{
	switch (err) {
	case ENOENT:
	case ESRCH:
	case ENOTDIR:
		return HW_EX_NOINPUT;
	case EACCES:
	case EPERM:
		return HW_EX_NOPERM;
	default:
		return HW_EX_IOERR;
	}
}

static int parse_timeout(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v <= 0)
		return -1;
	if (!strcmp(end, "m"))
		v *= 60;
	else if (!strcmp(end, "h"))
		v *= 3600;
	else if (*end && strcmp(end, "s"))
		return -1;
	*out = v;
	return 0;
}

/* The long name of option @c. */
static const char *option_name(const struct option *opts, int c)
{
	for (; opts->name; opts++)
		if (opts->val == c)
			return opts->name;
	return "?";
}

/* A count, or bytes with a K, M, G or T suffix (powers of 1024); 0 refused. */
static int parse_size(const char *s, bool suffixes, uint64_t *out)
{
	static const char units[] = "KMGT";
	unsigned long long v;
	const char *u;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || !isdigit((unsigned char)*s) || !v)
		return -1;
	if (*end && suffixes && (u = strchr(units, *end)) && !end[1]) {
		for (int i = 0; i <= u - units; i++)
			if (__builtin_mul_overflow(v, 1024ULL, &v))
				return -1;
	} else if (*end) {
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * Tasks, memory and devices are marks of a cgroup, shared by every process in
 * it: show does not report them as the process's own, but says where they are.
 */
static void note_cgroup_of(long pid, struct hw_marks *m)
{
	char cgroup[4096];

	if (!hw_cgroup_of(pid, cgroup, sizeof(cgroup)))
		hw_note(m, "task peak, memory peak, devices accessed: marks of its cgroup, shared by the processes there: highwater cgroup %s",
			cgroup);
}

/* highwater show PID */
static int cmd_show(const char *arg, struct hw_marks *m)
{
	char *end;
	long pid = strtol(arg, &end, 10);
	int r;

	if (*end || pid <= 0 || end == arg)
		return usage_error("'%s' is not a process ID", arg);
	snprintf(m->command, sizeof(m->command), "process %ld", pid);
	{
		char path[64], comm[256];

		snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
		r = hw_read_file(path, comm, sizeof(comm));
		if (r > 0 || r == -EFBIG) {
			int len = r > 0 ? r - 1 : (int)sizeof(comm) - 1;

			/* NULs between the arguments; a long one is cut, and shown so. */
			for (int i = 0; i < len; i++)
				if (!comm[i])
					comm[i] = ' ';
			snprintf(m->command, sizeof(m->command), "process %ld: %.*s%s",
				 pid, len, comm, r == -EFBIG ? "..." : "");
		}
	}
	r = hw_collect_process(pid, m, true);
	if (r) {
		hw_warn("cannot read the marks of process %ld: %s%s", pid,
			strerror(-r),
			r == -ENOENT ? " (no such process)" :
			r == -EACCES || r == -EPERM ? " (run as its user or as root)" : "");
		return errno_exit(-r);
	}
	note_cgroup_of(pid, m);
	return 0;
}

/* The cgroup2 mount point into @mount, or a message and an exit code. */
static int cgroup2_mount(char *mount, size_t size)
{
	if (hw_cgroup2_mount(mount, size)) {
		hw_warn("no cgroup2 file system is mounted (mount -t cgroup2 none /sys/fs/cgroup)");
		return HW_EX_UNAVAILABLE;
	}
	return 0;
}

/* highwater cgroup PATH: a path, or one relative to the cgroup2 mount */
static int cmd_cgroup(const char *arg, struct hw_marks *m)
{
	char mount[256], dir[1024];
	struct stat st;
	int r;

	r = cgroup2_mount(mount, sizeof(mount));
	if (r)
		return r;
	if (!strncmp(arg, mount, strlen(mount)))
		snprintf(dir, sizeof(dir), "%s", arg);
	else
		snprintf(dir, sizeof(dir), "%s/%s", mount, arg[0] == '/' ? arg + 1 : arg);
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		hw_warn("%s is not a cgroup (give a path under %s, or one relative to it, such as system.slice/cron.service)",
			dir, mount);
		return HW_EX_NOINPUT;
	}
	snprintf(m->command, sizeof(m->command), "cgroup %s", dir + strlen(mount));
	r = hw_collect_cgroup_all(mount, dir, m);
	if (r) {
		hw_warn("cannot read the cgroup %s: %s", dir, strerror(-r));
		return errno_exit(-r);
	}
	return 0;
}

/*
 * Run @argv, its standard output into @out (up to the first newline), its
 * standard error discarded (the caller says why it failed).  The exit
 * status; 127 when the program is not installed, -1 when it cannot run.
 */
static int capture(char *const argv[], char *out, size_t size)
{
	int p[2], status;
	ssize_t n = 0, r;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (!pid) {
		int null = open("/dev/null", O_WRONLY);

		dup2(p[1], STDOUT_FILENO);
		if (null >= 0)
			dup2(null, STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while (n < (ssize_t)size - 1 &&
	       (r = read(p[0], out + n, size - 1 - n)) > 0)
		n += r;
	close(p[0]);
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/*
 * The control group of systemd unit @unit, as systemctl shows it, into @path
 * (relative to the cgroup2 mount).  0; 1 when systemctl cannot tell (not
 * installed, or systemd is not running); -1 when it says the unit has none.
 */
static int systemctl_control_group(const char *unit, char *path, size_t size)
{
	char *argv[] = { "systemctl", "show", "--property=ControlGroup", "--value",
			 "--", (char *)unit, NULL };

	if (capture(argv, path, size))
		return 1;
	return path[0] ? 0 : -1;
}

/* Without systemctl: the first directory named @unit under @dir. */
static bool find_cgroup(const char *dir, const char *unit, char *out,
			size_t size, int depth)
{
	struct dirent *de;
	char path[1024];
	bool found = false;
	DIR *d;

	if (depth > 16 || !(d = opendir(dir)))
		return false;
	while (!found && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!strcmp(de->d_name, unit)) {
			snprintf(out, size, "%s", path);
			found = true;
		} else {
			found = find_cgroup(path, unit, out, size, depth + 1);
		}
	}
	closedir(d);
	return found;
}

/* highwater unit NAME: a systemd unit's cgroup, as highwater cgroup reads it */
static int cmd_unit(const char *arg, struct hw_marks *m)
{
	char mount[256], unit[256], path[1024], dir[1300];
	int r;

	if (!arg[0] || strchr(arg, '/'))
		return usage_error("'%s' is not a unit name (such as nginx.service)", arg);
	/* systemctl's default suffix, for the search of the tree too */
	snprintf(unit, sizeof(unit), "%s%s", arg, strchr(arg, '.') ? "" : ".service");
	r = cgroup2_mount(mount, sizeof(mount));
	if (r)
		return r;
	r = systemctl_control_group(unit, path, sizeof(path));
	if (r < 0) {
		hw_warn("%s has no control group: it is not running, or not loaded (systemctl status %s)",
			unit, unit);
		return HW_EX_NOINPUT;
	}
	if (r > 0) {
		/* No systemctl, or no systemd (a container, a chroot): search. */
		if (!find_cgroup(mount, unit, dir, sizeof(dir), 0)) {
			hw_warn("no cgroup named %s under %s, and systemctl could not tell (is systemd running?)",
				unit, mount);
			return HW_EX_NOINPUT;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s%s", mount, path);
	}
	r = cmd_cgroup(dir, m);
	if (!r)
		snprintf(m->command, sizeof(m->command), "unit %s", unit);
	return r;
}

/*
 * The container engines asked for a container, in this order: podman's
 * inspect and docker's both print the container's init PID (0 when the
 * container is not running) and its full ID with this template.
 */
static const char *const engines[] = { "podman", "docker" };

/* highwater container NAME|ID: a running container's cgroup, as cgroup reads it */
static int cmd_container(const char *arg, struct hw_marks *m)
{
	char out[256], cgroup[1024], id[129] = "", *end;
	const char *engine = NULL, *broken = NULL;
	int installed = 0, r;
	long pid = -1;

	if (!arg[0] || arg[0] == '-' || strchr(arg, '/'))
		return usage_error("'%s' is not a container name or ID", arg);
	for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]) && !engine; i++) {
		char *argv[] = { (char *)engines[i], "inspect", "--format",
				 "{{.State.Pid}} {{.Id}}", "--", (char *)arg, NULL };

		r = capture(argv, out, sizeof(out));
		installed += r != 127;
		if (r < 0 && !broken)	/* killed, or could not be started */
			broken = engines[i];
		if (r)
			continue;
		pid = strtol(out, &end, 10);
		if (end == out || pid < 0 || sscanf(end, " %128[0-9a-f]", id) != 1 ||
		    strlen(id) < 12) {
			hw_warn("%s inspect %s printed '%s', not a process ID and a container ID",
				engines[i], arg, out);
			return HW_EX_SOFTWARE;
		}
		engine = engines[i];
	}
	if (!engine && broken) {
		hw_warn("%s inspect %s did not finish (killed by a signal, or it could not be started): run it by hand to see why",
			broken, arg);
		return HW_EX_SOFTWARE;
	}
	if (!engine) {
		if (!installed)
			hw_warn("no container engine to ask for %s: neither podman nor docker is installed",
				arg);
		else
			hw_warn("no container %s (neither podman inspect nor docker inspect knows it; rootless containers are found as the user who runs them)",
				arg);
		return HW_EX_NOINPUT;
	}
	if (!pid) {
		hw_warn("container %s (%s) is not running: its cgroup, and the marks kept there, went with it; "
			"read it while it runs, or run it with a parent cgroup of its own (--cgroup-parent=/NAME, "
			"or NAME.slice with systemd) and read that with 'highwater cgroup /NAME' (NAME.slice) after it exits",
			arg, engine);
		return HW_EX_NOINPUT;
	}
	r = hw_cgroup_of(pid, cgroup, sizeof(cgroup));
	if (r) {
		hw_warn("cannot read the cgroup of container %s's process %ld: %s", arg, pid,
			strerror(-r));
		return errno_exit(-r);
	}
	/*
	 * podman and docker name a container's own cgroup by its ID
	 * (libpod-ID, docker-ID.scope, docker/ID).  A container without one
	 * (--cgroups=disabled, rootless podman without systemd's delegation)
	 * shares its caller's: those marks are other processes' too.
	 */
	if (!strstr(cgroup, id)) {
		hw_warn("container %s (%s) has no cgroup of its own: its process %ld is in %s, "
			"with the processes that started it (--cgroups=disabled, or rootless without "
			"systemd's cgroup delegation); run it with a cgroup of its own to profile it",
			arg, engine, pid, cgroup);
		return HW_EX_UNAVAILABLE;
	}
	r = cmd_cgroup(cgroup, m);
	if (!r)	/* the report's cgroup line names the cgroup */
		snprintf(m->command, sizeof(m->command), "container %s (%s)", arg, engine);
	return r;
}

/* highwater merge FILE.json... */
static int cmd_merge(char **files, int n, struct hw_marks *m)
{
	static char text[1 << 20];
	static struct hw_marks one;
	char err[200];
	int r;

	for (int i = 0; i < n; i++) {
		r = hw_read_file(files[i], text, sizeof(text));
		if (r < 0) {
			hw_warn("cannot read %s: %s", files[i], strerror(-r));
			return errno_exit(-r);
		}
		if (hw_json_read(text, &one, err, sizeof(err))) {
			hw_warn("%s is not a %s JSON report: %s (write reports with --format json)",
				files[i], HW_SCHEMA, err);
			return HW_EX_DATAERR;
		}
		if (i == 0) {
			*m = one;
			snprintf(m->command, sizeof(m->command), "merge of %d reports", n);
			m->cgroup[0] = '\0';
		} else {
			hw_merge_marks(m, &one);
		}
	}
	if (n > 1)
		snprintf(m->command, sizeof(m->command), "merge of %d reports", n);
	return 0;
}

/* What a command gets: its arguments, run's options, the marks to fill. */
struct call {
	char **argv;
	int argc;
	const struct hw_run_opts *ro;
	struct hw_marks *m;
	FILE *out;			/* for export, which writes its own */
	const char *textfile_dir;	/* export --textfile-dir */
	int margin;			/* export's recommended values */
	double interval;		/* export --interval: seconds, 0 once */
};

static int verb_run(const struct call *c)
{
	int code = hw_run(c->argv, c->ro, c->m);

	/* A run reports whatever it read, unless nothing ran at all. */
	return code == HW_EX_SOFTWARE && c->m->exit_status < 0 ? -code : code;
}

static int verb_show(const struct call *c)
{
	return cmd_show(c->argv[0], c->m);
}

static int verb_cgroup(const struct call *c)
{
	return cmd_cgroup(c->argv[0], c->m);
}

static int verb_unit(const struct call *c)
{
	return cmd_unit(c->argv[0], c->m);
}

static int verb_container(const struct call *c)
{
	return cmd_container(c->argv[0], c->m);
}

static int verb_merge(const struct call *c)
{
	return cmd_merge(c->argv, c->argc, c->m);
}

static int verb_export(const struct call *c)
{
	return hw_export(c->argv, c->argc, c->out, c->textfile_dir, c->margin, c->interval);
}

/*
 * The commands.  fn returns 0 or an exit code; a failed command prints no
 * report, except run, which reports what it read (a negative code: nothing).
 * export writes metrics, not a report.
 */
static const struct verb {
	const char *name;
	int (*fn)(const struct call *c);
	int min_args, max_args;
	const char *needs;	/* for the usage error */
	bool runs;		/* takes run's options (--timeout ...) */
	bool metrics;		/* writes its own output: no report, no --format */
} verbs[] = {
	{ "run", verb_run, 1, INT_MAX, "a command to run", true, false },
	{ "show", verb_show, 1, 1, "one process ID", false, false },
	{ "cgroup", verb_cgroup, 1, 1, "one cgroup path", false, false },
	{ "unit", verb_unit, 1, 1, "one systemd unit name", false, false },
	{ "container", verb_container, 1, 1, "one container name or ID", false, false },
	{ "merge", verb_merge, 1, INT_MAX, "one or more JSON files", false, false },
	{ "export", verb_export, 0, INT_MAX, "cgroup paths, or none", false, true },
};

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "margin", required_argument, NULL, 'm' },
		{ "output", required_argument, NULL, 'o' },
		{ "timeout", required_argument, NULL, 't' },
		{ "cgroup-parent", required_argument, NULL, 'p' },
		{ "kill-after", required_argument, NULL, 'k' },
		{ "pids-max", required_argument, NULL, 'P' },
		{ "memory-max", required_argument, NULL, 'M' },
		{ "textfile-dir", required_argument, NULL, 'T' },
		{ "interval", required_argument, NULL, 'I' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct hw_marks marks;
	struct hw_run_opts ro = { .kill_after = HW_KILL_AFTER };
	const struct verb *verb = NULL;
	const char *sub, *output = NULL, *textfile_dir = NULL;
	bool format_given = false;
	int format = HW_TEXT, margin = DEFAULT_MARGIN, c, code;
	double interval = 0;
	FILE *out = stdout;
	char *end;

	if (argc < 2)
		return usage_error("no command given");
	sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(sub, "-V") || !strcmp(sub, "--version")) {
		printf("highwater %s\n", HW_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(sub, verbs[i].name))
			verb = &verbs[i];
	if (!verb)
		return usage_error("unknown command '%s': use run, show, cgroup, unit, container, merge or export", sub);

	argv++, argc--;
	/*
	 * run stops at CMD, whose options are its own; the others take their
	 * options anywhere (highwater unit nginx.service -f systemd).
	 */
	while ((c = getopt_long(argc, argv, verb->runs ? "+f:m:o:t:p:k:Vh" : "f:m:o:t:p:k:Vh",
				longopts, NULL)) != -1) {
		if (c && strchr("tpkPM", c) && !verb->runs)
			return usage_error("--%s is an option of run", option_name(longopts, c));
		switch (c) {
		case 'T':
			textfile_dir = optarg;
			break;
		case 'I':
			if (parse_timeout(optarg, &interval) || interval < 1 || interval > 86400)
				return usage_error("--interval takes seconds from 1 to a day (or with m or h), not '%s'", optarg);
			break;
		case 'f':
			format_given = true;
			format = hw_format_from_name(optarg);
			if (format < 0)
				return usage_error("unknown format '%s': use %s", optarg, hw_format_names());
			break;
		case 'm':
			margin = strtol(optarg, &end, 10);
			if (*end == '%')
				end++;
			if (*end || end == optarg || margin < 0 || margin > 1000)
				return usage_error("--margin takes a percentage from 0 to 1000, not '%s'", optarg);
			break;
		case 'o':
			output = optarg;
			break;
		case 't':
			if (parse_timeout(optarg, &ro.timeout))
				return usage_error("--timeout takes a positive number of seconds (or with m or h), not '%s'", optarg);
			break;
		case 'p':
			ro.cgroup_parent = optarg;
			break;
		case 'k':
			if (parse_timeout(optarg, &ro.kill_after))
				return usage_error("--kill-after takes a positive number of seconds (or with m or h), not '%s'", optarg);
			break;
		case 'P':
			if (parse_size(optarg, false, &ro.pids_max))
				return usage_error("--pids-max takes a positive number of tasks, not '%s'", optarg);
			break;
		case 'M':
			if (parse_size(optarg, true, &ro.memory_max))
				return usage_error("--memory-max takes a positive size in bytes (or with K, M, G or T), not '%s'", optarg);
			break;
		case 'V':
			printf("highwater %s\n", HW_VERSION);
			return 0;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return HW_EX_USAGE;	/* getopt said what */
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < verb->min_args || argc > verb->max_args)
		return usage_error("%s needs %s", sub, verb->needs);
	if (verb->metrics && format_given)
		return usage_error("%s writes Prometheus's text format: --format is for reports", sub);
	if (textfile_dir && !verb->metrics)
		return usage_error("--textfile-dir is an option of export");
	if (textfile_dir && output)
		return usage_error("give --textfile-dir or --output, not both");
	if (interval && !verb->metrics)
		return usage_error("--interval is an option of export");
	if (interval && !textfile_dir)
		return usage_error("export --interval writes again and again: give --textfile-dir");

	/* Open the output first: a bad path must fail before anything runs. */
	if (output) {
		out = fopen(output, "we");	/* not inherited by CMD */
		if (!out) {
			hw_warn("cannot write %s: %s", output, strerror(errno));
			return errno_exit(errno);
		}
	}

	hw_marks_init(&marks);
	code = verb->fn(&(struct call){ argv, argc, &ro, &marks, out, textfile_dir, margin, interval });
	if (code < 0 || (code && !verb->runs) || verb->metrics) {
		code = abs(code);
		goto out;
	}
	hw_report(out, &marks, format, margin);
	if (fflush(out)) {
		hw_warn("cannot write the report: %s", strerror(errno));
		code = HW_EX_IOERR;
	}
out:
	if (output) {
		fclose(out);
		if (code && !verb->runs)
			unlink(output);	/* no half report left behind */
	}
	return code;
}
