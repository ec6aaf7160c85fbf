/* SPDX-License-Identifier: MIT */
/*
 * FUSE low-level request handlers. Each handler replies exactly once, with a
 * positive errno on failure (fs_reply_err). Namespace operations go to the
 * index in one transaction each; file bytes are in fileio.c and wb.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>

#include "capacity.h"
#include "ctlfiles.h"
#include "damage.h"
#include "extent.h"
#include "filebuf.h"
#include "fileio.h"
#include "fs.h"
#include "fuse_compat.h"
#include "lookup.h"
#include "names.h"
#include "node.h"
#include "notify.h"
#include "ops.h"
#include "share.h"
#include "wb.h"

static void fs_fill_entry(struct fs *fs, struct fuse_entry_param *e,
			  const struct idx_attr *a)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->ino;
	e->attr_timeout = fs->cfg.attr_timeout;
	e->entry_timeout = fs->cfg.entry_timeout;
	fs_fill_stat(fs, &e->attr, a);
}

static int fs_check_name(const char *name)
{
	return strlen(name) > IDX_NAME_MAX ? -ENAMETOOLONG : 0;
}

/*
 * A snapshot of n's attributes; with passthrough handles open, the size
 * and mtime the kernel's writes gave the backing file.
 */
static void fs_node_attr(struct node *n, struct idx_attr *out)
{
	if (atomic_load(&n->x_pt)) {
		pthread_rwlock_wrlock(&n->rw);
		fs_ext_pt_refresh_locked(n);
	} else {
		pthread_rwlock_rdlock(&n->rw);
	}
	*out = n->attr;
	pthread_rwlock_unlock(&n->rw);
}

/*
 * A directory in memory gets the change its index row just got from a
 * create or a remove in it (mtime and ctime now, nlink by delta), without
 * reading the index back.
 */
static void fs_touch_dir(struct fs *fs, uint64_t ino, int64_t now, int delta)
{
	struct node *n = node_find(fs, ino);

	if (!n)
		return;
	pthread_rwlock_wrlock(&n->rw);
	n->attr.mtime_ns = now;
	n->attr.ctime_ns = now;
	n->attr.nlink = (uint32_t)((int64_t)n->attr.nlink + delta);
	pthread_rwlock_unlock(&n->rw);
	node_put(fs, n, 0, 0, 1);
}

/*
 * Re-reads a directory's attributes after the index changed them (mtime,
 * ctime, nlink), when the directory is in memory.
 */
static void fs_refresh_dir(struct fs *fs, uint64_t ino)
{
	struct node *n = node_find(fs, ino);
	struct idx_attr a;

	if (!n)
		return;
	if (idx_getattr(fs->idx, ino, &a) == 0) {
		pthread_rwlock_wrlock(&n->rw);
		n->attr = a;
		pthread_rwlock_unlock(&n->rw);
	}
	node_put(fs, n, 0, 0, 1);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
	/* A WRITE's bytes fit one segment, the session loop's buffer (rx.h). */
	if (conn->max_write > NODE_SEG)
		conn->max_write = NODE_SEG;
	fuse_compat_init(conn, ((struct fs *)userdata)->cfg.io_uring,
			 ((struct fs *)userdata)->cfg.passthrough);
}

