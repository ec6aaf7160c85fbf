/* SPDX-License-Identifier: MIT */
/*
 * The read-ahead cache of ra.h: a hash of entries by record, a FIFO of
 * those queued, an LRU list of those read, and the threads that read them.
 * An entry is QUEUED (in the FIFO, its node pinned), READING (a thread
 * owns its segments, the node still pinned) or READY (in the LRU list,
 * no pin: the record is the key, the node may go and come back).
 */
#include "ra.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "damage.h"
#include "filebuf.h"
#include "node.h"

#define RA_BUCKETS 4096u
/*
 * Lookups that are followed by loads earn read-aheads; a burst of lookups
 * alone (a listing tool, an engine probing what it will not load) spends
 * them: each read-ahead evicted unread or dropped unread (its block
 * unlinked, rewritten, quarantined: an engine evicting looks its blocks up
 * to unlink them) costs one, each one a READ took
 * earns two, each READ that found none queued or found it unread earns
 * one. With none left, lookups queue no read-ahead until loads come.
 */
#define RA_CREDIT 64

enum ra_state { RA_QUEUED, RA_READING, RA_READY };

struct ra_entry {
	struct ra_entry *hnext;	      /* hash chain */
	struct ra_entry *prev, *next; /* FIFO (QUEUED) or LRU (READY) */
	enum ra_state state;
	int dropped; /* its record went while it was read: discard */
	uint64_t ino;
	int64_t due_ns; /* CLOCK_REALTIME: not read before (RA_DELAY_NS) */
	struct kv_extent ext;
	struct node *n; /* pinned while QUEUED or READING */
	char **segs;
	size_t nsegs;
	uint32_t *crcs;
	uint32_t ncrcs;
};

struct ra {
	struct fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t work; /* an entry was queued, or stop */
	pthread_cond_t done; /* an entry left READING */
	struct ra_entry *table[RA_BUCKETS];
	struct ra_entry fifo; /* list heads: next is the oldest */
	struct ra_entry lru;  /* next is the least recently used */
	/* Memory held: all of it, and the part READY entries hold. */
	uint64_t budget, bytes, ready_bytes, peak;
	unsigned pending;
	int credit; /* RA_CREDIT */
	int stop;
	uint64_t started, used, wasted, failed, skipped, read_bytes;
	pthread_t threads[RA_THREADS];
	unsigned nthreads;
};

static uint64_t ra_cost(const struct kv_extent *ext)
{
	return (ext->len + NODE_SEG - 1) / NODE_SEG * NODE_SEG;
}

static int ra_same(const struct kv_extent *a, const struct kv_extent *b)
{
	return a->file_id == b->file_id && a->off == b->off &&
	       a->hdr_len == b->hdr_len && a->len == b->len;
}

static struct ra_entry **ra_slot(struct ra *ra, const struct kv_extent *ext)
{
	uint64_t h = ((uint64_t)ext->file_id << 40) ^ ext->off;

	h *= 0x9e3779b97f4a7c15ull;
	return &ra->table[h >> 52];
}

static struct ra_entry *ra_find(struct ra *ra, const struct kv_extent *ext)
{
	struct ra_entry *e = *ra_slot(ra, ext);

	while (e && !ra_same(&e->ext, ext))
		e = e->hnext;
	return e;
}

