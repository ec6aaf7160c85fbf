/* SPDX-License-Identifier: MIT */
/*
 * The daemon's context (struct fs) and its configuration, shared by every
 * module of the daemon, and its wall clock (fs_now_ns). Each module
 * declares its own functions in its own header (node.h, capacity.h,
 * ops.h, ...).
 *
 * Lock order: n->rw, then fs->nodes_lock, then idx's internal lock; the
 * nodes lock is never held across index, store or fuse_reply_* calls. A
 * store makes room (the capacity module's evict_lock) holding its own
 * node's n->rw; eviction then takes n->rw only of nodes that are not busy
 * (not open, nothing unsaved), never a storing one (a FLUSH runs with its
 * handle open). fs->dirty_lock and the capacity module's touch_lock are
 * innermost: nothing is taken inside. The write-behind lock (wb.c) is
 * taken inside n->rw, never around it.
 */
#ifndef KVFS_FS_H
#define KVFS_FS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "clock.h"
#include "extfile.h"
#include "index.h"
#include "log.h"
#include "store.h"
#include "verdict.h"

struct fuse_session;
struct fuse_file_info;
struct fuse_req;
struct cap;
struct extq;
struct ctlsock;
struct kvdb;
struct notify;
struct ra;
struct share;
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
/*
 * -o index_mmap by default: bytes of index.db the daemon reads through a
 * memory mapping instead of a pread(2) and a copy per page. Random stats
 * in a flat directory of 200,000 names, daemon restarted and caches
 * dropped: 4,100-6,900 stats/s with pread, 8,900-12,800 mapped (kvfs(7)).
 */
#define FS_INDEX_MMAP (1ull << 30)
/* record_max by default: larger files are extent files (extent.h). */
#define FS_RECORD_MAX (64ull << 20)
/* Write buffers come in segments of this size (a KV_CHUNK_SIZE multiple). */
#define NODE_SEG (1u << 20)
/* Idle segments kept for reuse, so stores do not fault in fresh pages. */
#define NODE_SEG_POOL 64
/* Files that may have a read fault injected at once. */
#define FS_MAX_FAULTS 64

/* Longest a write waits for the write-behind queue to make room (ns). */
#define FS_DIRTY_WAIT_NS (60ll * 1000000000)

/*
 * A file's bytes handed to the write-behind queue (wb.c): read-only once
 * queued, freed only after the node stops pointing at them.
 */
struct wb_bytes {
	char **segs;
	size_t nsegs;
	uint64_t size;
	uint32_t *crcs; /* CRCs of the first ncrcs whole chunks (or NULL) */
	uint32_t ncrcs;
};

/*
 * An inode the kernel or an open handle holds (the node table, node.c),
 * with its file buffer (filebuf.c). A node exists while the kernel holds
 * lookups on the inode, a handle has it open, or an operation is using it
 * (pins counts all three, under fs->nodes_lock). While it exists its
 * attributes are authoritative: the index holds the last persisted state,
 * the node adds unsaved writes.
 */
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
	/*
	 * CRC32C of the first seg_ncrcs whole KV_CHUNK_SIZE chunks of segs,
	 * and of the seg_part_len bytes after them, taken by node_copy_in()
	 * while the written bytes were in the CPU's cache, for the save
	 * (room for seg_crcs_cap; protected by rw).
	 */
	uint32_t *seg_crcs;
	uint32_t seg_ncrcs, seg_crcs_cap;
	uint32_t seg_part_crc, seg_part_len;
	int dirty;  /* segs hold bytes not saved yet */
	int cached; /* segs hold the saved bytes, all chunks verified */
	/* Evicted while not open, record freed: opens fail (protected by rw). */
	int evicted;
	/*
	 * An extent file's backing file (attr.ext is KV_EXT_LARGE), opened
	 * on first use, and whether its size or times changed since the
	 * index last saw them (protected by rw; x.fd is set once, under rw
	 * exclusive, and then read under rw shared).
	 */
	struct extf x;
	int x_dirty;
	/*
	 * Open handles whose I/O the kernel serves from the backing file
	 * (FUSE passthrough; kvfs never mixes them with others), and the
	 * backing id they use, registered while there are any (changed
	 * under rw exclusive; fs_node_attr reads x_pt without it).
	 */
	atomic_uint x_pt;
	int x_bid;
	/* A queued O_DIRECT write of it failed (extq.h): the next fsync,
	 * close or write returns it. */
	atomic_int x_err;
	/*
	 * The newest bytes queued for saving (protected by rw), read while
	 * the node is neither dirty nor cached; NULL when none.
	 */
	struct wb_bytes *wb;
	int wb_err; /* a background save failed: fsync reports it (rw) */
	atomic_uint wb_jobs;  /* saves queued or running (pins each) */
	atomic_uint name_gen; /* bumped by each rename */
	/* The shared tier (share.h): */
	atomic_int share_pulled;       /* bytes from RADOS: no put at commit */
	atomic_uint_fast64_t save_seq; /* saves queued so far */
	atomic_uint_fast64_t share_put_seq; /* the save put from memory */
	unsigned wb_writing; /* saves being appended, under the wb lock */
	/* Handles that wrote since their last FLUSH (protected by rw). */
	unsigned writers;
	/*
	 * Open O_TRUNC rewrites served with direct_io (protected by rw):
	 * while there are any, every open gets direct_io (fileio.c).
	 */
	unsigned rewriters;
	/* protected by fs->nodes_lock */
	uint64_t nlookup;
	unsigned nopen;
	unsigned pins;	 /* nlookup > 0, each open handle, each running op */
	uint64_t parent; /* the name the node was last seen under */
	char *name;
	unsigned unnaming; /* failed reads in fs_drop/fs_quarantine */
	struct node *hnext;
};

