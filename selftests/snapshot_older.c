// SPDX-License-Identifier: GPL-2.0
/*
 * Overlayfs snapshots older than the active one: a read-only overlay with
 * "snapshot" and no upperdir, lowerdir=STORE/k/upper:...:STORE/A/upper:LIVE,
 * shows snapshot k's moment although the objects it shows are spread over
 * its own upper, every newer upper (copied up after k's moment but before
 * their first change since) and the live tree.  Directories renamed after
 * k's moment are followed through the newer snapshots' indexes.
 *
 * References are "cp -a" of the live tree taken right before each take.
 * The checks read every view right after its mount, after drop_caches,
 * mounted again, and (test warm) read whole, then again after live changes
 * without dropping caches.  A take outdates the mounted views (ESTALE).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <linux/fs.h>

#include "scratch.h"
#include "snaptree.h"
#include "harness.h"

#define MAX_SNAP 8

FIXTURE(older) {
	char mnt[PATH_MAX];
	char live[PATH_MAX];
	char store[PATH_MAX];
	char ref[PATH_MAX];
	char snap[PATH_MAX];
	char view[PATH_MAX];
	char diff[DIFF_LEN];
	int active;		/* id of the active snapshot, 0 for none */
};

FIXTURE_VARIANT(older) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(older);

/* A path under the live tree */
#define L(self, name) snap_path((self)->live, name)

/* STORE/id/part */
static const char *S(struct _test_data_older *self, int id, const char *part)
{
	return snap_pathf("%s/%d/%s", self->store, id, part);
}

/* The mount point of snapshot @id's overlay, and its reference */
static const char *M(struct _test_data_older *self, int id)
{
	return snap_pathf("%s%d", self->snap, id);
}

static const char *R(struct _test_data_older *self, int id)
{
	return snap_pathf("%s%d", self->ref, id);
}

/*
 * Take the next snapshot as ovl-snapshot take does: its store directory,
 * the reference of this moment, the takeover, the old overlay unmounted.
 */
static int take(struct _test_data_older *self)
{
	int id = self->active + 1;
	char o[4 * PATH_MAX];
	int ret;

	if (id > MAX_SNAP)
		return -E2BIG;
	if (mkdir(S(self, id, ""), 0700) || mkdir(S(self, id, "upper"), 0755) ||
	    mkdir(S(self, id, "work"), 0755) || mkdir(M(self, id), 0755))
		return -errno;
	if (scratch_sh("cp -a %s %s", self->live, R(self, id)))
		return -EIO;
	snprintf(o, sizeof(o), "lowerdir=%s,upperdir=%s,workdir=%s,snapshot",
		 self->live, S(self, id, "upper"), S(self, id, "work"));
	if (self->active)
		snprintf(o + strlen(o), sizeof(o) - strlen(o),
			 ",snapshot_prev=%s", S(self, self->active, "upper"));
	ret = snap_mount(o, M(self, id));
	if (ret)
		return ret;
	if (self->active && umount2(M(self, self->active), 0))
		return -errno;
	self->active = id;
	return 0;
}

/* The view of snapshot @id, from its upper to the active one's, on @dir */
static int view(struct _test_data_older *self, int id, const char *dir)
{
	char o[MAX_SNAP * PATH_MAX + 64];
	int i;

	snprintf(o, sizeof(o), "snapshot,lowerdir=");
	for (i = id; i <= self->active; i++)
		snprintf(o + strlen(o), sizeof(o) - strlen(o), "%s:",
			 S(self, i, "upper"));
	snprintf(o + strlen(o), sizeof(o) - strlen(o), "%s", self->live);
	if (mount("overlay", dir, "overlay", MS_RDONLY, o))
		return -errno;
	return 0;
}

/*
 * Every snapshot equals its reference: older ones through their view,
 * cold, after drop_caches and mounted again; the active one through its
 * overlay.  And the live tree differs from each (the test can fail).
 */
#define CHECK_ALL()							\
	do {								\
		for (int k = 1; k < self->active; k++) {		\
			EXPECT_STRNE("", snap_diff(self->diff, self->live, R(self, k))) \
				TH_LOG("snapshot %d: the live tree did not change", k); \
			ASSERT_EQ(0, view(self, k, self->view));	\
			EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, k))) \
				TH_LOG("snapshot %d, cold", k);		\
			ASSERT_EQ(0, drop_caches());			\
			EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, k))) \
				TH_LOG("snapshot %d, after drop_caches", k); \
			ASSERT_EQ(0, umount2(self->view, 0));		\
			ASSERT_EQ(0, view(self, k, self->view));	\
			EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, k))) \
				TH_LOG("snapshot %d, mounted again", k); \
			ASSERT_EQ(0, umount2(self->view, 0));		\
		}							\
		EXPECT_STREQ("", snap_diff(self->diff, M(self, self->active), \
					   R(self, self->active)))	\
			TH_LOG("the active snapshot %d", self->active);	\
	} while (0)

