#!/bin/sh
# Run in the guest: every selftest in DIR/list (default build/selftests),
# or only those named, as one KTAP document in the kselftest runner's
# format (each test's own TAP indented under a "# selftests:" header).
# Exit status: 0 when every test binary exited 0.
set -u

dir=${SELFTESTS_DIR:-build/selftests}
if [ $# -gt 0 ]; then
	tests=$*
else
	tests=$(cat "$dir/list")
fi
n=$(echo "$tests" | wc -w)
echo "TAP version 13"
echo "1..$n"
# Python testers print as they go (a killed run still shows how far it got).
export PYTHONUNBUFFERED=1
i=0 rc=0
for t in $tests; do
	i=$((i + 1))
	echo "# selftests: ovl-snapshots: $t"
	st=0
	t0=$(date +%s)
	( "$dir/$t" 2>&1; echo "ovl-exit:$?" ) | python3 -u "$(dirname "$0")/ktap-indent.py" | tee "/tmp/$t.out"
	echo "# $t: $(( $(date +%s) - t0 ))s"
	st=$(sed -n 's/^# ovl-exit:\([0-9]*\)$/\1/p' "/tmp/$t.out")
	if [ "${st:-1}" = 0 ]; then
		echo "ok $i selftests: ovl-snapshots: $t"
	elif [ "$st" = 4 ]; then
		echo "ok $i selftests: ovl-snapshots: $t # SKIP"
	else
		echo "not ok $i selftests: ovl-snapshots: $t # exit=$st"
		rc=1
	fi
done
exit $rc
