/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's keeper thread (share.h): reconnects after a failure,
 * sends last uses in batches and, holding the pool-wide lease, sweeps the
 * pool to its capacity. Also the inode sets, and the start and stop of the
 * threads.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "fs.h"
#include "rtier.h"
#include "share.h"
#include "share_int.h"

/* The keeper looks at its clocks this often (ms). */
#define SHARE_TICK_MS 500
/* Last uses held for the next batch; more wait for a later one. */
#define SHARE_TOUCH_MAX 65536u
/* A sweep frees down to this share of the capacity (percent). */
#define SHARE_SWEEP_LOW 90u

/* ---- inode sets ---- */

static size_t set_slot(const struct share_set *s, uint64_t ino)
{
	size_t i = (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 17) & (s->cap - 1);

	while (s->v[i] && s->v[i] != ino)
		i = (i + 1) & (s->cap - 1);
	return i;
}

int set_has(const struct share_set *s, uint64_t ino)
{
	return s->cap && s->v[set_slot(s, ino)] == ino;
}

int set_add(struct share_set *s, uint64_t ino)
{
	if (2 * (s->n + 1) > s->cap) {
		struct share_set t = {.cap = s->cap ? 2 * s->cap : 64};

		t.v = calloc(t.cap, sizeof(*t.v));
		if (!t.v)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				t.v[set_slot(&t, s->v[i])] = s->v[i];
		t.n = s->n;
		free(s->v);
		*s = t;
	}
	if (s->v[set_slot(s, ino)] != ino) {
		s->v[set_slot(s, ino)] = ino;
		s->n++;
	}
	return 0;
}

void set_del(struct share_set *s, uint64_t ino)
{
	size_t i, j;

	if (!set_has(s, ino))
		return;
	i = set_slot(s, ino);
	s->v[i] = 0;
	s->n--;
	/* Re-place the run after the hole, so probes still find them. */
	for (j = (i + 1) & (s->cap - 1); s->v[j]; j = (j + 1) & (s->cap - 1)) {
		uint64_t v = s->v[j];

		s->v[j] = 0;
		s->v[set_slot(s, v)] = v;
	}
}

void set_free(struct share_set *s)
{
	free(s->v);
	*s = (struct share_set){0};
}

void share_mark(struct share *sh, uint64_t ino)
{
	pthread_mutex_lock(&sh->mark_lock);
	if (set_add(&sh->shared, ino) < 0)
		log_warn("shared tier: out of memory: inode %llu will not be "
			 "checked against the pool",
			 (unsigned long long)ino);
	pthread_mutex_unlock(&sh->mark_lock);
}

void share_forget_all(struct share *sh)
{
	pthread_mutex_lock(&sh->mark_lock);
	set_free(&sh->shared);
	memset(sh->missed, 0, sizeof(sh->missed));
	memset(sh->whole, 0, sizeof(sh->whole));
	memset(sh->big, 0, sizeof(sh->big));
	pthread_mutex_unlock(&sh->mark_lock);
}

int share_marked(struct share *sh, uint64_t ino)
{
	int r;

	pthread_mutex_lock(&sh->mark_lock);
	r = set_has(&sh->shared, ino);
	pthread_mutex_unlock(&sh->mark_lock);
	return r;
}

void share_touch(struct fs *fs, uint64_t ino)
{
	struct share *sh = fs->share;

	if (!sh)
		return;
	pthread_mutex_lock(&sh->mark_lock);
	if (set_has(&sh->shared, ino) && sh->ntouches < SHARE_TOUCH_MAX) {
		if (!sh->touches)
			sh->touches =
				malloc(SHARE_TOUCH_MAX * sizeof(*sh->touches));
		/* The use's own time: the batch goes later. */
		if (sh->touches)
			sh->touches[sh->ntouches++] = (struct share_touch){
				ino, (int64_t)clock_realtime_ns()};
	}
	pthread_mutex_unlock(&sh->mark_lock);
}

/* ---- the keeper ---- */

/* Sends the last uses gathered since the previous batch. */
static void share_flush_touches(struct share *sh, struct rtier *rt)
{
	struct share_touch *t;
	const char **paths;
	uint64_t *sizes;
	int64_t *times;
	size_t k = 0, n;
	int rc = 0;

	pthread_mutex_lock(&sh->mark_lock);
	t = sh->touches;
	n = sh->ntouches;
	sh->touches = NULL;
	sh->ntouches = 0;
	pthread_mutex_unlock(&sh->mark_lock);
	paths = calloc(n + 1, sizeof(*paths));
	sizes = calloc(n + 1, sizeof(*sizes));
	times = calloc(n + 1, sizeof(*times));
	for (size_t i = 0; paths && sizes && times && i < n; i++) {
		char buf[RTIER_PATH_MAX + 1];
		struct idx_attr a;

		if (idx_getattr(sh->fs->idx, t[i].ino, &a) < 0 ||
		    idx_path(sh->fs->idx, t[i].ino, buf, sizeof(buf)) < 0)
			continue;
		paths[k] = strdup(buf);
		sizes[k] = a.size;
		times[k] = t[i].t;
		k += paths[k] != NULL;
	}
	if (k)
		rc = rtier_touch(rt, k, paths, sizes, times);
	if (rc < 0)
		share_fail(sh, rc, "recording last uses");
	for (size_t i = 0; i < k; i++)
		free((char *)paths[i]);
	free(paths);
	free(sizes);
	free(times);
	free(t);
}

