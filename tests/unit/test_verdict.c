/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for core/verdict.c: the scenarios of vLLM's
 * test_async_lookup.py through the request-id API, the generation cases
 * the contract adds (orphans, recreated states, the seed crash), the FUSE
 * waiter API (park, coalesce, cancel, bump, quarantine, LRU, window), and
 * threaded-mode races with a real worker and a probe the test holds shut.
 * Manual-mode tests use a fake clock and drive vc_flush()/vc_poll() by
 * hand: no sleeps.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "fake_clock.h"
#include "log.h"
#include "verdict.h"

#define TV_PARENT 1u
#define TV_MAX_PRESENT 16
#define TV_MAX_SEEN 16
#define TV_WAIT_S 20

/* One parked FUSE request, as the fake answer() sees it. */
struct tv_waiter {
	atomic_int nreplies; /* answer() calls plus successful cancels */
	int result;
	uint64_t ino;
	uint64_t gen;
};

struct tv_present {
	uint64_t parent;
	const char *name;
	uint64_t ino;
};

struct tv_fx {
	struct vc *vc;
	struct fake_clock clk;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* The index as the fake probe sees it; set before lookups. */
	struct tv_present present[TV_MAX_PRESENT];
	int npresent;
	/* Fake probe state: protected by mu. */
	int fail_rc; /* returned by probe() when < 0 */
	bool gated;  /* probe() blocks until gate_open */
	bool gate_open;
	int calls;    /* probe() calls entered */
	int returned; /* probe() calls past the gate */
	size_t last_n;
	uint64_t seen_parent[TV_MAX_SEEN];
	char seen[TV_MAX_SEEN][256]; /* names of the last batch */
	/* Fake answer state: protected by mu. */
	int nanswered;
	bool reenter; /* answer() calls back into vc */
};

static uint64_t tv_now(void *ctx)
{
	struct tv_fx *fx = ctx;

	return fake_clock_now(&fx->clk);
}

static int tv_probe(void *ctx, size_t n, const uint64_t *parents,
		    const char *const *names, int *found, uint64_t *inos)
{
	struct tv_fx *fx = ctx;
	int rc;

	pthread_mutex_lock(&fx->mu);
	fx->calls++;
	fx->last_n = n;
	for (size_t i = 0; i < n && i < TV_MAX_SEEN; i++) {
		fx->seen_parent[i] = parents[i];
		snprintf(fx->seen[i], sizeof(fx->seen[i]), "%s", names[i]);
	}
	pthread_cond_broadcast(&fx->cv);
	while (fx->gated && !fx->gate_open)
		pthread_cond_wait(&fx->cv, &fx->mu);
	rc = fx->fail_rc;
	fx->returned++;
	pthread_cond_broadcast(&fx->cv);
	pthread_mutex_unlock(&fx->mu);
	for (size_t i = 0; i < n; i++) {
		found[i] = 0;
		for (int j = 0; j < fx->npresent; j++) {
			if (fx->present[j].parent == parents[i] &&
			    strcmp(fx->present[j].name, names[i]) == 0) {
				found[i] = 1;
				inos[i] = fx->present[j].ino;
			}
		}
	}
	return rc;
}

static void tv_answer(void *ctx, void *waiter, int result, uint64_t ino,
		      uint64_t gen)
{
	struct tv_fx *fx = ctx;
	struct tv_waiter *w = waiter;

	if (fx->reenter) {
		struct vc_stats st;
		struct vc_info info;

		/* Would deadlock if the vc lock were held here. */
		vc_get_stats(fx->vc, &st);
		(void)vc_query(fx->vc, TV_PARENT, "a", &info);
	}
	w->result = result;
	w->ino = ino;
	w->gen = gen;
	atomic_fetch_add(&w->nreplies, 1);
	pthread_mutex_lock(&fx->mu);
	fx->nanswered++;
	pthread_cond_broadcast(&fx->cv);
	pthread_mutex_unlock(&fx->mu);
}

static struct tv_fx *tv_fx_new(void)
{
	struct tv_fx *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	pthread_mutex_init(&fx->mu, NULL);
	pthread_cond_init(&fx->cv, NULL);
	return fx;
}

static void tv_fx_start(struct tv_fx *fx, const struct vc_config *cfg)
{
	struct vc_ops ops = {
		.probe = tv_probe,
		.answer = tv_answer,
		.now_ns = tv_now,
		.ctx = fx,
	};

	assert_int_equal(vc_new(&fx->vc, &ops, cfg), 0);
}

/* Manual mode, retain 0: vLLM's exact semantics. */
static int setup_mirror(void **state)
{
	struct tv_fx *fx = tv_fx_new();
	struct vc_config cfg = {.retain = 0, .threaded = 0};

	tv_fx_start(fx, &cfg);
	*state = fx;
	return 0;
}

/* Manual mode, a small LRU: the FUSE cache. */
static int setup_cache(void **state)
{
	struct tv_fx *fx = tv_fx_new();
	struct vc_config cfg = {.retain = 2, .threaded = 0};

	tv_fx_start(fx, &cfg);
	*state = fx;
	return 0;
}

/* No vc yet: the test starts it with its own config. */
static int setup_bare(void **state)
{
	*state = tv_fx_new();
	return 0;
}

static int teardown(void **state)
{
	struct tv_fx *fx = *state;

	/* A failed test may leave the probe shut; vc_free() waits for it. */
	pthread_mutex_lock(&fx->mu);
	fx->gate_open = true;
	pthread_cond_broadcast(&fx->cv);
	pthread_mutex_unlock(&fx->mu);
	vc_free(fx->vc);
	pthread_cond_destroy(&fx->cv);
	pthread_mutex_destroy(&fx->mu);
	free(fx);
	return 0;
}

static void tv_present_add(struct tv_fx *fx, const char *name, uint64_t ino)
{
	assert_true(fx->npresent < TV_MAX_PRESENT);
	fx->present[fx->npresent++] = (struct tv_present){TV_PARENT, name, ino};
}

/* vLLM lookup(key, req_id) in directory TV_PARENT. */
static int tv_req(struct tv_fx *fx, uint64_t req, const char *name,
		  uint64_t *gen)
{
	uint64_t ino, g;

	return vc_req_lookup(fx->vc, req, TV_PARENT, name, &ino,
			     gen ? gen : &g);
}

static int tv_look(struct tv_fx *fx, const char *name, struct tv_waiter *w,
		   uint64_t *ino, uint64_t *gen)
{
	uint64_t i, g;

	return vc_lookup(fx->vc, TV_PARENT, name, w, ino ? ino : &i,
			 gen ? gen : &g);
}

static struct vc_stats tv_stats(struct tv_fx *fx)
{
	struct vc_stats st;

	vc_get_stats(fx->vc, &st);
	return st;
}

static struct vc_info tv_info(struct tv_fx *fx, const char *name)
{
	struct vc_info info;

