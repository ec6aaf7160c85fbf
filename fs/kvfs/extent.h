/* SPDX-License-Identifier: MIT */
/*
 * The data path of extent files (extent.c): a regular file that grows past
 * cfg.record_max becomes an extent file (core/extfile.h): its bytes move
 * out of memory into DATADIR/extents/INO.kvx and from then on every WRITE
 * lands there in place, every READ is read from there, holes stay holes,
 * and fallocate(2) reserves real space. The index points at the file with
 * a KV_EXT_LARGE extent, committed when the file becomes one and at each
 * save (FLUSH, fsync, release). A file stays an extent file for the rest
 * of its inode's life. See kvfs(7), DATA MODEL.
 *
 * Not here: small files (fileio.c, filebuf.c), the extent file format.
 *
 * Locks: functions named _locked want n->rw exclusive; the others take
 * it themselves and are called without it. No wait here is unbounded:
 * the wait for a file's queued saves ends on INTERRUPT.
 * Errors: -errno (the backing file's, the index's; -EBUSY when a save of
 * the file was queued meanwhile; -ENOSPC when the disk is down to the
 * store's reserve).
 */
#ifndef KVFS_EXTENT_H
#define KVFS_EXTENT_H

#include <stddef.h>
#include <stdint.h>

struct fs;
struct node;

/*
 * Makes n an extent file when it would grow to end bytes past
 * cfg.record_max and is not one yet: waits (no lock held; stop(arg) is
 * asked every 100 ms, non-zero ends it with -EINTR) for its queued saves,
 * then moves its bytes. 1 when n is an extent file (now), 0 when it
 * need not be one, or -errno.
 */
int fs_ext_grow(struct fs *fs, struct node *n, uint64_t end,
		int (*stop)(void *), void *arg);
/*
 * The same with n->rw held exclusive: -EBUSY when a save of n is still
 * queued (the caller could not wait for it).
 */
int fs_ext_convert_locked(struct fs *fs, struct node *n);

/* Whether n is an extent file now (takes n->rw shared). */
int fs_is_extent(struct node *n);
/*
 * A READ of the extent file n (takes n->rw): *data and *got (short only
 * at the end of the file) in the calling thread's read buffer
 * (store_buf), valid until its next read. -ENODATA when the backing file
 * ends inside the file's size (provably short). direct: the reader's file
 * is O_DIRECT (the READ's flags say), so the backing file is read so too.
 */
int fs_ext_read(struct fs *fs, struct node *n, size_t size, uint64_t off,
		int direct, const void **data, size_t *got);
/*
 * A WRITE of size bytes at off to the extent file n (takes n->rw); with
 * direct (the writer's file is O_DIRECT), aligned pages bypass the page
 * cache as they would on a plain file, and those inside the size are
 * queued (extq.h) and written behind. Waits end on stop(arg).
 */
int fs_ext_write(struct fs *fs, struct node *n, const char *buf, size_t size,
		 uint64_t off, int direct, int (*stop)(void *), void *arg);
/*
 * Waits for n's queued writes and returns (and clears) the error of one
 * that failed: what close(2) reports. Takes no node lock.
 */
int fs_ext_settle(struct fs *fs, struct node *n, int (*stop)(void *),
		  void *arg);
/* A new size for the extent file n. n->rw exclusive. */
int fs_ext_truncate_locked(struct fs *fs, struct node *n, uint64_t size,
			   int64_t now);
/*
 * fallocate(2) on the extent file n: mode 0 and FALLOC_FL_KEEP_SIZE
 * reserve space, FALLOC_FL_PUNCH_HOLE and FALLOC_FL_ZERO_RANGE zero a
 * range (takes n->rw).
 */
int fs_ext_fallocate(struct fs *fs, struct node *n, int mode, uint64_t off,
		     uint64_t len);
/* Makes the extent file n's bytes durable (fsync). Takes n->rw. */
int fs_ext_sync(struct fs *fs, struct node *n, int (*stop)(void *), void *arg);

/*
 * FUSE passthrough: the kernel serves an open file's reads, writes and
 * mappings from its backing file itself, with no request to kvfs, so an
 * extent file (whose bytes are at their own offsets in INO.kvx) reads
 * and writes at the backing file system's speed. The kernel refuses to
 * mix such handles with others of one inode, so kvfs hands one out only
 * while every open handle of n is one; FLUSH, FSYNC, SETATTR, FALLOCATE
 * and RELEASE still come to kvfs, which takes the size and mtime the
 * kernel's writes left from the backing file (fs_ext_pt_refresh_locked).
 */
/*
 * For an OPEN of n, which has nopen handles open: the backing id to
 * reply with (n->x_pt counts the handle), or 0 for a handle served by
 * kvfs (not an extent file of the current shape, cut short, another kind
 * of handle open, test hooks armed, or passthrough off). n->rw exclusive.
 */
int fs_ext_pt_open_locked(struct fs *fs, struct node *n, unsigned nopen);
/* A passthrough handle of n went (RELEASE, a failed OPEN). Takes n->rw. */
void fs_ext_pt_close(struct fs *fs, struct node *n);
/*
 * While n has passthrough handles: its size and mtime from the backing
 * file, unsaved (x_dirty) when they moved. n->rw exclusive.
 */
void fs_ext_pt_refresh_locked(struct node *n);

#endif
