// SPDX-License-Identifier: GPL-2.0
/*
 * ovl-snapshot: incremental read-only snapshots of a directory subtree with
 * overlayfs snapshots (CONFIG_FS_PREMOD, CONFIG_OVERLAY_FS).  See
 * "ovl-snapshot --help" and docs/usage.md.
 *
 * The store holds one directory per snapshot id N:
 *   STORE/live       the live tree's absolute path
 *   STORE/.lock      flock()ed by every command that changes the store,
 *                    and by mount
 *   STORE/N/upper    the snapshot's upper layer (copies of what changed)
 *   STORE/N/work     its overlayfs work directory (and index)
 *   STORE/N/root     mount point of the active snapshot's overlay
 *   STORE/N/info     "name=...", "time=..." (seconds since the epoch)
 *   STORE/N/moment   the time its overlay took over (sec.nsec, for arm)
 *   STORE/N/merging  while snapshot N is merged into its older neighbour
 *                    by delete (see merge_snapshot())
 *   STORE/.deleted-N a deleted snapshot being removed
 * Ids only grow; deleting snapshots leaves gaps.
 * The newest id is the active snapshot; it is "armed" while its overlay is
 * mounted on STORE/N/root, which is what preserves the live tree for it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_UNARMED	3
#define EXIT_MISSED	4

/* overlayfs's limit of lower layers (fs/overlayfs/params.h) */
#define OVL_MAX_STACK	500

static const char *prog = "ovl-snapshot";
static const char *cmd = "";

static const char help[] =
"NAME\n"
"    ovl-snapshot - incremental read-only snapshots of a directory tree\n"
"\n"
"SYNOPSIS\n"
"    ovl-snapshot [--store DIR] COMMAND LIVE [ARGS]\n"
"    ovl-snapshot umount DIR\n"
"    ovl-snapshot --help\n"
"\n"
"DESCRIPTION\n"
"    LIVE is a directory on a local filesystem (ext4, xfs, btrfs, tmpfs)\n"
"    that applications keep using directly.  A snapshot preserves LIVE as it\n"
"    was when it was taken: before anything in LIVE changes for the first\n"
"    time after that, the kernel copies the old state into the snapshot's\n"
"    upper directory in the store.  Taking a snapshot costs the same for any\n"
"    size of tree; the store grows with what changes afterwards and uses the\n"
"    filesystem's free space.  The newest snapshot is the active one; it\n"
"    preserves LIVE while it is armed (its overlay is mounted).\n"
"\n"
"COMMANDS\n"
"    init LIVE        create the store and snapshot 1, and arm it\n"
"    take LIVE [NAME] take a new snapshot; prints its id.  The previous\n"
"                     one stops preserving at the same moment\n"
"    list LIVE        one line per snapshot: ID NAME TIME USED STATE\n"
"    mount LIVE ID DIR\n"
"                     mount snapshot ID read-only on DIR; an older one is\n"
"                     read through every newer snapshot and LIVE\n"
"    umount DIR       unmount a snapshot mounted with mount\n"
"    delete LIVE ID   delete snapshot ID and free its space; a snapshot\n"
"                     between two others is first merged into its older\n"
"                     neighbour, whose view does not change.  Refused\n"
"                     (EBUSY) for the active one and while an overlay\n"
"                     that reads ID is mounted.  An interrupted delete is\n"
"                     finished by running it again\n"
"    arm LIVE [--no-check]\n"
"                     mount the active snapshot's overlay again (at boot,\n"
"                     before LIVE is written); nothing if it is armed.\n"
"                     Then walk LIVE for changes made while it was not\n"
"                     armed, which the snapshot shows although they are\n"
"                     after its moment: each is named on stderr, exit 4\n"
"    status LIVE      the store, the active snapshot and whether it is armed\n"
"\n"
"OPTIONS\n"
"    --store DIR      the store; default: .NAME.snapshots next to LIVE,\n"
"                     where NAME is LIVE's last component.  It must be on\n"
"                     LIVE's filesystem and outside LIVE\n"
"    -h, --help       this text\n"
"\n"
"EXIT STATUS\n"
"    0  success (status: the active snapshot is armed)\n"
"    1  the command failed; a message on stderr names the cause (and, for\n"
"       kernel errors, the errno; details in the kernel log)\n"
"    2  usage error\n"
"    3  status: the active snapshot is not armed\n"
"    4  arm: armed, but LIVE was changed while it was not (see arm)\n"
"\n"
"LIMITS\n"
"    A take outdates every mounted older snapshot: it then fails with\n"
"    ESTALE until it is mounted again.  A directory being read in an\n"
"    older snapshot during a change of LIVE may show that change; paths\n"
"    looked up and files read after it do not.  At most 499 snapshots\n"
"    back from the active one can be mounted (overlayfs's 500 layers):\n"
"    delete snapshots in between to merge them.  Changes made to\n"
"    LIVE while the active snapshot is not armed are not preserved; arm\n"
"    finds them from file ctimes, except names removed from a directory\n"
"    that the snapshot had copied and new names of a file it had copied,\n"
"    and is fooled by a clock set back.\n";

static void usage(void)
{
	fprintf(stderr, "usage: %s [--store DIR] init|take|list|mount|delete|arm|status LIVE [ARGS]\n"
		"       %s umount DIR\n"
		"see '%s --help'\n", prog, prog, prog);
	exit(EXIT_USAGE);
}

