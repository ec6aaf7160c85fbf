/* SPDX-License-Identifier: MIT */
/*
 * The block store's default I/O ops: preadv, pwritev and fdatasync through
 * an io_uring owned by the calling thread, fallocate and fstat as plain
 * system calls; see store_io.h. Not here: retrying short or interrupted
 * transfers (the callers do).
 */
#include "store_io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_IO_RING_DEPTH 8

struct store_io_ring {
	struct io_uring ring;
};

static pthread_key_t store_io_key;
/* Tags the calling thread's requests, so a completion is matched to its. */
static _Thread_local uint64_t store_io_tag;
static pthread_once_t store_io_once = PTHREAD_ONCE_INIT;

static void store_io_ring_free(void *p)
{
	struct store_io_ring *r = p;

	io_uring_queue_exit(&r->ring);
	free(r);
}

static void store_io_key_init(void)
{
	if (pthread_key_create(&store_io_key, store_io_ring_free) != 0)
		abort();
}

/* The calling thread's ring, set up on first use. */
static int store_io_ring_get(struct io_uring **out)
{
	struct store_io_ring *r;
	int rc;

	pthread_once(&store_io_once, store_io_key_init);
	r = pthread_getspecific(store_io_key);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		rc = io_uring_queue_init(STORE_IO_RING_DEPTH, &r->ring, 0);
		if (rc < 0) {
			free(r);
			return rc;
		}
		rc = pthread_setspecific(store_io_key, r);
		if (rc != 0) {
			store_io_ring_free(r);
			return -rc;
		}
	}
	*out = &r->ring;
	return 0;
}

/*
 * Submits the prepared SQE (tagged with tag) and waits for its completion.
 * Once submitted, the kernel owns the buffers until the completion comes:
 * an interrupted wait (-EINTR, which io_uring also returns when task work
 * is pending) waits again, it never returns, or the caller would retry
 * with a second request into buffers the first one still writes.
 */
static ssize_t store_io_submit_wait(struct io_uring *ring, uint64_t tag)
{
	struct io_uring_cqe *cqe;
	ssize_t res;
	int rc;

	do {
		rc = io_uring_submit(ring);
	} while (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
	if (rc < 0)
		return rc; /* not submitted: the buffers are still ours */
	for (;;) {
		rc = io_uring_wait_cqe(ring, &cqe);
		if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY)
			continue;
		if (rc < 0) {
			/* Cannot happen with a valid ring; never hand back
			 * buffers the kernel may still use. */
			abort();
		}
		if (cqe->user_data != tag) {
			io_uring_cqe_seen(ring, cqe); /* not ours: stale */
			continue;
		}
		res = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		return res;
	}
}

static ssize_t store_io_rw(int fd, const struct iovec *iov, int iovcnt,
			   uint64_t off, int write)
{
	struct io_uring_sqe *sqe;
	struct io_uring *ring = NULL;
	int rc;

	rc = store_io_ring_get(&ring);
	if (rc < 0)
		return rc;
	sqe = io_uring_get_sqe(ring);
	if (!sqe)
		return -EAGAIN;
	if (write)
		io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, off);
	else
		io_uring_prep_readv(sqe, fd, iov, (unsigned)iovcnt, off);
	io_uring_sqe_set_data64(sqe, ++store_io_tag);
	return store_io_submit_wait(ring, store_io_tag);
}

static ssize_t store_io_preadv(void *ctx, int fd, const struct iovec *iov,
			       int iovcnt, uint64_t off)
{
	return store_io_rw(fd, iov, iovcnt, off, 0);
}

static ssize_t store_io_pwritev(void *ctx, int fd, const struct iovec *iov,
				int iovcnt, uint64_t off)
{
	return store_io_rw(fd, iov, iovcnt, off, 1);
}

static int store_io_punch(void *ctx, int fd, uint64_t off, uint64_t len)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}

static int store_io_size(void *ctx, int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int store_io_sync(void *ctx, int fd)
{
	struct io_uring_sqe *sqe;
	struct io_uring *ring = NULL;
	int rc;

	rc = store_io_ring_get(&ring);
	if (rc < 0)
		return rc;
	sqe = io_uring_get_sqe(ring);
	if (!sqe)
		return -EAGAIN;
	io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, ++store_io_tag);
	return (int)store_io_submit_wait(ring, store_io_tag);
}

const struct store_io_ops store_io_uring = {
	.preadv = store_io_preadv,
	.pwritev = store_io_pwritev,
	.punch = store_io_punch,
	.size = store_io_size,
	.sync = store_io_sync,
};

int store_io_probe(void)
{
	struct io_uring *ring = NULL;

	return store_io_ring_get(&ring);
}
