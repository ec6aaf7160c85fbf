/* SPDX-License-Identifier: MIT */
/*
 * The queue of O_DIRECT writes to extent files (extq.h): one FIFO list of
 * the queued and running writes of every node, FS_EXTQ_THREADS writer
 * threads, and the waits of readers, truncations, fsync and close. Lists
 * stay short (FS_EXTQ_MAX bytes of 1 MiB requests: some 32 entries), so
 * the overlap checks walk them. Not here: when a write is queued
 * (extent.c), the backing file (core/extfile.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "extq.h"
#include "fs.h"
#include "node.h"

/* One queued or running write. */
struct extq_wr {
	struct node *n;
	uint64_t off;
	size_t len;
	void *buf;  /* KV_ALIGN-aligned copy */
	int pooled; /* buf is an EXTQ_BUF buffer of the pool */
	int running;
	struct extq_wr *next;
};

/* The size of a pooled copy buffer: one FUSE request at most. */
#define EXTQ_BUF (1u << 20)

struct extq {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a write was queued, or stop */
	pthread_cond_t done; /* a write ended, or room came back */
	struct extq_wr *head, *tail;
	uint64_t bytes; /* reserved: queued, running, or about to be */
	/*
	 * Idle EXTQ_BUF copy buffers. Allocating a fresh 1 MiB buffer per
	 * write maps new pages each time: their faults and unmaps took a
	 * third of the daemon's time in a pool file's write load.
	 */
	void *idle[FS_EXTQ_MAX / EXTQ_BUF];
	unsigned nidle;
	int stop;
	unsigned nthreads;
	pthread_t threads[FS_EXTQ_THREADS];
};

/* Slices in which a wait asks stop(arg). */
#define EXTQ_SLICE_NS 100000000ll

static int extq_overlap(const struct extq_wr *w, const struct node *n,
			uint64_t off, uint64_t len)
{
	return w->n == n &&
	       (len == 0 || (w->off < off + len && off < w->off + w->len));
}

/*
 * The first queued write no earlier write of its node overlaps (so that
 * overlapping writes land in the order they came). q->lock held.
 */
static struct extq_wr *extq_pick(struct extq *q)
{
	for (struct extq_wr *w = q->head; w; w = w->next) {
		int blocked = 0;

		if (w->running)
			continue;
		for (struct extq_wr *e = q->head; e != w && !blocked;
		     e = e->next)
			blocked = extq_overlap(e, w->n, w->off, w->len);
		if (!blocked)
			return w;
	}
	return NULL;
}

static void extq_unlink(struct extq *q, struct extq_wr *w)
{
	struct extq_wr **pp = &q->head, *prev = NULL;

	while (*pp != w) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = w->next;
	if (q->tail == w)
		q->tail = prev;
}

#ifdef KVFS_FAULT_INJECTION
/* The test hooks of damage.c: a delay, then the error to fail with. */
static int extq_fault(struct fs *fs)
{
	unsigned delay = atomic_load(&fs->fault_ext_delay_ms);

	if (delay)
		usleep(delay * 1000u);
	return -atomic_load(&fs->fault_ext_error);
}
#endif

static void *extq_worker(void *arg)
{
	struct fs *fs = arg;
	struct extq *q = fs->extq;
	struct extq_wr *w;
	int rc;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		w = extq_pick(q);
		if (!w && q->stop && !q->head)
			break;
		if (!w) {
			pthread_cond_wait(&q->work, &q->lock);
			continue;
		}
		w->running = 1;
		pthread_mutex_unlock(&q->lock);
		rc = 0;
#ifdef KVFS_FAULT_INJECTION
		rc = extq_fault(fs);
#endif
		if (rc == 0)
			rc = extf_write(store_io(fs->store), &w->n->x, w->buf,
					w->len, w->off, 1);
		if (rc < 0) {
			/* Kept for the next fsync, close or write. */
			atomic_store(&w->n->x_err, rc);
			log_warn("write of %zu bytes at %llu to extent file "
				 "inode %llu failed: %s",
				 w->len, (unsigned long long)w->off,
				 (unsigned long long)w->n->ino, strerror(-rc));
		} else {
			atomic_fetch_add(&fs->ext_write_bytes, w->len);
		}
		pthread_mutex_lock(&q->lock);
		extq_unlink(q, w);
		q->bytes -= w->len;
		if (w->pooled && q->nidle < FS_EXTQ_MAX / EXTQ_BUF) {
			q->idle[q->nidle++] = w->buf;
			w->buf = NULL;
		}
		pthread_cond_broadcast(&q->done);
		/* Another writer may be free to start now. */
		pthread_cond_broadcast(&q->work);
		pthread_mutex_unlock(&q->lock);
		node_put(fs, w->n, 0, 0, 1);
		free(w->buf);
		free(w);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int fs_extq_start(struct fs *fs)
{
	struct extq *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->done, NULL);
	fs->extq = q;
	for (; q->nthreads < FS_EXTQ_THREADS; q->nthreads++) {
		if (pthread_create(&q->threads[q->nthreads], NULL, extq_worker,
				   fs) != 0) {
			fs_extq_stop(fs);
			return -EAGAIN;
		}
	}
	return 0;
}

