/* SPDX-License-Identifier: MIT */
/*
 * The header scan of an unmounted data directory: every record header of
 * every data file, as fsck's check and the index rebuild need them, read
 * through the data files of a kvdb handle (datafile.h) with core's record
 * iterator. Errors are -errno, also reported through the handle's error
 * hook; progress goes to its progress hook. Single-threaded.
 */
#ifndef KVFS_KVDB_SCAN_H
#define KVFS_KVDB_SCAN_H

#include <stddef.h>
#include <stdint.h>

struct kvdb;

/* A record header found by scanning a data file. */
struct kvdb_rec {
	uint32_t file_id;
	/*
	 * STORE_REC_DATA, _NAME, _NODE, _MOVE, or _EXTENT (kvdb_scan_extents:
	 * file_id 0)
	 */
	uint32_t type;
	uint32_t hdr_len;
	uint32_t nchunks;
	uint64_t off;
	uint64_t seq;
	uint64_t ino;
	uint64_t len;
	int complete;	/* the file holds all of it */
	int referenced; /* check: 1 a named file points at it, -1 stale name */
	uint32_t *crcs; /* data records: nchunks values */
	/*
	 * A data record's path (NULL when it has a NUL byte); a metadata
	 * record's whole path field (NUL-separated parts, record.h), path_len
	 * bytes and a NUL.
	 */
	char *path;
	uint32_t path_len;
};

/* Every record header of a data directory (kvdb_scan()). */
struct kvdb_scan {
	struct kvdb_rec *recs; /* in file, then offset order */
	size_t nrecs, cap;
	int done;	  /* the scan ran */
	int extents_done; /* kvdb_scan_extents ran */
};

/*
 * Finds every record header in every data file of db: at each KV_ALIGN
 * boundary where no record covers the bytes, a header that decodes starts
 * a record. A file's scan stops at the first record it does not hold
 * whole (appends are in order, so nothing after it can be whole either).
 * Reports progress ("reading headers", bytes) through db's hooks. 0 or
 * -errno (an I/O error is also reported through the error hook).
 */
int kvdb_scan(struct kvdb *db, struct kvdb_scan *s);
/*
 * Adds a record for each extent file of db (DATADIR/extents, see
 * core/extfile.h) whose header is whole and names the inode its file name
 * does: type STORE_REC_EXTENT, file_id 0, len the bytes the backing file
 * holds, complete. Others are skipped (an unreadable header cannot name
 * its file). 0 or -errno.
 */
int kvdb_scan_extents(struct kvdb *db, struct kvdb_scan *s);
void kvdb_scan_free(struct kvdb_scan *s);

#endif
