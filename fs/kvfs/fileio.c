/* SPDX-License-Identifier: MIT */
/*
 * The data path of the FUSE operations (fileio.h): a file's bytes go into
 * its node's buffer on WRITE (after waiting, unlocked, for room in the
 * dirty budget), are handed to write-behind on FLUSH (wb.c), and are read
 * from the buffer, the queued bytes or the record. Not here: the
 * namespace (ops.c), saving (wb.c, node.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>

#include "capacity.h"
#include "clock.h"
#include "ctlfiles.h"
#include "damage.h"
#include "extent.h"
#include "filebuf.h"
#include "fileio.h"
#include "fs.h"
#include "fuse_compat.h"
#include "node.h"
#include "notify.h"
#include "ra.h"
#include "rx.h"
#include "wb.h"

int fs_req_stop(void *arg)
{
	return fuse_req_interrupted(arg);
}

/* The bytes of dirty budget n's buffer needs more to hold end bytes. */
static uint64_t fs_room_need(struct node *n, uint64_t end)
{
	uint64_t have, want;

	pthread_rwlock_rdlock(&n->rw);
	have = n->dirty || n->cached ? (uint64_t)n->nsegs * NODE_SEG : 0;
	want = n->dirty ? 0 : n->attr.size;
	pthread_rwlock_unlock(&n->rw);
	if (end > want)
		want = end;
	want = (want + NODE_SEG - 1) / NODE_SEG * NODE_SEG;
	return want > have ? want - have : 0;
}

/*
 * Waits, holding no lock, until n's buffer may grow to end bytes within
 * the dirty budget (node_budget_wait); a refusal is logged, at most every
 * 10 s.
 */
int fs_room_for(struct fs *fs, fuse_req_t req, struct node *n, uint64_t end)
{
	static atomic_int_fast64_t last_log;
	uint64_t need = fs_room_need(n, end);
	int64_t now;
	char *path;
	int rc;

	if (need == 0)
		return 0;
	rc = node_budget_wait(fs, need, fs_req_stop, req);
	now = (int64_t)clock_monotonic_ns();
	if (rc == -EDQUOT && now - atomic_load(&last_log) > 10ll * 1000000000) {
		atomic_store(&last_log, now);
		path = node_path(fs, n);
		log_warn("write to %s refused (EDQUOT): the dirty_limit of "
			 "%llu bytes is held by files still open or not yet "
			 "saved",
			 path ? path : "?",
			 (unsigned long long)fs->cfg.dirty_limit);
		free(path);
	}
	return rc;
}

/* Changes n's size to size. n->rw exclusive. */
int fs_truncate_locked(struct fs *fs, struct node *n, uint64_t size,
		       int64_t now)
{
	uint64_t old = n->attr.size;
	int rc;

	if (S_ISDIR(n->attr.mode))
		return -EISDIR;
	if (!S_ISREG(n->attr.mode))
		return -EINVAL;
	if (size > fs->cfg.max_file_size)
		return -EFBIG;
	if (size > fs->cfg.record_max) {
		rc = fs_ext_convert_locked(fs, n);
		if (rc < 0)
			return rc;
	}
	if (kv_ext_large(&n->attr.ext))
		return fs_ext_truncate_locked(fs, n, size, now);
	if (size == old && n->dirty)
		return 0;
	if (size == 0) {
		/* Nothing to keep: skip reading the old bytes. */
		node_discard(fs, n);
		n->dirty = 1;
	} else {
		rc = node_make_dirty(fs, n);
		if (rc < 0)
			return rc;
		rc = node_reserve(fs, n, size);
		if (rc < 0)
			return rc;
		if (size > old)
			node_zero(n, old, size - old);
	}
	n->attr.size = size;
	n->attr.mtime_ns = now;
	n->attr.ctime_ns = now;
	return 0;
}

