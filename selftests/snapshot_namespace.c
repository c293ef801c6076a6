// SPDX-License-Identifier: GPL-2.0
/*
 * Overlayfs snapshots and namespace operations: while names in the live
 * tree are created, removed, renamed (files and non-empty directories,
 * repeatedly, back, over existing names, RENAME_EXCHANGE) and linked, the
 * snapshot keeps showing the tree of its moment.
 *
 * The reference is "cp -a" of the live tree taken right before the
 * snapshot mount.  Every test compares the snapshot with it warm, after
 * drop_caches, and after umount and a new mount on the same store, and
 * checks that the live tree did change.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>

#include "scratch.h"
#include "snaptree.h"
#include "harness.h"

FIXTURE(ns) {
	char mnt[PATH_MAX];
	char live[PATH_MAX];
	char store[PATH_MAX];
	char ref[PATH_MAX];
	char snap[PATH_MAX];
	char opts[4 * PATH_MAX];
	char diff[DIFF_LEN];
};

FIXTURE_VARIANT(ns) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(ns);

/* A path under the live tree */
#define L(self, name) snap_path((self)->live, name)

static const char *tree_diff(struct _test_data_ns *self, const char *a,
			     const char *b)
{
	return snap_diff(self->diff, a, b);
}

static int mount_snapshot(struct _test_data_ns *self)
{
	return snap_mount(self->opts, self->snap);
}

/*
 * Take the snapshot again: a new store, a new reference.  Returns 0 or a
 * negative errno of the mount.
 */
static int resnap(struct _test_data_ns *self)
{
	umount2(self->snap, 0);
	if (scratch_sh("rm -rf %s %s/upper %s/work && mkdir %s/upper %s/work && cp -a %s %s",
	       self->ref, self->store, self->store, self->store, self->store,
	       self->live, self->ref))
		return -EIO;
	return mount_snapshot(self);
}

/* The snapshot equals the reference: warm, cold, and mounted again */
#define CHECK_SNAPSHOT()						\
	do {								\
		EXPECT_STRNE("", tree_diff(self, self->live, self->ref)) \
			TH_LOG("the live tree did not change");		\
		EXPECT_STREQ("", tree_diff(self, self->snap, self->ref)) \
			TH_LOG("warm");					\
		ASSERT_EQ(0, drop_caches());				\
		EXPECT_STREQ("", tree_diff(self, self->snap, self->ref)) \
			TH_LOG("after drop_caches");			\
		ASSERT_EQ(0, umount2(self->snap, 0));			\
		ASSERT_EQ(0, mount_snapshot(self));			\
		EXPECT_STREQ("", tree_diff(self, self->snap, self->ref)) \
			TH_LOG("mounted again");			\
	} while (0)

FIXTURE_SETUP(ns)
{
	char p[PATH_MAX];
	int ret;

	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "ns");

	ASSERT_EQ(0, snap_layout(self->mnt, self->live, self->store, self->ref,
				 self->snap));
	join(p, self->mnt, "outside");
	ASSERT_EQ(0, mkdir(p, 0755));

	/* The live tree: files, a hard link pair, a deep tree, special files */
	ASSERT_EQ(0, scratch_write(L(self, "f"), "hello world", O_EXCL));
	ASSERT_EQ(0, lsetxattr(L(self, "f"), "user.k", "v1", 2, 0));
	ASSERT_EQ(0, scratch_write(L(self, "g"), "second file", O_EXCL));
	ASSERT_EQ(0, mkdir(L(self, "d"), 0750));
	ASSERT_EQ(0, scratch_write(L(self, "d/g"), "nested", O_EXCL));
	ASSERT_EQ(0, mkdir(L(self, "d/e"), 0755));
	ASSERT_EQ(0, scratch_write(L(self, "d/e/deep"), "deep data", O_EXCL));
	ASSERT_EQ(0, lsetxattr(L(self, "d/e"), "user.dir", "e", 1, 0));
	ASSERT_EQ(0, scratch_write(L(self, "h1"), "hard linked", O_EXCL));
	ASSERT_EQ(0, link(L(self, "h1"), L(self, "d/h2")));
	ASSERT_EQ(0, symlink("d/g", L(self, "link")));
	ASSERT_EQ(0, mkfifo(L(self, "fifo"), 0600));
	ASSERT_EQ(0, mkdir(L(self, "empty"), 0700));
	ASSERT_EQ(0, scratch_sh("cd %s && mkdir -p t/1/2/3/4/5/6/7/8 && for i in 1 1/2 1/2/3 1/2/3/4 1/2/3/4/5 1/2/3/4/5/6 1/2/3/4/5/6/7 1/2/3/4/5/6/7/8; do echo level $i > t/$i/file; done",
			self->live));
	ASSERT_EQ(0, scratch_sh("dd if=/dev/urandom of=%s bs=64k count=8 status=none",
			L(self, "big")));

	/* Files and directories get the same mtimes in both trees */
	snprintf(self->opts, sizeof(self->opts),
		 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,snapshot",
		 self->live, self->store, self->store);
	ret = resnap(self);
	if (ret == -EINVAL)
		SKIP(return, "overlay has no snapshot option (kernel without the series?)");
	ASSERT_EQ(0, ret) TH_LOG("mount snapshot: %s", strerror(-ret));
	ASSERT_STREQ("", tree_diff(self, self->snap, self->ref));
}

