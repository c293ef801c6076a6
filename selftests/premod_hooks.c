// SPDX-License-Identifier: GPL-2.0
/*
 * The VFS pre-modification hooks, observed through the test consumer
 * (CONFIG_FS_PREMOD_TEST, /sys/kernel/debug/fs_premod_test/).
 *
 * Each test watches a fresh directory "w" on the filesystem under test,
 * runs one modification, and compares the consumer's log with the line
 * it must have written: the operation, the object, the name and the range,
 * with sizes, modes and inode numbers as they were before the change (the
 * consumer reads them inside the hook).  The error tests make the consumer
 * fail an operation and check that the filesystem did not change.
 */
#define _GNU_SOURCE
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <linux/falloc.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>

#include "scratch.h"
#include "uring.h"
#include "harness.h"

#define CTL "/sys/kernel/debug/fs_premod_test/"
#define ERR_CONSUMER ECANCELED	/* what the consumer fails with */

/* ATTR_* bits of include/linux/fs.h that the setattr hooks report */
#define ATTR_MODE_BITS	0x41	/* ATTR_MODE | ATTR_CTIME */
#define ATTR_UID_BITS	0x42	/* ATTR_UID | ATTR_CTIME */
#define ATTR_GID_BITS	0x44	/* ATTR_GID | ATTR_CTIME */
#define ATTR_TIMES_BITS	0x70	/* ATTR_ATIME | ATTR_MTIME | ATTR_CTIME */

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#define RENAME_WHITEOUT (1 << 2)
#endif

FIXTURE(premod) {
	char mnt[PATH_MAX];
	char w[PATH_MAX];	/* the watched directory */
	char f[PATH_MAX];	/* w/f: a 10-byte file */
	char d[PATH_MAX];	/* w/d: an empty directory */
	char out[PATH_MAX];	/* outside the watched subtree */
	char buf[65536];
};

FIXTURE_VARIANT(premod) {
	struct scratch_fs fs;
};

SCRATCH_FS_VARIANTS(premod);

static int ctl(const char *file, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int ctl(const char *file, const char *fmt, ...)
{
	char path[PATH_MAX], val[PATH_MAX];
	va_list ap;
	int fd, ret = 0;

	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), CTL "%s", file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* The consumer's log since the last call */
static const char *events(struct _test_data_premod *self)
{
	ssize_t n = scratch_read(CTL "events", self->buf, sizeof(self->buf));

	if (n < 0)
		snprintf(self->buf, sizeof(self->buf), "<events: %s>",
			 strerror(-n));
	return self->buf;
}

static unsigned long ino(const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		return 0;
	return st.st_ino;
}

static void join(char *buf, const char *dir, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

/* The expected log: printf-formatted lines */
static const char *expect(char *buf, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static const char *expect(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, 1024, fmt, ap);
	va_end(ap);
	return buf;
}

/* No watch, no failures, no DONE, not quiet, no selfwrite, no race */
static void consumer_reset(void)
{
	ctl("unwatch", "1");
	ctl("fail", "all 0");
	ctl("done", "0");
	ctl("quiet", "0");
	ctl("selfwrite", "\n");
	ctl("race", "\n");
}

FIXTURE_SETUP(premod)
{
	char p[PATH_MAX];

	if (access(CTL "watch", W_OK) &&
	    mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL) &&
	    errno != EBUSY)
		SKIP(return, "no debugfs: %s", strerror(errno));
	if (access(CTL "watch", W_OK))
		SKIP(return, "kernel without CONFIG_FS_PREMOD_TEST");

	SCRATCH_SETUP(scratch_mount, &variant->fs, self->mnt, "premod");

	join(self->w, self->mnt, "w");
	join(self->f, self->w, "f");
	join(self->d, self->w, "d");
	join(self->out, self->mnt, "out");
	ASSERT_EQ(0, mkdir(self->w, 0755));
	ASSERT_EQ(0, mkdir(self->d, 0755));
	ASSERT_EQ(0, mkdir(self->out, 0755));
	ASSERT_EQ(0, scratch_write(self->f, "0123456789", O_EXCL));
	ASSERT_EQ(0, chmod(self->f, 0644));
	join(p, self->out, "g");
	ASSERT_EQ(0, scratch_write(p, "abcdefghij", O_EXCL));

	consumer_reset();
	ASSERT_EQ(0, ctl("watch", "%s", self->w));
	events(self);
}

FIXTURE_TEARDOWN(premod)
{
	consumer_reset();
	umount2(self->mnt, MNT_DETACH);
}

/* File data and size */

TEST_F(premod, write)
{
	char e[1024];
	int fd;

	fd = open(self->f, O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 5));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=5 len=3 size=10 file=1\n",
			    ino(self->f)), events(self));
	/* write(2) at the file position, then past EOF */
	ASSERT_EQ(12, lseek(fd, 12, SEEK_SET));
	ASSERT_EQ(2, write(fd, "xy", 2));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=12 len=2 size=10 file=1\n",
			    ino(self->f)), events(self));
	close(fd);
}

TEST_F(premod, writev_append)
{
	struct iovec iov[2] = {
		{ .iov_base = "ab", .iov_len = 2 },
		{ .iov_base = "cde", .iov_len = 3 },
	};
	char e[1024];
	int fd;

	fd = open(self->f, O_WRONLY | O_APPEND);
	ASSERT_LE(0, fd);
	ASSERT_EQ(5, writev(fd, iov, 2));
	/* an appending write is reported at the end of file */
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=10 len=5 size=10 file=1\n",
			    ino(self->f)), events(self));
	close(fd);
}

