/* SPDX-License-Identifier: MIT */
/*
 * The deferred requests of defer.h: a FIFO of jobs and the threads that
 * run the original handlers. The original handlers are kept in
 * defer_orig, set once by defer_patch_ops() before the session starts and
 * read-only after.
 */
#include "defer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fuse_compat.h"
#include "log.h"

enum defer_op {
	DJ_READ,
	DJ_WRITE,
	DJ_FLUSH,
	DJ_RELEASE,
	DJ_FSYNC,
	DJ_FSYNCDIR,
	DJ_FALLOCATE,
	DJ_SETATTR,
	DJ_OPEN,
	DJ_OPENDIR,
	DJ_CREATE,
	DJ_MKNOD,
	DJ_MKDIR,
	DJ_UNLINK,
	DJ_RMDIR,
	DJ_SYMLINK,
	DJ_RENAME,
	DJ_LINK,
};

/* One deferred request: its arguments, copied (but a WRITE's bytes). */
struct defer_job {
	struct defer_job *next;
	enum defer_op op;
	fuse_req_t req;
	fuse_ino_t ino, ino2;
	int has_fi;
	struct fuse_file_info fi;
	const char *buf; /* WRITE: the request's own bytes, or copy */
	void *copy;
	size_t size;
	off_t off, len;
	int flags; /* datasync, fallocate mode, to_set, rename flags */
	mode_t mode;
	dev_t rdev;
	struct stat attr;
	char *name, *name2;
};

struct defer {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct defer_job *head, *tail; /* protected by lock */
	int stopping;		       /* protected by lock */
	int joined; /* the threads are gone (main thread only) */
	unsigned nthreads;
	pthread_t *threads;
	struct fs *fs;
};

/* The handlers defer_patch_ops() replaced (set once, then read-only). */
static struct fuse_lowlevel_ops defer_orig;
/* Copy WRITE bytes: the classic loop reuses its buffer after a handler. */
static int defer_copy_bytes;
/* -o durable: the namespace changes wait for their commit's sync. */
static int defer_durable;

static void defer_run(struct defer_job *j)
{
	const struct fuse_lowlevel_ops *o = &defer_orig;
	struct fuse_file_info *fi = j->has_fi ? &j->fi : NULL;

	switch (j->op) {
	case DJ_READ:
		o->read(j->req, j->ino, j->size, j->off, fi);
		break;
	case DJ_WRITE:
		o->write(j->req, j->ino, j->buf, j->size, j->off, fi);
		break;
	case DJ_FLUSH:
		o->flush(j->req, j->ino, fi);
		break;
	case DJ_RELEASE:
		o->release(j->req, j->ino, fi);
		break;
	case DJ_FSYNC:
		o->fsync(j->req, j->ino, j->flags, fi);
		break;
	case DJ_FSYNCDIR:
		o->fsyncdir(j->req, j->ino, j->flags, fi);
		break;
	case DJ_FALLOCATE:
		o->fallocate(j->req, j->ino, j->flags, j->off, j->len, fi);
		break;
	case DJ_SETATTR:
		o->setattr(j->req, j->ino, &j->attr, j->flags, fi);
		break;
	case DJ_OPEN:
		o->open(j->req, j->ino, fi);
		break;
	case DJ_OPENDIR:
		o->opendir(j->req, j->ino, fi);
		break;
	case DJ_CREATE:
		o->create(j->req, j->ino, j->name, j->mode, fi);
		break;
	case DJ_MKNOD:
		o->mknod(j->req, j->ino, j->name, j->mode, j->rdev);
		break;
	case DJ_MKDIR:
		o->mkdir(j->req, j->ino, j->name, j->mode);
		break;
	case DJ_UNLINK:
		o->unlink(j->req, j->ino, j->name);
		break;
	case DJ_RMDIR:
		o->rmdir(j->req, j->ino, j->name);
		break;
	case DJ_SYMLINK:
		o->symlink(j->req, j->name2, j->ino, j->name);
		break;
	case DJ_RENAME:
		o->rename(j->req, j->ino, j->name, j->ino2, j->name2,
			  (unsigned)j->flags);
		break;
	case DJ_LINK:
		o->link(j->req, j->ino, j->ino2, j->name);
		break;
	}
}