static void fs_destroy(void *userdata)
{
	node_flush_all(userdata, wb_save_locked);
	/* Unmount waits for every queued save. */
	wb_drain(userdata, -1);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_of(req);
	struct node *n = node_find(fs, ino);

	if (n)
		node_put(fs, n, nlookup, 0, 1);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++) {
		struct node *n = node_find(fs, forgets[i].ino);

		if (n)
			node_put(fs, n, forgets[i].nlookup, 0, 1);
	}
	fuse_reply_none(req);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct idx_attr a;
	struct stat st;
	struct node *n;
	int rc;

	if (fs_ctl_ino(ino)) {
		fs_ctl_getattr(fs, req, ino);
		return;
	}
	rc = node_get(fs, ino, NULL, 0, NULL, 0, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	fs_node_attr(n, &a);
	node_put(fs, n, 0, 0, 1);
	fs_fill_stat(fs, &st, &a);
	fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int64_t now = fs_now_ns();
	struct idx_attr a;
	struct stat st;
	struct node *n;
	int rc;

	if (fs_ctl_ino(ino)) {
		fs_reply_err(req, -EPERM);
		return;
	}
	rc = node_get(fs, ino, NULL, 0, NULL, 0, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	/* A stub's bytes first: a new size keeps or cuts them. */
	if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size > 0)
		rc = share_pull(fs, n, req);
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		rc = fs_ext_grow(fs, n, (uint64_t)attr->st_size, fs_req_stop,
				 req);
	/* An extent file's size takes no memory: no room to wait for. */
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		rc = fs_room_for(fs, req, n, (uint64_t)attr->st_size);
	else if (rc == 1)
		rc = 0;
	if (rc < 0) {
		node_put(fs, n, 0, 0, 1);
		fs_reply_err(req, rc);
		return;
	}
	pthread_rwlock_wrlock(&n->rw);
	if (to_set & FUSE_SET_ATTR_SIZE) {
		rc = fs_truncate_locked(fs, n, (uint64_t)attr->st_size, now);
		/* truncate(2) by path: nothing will flush it later. */
		if (rc == 0 && !fi)
			rc = wb_save_locked(fs, n);
		if (rc < 0)
			goto out_unlock;
	}
	if (to_set & FUSE_SET_ATTR_MODE)
		n->attr.mode =
			(n->attr.mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		n->attr.uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		n->attr.gid = attr->st_gid;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		n->attr.atime_ns = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		n->attr.atime_ns = (int64_t)attr->st_atim.tv_sec * 1000000000 +
				   attr->st_atim.tv_nsec;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		n->attr.mtime_ns = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		n->attr.mtime_ns = (int64_t)attr->st_mtim.tv_sec * 1000000000 +
				   attr->st_mtim.tv_nsec;
	if (to_set & FUSE_SET_ATTR_CTIME)
		n->attr.ctime_ns = (int64_t)attr->st_ctim.tv_sec * 1000000000 +
				   attr->st_ctim.tv_nsec;
	else
		n->attr.ctime_ns = now;
	/* The index keeps the size of the saved bytes, never unsaved ones. */
	a = n->attr;
	a.size = n->disk_size;
	rc = idx_setattr(fs->idx, &a);
	a = n->attr;
out_unlock:
	pthread_rwlock_unlock(&n->rw);
	node_put(fs, n, 0, 0, 1);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	/* A special file's node record keeps its permission bits. */
	if ((to_set & FUSE_SET_ATTR_MODE) && !S_ISREG(a.mode) &&
	    !S_ISDIR(a.mode) && !S_ISLNK(a.mode))
		names_record(fs, a.ino);
	fs_fill_stat(fs, &st, &a);
	fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
}

/*
 * Creates inode (parent, name) of the given mode for the requesting user and
 * returns its node, pinned and with one kernel lookup.
 */
static int fs_make(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, const char *target, dev_t rdev,
		   struct node **out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs *fs = fs_of(req);
	struct idx_attr a = {0};
	struct node *pn;
	int rc;

	rc = fs_check_name(name);
	if (rc < 0)
		return rc;
	if (fs_ctl_reserved(parent, name))
		return fs_ctl_ino(parent) ? -EPERM : -EEXIST;
	a.mode = mode;
	a.rdev = (uint64_t)rdev;
	a.uid = ctx->uid;
	a.gid = ctx->gid;
	a.atime_ns = a.mtime_ns = a.ctime_ns = fs_now_ns();
	pn = node_find(fs, parent);
	if (pn) {
		struct idx_attr pa;

		fs_node_attr(pn, &pa);
		node_put(fs, pn, 0, 0, 1);
		/* BSD group semantics under a setgid directory, as ext4. */
		if (pa.mode & S_ISGID) {
			a.gid = pa.gid;
			if (S_ISDIR(mode))
				a.mode |= S_ISGID;
		}
	}
	rc = idx_create(fs->idx, parent, name, &a, target);
	if (rc < 0)
		return rc;
	vc_bump(fs->vc, parent, name, 1, a.ino);
	/* As idx_create changed the parent's row. */
	fs_touch_dir(fs, parent, a.mtime_ns, S_ISDIR(mode) ? 1 : 0);
	/* A special file or symlink has no data record to carry its name. */
	if (!S_ISREG(mode) && !S_ISDIR(mode))
		names_record(fs, a.ino);
	return node_get(fs, a.ino, &a, parent, name, 1, out);
}

static void fs_reply_new(fuse_req_t req, struct node *n)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct idx_attr a;

	fs_node_attr(n, &a);
	node_put(fs, n, 0, 0, 1);
	fs_fill_entry(fs, &e, &a);
	fuse_reply_entry(req, &e);
}