	assert_int_equal(vc_query(fx->vc, TV_PARENT, name, &info), 0);
	return info;
}

static bool tv_known(struct tv_fx *fx, const char *name)
{
	struct vc_info info;

	return vc_query(fx->vc, TV_PARENT, name, &info) == 0;
}

static int tv_calls(struct tv_fx *fx)
{
	int n;

	pthread_mutex_lock(&fx->mu);
	n = fx->calls;
	pthread_mutex_unlock(&fx->mu);
	return n;
}

static void tv_deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += TV_WAIT_S;
}

/* Waits until answer() ran n times in all; fails after TV_WAIT_S. */
static void tv_wait_answers(struct tv_fx *fx, int n)
{
	struct timespec ts;
	int rc = 0;

	tv_deadline(&ts);
	pthread_mutex_lock(&fx->mu);
	while (fx->nanswered < n && rc == 0)
		rc = pthread_cond_timedwait(&fx->cv, &fx->mu, &ts);
	pthread_mutex_unlock(&fx->mu);
	assert_int_equal(rc, 0);
}

/* Waits until *count (calls or returned) reaches n. */
static void tv_wait_count(struct tv_fx *fx, const int *count, int n)
{
	struct timespec ts;
	int rc = 0;

	tv_deadline(&ts);
	pthread_mutex_lock(&fx->mu);
	while (*count < n && rc == 0)
		rc = pthread_cond_timedwait(&fx->cv, &fx->mu, &ts);
	pthread_mutex_unlock(&fx->mu);
	assert_int_equal(rc, 0);
}

/* Waits until probe() was entered n times in all. */
static void tv_wait_calls(struct tv_fx *fx, int n)
{
	tv_wait_count(fx, &fx->calls, n);
}

static void tv_gate(struct tv_fx *fx, bool gated, bool open)
{
	pthread_mutex_lock(&fx->mu);
	fx->gated = gated;
	fx->gate_open = open;
	pthread_cond_broadcast(&fx->cv);
	pthread_mutex_unlock(&fx->mu);
}

/* Resolves name through one parked waiter and one probe (manual mode). */
static int tv_resolve(struct tv_fx *fx, const char *name, uint64_t *gen)
{
	struct tv_waiter w = {0};

	assert_int_equal(tv_look(fx, name, &w, NULL, NULL), VC_PARKED);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(atomic_load(&w.nreplies), 1);
	if (gen)
		*gen = w.gen;
	return w.result;
}

/* ---- vLLM test_async_lookup.py ---- */

static void test_new_key_returns_unknown(void **state)
{
	struct tv_fx *fx = *state;

	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_UNKNOWN);
	assert_int_equal(tv_info(fx, "a").phase, VC_PENDING);
	assert_int_equal(tv_stats(fx).npending, 1);
	assert_int_equal(tv_calls(fx), 0);
}

static void test_found_key_returns_hit(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t ino = 0, gen;

	tv_present_add(fx, "a", 42);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_UNKNOWN);
	assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(vc_req_lookup(fx->vc, 1, TV_PARENT, "a", &ino, &gen),
			 VC_HIT);
	assert_int_equal(ino, 42);
	assert_int_equal(tv_calls(fx), 1);
	assert_int_equal(tv_stats(fx).hits, 1);
}

static void test_not_found_key_returns_miss(void **state)
{
	struct tv_fx *fx = *state;

	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_UNKNOWN);
	assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_MISS);
	assert_int_equal(tv_stats(fx).misses, 1);
}

static void test_multiple_keys_single_step(void **state)
{
	struct tv_fx *fx = *state;
	const char *keys[] = {"a", "b", "c", "d"};

	tv_present_add(fx, "a", 1);
	tv_present_add(fx, "c", 3);
	for (int i = 0; i < 4; i++)
		assert_int_equal(tv_req(fx, 1, keys[i], NULL), VC_UNKNOWN);
	assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_calls(fx), 1);
	assert_int_equal(fx->last_n, 4);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_HIT);
	assert_int_equal(tv_req(fx, 1, "b", NULL), VC_MISS);
	assert_int_equal(tv_req(fx, 1, "c", NULL), VC_HIT);
	assert_int_equal(tv_req(fx, 1, "d", NULL), VC_MISS);
	assert_int_equal(tv_stats(fx).batched_keys, 4);
}

static void test_cleanup_removes_entries(void **state)
{
	struct tv_fx *fx = *state;

	tv_present_add(fx, "a", 1);
	tv_req(fx, 1, "a", NULL);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_HIT);
	assert_int_equal(vc_req_cleanup(fx->vc, 1), 1);
	assert_false(tv_known(fx, "a"));
	assert_int_equal(tv_stats(fx).nverdicts, 0);
}

static void test_cleanup_preserves_shared_entries(void **state)
{
	struct tv_fx *fx = *state;

	tv_req(fx, 1, "a", NULL);
	tv_req(fx, 2, "a", NULL);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_info(fx, "a").nrefs, 2);
	assert_int_equal(vc_req_cleanup(fx->vc, 1), 1);
	assert_int_equal(tv_info(fx, "a").nrefs, 1);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_MISS);
	assert_int_equal(vc_req_cleanup(fx->vc, 2), 1);
	assert_false(tv_known(fx, "a"));
}

static void test_flush_empty_posts_nothing(void **state)
{
	struct tv_fx *fx = *state;

	assert_int_equal(vc_flush(fx->vc), 0);
	assert_int_equal(vc_poll(fx->vc), 0);
	assert_int_equal(tv_calls(fx), 0);
	assert_int_equal(tv_stats(fx).probes, 0);
}

static void test_repeated_lookup_not_queued_twice(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t g1, g2;

	assert_int_equal(tv_req(fx, 1, "a", &g1), VC_UNKNOWN);
	assert_int_equal(tv_req(fx, 1, "a", &g2), VC_UNKNOWN);
	assert_int_equal(g1, g2);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_UNKNOWN);
	assert_int_equal(tv_stats(fx).npending, 1);
	assert_int_equal(tv_info(fx, "a").nrefs, 2);
	assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(fx->last_n, 1);
	assert_int_equal(tv_stats(fx).coalesced, 2);
}

static void test_cleanup_unknown_req_is_noop(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_stats before, after;

	tv_req(fx, 1, "a", NULL);
	before = tv_stats(fx);
	assert_int_equal(vc_req_cleanup(fx->vc, 99), 0);
	after = tv_stats(fx);
	assert_memory_equal(&before, &after, sizeof(before));
	assert_int_equal(tv_info(fx, "a").nrefs, 1);
}

static void test_multiple_flushes_across_steps(void **state)
{
	struct tv_fx *fx = *state;

	tv_present_add(fx, "b", 2);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_UNKNOWN);
	assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(tv_req(fx, 1, "b", NULL), VC_UNKNOWN);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_UNKNOWN);
	assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(vc_poll(fx->vc), 0);
	assert_int_equal(tv_calls(fx), 2);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_MISS);
	assert_int_equal(tv_req(fx, 1, "b", NULL), VC_HIT);
}

