/* SPDX-License-Identifier: MIT */
/*
 * A node's file buffer: the file's bytes in NODE_SEG-byte segments while it
 * has unsaved writes, or while its saved bytes are cached after a verified
 * whole-file read. Segments are counted against the dirty limit
 * (fs->dirty_bytes under fs->dirty_lock) and idle ones kept in a small pool.
 * Not here: saving the bytes (node_flush_locked in node.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crc32c.h"
#include "filebuf.h"
#include "fs.h"

char *node_seg_new(void)
{
	void *p;

	if (posix_memalign(&p, KV_ALIGN, NODE_SEG + 2 * NODE_SEG_ROOM) != 0)
		return NULL;
	return (char *)p + NODE_SEG_ROOM;
}

void node_seg_free(char *seg)
{
	if (seg)
		free(seg - NODE_SEG_ROOM);
}

/*
 * A segment for a node's buffer, counted against the dirty limit. It never
 * waits: a writer waits for room before it takes n->rw (node_budget_wait),
 * so the limit may be passed by what the writers let in at once.
 */
static char *node_seg_pop(struct fs *fs, uint64_t charge)
{
	char *seg = NULL;

	pthread_mutex_lock(&fs->dirty_lock);
	if (fs->nseg_pool > 0)
		seg = fs->seg_pool[--fs->nseg_pool];
	fs->dirty_bytes += charge;
	pthread_mutex_unlock(&fs->dirty_lock);
	if (seg)
		return seg;
	seg = node_seg_new();
	if (seg)
		return seg;
	pthread_mutex_lock(&fs->dirty_lock);
	fs->dirty_bytes -= charge;
	pthread_cond_broadcast(&fs->dirty_cond);
	pthread_mutex_unlock(&fs->dirty_lock);
	return NULL;
}

static char *node_seg_get(struct fs *fs)
{
	return node_seg_pop(fs, NODE_SEG);
}

char *node_seg_raw(struct fs *fs)
{
	/* A pooled segment's pages are there already: no page faults. */
	return node_seg_pop(fs, 0);
}

void node_seg_raw_put(struct fs *fs, char *seg)
{
	pthread_mutex_lock(&fs->dirty_lock);
	if (fs->nseg_pool < NODE_SEG_POOL) {
		fs->seg_pool[fs->nseg_pool++] = seg;
		seg = NULL;
	}
	pthread_mutex_unlock(&fs->dirty_lock);
	node_seg_free(seg);
}

/* Slices in which a budget wait looks for an interrupt. */
#define NODE_WAIT_SLICE_NS 100000000ll

/* Whether need more bytes would pass the dirty budget (dirty_lock held). */
static int node_budget_short(const struct fs *fs, uint64_t need)
{
	return fs->dirty_bytes > 0 &&
	       fs->dirty_bytes + need > fs->cfg.dirty_limit;
}

int node_budget_fits(struct fs *fs, uint64_t need)
{
	int fits;

	pthread_mutex_lock(&fs->dirty_lock);
	fits = !node_budget_short(fs, need);
	pthread_mutex_unlock(&fs->dirty_lock);
	return fits;
}

int node_budget_wait(struct fs *fs, uint64_t need, int (*stop)(void *),
		     void *arg)
{
	int64_t start = (int64_t)clock_monotonic_ns(), now = start;
	int rc = 0, waited = 0;

	pthread_mutex_lock(&fs->dirty_lock);
	while (node_budget_short(fs, need)) {
		struct timespec ts;

		/* Only the write-behind queue drains on its own. */
		if (atomic_load(&fs->wb_queued_bytes) == 0 ||
		    now - start >= fs->cfg.dirty_wait_ns) {
			rc = -EDQUOT;
			break;
		}
		if (stop && stop(arg)) {
			rc = -EINTR;
			break;
		}
		waited = 1;
		ts = clock_ts(clock_realtime_ns() + NODE_WAIT_SLICE_NS);
		pthread_cond_timedwait(&fs->dirty_cond, &fs->dirty_lock, &ts);
		now = (int64_t)clock_monotonic_ns();
	}
	pthread_mutex_unlock(&fs->dirty_lock);
	if (waited) {
		atomic_fetch_add(&fs->dirty_waits, 1);
		atomic_fetch_add(&fs->dirty_wait_ns, (uint64_t)(now - start));
	}
	if (rc == -EDQUOT)
		atomic_fetch_add(&fs->dirty_refused, 1);
	return rc;
}

