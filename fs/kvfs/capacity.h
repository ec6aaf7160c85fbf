/* SPDX-License-Identifier: MIT */
/*
 * Capacity accounting and eviction: the use estimate, the watermarks, the
 * queue of accesses (touches) that orders eviction, and evicting
 * least-recently-used blocks. FUSE-free and clock-injected, so it can be
 * tested on an index and a store alone.
 *
 * - Accesses (opens and stores) are queued in memory (cap_touch, any
 *   thread) with the injected clock's time and written to the index's
 *   last-use times in batches (cap_flush_touches, by the janitor): never a
 *   synchronous write on the hot path.
 * - Use is the data files' physical size (st_blocks, so punched holes do
 *   not count) plus the index, measured by cap_measure() and adjusted
 *   between measurements by what is appended and freed (cap_used_add).
 *   Above the high watermark the janitor evicts least-recently-used blocks
 *   that nobody has open until the estimate is below the low watermark. A
 *   store that would go past the high watermark evicts in place first
 *   (cap_make_room) and fails with -ENOSPC only when nothing can be evicted.
 * - Evicting a name is done by the remove callback (the daemon: an unlink
 *   made by the daemon, the kernel told to forget the name); it says 0 for
 *   a name it skipped (open, busy, or changed meanwhile). It frees the
 *   record and lowers the estimate (cap_used_add) at once, not when the
 *   kernel forgets the inode, unless a handle opened the file meanwhile;
 *   eviction counts only what the estimate really lost as room made.
 *
 * Not here: when to measure or evict (the janitor), the daemon's node table.
 *
 * Errors: cap_make_room returns 0 or -ENOSPC; cap_new -ENOMEM. Index errors
 * while evicting end that eviction early (fewer blocks evicted).
 *
 * Locks: evict_lock serialises evictions; touch_lock (innermost: nothing
 * is taken inside it) protects the touch queue and the waiters' stop flag;
 * the counters are atomics.
 */
#ifndef KVFS_CAPACITY_H
#define KVFS_CAPACITY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"

struct idx;
struct idx_name;
struct store;

/* Accesses queued before the janitor is woken early. */
#define CAP_TOUCH_MAX 4096

struct cap_config {
	const char *datadir; /* where index.db lives (measured with the data) */
	uint64_t high_wm;    /* evict above this many bytes ... */
	uint64_t low_wm;     /* ... down to this many */
	/* The clock for access times: clock_realtime (a test's fake). */
	struct clock_src clock;
	/*
	 * Removes the name e and frees its record unless it is open (lowering
	 * the estimate); 1 when removed, 0 when skipped (busy).
	 */
	int (*remove)(void *ctx, const struct idx_name *e);
	void *ctx;
};

struct cap {
	struct cap_config cfg; /* read-only after cap_new */
	struct idx *idx;
	struct store *store;
	atomic_int_fast64_t used_est; /* physical bytes used, estimated */
	atomic_int_fast64_t reserved; /* ... of which records not written yet */
	atomic_uint_fast64_t ndatafiles;
	atomic_uint_fast64_t evicted; /* names evicted, ever */
	atomic_uint_fast64_t enospc;  /* stores refused */
	pthread_mutex_t evict_lock;   /* one eviction at a time */
	pthread_mutex_t touch_lock;
	pthread_cond_t wake;		   /* the queue is half full, or stop */
	uint64_t touch_ino[CAP_TOUCH_MAX]; /* protected by touch_lock */
	int64_t touch_ns[CAP_TOUCH_MAX];
	unsigned char touch_atime[CAP_TOUCH_MAX]; /* also the visible atime */
	size_t ntouch;
	int stop; /* protected by touch_lock */
};

/* What cap_evict() (kvfsctl evict: fs_evict) did. */
struct fs_evict_result {
	uint64_t used_before; /* use estimate when it started */
	uint64_t used_after;  /* ... when it ended */
	uint64_t blocks;      /* names evicted */
	uint64_t bytes;	      /* their sizes */
};

int cap_new(struct cap **out, struct idx *idx, struct store *st,
	    const struct cap_config *cfg);
void cap_free(struct cap *c);

/* Physical bytes in use (estimate between measurements). */
uint64_t cap_used(struct cap *c);
/*
 * Records counted as used before they are written (write-behind): kept
 * in the estimate across cap_measure(), which cannot see them on disk.
 */
void cap_reserved_add(struct cap *c, int64_t delta);
/* Adds delta (negative: freed) to the use estimate. */
void cap_used_add(struct cap *c, int64_t delta);
/* Measures use: data files, kept-back name records, index.db and its WAL. */
void cap_measure(struct cap *c);
/* Records an access of ino for LRU eviction (queued; any thread). */
void cap_touch(struct cap *c, uint64_t ino);
/* cap_touch() at time t; atime: the visible atime becomes t too. */
void cap_touch_at(struct cap *c, uint64_t ino, int64_t t, int atime);
/* Writes the queued accesses to the index. */
void cap_flush_touches(struct cap *c);
/*
 * Evicts least-recently-used blocks until the use estimate is at most
 * target (as the remove callback lowers it), the way the janitor does and
 * serialised with it. Blocks; call from neither a FUSE handler nor while
 * holding a lock the remove callback takes.
 */
void cap_evict(struct cap *c, uint64_t target, struct fs_evict_result *r);
/*
 * Before storing want bytes more: evicts what it must so they fit under
 * the high watermark (with some slack for the index's growth); -ENOSPC
 * when they cannot (everything left is open).
 */
int cap_make_room(struct cap *c, uint64_t want);
/*
 * Waits up to ms for the touch queue to fill half way (or a stop).
 * Returns 1 once cap_stop_waiters() was called, else 0.
 */
int cap_wait(struct cap *c, unsigned ms);
void cap_stop_waiters(struct cap *c);

/*
 * The daemon's names for the above, on fs->cap (kept for their callers):
 * fs_used, fs_touch, fs_make_room and fs_evict (an operator's eviction).
 */
struct fs;
uint64_t fs_used(struct fs *fs);
void fs_touch(struct fs *fs, uint64_t ino);
int fs_make_room(struct fs *fs, uint64_t bytes);
void fs_evict(struct fs *fs, uint64_t target, struct fs_evict_result *r);
/* The node table's upward calls (struct fs_upcalls) into fs->cap. */
void cap_set_upcalls(struct fs *fs);

#endif
