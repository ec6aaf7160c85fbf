/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's private state, shared by share.c (connection, put
 * queue), share_lookup.c (probes, stubs, pulls) and share_keeper.c (the
 * keeper thread, inode sets, start and stop). Not for other files: the
 * contract is share.h.
 */
#ifndef KVFS_SHARE_INT_H
#define KVFS_SHARE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rtier.h"
#include "share.h"

/* Put threads: puts of different paths run side by side. */
#define SHARE_PUTTERS 2
/* Slots of the lossy caches below (a power of two). */
#define SHARE_RECENT 4096u
/* Names a lookup's listing of a directory takes (one RADOS page). */
#define SHARE_FETCH_BATCH 512u

struct rtier;
struct share_op;

/* The counters of struct share_stats that only grow. */
#define SHARE_COUNTERS(X)                                                      \
	X(puts)                                                                \
	X(put_bytes)                                                           \
	X(put_errors)                                                          \
	X(puts_dropped)                                                        \
	X(put_us)                                                              \
	X(removes)                                                             \
	X(probes)                                                              \
	X(probe_us)                                                            \
	X(remote_hits)                                                         \
	X(remote_misses)                                                       \
	X(pulls)                                                               \
	X(pull_bytes)                                                          \
	X(pull_us)                                                             \
	X(errors)                                                              \
	X(short_dropped)                                                       \
	X(quarantined)                                                         \
	X(remote_unlinks)                                                      \
	X(sweeps)                                                              \
	X(swept)                                                               \
	X(swept_bytes)                                                         \
	X(usage_bytes)

#define SHARE_COUNTER_FIELD(f) atomic_uint_fast64_t f;
struct share_counters {
	SHARE_COUNTERS(SHARE_COUNTER_FIELD)
};
#undef SHARE_COUNTER_FIELD

/* One use of a shared block, for the next batch of last uses. */
struct share_touch {
	uint64_t ino;
	int64_t t; /* ns since the epoch */
};

/* A set of inode numbers (0 is never one): open addressing. */
struct share_set {
	uint64_t *v;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

int set_has(const struct share_set *s, uint64_t ino);
int set_add(struct share_set *s, uint64_t ino);
void set_del(struct share_set *s, uint64_t ino);
void set_free(struct share_set *s);

struct share {
	struct fs *fs;
	/*
	 * The connection: users hold rt_lock shared for the length of a
	 * call (bounded by rados_timeout); the keeper swaps it exclusive.
	 */
	pthread_rwlock_t rt_lock;
	struct rtier *rt;
	atomic_int reachable;
	atomic_int sweeper; /* holds the pool-wide lease */
	atomic_uint_fast64_t capacity;
	char cookie[128];
	char fsid[64];	    /* the cluster's, keeper only */
	int said_down;	    /* keeper only */
	int connected_once; /* keeper only */

	/* The put queue; everything below lock is protected by it. */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* put thread and keeper: work, stop, reach */
	pthread_cond_t idle; /* drainers: an op is done */
	struct share_op *qhead, *qtail;
	size_t nqueued; /* queued plus running */
	int stop;
	/* The path each put thread's op runs on ("" when idle). */
	char running[SHARE_PUTTERS][RTIER_PATH_MAX + 1];
	struct share_set queued; /* inodes with a put queued */

	/* Inodes this daemon holds from, or put to, the shared tier. */
	pthread_mutex_t mark_lock;
	struct share_set shared;     /* protected by mark_lock */
	struct share_touch *touches; /* last uses for the next batch, too */
	size_t ntouches;

	/*
	 * What spares lookups their round trips (share_lookup.c), lossy,
	 * direct-mapped, protected by mark_lock: names RADOS said it lacks;
	 * directories whose names in RADOS this machine knew whole at t (a
	 * whole listing, all made local, or a directory made here while
	 * RADOS lacked its name: any block stored below it would have listed
	 * it), so that a name not here is a miss for as long as a miss is
	 * believed (rados_negative_timeout); directories too big to list.
	 */
	struct {
		uint64_t parent, hash, t;
	} missed[SHARE_RECENT];
	struct {
		uint64_t ino, t;
	} whole[SHARE_RECENT];
	uint64_t big[SHARE_RECENT];
	uint32_t uid, gid; /* owner of what the tier makes: the root's */

	int threads; /* started: put threads, keeper */
	pthread_t putters[SHARE_PUTTERS], keeper;
	struct share_counters st;
};

struct rtier *share_rt_get(struct share *sh);
void share_rt_put(struct share *sh);
void share_fail(struct share *sh, int rc, const char *what);
/* ino is on the shared tier (put, pulled, or found there). */
void share_mark(struct share *sh, uint64_t ino);
int share_marked(struct share *sh, uint64_t ino);
int share_threads_start(struct share *sh, void *(*putter)(void *));
void share_free(struct share *sh);
/* Frees the ops still queued (at stop, the threads gone). */
void share_queue_clear(struct share *sh);
/* Forgets every mark and cached answer (another cluster). */
void share_forget_all(struct share *sh);
/* Directory ino's names in RADOS were all local at t. */
void share_set_whole(struct share *sh, uint64_t ino, uint64_t t);
/*
 * Opens a fresh connection and puts it in (the keeper: first thing, and
 * while unreachable, once share_disconnect closed the lost one).
 */
void share_connect(struct share *sh);
/* Closes the connection once the tier is unreachable (the keeper). */
void share_disconnect(struct share *sh);

#endif
