/* SPDX-License-Identifier: MIT */
/*
 * The sweep of stale engine temporary files (tmpsweep.c). Runs on the
 * janitor thread; returns nothing: a file it cannot remove stays for the
 * next sweep. Counts removals in fs->tmp_removed.
 */
#ifndef KVFS_TMPSWEEP_H
#define KVFS_TMPSWEEP_H

#include <stdint.h>

struct fs;

/*
 * Removes the engine temp files last changed before cutoff_ns (wall-clock
 * ns) that no handle has open.
 */
void tmp_sweep(struct fs *fs, int64_t cutoff_ns);

#endif
