// SPDX-License-Identifier: GPL-2.0
/*
 * Overlayfs snapshots, first step: an overlay mounted with "snapshot" over
 * a live tree keeps showing the tree as it was at mount time while the
 * live tree's file data and metadata change natively (names do not change
 * here yet: namespace operations are the next step).
 *
 * The reference is "cp -a" of the live tree taken right before the
 * snapshot mount; the snapshot must equal it (names, types, modes, owners,
 * sizes, data, symlink targets, user xattrs, mtimes) warm, after
 * drop_caches, and after umount and a new mount on the same store.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <linux/falloc.h>

#include <sched.h>
#include <sys/wait.h>

#include "scratch.h"
#include "snaptree.h"
#include "harness.h"

FIXTURE(snap) {
	char mnt[PATH_MAX];
	char live[PATH_MAX];
	char store[PATH_MAX];
	char ref[PATH_MAX];
	char snap[PATH_MAX];
	char opts[4 * PATH_MAX];
	char diff[DIFF_LEN];
	char *premap;		/* shared mapping of live/m made before the mount */
};

FIXTURE_VARIANT(snap) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(snap);

static const char *tree_diff(struct _test_data_snap *self, const char *a,
			     const char *b)
{
	return snap_diff(self->diff, a, b);
}

static int mount_snapshot(struct _test_data_snap *self)
{
	return snap_mount(self->opts, self->snap);
}

FIXTURE_SETUP(snap)
{
	char p[PATH_MAX], cmd[3 * PATH_MAX];
	char big[65536];
	int ret, fd;

	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "snap");

	ASSERT_EQ(0, snap_layout(self->mnt, self->live, self->store, self->ref,
				 self->snap));

	/* The live tree */
	join(p, self->live, "f");
	ASSERT_EQ(0, scratch_write(p, "hello world", O_EXCL));
	ASSERT_EQ(0, lsetxattr(p, "user.k", "v1", 2, 0));
	join(p, self->live, "big");
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 251);
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0640);
	ASSERT_LE(0, fd);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ((ssize_t)sizeof(big), write(fd, big, sizeof(big)));
	close(fd);
	join(p, self->live, "d");
	ASSERT_EQ(0, mkdir(p, 0750));
	join(p, self->live, "d/g");
	ASSERT_EQ(0, scratch_write(p, "nested", O_EXCL));
	join(p, self->live, "d/e");
	ASSERT_EQ(0, mkdir(p, 0755));
	join(p, self->live, "d/e/deep");
	ASSERT_EQ(0, scratch_write(p, "deep data", O_EXCL));
	join(p, self->live, "link");
	ASSERT_EQ(0, symlink("d/g", p));
	join(p, self->live, "m");
	ASSERT_EQ(0, scratch_write(p, "mapped before the snapshot", O_EXCL));
	fd = open(p, O_RDWR);
	ASSERT_LE(0, fd);
	self->premap = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ASSERT_NE(MAP_FAILED, self->premap);
	self->premap[0] = 'M';	/* a writable PTE the snapshot must take away */

	/* The reference, then the snapshot, with nothing changing between */
	snprintf(cmd, sizeof(cmd), "cp -a %s %s", self->live, self->ref);
	ASSERT_EQ(0, system(cmd));
	snprintf(self->opts, sizeof(self->opts),
		 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,snapshot",
		 self->live, self->store, self->store);
	ret = mount_snapshot(self);
	if (ret == -EINVAL)
		SKIP(return, "overlay has no snapshot option (kernel without the series?)");
	ASSERT_EQ(0, ret) TH_LOG("mount snapshot: %s", strerror(-ret));
	ASSERT_STREQ("", tree_diff(self, self->snap, self->ref));
}

