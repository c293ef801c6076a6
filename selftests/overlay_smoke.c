// SPDX-License-Identifier: GPL-2.0
/*
 * Smoke test of the guest and of stock overlayfs on every filesystem under
 * test: with lower, upper and work dirs on one scratch filesystem, the
 * overlay shows lower files, copies a file up on write, and records a
 * delete as a whiteout, leaving the lower layer untouched.
 */
#define _GNU_SOURCE
#include <sys/sysmacros.h>

#include "scratch.h"
#include "harness.h"

FIXTURE(overlay) {
	char mnt[PATH_MAX];
	char lower[PATH_MAX];
	char upper[PATH_MAX];
	char merged[PATH_MAX];
};

FIXTURE_VARIANT(overlay) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(overlay);

static void path(char *buf, const char *dir, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

FIXTURE_SETUP(overlay)
{
	char p[PATH_MAX], opts[4 * PATH_MAX];

	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "overlay");

	snprintf(self->lower, sizeof(self->lower), "%s/lower", self->mnt);
	snprintf(self->upper, sizeof(self->upper), "%s/upper", self->mnt);
	snprintf(self->merged, sizeof(self->merged), "%s/merged", self->mnt);
	ASSERT_EQ(0, mkdir(self->lower, 0755));
	ASSERT_EQ(0, mkdir(self->upper, 0755));
	ASSERT_EQ(0, mkdir(self->merged, 0755));
	path(p, self->mnt, "work");
	ASSERT_EQ(0, mkdir(p, 0755));

	path(p, self->lower, "file");
	ASSERT_EQ(0, scratch_write(p, "lower data", O_EXCL));
	path(p, self->lower, "victim");
	ASSERT_EQ(0, scratch_write(p, "doomed", O_EXCL));
	path(p, self->lower, "dir");
	ASSERT_EQ(0, mkdir(p, 0755));
	path(p, self->lower, "dir/nested");
	ASSERT_EQ(0, scratch_write(p, "nested data", O_EXCL));

	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s/work",
		 self->lower, self->upper, self->mnt);
	ASSERT_EQ(0, mount("overlay", self->merged, "overlay", 0, opts))
		TH_LOG("mount overlay: %s", strerror(errno));
}

FIXTURE_TEARDOWN(overlay)
{
	umount2(self->merged, MNT_DETACH);
	umount2(self->mnt, MNT_DETACH);
}

TEST_F(overlay, lower_visible)
{
	char p[PATH_MAX], buf[64];
	struct stat st;

	path(p, self->merged, "file");
	ASSERT_EQ(10, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("lower data", buf);
	path(p, self->merged, "dir/nested");
	ASSERT_EQ(11, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("nested data", buf);
	path(p, self->merged, "dir");
	ASSERT_EQ(0, stat(p, &st));
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	/* Nothing was copied up by reading. */
	path(p, self->upper, "file");
	EXPECT_EQ(-1, lstat(p, &st));
	EXPECT_EQ(ENOENT, errno);
}

TEST_F(overlay, copy_up_on_write)
{
	char p[PATH_MAX], buf[64];

	path(p, self->merged, "file");
	ASSERT_EQ(0, scratch_write(p, " + upper", O_APPEND));
	ASSERT_EQ(18, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("lower data + upper", buf);

	path(p, self->upper, "file");
	ASSERT_EQ(18, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("lower data + upper", buf);
	path(p, self->lower, "file");
	ASSERT_EQ(10, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("lower data", buf);
}

TEST_F(overlay, whiteout_on_unlink)
{
	char p[PATH_MAX], buf[64];
	struct stat st;

	path(p, self->merged, "victim");
	ASSERT_EQ(0, unlink(p));
	EXPECT_EQ(-1, lstat(p, &st));
	EXPECT_EQ(ENOENT, errno);

	path(p, self->upper, "victim");
	ASSERT_EQ(0, lstat(p, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0U, major(st.st_rdev));
	EXPECT_EQ(0U, minor(st.st_rdev));

	path(p, self->lower, "victim");
	ASSERT_EQ(6, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("doomed", buf);
}

TEST_F(overlay, rmdir_needs_empty_then_whiteout)
{
	char p[PATH_MAX];
	struct stat st;

	path(p, self->merged, "dir");
	EXPECT_EQ(-1, rmdir(p));
	EXPECT_EQ(ENOTEMPTY, errno);
	path(p, self->merged, "dir/nested");
	ASSERT_EQ(0, unlink(p));
	path(p, self->merged, "dir");
	ASSERT_EQ(0, rmdir(p));
	EXPECT_EQ(-1, lstat(p, &st));

	path(p, self->upper, "dir");
	ASSERT_EQ(0, lstat(p, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	path(p, self->lower, "dir/nested");
	EXPECT_EQ(0, lstat(p, &st));
}

TEST_HARNESS_MAIN
