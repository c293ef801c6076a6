#!/bin/sh
# sparse (C=2) on the C files the series touches (scripts/touched.sh), in
# the debug guest config; fails on any warning that the same files do not
# already give at v6.12.95 (compared without line numbers).
set -eu

tag=v6.12.95
head=build/kernel-debug
base=build/sparse-base
[ -f "$head/.config" ] || DEBUG=1 scripts/build-kernel.sh
files=$(BUILD=$head scripts/touched.sh sparse)
if [ -z "$files" ]; then
	echo "sparse: the series touches no C file; nothing to check"
	exit 0
fi
objs=$(echo "$files" | sed 's/\.c$/.o/')
export KBUILD_BUILD_TIMESTAMP="2026-06-19" KBUILD_BUILD_USER=ovl KBUILD_BUILD_HOST=ovl-snapshots
jobs=${JOBS:-$(nproc)}
cc=gcc
command -v ccache >/dev/null && cc="ccache gcc"

# warnings of "make C=2 OBJS" in SRC with O=OUT, normalised
sparse_run() {
	src=$1 out=$2
	shift 2
	# shellcheck disable=SC2068 # object names, split on purpose
	make -s -C "$src" O="$(pwd)/$out" ARCH=x86_64 CC="$cc" C=2 -k -j"$jobs" $@ 2>&1 |
		grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' |
		sed -E -e "s|^$(pwd)/$src/||" -e 's/^([^:]+):[0-9]+:[0-9]+: /\1: /' | sort
}

echo "sparse: HEAD: $(echo "$files" | wc -l) files"
# shellcheck disable=SC2086
sparse_run linux "$head" $objs >build/sparse-head.txt || true

if [ ! -d "$base/src" ]; then
	git -C linux worktree prune
	git -C linux worktree add --detach "../$base/src" "$tag" >/dev/null 2>&1
fi
mkdir -p "$base/obj"
cp "$head/.config" "$base/obj/.config"
make -s -C "$base/src" O="$(pwd)/$base/obj" ARCH=x86_64 CC="$cc" -j"$jobs" olddefconfig prepare >/dev/null
bobjs=
for o in $objs; do
	[ -f "$base/src/${o%.o}.c" ] && bobjs="$bobjs $o"
done
echo "sparse: $tag: $(echo "$bobjs" | wc -w) files"
# shellcheck disable=SC2086
sparse_run "$base/src" "$base/obj" $bobjs >build/sparse-base.txt || true

new=$(comm -23 build/sparse-head.txt build/sparse-base.txt)
if [ -n "$new" ]; then
	echo "sparse: new warnings:"
	echo "$new" | sed 's/^/  /'
	exit 1
fi
echo "sparse: no new warnings ($(wc -l <build/sparse-head.txt) known ones in these files)"
