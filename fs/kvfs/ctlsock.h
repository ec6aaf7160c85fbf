/* SPDX-License-Identifier: MIT */
/*
 * The control socket: a Unix stream socket at DATADIR/kvfs.sock (mode 0600)
 * for the kvfsctl(8) requests that need an answer computed on demand or
 * that change something, which the read-only files under MOUNTPOINT/.kvfs/
 * cannot carry. It is not a general RPC: one connection carries one request
 * line and gets one response, then the daemon closes it.
 *
 * The protocol (request line, commands, response) is defined once for both
 * ends in fs/kvdb/ctlproto.h and documented in kvfsctl(8).
 * Only root and the user running the daemon may connect (SO_PEERCRED).
 *
 * Threads: one thread, started after daemonizing, serves connections one
 * at a time with every signal blocked; a stuck client is cut off after
 * CTLPROTO_TIMEOUT_S. It reads the index (its own connection for the counts
 * that scan, so FUSE requests never wait for them), queries and clears
 * verdicts, queues kernel invalidations, and evicts (fs_evict(), under the
 * janitor's evict_lock); it never replies to FUSE.
 */
#ifndef KVFS_CTLSOCK_H
#define KVFS_CTLSOCK_H

struct fs;

/*
 * Creates DATADIR/kvfs.sock (replacing a stale socket left by a daemon that
 * was killed; the caller holds DATADIR's lock) and starts the thread. Needs
 * fs->idx, fs->vc and fs->notify. Returns 0 or -errno, logged; on failure
 * nothing is left behind. ctlsock_stop() undoes it.
 */
int ctlsock_start(struct fs *fs);
/*
 * Stops the thread (after the request it is serving) and removes the
 * socket. Call before the verdict cache and the notifier go away. Does
 * nothing when ctlsock_start() did not succeed.
 */
void ctlsock_stop(struct fs *fs);

#endif