/*
 * A change of n's bytes by uid, n->rw held exclusive: as the kernel's
 * file_remove_privs() (with root standing for CAP_FSETID), a caller other
 * than root clears the set-uid bit and the set-gid bit of a
 * group-executable file, saved at once. The kernel forgets the inode's
 * attributes before the reply: nothing else it does refreshes the mode it
 * checks (an exec of a file just written, statx(2) of STATX_MODE).
 */
int fs_kill_setid_locked(struct fs *fs, struct node *n, uid_t uid)
{
	mode_t m = n->attr.mode;
	struct idx_attr a;
	int rc;

	if (uid != 0 && (m & S_ISUID))
		m &= ~(mode_t)S_ISUID;
	if (uid != 0 && (m & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		m &= ~(mode_t)S_ISGID;
	if (m == n->attr.mode)
		return 0;
	n->attr.mode = m;
	a = n->attr;
	a.size = n->disk_size;
	rc = idx_setattr(fs->idx, &a);
	if (rc == 0 && notify_attrs_now(fs->notify, n->ino) < 0)
		log_warn("inode %llu: mode now %04o, but the kernel may "
			 "check its old set-id bits until its attributes time "
			 "out",
			 (unsigned long long)n->ino,
			 (unsigned)(a.mode & 07777));
	return rc;
}

/*
 * An open with O_TRUNC of a regular file (whatever its access mode: the
 * kernel asked for write permission), with n->rw held exclusive: the size
 * goes to 0 and mtime and ctime to now even when the file was empty
 * already, as ext4 does, and an opener other than root loses the set-uid
 * bit and the set-gid bit of a group-executable file (the kernel's FUSE
 * code leaves that to the filesystem when the open truncates). A read-only
 * handle is never flushed: its truncation is saved here.
 */
int fs_open_trunc_locked(struct fs *fs, struct node *n,
			 struct fuse_file_info *fi, uid_t uid)
{
	int rc;

	rc = fs_truncate_locked(fs, n, 0, fs_now_ns());
	if (rc < 0)
		return rc;
	rc = fs_kill_setid_locked(fs, n, uid);
	if (rc == 0 && (fi->flags & O_ACCMODE) == O_RDONLY)
		rc = wb_save_locked(fs, n);
	return rc;
}

/*
 * Replies count buffers of n's (n->rw held, n pinned) and releases n->rw.
 * A ring thread of FUSE over io_uring may be waiting for n->rw while it
 * holds the ring's lock, which a reply to that ring takes: such a request
 * gets the bytes copied into its ring entry under n->rw, and the reply
 * after (fuse_compat.h).
 */
static void fs_reply_iov_unlock(fuse_req_t req, struct node *n,
				const struct iovec *iov, int count)
{
	size_t len;

	if (fuse_compat_stage_iov(req, iov, count, &len)) {
		pthread_rwlock_unlock(&n->rw);
		fuse_compat_reply_staged(req, len);
		return;
	}
	fuse_reply_iov(req, iov, count);
	pthread_rwlock_unlock(&n->rw);
}

/*
 * Replies the buffered (unsaved or cached) bytes [off, off + len) of n. The reply copies them
 * out while n->rw is still held, so n is pinned: once the reply is out,
 * the kernel may release the last handle and drop n at once.
 */
static void fs_read_dirty(struct fs *fs, fuse_req_t req, struct node *n,
			  uint64_t off, size_t len)
{
	struct iovec small[FS_READ_IOV], *iov = small;

	if (len > FS_MAX_READ) {
		/* Not sent by this kernel (1 MiB requests): slow path. */
		iov = calloc(len / NODE_SEG + 2, sizeof(*iov));
		if (!iov) {
			pthread_rwlock_unlock(&n->rw);
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	node_pin(fs, n);
	fs_reply_iov_unlock(req, n, iov, node_iov(n, off, len, iov));
	node_put(fs, n, 0, 0, 1);
	if (iov != small)
		free(iov);
}

/*
 * The atime rules for a read of n (once per open handle, before the read
 * is answered: n may go with the reply): with relatime, as ext4, only when
 * the atime is not after the mtime or the ctime, or is a day old. The new
 * atime is the last use's too: eviction and st_atime share one clock.
 */
void fs_read_atime(struct fs *fs, struct fs_handle *h)
{
	int64_t now = fs_now_ns(), day = 86400ll * 1000000000;
	struct node *n = h->n;
	int set;

	if (fs->cfg.atime == FS_NOATIME || atomic_exchange(&h->read_seen, 1))
		return;
	pthread_rwlock_wrlock(&n->rw);
	set = fs->cfg.atime == FS_ATIME ||
	      n->attr.atime_ns <= n->attr.mtime_ns ||
	      n->attr.atime_ns <= n->attr.ctime_ns ||
	      now - n->attr.atime_ns >= day;
	if (set && now > n->attr.atime_ns)
		n->attr.atime_ns = now;
	else
		set = 0;
	pthread_rwlock_unlock(&n->rw);
	if (set)
		cap_touch_at(fs->cap, n->ino, now, 1);
}

/* Longest an O_TRUNC open waits for another opener's write. */
#define FS_REWRITE_WAIT_NS 1000000000ll

/* A writer flushed: O_TRUNC opens waiting for that look again. */
static void fs_writers_wake(struct fs *fs)
{
	pthread_mutex_lock(&fs->dirty_lock);
	pthread_cond_broadcast(&fs->grow_cond);
	pthread_mutex_unlock(&fs->dirty_lock);
}

/* h wrote: counted in n->writers until its FLUSH. */
static void fs_writing(struct node *n, struct fs_handle *h)
{
	if (atomic_exchange(&h->writing, 1))
		return;
	pthread_rwlock_wrlock(&n->rw);
	n->writers++;
	pthread_rwlock_unlock(&n->rw);
}

/* h flushed, or went: no longer one of n's writers. */
static void fs_wrote(struct fs *fs, struct node *n, struct fs_handle *h)
{
	if (!atomic_exchange(&h->writing, 0))
		return;
	pthread_rwlock_wrlock(&n->rw);
	n->writers--;
	pthread_rwlock_unlock(&n->rw);
	fs_writers_wake(fs);
}

void fs_wait_writers(struct fs *fs, fuse_req_t req, struct node *n)
{
	int64_t deadline = (int64_t)clock_realtime_ns() + FS_REWRITE_WAIT_NS;
	unsigned writers;

	for (;;) {
		struct timespec ts = clock_ts(clock_realtime_ns() + 10000000);

		pthread_rwlock_rdlock(&n->rw);
		writers = n->writers;
		pthread_rwlock_unlock(&n->rw);
		if (!writers || fuse_req_interrupted(req) ||
		    (int64_t)clock_realtime_ns() >= deadline)
			return;
		pthread_mutex_lock(&fs->dirty_lock);
		pthread_cond_timedwait(&fs->grow_cond, &fs->dirty_lock, &ts);
		pthread_mutex_unlock(&fs->dirty_lock);
	}
}

/*
 * Answers a READ of [off, off + size) of n (n->rw held shared) that asks
 * for pages past n's last one while n is being rewritten: the kernel
 * still has the size from before an O_TRUNC open cut it under another
 * opener's feet. Answered short, the kernel fills the rest with zeros and
 * may keep the old size, so a reader would see a block of the right
 * length with zeros in it (ext4 never shows that). Such a read gets the
 * bytes of the version before the rewrite (queued for saving, or the
 * record the index still points at), as a reader that came a moment
 * earlier would have. Returns 1 when answered (n->rw released), 0 when
 * there is no such version (the caller answers as usual), -1 (only with
 * now) when that version is on the disk, with n->rw still held.
 */
static int fs_read_old(struct fs *fs, fuse_req_t req, struct node *n,
		       uint64_t off, size_t size, int now)
{
	struct iovec iov[FS_READ_IOV];
	const void *data = NULL;
	size_t got = 0;
	int rc;

	if (!n->dirty || off + size <= kv_align_up(n->attr.size) ||
	    size > FS_MAX_READ)
		return 0;
	if (n->wb && off < n->wb->size) {
		got = n->wb->size - off < size ? n->wb->size - off : size;
		node_pin(fs, n);
		fs_reply_iov_unlock(req, n, iov,
				    node_segs_iov(n->wb->segs, off, got, iov));
		node_put(fs, n, 0, 0, 1);
		return 1;
	}
	if (n->wb || !n->attr.ext.file_id || off >= n->disk_size)
		return 0;
	if (now)
		return -1;
	rc = store_read(fs->store, &n->attr.ext,
			n->crcs_loaded ? n->crcs : NULL, off, size, &data,
			&got);
	pthread_rwlock_unlock(&n->rw);
	/* The old version's trouble is not the new one's: no drop here. */
	if (rc == 0)
		fuse_reply_buf(req, data, got);
	else
		fs_reply_err(req, -EIO);
	return 1;
}

/* fs_read_in() leaves a READ for a thread that may wait: releases n->rw. */
static int fs_read_later(struct node *n)
{
	pthread_rwlock_unlock(&n->rw);
	return 0;
}

/*
 * The first read's load of n (n->rw held exclusive, nothing buffered):
 * its read-ahead's bytes, or (not now) the record read and checked. 0 when
 * loaded, 1 (only with now) when that needs a wait, or -errno.
 */
static int fs_read_fill(struct fs *fs, fuse_ino_t ino, struct node *n, int now)
{
#ifdef KVFS_FAULT_INJECTION
	int rc = fs_fault_read(fs, ino);

	if (rc < 0)
		return now ? 1 : rc;
#else
	(void)ino;
#endif
	/* Read ahead after its lookup, or read now. */
	if (ra_take(fs, n))
		return 0;
	return now ? 1 : node_fill(fs, n);
}

/*
 * Answers a READ. With now (fs_read_now()), only from memory: 0, with
 * nothing answered, when the bytes must come from the disk, from a
 * read-ahead still in flight or from an extent file (defer.h).
 */
static int fs_read_in(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi, int now)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	const void *data = NULL;
	struct node *n;
	size_t got = 0;
	int rc = 0, old;

	if (fs_ctl_ino(ino)) {
		fs_ctl_read(req, size, off, fi);
		return 1;
	}
	n = h->n;
	fs_read_atime(fs, h);
again:
	if (now && pthread_rwlock_tryrdlock(&n->rw) != 0)
		return 0; /* held exclusive: a first read is loading it */
	if (!now)
		pthread_rwlock_rdlock(&n->rw);
	if (kv_ext_large(&n->attr.ext))
		goto out_extent;
	old = fs_read_old(fs, req, n, (uint64_t)off, size, now);
	if (old)
		return old > 0 ? 1 : fs_read_later(n);
	if ((uint64_t)off < n->attr.size && !n->dirty && !n->cached && !n->wb &&
	    n->attr.size <= FS_VERIFY_MAX) {
		/* First read: load and check the whole file (fs.h). */
		struct kv_extent ext = n->attr.ext;

		pthread_rwlock_unlock(&n->rw);
		/* A read-ahead of it in flight: its bytes, not a second read. */
		if (now && !ra_ready(fs, &ext))
			return 0;
		if (!now)
			ra_wait(fs, &ext, req);
		pthread_rwlock_wrlock(&n->rw);
		if (kv_ext_large(&n->attr.ext))
			goto out_extent; /* it became one meanwhile */
		/* Or it is being rewritten now. */
		old = fs_read_old(fs, req, n, (uint64_t)off, size, now);
		if (old)
			return old > 0 ? 1 : fs_read_later(n);
		if (!n->dirty && !n->cached && !n->wb) {
			rc = fs_read_fill(fs, ino, n, now);
			if (rc > 0)
				return fs_read_later(n);
			if (rc < 0)
				goto out_unlock;
			/*
			 * Loaded: answered under the shared lock, so that the
			 * kernel's other requests for the file are answered
			 * beside this one, not after it.
			 */
			pthread_rwlock_unlock(&n->rw);
			goto again;
		}
	}
	if ((uint64_t)off < n->attr.size && (n->dirty || n->cached || n->wb)) {
		got = n->attr.size - (uint64_t)off < size
			      ? n->attr.size - (uint64_t)off
			      : size;
		fs_read_dirty(fs, req, n, (uint64_t)off, got);
		return 1;
	}
	if ((uint64_t)off < n->attr.size) {
		if (now)
			return fs_read_later(n);
#ifdef KVFS_FAULT_INJECTION
		rc = fs_fault_read(fs, ino);
		if (rc == 0)
#endif
			rc = store_read(fs->store, &n->attr.ext,
					n->crcs_loaded ? n->crcs : NULL,
					(uint64_t)off, size, &data, &got);
	}
out_unlock:
	/*
	 * Unlock before replying: after the reply the kernel may release the
	 * last handle and n with it. data is in this thread's read buffer.
	 */
	pthread_rwlock_unlock(&n->rw);
	if (rc == 0)
		fuse_reply_buf(req, data, got);
	else
		fs_read_failed(fs, req, n, off, rc);
	return 1;
out_extent:
	pthread_rwlock_unlock(&n->rw);
	if (now)
		return 0;
	rc = fs_ext_read(fs, n, size, (uint64_t)off, !!(fi->flags & O_DIRECT),
			 &data, &got);
	if (rc == 0)
		fuse_reply_buf(req, data, got);
	else if (rc == -ENOMEM)
		fs_reply_err(req, rc);
	else
		fs_read_failed(fs, req, n, off, rc);
	return 1;
}

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	fs_read_in(req, ino, size, off, fi, 0);
}

int fs_read_now(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	return fs_read_in(req, ino, size, off, fi, 1);
}

void fs_read_failed(struct fs *fs, fuse_req_t req, struct node *n, off_t off,
		    int rc)
{
	struct kv_extent ext;

	/* Never a short count: an error, and the name becomes a miss. */
	fs_read_damage(fs, n, (long long)off, rc, "read");
	/* Nor are bytes read ahead for it served to another handle. */
	pthread_rwlock_rdlock(&n->rw);
	ext = n->attr.ext;
	pthread_rwlock_unlock(&n->rw);
	ra_drop(fs, &ext);
	fs_reply_err(req, -EIO);
}

/*
 * Puts a WRITE's bytes into n's buffer: a whole segment's worth received
 * into a session loop's buffer by swapping that buffer in (rx.h), with no
 * copy; anything else copied (counted both ways). n->rw exclusive, the
 * range reserved.
 */
static void fs_write_bytes(struct fs *fs, struct node *n, uint64_t off,
			   const char *buf, size_t size)
{
	char **seg = node_seg_whole(n, off, size);

	if (seg && rx_swap(buf, size, seg)) {
		/* The segment's memory now: what is summed is in cache. */
		node_wrote(n, off, *seg, size);
		atomic_fetch_add_explicit(&fs->write_swapped, size,
					  memory_order_relaxed);
		return;
	}
	node_copy_in(n, off, buf, size);
	atomic_fetch_add_explicit(&fs->write_copied, size,
				  memory_order_relaxed);
}

/*
 * Answers a WRITE. With now (fs_write_now()), only one that needs no wait:
 * 0, with nothing answered, for an extent file or one that would become
 * one, and when the dirty budget has no room for it now.
 */
static int fs_write_in(fuse_req_t req, fuse_ino_t ino, const char *buf,
		       size_t size, off_t off, struct fuse_file_info *fi,
		       int now)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	struct node *n = h->n;
	uint64_t end = (uint64_t)off + size, need;
	int64_t mtime = fs_now_ns();
	int rc = 0;

	(void)ino;
	if (end > fs->cfg.max_file_size || end < (uint64_t)off) {
		fs_reply_err(req, -EFBIG);
		return 1;
	}
	if (now) {
		pthread_rwlock_rdlock(&n->rw);
		rc = kv_ext_large(&n->attr.ext) || end > fs->cfg.record_max;
		pthread_rwlock_unlock(&n->rw);
		need = rc ? 0 : fs_room_need(n, end);
		if (rc || (need && !node_budget_fits(fs, need)))
			return 0;
	}
	fs_writing(n, h);
	if (!now) {
		rc = fs_ext_grow(fs, n, end, fs_req_stop, req);
		if (rc == 0)
			rc = fs_room_for(fs, req, n, end);
	}
	if (rc < 0) {
		fs_reply_err(req, rc);
		return 1;
	}
	pthread_rwlock_wrlock(&n->rw);
	if (now && kv_ext_large(&n->attr.ext)) {
		/* It became one meanwhile. */
		pthread_rwlock_unlock(&n->rw);
		return 0;
	}
	/* The kernel leaves it to kvfs on a direct_io handle (ops.c). */
	if (h->direct && (n->attr.mode & (S_ISUID | S_ISGID)))
		rc = fs_kill_setid_locked(fs, n, fuse_req_ctx(req)->uid);
	if (rc < 0) {
		pthread_rwlock_unlock(&n->rw);
		fs_reply_err(req, rc);
		return 1;
	}
	if (kv_ext_large(&n->attr.ext)) {
		pthread_rwlock_unlock(&n->rw);
		rc = fs_ext_write(fs, n, buf, size, (uint64_t)off,
				  !!(fi->flags & O_DIRECT), fs_req_stop, req);
		if (rc < 0)
			fs_reply_err(req, rc);
		else
			fuse_reply_write(req, size);
		return 1;
	}
	rc = node_make_dirty(fs, n);
	if (rc == 0)
		rc = node_reserve(fs, n, end);
	if (rc == 0) {
		/* A write past the end leaves a hole that reads as zeros. */
		if ((uint64_t)off > n->attr.size)
			node_zero(n, n->attr.size,
				  (uint64_t)off - n->attr.size);
		fs_write_bytes(fs, n, (uint64_t)off, buf, size);
		if (end > n->attr.size)
			n->attr.size = end;
		n->attr.mtime_ns = mtime;
		n->attr.ctime_ns = mtime;
	}
	pthread_rwlock_unlock(&n->rw);
	if (rc < 0)
		fs_reply_err(req, rc);
	else
		fuse_reply_write(req, size);
	return 1;
}

void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	      off_t off, struct fuse_file_info *fi)
{
	fs_write_in(req, ino, buf, size, off, fi, 0);
}