static void __attribute__((format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s: ", prog, cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_FAIL);
}

static void __attribute__((format(printf, 1, 2))) die_errno(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	fprintf(stderr, "%s: %s: ", prog, cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s (errno %d)\n", strerror(err), err);
	exit(EXIT_FAIL);
}

static void path_join(char *buf, const char *a, const char *b)
{
	if ((size_t)snprintf(buf, PATH_MAX, "%s/%s", a, b) >= PATH_MAX)
		die("path too long: %s/%s", a, b);
}

static void snap_path(char *buf, const char *store, long id, const char *part)
{
	int n;

	if (part)
		n = snprintf(buf, PATH_MAX, "%s/%ld/%s", store, id, part);
	else
		n = snprintf(buf, PATH_MAX, "%s/%ld", store, id);
	if (n >= PATH_MAX)
		die("path too long under %s", store);
}

struct ctx {
	char live[PATH_MAX];
	char store[PATH_MAX];
	int lock_fd;
};

/* Is @path @dir or below it? */
static int inside(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* Resolve LIVE and the store; the store must exist unless @creating */
static void ctx_init(struct ctx *c, const char *live, const char *store,
		     int creating)
{
	char buf[PATH_MAX], *slash;
	struct stat st;

	if (!realpath(live, c->live))
		die_errno("%s", live);
	if (stat(c->live, &st))
		die_errno("%s", c->live);
	if (!S_ISDIR(st.st_mode))
		die("%s is not a directory", c->live);
	if (!strcmp(c->live, "/"))
		die("the live tree cannot be /");
	if (store) {
		/* the parent must exist; the store is made by init */
		char *base;

		snprintf(buf, sizeof(buf), "%s", store);
		slash = strrchr(buf, '/');
		base = slash ? slash + 1 : buf;
		if (slash == buf)
			strcpy(c->store, "/");
		else if (!realpath(slash ? (*slash = 0, buf) : ".", c->store))
			die_errno("%s", store);
		if (!*base || strlen(c->store) + strlen(base) + 2 > PATH_MAX)
			die("bad store path %s", store);
		if (strcmp(c->store, "/"))
			strcat(c->store, "/");
		strcat(c->store, base);
		if (inside(c->store, c->live))
			die("the store %s is inside the live tree %s",
			    c->store, c->live);
		if (creating && mkdir(c->store, 0700) && errno != EEXIST)
			die_errno("mkdir %s", c->store);
	} else {
		strcpy(buf, c->live);
		slash = strrchr(buf, '/');
		*slash = 0;
		if ((size_t)snprintf(c->store, PATH_MAX, "%s/.%s.snapshots",
				     *buf ? buf : "", slash + 1) >= PATH_MAX)
			die("path too long");
		if (creating && mkdir(c->store, 0700) && errno != EEXIST)
			die_errno("mkdir %s", c->store);
	}
	c->lock_fd = -1;
}

static void ctx_lock(struct ctx *c)
{
	char p[PATH_MAX];

	path_join(p, c->store, ".lock");
	c->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->lock_fd < 0)
		die_errno("%s", p);
	if (flock(c->lock_fd, LOCK_EX))
		die_errno("lock %s", p);
}

/* The store's live tree must be LIVE */
static void ctx_check(struct ctx *c)
{
	char p[PATH_MAX], buf[PATH_MAX];
	ssize_t n;
	int fd;

	path_join(p, c->store, "live");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			die("%s is not a snapshot store (no 'init' for %s?)",
			    c->store, c->live);
		die_errno("%s", p);
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		die("%s: empty", p);
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	if (strcmp(buf, c->live))
		die("the store %s belongs to %s, not %s", c->store, buf,
		    c->live);
}

/* Snapshot ids in the store: lowest and highest, 0 when there is none */
static void ids(struct ctx *c, long *lo, long *hi)
{
	struct dirent *de;
	char *end;
	DIR *d;
	long id;

	*lo = *hi = 0;
	d = opendir(c->store);
	if (!d)
		die_errno("%s", c->store);
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		id = strtol(de->d_name, &end, 10);
		if (*end || id <= 0)
			continue;
		if (!*lo || id < *lo)
			*lo = id;
		if (id > *hi)
			*hi = id;
	}
	closedir(d);
}

static int exists(struct ctx *c, long id)
{
	char p[PATH_MAX];
	struct stat st;

	snap_path(p, c->store, id, "upper");
	return !stat(p, &st);
}

static int armed(struct ctx *c, long id)
{
	char p[PATH_MAX], q[PATH_MAX];
	struct stat a, b;

	snap_path(p, c->store, id, "root");
	snap_path(q, c->store, id, NULL);
	if (stat(p, &a) || stat(q, &b))
		return 0;
	return a.st_dev != b.st_dev;
}

/* Print what the kernel said about a failed fsconfig() or mount */
static void fs_messages(int fsfd)
{
	char buf[1024];
	ssize_t n;

	while ((n = read(fsfd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = 0;
		fprintf(stderr, "%s: kernel: %s\n", prog, buf);
	}
}

static int overlay_open(void)
{
	int fsfd = fsopen("overlay", FSOPEN_CLOEXEC);

	if (fsfd < 0)
		fprintf(stderr, "%s: %s: fsopen overlay: %s (errno %d)\n",
			prog, cmd, strerror(errno), errno);
	return fsfd;
}

/*
 * Create the overlay configured in @fsfd (@err: errno of a failed
 * fsconfig() before, or 0) and mount it read-only for users on @dir; the
 * superblock stays writable for an active snapshot's copy-ups.  On error,
 * say what failed (@what) with the kernel's messages.  Closes @fsfd.
 */
static int overlay_mount(int fsfd, int err, const char *dir, const char *what)
{
	int mfd = -1;

	if (!err && fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
		err = errno;
	if (!err) {
		mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY);
		if (mfd < 0)
			err = errno;
	}
	if (!err && move_mount(mfd, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH))
		err = errno;
	if (mfd >= 0)
		close(mfd);
	if (err) {
		fprintf(stderr, "%s: %s: mounting %s: %s (errno %d)\n",
			prog, cmd, what, strerror(err), err);
		fs_messages(fsfd);
		if (err != EINVAL && err != ENOENT)
			fprintf(stderr, "%s: see the kernel log (dmesg) for details\n",
				prog);
	}
	close(fsfd);
	errno = err;
	return err ? -1 : 0;
}

/*
 * Mount the overlay of snapshot @id on STORE/id/root: lower = LIVE, upper =
 * its upper, "snapshot"; with @prev, taking over from snapshot @prev.
 */
static int mount_engine(struct ctx *c, long id, long prev)
{
	char upper[PATH_MAX], work[PATH_MAX], root[PATH_MAX], pup[PATH_MAX];
	char what[64];
	int fsfd, err = 0;

	snap_path(upper, c->store, id, "upper");
	snap_path(work, c->store, id, "work");
	snap_path(root, c->store, id, "root");
	fsfd = overlay_open();
	if (fsfd < 0)
		return -1;
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "lowerdir+", c->live, 0) ||
	    fsconfig(fsfd, FSCONFIG_SET_STRING, "upperdir", upper, 0) ||
	    fsconfig(fsfd, FSCONFIG_SET_STRING, "workdir", work, 0) ||
	    fsconfig(fsfd, FSCONFIG_SET_FLAG, "snapshot", NULL, 0))
		err = errno;
	if (!err && prev) {
		snap_path(pup, c->store, prev, "upper");
		if (fsconfig(fsfd, FSCONFIG_SET_STRING, "snapshot_prev", pup, 0))
			err = errno;
	}
	snprintf(what, sizeof(what), "snapshot %ld", id);
	return overlay_mount(fsfd, err, root, what);
}

/*
 * Mount the read-only view of the older snapshot @id on @dir: its upper,
 * the upper of every newer snapshot up to the active one @hi, then LIVE.
 */
static int mount_view(struct ctx *c, long id, long hi, const char *dir)
{
	char upper[PATH_MAX], what[PATH_MAX + 64];
	int fsfd, err = 0;
	long i, n;

	for (i = id; i <= hi; i++) {
		snap_path(upper, c->store, i, "merging");
		if (!access(upper, F_OK)) {
			fprintf(stderr, "%s: %s: snapshot %ld is being merged into its older neighbour: run '%s delete %s %ld' again\n",
				prog, cmd, i, prog, c->live, i);
			errno = EBUSY;
			return -1;
		}
	}
	/* overlayfs stacks at most OVL_MAX_STACK lower layers, LIVE one of them */
	for (i = id, n = 1; i <= hi; i++)
		n += exists(c, i);
	if (n > OVL_MAX_STACK) {
		fprintf(stderr, "%s: %s: snapshot %ld needs %ld layers (its upper, %ld newer ones and LIVE); overlayfs stacks at most %d: delete snapshots between %ld and %ld to merge them\n",
			prog, cmd, id, n, n - 2, OVL_MAX_STACK, id, hi);
		errno = E2BIG;
		return -1;
	}
	fsfd = overlay_open();
	if (fsfd < 0)
		return -1;
	/* The ids of deleted snapshots are gaps */
	for (i = id; !err && i <= hi; i++) {
		if (!exists(c, i))
			continue;
		snap_path(upper, c->store, i, "upper");
		if (fsconfig(fsfd, FSCONFIG_SET_STRING, "lowerdir+", upper, 0))
			err = errno;
	}
	if (!err &&
	    (fsconfig(fsfd, FSCONFIG_SET_STRING, "lowerdir+", c->live, 0) ||
	     fsconfig(fsfd, FSCONFIG_SET_FLAG, "snapshot", NULL, 0)))
		err = errno;
	snprintf(what, sizeof(what), "the view of snapshot %ld on %s", id, dir);
	return overlay_mount(fsfd, err, dir, what);
}

static int rm_one(const char *path, const struct stat *st, int type,
		  struct FTW *ftw)
{
	if (type == FTW_DP ? rmdir(path) : unlink(path)) {
		fprintf(stderr, "%s: %s: remove %s: %s\n", prog, cmd, path,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int rm_tree(const char *path)
{
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int write_info(struct ctx *c, long id, const char *name, time_t t)
{
	char p[PATH_MAX];
	FILE *f;

	snap_path(p, c->store, id, "info");
	f = fopen(p, "we");
	if (!f || fprintf(f, "name=%s\ntime=%lld\n", name ? name : "",
			  (long long)t) < 0 || fflush(f) || fsync(fileno(f))) {
		fprintf(stderr, "%s: %s: %s: %s\n", prog, cmd, p,
			strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	return fclose(f);
}

/*
 * The moment of snapshot @id, the time its overlay took over.  File times
 * come from the coarse clock, so a change after the takeover is never
 * dated before it.  open_moment() writes a time read before the takeover,
 * so that nothing is left to allocate after it; set_moment() overwrites it
 * in place with one read right after.  Should that fail, the earlier time
 * stays: arm may then name a change made just before the takeover, but
 * never misses one made after it.
 */
#define MOMENT_FMT "%020lld.%09ld\n"

static int put_moment(int fd)
{
	char buf[64];
	struct timespec t;
	int len;

	clock_gettime(CLOCK_REALTIME_COARSE, &t);
	len = snprintf(buf, sizeof(buf), MOMENT_FMT, (long long)t.tv_sec,
		       t.tv_nsec);
	return pwrite(fd, buf, len, 0) == len ? 0 : -1;
}

static int open_moment(struct ctx *c, long id)
{
	char p[PATH_MAX];
	int fd;

	snap_path(p, c->store, id, "moment");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || put_moment(fd) || fsync(fd)) {
		fprintf(stderr, "%s: %s: %s: %s\n", prog, cmd, p,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void set_moment(struct ctx *c, long id, int fd)
{
	if (put_moment(fd) || close(fd))
		fprintf(stderr, "%s: %s: %s/%ld/moment: %s; it keeps the time from before the takeover\n",
			prog, cmd, c->store, id, strerror(errno));
}

static void read_info(struct ctx *c, long id, char *name, size_t len,
		      time_t *t)
{
	char p[PATH_MAX], line[512];
	FILE *f;

	*name = 0;
	*t = 0;
	snap_path(p, c->store, id, "info");
	f = fopen(p, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "name=", 5))
			snprintf(name, len, "%.*s", (int)len - 1, line + 5);
		else if (!strncmp(line, "time=", 5))
			*t = (time_t)strtoll(line + 5, NULL, 10);
	}
	fclose(f);
}

/* Make STORE/id with upper, work and root; on failure nothing is left */
static void make_snapshot_dirs(struct ctx *c, long id)
{
	static const char *const parts[] = { "upper", "work", "root" };
	char p[PATH_MAX];
	unsigned int i;

	snap_path(p, c->store, id, NULL);
	if (mkdir(p, 0700))
		die_errno("mkdir %s", p);
	for (i = 0; i < 3; i++) {
		snap_path(p, c->store, id, parts[i]);
		if (mkdir(p, 0755)) {
			int err = errno;

			snap_path(p, c->store, id, NULL);
			rm_tree(p);
			errno = err;
			die_errno("mkdir %s/%ld/%s", c->store, id, parts[i]);
		}
	}
}

static int valid_name(const char *name)
{
	return strlen(name) < 256 && !strpbrk(name, "\n");
}

/*
 * Snapshot @id, with the overlay that takes over from @prev (0: none):
 * everything it needs is written before the takeover, so a failure (no
 * space, say) leaves nothing of @id and @prev still active.
 */
static void new_snapshot(struct ctx *c, long id, const char *name, long prev)
{
	char p[PATH_MAX];
	int fd;

	make_snapshot_dirs(c, id);
	if (write_info(c, id, name, time(NULL)))
		goto fail;
	fd = open_moment(c, id);
	if (fd < 0)
		goto fail;
	if (mount_engine(c, id, prev)) {
		close(fd);
		goto fail;
	}
	set_moment(c, id, fd);
	return;
fail:
	snap_path(p, c->store, id, NULL);
	rm_tree(p);
	exit(EXIT_FAIL);
}

static int cmd_init(struct ctx *c)
{
	char p[PATH_MAX];
	long lo, hi;
	FILE *f;

	if (inside(c->store, c->live))
		die("the store %s is inside the live tree %s", c->store,
		    c->live);
	ctx_lock(c);
	path_join(p, c->store, "live");
	if (!access(p, F_OK))
		die("%s is a snapshot store already", c->store);
	ids(c, &lo, &hi);
	if (hi)
		die("%s holds snapshots but no 'live' file", c->store);

	/* "live" last: until it exists, a failed init can be run again */
	new_snapshot(c, 1, "", 0);
	f = fopen(p, "we");
	if (!f || fprintf(f, "%s\n", c->live) < 0 || fflush(f) ||
	    fsync(fileno(f)) || fclose(f)) {
		int err = errno;
		char root[PATH_MAX];

		unlink(p);
		snap_path(root, c->store, 1, "root");
		umount2(root, MNT_DETACH);
		snap_path(root, c->store, 1, NULL);
		rm_tree(root);
		errno = err;
		die_errno("%s", p);
	}
	printf("1\n");
	return 0;
}

static int cmd_take(struct ctx *c, const char *name)
{
	char p[PATH_MAX];
	long lo, hi;

	if (name && !valid_name(name))
		die("bad name (newline, or 256 bytes or more)");
	ctx_lock(c);
	ctx_check(c);
	ids(c, &lo, &hi);
	if (!hi)
		die("%s has no snapshot", c->store);
	if (!armed(c, hi))
		die("snapshot %ld is not armed: run '%s arm %s' first, changes since it was disarmed are not in it",
		    hi, prog, c->live);

	new_snapshot(c, hi + 1, name, hi);
	/* Inactive since the takeover: its own view is no longer kept */
	snap_path(p, c->store, hi, "root");
	if (umount2(p, MNT_DETACH))
		fprintf(stderr, "%s: take: umount %s: %s\n", prog, p,
			strerror(errno));
	printf("%ld\n", hi + 1);
	return 0;
}

/* Space used by a tree, in bytes allocated */
static unsigned long long du_total;

static int du_one(const char *path, const struct stat *st, int type,
		  struct FTW *ftw)
{
	if (type != FTW_NS)
		du_total += (unsigned long long)st->st_blocks * 512;
	return 0;
}

static unsigned long long du(const char *path)
{
	du_total = 0;
	nftw(path, du_one, 32, FTW_PHYS | FTW_MOUNT);
	return du_total;
}

static int cmd_list(struct ctx *c)
{
	char p[PATH_MAX], name[256], tbuf[32];
	long lo, hi, id;
	struct tm tm;
	time_t t;

	ctx_check(c);
	ids(c, &lo, &hi);
	printf("%-6s %-20s %-20s %12s %s\n", "ID", "NAME", "TIME", "USED",
	       "STATE");
	for (id = lo; hi && id <= hi; id++) {
		if (!exists(c, id))
			continue;
		read_info(c, id, name, sizeof(name), &t);
		localtime_r(&t, &tm);
		strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
		snap_path(p, c->store, id, NULL);
		printf("%-6ld %-20s %-20s %12llu %s\n", id, *name ? name : "-",
		       tbuf, du(p), id != hi ? "-" :
		       armed(c, id) ? "active,armed" : "active,not-armed");
	}
	return 0;
}

static long parse_id(const char *s)
{
	char *end;
	long id;

	errno = 0;
	id = strtol(s, &end, 10);
	if (errno || *end || id <= 0) {
		fprintf(stderr, "%s: %s: bad snapshot id '%s'\n", prog, cmd, s);
		exit(EXIT_USAGE);
	}
	return id;
}

static int cmd_mount(struct ctx *c, long id, const char *dir)
{
	char p[PATH_MAX];
	long lo, hi;

	ctx_check(c);
	/* not while a delete checks for views and merges, nor a take */
	ctx_lock(c);
	ids(c, &lo, &hi);
	if (!exists(c, id))
		die("no snapshot %ld in %s", id, c->store);
	if (!armed(c, hi))
		die("snapshot %ld is not armed: run '%s arm %s'", hi, prog,
		    c->live);
	if (id != hi)
		return mount_view(c, id, hi, dir) ? EXIT_FAIL : 0;
	snap_path(p, c->store, id, "root");
	if (mount(p, dir, NULL, MS_BIND, NULL))
		die_errno("bind %s on %s", p, dir);
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)) {
		int err = errno;

		umount2(dir, MNT_DETACH);
		errno = err;
		die_errno("read-only %s", dir);
	}
	return 0;
}

static int cmd_umount(const char *dir)
{
	if (umount2(dir, 0))
		die_errno("%s", dir);
	return 0;
}

/*
 * Merging snapshot K into its older neighbour P (delete of a snapshot that
 * is neither the oldest nor the active one).
 *
 * The view of P stacks P's upper, K's upper, the newer uppers and LIVE.
 * Directories are stacked by identity: a directory found by name in one
 * layer is merged with the copies of the same live directory in the newer
 * layers, found in each layer's index (work/index) by the hex of its
 * "origin" file handle.  A non-directory found in a newer layer or in LIVE
 * is replaced by the copy in the index of the oldest layer above it, if any
 * (hard links).  After the merge P's upper must stand for both layers, for
 * P's view and for every older view that reads through P and K:
 *
 * - for every directory of K whose live directory P copied too, each entry
 *   of K's copy that P's copy lacks (P did not touch that name) moves into
 *   P's copy, whiteouts included; an entry P has hides K's;
 * - a moved non-directory that P copied under another hard link becomes a
 *   link of P's copy, which is its state at P's moment; else it moves with
 *   its index entry; a moved directory takes its subtree and the subtree's
 *   index entries along (P cannot have copies of anything below it: P
 *   would have copied the directory up first);
 * - directories of K below a name that P hides (made after P's moment)
 *   are searched for directories that P copied elsewhere (moved there
 *   after P's moment); the rest of K is not read by any view and goes.
 *
 * Every step keeps the views: an entry is in P's copy or still in K's.
 * Directory times in P are restored after each change.  STORE/K/merging
 * says that a merge is under way (views of K and older are refused) and
 * names the subtree being moved, whose index entries a rerun moves.
 */
#define OVL_XATTR_ORIGIN	"trusted.overlay.origin"
#define OVL_XATTR_UPPER		"trusted.overlay.upper"
#define OVL_XATTR_IMPURE	"trusted.overlay.impure"
#define OVL_FB_MAGIC		0xfb
#define OVL_FB_FID_OFFSET	21	/* version, magic, len, flags, type, uuid */
#define OVL_FB_MAX		128

struct merge {
	struct ctx *c;
	long k, p;			/* the merged snapshot, its neighbour */
	char upper_k[PATH_MAX], index_k[PATH_MAX];
	char upper_p[PATH_MAX], index_p[PATH_MAX];
	char marker[PATH_MAX];		/* STORE/K/merging */
	int mount_fd;			/* P's upper, for open_by_handle_at() */
	unsigned long moved, linked;
};

static void merge_fail(struct merge *m, const char *what, const char *path)
{
	int err = errno;

	fprintf(stderr, "%s: %s: merging snapshot %ld into %ld: %s %s: %s (errno %d)\n",
		prog, cmd, m->k, m->p, what, path, strerror(err), err);
	fprintf(stderr, "%s: %s: the views are intact; run '%s delete %s %ld' again\n",
		prog, cmd, prog, m->c->live, m->k);
	exit(EXIT_FAIL);
}

/* The index name of @path's origin (the hex of its file handle), or "" */
static void origin_name(struct merge *m, const char *path, char *hex)
{
	unsigned char fb[OVL_FB_MAX];
	ssize_t n, i;

	*hex = 0;
	n = lgetxattr(path, OVL_XATTR_ORIGIN, fb, sizeof(fb));
	if (n < 0) {
		if (errno == ENODATA)
			return;
		merge_fail(m, "read origin of", path);
	}
	for (i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", fb[i]);
}

static int is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && !st->st_rdev;
}

/* @index/@hex when it is a non-directory copy (a hard link of it) */
static int index_file(const char *index, const char *hex, struct stat *st)
{
	char p[PATH_MAX];

	if (!*hex)
		return 0;
	path_join(p, index, hex);
	return !lstat(p, st) && !S_ISDIR(st->st_mode) && !is_whiteout(st);
}

/*
 * Open the object named by the overlayfs file handle @fb (@len bytes: an
 * "upper" xattr, or an index name decoded) on the filesystem of @mount_fd.
 * Returns an O_PATH fd, -1 with errno set (EUCLEAN: not a file handle).
 */
static int open_fb(int mount_fd, const unsigned char *fb, ssize_t len,
		   int flags)
{
	struct file_handle *fh;
	int fd;

	if (len < OVL_FB_FID_OFFSET || fb[1] != OVL_FB_MAGIC || fb[2] != len) {
		errno = EUCLEAN;
		return -1;
	}
	fh = malloc(sizeof(*fh) + len);
	if (!fh)
		return -1;
	fh->handle_bytes = len - OVL_FB_FID_OFFSET;
	fh->handle_type = fb[4];
	memcpy(fh->f_handle, fb + OVL_FB_FID_OFFSET, fh->handle_bytes);
	fd = open_by_handle_at(mount_fd, fh, O_PATH | flags);
	free(fh);
	return fd;
}

/*
 * The copy, in the upper @upper (open as @mount_fd), of the live directory
 * with index name @hex in @index: the index entry is a directory whose
 * "upper" xattr is the copy's handle.  Its path in @path; 0 for none, -1
 * with errno set and what failed in *@why.
 */
static int dir_copy(const char *index, int mount_fd, const char *upper,
		    const char *hex, char *path, const char **why)
{
	unsigned char fb[OVL_FB_MAX];
	char fdp[64];
	struct stat st;
	ssize_t n;
	int fd;

	if (!*hex)
		return 0;
	path_join(path, index, hex);
	if (lstat(path, &st) || !S_ISDIR(st.st_mode))
		return 0;
	*why = "bad index entry";
	n = lgetxattr(path, OVL_XATTR_UPPER, fb, sizeof(fb));
	if (n < 0)
		return -1;
	*why = "open the copy named by";
	fd = open_fb(mount_fd, fb, n, O_DIRECTORY);
	if (fd < 0)
		return -1;
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
	*why = "resolve the copy named by";
	n = readlink(fdp, path, PATH_MAX - 1);
	close(fd);
	if (n < 0)
		return -1;
	path[n] = 0;
	if (!inside(path, upper)) {
		*why = "index entry outside the upper";
		errno = EUCLEAN;
		return -1;
	}
	return 1;
}

/* P's copy of the live directory with index name @hex, in @path */
static int p_dir_copy(struct merge *m, const char *hex, char *path)
{
	const char *why;
	int ret;

	ret = dir_copy(m->index_p, m->mount_fd, m->upper_p, hex, path, &why);
	if (ret < 0) {
		char p[PATH_MAX];

		path_join(p, m->index_p, hex);
		merge_fail(m, why, p);
	}
	return ret;
}

/* Rename @from to @to, which must not exist */
static void move(struct merge *m, const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE))
		merge_fail(m, "move", from);
}

/* Move K's index entry @hex to P's index, if K has it and P does not */
static void move_index(struct merge *m, const char *hex, const struct stat *st)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct stat ist;

	if (!*hex)
		return;
	path_join(from, m->index_k, hex);
	path_join(to, m->index_p, hex);
	if (lstat(from, &ist) || !lstat(to, &ist))
		return;
	/* a non-directory's index entry is a hard link of its copy */
	if (st && (ist.st_ino != st->st_ino || ist.st_dev != st->st_dev))
		return;
	move(m, from, to);
}

/* The entry names of @dir, NULL-terminated */
static char **entries(struct merge *m, const char *dir)
{
	char **names = NULL;
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		merge_fail(m, "open", dir);
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		names = realloc(names, (n + 2) * sizeof(*names));
		if (!names || !(names[n] = strdup(de->d_name)))
			merge_fail(m, "list", dir);
		n++;
	}
	if (errno)
		merge_fail(m, "read", dir);
	closedir(d);
	if (!names)
		names = calloc(1, sizeof(*names));
	if (!names)
		merge_fail(m, "list", dir);
	names[n] = NULL;
	return names;
}

static void free_entries(char **names)
{
	for (char **n = names; *n; n++)
		free(*n);
	free(names);
}

static void save_times(struct merge *m, const char *path, struct timespec *t)
{
	struct stat st;

	if (lstat(path, &st))
		merge_fail(m, "stat", path);
	t[0] = st.st_atim;
	t[1] = st.st_mtim;
}

static void restore_times(struct merge *m, const char *path,
			  const struct timespec *t)
{
	if (utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW))
		merge_fail(m, "restore the times of", path);
}

