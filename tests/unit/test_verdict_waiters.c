/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for core/verdict.c through the FUSE waiter API (park,
 * coalesce, cancel, bump, quarantine, LRU, window, bad names, shutdown),
 * inline probes, and threaded-mode races with a real worker and a probe the
 * test holds shut. The request-id API is in test_verdict.c; the fixture in
 * test_verdict.h.
 */
#include "test_verdict.h"

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

/*
 * With times to live (the shared tier), a miss and a hit are probed again
 * once old enough, as a new generation; a quarantined miss is not.
 */
static void test_ttl_expires_resolved(void **state)
{
	struct tv_fx *fx = *state;
	struct vc_config cfg = {
		.retain = 8, .miss_ttl_ns = 1000, .hit_ttl_ns = 5000};
	struct tv_waiter w[4] = {0};
	uint64_t ga, gb, g;

	tv_fx_start(fx, &cfg);
	tv_present_add(fx, "a", 7);
	assert_int_equal(tv_resolve(fx, "a", &ga), VC_HIT);
	assert_int_equal(tv_resolve(fx, "b", &gb), VC_MISS);
	fake_clock_advance(&fx->clk, 999);
	assert_int_equal(tv_look(fx, "b", &w[0], NULL, NULL), VC_MISS);
	fake_clock_advance(&fx->clk, 1);
	/* Another machine stored b meanwhile: the probe sees it. */
	tv_present_add(fx, "b", 8);
	assert_int_equal(tv_look(fx, "b", &w[1], NULL, &g), VC_PARKED);
	assert_true(g > gb);
	assert_int_equal(tv_look(fx, "a", &w[2], NULL, NULL), VC_HIT);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(w[1].result, VC_HIT);
	assert_int_equal(w[1].ino, 8);
	fake_clock_advance(&fx->clk, 4000);
	assert_int_equal(tv_look(fx, "a", &w[3], NULL, &g), VC_PARKED);
	assert_true(g > ga);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(w[3].result, VC_HIT);
	assert_int_equal(tv_calls(fx), 4);
	/* A quarantined miss outlives every time to live. */
	assert_int_equal(vc_mark_miss(fx->vc, TV_PARENT, "a", w[3].gen), 1);
	fake_clock_advance(&fx->clk, 1000000);
	memset(w, 0, sizeof(w));
	assert_int_equal(tv_look(fx, "a", &w[0], NULL, NULL), VC_MISS);
	assert_int_equal(tv_calls(fx), 4);
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
#define M(fn) cmocka_unit_test_setup_teardown(fn, setup_mirror, teardown)
#define C(fn) cmocka_unit_test_setup_teardown(fn, setup_cache, teardown)
#define B(fn) cmocka_unit_test_setup_teardown(fn, setup_bare, teardown)
		C(test_lookup_parks_then_answers),
		C(test_lookups_of_one_key_share_one_probe),
		C(test_cancel_parked_waiter),
		C(test_probe_error_answers_error_and_drops),
		C(test_bump_pending_resolves_with_new_truth),
		C(test_bump_in_flight_discards_stale_result),
		C(test_bump_unknown_key),
		M(test_bump_unknown_key_mirror),
		C(test_quarantine_kept_beyond_lru),
		C(test_lru_bound_and_touch),
		B(test_ttl_expires_resolved),
		B(test_window_batches_keys),
		B(test_max_batch_splits),
		C(test_keys_are_per_parent),
		C(test_bad_names),
		C(test_shutdown_answers_parked),
		B(test_inline_probe_answers_before_return),
		B(test_inline_probe_others_wait_for_worker),
		B(test_inline_probe_stale_result),
		B(test_threaded_concurrent_lookups_one_probe),
		B(test_threaded_cancel_races_answer),
		B(test_threaded_free_answers_parked),
		B(test_threaded_window_real_clock),
#undef M
#undef C
#undef B
	};

	log_set_level(LOG_LVL_ERR); /* the probe-error test warns */
	return cmocka_run_group_tests_name("verdict_waiters", tests, NULL,
					   NULL);
}
