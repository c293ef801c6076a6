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

#include "scratch.h"
#include "kselftest_harness.h"

#define DIFF_LEN 512

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

static void join(char *buf, const char *dir, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/* Sorted entry names of @dir without . and .., NULL-terminated */
static char **list_dir(const char *dir)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		names = realloc(names, (n + 2) * sizeof(*names));
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	if (!names)
		names = calloc(1, sizeof(*names));
	names[n] = NULL;
	qsort(names, n, sizeof(*names), cmp_names);
	return names;
}

static void free_list(char **names)
{
	for (char **p = names; p && *p; p++)
		free(*p);
	free(names);
}

static ssize_t read_all(const char *path, char **buf)
{
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return -1;
	*buf = malloc(st.st_size + 1);
	n = pread(fd, *buf, st.st_size, 0);
	close(fd);
	return n;
}

static int cmp_xattrs(const char *a, const char *b, char *diff)
{
	char la[4096], lb[4096], va[1024], vb[1024];
	ssize_t na, nb, sa, sb;

	na = llistxattr(a, la, sizeof(la));
	nb = llistxattr(b, lb, sizeof(lb));
	if (na < 0)
		na = 0;
	if (nb < 0)
		nb = 0;
	/* user.* only: overlay keeps its own trusted.overlay.* */
	for (char *p = la; p < la + na; p += strlen(p) + 1) {
		if (strncmp(p, "user.", 5))
			continue;
		sa = lgetxattr(a, p, va, sizeof(va));
		sb = lgetxattr(b, p, vb, sizeof(vb));
		if (sa != sb || (sa > 0 && memcmp(va, vb, sa))) {
			snprintf(diff, DIFF_LEN, "%s: xattr %s differs", a, p);
			return 1;
		}
	}
	for (char *p = lb; p < lb + nb; p += strlen(p) + 1) {
		if (strncmp(p, "user.", 5))
			continue;
		if (lgetxattr(a, p, va, sizeof(va)) < 0) {
			snprintf(diff, DIFF_LEN, "%s: xattr %s missing", a, p);
			return 1;
		}
	}
	return 0;
}

/*
 * Compare trees @a (the snapshot) and @b (the reference); the first
 * difference goes to @diff.  The roots' own attributes are not compared:
 * a snapshot's root is its store's upper directory (docs/usage.md).
 */
