// SPDX-License-Identifier: GPL-2.0
/*
 * The ovl-snapshot tool, as a sysadmin's script uses it: exit codes, the
 * ids it prints, list and status, and that a snapshot mounted with it
 * equals the "cp -a" reference taken at its moment.  The tool is the one
 * built next to this test.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "scratch.h"
#include "snaptree.h"
#include "harness.h"

FIXTURE(tool) {
	char mnt[PATH_MAX];
	char live[PATH_MAX];
	char store[PATH_MAX];
	char ref[PATH_MAX];
	char ref1[PATH_MAX];
	char view[PATH_MAX];
	char tool[PATH_MAX];
	char out[4096];
	char diff[DIFF_LEN];
};

FIXTURE_VARIANT(tool) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(tool);

/* Run a shell command; its stdout in self->out; returns the exit status */
static int run(struct _test_data_tool *self, const char *fmt, ...)
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

FIXTURE_SETUP(tool)
{
	char exe[PATH_MAX];
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT_LT(0, n);
	exe[n] = 0;
	snprintf(self->tool, sizeof(self->tool), "%s/ovl-snapshot", dirname(exe));
	if (access(self->tool, X_OK))
		SKIP(return, "no %s (build the selftests with make selftests)", self->tool);

	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "tool");
	join(self->live, self->mnt, "live");
	join(self->store, self->mnt, ".live.snapshots");
	join(self->ref, self->mnt, "ref");
	join(self->ref1, self->mnt, "ref1");
	join(self->view, self->mnt, "view");
	ASSERT_EQ(0, mkdir(self->live, 0755));
	ASSERT_EQ(0, mkdir(self->view, 0755));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "f"), "one", O_EXCL));
	ASSERT_EQ(0, mkdir(snap_path(self->live, "d"), 0755));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "d/g"), "nested", O_EXCL));
}

FIXTURE_TEARDOWN(tool)
{
	scratch_umount_tree(self->mnt);
}

TEST_F(tool, lifecycle)
{
	char p[PATH_MAX];
	struct stat st;

	/* usage errors */
	EXPECT_EQ(2, T("2>/dev/null"));
	EXPECT_EQ(2, T("frobnicate %s 2>/dev/null", self->live));
	EXPECT_EQ(0, T("--help >/dev/null"));
	/* not initialised yet */
	EXPECT_EQ(1, T("status %s 2>/dev/null", self->live));

	ASSERT_EQ(0, run(self, "cp -a %s %s", self->live, self->ref1));
	ASSERT_EQ(0, T("init %s", self->live));
	EXPECT_STREQ("1\n", self->out);
	EXPECT_EQ(1, T("init %s 2>/dev/null", self->live)) TH_LOG("init twice");
	EXPECT_EQ(0, T("status %s", self->live));
	EXPECT_NE(NULL, strstr(self->out, "armed: yes")) TH_LOG("%s", self->out);

	/* changes after 1, then snapshot 2 with a reference of its moment */
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "f"), "two", O_TRUNC));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "new"), "new", O_EXCL));
	ASSERT_EQ(0, run(self, "cp -a %s %s", self->live, self->ref));
	ASSERT_EQ(0, T("take %s nightly", self->live));
	EXPECT_STREQ("2\n", self->out);
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "f"), "three", O_TRUNC));
	ASSERT_EQ(0, rename(snap_path(self->live, "d"), snap_path(self->live, "d2")));
	ASSERT_EQ(0, unlink(snap_path(self->live, "new")));

	EXPECT_EQ(0, T("list %s", self->live));
	EXPECT_NE(NULL, strstr(self->out, "nightly")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "active,armed")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "\n1 ")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "\n2 ")) TH_LOG("%s", self->out);

	/* the active snapshot, mounted read-only, is its moment */
	ASSERT_EQ(0, T("mount %s 2 %s", self->live, self->view));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, self->ref));
	EXPECT_NE(0, scratch_write(snap_path(self->view, "x"), "x", O_EXCL));
	ASSERT_EQ(0, T("umount %s", self->view));
	/* an older one, read through the newer one: its own moment */
	ASSERT_EQ(0, T("mount %s 1 %s", self->live, self->view));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, self->ref1));
	EXPECT_STRNE("", snap_diff(self->diff, self->view, self->ref));
	EXPECT_NE(0, scratch_write(snap_path(self->view, "x"), "x", O_EXCL));
	ASSERT_EQ(0, T("umount %s", self->view));
	EXPECT_EQ(1, T("mount %s 3 %s 2>/dev/null", self->live, self->view))
		TH_LOG("no snapshot 3");

	/* deleting: not the active one; the oldest goes with its space */
	EXPECT_EQ(1, T("delete %s 2 2>/dev/null", self->live));
	ASSERT_EQ(0, T("delete %s 1", self->live));
	snprintf(p, sizeof(p), "%s/1", self->store);
	EXPECT_NE(0, stat(p, &st)) TH_LOG("%s still there", p);

	/* disarmed (as after a reboot): status says so, take refuses, arm */
	snprintf(p, sizeof(p), "%s/2/root", self->store);
	ASSERT_EQ(0, umount2(p, 0));
	EXPECT_EQ(3, T("status %s", self->live));
	EXPECT_EQ(1, T("take %s 2>/dev/null", self->live));
	ASSERT_EQ(0, T("arm %s", self->live));
	EXPECT_EQ(0, T("arm %s", self->live)) TH_LOG("arm is idempotent");
	EXPECT_EQ(0, T("status %s", self->live));
	ASSERT_EQ(0, T("mount %s 2 %s", self->live, self->view));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, self->ref))
		TH_LOG("armed again");
	ASSERT_EQ(0, T("umount %s", self->view));
}

