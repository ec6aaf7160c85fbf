/* SPDX-License-Identifier: MIT */
/*
 * The counting handlers of reqcount.h. Each adds one to the mount's
 * counter (a relaxed atomic add: a request costs far more) and calls the
 * handler it replaced, kept in rq_orig: set once by reqcount_patch_ops()
 * before the session starts, read-only after.
 */
#include "reqcount.h"

#include <stdatomic.h>

#include "fs.h"

static struct fuse_lowlevel_ops rq_orig;

static void rq_count(fuse_req_t req)
{
	struct fs *fs = fuse_req_userdata(req);

	atomic_fetch_add_explicit(&fs->fuse_requests, 1, memory_order_relaxed);
}

/* RQ(op, (parameters), (arguments)): rq_op, counting, then rq_orig.op. */
#define RQ(op, params, args)                                                   \
	static void rq_##op params                                             \
	{                                                                      \
		rq_count(req);                                                 \
		rq_orig.op args;                                               \
	}

RQ(lookup, (fuse_req_t req, fuse_ino_t parent, const char *name),
   (req, parent, name))
RQ(forget, (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup),
   (req, ino, nlookup))
RQ(forget_multi,
   (fuse_req_t req, size_t count, struct fuse_forget_data *forgets),
   (req, count, forgets))
RQ(getattr, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
   (req, ino, fi))
RQ(setattr,
   (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
    struct fuse_file_info *fi),
   (req, ino, attr, to_set, fi))
RQ(readlink, (fuse_req_t req, fuse_ino_t ino), (req, ino))
RQ(mknod,
   (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    dev_t rdev),
   (req, parent, name, mode, rdev))
RQ(mkdir, (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode),
   (req, parent, name, mode))
RQ(unlink, (fuse_req_t req, fuse_ino_t parent, const char *name),
   (req, parent, name))
RQ(rmdir, (fuse_req_t req, fuse_ino_t parent, const char *name),
   (req, parent, name))
RQ(symlink,
   (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name),
   (req, link, parent, name))
RQ(rename,
   (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
    const char *newname, unsigned int flags),
   (req, parent, name, newparent, newname, flags))
RQ(link,
   (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname),
   (req, ino, newparent, newname))
RQ(open, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
   (req, ino, fi))
RQ(read,
   (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi),
   (req, ino, size, off, fi))
RQ(write,
   (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
    struct fuse_file_info *fi),
   (req, ino, buf, size, off, fi))
RQ(flush, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
   (req, ino, fi))
RQ(release, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
   (req, ino, fi))
RQ(fsync,
   (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
   (req, ino, datasync, fi))
RQ(fallocate,
   (fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
    struct fuse_file_info *fi),
   (req, ino, mode, off, len, fi))
RQ(opendir, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
   (req, ino, fi))
RQ(readdir,
   (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi),
   (req, ino, size, off, fi))
RQ(readdirplus,
   (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi),
   (req, ino, size, off, fi))
RQ(releasedir, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
   (req, ino, fi))
RQ(fsyncdir,
   (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
   (req, ino, datasync, fi))
RQ(statfs, (fuse_req_t req, fuse_ino_t ino), (req, ino))
RQ(setxattr,
   (fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
    size_t size, int flags),
   (req, ino, name, value, size, flags))
RQ(getxattr, (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size),
   (req, ino, name, size))
RQ(listxattr, (fuse_req_t req, fuse_ino_t ino, size_t size), (req, ino, size))
RQ(removexattr, (fuse_req_t req, fuse_ino_t ino, const char *name),
   (req, ino, name))
RQ(create,
   (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    struct fuse_file_info *fi),
   (req, parent, name, mode, fi))

#undef RQ

void reqcount_patch_ops(struct fuse_lowlevel_ops *ops)
{
	rq_orig = *ops;
	/* A handler kvfs does not have stays absent: libfuse answers ENOSYS. */
#define RQ_SET(op)                                                             \
	do {                                                                   \
		if (ops->op)                                                   \
			ops->op = rq_##op;                                     \
	} while (0)
	RQ_SET(lookup);
	RQ_SET(forget);
	RQ_SET(forget_multi);
	RQ_SET(getattr);
	RQ_SET(setattr);
	RQ_SET(readlink);
	RQ_SET(mknod);
	RQ_SET(mkdir);
	RQ_SET(unlink);
	RQ_SET(rmdir);
	RQ_SET(symlink);
	RQ_SET(rename);
	RQ_SET(link);
	RQ_SET(open);
	RQ_SET(read);
	RQ_SET(write);
	RQ_SET(flush);
	RQ_SET(release);
	RQ_SET(fsync);
	RQ_SET(fallocate);
	RQ_SET(opendir);
	RQ_SET(readdir);
	RQ_SET(readdirplus);
	RQ_SET(releasedir);
	RQ_SET(fsyncdir);
	RQ_SET(statfs);
	RQ_SET(setxattr);
	RQ_SET(getxattr);
	RQ_SET(listxattr);
	RQ_SET(removexattr);
	RQ_SET(create);
#undef RQ_SET
}