TEST_F(premod, truncate_ftruncate_otrunc)
{
	char e[1024];
	int fd;

	ASSERT_EQ(0, truncate(self->f, 4));
	EXPECT_STREQ(expect(e, "truncate f ino=%lu pos=4 len=0 size=10 file=0\n",
			    ino(self->f)), events(self));
	fd = open(self->f, O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 100));
	EXPECT_STREQ(expect(e, "truncate f ino=%lu pos=100 len=0 size=4 file=1\n",
			    ino(self->f)), events(self));
	close(fd);
	/* reported after the open, with the file (patch 0032) */
	fd = open(self->f, O_WRONLY | O_TRUNC);
	ASSERT_LE(0, fd);
	EXPECT_STREQ(expect(e, "truncate f ino=%lu pos=0 len=0 size=100 file=1\n",
			    ino(self->f)), events(self));
	close(fd);
}

TEST_F(premod, fallocate_modes)
{
	static const struct { int mode; const char *name; } modes[] = {
		{ 0, "allocate" },
		{ FALLOC_FL_KEEP_SIZE, "keep size" },
		{ FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, "punch hole" },
		{ FALLOC_FL_ZERO_RANGE, "zero range" },
		{ FALLOC_FL_COLLAPSE_RANGE, "collapse range" },
		{ FALLOC_FL_INSERT_RANGE, "insert range" },
	};
	char e[1024];
	struct stat st;
	unsigned int i;
	int fd;

	fd = open(self->f, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 1 << 20));
	events(self);
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		ASSERT_EQ(0, fstat(fd, &st));
		if (fallocate(fd, modes[i].mode, 65536, 65536)) {
			/* not every fs has every mode: then nothing happened */
			EXPECT_EQ(EOPNOTSUPP, errno) TH_LOG("%s", modes[i].name);
			EXPECT_STREQ(expect(e, "fallocate f ino=%lu pos=65536 len=65536 size=%lld file=1\n",
					    ino(self->f), (long long)st.st_size),
				     events(self)) TH_LOG("%s", modes[i].name);
			continue;
		}
		EXPECT_STREQ(expect(e, "fallocate f ino=%lu pos=65536 len=65536 size=%lld file=1\n",
				    ino(self->f), (long long)st.st_size),
			     events(self)) TH_LOG("%s", modes[i].name);
	}
	close(fd);
}

TEST_F(premod, copy_splice_sendfile)
{
	char e[1024], src[PATH_MAX];
	int in, out, pfd[2];
	loff_t off_in = 0, off_out = 2;

	join(src, self->out, "g");
	in = open(src, O_RDONLY);
	ASSERT_LE(0, in);
	out = open(self->f, O_WRONLY);
	ASSERT_LE(0, out);

	ASSERT_EQ(4, syscall(__NR_copy_file_range, in, &off_in, out, &off_out, 4, 0));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=2 len=4 size=10 file=1\n",
			    ino(self->f)), events(self));

	off_in = 0;
	ASSERT_EQ(0, lseek(out, 8, SEEK_SET) - 8);
	ASSERT_EQ(3, sendfile(out, in, &off_in, 3));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=8 len=3 size=10 file=1\n",
			    ino(self->f)), events(self));

	ASSERT_EQ(0, pipe(pfd));
	ASSERT_EQ(5, write(pfd[1], "pipe!", 5));
	off_out = 20;
	ASSERT_EQ(5, splice(pfd[0], NULL, out, &off_out, 5, 0));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=20 len=5 size=11 file=1\n",
			    ino(self->f)), events(self));
	close(pfd[0]);
	close(pfd[1]);
	close(in);
	close(out);
}

TEST_F(premod, clone_dedupe)
{
	char e[1024], src[PATH_MAX], data[8192];
	struct file_clone_range fcr;
	struct {
		struct file_dedupe_range r;
		struct file_dedupe_range_info info;
	} dd;
	int in, out, ret;

	/* block-aligned ranges, which every reflink fs takes */
	memset(data, 'x', sizeof(data));
	join(src, self->w, "src");
	in = open(src, O_RDWR | O_CREAT, 0644);
	ASSERT_LE(0, in);
	ASSERT_EQ((ssize_t)sizeof(data), write(in, data, sizeof(data)));
	out = open(self->f, O_RDWR);
	ASSERT_LE(0, out);
	ASSERT_EQ((ssize_t)sizeof(data), pwrite(out, data, sizeof(data), 0));
	ASSERT_EQ(0, fsync(in));
	ASSERT_EQ(0, fsync(out));
	events(self);

	ret = ioctl(out, FICLONE, in);
	if (ret) {
		/* no reflink (ext4, tmpfs): refused before the hook */
		EXPECT_TRUE(errno == EOPNOTSUPP || errno == EXDEV ||
			    errno == EINVAL) TH_LOG("FICLONE: %s", strerror(errno));
		EXPECT_STREQ("", events(self));
		TH_LOG("%s has no reflink: FICLONE refused before the hook",
		       variant->fs.name);
		goto out;
	}
	EXPECT_STREQ(expect(e, "remap f ino=%lu pos=0 len=0 size=8192 file=1\n",
			    ino(self->f)), events(self));

	fcr = (struct file_clone_range){ .src_fd = in, .src_offset = 4096,
		.src_length = 4096, .dest_offset = 0 };
	ASSERT_EQ(0, ioctl(out, FICLONERANGE, &fcr));
	EXPECT_STREQ(expect(e, "remap f ino=%lu pos=0 len=4096 size=8192 file=1\n",
			    ino(self->f)), events(self));

	memset(&dd, 0, sizeof(dd));
	dd.r.src_offset = 0;
	dd.r.src_length = 4096;
	dd.r.dest_count = 1;
	dd.info.dest_fd = out;
	dd.info.dest_offset = 4096;
	ASSERT_EQ(0, ioctl(in, FIDEDUPERANGE, &dd));
	EXPECT_EQ(0, dd.info.status);
	EXPECT_STREQ(expect(e, "remap f ino=%lu pos=4096 len=4096 size=8192 file=1\n",
			    ino(self->f)), events(self));
out:
	close(in);
	close(out);
}

