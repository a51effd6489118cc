/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The services the services boot drives (services.c) and the kprobe peer
 * compares with (tests/peer/peer.c): each unit, what prepares its load, the
 * load, and the service's own logs.
 */
#ifndef HW_UNITS_H
#define HW_UNITS_H

#include <stdio.h>

struct service {
	const char *unit;
	/* The unit file, for a unit no package ships (or NULL) */
	const char *unit_file;
	/* Shell, once after the first start: what the load needs (or NULL) */
	const char *prepare;
	/* Shell: the load; exits 0 when every request or login succeeded */
	const char *load;
	/* The service's own log files, emptied before each tightening: a
	 * finding's evidence must come from that run */
	const char *logs;
};

/* ssh as root with the key the preparation made, no questions asked */
#define SSH "ssh -i /root/.ssh/hw -o BatchMode=yes -o StrictHostKeyChecking=no " \
	    "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

/*
 * No package's: a service that runs each job it is given in a bubblewrap
 * sandbox with a user namespace of its own, as build and CI services run
 * untrusted code.  In its namespace a job has every capability, whatever the
 * service's bounding set: what it uses there (a mount, a host name) is not
 * the service's, and the drop-in must hold with the bounding set the service
 * itself needs.  A job is one line written to the FIFO; its output and status
 * go to out.N and rc.N.  ("$$": systemd's escape for "$".)
 */
static const char sandbox_unit[] =
	"[Unit]\n"
	"Description=highwater test: jobs in a bubblewrap sandbox\n"
	"[Service]\n"
	"RuntimeDirectory=hw-sandbox\n"
	"ExecStartPre=/usr/bin/mkfifo /run/hw-sandbox/jobs\n"
	"ExecStart=/bin/sh -c 'n=0; while read -r job </run/hw-sandbox/jobs; do n=$$((n + 1)); "
	"bwrap --unshare-user --unshare-uts --unshare-ipc --unshare-pid --uid 0 --gid 0 "
	"--hostname sandbox --ro-bind / / --tmpfs /tmp --proc /proc --dev /dev --tmpfs /mnt "
	"-- /bin/sh -c \"$$job\" >/run/hw-sandbox/out.$$n 2>&1; echo $$? >/run/hw-sandbox/rc.$$n; done'\n";

/* Three jobs, one after the other: each mounts, writes and names its host */
#define SANDBOX_JOB "mount -t tmpfs none /mnt && echo x >/mnt/x && hostname && id -u"

static const struct service services[] = {
	/*
	 * Without CAP_SETUID or CAP_SETGID nginx's workers die and a request
	 * waits for ab's timeout: 10 s, not ab's 30 (a request takes
	 * milliseconds under TCG).
	 */
	{ "nginx.service", NULL, NULL,
	  "ab -s 10 -n 300 -c 16 http://127.0.0.1/ >/tmp/ab.1 && grep -Eq '^Failed requests: +0$' /tmp/ab.1 && "
	  "systemctl reload nginx.service && "
	  "ab -s 10 -n 300 -c 16 http://127.0.0.1/ >/tmp/ab.2 && grep -Eq '^Failed requests: +0$' /tmp/ab.2",
	  "/var/log/nginx/error.log" },
	{ "redis-server.service", NULL, NULL,
	  "redis-cli ping | grep -qx PONG && "
	  "redis-benchmark -q -n 2000 -c 16 -t set,get,incr,lpush,lpop >/tmp/rb 2>&1 && "
	  "! grep -qi error /tmp/rb && [ $(grep -c 'requests per second' /tmp/rb) = 5 ]",
	  "/var/log/redis/redis-server.log" },
	/* Debian 12's PostgreSQL is 15; the cluster its package made */
	{ "postgresql@15-main.service", NULL,
	  "runuser -u postgres -- createdb hwbench && "
	  "runuser -u postgres -- pgbench -q -i -s 2 hwbench >/tmp/pgi 2>&1",
	  "runuser -u postgres -- pgbench -n -c 4 -j 2 -t 100 hwbench >/tmp/pgb 2>&1 && "
	  "grep -q '^number of failed transactions: 0 ' /tmp/pgb && "
	  "grep -q '^number of transactions actually processed: 400/400$' /tmp/pgb",
	  "/var/log/postgresql/postgresql-15-main.log" },
	/*
	 * Key logins running commands, four at once, twice, and one with a
	 * terminal.  logind moves each login's sshd to the user's session
	 * scope: the drop-in must leave what a session inherits (rlimits,
	 * bounding set) as shipped, which each login compares with what the
	 * first login, before any drop-in, saw: its output, not what root's
	 * shell start-up files say on stderr (a host's pyenv rehash timing
	 * out under four logins at once).
	 */
	{ "ssh.service", NULL,
	  "mkdir -p /root/.ssh && rm -f /root/.ssh/hw /root/.ssh/hw.pub && "
	  "ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/hw && "
	  "cat /root/.ssh/hw.pub >>/root/.ssh/authorized_keys && "
	  "printf '%s\\n' 'grep ^CapBnd /proc/self/status; ulimit -H -a' >/root/hw-session && "
	  SSH " root@127.0.0.1 sh /root/hw-session >/root/hw-session.shipped",
	  "for round in 1 2; do "
	  "  for i in 1 2 3 4; do (" SSH " root@127.0.0.1 sh /root/hw-session >/tmp/ssh.$i 2>/tmp/ssh.$i.err; "
	  "    echo $? >/tmp/ssh.$i.rc) & done; wait; "
	  "  for i in 1 2 3 4; do [ $(cat /tmp/ssh.$i.rc) = 0 ] && cmp -s /tmp/ssh.$i /root/hw-session.shipped || "
	  "    { echo \"login $i: status $(cat /tmp/ssh.$i.rc), as shipped, then its output and errors:\"; "
	  "      cat /root/hw-session.shipped /tmp/ssh.$i /tmp/ssh.$i.err; exit 1; } >&2; done; "
	  "done && " SSH " -tt root@127.0.0.1 'tty >/dev/null && exit 7' </dev/null >/dev/null 2>&1; [ $? = 7 ]",
	  NULL },
	{ "hw-sandbox.service", sandbox_unit, NULL,
	  "d=/run/hw-sandbox; for k in 1 2 3; do "
	  "  n=$(( $(ls $d | grep -c '^rc') + 1 )); "
	  "  echo '" SANDBOX_JOB "' >$d/jobs || exit 1; "
	  "  timeout 60 sh -c \"until [ -s $d/rc.$n ]; do sleep 0.2; done\" || "
	  "    { echo \"job $n: no status\" >&2; exit 1; }; "
	  "  [ \"$(cat $d/rc.$n)\" = 0 ] && [ \"$(tr '\\n' ' ' <$d/out.$n)\" = 'sandbox 0 ' ] || "
	  "    { echo \"job $n: status $(cat $d/rc.$n):\"; cat $d/out.$n; exit 1; } >&2; "
	  "done",
	  NULL },
};

/* A unit no package ships: its file in /etc/systemd/system.  0, or -1. */
static inline int unit_install(const struct service *s)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "/etc/systemd/system/%s", s->unit);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(s->unit_file, f);
	return fclose(f) ? -1 : 0;
}

#endif /* HW_UNITS_H */