/* What a read does to a file's atime (-o noatime|relatime|atime). */
enum fs_atime {
	FS_RELATIME, /* ext4's relatime rules (the default) */
	FS_NOATIME,  /* nothing */
	FS_ATIME     /* every read handle's first read sets it */
};

/* Set before any thread starts; read-only afterwards, so it needs no lock. */
struct fs_config {
	char *datadir;
	char *mountpoint;
	double entry_timeout;
	double attr_timeout;
	double negative_timeout;
	uint64_t max_file_size;
	/* Larger files are extent files (extent.h), not one record. */
	uint64_t record_max;
	uint64_t dirty_limit;
	uint64_t prefetch;     /* read-ahead budget (ra.h); 0: off */
	uint64_t index_mmap;   /* bytes of index.db read mapped (0: none) */
	int64_t dirty_wait_ns; /* longest wait for room: FS_DIRTY_WAIT_NS */
	unsigned threads;
	unsigned root_mode;
	int durable;
	/* FUSE over io_uring (fuse_compat.h); ring entries per queue. */
	int io_uring;
	unsigned io_uring_q_depth;
	/* Extent files' I/O served by the kernel from their backing files. */
	int passthrough;
	enum log_level loglevel;
	uint64_t capacity; /* bytes kvfs may use on the backing filesystem */
	unsigned capacity_pct; /* capacity as a share of the filesystem */
	unsigned high_pct;
	unsigned low_pct;
	uint64_t high_wm;	/* evict above this many bytes ... */
	uint64_t low_wm;	/* ... down to this many */
	int64_t tmp_max_age_ns; /* engine temp files older than this go */
	enum fs_atime atime;	/* what a read does to the atime */
	/* The shared tier (share.h): on when rados_pool is set. */
	const char *rados_pool;
	const char *ceph_conf;
	const char *rados_id;
	const char *rados_ns;
	uint64_t rados_capacity; /* 0: the pool's quota */
	unsigned rados_timeout;	 /* s, per RADOS call */
	unsigned rados_sweep_interval;
	unsigned rados_lease;
	unsigned rados_retry;
	double rados_negative_timeout;
	double rados_entry_timeout;
};

/*
 * The node table's calls upward into capacity accounting (capacity.c sets
 * them at start-up with cap_set_upcalls, in the style of core/store.h's
 * store_ref_fn): the node table sits below the capacity module and does
 * not include it. Before they are set (start-up recovery) they are NULL
 * and the node table skips them.
 */
struct fs_upcalls {
	/* Before a store of bytes more: 0, or -ENOSPC. */
	int (*make_room)(void *ctx, uint64_t bytes);
	/* An access of ino, for LRU eviction. */
	void (*touch)(void *ctx, uint64_t ino);
	/* Bytes appended (delta > 0) or freed (< 0) in the data files. */
	void (*used)(void *ctx, int64_t delta);
	/* Bytes counted for records queued, not written yet (write-behind). */
	void (*reserved)(void *ctx, int64_t delta);
	void *ctx;
};

/* A record or extent file to free once index batch seq is committed. */
struct fs_free {
	struct kv_extent ext;
	uint64_t seq;
};

