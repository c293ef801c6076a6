#!/bin/sh
# checkpatch.pl --strict on every patch in patches/series; any ERROR,
# WARNING or CHECK fails.  CAMELCASE is ignored: fs_parameter enums are
# Opt_* throughout fs/ (overlayfs included) and new options must match.
set -eu
# checkpatch runs scripts/spdxcheck.py with "env python3", which needs
# python3-ply: prefer Debian's python3 (which has it) over any other.
PATH=/usr/bin:$PATH

[ -f patches/series ] || { echo "checkpatch: no patches/series"; exit 0; }
n=0 bad=0
for p in $(grep -v '^[[:space:]]*\(#\|$\)' patches/series); do
	n=$((n + 1))
	if ! out=$(cd linux && scripts/checkpatch.pl --strict --ignore CAMELCASE --quiet --no-summary \
			--show-types "../patches/$p" 2>&1); then
		echo "checkpatch: $p:"
		echo "$out" | sed 's/^/  /'
		bad=$((bad + 1))
	elif [ -n "$out" ]; then
		echo "checkpatch: $p:"
		echo "$out" | sed 's/^/  /'
		bad=$((bad + 1))
	fi
done
echo "checkpatch: $n patches, $bad with findings"
[ $bad = 0 ]
