# Shared settings for the highwater glue scripts.  Sourced, not run.

HW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HW_BUILD=$HW_ROOT/build
HW_TREE=$HW_BUILD/linux
HW_PATCHES=$HW_ROOT/kernel/patches
HW_CONFIGS=$HW_ROOT/kernel/config
# The small kernel (build/kbuild/minimal): everything the series touches off
# but /proc, with an initramfs (boot.config).  make reliability's options
# step builds and links it, and the prefix walk boots it at every prefix,
# starting from it: one build for both.
HW_SMALL_CONFIG=("$HW_CONFIGS/minimal.config" "$HW_CONFIGS/boot.config")

# The Debian source the series is written against.  Another 6.12 version is
# used (with a warning) only when this one is no longer in the archive.
HW_SRC_PKG=linux-source-6.12
HW_SRC_VERSION=6.12.118-1~deb12u1
HW_SRC_TARBALL=/usr/src/linux-source-6.12.tar.xz

# hw_usage SCRIPT: SCRIPT's header comment, its help ("# " taken off).
hw_usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$1"; }

# TAP results, counted.  hw_ok STATUS DESCRIPTION prints "ok N - DESCRIPTION"
# when STATUS is 0 and "not ok N - DESCRIPTION" otherwise; hw_check
# DESCRIPTION COMMAND... takes COMMAND's exit status.  hw_passed, hw_failed
# and hw_problems (the descriptions that failed) add them up.
hw_passed=0 hw_failed=0 hw_problems=()
hw_ok() {
	if [ "$1" = 0 ]; then
		hw_passed=$((hw_passed + 1))
		echo "ok $((hw_passed + hw_failed)) - $2"
	else
		hw_failed=$((hw_failed + 1)) hw_problems+=("$2")
		echo "not ok $((hw_passed + hw_failed)) - $2"
	fi
}
hw_check() {
	local desc=$1
	shift
	"$@"
	hw_ok $? "$desc"
}

# hw_counts LOG: "PASSED FAILED" from the closing line "N passed, N failed"
# of a test runner's LOG; "0 1" when it has none (the runner did not finish).
hw_counts() {
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" 2>/dev/null | tail -1)
	[ -n "$line" ] || { echo "0 1"; return; }
	line=${line/ passed, / }
	echo "${line% failed}"
}

hw_log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
hw_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# hw_lock FILE MODE WHAT: hold a lock on FILE (MODE -s shared, -x
# exclusive) until the script exits, saying what it waits for when another
# holds it.  Its descriptor is in hw_lock_fds: a helper left running in the
# background (a progress loop's sleep) closes them (hw_unlock_inherited),
# or it would hold the lock after the script.
hw_lock_fds=()
hw_lock() {
	local fd
	mkdir -p "$(dirname "$1")"
	exec {fd}>>"$1"
	hw_lock_fds+=("$fd")
	flock -n "$2" "$fd" && return 0
	hw_log "waiting for $3"
	flock "$2" "$fd"
}

hw_unlock_inherited() {
	local fd
	for fd in "${hw_lock_fds[@]}"; do exec {fd}>&-; done
}

# hw_tree_lock MODE [TREE]: a source tree's lock (build/linux's by default).
# A build reads the tree (-s); what checks another commit out or unpacks it
# again writes it (-x: vm/tree create, the prefix walk in its own tree), so
# that a kernel built beside other work (the checkers' kernels, built ahead
# by tests/reliability --prebuild) never compiles a tree half checked out.
# The holder's children do not take the same tree's lock again
# (HW_TREE_LOCKED: the tree and the mode).
hw_tree_lock() {
	local tree=${2:-$HW_TREE} held=${HW_TREE_LOCKED:-} file
	[ "${held%% *}" != "$tree" ] || return 0
	file=$HW_BUILD/.tree.lock
	[ "$tree" = "$HW_TREE" ] || file=$HW_BUILD/.tree-$(basename "$tree").lock
	hw_lock "$file" "$1" \
		"$([ "$1" = -x ] && echo "the kernel builds running beside to finish" ||
			echo "${tree#$HW_ROOT/}: it is being checked out or unpacked")"
	export HW_TREE_LOCKED="$tree $1"
}

