/* SPDX-License-Identifier: MIT */
/*
 * Extent files in the daemon (extent.h): moving a growing file's bytes out
 * of memory into its own backing file, and READ, WRITE, truncation,
 * fallocate and fsync on it. Writes inside the file's size run side by
 * side under n->rw shared (positional I/O); writes that grow it, and
 * every change of its size, take n->rw exclusive. Not here: the format
 * (core/extfile.c), committing the size (node_ext_save_locked).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "extent.h"
#include "extq.h"
#include "filebuf.h"
#include "fs.h"
#include "fuse_compat.h"
#include "log.h"
#include "node.h"
#include "wb.h"

/* Saves of a file queued meanwhile that a conversion waits out. */
#define FS_EXT_TRIES 4

/* Opens n's backing file (n->rw exclusive); its absence is damage. */
static int fs_ext_open_locked(struct fs *fs, struct node *n)
{
	int rc;

	if (n->x.fd >= 0)
		return 0;
	rc = extf_open(fs->ext_fd, n->ino, &n->x);
	if (rc == -ENOENT)
		return -ENODATA; /* the bytes are gone: provably short */
	return rc == -EINVAL ? -EBADMSG : rc;
}

/*
 * Takes n->rw shared with n's backing file open. 0, or -errno with no
 * lock held. The descriptor stays open while the node lives.
 */
static int fs_ext_rdlock(struct fs *fs, struct node *n)
{
	int rc;

	pthread_rwlock_rdlock(&n->rw);
	if (n->x.fd >= 0)
		return 0;
	pthread_rwlock_unlock(&n->rw);
	pthread_rwlock_wrlock(&n->rw);
	rc = fs_ext_open_locked(fs, n);
	pthread_rwlock_unlock(&n->rw);
	if (rc < 0)
		return rc;
	pthread_rwlock_rdlock(&n->rw);
	return 0;
}

/* Copies n's current bytes (buffer or record) into x. n->rw exclusive. */
static int fs_ext_fill(struct fs *fs, struct node *n, const struct extf *x)
{
	const struct store_io_ops *io = store_io(fs->store);
	uint64_t size = n->attr.size, off = 0;
	const void *data;
	size_t got;
	int rc;

	if (n->dirty || n->cached) {
		for (size_t i = 0; off < size; i++) {
			size_t take =
				size - off < NODE_SEG ? size - off : NODE_SEG;

			rc = extf_write(io, x, n->segs[i], take, off, 0);
			if (rc < 0)
				return rc;
			off += take;
		}
		return 0;
	}
	if (size == 0)
		return 0;
	if (n->attr.ext.file_id == 0)
		return -EIO; /* a stub: its bytes are not here */
	if (!n->crcs_loaded) {
		rc = idx_get_crcs(fs->idx, n->ino, &n->crcs, &n->ncrcs);
		if (rc < 0)
			return rc;
		n->crcs_loaded = 1;
	}
	while (off < size) {
		rc = store_read(fs->store, &n->attr.ext, n->crcs, off, NODE_SEG,
				&data, &got);
		if (rc == 0 && got == 0)
			rc = -EIO;
		if (rc == 0)
			rc = extf_write(io, x, data, got, off, 0);
		if (rc < 0)
			return rc;
		off += got;
	}
	return 0;
}

int fs_ext_convert_locked(struct fs *fs, struct node *n)
{
	struct kv_extent ext = {.hdr_len = KV_EXT_LARGE, .off = n->ino}, old;
	uint64_t size = n->attr.size;
	struct extf x;
	char *path;
	int rc;

	if (kv_ext_large(&n->attr.ext))
		return 0;
	if (!S_ISREG(n->attr.mode))
		return -EINVAL;
	if (n->wb || atomic_load(&n->wb_jobs))
		return -EBUSY;
	path = node_path(fs, n);
	if (!path)
		return -ENOMEM;
	rc = extf_create(fs->ext_fd, store_io(fs->store), n->ino,
			 store_take_seq(fs->store), path, &x);
	if (rc == 0)
		rc = fs_ext_fill(fs, n, &x);
	if (rc == 0)
		rc = extf_truncate(&x, size);
	ext.len = size;
	if (rc == 0)
		rc = idx_set_extent(fs->idx, n->ino, size, n->attr.mtime_ns,
				    &ext, NULL, 0, &old);
	if (rc < 0) {
		if (x.fd >= 0) {
			extf_close(&x);
			extf_remove(fs->ext_fd, n->ino);
		}
		log_warn("%s (inode %llu) cannot become an extent file: %s",
			 path, (unsigned long long)n->ino, strerror(-rc));
		free(path);
		return rc;
	}
	node_discard(fs, n);
	free(n->crcs);
	n->crcs = NULL;
	n->ncrcs = 0;
	n->crcs_loaded = 0;
	n->attr.ext = ext;
	n->disk_size = size;
	n->x = x;
	n->x_dirty = 0;
	node_free_extent(fs, &old);
	atomic_fetch_add(&fs->ext_made, 1);
	log_info("%s (inode %llu, %llu bytes) is an extent file now: it grows "
		 "past record_max",
		 path, (unsigned long long)n->ino, (unsigned long long)size);
	free(path);
	return 0;
}