/* Run a shell command in the live tree */
#define SH(fmt, ...) ASSERT_EQ(0, scratch_sh("cd %s && " fmt, self->live, ##__VA_ARGS__))

FIXTURE_SETUP(older)
{
	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "older");

	join(self->live, self->mnt, "live");
	join(self->store, self->mnt, "store");
	join(self->ref, self->mnt, "ref");
	join(self->snap, self->mnt, "snap");
	join(self->view, self->mnt, "view");
	ASSERT_EQ(0, mkdir(self->live, 0755));
	ASSERT_EQ(0, mkdir(self->store, 0700));
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

FIXTURE_TEARDOWN(older)
{
	scratch_umount_tree(self->mnt);
}

/*
 * Five snapshots; between them data, attributes, xattrs, renames of
 * non-empty directories (and back to the old name), a directory moved up,
 * RENAME_EXCHANGE, rename over an existing file, hard links, a symlink
 * replaced, a sparse file grown, rm -rf.  Some objects change first long
 * after the oldest snapshot, so its view finds them in newer uppers.
 */
TEST_F(older, chain)
{
	ASSERT_EQ(0, take(self));

	SH("echo 'version 2' >f && echo 'nested 2' >d/h && chmod 0600 x && "
	   "setfattr -n user.k -v 2 x && mkdir n1 && echo n1 >n1/file && "
	   "mv d/e/deep2 d/deep2moved && ln hl1 hl3");
	ASSERT_EQ(0, take(self));

	SH("mv d d2 && echo 'version 3' >f && rm -rf t && echo 'hard 2' >>hl1");
	ASSERT_EQ(0, renameat2(AT_FDCWD, L(self, "p"), AT_FDCWD, L(self, "q"),
			       RENAME_EXCHANGE));
	ASSERT_EQ(0, take(self));

	SH("echo 'deep 3' >d2/e/deep && echo new >d2/new && mv n1 d2/n1moved && "
	   "truncate -s 2M s && printf end | dd of=s bs=1 seek=1536K conv=notrunc 2>/dev/null");
	ASSERT_EQ(0, take(self));

	SH("mv d2/e e2 && echo 'deep 4' >e2/deep && echo 'g 4' >g && "
	   "mv d2 d && mv x f && rm l && ln -s g l && touch -d @1000000000 d/h");
	ASSERT_EQ(0, take(self));

	SH("rm -rf d e2 && echo 'version 6' >f && chmod 0700 g && rm hl1 hl3");
	CHECK_ALL();
}

/*
 * A live directory renamed in every epoch, each time deeper into a chain
 * of new directories, and written under each name: each snapshot's view
 * of it merges copies found under a different name in every newer upper.
 */
TEST_F(older, renamed_every_time)
{
	char from[64], to[64];

	SH("mkdir -p w && echo 0 >w/gen && echo base >w/base");
	ASSERT_EQ(0, take(self));
	snprintf(from, sizeof(from), "w");
	for (int i = 1; i <= 4; i++) {
		snprintf(to, sizeof(to), "n%d", i);
		SH("mkdir %s && mv %s %s/w && echo %d >%s/w/gen && echo %d >%s/w/new%d",
		   to, from, to, i, to, i, to, i);
		snprintf(from, sizeof(from), "%s/w", to);
		ASSERT_EQ(0, take(self));
	}
	SH("echo last >%s/base && rm %s/gen", from, from);
	CHECK_ALL();
}

/*
 * Warm caches: a view read whole, then the live tree changed (objects that
 * the view had resolved to the live tree are copied up into the active
 * snapshot first), then the view read again by path without dropping
 * caches.  Also a file opened in the view after the change.
 */
