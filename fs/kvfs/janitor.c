/* SPDX-License-Identifier: MIT */
/*
 * The janitor thread: every JANITOR_PERIOD_MS (or sooner when the touch
 * queue fills half way) it writes the queued access times to the index,
 * writes the name records renames kept back, records the data files'
 * recovery horizons, measures use, evicts above the high watermark down to
 * the low one (capacity.c), and removes stale engine temp files
 * (tmpsweep.c). What each of those does is in its own module; this file
 * only says when.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "capacity.h"
#include "fs.h"
#include "janitor.h"
#include "recover.h"
#include "tmpsweep.h"

/* How often the janitor measures, evicts and writes last-use times. */
#define JANITOR_PERIOD_MS 200

/* The janitor's view of the recovery horizons it recorded. */
struct janitor_hz {
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
static void janitor_horizons(struct fs *fs, struct janitor_hz *hz)
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

static void *janitor_main(void *arg)
{
	struct fs *fs = arg;
	int64_t last_tmp = fs_now_ns();
	struct janitor_hz *hz = calloc(1, sizeof(*hz));
	struct fs_evict_result r;

	/*
	 * A temp file from before this mount was left by an engine that
	 * crashed or lost the last mount: nobody can finish it.
	 */
	tmp_sweep(fs, fs->start_ns);
	while (!cap_wait(fs->cap, JANITOR_PERIOD_MS)) {
		cap_flush_touches(fs->cap);
		if (store_flush_names(fs->store) < 0)
			log_warn("name records of recent renames are lost: a "
				 "rebuilt index lists those files under their "
				 "old names");
		if (hz)
			janitor_horizons(fs, hz);
		cap_measure(fs->cap);
		if (fs_used(fs) > fs->cfg.high_wm) {
			cap_evict(fs->cap, fs->cfg.low_wm, &r);
			if (r.blocks)
				log_info("above the high watermark: evicted "
					 "%llu blocks (%llu bytes)",
					 (unsigned long long)r.blocks,
					 (unsigned long long)r.bytes);
		}
		if (fs_now_ns() - last_tmp > fs->cfg.tmp_max_age_ns / 4 + 1) {
			last_tmp = fs_now_ns();
			tmp_sweep(fs, last_tmp - fs->cfg.tmp_max_age_ns);
		}
	}
	cap_flush_touches(fs->cap);
	if (hz)
		janitor_horizons(fs, hz);
	free(hz);
	return NULL;
}

int janitor_start(struct fs *fs)
{
	sigset_t all, old;
	int rc;

	cap_measure(fs->cap);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&fs->janitor, NULL, janitor_main, fs);
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
	cap_stop_waiters(fs->cap);
	pthread_join(fs->janitor, NULL);
	fs->janitor_running = 0;
}
