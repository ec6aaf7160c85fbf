/* SPDX-License-Identifier: MIT */
/*
 * Fault-injecting I/O ops for the block store's unit tests, handed to the
 * store as its ops table (the model is SQLite's aSyscall[]). Each call
 * does the real system call on the store's fd (preadv/pwritev, fallocate,
 * fstat, fdatasync) unless the rule the test set for that kind of call says
 * otherwise: fail call N with a chosen -errno, return a transient -EINTR or
 * -EAGAIN the next M times, transfer at most K bytes per call, or transfer a
 * short count (maybe 0) only on call N. Calls are numbered from 1 per kind
 * and counted; the last punch's range is recorded.
 *
 * A short transfer on an O_DIRECT fd may leave the next one unaligned, which
 * the kernel refuses with -EINVAL; such transfers go through a buffered alias
 * of the same file (/proc/self/fd/N), so the fake never invents an error.
 *
 * Header-only with static functions: include it from one test file. Set the
 * rules while no call is in flight. Decisions and counters are taken under
 * f->lock and the system call runs outside it, so any thread may call; the
 * hook runs outside the lock too, so a test may block in it to order threads.
 */
#ifndef KVFS_FAKE_IO_H
#define KVFS_FAKE_IO_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kvtypes.h"
#include "store_io.h"

enum fake_io_kind {
	FAKE_IO_PREADV,
	FAKE_IO_PWRITEV,
	FAKE_IO_PUNCH,
	FAKE_IO_SIZE,
	FAKE_IO_SYNC,
	FAKE_IO_NKINDS,
};

/* Most iovec entries one call may carry (the store uses two). */
#define FAKE_IO_MAX_IOV 16

struct fake_io_rule {
	unsigned long fail_at; /* this call (1-based) fails, 0: none */
	int fail_err;	       /* -errno that call returns */
	unsigned
		ntransient; /* the next ntransient calls return transient_err */
	int transient_err;  /* -EINTR or -EAGAIN */
	size_t max_xfer;    /* preadv/pwritev: bytes per call at most, 0: all */
	unsigned long short_at; /* preadv/pwritev: this call moves at most */
	size_t short_len;	/* short_len bytes (0 allowed) */
};

typedef void (*fake_io_hook_fn)(void *ctx, enum fake_io_kind kind,
				unsigned long call);

struct fake_io {
	pthread_mutex_t lock;
	/* everything below is protected by lock while calls are in flight */
	struct fake_io_rule rule[FAKE_IO_NKINDS];
	unsigned long ncalls[FAKE_IO_NKINDS];
	unsigned long nfailed[FAKE_IO_NKINDS]; /* injected errors returned */
	unsigned long nshort[FAKE_IO_NKINDS];  /* transfers cut short */
	uint64_t punch_off, punch_len;	       /* the last punch's range */
	/* Called before each call with its kind and number, unlocked. */
	fake_io_hook_fn hook;
	void *hook_ctx;
};

static inline void fake_io_init(struct fake_io *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
}

static inline void fake_io_destroy(struct fake_io *f)
{
	pthread_mutex_destroy(&f->lock);
}

/* Drops every rule, counter and the hook. */
static inline void fake_io_clear(struct fake_io *f)
{
	pthread_mutex_lock(&f->lock);
	memset(f->rule, 0, sizeof(f->rule));
	memset(f->ncalls, 0, sizeof(f->ncalls));
	memset(f->nfailed, 0, sizeof(f->nfailed));
	memset(f->nshort, 0, sizeof(f->nshort));
	f->punch_off = 0;
	f->punch_len = 0;
	f->hook = NULL;
	f->hook_ctx = NULL;
	pthread_mutex_unlock(&f->lock);
}

static inline unsigned long fake_io_calls(struct fake_io *f,
					  enum fake_io_kind kind)
{
	unsigned long n;

	pthread_mutex_lock(&f->lock);
	n = f->ncalls[kind];
	pthread_mutex_unlock(&f->lock);
	return n;
}

/*
 * Numbers the call and decides its fate: returns the injected -errno, or 0
 * with *limit set to the most bytes it may move.
 */
static inline int fake_io_begin(struct fake_io *f, enum fake_io_kind kind,
				size_t *limit)
{
	struct fake_io_rule *r = &f->rule[kind];
	fake_io_hook_fn hook;
	unsigned long call;
	void *hook_ctx;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	call = ++f->ncalls[kind];
	if (r->fail_at == call) {
		rc = r->fail_err;
	} else if (r->ntransient > 0) {
		r->ntransient--;
		rc = r->transient_err;
	}
	if (rc < 0)
		f->nfailed[kind]++;
	*limit = r->max_xfer ? r->max_xfer : SIZE_MAX;
	if (r->short_at == call && r->short_len < *limit)
		*limit = r->short_len;
	hook = f->hook;
	hook_ctx = f->hook_ctx;
	pthread_mutex_unlock(&f->lock);
	if (hook)
		hook(hook_ctx, kind, call);
	return rc;
}

