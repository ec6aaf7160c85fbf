/* SPDX-License-Identifier: MIT */
/*
 * Verdict cache and lookup manager (see verdict.h for the contract). This
 * file holds the one state machine; no FUSE, no SQLite, no kernel calls.
 * Batches, the probe worker, the life cycle (vc_new, vc_shutdown, vc_free)
 * and manual mode are in verdict_probe.c; the shared state in verdict_int.h.
 *
 * Layout: a chained hash of verdicts keyed by (parent, name); a hash of
 * parked waiters keyed by their pointer (for vc_cancel); a hash of request
 * ids (vLLM-mirror API) whose refs link them to the verdicts they hold.
 * A verdict sits on at most one list through v->link: vc->pending (PENDING,
 * oldest first), vc->lru (idle, RESOLVED, not quarantined, oldest first),
 * or none (IN_FLIGHT, held RESOLVED, quarantined). Batches copy their keys,
 * so a verdict dropped or re-created while its probe runs is never touched
 * by the probe's result: results are matched by key and generation.
 *
 * Invariants (all under vc->lock):
 * - generations come from one counter and are never reused; a key gets a
 *   new one when its verdict is created and on every vc_bump();
 * - a generation is posted to a probe at most once: only PENDING verdicts
 *   are flushed, and flushing makes them IN_FLIGHT;
 * - a result is applied only to the verdict of its generation, only while
 *   IN_FLIGHT, hence at most once; anything else is counted stale;
 * - a RESOLVED verdict has no parked waiters; a waiter leaves its verdict
 *   and the waiter hash in the same critical section in which it is either
 *   cancelled or put on an answer list, so exactly one reply goes out;
 * - a verdict nobody holds is PENDING never (dropped at once), IN_FLIGHT
 *   (orphan, kept), quarantined (kept) or on the LRU (at most cfg->retain).
 *
 * Threads: callers from any thread; the probe worker (threaded mode) or the
 * vc_poll() caller runs probes and answers. The worker blocks every signal.
 */
#include "verdict_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---- hash tables ---- */

int vc_htab_init(struct vc_htab *t)
{
	t->b = calloc(VC_INITIAL_BUCKETS, sizeof(*t->b));
	if (!t->b)
		return -ENOMEM;
	t->nb = VC_INITIAL_BUCKETS;
	t->n = 0;
	return 0;
}

static void vc_htab_push(struct vc_hnode **head, struct vc_hnode *n)
{
	n->next = *head;
	if (n->next)
		n->next->pprev = &n->next;
	n->pprev = head;
	*head = n;
}