TEST_F(premod, mmap_shared)
{
	char e[1024];
	void *p;
	int fd;

	fd = open(self->f, O_RDWR);
	ASSERT_LE(0, fd);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	munmap(p, 4096);
	EXPECT_STREQ("", events(self)) TH_LOG("MAP_PRIVATE is not reported");

	/* reported even without PROT_WRITE: mprotect() can add it */
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_STREQ(expect(e, "mmap f ino=%lu pos=0 len=4096 size=10 file=1 head=01234567\n",
			    ino(self->f)), events(self));
	/* reported once per epoch: not again at the fault */
	ASSERT_EQ(0, mprotect(p, 4096, PROT_READ | PROT_WRITE));
	memcpy(p, "MM", 2);
	munmap(p, 4096);
	EXPECT_STREQ("", events(self));
	close(fd);

	/* a read-only file cannot be stored to: not reported */
	fd = open(self->f, O_RDONLY);
	ASSERT_LE(0, fd);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	munmap(p, 4096);
	EXPECT_STREQ("", events(self));
	close(fd);
}

/*
 * Mappings that exist when the watch starts: set up before it, then the
 * consumer registers, and the first store must be reported before it lands
 * (head= is what the consumer read in the hook).
 */
static char *map_before_watch(struct _test_data_premod *self, int prot)
{
	char *p;
	int fd;

	ctl("unwatch", "1");
	fd = open(self->f, O_RDWR);
	if (fd < 0)
		return MAP_FAILED;
	/* two pages, the second starting with "page1dat" */
	if (pwrite(fd, "page1dat", 8, 4096) != 8) {
		close(fd);
		return MAP_FAILED;
	}
	p = mmap(NULL, 8192, prot, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return p;
	/* populate the page tables: the watch must take them away */
	if (prot & PROT_WRITE)
		memcpy(p, "AB", 2);
	if (p[4096] != 'p' ||
	    ctl("watch", "%s", self->w)) {
		munmap(p, 8192);
		return MAP_FAILED;
	}
	return p;
}

TEST_F(premod, mmap_before_watch)
{
	char e[1024], buf[16];
	char *p;

	p = map_before_watch(self, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_STREQ("", events(self)) TH_LOG("registering reports nothing");

	/*
	 * Page 0 was stored to before: its writable page table entry must
	 * be gone, the store reported with the bytes before it.
	 */
	memcpy(p, "XY", 2);
	EXPECT_STREQ(expect(e, "mmap f ino=%lu pos=0 len=4096 size=4104 file=1 head=AB234567\n",
			    ino(self->f)), events(self));
	/* once per epoch: other pages, other stores go on */
	memcpy(p + 4096, "PAGE", 4);
	memcpy(p + 2, "!", 1);
	EXPECT_STREQ("", events(self));
	ASSERT_EQ(0, munmap(p, 8192));

	ASSERT_EQ(10, scratch_read(self->f, buf, 11));
	EXPECT_STREQ("XY!3456789", buf);
}

TEST_F(premod, mmap_before_watch_mprotect)
{
	char e[1024];
	char *p;

	/* read-only for now, but the file is open for write: mprotect() */
	p = map_before_watch(self, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_STREQ("", events(self));

	/*
	 * A read fault maps the page read-only where stores are
	 * write-notified; on tmpfs it maps it writable, so it reports.
	 * Either way one report, before the store.
	 */
	ASSERT_EQ('0', *(volatile char *)p);
	ASSERT_EQ(0, mprotect(p, 8192, PROT_READ | PROT_WRITE));
	memcpy(p, "MP", 2);
	EXPECT_STREQ(expect(e, "mmap f ino=%lu pos=0 len=4096 size=4104 file=1 head=01234567\n",
			    ino(self->f)), events(self));
	munmap(p, 8192);
}

TEST_F(premod, mmap_invalidate)
{
	char e[1024];
	char *p;
	int fd;

	ASSERT_EQ(0, ctl("done", "1"));
	fd = open(self->f, O_RDWR);
	ASSERT_LE(0, fd);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_STREQ(expect(e, "mmap f ino=%lu pos=0 len=4096 size=10 file=1 head=01234567\n",
			    ino(self->f)), events(self));
	memcpy(p, "a", 1);
	EXPECT_STREQ("", events(self)) TH_LOG("DONE at mmap time");

	/* a new epoch: the next store is reported, with the bytes before it */
	ASSERT_EQ(0, ctl("invalidate", "1"));
	memcpy(p + 1, "b", 1);
	EXPECT_STREQ(expect(e, "mmap f ino=%lu pos=0 len=4096 size=10 file=1 head=a1234567\n",
			    ino(self->f)), events(self));
	memcpy(p + 2, "c", 1);
	EXPECT_STREQ("", events(self));

	/* without DONE the fault reports once per epoch, write(2) each time */
	ASSERT_EQ(0, ctl("done", "0"));
	ASSERT_EQ(0, ctl("invalidate", "1"));
	memcpy(p + 3, "d", 1);
	memcpy(p + 4, "e", 1);
	EXPECT_STREQ(expect(e, "mmap f ino=%lu pos=0 len=4096 size=10 file=1 head=abc34567\n",
			    ino(self->f)), events(self));
	ASSERT_EQ(1, pwrite(fd, "f", 1, 5));
	ASSERT_EQ(1, pwrite(fd, "g", 1, 6));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=5 len=1 size=10 file=1\n"
			       "write f ino=%lu pos=6 len=1 size=10 file=1\n",
			    ino(self->f), ino(self->f)), events(self));
	munmap(p, 4096);
	close(fd);
}

TEST_F(premod, mmap_fault_error)
{
	char buf[16];
	int status;
	pid_t pid;
	char *p;

	p = map_before_watch(self, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, ctl("fail", "mmap %d", ERR_CONSUMER));

	/* a failed report is a failed store: SIGBUS, like ->page_mkwrite() */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		memcpy(p, "XX", 2);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS)
		TH_LOG("child status 0x%x", status);
	ASSERT_EQ(10, scratch_read(self->f, buf, 11));
	EXPECT_STREQ("AB23456789", buf);

	/* the error is not remembered: the next store is reported again */
	ASSERT_EQ(0, ctl("fail", "mmap 0"));
	events(self);
	memcpy(p, "YY", 2);
	EXPECT_NE(NULL, strstr(events(self), "head=AB234567"));
	munmap(p, 8192);
	ASSERT_EQ(10, scratch_read(self->f, buf, 11));
	EXPECT_STREQ("YY23456789", buf);
}

