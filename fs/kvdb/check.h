/* SPDX-License-Identifier: MIT */
/*
 * The fsck engine: checks every named regular file's record against its
 * index row, optionally repairs, and lists the records no name needs.
 *
 * For every regular file reachable from the root, in data-file order: the
 * data file exists and holds the whole record (else the block is provably
 * short), the header decodes and says what the index says, and every
 * payload chunk has the CRC32C the index lists. Then every data file's
 * headers are scanned (kvdb_scan) for the records no named file points at,
 * the records cut off by the end of their file, and name records of inodes
 * that are gone: space that could be reclaimed.
 *
 * Repair drops what is provably short: the name goes (idx_unlink), the
 * inode is released (idx_release_inode) and what is left of its record is
 * punched (so the data files must be open read-write). Corrupt blocks are
 * listed and kept, as the daemon keeps them.
 *
 * Errors: -errno, with a message through the handle's error hook. A block
 * that repair could not drop is not an error of the run: it is counted
 * (summary.repair_failed) and reported through the hook.
 */
#ifndef KVFS_KVDB_CHECK_H
#define KVFS_KVDB_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "datafile.h"
#include "kvdb.h"
#include "scan.h"

enum check_kind {
	CHECK_SHORT,	    /* a named block whose record is provably short */
	CHECK_CORRUPT,	    /* a named block whose record is damaged */
	CHECK_UNREFERENCED, /* a whole data record no name points at */
	CHECK_TORN,	    /* a data record cut off by its file's end */
	CHECK_STALE_NAME,   /* a name record of an inode with no name */
	/*
	 * A name (path = the index's) that a rebuild from the data files
	 * would not restore: the record that named it is damaged or was
	 * never written. Repair appends a fresh name record (FIXED).
	 */
	CHECK_NAME,
};

enum check_action {
	CHECK_ACTION_NONE,
	CHECK_ACTION_KEPT,    /* corrupt: left as it is, on purpose */
	CHECK_ACTION_DROPPED, /* repair removed it */
	CHECK_ACTION_FIXED,   /* repair made it right (CHECK_NAME) */
};

/* One thing the check found. */
struct check_finding {
	enum check_kind kind;
	enum check_action action;
	uint32_t data_file; /* where the record is (0: the index has none) */
	uint64_t offset;
	uint64_t ino;
	char *path;	/* the name, or the record's path; NULL when unknown */
	char *detail;	/* SHORT, CORRUPT: what is wrong */
	int64_t chunk;	/* CORRUPT: the first chunk whose CRC failed, or -1 */
	uint64_t bytes; /* record's span (reclaimable kinds) */
};

/* The counts of a check. */
struct check_summary {
	uint64_t checked;	/* named regular files */
	uint64_t payload_bytes; /* their payload */
	uint64_t damaged;	/* nshort + ncorrupt */
	uint64_t nshort, ncorrupt, dropped, repair_failed;
	uint64_t unreferenced, unreferenced_bytes;
	uint64_t torn, torn_bytes;
	uint64_t stale_names;
	/* Inodes a rebuild would name wrongly (CHECK_NAME); fixed of them. */
	uint64_t names_wrong, names_fixed;
	uint64_t orphans; /* inodes with no name, freed at the next mount */
};

struct check_result {
	struct check_summary sum;
	/* SHORT and CORRUPT ones first (data-file order), then the rest. */
	struct check_finding *v;
	size_t n, cap;
};

struct check_opts {
	int repair;
	int64_t now_ns; /* ctime of what repair changes */
};

/*
 * Checks db (index open, read with KVDB_INDEX_COUNT). scan is reused when
 * it already ran (a rebuild scans first), else filled. Progress labels:
 * "checking blocks" (payload bytes), "reading headers" (file bytes).
 */
int check_run(struct kvdb *db, const struct check_opts *o,
	      struct kvdb_scan *scan, struct check_result *res);
void check_result_free(struct check_result *res);

#endif