/*
 * A new regular file is pending in the index until its first save (see
 * idx_purge_pending): a crash before it removes the file. One that will
 * be written is saved, empty or not, when closed; one that will not (a
 * mknod, a read-only create) is saved empty now.
 */
static void fs_settle_new(struct fs *fs, struct node *n, int writable)
{
	int rc;

	pthread_rwlock_wrlock(&n->rw);
	if (writable) {
		n->dirty = 1;
	} else {
		rc = idx_set_extent(fs->idx, n->ino, 0, n->attr.mtime_ns, NULL,
				    NULL, 0, NULL);
		if (rc < 0)
			log_warn("inode %llu: cannot save it empty (%s): a "
				 "crash would remove it",
				 (unsigned long long)n->ino, strerror(-rc));
	}
	pthread_rwlock_unlock(&n->rw);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct node *n;
	int rc;

	/*
	 * FIFOs, sockets and device nodes are only names with a type: the
	 * kernel serves them (kvfs never opens a device), CAP_MKNOD is the
	 * kernel's check.
	 */
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		break;
	default:
		fs_reply_err(req, -EINVAL);
		return;
	}
	if (!S_ISCHR(mode) && !S_ISBLK(mode))
		rdev = 0;
	rc = fs_make(req, parent, name, mode, NULL, rdev, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	if (S_ISREG(mode))
		fs_settle_new(fs_of(req), n, 0);
	fs_reply_new(req, n);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct node *n;
	int rc;

	rc = fs_make(req, parent, name, S_IFDIR | (mode & 07777), NULL, 0, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	share_mkdir(fs_of(req), parent, name, n->ino);
	fs_reply_new(req, n);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct node *n;
	int rc;

	if (strlen(link) >= PATH_MAX) {
		fs_reply_err(req, -ENAMETOOLONG);
		return;
	}
	rc = fs_make(req, parent, name, S_IFLNK | 0777, link, 0, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	fs_reply_new(req, n);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX];
	int rc;

	rc = idx_readlink(fs_of(req)->idx, ino, buf, sizeof(buf));
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	fuse_reply_readlink(req, buf);
}

/*
 * After a name of ino went (an unlink, a rename over it), nlink names left:
 * the node takes a name that is left (its saves record that path), and
 * the records a rebuild reads follow: the names left, or for a special
 * file with none left, that it is gone. Before fs_relink(), which may
 * release the inode.
 */
static void fs_name_gone(struct fs *fs, uint64_t ino, uint32_t nlink)
{
	char name[IDX_NAME_MAX + 1];
	struct node *n = node_find(fs, ino);
	struct idx_attr a;
	uint64_t parent;

	if (n)
		fs_node_attr(n, &a);
	else if (idx_getattr(fs->idx, ino, &a) < 0)
		return;
	if (nlink > 0 && n &&
	    idx_name_of(fs->idx, ino, &parent, name, sizeof(name)) == 0)
		node_rename(fs, n, parent, name);
	if (nlink > 0 || (!S_ISREG(a.mode) && !S_ISDIR(a.mode)))
		names_record(fs, ino);
	if (n)
		node_put(fs, n, 0, 0, 1);
}

static void fs_remove(fuse_req_t req, fuse_ino_t parent, const char *name,
		      int rmdir)
{
	struct fs *fs = fs_of(req);
	int64_t now = fs_now_ns();
	uint32_t nlink;
	uint64_t ino;
	int rc;

	char path[PATH_MAX] = "";

	rc = fs_check_name(name);
	if (rc == 0 && fs_ctl_reserved(parent, name))
		rc = fs_ctl_ino(parent) ? -EPERM : -EBUSY;
	/* The shared tier's object goes too (after the name, below). */
	if (rc == 0 && fs->share && !rmdir &&
	    share_path(fs, parent, name, path, sizeof(path)) < 0)
		path[0] = '\0';
	if (rc == 0)
		rc = idx_unlink(fs->idx, parent, name, rmdir, now, &ino,
				&nlink);
	if (rc == 0)
		vc_bump(fs->vc, parent, name, 0, 0);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	/*
	 * A removal that returned is never undone by a crash: it commits the
	 * index's batch (an engine removes a block it found bad).
	 */
	node_commit(fs, 1);
	/* As idx_unlink changed the parent's row. */
	fs_touch_dir(fs, parent, now, rmdir ? -1 : 0);
	fs_name_gone(fs, ino, nlink);
	fs_relink(fs, ino, nlink, now);
	if (path[0])
		share_removed(fs, path);
	fs_reply_err(req, 0);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_remove(req, parent, name, 0);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_remove(req, parent, name, 1);
}

/*
 * After a rename: the inode now at (parent, name), which was at (oparent,
 * oname), is called that in memory too, and a metadata record lets a
 * rebuild of the index find its names (names.h); a directory's move is
 * recorded unless move is 0 (an exchange of two directories: fs_rename
 * records it). Returns that inode when it is a regular file (for the
 * shared tier), or 0; *mode gets its type.
 */
static uint64_t fs_renamed(struct fs *fs, uint64_t parent, const char *name,
			   uint64_t oparent, const char *oname, int move,
			   int64_t now, uint32_t *mode)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct idx_attr a;
	struct node *n;

	*mode = 0;
	if (idx_lookup(fs->idx, parent, name, &a) < 0)
		return 0;
	*mode = a.mode;
	vc_bump(fs->vc, parent, name, 1, a.ino);
	n = node_find(fs, a.ino);
	if (n) {
		node_rename(fs, n, parent, name);
		pthread_rwlock_wrlock(&n->rw);
		n->attr.ctime_ns = now;
		pthread_rwlock_unlock(&n->rw);
	}
	/*
	 * A saved file's new name goes into a name record; one still queued
	 * gets it at commit (wb.c). The paths come from the index: the node
	 * table need not hold every directory on the way. names_record()
	 * reads the file's record after node_rename() counted the rename: a
	 * save that commits in between either sees the count (wb_finish()
	 * writes the record) or is seen here; read before, both missed it
	 * and the rebuilt index had the file under its temporary name.
	 */
	if (!S_ISDIR(a.mode))
		names_record(fs, a.ino);
	else if (move &&
		 names_path_of(fs, oparent, oname, from, sizeof(from)) == 0 &&
		 names_path_of(fs, parent, name, to, sizeof(to)) == 0)
		names_record_move(fs, a.ino, from, to);
	if (n)
		node_put(fs, n, 0, 0, 1);
	return S_ISREG(a.mode) ? a.ino : 0;
}

