/* SPDX-License-Identifier: MIT */
/*
 * Capacity and housekeeping: the janitor thread and what it shares with
 * the request path.
 *
 * - Accesses (opens and stores) are queued in memory (fs_touch, any thread)
 *   and written to the index's last-use times in batches by the janitor
 *   (not the visible atime, which only setattr changes): never a
 *   synchronous write on the hot path.
 * - Use is the data files' physical size (st_blocks, so punched holes do
 *   not count) plus the index, measured by the janitor each round and
 *   adjusted between rounds by what is appended and freed. Above the high
 *   watermark the janitor evicts least-recently-used blocks that nobody has
 *   open until the estimate is below the low watermark. A store that would
 *   go past the capacity evicts in place first (fs_make_room) and fails
 *   with ENOSPC only when nothing can be evicted.
 * - Evicting a name is an unlink made by the daemon: the index forgets the
 *   name, the verdict cache gets a new generation saying "absent", the
 *   kernel is told to forget its dentry, and the record is punched out once
 *   no node holds the inode.
 * - Stale temporary files of a crashed engine (vLLM's "<block>_<n>.tmp"
 *   and ".o_direct_probe_<n>.tmp") are removed: at start-up all of them
 *   (no process can hold one open through a mount that did not exist), and
 *   later those older than tmp_max_age that no handle has open.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs_int.h"
#include "notify.h"
#include "recover.h"

/* Names per index listing while evicting or collecting temp files. */
#define EVICT_BATCH 64
/* How often the janitor measures, evicts and writes last-use times. */
#define EVICT_PERIOD_MS 200
/* Accesses queued before the janitor is woken early. */
#define EVICT_TOUCH_MAX 4096

uint64_t fs_used(struct fs *fs)
{
	int64_t v = atomic_load(&fs->used_est);

	return v > 0 ? (uint64_t)v : 0;
}

void fs_touch(struct fs *fs, uint64_t ino)
{
	int64_t now = fs_now_ns();

	pthread_mutex_lock(&fs->touch_lock);
	if (fs->ntouch < EVICT_TOUCH_MAX) {
		fs->touch_ino[fs->ntouch] = ino;
		fs->touch_ns[fs->ntouch] = now;
		fs->ntouch++;
	}
	if (fs->ntouch >= EVICT_TOUCH_MAX / 2)
		pthread_cond_signal(&fs->janitor_cond);
	pthread_mutex_unlock(&fs->touch_lock);
}

/* Writes the queued accesses to the index. */
static void evict_flush_touches(struct fs *fs)
{
	uint64_t inos[EVICT_TOUCH_MAX];
	int64_t times[EVICT_TOUCH_MAX];
	size_t n;
	int rc;

	pthread_mutex_lock(&fs->touch_lock);
	n = fs->ntouch;
	memcpy(inos, fs->touch_ino, n * sizeof(*inos));
	memcpy(times, fs->touch_ns, n * sizeof(*times));
	fs->ntouch = 0;
	pthread_mutex_unlock(&fs->touch_lock);
	if (n == 0)
		return;
	rc = idx_touch(fs->idx, n, inos, times);
	if (rc < 0)
		log_warn("cannot record %zu access times: %s", n,
			 strerror(-rc));
}

/* Measures physical use: data files plus the index and its log. */
static void evict_measure(struct fs *fs)
{
	static const char *const idx_files[] = {"index.db", "index.db-wal"};
	uint64_t bytes = 0, nfiles = 0;
	char path[4096];
	struct stat sb;

	if (store_usage(fs->store, &bytes, &nfiles) < 0)
		return;
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", fs->cfg.datadir,
			 idx_files[i]);
		if (stat(path, &sb) == 0)
			bytes += (uint64_t)sb.st_blocks * 512;
	}
	/* Name records kept back were counted when renames made them. */
	bytes += store_names_bytes(fs->store);
	atomic_store(&fs->used_est, (int64_t)bytes);
	atomic_store(&fs->ndatafiles, nfiles);
}

/*
 * Removes the name e on the daemon's own initiative (eviction, stale temp
 * file). Returns 1 when removed, 0 when skipped (open, or changed meanwhile).
 */
static int evict_name(struct fs *fs, const struct idx_name *e)
{
	int64_t now = fs_now_ns();
	struct idx_attr a;
	uint32_t nlink;
	uint64_t ino;
	int rc;

	if (node_is_busy(fs, e->ino))
		return 0;
	/* The name may have been replaced since the listing. */
	if (idx_lookup(fs->idx, e->parent, e->name, &a) < 0 || a.ino != e->ino)
		return 0;
	rc = idx_unlink(fs->idx, e->parent, e->name, 0, now, &ino, &nlink);
	if (rc < 0)
		return 0;
	vc_bump(fs->vc, e->parent, e->name, 0, 0);
	notify_entry(fs->notify, e->parent, e->name);
	fs_relink(fs, ino, nlink, now);
	return 1;
}

