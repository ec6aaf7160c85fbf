/* SPDX-License-Identifier: MIT */
/*
 * fs/-private declarations: the daemon's context, its configuration, and the
 * in-memory node table that mirrors the inodes the kernel holds.
 *
 * A node exists while the kernel holds lookups on the inode, a handle has it
 * open, or an operation is using it (n->pins counts all three, under
 * fs->nodes_lock). While it exists its attributes are authoritative: the
 * index holds the last persisted state, the node adds unsaved writes.
 *
 * Lock order: n->rw, then fs->nodes_lock, then idx's internal lock; the
 * nodes lock is never held across index, store or fuse_reply_* calls.
 */
#ifndef KVFS_FS_INT_H
#define KVFS_FS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "index.h"
#include "log.h"
#include "store.h"
#include "verdict.h"

struct fuse_session;
struct fuse_file_info;
struct fuse_req;
struct ctlsock;
struct notify;
struct stat;

/* Control files live on inodes from here up; the index never gets there. */
#define FS_CTL_INO (1ull << 62)
/*
 * Files up to this size are read whole, every chunk checked, on their first
 * read, and then served from memory while open: a damaged chunk anywhere
 * fails the read at offset 0, so the kernel, which splits a read into
 * several requests, reports an error, never a short count.
 */
#define FS_VERIFY_MAX (64ull << 20)
/* Write buffers come in segments of this size (a KV_CHUNK_SIZE multiple). */
#define NODE_SEG (1u << 20)
/* Idle segments kept for reuse, so stores do not fault in fresh pages. */
#define NODE_SEG_POOL 64
/* Files that may have a read fault injected at once. */
#define FS_MAX_FAULTS 64

/* Set before any thread starts; read-only afterwards, so it needs no lock. */
struct fs_config {
	char *datadir;
	char *mountpoint;
	double entry_timeout;
	double attr_timeout;
	double negative_timeout;
	uint64_t max_file_size;
	uint64_t dirty_limit;
	unsigned threads;
	unsigned root_mode;
	int durable;
	enum log_level loglevel;
	uint64_t capacity; /* bytes kvfs may use on the backing filesystem */
	unsigned capacity_pct; /* capacity as a share of the filesystem */
	unsigned high_pct;
	unsigned low_pct;
	uint64_t high_wm;	/* evict above this many bytes ... */
	uint64_t low_wm;	/* ... down to this many */
	int64_t tmp_max_age_ns; /* engine temp files older than this go */
};

struct node {
	uint64_t ino;
	/*
	 * Readers of the file's bytes and attributes take it shared; writes,
	 * flushes and attribute changes take it exclusive.
	 */
	pthread_rwlock_t rw;
	struct idx_attr attr; /* protected by rw */
	uint64_t disk_size;   /* size the index holds, protected by rw */
	uint32_t *crcs;	      /* CRCs of attr.ext, protected by rw */
	uint32_t ncrcs;
	int crcs_loaded;
	/*
	 * Unsaved bytes of the whole file, in NODE_SEG-byte segments
	 * (protected by rw). Bytes before attr.size are the file's; the rest
	 * are undefined until written or zeroed.
	 */
	char **segs;
	size_t nsegs;
	int dirty;  /* segs hold bytes not saved yet */
	int cached; /* segs hold the saved bytes, all chunks verified */
	/* protected by fs->nodes_lock */
	uint64_t nlookup;
	unsigned nopen;
	unsigned pins;	 /* nlookup > 0, each open handle, each running op */
	uint64_t parent; /* the name the node was last seen under */
	char *name;
	struct node *hnext;
};

struct fs {
	struct fs_config cfg;
	struct idx *idx;
	struct store *store;
	struct fuse_session *se;
	struct notify *notify;	 /* kernel invalidations */
	struct vc *vc;		 /* lookup manager and verdict cache */
	struct ctlsock *ctlsock; /* kvfsctl's socket (ctlsock.c), or NULL */
	int lock_fd;
	uid_t uid; /* owner of the control files */
	gid_t gid;
	struct timespec start_time;

	pthread_mutex_t nodes_lock;
	struct node **nodes; /* hash chains, protected by nodes_lock */
	size_t nbuckets;
	size_t nnodes;

