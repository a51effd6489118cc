# highwater: kernel high-water marks turned into limits.
#
#   make demo        the main job: build the patched kernel, boot it, profile a workload
#                    with highwater run (CMD='prog args' to profile another, FORMAT=systemd)
#   make test        the test command: kernel, kselftests, project tests, one boot
#   make reliability the second test command (CI runs both): the suite on a debug
#                    kernel, upstream selftests unpatched vs patched, builds of every
#                    prefix and with options off, no new W=1 warning
#   make kernel      build/linux from kernel/patches, then build/guest.bzImage
#   make tree        (re)create build/linux from Debian's source and kernel/patches
#   make export      write build/linux's commits back to kernel/patches
#   make checkpatch  checkpatch.pl --strict on every patch of the series
#   make status      where build/linux stands against kernel/patches
#   make bench       instructions per operation: unpatched, patched, kprobe/eBPF tracker
#   make fuzz        the parsers under libFuzzer, ASan and UBSan (FUZZ_SECONDS=600 in all)
#   make highwater   build the highwater command (build/highwater)
#   make install     install it and its man page (PREFIX=/usr/local, DESTDIR)

.PHONY: demo test reliability bench fuzz kernel tree export checkpatch status clean highwater install

CC ?= cc
CFLAGS ?= -O2 -g
HW_CFLAGS := -std=gnu11 -Wall -Wextra -Wformat=2 -Wshadow -Wno-format-nonliteral
PREFIX ?= /usr/local
HW_SRC := $(wildcard src/*.c)
# json-c reads the JSON reports back (Debian: libjson-c-dev).
HW_LIBS := -ljson-c

highwater: build/highwater

build/highwater: $(HW_SRC) src/hw.h
	@mkdir -p build
	@test -e /usr/include/json-c/json.h || \
		{ echo "highwater needs json-c's headers: apt-get install libjson-c-dev" >&2; exit 1; }
	$(CC) $(CFLAGS) $(HW_CFLAGS) -o $@ $(HW_SRC) $(HW_LIBS)

install: build/highwater
	install -D -m 0755 build/highwater $(DESTDIR)$(PREFIX)/bin/highwater
	install -D -m 0644 highwater.1 $(DESTDIR)$(PREFIX)/share/man/man1/highwater.1

demo:
	HW_FORMAT=$(FORMAT) vm/demo $(CMD)

test:
	tests/run

reliability:
	tests/reliability

bench:
	bench/run

FUZZ_SECONDS ?= 600
fuzz:
	tests/fuzz/run $(FUZZ_SECONDS)

kernel:
	vm/tree sync
	vm/build

tree:
	vm/tree create

export:
	vm/tree export

checkpatch:
	vm/checkpatch

status:
	vm/tree status

# Keeps build/linux (it may hold work not yet exported); removes build output.
clean:
	rm -rf build/kbuild build/tests build/vm build/workloads build/reliability build/*.bzImage
