/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery of a data directory, without FUSE: after a crash, drops
 * the names whose records the data files no longer hold (cut short) and
 * reclaims records that no name points at (appended but never committed).
 * It reads each data file from its recovery horizon (the point below which
 * every record was committed or abandoned, recorded in the index while the
 * daemon ran), and the newest files without one from their start, so
 * start-up reads only what was appended in the last moments before the
 * crash. It does not open or lock the data directory (the caller has the
 * index and the store open) and it does not know about nodes or the kernel:
 * releasing the inode of a dropped name goes through a callback.
 *
 * Errors: recovery is best effort and returns nothing: a data file it
 * cannot size or read is skipped (its names stay), and index errors leave
 * the names they concern in place; what it did is logged and counted in
 * struct recover_result.
 *
 * Threads: call before any other thread uses the index or the store (at
 * start-up); the index and store lock themselves as usual.
 */
#ifndef KVFS_KVDB_RECOVER_H
#define KVFS_KVDB_RECOVER_H

#include <stdint.h>

#include "clock.h"

struct idx;
struct store;

/* Horizons read or written at once; more data files are walked whole. */
#define RECOVER_MAX_HORIZONS 4096

struct recover_ops {
	/*
	 * Wall-clock time (clock_realtime, or a test's fake): the time of the
	 * unlink of a dropped name, and the duration logged.
	 */
	struct clock_src clock;
	/*
	 * Releases inode ino after recovery unlinked its name: its index row
	 * and record once nothing holds it (the daemon: node_release_inode).
	 */
	void (*release)(void *ctx, uint64_t ino);
	void *ctx;
};

/* What recover_run() did. */
struct recover_result {
	uint64_t dropped; /* names whose records were cut short */
	uint64_t walked;  /* bytes of data files read past their horizons */
	int nfiles;	  /* data files whose horizon now is their end */
};

/*
 * At start-up: forgets the recovery horizons of removed data files. After
 * a crash (crashed 1) also drops names whose records the data files no
 * longer hold and reclaims records no name points at: in each data file
 * from its recorded horizon, and in the newest files without one from
 * their start; then records every file it walked as whole up to its end.
 * After a clean stop (crashed 0) it only records the ends of the newest
 * files that have no horizon yet. Logs "crash recovery: read N MiB of M
 * data files in T ms" after a crash.
 */
void recover_run(struct idx *idx, struct store *st, int crashed,
		 const struct recover_ops *ops, struct recover_result *out);

/* The horizon among n (ids, offs) pairs recorded for id, or -1. */
int64_t recover_horizon_of(const uint32_t *ids, const uint64_t *offs, int n,
			   uint32_t id);

#endif
