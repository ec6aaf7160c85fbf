/* SPDX-License-Identifier: MIT */
/*
 * kvfs: a FUSE filesystem for offloaded LLM KV-cache blocks.
 *
 * THREADS
 * - main: parses options, opens the data directory through fs/kvdb/kvdb.c
 *   (kvfs.lock, the index, the store), runs crash recovery over the newest
 *   data files (kvdb_recover, fs/kvdb/recover.c), mounts, daemonizes
 *   (then reopens the index: kvdb_reopen_index), runs the loop, tears
 *   down. Every configuration error is reported before daemonizing.
 * - FUSE workers (kvfs's session loop, fs/kvfs/rx.c; one per CPU by
 *   default): run the handlers in fs/kvfs/ops.c and fileio.c; they may
 *   block on the index (one SQLite connection behind idx->lock) but wait
 *   for nothing else: what would (the disk, the dirty budget, an fsync's
 *   saves) goes to the deferred-request threads (fs/kvfs/defer.c), which
 *   reply.
 * - with -o io_uring (fs/kvfs/fuse_compat.c), instead of those workers:
 *   libfuse's ring threads, one per CPU, each serving its CPU's queue,
 *   under the same rule; main serves INIT and then what comes on
 *   /dev/fuse, and stops the rings after the deferred requests are
 *   answered.
 * - write-behind (fs/kvfs/wb.c): KVFS_WB_WRITERS writers append queued
 *   files (one lane and ring each); one committer commits them to the
 *   index in batches.
 * - extent writers (fs/kvfs/extq.c): FS_EXTQ_THREADS threads write the
 *   queued whole-page writes of extent files with O_DIRECT; no node lock.
 * - read-ahead threads (fs/kvfs/ra.c, unless -o prefetch=0): RA_THREADS
 *   threads read and check the records lookups found, for their READs.
 * - probe worker (core/verdict_probe.c): answers lookup batches from the
 *   index and replies to parked LOOKUPs (fs/kvfs/lookup.c); never notifies
 *   the kernel. A FUSE worker probes a batch itself when no probe runs
 *   (inline_probe): then it is the one replying, under the same rules.
 * - notifier (fs/kvfs/notify.c): the only caller of kernel invalidations.
 * - janitor (fs/kvfs/janitor.c): atimes, kept-back name records, recovery
 *   horizons, use, eviction (fs/kvfs/capacity.c), stale temp files
 *   (fs/kvfs/tmpsweep.c).
 * - control socket (fs/kvfs/ctlsock.c): kvfsctl's requests, one
 *   connection at a time, on a second index connection of its own.
 * - checkpointer (index/index.c): WAL checkpoints on its own connection.
 * - Signals: libfuse's handlers for SIGINT, SIGTERM and SIGHUP end the
 *   loop; every thread kvfs starts blocks them.
 * The configuration in struct fs_config is written here before the loop
 * starts and only read afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "capacity.h"
#include "clock.h"
#include "ctlsock.h"
#include "datadir.h"
#include "defer.h"
#include "extq.h"
#include "fs.h"
#include "fuse_compat.h"
#include "janitor.h"
#include "kvdb.h"
#include "lookup.h"
#include "node.h"
#include "notify.h"
#include "ops.h"
#include "ra.h"
#include "reqcount.h"
#include "rx.h"
#include "share.h"
#include "wb.h"

/* Exit status for start-up errors (usage, data directory, database). */
#define KVFS_EXIT_CONFIG 2
/* Write-behind appenders: one data-file lane each. */
#define KVFS_WB_WRITERS 4
/*
 * Most index changes one commit holds; the janitor commits every 200 ms,
 * and a burst past this commits sooner.
 */
#define KVFS_INDEX_BATCH 4096

struct kvfs_opts {
	char *capacity;
	unsigned high_wm;
	unsigned low_wm;
	unsigned tmp_max_age;
	char *loglevel;
	char *max_file_size;
	char *record_max;
	char *dirty_limit;
	char *index_mmap;
	char *prefetch;
	char *root_mode;
	double entry_timeout;
	double attr_timeout;
	double negative_timeout;
	unsigned threads;
	int durable;
	int io_uring;
	int nopassthrough;
	char *io_uring_q_depth;
	int nargs;
	int noatime, atime, relatime; /* at most one */
	/* The shared tier (share.h), off without rados_pool. */
	char *rados_pool;
	char *ceph_conf;
	char *rados_id;
	char *rados_ns;
	char *rados_capacity;
	unsigned rados_timeout;
	double rados_negative_timeout;
	double rados_entry_timeout;
	unsigned rados_sweep_interval;
	unsigned rados_lease;
	unsigned rados_retry;
};

#define KVFS_OPT(t, p)                                                         \
	{                                                                      \
		t, offsetof(struct kvfs_opts, p), 1                            \
	}