/*
 * The shared tier before a rename of (parent, name): a stub is pulled
 * first (RADOS has no rename: the new name is put from local bytes), and
 * the old path is kept in old for share_renamed(). Nothing for a temporary
 * name (never shared, never a stub: an engine's store renames one per
 * block). 0 or -errno.
 */
static int fs_share_rename(struct fs *fs, fuse_req_t req, uint64_t parent,
			   const char *name, char *old, size_t len)
{
	struct idx_attr a;
	struct node *n;
	int rc;

	if (!fs->share || share_is_tmp(name) ||
	    idx_lookup(fs->idx, parent, name, &a) < 0 || !S_ISREG(a.mode))
		return 0;
	if (share_path(fs, parent, name, old, len) < 0)
		old[0] = '\0';
	rc = node_get(fs, a.ino, &a, parent, name, 0, &n);
	if (rc < 0)
		return rc;
	rc = share_pull(fs, n, req);
	node_put(fs, n, 0, 0, 1);
	return rc;
}

/*
 * The move records of a RENAME_EXCHANGE (a is now at (np, nn), b at (p,
 * n)): a directory's move is recorded as usual; two directories swapped go
 * through a third path, as a rebuild applies moves one after the other.
 */
static void fs_exchanged(struct fs *fs, uint64_t p, const char *n,
			 uint32_t amode, uint64_t np, const char *nn,
			 uint32_t bmode)
{
	char pa[PATH_MAX], pb[PATH_MAX], tmp[64];
	struct idx_attr a, b;

	if ((!S_ISDIR(amode) && !S_ISDIR(bmode)) ||
	    names_path_of(fs, p, n, pa, sizeof(pa)) < 0 ||
	    names_path_of(fs, np, nn, pb, sizeof(pb)) < 0 ||
	    idx_lookup(fs->idx, np, nn, &a) < 0 ||
	    idx_lookup(fs->idx, p, n, &b) < 0)
		return;
	if (!S_ISDIR(bmode)) {
		names_record_move(fs, a.ino, pa, pb);
	} else if (!S_ISDIR(amode)) {
		names_record_move(fs, b.ino, pb, pa);
	} else {
		snprintf(tmp, sizeof(tmp), "/.kvfs/exchange.%llu",
			 (unsigned long long)a.ino);
		names_record_move(fs, a.ino, pa, tmp);
		names_record_move(fs, b.ino, pb, pa);
		names_record_move(fs, a.ino, tmp, pb);
	}
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	char old[PATH_MAX] = "", xold[PATH_MAX] = "";
	uint64_t ino, xino = 0;
	struct fs *fs = fs_of(req);
	int64_t now = fs_now_ns();
	uint64_t replaced = 0;
	uint32_t rnlink = 0, mode, xmode = 0;
	int rc;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fs_reply_err(req, -EINVAL);
		return;
	}
	rc = fs_check_name(name);
	if (rc == 0)
		rc = fs_check_name(newname);
	if (rc == 0 && (fs_ctl_reserved(parent, name) ||
			fs_ctl_reserved(newparent, newname)))
		rc = -EBUSY;
	if (rc == 0)
		rc = fs_share_rename(fs, req, parent, name, old, sizeof(old));
	if (rc == 0 && (flags & RENAME_EXCHANGE))
		rc = fs_share_rename(fs, req, newparent, newname, xold,
				     sizeof(xold));
	if (rc == 0)
		rc = idx_rename(fs->idx, parent, name, newparent, newname,
				flags, now, &replaced, &rnlink);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	/*
	 * A rename that replaced a file is never undone by a crash, which
	 * would bring the older file back: it commits the index's batch. A
	 * new file's rename waits for the next commit, and a crash before it
	 * loses the file whole (its save was queued, too).
	 */
	if (replaced)
		node_commit(fs, 1);
	fs_refresh_dir(fs, parent);
	if (newparent != parent)
		fs_refresh_dir(fs, newparent);
	ino = fs_renamed(fs, newparent, newname, parent, name,
			 !(flags & RENAME_EXCHANGE), now, &mode);
	if (flags & RENAME_EXCHANGE) {
		xino = fs_renamed(fs, parent, name, newparent, newname, 0, now,
				  &xmode);
		fs_exchanged(fs, parent, name, mode, newparent, newname, xmode);
	} else {
		vc_bump(fs->vc, parent, name, 0, 0);
	}
	if (replaced) {
		fs_name_gone(fs, replaced, rnlink);
		fs_relink(fs, replaced, rnlink, now);
	}
	if (ino)
		share_renamed(fs, ino, old);
	if (xino)
		share_renamed(fs, xino, xold);
	fs_reply_err(req, 0);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct fs *fs = fs_of(req);
	int64_t now = fs_now_ns();
	struct idx_attr a;
	struct node *n;
	int rc = fs_check_name(newname);

	if (rc == 0 && fs_ctl_ino(ino))
		rc = -EPERM;
	else if (rc == 0 && fs_ctl_reserved(newparent, newname))
		rc = fs_ctl_ino(newparent) ? -EPERM : -EEXIST;
	if (rc == 0)
		rc = idx_link(fs->idx, ino, newparent, newname, now, &a);
	if (rc == 0)
		rc = node_get(fs, ino, &a, newparent, newname, 1, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	vc_bump(fs->vc, newparent, newname, 1, ino);
	/* As idx_link changed the parent's row. */
	fs_touch_dir(fs, newparent, now, 0);
	pthread_rwlock_wrlock(&n->rw);
	n->attr.nlink = a.nlink;
	n->attr.ctime_ns = now;
	pthread_rwlock_unlock(&n->rw);
	/* A save queued now records every name at commit (wb.c). */
	atomic_fetch_add(&n->name_gen, 1);
	names_record(fs, ino);
	fs_reply_new(req, n);
}

