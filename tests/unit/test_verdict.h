/* SPDX-License-Identifier: MIT */
/*
 * Shared fixture of the verdict cache's unit tests (test_verdict.c,
 * test_verdict_waiters.c): a probe that answers from a table of present
 * names (and can be held shut by the test), an answer callback that records
 * each waiter's reply, a fake clock, and three setups: manual mode with
 * retain 0 (vLLM's semantics), manual mode with a small LRU (the FUSE
 * cache), and a bare fixture whose test starts the cache itself. Header-only with static inline
 * functions: include it from each test program once. Manual-mode tests
 * drive vc_flush()/vc_poll() by hand: no sleeps.
 */
#ifndef KVFS_TEST_VERDICT_H
#define KVFS_TEST_VERDICT_H

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

static inline uint64_t tv_now(void *ctx)
{
	struct tv_fx *fx = ctx;

	return fake_clock_now(&fx->clk);
}

static inline int tv_probe(void *ctx, size_t n, const uint64_t *parents,
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

static inline void tv_answer(void *ctx, void *waiter, int result, uint64_t ino,
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

static inline struct tv_fx *tv_fx_new(void)
{
	struct tv_fx *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	pthread_mutex_init(&fx->mu, NULL);
	pthread_cond_init(&fx->cv, NULL);
	return fx;
}

static inline void tv_fx_start(struct tv_fx *fx, const struct vc_config *cfg)
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
static inline int setup_mirror(void **state)
{
	struct tv_fx *fx = tv_fx_new();
	struct vc_config cfg = {.retain = 0, .threaded = 0};

	tv_fx_start(fx, &cfg);
	*state = fx;
	return 0;
}

/* Manual mode, a small LRU: the FUSE cache. */
static inline int setup_cache(void **state)
{
	struct tv_fx *fx = tv_fx_new();
	struct vc_config cfg = {.retain = 2, .threaded = 0};

	tv_fx_start(fx, &cfg);
	*state = fx;
	return 0;
}

/* No vc yet: the test starts it with its own config. */
static inline int setup_bare(void **state)
{
	*state = tv_fx_new();
	return 0;
}

static inline int teardown(void **state)
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

static inline void tv_present_add(struct tv_fx *fx, const char *name,
				  uint64_t ino)
{
	assert_true(fx->npresent < TV_MAX_PRESENT);
	fx->present[fx->npresent++] = (struct tv_present){TV_PARENT, name, ino};
}

/* vLLM lookup(key, req_id) in directory TV_PARENT. */
static inline int tv_req(struct tv_fx *fx, uint64_t req, const char *name,
			 uint64_t *gen)
{
	uint64_t ino, g;

	return vc_req_lookup(fx->vc, req, TV_PARENT, name, &ino,
			     gen ? gen : &g);
}

static inline int tv_look(struct tv_fx *fx, const char *name,
			  struct tv_waiter *w, uint64_t *ino, uint64_t *gen)
{
	uint64_t i, g;

	return vc_lookup(fx->vc, TV_PARENT, name, w, ino ? ino : &i,
			 gen ? gen : &g);
}

static inline struct vc_stats tv_stats(struct tv_fx *fx)
{
	struct vc_stats st;

	vc_get_stats(fx->vc, &st);
	return st;
}

static inline struct vc_info tv_info(struct tv_fx *fx, const char *name)
{
	struct vc_info info;

	assert_int_equal(vc_query(fx->vc, TV_PARENT, name, &info), 0);
	return info;
}

static inline bool tv_known(struct tv_fx *fx, const char *name)
{
	struct vc_info info;

	return vc_query(fx->vc, TV_PARENT, name, &info) == 0;
}

static inline int tv_calls(struct tv_fx *fx)
{
	int n;

	pthread_mutex_lock(&fx->mu);
	n = fx->calls;
	pthread_mutex_unlock(&fx->mu);
	return n;
}

static inline void tv_deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += TV_WAIT_S;
}

/* Waits until answer() ran n times in all; fails after TV_WAIT_S. */
static inline void tv_wait_answers(struct tv_fx *fx, int n)
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
static inline void tv_wait_count(struct tv_fx *fx, const int *count, int n)
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
static inline void tv_wait_calls(struct tv_fx *fx, int n)
{
	tv_wait_count(fx, &fx->calls, n);
}

static inline void tv_gate(struct tv_fx *fx, bool gated, bool open)
{
	pthread_mutex_lock(&fx->mu);
	fx->gated = gated;
	fx->gate_open = open;
	pthread_cond_broadcast(&fx->cv);
	pthread_mutex_unlock(&fx->mu);
}

/* Resolves name through one parked waiter and one probe (manual mode). */
static inline int tv_resolve(struct tv_fx *fx, const char *name, uint64_t *gen)
{
	struct tv_waiter w = {0};

	assert_int_equal(tv_look(fx, name, &w, NULL, NULL), VC_PARKED);
	assert_int_equal(vc_poll(fx->vc), 1);
	assert_int_equal(atomic_load(&w.nreplies), 1);
	if (gen)
		*gen = w.gen;
	return w.result;
}

#endif