/*
 * A store by the kernel (here read(2) into the mapping) cannot call the
 * consumer: the caller may hold fs locks.  It fails with EFAULT until user
 * space touches the page, and the file does not change.
 */
TEST_F(premod, mmap_kernel_store)
{
	char buf[16], g[PATH_MAX];
	char *p;
	int fd;

	p = map_before_watch(self, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p);
	join(g, self->out, "g");
	fd = open(g, O_RDONLY);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, pread(fd, p, 4, 0));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_STREQ("", events(self));
	ASSERT_EQ(10, scratch_read(self->f, buf, 11));
	EXPECT_STREQ("AB23456789", buf);

	memcpy(p, "U", 1);
	EXPECT_NE(NULL, strstr(events(self), "head=AB234567"));
	EXPECT_EQ(4, pread(fd, p, 4, 0));
	close(fd);
	munmap(p, 8192);
	ASSERT_EQ(10, scratch_read(self->f, buf, 11));
	EXPECT_STREQ("abcd456789", buf);
}

/* One IORING_OP_WRITE: 0 or -errno */
static int uring_pwrite(int fd, const void *buf, unsigned int len, __u64 off)
{
	struct io_uring_sqe sqe = {
		.opcode = IORING_OP_WRITE,
		.fd = fd,
		.addr = (unsigned long)buf,
		.len = len,
		.off = off,
	};
	int ret = uring_op(&sqe);

	return ret == (int)len ? 0 : (ret < 0 ? ret : -EIO);
}

/* One IOCB_CMD_PWRITE through Linux AIO with RWF_* flags: 0 or -errno */
static int aio_pwrite_flags(int fd, const void *buf, unsigned int len,
			    __u64 off, int rw_flags)
{
	struct iocb cb = { 0 }, *cbs[1] = { &cb };
	struct io_event ev;
	aio_context_t ctx = 0;
	int ret;

	if (syscall(__NR_io_setup, 1, &ctx))
		return -errno;
	cb.aio_fildes = fd;
	cb.aio_lio_opcode = IOCB_CMD_PWRITE;
	cb.aio_buf = (unsigned long)buf;
	cb.aio_nbytes = len;
	cb.aio_offset = off;
	cb.aio_rw_flags = rw_flags;
	ret = syscall(__NR_io_submit, ctx, 1, cbs);
	if (ret != 1)
		ret = ret < 0 ? -errno : -EIO;
	else if (syscall(__NR_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
		ret = -errno;
	else
		ret = ev.res == len ? 0 : -EIO;
	syscall(__NR_io_destroy, ctx);
	return ret;
}

static int aio_pwrite(int fd, const void *buf, unsigned int len, __u64 off)
{
	return aio_pwrite_flags(fd, buf, len, off, 0);
}

TEST_F(premod, io_uring_aio_write)
{
	char e[1024];
	int fd;

	fd = open(self->f, O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, uring_pwrite(fd, "ring", 4, 3));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=3 len=4 size=10 file=1\n",
			    ino(self->f)), events(self));
	ASSERT_EQ(0, aio_pwrite(fd, "aio", 3, 16));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=16 len=3 size=10 file=1\n",
			    ino(self->f)), events(self));
	close(fd);
}

