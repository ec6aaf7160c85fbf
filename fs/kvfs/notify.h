/* SPDX-License-Identifier: MIT */
/*
 * Kernel cache invalidations, sent from one dedicated thread (see notify.c
 * for why). notify_entry/notify_inode queue and return at once; any thread
 * may call them, a NULL notifier ignores them.
 */
#ifndef KVFS_NOTIFY_H
#define KVFS_NOTIFY_H

#include <stdint.h>

struct fuse_session;
struct notify;

/* Starts the thread for session se. Caller stops it with notify_stop(). */
int notify_start(struct notify **out, struct fuse_session *se);
/* Drains the queue, then ends the thread. Accepts NULL. */
void notify_stop(struct notify *nt);
/*
 * Makes the kernel forget the name (parent, name) (copied); when it had no
 * entry for it, also parent's attributes and pages, which hold the listing
 * the kernel keeps (kvfs(7), KERNEL FACTS).
 */
void notify_entry(struct notify *nt, uint64_t parent, const char *name);
/*
 * The same, and waits until the kernel has been told, so that the caller's
 * next reply is ordered after it. Never call it from a LOOKUP handler or the
 * probe worker (it waits while any LOOKUP of parent is parked), nor while
 * the kernel may be waiting for a reply about parent.
 */
void notify_entry_sync(struct notify *nt, uint64_t parent, const char *name);
/* Makes the kernel forget ino's attributes and cached pages. */
void notify_inode(struct notify *nt, uint64_t ino);
/*
 * Makes the kernel forget ino's attributes (not its pages) before it
 * returns, so that the caller's reply is ordered after it. Any handler may
 * call it, with node locks held: the kernel takes no lock for it that a
 * request holds. Returns 0 (also when the kernel had no such inode) or
 * -errno.
 */
int notify_attrs_now(struct notify *nt, uint64_t ino);
/* Invalidations the kernel accepted so far. */
uint64_t notify_count(struct notify *nt);

#endif
