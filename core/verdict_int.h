/* SPDX-License-Identifier: MIT */
/*
 * The verdict cache's private state, shared by verdict.c (the state machine:
 * verdicts, waiters, requests, lookups, namespace changes) and
 * verdict_probe.c (batches, the probe worker, the cache's life cycle and
 * manual mode). Not for any other file: the contract is verdict.h.
 *
 * Locking: every field of struct vc below its lock is protected by
 * vc->lock, and every function declared here expects it held unless its
 * comment says otherwise.
 */
#ifndef KVFS_VERDICT_INT_H
#define KVFS_VERDICT_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "verdict.h"

#define VC_NAME_MAX NAME_MAX
#define VC_INITIAL_BUCKETS 64u
/* Longest sleep of the worker; it then looks at ops->now_ns again. */
#define VC_MAX_WAIT_NS 1000000000ull

#define vc_container_of(ptr, type, member)                                     \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Doubly linked circular list; an unlinked node points at itself. */
struct vc_list {
	struct vc_list *prev, *next;
};

/* Hash chain node; pprev allows O(1) removal. */
struct vc_hnode {
	struct vc_hnode *next;
	struct vc_hnode **pprev;
	uint64_t hash;
};

struct vc_htab {
	struct vc_hnode **b; /* nb buckets, nb a power of two */
	size_t nb;
	size_t n;
};

struct vc_verdict;

/* A parked FUSE waiter, then an answer owed to it. */
struct vc_wait {
	struct vc_hnode hn;   /* in vc->waiters while parked */
	struct vc_list link;  /* in v->waiters, then on an answer list */
	struct vc_verdict *v; /* while parked */
	void *waiter;
	int result; /* set when taken off the verdict */
	uint64_t ino;
	uint64_t gen;
};

/* Request id (vLLM-mirror API) and the keys it holds. */
struct vc_req {
	struct vc_hnode hn; /* in vc->reqs */
	uint64_t id;
	struct vc_list refs; /* struct vc_ref.rlink */
};

/* One request holding one verdict. */
struct vc_ref {
	struct vc_list vlink; /* in v->refs */
	struct vc_list rlink; /* in r->refs */
	struct vc_verdict *v;
	struct vc_req *r;
};

struct vc_verdict {
	struct vc_hnode hn;	/* in vc->verdicts */
	struct vc_list link;	/* vc->pending, vc->lru, or unlinked */
	struct vc_list waiters; /* struct vc_wait.link */
	struct vc_list refs;	/* struct vc_ref.vlink */
	uint64_t parent;
	uint64_t gen;
	uint64_t ino;	      /* 0 unless result is VC_HIT */
	uint64_t queued_ns;   /* when it became PENDING */
	uint64_t resolved_ns; /* when it became RESOLVED */
	unsigned nwaiters;
	unsigned nrefs;
	enum vc_phase phase;
	enum vc_outcome result; /* VC_UNKNOWN until RESOLVED */
	bool quarantined;
	bool in_lru;
	size_t name_len;
	char name[]; /* NUL-terminated copy */
};

/* Keys handed to one probe() call; owns copies of the names. */
struct vc_batch {
	struct vc_list link; /* vc->posted or vc->spare */
	size_t n;
	uint64_t *parents;
	uint64_t *gens;
	uint64_t *inos;
	int *found;
	const char **names;
	char *namebuf; /* max_batch slots of VC_NAME_MAX + 1 */
};

struct vc {
	/* Set by vc_new() before the worker starts, then read-only: no lock. */
	struct vc_ops ops;
	uint64_t window_ns;
	size_t max_batch;
	size_t retain;
	bool threaded;
	bool inline_probe;
	bool worker_started;
	uint64_t miss_ttl_ns;
	uint64_t hit_ttl_ns;
	pthread_t worker;

	/*
	 * The only lock. Never held across ops->probe or ops->answer;
	 * ops->now_ns is called under it. Everything below is protected by it.
	 */
	pthread_mutex_t lock;
	pthread_cond_t
		wake; /* worker waits for work or stop (CLOCK_MONOTONIC) */
	struct vc_htab verdicts; /* struct vc_verdict.hn */
	struct vc_htab waiters;	 /* struct vc_wait.hn */
	struct vc_htab reqs;	 /* struct vc_req.hn */
	struct vc_list pending;	 /* PENDING verdicts, oldest first */
	size_t npending;
	struct vc_list lru; /* idle RESOLVED verdicts, oldest first */
	size_t nlru;
	struct vc_list ready;  /* struct vc_wait answers owed by vc_bump() */
	struct vc_list posted; /* batches flushed, not yet probed */
	struct vc_list spare;  /* batches to reuse */
	uint64_t next_gen;
	bool probing;  /* a thread is in ops->probe (one at a time) */
	bool stopping; /* vc_shutdown() began: no new probes */
	bool shut;     /* vc_shutdown() answered everyone: no new waiters */
	struct vc_stats st; /* counters; the n* fields are filled on demand */
};

/* ---- lists ---- */

static inline void vc_list_init(struct vc_list *h)
{
	h->prev = h;
	h->next = h;
}

static inline bool vc_list_empty(const struct vc_list *h)
{
	return h->next == h;
}

static inline void vc_list_add_tail(struct vc_list *h, struct vc_list *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void vc_list_del(struct vc_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	vc_list_init(n);
}

/* Moves every node of src to the tail of dst; src ends empty. */
static inline void vc_list_splice_tail(struct vc_list *dst, struct vc_list *src)
{
	if (vc_list_empty(src))
		return;
	src->next->prev = dst->prev;
	dst->prev->next = src->next;
	src->prev->next = dst;
	dst->prev = src->prev;
	vc_list_init(src);
}

/* ---- verdict.c ---- */

int vc_htab_init(struct vc_htab *t);
void vc_htab_del(struct vc_htab *t, struct vc_hnode *n);
/* Name length, or -ENAMETOOLONG / -EINVAL (empty). No lock needed. */
int vc_name_len(const char *name, size_t *len);
/* Takes v off whichever list it is on. */
void vc_unlink(struct vc *vc, struct vc_verdict *v);
/* Frees v, which nobody waits for or holds. */
void vc_drop(struct vc *vc, struct vc_verdict *v);
/* Restores the retention rule for v (see verdict.c); v may be freed. */
void vc_settle(struct vc *vc, struct vc_verdict *v);
/* Sends every answer on list and frees the nodes; lock not held. */
void vc_answer_list(struct vc *vc, struct vc_list *list);
/* Applies one probe outcome to the key's generation gen (see verdict.c). */
int vc_apply(struct vc *vc, uint64_t parent, const char *name, size_t len,
	     uint64_t gen, int found, uint64_t ino, struct vc_list *out);

/* ---- verdict_probe.c ---- */

/* Posts up to max_batch of the oldest PENDING keys as one batch. */
int vc_flush_one(struct vc *vc);
/*
 * Probes the oldest posted batch and applies its results; waiters to
 * answer go to out. Drops the lock around probe().
 */
void vc_run_batch(struct vc *vc, struct vc_list *out);

#endif