	pthread_mutex_t dirty_lock;
	pthread_cond_t dirty_cond;
	uint64_t dirty_bytes; /* protected by dirty_lock */
	char *seg_pool
		[NODE_SEG_POOL]; /* idle segments, protected by dirty_lock */
	size_t nseg_pool;
	/* Capacity and housekeeping (fs/evict.c). */
	atomic_int_fast64_t used_est; /* physical bytes used, estimated */
	atomic_uint_fast64_t ndatafiles;
	atomic_uint_fast64_t evicted;
	atomic_uint_fast64_t enospc;
	atomic_uint_fast64_t tmp_removed;
	pthread_mutex_t evict_lock; /* one eviction at a time */
	pthread_mutex_t touch_lock; /* innermost: nothing taken inside */
	pthread_cond_t janitor_cond;
	uint64_t touch_ino[4096]; /* protected by touch_lock */
	int64_t touch_ns[4096];
	size_t ntouch;
	int janitor_stop; /* protected by touch_lock */
	int janitor_running;
	pthread_t janitor;
	int64_t start_ns;
	atomic_uint_fast64_t dropped;	  /* torn blocks dropped */
	atomic_uint_fast64_t quarantined; /* blocks quarantined */

#ifdef KVFS_FAULT_INJECTION
	pthread_mutex_t fault_lock;
	struct {
		uint64_t ino;
		int err;
	} faults[FS_MAX_FAULTS]; /* protected by fault_lock */
	size_t nfaults;
	atomic_uint fault_probe_delay_ms;
#endif
};

/* fs/node.c */
int node_table_init(struct fs *fs);
void node_table_free(struct fs *fs);
/*
 * The node of ino with one more pin: the existing one, or one built from
 * attr (when attr is NULL, read from the index). nlookup_inc adds kernel
 * lookups. Returns -ENOENT when the index has no such inode.
 */
int node_get(struct fs *fs, uint64_t ino, const struct idx_attr *attr,
	     uint64_t parent, const char *name, uint64_t nlookup_inc,
	     struct node **out);
/* The node of ino if it is in memory, with a pin; NULL otherwise. */
struct node *node_find(struct fs *fs, uint64_t ino);
/*
 * Drops pins: nlookup_dec kernel lookups, nopen_dec handles, plus one op pin
 * when op is set. A node with no pins left is freed, and when it had no
 * links left its inode and record are released.
 */
void node_put(struct fs *fs, struct node *n, uint64_t nlookup_dec,
	      unsigned nopen_dec, int op);
/* One more op pin on a node the caller already holds (drop: node_put). */
void node_pin(struct fs *fs, struct node *n);
/* Adds an open handle to a node the caller has pinned. */
void node_open_inc(struct fs *fs, struct node *n);
/* Records that n is now called name in parent. */
int node_rename(struct fs *fs, struct node *n, uint64_t parent,
		const char *name);
/* The path of n within the mount ("/a/b"), malloc'd; NULL on ENOMEM. */
char *node_path(struct fs *fs, struct node *n);
/* Releases an unlinked inode that no node holds: index row and record. */
void node_release_inode(struct fs *fs, uint64_t ino);
/* Frees a record and, when its data file has no live record left, the file. */
void node_free_extent(struct fs *fs, const struct kv_extent *ext);
/*
 * Saves n's unsaved bytes as a new record and points the index at it. Call
 * with n->rw held exclusive. 0 when there was nothing to save.
 */
int node_flush_locked(struct fs *fs, struct node *n);
/*
 * Loads n's saved bytes into its buffer, checking every chunk's CRC, and
 * marks them cached. On failure (store_read's errors) nothing is kept.
 * n->rw exclusive.
 */
int node_fill(struct fs *fs, struct node *n);
/* Handles open on n now. */
unsigned node_nopen(struct fs *fs, struct node *n);
/* Loads n's current bytes into its write buffer. n->rw exclusive. */
int node_make_dirty(struct fs *fs, struct node *n);
/* Grows n's buffer to hold size bytes (undefined). n->rw exclusive. */
int node_reserve(struct fs *fs, struct node *n, uint64_t size);
/* Copies len bytes into n's buffer at off (reserved). n->rw exclusive. */
void node_copy_in(struct node *n, uint64_t off, const void *buf, size_t len);
/* Zeroes [off, off + len) of n's buffer (reserved). n->rw exclusive. */
void node_zero(struct node *n, uint64_t off, uint64_t len);
/*
 * Points iov at [off, off + len) of n's buffer; returns the count used
 * (at most len / NODE_SEG + 2). n->rw held.
 */