static const struct fuse_opt kvfs_opt_spec[] = {
	KVFS_OPT("loglevel=%s", loglevel),
	KVFS_OPT("max_file_size=%s", max_file_size),
	KVFS_OPT("record_max=%s", record_max),
	KVFS_OPT("dirty_limit=%s", dirty_limit),
	KVFS_OPT("index_mmap=%s", index_mmap),
	KVFS_OPT("prefetch=%s", prefetch),
	KVFS_OPT("root_mode=%s", root_mode),
	KVFS_OPT("entry_timeout=%lf", entry_timeout),
	KVFS_OPT("attr_timeout=%lf", attr_timeout),
	KVFS_OPT("negative_timeout=%lf", negative_timeout),
	KVFS_OPT("threads=%u", threads),
	KVFS_OPT("durable", durable),
	KVFS_OPT("io_uring", io_uring),
	KVFS_OPT("nopassthrough", nopassthrough),
	KVFS_OPT("io_uring_q_depth=%s", io_uring_q_depth),
	{"noatime", offsetof(struct kvfs_opts, noatime), 1},
	{"atime", offsetof(struct kvfs_opts, atime), 1},
	{"strictatime", offsetof(struct kvfs_opts, atime), 1},
	{"relatime", offsetof(struct kvfs_opts, relatime), 1},
	KVFS_OPT("capacity=%s", capacity),
	KVFS_OPT("high_watermark=%u", high_wm),
	KVFS_OPT("low_watermark=%u", low_wm),
	KVFS_OPT("tmp_max_age=%u", tmp_max_age),
	KVFS_OPT("rados_pool=%s", rados_pool),
	KVFS_OPT("ceph_conf=%s", ceph_conf),
	KVFS_OPT("rados_id=%s", rados_id),
	KVFS_OPT("rados_namespace=%s", rados_ns),
	KVFS_OPT("rados_capacity=%s", rados_capacity),
	KVFS_OPT("rados_timeout=%u", rados_timeout),
	KVFS_OPT("rados_negative_timeout=%lf", rados_negative_timeout),
	KVFS_OPT("rados_entry_timeout=%lf", rados_entry_timeout),
	KVFS_OPT("rados_sweep_interval=%u", rados_sweep_interval),
	KVFS_OPT("rados_lease=%u", rados_lease),
	KVFS_OPT("rados_retry=%u", rados_retry),
	FUSE_OPT_END};