/*
 * A subtree of K moved into P: P had no copy of anything in it.  Move the
 * index entries of its objects to P's index; a non-directory that P copied
 * under another hard link becomes a link of P's copy.
 */
static void adopt_tree(struct merge *m, const char *dir)
{
	char p[PATH_MAX], ip[PATH_MAX], tmp[PATH_MAX], hex[2 * OVL_FB_MAX + 1];
	struct timespec t[2];
	struct stat st, ist;
	char **names, **n;
	int changed = 0;

	save_times(m, dir, t);
	origin_name(m, dir, hex);
	move_index(m, hex, NULL);
	names = entries(m, dir);
	for (n = names; *n; n++) {
		path_join(p, dir, *n);
		if (lstat(p, &st))
			merge_fail(m, "stat", p);
		if (S_ISDIR(st.st_mode)) {
			adopt_tree(m, p);
			continue;
		}
		origin_name(m, p, hex);
		if (index_file(m->index_p, hex, &ist)) {
			if (ist.st_ino == st.st_ino)
				continue;
			path_join(ip, m->index_p, hex);
			path_join(tmp, dir, ".ovl-snapshot-merge");
			unlink(tmp);
			if (linkat(AT_FDCWD, ip, AT_FDCWD, tmp, 0))
				merge_fail(m, "link", ip);
			if (rename(tmp, p))
				merge_fail(m, "replace", p);
			m->linked++;
			changed = 1;
		} else {
			move_index(m, hex, &st);
		}
	}
	free_entries(names);
	if (changed)
		restore_times(m, dir, t);
}