int fs_write_now(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		 off_t off, struct fuse_file_info *fi)
{
	return fs_write_in(req, ino, buf, size, off, fi, 1);
}

/* Saves n's unsaved bytes, unless its last name is gone. */
static int fs_flush_node(struct fs *fs, struct node *n)
{
	int rc = 0;

	pthread_rwlock_wrlock(&n->rw);
	fs_ext_pt_refresh_locked(n);
	if ((n->dirty || n->x_dirty) && n->attr.nlink > 0)
		rc = wb_save_locked(fs, n);
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

/*
 * h's rewrite ends (n->rewriters) at its first FLUSH, which close(2)
 * waits for, or its RELEASE: the kernel sends RELEASE after close(2) has
 * returned, and an open that came between would still get direct_io
 * (and fail a shared mapping with ENODEV).
 */
static void fs_rewrite_end(struct fs_handle *h)
{
	/* Once only (FLUSHes of dup'd descriptors run side by side). */
	if (!atomic_exchange(&h->rewriter, 0))
		return;
	pthread_rwlock_wrlock(&h->n->rw);
	h->n->rewriters--;
	pthread_rwlock_unlock(&h->n->rw);
}

void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;

	int rc = 0;

	if (fs_ctl_ino(ino) || (h->flags & O_ACCMODE) == O_RDONLY) {
		fs_reply_err(req, 0);
		return;
	}
	/* An extent file's queued writes: close(2) reports their errors. */
	if (fs_is_extent(h->n))
		rc = fs_ext_settle(fs_of(req), h->n, fs_req_stop, req);
	if (rc == 0)
		rc = fs_flush_node(fs_of(req), h->n);
	fs_wrote(fs_of(req), h->n, h);
	fs_rewrite_end(h);
	fs_reply_err(req, rc);
}

