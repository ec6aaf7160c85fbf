/* SPDX-License-Identifier: MIT */
/*
 * Write-behind: a FLUSH hands a file's bytes to a queue and returns; writer
 * threads append them to the data files at full queue depth, and one
 * committer thread points the index at the landed records, one transaction
 * per batch (group commit). Until its save is committed the file is read
 * from the queued bytes (node->wb). See kvfs(7), LIFE OF A BLOCK.
 *
 * Not here: the bytes of a file being written (filebuf.c), the synchronous
 * save used with -o durable (node_flush_locked in node.c).
 *
 * Locks: wb_save_locked is called with n->rw exclusive; the writer and
 * committer threads take n->rw only briefly and never across I/O; the
 * queue's own lock is taken inside n->rw, never around it.
 */
#ifndef KVFS_WB_H
#define KVFS_WB_H

#include <stdint.h>

struct fs;
struct node;

/* Starts nwriters writer threads and the committer (fs->wb). */
int wb_start(struct fs *fs, unsigned nwriters);
/* Waits for every queued save, then stops the threads (no-op if none). */
void wb_stop(struct fs *fs);

/*
 * Saves n's unsaved bytes: queued when write-behind runs, at once
 * (node_flush_locked) with -o durable or when it is stopped; an extent
 * file's new size at once (node_ext_save_locked). n->rw held exclusive;
 * n has a name. 0 or -errno.
 */
int wb_save_locked(struct fs *fs, struct node *n);
/*
 * Waits until no save of n is queued or running, then returns (and
 * clears) the error of a failed background save, or 0. stop(arg) is asked
 * every 100 ms: non-zero ends the wait with -EINTR. No lock held.
 */
int wb_wait_node(struct fs *fs, struct node *n, int (*stop)(void *), void *arg);
/*
 * Waits until the queue is empty and nothing is running: at most
 * timeout_ms (negative: no bound). 0, or -ETIMEDOUT.
 */
int wb_drain(struct fs *fs, int timeout_ms);

struct wb_stats {
	uint64_t queued_files; /* saves queued or running now */
	uint64_t queued_bytes; /* their bytes */
	uint64_t peak_bytes;   /* the most queued bytes at once */
	uint64_t appends;      /* records appended by the writers */
	uint64_t writes;       /* their writes (several records in one) */
	uint64_t commits;      /* index transactions of the committer */
	uint64_t cancelled;    /* saves dropped: unlinked or superseded */
	uint64_t failed;       /* saves that failed (the file reverted) */
};
void wb_get_stats(struct fs *fs, struct wb_stats *out);

#endif
