#!/bin/sh
# Rewrite patches/ from the commits v6.12.95..HEAD in linux/.
#
# Output is stable: no commit ids, no numbering in subjects, no version
# signature, so re-exporting an unchanged tree changes no byte and a diff
# of patches/ shows only what a commit changed.  A hand-written
# patches/0000-cover-letter.patch is kept as is.
set -eu

tag=v6.12.95
tree=linux
out=patches

[ -d "$tree/.git" ] || { echo "export: no linux/; run 'make linux' first" >&2; exit 1; }
if [ -n "$(git -C "$tree" status --porcelain --untracked-files=no)" ]; then
	echo "export: linux/ has uncommitted changes; commit them first" >&2
	exit 1
fi

mkdir -p "$out"
find "$out" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' \
	! -name '0000-cover-letter.patch' -delete
git -C "$tree" -c core.abbrev=12 -c diff.renames=true format-patch --quiet \
	--zero-commit --no-signature --no-numbered \
	--output-directory "../$out" "$tag"..HEAD
{
	echo "# Applied in order onto $tag by 'make linux'; written by 'make export'."
	find "$out" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' \
		! -name '0000-cover-letter.patch' -printf '%f\n' | sort
} >"$out/series.new"
mv "$out/series.new" "$out/series"
git -C "$tree" rev-list --reverse "$tag"..HEAD | while read -r c; do
	git -C "$tree" show "$c" | git patch-id --stable | cut -d' ' -f1
done >"$tree/.git/ovl-synced"
echo "export: $(grep -vc '^#' "$out/series" || true) patches in $out/"
