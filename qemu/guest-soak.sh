#!/bin/sh
# Run in the guest by 'make soak': the long form of the proof tools, in
# the same KTAP format as 'make check' (qemu/guest-selftests.sh).
# usage: qemu/guest-soak.sh LOGDIR SEEDS OPS SEED0
#   LOGDIR: a writable directory (the run dir) for the logs of failed seeds
set -u

logdir=$1 seeds=${2:-250} ops=${3:-1000} seed0=${4:-1000}
SNAPSHOT_FUZZ_ARGS="--seeds $seeds --seed $seed0 --ops $ops --log-dir $logdir/fuzz-logs"
LIVE_LOADS_ARGS="--long"
# every filesystem for the tests that make check runs on one only (the
# 500-take layer cap in snapshot_tool)
OVL_QUICK=
export SNAPSHOT_FUZZ_ARGS LIVE_LOADS_ARGS OVL_QUICK
exec "$(dirname "$0")/guest-selftests.sh" snapshot_fuzz live_loads snapshot_tool
