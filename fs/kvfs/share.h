/* SPDX-License-Identifier: MIT */
/*
 * The shared tier (issue 13, kvfs(8) SHARED TIER): every kvfs on one Ceph
 * RADOS pool finds what the others stored. share.c is built with librados
 * (fs/kvdb/rtier.h is its client); without it (KVFS_RADOS undefined)
 * the calls below are no-ops and main.c refuses rados_pool= with one
 * clear line. Off unless -o rados_pool= is given:
 * then fs->share is non-NULL and the hooks below are called.
 *
 * What it does, and where from:
 * - puts: after a regular file's save commits (wb.c, node.c) or a rename
 *   gives it a new name (ops.c), its bytes go to RADOS from the put
 *   threads, in queue order (a later remove of a path is never overtaken
 *   by an earlier put of it); the queue holds inode numbers and paths only
 *   (SHARE_QUEUE_MAX entries), never bytes;
 * - lookups: names the local index lacks are probed in RADOS by the verdict
 *   cache's probe (lookup.c), one round trip per directory of a batch: a
 *   listing of the directory when it is small (every name it has becomes
 *   local at once: idx_create_many), else a read of the batch's names; a
 *   hit becomes a local stub (the remote size, no bytes, KV_EXT_STUB) or a
 *   local directory; names this machine holds from the shared tier are
 *   checked by name and dropped when removed there (not when swept);
 *   directories known whole recently answer misses without a round trip;
 * - pulls: opening a stub reads, checks and saves the block (ops.c);
 * - unlink and rename of a non-temporary name reach RADOS (ops.c);
 * - the keeper thread reconnects after a failure, records last uses in
 *   batches and, holding the pool-wide lease, sweeps the pool to its
 *   capacity.
 * Temporary names (".tmp" at the end, or ".tmp." inside) are never shared.
 *
 * Threads: the hooks run on FUSE workers, the probe worker and the
 * write-behind committer; none holds a node lock across a RADOS call, and
 * every RADOS call ends within rados_timeout.
 */
#ifndef KVFS_SHARE_H
#define KVFS_SHARE_H

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>

struct fs;
struct node;

/* Most entries the put queue holds; more are dropped (and counted). */
#define SHARE_QUEUE_MAX 65536u

/* Counters for .kvfs/stats and kvfsctl (share_get_stats). */
struct share_stats {
	int reachable;
	int sweeper; /* this daemon holds the sweeper lease */
	uint64_t queued;
	uint64_t puts, put_bytes, put_errors, puts_dropped, put_us;
	uint64_t removes;
	uint64_t probes, probe_us, remote_hits, remote_misses;
	uint64_t pulls, pull_bytes, pull_us;
	uint64_t errors, short_dropped, quarantined, remote_unlinks;
	uint64_t sweeps, swept, swept_bytes, usage_bytes, capacity;
};

#ifdef KVFS_RADOS
/*
 * Starts the shared tier when fs->cfg asks for it (0 otherwise): connects
 * (an unreachable cluster is retried in the background, the daemon serves
 * the local tier meanwhile) and starts the put and keeper threads. -errno
 * with a logged line for what cannot work at all (built without librados).
 */
int share_start(struct fs *fs);
/* Stops the threads (queued puts not done are logged) and disconnects. */
void share_stop(struct fs *fs);
/* 1 when name is temporary (never shared). */
int share_is_tmp(const char *name);

/*
 * The verdict cache's probe, after the index: names not found locally are
 * looked up in RADOS, names found locally that came from the shared tier
 * are checked there. Changes found[]/inos[] as the answers say.
 */
void share_probe(struct fs *fs, size_t n, const uint64_t *parents,
		 const char *const *names, int *found, uint64_t *inos);
/*
 * Before an open of n (pinned, no lock held): a stub's block is read from
 * RADOS, checked, and saved locally. 0, or -EIO (read failed: the name was
 * dropped or quarantined as the failure policy says), -ENOENT (removed
 * elsewhere), -EINTR, -EDQUOT.
 */
int share_pull(struct fs *fs, struct node *n, fuse_req_t req);
/* Whether n is a stub (bytes only in RADOS). n->rw held. */
int share_is_stub(const struct node *n);
/* A save of n committed (seq: the save's number, wb.c). */
void share_saved(struct fs *fs, struct node *n, uint64_t seq);
/* A regular file ino got a new name; old is its old path ("" if none). */
void share_renamed(struct fs *fs, uint64_t ino, const char *old);
/* path (a regular file's, or none) was unlinked. */
void share_removed(struct fs *fs, const char *path);
/* mkdir made (parent, name) = ino here (before its reply). */
void share_mkdir(struct fs *fs, uint64_t parent, const char *name,
		 uint64_t ino);
/* An open of ino: its last use, recorded in RADOS in batches. */
void share_touch(struct fs *fs, uint64_t ino);
/*
 * opendir of dir: names that RADOS lists in it and the index lacks become
 * stubs and directories, so that ls shows what other machines stored.
 */
void share_list(struct fs *fs, uint64_t dir);
/*
 * Waits until the put queue is empty (or the cluster unreachable) for at
 * most timeout_ms. 0, -ETIMEDOUT, or -ENOTCONN.
 */
int share_drain(struct fs *fs, int timeout_ms);
void share_get_stats(struct fs *fs, struct share_stats *st);
/* path of (parent, name) within the mount into buf; -errno. */
int share_path(struct fs *fs, uint64_t parent, const char *name, char *buf,
	       size_t len);

#else /* built without librados: the tier is never on */
static inline int share_start(struct fs *fs)
{
	(void)fs;
	return 0;
}
static inline void share_stop(struct fs *fs)
{
	(void)fs;
}
static inline void share_probe(struct fs *fs, size_t n, const uint64_t *parents,
			       const char *const *names, int *found,
			       uint64_t *inos)
{
	(void)fs, (void)n, (void)parents, (void)names, (void)found, (void)inos;
}
static inline int share_pull(struct fs *fs, struct node *n, fuse_req_t req)
{
	(void)fs, (void)n, (void)req;
	return 0;
}
static inline void share_saved(struct fs *fs, struct node *n, uint64_t seq)
{
	(void)fs, (void)n, (void)seq;
}
static inline void share_renamed(struct fs *fs, uint64_t ino, const char *old)
{
	(void)fs, (void)ino, (void)old;
}
static inline void share_removed(struct fs *fs, const char *path)
{
	(void)fs, (void)path;
}
static inline void share_touch(struct fs *fs, uint64_t ino)
{
	(void)fs, (void)ino;
}
static inline void share_mkdir(struct fs *fs, uint64_t parent, const char *name,
			       uint64_t ino)
{
	(void)fs, (void)parent, (void)name, (void)ino;
}
static inline void share_list(struct fs *fs, uint64_t dir)
{
	(void)fs, (void)dir;
}
static inline int share_drain(struct fs *fs, int timeout_ms)
{
	(void)fs, (void)timeout_ms;
	return 0;
}
static inline void share_get_stats(struct fs *fs, struct share_stats *st)
{
	(void)fs;
	*st = (struct share_stats){0};
}
static inline int share_path(struct fs *fs, uint64_t parent, const char *name,
			     char *buf, size_t len)
{
	(void)fs, (void)parent, (void)name, (void)buf, (void)len;
	return -ENOTSUP;
}
static inline int share_is_tmp(const char *name)
{
	(void)name;
	return 1;
}
#endif
#endif
