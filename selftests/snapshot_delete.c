// SPDX-License-Identifier: GPL-2.0
/*
 * Deleting snapshots with ovl-snapshot delete: the oldest is removed, one
 * between two others is first merged into its older neighbour.  After each
 * delete every remaining snapshot, mounted with ovl-snapshot mount (cold:
 * fresh mount, then after drop_caches), must equal the "cp -a" reference
 * taken at its moment, and the deleted one's directory must be gone.
 *
 * The changes between the snapshots are chosen so that the older
 * neighbour's view reads the merged snapshot: objects changed first after
 * the merged snapshot's moment, directories renamed in between and
 * followed by handle, hard links changed through another name in each
 * epoch, names created (whiteouts) and removed.  Deleting without the
 * merge fails these checks.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/fs.h>

#include "scratch.h"
#include "snaptree.h"
#include "harness.h"

#define MAX_SNAP 8

FIXTURE(del) {
	char mnt[PATH_MAX];
	char live[PATH_MAX];
	char store[PATH_MAX];
	char ref[PATH_MAX];
	char view[PATH_MAX];
	char tool[PATH_MAX];
	char out[4096];
	char diff[DIFF_LEN];
	int active;			/* newest id */
	int alive[MAX_SNAP + 1];	/* not deleted */
};

FIXTURE_VARIANT(del) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(del);

/* Run a shell command; its stdout in self->out; returns the exit status */
static int run(struct _test_data_del *self, const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	FILE *p;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(self->out, 1, sizeof(self->out) - 1, p);
	self->out[n] = 0;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define T(fmt, ...) run(self, "%s " fmt, self->tool, ##__VA_ARGS__)

/* Run a shell command in the live tree */
#define SH(fmt, ...) ASSERT_EQ(0, scratch_sh("cd %s && " fmt, self->live, ##__VA_ARGS__))

static const char *R(struct _test_data_del *self, int id)
{
	return snap_pathf("%s%d", self->ref, id);
}

/* The reference of this moment, then the next snapshot (init for the first) */
static int take(struct _test_data_del *self)
{
	int id = self->active + 1;

	if (id > MAX_SNAP)
		return -E2BIG;
	if (scratch_sh("cp -a %s %s", self->live, R(self, id)))
		return -EIO;
	if (run(self, "%s %s %s", self->tool, id == 1 ? "init" : "take", self->live))
		return -EIO;
	if (atoi(self->out) != id)
		return -EINVAL;
	self->active = id;
	self->alive[id] = 1;
	return 0;
}

/* Delete snapshot @id; its store directory and no leftovers remain */
#define DELETE(id)							\
	do {								\
		ASSERT_EQ(0, T("delete %s %d", self->live, id));	\
		self->alive[id] = 0;					\
		EXPECT_NE(0, access(snap_pathf("%s/%d", self->store, id), F_OK)) \
			TH_LOG("snapshot %d is still in the store", id); \
		EXPECT_NE(0, access(snap_pathf("%s/.deleted-%d", self->store, id), F_OK)); \
	} while (0)

/* Every remaining snapshot equals its reference, cold and after drop_caches */
#define CHECK_ALL(when)							\
	do {								\
		for (int k = 1; k <= self->active; k++) {		\
			if (!self->alive[k])				\
				continue;				\
			ASSERT_EQ(0, T("mount %s %d %s", self->live, k, self->view)) \
				TH_LOG("%s: mount snapshot %d", when, k); \
			EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, k))) \
				TH_LOG("%s: snapshot %d", when, k);	\
			ASSERT_EQ(0, drop_caches());			\
			EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, k))) \
				TH_LOG("%s: snapshot %d, after drop_caches", when, k); \
			ASSERT_EQ(0, umount2(self->view, 0));		\
		}							\
	} while (0)