static void test_shutdown_unblocks_worker(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.threaded = 1};
	struct tv_waiter w = {0};

	tv_fx_start(fx, &cfg);
	/* The worker is idle in its wait; shutdown must wake and join it. */
	vc_shutdown(fx->vc);
	assert_int_equal(tv_req(fx, 1, "a", NULL), -ESHUTDOWN);
	assert_int_equal(tv_look(fx, "a", &w, NULL, NULL), -ESHUTDOWN);
	vc_shutdown(fx->vc);
	assert_int_equal(atomic_load(&w.nreplies), 0);
}

static void test_mark_miss_flips_cached_verdict_without_reprobing(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t gen;

	tv_present_add(fx, "a", 1);
	tv_req(fx, 1, "a", NULL);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 1, "a", &gen), VC_HIT);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", gen), 1);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_MISS);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_MISS);
	assert_int_equal(tv_calls(fx), 1);
	/* Unknown key: no-op, nothing planted. */
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "zz", gen), 0);
	assert_false(tv_known(fx, "zz"));
	assert_int_equal(tv_stats(fx).marked_misses, 1);
	/*
	 * Cleanup works; kvfs keeps the quarantined miss (until the name is
	 * stored again or an operator clears it; kvfs(7), FAILURE POLICY).
	 */
	assert_int_equal(vc_req_cleanup(fx->vc, 1), 1);
	assert_true(tv_info(fx, "a").quarantined);
	assert_int_equal(tv_info(fx, "a").nrefs, 0);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_MISS);
	assert_int_equal(tv_calls(fx), 1);
	assert_int_equal(vc_req_cleanup(fx->vc, 2), 1);
	/* The operator clears it: the next request probes again. */
	assert_int_equal(vc_clear(fx->vc, TV_PARENT, "a"), 1);
	assert_false(tv_known(fx, "a"));
	assert_int_equal(tv_req(fx, 3, "a", NULL), VC_UNKNOWN);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 3, "a", NULL), VC_HIT);
	assert_int_equal(tv_calls(fx), 2);
}

static void test_second_result_for_generation_refused(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t ga, gb;

	tv_present_add(fx, "a", 1);
	tv_req(fx, 1, "a", &ga);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_HIT);
	/* The enqueue-once check: a second result for ga is refused. */
	assert_int_equal(vc_deliver(fx->vc, TV_PARENT, "a", ga, 0, 0),
			 -EALREADY);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_HIT);
	/* A result for a generation not probed yet is refused too. */
	tv_req(fx, 1, "b", &gb);
	assert_int_equal(vc_deliver(fx->vc, TV_PARENT, "b", gb, 1, 5),
			 -EALREADY);
	assert_int_equal(tv_info(fx, "b").phase, VC_PENDING);
	assert_int_equal(vc_deliver(fx->vc, TV_PARENT, "b", gb + 100, 1, 5),
			 -ESTALE);
	assert_int_equal(tv_stats(fx).stale_discarded, 3);
	/* The real result still lands once. */
	vc_flush(fx->vc);
	assert_int_equal(vc_deliver(fx->vc, TV_PARENT, "b", gb, 1, 5), 0);
	assert_int_equal(vc_deliver(fx->vc, TV_PARENT, "b", gb, 0, 0),
			 -EALREADY);
	assert_int_equal(tv_req(fx, 1, "b", NULL), VC_HIT);
	assert_int_equal(tv_stats(fx).stale_discarded, 4);
	/* The probe's own result for gb (absent) is a second one: refused. */
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_calls(fx), 2);
	assert_int_equal(tv_stats(fx).stale_discarded, 5);
	assert_int_equal(tv_req(fx, 1, "b", NULL), VC_HIT);
}

/* ---- generations: what the contract adds ---- */

static void test_cleanup_in_flight_keeps_probe_then_drops_orphan(void **state)
{
	struct tv_fx *fx = *state;

	tv_req(fx, 1, "a", NULL);
	vc_flush(fx->vc);
	assert_int_equal(vc_req_cleanup(fx->vc, 1), 1);
	assert_int_equal(tv_info(fx, "a").phase, VC_IN_FLIGHT);
	assert_int_equal(tv_info(fx, "a").nrefs, 0);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_false(tv_known(fx, "a"));
	assert_int_equal(tv_stats(fx).stale_discarded, 0);
	assert_int_equal(tv_stats(fx).nverdicts, 0);
}

static void test_new_request_joins_orphaned_probe(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t g1, g2;

	tv_present_add(fx, "a", 7);
	tv_req(fx, 1, "a", &g1);
	vc_flush(fx->vc);
	vc_req_cleanup(fx->vc, 1);
	assert_int_equal(tv_req(fx, 2, "a", &g2), VC_UNKNOWN);
	assert_int_equal(g1, g2);
	assert_int_equal(tv_stats(fx).coalesced, 1);
	assert_int_equal(vc_flush(fx->vc), 0);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_HIT);
	assert_int_equal(tv_calls(fx), 1);
}

static void test_recreated_state_ignores_old_generation(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t g1, g2;

	tv_present_add(fx, "a", 7);
	tv_req(fx, 1, "a", &g1);
	vc_req_cleanup(fx->vc, 1); /* PENDING, nobody holds it: dropped */
	assert_false(tv_known(fx, "a"));
	tv_req(fx, 2, "a", &g2);
	assert_true(g2 > g1);
	assert_int_equal(vc_flush(fx->vc), 1);
	/* The old generation's result (had it been probed) is ignored. */
	assert_int_equal(vc_deliver(fx->vc, TV_PARENT, "a", g1, 0, 0), -ESTALE);
	assert_int_equal(tv_info(fx, "a").phase, VC_IN_FLIGHT);
	assert_int_equal(tv_info(fx, "a").generation, g2);
	vc_poll(fx->vc);
	assert_int_equal(fx->last_n, 1);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_HIT);
}

/*
 * The seed crash: A resolves K and starts a load; A finishes (state
 * dropped); B looks K up (a newer probe); A's load fails and marks K a
 * miss with A's generation.
 */
