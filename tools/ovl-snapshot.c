// SPDX-License-Identifier: GPL-2.0
/*
 * ovl-snapshot: incremental read-only snapshots of a directory subtree with
 * overlayfs snapshots (CONFIG_FS_PREMOD, CONFIG_OVERLAY_FS).  See
 * "ovl-snapshot --help" and docs/usage.md.
 *
 * The store holds one directory per snapshot id N:
 *   STORE/live       the live tree's absolute path
 *   STORE/.lock      flock()ed by every command that changes the store
 *   STORE/N/upper    the snapshot's upper layer (copies of what changed)
 *   STORE/N/work     its overlayfs work directory (and index)
 *   STORE/N/root     mount point of the active snapshot's overlay
 *   STORE/N/info     "name=...", "time=..." (seconds since the epoch)
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
#include <time.h>
#include <unistd.h>

#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_UNARMED	3

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
"    delete LIVE ID   delete snapshot ID and free its space\n"
"    arm LIVE         mount the active snapshot's overlay again (at boot,\n"
"                     before LIVE is written); nothing if it is armed\n"
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
"\n"
"LIMITS\n"
"    A take outdates every mounted older snapshot: it then fails with\n"
"    ESTALE until it is mounted again.  Files and directories opened in an\n"
"    older snapshot before a change of LIVE may show that change; paths\n"
"    looked up after it do not.  At most 499 snapshots back from the\n"
"    active one can be mounted (overlayfs's 500 layers).  Deleting a\n"
"    snapshot that is neither the oldest nor the active one is not\n"
"    implemented yet (exit 1, EOPNOTSUPP).  Changes made to LIVE while the\n"
"    active snapshot is not armed are not preserved.\n";

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
	long i;

	for (i = id; i <= hi; i++) {
		if (!exists(c, i)) {
			fprintf(stderr, "%s: %s: snapshot %ld, newer than %ld, is missing from %s\n",
				prog, cmd, i, id, c->store);
			errno = ENOENT;
			return -1;
		}
	}
	fsfd = overlay_open();
	if (fsfd < 0)
		return -1;
	for (i = id; !err && i <= hi; i++) {
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

static void write_info(struct ctx *c, long id, const char *name, time_t t)
{
	char p[PATH_MAX];
	FILE *f;

	snap_path(p, c->store, id, "info");
	f = fopen(p, "we");
	if (!f)
		die_errno("%s", p);
	fprintf(f, "name=%s\ntime=%lld\n", name ? name : "",
		(long long)t);
	if (fclose(f))
		die_errno("%s", p);
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

	make_snapshot_dirs(c, 1);
	write_info(c, 1, "", time(NULL));
	if (mount_engine(c, 1, 0)) {
		snap_path(p, c->store, 1, NULL);
		rm_tree(p);
		exit(EXIT_FAIL);
	}
	path_join(p, c->store, "live");
	f = fopen(p, "we");
	if (!f || fprintf(f, "%s\n", c->live) < 0 || fclose(f))
		die_errno("%s", p);
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

	make_snapshot_dirs(c, hi + 1);
	write_info(c, hi + 1, name, time(NULL));
	if (mount_engine(c, hi + 1, hi)) {
		snap_path(p, c->store, hi + 1, NULL);
		rm_tree(p);
		exit(EXIT_FAIL);
	}
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

static int cmd_delete(struct ctx *c, long id)
{
	char p[PATH_MAX];
	long lo, hi;

	ctx_lock(c);
	ctx_check(c);
	ids(c, &lo, &hi);
	if (!exists(c, id))
		die("no snapshot %ld in %s", id, c->store);
	if (id == hi) {
		errno = EBUSY;
		die_errno("snapshot %ld is the active one", id);
	}
	if (id != lo) {
		errno = EOPNOTSUPP;
		die_errno("snapshot %ld is not the oldest (%ld): merging a middle snapshot is not implemented yet",
			  id, lo);
	}
	/* Nothing newer reads an older upper: removing it frees its space */
	snap_path(p, c->store, id, NULL);
	if (armed(c, id)) {
		snap_path(p, c->store, id, "root");
		umount2(p, MNT_DETACH);
		snap_path(p, c->store, id, NULL);
	}
	if (rm_tree(p))
		die("%s could not be removed completely", p);
	return 0;
}

static int cmd_arm(struct ctx *c)
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
	return 0;
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
		return cmd_arm(&c);
	if (!strcmp(cmd, "status") && argc == 1)
		return cmd_status(&c);
	usage();
	return EXIT_USAGE;
}
