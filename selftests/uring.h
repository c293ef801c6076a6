/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A raw io_uring for the selftests: one request, submitted and waited for
 * on a ring of its own (the guest has no liburing).
 */
#ifndef OVL_SNAPSHOTS_URING_H
#define OVL_SNAPSHOTS_URING_H

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/io_uring.h>

/* One request through a raw ring: its cqe->res, or -errno of the ring */
static inline int uring_op(const struct io_uring_sqe *req)
{
	struct io_uring_params p = { 0 };
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqe;
	unsigned int *sq_tail, *sq_array, *cq_head, *cq_tail;
	size_t sq_len, cq_len;
	void *sq, *cq;
	int ring, ret;

	ring = syscall(__NR_io_uring_setup, 1, &p);
	if (ring < 0)
		return -errno;
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  ring, IORING_OFF_SQ_RING);
	cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  ring, IORING_OFF_CQ_RING);
	sqes = mmap(NULL, p.sq_entries * sizeof(*sqes), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
		close(ring);
		return -ENOMEM;
	}
	sq_tail = (unsigned int *)((char *)sq + p.sq_off.tail);
	sq_array = (unsigned int *)((char *)sq + p.sq_off.array);
	cq_head = (unsigned int *)((char *)cq + p.cq_off.head);
	cq_tail = (unsigned int *)((char *)cq + p.cq_off.tail);

	sqes[0] = *req;
	sq_array[*sq_tail & (p.sq_entries - 1)] = 0;
	__atomic_store_n(sq_tail, *sq_tail + 1, __ATOMIC_RELEASE);
	ret = syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS,
		      NULL, 0);
	if (ret < 0) {
		ret = -errno;
	} else if (__atomic_load_n(cq_tail, __ATOMIC_ACQUIRE) == *cq_head) {
		ret = -EIO;
	} else {
		cqe = (struct io_uring_cqe *)((char *)cq + p.cq_off.cqes) +
		      (*cq_head & (p.cq_entries - 1));
		ret = cqe->res;
		__atomic_store_n(cq_head, *cq_head + 1, __ATOMIC_RELEASE);
	}
	munmap(sqes, p.sq_entries * sizeof(*sqes));
	munmap(cq, cq_len);
	munmap(sq, sq_len);
	close(ring);
	return ret;
}

/* IORING_OP_SETXATTR of @path, or IORING_OP_FSETXATTR of @fd if !@path */
static inline int uring_setxattr(const char *path, int fd,
				 const char *name, const char *value)
{
	struct io_uring_sqe sqe = {
		.opcode = path ? IORING_OP_SETXATTR : IORING_OP_FSETXATTR,
		.fd = path ? 0 : fd,
		.addr = (unsigned long)name,
		.addr2 = (unsigned long)value,
		.len = strlen(value),
		.addr3 = (unsigned long)path,
	};

	return uring_op(&sqe);
}

#endif