/*
 * RWF_NOWAIT must not wait for the consumer: EAGAIN, nothing reported,
 * nothing written.  The same write outside the subtree is the baseline
 * for what the filesystem itself says to a non-blocking AIO write.
 */
TEST_F(premod, nowait_write)
{
	struct iovec iov = { .iov_base = "NOWA", .iov_len = 4 };
	char buf[16], g[PATH_MAX];
	int fd, gfd, ret, base;

	fd = open(self->f, O_WRONLY);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, pwritev2(fd, &iov, 1, 0, RWF_NOWAIT));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_STREQ("", events(self));

	join(g, self->out, "g");
	gfd = open(g, O_WRONLY);
	ASSERT_LE(0, gfd);
	base = aio_pwrite_flags(gfd, "nowa", 4, 0, RWF_NOWAIT);
	ret = aio_pwrite_flags(fd, "NOWA", 4, 0, RWF_NOWAIT);
	if (base == -EOPNOTSUPP) {
		EXPECT_EQ(-EOPNOTSUPP, ret);
	} else {
		EXPECT_EQ(-EAGAIN, ret) TH_LOG("outside the subtree: %d", base);
	}
	EXPECT_STREQ("", events(self));
	close(gfd);
	close(fd);
	ASSERT_EQ(10, scratch_read(self->f, buf, 11));
	EXPECT_STREQ("0123456789", buf);
}

/* Metadata */

TEST_F(premod, chmod_chown_utimes)
{
	struct timespec ts[2] = { { .tv_sec = 1 }, { .tv_sec = 2 } };
	unsigned long i = ino(self->f);
	char e[1024];
	int fd;

	ASSERT_EQ(0, chmod(self->f, 0600));
	EXPECT_STREQ(expect(e, "setattr f ino=%lu valid=%x mode=100644\n", i,
			    ATTR_MODE_BITS), events(self));
	fd = open(self->f, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fchmod(fd, 0640));
	EXPECT_STREQ(expect(e, "setattr f ino=%lu valid=%x mode=100600\n", i,
			    ATTR_MODE_BITS), events(self));
	ASSERT_EQ(0, chown(self->f, 1234, -1));
	EXPECT_STREQ(expect(e, "setattr f ino=%lu valid=%x mode=100640\n", i,
			    ATTR_UID_BITS), events(self));
	ASSERT_EQ(0, fchown(fd, -1, 4321));
	EXPECT_STREQ(expect(e, "setattr f ino=%lu valid=%x mode=100640\n", i,
			    ATTR_GID_BITS), events(self));
	ASSERT_EQ(0, utimensat(AT_FDCWD, self->f, ts, 0));
	EXPECT_STREQ(expect(e, "setattr f ino=%lu valid=%x mode=100640\n", i,
			    ATTR_TIMES_BITS), events(self));
	ASSERT_EQ(0, futimens(fd, NULL));
	EXPECT_STREQ(expect(e, "setattr f ino=%lu valid=%x mode=100640\n", i,
			    ATTR_TIMES_BITS), events(self));
	close(fd);
}

TEST_F(premod, xattrs_acls)
{
	unsigned long i = ino(self->f);
	char e[1024];
	int fd;

	ASSERT_EQ(0, setxattr(self->f, "user.a", "1", 1, 0));
	EXPECT_STREQ(expect(e, "setxattr f ino=%lu xattr=user.a\n", i),
		     events(self));
	fd = open(self->f, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fsetxattr(fd, "user.b", "2", 1, 0));
	EXPECT_STREQ(expect(e, "setxattr f ino=%lu xattr=user.b\n", i),
		     events(self));
	ASSERT_EQ(0, lremovexattr(self->f, "user.a"));
	EXPECT_STREQ(expect(e, "removexattr f ino=%lu xattr=user.a\n", i),
		     events(self));
	ASSERT_EQ(0, fremovexattr(fd, "user.b"));
	EXPECT_STREQ(expect(e, "removexattr f ino=%lu xattr=user.b\n", i),
		     events(self));
	close(fd);

	ASSERT_EQ(0, scratch_sh("setfacl -m u:1234:r %s", self->f));
	EXPECT_STREQ(expect(e, "setxattr f ino=%lu xattr=system.posix_acl_access\n", i),
		     events(self));
	ASSERT_EQ(0, scratch_sh("setfacl -x u:1234 %s", self->f));
	EXPECT_STREQ(expect(e, "setxattr f ino=%lu xattr=system.posix_acl_access\n", i),
		     events(self));
}