/* Moves at most limit bytes of iov at off with one real system call. */
static inline ssize_t fake_io_xfer(int fd, const struct iovec *iov, int iovcnt,
				   uint64_t off, size_t limit, int write)
{
	struct iovec v[FAKE_IO_MAX_IOV];
	uintptr_t mis = (uintptr_t)off;
	int nv = 0, use = fd, alias = -1;
	ssize_t n;
	int fl;

	if (iovcnt < 0 || iovcnt > FAKE_IO_MAX_IOV)
		return -EINVAL;
	for (int i = 0; i < iovcnt && limit > 0; i++) {
		v[nv] = iov[i];
		if (v[nv].iov_len > limit)
			v[nv].iov_len = limit;
		limit -= v[nv].iov_len;
		mis |= (uintptr_t)v[nv].iov_base | (uintptr_t)v[nv].iov_len;
		nv++;
	}
	if (nv == 0)
		return 0;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if ((fl & O_DIRECT) && (mis & (KV_ALIGN - 1))) {
		char name[64];

		snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
		alias = open(name, O_RDWR | O_CLOEXEC);
		if (alias < 0)
			return -errno;
		use = alias;
	}
	if (write)
		n = pwritev(use, v, nv, (off_t)off);
	else
		n = preadv(use, v, nv, (off_t)off);
	if (n < 0)
		n = -errno;
	if (alias >= 0)
		close(alias);
	return n;
}

static inline size_t fake_io_iov_len(const struct iovec *iov, int iovcnt)
{
	size_t len = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	return len;
}

static inline ssize_t fake_io_rw(struct fake_io *f, enum fake_io_kind kind,
				 int fd, const struct iovec *iov, int iovcnt,
				 uint64_t off)
{
	size_t limit;
	int rc;

	rc = fake_io_begin(f, kind, &limit);
	if (rc < 0)
		return rc;
	if (limit < fake_io_iov_len(iov, iovcnt)) {
		pthread_mutex_lock(&f->lock);
		f->nshort[kind]++;
		pthread_mutex_unlock(&f->lock);
	}
	return fake_io_xfer(fd, iov, iovcnt, off, limit,
			    kind == FAKE_IO_PWRITEV);
}

static inline ssize_t fake_io_preadv(void *ctx, int fd, const struct iovec *iov,
				     int iovcnt, uint64_t off)
{
	return fake_io_rw(ctx, FAKE_IO_PREADV, fd, iov, iovcnt, off);
}

static inline ssize_t fake_io_pwritev(void *ctx, int fd,
				      const struct iovec *iov, int iovcnt,
				      uint64_t off)
{
	return fake_io_rw(ctx, FAKE_IO_PWRITEV, fd, iov, iovcnt, off);
}

static inline int fake_io_punch(void *ctx, int fd, uint64_t off, uint64_t len)
{
	struct fake_io *f = ctx;
	size_t limit;
	int rc;

	rc = fake_io_begin(f, FAKE_IO_PUNCH, &limit);
	pthread_mutex_lock(&f->lock);
	f->punch_off = off;
	f->punch_len = len;
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		return rc;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}

static inline int fake_io_size(void *ctx, int fd, uint64_t *size)
{
	struct stat sb;
	size_t limit;
	int rc;

	rc = fake_io_begin(ctx, FAKE_IO_SIZE, &limit);
	if (rc < 0)
		return rc;
	if (fstat(fd, &sb) < 0)
		return -errno;
	*size = (uint64_t)sb.st_size;
	return 0;
}

static inline int fake_io_sync(void *ctx, int fd)
{
	size_t limit;
	int rc;

	rc = fake_io_begin(ctx, FAKE_IO_SYNC, &limit);
	if (rc < 0)
		return rc;
	if (fdatasync(fd) < 0)
		return -errno;
	return 0;
}

/* The ops table for store_open(); borrows f, which must outlive the store. */
static inline struct store_io_ops fake_io_ops(struct fake_io *f)
{
	return (struct store_io_ops){
		.preadv = fake_io_preadv,
		.pwritev = fake_io_pwritev,
		.punch = fake_io_punch,
		.size = fake_io_size,
		.sync = fake_io_sync,
		.ctx = f,
	};
}

#endif
