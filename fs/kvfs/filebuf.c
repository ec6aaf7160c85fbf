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

#include "filebuf.h"
#include "fs.h"

/*
 * A segment for n's buffer, counted against the dirty limit. A file that
 * holds no unsaved bytes yet waits while the budget is spent; one already
 * being written may always grow (up to max_file_size), so writers never
 * wait on each other in a cycle.
 */
static char *node_seg_get(struct fs *fs, struct node *n)
{
	char *seg = NULL;
	void *p;

	pthread_mutex_lock(&fs->dirty_lock);
	while (n->nsegs == 0 && fs->dirty_bytes > 0 &&
	       fs->dirty_bytes + NODE_SEG > fs->cfg.dirty_limit)
		pthread_cond_wait(&fs->dirty_cond, &fs->dirty_lock);
	if (fs->nseg_pool > 0)
		seg = fs->seg_pool[--fs->nseg_pool];
	fs->dirty_bytes += NODE_SEG;
	pthread_mutex_unlock(&fs->dirty_lock);
	if (seg)
		return seg;
	if (posix_memalign(&p, KV_ALIGN, NODE_SEG) == 0)
		return p;
	pthread_mutex_lock(&fs->dirty_lock);
	fs->dirty_bytes -= NODE_SEG;
	pthread_cond_broadcast(&fs->dirty_cond);
	pthread_mutex_unlock(&fs->dirty_lock);
	return NULL;
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
		ns[n->nsegs] = node_seg_get(fs, n);
		if (!ns[n->nsegs])
			return -ENOMEM;
		n->nsegs++;
	}
	return 0;
}

void node_copy_in(struct node *n, uint64_t off, const void *buf, size_t len)
{
	const char *p = buf;

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
	while (len > 0) {
		size_t in = (size_t)(off % NODE_SEG);
		size_t take = NODE_SEG - in < len ? NODE_SEG - in : (size_t)len;

		memset(n->segs[off / NODE_SEG] + in, 0, take);
		off += take;
		len -= take;
	}
}

int node_iov(struct node *n, uint64_t off, uint64_t len, struct iovec *iov)
{
	int cnt = 0;

	while (len > 0) {
		size_t in = (size_t)(off % NODE_SEG);
		size_t take = NODE_SEG - in < len ? NODE_SEG - in : (size_t)len;

		iov[cnt++] =
			(struct iovec){.iov_base = n->segs[off / NODE_SEG] + in,
				       .iov_len = take};
		off += take;
		len -= take;
	}
	return cnt;
}

int node_fill(struct fs *fs, struct node *n)
{
	uint64_t off = 0, size = n->attr.size;
	int rc;

	if (n->dirty || n->cached)
		return 0;
	rc = node_reserve(fs, n, size);
	if (rc < 0)
		goto out_discard;
	if (size > 0 && !n->crcs_loaded) {
		rc = idx_get_crcs(fs->idx, n->ino, &n->crcs, &n->ncrcs);
		if (rc < 0)
			goto out_discard;
		n->crcs_loaded = 1;
	}
	while (off < size) {
		uint64_t piece = NODE_SEG - off % NODE_SEG;
		const void *data;
		size_t got;

		if (piece > size - off)
			piece = size - off;
		rc = store_read(fs->store, &n->attr.ext, n->crcs, off, piece,
				&data, &got);
		if (rc == 0 && got == 0)
			rc = -EIO;
		if (rc < 0)
			goto out_discard;
		node_copy_in(n, off, data, got);
		off += got;
	}
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
	return 0;
}

void node_discard(struct fs *fs, struct node *n)
{
	size_t freed = 0;

	pthread_mutex_lock(&fs->dirty_lock);
	while (n->nsegs > 0) {
		char *seg = n->segs[--n->nsegs];

		if (fs->nseg_pool < NODE_SEG_POOL)
			fs->seg_pool[fs->nseg_pool++] = seg;
		else
			free(seg);
		freed++;
	}
	fs->dirty_bytes -= freed * NODE_SEG;
	if (freed)
		pthread_cond_broadcast(&fs->dirty_cond);
	pthread_mutex_unlock(&fs->dirty_lock);
	free(n->segs);
	n->segs = NULL;
	n->dirty = 0;
	n->cached = 0;
}
