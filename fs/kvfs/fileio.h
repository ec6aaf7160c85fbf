/* SPDX-License-Identifier: MIT */
/*
 * The data path of the FUSE operations (fileio.c): READ, WRITE, FLUSH,
 * RELEASE, FSYNC and FALLOCATE on regular files, truncation, and the wait
 * for room in the dirty budget; ops.c has the namespace operations and the
 * operation table. Also the handle of an open file and the two helpers
 * every handler uses.
 */
#ifndef KVFS_FILEIO_H
#define KVFS_FILEIO_H

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdint.h>

struct fs;
struct node;

/* Largest read the kernel sends (1 MiB requests), and its iovecs. */
#define FS_MAX_READ (1u << 20)
#define FS_READ_IOV (FS_MAX_READ / NODE_SEG + 2)

/* An open file: fi->fh. */
struct fs_handle {
	struct node *n;
	int flags;
	atomic_int read_seen; /* a read came: the atime rules ran */
	atomic_int writing;   /* wrote since its last FLUSH (n->writers) */
	int bid;    /* the kernel serves it from this backing file (extent.h) */
	int direct; /* OPEN gave it direct_io (ops.c) */
	atomic_int rewriter; /* counted in n->rewriters until its first FLUSH */
};

/*
 * Whether h, an open of regular file n with flags that is not passed
 * through, gets direct_io (h->direct; h->rewriter counts it in
 * n->rewriters), with n->rw held exclusive and h not counted open yet.
 */
void fs_open_direct_locked(struct fs *fs, struct node *n, struct fs_handle *h,
			   int flags);

/*
 * Closes h, which was counted open on h->n (the kernel will send no
 * RELEASE for it, or this is RELEASE): drops nlookup_dec kernel lookups
 * of h->n with it and frees h.
 */
void fs_handle_close(struct fs *fs, struct fs_handle *h, uint64_t nlookup_dec);

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Replies rc: 0 (or a count) is success, -errno an error. */
static inline void fs_reply_err(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc >= 0 ? 0 : -rc);
}

/*
 * Before an O_TRUNC open of n: waits, holding no lock, until no other
 * handle of n is between a WRITE and its FLUSH (at most 1 s, not past an
 * INTERRUPT). The kernel does not hold the inode's lock across such an
 * open, so without it the truncation could land between two requests of
 * one write(2) of another opener (ext4 never lets it), leaving zeros
 * under a whole file's length.
 */
void fs_wait_writers(struct fs *fs, fuse_req_t req, struct node *n);
/* Whether req was interrupted: the stop test of the bounded waits. */
int fs_req_stop(void *req);
/*
 * A READ of n at off failed with rc: logs it, drops the name when the
 * bytes are provably short (-ENODATA) or quarantines it, and answers EIO.
 * No lock held; n pinned.
 */
void fs_read_failed(struct fs *fs, fuse_req_t req, struct node *n, off_t off,
		    int rc);
/*
 * Waits, holding no lock, until n's buffer may grow to end bytes within
 * the dirty budget (node_budget_wait; an INTERRUPT of req ends it with
 * -EINTR). A refusal (-EDQUOT) is logged, at most once every 10 s.
 */
int fs_room_for(struct fs *fs, fuse_req_t req, struct node *n, uint64_t end);
/*
 * The atime rules (-o relatime, noatime, atime) for a read through handle
 * h, once per handle: at its first READ, or at a read-only OPEN. No lock
 * held.
 */
void fs_read_atime(struct fs *fs, struct fs_handle *h);
/* Changes n's size to size (zeros past the old end). n->rw exclusive. */
int fs_truncate_locked(struct fs *fs, struct node *n, uint64_t size,
		       int64_t now);
/* Clears set-id bits as a write by uid would (n->rw exclusive). */
int fs_kill_setid_locked(struct fs *fs, struct node *n, uid_t uid);
/*
 * An OPEN with O_TRUNC of the regular file n by user uid (fi: the
 * open's), n->rw exclusive: truncation as ext4 does it (see fileio.c).
 */
int fs_open_trunc_locked(struct fs *fs, struct node *n,
			 struct fuse_file_info *fi, uid_t uid);

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	      off_t off, struct fuse_file_info *fi);
void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/*
 * For a thread that must not wait (defer.h): fs_read() and fs_write()
 * when they can answer at once, from memory and within the dirty budget.
 * 1 when answered; 0 when the request would wait (the disk, a read-ahead
 * in flight, the dirty budget, an extent file's queued writes): then
 * nothing was answered, and fs_read() or fs_write() must run where waiting
 * is allowed.
 */
int fs_read_now(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
int fs_write_now(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		 off_t off, struct fuse_file_info *fi);
/*
 * Whether a FLUSH or RELEASE of fi may wait: for an extent file's queued
 * writes, or for a save written before the reply (-o durable).
 */
int fs_close_may_wait(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);
void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);
void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi);

#endif