FIXTURE_TEARDOWN(snap)
{
	if (self->premap && self->premap != MAP_FAILED)
		munmap(self->premap, 4096);
	/* not lazily: the next test makes a new filesystem on the disk */
	if (umount2(self->snap, 0) && errno != EINVAL)
		fprintf(stderr, "# umount %s: %s\n", self->snap, strerror(errno));
	if (umount2(self->mnt, 0)) {
		fprintf(stderr, "# umount %s: %s\n", self->mnt, strerror(errno));
		umount2(self->mnt, MNT_DETACH);
	}
}

/* Change data and metadata of every object in the live tree */
static void change_live(struct __test_metadata *_metadata,
			struct _test_data_snap *self)
{
	struct timespec ts[2] = { { .tv_sec = 1000 }, { .tv_sec = 2000 } };
	char p[PATH_MAX];
	char *map;
	int fd;

	join(p, self->live, "f");
	fd = open(p, O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(3, pwrite(fd, "HEL", 3, 0));
	close(fd);
	ASSERT_EQ(0, lsetxattr(p, "user.k", "v2", 2, 0));
	ASSERT_EQ(0, lsetxattr(p, "user.new", "x", 1, 0));
	ASSERT_EQ(0, chmod(p, 0600));

	join(p, self->live, "big");
	fd = open(p, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       65536, 65536));
	ASSERT_EQ(0, ftruncate(fd, 100000));
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, map);
	memset(map + 4000, 'Z', 200);
	munmap(map, 8192);
	close(fd);

	join(p, self->live, "d/g");
	ASSERT_EQ(0, chown(p, 1234, 4321));
	ASSERT_EQ(0, scratch_write(p, " and more", O_APPEND));
	join(p, self->live, "d/e/deep");
	ASSERT_EQ(0, utimensat(AT_FDCWD, p, ts, 0));
	ASSERT_EQ(0, truncate(p, 2));
	join(p, self->live, "d");
	ASSERT_EQ(0, chmod(p, 0700));
	ASSERT_EQ(0, lsetxattr(p, "user.dir", "y", 1, 0));
	join(p, self->live, "link");
	ASSERT_EQ(0, lchown(p, 77, 88));

	/* the mapping that predates the snapshot */
	memcpy(self->premap, "STORE", 5);
	msync(self->premap, 4096, MS_SYNC);
}

TEST_F(snap, data_and_metadata)
{
	char p[PATH_MAX], buf[64];

	change_live(_metadata, self);

	/* the live tree did change, natively */
	EXPECT_STRNE("", tree_diff(self, self->live, self->ref));
	join(p, self->live, "m");
	ASSERT_LT(0, scratch_read(p, buf, sizeof(buf)));
	EXPECT_STREQ("STOREd before the snapshot", buf);

	/* the snapshot did not: warm, cold, and mounted again */
	EXPECT_STREQ("", tree_diff(self, self->snap, self->ref));
	ASSERT_EQ(0, drop_caches());
	EXPECT_STREQ("", tree_diff(self, self->snap, self->ref));
	ASSERT_EQ(0, umount2(self->snap, 0));
	ASSERT_EQ(0, mount_snapshot(self));
	EXPECT_STREQ("", tree_diff(self, self->snap, self->ref));

	/* a second round of changes is already preserved */
	change_live(_metadata, self);
	EXPECT_STREQ("", tree_diff(self, self->snap, self->ref));
}

/* A file open in the snapshot before the live change reads the old data */
TEST_F(snap, open_file_across_copy_up)
{
	char p[PATH_MAX], buf[16] = "";
	int fd;

	join(p, self->snap, "f");
	fd = open(p, O_RDONLY);
	ASSERT_LE(0, fd);
	join(p, self->live, "f");
	EXPECT_EQ(0, scratch_write(p, "NEW", O_TRUNC));
	EXPECT_EQ(11, pread(fd, buf, sizeof(buf) - 1, 0));
	EXPECT_STREQ("hello world", buf);
	close(fd);
}