static void tv_seed_sequence(struct tv_fx *fx, bool newer_in_flight)
{
	uint64_t ga, gb;

	tv_present_add(fx, "k", 9);
	tv_req(fx, 1, "k", NULL);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 1, "k", &ga), VC_HIT);
	vc_req_cleanup(fx->vc, 1);
	assert_false(tv_known(fx, "k"));
	assert_int_equal(tv_req(fx, 2, "k", &gb), VC_UNKNOWN);
	if (newer_in_flight)
		assert_int_equal(vc_flush(fx->vc), 1);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "k", ga), 0);
	/* Not even with the newer generation: only RESOLVED changes. */
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "k", gb), 0);
	assert_int_equal(tv_info(fx, "k").phase,
			 newer_in_flight ? VC_IN_FLIGHT : VC_PENDING);
	assert_false(tv_info(fx, "k").quarantined);
	assert_int_equal(tv_req(fx, 2, "k", NULL), VC_UNKNOWN);
	assert_int_equal(vc_flush(fx->vc), newer_in_flight ? 0 : 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_req(fx, 2, "k", NULL), VC_HIT);
	assert_int_equal(tv_calls(fx), 2);
	assert_int_equal(tv_stats(fx).marked_misses, 0);
	assert_int_equal(tv_stats(fx).stale_discarded, 0);
}

static void test_seed_crash_newer_pending(void **state)
{
	tv_seed_sequence(*state, false);
}

static void test_seed_crash_newer_in_flight(void **state)
{
	tv_seed_sequence(*state, true);
}

static void test_mark_miss_older_gen_on_newer_resolved_noop(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t g1, g2;

	tv_present_add(fx, "a", 3);
	tv_req(fx, 1, "a", NULL);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	tv_req(fx, 1, "a", &g1);
	vc_req_cleanup(fx->vc, 1);
	tv_req(fx, 2, "a", NULL);
	vc_flush(fx->vc);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 2, "a", &g2), VC_HIT);
	assert_true(g2 > g1);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", g1), 0);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_HIT);
	assert_false(tv_info(fx, "a").quarantined);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", g2), 1);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_MISS);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", g2), 0);
	assert_int_equal(tv_stats(fx).marked_misses, 1);
}

/* An unlink while the probe runs: the probe's "found" must not win. */
static void test_bump_cannot_resurrect_unlinked_name(void **state)
{
	struct tv_fx *fx = *state;
	uint64_t g1, g2, g3;

	tv_present_add(fx, "a", 5); /* what the probe will read */
	tv_req(fx, 1, "a", &g1);
	vc_flush(fx->vc);
	g2 = vc_bump(fx->vc, TV_PARENT, "a", 0, 0);
	assert_true(g2 > g1);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_MISS);
	vc_req_cleanup(fx->vc, 1);
	assert_false(tv_known(fx, "a"));
	tv_req(fx, 2, "a", &g3);
	assert_int_equal(vc_poll(fx->vc), 1); /* the g1 probe lands */
	assert_int_equal(tv_stats(fx).stale_discarded, 1);
	assert_int_equal(tv_info(fx, "a").phase, VC_PENDING);
	assert_int_equal(tv_info(fx, "a").generation, g3);
	assert_int_equal(tv_req(fx, 2, "a", NULL), VC_UNKNOWN);
}

/* ---- the FUSE waiter API ---- */

static void test_lookup_parks_then_answers(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w1 = {0}, w2 = {0};
	uint64_t ino = 1, gen = 0;

	fx->reenter = true;
	tv_present_add(fx, "a", 42);
	assert_int_equal(tv_look(fx, "a", &w1, &ino, &gen), VC_PARKED);
	assert_int_equal(ino, 0);
	assert_int_equal(tv_stats(fx).nparked, 1);
	assert_int_equal(atomic_load(&w1.nreplies), 0);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(atomic_load(&w1.nreplies), 1);
	assert_int_equal(w1.result, VC_HIT);
	assert_int_equal(w1.ino, 42);
	assert_int_equal(w1.gen, gen);
	/* Cached now (retain 2): answered at once, waiter not kept. */
	assert_int_equal(tv_look(fx, "a", &w2, &ino, &gen), VC_HIT);
	assert_int_equal(ino, 42);
	assert_int_equal(gen, w1.gen);
	assert_int_equal(atomic_load(&w2.nreplies), 0);
	assert_int_equal(tv_stats(fx).nparked, 0);
	assert_int_equal(tv_stats(fx).hits, 2);
	assert_int_equal(tv_calls(fx), 1);
}

static void test_lookups_of_one_key_share_one_probe(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w[5] = {0};

	for (int i = 0; i < 5; i++)
		assert_int_equal(tv_look(fx, "a", &w[i], NULL, NULL),
				 VC_PARKED);
	assert_int_equal(tv_info(fx, "a").nwaiters, 5);
	assert_int_equal(vc_poll(fx->vc), 1);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(atomic_load(&w[i].nreplies), 1);
		assert_int_equal(w[i].result, VC_MISS);
	}
	assert_int_equal(tv_calls(fx), 1);
	assert_int_equal(fx->last_n, 1);
	assert_int_equal(tv_stats(fx).coalesced, 4);
	assert_int_equal(tv_stats(fx).misses, 5);
}

static void test_cancel_parked_waiter(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w1 = {0}, w2 = {0}, w3 = {0}, w4 = {0};

	/* PENDING: the last cancel drops the verdict, nothing is probed. */
	tv_look(fx, "a", &w1, NULL, NULL);
	tv_look(fx, "a", &w2, NULL, NULL);
	assert_int_equal(vc_cancel(fx->vc, &w1), 0);
	assert_int_equal(vc_cancel(fx->vc, &w1), -ENOENT);
	assert_int_equal(tv_info(fx, "a").nwaiters, 1);
	assert_int_equal(vc_cancel(fx->vc, &w2), 0);
	assert_false(tv_known(fx, "a"));
	assert_int_equal(vc_flush(fx->vc), 0);
	/* IN_FLIGHT: the orphaned probe is kept and its result cached. */
	tv_present_add(fx, "b", 8);
	tv_look(fx, "b", &w3, NULL, NULL);
	vc_flush(fx->vc);
	assert_int_equal(vc_cancel(fx->vc, &w3), 0);
	assert_int_equal(tv_info(fx, "b").phase, VC_IN_FLIGHT);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_info(fx, "b").result, VC_HIT);
	/* Already answered: cancel refuses, the caller must not reply. */
	tv_look(fx, "c", &w4, NULL, NULL);
	vc_poll(fx->vc);
	assert_int_equal(vc_cancel(fx->vc, &w4), -ENOENT);
	assert_int_equal(atomic_load(&w1.nreplies), 0);
	assert_int_equal(atomic_load(&w2.nreplies), 0);
	assert_int_equal(atomic_load(&w3.nreplies), 0);
	assert_int_equal(atomic_load(&w4.nreplies), 1);
	assert_int_equal(tv_stats(fx).cancelled, 3);
	assert_int_equal(tv_stats(fx).nparked, 0);
}

static void test_probe_error_answers_error_and_drops(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0};

	tv_present_add(fx, "a", 4);
	fx->fail_rc = -EIO;
	tv_look(fx, "a", &w, NULL, NULL);
	tv_req(fx, 1, "a", NULL);
	vc_poll(fx->vc);
	assert_int_equal(atomic_load(&w.nreplies), 1);
	assert_int_equal(w.result, -EIO);
	/* Dropped, not cached as a miss; the request asks again. */
	assert_false(tv_known(fx, "a"));
	assert_int_equal(tv_stats(fx).probe_errors, 1);
	assert_int_equal(tv_stats(fx).misses, 0);
	fx->fail_rc = 0;
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_UNKNOWN);
	vc_poll(fx->vc);
	assert_int_equal(tv_req(fx, 1, "a", NULL), VC_HIT);
}

