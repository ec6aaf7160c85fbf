/* SPDX-License-Identifier: MIT */
/*
 * The janitor thread (janitor.c). janitor_start measures use once and
 * starts the thread with every signal blocked (-errno of pthread_create on
 * failure); janitor_stop wakes it, lets it write the last access times and
 * horizons, and joins it (a no-op when it never started). Main thread only.
 */
#ifndef KVFS_JANITOR_H
#define KVFS_JANITOR_H

struct fs;

int janitor_start(struct fs *fs);
void janitor_stop(struct fs *fs);

#endif