TEST_F(older, warm)
{
	char *data = NULL;

	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f && echo 'nested 2' >d/h");
	ASSERT_EQ(0, take(self));

	ASSERT_EQ(0, view(self, 1, self->view));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, 1)))
		TH_LOG("before the changes");
	/* g, d/e, p, q and x were read from the live tree just now */
	SH("echo 'g 2' >g && echo 'deep 2' >d/e/deep && mv d/e d/e2 && "
	   "echo new >d/e2/new && chmod 0600 x && setfattr -n user.k -v 2 x && "
	   "rm p && mv q q2 && echo 'hard 2' >>hl1 && mkdir newdir && "
	   "echo n >newdir/n && truncate -s 256K s");
	EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, 1)))
		TH_LOG("warm, after the changes");
	ASSERT_EQ(18, read_all(snap_path(self->view, "g"), &data));
	EXPECT_EQ(0, memcmp(data, "untouched until 4\n", 18));
	free(data);
	ASSERT_EQ(0, umount2(self->view, 0));
	CHECK_ALL();
}

/*
 * Files opened in a view before the live tree changes them: the view had
 * resolved them to the live tree, the active snapshot copies them up
 * before the change.  Reads, a seek to the end, fstat and xattrs after
 * the change, all through the fds opened before it, must show the
 * reference of the view's moment; so must a mapping of the file opened
 * again (one through the old fd maps the live file, documented).
 */
TEST_F(older, open_across)
{
	char ref_g[64], ref_k[16], ref_s[3], val[16], *map;
	int fd_g, fd_x, fd_s, ref_fd;
	struct stat st, ref_st;
	ssize_t n;
	char buf[64];

	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f");
	ASSERT_EQ(0, take(self));
	ASSERT_EQ(0, view(self, 1, self->view));

	/* g, x and s are read from the live tree: no snapshot copied them */
	fd_g = open(snap_path(self->view, "g"), O_RDONLY);
	fd_x = open(snap_path(self->view, "x"), O_RDONLY);
	fd_s = open(snap_path(self->view, "s"), O_RDONLY);
	ASSERT_LE(0, fd_g);
	ASSERT_LE(0, fd_x);
	ASSERT_LE(0, fd_s);
	ASSERT_EQ(4, read(fd_g, buf, 4));

	SH("echo 'g changed after the view was opened' >g && chmod 0600 g && "
	   "setfattr -n user.k -v 2 x && "
	   "printf NEW | dd of=s bs=1 seek=512K conv=notrunc 2>/dev/null");

	/* the reference of snapshot 1 */
	ref_fd = open(snap_path(R(self, 1), "g"), O_RDONLY);
	ASSERT_LE(0, ref_fd);
	n = read(ref_fd, ref_g, sizeof(ref_g));
	ASSERT_LT(0, n);
	ASSERT_EQ(0, fstat(ref_fd, &ref_st));
	close(ref_fd);
	ASSERT_LT(0, lgetxattr(snap_path(R(self, 1), "x"), "user.k", ref_k,
			       sizeof(ref_k)));
	ref_fd = open(snap_path(R(self, 1), "s"), O_RDONLY);
	ASSERT_LE(0, ref_fd);
	ASSERT_EQ(3, pread(ref_fd, ref_s, 3, 512 << 10));
	close(ref_fd);

	/* read on from the same fd, then from the start */
	EXPECT_EQ(n - 4, read(fd_g, buf, sizeof(buf)));
	EXPECT_EQ(0, memcmp(buf, ref_g + 4, n - 4)) TH_LOG("read after the change");
	EXPECT_EQ(n, pread(fd_g, buf, sizeof(buf), 0));
	EXPECT_EQ(0, memcmp(buf, ref_g, n)) TH_LOG("pread after the change");
	EXPECT_EQ(n, lseek(fd_g, 0, SEEK_END));
	ASSERT_EQ(0, fstat(fd_g, &st));
	EXPECT_EQ(ref_st.st_size, st.st_size);
	EXPECT_EQ(ref_st.st_mode, st.st_mode);
	EXPECT_EQ(ref_st.st_mtim.tv_sec, st.st_mtim.tv_sec);
	EXPECT_EQ(ref_st.st_mtim.tv_nsec, st.st_mtim.tv_nsec);

	memset(val, 0, sizeof(val));
	EXPECT_EQ(1, fgetxattr(fd_x, "user.k", val, sizeof(val)));
	EXPECT_EQ(ref_k[0], val[0]) TH_LOG("fgetxattr after the change");

	/*
	 * mmap through fd_s keeps the live file (documented); a file opened
	 * after the change maps the copy.
	 */
	close(fd_s);
	fd_s = open(snap_path(self->view, "s"), O_RDONLY);
	ASSERT_LE(0, fd_s);
	map = mmap(NULL, 1 << 20, PROT_READ, MAP_SHARED, fd_s, 0);
	EXPECT_NE(MAP_FAILED, map);
	if (map != MAP_FAILED) {
		EXPECT_EQ(0, memcmp(map + (512 << 10), ref_s, 3))
			TH_LOG("mapping of a file opened after the change");
		munmap(map, 1 << 20);
	}
	close(fd_g);
	close(fd_x);
	close(fd_s);
	ASSERT_EQ(0, umount2(self->view, 0));
	CHECK_ALL();
}