/* Doubles the bucket array; on allocation failure chains just grow. */
static void vc_htab_grow(struct vc_htab *t)
{
	size_t nb = t->nb * 2;
	struct vc_hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		while (t->b[i]) {
			struct vc_hnode *n = t->b[i];

			t->b[i] = n->next;
			vc_htab_push(&b[n->hash & (nb - 1)], n);
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

static void vc_htab_add(struct vc_htab *t, struct vc_hnode *n, uint64_t hash)
{
	if (t->n >= t->nb)
		vc_htab_grow(t);
	n->hash = hash;
	vc_htab_push(&t->b[hash & (t->nb - 1)], n);
	t->n++;
}

void vc_htab_del(struct vc_htab *t, struct vc_hnode *n)
{
	assert(t->n > 0);
	*n->pprev = n->next;
	if (n->next)
		n->next->pprev = n->pprev;
	t->n--;
}

static struct vc_hnode *vc_htab_first(const struct vc_htab *t, uint64_t hash)
{
	return t->b[hash & (t->nb - 1)];
}

static uint64_t vc_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t vc_key_hash(uint64_t parent, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	return vc_mix64(h ^ vc_mix64(parent + 0x9e3779b97f4a7c15ull));
}

static uint64_t vc_ptr_hash(const void *p)
{
	return vc_mix64((uint64_t)(uintptr_t)p);
}

/* Name length, or -ENAMETOOLONG / -EINVAL (empty). */
int vc_name_len(const char *name, size_t *len)
{
	size_t n = strnlen(name, VC_NAME_MAX + 1);

	if (n > VC_NAME_MAX)
		return -ENAMETOOLONG;
	if (n == 0)
		return -EINVAL;
	*len = n;
	return 0;
}

/* ---- verdicts ---- */

static struct vc_verdict *vc_find(struct vc *vc, uint64_t parent,
				  const char *name, size_t len)
{
	uint64_t hash = vc_key_hash(parent, name, len);

	for (struct vc_hnode *n = vc_htab_first(&vc->verdicts, hash); n;
	     n = n->next) {
		struct vc_verdict *v =
			vc_container_of(n, struct vc_verdict, hn);

		if (n->hash == hash && v->parent == parent &&
		    v->name_len == len && memcmp(v->name, name, len) == 0)
			return v;
	}
	return NULL;
}

static struct vc_wait *vc_find_waiter(struct vc *vc, const void *waiter)
{
	uint64_t hash = vc_ptr_hash(waiter);

	for (struct vc_hnode *n = vc_htab_first(&vc->waiters, hash); n;
	     n = n->next) {
		struct vc_wait *w = vc_container_of(n, struct vc_wait, hn);

		if (w->waiter == waiter)
			return w;
	}
	return NULL;
}

static struct vc_req *vc_find_req(struct vc *vc, uint64_t id)
{
	uint64_t hash = vc_mix64(id);

	for (struct vc_hnode *n = vc_htab_first(&vc->reqs, hash); n;
	     n = n->next) {
		struct vc_req *r = vc_container_of(n, struct vc_req, hn);

		if (r->id == id)
			return r;
	}
	return NULL;
}

/* A new verdict in the table, RESOLVED-less: the caller sets its state. */
static struct vc_verdict *vc_verdict_new(struct vc *vc, uint64_t parent,
					 const char *name, size_t len)
{
	struct vc_verdict *v = calloc(1, sizeof(*v) + len + 1);

	if (!v)
		return NULL;
	vc_list_init(&v->link);
	vc_list_init(&v->waiters);
	vc_list_init(&v->refs);
	v->parent = parent;
	v->result = VC_UNKNOWN;
	v->name_len = len;
	memcpy(v->name, name, len);
	vc_htab_add(&vc->verdicts, &v->hn, vc_key_hash(parent, name, len));
	return v;
}

/* Queues v for a probe; the caller wakes the worker, or probes itself. */
static void vc_queue(struct vc *vc, struct vc_verdict *v)
{
	v->gen = ++vc->next_gen;
	v->phase = VC_PENDING;
	v->result = VC_UNKNOWN;
	v->ino = 0;
	v->queued_ns = vc->ops.now_ns(vc->ops.ctx);
	vc_list_add_tail(&vc->pending, &v->link);
	vc->npending++;
}

static void vc_make_pending(struct vc *vc, struct vc_verdict *v)
{
	vc_queue(vc, v);
	pthread_cond_signal(&vc->wake);
}

/* Takes v off the pending list or the LRU, whichever it is on. */
void vc_unlink(struct vc *vc, struct vc_verdict *v)
{
	if (v->phase == VC_PENDING) {
		assert(vc->npending > 0);
		vc->npending--;
	} else if (v->in_lru) {
		assert(vc->nlru > 0);
		vc->nlru--;
		v->in_lru = false;
	}
	vc_list_del(&v->link);
}

static void vc_set_quarantine(struct vc *vc, struct vc_verdict *v, bool on)
{
	if (v->quarantined == on)
		return;
	v->quarantined = on;
	if (on)
		vc->st.nquarantined++;
	else
		vc->st.nquarantined--;
}

/* Removes and frees v; its waiters must have been taken already. */
void vc_drop(struct vc *vc, struct vc_verdict *v)
{
	assert(v->nwaiters == 0 && vc_list_empty(&v->waiters));
	while (!vc_list_empty(&v->refs)) {
		struct vc_ref *ref =
			vc_container_of(v->refs.next, struct vc_ref, vlink);

		vc_list_del(&ref->vlink);
		vc_list_del(&ref->rlink);
		free(ref);
	}
	v->nrefs = 0;
	vc_unlink(vc, v);
	vc_set_quarantine(vc, v, false);
	vc_htab_del(&vc->verdicts, &v->hn);
	free(v);
}

/*
 * Restores the retention rule after v lost a holder or changed phase; v may
 * be freed. A held verdict leaves the LRU; an idle one is dropped, kept
 * (IN_FLIGHT orphan, quarantined) or put on the LRU, trimmed to cfg->retain.
 */
void vc_settle(struct vc *vc, struct vc_verdict *v)
{
	if (v->nwaiters > 0 || v->nrefs > 0) {
		if (v->in_lru)
			vc_unlink(vc, v);
		return;
	}
	switch (v->phase) {
	case VC_PENDING:
		vc_drop(vc, v);
		return;
	case VC_IN_FLIGHT:
		return;
	case VC_RESOLVED:
		break;
	}
	if (v->quarantined) {
		if (v->in_lru)
			vc_unlink(vc, v);
		return;
	}
	if (vc->retain == 0) {
		vc_drop(vc, v);
		return;
	}
	if (v->in_lru) {
		vc_list_del(&v->link);
		vc_list_add_tail(&vc->lru, &v->link);
		return;
	}
	vc_list_add_tail(&vc->lru, &v->link);
	v->in_lru = true;
	vc->nlru++;
	while (vc->nlru > vc->retain) {
		struct vc_verdict *old =
			vc_container_of(vc->lru.next, struct vc_verdict, link);

		assert(old != v);
		vc_drop(vc, old);
	}
}

/* Counts one lookup answered with a verdict. */
static void vc_count_answer(struct vc *vc, int result)
{
	if (result == VC_HIT)
		vc->st.hits++;
	else if (result == VC_MISS)
		vc->st.misses++;
}

/* Moves all of v's waiters to out, with this answer. */
static void vc_take_waiters(struct vc *vc, struct vc_verdict *v, int result,
			    uint64_t ino, uint64_t gen, struct vc_list *out)
{
	while (!vc_list_empty(&v->waiters)) {
		struct vc_wait *w =
			vc_container_of(v->waiters.next, struct vc_wait, link);

		vc_htab_del(&vc->waiters, &w->hn);
		vc_list_del(&w->link);
		w->v = NULL;
		w->result = result;
		w->ino = ino;
		w->gen = gen;
		vc_list_add_tail(out, &w->link);
		vc_count_answer(vc, result);
	}
	v->nwaiters = 0;
}

/* Sends every answer on list and frees the nodes; lock not held. */
void vc_answer_list(struct vc *vc, struct vc_list *list)
{
	while (!vc_list_empty(list)) {
		struct vc_wait *w =
			vc_container_of(list->next, struct vc_wait, link);

		vc_list_del(&w->link);
		vc->ops.answer(vc->ops.ctx, w->waiter, w->result, w->ino,
			       w->gen);
		free(w);
	}
}

/*
 * Applies one probe outcome (found 0/1 with ino, or -errno) for the key's
 * generation gen; waiters to answer go to out. See vc_deliver().
 */
int vc_apply(struct vc *vc, uint64_t parent, const char *name, size_t len,
	     uint64_t gen, int found, uint64_t ino, struct vc_list *out)
{
	struct vc_verdict *v = vc_find(vc, parent, name, len);
	enum vc_outcome res;

	if (!v || v->gen != gen) {
		vc->st.stale_discarded++;
		return -ESTALE;
	}
	if (v->phase != VC_IN_FLIGHT) {
		vc->st.stale_discarded++;
		return -EALREADY;
	}
	if (found < 0) {
		vc_take_waiters(vc, v, found, 0, gen, out);
		vc_drop(vc, v);
		return 0;
	}
	res = found ? VC_HIT : VC_MISS;
	v->phase = VC_RESOLVED;
	v->result = res;
	v->ino = found ? ino : 0;
	v->resolved_ns = vc->ops.now_ns(vc->ops.ctx);
	vc_take_waiters(vc, v, res, v->ino, gen, out);
	vc_settle(vc, v);
	return 0;
}

/* ---- lookups ---- */

/* A RESOLVED verdict older than its kind's time to live (vc_config). */
static bool vc_expired(struct vc *vc, const struct vc_verdict *v)
{
	uint64_t ttl = v->result == VC_HIT ? vc->hit_ttl_ns : vc->miss_ttl_ns;

	return ttl && !v->quarantined &&
	       vc->ops.now_ns(vc->ops.ctx) - v->resolved_ns >= ttl;
}

int vc_lookup(struct vc *vc, uint64_t parent, const char *name, void *waiter,
	      uint64_t *ino, uint64_t *gen)
{
	struct vc_verdict *v;
	struct vc_wait *w;
	struct vc_list out;
	bool self = false, expired = false;
	size_t len;
	int rc;

	assert(waiter);
	rc = vc_name_len(name, &len);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&vc->lock);
	if (vc->shut || vc->stopping) {
		rc = -ESHUTDOWN;
		goto out_unlock;
	}
	assert(!vc_find_waiter(vc, waiter));
	v = vc_find(vc, parent, name, len);
	if (v && v->phase == VC_RESOLVED && vc_expired(vc, v)) {
		vc_unlink(vc, v); /* probed again below, kept in the table */
		expired = true;
	}
	if (v && v->phase == VC_RESOLVED && !expired) {
		rc = (int)v->result;
		*ino = v->ino;
		*gen = v->gen;
		vc_count_answer(vc, rc);
		if (v->in_lru)
			vc_settle(vc, v); /* to the LRU's young end */
		goto out_unlock;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	if (v && !expired) {
		vc->st.coalesced++;
	} else {
		if (!v)
			v = vc_verdict_new(vc, parent, name, len);
		if (!v) {
			free(w);
			rc = -ENOMEM;
			goto out_unlock;
		}
		/* Nothing probing or posted: no batch to wait for or join. */
		self = vc->inline_probe && vc->window_ns == 0 && !vc->probing &&
		       vc_list_empty(&vc->posted);
		if (self)
			vc_queue(vc, v);
		else
			vc_make_pending(vc, v);
	}
	w->waiter = waiter;
	w->v = v;
	vc_htab_add(&vc->waiters, &w->hn, vc_ptr_hash(waiter));
	vc_list_add_tail(&v->waiters, &w->link);
	v->nwaiters++;
	*ino = 0;
	*gen = v->gen;
	rc = VC_PARKED;
	if (self) {
		/* Our key and any others pending, probed on this thread. */
		vc_list_init(&out);
		if (vc_flush_one(vc) == 0)
			vc_run_batch(vc, &out);
		else
			pthread_cond_signal(&vc->wake);
		pthread_mutex_unlock(&vc->lock);
		vc_answer_list(vc, &out);
		return rc;
	}
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return rc;
}

int vc_cancel(struct vc *vc, void *waiter)
{
	struct vc_wait *w;
	struct vc_verdict *v;

	pthread_mutex_lock(&vc->lock);
	w = vc_find_waiter(vc, waiter);
	if (!w) {
		pthread_mutex_unlock(&vc->lock);
		return -ENOENT;
	}
	v = w->v;
	vc_htab_del(&vc->waiters, &w->hn);
	vc_list_del(&w->link);
	assert(v->nwaiters > 0);
	v->nwaiters--;
	vc->st.cancelled++;
	vc_settle(vc, v);
	pthread_mutex_unlock(&vc->lock);
	free(w);
	return 0;
}

int vc_req_lookup(struct vc *vc, uint64_t req, uint64_t parent,
		  const char *name, uint64_t *ino, uint64_t *gen)
{
	struct vc_verdict *v;
	struct vc_req *r;
	struct vc_ref *ref = NULL;
	bool new_r = false;
	size_t len;
	int rc;

	rc = vc_name_len(name, &len);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&vc->lock);
	if (vc->shut || vc->stopping) {
		rc = -ESHUTDOWN;
		goto out_unlock;
	}
	r = vc_find_req(vc, req);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		r->id = req;
		vc_list_init(&r->refs);
		vc_htab_add(&vc->reqs, &r->hn, vc_mix64(req));
		new_r = true;
	}
	v = vc_find(vc, parent, name, len);
	for (struct vc_list *l = v ? v->refs.next : NULL; l && l != &v->refs;
	     l = l->next) {
		struct vc_ref *cand = vc_container_of(l, struct vc_ref, vlink);

		if (cand->r == r) {
			ref = cand;
			break;
		}
	}
	if (!ref) {
		ref = calloc(1, sizeof(*ref));
		if (!ref) {
			rc = -ENOMEM;
			goto out_free_req;
		}
		if (!v) {
			v = vc_verdict_new(vc, parent, name, len);
			if (!v) {
				free(ref);
				rc = -ENOMEM;
				goto out_free_req;
			}
			vc_make_pending(vc, v);
		} else if (v->phase != VC_RESOLVED) {
			vc->st.coalesced++;
		}
		ref->v = v;
		ref->r = r;
		vc_list_add_tail(&v->refs, &ref->vlink);
		vc_list_add_tail(&r->refs, &ref->rlink);
		v->nrefs++;
		vc_settle(vc, v); /* leaves the LRU */
	} else if (v->phase != VC_RESOLVED) {
		vc->st.coalesced++;
	}
	*gen = v->gen;
	*ino = v->ino;
	if (v->phase == VC_RESOLVED) {
		rc = (int)v->result;
		vc_count_answer(vc, rc);
	} else {
		rc = VC_UNKNOWN;
	}
	goto out_unlock;

out_free_req:
	if (new_r) {
		vc_htab_del(&vc->reqs, &r->hn);
		free(r);
	}
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return rc;
}