/*
 * arm finds changes made while the active snapshot was not armed: after
 * changes of every kind made while armed (all preserved) it reports
 * nothing; after changes made while not armed it exits 4 and names each.
 */
TEST_F(tool, unarmed_changes)
{
	char root[PATH_MAX];
	static const char *const missed[] = {
		"changed while snapshot 2 was not armed: %s/u1",
		"changed while snapshot 2 was not armed: %s/u2",
		"changed while snapshot 2 was not armed: %s/u3",
		"changed while snapshot 2 was not armed: %s/ud",
		"made or moved here while snapshot 2 was not armed: %s/d/new",
		"made or moved here while snapshot 2 was not armed: %s/moved",
	};
	char want[2 * PATH_MAX];

	snprintf(root, sizeof(root), "%s/2/root", self->store);
	ASSERT_EQ(0, run(self, "cd %s && echo a >a && echo b >b && echo c >c && "
			 "echo u1 >u1 && echo u2 >u2 && echo u3 >u3 && mkdir ud e rd && "
			 "echo r >r && touch rd/x e/y && ln a alink", self->live));
	ASSERT_EQ(0, T("init %s", self->live));
	ASSERT_EQ(0, run(self, "cd %s && echo a1 >>a && mkdir d/n1", self->live));
	ASSERT_EQ(0, T("take %s", self->live));
	/* while armed: data, new names, renames, chmod, links, removals */
	ASSERT_EQ(0, run(self, "cd %s && echo a2 >>alink && echo n >n && "
			 "echo n >d/n && mkdir nd && echo x >nd/x && mv b d/b2 && "
			 "mv e d/e2 && chmod 0600 c && ln c d/clink && rm r && "
			 "rm -rf rd && setfattr -n user.k -v 1 f", self->live));
	ASSERT_EQ(0, umount2(root, 0));
	EXPECT_EQ(0, T("arm %s 2>&1", self->live)) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "not armed")) TH_LOG("%s", self->out);

	/* while not armed */
	ASSERT_EQ(0, umount2(root, 0));
	ASSERT_EQ(0, run(self, "cd %s && echo more >>u1 && chmod 0700 u2 && "
			 "setfattr -n user.k -v 1 u3 && touch ud/new && "
			 "echo new >d/new && mv d/e2 moved && rm d/clink", self->live));
	EXPECT_EQ(4, T("arm %s 2>&1", self->live)) TH_LOG("%s", self->out);
	for (size_t i = 0; i < sizeof(missed) / sizeof(*missed); i++) {
		snprintf(want, sizeof(want), missed[i], self->live);
		EXPECT_NE(NULL, strstr(self->out, want))
			TH_LOG("no '%s' in: %s", want, self->out);
	}
	EXPECT_EQ(0, T("status %s", self->live)) TH_LOG("armed in spite of them");
	/* found again at the next arm: the snapshot still shows them */
	ASSERT_EQ(0, umount2(root, 0));
	EXPECT_EQ(4, T("arm %s 2>/dev/null", self->live));
	ASSERT_EQ(0, umount2(root, 0));
	EXPECT_EQ(0, T("arm %s --no-check", self->live));
}