TEST_F(snap, bad_options)
{
	static const char * const conflicting[] = {
		"metacopy=on", "volatile", "index=off", "nfs_export=off",
		"userxattr",
	};
	char opts[4 * PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	int ret;

	join(p, self->mnt, "s2");
	ASSERT_EQ(0, mkdir(p, 0755));
	join(q, p, "upper");
	ASSERT_EQ(0, mkdir(q, 0755));
	join(q, p, "work");
	ASSERT_EQ(0, mkdir(q, 0755));

	snprintf(opts, sizeof(opts), "lowerdir=%s,snapshot", self->live);
	EXPECT_EQ(-1, mount("overlay", self->snap, "overlay", 0, opts));
	EXPECT_EQ(EINVAL, errno) TH_LOG("no upperdir");

	snprintf(opts, sizeof(opts),
		 "lowerdir=%s:%s/d,upperdir=%s/upper,workdir=%s/work,snapshot",
		 self->ref, self->ref, p, p);
	EXPECT_EQ(-1, mount("overlay", self->snap, "overlay", 0, opts));
	EXPECT_EQ(EINVAL, errno) TH_LOG("two lowerdirs");

	/* options that conflict with snapshot */
	for (size_t i = 0; i < ARRAY_SIZE(conflicting); i++) {
		snprintf(opts, sizeof(opts),
			 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,snapshot,%s",
			 self->ref, p, p, conflicting[i]);
		EXPECT_EQ(-1, mount("overlay", self->snap, "overlay", 0, opts));
		EXPECT_EQ(EINVAL, errno) TH_LOG("%s", conflicting[i]);
	}

	/* the store inside the live tree */
	ASSERT_EQ(0, scratch_sh("mkdir -p %s/store/upper %s/store/work",
				self->ref, self->ref));
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s,upperdir=%s/store/upper,workdir=%s/store/work,snapshot",
		 self->ref, self->ref, self->ref);
	ret = mount("overlay", self->snap, "overlay", 0, opts);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(EINVAL, errno) TH_LOG("store inside the live tree");
	if (!ret)
		umount2(self->snap, 0);
	/* overlayfs itself refuses a lower layer inside the upper */
	join(q, self->mnt, "s3");
	ASSERT_EQ(0, mkdir(q, 0755));
	ASSERT_EQ(0, scratch_sh("mkdir -p %s/upper/d %s/work", q, q));
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s/upper/d,upperdir=%s/upper,workdir=%s/work,snapshot",
		 q, q, q);
	ret = mount("overlay", self->snap, "overlay", 0, opts);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(ELOOP, errno) TH_LOG("live tree inside the store");
	if (!ret)
		umount2(self->snap, 0);

	/* the live tree, or a subtree of it, has an active snapshot */
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s/d,upperdir=%s/upper,workdir=%s/work,snapshot",
		 self->live, p, p);
	EXPECT_EQ(-1, mount("overlay", self->snap, "overlay", 0, opts));
	EXPECT_EQ(EBUSY, errno) TH_LOG("overlapping live trees");
}

/*
 * A caller without CAP_SYS_ADMIN in the initial user namespace gets EPERM
 * for snapshot: the hooks act on the host's filesystem.  Root in a new
 * user namespace may mount overlayfs (the same layers without snapshot,
 * the control), but not a snapshot.
 */
