/* SPDX-License-Identifier: MIT */
/*
 * Requests that may block, handed to kvfs's own threads, on either
 * transport. The threads that serve the transport never wait: a ring
 * thread of FUSE over io_uring (kvfs(8) -o io_uring) serves a whole queue
 * of requests, and the few /dev/fuse workers (one per CPU: more only add
 * wake-ups) serve every caller. defer_patch_ops() replaces the handlers
 * that may wait with ones that answer at once what needs no wait
 * (fs_read_now(), fs_write_now(), fs_close_may_wait() in fileio.h) and
 * copy the arguments of the rest into a job; DEFER_THREADS threads run
 * the original handler, which waits and replies from there (libfuse takes
 * a reply from any thread, and a request's buffers stay the ring entry's
 * until it is answered). What goes: a READ from the disk, an extent file
 * or a read-ahead in flight; a WRITE that waits for the dirty budget or
 * goes to an extent file; a FLUSH or RELEASE that waits for an extent
 * file's writes or a synced save; FSYNC, FSYNCDIR, FALLOCATE, SETATTR that
 * changes the size, OPEN and CREATE that cut an existing file; OPEN,
 * OPENDIR and RENAME with the shared tier; with -o durable (every commit
 * synced) also the namespace changes. The rest answer from memory or with
 * one short index transaction where they arrive.
 *
 * Threads: defer_start() before the session loop, defer_stop() after it
 * (every queued job is run and answered first). The queue has its own
 * lock; a job is owned by the queue, then by the thread that runs it.
 */
#ifndef KVFS_DEFER_H
#define KVFS_DEFER_H

#include <fuse_lowlevel.h>

#include "fs.h"

/* Threads that run deferred requests. */
#define DEFER_THREADS 8

struct defer;

/* Starts the threads; 0 or -errno. */
int defer_start(struct fs *fs, unsigned nthreads);
/* Runs what is queued, then stops the threads and frees fs->defer. */
void defer_stop(struct fs *fs);
/*
 * Runs what is queued and stops the threads, keeping fs->defer: a
 * request deferred after it runs on the thread that brought it. For the
 * io_uring transport, whose ring entries (each request's buffers) go
 * once the rings stop: called before that.
 */
void defer_quiesce(struct fs *fs);
/*
 * Makes ops (a copy of fs_ops) defer the requests above to fs->defer;
 * durable: also the namespace changes; copy: a WRITE's bytes are copied
 * (the classic loop reuses its buffer once the handler returns; a ring
 * entry's stays until the reply).
 */
void defer_patch_ops(struct fuse_lowlevel_ops *ops, int durable, int copy);

#endif
