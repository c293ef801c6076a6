#!/bin/sh
# Run in the guest: every selftest in DIR/list (default build/selftests),
# or only those named, as one KTAP document in the kselftest runner's
# format (each test's own TAP indented under a "# selftests:" header).
# Exit status: 0 when every test binary exited 0.
#
# The filesystems under test are split into streams that run at the same
# time (the guest has two CPUs; one test uses about one): every binary
# runs once in each stream, on that stream's filesystems only (the
# harness's -v filters; --fs for the python testers), and is reported as
# NAME[FS,FS].  The streams share nothing: each filesystem has its own
# disk and mount points, and the tests that set global state (the lease
# break time) lock it; premod_hooks, whose test consumer is one for the
# whole kernel, runs first and alone, on every filesystem.  A binary's
# block is written whole when it ends; while it runs, its output grows in
# RUN/stream-NAME[FS,FS].log next to output.log.
#
# Environment:
#   OVL_STREAMS  the streams, filesystems comma-separated
#                (default "btrfs,tmpfs ext4,xfs"; "ext4,xfs,btrfs,tmpfs":
#                one stream, the old serial order)
#   OVL_QUICK    tests that make check runs on one filesystem only, as
#                BINARY:FIXTURE.VARIANT.TEST (default: the 500-take layer
#                cap, which is the tool's and overlayfs's, not the
#                filesystem's); make soak sets it empty: every filesystem
#   OVL_SERIAL   binaries that run alone, before the streams, on the
#                filesystems of every stream (default: premod_hooks)
#   SELFTESTS_DIR
set -u

dir=${SELFTESTS_DIR:-build/selftests}
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ]; then
	tests=$*
else
	tests=$(cat "$dir/list")
fi
streams=${OVL_STREAMS:-btrfs,tmpfs ext4,xfs}
quick=${OVL_QUICK-snapshot_tool:tool.tmpfs.depth_limit}
serial_names=${OVL_SERIAL-premod_hooks}
nstreams=$(echo "$streams" | wc -w)
allfs=$(echo "$streams" | tr ' ' ,)
serial='' parallel=''
for t in $tests; do
	case " $serial_names " in
	*" $t "*) serial="$serial $t" ;;
	*) parallel="$parallel $t" ;;
	esac
done
n=$(( $(echo "$serial" | wc -w) + $(echo "$parallel" | wc -w) * nstreams ))

# Where the per-binary logs go: next to output.log when it is a file (the
# run directory, shared with the host), else /tmp.
logs=/tmp/ovl-selftests-logs
out=$(readlink "/proc/$$/fd/1" 2>/dev/null || true)
case $out in
/*/output.log) [ -w "$(dirname "$out")" ] && logs=$(dirname "$out") ;;
esac
mkdir -p "$logs"
state=$(mktemp -d /tmp/ovl-selftests-run.XXXXXX)
echo 0 >"$state/count"
: >"$state/lock"

echo "TAP version 13"
echo "1..$n"
# Python testers print as they go (a killed run still shows how far it got).
export PYTHONUNBUFFERED=1

# filter_args BINARY FSLIST: the arguments that limit BINARY to FSLIST
filter_args() {
	b=$1 fsl=$2
	if head -n 1 "$dir/$b" | grep -q python; then
		echo "--fs $fsl"
		return
	fi
	a=
	for q in $quick; do
		[ "${q%%:*}" = "$b" ] || continue
		ftest=${q#*:}
		v=${ftest#*.}
		v=${v%%.*}
		case ",$fsl," in
		*,"$v",*) a="$a -r $ftest" ;;
		esac
		a="$a -T ${ftest##*.}"
	done
	for fs in $(echo "$fsl" | tr , ' '); do
		a="$a -v $fs"
	done
	echo "$a"
}

# run_one BINARY FSLIST [NAME]: run it, then write its block and result line
run_one() {
	b=$1 fsl=$2 name=${3:-$1}
	[ $# -lt 3 ] && [ "$nstreams" -gt 1 ] && name="${b}[$fsl]"
	log="$logs/stream-$name.log"
	t0=$(date +%s)
	# shellcheck disable=SC2046 # the filter arguments, split on purpose
	( "$dir/$b" $(filter_args "$b" "$fsl") 2>&1; echo "ovl-exit:$?" ) |
		python3 -u "$here/ktap-indent.py" >"$log"
	secs=$(( $(date +%s) - t0 ))
	st=$(sed -n 's/^# ovl-exit:\([0-9]*\)$/\1/p' "$log")
	(
		flock 9
		i=$(( $(cat "$state/count") + 1 ))
		echo "$i" >"$state/count"
		echo "# selftests: ovl-snapshots: $name"
		cat "$log"
		echo "# $name: ${secs}s"
		if [ "${st:-1}" = 0 ]; then
			echo "ok $i selftests: ovl-snapshots: $name"
		elif [ "$st" = 4 ]; then
			echo "ok $i selftests: ovl-snapshots: $name # SKIP"
		else
			echo "not ok $i selftests: ovl-snapshots: $name # exit=$st"
			echo 1 >"$state/failed"
		fi
	) 9>"$state/lock"
}

for t in $serial; do
	run_one "$t" "$allfs" "$t"
done
pids=
for fsl in $streams; do
	(
		for t in $parallel; do
			run_one "$t" "$fsl"
		done
	) &
	pids="$pids $!"
done
for p in $pids; do
	wait "$p"
done
rc=0
[ -e "$state/failed" ] && rc=1
rm -rf "$state"
exit $rc