void fs_extq_stop(struct fs *fs)
{
	struct extq *q = fs->extq;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_broadcast(&q->work);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	while (q->nidle > 0)
		free(q->idle[--q->nidle]);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->work);
	pthread_cond_destroy(&q->done);
	free(q);
	fs->extq = NULL;
}

/* Waits on q->done for a slice; -EINTR when stop(arg) says so. */
static int extq_wait_slice(struct extq *q, int (*stop)(void *), void *arg)
{
	struct timespec ts;

	if (stop && stop(arg))
		return -EINTR;
	ts = clock_ts(clock_realtime_ns() + EXTQ_SLICE_NS);
	pthread_cond_timedwait(&q->done, &q->lock, &ts);
	return 0;
}

int fs_extq_reserve(struct fs *fs, size_t len, int (*stop)(void *), void *arg)
{
	struct extq *q = fs->extq;
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	while (rc == 0 && q->bytes > 0 && q->bytes + len > FS_EXTQ_MAX)
		rc = extq_wait_slice(q, stop, arg);
	if (rc == 0)
		q->bytes += len;
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void fs_extq_unreserve(struct fs *fs, size_t len)
{
	struct extq *q = fs->extq;

	pthread_mutex_lock(&q->lock);
	q->bytes -= len;
	pthread_cond_broadcast(&q->done);
	pthread_mutex_unlock(&q->lock);
}

uint64_t fs_extq_bytes(struct fs *fs)
{
	struct extq *q = fs->extq;
	uint64_t bytes;

	if (!q)
		return 0;
	pthread_mutex_lock(&q->lock);
	bytes = q->bytes;
	pthread_mutex_unlock(&q->lock);
	return bytes;
}

/*
 * A copy buffer for len bytes: from the pool when len is more than half
 * of EXTQ_BUF (*pooled = 1), else of its own size. NULL: no memory.
 */
static void *extq_buf(struct extq *q, size_t len, int *pooled)
{
	void *buf = NULL;

	*pooled = len > EXTQ_BUF / 2 && len <= EXTQ_BUF;
	if (*pooled) {
		pthread_mutex_lock(&q->lock);
		if (q->nidle > 0)
			buf = q->idle[--q->nidle];
		pthread_mutex_unlock(&q->lock);
		if (buf)
			return buf;
	}
	if (posix_memalign(&buf, KV_ALIGN, *pooled ? EXTQ_BUF : len) != 0)
		return NULL;
	return buf;
}

int fs_extq_put(struct fs *fs, struct node *n, const void *buf, size_t len,
		uint64_t off)
{
	struct extq *q = fs->extq;
	struct extq_wr *w = calloc(1, sizeof(*w));
	void *copy = NULL;
	int pooled = 0;

	if (w)
		copy = extq_buf(q, len, &pooled);
	if (!copy) {
		free(w);
		fs_extq_unreserve(fs, len);
		return -ENOMEM;
	}
	memcpy(copy, buf, len);
	*w = (struct extq_wr){
		.n = n, .off = off, .len = len, .buf = copy, .pooled = pooled};
	node_pin(fs, n);
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

int fs_extq_wait(struct fs *fs, struct node *n, uint64_t off, uint64_t len,
		 int (*stop)(void *), void *arg)
{
	struct extq *q = fs->extq;
	int rc = 0, busy = 1;

	if (!q)
		return 0;
	pthread_mutex_lock(&q->lock);
	while (rc == 0 && busy) {
		busy = 0;
		for (struct extq_wr *w = q->head; w && !busy; w = w->next)
			busy = extq_overlap(w, n, off, len);
		if (busy)
			rc = extq_wait_slice(q, stop, arg);
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int fs_extq_error(struct node *n)
{
	return atomic_exchange(&n->x_err, 0);
}
