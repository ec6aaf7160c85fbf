/* SPDX-License-Identifier: MIT */
/*
 * The verdict cache's probing side and life cycle (see verdict.h for the
 * contract, verdict_int.h for the state): batches of PENDING keys handed
 * to ops->probe, the probe worker thread (threaded mode) or vc_poll() and
 * vc_flush() (manual mode), and vc_new(), vc_shutdown(), vc_free(). The
 * state machine the results feed is in verdict.c.
 *
 * Threads: the worker blocks every signal and holds vc->lock except around
 * ops->probe and ops->answer; time comes from ops->now_ns (default: the
 * monotonic clock), and the worker sleeps at most VC_MAX_WAIT_NS at once.
 */
#include "verdict_int.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"

/* ---- batches ---- */

static void vc_batch_free(struct vc_batch *b)
{
	if (!b)
		return;
	free(b->parents);
	free(b->gens);
	free(b->inos);
	free(b->found);
	free(b->names);
	free(b->namebuf);
	free(b);
}

static struct vc_batch *vc_batch_new(size_t cap)
{
	struct vc_batch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	vc_list_init(&b->link);
	b->parents = calloc(cap, sizeof(*b->parents));
	b->gens = calloc(cap, sizeof(*b->gens));
	b->inos = calloc(cap, sizeof(*b->inos));
	b->found = calloc(cap, sizeof(*b->found));
	b->names = calloc(cap, sizeof(*b->names));
	b->namebuf = malloc(cap * (VC_NAME_MAX + 1));
	if (!b->parents || !b->gens || !b->inos || !b->found || !b->names ||
	    !b->namebuf) {
		vc_batch_free(b);
		return NULL;
	}
	return b;
}

/* Posts up to max_batch of the oldest PENDING keys as one batch. */
int vc_flush_one(struct vc *vc)
{
	struct vc_batch *b;

	assert(vc->npending > 0);
	if (!vc_list_empty(&vc->spare)) {
		b = vc_container_of(vc->spare.next, struct vc_batch, link);
		vc_list_del(&b->link);
	} else {
		b = vc_batch_new(vc->max_batch);
		if (!b)
			return -ENOMEM;
	}
	b->n = 0;
	while (b->n < vc->max_batch && !vc_list_empty(&vc->pending)) {
		struct vc_verdict *v = vc_container_of(vc->pending.next,
						       struct vc_verdict, link);
		char *slot = b->namebuf + b->n * (VC_NAME_MAX + 1);

		assert(v->phase == VC_PENDING);
		vc_unlink(vc, v);
		v->phase = VC_IN_FLIGHT;
		memcpy(slot, v->name, v->name_len + 1);
		b->parents[b->n] = v->parent;
		b->names[b->n] = slot;
		b->gens[b->n] = v->gen;
		b->found[b->n] = 0;
		b->inos[b->n] = 0;
		b->n++;
	}
	vc_list_add_tail(&vc->posted, &b->link);
	return 0;
}

/*
 * Probes the oldest posted batch and applies its results; waiters to answer
 * go to out. Drops the lock around probe().
 */
void vc_run_batch(struct vc *vc, struct vc_list *out)
{
	struct vc_batch *b =
		vc_container_of(vc->posted.next, struct vc_batch, link);
	int rc;

	vc_list_del(&b->link);
	assert(!vc->probing);
	vc->probing = true;
	pthread_mutex_unlock(&vc->lock);
	rc = vc->ops.probe(vc->ops.ctx, b->n, b->parents,
			   (const char *const *)b->names, b->found, b->inos);
	pthread_mutex_lock(&vc->lock);
	vc->probing = false;
	/* Keys that came meanwhile: the worker may have skipped them. */
	if (vc->npending > 0 || !vc_list_empty(&vc->posted))
		pthread_cond_signal(&vc->wake);
	assert(rc <= 0);
	vc->st.probes++;
	vc->st.batched_keys += b->n;
	if (rc < 0) {
		vc->st.probe_errors++;
		log_warn("probe of %zu keys failed: %s", b->n, strerror(-rc));
	}
	/*
	 * A refusal here means vc_bump() gave the key a new generation while
	 * the probe ran (or a test delivered this generation's result first):
	 * the result is stale and only counted.
	 */
	for (size_t i = 0; i < b->n; i++) {
		int found = rc < 0 ? rc : (b->found[i] != 0);

		(void)vc_apply(vc, b->parents[i], b->names[i],
			       strlen(b->names[i]), b->gens[i], found,
			       b->inos[i], out);
	}
	vc_list_add_tail(&vc->spare, &b->link);
}

static uint64_t vc_real_now(void *ctx)
{
	(void)ctx;
	return clock_monotonic_ns();
}

/*
 * Whether a batch should be posted now; if not and keys are pending, *wait
 * is how long until the oldest one's window closes.
 */