static void ra_list_del(struct ra_entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

/* Appends e at the tail of the list at head (the newest end). */
static void ra_list_add(struct ra_entry *head, struct ra_entry *e)
{
	e->prev = head->prev;
	e->next = head;
	head->prev->next = e;
	head->prev = e;
}

/*
 * Takes e out of the table and its list; ra->lock held. Its memory stays
 * counted while a thread reads into it (that thread uncounts it).
 */
static void ra_unlink(struct ra *ra, struct ra_entry *e)
{
	struct ra_entry **p = ra_slot(ra, &e->ext);

	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	if (e->state == RA_READING)
		return;
	ra_list_del(e);
	ra->bytes -= ra_cost(&e->ext);
	if (e->state == RA_READY)
		ra->ready_bytes -= ra_cost(&e->ext);
}

static void ra_free(struct fs *fs, struct ra_entry *e)
{
	for (size_t i = 0; e->segs && i < e->nsegs; i++)
		node_seg_raw_put(fs, e->segs[i]);
	free(e->segs);
	free(e->crcs);
	free(e);
}

/*
 * Reads and checks e's record whole into segments of its own. 0, or a
 * store_read() error.
 */
static int ra_read(struct fs *fs, struct ra_entry *e)
{
	size_t nsegs = (size_t)(ra_cost(&e->ext) / NODE_SEG);
	size_t got;
	int rc;

#ifdef KVFS_FAULT_INJECTION
	/* The injected read-ahead error (damage.c), as the CRCs' or the
	 * bytes' read failing. */
	rc = -atomic_load(&fs->fault_ra_error);
	if (rc < 0)
		return rc;
#endif
	rc = idx_get_crcs(fs->idx, e->ino, &e->crcs, &e->ncrcs);
	if (rc < 0)
		return rc;
	e->segs = calloc(nsegs, sizeof(*e->segs));
	if (!e->segs)
		return -ENOMEM;
	for (; e->nsegs < nsegs; e->nsegs++) {
		e->segs[e->nsegs] = node_seg_raw(fs);
		if (!e->segs[e->nsegs])
			return -ENOMEM;
	}
	rc = store_read_segs(fs->store, &e->ext, e->crcs, 0, e->ext.len,
			     e->segs, NODE_SEG, &got);
	return rc == 0 && got != e->ext.len ? -EIO : rc;
}

/*
 * After e's read failed with rc: when its node still has that record, a
 * failed read of the block (damage.c), before the engine loads it.
 */
static void ra_damage(struct fs *fs, struct ra_entry *e, int rc)
{
	struct node *n = e->n;
	int same;

	if (rc == -ENOMEM)
		return;
	pthread_rwlock_rdlock(&n->rw);
	same = ra_same(&n->attr.ext, &e->ext) && !n->dirty && !n->wb &&
	       n->attr.nlink > 0;
	pthread_rwlock_unlock(&n->rw);
	if (same)
		fs_read_damage(fs, n, 0, rc, "read-ahead");
}

static void *ra_main(void *arg)
{
	struct ra *ra = arg;
	struct fs *fs = ra->fs;

	pthread_mutex_lock(&ra->lock);
	for (;;) {
		struct ra_entry *e = ra->fifo.next;
		struct node *n;
		int rc;

		if (ra->stop)
			break;
		if (e == &ra->fifo) {
			pthread_cond_wait(&ra->work, &ra->lock);
			continue;
		}
		if ((int64_t)clock_realtime_ns() < e->due_ns) {
			struct timespec ts = clock_ts(e->due_ns);

			pthread_cond_timedwait(&ra->work, &ra->lock, &ts);
			continue;
		}
		ra_list_del(e);
		e->state = RA_READING;
		pthread_mutex_unlock(&ra->lock);
		rc = ra_read(fs, e);
		n = e->n;
		pthread_mutex_lock(&ra->lock);
		ra->pending--;
		e->n = NULL;
		if (rc == 0 && !e->dropped) {
			e->state = RA_READY;
			ra_list_add(&ra->lru, e);
			ra->ready_bytes += ra_cost(&e->ext);
			ra->read_bytes += e->ext.len;
			e = NULL;
		} else {
			struct ra_entry **p = ra_slot(ra, &e->ext);

			/* Dropped entries left the table already. */
			while (*p && *p != e)
				p = &(*p)->hnext;
			if (*p)
				ra_unlink(ra, e);
			ra->bytes -= ra_cost(&e->ext);
			if (rc == 0 || e->dropped) {
				ra->wasted++;
				rc = 0;
			} else {
				ra->failed++;
			}
		}
		pthread_cond_broadcast(&ra->done);
		pthread_mutex_unlock(&ra->lock);
		if (e && rc < 0) {
			e->n = n;
			ra_damage(fs, e, rc);
		}
		if (e)
			ra_free(fs, e);
		node_put(fs, n, 0, 0, 1);
		pthread_mutex_lock(&ra->lock);
	}
	pthread_mutex_unlock(&ra->lock);
	return NULL;
}

int ra_start(struct fs *fs, uint64_t budget)
{
	struct ra *ra;
	int rc = 0;

	fs->ra = NULL;
	if (budget == 0)
		return 0;
	ra = calloc(1, sizeof(*ra));
	if (!ra)
		return -ENOMEM;
	ra->fs = fs;
	ra->budget = budget;
	ra->credit = RA_CREDIT;
	ra->fifo.next = ra->fifo.prev = &ra->fifo;
	ra->lru.next = ra->lru.prev = &ra->lru;
	pthread_mutex_init(&ra->lock, NULL);
	pthread_cond_init(&ra->work, NULL);
	pthread_cond_init(&ra->done, NULL);
	fs->ra = ra;
	fs->ra_forget = ra_drop;
	for (; ra->nthreads < RA_THREADS; ra->nthreads++) {
		rc = -pthread_create(&ra->threads[ra->nthreads], NULL, ra_main,
				     ra);
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		ra_stop(fs);
		return rc;
	}
	log_info("read-ahead on lookup hits: %llu MiB, %u threads",
		 (unsigned long long)(budget >> 20), ra->nthreads);
	return 0;
}

void ra_stop(struct fs *fs)
{
	struct ra *ra = fs->ra;

	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	ra->stop = 1;
	pthread_cond_broadcast(&ra->work);
	pthread_mutex_unlock(&ra->lock);
	for (unsigned i = 0; i < ra->nthreads; i++)
		pthread_join(ra->threads[i], NULL);
	/* No thread is left: every entry is QUEUED or READY. */
	for (size_t b = 0; b < RA_BUCKETS; b++)
		while (ra->table[b]) {
			struct ra_entry *e = ra->table[b];

			ra_unlink(ra, e);
			if (e->n)
				node_put(fs, e->n, 0, 0, 1);
			ra_free(fs, e);
		}
	pthread_cond_destroy(&ra->done);
	pthread_cond_destroy(&ra->work);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
	fs->ra = NULL;
}

/*
 * Evicts READY entries, oldest use first, until cost more fits, chaining
 * them on *gone (through hnext) for the caller to free after the lock;
 * none when it cannot fit even then (what is queued or read stays).
 */
static int ra_make_room(struct ra *ra, uint64_t cost, struct ra_entry **gone)
{
	if (cost > ra->budget ||
	    ra->bytes - ra->ready_bytes > ra->budget - cost)
		return 0;
	while (ra->bytes + cost > ra->budget) {
		struct ra_entry *e = ra->lru.next;

		ra_unlink(ra, e);
		ra->wasted++;
		ra->credit--;
		e->hnext = *gone;
		*gone = e;
	}
	return 1;
}

void ra_offer(struct fs *fs, struct node *n)
{
	struct ra *ra = fs->ra;
	struct ra_entry *e, *gone = NULL;
	struct kv_extent ext;
	int ok, first, queued;

	if (!ra)
		return;
	pthread_rwlock_rdlock(&n->rw);
	ext = n->attr.ext;
	ok = S_ISREG(n->attr.mode) && !kv_ext_large(&ext) && ext.file_id != 0 &&
	     ext.len > 0 && ext.len <= FS_VERIFY_MAX &&
	     ext.len == n->attr.size && !n->dirty && !n->cached && !n->wb;
	pthread_rwlock_unlock(&n->rw);
	pthread_mutex_lock(&fs->nodes_lock);
	first = n->nlookup == 1 && n->nopen == 0;
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!ok || !first)
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->ino = n->ino;
	e->due_ns = (int64_t)clock_realtime_ns() + RA_DELAY_NS;
	e->ext = ext;
	e->n = n;
	e->prev = e->next = e;
	/* Pinned before the lock: nothing is taken inside it. */
	node_pin(fs, n);
	pthread_mutex_lock(&ra->lock);
	queued = !ra->stop && ra->credit > 0 && !ra_find(ra, &ext) &&
		 ra_make_room(ra, ra_cost(&ext), &gone);
	if (!ra->stop && ra->credit <= 0)
		ra->skipped++;
	if (queued) {
		e->hnext = *ra_slot(ra, &ext);
		*ra_slot(ra, &ext) = e;
		ra_list_add(&ra->fifo, e);
		ra->bytes += ra_cost(&ext);
		if (ra->bytes > ra->peak)
			ra->peak = ra->bytes;
		ra->pending++;
		ra->started++;
		pthread_cond_signal(&ra->work);
	}
	pthread_mutex_unlock(&ra->lock);
	while (gone) {
		struct ra_entry *next = gone->hnext;

		ra_free(fs, gone);
		gone = next;
	}
	if (!queued) {
		node_put(fs, n, 0, 0, 1);
		free(e);
	}
}

