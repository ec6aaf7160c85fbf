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
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capacity.h"
#include "fs.h"
#include "janitor.h"
#include "node.h"
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

/* The kernel's readahead for the mount, KiB: four requests of 1 MiB. */
#define JANITOR_READ_AHEAD_KB 4096

/*
 * The "MAJ:MIN" of the newest mount at mnt (realpath'd), from
 * /proc/self/mountinfo, without a request to the mount itself. 0, or -1
 * when it is not there.
 */
static int janitor_mount_dev(const char *mnt, char *dev, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], point[4096], id[64];
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		size_t o = 0;

		if (sscanf(line, "%*s %*s %63s %*s %4095s", id, point) != 2)
			continue;
		/* Unescape \ooo (a space is \040). */
		for (size_t i = 0; point[i]; i++, o++) {
			if (point[i] == '\\' && point[i + 1] && point[i + 2] &&
			    point[i + 3]) {
				point[o] = (char)(((point[i + 1] - '0') << 6) |
						  ((point[i + 2] - '0') << 3) |
						  (point[i + 3] - '0'));
				i += 3;
			} else {
				point[o] = point[i];
			}
		}
		point[o] = '\0';
		if (strcmp(point, mnt) == 0) {
			snprintf(dev, len, "%s", id);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

/*
 * Raises the kernel's readahead for the mount from the default 128 KiB to
 * four 1 MiB requests, once the INIT handshake has set it (it would lower
 * a value set before): a buffered sequential read of a large file then
 * costs a round trip per MiB, not per 128 KiB (measured: 8 GiB read back
 * at 0.48 of ext4 with 128 KiB, 0.98 with 1 MiB), and four of them are in
 * flight, so the daemon's O_DIRECT reads of the backing file overlap
 * (dd of 8 GiB after a cache drop, alternating runs: 1.8-1.9 GB/s with
 * 1 MiB, 2.3-2.5 with 4 MiB, 1.8-1.9 with 16 MiB). Needs root; otherwise
 * the default stays, and one line says so.
 */
static void janitor_readahead(const char *mnt)
{
	char dev[64], path[128];
	int fd, ok = 0;

	if (janitor_mount_dev(mnt, dev, sizeof(dev)) == 0) {
		snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb",
			 dev);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		ok = fd >= 0 && dprintf(fd, "%d\n", JANITOR_READ_AHEAD_KB) > 0;
		if (fd >= 0)
			close(fd);
	}
	if (ok)
		log_debug("readahead of %s: %d KiB", mnt,
			  JANITOR_READ_AHEAD_KB);
	else
		log_info("readahead of %s left at the kernel's default (cannot "
			 "set %d KiB: not root?)",
			 mnt, JANITOR_READ_AHEAD_KB);
}

static void *janitor_main(void *arg)
{
	struct fs *fs = arg;
	int64_t last_tmp = fs_now_ns();
	struct janitor_hz *hz = calloc(1, sizeof(*hz));
	struct fs_evict_result r;
	int readahead_set = 0;

	/*
	 * A temp file from before this mount was left by an engine that
	 * crashed or lost the last mount: nobody can finish it.
	 */
	tmp_sweep(fs, fs->start_ns);
	while (!cap_wait(fs->cap, JANITOR_PERIOD_MS)) {
		if (!readahead_set) {
			readahead_set = 1;
			janitor_readahead(fs->cfg.mountpoint);
		}
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
		/* Every change of the last period, in one commit. */
		node_commit(fs, 0);
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