/* Record the subtree being moved into P (@rel below P's upper), or none */
static void mark(struct merge *m, const char *rel)
{
	FILE *f = fopen(m->marker, "we");

	if (!f || fprintf(f, "%s\n", rel ? rel : "") < 0 || fflush(f) ||
	    fsync(fileno(f)) || fclose(f))
		merge_fail(m, "write", m->marker);
}

static int absent(struct merge *m, const char *path)
{
	struct stat st;

	if (!lstat(path, &st))
		return 0;
	if (errno != ENOENT)
		merge_fail(m, "stat", path);
	return 1;
}

/*
 * Merge K's directory @dk into @dp, P's copy of the same live directory,
 * or, with @dp NULL, search @dk (hidden in P's view) for directories that
 * P copied elsewhere.
 */
static void merge_dir(struct merge *m, const char *dk, const char *dp)
{
	char pk[PATH_MAX], pp[PATH_MAX], cp[PATH_MAX];
	char hex[2 * OVL_FB_MAX + 1], ip[PATH_MAX];
	struct timespec t[2], dt[2];
	struct stat st, ist;
	char **names, **n;
	int changed = 0;

	if (dp)
		save_times(m, dp, t);
	names = entries(m, dk);
	for (n = names; *n; n++) {
		path_join(pk, dk, *n);
		if (lstat(pk, &st))
			merge_fail(m, "stat", pk);
		if (dp)
			path_join(pp, dp, *n);
		if (S_ISDIR(st.st_mode)) {
			origin_name(m, pk, hex);
			if (p_dir_copy(m, hex, cp)) {
				merge_dir(m, pk, cp);
			} else if (dp && absent(m, pp)) {
				save_times(m, pk, dt);
				mark(m, pp + strlen(m->upper_p));
				move(m, pk, pp);
				adopt_tree(m, pp);
				restore_times(m, pp, dt);
				mark(m, NULL);
				m->moved++;
				changed = 1;
			} else {
				merge_dir(m, pk, NULL);
			}
		} else if (dp && absent(m, pp)) {
			origin_name(m, pk, hex);
			if (index_file(m->index_p, hex, &ist)) {
				/* P copied it under another name: its state */
				path_join(ip, m->index_p, hex);
				if (linkat(AT_FDCWD, ip, AT_FDCWD, pp, 0))
					merge_fail(m, "link", ip);
				m->linked++;
			} else {
				move(m, pk, pp);
				move_index(m, hex, &st);
				m->moved++;
			}
			changed = 1;
		}
	}
	free_entries(names);
	if (!changed)
		return;
	if (lgetxattr(dk, OVL_XATTR_IMPURE, NULL, 0) >= 0 &&
	    lgetxattr(dp, OVL_XATTR_IMPURE, NULL, 0) < 0 &&
	    lsetxattr(dp, OVL_XATTR_IMPURE, "y", 1, 0))
		merge_fail(m, "mark impure", dp);
	restore_times(m, dp, t);
}

