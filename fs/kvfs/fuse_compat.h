/* SPDX-License-Identifier: MIT */
/*
 * The one place where kvfs differs between the libfuse versions it builds
 * against: 3.14 (Debian 12's) and 3.18 or later, which can serve FUSE over
 * io_uring (kvfs(8) -o io_uring). The build defines KVFS_FUSE_URING when
 * the libfuse it found is >= 3.18; nothing else in kvfs tests a libfuse
 * version.
 *
 * With io_uring libfuse runs one queue per CPU, each served by one ring
 * thread (named fuse-ring-N) that runs the handlers of every request of
 * its queue, and replies go back through the ring entry the request came
 * in. kvfs hands requests that may wait to its own threads (defer.h).
 * libfuse falls back to /dev/fuse without failing when the kernel does not
 * offer io_uring in INIT or when its rings do not start: kvfs checks both
 * (before mounting, and once INIT is served) and refuses to run on the
 * classic transport when io_uring was asked for.
 *
 * Threads: fuse_compat_uring_check(), fuse_compat_serve_init() and
 * fuse_compat_hooks() on the main thread before the session loop (the
 * hooks it installs then run on every thread that reads or replies on
 * /dev/fuse); fuse_compat_init() in the init callback; the others on any
 * thread.
 */
#ifndef KVFS_FUSE_COMPAT_H
#define KVFS_FUSE_COMPAT_H

#include <fuse_lowlevel.h>
#include <sys/uio.h>

/* Ring entries per queue when io_uring_q_depth is not given (libfuse's). */
#define FUSE_COMPAT_Q_DEPTH 8
/* Most ring entries per queue: each holds a request buffer (1 MiB). */
#define FUSE_COMPAT_Q_DEPTH_MAX 1024

/* 1 when this kvfs was built with io_uring support (libfuse >= 3.18). */
int fuse_compat_has_uring(void);
/*
 * Whether the io_uring transport can run here: this build, the kernel's
 * /sys/module/fuse/parameters/enable_uring (kvfs never changes it) and
 * /proc/sys/kernel/io_uring_disabled. 0, or -errno after one line on
 * stderr that says what is missing.
 */
int fuse_compat_uring_check(void);
/*
 * Adds libfuse's session options for io_uring with q_depth ring entries
 * per queue to args (those of fuse_session_new). 0 or -ENOMEM.
 */
int fuse_compat_uring_args(struct fuse_args *args, unsigned q_depth);
/*
 * In the init callback: asks for io_uring when uring, and otherwise keeps
 * it off (libfuse >= 3.18 turns it on from FUSE_URING_ENABLE in the
 * environment too, and kvfs defers requests only when it asked). With
 * uring, also turns INTERRUPT requests off (libfuse cannot match them).
 * Asks for FUSE_PARALLEL_DIROPS (without, the kernel sends one LOOKUP or
 * READDIR per directory at a time, and a flat directory's cold lookups
 * wait in line) and, when passthrough, for FUSE passthrough with backing
 * files one file system deep.
 */
void fuse_compat_init(struct fuse_conn_info *conn, int uring, int passthrough);
/*
 * libfuse >= 3.17.1 passes the flags fuse_compat_init asks for, and
 * >= 3.16 knows passthrough; with an older one this installs read and
 * write hooks on se's /dev/fuse descriptor (fuse_session_custom_io) that
 * add them to the INIT reply and put the backing file into the OPEN and
 * CREATE replies of fuse_compat_reply_open() and _create(). Call it
 * after fuse_session_mount(). 0 or -errno.
 */
int fuse_compat_hooks(struct fuse_session *se);
/* 1 once the kernel took passthrough in INIT. */
int fuse_compat_passthrough(void);
/*
 * Registers the file open at fd as a backing file with the kernel
 * (FUSE_DEV_IOC_BACKING_OPEN; root only): its id (> 0), or -errno.
 */
int fuse_compat_backing_open(struct fuse_session *se, int fd);
/* Drops the backing id (open files that use it keep their file). */
void fuse_compat_backing_close(struct fuse_session *se, int id);
/*
 * fuse_reply_open(), with the kernel told to serve the file's reads,
 * writes and mappings from backing file backing_id itself (0: none).
 */
int fuse_compat_reply_open(fuse_req_t req, struct fuse_file_info *fi,
			   int backing_id);
/* The same for fuse_reply_create(). */
int fuse_compat_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			     struct fuse_file_info *fi, int backing_id);
/*
 * Serves the kernel's first request, INIT, on the calling thread before
 * the loop starts; with uring, libfuse starts its rings while serving it,
 * and this then checks that ring threads run. Returns 0 when served as
 * asked, 1 when the session ended first (a signal, an unmount),
 * -EPROTONOSUPPORT when io_uring did not start (one line logged), -EPROTO
 * when libfuse refused INIT, or the receive's -errno.
 */
int fuse_compat_serve_init(struct fuse_session *se, int uring);
/*
 * The request loop with io_uring: serves what the kernel sends on
 * /dev/fuse (before every ring is ready) on the calling thread until the
 * session ends, and leaves the rings running: libfuse's loops free every
 * ring entry when they end, under the requests kvfs's threads still
 * answer. Returns 0 or -errno (a signal or an unmount end it with 0).
 */
int fuse_compat_loop_uring(struct fuse_session *se);
/*
 * Stops the rings of an ended session (their threads are joined, their
 * entries freed): after every deferred request is answered.
 */
void fuse_compat_stop_rings(struct fuse_session *se);
/* Ring threads (fuse-ring-N) of this process: 0 without io_uring. */
int fuse_compat_ring_threads(void);
/*
 * Whether req came through a ring entry, whose buffers stay valid until
 * the reply (a request read from /dev/fuse shares the reading thread's
 * buffer, reused once the handler returns).
 */
int fuse_compat_req_in_ring(fuse_req_t req);
/*
 * A reply of bytes that a lock guards, for a caller holding that lock.
 * libfuse >= 3.18 serves a ring's requests with the ring's lock held and
 * takes it for every reply to that ring: a handler on the ring thread
 * that waits for a lock whose holder replies would wait for good. For a
 * request from a ring entry, this copies iov's count buffers into the
 * entry's reply buffer and returns 1: the caller drops its lock, then
 * calls fuse_compat_reply_staged(req, *len). Returns 0 otherwise (the
 * caller replies with fuse_reply_iov as usual, under its lock).
 */
int fuse_compat_stage_iov(fuse_req_t req, const struct iovec *iov, int count,
			  size_t *len);
/* Sends the len bytes fuse_compat_stage_iov() staged; borrows nothing. */
void fuse_compat_reply_staged(fuse_req_t req, size_t len);

#endif