/*
 * Sets up an open handle for n (pinned by the caller, who keeps its pin);
 * trunc: the open truncates it (O_TRUNC of an existing file), for user uid.
 */
static int fs_open_node(struct fs *fs, struct node *n,
			struct fuse_file_info *fi, int trunc, uid_t uid)
{
	struct fs_handle *h;
	int rc = 0;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_rwlock_wrlock(&n->rw);
	/*
	 * Evicted while no handle had it open, so its record is freed
	 * (node_evict_name); the kernel still knew the inode from an earlier
	 * lookup. To the opener the name is simply gone.
	 */
	if (n->evicted)
		rc = -ENOENT;
	else if (S_ISDIR(n->attr.mode) && (fi->flags & O_ACCMODE) != O_RDONLY)
		rc = -EISDIR;
	else if (trunc && S_ISREG(n->attr.mode))
		rc = fs_open_trunc_locked(fs, n, fi, uid);
	if (rc == 0 && S_ISREG(n->attr.mode) && !n->crcs_loaded &&
	    n->attr.ext.file_id) {
		rc = idx_get_crcs(fs->idx, n->ino, &n->crcs, &n->ncrcs);
		n->crcs_loaded = rc == 0;
	}
	if (rc == 0 && S_ISREG(n->attr.mode))
		h->bid = fs_ext_pt_open_locked(fs, n, node_nopen(fs, n));
	if (rc == 0 && S_ISREG(n->attr.mode) && !h->bid)
		fs_open_direct_locked(fs, n, h, fi->flags);
	/* Counted before n->rw is let go, so that fs_relink sees it open. */
	if (rc == 0)
		node_open_inc(fs, n);
	pthread_rwlock_unlock(&n->rw);
	if (rc < 0) {
		free(h);
		return rc;
	}
	if (S_ISREG(n->attr.mode)) {
		fs_touch(fs, n->ino);
		share_touch(fs, n->ino);
	}
	h->n = n;
	h->flags = fi->flags;
	/*
	 * A read-only open is for reading, and its reads may all come from
	 * the kernel's page cache and never reach kvfs: the atime rules run
	 * now (once per handle, as for its first read).
	 */
	if (S_ISREG(n->attr.mode) && (fi->flags & O_ACCMODE) == O_RDONLY)
		fs_read_atime(fs, h);
	fi->fh = (uint64_t)(uintptr_t)h;
	/*
	 * Blocks are written once: keep their pages across opens (the
	 * kernel refuses it with passthrough, which has no pages of its own).
	 */
	fi->keep_cache = !h->bid;
	if (h->direct)
		fi->direct_io = 1;
	/* Nothing to save on close of a read-only open: skip FLUSH. */
	if ((fi->flags & O_ACCMODE) == O_RDONLY)
		fi->noflush = 1;
	return 0;
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_handle *h;
	struct node *n;
	int rc;