int fs_ext_grow(struct fs *fs, struct node *n, uint64_t end,
		int (*stop)(void *), void *arg)
{
	int rc = 0, need, busy, large;

	for (int tries = 0; tries < FS_EXT_TRIES; tries++) {
		pthread_rwlock_rdlock(&n->rw);
		large = kv_ext_large(&n->attr.ext);
		need = S_ISREG(n->attr.mode) && !large &&
		       end > fs->cfg.record_max;
		busy = n->wb || atomic_load(&n->wb_jobs);
		pthread_rwlock_unlock(&n->rw);
		if (!need)
			return large;
		if (busy) {
			rc = wb_wait_node(fs, n, stop, arg);
			if (rc == -EINTR)
				return rc;
			if (rc < 0) {
				/* Kept for the fsync(2) that reports it. */
				pthread_rwlock_wrlock(&n->rw);
				n->wb_err = rc;
				pthread_rwlock_unlock(&n->rw);
			}
		}
		pthread_rwlock_wrlock(&n->rw);
		rc = fs_ext_convert_locked(fs, n);
		pthread_rwlock_unlock(&n->rw);
		if (rc != -EBUSY)
			return rc < 0 ? rc : 1;
	}
	return rc;
}

int fs_is_extent(struct node *n)
{
	int large;

	pthread_rwlock_rdlock(&n->rw);
	large = kv_ext_large(&n->attr.ext);
	pthread_rwlock_unlock(&n->rw);
	return large;
}

int fs_ext_read(struct fs *fs, struct node *n, size_t size, uint64_t off,
		int direct, const void **data, size_t *got)
{
	size_t want = 0;
	void *buf = NULL;
	int rc;

	*got = 0;
	/* A read sees the queued writes it overlaps. */
	rc = fs_extq_wait(fs, n, off, size, NULL, NULL);
	if (rc == 0)
		rc = fs_ext_rdlock(fs, n);
	if (rc == 0) {
		if (off < n->attr.size)
			want = n->attr.size - off < size
				       ? (size_t)(n->attr.size - off)
				       : size;
		/* Room for an O_DIRECT read of whole pages. */
		buf = want ? store_buf(kv_align_up(want)) : NULL;
		if (want && !buf)
			rc = -ENOMEM;
		if (buf)
			rc = extf_read(store_io(fs->store), &n->x, buf, want,
				       off, got, direct);
		/* Inside the size, the backing file ends: cut short. */
		if (rc == 0 && *got < want)
			rc = -ENODATA;
		if (rc == 0)
			atomic_fetch_add(&fs->ext_read_bytes, *got);
		pthread_rwlock_unlock(&n->rw);
	}
	*data = buf;
	return rc;
}

/*
 * Queues a write of whole pages (extq.h): 0 when queued, or -errno. One
 * that ends past the file's size first grows the backing file to its end
 * (n->rw exclusive), so that the size the writer is told holds and later
 * writes inside it can be queued too.
 */
