#!/bin/sh
# Guest side of 'make demo': a snapshot of a live tree that keeps its
# moment while the tree changes, then the hooks through their test consumer.
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
mkdir -p $m/live/docs $m/live/src $m/store/upper $m/store/work $m/snap
echo "version 1" >$m/live/README
echo "int main(void) { return 0; }" >$m/live/src/main.c
echo "notes" >$m/live/docs/notes.txt
ln -s src/main.c $m/live/main-link

if mount -t overlay none \
	-o lowerdir=$m/live,upperdir=$m/store/upper,workdir=$m/store/work,snapshot \
	$m/snap 2>/dev/null; then
	mount -o remount,bind,ro $m/snap
	say "a snapshot of $m/live on ext4 ($dev), read-only at $m/snap"
	(cd $m/snap && find . | sort | sed 's/^/  /')
	say "the live tree changes natively (no stacked mount on the write path)"
	echo "version 2" >$m/live/README
	chmod 600 $m/live/README
	mv $m/live/src $m/live/source
	echo "// changed after the move" >>$m/live/source/main.c
	rm -r $m/live/docs
	echo "new" >$m/live/NEW
	echo "live:"
	(cd $m/live && find . | sort | sed 's/^/  /')
	echo "snapshot:"
	(cd $m/snap && find . | sort | sed 's/^/  /')
	echo "live/README: $(cat $m/live/README)   snap/README: $(cat $m/snap/README)"
	echo "snap/src/main.c: $(cat $m/snap/src/main.c)"
	echo "snap/docs/notes.txt: $(cat $m/snap/docs/notes.txt)"
	say "after dropping caches and mounting the snapshot again"
	umount $m/snap
	echo 3 >/proc/sys/vm/drop_caches
	mount -t overlay none \
		-o lowerdir=$m/live,upperdir=$m/store/upper,workdir=$m/store/work,snapshot \
		$m/snap
	if diff -r --no-dereference $m/snap $m/live >/dev/null; then
		echo "snapshot equals the live tree?!"
	else
		echo "diff -r snap live (the snapshot keeps its moment):"
		diff -r --no-dereference $m/snap $m/live | sed 's/^/  /' || true
	fi
	say "what the snapshot's store holds: copies and whiteouts (c 0,0)"
	(cd $m/store/upper && ls -lR . | sed 's/^/  /')
	umount $m/snap
else
	say "kernel without the snapshot option: no snapshot demo"
fi

tool=build/selftests/ovl-snapshot
if [ -x $tool ]; then
	say "ovl-snapshot: a tree, snapshots taken while it changes"
	t=$m/www
	mkdir -p $t/html
	echo "<h1>v1</h1>" >$t/html/index.html
	echo "v1" >$t/VERSION
	$tool init $t >/dev/null && echo "init: snapshot 1 armed"
	echo "v2" >$t/VERSION
	echo "<h1>v2</h1>" >$t/html/index.html
	echo "started" >$t/log
	echo "take: snapshot $($tool take $t after-v2) (VERSION=$(cat $t/VERSION))"
	echo "v3" >$t/VERSION
	mv $t/html $t/public
	echo "more" >>$t/log
	echo "live now: VERSION=$(cat $t/VERSION), $(ls $t | tr '\n' ' ')"
	$tool list $t | sed 's/^/  /'
	mkdir -p $m/view
	$tool mount $t 2 $m/view
	echo "snapshot 2 (after-v2), read-only at $m/view: VERSION=$(cat $m/view/VERSION), $(ls $m/view | tr '\n' ' ')"
	echo "  html/index.html: $(cat $m/view/html/index.html)   log: $(cat $m/view/log)"
	$tool umount $m/view
	echo "v4" >$t/VERSION
	echo "<h1>v4</h1>" >$t/public/index.html
	echo "read me" >$t/README
	echo "take: snapshot $($tool take $t after-v3) (VERSION=$(cat $t/VERSION))"
	echo "v5" >$t/VERSION
	rm -rf $t/public $t/log
	echo "live now: VERSION=$(cat $t/VERSION), $(ls $t | tr '\n' ' ')"
	for id in 1 2 3; do
		$tool mount $t $id $m/view
		echo "snapshot $id, read-only at $m/view: VERSION=$(cat $m/view/VERSION), $(ls $m/view | tr '\n' ' ')"
		echo "  $(cd $m/view && for f in html/index.html public/index.html log; do [ -e $f ] && printf '%s: %s   ' $f "$(cat $f | tr '\n' ' ')"; done)"
		$tool umount $m/view
	done
	$tool status $t | sed 's/^/  /'
	$tool delete $t 2 | sed 's/^/delete 2 (a middle one): /'
	$tool mount $t 1 $m/view
	echo "snapshot 1 after the merge: VERSION=$(cat $m/view/VERSION), $(ls $m/view | tr '\n' ' ')"
	echo "  html/index.html: $(cat $m/view/html/index.html)"
	$tool umount $m/view
	$tool delete $t 1 && echo "deleted snapshot 1 (the oldest): its space is free"
	$tool list $t | sed 's/^/  /'
	say "a change made while the active snapshot is not armed is reported by arm"
	umount $m/.www.snapshots/3/root
	echo "changed while not armed" >>$t/README
	touch $t/NEW
	rc=0
	$tool arm $t >$m/arm.out 2>&1 || rc=$?
	sed 's/^/  /' $m/arm.out
	echo "  arm exit status: $rc (4: armed, but changes were missed)"
	umount $m/.www.snapshots/3/root
fi

ctl=/sys/kernel/debug/fs_premod_test
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
if [ -e $ctl/watch ]; then
	say "pre-modification hooks: the test consumer watches $m/hooks"
	mkdir $m/hooks
	echo hello >$m/hooks/a
	echo $m/hooks >$ctl/watch
	echo more >>$m/hooks/a
	chmod 600 $m/hooks/a
	mv $m/hooks/a $m/hooks/b
	mkdir $m/hooks/dir
	rm $m/hooks/b
	echo "what the consumer saw, inside each hook, before each change:"
	sed 's/^/  /' $ctl/events
	say "a consumer can fail an operation before anything changes"
	echo "unlink 1" >$ctl/fail
	touch $m/hooks/keep
	if rm $m/hooks/keep 2>/dev/null; then
		echo "rm $m/hooks/keep: went through?!"
	else
		echo "rm $m/hooks/keep: refused by the consumer (EPERM); ls: $(ls $m/hooks | tr "\n" " ")"
	fi
	sed 's/^/  /' $ctl/events
	echo "all 0" >$ctl/fail
	echo 1 >$ctl/unwatch
else
	say "kernel without CONFIG_FS_PREMOD_TEST: no hook demo"
fi
umount $m
say "done"
