/* SPDX-License-Identifier: MIT */
/*
 * Capacity accounting and eviction (see capacity.h): the use estimate, the
 * touch queue, LRU eviction down to a target, and making room for a store.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "capacity.h"
#include "fs.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "store.h"

/* Names per index listing while evicting. */
#define CAP_BATCH 64
/*
 * Room kept free below the high watermark for what use grows by between
 * two measurements without being counted as it happens: the index log
 * (some 50 KiB a store until it reaches its steady size).
 */
#define CAP_SLACK_MAX (1ull << 20)

int cap_new(struct cap **out, struct idx *idx, struct store *st,
	    const struct cap_config *cfg)
{
	struct cap *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->idx = idx;
	c->store = st;
	pthread_mutex_init(&c->evict_lock, NULL);
	pthread_mutex_init(&c->touch_lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	*out = c;
	return 0;
}

void cap_free(struct cap *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->evict_lock);
	pthread_mutex_destroy(&c->touch_lock);
	pthread_cond_destroy(&c->wake);
	free(c);
}

uint64_t cap_used(struct cap *c)
{
	int64_t v = atomic_load(&c->used_est);

	return v > 0 ? (uint64_t)v : 0;
}

void cap_used_add(struct cap *c, int64_t delta)
{
	atomic_fetch_add(&c->used_est, delta);
}

void cap_touch(struct cap *c, uint64_t ino)
{
	cap_touch_at(c, ino, (int64_t)clock_now(&c->cfg.clock), 0);
}

void cap_touch_at(struct cap *c, uint64_t ino, int64_t t, int atime)
{
	pthread_mutex_lock(&c->touch_lock);
	if (c->ntouch < CAP_TOUCH_MAX) {
		c->touch_ino[c->ntouch] = ino;
		c->touch_ns[c->ntouch] = t;
		c->touch_atime[c->ntouch] = atime != 0;
		c->ntouch++;
	}
	if (c->ntouch >= CAP_TOUCH_MAX / 2)
		pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->touch_lock);
}

void cap_flush_touches(struct cap *c)
{
	uint64_t inos[CAP_TOUCH_MAX];
	int64_t times[CAP_TOUCH_MAX];
	unsigned char atime[CAP_TOUCH_MAX];
	size_t n;
	int rc;

	pthread_mutex_lock(&c->touch_lock);
	n = c->ntouch;
	memcpy(inos, c->touch_ino, n * sizeof(*inos));
	memcpy(times, c->touch_ns, n * sizeof(*times));
	memcpy(atime, c->touch_atime, n);
	c->ntouch = 0;
	pthread_mutex_unlock(&c->touch_lock);
	if (n == 0)
		return;
	rc = idx_touch(c->idx, n, inos, times, atime);
	if (rc < 0)
		log_warn("cannot record %zu access times: %s", n,
			 strerror(-rc));
}

void cap_measure(struct cap *c)
{
	static const char *const idx_files[] = {"index.db", "index.db-wal"};
	uint64_t bytes = 0, nfiles = 0;
	char path[4096];
	struct stat sb;

	if (store_usage(c->store, &bytes, &nfiles) < 0)
		return;
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", c->cfg.datadir,
			 idx_files[i]);
		if (stat(path, &sb) == 0)
			bytes += (uint64_t)sb.st_blocks * 512;
	}
	/*
	 * Name records kept back were counted when renames made them, and
	 * queued records when their files were closed: not on disk yet.
	 */
	bytes += store_names_bytes(c->store);
	bytes += (uint64_t)atomic_load(&c->reserved);
	atomic_store(&c->used_est, (int64_t)bytes);
	atomic_store(&c->ndatafiles, nfiles);
}

/*
 * Evicts from one LRU batch until use is at most target. The daemon's
 * remove frees an evicted record at once (and lowers the estimate) unless
 * a handle opened the file meanwhile: use is read again after each name,
 * so such a record, still on disk, does not count as room made.
 */
static void cap_evict_batch(struct cap *c, const struct idx_name *batch,
			    int got, uint64_t target, struct fs_evict_result *r)
{
	for (int i = 0; i < got && cap_used(c) > target; i++) {
		if (!c->cfg.remove(c->cfg.ctx, &batch[i]))
			continue;
		r->bytes += batch[i].size;
		r->blocks++;
	}
}

