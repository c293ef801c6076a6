#!/bin/sh
# Build bzImage out of tree for the QEMU guest.
#
#   DEBUG=0  build/kernel/        qemu/kernel.config + Kconfig.snippet
#   DEBUG=1  build/kernel-debug/  ... + qemu/debug.config (lockdep, KASAN)
#   VANILLA=1 build/kernel-vanilla/ v6.12.95 without the series, lean, with
#            qemu/kernel.config minus the series' own options (make bench)
#
# The config is tinyconfig plus the fragments; it is regenerated when a
# fragment or linux/'s HEAD changed, and the build fails if any line of a
# fragment did not make it into .config.  ccache is used when installed.
set -eu

debug=${DEBUG:-0}
jobs=${JOBS:-$(nproc)}
src=linux
case ${VANILLA:-0}$debug in
01) out=build/kernel-debug; frags="qemu/kernel.config Kconfig.snippet qemu/debug.config" ;;
00) out=build/kernel; frags="qemu/kernel.config Kconfig.snippet" ;;
1*) out=build/kernel-vanilla; frags=build/vanilla.config; src=build/linux-vanilla ;;
*) echo "build-kernel: DEBUG must be 0 or 1, not '$debug'" >&2; exit 2 ;;
esac
[ -d linux/.git ] || { echo "build-kernel: no linux/; run 'make linux'" >&2; exit 1; }
if [ "$src" != linux ]; then
	tag=$(git -C linux describe --tags --abbrev=0 "$(git -C linux rev-list --max-parents=0 HEAD)")
	if [ "$(git -C "$src" rev-parse HEAD 2>/dev/null)" != "$(git -C linux rev-parse "$tag^{commit}")" ]; then
		rm -rf "$src"
		git -C linux worktree prune
		git -C linux worktree add --detach "../$src" "$tag" >/dev/null 2>&1
	fi
	mkdir -p build
	grep -v 'PREMOD' qemu/kernel.config >build/vanilla.config
fi

cc=gcc
if command -v ccache >/dev/null 2>&1; then
	cc="ccache gcc"
	ccache --max-size=8G >/dev/null
fi
# Fixed build identity: nothing but the sources decides what ccache sees.
export KBUILD_BUILD_TIMESTAMP="2026-06-19" KBUILD_BUILD_USER=ovl KBUILD_BUILD_HOST=ovl-snapshots
kmake() {
	make -s -C "$src" O="$PWD/$out" ARCH=x86_64 CC="$cc" HOSTCC="$cc" "$@"
}

mkdir -p "$out"
stamp=$( { cat $frags; git -C "$src" rev-parse HEAD; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.ovl-config-stamp" 2>/dev/null)" != "$stamp" ] || [ ! -f "$out/.config" ]; then
	echo "build-kernel: configuring $out (tinyconfig + $frags)"
	kmake tinyconfig >/dev/null
	# shellcheck disable=SC2086 # $frags is a list of file names
	"$src"/scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" $frags >/dev/null
	kmake olddefconfig >/dev/null
	missing=0
	# shellcheck disable=SC2086
	for line in $(grep -h '^CONFIG_' $frags); do
		sym=${line%%=*}
		val=${line#*=}
		if [ "$val" = n ]; then
			grep -q "^# $sym is not set" "$out/.config" && continue
			grep -q "^$sym=" "$out/.config" || continue
		else
			grep -qx "$line" "$out/.config" && continue
		fi
		echo "build-kernel: $line requested, but .config has: $(grep "^$sym=\|^# $sym " "$out/.config" || echo unset)" >&2
		missing=1
	done
	[ $missing = 0 ] || exit 1
	echo "$stamp" >"$out/.ovl-config-stamp"
fi
echo "build-kernel: building $out/arch/x86/boot/bzImage (-j$jobs)"
kmake -j"$jobs" bzImage
ln -sf arch/x86/boot/bzImage "$out/bzImage"