FIXTURE_TEARDOWN(ns)
{
	if (umount2(self->snap, 0) && errno != EINVAL)
		fprintf(stderr, "# umount %s: %s\n", self->snap, strerror(errno));
	if (umount2(self->mnt, 0)) {
		fprintf(stderr, "# umount %s: %s\n", self->mnt, strerror(errno));
		umount2(self->mnt, MNT_DETACH);
	}
}

/* New names everywhere; a new hard link must not carry changes back */
TEST_F(ns, create)
{
	char path[PATH_MAX];
	int fd;

	ASSERT_EQ(0, scratch_write(L(self, "new"), "new file", O_EXCL));
	ASSERT_EQ(0, scratch_write(L(self, "d/new"), "new nested", O_EXCL));
	ASSERT_EQ(0, scratch_write(L(self, "d/e/new"), "new deep", O_EXCL));
	ASSERT_EQ(0, mkdir(L(self, "newdir"), 0755));
	ASSERT_EQ(0, mkdir(L(self, "d/e/newdir"), 0755));
	ASSERT_EQ(0, scratch_write(L(self, "d/e/newdir/x"), "x", O_EXCL));
	ASSERT_EQ(0, symlink("nowhere", L(self, "t/1/2/newlink")));
	ASSERT_EQ(0, mknod(L(self, "empty/node"), S_IFIFO | 0600, 0));

	/* O_TMPFILE, then a name for it */
	fd = open(L(self, "d"), O_TMPFILE | O_WRONLY, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(3, write(fd, "tmp", 3));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ(0, linkat(AT_FDCWD, path, AT_FDCWD, L(self, "d/tmp"),
			    AT_SYMLINK_FOLLOW));
	close(fd);

	/* A new name for an old file, written through the new name */
	ASSERT_EQ(0, link(L(self, "f"), L(self, "d/e/f3")));
	ASSERT_EQ(0, scratch_write(L(self, "d/e/f3"), "LINKED", O_TRUNC));

	CHECK_SNAPSHOT();
}

/* Names go, deep trees go; then the names come back with other objects */
TEST_F(ns, remove)
{
	ASSERT_EQ(0, unlink(L(self, "f")));
	ASSERT_EQ(0, unlink(L(self, "link")));
	ASSERT_EQ(0, unlink(L(self, "fifo")));
	ASSERT_EQ(0, rmdir(L(self, "empty")));
	ASSERT_EQ(0, scratch_sh("rm -rf %s %s", L(self, "t"), L(self, "d")));
	/* the other name of d/h2 lives on and changes */
	ASSERT_EQ(0, scratch_write(L(self, "h1"), "changed after rm", O_TRUNC));

	ASSERT_EQ(0, mkdir(L(self, "d"), 0777));
	ASSERT_EQ(0, scratch_write(L(self, "d/g"), "another g", O_EXCL));
	ASSERT_EQ(0, mkdir(L(self, "t"), 0755));
	ASSERT_EQ(0, scratch_write(L(self, "f"), "another f", O_EXCL));
	ASSERT_EQ(0, mkdir(L(self, "empty"), 0755));

	CHECK_SNAPSHOT();
}

/* Files: renamed away, over existing names, into new names, and back */
TEST_F(ns, rename_files)
{
	ASSERT_EQ(0, rename(L(self, "f"), L(self, "d/f_moved")));
	ASSERT_EQ(0, rename(L(self, "g"), L(self, "f")));
	ASSERT_EQ(0, rename(L(self, "big"), L(self, "d/g")));
	ASSERT_EQ(0, rename(L(self, "link"), L(self, "d/e/link2")));
	ASSERT_EQ(0, rename(L(self, "fifo"), L(self, "t/1/fifo")));
	/* changes through the new names */
	ASSERT_EQ(0, scratch_write(L(self, "d/f_moved"), "moved and changed",
				   O_TRUNC));
	ASSERT_EQ(0, chmod(L(self, "d/g"), 0604));
	/* and back, repeatedly */
	ASSERT_EQ(0, rename(L(self, "d/f_moved"), L(self, "g")));
	ASSERT_EQ(0, rename(L(self, "g"), L(self, "t/1/2/g")));
	ASSERT_EQ(0, rename(L(self, "t/1/2/g"), L(self, "g")));
	ASSERT_EQ(0, rename(L(self, "t/1/fifo"), L(self, "fifo")));

	CHECK_SNAPSHOT();
}

/*
 * Non-empty directories: renamed, changed inside, moved deeper, their
 * ancestors renamed, and finally renamed back to the original name.
 */
TEST_F(ns, rename_dirs)
{
	ASSERT_EQ(0, rename(L(self, "d"), L(self, "d2")));
	ASSERT_EQ(0, scratch_write(L(self, "d2/g"), "changed after mv", O_TRUNC));
	ASSERT_EQ(0, scratch_write(L(self, "d2/new"), "new in moved", O_EXCL));
	ASSERT_EQ(0, unlink(L(self, "d2/e/deep")));
	ASSERT_EQ(0, rename(L(self, "d2/e"), L(self, "e2")));
	ASSERT_EQ(0, rename(L(self, "e2"), L(self, "t/1/e3")));
	ASSERT_EQ(0, scratch_write(L(self, "t/1/e3/more"), "more", O_EXCL));
	ASSERT_EQ(0, mkdir(L(self, "d"), 0755));
	ASSERT_EQ(0, rename(L(self, "d2"), L(self, "t/1/2/d")));
	ASSERT_EQ(0, chmod(L(self, "t/1/2/d"), 0700));
	/* an ancestor of both moved directories */
	ASSERT_EQ(0, rename(L(self, "t"), L(self, "tt")));
	ASSERT_EQ(0, scratch_write(L(self, "tt/1/2/d/g"), "again", O_TRUNC));
	ASSERT_EQ(0, scratch_sh("rm -rf %s", L(self, "tt/1/2/3")));
	CHECK_SNAPSHOT();

	/* back where they were */
	ASSERT_EQ(0, rmdir(L(self, "d")));
	ASSERT_EQ(0, rename(L(self, "tt/1/2/d"), L(self, "d")));
	ASSERT_EQ(0, rename(L(self, "tt/1/e3"), L(self, "d/e")));
	ASSERT_EQ(0, rename(L(self, "tt"), L(self, "t")));
	CHECK_SNAPSHOT();
}

/* RENAME_EXCHANGE of a file and a directory, and of two directories */
TEST_F(ns, exchange)
{
	ASSERT_EQ(0, renameat2(AT_FDCWD, L(self, "f"), AT_FDCWD, L(self, "d"),
			       RENAME_EXCHANGE));
	ASSERT_EQ(0, scratch_write(L(self, "d"), "exchanged", O_TRUNC));
	ASSERT_EQ(0, scratch_write(L(self, "f/g"), "in exchanged dir", O_TRUNC));
	ASSERT_EQ(0, renameat2(AT_FDCWD, L(self, "t/1"), AT_FDCWD,
			       L(self, "f/e"), RENAME_EXCHANGE));
	ASSERT_EQ(0, scratch_write(L(self, "t/1/deep"), "x", O_APPEND));
	ASSERT_EQ(0, unlink(L(self, "f/e/2/3/4/5/6/7/8/file")));
	ASSERT_EQ(0, rmdir(L(self, "f/e/2/3/4/5/6/7/8")));
	/* RENAME_NOREPLACE into a new name */
	ASSERT_EQ(0, renameat2(AT_FDCWD, L(self, "g"), AT_FDCWD, L(self, "g2"),
			       RENAME_NOREPLACE));
	CHECK_SNAPSHOT();
}

/* Hard links that existed at snapshot time */
TEST_F(ns, hard_links)
{
	ASSERT_EQ(0, scratch_write(L(self, "d/h2"), "through h2", O_TRUNC));
	ASSERT_EQ(0, rename(L(self, "h1"), L(self, "h1b")));
	ASSERT_EQ(0, scratch_write(L(self, "h1b"), "through h1b", O_APPEND));
	ASSERT_EQ(0, link(L(self, "h1b"), L(self, "h3")));
	ASSERT_EQ(0, unlink(L(self, "d/h2")));
	CHECK_SNAPSHOT();
}

/*
 * Leaving the live tree: a directory cannot (EXDEV, as across mounts), a
 * file can; what comes in from outside is new.
 */
TEST_F(ns, outside)
{
	char out[PATH_MAX], out2[PATH_MAX];

	join(out, self->mnt, "outside/d");
	EXPECT_EQ(-1, rename(L(self, "d"), out));
	EXPECT_EQ(EXDEV, errno);
	join(out, self->mnt, "outside/dir");
	ASSERT_EQ(0, mkdir(out, 0755));
	EXPECT_EQ(-1, renameat2(AT_FDCWD, out, AT_FDCWD, L(self, "d"),
				RENAME_EXCHANGE));
	EXPECT_EQ(EXDEV, errno);
	/* the same directories can move inside */
	ASSERT_EQ(0, rename(out, L(self, "from_outside")));

	join(out, self->mnt, "outside/f");
	ASSERT_EQ(0, rename(L(self, "f"), out));
	ASSERT_EQ(0, scratch_write(out, "changed outside", O_TRUNC));
	join(out2, self->mnt, "outside/new");
	ASSERT_EQ(0, scratch_write(out2, "from outside", O_EXCL));
	ASSERT_EQ(0, rename(out2, L(self, "g")));
	/* mv falls back to copy and unlink for the directory */
	ASSERT_EQ(0, scratch_sh("mv %s %s/outside/", L(self, "d"), self->mnt));
	CHECK_SNAPSHOT();
}

/* An fd opened before the snapshot, its file unlinked, then written */
TEST_F(ns, open_fd_unlinked)
{
	int fd = open(L(self, "g"), O_WRONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, resnap(self));
	ASSERT_EQ(0, unlink(L(self, "g")));
	EXPECT_EQ(7, pwrite(fd, "WRITTEN", 7, 0));
	close(fd);
	CHECK_SNAPSHOT();
}

/* Try to change @name so that its copy-up needs its size; 0 or errno */
static int change_big(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	int ret = 0;

	if (fd < 0)
		return errno;
	if (write(fd, "X", 1) != 1)
		ret = errno;
	close(fd);
	return ret;
}

/*
 * ENOSPC during a copy-up fails the live change and leaves the live file
 * and the snapshot as they were.  Filesystems that clone (xfs, btrfs)
 * need no space for the copy and may let the change through.
 */
TEST_F(ns, enospc)
{
	bool clones = !strcmp(variant->fs.name, "xfs") ||
		      !strcmp(variant->fs.name, "btrfs");
	char filler[PATH_MAX], ref_big[PATH_MAX];
	int fd, ret;

	if (!variant->fs.mkfs)
		ASSERT_EQ(0, mount(NULL, self->mnt, NULL, MS_REMOUNT, "size=32m"));
	/* fill up, leaving less than the 512 KiB file needs */
	ASSERT_EQ(0, fill_fs(self->mnt, 256 << 10));
	/* full: 512 KiB more do not fit (ext4 keeps blocks it reports free) */
	snprintf(filler, sizeof(filler), "%s/fillerprobe", self->mnt);
	fd = open(filler, O_CREAT | O_WRONLY, 0600);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, fallocate(fd, 0, 0, 512 << 10))
		TH_LOG("%lld bytes still free", avail_bytes(self->mnt));
	EXPECT_EQ(ENOSPC, errno);
	close(fd);
	ASSERT_EQ(0, unlink(filler));

	ret = change_big(L(self, "big"));
	if (ret) {
		EXPECT_EQ(ENOSPC, ret) TH_LOG("append: %s", strerror(ret));
	} else {
		EXPECT_TRUE(clones) TH_LOG("the append went through without space for a copy");
	}
	join(ref_big, self->ref, "big");
	if (ret) {
		EXPECT_EQ(0, scratch_sh("cmp -s %s %s", L(self, "big"), ref_big))
			TH_LOG("the failed append changed the live file");
	}
	ret = rename(L(self, "big"), L(self, "big2")) ? errno : 0;
	if (ret) {
		EXPECT_EQ(ENOSPC, ret);
	} else {
		EXPECT_TRUE(clones) TH_LOG("the rename went through without space for a copy");
	}
	EXPECT_STREQ("", tree_diff(self, self->snap, self->ref));

	/* with space again, the same changes go through and are preserved */
	ASSERT_EQ(0, scratch_sh("rm -f %s/filler*", self->mnt));
	if (!access(L(self, "big"), F_OK)) {
		EXPECT_EQ(0, change_big(L(self, "big")));
	}
	CHECK_SNAPSHOT();
}