void ra_wait(struct fs *fs, const struct kv_extent *ext, fuse_req_t req)
{
	struct ra *ra = fs->ra;
	int64_t end = (int64_t)clock_realtime_ns() + RA_WAIT_NS;
	struct ra_entry *e;

	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	while ((e = ra_find(ra, ext)) && e->state == RA_READING &&
	       !fuse_req_interrupted(req) &&
	       (int64_t)clock_realtime_ns() < end) {
		/* Slices, to see an interrupt: it does not signal done. */
		struct timespec ts = clock_ts(clock_realtime_ns() + 10000000);

		pthread_cond_timedwait(&ra->done, &ra->lock, &ts);
	}
	pthread_mutex_unlock(&ra->lock);
}

int ra_ready(struct fs *fs, const struct kv_extent *ext)
{
	struct ra *ra = fs->ra;
	struct ra_entry *e;
	int ready;

	if (!ra)
		return 0;
	pthread_mutex_lock(&ra->lock);
	e = ra_find(ra, ext);
	ready = e && e->state == RA_READY;
	pthread_mutex_unlock(&ra->lock);
	return ready;
}

/* A load earned credit; ra->lock held. */
static void ra_earn(struct ra *ra, int n)
{
	ra->credit = ra->credit + n > RA_CREDIT ? RA_CREDIT : ra->credit + n;
}

