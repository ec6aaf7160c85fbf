/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery of a data directory (see recover.h): which data files to
 * read and from where, dropping names whose records were cut short, and
 * recording the new horizons. The walk over one file's records and the
 * punching of unreferenced ones is the store's (store_recover_file); the
 * index says which records are referenced.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "log.h"
#include "recover.h"
#include "store.h"

/* Names per index listing while dropping. */
#define RECOVER_BATCH 64
/*
 * Data files walked from their start after a crash when no recovery horizon
 * was recorded for them (the lanes' active files and more).
 */
#define RECOVER_FILES 16

/* What one recovery works with. */
struct recover {
	struct idx *idx;
	struct store *st;
	const struct recover_ops *ops;
	struct idx_name *batch;
	uint64_t walked;
	/* Files walked (or seen whole) and their ends: the new horizons. */
	uint32_t *done;
	uint64_t *doffs;
	int ndone;
};

int64_t recover_horizon_of(const uint32_t *ids, const uint64_t *offs, int n,
			   uint32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return (int64_t)offs[i];
	return -1;
}

static int recover_ref(void *arg, uint32_t id, uint64_t off)
{
	struct recover *r = arg;

	return idx_extent_at(r->idx, id, off) == 1;
}

static int recover_next(void *arg, uint32_t id, uint64_t off, uint64_t *next)
{
	struct recover *r = arg;

	return idx_next_extent(r->idx, id, off, next);
}

/* Drops the names whose records file id (size bytes) no longer holds. */
static uint64_t recover_drop_short(struct recover *r, uint32_t id,
				   uint64_t size)
{
	struct idx_name *batch = r->batch;
	uint64_t dropped = 0;
	int got, passes = 0;

	while (passes++ < 4096 &&
	       (got = idx_records_past(r->idx, id, size, batch,
				       RECOVER_BATCH)) > 0) {
		for (int i = 0; i < got; i++) {
			uint32_t nlink = 0;
			uint64_t ino;

			if (batch[i].parent &&
			    idx_unlink(r->idx, batch[i].parent, batch[i].name,
				       0, (int64_t)clock_now(&r->ops->clock),
				       &ino, &nlink) == 0)
				log_warn("dropped %s (inode %llu): its record "
					 "in %06u.kvd was cut short by a crash",
					 batch[i].name,
					 (unsigned long long)batch[i].ino, id);
			r->ops->release(r->ops->ctx, batch[i].ino);
			dropped++;
		}
	}
	return dropped;
}

/*
 * Drops the names whose records file id no longer holds (provably short),
 * then walks it from offset from, reclaiming records never committed.
 * Returns the names dropped.
 */
static uint64_t recover_file(struct recover *r, uint32_t id, uint64_t from)
{
	struct store_recovery sr;
	uint64_t dropped, size;

	if (store_file_size(r->st, id, &size) < 0)
		return 0;
	r->walked += from < size ? size - from : 0;
	dropped = recover_drop_short(r, id, size);
	if (from >= size)
		return dropped;
	if (store_recover_file(r->st, id, from, recover_ref, recover_next, r,
			       &sr) < 0)
		return dropped;
	if (sr.unreferenced || sr.torn_tail)
		log_info("%06u.kvd: reclaimed %llu bytes (%llu records never "
			 "committed%s)",
			 id, (unsigned long long)sr.freed_bytes,
			 (unsigned long long)sr.unreferenced,
			 sr.torn_tail ? ", a torn tail" : "");
	return dropped;
}

/* Notes file id's size now as its new horizon (when it still exists). */
static void recover_done(struct recover *r, uint32_t id)
{
	uint64_t size;

	if (store_file_size(r->st, id, &size) == 0) {
		r->done[r->ndone] = id;
		r->doffs[r->ndone++] = size;
	}
}