static bool vc_due(struct vc *vc, uint64_t *wait)
{
	struct vc_verdict *old;
	uint64_t now, end;

	*wait = 0;
	if (vc->npending == 0)
		return false;
	if (vc->window_ns == 0 || vc->npending >= vc->max_batch)
		return true;
	old = vc_container_of(vc->pending.next, struct vc_verdict, link);
	now = vc->ops.now_ns(vc->ops.ctx);
	end = old->queued_ns + vc->window_ns;
	if (now >= end)
		return true;
	*wait = end - now;
	return false;
}

/*
 * One round of the worker, lock held (dropped around probe and answers).
 * Returns 1 if it did anything; else *wait as in vc_due().
 */
static int vc_step(struct vc *vc, uint64_t *wait)
{
	struct vc_list out;
	int did = 0;

	*wait = 0;
	vc_list_init(&out);
	if (!vc_list_empty(&vc->ready)) {
		vc_list_splice_tail(&out, &vc->ready);
		pthread_mutex_unlock(&vc->lock);
		vc_answer_list(vc, &out);
		pthread_mutex_lock(&vc->lock);
		did = 1;
	}
	/* An inline probe runs: its thread wakes us when it is done. */
	if (vc->stopping || vc->probing)
		return did;
	if (vc_list_empty(&vc->posted) && vc_due(vc, wait)) {
		int rc = vc_flush_one(vc);

		if (rc < 0)
			log_warn("cannot post %zu keys: %s", vc->npending,
				 strerror(-rc));
	}
	if (vc_list_empty(&vc->posted))
		return did;
	vc_run_batch(vc, &out);
	pthread_mutex_unlock(&vc->lock);
	vc_answer_list(vc, &out);
	pthread_mutex_lock(&vc->lock);
	return 1;
}

static void *vc_worker(void *arg)
{
	struct vc *vc = arg;
	uint64_t wait;

	pthread_mutex_lock(&vc->lock);
	while (!vc->stopping) {
		if (vc_step(vc, &wait))
			continue;
		if (vc->stopping)
			break;
		if (wait == 0) {
			pthread_cond_wait(&vc->wake, &vc->lock);
		} else {
			struct timespec ts;

			if (wait > VC_MAX_WAIT_NS)
				wait = VC_MAX_WAIT_NS;
			/* wake waits on CLOCK_MONOTONIC (vc_new). */
			ts = clock_ts(clock_monotonic_ns() + wait);
			pthread_cond_timedwait(&vc->wake, &vc->lock, &ts);
		}
	}
	pthread_mutex_unlock(&vc->lock);
	return NULL;
}

/* ---- lifecycle ---- */