struct fs {
	struct fs_config cfg;
	/*
	 * The data directory (fs/kvdb/kvdb.h): kvfs.lock, the index and the
	 * store. idx and store are db->idx and db->store, copied for the
	 * handlers; main sets them before any other thread starts.
	 */
	struct kvdb *db;
	struct idx *idx;
	struct store *store;
	int ext_fd;	   /* DATADIR/extents: db->ext_fd */
	struct extq *extq; /* queued O_DIRECT writes to extent files */
	struct fuse_session *se;
	struct notify *notify;	 /* kernel invalidations */
	struct vc *vc;		 /* lookup manager and verdict cache */
	struct ctlsock *ctlsock; /* kvfsctl's socket (ctlsock.c), or NULL */
	struct share *share;	 /* the shared tier (share.h), or NULL */
	/*
	 * The read-ahead cache (ra.h), or NULL; ra_forget is its ra_drop()
	 * for the node table, which sits below it (set before the session).
	 */
	struct ra *ra;
	void (*ra_forget)(struct fs *fs, const struct kv_extent *ext);
	/*
	 * After a save committed (seq: wb.c's number for it, 0 for a
	 * synchronous one): share_saved, set by share_start before any save
	 * can run, so that the node table and write-behind, which the shared
	 * tier builds on, do not include it. NULL: nothing to do.
	 */
	void (*saved)(struct fs *fs, struct node *n, uint64_t seq);
	uid_t uid; /* owner of the control files */
	gid_t gid;
	struct timespec start_time;

	pthread_mutex_t nodes_lock;
	struct node **nodes; /* hash chains, protected by nodes_lock */
	/* Broadcast when a node's unnaming count reaches 0 (damage.c). */
	pthread_cond_t unname_cond;
	size_t nbuckets;
	size_t nnodes;

	pthread_mutex_t dirty_lock;
	pthread_cond_t dirty_cond;
	/* Broadcast when a handle's writes end at its FLUSH (fileio.c). */
	pthread_cond_t grow_cond;
	uint64_t dirty_bytes; /* protected by dirty_lock */
	char *seg_pool
		[NODE_SEG_POOL]; /* idle segments, protected by dirty_lock */
	size_t nseg_pool;
	/* Write-behind (wb.c); queued bytes are also in dirty_bytes. */
	struct wb *wb;
	/* Requests run on kvfs's threads (defer.c), NULL: none. */
	struct defer *defer;
	atomic_uint_fast64_t wb_queued_bytes;
	atomic_uint_fast64_t dirty_waits;   /* writes that waited for room */
	atomic_uint_fast64_t dirty_wait_ns; /* ... for this long in all */
	atomic_uint_fast64_t dirty_refused; /* writes refused: -EDQUOT */
	/* Extent files (extent.c): made, bytes written and read in place. */
	atomic_uint_fast64_t ext_made, ext_write_bytes, ext_read_bytes;
	atomic_uint_fast64_t pt_opens;	/* opens served by passthrough */
	atomic_uint_fast64_t getxattrs; /* GETXATTR requests */
	/* WRITE bytes put into file buffers by a swap (rx.h), by a copy */
	atomic_uint_fast64_t write_swapped, write_copied;
	atomic_uint_fast64_t fuse_requests; /* every request (reqcount.h) */
	atomic_int pt_off; /* passthrough refused: not tried again */
	/* Capacity, eviction and the touch queue (capacity.c). */
	struct cap *cap;
	struct fs_upcalls up; /* set before the loop starts, then read-only */
	/* Housekeeping (janitor.c, tmpsweep.c). */
	atomic_uint_fast64_t tmp_removed;
	int janitor_running; /* main thread only */
	pthread_t janitor;
	int64_t start_ns;
	atomic_uint_fast64_t dropped;	  /* torn blocks dropped */
	atomic_uint_fast64_t quarantined; /* blocks quarantined */
	/*
	 * Records and extent files that the index stopped pointing at in a
	 * batch not committed yet (node_free_extent()): freed once it is
	 * (node_commit()). frees_lock is taken before the index's lock, never
	 * inside it.
	 */
	pthread_mutex_t frees_lock;
	struct fs_free *frees; /* protected by frees_lock */
	size_t nfrees, frees_cap;
	/*
	 * Data files a free left with perhaps no record: removed once a
	 * commit shows the index holds none (node_commit()); frees_lock.
	 */
	uint32_t *drops;
	size_t ndrops, drops_cap;

#ifdef KVFS_FAULT_INJECTION
	pthread_mutex_t fault_lock;
	struct {
		uint64_t ino;
		int err;
	} faults[FS_MAX_FAULTS]; /* protected by fault_lock */
	size_t nfaults;
	atomic_uint fault_probe_delay_ms;
	atomic_uint fault_wb_delay_ms;
	atomic_int fault_wb_error; /* write-behind appends fail with -this */
	atomic_uint fault_ext_delay_ms;
	atomic_int fault_ext_error; /* queued extent writes fail with -this */
	atomic_int fault_backing_error; /* passthrough refused with -this */
	atomic_int fault_ra_error;	/* read-aheads fail with -this */
#endif
};

/* Wall-clock ns (core/clock.h): the time stamped on inodes. */
static inline int64_t fs_now_ns(void)
{
	return (int64_t)clock_realtime_ns();
}

#endif