/* Create @path, empty: one change (a write after it would be another) */
static int new_name(const char *path)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/*
 * One change of each kind of copy-up, each a single system call, on names
 * that the other kinds leave alone; 0 or the errno it failed with.
 */
static int change_kind(struct _test_data_ns *self, int kind)
{
	const struct timespec times[2] = {
		{ .tv_nsec = UTIME_OMIT }, { .tv_sec = 1000000000 },
	};

	switch (kind) {
	case 0:	/* data */
		return -scratch_write(L(self, "f"), " appended", O_APPEND);
	case 1:
		return truncate(L(self, "g"), 2) ? errno : 0;
	case 2:	/* metadata */
		return chmod(L(self, "f"), 0641) ? errno : 0;
	case 3:
		return utimensat(AT_FDCWD, L(self, "d/g"), times, 0) ? errno : 0;
	case 4:	/* xattrs */
		return lsetxattr(L(self, "f"), "user.k", "v2", 2, 0) ? errno : 0;
	case 5:
		return lremovexattr(L(self, "d/e"), "user.dir") ? errno : 0;
	case 6:	/* new names: the parent is copied, the name whited out */
		return new_name(L(self, "d/e/new"));
	case 7:
		return mkdir(L(self, "t/1/2/newdir"), 0755) ? errno : 0;
	case 8:
		return symlink("x", L(self, "t/1/newlink")) ? errno : 0;
	case 9:
		return link(L(self, "h1"), L(self, "d/e/h3")) ? errno : 0;
	case 10: /* removed names: the object is kept */
		return unlink(L(self, "d/g")) ? errno : 0;
	case 11:
		return rmdir(L(self, "empty")) ? errno : 0;
	case 12: /* renames: redirects, whiteouts */
		return rename(L(self, "d"), L(self, "d2")) ? errno : 0;
	case 13:
		return rename(L(self, "f"), L(self, "g")) ? errno : 0;
	case 14:
		return renameat2(AT_FDCWD, L(self, "link"), AT_FDCWD,
				 L(self, "t"), RENAME_EXCHANGE) ? errno : 0;
	}
	return -1;
}