	if (fs_ctl_ino(ino)) {
		fs_ctl_open(fs, req, ino, fi);
		return;
	}
	rc = node_get(fs, ino, NULL, 0, NULL, 0, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	/* Bytes only in the shared tier: fetched first (unless O_TRUNC). */
	if (!(fi->flags & O_TRUNC))
		rc = share_pull(fs, n, req);
	else
		fs_wait_writers(fs, req, n);
	if (rc == 0)
		rc = fs_open_node(fs, n, fi, !!(fi->flags & O_TRUNC),
				  fuse_req_ctx(req)->uid);
	node_put(fs, n, 0, 0, 1);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	h = (struct fs_handle *)(uintptr_t)fi->fh;
	if (fuse_compat_reply_open(req, fi, h->bid) != 0) {
		/* The opener is gone (interrupted): no RELEASE will come. */
		fs_handle_close(fs, h, 0);
	}
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct fs_handle *h;
	struct idx_attr a;
	struct node *n;
	int rc, made;

	rc = fs_make(req, parent, name, S_IFREG | (mode & 07777), NULL, 0, &n);
	made = rc == 0;
	if (made)
		fs_settle_new(fs, n, (fi->flags & O_ACCMODE) != O_RDONLY);
	if (rc == -EEXIST && !(fi->flags & O_EXCL)) {
		/* Lost a race with another creator: open theirs. */
		rc = idx_lookup(fs->idx, parent, name, &a);
		if (rc == 0)
			rc = node_get(fs, a.ino, &a, parent, name, 1, &n);
	}
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	if (!made && (fi->flags & O_TRUNC))
		fs_wait_writers(fs, req, n);
	rc = fs_open_node(fs, n, fi, !made && (fi->flags & O_TRUNC),
			  fuse_req_ctx(req)->uid);
	if (rc < 0) {
		node_put(fs, n, 1, 0, 1);
		fs_reply_err(req, rc);
		return;
	}
	fs_node_attr(n, &a);
	node_put(fs, n, 0, 0, 1);
	fs_fill_entry(fs, &e, &a);
	h = (struct fs_handle *)(uintptr_t)fi->fh;
	if (fuse_compat_reply_create(req, &e, fi, h->bid) != 0)
		fs_handle_close(fs, h, 1);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);

