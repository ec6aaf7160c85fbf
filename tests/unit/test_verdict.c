/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for core/verdict.c through the request-id API: the scenarios
 * of vLLM's test_async_lookup.py, and the generation cases the contract
 * adds (orphans, recreated states, the seed crash). The FUSE waiter API and
 * threaded mode are in test_verdict_waiters.c; the fixture in
 * test_verdict.h. Manual mode with a fake clock: no sleeps.
 */
#include "test_verdict.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
#define M(fn) cmocka_unit_test_setup_teardown(fn, setup_mirror, teardown)
#define C(fn) cmocka_unit_test_setup_teardown(fn, setup_cache, teardown)
#define B(fn) cmocka_unit_test_setup_teardown(fn, setup_bare, teardown)
		M(test_new_key_returns_unknown),
		M(test_found_key_returns_hit),
		M(test_not_found_key_returns_miss),
		M(test_multiple_keys_single_step),
		M(test_cleanup_removes_entries),
		M(test_cleanup_preserves_shared_entries),
		M(test_flush_empty_posts_nothing),
		M(test_repeated_lookup_not_queued_twice),
		M(test_cleanup_unknown_req_is_noop),
		M(test_multiple_flushes_across_steps),
		B(test_shutdown_unblocks_worker),
		M(test_mark_miss_flips_cached_verdict_without_reprobing),
		M(test_second_result_for_generation_refused),
		M(test_cleanup_in_flight_keeps_probe_then_drops_orphan),
		M(test_new_request_joins_orphaned_probe),
		M(test_recreated_state_ignores_old_generation),
		M(test_seed_crash_newer_pending),
		M(test_seed_crash_newer_in_flight),
		M(test_mark_miss_older_gen_on_newer_resolved_noop),
		M(test_bump_cannot_resurrect_unlinked_name),
#undef M
#undef C
#undef B
	};

	log_set_level(LOG_LVL_ERR); /* the probe-error test warns */
	return cmocka_run_group_tests_name("verdict", tests, NULL, NULL);
}
