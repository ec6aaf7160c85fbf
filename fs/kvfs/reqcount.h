/* SPDX-License-Identifier: MIT */
/*
 * A count of the FUSE requests kvfs has been sent, whatever the
 * transport (/dev/fuse or io_uring): reqcount_patch_ops() replaces every
 * handler of a table with one that adds one to fs->fuse_requests and
 * calls the handler it replaced. Exported as kvfs_fuse_requests_total
 * (.kvfs/stats), so that what a workload costs in round trips can be
 * read off a live mount (scripts/bench: requests per engine store).
 * INIT and DESTROY are not counted; INTERRUPT, which libfuse answers
 * itself, is not either.
 */
#ifndef KVFS_REQCOUNT_H
#define KVFS_REQCOUNT_H

#include <fuse_lowlevel.h>

/* Call once, before the session starts, on the table it will get. */
void reqcount_patch_ops(struct fuse_lowlevel_ops *ops);

#endif