static void defer_free(struct defer_job *j)
{
	free(j->copy);
	free(j->name);
	free(j->name2);
	free(j);
}

static void *defer_thread(void *arg)
{
	struct defer *d = arg;

	for (;;) {
		struct defer_job *j;

		pthread_mutex_lock(&d->lock);
		while (!d->head && !d->stopping)
			pthread_cond_wait(&d->work, &d->lock);
		j = d->head;
		if (j) {
			d->head = j->next;
			if (!d->head)
				d->tail = NULL;
		}
		pthread_mutex_unlock(&d->lock);
		if (!j)
			return NULL; /* stopping and nothing left */
		defer_run(j);
		defer_free(j);
	}
}

/*
 * A job for req (NULL when out of memory: the caller runs the handler
 * itself, blocking this thread rather than failing the request).
 */
static struct defer_job *defer_job(enum defer_op op, fuse_req_t req,
				   fuse_ino_t ino, struct fuse_file_info *fi,
				   const char *name, const char *name2)
{
	struct defer_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	*j = (struct defer_job){.op = op, .req = req, .ino = ino};
	if (fi) {
		j->fi = *fi;
		j->has_fi = 1;
	}
	if ((name && !(j->name = strdup(name))) ||
	    (name2 && !(j->name2 = strdup(name2)))) {
		defer_free(j);
		return NULL;
	}
	return j;
}

/* Queues j, or runs it here when there is no queue or it is stopping. */
static void defer_push(fuse_req_t req, struct defer_job *j)
{
	struct defer *d = fs_of(req)->defer;
	int run_here = !d;

	if (d) {
		pthread_mutex_lock(&d->lock);
		run_here = d->stopping;
		if (!run_here) {
			if (d->tail)
				d->tail->next = j;
			else
				d->head = j;
			d->tail = j;
			pthread_cond_signal(&d->work);
		}
		pthread_mutex_unlock(&d->lock);
	}
	if (run_here) {
		defer_run(j);
		defer_free(j);
	}
}

/* --- the replacing handlers ------------------------------------------ */

static void dq_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct defer_job *j;

	if (fs_read_now(req, ino, size, off, fi))
		return;
	j = defer_job(DJ_READ, req, ino, fi, NULL, NULL);
	if (!j) {
		defer_orig.read(req, ino, size, off, fi);
		return;
	}
	j->size = size;
	j->off = off;
	defer_push(req, j);
}

static void dq_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct defer_job *j;

	if (fs_write_now(req, ino, buf, size, off, fi))
		return;
	j = defer_job(DJ_WRITE, req, ino, fi, NULL, NULL);
	/* A request read from /dev/fuse shares its thread's buffer. */
	if (j && (defer_copy_bytes || !fuse_compat_req_in_ring(req))) {
		j->copy = malloc(size ? size : 1);
		if (j->copy)
			memcpy(j->copy, buf, size);
		else
			defer_free(j);
		j = j->copy ? j : NULL;
	}
	if (!j) {
		defer_orig.write(req, ino, buf, size, off, fi);
		return;
	}
	j->buf = j->copy ? j->copy : buf;
	j->size = size;
	j->off = off;
	defer_push(req, j);
}

/* FLUSH and RELEASE: a request with only a handle, that may wait. */
#define DEFER_CLOSE_OP(fn, op, field)                                          \
	static void fn(fuse_req_t req, fuse_ino_t ino,                         \
		       struct fuse_file_info *fi)                              \
	{                                                                      \
		struct defer_job *j = NULL;                                    \
                                                                               \
		if (fs_close_may_wait(req, ino, fi))                           \
			j = defer_job(op, req, ino, fi, NULL, NULL);           \
		if (j)                                                         \
			defer_push(req, j);                                    \
		else                                                           \
			defer_orig.field(req, ino, fi);                        \
	}