	/* What other machines stored here shows up in the listing. */
	if (!fs_ctl_ino(ino))
		share_list(fs, ino);
	fi->fh = 0;
	/*
	 * The kernel keeps the listing in the directory's page cache and
	 * serves the next opendir from it: it drops it when a change made
	 * through the mount bumps the directory's version, and the names
	 * kvfs removes on its own go through the notifier, which drops it
	 * too (kvfs(7), KERNEL FACTS). With a shared tier names also appear
	 * from other machines at any opendir or lookup: no cache then.
	 */
	fi->cache_readdir = !fs->share && !fs_ctl_ino(ino);
	fi->keep_cache = fi->cache_readdir;
	fuse_reply_open(req, fi);
}

struct fs_dirbuf {
	fuse_req_t req;
	struct fs *fs;
	uint64_t dir;
	char *buf;
	size_t size;
	size_t len;
	int plus;
	int err;
};

static int fs_dirbuf_add(void *arg, const char *name,
			 const struct idx_attr *attr, uint64_t cookie)
{
	struct fs_dirbuf *d = arg;
	size_t room = d->size - d->len;
	off_t next = (off_t)cookie + 2;
	struct fuse_entry_param e;
	struct idx_attr na;
	struct node *n;
	size_t need;

	if (!d->plus) {
		struct stat st = {.st_ino = attr->ino, .st_mode = attr->mode};

		need = fuse_add_direntry(d->req, NULL, 0, name, NULL, 0);
		if (need > room)
			return 1;
		fuse_add_direntry(d->req, d->buf + d->len, room, name, &st,
				  next);
		d->len += need;
		return 0;
	}
	need = fuse_add_direntry_plus(d->req, NULL, 0, name, NULL, 0);
	if (need > room)
		return 1;
	/* Each entry handed out with readdirplus is a kernel lookup. */
	d->err = node_get(d->fs, attr->ino, attr, d->dir, name, 1, &n);
	if (d->err < 0)
		return 1;
	/*
	 * The node's attributes, not the index's: unsaved writes, and an
	 * atime a read set that goes to the index only with the next batch
	 * of last uses (the kernel would cache the older one).
	 */
	fs_node_attr(n, &na);
	fs_fill_entry(d->fs, &e, &na);
	node_put(d->fs, n, 0, 0, 1);
	fuse_add_direntry_plus(d->req, d->buf + d->len, room, name, &e, next);
	d->len += need;
	return 0;
}

static int fs_dirbuf_dot(struct fs_dirbuf *d, const char *name, off_t next)
{
	size_t room = d->size - d->len;
	size_t need;

	if (d->plus) {
		struct fuse_entry_param e = {
			.attr = {.st_ino = d->dir, .st_mode = S_IFDIR}};

		need = fuse_add_direntry_plus(d->req, NULL, 0, name, NULL, 0);
		if (need > room)
			return 1;
		fuse_add_direntry_plus(d->req, d->buf + d->len, room, name, &e,
				       next);
	} else {
		struct stat st = {.st_ino = d->dir, .st_mode = S_IFDIR};

		need = fuse_add_direntry(d->req, NULL, 0, name, NULL, 0);
		if (need > room)
			return 1;
		fuse_add_direntry(d->req, d->buf + d->len, room, name, &st,
				  next);
	}
	d->len += need;
	return 0;
}