/* "" if the entries read from directory fd @fd are those of @ref */
static const char *fd_entries_diff(char *diff, int fd, const char *ref)
{
	char **want = list_dir(ref), **got = NULL;
	struct dirent *de;
	size_t n = 0, i;
	DIR *d;

	diff[0] = 0;
	d = fdopendir(dup(fd));
	if (!d || !want) {
		snprintf(diff, DIFF_LEN, "cannot list fd %d or %s", fd, ref);
		goto out;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		got = realloc(got, (n + 2) * sizeof(*got));
		got[n++] = strdup(de->d_name);
	}
	if (!got)
		got = calloc(1, sizeof(*got));
	got[n] = NULL;
	qsort(got, n, sizeof(*got), cmp_names);
	for (i = 0; got[i] || want[i]; i++) {
		if (!got[i] || !want[i] || strcmp(got[i], want[i])) {
			snprintf(diff, DIFF_LEN, "entry '%s' vs reference '%s'",
				 got[i] ? got[i] : "(none)",
				 want[i] ? want[i] : "(none)");
			break;
		}
	}
out:
	if (d)
		closedir(d);
	free_list(got);
	free_list(want);
	return diff;
}

/* "" if @name under directory fd @dirfd reads as the file @ref */
static const char *at_data_diff(char *diff, int dirfd, const char *name,
				const char *ref)
{
	char a[256], b[256];
	ssize_t na = -1, nb = -1;
	int fd, err = 0;

	diff[0] = 0;
	fd = openat(dirfd, name, O_RDONLY);
	if (fd < 0)
		err = errno;
	else
		na = read(fd, a, sizeof(a));
	if (fd >= 0)
		close(fd);
	fd = open(ref, O_RDONLY);
	if (fd >= 0) {
		nb = read(fd, b, sizeof(b));
		close(fd);
	}
	if (err)
		snprintf(diff, DIFF_LEN, "%s: %s", name, strerror(err));
	else if (na < 0 || nb < 0 || na != nb || memcmp(a, b, na))
		snprintf(diff, DIFF_LEN, "%s: %zd bytes differ from the reference's %zd",
			 name, na, nb);
	return diff;
}

/*
 * Directories of a view used before the live tree changes them: read
 * from an fd opened before (rewound), the starting point of lookups
 * (openat() on that fd, and the working directory) — the view had
 * resolved them to the live tree, the active snapshot copies them up
 * with whiteouts for new names before each change.
 */
TEST_F(older, dir_open_across)
{
	int dfd, fd;

	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f");
	ASSERT_EQ(0, take(self));
	ASSERT_EQ(0, view(self, 1, self->view));

	dfd = open(snap_path(self->view, "d"), O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, dfd);
	EXPECT_STREQ("", fd_entries_diff(self->diff, dfd, snap_path(R(self, 1), "d")))
		TH_LOG("before the changes");
	ASSERT_EQ(0, chdir(snap_path(self->view, "d/e")));

	SH("echo n >d/new && mkdir d/newdir && rm d/h && mv d/e d/e2 && "
	   "echo n >d/e2/new && rm d/e2/deep2 && echo 'deep 2' >d/e2/deep");

	EXPECT_STREQ("", fd_entries_diff(self->diff, dfd, snap_path(R(self, 1), "d")))
		TH_LOG("an fd opened before the changes, rewound");
	fd = openat(dfd, "new", O_RDONLY);
	EXPECT_EQ(-1, fd) TH_LOG("openat() of a name made after the view's moment");
	if (fd >= 0)
		close(fd);
	EXPECT_STREQ("", at_data_diff(self->diff, dfd, "h", snap_path(R(self, 1), "d/h")))
		TH_LOG("openat() of a name removed since");

	/* the working directory d/e, renamed to d/e2 in the live tree */
	fd = open("new", O_RDONLY);
	EXPECT_EQ(-1, fd) TH_LOG("a name made in the working directory since");
	if (fd >= 0)
		close(fd);
	EXPECT_STREQ("", at_data_diff(self->diff, AT_FDCWD, "deep",
				      snap_path(R(self, 1), "d/e/deep")))
		TH_LOG("deep in the working directory");
	fd = open(".", O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, fd);
	EXPECT_STREQ("", fd_entries_diff(self->diff, fd, snap_path(R(self, 1), "d/e")))
		TH_LOG("the working directory");
	close(fd);

	ASSERT_EQ(0, chdir("/"));
	close(dfd);
	ASSERT_EQ(0, umount2(self->view, 0));
	CHECK_ALL();
}

