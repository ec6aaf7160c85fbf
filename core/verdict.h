/* SPDX-License-Identifier: MIT */
/*
 * Lookup manager and verdict cache: answers "does (parent inode, name)
 * exist?" from a cache of verdicts, and batches the keys it does not know
 * into probes that one worker answers from the index. It is the daemon's
 * twin of vLLM's AsyncLookupManager (one state machine: PENDING -> IN_FLIGHT
 * -> RESOLVED, per-key generations), with the seed fix built in: mark_miss
 * touches only a RESOLVED verdict of the same generation.
 *
 * It is not a FUSE or SQLite module: the index is reached through ops->probe,
 * replies go out through ops->answer, time comes from ops->now_ns. It does
 * not talk to the kernel either: after vc_bump(), vc_mark_miss() or
 * vc_clear() the caller invalidates the kernel's dentry itself.
 *
 * Two ways to hold a verdict, one state machine underneath:
 * - waiters (FUSE requests, vc_lookup): parked until the verdict resolves,
 *   answered exactly once through ops->answer, or removed by vc_cancel();
 * - request ids (the vLLM-mirror API, vc_req_lookup): hold the verdict until
 *   vc_req_cleanup(), polling it meanwhile (VC_UNKNOWN until resolved).
 * A verdict nobody holds is dropped unless it is IN_FLIGHT (an orphaned
 * probe, kept so a newer lookup can join it, dropped or cached when its
 * result lands), quarantined (vc_mark_miss), or one of the cfg->retain most
 * recently used RESOLVED verdicts.
 *
 * Threads: every function may be called from any thread, except vc_free()
 * (no call may run concurrently or follow) and the manual-mode drivers
 * vc_flush(), vc_poll() and vc_deliver() (cfg->threaded == 0 only). One
 * mutex inside protects everything and is never held across ops->probe or
 * ops->answer. ops->answer is called only by the probe worker (threaded
 * mode), by vc_poll()/vc_deliver() (manual mode) and by vc_shutdown() /
 * vc_free(); never by vc_lookup(), vc_cancel(), vc_bump() or the others, so
 * callers may hold their own locks around those.
 */
#ifndef KVFS_VERDICT_H
#define KVFS_VERDICT_H

#include <stddef.h>
#include <stdint.h>

struct vc;

/* Keys per probe when vc_config.max_batch is 0. */
#define VC_DEFAULT_MAX_BATCH 256u
/* Idle RESOLVED verdicts kept when vc_new() gets no config. */
#define VC_DEFAULT_RETAIN 65536u

/* Lookup outcomes; VC_MISS and VC_HIT are also the values of an answer. */
enum vc_outcome {
	VC_MISS = 0,	/* the name does not exist */
	VC_HIT = 1,	/* the name exists; *ino is set */
	VC_PARKED = 2,	/* vc_lookup: the waiter is kept; answer() follows */
	VC_UNKNOWN = 3, /* vc_req_lookup: not resolved yet, ask again */
};

enum vc_phase { VC_PENDING, VC_IN_FLIGHT, VC_RESOLVED };

/*
 * Answers a whole batch: for each i, found[i] = 1 and inos[i] set when
 * (parents[i], names[i]) exists, found[i] = 0 otherwise. Returns 0, or
 * -errno, which fails every key of the batch (waiters get the error, the
 * verdicts are dropped, not cached). Called with no vc lock held, by one
 * thread at a time (the worker, or the vc_poll() caller).
 */
typedef int (*vc_probe_fn)(void *ctx, size_t n, const uint64_t *parents,
			   const char *const *names, int *found,
			   uint64_t *inos);
/*
 * Called exactly once per parked waiter, with no vc lock held: result is
 * VC_HIT (ino set), VC_MISS (ino 0) or -errno (-ESHUTDOWN at shutdown);
 * generation is the verdict's, for a later vc_mark_miss(). May call into
 * vc, except vc_shutdown() and vc_free().
 */
typedef void (*vc_answer_fn)(void *ctx, void *waiter, int result, uint64_t ino,
			     uint64_t generation);
/* Monotonic nanoseconds; may be called with the vc lock held. */
typedef uint64_t (*vc_now_fn)(void *ctx);

struct vc_ops {
	vc_probe_fn probe;   /* required */
	vc_answer_fn answer; /* required */
	vc_now_fn now_ns;    /* NULL: CLOCK_MONOTONIC */
	void *ctx;	     /* passed to all three */
};

