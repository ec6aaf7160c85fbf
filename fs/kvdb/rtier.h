/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's RADOS client (issue 13; built with -Drados, librados):
 * blocks stored as RADOS objects that every kvfs on a pool can find,
 * checked with the same CRC32C chunks as a local record. Not here: when
 * to put or pull (the daemon), the local store.
 *
 * Objects in the pool (and the configured namespace):
 *   "b:" PATH   a block; its data is the file's bytes, its xattrs
 *               "kvfs.len" (decimal byte count) and "kvfs.crcs" (one
 *               little-endian CRC32C per KV_CHUNK_SIZE chunk)
 *   "d:" DIR    a directory's index: one omap key per block name in it,
 *               the value the block's length (8 bytes, little-endian), so
 *               that a batch of names in one directory is one round trip
 *               and a listing is one omap read
 * PATH is the file's path within the mount ("/a/b.bin"), DIR its parent's
 * ("/a", "/" for the root). Names longer than RTIER_PATH_MAX are refused.
 * A put also lists each ancestor directory's name in its parent's index
 * (size RTIER_DIR), once per directory per struct rtier, so that another
 * machine can walk from "/" to the block.
 *   "u:" N      use shard N (0..RTIER_USE_SHARDS-1, by a hash of PATH):
 *               omap key PATH, value last use (8 bytes LE, ns since the
 *               epoch) and size (8 bytes LE)
 *   "kvfs.sweeper" carries the sweeper's lock (rados_lock_exclusive)
 *
 * Every call waits at most the configured timeout for the cluster
 * (librados' op and mount timeouts), then fails with -ETIMEDOUT or the
 * cluster's error. Threads: any thread may call any function on one
 * struct rtier (librados is thread-safe).
 */
#ifndef KVFS_RTIER_H
#define KVFS_RTIER_H

#include <stddef.h>
#include <stdint.h>

/* Longest PATH in an object name (RADOS allows 2048 by default). */
#define RTIER_PATH_MAX 1024
/* The size rtier_probe()/rtier_list() give for a directory's name. */
#define RTIER_DIR UINT64_MAX
/*
 * A name's value in its directory's index once the sweeper removed its
 * block: rtier_probe() gives found 0 with this size, so that a machine can
 * tell a block swept for room (keep its local copy) from one removed by an
 * unlink (drop it); rtier_list() skips it; a put replaces it.
 */
#define RTIER_SWEPT (UINT64_MAX - 1)
/* Objects the last-use index is spread over. */
#define RTIER_USE_SHARDS 16u

struct rtier;

struct rtier_config {
	const char *conf;   /* ceph.conf path, NULL: librados' default */
	const char *pool;   /* required */
	const char *ns;	    /* namespace in the pool, NULL: none */
	const char *id;	    /* client id ("admin" when NULL) */
	unsigned timeout_s; /* per operation; 0: 10 */
};

/*
 * Connects. On error returns -errno and writes one line saying what failed
 * into err (errlen bytes).
 */
int rtier_open(struct rtier **out, const struct rtier_config *cfg, char *err,
	       size_t errlen);
void rtier_close(struct rtier *rt);
/* The cluster's fsid (a UUID string) into buf: 0 or -errno. */
int rtier_fsid(struct rtier *rt, char *buf, size_t len);

/*
 * Stores len bytes as path's block, with crcs (kv_nchunks(len) values),
 * replacing any earlier one, and lists its name in its directory.
 */
int rtier_put(struct rtier *rt, const char *path, const void *buf, uint64_t len,
	      const uint32_t *crcs);
/*
 * For n names in directory dir: found[i] (0/1) and, when found, sizes[i],
 * from the directory's index in one round trip. A directory nobody stored
 * into is found empty.
 */
int rtier_probe(struct rtier *rt, const char *dir, size_t n,
		const char *const *names, int *found, uint64_t *sizes);
/*
 * Reads path's block and checks it: *buf (malloc'd) and *len. Errors:
 * -ENOENT no such block; -ENODATA provably short (the object holds fewer
 * bytes than its length says); -EBADMSG a CRC mismatch or damaged
 * metadata; -ETIMEDOUT, -EIO, ... from the cluster.
 */
int rtier_get(struct rtier *rt, const char *path, void **buf, uint64_t *len);
/*
 * rtier_get() into segs (nsegs buffers of seg bytes, seg a multiple of
 * KV_CHUNK_SIZE) when the block holds expect bytes: one round trip, no
 * copy. -ESTALE when its length is not expect (then nothing is known of
 * its bytes: use rtier_get()); the other errors are rtier_get()'s.
 */
int rtier_get_segs(struct rtier *rt, const char *path, char *const *segs,
		   size_t seg, size_t nsegs, uint64_t expect);
/* Removes path's block and its name in its directory; -ENOENT if none. */
int rtier_remove(struct rtier *rt, const char *path);

/*
 * Lists directory dir from its index: fn gets each name and its size
 * (RTIER_DIR for a directory) and returns non-zero to stop. A directory
 * nobody stored into lists empty. Returns 0 or -errno.
 */
typedef int (*rtier_list_fn)(void *arg, const char *name, uint64_t size);
int rtier_list(struct rtier *rt, const char *dir, rtier_list_fn fn, void *arg);

/*
 * Last use, for the shared sweeper: records that paths[i] (sizes[i] bytes)
 * was used at times_ns[i], for n blocks, in few round trips (one per use
 * shard touched). A put records its own use; a remove forgets it. A use
 * of a path that has no block (removed meanwhile) is counted until a sweep
 * reaches it and drops it.
 */
int rtier_touch(struct rtier *rt, size_t n, const char *const *paths,
		const uint64_t *sizes, const int64_t *times_ns);
/* Bytes and blocks the use shards hold: what the sweeper counts. */
int rtier_usage(struct rtier *rt, uint64_t *bytes, uint64_t *blocks);
/* The pool's byte quota (ceph osd pool set-quota), 0 when it has none. */
int rtier_quota(struct rtier *rt, uint64_t *bytes);
/*
 * The pool-wide sweeper lease: takes, or renews when cookie holds it, the
 * one sweeper lock for lease_s seconds. Returns 1 held, 0 another holder
 * has it, or -errno. When a holder dies its lease runs out and another
 * machine's call takes it.
 */
int rtier_sweep_lock(struct rtier *rt, const char *cookie, unsigned lease_s);
void rtier_sweep_unlock(struct rtier *rt, const char *cookie);
/*
 * Removes least recently used blocks (by the use shards) until the shards
 * count at most target bytes: *removed blocks, *freed bytes. Only the
 * lease holder should call it. A block put again while the sweep runs may
 * still go as the old one would have. Memory: the blocks it removes, not
 * all the shards hold. Returns 0 or -errno (*removed and *freed say what
 * was done before the error).
 */
int rtier_sweep(struct rtier *rt, uint64_t target, uint64_t *removed,
		uint64_t *freed);

#endif
