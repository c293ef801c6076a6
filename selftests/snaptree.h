/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tree comparison for the snapshot selftests: a snapshot must equal a
 * "cp -a" reference of the live tree taken at its moment.
 */
#ifndef OVL_SELFTESTS_SNAPTREE_H
#define OVL_SELFTESTS_SNAPTREE_H

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include "scratch.h"

#define DIFF_LEN 512

static inline void join(char *buf, const char *dir, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

/*
 * A printf-formatted path in one of eight rotating static buffers, so that
 * a few can be passed to one call.  Not thread-safe: a path handed to a
 * thread must be copied.
 */
static inline const char *snap_pathf(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline const char *snap_pathf(const char *fmt, ...)
{
	static char buf[8][PATH_MAX];
	static int i;
	va_list ap;

	i = (i + 1) % 8;
	va_start(ap, fmt);
	vsnprintf(buf[i], PATH_MAX, fmt, ap);
	va_end(ap);
	return buf[i];
}

/* DIR/NAME, as snap_pathf() */
static inline const char *snap_path(const char *dir, const char *name)
{
	return snap_pathf("%s/%s", dir, name);
}

static inline int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/* Sorted entry names of @dir without . and .., NULL-terminated */
static inline char **list_dir(const char *dir)
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

static inline void free_list(char **names)
{
	for (char **p = names; p && *p; p++)
		free(*p);
	free(names);
}

static inline ssize_t read_all(const char *path, char **buf)
{
	struct stat st;
	ssize_t n;
	int fd;

	*buf = NULL;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	*buf = malloc(st.st_size + 1);
	n = pread(fd, *buf, st.st_size, 0);
	close(fd);
	return n;
}

static inline int cmp_xattrs(const char *a, const char *b, char *diff)
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
static inline int cmp_tree(const char *a, const char *b, char *diff, int depth)
{
	char **na = list_dir(a), **nb = list_dir(b);
	char pa[PATH_MAX], pb[PATH_MAX], la[PATH_MAX], lb[PATH_MAX];
	struct stat sa, sb;
	char *da = NULL, *db = NULL;
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

static inline int drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	int ret;

	if (fd < 0)
		return -errno;
	ret = write(fd, "3", 1) == 1 ? 0 : -errno;
	close(fd);
	return ret;
}

/* Compare @a with the reference @b; "" or the first difference, in @diff */
static inline const char *snap_diff(char *diff, const char *a, const char *b)
{
	diff[0] = 0;
	cmp_tree(a, b, diff, 0);
	return diff;
}

/* Mount the snapshot overlay at @dir, then make the mount read-only */
static inline int snap_mount(const char *opts, const char *dir)
{
	if (mount("overlay", dir, "overlay", 0, opts))
		return -errno;
	/* read-only for users; the superblock stays writable for copy-ups */
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL))
		return -errno;
	return 0;
}

/*
 * The layout under @mnt: the live tree, the store with upper and work
 * directories, the reference's path and the snapshot's mount point.
 */
static inline int snap_layout(const char *mnt, char *live, char *store,
			      char *ref, char *snap)
{
	char p[PATH_MAX];

	join(live, mnt, "live");
	join(store, mnt, "store");
	join(ref, mnt, "ref");
	join(snap, mnt, "snap");
	if (mkdir(live, 0755) || mkdir(store, 0700) || mkdir(snap, 0755))
		return -errno;
	join(p, store, "upper");
	if (mkdir(p, 0755))
		return -errno;
	join(p, store, "work");
	if (mkdir(p, 0755))
		return -errno;
	return 0;
}

/* Free bytes of the filesystem of @path, after a sync; -1 on error */
static inline long long avail_bytes(const char *path)
{
	struct statvfs sv;

	sync();
	if (statvfs(path, &sv))
		return -1;
	/* f_bfree: root may use the blocks ext4 reserves */
	return (long long)sv.f_bfree * sv.f_frsize;
}

/*
 * Fill the filesystem of @mnt with fallocated files until less than @leave
 * bytes are free (to within a block).  Returns 0 or an errno.
 */
static inline int fill_fs(const char *mnt, long long leave)
{
	char filler[PATH_MAX];
	long long len;
	int fd, i;

	for (i = 0; i < 64 && avail_bytes(mnt) >= leave + 4096; i++) {
		snprintf(filler, sizeof(filler), "%s/filler%d", mnt, i);
		fd = open(filler, O_CREAT | O_WRONLY, 0600);
		if (fd < 0 && errno == ENOSPC)
			break;		/* not even an inode left */
		if (fd < 0)
			return errno;
		len = avail_bytes(mnt) - leave;
		while (len >= 4096 && fallocate(fd, 0, 0, len))
			len /= 2;
		close(fd);
		if (len < 4096)
			break;
	}
	return 0;
}

#endif