static void fs_readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			      off_t off, int plus)
{
	struct fs_dirbuf d = {.req = req,
			      .fs = fs_of(req),
			      .dir = ino,
			      .size = size,
			      .plus = plus};
	int rc = 0;

	if (fs_ctl_ino(ino)) {
		fs_ctl_readdir(d.fs, req, size, off, plus);
		return;
	}
	d.buf = malloc(size);
	if (!d.buf) {
		fs_reply_err(req, -ENOMEM);
		return;
	}
	if (off < 1 && fs_dirbuf_dot(&d, ".", 1))
		goto out_reply;
	if (off < 2 && fs_dirbuf_dot(&d, "..", 2))
		goto out_reply;
	rc = (plus ? idx_readdir : idx_readdir_names)(
		d.fs->idx, ino, off >= 2 ? (uint64_t)off - 2 : 0, fs_dirbuf_add,
		&d);
	if (rc == 0 && d.err < 0 && d.len == 0)
		rc = d.err;
out_reply:
	if (rc < 0)
		fs_reply_err(req, rc);
	else
		fuse_reply_buf(req, d.buf, d.len);
	free(d.buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	fs_readdir_common(req, ino, size, off, 0);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	fs_readdir_common(req, ino, size, off, 1);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	fs_reply_err(req, 0);
}

static void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int rc = idx_sync(fs->idx);

	node_free_committed(fs);
	fs_reply_err(req, rc);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	uint64_t used = fs_used(fs), cap = fs->cfg.capacity;
	struct statvfs sv, out = {0};
	uint64_t ninodes = 0, nbytes = 0, avail;

	if (statvfs(fs->cfg.datadir, &sv) < 0) {
		fs_reply_err(req, -errno);
		return;
	}
	idx_statfs(fs->idx, &ninodes, &nbytes);
	/* df shows the configured capacity and what kvfs really uses. */
	avail = used < cap ? cap - used : 0;
	if (avail > (uint64_t)sv.f_bavail * sv.f_frsize)
		avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	out.f_bsize = KV_ALIGN;
	out.f_frsize = KV_ALIGN;
	out.f_blocks = cap / KV_ALIGN;
	out.f_bfree = avail / KV_ALIGN;
	out.f_bavail = avail / KV_ALIGN;
	out.f_files = ninodes + sv.f_ffree;
	out.f_ffree = sv.f_ffree;
	out.f_favail = sv.f_favail;
	out.f_namemax = IDX_NAME_MAX;
	fuse_reply_statfs(req, &out);
}

/*
 * Which xattr namespaces kvfs stores: user.* only. Others get what ext4
 * gives for a name it has no value for (reads) or cannot store (writes).
 */
static int fs_xattr_ns(const char *name, int write)
{
	if (strncmp(name, "user.", 5) == 0 && name[5] != '\0')
		return 0;
	if (strncmp(name, "security.", 9) == 0 ||
	    strncmp(name, "trusted.", 8) == 0 ||
	    strncmp(name, "system.", 7) == 0)
		return write ? -EOPNOTSUPP : -ENODATA;
	return -EOPNOTSUPP;
}

/* user.* xattrs exist on regular files and directories only (as ext4). */
static int fs_xattr_target(struct fs *fs, fuse_ino_t ino)
{
	struct idx_attr a;
	struct node *n;
	int rc;

	if (fs_ctl_ino(ino))
		return -EPERM;
	rc = node_get(fs, ino, NULL, 0, NULL, 0, &n);
	if (rc < 0)
		return rc;
	fs_node_attr(n, &a);
	node_put(fs, n, 0, 0, 1);
	return S_ISREG(a.mode) || S_ISDIR(a.mode) ? 0 : -EPERM;
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs *fs = fs_of(req);
	int rc;

#ifdef KVFS_FAULT_INJECTION
	if (fs_fault_setxattr(fs, ino, name, value, size, &rc)) {
		fs_reply_err(req, rc);
		return;
	}
#endif
	rc = fs_xattr_ns(name, 1);
	if (rc == 0)
		rc = fs_xattr_target(fs, ino);
	if (rc == 0)
		rc = idx_setxattr(fs->idx, ino, name, value, size, flags);
	fs_reply_err(req, rc);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = fs_of(req);
	char *buf = NULL;
	int rc;

	atomic_fetch_add(&fs->getxattrs, 1);
	rc = fs_xattr_ns(name, 0);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	if (size > 0) {
		buf = malloc(size);
		if (!buf) {
			fs_reply_err(req, -ENOMEM);
			return;
		}
	}
	rc = idx_getxattr(fs->idx, ino, name, buf, size);
	if (rc < 0)
		fs_reply_err(req, rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
	free(buf);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fs_of(req);
	char *buf = NULL;
	int rc;

	if (size > 0) {
		buf = malloc(size);
		if (!buf) {
			fs_reply_err(req, -ENOMEM);
			return;
		}
	}
	rc = idx_listxattr(fs->idx, ino, buf, size);
	if (rc < 0)
		fs_reply_err(req, rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
	free(buf);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = fs_of(req);
	int rc;

	rc = fs_xattr_ns(name, 1);
	if (rc == 0)
		rc = idx_removexattr(fs->idx, ino, name);
	fs_reply_err(req, rc);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.destroy = fs_destroy,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.readlink = fs_readlink,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.fallocate = fs_fallocate,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.fsyncdir = fs_fsyncdir,
	.statfs = fs_statfs,
	.setxattr = fs_setxattr,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.removexattr = fs_removexattr,
	.create = fs_create,
};
