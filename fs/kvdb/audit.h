/* SPDX-License-Identifier: MIT */
/*
 * fsck's audit of names: whether a rebuild of the index from the data
 * files alone (rebuild.h) would give each file the names the index gives
 * it. A name record lost with another record's damage, or never written,
 * shows here before the index is lost. Repair appends a fresh metadata
 * record (core/record.h) for each such file, in a new data file written
 * through the block store, synced before it returns. Single-threaded.
 */
#ifndef KVFS_KVDB_AUDIT_H
#define KVFS_KVDB_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "kvdb.h"
#include "scan.h"

/*
 * A file whose names a rebuild would get wrong: ino, path (the index's
 * name, or the rebuild's for a removed file), what differs, and whether
 * repair wrote a fresh record. fn returns 0 or -errno (ends the audit).
 */
typedef int (*audit_fn)(void *arg, uint64_t ino, const char *path,
			const char *detail, int fixed);

/*
 * Audits the inodes inos[0..n) (files the index names whose bytes are
 * sound, and special files and symlinks), and the special files a rebuild
 * would bring back though the index has none: calls fn for each that
 * differs, after writing a fresh record for it with repair. 0 or -errno.
 */
int audit_names(struct kvdb *db, struct kvdb_scan *scan, const uint64_t *inos,
		size_t n, int repair, audit_fn fn, void *arg);

#endif
