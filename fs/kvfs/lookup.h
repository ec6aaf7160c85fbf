/* SPDX-License-Identifier: MIT */
/*
 * LOOKUP through the lookup manager (lookup.c): the FUSE handler and the
 * verdict cache's two callbacks (core/verdict.h's vc_ops), which main.c
 * installs. fs_probe returns 0 or the index's -errno for the batch.
 */
#ifndef KVFS_LOOKUP_H
#define KVFS_LOOKUP_H

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>

void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
int fs_probe(void *ctx, size_t n, const uint64_t *parents,
	     const char *const *names, int *found, uint64_t *inos);
void fs_lookup_answer(void *ctx, void *waiter, int result, uint64_t ino,
		      uint64_t generation);

#endif
