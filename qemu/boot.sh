#!/bin/sh
# Boot the guest kernel under QEMU (TCG) with the host root shared read-only
# over 9p and fresh scratch disks, and run one command in it.
#
# usage: qemu/boot.sh [COMMAND...]
#   With a command: runs it in the guest (cwd: this project), prints its
#   output as it comes, and exits with its status.  When the guest does not
#   report one (hang, panic, timeout) it prints the last console lines and
#   exits 125.  The run directory (console.log, output.log, rc) is kept in
#   build/run/latest.
#   Without: an interactive shell on the serial console.
# Environment: KERNEL (bzImage), TIMEOUT (seconds, default 1800),
#   RUN_DIR (default build/run/<time>), QEMU_EXTRA (more QEMU arguments),
#   CMDLINE_EXTRA (appended to the kernel command line; later wins).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
# shellcheck source=x86_64.conf
. "$here/x86_64.conf"
kernel=${KERNEL:-$top/build/kernel-debug/bzImage}
timeout=${TIMEOUT:-1800}
[ -f "$kernel" ] || { echo "boot: no kernel at $kernel; run 'make kernel'" >&2; exit 2; }

run=${RUN_DIR:-$top/build/run/$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$run"
run=$(cd "$run" && pwd)
rm -f "$run/rc" "$run/output.log" "$run/console.log"
ln -sfn "$run" "$top/build/run/latest" 2>/dev/null || true

disks=
for fs in $SCRATCH_DISKS; do
	img=$run/disk-$fs.img
	rm -f "$img"
	truncate -s "$SCRATCH_SIZE" "$img"
	disks="$disks -drive file=$img,if=none,format=raw,cache=unsafe,id=$fs"
	disks="$disks -device virtio-blk-pci,drive=$fs,serial=$fs"
done
bios=
[ -f "$QEMU_BIOS" ] && bios="-bios $QEMU_BIOS"
rootfs="-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
rootfs="$rootfs -device virtio-9p-pci,fsdev=hostroot,mount_tag=/dev/root"
cmdline="$KERNEL_CMDLINE init=$here/guest-init.sh ovl.cwd=$top ${CMDLINE_EXTRA:-}"
# What every boot has; only the console and the run dir differ below.
common="$QEMU_MACHINE $bios -no-reboot -display none -kernel $kernel $rootfs $disks ${QEMU_EXTRA:-}"

# shellcheck disable=SC2086 # word splitting of the option lists is wanted
if [ $# -eq 0 ]; then
	exec $QEMU $common -serial mon:stdio -append "$cmdline quiet"
fi

printf '%s\n' "$*" >"$run/cmd"
: >"$run/output.log"
# shellcheck disable=SC2086
timeout -k 10 "$timeout" $QEMU $common -serial "file:$run/console.log" -monitor none \
	-append "$cmdline ovl.run=$run" \
	-virtfs "local,path=$run,mount_tag=ovlrun,security_model=none,multidevs=remap" </dev/null &
qpid=$!
tail -n +1 -f --pid=$qpid "$run/output.log" &
tpid=$!
qrc=0
wait $qpid || qrc=$?
wait $tpid 2>/dev/null || true
rm -f "$run"/disk-*.img

if [ ! -s "$run/rc" ]; then
	if [ $qrc = 124 ]; then
		echo "boot: guest timed out after ${timeout}s" >&2
	else
		echo "boot: guest ended without reporting a status (qemu exit $qrc)" >&2
	fi
	echo "boot: last console lines ($run/console.log):" >&2
	tail -n 40 "$run/console.log" >&2 2>/dev/null || true
	exit 125
fi
exit "$(cat "$run/rc")"