/* io_uring's own xattr path (io-wq), as setxattr(2) and fsetxattr(2) */
TEST_F(premod, io_uring_setxattr)
{
	unsigned long i = ino(self->f);
	char e[1024], buf[8];
	int fd, ret;

	ret = uring_setxattr(self->f, -1, "user.u", "1");
	if (ret == -EINVAL || ret == -EOPNOTSUPP)
		SKIP(return, "IORING_OP_SETXATTR not supported: %s", strerror(-ret));
	ASSERT_EQ(0, ret);
	EXPECT_STREQ(expect(e, "setxattr f ino=%lu xattr=user.u\n", i),
		     events(self));
	fd = open(self->f, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, uring_setxattr(NULL, fd, "user.v", "2"));
	EXPECT_STREQ(expect(e, "setxattr f ino=%lu xattr=user.v\n", i),
		     events(self));

	/* a consumer error fails the request and changes nothing */
	ASSERT_EQ(0, ctl("fail", "setxattr %d", ERR_CONSUMER));
	EXPECT_EQ(-ERR_CONSUMER, uring_setxattr(self->f, -1, "user.w", "3"));
	EXPECT_EQ(-ERR_CONSUMER, uring_setxattr(NULL, fd, "user.v", "4"));
	EXPECT_EQ(-1, getxattr(self->f, "user.w", buf, sizeof(buf)));
	EXPECT_EQ(ENODATA, errno);
	EXPECT_EQ(1, getxattr(self->f, "user.v", buf, sizeof(buf)));
	EXPECT_EQ('2', buf[0]);
	close(fd);
}

TEST_F(premod, fileattr)
{
	unsigned long i = ino(self->f);
	struct fsxattr fsx;
	char e[1024];
	int fd, flags;

	fd = open(self->f, O_RDONLY);
	ASSERT_LE(0, fd);
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags |= FS_NOATIME_FL;
		ASSERT_EQ(0, ioctl(fd, FS_IOC_SETFLAGS, &flags))
			TH_LOG("FS_IOC_SETFLAGS: %s", strerror(errno));
		EXPECT_STREQ(expect(e, "fileattr f ino=%lu valid=0 mode=100644\n", i),
			     events(self));
	} else {
		EXPECT_EQ(ENOTTY, errno);
	}
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) == 0) {
		ASSERT_EQ(0, ioctl(fd, FS_IOC_FSSETXATTR, &fsx))
			TH_LOG("FS_IOC_FSSETXATTR: %s", strerror(errno));
		EXPECT_STREQ(expect(e, "fileattr f ino=%lu valid=0 mode=100644\n", i),
			     events(self));
	} else {
		EXPECT_EQ(ENOTTY, errno);
	}
	close(fd);
}

/* Directory entries */

TEST_F(premod, create_mknod_mkdir_symlink)
{
	char e[1024], p[PATH_MAX];
	int fd;

	join(p, self->w, "new");
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_STREQ("create w/new ino=0\n", events(self));

	/* O_CREAT of a name that exists and is cached: nothing to report */
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_STREQ("", events(self));

	join(p, self->w, "reg");
	ASSERT_EQ(0, mknod(p, S_IFREG | 0644, 0));
	EXPECT_STREQ("create w/reg ino=0\n", events(self));
	join(p, self->w, "fifo");
	ASSERT_EQ(0, mkfifo(p, 0644));
	EXPECT_STREQ("mknod w/fifo ino=0\n", events(self));
	join(p, self->w, "chr");
	ASSERT_EQ(0, mknod(p, S_IFCHR | 0644, makedev(1, 3)));
	EXPECT_STREQ("mknod w/chr ino=0\n", events(self));
	join(p, self->w, "sub");
	ASSERT_EQ(0, mkdir(p, 0755));
	EXPECT_STREQ("mkdir w/sub ino=0\n", events(self));
	join(p, self->w, "sym");
	ASSERT_EQ(0, symlink("f", p));
	EXPECT_STREQ("symlink w/sym ino=0\n", events(self));

	/* a failing create is still reported, with what is there */
	EXPECT_EQ(-1, mkdir(self->d, 0755));
	EXPECT_EQ(EEXIST, errno);
	EXPECT_STREQ(expect(e, "mkdir w/d ino=%lu\n", ino(self->d)), events(self));
}

TEST_F(premod, link_unlink_rmdir)
{
	unsigned long fi = ino(self->f), di = ino(self->d);
	char e[1024], p[PATH_MAX];

	join(p, self->w, "hard");
	ASSERT_EQ(0, link(self->f, p));
	EXPECT_STREQ(expect(e, "link w/hard ino=0 src=%lu\n", fi), events(self));
	ASSERT_EQ(0, unlink(p));
	EXPECT_STREQ(expect(e, "unlink w/hard ino=%lu\n", fi), events(self));
	ASSERT_EQ(0, rmdir(self->d));
	EXPECT_STREQ(expect(e, "rmdir w/d ino=%lu\n", di), events(self));
	ASSERT_EQ(0, unlink(self->f));
	EXPECT_STREQ(expect(e, "unlink w/f ino=%lu\n", fi), events(self));
}

TEST_F(premod, tmpfile_linkat)
{
	char e[1024], p[PATH_MAX], proc[64];
	struct stat st;
	int fd;

	fd = open(self->w, O_TMPFILE | O_RDWR, 0600);
	ASSERT_LE(0, fd) TH_LOG("O_TMPFILE: %s", strerror(errno));
	ASSERT_EQ(0, fstat(fd, &st));
	EXPECT_STREQ("", events(self)) TH_LOG("O_TMPFILE adds no name");
	join(p, self->w, "named");
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ASSERT_EQ(0, linkat(AT_FDCWD, proc, AT_FDCWD, p, AT_SYMLINK_FOLLOW));
	EXPECT_STREQ(expect(e, "link w/named ino=0 src=%lu\n",
			    (unsigned long)st.st_ino), events(self));
	close(fd);
}