/*
 * The non-directory copies that K holds in its index and P lacks, after
 * merge_dir(): above all those K made into its index only (a file changed
 * through a name removed before K's moment while it kept other names: the
 * kernel reaches it by its file handle, not by a name).  P lacking a copy
 * of a file means the file did not change in P's epoch, so K's copy is its
 * state at P's moment too; views find every name of a file in the index.
 * A copy that P has hides K's, which is freed with K.
 */
static void merge_index_files(struct merge *m)
{
	char **names = entries(m, m->index_k);
	struct stat st;

	for (char **n = names; *n; n++) {
		char from[PATH_MAX];

		path_join(from, m->index_k, *n);
		if (lstat(from, &st))
			merge_fail(m, "stat", from);
		if (S_ISDIR(st.st_mode) || is_whiteout(&st))
			continue;
		move_index(m, *n, NULL);
		if (access(from, F_OK))
			m->moved++;
	}
	free_entries(names);
}

/*
 * Is an overlay mounted with @upper as a layer?  Then say where, in
 * @where.  The layer paths are in the mount options, as given.
 */
static int layer_mounted(const char *upper, char *where, size_t len)
{
	char *line = NULL, *opts, *hit;
	size_t n = 0, ul = strlen(upper);
	int found = 0;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	while (!found && getline(&line, &n, f) > 0) {
		opts = strstr(line, " - overlay ");
		if (!opts)
			continue;
		for (hit = strstr(opts, upper); hit; hit = strstr(hit + 1, upper)) {
			if (strchr(":,\n ", hit[ul]) && (hit[-1] == '=' || hit[-1] == ':')) {
				/* field 5 is the mount point */
				if (sscanf(line, "%*s %*s %*s %*s %4095s", where) != 1)
					snprintf(where, len, "?");
				found = 1;
				break;
			}
		}
	}
	free(line);
	fclose(f);
	return found;
}

