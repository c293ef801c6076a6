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
umount $m
say "done"