DEFER_CLOSE_OP(dq_flush, DJ_FLUSH, flush)
DEFER_CLOSE_OP(dq_release, DJ_RELEASE, release)

static void dq_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct defer_job *j;

	/* Only an open that cuts the file may wait (for other writers). */
	if (!(fi->flags & O_TRUNC) && !fs_of(req)->share) {
		defer_orig.open(req, ino, fi);
		return;
	}
	j = defer_job(DJ_OPEN, req, ino, fi, NULL, NULL);
	if (j)
		defer_push(req, j);
	else
		defer_orig.open(req, ino, fi);
}

/* With the shared tier an OPENDIR lists what other machines stored. */
static void dq_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct defer_job *j = NULL;

	if (fs_of(req)->share)
		j = defer_job(DJ_OPENDIR, req, ino, fi, NULL, NULL);
	if (j)
		defer_push(req, j);
	else
		defer_orig.opendir(req, ino, fi);
}

static void dq_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct defer_job *j = defer_job(DJ_FSYNC, req, ino, fi, NULL, NULL);

	if (!j) {
		defer_orig.fsync(req, ino, datasync, fi);
		return;
	}
	j->flags = datasync;
	defer_push(req, j);
}

static void dq_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct defer_job *j = defer_job(DJ_FSYNCDIR, req, ino, fi, NULL, NULL);

	if (!j) {
		defer_orig.fsyncdir(req, ino, datasync, fi);
		return;
	}
	j->flags = datasync;
	defer_push(req, j);
}

static void dq_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			 off_t length, struct fuse_file_info *fi)
{
	struct defer_job *j = defer_job(DJ_FALLOCATE, req, ino, fi, NULL, NULL);

	if (!j) {
		defer_orig.fallocate(req, ino, mode, offset, length, fi);
		return;
	}
	j->flags = mode;
	j->off = offset;
	j->len = length;
	defer_push(req, j);
}

static void dq_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct defer_job *j = NULL;

	/* A new size may wait for writers, queued writes and the disk. */
	if (to_set & FUSE_SET_ATTR_SIZE)
		j = defer_job(DJ_SETATTR, req, ino, fi, NULL, NULL);
	if (!j) {
		defer_orig.setattr(req, ino, attr, to_set, fi);
		return;
	}
	j->attr = *attr;
	j->flags = to_set;
	defer_push(req, j);
}

/* --- the namespace changes (durable: each commit is synced) ---------- */

static void dq_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct defer_job *j = NULL;

	/* Durable, or opening an existing file to cut it (other writers). */
	if (defer_durable || (fi->flags & (O_TRUNC | O_EXCL)) == O_TRUNC)
		j = defer_job(DJ_CREATE, req, parent, fi, name, NULL);
	if (!j) {
		defer_orig.create(req, parent, name, mode, fi);
		return;
	}
	j->mode = mode;
	defer_push(req, j);
}

static void dq_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct defer_job *j =
		defer_job(DJ_MKNOD, req, parent, NULL, name, NULL);

	if (!j) {
		defer_orig.mknod(req, parent, name, mode, rdev);
		return;
	}
	j->mode = mode;
	j->rdev = rdev;
	defer_push(req, j);
}

static void dq_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct defer_job *j =
		defer_job(DJ_MKDIR, req, parent, NULL, name, NULL);

	if (!j) {
		defer_orig.mkdir(req, parent, name, mode);
		return;
	}
	j->mode = mode;
	defer_push(req, j);
}