static void merge_snapshot(struct ctx *c, long k, long p)
{
	char where[PATH_MAX], rel[PATH_MAX], moved[PATH_MAX];
	struct merge m = { .c = c, .k = k, .p = p };
	FILE *f;

	snap_path(m.upper_k, c->store, k, "upper");
	snap_path(m.index_k, c->store, k, "work/index");
	snap_path(m.upper_p, c->store, p, "upper");
	snap_path(m.index_p, c->store, p, "work/index");
	snap_path(m.marker, c->store, k, "merging");
	if (layer_mounted(m.upper_k, where, sizeof(where))) {
		errno = EBUSY;
		die_errno("snapshot %ld is read by the overlay mounted on %s: unmount it first",
			  k, where);
	}
	if (access(m.index_p, F_OK) || access(m.index_k, F_OK))
		die_errno("snapshot %ld or %ld has no index (never armed?)", p, k);
	m.mount_fd = open(m.upper_p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (m.mount_fd < 0)
		merge_fail(&m, "open", m.upper_p);

	/* An interrupted merge: finish moving the index of its last subtree */
	f = fopen(m.marker, "re");
	if (f) {
		if (fgets(rel, sizeof(rel), f) && *rel != '\n') {
			rel[strcspn(rel, "\n")] = 0;
			if ((size_t)snprintf(moved, sizeof(moved), "%s%s",
					     m.upper_p, rel) < sizeof(moved) &&
			    !access(moved, F_OK))
				adopt_tree(&m, moved);
		}
		fclose(f);
	}
	mark(&m, NULL);
	merge_dir(&m, m.upper_k, m.upper_p);
	merge_index_files(&m);
	close(m.mount_fd);
	printf("snapshot %ld merged into %ld: %lu entries moved, %lu linked\n",
	       k, p, m.moved, m.linked);
}

/* Remove what an interrupted delete left: STORE/.deleted-N */
static void remove_deleted(struct ctx *c)
{
	char p[PATH_MAX];
	struct dirent *de;
	DIR *d;

	d = opendir(c->store);
	if (!d)
		die_errno("%s", c->store);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, ".deleted-", 9))
			continue;
		path_join(p, c->store, de->d_name);
		rm_tree(p);
	}
	closedir(d);
}