int vc_req_cleanup(struct vc *vc, uint64_t req)
{
	struct vc_req *r;
	int n = 0;

	pthread_mutex_lock(&vc->lock);
	r = vc_find_req(vc, req);
	if (!r)
		goto out_unlock;
	vc_htab_del(&vc->reqs, &r->hn);
	while (!vc_list_empty(&r->refs)) {
		struct vc_ref *ref =
			vc_container_of(r->refs.next, struct vc_ref, rlink);
		struct vc_verdict *v = ref->v;

		vc_list_del(&ref->rlink);
		vc_list_del(&ref->vlink);
		free(ref);
		assert(v->nrefs > 0);
		v->nrefs--;
		vc_settle(vc, v);
		n++;
	}
	free(r);
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return n;
}

/* ---- namespace changes and operator actions ---- */

uint64_t vc_bump(struct vc *vc, uint64_t parent, const char *name, int exists,
		 uint64_t ino)
{
	enum vc_outcome res = exists ? VC_HIT : VC_MISS;
	struct vc_verdict *v;
	uint64_t gen;
	size_t len;
	int rc;

	rc = vc_name_len(name, &len);
	assert(rc == 0);
	if (rc < 0)
		return 0; /* no such name can exist */
	pthread_mutex_lock(&vc->lock);
	gen = ++vc->next_gen;
	vc->st.bumps++;
	v = vc_find(vc, parent, name, len);
	if (!v) {
		if (vc->retain == 0)
			goto out_unlock;
		v = vc_verdict_new(vc, parent, name, len);
		if (!v)
			goto out_unlock; /* nothing cached, nothing stale */
	} else if (v->phase == VC_PENDING) {
		vc_unlink(vc, v);
	}
	/* An IN_FLIGHT probe's result now carries an old generation. */
	v->gen = gen;
	v->phase = VC_RESOLVED;
	v->result = res;
	v->ino = exists ? ino : 0;
	v->resolved_ns = vc->ops.now_ns(vc->ops.ctx);
	vc_set_quarantine(vc, v, false);
	if (v->nwaiters > 0) {
		vc_take_waiters(vc, v, res, v->ino, gen, &vc->ready);
		pthread_cond_signal(&vc->wake);
	}
	vc_settle(vc, v);
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return gen;
}