#define NR_KINDS 15

/*
 * Every kind of copy-up on a full filesystem: a change either fails with
 * ENOSPC and leaves the live tree as it was, or goes through with the
 * snapshot still showing its moment.  Where nothing clones, the data
 * copy-up cannot find space and must fail.
 */
TEST_F(ns, enospc_every_kind)
{
	bool clones = !strcmp(variant->fs.name, "xfs") ||
		      !strcmp(variant->fs.name, "btrfs");
	int kind, ret, failed = 0;

	if (!variant->fs.mkfs)
		ASSERT_EQ(0, mount(NULL, self->mnt, NULL, MS_REMOUNT, "size=32m"));
	for (kind = 0; kind < NR_KINDS; kind++) {
		ASSERT_EQ(0, scratch_sh("rm -f %s/filler* && sync", self->mnt));
		ASSERT_EQ(0, resnap(self)) TH_LOG("kind %d", kind);
		ASSERT_EQ(0, fill_fs(self->mnt, 0));

		ret = change_kind(self, kind);
		if (ret) {
			failed++;
			EXPECT_EQ(ENOSPC, ret)
				TH_LOG("kind %d: %s", kind, strerror(ret));
			EXPECT_STREQ("", tree_diff(self, self->live, self->ref))
				TH_LOG("kind %d failed but changed the live tree",
				       kind);
		} else {
			EXPECT_STRNE("", tree_diff(self, self->live, self->ref))
				TH_LOG("kind %d went through but changed nothing",
				       kind);
		}
		EXPECT_STREQ("", tree_diff(self, self->snap, self->ref))
			TH_LOG("kind %d (%s), warm", kind,
			       ret ? "failed" : "went through");
		ASSERT_EQ(0, drop_caches());
		EXPECT_STREQ("", tree_diff(self, self->snap, self->ref))
			TH_LOG("kind %d, after drop_caches", kind);
		if (kind == 0 && !clones)
			EXPECT_EQ(ENOSPC, ret)
				TH_LOG("the data copy-up found no space but did not fail");
	}
	ASSERT_EQ(0, scratch_sh("rm -f %s/filler* && sync", self->mnt));
	TH_LOG("%s: %d of %d kinds failed with ENOSPC", variant->fs.name,
	       failed, NR_KINDS);
	/* with space, the changes left to do go through and are preserved */
	for (kind = 0; kind < NR_KINDS; kind++)
		change_kind(self, kind);
	CHECK_SNAPSHOT();
}

TEST_HARNESS_MAIN
