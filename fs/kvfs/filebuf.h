/* SPDX-License-Identifier: MIT */
/*
 * A node's file buffer (filebuf.c): unsaved bytes, or the verified saved
 * bytes of a small file, in NODE_SEG-byte segments. Every function wants
 * n->rw held (exclusive where it says so); none takes fs->nodes_lock.
 * Errors: -ENOMEM, and store_read's and the index's -errno (node_fill).
 */
#ifndef KVFS_FILEBUF_H
#define KVFS_FILEBUF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kvtypes.h"

struct fs;
struct node;

/*
 * Room that belongs to every segment before its first byte and after its
 * last: the session loop reads a request's header into the room before
 * (rx.h), so that a WRITE's bytes land at the segment's start.
 */
#define NODE_SEG_ROOM KV_ALIGN
/*
 * A segment's memory (NODE_SEG bytes, KV_ALIGN-aligned, with its room),
 * counted nowhere, or NULL; freed only with node_seg_free() (NULL: none).
 */
char *node_seg_new(void);
void node_seg_free(char *seg);
/*
 * Loads n's saved bytes into its buffer, checking every chunk's CRC, and
 * marks them cached. On failure (store_read's errors) nothing is kept.
 * n->rw exclusive.
 */
int node_fill(struct fs *fs, struct node *n);
/* Loads n's current bytes into its write buffer. n->rw exclusive. */
int node_make_dirty(struct fs *fs, struct node *n);
/* Grows n's buffer to hold size bytes (undefined). n->rw exclusive. */
int node_reserve(struct fs *fs, struct node *n, uint64_t size);
/*
 * Segments for size bytes that belong to no node yet (*segs, *nsegs;
 * counted against the dirty limit like a node's): for bytes read before
 * the node is locked. Freed with node_segs_release() and free(*segs), or
 * handed to a node. 0 or -ENOMEM.
 */
int node_segs_alloc(struct fs *fs, uint64_t size, char ***segs, size_t *nsegs);
/*
 * Copies len bytes into n's buffer at off (reserved), taking the CRCs of
 * the whole chunks it completes in order (n->seg_crcs). n->rw exclusive.
 */
void node_copy_in(struct node *n, uint64_t off, const void *buf, size_t len);
/*
 * The segment of n's buffer that a write of len bytes at off replaces
 * whole (it starts the segment and runs to the segment's end or past the
 * file's), or NULL: that segment may be swapped for one that holds those
 * bytes at its start (rx_swap of rx.h), and node_wrote() called instead of
 * node_copy_in(). n->rw exclusive, the range reserved.
 */
char **node_seg_whole(struct node *n, uint64_t off, size_t len);
/* node_copy_in()'s CRC bookkeeping, for bytes put in place by a swap. */
void node_wrote(struct node *n, uint64_t off, const void *buf, size_t len);
/* Zeroes [off, off + len) of n's buffer (reserved). n->rw exclusive. */
void node_zero(struct node *n, uint64_t off, uint64_t len);
/*
 * Copies into crcs the CRCs taken (have: nhave of them, or NULL) of the
 * chunks that are whole in a file of size bytes; returns their count, for
 * store_append_iov()'s known.
 */
uint32_t node_crcs_known(const uint32_t *have, uint32_t nhave, uint64_t size,
			 uint32_t *crcs);
/*
 * Points iov at [off, off + len) of n's buffer; returns the count used
 * (at most len / NODE_SEG + 2). n->rw held.
 */
int node_iov(struct node *n, uint64_t off, uint64_t len, struct iovec *iov);
/*
 * A segment (from the idle pool when it has one) that nothing counts
 * against the dirty limit, or NULL: for bytes read before they belong to
 * a node (ra.c). Given back with node_seg_raw_put() or node_adopt().
 */
char *node_seg_raw(struct fs *fs);
void node_seg_raw_put(struct fs *fs, char *seg);
/*
 * Makes nsegs segments of n's checked saved bytes (node_seg_raw()'s) n's
 * cached buffer, counted against the dirty limit from now on. n has no
 * segments. n->rw exclusive.
 */
void node_adopt(struct fs *fs, struct node *n, char **segs, size_t nsegs);
/* Drops n's unsaved bytes, back to the persisted state. n->rw exclusive. */
void node_discard(struct fs *fs, struct node *n);
/* Gives nsegs segments back to the pool and the dirty budget. */
void node_segs_release(struct fs *fs, char **segs, size_t nsegs);
/* node_iov() over a segment array. */
int node_segs_iov(char *const *segs, uint64_t off, uint64_t len,
		  struct iovec *iov);
/*
 * Waits, holding no lock, until need more bytes fit in the dirty budget.
 * It waits only while the write-behind queue holds bytes (it drains on
 * its own) and at most cfg.dirty_wait_ns; otherwise, the budget being held
 * by files still open, -EDQUOT at once. stop(arg) (may be NULL) is asked
 * every 100 ms: non-zero ends the wait with -EINTR.
 */
int node_budget_wait(struct fs *fs, uint64_t need, int (*stop)(void *),
		     void *arg);
/* Whether need more bytes fit in the dirty budget now (no wait). */
int node_budget_fits(struct fs *fs, uint64_t need);

#endif
