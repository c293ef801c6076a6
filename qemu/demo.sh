#!/bin/sh
# Guest side of 'make demo': what the booted kernel can do today.
set -eu

say() { printf '\n== %s\n' "$*"; }
say "kernel: $(uname -r) ($(uname -v))"

dev=
for b in /sys/block/vd*; do
	[ "$(cat "$b/serial" 2>/dev/null)" = ext4 ] && dev=/dev/${b##*/}
done
[ -n "$dev" ] || { echo "demo: no scratch disk with serial ext4" >&2; exit 1; }
m=/tmp/demo
mkdir -p $m
mkfs.ext4 -q -F "$dev"
mount "$dev" $m
mkdir -p $m/lower $m/upper $m/work $m/merged
echo "original" >$m/lower/file
echo "remove me" >$m/lower/victim
mount -t overlay overlay -o lowerdir=$m/lower,upperdir=$m/upper,workdir=$m/work $m/merged

say "an overlay on ext4 ($dev): lower is the read-only layer"
ls -l $m/merged
say "write through the overlay, delete a file"
echo "changed" >$m/merged/file
rm $m/merged/victim
echo "merged/file: $(cat $m/merged/file)   lower/file: $(cat $m/lower/file)"
say "upper layer now holds the copy-up and a whiteout (c 0,0)"
ls -l $m/upper
umount $m/merged

ctl=/sys/kernel/debug/fs_premod_test
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
if [ -e $ctl/watch ]; then
	say "pre-modification hooks: the test consumer watches $m/live"
	mkdir $m/live
	echo hello >$m/live/a
	echo $m/live >$ctl/watch
	echo more >>$m/live/a
	chmod 600 $m/live/a
	mv $m/live/a $m/live/b
	mkdir $m/live/dir
	rm $m/live/b
	echo "what the consumer saw, inside each hook, before each change:"
	sed 's/^/  /' $ctl/events
	say "a consumer can fail an operation before anything changes"
	echo "unlink 1" >$ctl/fail
	touch $m/live/keep
	if rm $m/live/keep 2>/dev/null; then
		echo "rm $m/live/keep: went through?!"
	else
		echo "rm $m/live/keep: refused by the consumer (EPERM); ls: $(ls $m/live | tr "\n" " ")"
	fi
	sed 's/^/  /' $ctl/events
	echo "all 0" >$ctl/fail
	echo 1 >$ctl/unwatch
else
	say "kernel without CONFIG_FS_PREMOD_TEST: no hook demo"
fi
umount $m
say "done"