/* A store inside the live tree is refused before anything is mounted */
TEST_F(tool, store_inside_live)
{
	EXPECT_EQ(1, T("--store %s/d/store init %s 2>/dev/null", self->live,
		       self->live));
	EXPECT_EQ(1, T("status %s 2>/dev/null", self->live));
	EXPECT_NE(0, access(snap_path(self->live, "d/store"), F_OK))
		TH_LOG("the refused init wrote into the live tree");
}

/*
 * overlayfs stacks at most 500 lower layers, and a view of snapshot k
 * needs k's upper, every newer snapshot's upper and LIVE.  With 501
 * snapshots, mounting snapshot 2 (501 layers) is refused with a message
 * that names the limit and the way out, snapshot 3 (500 layers) mounts
 * and equals its reference.  Deleting 2 and 3 merges them into 1, which
 * then mounts with 500 layers and equals the reference of its moment.
 */
TEST_F_TIMEOUT(tool, depth_limit, 1800)
{
	char ref3[PATH_MAX];

	join(ref3, self->mnt, "ref3");
	ASSERT_EQ(0, run(self, "cp -a %s %s", self->live, self->ref1));
	ASSERT_EQ(0, T("init %s", self->live));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "f"), "two", O_TRUNC));
	ASSERT_EQ(0, T("take %s", self->live));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "f"), "three", O_TRUNC));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "d/new"), "3", O_EXCL));
	ASSERT_EQ(0, run(self, "cp -a %s %s", self->live, ref3));
	ASSERT_EQ(0, T("take %s", self->live));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "f"), "four", O_TRUNC));
	ASSERT_EQ(0, run(self, "for i in $(seq 4 501); do %s take %s >/dev/null || exit 1; done",
			 self->tool, self->live));
	ASSERT_EQ(0, scratch_write(snap_path(self->live, "d/g"), "live", O_TRUNC));

	EXPECT_EQ(1, T("mount %s 2 %s 2>&1", self->live, self->view));
	EXPECT_NE(NULL, strstr(self->out, "needs 501 layers"))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "at most 500"));
	ASSERT_EQ(0, T("mount %s 3 %s", self->live, self->view));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, ref3));
	ASSERT_EQ(0, T("umount %s", self->view));

	ASSERT_EQ(0, T("delete %s 2", self->live));
	EXPECT_EQ(1, T("mount %s 1 %s 2>/dev/null", self->live, self->view))
		TH_LOG("1 and 3..501 and LIVE are 501 layers");
	ASSERT_EQ(0, T("delete %s 3", self->live));
	ASSERT_EQ(0, T("mount %s 1 %s", self->live, self->view));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, self->ref1));
	EXPECT_STRNE("", snap_diff(self->diff, self->live, self->ref1));
	ASSERT_EQ(0, T("umount %s", self->view));
	ASSERT_EQ(0, run(self, "umount %s/501/root", self->store));
}

TEST_HARNESS_MAIN
