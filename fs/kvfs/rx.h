/* SPDX-License-Identifier: MIT */
/*
 * The session loop on /dev/fuse (rx.c), used instead of libfuse's
 * multi-threaded loop (not with -o io_uring, whose ring threads are
 * libfuse's): a fixed set of workers, each reading requests into a
 * receive buffer of its own and running their handlers. The buffer is a
 * write-buffer segment (filebuf.h) with the request's header in the room
 * before it, so that a WRITE's bytes begin at the segment's first byte: a
 * handler that stores them as one segment of a file swaps that segment
 * for the buffer (rx_swap) instead of copying them.
 *
 * Threads: rx_loop() on the main thread; rx_swap() on any (it swaps only
 * on a worker, for the request that worker is running).
 */
#ifndef KVFS_RX_H
#define KVFS_RX_H

#include <fuse_lowlevel.h>
#include <stddef.h>

struct fs;

/*
 * Serves fs->se with nthreads workers until the session ends (unmounted,
 * or fuse_session_exit() from a signal): then stops every worker (each
 * one ends its request first) and returns 0, or -errno when reading
 * /dev/fuse failed or the workers could not start.
 */
int rx_loop(struct fs *fs, unsigned nthreads);

/*
 * When buf is the data of the WRITE the calling worker is running (the
 * start of its receive buffer, size bytes), exchanges *seg, a segment of
 * the caller's, with that buffer: *seg then holds the request's bytes and
 * the worker reads its next request into the caller's old segment.
 * Returns 1 after a swap; 0 (nothing changed) anywhere else.
 */
int rx_swap(const void *buf, size_t size, char **seg);

#endif