int fs_close_may_wait(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);

	if (fs_ctl_ino(ino) || (h->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	/* Queued extent writes, or a save written before the reply. */
	return fs_is_extent(h->n) || !fs->wb || fs->cfg.durable;
}

void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	struct node *n;

	if (fs_ctl_ino(ino)) {
		fs_ctl_release(req, fi);
		return;
	}
	n = h->n;
	fs_wrote(fs, n, h);
	if (node_nopen(fs, n) == 1) {
		/* The last handle: drop the cache, the kernel keeps a copy. */
		pthread_rwlock_wrlock(&n->rw);
		if (n->cached)
			node_discard(fs, n);
		pthread_rwlock_unlock(&n->rw);
	}
	if ((h->flags & O_ACCMODE) != O_RDONLY && fs_flush_node(fs, n) < 0) {
		/*
		 * close(2) already reported the error; the bytes could not be
		 * saved, so the file goes back to what the index holds.
		 */
		pthread_rwlock_wrlock(&n->rw);
		node_discard(fs, n);
		n->attr.size = n->disk_size;
		pthread_rwlock_unlock(&n->rw);
		notify_inode(fs->notify, ino);
	}
	fs_handle_close(fs, h, 0);
	fs_reply_err(req, 0);
}

/*
 * With direct_io, a write-only handle's bytes go from the caller's pages
 * to kvfs (FOPEN_DIRECT_IO): no copy into page cache nobody reads
 * through it (a copy per page, and fresh pages to fill), and no GETXATTR
 * of security.capability per write. The kernel drops cached pages of the
 * range, so other handles read what it wrote. It cannot mmap shared. The
 * kernel then leaves the set-id bits to kvfs (fs_write()). Not for
 * O_DIRECT, which skips the page cache anyway: the kernel sends the
 * requests of one such write together, of a direct_io one in turn.
 *
 * An O_TRUNC rewrite gets it only when no other handle has n open, and
 * then every open of n until its first FLUSH gets it too (n->rewriters): the
 * kernel can add a page of the old size to its cache after the truncation
 * dropped them and fill it from a READ answered short, a page a direct_io
 * write does not replace, so a reader could later read the block whole
 * with zeros in it. With no handle open before and none caching during,
 * no such page is made. (When every such open had direct_io,
 * tests/mount/rewrite.sh failed with attr_timeout=0 in 2 runs of 6, over
 * io_uring in 3 of 8.)
 */