static int cmd_delete(struct ctx *c, long id)
{
	char p[PATH_MAX], gone[PATH_MAX], where[PATH_MAX];
	long lo, hi, prev;

	ctx_lock(c);
	ctx_check(c);
	remove_deleted(c);
	ids(c, &lo, &hi);
	if (!exists(c, id))
		die("no snapshot %ld in %s", id, c->store);
	if (id == hi) {
		errno = EBUSY;
		die_errno("snapshot %ld is the active one", id);
	}
	/* An inactive snapshot's overlay left mounted keeps nothing */
	if (armed(c, id)) {
		snap_path(p, c->store, id, "root");
		umount2(p, MNT_DETACH);
	}
	for (prev = id - 1; prev >= lo && !exists(c, prev); prev--)
		;
	if (prev >= lo) {
		/* Its older neighbour's view reads it: merge it there first */
		merge_snapshot(c, id, prev);
	} else {
		/* Nothing newer reads an older upper */
		snap_path(p, c->store, id, "upper");
		if (layer_mounted(p, where, sizeof(where))) {
			errno = EBUSY;
			die_errno("snapshot %ld is read by the overlay mounted on %s: unmount it first",
				  id, where);
		}
	}
	/* Gone for every command at once, then its space is freed */
	snap_path(p, c->store, id, NULL);
	if ((size_t)snprintf(gone, sizeof(gone), "%s/.deleted-%ld", c->store,
			     id) >= sizeof(gone))
		die("path too long under %s", c->store);
	if (rename(p, gone))
		die_errno("rename %s", p);
	if (rm_tree(gone))
		die("%s could not be removed completely", gone);
	return 0;
}

/*
 * Changes made to LIVE while the active snapshot was not armed, found by
 * arm.  While it is armed, every change of a live object is preceded by
 * the object's copy-up (a directory's for a change of its entries) and a
 * name made gets a whiteout.  So, with T the snapshot's moment:
 * - an object that existed at T (btime before T) whose ctime is T or later
 *   and that has no copy (nothing in the index names it) changed while
 *   not armed; this covers a directory whose entries changed;
 * - in a directory that has a copy, a name with neither a copy nor a
 *   whiteout in it, whose object's ctime is T or later and which is not a
 *   copied non-directory, was made, or moved there, while not armed.  A
 *   copied non-directory is shown from its copy under any name (the
 *   index): an unpinned name of it is a hard link that existed at T, or
 *   one made while not armed, which cannot be told apart.
 * Not seen: a name removed from a directory that has a copy, a name of a
 * copied non-directory made while not armed, and ctimes moved back by a
 * clock change.  The walk costs a statx per live object.
 */
struct copied {
	dev_t dev;
	ino_t ino;
	char *hex;
	int dir;
};

struct unarmed {
	long id;
	struct timespec t;		/* the snapshot's moment */
	char upper[PATH_MAX], index[PATH_MAX];
	int upper_fd;
	struct copied *set;		/* live objects with a copy, by ino */
	size_t n;
	unsigned long found;
};

static int cmp_copied(const void *a, const void *b)
{
	const struct copied *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

static const struct copied *copied(struct unarmed *u, dev_t dev, ino_t ino)
{
	struct copied key = { .dev = dev, .ino = ino };

	return bsearch(&key, u->set, u->n, sizeof(key), cmp_copied);
}

/* The live objects that the index names: decode each index name */
static void load_copied(struct unarmed *u, int live_fd)
{
	unsigned char fb[OVL_FB_MAX];
	struct dirent *de;
	struct stat st;
	size_t len, i;
	unsigned int b;
	DIR *d;
	int fd;

	d = opendir(u->index);
	if (!d)
		die_errno("%s", u->index);
	while ((de = readdir(d))) {
		len = strlen(de->d_name);
		if (len < 2 * OVL_FB_FID_OFFSET || len % 2 || len > 2 * OVL_FB_MAX)
			continue;
		for (i = 0; i < len / 2; i++) {
			if (sscanf(de->d_name + 2 * i, "%2x", &b) != 1)
				break;
			fb[i] = b;
		}
		if (i < len / 2)
			continue;
		/* gone from the live tree since: ESTALE */
		fd = open_fb(live_fd, fb, len / 2, 0);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st)) {
			u->set = realloc(u->set, (u->n + 1) * sizeof(*u->set));
			if (!u->set)
				die_errno("memory");
			u->set[u->n].dev = st.st_dev;
			u->set[u->n].ino = st.st_ino;
			u->set[u->n].dir = S_ISDIR(st.st_mode);
			u->set[u->n].hex = strdup(de->d_name);
			if (!u->set[u->n].hex)
				die_errno("memory");
			u->n++;
		}
		close(fd);
	}
	closedir(d);
	qsort(u->set, u->n, sizeof(*u->set), cmp_copied);
}

