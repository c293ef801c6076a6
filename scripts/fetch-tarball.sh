#!/bin/sh
# Print the path of the pinned upstream tarball, fetching it once per machine.
#
# LINUX_TARBALL=path overrides the download (e.g. a copy from kernel.org);
# its checksum is verified all the same.
set -eu

version=6.12.95
debver=6.12.95-1~bpo12+1
sha256=82ee332c20307c8e75b59c2779f3d554c592f5efa454bacf1e58daced5199f89
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ovl-snapshots
srclist=/etc/apt/sources.list.d/ovl-snapshots-src.sources

verify() {
	echo "$sha256  $1" | sha256sum -c --status || {
		echo "fetch-tarball: $1: sha256 mismatch (want $sha256)" >&2
		exit 1
	}
}

if [ -n "${LINUX_TARBALL:-}" ]; then
	verify "$LINUX_TARBALL"
	echo "$LINUX_TARBALL"
	exit 0
fi

tarball=$cache/linux_$version.orig.tar.xz
if [ ! -f "$tarball" ]; then
	mkdir -p "$cache"
	if [ ! -f "$srclist" ]; then
		cat >"$srclist" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
		apt-get update >&2
	fi
	(cd "$cache" && apt-get source --download-only "linux=$debver") >&2 ||
		(apt-get update >&2 &&
		 cd "$cache" && apt-get source --download-only "linux=$debver") >&2
	rm -f "$cache/linux_$debver.dsc" "$cache/linux_$debver.debian.tar.xz"
fi
verify "$tarball"
echo "$tarball"