int ra_take(struct fs *fs, struct node *n)
{
	struct ra *ra = fs->ra;
	struct ra_entry *e;
	struct node *unpin = NULL;

	if (!ra || n->nsegs > 0)
		return 0;
	pthread_mutex_lock(&ra->lock);
	e = ra_find(ra, &n->attr.ext);
	if (e && e->state == RA_READING) {
		/* Read here instead: that read is discarded when it ends. */
		ra_unlink(ra, e);
		e->dropped = 1;
		e = NULL;
		ra_earn(ra, 1);
	} else if (e) {
		ra_unlink(ra, e);
		if (e->state == RA_QUEUED) {
			/* Not read yet: the READ reads it itself. */
			unpin = e->n;
			ra->pending--;
			ra->wasted++;
			ra_earn(ra, 1);
		} else {
			ra->used++;
			ra_earn(ra, 2);
		}
	} else {
		ra_earn(ra, 1);
	}
	pthread_mutex_unlock(&ra->lock);
	if (unpin) {
		node_put(fs, unpin, 0, 0, 1);
		ra_free(fs, e);
		return 0;
	}
	if (!e)
		return 0;
	if (!n->crcs_loaded) {
		free(n->crcs);
		n->crcs = e->crcs;
		n->ncrcs = e->ncrcs;
		n->crcs_loaded = 1;
		e->crcs = NULL;
	}
	node_adopt(fs, n, e->segs, e->nsegs);
	e->segs = NULL;
	ra_free(fs, e);
	return 1;
}

void ra_drop(struct fs *fs, const struct kv_extent *ext)
{
	struct ra *ra = fs->ra;
	struct node *unpin = NULL;
	struct ra_entry *e;

	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	e = ra_find(ra, ext);
	if (e) {
		/* Looked up, then unlinked or rewritten: no load came. */
		ra->credit--;
		ra_unlink(ra, e);
		if (e->state == RA_READING) {
			e->dropped = 1; /* its thread frees it */
			e = NULL;
		} else {
			if (e->state == RA_QUEUED) {
				unpin = e->n;
				ra->pending--;
			}
			ra->wasted++;
		}
	}
	pthread_mutex_unlock(&ra->lock);
	if (unpin)
		node_put(fs, unpin, 0, 0, 1);
	if (e)
		ra_free(fs, e);
}

void ra_get_stats(struct fs *fs, struct ra_stats *s)
{
	struct ra *ra = fs->ra;

	memset(s, 0, sizeof(*s));
	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	*s = (struct ra_stats){.started = ra->started,
			       .used = ra->used,
			       .wasted = ra->wasted,
			       .failed = ra->failed,
			       .skipped = ra->skipped,
			       .read_bytes = ra->read_bytes,
			       .bytes = ra->bytes,
			       .peak_bytes = ra->peak,
			       .pending = ra->pending,
			       .budget = ra->budget};
	pthread_mutex_unlock(&ra->lock);
}