TEST_F(premod, rename_flags)
{
	unsigned long fi = ino(self->f), di = ino(self->d), gi, bi;
	char e[1024], a[PATH_MAX], b[PATH_MAX], g[PATH_MAX];

	join(a, self->w, "a");
	join(b, self->w, "b");
	join(g, self->w, "g");
	ASSERT_EQ(0, scratch_write(g, "g", O_EXCL));
	gi = ino(g);
	events(self);

	ASSERT_EQ(0, rename(self->f, a));
	EXPECT_STREQ(expect(e, "rename w/f ino=%lu -> w/a ino=0 flags=0\n", fi),
		     events(self));
	/* over an existing entry: the victim is reported */
	ASSERT_EQ(0, rename(g, a));
	EXPECT_STREQ(expect(e, "rename w/g ino=%lu -> w/a ino=%lu flags=0\n",
			    gi, fi), events(self));
	ASSERT_EQ(0, scratch_write(b, "b", O_EXCL));
	events(self);
	EXPECT_EQ(-1, syscall(__NR_renameat2, AT_FDCWD, a, AT_FDCWD, b,
			      RENAME_NOREPLACE));
	EXPECT_EQ(EEXIST, errno);
	EXPECT_STREQ(expect(e, "rename w/a ino=%lu -> w/b ino=%lu flags=%x\n",
			    gi, ino(b), RENAME_NOREPLACE), events(self));
	/* both sides of an exchange, here a file and a directory */
	ASSERT_EQ(0, syscall(__NR_renameat2, AT_FDCWD, a, AT_FDCWD, self->d,
			     RENAME_EXCHANGE));
	EXPECT_STREQ(expect(e, "rename w/a ino=%lu -> w/d ino=%lu flags=%x\n",
			    gi, di, RENAME_EXCHANGE), events(self));
	bi = ino(b);
	if (syscall(__NR_renameat2, AT_FDCWD, b, AT_FDCWD, self->f,
		    RENAME_WHITEOUT)) {
		EXPECT_TRUE(errno == EINVAL || errno == EOPNOTSUPP);
	} else {
		struct stat st;

		ASSERT_EQ(0, lstat(b, &st));
		EXPECT_TRUE(S_ISCHR(st.st_mode)) TH_LOG("whiteout left behind");
	}
	EXPECT_STREQ(expect(e, "rename w/b ino=%lu -> w/f ino=0 flags=%x\n",
			    bi, RENAME_WHITEOUT), events(self));
}

/* Scope, errors, recursion, FS_PREMOD_DONE */

/*
 * The VFS rechecks under the directory lock that the entry it reported is
 * the one it changes.  The consumer's "race" renames another file over the
 * name from inside the hook: the operation must report again, with the
 * inode it then changes.
 */
TEST_F(premod, dirent_recheck_retries)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], n[PATH_MAX];
	unsigned long ia, ib;
	char e[1024], buf[8];

	join(a, self->w, "a");
	join(b, self->w, "b");
	join(c, self->w, "c");
	join(n, self->w, "n");

	ASSERT_EQ(0, scratch_write(a, "A", O_EXCL));
	ASSERT_EQ(0, scratch_write(b, "B", O_EXCL));
	ia = ino(a);
	ib = ino(b);
	events(self);
	ASSERT_EQ(0, ctl("race", "%s %s", b, a));
	ASSERT_EQ(0, unlink(a));
	EXPECT_STREQ(expect(e, "unlink w/a ino=%lu\nunlink w/a ino=%lu\n",
			    ia, ib), events(self));
	EXPECT_EQ(-1, access(a, F_OK));
	EXPECT_EQ(-1, access(b, F_OK));

	/* rename: the source is replaced under it */
	ASSERT_EQ(0, scratch_write(a, "A2", O_EXCL));
	ASSERT_EQ(0, scratch_write(b, "B2", O_EXCL));
	ia = ino(a);
	ib = ino(b);
	events(self);
	ASSERT_EQ(0, ctl("race", "%s %s", b, a));
	ASSERT_EQ(0, rename(a, c));
	EXPECT_STREQ(expect(e, "rename w/a ino=%lu -> w/c ino=0 flags=0\n"
			       "rename w/a ino=%lu -> w/c ino=0 flags=0\n",
			    ia, ib), events(self));
	ASSERT_EQ(2, scratch_read(c, buf, sizeof(buf)));
	EXPECT_STREQ("B2", buf);

	/* mkdir: the name appears under it, and mkdir then fails */
	ASSERT_EQ(0, scratch_write(b, "B3", O_EXCL));
	ib = ino(b);
	events(self);
	ASSERT_EQ(0, ctl("race", "%s %s", b, n));
	EXPECT_EQ(-1, mkdir(n, 0755));
	EXPECT_EQ(EEXIST, errno);
	EXPECT_STREQ(expect(e, "mkdir w/n ino=0\nmkdir w/n ino=%lu\n", ib),
		     events(self));
}

TEST_F(premod, outside_subtree_not_reported)
{
	char p[PATH_MAX];

	join(p, self->out, "g");
	ASSERT_EQ(0, scratch_write(p, "more", O_APPEND));
	ASSERT_EQ(0, chmod(p, 0600));
	join(p, self->out, "new");
	ASSERT_EQ(0, mkdir(p, 0755));
	EXPECT_STREQ("", events(self));
}

