#!/bin/sh
# coccinelle, report mode, every script of linux/scripts/coccinelle on the
# .c files the series touches; fails on a report that the files did not
# already give at v6.12.95 (compared without line numbers).
#
# Each semantic patch runs once over all touched files (spatch -j);
# only the scripts that report something are run again on the v6.12.95
# versions of the files, to tell old reports from new ones.
set -eu

tag=v6.12.95
files=$(scripts/touched.sh c)
if [ -z "$files" ]; then
	echo "cocci: the series touches no C file; nothing to check"
	exit 0
fi
work=build/cocci
rm -rf "$work"
mkdir -p "$work/head" "$work/base"
jobs=${JOBS:-$(nproc)}
k=$(pwd)/linux
inc="-I $k/arch/x86/include -I $k/arch/x86/include/generated -I $k/include -I $k/include/uapi -I $k/arch/x86/include/uapi --include $k/include/linux/compiler-version.h --include $k/include/linux/kconfig.h"

# the same relative paths in both trees, so reports compare by file
bfiles=
for f in $files; do
	mkdir -p "$work/head/$(dirname "$f")"
	cp "linux/$f" "$work/head/$f"
	if git -C linux cat-file -e "$tag:$f" 2>/dev/null; then
		mkdir -p "$work/base/$(dirname "$f")"
		git -C linux show "$tag:$f" >"$work/base/$f"
		bfiles="$bfiles $f"
	fi
done

# reports of semantic patch SP on the FILES under DIR, normalised
cocci_run() {
	sp=$1 dir=$2
	shift 2
	# shellcheck disable=SC2086 # include options, split on purpose
	(cd "$dir" && timeout 600 spatch --very-quiet -j "$jobs" -D report --no-show-diff \
		$inc --sp-file "$k/../$sp" "$@" 2>"$k/../$work/spatch.err") |
		sed -E 's/:[0-9]+(:[0-9]+(-[0-9]+)?)?:/:/g; s/line [0-9]+/line N/g' |
		sed "s|^|$(basename "$sp" .cocci): |" | sort || true
}

bad=0 n=0
for sp in $(grep -rl 'virtual report' linux/scripts/coccinelle --include='*.cocci' | sort); do
	n=$((n + 1))
	# shellcheck disable=SC2086
	cocci_run "$sp" "$work/head" $files >"$work/head.txt"
	[ -s "$work/head.txt" ] || continue
	: >"$work/base.txt"
	# shellcheck disable=SC2086
	[ -z "$bfiles" ] || cocci_run "$sp" "$work/base" $bfiles >"$work/base.txt"
	new=$(comm -23 "$work/head.txt" "$work/base.txt")
	if [ -n "$new" ]; then
		echo "cocci: new reports:"
		echo "$new" | sed 's/^/  /'
		bad=1
	fi
done
echo "cocci: $n semantic patches on $(echo "$files" | wc -w) files"
[ $bad = 0 ]
