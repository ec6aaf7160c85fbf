/* SPDX-License-Identifier: MIT */
/*
 * Rebuilding the index of a data directory from its record headers alone
 * (the data format is in kvfs(5)): for each inode its newest whole data
 * record, named by the path of its newest record of either type; inode
 * numbers are kept; missing directories are made (0755), files get mode
 * 0644, both owned by the calling user, every time set to the time of the
 * rebuild. The new index is built as DATADIR/index.db.rebuild and renamed
 * into place; the old index.db (with its -wal and -shm) is moved aside to
 * index.db.old.<UTC time>.
 *
 * Errors: -errno, with a message through the handle's error hook. What
 * could not be restored is not an error: each such record is a note.
 */
#ifndef KVFS_KVDB_REBUILD_H
#define KVFS_KVDB_REBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "datafile.h"
#include "kvdb.h"
#include "scan.h"

/* Something the rebuild could not restore. */
struct rebuild_note {
	char *what; /* a path, or "NNNNNN.kvd+OFFSET" */
	char *why;
};

struct rebuild_result {
	int done;  /* the new index is in place */
	char *old; /* the old index's new name (in DATADIR), NULL: none */
	uint64_t files, dirs, data_recs, name_recs, superseded, torn;
	uint64_t no_data; /* inodes without a whole data record */
	uint64_t skipped; /* left out (each has a note) */
	/*
	 * Restored under /lost+found (each has a note): files whose only
	 * known name is an engine's temporary one, which the daemon's sweep
	 * of stale temporary files would remove.
	 */
	uint64_t lost_found;
	struct rebuild_note *notes;
	size_t nnotes, cap;
};

struct rebuild_opts {
	int64_t now_ns; /* every time in the new index */
};

/*
 * Scans db's data files into scan (kvdb_scan) and writes a new index.db
 * from them. db's index must not be open. Progress labels: "reading
 * headers", "rebuilding index" (files).
 */
int rebuild_run(struct kvdb *db, const struct rebuild_opts *o,
		struct kvdb_scan *scan, struct rebuild_result *r);
void rebuild_result_free(struct rebuild_result *r);

/*
 * What a rebuild from db's data files would name, without writing an
 * index: fn(arg, ino, path, node) for each name of each file it would
 * restore (directory moves applied, /lost+found placement included; node:
 * from a node record, a special file or symlink), in path order; fn
 * returns 0 or -errno (which ends the walk). 0 or -errno.
 */
typedef int (*rebuild_name_fn)(void *arg, uint64_t ino, const char *path,
			       int node);
int rebuild_names(struct kvdb *db, struct kvdb_scan *scan, rebuild_name_fn fn,
		  void *arg);

#endif