# hw_background PIDVAR COMMAND...: start COMMAND in the background, in a
# process group of its own (kill -- -PID stops all of it) but in this
# session: with the host's autogroup scheduling, a session of its own
# (setsid) is a scheduling group of its own, shared equally with this one
# whatever the nice values, and a booted suite beside two such groups ran
# three times slower (the debug suite: 20 minutes in a cold CI, 7 alone).
# At the caller's niceness: compiles share the cores equally, and the guests
# go first (vm/run).
hw_background() {
	local -n _hw_pid=$1
	shift
	set -m
	"$@" &
	_hw_pid=$!
	set +m
}

# Run a command as root (CI and these machines run as root already).
hw_sudo() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# hw_need_pkgs CMD:PKG...: install the Debian packages whose commands are missing.
hw_need_pkgs() {
	local want=() item cmd pkg
	for item in "$@"; do
		cmd=${item%%:*} pkg=${item#*:}
		case $cmd in
		/*) [ -e "$cmd" ] && continue ;;
		*) command -v "$cmd" >/dev/null 2>&1 && continue ;;
		esac
		want+=("$pkg")
	done
	[ ${#want[@]} -eq 0 ] && return 0
	hw_log "installing ${want[*]} (apt-get, about a minute)"
	hw_apt_install "${want[@]}" || hw_die "apt-get install ${want[*]} failed; see $HW_BUILD/apt.log"
}

# hw_need_daemons CMD:PKG...: hw_need_pkgs for services the guest runs under
# its systemd (tests/services): their packages' scripts must not start them
# on the host, so a policy-rc.d that refuses stands while they install,
# unless the machine has one (container images do).
hw_need_daemons() {
	local policy=/usr/sbin/policy-rc.d
	[ -e $policy ] && { hw_need_pkgs "$@"; return; }
	(
		trap 'hw_sudo rm -f $policy' EXIT
		printf '#!/bin/sh\n# highwater: no service starts on the host while it installs\nexit 101\n' |
			hw_sudo tee $policy >/dev/null
		hw_sudo chmod 755 $policy
		hw_need_pkgs "$@"
	) || exit 1
}

# hw_need_services: the services tests/services drives under the guest's
# systemd (units.h), their load tools, and bwrap for the sandbox unit; for
# make test (tests/run) and make peer (tests/peer/run).
hw_need_services() {
	hw_need_daemons nginx:nginx redis-server:redis-server redis-benchmark:redis-tools \
		ab:apache2-utils /usr/lib/postgresql/15/bin/postgres:postgresql \
		/usr/sbin/sshd:openssh-server ssh:openssh-client dbus-daemon:dbus \
		/lib/x86_64-linux-gnu/security/pam_systemd.so:libpam-systemd
	hw_need_pkgs bwrap:bubblewrap
}

# hw_cc_test OUT SRC: a guest test program, linked with the command's code
# (src/*.c but main.c), as every guest test is built.
hw_cc_test() {
	local lib=() f
	for f in "$HW_ROOT"/src/*.c; do
		[ "$(basename "$f")" = main.c ] || lib+=("$f")
	done
	mkdir -p "$(dirname "$1")"
	gcc -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -I"$HW_ROOT/tests" -I"$HW_ROOT/src" \
		-o "$1" "$2" "${lib[@]}" -ljson-c
}

# hw_apt_install PKG...: apt-get install, again after an apt-get update when
# the package lists are stale; the output in build/apt.log.  0 or 1.
hw_apt_install() {
	mkdir -p "$HW_BUILD"
	export DEBIAN_FRONTEND=noninteractive
	# The lock timeout: CI's background steps may install beside make test.
	local apt=(apt-get -o DPkg::Lock::Timeout=300)
	hw_sudo "${apt[@]}" install -y --no-install-recommends "$@" >>"$HW_BUILD/apt.log" 2>&1 && return 0
	hw_sudo "${apt[@]}" update >>"$HW_BUILD/apt.log" 2>&1 || true
	hw_sudo "${apt[@]}" install -y --no-install-recommends "$@" >>"$HW_BUILD/apt.log" 2>&1
}

# hw_stale_int3 LOG: did the boot in LOG die of an int3 that QEMU's TCG ran
# after text_poke_bp() had already replaced it?  With more than one vCPU it
# now and then does, when the kernel sets a static key at boot: "Oops: int3"
# before init ran, and the byte the kernel marks at the trap is not an int3
# (0xcc).  That is the emulator, not the kernel under test.
hw_stale_int3() {
	local code
	grep -q "Oops: int3" "$1" && ! grep -q "Run .* as init process" "$1" || return 1
	code=$(grep -m1 -o "Code: .*" "$1" | grep -o "<[0-9a-f][0-9a-f]>")
	[ -n "$code" ] && [ "$code" != "<cc>" ]
}

# Everything needed to build and boot a kernel.
hw_need_kernel_tools() {
	mkdir -p "$HW_BUILD"
	hw_need_pkgs gcc:gcc make:make git:git ccache:ccache flex:flex bison:bison \
		bc:bc cpio:cpio xz:xz-utils perl:perl \
		/usr/include/libelf.h:libelf-dev /usr/include/openssl/ssl.h:libssl-dev \
		qemu-system-x86_64:qemu-system-x86
}

# What the highwater command builds with: json-c reads its JSON reports.
hw_need_tool_libs() {
	mkdir -p "$HW_BUILD"
	hw_need_pkgs gcc:gcc make:make /usr/include/json-c/json.h:libjson-c-dev
}

# hw_kmake SRC OUT MAKE-ARGS...: kbuild as every script here runs it, so that
# what one builds is up to date for another (the same command lines) and
# ccache hits across clones and output directories (paths relative to the
# checkout, a fixed build identity).  ccache's depend mode: on a miss it
# runs the compiler alone and takes the headers from the dependency list
# kbuild asks for (-Wp,-MMD), where its default runs the preprocessor first
# to look the result up: a quarter of a cold build's CPU (the all-off
# kernel from an empty ccache: 166 core-seconds, 221 without, 2026-12-07).
# Hits are found the same way (direct mode), also those stored without it.
# Not for the host's programs: -MMD leaves out the system headers they
# include, so a changed libc header would not be seen.
hw_kmake() {
	local src=$1 out=$2
	shift 2
	KBUILD_BUILD_USER=highwater KBUILD_BUILD_HOST=qemu CCACHE_BASEDIR=$HW_ROOT CCACHE_DEPEND=1 \
		KBUILD_BUILD_TIMESTAMP="$(git -C "$src" log -1 --format=%cd 2>/dev/null || echo 2026-01-01)" \
		CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-25G} \
		make -C "$src" O="$out" ARCH=x86_64 CC="ccache gcc" HOSTCC="env CCACHE_NODEPEND=1 ccache gcc" \
		-j"$(nproc)" "$@"
}

# hw_debian_config TREE CONFIG: Debian's amd64 image configuration
# (linux-config-6.12, config.amd64_none_amd64) written to CONFIG, made
# buildable from TREE: Debian's signing certificates are not in the source
# package, so a key is generated for the modules instead.  Not yet
# olddefconfig'd.
hw_debian_config() {
	local tree=$1 config=$2
	hw_need_pkgs /usr/src/linux-config-6.12/config.amd64_none_amd64.xz:linux-config-6.12
	xz -dc /usr/src/linux-config-6.12/config.amd64_none_amd64.xz >"$config"
	"$tree/scripts/config" --file "$config" \
		--set-str SYSTEM_TRUSTED_KEYS "" --set-str SYSTEM_REVOCATION_KEYS "" \
		--set-str MODULE_SIG_KEY "certs/signing_key.pem" -d MODULE_SIG_ALL
}

# hw_series_objects KBUILD: the objects of the .c files the series' patches
# touch (tools/ aside; any patch's, so that a file one patch changes and a
# later one restores counts), one "FILE OBJECT" line each, OBJECT "-" when
# the kernel built in KBUILD (a build/kbuild directory of build/linux) does
# not build it.  A file #included into another one (kernel/sched/*.c into
# build_policy.c) gives the object whose dependencies list it.
hw_series_objects() {
	local dir=$HW_BUILD/kbuild/$1 f o cmd
	git -C "$HW_TREE" log --format= --name-only base..HEAD -- '*.c' | grep -v '^tools/' | sort -u |
		while read -r f; do
			o=${f%.c}.o
			if [ ! -e "$dir/$o" ]; then
				cmd=$(grep -l -- "/$f" "$dir/$(dirname "$f")"/.*.o.cmd 2>/dev/null | head -1 || true)
				[ -n "$cmd" ] && o=$(dirname "$f")/$(basename "${cmd#*/.}" .cmd)
			fi
			[ -e "$dir/$o" ] || o=-
			echo "$f $o"
		done
}
