/* SPDX-License-Identifier: MIT */
/*
 * The gc engine: offline compaction of the data files of a data directory
 * opened with kvdb_open() (data files read-write, data/ kept open, the
 * index durable).
 *
 * Deleting a block punches its record out, and a data file with no record
 * left is removed, but a file with a few live records among many dead ones
 * keeps what the holes cannot take back: name records (one page each,
 * appended at every rename and never freed), records that no index row
 * points at (a crash between append and commit in an older file), and the
 * file itself. Compaction copies the live records of such files to a new
 * data file and removes the old ones:
 *
 *  - Live are the data records an index row points at and the name records
 *    that still decide a name for a rebuild of the index: the newest name
 *    record of an inode that has a name and a record, newer (by sequence)
 *    than its data record (of identical copies, the one in the newest
 *    file). A first pass over every data file's headers finds them. The
 *    rest are dead.
 *  - A file is compacted when its live records take less than the threshold
 *    share of its physical size (st_blocks); a file with no live record is
 *    removed.
 *  - Records are copied byte for byte: header (sequence, inode, path, chunk
 *    CRCs, header CRC) and payload, after checking the header against the
 *    index and every chunk against its CRC. A copy is the same record in
 *    another place, so a rebuild picks between the two as between equals,
 *    and the newest record of an inode stays the newest.
 *  - Crash safety, per source file: copies are appended to the new file and
 *    fdatasync'd (and the directory fsync'd when the file is new), then one
 *    index transaction (synchronous=FULL) moves the rows to the copies, and
 *    only then is the old file unlinked. Killed before the commit, the index
 *    still points at the old records and the copies are unreferenced (the
 *    next mount punches them: the new file is among the newest); killed
 *    after it, the old file's records are unreferenced and the next gc
 *    removes the file. A failed write or sync cuts the copies off again and
 *    leaves the index and the old file as they were.
 *  - Orphans (inodes unlinked while open, which the next mount would free)
 *    are freed first, as kvfs does at start-up.
 *
 * A live record that is short or corrupt keeps its file as it is (the file
 * is "skipped", with the reason). Errors: -errno, with a message through
 * the handle's error hook; operator-visible changes are logged (log.h).
 */
#ifndef KVFS_KVDB_COMPACT_H
#define KVFS_KVDB_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "datadir.h"
#include "kvdb.h"

/* Default threshold: compact files less than this percent live. */
#define COMPACT_DEFAULT_THRESHOLD 50
/* Data files compact_run() looks at are numbered up to this (kvdb_opts). */
#define COMPACT_MAX_ID (UINT32_MAX - 2)

enum compact_action {
	COMPACT_KEPT,	   /* live enough: left alone */
	COMPACT_COMPACTED, /* live records copied, the file removed */
	COMPACT_REMOVED,   /* no live record: removed */
	COMPACT_SKIPPED,   /* a live record is damaged: left alone */
};

/* What happened (or, in a dry run, would happen) to one data file. */
struct compact_file {
	uint32_t id;
	enum compact_action action;
	uint64_t physical;
	uint64_t live_bytes;
	uint64_t nlive, nnames, ndead_names, nunref;
	uint32_t out_id; /* compacted: where the copies went */
	char *why;	 /* skipped: the reason, malloc'd */
};

struct compact_result {
	int started; /* the data files were measured: the rest is valid */
	int failed;  /* an operational error stopped the run */
	struct compact_file *files; /* in id order */
	size_t nfiles;
	uint64_t ncompacted, nremoved, nskipped, copied_recs, copied_names;
	uint64_t copied_bytes, dead_names, unref_recs, orphans, orphan_bytes;
	struct datadir_usage before, after;
};

struct compact_opts {
	unsigned threshold; /* percent, 1 to 100 */
	int dry_run;	    /* decide, change nothing */
};

/*
 * Compacts db. Returns 0, or -errno when the run stopped (r->failed; what
 * was done before stays done and is in r, when r->started).
 */
int compact_run(struct kvdb *db, const struct compact_opts *o,
		struct compact_result *r);
void compact_result_free(struct compact_result *r);
/* "kept", "compacted", "removed", "skipped". */
const char *compact_action_name(enum compact_action a);

#endif