static int vc_start_worker(struct vc *vc)
{
	sigset_t all, old;
	int rc;

	/* The thread inherits the mask: libfuse's handlers run elsewhere. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&vc->worker, NULL, vc_worker, vc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	pthread_setname_np(vc->worker, "kvfs-probe");
	vc->worker_started = true;
	return 0;
}

int vc_new(struct vc **out, const struct vc_ops *ops,
	   const struct vc_config *cfg)
{
	struct vc *vc;
	struct vc_batch *b;
	pthread_condattr_t ca;
	int rc;

	assert(ops && ops->probe && ops->answer);
	*out = NULL;
	vc = calloc(1, sizeof(*vc));
	if (!vc)
		return -ENOMEM;
	vc->ops = *ops;
	if (!vc->ops.now_ns)
		vc->ops.now_ns = vc_real_now;
	if (cfg) {
		vc->window_ns = cfg->window_ns;
		vc->max_batch = cfg->max_batch;
		vc->retain = cfg->retain;
		vc->threaded = cfg->threaded != 0;
		vc->inline_probe = cfg->inline_probe != 0;
		vc->miss_ttl_ns = cfg->miss_ttl_ns;
		vc->hit_ttl_ns = cfg->hit_ttl_ns;
	} else {
		vc->retain = VC_DEFAULT_RETAIN;
		vc->threaded = true;
	}
	if (vc->max_batch == 0)
		vc->max_batch = VC_DEFAULT_MAX_BATCH;
	vc_list_init(&vc->pending);
	vc_list_init(&vc->lru);
	vc_list_init(&vc->ready);
	vc_list_init(&vc->posted);
	vc_list_init(&vc->spare);

	rc = -ENOMEM;
	if (vc_htab_init(&vc->verdicts) < 0)
		goto out_free;
	if (vc_htab_init(&vc->waiters) < 0)
		goto out_free_verdicts;
	if (vc_htab_init(&vc->reqs) < 0)
		goto out_free_waiters;
	/* The worker's batch, so that it never allocates. */
	b = vc_batch_new(vc->max_batch);
	if (!b)
		goto out_free_reqs;
	vc_list_add_tail(&vc->spare, &b->link);

	rc = -pthread_mutex_init(&vc->lock, NULL);
	if (rc < 0)
		goto out_free_batch;
	rc = -pthread_condattr_init(&ca);
	if (rc < 0)
		goto out_destroy_lock;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = -pthread_cond_init(&vc->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (rc < 0)
		goto out_destroy_lock;
	if (vc->threaded) {
		rc = vc_start_worker(vc);
		if (rc < 0)
			goto out_destroy_cond;
	}
	*out = vc;
	return 0;

out_destroy_cond:
	pthread_cond_destroy(&vc->wake);
out_destroy_lock:
	pthread_mutex_destroy(&vc->lock);
out_free_batch:
	vc_batch_free(b);
out_free_reqs:
	free(vc->reqs.b);
out_free_waiters:
	free(vc->waiters.b);
out_free_verdicts:
	free(vc->verdicts.b);
out_free:
	free(vc);
	return rc;
}

void vc_shutdown(struct vc *vc)
{
	struct vc_list out;

	pthread_mutex_lock(&vc->lock);
	if (vc->stopping) {
		pthread_mutex_unlock(&vc->lock);
		return;
	}
	vc->stopping = true;
	pthread_cond_broadcast(&vc->wake);
	pthread_mutex_unlock(&vc->lock);

	if (vc->worker_started)
		pthread_join(vc->worker, NULL);

	vc_list_init(&out);
	pthread_mutex_lock(&vc->lock);
	vc->shut = true;
	/* Answers vc_bump() already decided go out as decided. */
	vc_list_splice_tail(&out, &vc->ready);
	for (size_t i = 0; i < vc->waiters.nb; i++) {
		while (vc->waiters.b[i]) {
			struct vc_wait *w = vc_container_of(vc->waiters.b[i],
							    struct vc_wait, hn);
			struct vc_verdict *v = w->v;

			vc_htab_del(&vc->waiters, &w->hn);
			vc_list_del(&w->link);
			v->nwaiters--;
			w->v = NULL;
			w->result = -ESHUTDOWN;
			w->ino = 0;
			w->gen = v->gen;
			vc_list_add_tail(&out, &w->link);
			vc_settle(vc, v);
		}
	}
	pthread_mutex_unlock(&vc->lock);
	vc_answer_list(vc, &out);
}

void vc_free(struct vc *vc)
{
	if (!vc)
		return;
	vc_shutdown(vc);
	/* No other thread may use vc now: no lock needed. */
	for (size_t i = 0; i < vc->verdicts.nb; i++) {
		while (vc->verdicts.b[i]) {
			struct vc_verdict *v = vc_container_of(
				vc->verdicts.b[i], struct vc_verdict, hn);

			vc_drop(vc, v);
		}
	}
	for (size_t i = 0; i < vc->reqs.nb; i++) {
		while (vc->reqs.b[i]) {
			struct vc_req *r = vc_container_of(vc->reqs.b[i],
							   struct vc_req, hn);

			assert(vc_list_empty(&r->refs));
			vc_htab_del(&vc->reqs, &r->hn);
			free(r);
		}
	}
	vc_list_splice_tail(&vc->spare, &vc->posted);
	while (!vc_list_empty(&vc->spare)) {
		struct vc_batch *b =
			vc_container_of(vc->spare.next, struct vc_batch, link);

		vc_list_del(&b->link);
		vc_batch_free(b);
	}
	assert(vc->waiters.n == 0 && vc_list_empty(&vc->ready));
	free(vc->verdicts.b);
	free(vc->waiters.b);
	free(vc->reqs.b);
	pthread_cond_destroy(&vc->wake);
	pthread_mutex_destroy(&vc->lock);
	free(vc);
}

/* ---- manual mode ---- */

int vc_flush(struct vc *vc)
{
	int n = 0;
	int rc = 0;

	assert(!vc->threaded);
	pthread_mutex_lock(&vc->lock);
	while (vc->npending > 0 && !vc->stopping) {
		rc = vc_flush_one(vc);
		if (rc < 0)
			break;
		n++;
	}
	pthread_mutex_unlock(&vc->lock);
	return rc < 0 ? rc : n;
}

int vc_poll(struct vc *vc)
{
	uint64_t wait;
	int did;

	assert(!vc->threaded);
	pthread_mutex_lock(&vc->lock);
	did = vc_step(vc, &wait);
	pthread_mutex_unlock(&vc->lock);
	return did;
}

int vc_deliver(struct vc *vc, uint64_t parent, const char *name, uint64_t gen,
	       int found, uint64_t ino)
{
	struct vc_list out;
	size_t len;
	int rc;

	assert(!vc->threaded);
	rc = vc_name_len(name, &len);
	if (rc < 0)
		return rc;
	vc_list_init(&out);
	pthread_mutex_lock(&vc->lock);
	rc = vc_apply(vc, parent, name, len, gen, found < 0 ? found : !!found,
		      ino, &out);
	pthread_mutex_unlock(&vc->lock);
	vc_answer_list(vc, &out);
	return rc;
}
