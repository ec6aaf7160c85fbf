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

#include "check.h"
#include "kvdb.h"
#include "scan.h"

/*
 * Audits the inodes inos[0..n) (files the index names whose bytes are
 * sound, and special files and symlinks), and the special files a rebuild
 * would bring back though the index has none: adds a CHECK_NAME finding
 * to res for each that differs (fixed with repair) and counts them in
 * res->sum.names_wrong, names_fixed. 0 or -errno.
 */
int audit_names(struct kvdb *db, struct kvdb_scan *scan, const uint64_t *inos,
		size_t n, int repair, struct check_result *res);

#endif
