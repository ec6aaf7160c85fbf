/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level request handlers (ops.c): the table main.c passes to
 * fuse_session_new. Each handler replies exactly once; errors go to the
 * kernel as positive errno values.
 */
#ifndef KVFS_OPS_H
#define KVFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops fs_ops;

#endif
