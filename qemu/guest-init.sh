#!/bin/sh
# PID 1 in the guest.  Mounts what a test needs on top of the read-only 9p
# host root, runs the payload that qemu/boot.sh left in the run directory
# (ovl.run= on the kernel command line), records its exit status there and
# reboots, which ends QEMU (-no-reboot).  Without a payload: a shell on the
# console.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=${TERM:-linux}

mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
for d in /tmp /run /var/tmp /root /dev/shm; do
	mount -t tmpfs -o mode=1777 tmpfs "$d" 2>/dev/null
done
chmod 0700 /root
hostname ovl-guest 2>/dev/null
ln -sf /proc/self/fd /dev/fd 2>/dev/null

run= cwd=/
for arg in $(cat /proc/cmdline); do
	case $arg in
	ovl.run=*) run=${arg#ovl.run=} ;;
	ovl.cwd=*) cwd=${arg#ovl.cwd=} ;;
	esac
done

if [ -n "$run" ]; then
	# The run directory is a writable 9p share mounted where the host has it.
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 ovlrun "$run" ||
		echo "guest-init: cannot mount run dir $run" >/dev/console
	cd "$cwd" || cd /
	echo "guest-init: running $run/cmd" >/dev/console
	( sh "$run/cmd"; echo $? >"$run/rc" ) >"$run/output.log" 2>&1 </dev/null
	echo "guest-init: payload exited with status $(cat "$run/rc")" >/dev/console
	sync
	umount "$run" 2>/dev/null
else
	cd "$cwd" || cd /
	echo "guest-init: no payload; shell on the console, 'exit' to power off"
	setsid -c sh -i </dev/ttyS0 >/dev/ttyS0 2>&1
fi
sync
busybox reboot -f
sleep 10
