#!/bin/sh
# Build every commit of the series on its own (bisectability): a worktree
# of linux/ at build/bisect/src steps through v6.12.95..HEAD and builds the
# lean guest kernel in build/bisect/obj, incrementally.  The config leaves
# out the options that only later patches add (the test consumer), so it
# is the same at every step.  Fails at the first commit that does not build.
set -eu

tag=v6.12.95
src=build/bisect/src
out=build/bisect/obj
jobs=${JOBS:-$(nproc)}
[ -d linux/.git ] || { echo "bisect-build: no linux/; run 'make linux'" >&2; exit 1; }
cc=gcc
command -v ccache >/dev/null && cc="ccache gcc"
export KBUILD_BUILD_TIMESTAMP="2026-06-19" KBUILD_BUILD_USER=ovl KBUILD_BUILD_HOST=ovl-snapshots

if [ ! -d "$src" ]; then
	git -C linux worktree prune
	git -C linux worktree add --detach "../$src" "$tag" >/dev/null 2>&1
fi
mkdir -p "$out"
grep -hv 'PREMOD_TEST' qemu/kernel.config Kconfig.snippet >build/bisect/frag.config

n=0
for c in $(git -C linux rev-list --reverse "$tag..HEAD"); do
	n=$((n + 1))
	subject=$(git -C linux log -1 --format=%s "$c")
	git -C "$src" checkout -q --detach "$c"
	if [ ! -f "$out/.config" ]; then
		make -s -C "$src" O="$PWD/$out" ARCH=x86_64 CC="$cc" tinyconfig >/dev/null
		"$src"/scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" \
			build/bisect/frag.config >/dev/null
	fi
	make -s -C "$src" O="$PWD/$out" ARCH=x86_64 CC="$cc" olddefconfig >/dev/null
	grep -q '^CONFIG_FS_PREMOD=y' "$out/.config" || [ $n = 0 ] ||
		echo "bisect-build: note: CONFIG_FS_PREMOD not set at $n"
	if ! make -s -C "$src" O="$PWD/$out" ARCH=x86_64 CC="$cc" HOSTCC="$cc" \
			-j"$jobs" bzImage >build/bisect/log 2>&1; then
		echo "bisect-build: $n $c $subject: FAILED"
		tail -20 build/bisect/log
		exit 1
	fi
	if grep -q 'warning:' build/bisect/log; then
		echo "bisect-build: $n $c $subject: built with warnings"
		grep 'warning:' build/bisect/log | head -10
		exit 1
	fi
	echo "bisect-build: $n $subject: ok"
done
echo "bisect-build: all $n commits build"
