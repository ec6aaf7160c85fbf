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

/*
 * X(op, (parameters), (arguments)): every handler kvfs may have but INIT
 * and DESTROY, with libfuse's parameters and the call that passes them on.
 */
#define RQ_OPS(X)                                                              \
	X(lookup, (fuse_req_t req, fuse_ino_t parent, const char *name),       \
	  (req, parent, name))                                                 \
	X(forget, (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup),          \
	  (req, ino, nlookup))                                                 \
	X(forget_multi,                                                        \
	  (fuse_req_t req, size_t count, struct fuse_forget_data * forgets),   \
	  (req, count, forgets))                                               \
	X(getattr,                                                             \
	  (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info * fi),        \
	  (req, ino, fi))                                                      \
	X(setattr,                                                             \
	  (fuse_req_t req, fuse_ino_t ino, struct stat * attr, int to_set,     \
	   struct fuse_file_info *fi),                                         \
	  (req, ino, attr, to_set, fi))                                        \
	X(readlink, (fuse_req_t req, fuse_ino_t ino), (req, ino))              \
	X(mknod,                                                               \
	  (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,   \
	   dev_t rdev),                                                        \
	  (req, parent, name, mode, rdev))                                     \
	X(mkdir,                                                               \
	  (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode),  \
	  (req, parent, name, mode))                                           \
	X(unlink, (fuse_req_t req, fuse_ino_t parent, const char *name),       \
	  (req, parent, name))                                                 \
	X(rmdir, (fuse_req_t req, fuse_ino_t parent, const char *name),        \
	  (req, parent, name))                                                 \
	X(symlink,                                                             \
	  (fuse_req_t req, const char *link, fuse_ino_t parent,                \
	   const char *name),                                                  \
	  (req, link, parent, name))                                           \
	X(rename,                                                              \
	  (fuse_req_t req, fuse_ino_t parent, const char *name,                \
	   fuse_ino_t newparent, const char *newname, unsigned int flags),     \
	  (req, parent, name, newparent, newname, flags))                      \
	X(link,                                                                \
	  (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,               \
	   const char *newname),                                               \
	  (req, ino, newparent, newname))                                      \
	X(open, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info * fi),  \
	  (req, ino, fi))                                                      \
	X(read,                                                                \
	  (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,             \
	   struct fuse_file_info * fi),                                        \
	  (req, ino, size, off, fi))                                           \
	X(write,                                                               \
	  (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,       \
	   off_t off, struct fuse_file_info *fi),                              \
	  (req, ino, buf, size, off, fi))                                      \
	X(flush, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info * fi), \
	  (req, ino, fi))                                                      \
	X(release,                                                             \
	  (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info * fi),        \
	  (req, ino, fi))                                                      \
	X(fsync,                                                               \
	  (fuse_req_t req, fuse_ino_t ino, int datasync,                       \
	   struct fuse_file_info *fi),                                         \
	  (req, ino, datasync, fi))                                            \
	X(fallocate,                                                           \
	  (fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,     \
	   struct fuse_file_info *fi),                                         \
	  (req, ino, mode, off, len, fi))                                      \
	X(opendir,                                                             \
	  (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info * fi),        \
	  (req, ino, fi))                                                      \
	X(readdir,                                                             \
	  (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,             \
	   struct fuse_file_info * fi),                                        \
	  (req, ino, size, off, fi))                                           \
	X(readdirplus,                                                         \
	  (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,             \
	   struct fuse_file_info * fi),                                        \
	  (req, ino, size, off, fi))                                           \
	X(releasedir,                                                          \
	  (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info * fi),        \
	  (req, ino, fi))                                                      \
	X(fsyncdir,                                                            \
	  (fuse_req_t req, fuse_ino_t ino, int datasync,                       \
	   struct fuse_file_info *fi),                                         \
	  (req, ino, datasync, fi))                                            \
	X(statfs, (fuse_req_t req, fuse_ino_t ino), (req, ino))                \
	X(setxattr,                                                            \
	  (fuse_req_t req, fuse_ino_t ino, const char *name,                   \
	   const char *value, size_t size, int flags),                         \
	  (req, ino, name, value, size, flags))                                \
	X(getxattr,                                                            \
	  (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size),     \
	  (req, ino, name, size))                                              \
	X(listxattr, (fuse_req_t req, fuse_ino_t ino, size_t size),            \
	  (req, ino, size))                                                    \
	X(removexattr, (fuse_req_t req, fuse_ino_t ino, const char *name),     \
	  (req, ino, name))                                                    \
	X(create,                                                              \
	  (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,   \
	   struct fuse_file_info *fi),                                         \
	  (req, parent, name, mode, fi))

/* rq_op: counts, then calls the handler it replaced. */
#define RQ_WRAP(op, params, args)                                              \
	static void rq_##op params                                             \
	{                                                                      \
		rq_count(req);                                                 \
		rq_orig.op args;                                               \
	}
RQ_OPS(RQ_WRAP)
#undef RQ_WRAP

void reqcount_patch_ops(struct fuse_lowlevel_ops *ops)
{
	rq_orig = *ops;
	/* A handler kvfs does not have stays absent: libfuse answers ENOSYS. */
#define RQ_SET(op, params, args)                                               \
	if (ops->op)                                                           \
		ops->op = rq_##op;
	RQ_OPS(RQ_SET)
#undef RQ_SET
}
