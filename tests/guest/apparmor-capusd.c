// SPDX-License-Identifier: GPL-2.0
/*
 * CapUsd under AppArmor, the LSM Debian's kernel enables.  security_capable()
 * asks every LSM after the capability module: a capability the process holds
 * but its profile denies is refused there, and is no use; one the profile
 * allows is.  A CapabilityBoundingSet= written from CapUsd under a profile
 * must hold what the profile let through, and nothing it refused.
 *
 * The same program, as root, chowns a file (CAP_CHOWN) and binds a port
 * below 1024 (CAP_NET_BIND_SERVICE): unconfined both succeed and both are in
 * its CapUsd; under a profile allowing only chown, the bind fails with
 * EACCES and CapUsd holds CAP_CHOWN alone.
 *
 * Skips where AppArmor is not enabled (the allnoconfig guest kernel has no
 * LSM); tests/debian boots Debian's configuration, and requires it to run.
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tap.h"
#include "spawn.h"

#define PROFILE "hw-capusd-test"
#define PRIV_PORT 1023

static char out[1 << 14], err[1 << 14];

#define sh(...) spawn_sh(out, sizeof(out), err, sizeof(err), __VA_ARGS__)

/* The child: try both operations, print what happened and its CapUsd. */
static int child(const char *file)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PRIV_PORT) };
	char line[256], label[256] = "?";
	int s, chown_errno = 0, bind_errno = 0;
	FILE *f;

	if (chown(file, 1, 1))
		chown_errno = errno;
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)))
		bind_errno = errno;
	f = fopen("/proc/self/attr/current", "r");
	if (f && fgets(label, sizeof(label), f))
		label[strcspn(label, "\n")] = '\0';
	if (f)
		fclose(f);
	/* One line, each key after a space, as key_value() finds them. */
	printf("label=%s chown_errno=%d bind_errno=%d", label, chown_errno, bind_errno);
	f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapUsd:", 7))
			printf(" capusd=0x%llx", strtoull(line + 7, NULL, 16));
	printf("\n");
	if (f)
		fclose(f);
	return 0;
}

/* The child's CapUsd, from its report; -1 without one. */
static long long capusd_of(const char *report)
{
	const char *p = strstr(report, " capusd=0x");

	return p ? (long long)strtoull(p + 10, NULL, 16) : -1;
}

/* Run the child, under PROFILE when confined; its report in out. */
static int run_child(const char *self, const char *file, int confined)
{
	int fd;

	/* A root-owned file each time: chowning it to uid 1 needs CAP_CHOWN. */
	unlink(file);
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	/* sh's builtin printf writes the attribute for sh, whose exec changes profile. */
	return sh("%s exec %s child %s",
		  confined ? "printf 'exec " PROFILE "' >/proc/self/attr/apparmor/exec &&" : "",
		  self, file);
}

int main(int argc, char **argv)
{
	const unsigned long long chown_bit = 1ULL << 0, bind_bit = 1ULL << 10;
	const char *dir = "/tmp/hw-apparmor", *file = "/tmp/hw-apparmor/owned";
	char self[PATH_MAX], enabled[8] = "", profile[PATH_MAX + 32];
	long long chown_errno, bind_errno, capusd;
	ssize_t n;
	FILE *f;

	if (argc == 3 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	printf("TAP version 13\n");
	f = fopen("/sys/module/apparmor/parameters/enabled", "r");
	if (!f || !fgets(enabled, sizeof(enabled), f) || enabled[0] != 'Y') {
		printf("1..1\nok 1 # SKIP AppArmor is not enabled in this kernel\n");
		return 0;
	}
	fclose(f);
	if (access("/sys/kernel/security/apparmor", F_OK) &&
	    mount("securityfs", "/sys/kernel/security", "securityfs", 0, NULL)) {
		printf("1..1\nnot ok 1 mount securityfs: %s\n", strerror(errno));
		return 1;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	mkdir(dir, 0755);

	tap_ok(!run_child(self, file, 0), "unconfined child runs (%.200s)", err);
	chown_errno = key_value(out, "chown_errno");
	bind_errno = key_value(out, "bind_errno");
	capusd = capusd_of(out);
	tap_ok(chown_errno == 0 && bind_errno == 0 && capusd == (long long)(chown_bit | bind_bit),
	       "unconfined: chown and bind succeed, CapUsd 0x%llx is CAP_CHOWN and CAP_NET_BIND_SERVICE (%.200s)",
	       capusd, out);

	snprintf(profile, sizeof(profile), "%s/profile", dir);
	/* Everything but capabilities allowed; of those, chown only. */
	f = fopen(profile, "w");
	if (f) {
		fputs("profile " PROFILE " {\n  file,\n  network,\n  capability chown,\n}\n", f);
		fclose(f);
	}
	tap_ok(!sh("apparmor_parser --replace --skip-cache %s", profile),
	       "apparmor_parser loads the profile (%.200s)", err);
	tap_ok(!run_child(self, file, 1), "confined child runs (%.200s)", err);
	chown_errno = key_value(out, "chown_errno");
	bind_errno = key_value(out, "bind_errno");
	capusd = capusd_of(out);
	tap_ok(strstr(out, "label=" PROFILE " (enforce)") != NULL,
	       "the child ran under the profile (%.100s)", out);
	tap_ok(chown_errno == 0 && bind_errno == EACCES,
	       "under the profile chown succeeds and bind fails with EACCES (%.200s)", out);
	tap_ok(capusd == (long long)chown_bit,
	       "CapUsd 0x%llx is CAP_CHOWN alone: the capability AppArmor refused is no use", capusd);
	tap_ok(!sh("apparmor_parser --remove %s", profile), "the profile is removed (%.200s)", err);
	unlink(file);
	unlink(profile);
	rmdir(dir);
	printf("1..%d\n", tap_n);
	return tap_exit();
}