struct vc_config {
	/*
	 * How long new keys gather before a probe, counted from the oldest
	 * pending key; 0 flushes as soon as the worker is free (keys that
	 * arrive while a probe runs share the next batch).
	 */
	uint64_t window_ns;
	/* Keys per probe; a full batch goes at once. 0: the default. */
	size_t max_batch;
	/*
	 * Idle RESOLVED verdicts kept, least recently used dropped first.
	 * 0: vLLM semantics, a verdict nobody holds is dropped. Quarantined
	 * verdicts are kept whatever this says and are not counted here.
	 */
	size_t retain;
	/* 1: vc_new() starts the probe worker; 0: manual mode (tests). */
	int threaded;
	/*
	 * 1: a vc_lookup() that queues a key while no probe runs or waits
	 * (window_ns 0) probes that batch itself, on the caller's thread,
	 * instead of waking the worker: one thread handoff less on a cold
	 * lookup. Keys arriving meanwhile wait for the worker as usual.
	 */
	int inline_probe;
	/*
	 * How long a RESOLVED miss (miss_ttl_ns) or hit (hit_ttl_ns) is
	 * believed by vc_lookup(), counted from when it resolved; an older
	 * one is probed again, as a new generation. 0: until dropped. A
	 * quarantined miss never expires. (The shared tier: another machine
	 * may store or remove a name at any time.)
	 */
	uint64_t miss_ttl_ns;
	uint64_t hit_ttl_ns;
};

struct vc_stats {
	uint64_t probes;       /* probe() calls (batches) */
	uint64_t batched_keys; /* keys sent to probe() */
	uint64_t coalesced;    /* lookups that joined a PENDING/IN_FLIGHT key */
	uint64_t hits;	       /* lookups answered VC_HIT, at once or later */
	uint64_t misses;       /* lookups answered VC_MISS, at once or later */
	uint64_t marked_misses;	  /* vc_mark_miss() calls that changed one */
	uint64_t stale_discarded; /* results refused: old generation, twice */
	uint64_t cancelled;	  /* waiters removed by vc_cancel() */
	uint64_t probe_errors;	  /* probe() calls that returned -errno */
	uint64_t bumps;		  /* vc_bump() calls */
	size_t nverdicts;	  /* verdicts now held, any phase */
	size_t npending;	  /* of which PENDING */
	size_t nquarantined;	  /* of which quarantined misses */
	size_t nparked;		  /* waiters now parked */
};

struct vc_info {
	enum vc_phase phase;
	enum vc_outcome result; /* VC_HIT, VC_MISS, or VC_UNKNOWN */
	uint64_t generation;
	uint64_t ino;	   /* 0 unless result is VC_HIT */
	int quarantined;   /* a miss kept after a failed read */
	unsigned nwaiters; /* parked FUSE waiters */
	unsigned nrefs;	   /* request ids holding it (vLLM-mirror API) */
};

/*
 * Creates a verdict cache. ops is copied; cfg may be NULL (threaded, window
 * 0, default batch, VC_DEFAULT_RETAIN). In threaded mode the worker thread
 * is started with every signal blocked. Returns 0 or -errno (-ENOMEM, or a
 * pthread error); *out is freed with vc_free().
 */
int vc_new(struct vc **out, const struct vc_ops *ops,
	   const struct vc_config *cfg);

/*
 * Stops the worker (after the probe it is running, whose waiters are
 * answered with its result), then answers every waiter still parked with
 * -ESHUTDOWN. Later lookups return -ESHUTDOWN. May block for one probe.
 * Idempotent; a second caller returns at once.
 */
void vc_shutdown(struct vc *vc);

/* vc_shutdown(), then frees everything. Accepts NULL. */
void vc_free(struct vc *vc);

/*
 * FUSE LOOKUP of name (NUL-terminated, copied) in directory parent.
 * Returns VC_HIT (*ino, *gen set) or VC_MISS (*ino = 0, *gen set) from a
 * RESOLVED verdict, waiter not kept; or VC_PARKED: waiter is kept and
 * answer() is called for it exactly once, unless vc_cancel() returns 0 for
 * it first. On VC_PARKED answer() may already be running on another
 * thread, or have run on this one (inline_probe): the caller must not touch
 * waiter again, and should arm its interrupt hook before calling. -ENOMEM, -ENAMETOOLONG, -EINVAL (empty
 * name) and -ESHUTDOWN change nothing; the caller replies the error.
 * waiter must not be parked already.
 */
