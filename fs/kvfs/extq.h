/* SPDX-License-Identifier: MIT */
/*
 * The queue of O_DIRECT writes to extent files (extq.c). The kernel holds
 * a FUSE file's inode lock across each WRITE it sends (libfuse 3.14 cannot
 * ask for parallel direct writes; kvfs(7), KERNEL FACTS), so writers of one
 * pool file would reach the disk one at a time. Instead a WRITE of whole
 * pages is copied, queued and answered at once (one past the end grows
 * the backing file first, extent.c), and FS_EXTQ_THREADS
 * threads write the copies to the backing file side by side, as plain
 * O_DIRECT writers would. Writes of one file that overlap are written in
 * the order they came; a read waits for the queued writes it overlaps; a
 * change of size, fsync(2) and close(2) wait for all of the file's. A
 * failed write is kept on the node and returned by the next fsync(2),
 * close(2) or write of the file. See kvfs(7), Extent files.
 *
 * Locks: the queue's own lock is innermost. Workers take no node lock: a
 * queued write pins its node and its backing file stays open while the
 * node lives. Every wait here ends on stop(arg) (asked every 100 ms) or is
 * for writes already running. Errors: -errno (-EINTR when stopped, the
 * backing file's write errors).
 */
#ifndef KVFS_EXTQ_H
#define KVFS_EXTQ_H

#include <stddef.h>
#include <stdint.h>

struct fs;
struct node;

/* Threads that write queued copies; bytes queued at most. */
#define FS_EXTQ_THREADS 4
#define FS_EXTQ_MAX (32u << 20)

/* Starts the writer threads (fs->extq). 0 or -errno. */
int fs_extq_start(struct fs *fs);
/* Waits for every queued write, then stops the threads (no-op if none). */
void fs_extq_stop(struct fs *fs);

/*
 * Waits (no lock held) until len more bytes fit in the queue and takes
 * them: 0, or -EINTR. Give them back with fs_extq_unreserve() or hand
 * them to fs_extq_put().
 */
int fs_extq_reserve(struct fs *fs, size_t len, int (*stop)(void *), void *arg);
void fs_extq_unreserve(struct fs *fs, size_t len);
/*
 * Queues a copy of the len reserved bytes at buf for n's offset off and
 * pins n until they are written. Call with n->rw held (shared is enough)
 * and off + len within n's size. 0, or -ENOMEM (the reservation is then
 * given back).
 */
int fs_extq_put(struct fs *fs, struct node *n, const void *buf, size_t len,
		uint64_t off);
/*
 * Waits until no queued write of n overlaps [off, off + len) (len 0: no
 * queued write of n at all). 0 or -EINTR.
 */
int fs_extq_wait(struct fs *fs, struct node *n, uint64_t off, uint64_t len,
		 int (*stop)(void *), void *arg);
/* Bytes queued or running now (for the free-space check). */
uint64_t fs_extq_bytes(struct fs *fs);
/* Returns and clears the error of a failed queued write of n (0: none). */
int fs_extq_error(struct node *n);

#endif