static void test_bump_pending_resolves_with_new_truth(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0};
	uint64_t g1, g2;

	tv_look(fx, "a", &w, NULL, &g1);
	g2 = vc_bump(fx->vc, TV_PARENT, "a", 1, 9); /* created */
	assert_true(g2 > g1);
	assert_int_equal(tv_info(fx, "a").phase, VC_RESOLVED);
	assert_int_equal(tv_info(fx, "a").result, VC_HIT);
	assert_int_equal(tv_stats(fx).npending, 0);
	/* vc_bump() never answers; the worker round does. */
	assert_int_equal(atomic_load(&w.nreplies), 0);
	assert_int_equal(vc_cancel(fx->vc, &w), -ENOENT);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(atomic_load(&w.nreplies), 1);
	assert_int_equal(w.result, VC_HIT);
	assert_int_equal(w.ino, 9);
	assert_int_equal(w.gen, g2);
	assert_int_equal(tv_calls(fx), 0);
}

static void test_bump_in_flight_discards_stale_result(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0}, w2 = {0};
	uint64_t g2, ino;

	/* The probe reads the index before the create commits: absent. */
	tv_look(fx, "a", &w, NULL, NULL);
	vc_flush(fx->vc);
	g2 = vc_bump(fx->vc, TV_PARENT, "a", 1, 9);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(atomic_load(&w.nreplies), 1);
	assert_int_equal(w.result, VC_HIT);
	assert_int_equal(w.gen, g2);
	assert_int_equal(tv_stats(fx).stale_discarded, 1);
	assert_int_equal(tv_look(fx, "a", &w2, &ino, NULL), VC_HIT);
	assert_int_equal(ino, 9);
	assert_int_equal(tv_info(fx, "a").generation, g2);
}

static void test_bump_unknown_key(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0};
	uint64_t ino, gen, g;

	g = vc_bump(fx->vc, TV_PARENT, "x", 1, 5);
	assert_int_equal(tv_look(fx, "x", &w, &ino, &gen), VC_HIT);
	assert_int_equal(ino, 5);
	assert_int_equal(gen, g);
	assert_int_equal(vc_bump(fx->vc, TV_PARENT, "x", 0, 0), g + 1);
	assert_int_equal(tv_look(fx, "x", &w, &ino, NULL), VC_MISS);
	assert_int_equal(tv_stats(fx).bumps, 2);
	assert_int_equal(tv_calls(fx), 0);
}

static void test_bump_unknown_key_mirror(void **state)
{
	struct tv_fx *fx = *state;

	/* retain 0: nothing to cache for a key nobody holds. */
	assert_true(vc_bump(fx->vc, TV_PARENT, "x", 1, 5) > 0);
	assert_false(tv_known(fx, "x"));
}

static void test_quarantine_kept_beyond_lru(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0};
	uint64_t ga, g;

	tv_present_add(fx, "a", 1);
	assert_int_equal(tv_resolve(fx, "a", &ga), VC_HIT);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", ga), 1);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", ga), 0);
	/* Fill the LRU (retain 2) well past its bound. */
	tv_resolve(fx, "b", NULL);
	tv_resolve(fx, "c", NULL);
	tv_resolve(fx, "d", NULL);
	assert_false(tv_known(fx, "b"));
	assert_true(tv_info(fx, "a").quarantined);
	assert_int_equal(tv_stats(fx).nquarantined, 1);
	assert_int_equal(tv_stats(fx).nverdicts, 3);
	assert_int_equal(tv_look(fx, "a", &w, NULL, NULL), VC_MISS);
	/* Stored again: the quarantine ends with the new truth. */
	g = vc_bump(fx->vc, TV_PARENT, "a", 1, 11);
	assert_false(tv_info(fx, "a").quarantined);
	assert_int_equal(tv_info(fx, "a").result, VC_HIT);
	assert_int_equal(tv_stats(fx).nquarantined, 0);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", g), 1);
	/* The operator clears it: the next lookup probes again. */
	assert_int_equal(vc_clear(fx->vc, TV_PARENT, "a"), 1);
	assert_false(tv_known(fx, "a"));
	assert_int_equal(vc_clear(fx->vc, TV_PARENT, "a"), 0);
	assert_int_equal(tv_stats(fx).nquarantined, 0);
	assert_int_equal(tv_resolve(fx, "a", NULL), VC_HIT);
}

static void test_lru_bound_and_touch(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0};

	tv_resolve(fx, "a", NULL);
	tv_resolve(fx, "b", NULL);
	assert_int_equal(tv_look(fx, "a", &w, NULL, NULL), VC_MISS);
	tv_resolve(fx, "c", NULL); /* evicts b, the least recently used */
	assert_true(tv_known(fx, "a"));
	assert_false(tv_known(fx, "b"));
	assert_true(tv_known(fx, "c"));
	assert_int_equal(tv_stats(fx).nverdicts, 2);
}

static void test_window_batches_keys(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.window_ns = 1000, .retain = 2};
	struct tv_waiter wa = {0}, wb = {0};

	tv_fx_start(fx, &cfg);
	tv_look(fx, "a", &wa, NULL, NULL);
	fake_clock_advance(&fx->clk, 500);
	tv_look(fx, "b", &wb, NULL, NULL);
	assert_int_equal(vc_poll(fx->vc), 0); /* window still open */
	fake_clock_advance(&fx->clk, 499);
	assert_int_equal(vc_poll(fx->vc), 0);
	fake_clock_advance(&fx->clk, 1);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(tv_calls(fx), 1);
	assert_int_equal(fx->last_n, 2);
	assert_int_equal(atomic_load(&wa.nreplies), 1);
	assert_int_equal(atomic_load(&wb.nreplies), 1);
}

static void test_max_batch_splits(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.window_ns = 1000000, .max_batch = 2};
	const char *keys[] = {"a", "b", "c", "d", "e"};
	struct tv_waiter w[5] = {0};

	tv_fx_start(fx, &cfg);
	for (int i = 0; i < 3; i++)
		tv_look(fx, keys[i], &w[i], NULL, NULL);
	/* A full batch goes at once, window or not. */
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(fx->last_n, 2);
	assert_string_equal(fx->seen[0], "a");
	assert_string_equal(fx->seen[1], "b");
	assert_int_equal(vc_poll(fx->vc), 0);
	fake_clock_advance(&fx->clk, 1000000);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(fx->last_n, 1);
	assert_string_equal(fx->seen[0], "c");
	/* vc_flush() ignores the window and splits by max_batch. */
	for (int i = 0; i < 5; i++) {
		atomic_store(&w[i].nreplies, 0);
		tv_req(fx, 1, keys[i], NULL);
	}
	assert_int_equal(vc_flush(fx->vc), 3);
	while (vc_poll(fx->vc))
		;
	assert_int_equal(tv_calls(fx), 5);
	assert_int_equal(tv_stats(fx).batched_keys, 8);
}