/* Forgets the horizons of removed files: a later file may reuse the id. */
static void recover_forget_gone(struct recover *r, const uint32_t *hids, int nh,
				uint32_t *gone)
{
	uint64_t size;
	int ngone = 0;

	for (int i = 0; i < nh; i++)
		if (store_file_size(r->st, hids[i], &size) == -ENOENT)
			gone[ngone++] = hids[i];
	if (ngone)
		idx_horizons_drop(r->idx, (size_t)ngone, gone);
}

/* A clean stop: every file is whole up to its end. */
static void recover_clean(struct recover *r, const uint32_t *hids,
			  const uint64_t *hoffs, int nh, uint32_t *ids)
{
	int nnew = store_newest(r->st, ids, RECOVER_MAX_HORIZONS);

	for (int f = 0; f < nnew; f++)
		if (recover_horizon_of(hids, hoffs, nh, ids[f]) < 0)
			recover_done(r, ids[f]);
}

/* After a crash: files with a horizon from there, the newest without whole. */
static uint64_t recover_crashed(struct recover *r, const uint32_t *hids,
				const uint64_t *hoffs, int nh)
{
	uint32_t newest[RECOVER_FILES];
	uint64_t dropped = 0, size;
	int nnew;

	for (int i = 0; i < nh; i++) {
		if (store_file_size(r->st, hids[i], &size) < 0)
			continue;
		dropped += recover_file(r, hids[i], hoffs[i]);
		recover_done(r, hids[i]);
	}
	nnew = store_newest(r->st, newest, RECOVER_FILES);
	for (int f = 0; f < nnew; f++) {
		if (recover_horizon_of(hids, hoffs, nh, newest[f]) >= 0)
			continue;
		dropped += recover_file(r, newest[f], 0);
		recover_done(r, newest[f]);
	}
	return dropped;
}

void recover_run(struct idx *idx, struct store *st, int crashed,
		 const struct recover_ops *ops, struct recover_result *out)
{
	struct recover r = {.idx = idx, .st = st, .ops = ops};
	int64_t t0 = (int64_t)clock_now(&ops->clock);
	uint64_t *hoffs, dropped = 0;
	uint32_t *hids, *gone;
	int nh;

	memset(out, 0, sizeof(*out));
	r.batch = calloc(RECOVER_BATCH, sizeof(*r.batch));
	hids = calloc(RECOVER_MAX_HORIZONS, sizeof(*hids));
	hoffs = calloc(RECOVER_MAX_HORIZONS, sizeof(*hoffs));
	gone = calloc(RECOVER_MAX_HORIZONS, sizeof(*gone));
	r.done = calloc(RECOVER_MAX_HORIZONS + RECOVER_FILES, sizeof(*r.done));
	r.doffs =
		calloc(RECOVER_MAX_HORIZONS + RECOVER_FILES, sizeof(*r.doffs));
	if (!r.batch || !hids || !hoffs || !gone || !r.done || !r.doffs) {
		log_err("recovery: out of memory");
		goto out;
	}
	nh = idx_horizons_get(idx, hids, hoffs, RECOVER_MAX_HORIZONS);
	if (nh < 0)
		nh = 0;
	recover_forget_gone(&r, hids, nh, gone);
	if (!crashed)
		recover_clean(&r, hids, hoffs, nh, gone);
	else
		dropped = recover_crashed(&r, hids, hoffs, nh);
	/* Walked: the next recovery starts at today's ends. */
	if (r.ndone)
		idx_horizons_put(idx, (size_t)r.ndone, r.done, r.doffs);
	out->nfiles = r.ndone;
	if (!crashed)
		goto out;
	out->dropped = dropped;
	out->walked = r.walked;
	log_info("crash recovery: read %llu MiB of %d data files in %lld ms",
		 (unsigned long long)(r.walked >> 20), r.ndone,
		 (long long)(((int64_t)clock_now(&ops->clock) - t0) / 1000000));
	if (dropped)
		log_warn("crash recovery: dropped %llu names whose records "
			 "were cut short",
			 (unsigned long long)dropped);
out:
	free(r.batch);
	free(hids);
	free(hoffs);
	free(gone);
	free(r.done);
	free(r.doffs);
}
