/* SPDX-License-Identifier: MIT */
/*
 * The daemon's wall clock: fs_now_ns() is CLOCK_REALTIME in ns, the time
 * stamped on inodes and access times. Any thread; cannot fail.
 */
#ifndef KVFS_FSCLOCK_H
#define KVFS_FSCLOCK_H

#include <stdint.h>

int64_t fs_now_ns(void);

#endif