/* Takes or renews the lease; the holder sweeps when over capacity. */
static void share_sweep(struct share *sh, struct rtier *rt)
{
	const struct fs_config *c = &sh->fs->cfg;
	uint64_t cap = atomic_load(&sh->capacity), bytes = 0, blocks = 0;
	uint64_t removed = 0, freed = 0;
	int rc;

	if (!cap)
		return;
	rc = rtier_sweep_lock(rt, sh->cookie, c->rados_lease);
	if (rc < 0) {
		share_fail(sh, rc, "taking the sweeper lease");
		return;
	}
	if (atomic_exchange(&sh->sweeper, rc) != rc)
		log_info("shared tier: %s the sweeper lease",
			 rc ? "took" : "lost");
	if (!rc)
		return;
	rc = rtier_usage(rt, &bytes, &blocks);
	if (rc == 0)
		atomic_store(&sh->st.usage_bytes, bytes);
	if (rc == 0 && bytes > cap)
		rc = rtier_sweep(rt, cap / 100 * SHARE_SWEEP_LOW, &removed,
				 &freed);
	if (rc < 0) {
		share_fail(sh, rc, "sweeping the pool");
		return;
	}
	atomic_fetch_add(&sh->st.sweeps, 1);
	if (!removed)
		return;
	atomic_fetch_add(&sh->st.swept, removed);
	atomic_fetch_add(&sh->st.swept_bytes, freed);
	atomic_store(&sh->st.usage_bytes, bytes - freed);
	log_info("shared tier: swept %llu blocks (%llu bytes), least recently "
		 "used first: the pool held %llu of %llu bytes",
		 (unsigned long long)removed, (unsigned long long)freed,
		 (unsigned long long)bytes, (unsigned long long)cap);
}

static void *share_keeper(void *arg)
{
	struct share *sh = arg;
	const struct fs_config *c = &sh->fs->cfg;
	uint64_t last_try, last_sweep = 0, now;
	struct timespec dl;
	struct rtier *rt;

	share_connect(sh);
	last_try = clock_monotonic_ns();
	pthread_mutex_lock(&sh->lock);
	while (!sh->stop) {
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += SHARE_TICK_MS * 1000000l;
		dl.tv_sec += dl.tv_nsec / 1000000000;
		dl.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&sh->cond, &sh->lock, &dl);
		if (sh->stop)
			break;
		pthread_mutex_unlock(&sh->lock);
		now = clock_monotonic_ns();
		if (!atomic_load(&sh->reachable))
			share_disconnect(sh);
		if (!atomic_load(&sh->reachable) &&
		    now - last_try >= c->rados_retry * 1000000000ull) {
			last_try = now;
			share_connect(sh);
		}
		rt = now - last_sweep >= c->rados_sweep_interval * 1000000000ull
			     ? share_rt_get(sh)
			     : NULL;
		if (rt) {
			last_sweep = now;
			share_flush_touches(sh, rt);
			share_sweep(sh, rt);
			share_rt_put(sh);
		}
		pthread_mutex_lock(&sh->lock);
	}
	pthread_mutex_unlock(&sh->lock);
	return NULL;
}

/* Stops and joins the first n put threads. */
static void share_join(struct share *sh, int n)
{
	pthread_mutex_lock(&sh->lock);
	sh->stop = 1;
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
	for (int i = 0; i < n; i++)
		pthread_join(sh->putters[i], NULL);
}

int share_threads_start(struct share *sh, void *(*putter)(void *))
{
	sigset_t all, old;
	int rc = 0, n = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (; rc == 0 && n < SHARE_PUTTERS; n++)
		rc = -pthread_create(&sh->putters[n], NULL, putter, sh);
	if (rc < 0)
		n--;
	if (rc == 0)
		rc = -pthread_create(&sh->keeper, NULL, share_keeper, sh);
	if (rc < 0)
		share_join(sh, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	sh->threads = rc == 0;
	if (rc < 0)
		log_err("shared tier: cannot start its threads: %s",
			strerror(-rc));
	return rc;
}

void share_free(struct share *sh)
{
	share_queue_clear(sh);
	if (sh->rt) {
		if (atomic_load(&sh->sweeper))
			rtier_sweep_unlock(sh->rt, sh->cookie);
		rtier_close(sh->rt);
	}
	set_free(&sh->queued);
	set_free(&sh->shared);
	free(sh->touches);
	pthread_rwlock_destroy(&sh->rt_lock);
	pthread_mutex_destroy(&sh->mark_lock);
	pthread_cond_destroy(&sh->idle);
	pthread_cond_destroy(&sh->cond);
	pthread_mutex_destroy(&sh->lock);
	free(sh);
}

void share_stop(struct fs *fs)
{
	struct share *sh = fs->share;

	if (!sh)
		return;
	(void)share_drain(fs, 10000);
	pthread_mutex_lock(&sh->lock);
	if (sh->nqueued)
		log_warn("shared tier: %zu puts and removals not done at "
			 "unmount: those blocks stay local only",
			 sh->nqueued);
	pthread_mutex_unlock(&sh->lock);
	if (sh->threads) {
		share_join(sh, SHARE_PUTTERS);
		pthread_join(sh->keeper, NULL);
	}
	fs->saved = NULL;
	fs->share = NULL;
	share_free(sh);
}