static int fs_ext_queue(struct fs *fs, struct node *n, const char *buf,
			size_t size, uint64_t off, int (*stop)(void *),
			void *arg)
{
	uint64_t end = off + size;
	int rc = fs_extq_reserve(fs, size, stop, arg), grow;

	if (rc < 0)
		return rc;
	rc = fs_ext_rdlock(fs, n);
	if (rc < 0) {
		fs_extq_unreserve(fs, size);
		return rc;
	}
	grow = end > n->attr.size;
	if (grow) {
		/* The size changes: one at a time (x.fd stays open). */
		pthread_rwlock_unlock(&n->rw);
		pthread_rwlock_wrlock(&n->rw);
	}
	/* An earlier queued write failed: this writer hears of it. */
	rc = fs_extq_error(n);
	if (rc == 0 && end > n->attr.size) {
		rc = extf_truncate(&n->x, end);
		if (rc == 0)
			n->attr.size = end;
	}
	if (rc < 0)
		fs_extq_unreserve(fs, size);
	else
		rc = fs_extq_put(fs, n, buf, size, off);
	if (rc == 0 && !grow) {
		pthread_rwlock_unlock(&n->rw);
		pthread_rwlock_wrlock(&n->rw);
	}
	if (rc == 0) {
		n->attr.mtime_ns = fs_now_ns();
		n->attr.ctime_ns = n->attr.mtime_ns;
		n->x_dirty = 1;
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

int fs_ext_write(struct fs *fs, struct node *n, const char *buf, size_t size,
		 uint64_t off, int direct, int (*stop)(void *), void *arg)
{
	const struct store_io_ops *io = store_io(fs->store);
	int aligned = off % KV_ALIGN == 0 && size % KV_ALIGN == 0 && size > 0;
	uint64_t end = off + size;
	int rc, grow;
	void *bounce;

	/*
	 * The disk's last bytes are the index's, so it can still commit;
	 * queued bytes are not on the disk yet.
	 */
	rc = store_check_space(fs->store, size + fs_extq_bytes(fs));
	if (rc < 0)
		return rc;
	/*
	 * Whole pages are copied, queued and written with O_DIRECT by the
	 * extent writers, side by side (extq.h), from buffered writers too:
	 * the mount's page cache holds the bytes a buffered reader wants, a
	 * second copy in the backing file's would only crowd it.
	 */
	if (aligned && fs->extq)
		return fs_ext_queue(fs, n, buf, size, off, stop, arg);
	/*
	 * Else an O_DIRECT writer's whole pages go to the disk with
	 * O_DIRECT, as on a plain file, from an aligned copy (the request's
	 * bytes follow its header in libfuse's buffer).
	 */
	direct = direct && aligned;
	if (direct && (bounce = store_buf(size)) != NULL) {
		memcpy(bounce, buf, size);
		buf = bounce;
	}
	/* Queued writes it overlaps land first. */
	rc = fs_extq_wait(fs, n, off, size, stop, arg);
	if (rc == 0)
		rc = fs_ext_rdlock(fs, n);
	if (rc < 0)
		return rc;
	grow = end > n->attr.size;
	if (grow) {
		/* The size changes with the bytes: one at a time. */
		pthread_rwlock_unlock(&n->rw);
		pthread_rwlock_wrlock(&n->rw);
	}
	rc = extf_write(io, &n->x, buf, size, off, direct);
	if (!grow) {
		pthread_rwlock_unlock(&n->rw);
		pthread_rwlock_wrlock(&n->rw);
	}
	if (rc == 0) {
		/* Only a write that held n->rw throughout may grow it. */
		if (grow && end > n->attr.size)
			n->attr.size = end;
		n->attr.mtime_ns = fs_now_ns();
		n->attr.ctime_ns = n->attr.mtime_ns;
		n->x_dirty = 1;
		atomic_fetch_add(&fs->ext_write_bytes, size);
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

int fs_ext_truncate_locked(struct fs *fs, struct node *n, uint64_t size,
			   int64_t now)
{
	int rc = fs_ext_open_locked(fs, n);

	fs_ext_pt_refresh_locked(n);
	/* No write can be queued meanwhile: that takes n->rw. */
	if (rc == 0)
		rc = fs_extq_wait(fs, n, 0, 0, NULL, NULL);

	if (rc == 0 && size > n->attr.size)
		rc = store_check_space(fs->store, 0);
	if (rc == 0)
		rc = extf_truncate(&n->x, size);
	if (rc < 0)
		return rc;
	n->attr.size = size;
	n->attr.mtime_ns = now;
	n->attr.ctime_ns = now;
	n->x_dirty = 1;
	return 0;
}

int fs_ext_fallocate(struct fs *fs, struct node *n, int mode, uint64_t off,
		     uint64_t len)
{
	int zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	uint64_t end = off + len;
	int rc;

	pthread_rwlock_wrlock(&n->rw);
	rc = fs_ext_open_locked(fs, n);
	fs_ext_pt_refresh_locked(n);
	if (rc == 0)
		rc = fs_extq_wait(fs, n, 0, 0, NULL, NULL);
	/* A reservation leaves the index its room, as a write does. */
	if (rc == 0 && !(mode & FALLOC_FL_PUNCH_HOLE))
		rc = store_check_space(fs->store, len);
	if (rc == 0)
		rc = extf_allocate(&n->x, mode, off, len);
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) && end > n->attr.size) {
		n->attr.size = end;
		zero = 1;
	}
	if (rc == 0 && zero) {
		n->attr.mtime_ns = fs_now_ns();
		n->attr.ctime_ns = n->attr.mtime_ns;
		n->x_dirty = 1;
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

int fs_ext_settle(struct fs *fs, struct node *n, int (*stop)(void *), void *arg)
{
	int rc = fs_extq_wait(fs, n, 0, 0, stop, arg);

	return rc < 0 ? rc : fs_extq_error(n);
}

int fs_ext_sync(struct fs *fs, struct node *n, int (*stop)(void *), void *arg)
{
	int rc = fs_ext_settle(fs, n, stop, arg);

	if (rc == 0)
		rc = fs_ext_rdlock(fs, n);
	if (rc < 0)
		return rc;
	rc = extf_sync(store_io(fs->store), &n->x);
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

/* Whether a test hook stands between extent files and their disk. */
static int fs_ext_faults(struct fs *fs)
{
#ifdef KVFS_FAULT_INJECTION
	return atomic_load(&fs->fault_ext_delay_ms) ||
	       atomic_load(&fs->fault_ext_error);
#else
	(void)fs;
	return 0;
#endif
}

/* Registers n's backing file with the kernel: its id, or -errno. */
static int fs_ext_backing_open(struct fs *fs, struct node *n)
{
#ifdef KVFS_FAULT_INJECTION
	int err = atomic_load(&fs->fault_backing_error);

	if (err)
		return -err;
#endif
	return fuse_compat_backing_open(fs->se, n->x.fd);
}

int fs_ext_pt_open_locked(struct fs *fs, struct node *n, unsigned nopen)
{
	uint64_t size;
	int id;

	/* (fuse_compat_passthrough() is 0 unless cfg.passthrough asked.) */
	if (atomic_load(&fs->pt_off) || !fuse_compat_passthrough() ||
	    !kv_ext_large(&n->attr.ext) || atomic_load(&n->x_pt) != nopen ||
	    fs_ext_faults(fs))
		return 0;
	/*
	 * The kernel maps the file's offsets onto the backing file's: not
	 * for the older shape, its header first. It passes O_DIRECT on: not
	 * where the backing file system refuses it (kvfs falls back). A cut
	 * backing file is left to READ, which finds it short and drops the
	 * name.
	 */
	if (fs_ext_open_locked(fs, n) < 0 || n->x.hdr_len != 0 ||
	    n->x.dfd < 0 || extf_size(&n->x, &size, NULL) < 0 ||
	    size < n->attr.size)
		return 0;
	if (!n->x_bid) {
		id = fs_ext_backing_open(fs, n);
		if (id < 0) {
			if (!atomic_exchange(&fs->pt_off, 1))
				log_warn("the kernel refused a backing file "
					 "(%s): extent files' I/O goes "
					 "through kvfs from now on",
					 strerror(-id));
			return 0;
		}
		n->x_bid = id;
	}
	atomic_fetch_add(&n->x_pt, 1);
	atomic_fetch_add(&fs->pt_opens, 1);
	return n->x_bid;
}

void fs_ext_pt_close(struct fs *fs, struct node *n)
{
	pthread_rwlock_wrlock(&n->rw);
	fs_ext_pt_refresh_locked(n);
	if (atomic_fetch_sub(&n->x_pt, 1) == 1 && n->x_bid) {
		fuse_compat_backing_close(fs->se, n->x_bid);
		n->x_bid = 0;
	}
	pthread_rwlock_unlock(&n->rw);
}

void fs_ext_pt_refresh_locked(struct node *n)
{
	struct stat st;
	int64_t mtime;

	if (!atomic_load(&n->x_pt) || n->x.fd < 0 || fstat(n->x.fd, &st) < 0)
		return;
	mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if ((uint64_t)st.st_size == n->attr.size && mtime <= n->attr.mtime_ns)
		return;
	n->attr.size = (uint64_t)st.st_size;
	if (mtime > n->attr.mtime_ns)
		n->attr.mtime_ns = n->attr.ctime_ns = mtime;
	n->x_dirty = 1;
}