int vc_mark_miss(struct vc *vc, uint64_t parent, const char *name, uint64_t gen)
{
	struct vc_verdict *v;
	size_t len;
	int rc = 0;

	if (vc_name_len(name, &len) < 0)
		return 0;
	pthread_mutex_lock(&vc->lock);
	v = vc_find(vc, parent, name, len);
	/* PENDING/IN_FLIGHT belong to a newer probe: the seed crash. */
	if (!v || v->gen != gen || v->phase != VC_RESOLVED || v->quarantined)
		goto out_unlock;
	v->result = VC_MISS;
	v->ino = 0;
	vc_set_quarantine(vc, v, true);
	vc_settle(vc, v); /* leaves the LRU */
	vc->st.marked_misses++;
	rc = 1;
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return rc;
}

int vc_clear(struct vc *vc, uint64_t parent, const char *name)
{
	struct vc_verdict *v;
	size_t len;
	int rc = 0;

	if (vc_name_len(name, &len) < 0)
		return 0;
	pthread_mutex_lock(&vc->lock);
	v = vc_find(vc, parent, name, len);
	if (!v || v->phase != VC_RESOLVED)
		goto out_unlock;
	assert(v->nwaiters == 0);
	if (v->nrefs == 0) {
		vc_drop(vc, v);
		rc = 1;
	} else if (v->quarantined) {
		vc_set_quarantine(vc, v, false);
		rc = 1;
	}
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return rc;
}

/* ---- introspection ---- */

void vc_get_stats(struct vc *vc, struct vc_stats *st)
{
	pthread_mutex_lock(&vc->lock);
	*st = vc->st;
	st->nverdicts = vc->verdicts.n;
	st->npending = vc->npending;
	st->nparked = vc->waiters.n;
	pthread_mutex_unlock(&vc->lock);
}

int vc_query(struct vc *vc, uint64_t parent, const char *name,
	     struct vc_info *info)
{
	struct vc_verdict *v;
	size_t len;
	int rc = -ENOENT;

	if (vc_name_len(name, &len) < 0)
		return -ENOENT;
	pthread_mutex_lock(&vc->lock);
	v = vc_find(vc, parent, name, len);
	if (v) {
		*info = (struct vc_info){
			.phase = v->phase,
			.result = v->result,
			.generation = v->gen,
			.ino = v->ino,
			.quarantined = v->quarantined,
			.nwaiters = v->nwaiters,
			.nrefs = v->nrefs,
		};
		rc = 0;
	}
	pthread_mutex_unlock(&vc->lock);
	return rc;
}