static int cmp_tree(const char *a, const char *b, char *diff, int depth)
{
	char **na = list_dir(a), **nb = list_dir(b);
	char pa[PATH_MAX], pb[PATH_MAX], la[PATH_MAX], lb[PATH_MAX];
	struct stat sa, sb;
	char *da, *db;
	ssize_t n;
	int ret = 1;
	size_t i;

	if (!na || !nb) {
		snprintf(diff, DIFF_LEN, "cannot list %s or %s", a, b);
		goto out;
	}
	for (i = 0; na[i] || nb[i]; i++) {
		if (!na[i] || !nb[i] || strcmp(na[i], nb[i])) {
			snprintf(diff, DIFF_LEN, "%s: entry '%s' vs reference '%s'",
				 a, na[i] ? na[i] : "(none)",
				 nb[i] ? nb[i] : "(none)");
			goto out;
		}
		join(pa, a, na[i]);
		join(pb, b, nb[i]);
		if (lstat(pa, &sa) || lstat(pb, &sb)) {
			snprintf(diff, DIFF_LEN, "%s: lstat: %s", pa, strerror(errno));
			goto out;
		}
		if (sa.st_mode != sb.st_mode || sa.st_uid != sb.st_uid ||
		    sa.st_gid != sb.st_gid) {
			snprintf(diff, DIFF_LEN, "%s: mode/owner %o %u:%u vs %o %u:%u",
				 pa, sa.st_mode, sa.st_uid, sa.st_gid,
				 sb.st_mode, sb.st_uid, sb.st_gid);
			goto out;
		}
		if (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
		    sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec) {
			snprintf(diff, DIFF_LEN, "%s: mtime %ld.%09ld vs %ld.%09ld",
				 pa, sa.st_mtim.tv_sec, sa.st_mtim.tv_nsec,
				 sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
			goto out;
		}
		if (cmp_xattrs(pa, pb, diff))
			goto out;
		if (S_ISREG(sa.st_mode)) {
			if (sa.st_size != sb.st_size) {
				snprintf(diff, DIFF_LEN, "%s: size %lld vs %lld", pa,
					 (long long)sa.st_size, (long long)sb.st_size);
				goto out;
			}
			n = read_all(pa, &da);
			if (n != read_all(pb, &db) || (n > 0 && memcmp(da, db, n))) {
				snprintf(diff, DIFF_LEN, "%s: data differs", pa);
				free(da);
				free(db);
				goto out;
			}
			free(da);
			free(db);
		} else if (S_ISLNK(sa.st_mode)) {
			memset(la, 0, sizeof(la));
			memset(lb, 0, sizeof(lb));
			if (readlink(pa, la, sizeof(la) - 1) < 0 ||
			    readlink(pb, lb, sizeof(lb) - 1) < 0 || strcmp(la, lb)) {
				snprintf(diff, DIFF_LEN, "%s: link '%s' vs '%s'", pa, la, lb);
				goto out;
			}
		} else if (S_ISDIR(sa.st_mode)) {
			if (cmp_tree(pa, pb, diff, depth + 1))
				goto out;
		}
	}
	ret = 0;
out:
	free_list(na);
	free_list(nb);
	return ret;
}

static const char *tree_diff(struct _test_data_snap *self, const char *a,
			     const char *b)
{
	self->diff[0] = 0;
	cmp_tree(a, b, self->diff, 0);
	return self->diff;
}

static int mount_snapshot(struct _test_data_snap *self)
{
	if (mount("overlay", self->snap, "overlay", 0, self->opts))
		return -errno;
	/* read-only for users; the superblock stays writable for copy-ups */
	if (mount(NULL, self->snap, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY,
		  NULL))
		return -errno;
	return 0;
}

static int drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	int ret;

	if (fd < 0)
		return -errno;
	ret = write(fd, "3", 1) == 1 ? 0 : -errno;
	close(fd);
	return ret;
}

FIXTURE_SETUP(snap)
{
	char p[PATH_MAX], cmd[3 * PATH_MAX];
	char big[65536];
	int ret, fd;

	snprintf(self->mnt, sizeof(self->mnt), SCRATCH_BASE "/snap-%s",
		 variant->fs.name);
	/* whatever a failed test left mounted here */
	join(p, self->mnt, "snap");
	while (!umount2(p, 0))
		;
	while (!umount2(self->mnt, 0))
		;
	ret = scratch_mount(&variant->fs, self->mnt);
	if (ret == -ENODEV)
		SKIP(return, "no scratch disk with serial '%s'", variant->fs.name);
	ASSERT_EQ(0, ret) TH_LOG("mount %s: %s", variant->fs.name, strerror(-ret));

	join(self->live, self->mnt, "live");
	join(self->store, self->mnt, "store");
	join(self->ref, self->mnt, "ref");
	join(self->snap, self->mnt, "snap");
	ASSERT_EQ(0, mkdir(self->live, 0755));
	ASSERT_EQ(0, mkdir(self->store, 0700));
	ASSERT_EQ(0, mkdir(self->snap, 0755));
	join(p, self->store, "upper");
	ASSERT_EQ(0, mkdir(p, 0755));
	join(p, self->store, "work");
	ASSERT_EQ(0, mkdir(p, 0755));

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
	char opts[4 * PATH_MAX], p[PATH_MAX], q[PATH_MAX];

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

	snprintf(opts, sizeof(opts),
		 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,snapshot,metacopy=on",
		 self->ref, p, p);
	EXPECT_EQ(-1, mount("overlay", self->snap, "overlay", 0, opts));
	EXPECT_EQ(EINVAL, errno) TH_LOG("metacopy");

	/* the live tree, or a subtree of it, has an active snapshot */
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s/d,upperdir=%s/upper,workdir=%s/work,snapshot",
		 self->live, p, p);
	EXPECT_EQ(-1, mount("overlay", self->snap, "overlay", 0, opts));
	EXPECT_EQ(EBUSY, errno) TH_LOG("overlapping live trees");
}

TEST_HARNESS_MAIN