static int ts_before(const struct statx_timestamp *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void unarmed_report(struct unarmed *u, const char *what,
			   const char *path)
{
	if (u->found++ < 20)
		fprintf(stderr, "%s: %s: %s while snapshot %ld was not armed: %s\n",
			prog, cmd, what, u->id, path);
}

/* Check the entries of the live directory @dir, whose copy is @copy or "" */
static void unarmed_dir(struct unarmed *u, const char *dir, const char *copy,
			dev_t dev)
{
	char p[PATH_MAX], cp[PATH_MAX], sub[PATH_MAX];
	const struct copied *c;
	const char *why;
	struct dirent *de;
	struct statx stx;
	int changed, new;
	DIR *d;

	d = opendir(dir);
	if (!d) {
		fprintf(stderr, "%s: %s: %s: %s\n", prog, cmd, dir,
			strerror(errno));
		u->found++;
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path_join(p, dir, de->d_name);
		if (statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW,
			  STATX_BASIC_STATS | STATX_BTIME, &stx))
			continue;
		if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != dev)
			continue;	/* another filesystem mounted here */
		changed = !ts_before(&stx.stx_ctime, &u->t);
		new = (stx.stx_mask & STATX_BTIME) &&
		      !ts_before(&stx.stx_btime, &u->t) &&
		      (stx.stx_btime.tv_sec != u->t.tv_sec ||
		       stx.stx_btime.tv_nsec != u->t.tv_nsec);
		c = copied(u, dev, stx.stx_ino);
		if (changed && !c && !new)
			unarmed_report(u, "changed", p);
		else if (changed && *copy && (!c || c->dir) &&
			 (path_join(cp, copy, de->d_name), access(cp, F_OK)) &&
			 errno == ENOENT)
			unarmed_report(u, "made or moved here", p);
		if (!S_ISDIR(stx.stx_mode))
			continue;
		*sub = 0;
		if (c && dir_copy(u->index, u->upper_fd, u->upper, c->hex, sub,
				  &why) < 0) {
			fprintf(stderr, "%s: %s: %s %s/%s: %s\n", prog, cmd, why,
				u->index, c->hex, strerror(errno));
			u->found++;
			*sub = 0;
		}
		unarmed_dir(u, p, sub, dev);
	}
	closedir(d);
}

/* Report the changes of LIVE made while snapshot @id was not armed */
static unsigned long check_unarmed(struct ctx *c, long id)
{
	struct unarmed u = { .id = id };
	char p[PATH_MAX], name[256];
	struct stat st;
	FILE *f;
	int live_fd;
	time_t t;

	snap_path(p, c->store, id, "moment");
	f = fopen(p, "re");
	if (!f || fscanf(f, "%ld.%ld", &u.t.tv_sec, &u.t.tv_nsec) != 2) {
		/* a store of an older tool: the time of the take, in seconds */
		read_info(c, id, name, sizeof(name), &t);
		u.t.tv_sec = t;
		u.t.tv_nsec = 0;
	}
	if (f)
		fclose(f);
	snap_path(u.upper, c->store, id, "upper");
	snap_path(u.index, c->store, id, "work/index");
	u.upper_fd = open(u.upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	live_fd = open(c->live, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (u.upper_fd < 0 || live_fd < 0 || fstat(live_fd, &st))
		die_errno("open %s or %s", u.upper, c->live);
	load_copied(&u, live_fd);
	/* the upper's root is the copy of LIVE's root */
	unarmed_dir(&u, c->live, u.upper, st.st_dev);
	close(live_fd);
	close(u.upper_fd);
	for (size_t i = 0; i < u.n; i++)
		free(u.set[i].hex);
	free(u.set);
	if (u.found > 20)
		fprintf(stderr, "%s: %s: ... and %lu more\n", prog, cmd,
			u.found - 20);
	if (u.found)
		fprintf(stderr, "%s: %s: %lu changes of %s were made while snapshot %ld was not armed: it shows them, not the state of its moment\n",
			prog, cmd, u.found, c->live, id);
	return u.found;
}

static int cmd_arm(struct ctx *c, int check)
{
	long lo, hi;

	ctx_lock(c);
	ctx_check(c);
	ids(c, &lo, &hi);
	if (!hi)
		die("%s has no snapshot", c->store);
	if (armed(c, hi)) {
		printf("snapshot %ld is armed already\n", hi);
		return 0;
	}
	if (mount_engine(c, hi, 0))
		exit(EXIT_FAIL);
	printf("snapshot %ld armed\n", hi);
	fflush(stdout);
	return check && check_unarmed(c, hi) ? EXIT_MISSED : 0;
}

static int cmd_status(struct ctx *c)
{
	long lo, hi, n = 0, id;
	int on;

	ctx_check(c);
	ids(c, &lo, &hi);
	for (id = lo; hi && id <= hi; id++)
		n += exists(c, id);
	on = hi && armed(c, hi);
	printf("live: %s\nstore: %s\nsnapshots: %ld\nactive: %ld\narmed: %s\n",
	       c->live, c->store, n, hi, on ? "yes" : "no");
	return on ? 0 : EXIT_UNARMED;
}

int main(int argc, char **argv)
{
	const char *store = NULL;
	struct ctx c;
	int i = 1;

	while (i < argc && argv[i][0] == '-') {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(help, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--store") && i + 1 < argc) {
			store = argv[i + 1];
			i += 2;
		} else if (!strncmp(argv[i], "--store=", 8)) {
			store = argv[i] + 8;
			i++;
		} else {
			usage();
		}
	}
	if (i >= argc)
		usage();
	cmd = argv[i++];
	argc -= i;
	argv += i;

	if (!strcmp(cmd, "umount")) {
		if (argc != 1)
			usage();
		return cmd_umount(argv[0]);
	}
	if (argc < 1)
		usage();
	/* --store may also follow LIVE for init, as in the synopsis of init */
	if (!strcmp(cmd, "init") && argc == 3 && !strcmp(argv[1], "--store")) {
		store = argv[2];
		argc = 1;
	}
	ctx_init(&c, argv[0], store, !strcmp(cmd, "init"));

	if (!strcmp(cmd, "init") && argc == 1)
		return cmd_init(&c);
	if (!strcmp(cmd, "take") && argc <= 2)
		return cmd_take(&c, argc == 2 ? argv[1] : NULL);
	if (!strcmp(cmd, "list") && argc == 1)
		return cmd_list(&c);
	if (!strcmp(cmd, "mount") && argc == 3)
		return cmd_mount(&c, parse_id(argv[1]), argv[2]);
	if (!strcmp(cmd, "delete") && argc == 2)
		return cmd_delete(&c, parse_id(argv[1]));
	if (!strcmp(cmd, "arm") && argc == 1)
		return cmd_arm(&c, 1);
	if (!strcmp(cmd, "arm") && argc == 2 && !strcmp(argv[1], "--no-check"))
		return cmd_arm(&c, 0);
	if (!strcmp(cmd, "status") && argc == 1)
		return cmd_status(&c);
	usage();
	return EXIT_USAGE;
}
