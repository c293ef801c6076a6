/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Scratch filesystems for the ovl-snapshots selftests.
 *
 * Each block filesystem under test lives on a virtio disk that
 * qemu/boot.sh attaches with the filesystem's name as its serial; tmpfs
 * needs no disk.  scratch_mount() makes a fresh filesystem and mounts it.
 */
#ifndef OVL_SELFTESTS_SCRATCH_H
#define OVL_SELFTESTS_SCRATCH_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SCRATCH_BASE "/tmp/ovl-selftests"

struct scratch_fs {
	const char *name;	/* fstype, and the serial of its disk */
	const char *mkfs;	/* NULL: a memory fs, no disk */
};

/* Find /dev/vdX whose serial is @serial; 0 or -ENODEV. */
static inline int scratch_find_disk(const char *serial, char *dev, size_t len)
{
	struct dirent *de;
	int ret = -ENODEV;
	DIR *d;

	d = opendir("/sys/block");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX], buf[64] = "";
		FILE *f;

		if (strncmp(de->d_name, "vd", 2))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/serial", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
		if (!strcmp(buf, serial)) {
			snprintf(dev, len, "/dev/%s", de->d_name);
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

static inline int scratch_mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	char *p;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Run a shell command, quietly; its exit status, or -1. */
static inline int scratch_sh(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline int scratch_sh(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * Make a fresh @fs and mount it on @mnt.  0, -ENODEV when the scratch disk
 * is missing (the caller skips and says why), or another -errno.
 */
static inline int scratch_mount(const struct scratch_fs *fs, const char *mnt)
{
	char dev[64];
	int ret;

	ret = scratch_mkdirs(mnt);
	if (ret)
		return ret;
	if (!fs->mkfs)
		return mount(fs->name, mnt, fs->name, 0, "size=1g") ? -errno : 0;
	ret = scratch_find_disk(fs->name, dev, sizeof(dev));
	if (ret)
		return ret;
	if (scratch_sh("%s %s >/dev/null 2>&1", fs->mkfs, dev))
		return -EIO;
	return mount(dev, mnt, fs->name, 0, NULL) ? -errno : 0;
}

/* Read a whole small file into @buf (NUL-terminated); its length or -errno. */
static inline ssize_t scratch_read(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	else
		buf[n] = 0;
	close(fd);
	return n;
}

static inline int scratch_write(const char *path, const char *data, int flags)
{
	ssize_t n, len = strlen(data);
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | flags, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	close(fd);
	if (n < 0)
		return -errno;
	return n == len ? 0 : -EIO;
}

/*
 * The filesystems under test, as kselftest fixture variants of @f, whose
 * FIXTURE_VARIANT has a "struct scratch_fs fs" member.  Use after
 * including kselftest_harness.h.
 */
#define SCRATCH_FS_VARIANTS(f)						\
FIXTURE_VARIANT_ADD(f, ext4) {						\
	.fs = { .name = "ext4", .mkfs = "mkfs.ext4 -q -F" },		\
};									\
FIXTURE_VARIANT_ADD(f, xfs) {						\
	.fs = { .name = "xfs", .mkfs = "mkfs.xfs -q -f" },		\
};									\
FIXTURE_VARIANT_ADD(f, btrfs) {						\
	.fs = { .name = "btrfs", .mkfs = "mkfs.btrfs -q -f" },		\
};									\
FIXTURE_VARIANT_ADD(f, tmpfs) {						\
	.fs = { .name = "tmpfs" },					\
}

/*
 * In a FIXTURE_SETUP: make a fresh @fs with @mount_fn (scratch_mount or
 * snap_scratch) on SCRATCH_BASE/TAG-FSNAME, stored in @mnt (a char array).
 * Skips, saying why, when the scratch disk is missing; fails on any other
 * error.
 */
#define SCRATCH_SETUP(mount_fn, fs, mnt, tag)					\
	do {									\
		int __ret;							\
										\
		snprintf(mnt, sizeof(mnt), SCRATCH_BASE "/" tag "-%s",		\
			 (fs)->name);						\
		__ret = mount_fn(fs, mnt);					\
		if (__ret == -ENODEV)						\
			SKIP(return, "no scratch disk with serial '%s'",	\
			     (fs)->name);					\
		ASSERT_EQ(0, __ret) TH_LOG("mount %s: %s", (fs)->name,		\
					   strerror(-__ret));			\
	} while (0)

#endif /* OVL_SELFTESTS_SCRATCH_H */