void fs_open_direct_locked(struct fs *fs, struct node *n, struct fs_handle *h,
			   int flags)
{
	int wronly = (flags & (O_ACCMODE | O_DIRECT)) == O_WRONLY;

	if (n->rewriters > 0)
		h->direct = !(flags & O_DIRECT);
	else if (wronly && !(flags & O_TRUNC))
		h->direct = 1;
	else if (wronly)
		h->direct = node_nopen(fs, n) == 0;
	if (h->direct && wronly && (flags & O_TRUNC)) {
		atomic_store(&h->rewriter, 1);
		n->rewriters++;
	}
}

void fs_handle_close(struct fs *fs, struct fs_handle *h, uint64_t nlookup_dec)
{
	struct node *n = h->n;

	fs_rewrite_end(h);
	if (h->bid)
		fs_ext_pt_close(fs, n);
	node_put(fs, n, nlookup_dec, 1, 0);
	free(h);
}

void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	int rc;

	if (fs_ctl_ino(ino)) {
		fs_reply_err(req, 0);
		return;
	}
	/* An extent file's bytes first, then the size that covers them. */
	rc = fs_is_extent(h->n) ? fs_ext_sync(fs, h->n, fs_req_stop, req) : 0;
	if (rc == 0)
		rc = fs_flush_node(fs, h->n);
	/* What it covers: this file's queued saves. */
	if (rc == 0)
		rc = wb_wait_node(fs, h->n, fs_req_stop, req);
	if (rc == 0)
		rc = store_sync(fs->store);
	if (rc == 0)
		rc = idx_sync(fs->idx);
	node_free_committed(fs);
	fs_reply_err(req, rc);
}

