# highwater: kernel high-water marks turned into limits.
#
#   make demo        the main job: build the patched kernel, boot it, profile a workload
#                    with highwater run (CMD='prog args' to profile another, FORMAT=systemd)
#   make test        the test command: kernel, kselftests, project tests, one boot
#   make check       the command's unit tests, man page and a fuzz smoke: no kernel, seconds
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
#   make deb         the highwater .deb (debian/), lintian-checked, and the patched kernel's
#                    linux-image and linux-headers packages (Debian's configuration), in build/deb
#   make debian      the test command on the series built with Debian's configuration,
#                    AppArmor enabled (tests/debian; not in CI: its cold build is long)

.PHONY: demo test check reliability bench peer fuzz kernel tree export checkpatch status clean highwater install deb debian

CC ?= cc
CFLAGS ?= -O2 -g
HW_CFLAGS := -std=gnu11 -Wall -Wextra -Wformat=2 -Wshadow -Wno-format-nonliteral
PREFIX ?= /usr/local
HW_SRC := $(wildcard src/*.c)
# json-c reads the JSON reports back (Debian: libjson-c-dev).
HW_LIBS := -ljson-c
HW_LIB_SRC := $(filter-out src/main.c,$(HW_SRC))
# What highwater --version prints.
HW_VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
UNIT_TESTS := $(patsubst tests/unit/%.c,build/check/%,$(wildcard tests/unit/*.c))

highwater: build/highwater

build/highwater: $(HW_SRC) src/hw.h
	@mkdir -p build
	@test -e /usr/include/json-c/json.h || \
		{ echo "highwater needs json-c's headers: apt-get install libjson-c-dev" >&2; exit 1; }
	$(CC) $(CPPFLAGS) -DHW_VERSION='"$(HW_VERSION)"' $(CFLAGS) $(HW_CFLAGS) $(LDFLAGS) \
		-o $@ $(HW_SRC) $(HW_LIBS)

build/check/%: tests/unit/%.c $(HW_LIB_SRC) src/hw.h tests/tap.h
	@mkdir -p build/check
	$(CC) $(CPPFLAGS) $(CFLAGS) $(HW_CFLAGS) -Werror -Isrc -Itests $(LDFLAGS) \
		-o $@ $< $(HW_LIB_SRC) $(HW_LIBS)

# No kernel is built or booted: the unit tests on tests/fixtures, the man
# page, and the parsers under libFuzzer for 20 seconds.
check: build/highwater $(UNIT_TESTS)
	@fail=0; \
	for t in $(UNIT_TESTS); do \
		$$t tests/fixtures >$$t.log 2>&1 || { fail=1; grep -a '^not ok' $$t.log; }; \
		echo "$$(basename $$t): $$(grep -ac '^ok' $$t.log) passed, $$(grep -ac '^not ok' $$t.log) failed"; \
	done; \
	tests/host/manpage >build/check/manpage.log 2>&1 && ! grep -q '^not ok' build/check/manpage.log || \
		{ fail=1; cat build/check/manpage.log; }; \
	echo "manpage: $$(grep -c '^ok' build/check/manpage.log) passed"; \
	tests/fuzz/run 20 >build/check/fuzz.log && ! grep -q '^not ok' build/check/fuzz.log || \
		{ fail=1; cat build/check/fuzz.log; }; \
	grep '^ok' build/check/fuzz.log; \
	exit $$fail

deb:
	contrib/build-deb
	vm/build-debian --packages

debian:
	tests/debian

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

# The kprobe peer beside the marks, on the services under systemd (bench kernel)
peer:
	tests/peer/run

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
