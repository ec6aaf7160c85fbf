/* SPDX-License-Identifier: MIT */
/*
 * The control socket: a Unix stream socket at DATADIR/kvfs.sock (mode 0600)
 * for the kvfsctl(8) requests that need an answer computed on demand or
 * that change something, which the read-only files under MOUNTPOINT/.kvfs/
 * cannot carry. It is not a general RPC: one connection carries one request
 * line and gets one response, then the daemon closes it.
 *
 * Protocol (also in kvfsctl(8)):
 *   request   COMMAND [SP ARGUMENT] LF, at most CTLSOCK_LINE_MAX bytes.
 *             ARGUMENT is a path within the mount, percent-encoded: every
 *             byte outside 0x21..0x7e, and '%' itself, is written %XX.
 *   commands  "info"            version, datadir, mount point, pid
 *             "status"          counts that need the index (files, dirs)
 *             "verdicts"        the lookup manager's totals
 *             "verdict PATH"    the verdict held for PATH, and the index's
 *                               view of it
 *             "clear PATH"      forgets PATH's verdict (lifts a quarantine)
 *                               and makes the kernel forget the name
 *             "evict TARGET"    evicts least-recently-used blocks nobody
 *                               has open until use is at most TARGET: a
 *                               byte count, or N% of the capacity
 *   response  one JSON object and LF. {"ok": true, ...} on success,
 *             {"ok": false, "error": "ENOENT", "message": "..."} otherwise.
 * Only root and the user running the daemon may connect (SO_PEERCRED).
 *
 * Threads: one thread, started after daemonizing, serves connections one
 * at a time with every signal blocked; a stuck client is cut off after
 * CTLSOCK_TIMEOUT_S. It reads the index (its own connection for the counts
 * that scan, so FUSE requests never wait for them), queries and clears
 * verdicts, queues kernel invalidations, and evicts (fs_evict(), under the
 * janitor's evict_lock); it never replies to FUSE.
 */
#ifndef KVFS_CTLSOCK_H
#define KVFS_CTLSOCK_H

/* The socket's name inside DATADIR. */
#define CTLSOCK_NAME "kvfs.sock"
/* Longest request line, LF included. */
#define CTLSOCK_LINE_MAX 16384
/* Seconds a client may take to send its request or read the response. */
#define CTLSOCK_TIMEOUT_S 10

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