int node_segs_alloc(struct fs *fs, uint64_t size, char ***segs, size_t *nsegs)
{
	size_t need = (size_t)((size + NODE_SEG - 1) / NODE_SEG);
	char **v = calloc(need + 1, sizeof(*v));
	size_t i;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < need; i++) {
		v[i] = node_seg_get(fs);
		if (!v[i]) {
			node_segs_release(fs, v, i);
			free(v);
			return -ENOMEM;
		}
	}
	*segs = v;
	*nsegs = need;
	return 0;
}

int node_reserve(struct fs *fs, struct node *n, uint64_t size)
{
	size_t need = (size_t)((size + NODE_SEG - 1) / NODE_SEG);
	char **ns;

	if (need <= n->nsegs)
		return 0;
	ns = realloc(n->segs, need * sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	n->segs = ns;
	while (n->nsegs < need) {
		ns[n->nsegs] = node_seg_get(fs);
		if (!ns[n->nsegs])
			return -ENOMEM;
		n->nsegs++;
	}
	return 0;
}

/* The chunks from the one holding off on no longer have a CRC taken. */
static void node_crcs_forget(struct node *n, uint64_t off)
{
	uint64_t front = (uint64_t)n->seg_ncrcs * KV_CHUNK_SIZE;

	if (off >= front + n->seg_part_len)
		return;
	if (off < front)
		n->seg_ncrcs = (uint32_t)(off / KV_CHUNK_SIZE);
	n->seg_part_crc = 0;
	n->seg_part_len = 0;
}

/*
 * Takes the CRCs of len bytes at src, just written at off, when they
 * continue the bytes summed so far (the engine's one write of a block, or
 * writes in order); any other write only forgets (node_crcs_forget).
 */
static void node_crcs_take(struct node *n, uint64_t off, const char *src,
			   size_t len)
{
	uint64_t front = (uint64_t)n->seg_ncrcs * KV_CHUNK_SIZE;
	uint32_t cap = (uint32_t)(n->nsegs * (NODE_SEG / KV_CHUNK_SIZE));

	if (off != front + n->seg_part_len)
		return;
	if (n->seg_crcs_cap < cap) {
		uint32_t *v = realloc(n->seg_crcs, cap * sizeof(*v));

		if (!v)
			return; /* the save computes them */
		n->seg_crcs = v;
		n->seg_crcs_cap = cap;
	}
	while (len > 0) {
		size_t take = KV_CHUNK_SIZE - n->seg_part_len;

		if (take > len)
			take = len;
		n->seg_part_crc = crc32c(n->seg_part_crc, src, take);
		n->seg_part_len += (uint32_t)take;
		src += take;
		len -= take;
		if (n->seg_part_len == KV_CHUNK_SIZE) {
			n->seg_crcs[n->seg_ncrcs++] = n->seg_part_crc;
			n->seg_part_crc = 0;
			n->seg_part_len = 0;
		}
	}
}

void node_wrote(struct node *n, uint64_t off, const void *buf, size_t len)
{
	node_crcs_forget(n, off);
	node_crcs_take(n, off, buf, len);
}

char **node_seg_whole(struct node *n, uint64_t off, size_t len)
{
	if (off % NODE_SEG != 0 || len > NODE_SEG ||
	    (len < NODE_SEG && off + len < n->attr.size) ||
	    off / NODE_SEG >= n->nsegs)
		return NULL;
	return &n->segs[off / NODE_SEG];
}

void node_copy_in(struct node *n, uint64_t off, const void *buf, size_t len)
{
	const char *p = buf;

	node_wrote(n, off, buf, len);
	while (len > 0) {
		size_t in = (size_t)(off % NODE_SEG);
		size_t take = NODE_SEG - in < len ? NODE_SEG - in : len;

		memcpy(n->segs[off / NODE_SEG] + in, p, take);
		p += take;
		off += take;
		len -= take;
	}
}

void node_zero(struct node *n, uint64_t off, uint64_t len)
{
	node_crcs_forget(n, off);
	while (len > 0) {
		size_t in = (size_t)(off % NODE_SEG);
		size_t take = NODE_SEG - in < len ? NODE_SEG - in : (size_t)len;

		memset(n->segs[off / NODE_SEG] + in, 0, take);
		off += take;
		len -= take;
	}
}

uint32_t node_crcs_known(const uint32_t *have, uint32_t nhave, uint64_t size,
			 uint32_t *crcs)
{
	uint32_t n = (uint32_t)(size / KV_CHUNK_SIZE);

	if (!have)
		return 0;
	if (n > nhave)
		n = nhave;
	memcpy(crcs, have, n * sizeof(*crcs));
	return n;
}

int node_segs_iov(char *const *segs, uint64_t off, uint64_t len,
		  struct iovec *iov)
{
	int cnt = 0;

	while (len > 0) {
		size_t in = (size_t)(off % NODE_SEG);
		size_t take = NODE_SEG - in < len ? NODE_SEG - in : (size_t)len;

		iov[cnt++] = (struct iovec){
			.iov_base = segs[off / NODE_SEG] + in, .iov_len = take};
		off += take;
		len -= take;
	}
	return cnt;
}

int node_iov(struct node *n, uint64_t off, uint64_t len, struct iovec *iov)
{
	return node_segs_iov(n->dirty || n->cached ? n->segs : n->wb->segs, off,
			     len, iov);
}

int node_fill(struct fs *fs, struct node *n)
{
	uint64_t size = n->attr.size;
	size_t got;
	int rc;

	if (n->dirty || n->cached)
		return 0;
	/* An extent file's bytes are never loaded (extent.h). */
	if (kv_ext_large(&n->attr.ext))
		return -EIO;
	rc = node_reserve(fs, n, size);
	if (rc < 0)
		goto out_discard;
	node_crcs_forget(n, 0);
	if (n->wb) {
		/* Queued for saving: the queue's copy is the file. */
		for (size_t i = 0; i < n->nsegs && i < n->wb->nsegs; i++)
			memcpy(n->segs[i], n->wb->segs[i], NODE_SEG);
		n->cached = 1;
		return 0;
	}
	if (size > 0 && !n->crcs_loaded) {
		rc = idx_get_crcs(fs->idx, n->ino, &n->crcs, &n->ncrcs);
		if (rc < 0)
			goto out_discard;
		n->crcs_loaded = 1;
	}
	/* Read into and checked in place, in one request: no staging copy. */
	rc = store_read_segs(fs->store, &n->attr.ext, n->crcs, 0, size, n->segs,
			     NODE_SEG, &got);
	if (rc == 0 && got != size)
		rc = -EIO;
	if (rc < 0)
		goto out_discard;
	n->cached = 1;
	return 0;
out_discard:
	node_discard(fs, n);
	return rc;
}

int node_make_dirty(struct fs *fs, struct node *n)
{
	int rc = node_fill(fs, n);

	if (rc < 0)
		return rc;
	n->cached = 0;
	n->dirty = 1;
	/* Written here: this machine's bytes now, put at their commit. */
	atomic_store(&n->share_pulled, 0);
	return 0;
}

void node_segs_release(struct fs *fs, char **segs, size_t nsegs)
{
	pthread_mutex_lock(&fs->dirty_lock);
	for (size_t i = 0; i < nsegs; i++) {
		if (fs->nseg_pool < NODE_SEG_POOL)
			fs->seg_pool[fs->nseg_pool++] = segs[i];
		else
			node_seg_free(segs[i]);
	}
	fs->dirty_bytes -= nsegs * NODE_SEG;
	if (nsegs)
		pthread_cond_broadcast(&fs->dirty_cond);
	pthread_mutex_unlock(&fs->dirty_lock);
}

void node_adopt(struct fs *fs, struct node *n, char **segs, size_t nsegs)
{
	pthread_mutex_lock(&fs->dirty_lock);
	fs->dirty_bytes += nsegs * NODE_SEG;
	pthread_mutex_unlock(&fs->dirty_lock);
	free(n->segs);
	n->segs = segs;
	n->nsegs = nsegs;
	n->cached = 1;
	node_crcs_forget(n, 0);
}

void node_discard(struct fs *fs, struct node *n)
{
	node_segs_release(fs, n->segs, n->nsegs);
	free(n->segs);
	n->segs = NULL;
	n->nsegs = 0;
	node_crcs_forget(n, 0);
	n->dirty = 0;
	n->cached = 0;
}