/*
 * A take outdates the views of older snapshots (their newest layer is no
 * longer where copies go): ESTALE, until mounted again with the new list.
 * A view with an old list is refused.
 */
TEST_F(older, outdated)
{
	char o[4 * PATH_MAX];
	struct stat st;

	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f");
	ASSERT_EQ(0, take(self));
	ASSERT_EQ(0, view(self, 1, self->view));
	EXPECT_EQ(0, stat(snap_path(self->view, "f"), &st));
	ASSERT_EQ(0, take(self));
	SH("echo 'version 3' >f && echo 'g 3' >g");
	EXPECT_EQ(-1, stat(snap_path(self->view, "f"), &st));
	EXPECT_EQ(ESTALE, errno);
	EXPECT_EQ(-1, stat(snap_path(self->view, "g"), &st));
	EXPECT_EQ(ESTALE, errno);
	ASSERT_EQ(0, umount2(self->view, 0));

	/* the list of before the take: its newest layer is not active */
	snprintf(o, sizeof(o), "snapshot,lowerdir=%s:%s:%s",
		 S(self, 1, "upper"), S(self, 2, "upper"), self->live);
	EXPECT_EQ(-1, mount("overlay", self->view, "overlay", MS_RDONLY, o));
	EXPECT_EQ(EINVAL, errno);
	CHECK_ALL();
}

/* Bad views fail with EINVAL and a message; a view is read-only */
TEST_F(older, errors)
{
	char o[4 * PATH_MAX];

	ASSERT_EQ(0, take(self));
	SH("echo 'version 2' >f");
	ASSERT_EQ(0, take(self));

	/* only the live tree */
	snprintf(o, sizeof(o), "snapshot,lowerdir=%s", self->live);
	EXPECT_EQ(-1, mount("overlay", self->view, "overlay", MS_RDONLY, o));
	EXPECT_EQ(EINVAL, errno);

	/* a layer that is not a snapshot's upper */
	ASSERT_EQ(0, mkdir(snap_path(self->mnt, "plain"), 0755));
	snprintf(o, sizeof(o), "snapshot,lowerdir=%s:%s",
		 snap_path(self->mnt, "plain"), self->live);
	EXPECT_EQ(-1, mount("overlay", self->view, "overlay", MS_RDONLY, o));
	EXPECT_EQ(EINVAL, errno);

	/* an index that belongs to another upper: the upper was replaced */
	ASSERT_EQ(0, rename(S(self, 1, "upper"), S(self, 1, "upper.old")));
	ASSERT_EQ(0, mkdir(S(self, 1, "upper"), 0755));
	snprintf(o, sizeof(o), "snapshot,lowerdir=%s:%s:%s",
		 S(self, 1, "upper"), S(self, 2, "upper"), self->live);
	EXPECT_EQ(-1, mount("overlay", self->view, "overlay", MS_RDONLY, o));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, rmdir(S(self, 1, "upper")));
	ASSERT_EQ(0, rename(S(self, 1, "upper.old"), S(self, 1, "upper")));

	/* snapshot_prev needs upperdir */
	snprintf(o, sizeof(o), "snapshot,snapshot_prev=%s,lowerdir=%s:%s:%s",
		 S(self, 2, "upper"), S(self, 1, "upper"), S(self, 2, "upper"),
		 self->live);
	EXPECT_EQ(-1, mount("overlay", self->view, "overlay", MS_RDONLY, o));
	EXPECT_EQ(EINVAL, errno);

	/* the good one, read-only, and no consumer: the live tree is free */
	ASSERT_EQ(0, view(self, 1, self->view));
	EXPECT_EQ(-EROFS, scratch_write(snap_path(self->view, "new"), "x", O_EXCL));
	EXPECT_STREQ("", snap_diff(self->diff, self->view, R(self, 1)));
	SH("echo 'version 3' >f");
	ASSERT_EQ(0, take(self)) TH_LOG("a take with a view mounted");
	ASSERT_EQ(0, umount2(self->view, 0));
	CHECK_ALL();
}

TEST_HARNESS_MAIN
