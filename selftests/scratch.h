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
#include <stdbool.h>
#include <stddef.h>
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
 * Does mount point @mp belong to @mnt: @mnt itself or below it; or, when
 * @fs is set, any SCRATCH_BASE/TAG-@fs directory or below it (whatever a
 * test on @fs mounted, whatever its tag).
 */
static inline bool scratch_mount_of(const char *mp, const char *mnt, const char *fs)
{
	size_t len, base = strlen(SCRATCH_BASE), flen;
	const char *end;

	if (!fs) {
		len = strlen(mnt);
		return !strncmp(mp, mnt, len) && (!mp[len] || mp[len] == '/');
	}
	if (strncmp(mp, SCRATCH_BASE "/", base + 1))
		return false;
	end = strchrnul(mp + base + 1, '/');
	flen = strlen(fs);
	return end - (mp + base + 1) > (ptrdiff_t)flen &&
	       end[-(ptrdiff_t)flen - 1] == '-' && !strncmp(end - flen, fs, flen);
}

/*
 * Unmount every mount of @mnt/@fs (scratch_mount_of), deepest first
 * (lazily when busy).  A test that failed or was killed by the harness's
 * timeout leaves its overlays and its scratch filesystem mounted; the next
 * mkfs of that disk would then fail.
 */
static inline void __scratch_umount(const char *mnt, const char *fs)
{
	char line[2 * PATH_MAX], mp[PATH_MAX], deepest[PATH_MAX];
	FILE *f;

	for (;;) {
		f = fopen("/proc/self/mountinfo", "r");
		if (!f)
			return;
		deepest[0] = 0;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
			    !scratch_mount_of(mp, mnt, fs))
				continue;
			if (strlen(mp) > strlen(deepest))
				strcpy(deepest, mp);
		}
		fclose(f);
		if (!deepest[0] || (umount2(deepest, 0) &&
				    umount2(deepest, MNT_DETACH)))
			return;
	}
}

/* Unmount every mount at or below @mnt. */
static inline void scratch_umount_tree(const char *mnt)
{
	__scratch_umount(mnt, NULL);
}

/*
 * Unmount whatever any test left mounted on filesystem @fs: every mount at
 * or below a SCRATCH_BASE/TAG-@fs directory.  Only @fs's: the tests of the
 * other filesystems may be running at the same time (qemu/guest-selftests.sh
 * runs them in parallel streams, one set of filesystems each).
 */
static inline void scratch_umount_fs(const char *fs)
{
	__scratch_umount("", fs);
}

/*
 * Wait until no filesystem holds @dev (an exclusive open succeeds): a
 * lazily unmounted filesystem lives on until its last user is gone.
 * 0, or -EBUSY after about a minute.
 */
static inline int scratch_wait_free(const char *dev)
{
	int fd, i;

	for (i = 0; i < 600; i++) {
		fd = open(dev, O_RDONLY | O_EXCL);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (errno != EBUSY)
			return -errno;
		if (i == 0) {
			sync();
			scratch_sh("echo 3 >/proc/sys/vm/drop_caches");
		}
		usleep(100000);
	}
	return -EBUSY;
}

/*
 * Make a fresh @fs and mount it on @mnt.  0, -ENODEV when the scratch disk
 * is missing (the caller skips and says why), or another -errno with the
 * reason on stderr.
 *
 * Whatever an earlier test on @fs left mounted under SCRATCH_BASE (a test
 * killed by its timeout runs no teardown) is unmounted first, and a disk
 * is waited for until no filesystem holds it, so that one failed test
 * never makes the next ones fail their setup.
 */
static inline int scratch_mount(const struct scratch_fs *fs, const char *mnt)
{
	char dev[64];
	int ret;

	scratch_umount_fs(fs->name);
	ret = scratch_mkdirs(mnt);
	if (ret)
		return ret;
	if (!fs->mkfs)
		return mount(fs->name, mnt, fs->name, 0, "size=1g") ? -errno : 0;
	ret = scratch_find_disk(fs->name, dev, sizeof(dev));
	if (ret)
		return ret;
	ret = scratch_wait_free(dev);
	if (ret) {
		fprintf(stderr, "# scratch: %s (%s) still in use after unmounting its mounts under %s: %s\n",
			dev, fs->name, SCRATCH_BASE, strerror(-ret));
		scratch_sh("grep -e ' %s ' -e ' overlay ' /proc/self/mountinfo | sed 's/^/# scratch: mounted: /' >&2",
			   dev);
		return ret;
	}
	if (scratch_sh("%s %s >/tmp/scratch-mkfs-%s.log 2>&1", fs->mkfs, dev, fs->name)) {
		fprintf(stderr, "# scratch: '%s %s' failed:\n", fs->mkfs, dev);
		scratch_sh("sed 's/^/# scratch: /' /tmp/scratch-mkfs-%s.log >&2", fs->name);
		return -EIO;
	}
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
 * In a FIXTURE_SETUP: make a fresh @fs with @mount_fn (scratch_mount) on SCRATCH_BASE/TAG-FSNAME, stored in @mnt (a char array).
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
