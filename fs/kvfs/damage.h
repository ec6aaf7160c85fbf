/* SPDX-License-Identifier: MIT */
/*
 * Damage: what a failed block read does to the name (damage.c), and the
 * test-only fault injection hooks. fs_quarantine and fs_drop take a node
 * the caller has pinned and holds no lock on; they log and count what they
 * did and return nothing (a name that changed meanwhile is left alone).
 */
#ifndef KVFS_DAMAGE_H
#define KVFS_DAMAGE_H

#include <stddef.h>
#include <stdint.h>

struct fs;
struct node;

/*
 * The longest a failed read that found its name already unnamed by another
 * failed read of the same file waits for that one's entry invalidation
 * before it is answered.
 */
#define FS_UNNAME_WAIT_NS (2ll * 1000000000)

/*
 * After a failed read of n that did not prove the block short: its name
 * becomes a quarantined miss and the kernel forgets it; the data stays.
 */
void fs_quarantine(struct fs *fs, struct node *n, int rc);
/*
 * After a read that proved n's record short (its data file ends before the
 * record does): the name is removed, the kernel forgets it, and the record
 * is freed once nothing holds the inode.
 */
void fs_drop(struct fs *fs, struct node *n);
/*
 * A read of n (pinned, no lock held) at off failed with rc (store_read()'s
 * errors); what is the reader, for the log line ("read", "read-ahead").
 * Logs it, then drops the block when its record is provably short
 * (-ENODATA) and quarantines it otherwise: the name becomes a miss.
 */
void fs_read_damage(struct fs *fs, struct node *n, long long off, int rc,
		    const char *what);
/* Words for a store_read() error, for log lines. */
const char *fs_read_error(int rc);
#ifdef KVFS_FAULT_INJECTION
/* The injected read error of ino (-errno), or 0. */
int fs_fault_read(struct fs *fs, uint64_t ino);
int fs_fault_setxattr(struct fs *fs, uint64_t ino, const char *name,
		      const char *value, size_t size, int *rc);
#endif

#endif