int vc_lookup(struct vc *vc, uint64_t parent, const char *name, void *waiter,
	      uint64_t *ino, uint64_t *gen);

/*
 * Removes a parked waiter (FUSE INTERRUPT). Returns 0 if it was still
 * parked: answer() will not be called for it, the caller replies itself.
 * Returns -ENOENT if it was answered or is being answered (then answer()
 * runs or ran, and the caller must not reply). A probe it was waiting for
 * is kept, for others to join.
 */
int vc_cancel(struct vc *vc, void *waiter);

/*
 * Records a namespace change made by the daemon (create, rename, unlink,
 * eviction, dropping a short block): name now exists as ino, or not
 * (exists == 0). The key gets a new generation and becomes RESOLVED with
 * this truth; an in-flight probe's result for the old generation is
 * discarded when it lands, and its waiters are answered with the new truth
 * (by the worker, not by this call). Clears a quarantine. Returns the new
 * generation. Never fails: with no verdict for the key, one is created only
 * if cfg->retain > 0 and memory allows.
 */
uint64_t vc_bump(struct vc *vc, uint64_t parent, const char *name, int exists,
		 uint64_t ino);

/*
 * After a failed, not provably short, read of what a lookup of generation
 * gen found: turns a RESOLVED verdict of that same generation into a
 * quarantined miss, kept until vc_bump() or vc_clear(). A PENDING or
 * IN_FLIGHT verdict, another generation, or no verdict: no-op. Returns 1 if
 * it changed the verdict, 0 if not.
 */
int vc_mark_miss(struct vc *vc, uint64_t parent, const char *name,
		 uint64_t gen);

/*
 * Operator: forgets a RESOLVED verdict (quarantined or not), so the next
 * lookup probes the index again. A verdict still held by request ids only
 * loses its quarantine. Returns 1 if something changed, 0 if not.
 */
int vc_clear(struct vc *vc, uint64_t parent, const char *name);

/*
 * vLLM-mirror API: lookup(key, req_id). Adds request req as a holder of the
 * key's verdict (once), creating a PENDING one if there is none. Returns
 * VC_HIT (*ino set), VC_MISS or VC_UNKNOWN (probe queued or in flight: ask
 * again later); *gen is set in all three cases. -ENOMEM, -ENAMETOOLONG,
 * -EINVAL, -ESHUTDOWN change nothing.
 */
int vc_req_lookup(struct vc *vc, uint64_t req, uint64_t parent,
		  const char *name, uint64_t *ino, uint64_t *gen);

/*
 * vLLM-mirror API: cleanup(req_id). Releases every key req holds; a verdict
 * left with no holder is dropped unless IN_FLIGHT, quarantined or retained.
 * Returns the number of keys released (0 for an unknown req).
 */
int vc_req_cleanup(struct vc *vc, uint64_t req);

/*
 * Manual mode only. Posts every PENDING key as IN_FLIGHT batches of at most
 * max_batch keys, ignoring the window (vLLM's flush at the end of a step).
 * Returns the number of batches posted (0: nothing to post), or -ENOMEM
 * (keys not posted stay PENDING).
 */
int vc_flush(struct vc *vc);

/*
 * Manual mode only: one round of the worker, without blocking. Answers
 * waiters that vc_bump() resolved; if no batch is posted and the window of
 * the oldest PENDING key has closed (ops->now_ns) or a batch is full, posts
 * one; then probes the oldest posted batch, applies its results and answers
 * its waiters. Returns 1 if it did anything, 0 if there was nothing to do.
 */
int vc_poll(struct vc *vc);

/*
 * Manual mode only: applies one probe result as the worker does (found 1
 * with ino, 0 without, or -errno) and answers the key's waiters. Returns 0
 * if applied, -ESTALE if the key has no verdict of generation gen, or
 * -EALREADY if that generation is not IN_FLIGHT (already decided, or not
 * probed yet); refusals are counted in stale_discarded.
 */
int vc_deliver(struct vc *vc, uint64_t parent, const char *name, uint64_t gen,
	       int found, uint64_t ino);

/* Copies the counters. */
void vc_get_stats(struct vc *vc, struct vc_stats *st);

/* Describes the key's verdict. Returns 0, or -ENOENT if there is none. */
int vc_query(struct vc *vc, uint64_t parent, const char *name,
	     struct vc_info *info);

#endif