/*
 * fallocate(2) on a small file, n->rw exclusive: mode 0 grows it with
 * zeros like a truncate (the bytes take memory until saved, so the dirty
 * budget applies); KEEP_SIZE alone has nothing to reserve, records being
 * written whole at save time; PUNCH_HOLE and ZERO_RANGE zero the bytes.
 */
static int fs_fallocate_small(struct fs *fs, struct node *n, int mode,
			      uint64_t off, uint64_t end)
{
	int zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	uint64_t upto = end < n->attr.size ? end : n->attr.size;
	int64_t now = fs_now_ns();
	int rc = 0;

	if (zero && off < upto) {
		rc = node_make_dirty(fs, n);
		if (rc == 0)
			node_zero(n, off, upto - off);
	}
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) && end > n->attr.size)
		rc = fs_truncate_locked(fs, n, end, now);
	else if (rc == 0 && zero && off < upto)
		n->attr.mtime_ns = n->attr.ctime_ns = now;
	return rc;
}

/*
 * fallocate(2): modes 0 and KEEP_SIZE reserve, PUNCH_HOLE (with
 * KEEP_SIZE) and ZERO_RANGE zero; others are EOPNOTSUPP. A reservation
 * past record_max makes the file an extent file, where space is real.
 */
void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
		    FALLOC_FL_ZERO_RANGE;
	struct fs *fs = fs_of(req);
	uint64_t end = (uint64_t)off + (uint64_t)len;
	struct node *n;
	int rc = 0;

	if (fs_ctl_ino(ino) || (mode & ~known)) {
		fs_reply_err(req, -EOPNOTSUPP);
		return;
	}
	if (off < 0 || len <= 0) {
		fs_reply_err(req, -EINVAL);
		return;
	}
	if (end > fs->cfg.max_file_size || end < (uint64_t)off) {
		fs_reply_err(req, -EFBIG);
		return;
	}
	n = h->n;
	if (!(mode & FALLOC_FL_PUNCH_HOLE))
		rc = fs_ext_grow(fs, n, end, fs_req_stop, req);
	else
		rc = fs_is_extent(n);
	if (rc == 1) {
		fs_reply_err(req, fs_ext_fallocate(fs, n, mode, (uint64_t)off,
						   (uint64_t)len));
		return;
	}
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE))
		rc = fs_room_for(fs, req, n, end);
	if (rc == 0) {
		pthread_rwlock_wrlock(&n->rw);
		/* It may have become one meanwhile. */
		rc = kv_ext_large(&n->attr.ext)
			     ? -EAGAIN
			     : fs_fallocate_small(fs, n, mode, (uint64_t)off,
						  end);
		pthread_rwlock_unlock(&n->rw);
	}
	if (rc == -EAGAIN)
		rc = fs_ext_fallocate(fs, n, mode, (uint64_t)off,
				      (uint64_t)len);
	fs_reply_err(req, rc);
}
