/* SPDX-License-Identifier: MIT */
/*
 * The in-memory node table that mirrors the inodes the kernel holds
 * (struct node is in fs.h; each node's file buffer is filebuf.h's): pins,
 * lookups and handles, names and paths, saving a node's bytes, releasing
 * unlinked inodes and their records.
 *
 * Errors: -errno returns (-ENOENT, -ENOMEM, the index's and the store's).
 * Locks: n->rw protects a node's attributes and buffer, fs->nodes_lock the
 * table and the fields marked so; lock order in fs.h.
 */
#ifndef KVFS_NODE_H
#define KVFS_NODE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fs.h"
#include "index.h"

struct stat;

int node_table_init(struct fs *fs);
void node_table_free(struct fs *fs);
/*
 * The node of ino with one more pin: the existing one, or one built from
 * attr (when attr is NULL, read from the index). nlookup_inc adds kernel
 * lookups. Returns -ENOENT when the index has no such inode.
 */
int node_get(struct fs *fs, uint64_t ino, const struct idx_attr *attr,
	     uint64_t parent, const char *name, uint64_t nlookup_inc,
	     struct node **out);
/* The node of ino if it is in memory, with a pin; NULL otherwise. */
struct node *node_find(struct fs *fs, uint64_t ino);
/*
 * Drops pins: nlookup_dec kernel lookups, nopen_dec handles, plus one op pin
 * when op is set. A node with no pins left is freed, and when it had no
 * links left its inode and record are released.
 */
void node_put(struct fs *fs, struct node *n, uint64_t nlookup_dec,
	      unsigned nopen_dec, int op);
/* One more op pin on a node the caller already holds (drop: node_put). */
void node_pin(struct fs *fs, struct node *n);
/* Adds an open handle to a node the caller has pinned. */
void node_open_inc(struct fs *fs, struct node *n);
/* Records that n is now called name in parent. */
int node_rename(struct fs *fs, struct node *n, uint64_t parent,
		const char *name);
/*
 * The path of n within the mount ("/a/b"), malloc'd; NULL on ENOMEM. The
 * table holds only the directories the kernel holds, which an open file's
 * are: when one on the way up is gone, the path starts below it. For a
 * path that must be right whatever the kernel holds, use idx_path().
 */
char *node_path(struct fs *fs, struct node *n);
/* Releases an unlinked inode that no node holds: index row and record. */
void node_release_inode(struct fs *fs, uint64_t ino);
/*
 * Frees a record and, when its data file has no live record left, the file;
 * or an extent file. Once the index no longer points at it, for good: when
 * the change that stopped it is in an index batch not committed yet, the
 * free waits for the batch's commit, so that a crash never leaves the
 * index pointing at freed bytes; a lost batch keeps it. Frees that wait
 * for the same commit are made together (store_free_run()).
 */
void node_free_extent(struct fs *fs, const struct kv_extent *ext);
/*
 * Commits the index's batch (idx_commit(); force: even while a test holds
 * it) and frees what waited for that. 0 or the commit's -errno.
 */
int node_commit(struct fs *fs, int force);
/* Frees what waited for batches that ended (after idx_sync(), say). */
void node_free_committed(struct fs *fs);
/*
 * Saves n's unsaved bytes as a new record and points the index at it. Call
 * with n->rw held exclusive. 0 when there was nothing to save.
 */
int node_flush_locked(struct fs *fs, struct node *n);
/*
 * Commits an extent file's size and mtime to the index when they changed
 * since it last did (n->x_dirty). n->rw exclusive. 0 or -errno.
 */
int node_ext_save_locked(struct fs *fs, struct node *n);
/* Handles open on n now. */
unsigned node_nopen(struct fs *fs, struct node *n);
/* Saves every dirty node with save (n->rw held exclusive), at unmount. */
void node_flush_all(struct fs *fs, int (*save)(struct fs *fs, struct node *n));

/*
 * Whether ino is open or has unsaved bytes (not to be evicted). Bytes
 * queued for saving do not count: evicting such a file drops its save.
 */
int node_is_busy(struct fs *fs, uint64_t ino);
/*
 * Applies a link-count change the index made to inode ino: updates the node
 * when it is in memory, or releases the inode when nothing holds it.
 */
void fs_relink(struct fs *fs, uint64_t ino, uint32_t nlink, int64_t now);
/*
 * Removes the name e on the daemon's own initiative (eviction, stale temp
 * file): the index forgets the name, the verdict cache learns it is
 * absent, the kernel is told to forget it, and the record is freed at
 * once unless a handle opened it meanwhile (then when nothing holds it),
 * even though the kernel may still know the inode: an OPEN of it then
 * fails with -ENOENT. Returns 1 when removed, 0 when skipped (open or
 * unsaved, or the name changed since e was listed).
 */
int node_evict_name(struct fs *fs, const struct idx_name *e);
/*
 * node_evict_name() without the busy check, and with evict 0 the record is
 * freed only when nothing holds the inode (as for an unlink): the daemon
 * removing a name for a reason of its own. 1 when removed.
 */
int node_unname(struct fs *fs, const struct idx_name *e, int evict);
/* An inode's attributes as a struct stat (what getattr replies). */
void fs_fill_stat(struct fs *fs, struct stat *st, const struct idx_attr *a);
/* Drops one kernel lookup of ino (a reply the kernel never got). */
void node_forget_one(struct fs *fs, uint64_t ino);

#endif
