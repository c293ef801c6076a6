#!/bin/sh
# coccinelle, report mode, every script of linux/scripts/coccinelle on the
# .c files the series touches; fails on a report that the file did not
# already give at v6.12.95 (compared without line numbers).
set -eu

tag=v6.12.95
files=$(scripts/touched.sh c)
if [ -z "$files" ]; then
	echo "cocci: the series touches no C file; nothing to check"
	exit 0
fi
work=build/cocci
rm -rf "$work"
mkdir -p "$work/base"
inc="-I linux/arch/x86/include -I linux/arch/x86/include/generated -I linux/include -I linux/include/uapi -I linux/arch/x86/include/uapi --include linux/include/linux/compiler-version.h --include linux/include/linux/kconfig.h"

# reports of every report-mode semantic patch on FILE, normalised
cocci_run() {
	for sp in $(grep -rl 'virtual report' linux/scripts/coccinelle --include='*.cocci'); do
		# shellcheck disable=SC2086 # include options, split on purpose
		timeout 120 spatch --very-quiet -D report --no-show-diff --include-headers-for-types \
			$inc --sp-file "$sp" "$1" 2>/dev/null |
			sed -E "s|$2|F|; s/:[0-9]+(:[0-9]+(-[0-9]+)?)?:/:/g" |
			sed "s|^|$(basename "$sp" .cocci): |" || true
	done | sort
}

bad=0
for f in $files; do
	cocci_run "linux/$f" "linux/$f" >"$work/head.txt"
	: >"$work/base.txt"
	if git -C linux cat-file -e "$tag:$f" 2>/dev/null; then
		mkdir -p "$work/base/$(dirname "$f")"
		git -C linux show "$tag:$f" >"$work/base/$f"
		cocci_run "$work/base/$f" "$work/base/$f" >"$work/base.txt"
	fi
	new=$(comm -23 "$work/head.txt" "$work/base.txt")
	if [ -n "$new" ]; then
		echo "cocci: $f: new reports:"
		echo "$new" | sed 's/^/  /'
		bad=1
	fi
done
echo "cocci: $(echo "$files" | wc -w) files checked"
[ $bad = 0 ]
