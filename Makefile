# ovl-snapshots: the one entry point.  'make help' lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := kernel

# DEBUG=1: lockdep, KASAN, ... (what check, demo and run use unless told);
# plain 'make kernel' builds the lean variant.
ifeq ($(origin DEBUG),undefined)
KERNEL_DEBUG := 0
RUN_DEBUG := 1
else
KERNEL_DEBUG := $(DEBUG)
RUN_DEBUG := $(DEBUG)
endif
KDIR_1 := build/kernel-debug
KDIR_0 := build/kernel
RUN_KERNEL := $(KDIR_$(RUN_DEBUG))/bzImage

# Commands the targets need; 'make deps' installs them.
DEP_CMDS := gcc make flex bison bc cpio ccache qemu-system-x86_64 sparse spatch \
	    mkfs.ext4 mkfs.xfs mkfs.btrfs busybox python3 setfattr setfacl perl \
	    fio stress-ng dbench fs_mark
DEPS_OK = $(shell for c in $(DEP_CMDS); do command -v $$c >/dev/null || echo $$c; done; \
	/usr/bin/python3 -c 'import ply, git' 2>/dev/null || echo python3-ply/python3-git)

help: ## this list
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | \
		awk -F':.*## ' '{ printf "  make %-12s %s\n", $$1, $$2 }'
	@echo "  variables: DEBUG=0|1  CMD='...' (run)  LINUX_TARBALL=path  FORCE=1 (linux)"

deps: ## install the Debian packages everything needs (root)
	scripts/deps.sh

need-deps:
	@missing="$(DEPS_OK)"; if [ -n "$$missing" ]; then \
		echo "missing: $$missing; running 'make deps'"; scripts/deps.sh; fi

linux: ## (re)create linux/ from the pinned tarball and patches/
	scripts/linux-tree.sh

export: ## rewrite patches/ from the commits in linux/
	scripts/export.sh

linux/.git:
	scripts/linux-tree.sh

kernel: need-deps linux/.git ## build bzImage (DEBUG=1: the debug variant)
	DEBUG=$(KERNEL_DEBUG) scripts/build-kernel.sh

run-kernel: need-deps linux/.git
	DEBUG=$(RUN_DEBUG) scripts/build-kernel.sh

selftests: need-deps linux/.git ## build the selftests (static, for the guest)
	$(MAKE) -s -C selftests

PREFIX ?= /usr/local
TOOL_CFLAGS := -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror -static

tool: build/ovl-snapshot ## build the ovl-snapshot tool (build/ovl-snapshot)

build/ovl-snapshot: tools/ovl-snapshot.c
	@mkdir -p build
	$(CC) $(TOOL_CFLAGS) -o $@ $<

install: tool ## install ovl-snapshot in $(DESTDIR)$(PREFIX)/sbin
	install -D -m 0755 build/ovl-snapshot $(DESTDIR)$(PREFIX)/sbin/ovl-snapshot

run: run-kernel selftests ## boot the guest: a shell, or CMD='...'
	KERNEL=$(RUN_KERNEL) qemu/boot.sh $(CMD)

guest-check: run-kernel selftests
	@rc=0; KERNEL=$(RUN_KERNEL) RUN_DIR=build/run/check TIMEOUT=$${TIMEOUT:-4500} qemu/boot.sh \
		qemu/guest-selftests.sh $(TESTS) || rc=$$?; \
	echo "== selftests in the guest (guest exit $$rc) =="; \
	qemu/ktap.py build/run/check/output.log build/run/check/console.log \
		$(if $(ALLOW_SKIP),--allow-skip) && [ $$rc = 0 ]

# make soak SEEDS=N OPS=N SEED0=N: the long form of the proof tools
SEEDS ?= 250
OPS ?= 1000
SEED0 ?= 1000
soak: run-kernel selftests ## long proof: SEEDS fuzz seeds per fs (OPS ops each), full third-party loads
	@rc=0; KERNEL=$(RUN_KERNEL) RUN_DIR=build/run/soak TIMEOUT=$${TIMEOUT:-172800} \
		SCRATCH_SIZE=$${SCRATCH_SIZE:-8G} qemu/boot.sh \
		qemu/guest-soak.sh $(abspath build/run/soak) $(SEEDS) $(OPS) $(SEED0) || rc=$$?; \
	echo "== soak in the guest (guest exit $$rc) =="; \
	qemu/ktap.py build/run/soak/output.log build/run/soak/console.log && [ $$rc = 0 ]

check: test-tools static guest-check ## everything: tool tests, static checks, selftests in the guest

demo: run-kernel selftests ## boot the guest and run the demo
	KERNEL=$(RUN_KERNEL) TIMEOUT=600 qemu/boot.sh qemu/demo.sh

bench: need-deps linux/.git ## hook overhead: vanilla v6.12.95 vs patched, lean kernels, under TCG
	DEBUG=0 scripts/build-kernel.sh
	VANILLA=1 scripts/build-kernel.sh
	mkdir -p build/bench
	$(CC) -O2 -Wall -Wextra -Werror -static -o build/bench/premod_bench bench/premod_bench.c
	KERNEL=build/kernel-vanilla/bzImage RUN_DIR=build/run/bench-vanilla TIMEOUT=1800 \
		qemu/boot.sh qemu/guest-bench.sh vanilla
	KERNEL=build/kernel/bzImage RUN_DIR=build/run/bench-patched TIMEOUT=1800 \
		qemu/boot.sh qemu/guest-bench.sh patched
	bench/table.py build/run/bench-vanilla/output.log build/run/bench-patched/output.log \
		| tee build/bench/table.md

bisect: need-deps linux/.git ## build every commit of the series on its own (lean config)
	scripts/bisect-build.sh

test-tools: ## unit tests of the runner itself
	python3 -m unittest discover -s qemu -p 'test_*.py'

static: checkpatch sparse cocci ## all static checks of the series

checkpatch: need-deps linux/.git ## scripts/checkpatch.pl --strict on every patch
	scripts/checkpatch.sh

sparse: need-deps linux/.git ## sparse (C=2) on dirs the series touches, new warnings fail
	scripts/sparse.sh

cocci: need-deps linux/.git ## coccinelle report on files the series touches, new reports fail
	scripts/cocci.sh

clean: ## remove build/ (keeps linux/ and the ccache)
	rm -rf build

.PHONY: bench bisect help deps need-deps linux export kernel run-kernel selftests run guest-check \
	check soak demo test-tools static checkpatch sparse cocci clean tool install
