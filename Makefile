# highwater: kernel high-water marks turned into limits.
#
#   make demo        the main job: build the patched kernel, boot it, profile a workload
#   make test        the test command: kernel, kselftests, project tests, one boot
#   make kernel      build/linux from kernel/patches, then build/guest.bzImage
#   make tree        (re)create build/linux from Debian's source and kernel/patches
#   make export      write build/linux's commits back to kernel/patches
#   make checkpatch  checkpatch.pl --strict on every patch of the series
#   make status      where build/linux stands against kernel/patches

.PHONY: demo test kernel tree export checkpatch status clean

demo:
	vm/demo $(CMD)

test:
	tests/run

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
	rm -rf build/kbuild build/tests build/vm build/workloads build/*.bzImage