/* UNLINK and RMDIR: a name in a directory. */
#define DEFER_NAME_OP(fn, op, field)                                           \
	static void fn(fuse_req_t req, fuse_ino_t parent, const char *name)    \
	{                                                                      \
		struct defer_job *j =                                          \
			defer_job(op, req, parent, NULL, name, NULL);          \
                                                                               \
		if (j)                                                         \
			defer_push(req, j);                                    \
		else                                                           \
			defer_orig.field(req, parent, name);                   \
	}
DEFER_NAME_OP(dq_unlink, DJ_UNLINK, unlink)
DEFER_NAME_OP(dq_rmdir, DJ_RMDIR, rmdir)

static void dq_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct defer_job *j =
		defer_job(DJ_SYMLINK, req, parent, NULL, name, link);

	if (j)
		defer_push(req, j);
	else
		defer_orig.symlink(req, link, parent, name);
}

static void dq_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct defer_job *j = NULL;

	/* Durable, or with the shared tier (the bytes of what it replaces). */
	if (defer_durable || fs_of(req)->share)
		j = defer_job(DJ_RENAME, req, parent, NULL, name, newname);
	if (!j) {
		defer_orig.rename(req, parent, name, newparent, newname, flags);
		return;
	}
	j->ino2 = newparent;
	j->flags = (int)flags;
	defer_push(req, j);
}

static void dq_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct defer_job *j = defer_job(DJ_LINK, req, ino, NULL, newname, NULL);

	if (!j) {
		defer_orig.link(req, ino, newparent, newname);
		return;
	}
	j->ino2 = newparent;
	defer_push(req, j);
}

void defer_patch_ops(struct fuse_lowlevel_ops *ops, int durable, int copy)
{
	defer_orig = *ops;
	defer_copy_bytes = copy;
	defer_durable = durable;
	ops->read = dq_read;
	ops->write = dq_write;
	ops->flush = dq_flush;
	ops->release = dq_release;
	ops->fsync = dq_fsync;
	ops->fsyncdir = dq_fsyncdir;
	ops->fallocate = dq_fallocate;
	ops->setattr = dq_setattr;
	ops->open = dq_open;
	ops->opendir = dq_opendir;
	ops->create = dq_create;
	ops->rename = dq_rename;
	if (!durable)
		return;
	ops->mknod = dq_mknod;
	ops->mkdir = dq_mkdir;
	ops->unlink = dq_unlink;
	ops->rmdir = dq_rmdir;
	ops->symlink = dq_symlink;
	ops->link = dq_link;
}

int defer_start(struct fs *fs, unsigned nthreads)
{
	struct defer *d = calloc(1, sizeof(*d));
	int rc = 0;

	if (!d)
		return -ENOMEM;
	d->fs = fs;
	d->threads = calloc(nthreads, sizeof(*d->threads));
	if (!d->threads) {
		free(d);
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->work, NULL);
	for (; d->nthreads < nthreads; d->nthreads++) {
		rc = -pthread_create(&d->threads[d->nthreads], NULL,
				     defer_thread, d);
		if (rc < 0)
			break;
	}
	fs->defer = d;
	if (rc < 0) {
		log_err("cannot start the threads of deferred requests: %s",
			strerror(-rc));
		defer_stop(fs);
	}
	return rc;
}

void defer_quiesce(struct fs *fs)
{
	struct defer *d = fs->defer;

	if (!d || d->joined)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = 1;
	pthread_cond_broadcast(&d->work);
	pthread_mutex_unlock(&d->lock);
	for (unsigned i = 0; i < d->nthreads; i++)
		pthread_join(d->threads[i], NULL);
	d->joined = 1;
}

void defer_stop(struct fs *fs)
{
	struct defer *d = fs->defer;

	if (!d)
		return;
	defer_quiesce(fs);
	fs->defer = NULL;
	pthread_cond_destroy(&d->work);
	pthread_mutex_destroy(&d->lock);
	free(d->threads);
	free(d);
}
