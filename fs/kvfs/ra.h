/* SPDX-License-Identifier: MIT */
/*
 * Read-ahead on a lookup hit (-o prefetch=SIZE, kvfs(8)). An engine looks a
 * block up and loads it a scheduler step later: when a LOOKUP finds a
 * saved regular file that the kernel did not hold yet, ra_offer() queues
 * its record, RA_THREADS threads read and check it whole into segments of
 * their own, and the file's first READ takes them (ra_take()) instead of
 * reading the data file. A read-ahead that fails is a failed read
 * (damage.c): the name becomes a miss before the engine loads it.
 *
 * Entries are keyed by the record (data file and offset), never by the
 * name: a block rewritten, replaced or unlinked has another record (or
 * none), so its old bytes are never served; ra_drop() frees them when the
 * record goes. Memory is counted in whole segments against the budget;
 * entries that were read and not taken are evicted least recently used
 * first. Lookups that loads do not follow stop queueing read-aheads once
 * a few dozen went unused, until loads come again (RA_CREDIT in ra.c).
 *
 * Locks: the module's own lock is innermost: taken inside n->rw (ra_take),
 * nothing is taken inside it, and it is never held across I/O, the index,
 * a pin or an unpin. The threads take no node lock but to check, after a
 * failed read, that the node still has that record.
 */
#ifndef KVFS_RA_H
#define KVFS_RA_H

#include <fuse_lowlevel.h>
#include <stdint.h>

#include "fs.h"

/* Threads that read ahead: reads in flight at once. */
#define RA_THREADS 4
/* The budget by default (-o prefetch=SIZE). */
#define RA_DEFAULT_BUDGET (256ull << 20)
/* Longest a first READ waits for a read-ahead of its record in flight. */
#define RA_WAIT_NS (1000ll * 1000000)
/*
 * How long a read-ahead waits in the queue before it is read: an open(2)
 * looks its file up and reads it at once, and a READ that finds its
 * read-ahead still queued reads the file itself, with no hand-off to a
 * read-ahead thread and back. An engine's load comes a step later. On a
 * RAM disk, loads by open and read from one thread: 1,620 MiB/s with
 * prefetch=0, 1,300 to 1,790 read ahead at once.
 */
#define RA_DELAY_NS (300ll * 1000)

struct ra_stats {
	uint64_t started;    /* read-aheads queued */
	uint64_t used;	     /* taken by a READ */
	uint64_t wasted;     /* dropped unread: budget, record gone */
	uint64_t failed;     /* their read failed */
	uint64_t skipped;    /* lookup hits not read ahead: loads stopped */
	uint64_t read_bytes; /* bytes read ahead */
	uint64_t bytes;	     /* memory held now (queued and in flight too) */
	uint64_t peak_bytes; /* the most held at once */
	uint64_t pending;    /* queued or being read now */
	uint64_t budget;
};

/* Starts the threads (fs->ra stays NULL with a budget of 0): 0 or -errno. */
int ra_start(struct fs *fs, uint64_t budget);
/* Stops the threads and frees every entry (queued ones unread). */
void ra_stop(struct fs *fs);
/*
 * A LOOKUP found n (pinned by the caller, no lock held) and gave the kernel
 * its first reference to it: queues a read-ahead of n's record when n is a
 * saved regular file of at most FS_VERIFY_MAX bytes, not open, not being
 * written, and its record is neither queued nor held already.
 */
void ra_offer(struct fs *fs, struct node *n);
/*
 * Before a READ loads the record at ext (no lock held): waits, at most
 * RA_WAIT_NS and not past an interrupt of req, while a read-ahead of it is
 * being read. (The kernel sends the READs of one read(2) at once: each
 * that would load the record waits, or one would read it a second time.)
 */
void ra_wait(struct fs *fs, const struct kv_extent *ext, fuse_req_t req);
/* Whether the record at ext was read ahead and is waiting to be taken. */
int ra_ready(struct fs *fs, const struct kv_extent *ext);
/*
 * n->rw held exclusive, n neither dirty nor cached nor queued for saving:
 * gives n the checked bytes read ahead for its record, as node_fill()
 * would have loaded them. 1 when it did, 0 when there were none.
 */
int ra_take(struct fs *fs, struct node *n);
/* The record at ext is freed, or its name dropped: its read-ahead goes. */
void ra_drop(struct fs *fs, const struct kv_extent *ext);
void ra_get_stats(struct fs *fs, struct ra_stats *s);

#endif