static void test_keys_are_per_parent(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w1 = {0}, w2 = {0};
	uint64_t i, g;

	fx->present[fx->npresent++] = (struct tv_present){7, "a", 70};
	assert_int_equal(vc_lookup(fx->vc, 6, "a", &w1, &i, &g), VC_PARKED);
	assert_int_equal(vc_lookup(fx->vc, 7, "a", &w2, &i, &g), VC_PARKED);
	assert_int_equal(tv_stats(fx).coalesced, 0);
	vc_poll(fx->vc);
	assert_int_equal(fx->last_n, 2);
	assert_int_equal(fx->seen_parent[0], 6);
	assert_int_equal(fx->seen_parent[1], 7);
	assert_int_equal(w1.result, VC_MISS);
	assert_int_equal(w2.result, VC_HIT);
	assert_int_equal(w2.ino, 70);
}

static void test_bad_names(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w = {0};
	struct vc_info info;
	char name[300];

	assert_int_equal(tv_look(fx, "", &w, NULL, NULL), -EINVAL);
	memset(name, 'x', sizeof(name));
	name[256] = '\0';
	assert_int_equal(tv_look(fx, name, &w, NULL, NULL), -ENAMETOOLONG);
	assert_int_equal(tv_req(fx, 1, name, NULL), -ENAMETOOLONG);
	assert_int_equal(vc_query(fx->vc, TV_PARENT, name, &info), -ENOENT);
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, name, 1), 0);
	name[255] = '\0';
	assert_int_equal(tv_look(fx, name, &w, NULL, NULL), VC_PARKED);
	vc_poll(fx->vc);
	assert_string_equal(fx->seen[0], name);
	assert_int_equal(tv_stats(fx).nverdicts, 1);
}

static void test_shutdown_answers_parked(void **state)
{
	struct tv_fx *fx = *state;
	struct tv_waiter w1 = {0}, w2 = {0}, w3 = {0}, w4 = {0};

	tv_look(fx, "a", &w1, NULL, NULL);
	vc_flush(fx->vc);		   /* a is IN_FLIGHT */
	tv_look(fx, "b", &w2, NULL, NULL); /* b is PENDING */
	tv_look(fx, "c", &w3, NULL, NULL);
	vc_bump(fx->vc, TV_PARENT, "c", 1, 3); /* c's answer is decided */
	vc_shutdown(fx->vc);
	assert_int_equal(atomic_load(&w1.nreplies), 1);
	assert_int_equal(w1.result, -ESHUTDOWN);
	assert_int_equal(atomic_load(&w2.nreplies), 1);
	assert_int_equal(w2.result, -ESHUTDOWN);
	assert_int_equal(atomic_load(&w3.nreplies), 1);
	assert_int_equal(w3.result, VC_HIT);
	assert_int_equal(tv_look(fx, "d", &w4, NULL, NULL), -ESHUTDOWN);
	assert_int_equal(vc_cancel(fx->vc, &w1), -ENOENT);
	assert_int_equal(tv_stats(fx).nparked, 0);
	vc_shutdown(fx->vc);
	assert_int_equal(fx->nanswered, 3);
}

/* ---- threaded mode ---- */

#define TV_NLOOKERS 64

struct tv_looker {
	struct tv_fx *fx;
	struct tv_waiter w;
	int rc;
	pthread_barrier_t *start;
};

static void *tv_looker_main(void *arg)
{
	struct tv_looker *l = arg;

	pthread_barrier_wait(l->start);
	l->rc = tv_look(l->fx, "absent", &l->w, NULL, NULL);
	return NULL;
}

static void test_threaded_concurrent_lookups_one_probe(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.threaded = 1, .retain = 16};
	struct tv_looker l[TV_NLOOKERS];
	pthread_t t[TV_NLOOKERS];
	pthread_barrier_t start;
	struct vc_stats st;

	tv_gate(fx, true, false);
	tv_fx_start(fx, &cfg);
	pthread_barrier_init(&start, NULL, TV_NLOOKERS);
	for (int i = 0; i < TV_NLOOKERS; i++) {
		l[i] = (struct tv_looker){.fx = fx, .start = &start};
		assert_int_equal(
			pthread_create(&t[i], NULL, tv_looker_main, &l[i]), 0);
	}
	for (int i = 0; i < TV_NLOOKERS; i++)
		pthread_join(t[i], NULL);
	/* All parked while the one probe is held shut. */
	for (int i = 0; i < TV_NLOOKERS; i++)
		assert_int_equal(l[i].rc, VC_PARKED);
	tv_wait_calls(fx, 1);
	tv_gate(fx, true, true);
	tv_wait_answers(fx, TV_NLOOKERS);
	for (int i = 0; i < TV_NLOOKERS; i++) {
		assert_int_equal(atomic_load(&l[i].w.nreplies), 1);
		assert_int_equal(l[i].w.result, VC_MISS);
	}
	st = tv_stats(fx);
	assert_int_equal(st.probes, 1);
	assert_int_equal(st.batched_keys, 1);
	assert_int_equal(st.coalesced, TV_NLOOKERS - 1);
	assert_int_equal(st.misses, TV_NLOOKERS);
	assert_int_equal(tv_calls(fx), 1);
	pthread_barrier_destroy(&start);
}

#define TV_ROUNDS 50
#define TV_NRACE 16

struct tv_canceller {
	struct tv_fx *fx;
	struct tv_waiter *w; /* cancels w[first], w[first + 2], ... */
	int first;
	int delay; /* yields before starting, to vary the interleaving */
	int ncancelled;
	pthread_barrier_t *start;
};

static void *tv_canceller_main(void *arg)
{
	struct tv_canceller *c = arg;

	pthread_barrier_wait(c->start);
	for (int i = 0; i < c->delay; i++)
		sched_yield();
	for (int i = c->first; i < TV_NRACE; i += 2) {
		if (vc_cancel(c->fx->vc, &c->w[i]) == 0) {
			atomic_fetch_add(&c->w[i].nreplies, 1);
			c->ncancelled++;
		}
	}
	return NULL;
}

struct tv_opener {
	struct tv_fx *fx;
	pthread_barrier_t *start;
};

static void *tv_opener_main(void *arg)
{
	struct tv_opener *o = arg;

	pthread_barrier_wait(o->start);
	tv_gate(o->fx, true, true);
	return NULL;
}

