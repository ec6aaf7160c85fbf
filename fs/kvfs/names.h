/* SPDX-License-Identifier: MIT */
/*
 * The metadata records (core/record.h) that let a rebuild of the index
 * from the data files alone restore the namespace as it is: every name of
 * a file (hard links included), special files and symlinks, and directory
 * renames. The index stays the authority; these records are its backup.
 * Not here: the data records (wb.c, fileio.c), the rebuild itself
 * (fs/kvdb/rebuild.c).
 *
 * Each call appends one record through the store (batched with the next
 * append when batch_names is on, see core/store.h), counted against the
 * capacity through fs->up. A record that cannot be written is logged (a
 * rebuilt index would restore an older name, or miss the file) and is not
 * an error of the operation that changed the name: the index has it.
 * Any thread; no node lock may be held by the caller.
 */
#ifndef KVFS_NAMES_H
#define KVFS_NAMES_H

#include <stdint.h>

#include "fs.h"

/*
 * ino's names changed (or it is new): a name record with every name of a
 * saved regular file (one not saved yet gets its names with its save,
 * see wb.c), a node record (type, rdev, target, names) of a special file
 * or symlink, nothing for a directory. A special file with no name left
 * gets a node record without names, so that a rebuild leaves it out.
 */
void names_record(struct fs *fs, uint64_t ino);

/* Directory ino moved from path old to path new (a move record). */
void names_record_move(struct fs *fs, uint64_t ino, const char *old,
		       const char *new);

/* "DIR/name" of directory parent's entry name into buf; 0 or -errno. */
int names_path_of(struct fs *fs, uint64_t parent, const char *name, char *buf,
		  size_t len);

#endif
