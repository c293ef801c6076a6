#!/bin/sh
# Install the Debian packages that building, booting and testing need.
set -eu

pkgs="build-essential flex bison bc libelf-dev libssl-dev cpio kmod rsync xz-utils
ccache qemu-system-x86 qemu-utils sparse coccinelle python3 python3-ply python3-git
e2fsprogs xfsprogs btrfs-progs attr acl busybox-static util-linux fio
stress-ng dbench fsmark
git ca-certificates shellcheck"

if [ "$(id -u)" != 0 ]; then
	echo "deps: run as root (apt-get install)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # a list of package names
apt-get install -y --no-install-recommends $pkgs ||
	{ apt-get update && apt-get install -y --no-install-recommends $pkgs; }