/* Bytes a file of size bytes takes in a data file (header and padding). */
static uint64_t evict_span(uint64_t size)
{
	return KV_ALIGN + kv_align_up(size);
}

/*
 * Evicts least-recently-used blocks until the use estimate is at most
 * target. Returns the number evicted; *before and *after are the estimate
 * it started from and the one it ended with (evicted records counted as
 * freed). Serialised by evict_lock.
 */
static uint64_t evict_run(struct fs *fs, uint64_t target, uint64_t *bytes,
			  uint64_t *before, uint64_t *after)
{
	struct idx_name *batch;
	int64_t after_ns = INT64_MIN;
	uint64_t after_ino = 0, n = 0, est;
	int got;

	*bytes = 0;
	*before = *after = fs_used(fs);
	batch = calloc(EVICT_BATCH, sizeof(*batch));
	if (!batch)
		return 0;
	pthread_mutex_lock(&fs->evict_lock);
	evict_flush_touches(fs);
	/*
	 * Records of evicted names are freed when the kernel lets go of the
	 * inode, maybe later: count them off a snapshot of the estimate.
	 */
	est = *before = fs_used(fs);
	while (est > target) {
		got = idx_lru(fs->idx, after_ns, after_ino, batch, EVICT_BATCH);
		if (got <= 0)
			break;
		for (int i = 0; i < got && est > target; i++) {
			uint64_t span = evict_span(batch[i].size);

			if (!evict_name(fs, &batch[i]))
				continue;
			est = est > span ? est - span : 0;
			*bytes += batch[i].size;
			n++;
		}
		after_ns = batch[got - 1].time_ns;
		after_ino = batch[got - 1].ino;
	}
	pthread_mutex_unlock(&fs->evict_lock);
	free(batch);
	*after = est;
	if (n)
		atomic_fetch_add(&fs->evicted, n);
	return n;
}

static uint64_t evict_to(struct fs *fs, uint64_t target, uint64_t *bytes)
{
	uint64_t before, after;

	return evict_run(fs, target, bytes, &before, &after);
}

void fs_evict(struct fs *fs, uint64_t target, struct fs_evict_result *r)
{
	r->blocks = evict_run(fs, target, &r->bytes, &r->used_before,
			      &r->used_after);
}

/*
 * Room kept free below the high watermark for what use grows by between
 * two measurements without being counted as it happens: the index log
 * (some 50 KiB a store until it reaches its steady size).
 */
#define EVICT_SLACK_MAX (1ull << 20)

int fs_make_room(struct fs *fs, uint64_t want)
{
	/* Stores keep use under the high watermark, not just the capacity. */
	uint64_t cap = fs->cfg.high_wm, got, freed, target, bytes;

	bytes = want +
		(cap / 64 < EVICT_SLACK_MAX ? cap / 64 : EVICT_SLACK_MAX);
	if (fs_used(fs) + bytes <= cap)
		return 0;
	if (bytes > cap)
		goto out_full;
	target = fs->cfg.low_wm < cap - bytes ? fs->cfg.low_wm : cap - bytes;
	got = evict_to(fs, target, &freed);
	if (got) {
		log_info("evicted %llu blocks (%llu bytes) to make room for "
			 "a store",
			 (unsigned long long)got, (unsigned long long)freed);
		/* Unlinked names still held by the kernel free on FORGET. */
		if (fs_used(fs) + bytes > cap)
			atomic_fetch_sub(&fs->used_est, (int64_t)freed);
	}
	if (fs_used(fs) + bytes <= cap)
		return 0;
out_full:
	atomic_fetch_add(&fs->enospc, 1);
	log_warn("high watermark %llu bytes reached and nothing can be "
		 "evicted (all open): store of %llu bytes refused",
		 (unsigned long long)cap, (unsigned long long)want);
	return -ENOSPC;
}

/* Whether name is one of the engine's temporary names. */
static int evict_is_engine_tmp(const char *name)
{
	const char *us = strrchr(name, '_');
	size_t len = strlen(name);

	if (!us || len < 5 || strcmp(name + len - 4, ".tmp") != 0)
		return 0;
	/* "_<digits>.tmp" after "X.bin" or ".o_direct_probe" */
	for (const char *p = us + 1; p < name + len - 4; p++)
		if (*p < '0' || *p > '9')
			return 0;
	if (us == name + len - 5)
		return 0;
	return (us - name >= 4 && strncmp(us - 4, ".bin", 4) == 0) ||
	       strncmp(name, ".o_direct_probe_", 16) == 0;
}