TEST_F(snap, unprivileged)
{
	int *res = mmap(NULL, 3 * sizeof(int), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char plain[4 * PATH_MAX], p[PATH_MAX];
	int status;
	pid_t pid;

	ASSERT_NE(MAP_FAILED, res);
	join(p, self->mnt, "s2");
	ASSERT_EQ(0, scratch_sh("mkdir -p %s/upper %s/work", p, p));
	snprintf(plain, sizeof(plain),
		 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", self->ref,
		 p, p);
	res[0] = -1;
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		char opts[4 * PATH_MAX + 16];

		if (unshare(CLONE_NEWUSER) ||
		    scratch_write("/proc/self/uid_map", "0 0 1", 0) ||
		    scratch_write("/proc/self/setgroups", "deny", 0) ||
		    scratch_write("/proc/self/gid_map", "0 0 1", 0) ||
		    unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
			res[0] = errno;
			_exit(0);
		}
		res[0] = 0;
		res[1] = mount("overlay", self->snap, "overlay", 0, plain) ?
			 errno : 0;
		if (!res[1])
			umount2(self->snap, 0);
		snprintf(opts, sizeof(opts), "%s,snapshot", plain);
		res[2] = mount("overlay", self->snap, "overlay", 0, opts) ?
			 errno : 0;
		if (!res[2])
			umount2(self->snap, 0);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	if (res[0])
		SKIP(return, "no user namespace: %s", strerror(res[0]));
	if (res[1])
		SKIP(return, "overlayfs refuses the control mount in a user namespace: %s",
		     strerror(res[1]));
	EXPECT_EQ(EPERM, res[2]) TH_LOG("snapshot in a user namespace: %s",
					strerror(res[2]));
	/* the live tree is still preserved by the real snapshot */
	EXPECT_STREQ("", tree_diff(self, self->snap, self->ref));
}

/*
 * A store the snapshot cannot write to (on a read-only mount): EINVAL.  A
 * filesystem without trusted xattrs and file handles (ramfs), where
 * overlayfs itself mounts with those features off (the control): the
 * snapshot gets EOPNOTSUPP and leaves no consumer behind.
 */
TEST_F(snap, unsupported)
{
	char opts[4 * PATH_MAX], ro[PATH_MAX], r[PATH_MAX], p[PATH_MAX];
	char mp[PATH_MAX];

	join(mp, self->mnt, "mp");
	ASSERT_EQ(0, mkdir(mp, 0755));
	/* the scratch fs again, read-only, holding the store */
	join(p, self->mnt, "s2");
	ASSERT_EQ(0, scratch_sh("mkdir -p %s/upper %s/work", p, p));
	join(ro, self->mnt, "ro");
	ASSERT_EQ(0, mkdir(ro, 0755));
	ASSERT_EQ(0, mount(self->mnt, ro, NULL, MS_BIND, NULL));
	ASSERT_EQ(0, mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL));
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s,upperdir=%s/s2/upper,workdir=%s/s2/work,snapshot",
		 self->ref, ro, ro);
	EXPECT_EQ(-1, mount("overlay", mp, "overlay", 0, opts));
	EXPECT_EQ(EINVAL, errno) TH_LOG("store on a read-only mount");
	EXPECT_EQ(0, umount2(ro, 0));

	/* ramfs: no trusted xattrs, no file handles */
	join(r, self->mnt, "ramfs");
	ASSERT_EQ(0, mkdir(r, 0755));
	ASSERT_EQ(0, mount("none", r, "ramfs", 0, NULL));
	ASSERT_EQ(0, scratch_sh("mkdir -p %s/live %s/s/upper %s/s/work %s/c/upper %s/c/work && echo x >%s/live/f",
				r, r, r, r, r, r));
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s/live,upperdir=%s/c/upper,workdir=%s/c/work", r, r, r);
	EXPECT_EQ(0, mount("overlay", mp, "overlay", 0, opts))
		TH_LOG("the control, without snapshot: %s", strerror(errno));
	umount2(mp, 0);
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s/live,upperdir=%s/s/upper,workdir=%s/s/work,snapshot",
		 r, r, r);
	EXPECT_EQ(-1, mount("overlay", mp, "overlay", 0, opts));
	EXPECT_EQ(EOPNOTSUPP, errno) TH_LOG("ramfs: %s", strerror(errno));
	/* no consumer left on ramfs: a change goes through, nothing copied */
	EXPECT_EQ(0, scratch_sh("echo y >%s/live/f && test -z \"$(ls -A %s/s/upper)\"", r, r));
	EXPECT_EQ(0, umount2(r, 0));
}

TEST_HARNESS_MAIN