FIXTURE_SETUP(del)
{
	char exe[PATH_MAX];
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT_LT(0, n);
	exe[n] = 0;
	snprintf(self->tool, sizeof(self->tool), "%s/ovl-snapshot", dirname(exe));
	if (access(self->tool, X_OK))
		SKIP(return, "no %s (build the selftests with make selftests)", self->tool);

	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "delete");
	join(self->live, self->mnt, "live");
	join(self->store, self->mnt, ".live.snapshots");
	join(self->ref, self->mnt, "ref");
	join(self->view, self->mnt, "view");
	ASSERT_EQ(0, mkdir(self->live, 0755));
	ASSERT_EQ(0, mkdir(self->view, 0755));

	SH("echo 'version 1' >f && echo 'untouched until 4' >g && "
	   "mkdir -m 0750 d && echo 'nested 1' >d/h && mkdir d/e && "
	   "echo 'deep 1' >d/e/deep && echo 'deep2 1' >d/e/deep2 && "
	   "echo xattr >x && setfattr -n user.k -v 1 x && ln -s f l && "
	   "echo 'hard 1' >hl1 && ln hl1 d/hl2 && "
	   "truncate -s 1M s && printf mid | dd of=s bs=1 seek=512K conv=notrunc 2>/dev/null && "
	   "mkdir -p t/a/b/c && touch t/a/b/c/1 t/a/b/c/2 t/a/b/3 && "
	   "echo p >p && echo q >q");
}

FIXTURE_TEARDOWN(del)
{
	scratch_umount_tree(self->mnt);
}

/*
 * Six snapshots with the changes of snapshot_older's chain; then middle
 * snapshots are deleted one by one, each merged into a neighbour that
 * already holds merged content, and finally the oldest.
 */
TEST_F(del, chain)
{
	ASSERT_EQ(0, take(self));

	SH("echo 'version 2' >f && echo 'nested 2' >d/h && chmod 0600 x && "
	   "setfattr -n user.k -v 2 x && mkdir n1 && echo n1 >n1/file && "
	   "mv d/e/deep2 d/deep2moved && ln hl1 hl3");
	ASSERT_EQ(0, take(self));

	SH("mv d d2 && echo 'version 3' >f && rm -rf t && echo 'hard 2' >>hl1");
	ASSERT_EQ(0, renameat2(AT_FDCWD, snap_path(self->live, "p"), AT_FDCWD,
			       snap_path(self->live, "q"), RENAME_EXCHANGE));
	ASSERT_EQ(0, take(self));

	SH("echo 'deep 3' >d2/e/deep && echo new >d2/new && mv n1 d2/n1moved && "
	   "echo 'hard 3' >>d2/hl2 && "
	   "truncate -s 2M s && printf end | dd of=s bs=1 seek=1536K conv=notrunc 2>/dev/null");
	ASSERT_EQ(0, take(self));

	SH("mv d2/e e2 && echo 'deep 4' >e2/deep && echo 'g 4' >g && "
	   "mv d2 d && mv x f && rm l && ln -s g l && touch -d @1000000000 d/h");
	ASSERT_EQ(0, take(self));

	SH("rm -rf d e2 && echo 'version 6' >f && chmod 0700 g && rm hl1 hl3");
	ASSERT_EQ(0, take(self));
	SH("echo 'version 7' >f && echo 'g 7' >g && rm -rf q s");
	CHECK_ALL("before any delete");

	DELETE(3);
	CHECK_ALL("3 merged into 2");
	DELETE(4);
	CHECK_ALL("4 merged into 2");
	DELETE(2);
	CHECK_ALL("2 merged into 1");
	DELETE(1);
	CHECK_ALL("1, the oldest, removed");
	DELETE(5);
	CHECK_ALL("5, the oldest, removed");
}

/*
 * A live directory renamed in every epoch, deeper each time, and written
 * under each name: the copies to merge are under different names in the
 * two snapshots.  Every middle snapshot is deleted, newest first.
 */
TEST_F(del, renamed_every_time)
{
	char from[64], to[64];

	SH("mkdir -p w && echo 0 >w/gen && echo base >w/base && echo keep >w/keep");
	ASSERT_EQ(0, take(self));
	snprintf(from, sizeof(from), "w");
	for (int i = 1; i <= 4; i++) {
		snprintf(to, sizeof(to), "n%d", i);
		SH("mkdir %s && mv %s %s/w && echo %d >%s/w/gen && echo %d >%s/w/new%d",
		   to, from, to, i, to, i, to, i);
		snprintf(from, sizeof(from), "%s/w", to);
		ASSERT_EQ(0, take(self));
	}
	SH("echo last >%s/base && rm %s/gen %s/keep", from, from, from);
	CHECK_ALL("before any delete");
	for (int id = self->active - 1; id > 1; id--) {
		DELETE(id);
		CHECK_ALL("after a middle delete");
	}
}

/*
 * What delete refuses, with exit status 1 and nothing changed: the active
 * snapshot, an unknown id, a snapshot that a mounted view reads (EBUSY).
 */