void cap_evict(struct cap *c, uint64_t target, struct fs_evict_result *r)
{
	struct idx_name *batch;
	int64_t after_ns = INT64_MIN;
	uint64_t after_ino = 0;
	int got;

	memset(r, 0, sizeof(*r));
	r->used_before = r->used_after = cap_used(c);
	batch = calloc(CAP_BATCH, sizeof(*batch));
	if (!batch)
		return;
	pthread_mutex_lock(&c->evict_lock);
	cap_flush_touches(c);
	r->used_before = cap_used(c);
	while (cap_used(c) > target) {
		got = idx_lru(c->idx, after_ns, after_ino, batch, CAP_BATCH);
		if (got <= 0)
			break;
		cap_evict_batch(c, batch, got, target, r);
		after_ns = batch[got - 1].time_ns;
		after_ino = batch[got - 1].ino;
	}
	r->used_after = cap_used(c);
	pthread_mutex_unlock(&c->evict_lock);
	free(batch);
	if (r->blocks)
		atomic_fetch_add(&c->evicted, r->blocks);
}

int cap_make_room(struct cap *c, uint64_t want)
{
	/* Stores keep use under the high watermark, not just the capacity. */
	uint64_t cap = c->cfg.high_wm, target, bytes;
	struct fs_evict_result r;

	bytes = want + (cap / 64 < CAP_SLACK_MAX ? cap / 64 : CAP_SLACK_MAX);
	if (cap_used(c) + bytes <= cap)
		return 0;
	if (bytes > cap)
		goto out_full;
	target = c->cfg.low_wm < cap - bytes ? c->cfg.low_wm : cap - bytes;
	cap_evict(c, target, &r);
	if (r.blocks)
		log_info("evicted %llu blocks (%llu bytes) to make room for "
			 "a store",
			 (unsigned long long)r.blocks,
			 (unsigned long long)r.bytes);
	/* Only room really freed counts: an evicted record still open does not. */
	if (cap_used(c) + bytes <= cap)
		return 0;
out_full:
	atomic_fetch_add(&c->enospc, 1);
	log_warn("high watermark %llu bytes reached and nothing can be "
		 "evicted (all open): store of %llu bytes refused",
		 (unsigned long long)cap, (unsigned long long)want);
	return -ENOSPC;
}

int cap_wait(struct cap *c, unsigned ms)
{
	struct timespec ts;
	int stop;

	pthread_mutex_lock(&c->touch_lock);
	if (!c->stop) {
		/* pthread_cond_timedwait's deadline is on CLOCK_REALTIME. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)ms * 1000000L;
		while (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->wake, &c->touch_lock, &ts);
	}
	stop = c->stop;
	pthread_mutex_unlock(&c->touch_lock);
	return stop;
}

void cap_stop_waiters(struct cap *c)
{
	pthread_mutex_lock(&c->touch_lock);
	c->stop = 1;
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->touch_lock);
}

uint64_t fs_used(struct fs *fs)
{
	return cap_used(fs->cap);
}

void fs_touch(struct fs *fs, uint64_t ino)
{
	cap_touch(fs->cap, ino);
}

int fs_make_room(struct fs *fs, uint64_t bytes)
{
	return cap_make_room(fs->cap, bytes);
}

void fs_evict(struct fs *fs, uint64_t target, struct fs_evict_result *r)
{
	cap_evict(fs->cap, target, r);
}

static int cap_up_room(void *ctx, uint64_t bytes)
{
	return cap_make_room(ctx, bytes);
}

static void cap_up_touch(void *ctx, uint64_t ino)
{
	cap_touch(ctx, ino);
}

static void cap_up_used(void *ctx, int64_t delta)
{
	cap_used_add(ctx, delta);
}

void cap_reserved_add(struct cap *c, int64_t delta)
{
	atomic_fetch_add(&c->reserved, delta);
	atomic_fetch_add(&c->used_est, delta);
}

static void cap_up_reserved(void *ctx, int64_t delta)
{
	cap_reserved_add(ctx, delta);
}

void cap_set_upcalls(struct fs *fs)
{
	fs->up = (struct fs_upcalls){
		.make_room = cap_up_room,
		.touch = cap_up_touch,
		.used = cap_up_used,
		.reserved = cap_up_reserved,
		.ctx = fs->cap,
	};
}
