#!/bin/sh
# (Re)create linux/: the pinned upstream tree as a git repo, tagged at the
# base, with patches/series applied as commits.
#
# Safe to run again: it does nothing when linux/ already carries exactly
# patches/, reapplies when patches/ changed and linux/ holds no work of its
# own, and refuses (exit 1, saying why) when linux/ has uncommitted changes
# or commits that are not in patches/.  FORCE=1 discards such work.
set -eu

tag=v6.12.95
tree=linux
patches=patches
# Fixed identity and dates: the same tarball always gives the same base commit.
export GIT_AUTHOR_NAME="Linus Torvalds" GIT_AUTHOR_EMAIL="torvalds@linux-foundation.org"
export GIT_COMMITTER_NAME="ovl-snapshots" GIT_COMMITTER_EMAIL="ovl-snapshots@localhost"

# patch-ids of commits $tag..HEAD in linux/, one per line, in order
tree_ids() {
	git -C "$tree" rev-list --reverse "$tag"..HEAD | while read -r c; do
		git -C "$tree" show "$c" | git patch-id --stable | cut -d' ' -f1
	done
}

# patch-ids of patches/series, in order
series_ids() {
	[ -f "$patches/series" ] || return 0
	grep -v '^[[:space:]]*\(#\|$\)' "$patches/series" | while read -r p; do
		git patch-id --stable <"$patches/$p" | cut -d' ' -f1
	done
}

apply_series() {
	[ -f "$patches/series" ] || return 0
	grep -v '^[[:space:]]*\(#\|$\)' "$patches/series" | while read -r p; do
		git -C "$tree" am --quiet --committer-date-is-author-date "../$patches/$p" || {
			echo "linux-tree: $p does not apply; linux/ left mid-am" >&2
			exit 1
		}
	done
	series_ids >"$tree/.git/ovl-synced"
}

if [ -d "$tree/.git" ]; then
	if [ -n "$(git -C "$tree" status --porcelain)" ] && [ "${FORCE:-0}" != 1 ]; then
		echo "linux-tree: linux/ has uncommitted changes:" >&2
		git -C "$tree" status --short | head -n 10 >&2
		echo "linux-tree: commit them and run 'make export', or rerun with FORCE=1 to discard" >&2
		exit 1
	fi
	now=$(tree_ids)
	want=$(series_ids)
	if [ "$now" = "$want" ]; then
		echo "linux-tree: linux/ already carries patches/ ($(echo "$want" | grep -c . || true) patches)"
		exit 0
	fi
	synced=$(cat "$tree/.git/ovl-synced" 2>/dev/null || true)
	if [ "$now" != "$synced" ] && [ "${FORCE:-0}" != 1 ]; then
		echo "linux-tree: linux/ has commits that are not in patches/:" >&2
		git -C "$tree" log --oneline "$tag"..HEAD | head -n 10 >&2
		echo "linux-tree: run 'make export' to keep them, or rerun with FORCE=1 to discard" >&2
		exit 1
	fi
	echo "linux-tree: patches/ changed; reapplying onto $tag"
	git -C "$tree" am --abort >/dev/null 2>&1 || true
	git -C "$tree" reset --quiet --hard "$tag"
	git -C "$tree" clean -q -fdx
	apply_series
	exit 0
fi

tarball=$(scripts/fetch-tarball.sh)
rm -rf "$tree.tmp"
mkdir "$tree.tmp"
echo "linux-tree: unpacking $tarball"
tar -xf "$tarball" -C "$tree.tmp" --strip-components=1
git -C "$tree.tmp" init --quiet
git -C "$tree.tmp" config user.name "$GIT_COMMITTER_NAME"
git -C "$tree.tmp" config user.email "$GIT_COMMITTER_EMAIL"
git -C "$tree.tmp" config gc.auto 0
git -C "$tree.tmp" add -A -f
GIT_AUTHOR_DATE="2026-06-19T12:00:00Z" GIT_COMMITTER_DATE="2026-06-19T12:00:00Z" \
	git -C "$tree.tmp" commit --quiet -m "Linux ${tag#v}"
git -C "$tree.tmp" tag "$tag"
mv "$tree.tmp" "$tree"
apply_series
echo "linux-tree: linux/ at $(git -C "$tree" describe --tags) ($(git -C "$tree" rev-list --count "$tag"..HEAD) patches)"