static void test_threaded_cancel_races_answer(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.threaded = 1};
	int answered = 0, ncancel = 0;

	tv_fx_start(fx, &cfg);
	for (int r = 0; r < TV_ROUNDS; r++) {
		struct tv_waiter w[TV_NRACE];
		struct tv_canceller c[2];
		struct tv_opener o = {.fx = fx};
		pthread_t tc[2], to;
		pthread_barrier_t start;
		char key[32];
		int cancelled;

		snprintf(key, sizeof(key), "k%d", r);
		memset(w, 0, sizeof(w));
		tv_gate(fx, true, false);
		for (int i = 0; i < TV_NRACE; i++)
			assert_int_equal(tv_look(fx, key, &w[i], NULL, NULL),
					 VC_PARKED);
		tv_wait_calls(fx, r + 1);
		pthread_barrier_init(&start, NULL, 3);
		o.start = &start;
		for (int i = 0; i < 2; i++) {
			c[i] = (struct tv_canceller){.fx = fx,
						     .w = w,
						     .first = i,
						     .delay = r % 4,
						     .start = &start};
			pthread_create(&tc[i], NULL, tv_canceller_main, &c[i]);
		}
		pthread_create(&to, NULL, tv_opener_main, &o);
		for (int i = 0; i < 2; i++)
			pthread_join(tc[i], NULL);
		pthread_join(to, NULL);
		pthread_barrier_destroy(&start);
		cancelled = c[0].ncancelled + c[1].ncancelled;
		ncancel += cancelled;
		answered += TV_NRACE - cancelled;
		tv_wait_answers(fx, answered);
		/* Before the gate shuts again: all waiters may be cancelled. */
		tv_wait_count(fx, &fx->returned, r + 1);
		/* Exactly one reply per waiter: answer() or the caller's. */
		for (int i = 0; i < TV_NRACE; i++)
			assert_int_equal(atomic_load(&w[i].nreplies), 1);
		assert_int_equal(tv_stats(fx).nparked, 0);
	}
	assert_int_equal(tv_stats(fx).cancelled, ncancel);
	assert_int_equal(fx->nanswered, answered);
	print_message("cancel race: %d cancelled, %d answered\n", ncancel,
		      answered);
}

static void *tv_free_main(void *arg)
{
	vc_free(arg);
	return NULL;
}

static void test_threaded_free_answers_parked(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.threaded = 1};
	struct tv_waiter w[10];
	pthread_t t;

	memset(w, 0, sizeof(w));
	tv_gate(fx, true, false);
	tv_fx_start(fx, &cfg);
	assert_int_equal(tv_look(fx, "a", &w[0], NULL, NULL), VC_PARKED);
	tv_wait_calls(fx, 1); /* the worker holds a's probe */
	for (int i = 1; i < 10; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(tv_look(fx, key, &w[i], NULL, NULL),
				 VC_PARKED);
	}
	pthread_create(&t, NULL, tv_free_main, fx->vc);
	/* vc_free() cannot finish while the probe is shut: vc stays valid. */
	while (tv_req(fx, 99, "a", NULL) != -ESHUTDOWN)
		sched_yield();
	tv_gate(fx, true, true);
	pthread_join(t, NULL);
	fx->vc = NULL;
	/* a's probe finished and answered; the others were shut down. */
	assert_int_equal(atomic_load(&w[0].nreplies), 1);
	assert_int_equal(w[0].result, VC_MISS);
	for (int i = 1; i < 10; i++) {
		assert_int_equal(atomic_load(&w[i].nreplies), 1);
		assert_int_equal(w[i].result, -ESHUTDOWN);
	}
	assert_int_equal(fx->nanswered, 10);
	assert_int_equal(tv_calls(fx), 1);
}

static void test_threaded_window_real_clock(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_ops ops = {.probe = tv_probe, .answer = tv_answer, .ctx = fx};
	struct vc_config cfg = {
		.threaded = 1, .window_ns = 2000000, .retain = 8};
	struct tv_waiter w[3];
	const char *keys[] = {"a", "b", "c"};
	uint64_t ino, gen;

	memset(w, 0, sizeof(w));
	tv_present_add(fx, "b", 2);
	assert_int_equal(vc_new(&fx->vc, &ops, &cfg), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tv_look(fx, keys[i], &w[i], NULL, NULL),
				 VC_PARKED);
	tv_wait_answers(fx, 3);
	assert_int_equal(w[0].result, VC_MISS);
	assert_int_equal(w[1].result, VC_HIT);
	assert_int_equal(w[1].ino, 2);
	assert_int_equal(w[2].result, VC_MISS);
	assert_true(tv_calls(fx) >= 1 && tv_calls(fx) <= 3);
	/* vc_bump() from this thread; the worker delivers the answer. */
	assert_int_equal(tv_look(fx, "d", &w[0], NULL, NULL), VC_PARKED);
	vc_bump(fx->vc, TV_PARENT, "d", 1, 4);
	tv_wait_answers(fx, 4);
	assert_int_equal(w[0].result, VC_HIT);
	assert_int_equal(w[0].ino, 4);
	assert_int_equal(vc_lookup(fx->vc, TV_PARENT, "b", &w[1], &ino, &gen),
			 VC_HIT);
}

/* ---- inline probes ---- */

/* Manual mode with inline probes: the caller's own thread answers. */
static void test_inline_probe_answers_before_return(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.retain = 4, .inline_probe = 1};
	struct tv_waiter w1 = {0}, w2 = {0};
	uint64_t ino = 1, gen = 0;

	tv_fx_start(fx, &cfg);
	fx->reenter = true;
	tv_present_add(fx, "a", 42);
	assert_int_equal(tv_look(fx, "a", &w1, &ino, &gen), VC_PARKED);
	/* No vc_poll(): answered before vc_lookup() returned. */
	assert_int_equal(atomic_load(&w1.nreplies), 1);
	assert_int_equal(w1.result, VC_HIT);
	assert_int_equal(w1.ino, 42);
	assert_int_equal(w1.gen, gen);
	assert_int_equal(tv_stats(fx).probes, 1);
	assert_int_equal(tv_stats(fx).nparked, 0);
	assert_int_equal(tv_look(fx, "a", &w2, &ino, NULL), VC_HIT);
	assert_int_equal(ino, 42);
	assert_int_equal(atomic_load(&w2.nreplies), 0);
	assert_int_equal(tv_look(fx, "b", &w2, &ino, NULL), VC_PARKED);
	assert_int_equal(atomic_load(&w2.nreplies), 1);
	assert_int_equal(w2.result, VC_MISS);
	assert_int_equal(tv_calls(fx), 2);
	assert_int_equal(vc_poll(fx->vc), 0);
}

struct tv_inliner {
	struct tv_fx *fx;
	const char *name;
	struct tv_waiter w;
	int rc;
	int replies_at_return; /* w's answers when vc_lookup() returned */
};