/* Removes engine temp files last changed before cutoff_ns. */
static void evict_tmp(struct fs *fs, int64_t cutoff_ns)
{
	struct idx_name *batch;
	uint64_t after = 0, n = 0;
	int got;

	batch = calloc(EVICT_BATCH, sizeof(*batch));
	if (!batch)
		return;
	while ((got = idx_tmp_names(fs->idx, after, batch, EVICT_BATCH)) > 0) {
		for (int i = 0; i < got; i++) {
			if (!evict_is_engine_tmp(batch[i].name) ||
			    batch[i].time_ns >= cutoff_ns)
				continue;
			n += (uint64_t)evict_name(fs, &batch[i]);
		}
		after = batch[got - 1].cookie;
	}
	free(batch);
	if (n) {
		log_info("removed %llu stale temporary files of a crashed "
			 "engine",
			 (unsigned long long)n);
		atomic_fetch_add(&fs->tmp_removed, n);
	}
}

/* The janitor's view of the recovery horizons it recorded. */
struct evict_hz {
	uint32_t ids[RECOVER_MAX_HORIZONS], last_ids[RECOVER_MAX_HORIZONS];
	uint64_t offs[RECOVER_MAX_HORIZONS], last_offs[RECOVER_MAX_HORIZONS];
	uint32_t put_ids[RECOVER_MAX_HORIZONS];
	uint64_t put_offs[RECOVER_MAX_HORIZONS];
	int nlast;
};

/*
 * Records the horizons that moved since the last call, in one transaction,
 * so that recovery after a crash walks only what was appended after them.
 */
static void evict_horizons(struct fs *fs, struct evict_hz *hz)
{
	int n = store_horizons(fs->store, hz->ids, hz->offs,
			       RECOVER_MAX_HORIZONS);
	size_t nput = 0;

	for (int i = 0; i < n; i++) {
		if (recover_horizon_of(hz->last_ids, hz->last_offs, hz->nlast,
				       hz->ids[i]) == (int64_t)hz->offs[i])
			continue;
		hz->put_ids[nput] = hz->ids[i];
		hz->put_offs[nput++] = hz->offs[i];
	}
	if (nput == 0 ||
	    idx_horizons_put(fs->idx, nput, hz->put_ids, hz->put_offs) < 0)
		return;
	memcpy(hz->last_ids, hz->ids, (size_t)n * sizeof(*hz->ids));
	memcpy(hz->last_offs, hz->offs, (size_t)n * sizeof(*hz->offs));
	hz->nlast = n;
}

static void *evict_main(void *arg)
{
	struct fs *fs = arg;
	int64_t last_tmp = fs_now_ns();
	struct evict_hz *hz = calloc(1, sizeof(*hz));
	struct timespec ts;
	uint64_t n, bytes;

	/*
	 * A temp file from before this mount was left by an engine that
	 * crashed or lost the last mount: nobody can finish it.
	 */
	evict_tmp(fs, fs->start_ns);
	pthread_mutex_lock(&fs->touch_lock);
	while (!fs->janitor_stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += EVICT_PERIOD_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->janitor_cond, &fs->touch_lock, &ts);
		if (fs->janitor_stop)
			break;
		pthread_mutex_unlock(&fs->touch_lock);
		evict_flush_touches(fs);
		if (store_flush_names(fs->store) < 0)
			log_warn("name records of recent renames are lost: a "
				 "rebuilt index lists those files under their "
				 "old names");
		if (hz)
			evict_horizons(fs, hz);
		evict_measure(fs);
		if (fs_used(fs) > fs->cfg.high_wm) {
			n = evict_to(fs, fs->cfg.low_wm, &bytes);
			if (n)
				log_info("above the high watermark: evicted "
					 "%llu blocks (%llu bytes)",
					 (unsigned long long)n,
					 (unsigned long long)bytes);
		}
		if (fs_now_ns() - last_tmp > fs->cfg.tmp_max_age_ns / 4 + 1) {
			last_tmp = fs_now_ns();
			evict_tmp(fs, last_tmp - fs->cfg.tmp_max_age_ns);
		}
		pthread_mutex_lock(&fs->touch_lock);
	}
	pthread_mutex_unlock(&fs->touch_lock);
	evict_flush_touches(fs);
	if (hz)
		evict_horizons(fs, hz);
	free(hz);
	return NULL;
}

int janitor_start(struct fs *fs)
{
	sigset_t all, old;
	int rc;

	evict_measure(fs);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&fs->janitor, NULL, evict_main, fs);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	fs->janitor_running = 1;
	return 0;
}

void janitor_stop(struct fs *fs)
{
	if (!fs->janitor_running)
		return;
	pthread_mutex_lock(&fs->touch_lock);
	fs->janitor_stop = 1;
	pthread_cond_signal(&fs->janitor_cond);
	pthread_mutex_unlock(&fs->touch_lock);
	pthread_join(fs->janitor, NULL);
	fs->janitor_running = 0;
}