static void kvfs_usage(const char *prog)
{
	printf("usage: %s [options] DATADIR MOUNTPOINT\n\n"
	       "kvfs options:\n"
	       "    -o loglevel=LEVEL      err, warn, info (default), debug\n"
	       "    -o entry_timeout=S     kernel name cache (default 3600)\n"
	       "    -o attr_timeout=S      kernel attribute cache (default "
	       "3600)\n"
	       "    -o negative_timeout=S  kernel cache of absent names "
	       "(default 3600)\n"
	       "    -o max_file_size=SIZE  largest file, K/M/G suffixes "
	       "(default: no limit)\n"
	       "    -o record_max=SIZE     larger files are extent files "
	       "(default 64M)\n"
	       "    -o dirty_limit=SIZE    memory for unsaved writes "
	       "(default 1G)\n"
	       "    -o index_mmap=SIZE     bytes of the index read through a "
	       "mapping (default 1G;\n"
	       "                           0: pread)\n"
	       "    -o prefetch=SIZE       read-ahead of looked-up blocks "
	       "(default 256M; 0: off)\n"
	       "    -o threads=N           FUSE worker threads (default: one "
	       "per CPU, at most 16)\n"
	       "    -o root_mode=OCTAL     root directory mode of a new "
	       "DATADIR (default 0755)\n"
	       "    -o durable             a successful close(2) survives "
	       "power loss\n"
	       "    -o relatime|noatime|atime  what reads do to atime "
	       "(default relatime, as ext4)\n"
	       "    -o io_uring            serve FUSE over io_uring (libfuse "
	       ">= 3.18, kernel's\n"
	       "                           fuse enable_uring on; kvfs(8))\n"
	       "    -o io_uring_q_depth=N  ring entries per queue (default "
	       "8)\n"
	       "    -o nopassthrough       extent files' I/O through kvfs, "
	       "not from their\n"
	       "                           backing files (kvfs(8))\n"
	       "    -o capacity=SIZE|N%%    most space kvfs uses (default "
	       "90%% of what is free\n"
	       "                           plus what kvfs already uses)\n"
	       "    -o high_watermark=PCT  evict above PCT%% of capacity "
	       "(default 95)\n"
	       "    -o low_watermark=PCT   ... down to PCT%% (default 90)\n"
	       "    -o tmp_max_age=S       remove engine temp files idle "
	       "this long (default 3600)\n"
	       "    -o allow_other         let other users (containers) use "
	       "the mount\n"
	       "    -o rados_pool=POOL     share blocks with other machines "
	       "on this Ceph pool\n"
	       "                           (kvfs(8) SHARED TIER: ceph_conf=, "
	       "rados_id=,\n"
	       "                           rados_namespace=, rados_timeout=, "
	       "rados_capacity=,\n"
	       "                           rados_negative_timeout=, "
	       "rados_entry_timeout=,\n"
	       "                           rados_sweep_interval=, "
	       "rados_lease=, rados_retry=)\n\n"
	       "FUSE options:\n",
	       prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

static int kvfs_opt_proc(void *data, const char *arg, int key,
			 struct fuse_args *outargs)
{
	struct fs *fs = data;

	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	/* The first bare argument is DATADIR; the next one the mount point. */
	if (!fs->cfg.datadir) {
		fs->cfg.datadir = realpath(arg, NULL);
		if (!fs->cfg.datadir) {
			fprintf(stderr, "kvfs: data directory %s: %s\n", arg,
				strerror(errno));
			exit(KVFS_EXIT_CONFIG);
		}
		return 0;
	}
	return 1;
}

/* Parses "123", "4K", "16M", "2G", "1T". */
static int kvfs_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'T':
	case 't':
		v <<= 10;
		/* fall through */
	case 'G':
	case 'g':
		v <<= 10;
		/* fall through */
	case 'M':
	case 'm':
		v <<= 10;
		/* fall through */
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

/* The shared tier's options (kvfs(8) SHARED TIER). */
static int kvfs_config_rados(struct fs *fs, struct kvfs_opts *o)
{
	struct fs_config *c = &fs->cfg;

	if (!o->rados_pool) {
		if (o->ceph_conf || o->rados_id || o->rados_ns ||
		    o->rados_capacity) {
			fprintf(stderr, "kvfs: ceph_conf, rados_id, "
					"rados_namespace and rados_capacity "
					"need rados_pool\n");
			return -EINVAL;
		}
		return 0;
	}
#ifndef KVFS_RADOS
	fprintf(stderr, "kvfs: rados_pool: this kvfs was built without "
			"librados (install librados-dev and rebuild with "
			"-Drados=enabled)\n");
	return -ENOTSUP;
#endif
	if (!*o->rados_pool || o->rados_timeout == 0 ||
	    o->rados_sweep_interval == 0 || o->rados_retry == 0 ||
	    o->rados_lease <= o->rados_sweep_interval ||
	    o->rados_negative_timeout < 0 || o->rados_entry_timeout < 0) {
		fprintf(stderr, "kvfs: the shared tier needs a pool name, "
				"rados_timeout, rados_retry and "
				"rados_sweep_interval > 0, rados_lease > "
				"rados_sweep_interval, timeouts >= 0\n");
		return -EINVAL;
	}
	if (o->rados_capacity &&
	    (kvfs_parse_size(o->rados_capacity, &c->rados_capacity) < 0 ||
	     c->rados_capacity == 0)) {
		fprintf(stderr, "kvfs: bad rados_capacity '%s'\n",
			o->rados_capacity);
		return -EINVAL;
	}
	c->rados_pool = o->rados_pool;
	c->ceph_conf = o->ceph_conf;
	c->rados_id = o->rados_id;
	c->rados_ns = o->rados_ns;
	c->rados_timeout = o->rados_timeout;
	c->rados_sweep_interval = o->rados_sweep_interval;
	c->rados_lease = o->rados_lease;
	c->rados_retry = o->rados_retry;
	c->rados_negative_timeout = o->rados_negative_timeout;
	c->rados_entry_timeout = o->rados_entry_timeout;
	/* Another machine may store or remove any name at any time. */
	if (c->negative_timeout > o->rados_negative_timeout)
		c->negative_timeout = o->rados_negative_timeout;
	if (c->entry_timeout > o->rados_entry_timeout)
		c->entry_timeout = o->rados_entry_timeout;
	return 0;
}

/* FUSE over io_uring (fuse_compat.h): refused here when it cannot run. */
static int kvfs_config_uring(struct fs *fs, struct kvfs_opts *o)
{
	struct fs_config *c = &fs->cfg;
	unsigned long d = FUSE_COMPAT_Q_DEPTH;
	char *end = NULL;

	if (o->io_uring_q_depth) {
		errno = 0;
		d = strtoul(o->io_uring_q_depth, &end, 10);
		if (!o->io_uring) {
			fprintf(stderr, "kvfs: io_uring_q_depth needs "
					"io_uring\n");
			return -EINVAL;
		}
		if (errno || end == o->io_uring_q_depth || *end != '\0' ||
		    o->io_uring_q_depth[0] == '-' || d == 0 ||
		    d > FUSE_COMPAT_Q_DEPTH_MAX) {
			fprintf(stderr,
				"kvfs: bad io_uring_q_depth '%s' (1 to %d)\n",
				o->io_uring_q_depth, FUSE_COMPAT_Q_DEPTH_MAX);
			return -EINVAL;
		}
	}
	if (!o->io_uring)
		return 0;
	if (fuse_compat_uring_check() < 0)
		return -ENOTSUP;
	c->io_uring = 1;
	c->io_uring_q_depth = (unsigned)d;
	return 0;
}

/*
 * A worker never waits (defer.h): one per CPU keeps every CPU replying,
 * and each one more only adds wake-ups (kvfs(7), THREADS AND LOCKS).
 */
#define KVFS_THREADS_AUTO UINT_MAX
#define KVFS_THREADS_MAX_AUTO 16

static unsigned kvfs_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > KVFS_THREADS_MAX_AUTO ? KVFS_THREADS_MAX_AUTO : (unsigned)n;
}

/* -o capacity=SIZE|N%: c->capacity or c->capacity_pct. 0 or -EINVAL. */
static int kvfs_config_capacity(struct fs_config *c, const struct kvfs_opts *o)
{
	size_t len;
	char *end;

	if (!o->capacity)
		return 0;
	len = strlen(o->capacity);
	if (len > 1 && o->capacity[len - 1] == '%') {
		unsigned long pct = strtoul(o->capacity, &end, 10);

		if (end != o->capacity + len - 1 || pct == 0 || pct > 100) {
			fprintf(stderr, "kvfs: bad capacity '%s'\n",
				o->capacity);
			return -EINVAL;
		}
		c->capacity_pct = (unsigned)pct;
	} else if (kvfs_parse_size(o->capacity, &c->capacity) < 0 ||
		   c->capacity == 0) {
		fprintf(stderr, "kvfs: bad capacity '%s'\n", o->capacity);
		return -EINVAL;
	}
	return 0;
}

static int kvfs_config(struct fs *fs, struct kvfs_opts *o)
{
	struct fs_config *c = &fs->cfg;
	char *end;

	c->entry_timeout = o->entry_timeout;
	c->attr_timeout = o->attr_timeout;
	c->negative_timeout = o->negative_timeout;
	c->threads = o->threads;
	if (c->threads == KVFS_THREADS_AUTO)
		c->threads = kvfs_default_threads();
	c->durable = o->durable;
	c->passthrough = !o->nopassthrough;
	c->max_file_size = INT64_MAX;
	c->record_max = FS_RECORD_MAX;
	c->dirty_limit = 1ull << 30;
	c->index_mmap = FS_INDEX_MMAP;
	c->prefetch = RA_DEFAULT_BUDGET;
	c->dirty_wait_ns = FS_DIRTY_WAIT_NS;
	c->root_mode = 0755;
	if (o->loglevel && log_parse_level(o->loglevel, &c->loglevel) < 0) {
		fprintf(stderr,
			"kvfs: bad loglevel '%s' (err, warn, info, "
			"debug)\n",
			o->loglevel);
		return -EINVAL;
	}
	if (o->max_file_size &&
	    (kvfs_parse_size(o->max_file_size, &c->max_file_size) < 0 ||
	     c->max_file_size == 0)) {
		fprintf(stderr, "kvfs: bad max_file_size '%s'\n",
			o->max_file_size);
		return -EINVAL;
	}
	if (o->record_max &&
	    (kvfs_parse_size(o->record_max, &c->record_max) < 0 ||
	     c->record_max < NODE_SEG || c->record_max > (1ull << 30))) {
		fprintf(stderr, "kvfs: bad record_max '%s' (1M to 1G)\n",
			o->record_max);
		return -EINVAL;
	}
	if (o->dirty_limit &&
	    (kvfs_parse_size(o->dirty_limit, &c->dirty_limit) < 0 ||
	     c->dirty_limit == 0)) {
		fprintf(stderr, "kvfs: bad dirty_limit '%s'\n", o->dirty_limit);
		return -EINVAL;
	}
	if (o->prefetch && kvfs_parse_size(o->prefetch, &c->prefetch) < 0) {
		fprintf(stderr, "kvfs: bad prefetch '%s'\n", o->prefetch);
		return -EINVAL;
	}
	if (o->index_mmap &&
	    kvfs_parse_size(o->index_mmap, &c->index_mmap) < 0) {
		fprintf(stderr, "kvfs: bad index_mmap '%s'\n", o->index_mmap);
		return -EINVAL;
	}
	if (o->root_mode) {
		unsigned long m = strtoul(o->root_mode, &end, 8);

		if (*end != '\0' || end == o->root_mode || m > 07777) {
			fprintf(stderr, "kvfs: bad root_mode '%s'\n",
				o->root_mode);
			return -EINVAL;
		}
		c->root_mode = (unsigned)m;
	}
	c->tmp_max_age_ns = (int64_t)o->tmp_max_age * 1000000000;
	if (o->noatime + o->atime + o->relatime > 1) {
		fprintf(stderr, "kvfs: give one of noatime, relatime and "
				"atime\n");
		return -EINVAL;
	}
	c->atime = o->noatime ? FS_NOATIME : o->atime ? FS_ATIME : FS_RELATIME;
	c->high_pct = o->high_wm;
	c->low_pct = o->low_wm;
	if (o->low_wm == 0 || o->low_wm > o->high_wm || o->high_wm > 100) {
		fprintf(stderr, "kvfs: watermarks must satisfy 0 < "
				"low_watermark <= high_watermark <= 100\n");
		return -EINVAL;
	}
	if (kvfs_config_capacity(c, o) < 0)
		return -EINVAL;
	if (c->threads == 0 || c->threads > 256) {
		fprintf(stderr, "kvfs: threads must be 1..256\n");
		return -EINVAL;
	}
	if (c->entry_timeout < 0 || c->attr_timeout < 0 ||
	    c->negative_timeout < 0) {
		fprintf(stderr, "kvfs: timeouts must not be negative\n");
		return -EINVAL;
	}
	if (kvfs_config_uring(fs, o) < 0)
		return -EINVAL;
	return kvfs_config_rados(fs, o);
}

static void kvfs_write_pid(struct fs *fs)
{
	/* kvdb_lock recorded the pid before fuse_daemonize's fork. */
	if (datadir_lock_record_pid(fs->db->lock_fd) < 0)
		log_warn("cannot record pid in kvfs.lock");
}

static int kvfs_check_dirs(struct fs *fs, const char *mountpoint)
{
	struct stat st;

	if (stat(fs->cfg.datadir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "kvfs: data directory %s is not a directory\n",
			fs->cfg.datadir);
		return -1;
	}
	if (access(fs->cfg.datadir, W_OK | X_OK) < 0) {
		fprintf(stderr, "kvfs: data directory %s is not writable: %s\n",
			fs->cfg.datadir, strerror(errno));
		return -1;
	}
	if (stat(mountpoint, &st) < 0) {
		fprintf(stderr, "kvfs: mount point %s: %s\n", mountpoint,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "kvfs: mount point %s is not a directory\n",
			mountpoint);
		return -1;
	}
	return 0;
}

static void kvfs_free_extent(void *arg, const struct kv_extent *ext)
{
	node_free_extent(arg, ext);
}

static void kvfs_recover_release(void *ctx, uint64_t ino)
{
	node_release_inode(ctx, ino);
}

static int kvfs_cap_remove(void *ctx, const struct idx_name *e)
{
	return node_evict_name(ctx, e);
}

/*
 * The capacity module on the settled watermarks, and the node table's
 * upward calls into it. After the index is reopened in the daemon process:
 * the module keeps the index pointer.
 */
static int kvfs_start_cap(struct fs *fs)
{
	const struct cap_config cfg = {
		.datadir = fs->cfg.datadir,
		.high_wm = fs->cfg.high_wm,
		.low_wm = fs->cfg.low_wm,
		.clock = clock_realtime,
		.remove = kvfs_cap_remove,
		.ctx = fs,
	};

	if (cap_new(&fs->cap, fs->idx, fs->store, &cfg) < 0) {
		log_err("capacity accounting: out of memory");
		return -1;
	}
	cap_set_upcalls(fs);
	return 0;
}

/* Settles the capacity and watermarks in bytes. */
static int kvfs_capacity(struct fs *fs)
{
	struct fs_config *c = &fs->cfg;
	uint64_t used = 0, nfiles, total, avail;
	struct statvfs sv;

	if (statvfs(c->datadir, &sv) < 0) {
		fprintf(stderr, "kvfs: statvfs %s: %s\n", c->datadir,
			strerror(errno));
		return -1;
	}
	total = (uint64_t)sv.f_blocks * sv.f_frsize;
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	store_usage(fs->store, &used, &nfiles);
	if (c->capacity_pct)
		c->capacity = total / 100 * c->capacity_pct;
	else if (!c->capacity)
		c->capacity = (avail + used) / 10 * 9;
	c->high_wm = c->capacity / 100 * c->high_pct;
	c->low_wm = c->capacity / 100 * c->low_pct;
	log_info("capacity %llu MiB (evicting from %llu MiB down to %llu MiB); "
		 "%llu MiB in %llu data files now",
		 (unsigned long long)(c->capacity >> 20),
		 (unsigned long long)(c->high_wm >> 20),
		 (unsigned long long)(c->low_wm >> 20),
		 (unsigned long long)(used >> 20), (unsigned long long)nfiles);
	return 0;
}

/* Says why kvdb_open() failed, in the words kvfs(8) documents. */
static void kvfs_open_err(const char *datadir, const struct kvdb_error *e)
{
	switch (e->stage) {
	case KVDB_STAGE_LOCK_FILE:
		fprintf(stderr, "kvfs: data directory %s is not writable: %s\n",
			datadir, strerror(-e->err));
		return;
	case KVDB_STAGE_LOCK:
		fprintf(stderr,
			"kvfs: data directory %s is already served by another "
			"kvfs (pid %s)\n",
			datadir, e->holder[0] ? e->holder : "unknown");
		return;
	case KVDB_STAGE_INDEX:
		/* The index said what is wrong with the file (one line, logged). */
		if (e->err == -EMEDIUMTYPE || e->err == -EPROTONOSUPPORT)
			return;
		break;
	case KVDB_STAGE_INDEX_SETUP:
		/* The index logged SQLite's reason. */
		return;
	default:
		break;
	}
	fprintf(stderr, "kvfs: %s\n", e->msg);
}

/*
 * A SIGBUS here is, all but surely, a page of index.db read through its
 * mapping (-o index_mmap) that the disk could not read, or index.db cut
 * while mounted: one line says so before the default action ends kvfs.
 */
static void kvfs_sigbus(int sig)
{
	log_dying("kvfs: fatal: SIGBUS: a mapped page of index.db could not "
		  "be read (a disk error, or index.db was cut while mounted); "
		  "kvfs stops. -o index_mmap=0 reads the index with pread(2), "
		  "which turns such errors into EIO");
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Opens the data directory (fs/kvdb): kvfs.lock, so that two daemons never
 * serve one data directory (the lock belongs to the open file, so it is
 * kept across fuse_daemonize's fork), the index (made with root_mode when
 * missing) and the block store.
 */
static int kvfs_open(struct fs *fs)
{
	/* Name records only matter to a rebuild: not worth a write each. */
	const struct store_config scfg = {.durable = fs->cfg.durable,
					  .batch_names = 1};
	const struct kvdb_opts o = {
		.flags = KVDB_STORE | KVDB_INDEX_CREATE |
			 (fs->cfg.durable ? KVDB_INDEX_DURABLE : 0),
		.who = "kvfs",
		.store = &scfg,
		.root_mode = fs->cfg.root_mode,
		.index_mmap = fs->cfg.index_mmap,
	};
	struct kvdb_error err;

	if (fs->cfg.index_mmap)
		signal(SIGBUS, kvfs_sigbus);
	if (kvdb_open(&fs->db, fs->cfg.datadir, &o, &err) < 0) {
		kvfs_open_err(fs->cfg.datadir, &err);
		return -1;
	}
	fs->idx = fs->db->idx;
	fs->store = fs->db->store;
	fs->ext_fd = fs->db->ext_fd;
	return 0;
}

/*
 * Start-up recovery (kvdb_recover: files unlinked while open, then crash
 * recovery unless the last run stopped cleanly), with the node table
 * releasing the inodes of dropped names; then the capacity.
 */
static int kvfs_recover(struct fs *fs)
{
	const struct recover_ops ops = {
		.clock = clock_realtime,
		.release = kvfs_recover_release,
		.ctx = fs,
	};
	struct recover_result r;

	kvdb_recover(fs->db, kvfs_free_extent, &ops, &r);
	atomic_fetch_add(&fs->dropped, r.dropped);
	return kvfs_capacity(fs);
}

static int kvfs_reopen_index(struct fs *fs)
{
	struct kvdb_error err;
	int rc = kvdb_reopen_index(fs->db, &err);

	fs->idx = fs->db->idx;
	if (rc < 0 && err.stage != KVDB_STAGE_INDEX_SETUP)
		log_err("cannot reopen %s: %s", err.path, strerror(-err.err));
	return rc;
}

static int kvfs_start_vc(struct fs *fs)
{
	const struct vc_ops ops = {
		.probe = fs_probe,
		.answer = fs_lookup_answer,
		.ctx = fs,
	};
	/* With the shared tier, verdicts live as long as kernel entries. */
	const struct vc_config cfg = {
		.retain = VC_DEFAULT_RETAIN,
		.inline_probe = 1,
		.threaded = 1,
		.miss_ttl_ns =
			fs->cfg.rados_pool
				? (uint64_t)(fs->cfg.negative_timeout * 1e9)
				: 0,
		.hit_ttl_ns = fs->cfg.rados_pool
				      ? (uint64_t)(fs->cfg.entry_timeout * 1e9)
				      : 0,
	};

	return vc_new(&fs->vc, &ops, &cfg);
}

static int kvfs_loop(struct fs *fs, struct fuse_cmdline_opts *co)
{
	return rx_loop(fs, co->singlethread ? 1 : fs->cfg.threads);
}

/* Fills in what the context holds before any option is read. */
static void kvfs_init(struct fs *fs)
{
	int fd;

	fs->cfg.loglevel = LOG_LVL_INFO;
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->start_time);
	fs->start_ns = fs_now_ns();
#ifdef KVFS_FAULT_INJECTION
	pthread_mutex_init(&fs->fault_lock, NULL);
#endif
	/* fuse_daemonize() points 0-2 at /dev/null: keep them taken. */
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
}

/*
 * Parses the command line into o, co and fs->cfg. Returns 1 to go on, or
 * 0 to exit with *ret (help, version, a usage or configuration error).
 */
static int kvfs_parse(struct fuse_args *args, struct kvfs_opts *o,
		      struct fuse_cmdline_opts *co, struct fs *fs,
		      const char *prog, int *ret)
{
	*ret = KVFS_EXIT_CONFIG;
	if (fuse_opt_parse(args, o, kvfs_opt_spec, NULL) < 0 ||
	    fuse_opt_parse(args, fs, NULL, kvfs_opt_proc) < 0)
		return 0;
	if (fuse_parse_cmdline(args, co) != 0)
		return 0;
	if (co->show_help) {
		kvfs_usage(prog);
		*ret = 0;
		return 0;
	}
	if (co->show_version) {
		printf("kvfs %s\nFUSE library %s\n", KVFS_VERSION,
		       fuse_pkgversion());
		*ret = 0;
		return 0;
	}
	if (!fs->cfg.datadir || !co->mountpoint) {
		fprintf(stderr,
			"usage: %s [options] DATADIR MOUNTPOINT\n"
			"try '%s -h' for the options\n",
			prog, prog);
		return 0;
	}
	if (kvfs_config(fs, o) < 0)
		return 0;
	log_set_level(co->debug ? LOG_LVL_DEBUG : fs->cfg.loglevel);
	fs->cfg.mountpoint = co->mountpoint;
	return 1;
}

/* Stops what kvfs_run started (each stop is a no-op for one never started). */
static void kvfs_stop_threads(struct fs *fs)
{
	/* Deferred requests are answered first: they use everything below. */
	defer_stop(fs);
	/* Queued writes to extent files land before anything stops. */
	fs_extq_stop(fs);
	/* First: queued saves still need the notifier and capacity. */
	wb_stop(fs);
	/* Then the puts those saves queued (bounded). */
	share_stop(fs);
	janitor_stop(fs);
	ctlsock_stop(fs);
	/* After all that frees records, before what a failed read uses. */
	ra_stop(fs);
	/* Answers every parked lookup before the session goes away. */
	vc_free(fs->vc);
	fs->vc = NULL;
	notify_stop(fs->notify);
}

/*
 * In the daemon process, once mounted: starts the threads, serves until
 * the loop ends, and stops them. Returns the exit status.
 */
static int kvfs_run(struct fs *fs, struct fuse_cmdline_opts *co)
{
	int ret = 1, rc;

	if (!co->foreground) {
		log_use_syslog("kvfs");
		/*
		 * SQLite's POSIX locks do not pass through fork(): reopen the
		 * index in the daemon process.
		 */
		if (kvfs_reopen_index(fs) < 0)
			goto out_stop;
	}
	/* Threads do not survive fork(): start them after daemonizing. */
	if (kvfs_start_cap(fs) < 0 || notify_start(&fs->notify, fs->se) < 0 ||
	    kvfs_start_vc(fs) < 0 || idx_start_checkpointer(fs->idx) < 0 ||
	    janitor_start(fs) < 0 || wb_start(fs, KVFS_WB_WRITERS) < 0 ||
	    fs_extq_start(fs) < 0 || share_start(fs) < 0 ||
	    ra_start(fs, fs->cfg.prefetch) < 0 ||
	    defer_start(fs, DEFER_THREADS) < 0) {
		log_err("cannot start the notifier, probe, checkpoint, "
			"write-behind, extent-write, shared-tier, read-ahead "
			"and deferred-request threads");
		goto out_stop;
	}
	/*
	 * Changes share index commits (the janitor's, every 200 ms) unless
	 * each must be durable when its request returns.
	 */
	if (!fs->cfg.durable)
		idx_set_batch(fs->idx, KVFS_INDEX_BATCH);
	/* kvfsctl's socket; the mount works without it (it logs why). */
	ctlsock_start(fs);
	kvfs_write_pid(fs);
	log_info("serving %s at %s", fs->cfg.datadir, co->mountpoint);

	/* With io_uring, libfuse starts its rings while serving INIT. */
	rc = fs->cfg.io_uring ? fuse_compat_serve_init(fs->se, 1) : 0;
	if (rc == -EPROTONOSUPPORT) {
		ret = KVFS_EXIT_CONFIG;
		goto out_stop;
	}
	if (rc == 0)
		rc = fs->cfg.io_uring ? fuse_compat_loop_uring(fs->se)
				      : kvfs_loop(fs, co);
	if (fs->cfg.io_uring) {
		/* Deferred requests still use their ring entries. */
		defer_quiesce(fs);
		fuse_compat_stop_rings(fs->se);
	}
	/* 0 or a signal number: a normal stop. -errno: the loop failed. */
	ret = rc < 0 ? 1 : 0;
	if (rc < 0)
		log_err("session loop failed: %s", strerror(-rc));
	else
		log_info("unmounting %s", co->mountpoint);
out_stop:
	kvfs_stop_threads(fs);
	return ret;
}

/*
 * Mounts, daemonizes and serves (kvfs_run); unmounts. Returns the exit
 * status: KVFS_EXIT_CONFIG when the session could not be set up.
 */
static int kvfs_mount(struct fs *fs, struct fuse_args *args,
		      struct fuse_cmdline_opts *co)
{
	int ret = KVFS_EXIT_CONFIG;

	if (fuse_opt_add_arg(args, "-odefault_permissions") < 0 ||
	    fuse_opt_add_arg(args, "-ofsname=kvfs") < 0 ||
	    fuse_opt_add_arg(args, "-osubtype=kvfs") < 0 ||
	    (fs->cfg.io_uring &&
	     fuse_compat_uring_args(args, fs->cfg.io_uring_q_depth) < 0))
		return ret;
	/* Set before the session starts, read-only after. */
	static struct fuse_lowlevel_ops ops;

	ops = fs_ops;
	/*
	 * The few threads that serve the transport never wait: what would
	 * goes to kvfs's threads (a ring entry's buffers stay valid until
	 * the reply).
	 */
	defer_patch_ops(&ops, fs->cfg.durable, !fs->cfg.io_uring);
	reqcount_patch_ops(&ops);
	fs->se = fuse_session_new(args, &ops, sizeof(ops), fs);
	if (!fs->se)
		return ret;
	if (fuse_set_signal_handlers(fs->se) != 0)
		goto out_session;
	if (fuse_session_mount(fs->se, co->mountpoint) != 0)
		goto out_signals;
	if (fuse_compat_hooks(fs->se) < 0)
		log_warn("cannot hook /dev/fuse's replies: lookups in one "
			 "directory run one at a time, and no passthrough");
	if (fuse_daemonize(co->foreground) != 0) {
		ret = 1;
		kvfs_stop_threads(fs);
	} else {
		ret = kvfs_run(fs, co);
	}
	fuse_session_unmount(fs->se);
out_signals:
	fuse_remove_signal_handlers(fs->se);
out_session:
	fuse_session_destroy(fs->se);
	return ret;
}

/* Closes what kvfs_open opened; marks a clean stop. */
static void kvfs_close(struct fs *fs)
{
	/* The last batch, and the frees that waited for it. */
	if (fs->nodes)
		node_commit(fs, 1);
	node_table_free(fs);
	fs->up = (struct fs_upcalls){0};
	cap_free(fs->cap);
	fs->cap = NULL;
	/* Every append is synchronous: after the loop nothing is half done. */
	kvdb_close_clean(fs->db);
	fs->db = NULL;
	fs->idx = NULL;
	fs->store = NULL;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct kvfs_opts o = {.entry_timeout = 3600,
			      .attr_timeout = 3600,
			      .negative_timeout = 3600,
			      .threads = KVFS_THREADS_AUTO,
			      .high_wm = 95,
			      .low_wm = 90,
			      .tmp_max_age = 3600,
			      .rados_timeout = 5,
			      .rados_negative_timeout = 1,
			      .rados_entry_timeout = 5,
			      .rados_sweep_interval = 10,
			      .rados_lease = 30,
			      .rados_retry = 5};
	struct fuse_cmdline_opts co = {0};
	struct fs fs = {0};
	int ret = KVFS_EXIT_CONFIG;

	kvfs_init(&fs);
	if (!kvfs_parse(&args, &o, &co, &fs, argv[0], &ret))
		goto out_args;
	if (kvfs_check_dirs(&fs, co.mountpoint) < 0 || kvfs_open(&fs) < 0)
		goto out_close;
	if (node_table_init(&fs) == 0 && kvfs_recover(&fs) == 0)
		ret = kvfs_mount(&fs, &args, &co);
out_close:
	kvfs_close(&fs);
out_args:
	free(co.mountpoint);
	free(fs.cfg.datadir);
	free(o.loglevel);
	free(o.max_file_size);
	free(o.record_max);
	free(o.dirty_limit);
	free(o.prefetch);
	free(o.index_mmap);
	free(o.root_mode);
	free(o.io_uring_q_depth);
	free(o.capacity);
	free(o.rados_pool);
	free(o.ceph_conf);
	free(o.rados_id);
	free(o.rados_ns);
	free(o.rados_capacity);
	fuse_opt_free_args(&args);
	return ret;
}
