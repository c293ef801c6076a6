#!/bin/sh
# List the C files the series touches, for the static checks.
#   touched.sh c        .c files changed in v6.12.95..HEAD (still present)
#   touched.sh sparse   .c files to run sparse on: the touched ones, and
#                       when a header changed, every built .c file of
#                       fs/, fs/notify/ and fs/overlayfs/ (BUILD=objdir)
set -eu
tag=v6.12.95
changed=$(git -C linux diff --name-only --diff-filter=d "$tag" HEAD -- '*.c' '*.h')
cfiles=$(echo "$changed" | grep '\.c$' || true)
case ${1:-c} in
c) echo "$cfiles" | grep . || true ;;
sparse)
	{
		echo "$cfiles"
		if echo "$changed" | grep -q '\.h$'; then
			for d in fs fs/notify fs/overlayfs; do
				for o in "$BUILD/$d"/*.o; do
					[ -f "$o" ] || continue
					f=$d/$(basename "$o" .o).c
					[ -f "linux/$f" ] && echo "$f"
				done
			done
		fi
	} | grep . | sort -u || true
	;;
*) echo "touched: usage: touched.sh c|sparse" >&2; exit 2 ;;
esac