int node_iov(struct node *n, uint64_t off, uint64_t len, struct iovec *iov);
/* Drops n's unsaved bytes, back to the persisted state. n->rw exclusive. */
void node_discard(struct fs *fs, struct node *n);
/* Flushes every dirty node (at unmount). */
void node_flush_all(struct fs *fs);

/* Whether ino is open or has unsaved bytes (not to be evicted). */
int node_is_busy(struct fs *fs, uint64_t ino);
/*
 * Applies a link-count change the index made to inode ino: updates the node
 * when it is in memory, or releases the inode when nothing holds it.
 */
void fs_relink(struct fs *fs, uint64_t ino, uint32_t nlink, int64_t now);
/* Drops one kernel lookup of ino (a reply the kernel never got). */
void node_forget_one(struct fs *fs, uint64_t ino);

/* fs/ops.c */
extern const struct fuse_lowlevel_ops fs_ops;

int64_t fs_now_ns(void);
void fs_fill_stat(struct stat *st, const struct idx_attr *a);

/* fs/lookup.c */
void fs_lookup(struct fuse_req *req, uint64_t parent, const char *name);
int fs_probe(void *ctx, size_t n, const uint64_t *parents,
	     const char *const *names, int *found, uint64_t *inos);
void fs_lookup_answer(void *ctx, void *waiter, int result, uint64_t ino,
		      uint64_t generation);
/*
 * After a failed read of n that did not prove the block short: its name
 * becomes a quarantined miss and the kernel forgets it; the data stays.
 */
void fs_quarantine(struct fs *fs, struct node *n, int rc);
/*
 * After a read that proved n's record short (its data file ends before the
 * record does): the name is removed, the kernel forgets it, and the record
 * is freed once nothing holds the inode.
 */
void fs_drop(struct fs *fs, struct node *n);
/* Words for a store_read() error, for log lines. */
const char *fs_read_error(int rc);
#ifdef KVFS_FAULT_INJECTION
int fs_fault_read(struct fs *fs, uint64_t ino);
int fs_fault_setxattr(struct fs *fs, uint64_t ino, const char *name,
		      const char *value, size_t size, int *rc);
#endif

/* fs/evict.c: capacity, eviction, atimes, stale temp files */
int janitor_start(struct fs *fs);
void janitor_stop(struct fs *fs);
/* Records an access of ino for LRU eviction (queued; any thread). */
void fs_touch(struct fs *fs, uint64_t ino);
/* Physical bytes in use (estimate between the janitor's measurements). */
uint64_t fs_used(struct fs *fs);
/*
 * Before storing bytes more: evicts what it must so they fit in the
 * capacity; -ENOSPC when they cannot (everything left is open).
 */
int fs_make_room(struct fs *fs, uint64_t bytes);
/* What fs_evict() did. */
struct fs_evict_result {
	uint64_t used_before; /* use estimate when it started */
	uint64_t used_after;  /* ... when it ended, evicted records freed */
	uint64_t blocks;      /* names evicted */
	uint64_t bytes;	      /* their sizes */
};
/*
 * An operator's eviction (kvfsctl evict): evicts least-recently-used
 * blocks that nobody has open until use is at most target bytes, the way
 * the janitor does and serialised with it. Blocks; call from neither a
 * FUSE handler nor the janitor.
 */
void fs_evict(struct fs *fs, uint64_t target, struct fs_evict_result *r);

/* fs/ctl.c: the .kvfs control directory */
int fs_ctl_ino(uint64_t ino);
/* Whether (parent, name) is .kvfs or inside it: not for changing. */
int fs_ctl_reserved(uint64_t parent, const char *name);
/* Answers a lookup of a control name; 0 when name is not one. */
int fs_ctl_lookup(struct fs *fs, struct fuse_req *req, uint64_t parent,
		  const char *name);
void fs_ctl_getattr(struct fs *fs, struct fuse_req *req, uint64_t ino);
void fs_ctl_open(struct fs *fs, struct fuse_req *req, uint64_t ino,
		 struct fuse_file_info *fi);
void fs_ctl_read(struct fuse_req *req, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_ctl_release(struct fuse_req *req, struct fuse_file_info *fi);
void fs_ctl_readdir(struct fs *fs, struct fuse_req *req, size_t size, off_t off,
		    int plus);

#endif