TEST_F(del, refused)
{
	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f && mkdir d/new");
	ASSERT_EQ(0, take(self));
	SH("echo 'version 3' >f && rm -rf d");
	ASSERT_EQ(0, take(self));
	SH("echo 'version 4' >f");

	EXPECT_EQ(1, T("delete %s 3 2>/dev/null", self->live)) TH_LOG("the active one");
	EXPECT_EQ(1, T("delete %s 7 2>/dev/null", self->live)) TH_LOG("no such id");
	EXPECT_EQ(2, T("delete %s x 2>/dev/null", self->live)) TH_LOG("a bad id");

	/* a view of 1 reads 2; a view of 2 reads 2 */
	for (int k = 1; k <= 2; k++) {
		ASSERT_EQ(0, T("mount %s %d %s", self->live, k, self->view));
		EXPECT_EQ(1, T("delete %s 2 2>&1", self->live));
		EXPECT_NE(NULL, strstr(self->out, "Device or resource busy"))
			TH_LOG("%s", self->out);
		ASSERT_EQ(0, umount2(self->view, 0));
	}
	/* a view of 2 does not read 1, but 1 is the one it would remove */
	ASSERT_EQ(0, T("mount %s 1 %s", self->live, self->view));
	EXPECT_EQ(1, T("delete %s 1 2>/dev/null", self->live));
	ASSERT_EQ(0, umount2(self->view, 0));
	CHECK_ALL("after the refused deletes");
}

/*
 * take and delete on a full filesystem: a take that finds no space fails
 * (exit 1, the errno named) and leaves no trace, the active snapshot stays
 * armed and keeps preserving; a merge that finds no space is finished by
 * running delete again.  With space back, both work and every view is
 * exact.
 */
TEST_F(del, enospc)
{
	int ret, id;

	if (!variant->fs.mkfs)
		ASSERT_EQ(0, mount(NULL, self->mnt, NULL, MS_REMOUNT, "size=64m"));
	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f && echo 'nested 2' >d/h && mkdir n1 && "
	   "echo n1 >n1/file && mv d/e/deep2 d/deep2moved");
	ASSERT_EQ(0, take(self));
	SH("mv d d2 && echo 'version 3' >f && rm -rf t && echo 'hard 2' >>hl1");
	ASSERT_EQ(0, take(self));
	SH("echo 'version 4' >f && echo 'deep 4' >d2/e/deep");

	/* the reference of a take that may go through: nothing changes */
	id = self->active + 1;
	ASSERT_EQ(0, scratch_sh("cp -a %s %s", self->live, R(self, id)));
	ASSERT_EQ(0, fill_fs(self->mnt, 0));
	ret = T("take %s 2>&1", self->live);
	if (ret) {
		EXPECT_EQ(1, ret);
		EXPECT_NE(NULL, strstr(self->out, "No space left on device"))
			TH_LOG("%s", self->out);
		EXPECT_NE(0, access(snap_pathf("%s/%d", self->store, id), F_OK))
			TH_LOG("the failed take left snapshot %d", id);
		EXPECT_EQ(0, T("status %s", self->live))
			TH_LOG("snapshot %d is no longer armed", self->active);
		ASSERT_EQ(0, scratch_sh("rm -rf %s", R(self, id)));
	} else {
		TH_LOG("%s: the take found space", variant->fs.name);
		EXPECT_EQ(id, atoi(self->out));
		self->active = id;
		self->alive[id] = 1;
	}
	/* what changes on the full fs is still preserved */
	scratch_sh("cd %s && echo 'full 5' >f", self->live);

	ret = T("delete %s 2 2>&1", self->live);
	if (ret) {
		EXPECT_EQ(1, ret);
		EXPECT_NE(NULL, strstr(self->out, "No space left on device"))
			TH_LOG("%s", self->out);
	} else {
		TH_LOG("%s: the merge found space", variant->fs.name);
		self->alive[2] = 0;
	}
	ASSERT_EQ(0, scratch_sh("rm -f %s/filler* && sync", self->mnt));
	if (ret)
		DELETE(2);
	CHECK_ALL("after take and delete on a full filesystem");
	ASSERT_EQ(0, take(self));
	SH("echo 'version 6' >f && rm -rf d2");
	CHECK_ALL("after a take with space");
}

TEST_HARNESS_MAIN
