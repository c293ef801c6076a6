#!/bin/sh
# Guest side of 'make bench': run bench/premod_bench on tmpfs and ext4 in
# every setting this kernel has, one result line per operation:
#   RESULT KERNEL FS SETTING OP NS_PER_OP
# Settings: "none" (no consumer anywhere); with CONFIG_FS_PREMOD_TEST also
# "other-sb" (a consumer on another filesystem: the static key is on) and
# "idle" (a consumer on the benchmark directory that has nothing to do),
# and "snapshot" (an overlayfs snapshot of the benchmark directory, its
# store next to it: the real consumer, with the modification barrier).
# BENCH_ROUNDS rounds (default 5), the order of the settings rotated each
# round, so that a slow phase of the guest does not land on one setting.
set -eu

kernel=${1:?kernel label}
bin=${BENCH_BIN:-build/bench/premod_bench}
n=${BENCH_N:-20000}
runs=${BENCH_RUNS:-5}
rounds=${BENCH_ROUNDS:-5}
ctl=/sys/kernel/debug/fs_premod_test
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug

disk() {
	for b in /sys/block/vd*; do
		[ "$(cat "$b/serial" 2>/dev/null)" = "$1" ] && echo "/dev/${b##*/}"
	done
}

mkdir -p /tmp/bench/tmpfs /tmp/bench/ext4 /tmp/bench/other
mount -t tmpfs -o size=512m tmpfs /tmp/bench/tmpfs
mount -t tmpfs -o size=16m tmpfs /tmp/bench/other
mkfs.ext4 -q -F "$(disk ext4)"
mount "$(disk ext4)" /tmp/bench/ext4

run() {	# FS SETTING
	d=/tmp/bench/$1/d
	rm -rf "$d"
	mkdir -p "$d"
	s=/tmp/bench/$1/store
	case $2 in
	other-sb) echo /tmp/bench/other >$ctl/watch ;;
	idle) echo 1 >$ctl/quiet; echo "$d" >$ctl/watch ;;
	snapshot)
		rm -rf "$s"
		mkdir -p "$s/upper" "$s/work" "$s/mnt"
		mount -t overlay none \
			-o "lowerdir=$d,upperdir=$s/upper,workdir=$s/work,snapshot" \
			"$s/mnt" ;;
	esac
	"$bin" "$d" "$n" "$runs" | while read -r op ns; do
		echo "RESULT $kernel $1 $2 $op $ns"
	done
	case $2 in
	other-sb | idle) echo 1 >$ctl/unwatch; echo 0 >$ctl/quiet ;;
	snapshot) umount "$s/mnt"; rm -rf "$s" ;;
	esac
}

settings=none
[ -e $ctl/watch ] && settings="none other-sb idle snapshot"
r=0
while [ $r -lt "$rounds" ]; do
	for fs in tmpfs ext4; do
		for s in $settings; do
			run $fs $s
		done
	done
	# rotate: "a b c" -> "b c a"
	set -- $settings
	first=$1
	shift
	settings="$* $first"
	r=$((r + 1))
done