TEST_F(premod, consumer_error_fails_data)
{
	char buf[64];
	struct stat before, after;
	int fd;

	ASSERT_EQ(0, stat(self->f, &before));
	ASSERT_EQ(0, ctl("fail", "write %d", ERR_CONSUMER));
	ASSERT_EQ(0, ctl("fail", "truncate %d", ERR_CONSUMER));
	ASSERT_EQ(0, ctl("fail", "fallocate %d", ERR_CONSUMER));
	ASSERT_EQ(0, ctl("fail", "mmap %d", ERR_CONSUMER));
	fd = open(self->f, O_RDWR);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, pwrite(fd, "XXXX", 4, 0));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, ftruncate(fd, 0));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, truncate(self->f, 0));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, open(self->f, O_WRONLY | O_TRUNC));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, fallocate(fd, 0, 0, 1 << 20));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0));
	EXPECT_EQ(ERR_CONSUMER, errno);
	close(fd);

	ASSERT_EQ(0, stat(self->f, &after));
	EXPECT_EQ(before.st_size, after.st_size);
	EXPECT_EQ(before.st_blocks, after.st_blocks);
	EXPECT_EQ(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
	EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	ASSERT_EQ(10, scratch_read(self->f, buf, sizeof(buf)));
	EXPECT_STREQ("0123456789", buf);
}

TEST_F(premod, consumer_error_fails_meta)
{
	struct stat before, after;
	char buf[8];

	ASSERT_EQ(0, stat(self->f, &before));
	ASSERT_EQ(0, ctl("fail", "setattr %d", ERR_CONSUMER));
	ASSERT_EQ(0, ctl("fail", "setxattr %d", ERR_CONSUMER));
	EXPECT_EQ(-1, chmod(self->f, 0600));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, chown(self->f, 1, 1));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, utimensat(AT_FDCWD, self->f, NULL, 0));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, setxattr(self->f, "user.a", "1", 1, 0));
	EXPECT_EQ(ERR_CONSUMER, errno);
	ASSERT_EQ(0, stat(self->f, &after));
	EXPECT_EQ(before.st_mode, after.st_mode);
	EXPECT_EQ(before.st_uid, after.st_uid);
	EXPECT_EQ(before.st_ctim.tv_sec, after.st_ctim.tv_sec);
	EXPECT_EQ(before.st_ctim.tv_nsec, after.st_ctim.tv_nsec);
	EXPECT_EQ(-1, getxattr(self->f, "user.a", buf, sizeof(buf)));
	EXPECT_EQ(ENODATA, errno);
}

TEST_F(premod, consumer_error_fails_dirent)
{
	char p[PATH_MAX], q[PATH_MAX];
	struct stat st;

	ASSERT_EQ(0, ctl("fail", "all %d", ERR_CONSUMER));
	join(p, self->w, "new");
	EXPECT_EQ(-1, open(p, O_WRONLY | O_CREAT, 0644));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, mkdir(p, 0755));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, mkfifo(p, 0644));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, symlink("f", p));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, link(self->f, p));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, lstat(p, &st));
	EXPECT_EQ(ENOENT, errno);

	EXPECT_EQ(-1, unlink(self->f));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, rmdir(self->d));
	EXPECT_EQ(ERR_CONSUMER, errno);
	join(q, self->w, "moved");
	EXPECT_EQ(-1, rename(self->f, q));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(-1, syscall(__NR_renameat2, AT_FDCWD, self->f, AT_FDCWD,
			      self->d, RENAME_EXCHANGE));
	EXPECT_EQ(ERR_CONSUMER, errno);
	EXPECT_EQ(0, lstat(self->f, &st));
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT_EQ(0, lstat(self->d, &st));
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_EQ(-1, lstat(q, &st));
	ASSERT_EQ(0, ctl("fail", "all 0"));
	EXPECT_EQ(0, scratch_sh("test $(ls -A %s | wc -l) = 2", self->w));
}

TEST_F(premod, consumer_io_not_reported)
{
	char e[1024], log[PATH_MAX], buf[1024];

	join(log, self->w, "consumer.log");
	ASSERT_EQ(0, ctl("selfwrite", "%s", log));
	/* opening the log created it: that was the test's own doing */
	events(self);
	ASSERT_EQ(0, chmod(self->f, 0600));
	expect(e, "setattr f ino=%lu valid=%x mode=100644\n", ino(self->f),
	       ATTR_MODE_BITS);
	EXPECT_STREQ(e, events(self));
	ASSERT_LT(0, scratch_read(log, buf, sizeof(buf)));
	EXPECT_STREQ(e, buf) TH_LOG("the consumer's own write landed");
}

TEST_F(premod, done_until_invalidate)
{
	char e[1024];
	int fd;

	ASSERT_EQ(0, ctl("done", "1"));
	fd = open(self->f, O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, pwrite(fd, "a", 1, 0));
	ASSERT_EQ(1, pwrite(fd, "b", 1, 1));
	ASSERT_EQ(0, fchmod(fd, 0600));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=0 len=1 size=10 file=1\n",
			    ino(self->f)), events(self));
	ASSERT_EQ(0, ctl("invalidate", "1"));
	ASSERT_EQ(1, pwrite(fd, "c", 1, 2));
	ASSERT_EQ(1, pwrite(fd, "d", 1, 3));
	EXPECT_STREQ(expect(e, "write f ino=%lu pos=2 len=1 size=10 file=1\n",
			    ino(self->f)), events(self));
	close(fd);
}

TEST_HARNESS_MAIN