static void *tv_inliner_main(void *arg)
{
	struct tv_inliner *t = arg;

	t->rc = tv_look(t->fx, t->name, &t->w, NULL, NULL);
	t->replies_at_return = atomic_load(&t->w.nreplies);
	return NULL;
}

/*
 * While one thread probes inline, a lookup of the same key joins its batch
 * and one of another key parks for the worker: neither blocks, and neither
 * probes a second batch at the same time.
 */
static void test_inline_probe_others_wait_for_worker(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.threaded = 1, .retain = 4, .inline_probe = 1};
	struct tv_inliner t = {.fx = fx, .name = "a"};
	struct tv_waiter w2 = {0}, w3 = {0};
	pthread_t th;

	tv_present_add(fx, "a", 5);
	tv_gate(fx, true, false);
	tv_fx_start(fx, &cfg);
	assert_int_equal(pthread_create(&th, NULL, tv_inliner_main, &t), 0);
	tv_wait_calls(fx, 1);
	assert_int_equal(tv_info(fx, "a").phase, VC_IN_FLIGHT);
	assert_int_equal(tv_look(fx, "a", &w2, NULL, NULL), VC_PARKED);
	assert_int_equal(tv_look(fx, "b", &w3, NULL, NULL), VC_PARKED);
	assert_int_equal(tv_info(fx, "b").phase, VC_PENDING);
	/* The worker leaves "b" alone while the inline probe runs. */
	assert_int_equal(tv_calls(fx), 1);
	tv_gate(fx, true, true);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, VC_PARKED);
	assert_int_equal(t.replies_at_return, 1);
	assert_int_equal(t.w.result, VC_HIT);
	assert_int_equal(t.w.ino, 5);
	tv_wait_answers(fx, 3);
	assert_int_equal(atomic_load(&w2.nreplies), 1);
	assert_int_equal(w2.result, VC_HIT);
	assert_int_equal(atomic_load(&w3.nreplies), 1);
	assert_int_equal(w3.result, VC_MISS);
	assert_int_equal(tv_calls(fx), 2);
	assert_int_equal(tv_stats(fx).coalesced, 1);
}

/*
 * A create committed while the inline probe read the index: the stale
 * "absent" is discarded and the waiter gets the new truth, through the
 * worker (vc_poll here).
 */
static void test_inline_probe_stale_result(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {.retain = 4, .inline_probe = 1};
	struct tv_inliner t = {.fx = fx, .name = "a"};
	uint64_t g2;
	pthread_t th;

	tv_gate(fx, true, false);
	tv_fx_start(fx, &cfg);
	assert_int_equal(pthread_create(&th, NULL, tv_inliner_main, &t), 0);
	tv_wait_calls(fx, 1);
	g2 = vc_bump(fx->vc, TV_PARENT, "a", 1, 9);
	tv_gate(fx, true, true);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, VC_PARKED);
	assert_int_equal(tv_stats(fx).stale_discarded, 1);
	assert_int_equal(atomic_load(&t.w.nreplies), 0);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(atomic_load(&t.w.nreplies), 1);
	assert_int_equal(t.w.result, VC_HIT);
	assert_int_equal(t.w.ino, 9);
	assert_int_equal(t.w.gen, g2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* vLLM test_async_lookup.py */
		cmocka_unit_test_setup_teardown(test_new_key_returns_unknown,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_found_key_returns_hit,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_not_found_key_returns_miss,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_multiple_keys_single_step,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_cleanup_removes_entries,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(
			test_cleanup_preserves_shared_entries, setup_mirror,
			teardown),
		cmocka_unit_test_setup_teardown(test_flush_empty_posts_nothing,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(
			test_repeated_lookup_not_queued_twice, setup_mirror,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_cleanup_unknown_req_is_noop, setup_mirror,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_multiple_flushes_across_steps, setup_mirror,
			teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_unblocks_worker,
						setup_bare, teardown),
		cmocka_unit_test_setup_teardown(
			test_mark_miss_flips_cached_verdict_without_reprobing,
			setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(
			test_second_result_for_generation_refused, setup_mirror,
			teardown),
		/* generations */
		cmocka_unit_test_setup_teardown(
			test_cleanup_in_flight_keeps_probe_then_drops_orphan,
			setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(
			test_new_request_joins_orphaned_probe, setup_mirror,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_recreated_state_ignores_old_generation,
			setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_seed_crash_newer_pending,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_seed_crash_newer_in_flight,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(
			test_mark_miss_older_gen_on_newer_resolved_noop,
			setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(
			test_bump_cannot_resurrect_unlinked_name, setup_mirror,
			teardown),
		/* FUSE waiters */
		cmocka_unit_test_setup_teardown(test_lookup_parks_then_answers,
						setup_cache, teardown),
		cmocka_unit_test_setup_teardown(
			test_lookups_of_one_key_share_one_probe, setup_cache,
			teardown),
		cmocka_unit_test_setup_teardown(test_cancel_parked_waiter,
						setup_cache, teardown),
		cmocka_unit_test_setup_teardown(
			test_probe_error_answers_error_and_drops, setup_cache,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_bump_pending_resolves_with_new_truth, setup_cache,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_bump_in_flight_discards_stale_result, setup_cache,
			teardown),
		cmocka_unit_test_setup_teardown(test_bump_unknown_key,
						setup_cache, teardown),
		cmocka_unit_test_setup_teardown(test_bump_unknown_key_mirror,
						setup_mirror, teardown),
		cmocka_unit_test_setup_teardown(test_quarantine_kept_beyond_lru,
						setup_cache, teardown),
		cmocka_unit_test_setup_teardown(test_lru_bound_and_touch,
						setup_cache, teardown),
		cmocka_unit_test_setup_teardown(test_window_batches_keys,
						setup_bare, teardown),
		cmocka_unit_test_setup_teardown(test_max_batch_splits,
						setup_bare, teardown),
		cmocka_unit_test_setup_teardown(test_keys_are_per_parent,
						setup_cache, teardown),
		cmocka_unit_test_setup_teardown(test_bad_names, setup_cache,
						teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_answers_parked,
						setup_cache, teardown),
		/* inline probes */
		cmocka_unit_test_setup_teardown(
			test_inline_probe_answers_before_return, setup_bare,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_inline_probe_others_wait_for_worker, setup_bare,
			teardown),
		cmocka_unit_test_setup_teardown(test_inline_probe_stale_result,
						setup_bare, teardown),
		/* threaded mode */
		cmocka_unit_test_setup_teardown(
			test_threaded_concurrent_lookups_one_probe, setup_bare,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_threaded_cancel_races_answer, setup_bare,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_threaded_free_answers_parked, setup_bare,
			teardown),
		cmocka_unit_test_setup_teardown(test_threaded_window_real_clock,
						setup_bare, teardown),
	};

	log_set_level(LOG_LVL_ERR); /* the probe-error test warns */
	return cmocka_run_group_tests_name("verdict", tests, NULL, NULL);
}
