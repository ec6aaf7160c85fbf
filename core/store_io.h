/* SPDX-License-Identifier: MIT */
/*
 * The I/O calls the block store makes, as an ops table so that tests can
 * inject short transfers and errors (a fake comes in through the table; no
 * system call is patched or wrapped). The default table does data-file reads and writes with io_uring, one
 * ring per calling thread (created on first use, freed when the thread
 * exits), so no ring is ever shared and no submission lock is needed.
 *
 * Each call is one attempt: it may transfer fewer bytes than asked, or fail
 * with -EINTR/-EAGAIN; store.c and record.c (walking a data file) loop and
 * retry, nothing else does.
 */
#ifndef KVFS_STORE_IO_H
#define KVFS_STORE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct store_io_ops {
	/* Returns bytes read (0 at EOF) or -errno. */
	ssize_t (*preadv)(void *ctx, int fd, const struct iovec *iov,
			  int iovcnt, uint64_t off);
	/* Returns bytes written or -errno. */
	ssize_t (*pwritev)(void *ctx, int fd, const struct iovec *iov,
			   int iovcnt, uint64_t off);
	/* fallocate(PUNCH_HOLE|KEEP_SIZE); 0 or -errno. */
	int (*punch)(void *ctx, int fd, uint64_t off, uint64_t len);
	/* Current size of the file in bytes, or -errno. */
	int (*size)(void *ctx, int fd, uint64_t *size);
	/* fdatasync; 0 or -errno. */
	int (*sync)(void *ctx, int fd);
	void *ctx;
};

/* The io_uring-backed table. */
extern const struct store_io_ops store_io_uring;

/*
 * Whether io_uring works here (0) or why not (-errno, e.g. -ENOSYS or -EPERM
 * when it is disabled). Tries to set up a ring on the calling thread.
 */
int store_io_probe(void);

#endif
