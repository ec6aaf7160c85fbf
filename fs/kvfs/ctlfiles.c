/* SPDX-License-Identifier: MIT */
/*
 * Read-only control files under MOUNTPOINT/.kvfs/: "stats" (Prometheus text
 * exposition format), "status" (JSON) and "version". They live outside the
 * index, on inode numbers from FS_CTL_INO up that the index never hands out;
 * ".kvfs" is not listed by readdir of the root and cannot be created,
 * removed or renamed. Each open takes a snapshot that its reads return, so a
 * reader sees one consistent text; the files are opened direct_io so the
 * kernel never caches a stale snapshot.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capacity.h"
#include "ctlfiles.h"
#include "fs.h"
#include "ctlproto.h"
#include "notify.h"
#include "ra.h"
#include "share.h"
#include "tbuf.h"
#include "wb.h"

#define FS_CTL_NAME ".kvfs"

enum { FS_CTL_DIR, FS_CTL_STATS, FS_CTL_STATUS, FS_CTL_VERSION, FS_CTL_N };

static const char *const fs_ctl_names[FS_CTL_N] = {
	[FS_CTL_DIR] = FS_CTL_NAME,
	[FS_CTL_STATS] = "stats",
	[FS_CTL_STATUS] = "status",
	[FS_CTL_VERSION] = "version",
};

int fs_ctl_ino(uint64_t ino)
{
	return ino >= FS_CTL_INO && ino < FS_CTL_INO + FS_CTL_N;
}

int fs_ctl_reserved(uint64_t parent, const char *name)
{
	return parent == FS_CTL_INO + FS_CTL_DIR ||
	       (parent == KV_ROOT_INO && strcmp(name, FS_CTL_NAME) == 0);
}

static void fs_ctl_attr(struct fs *fs, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FS_CTL_INO + FS_CTL_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		st->st_size = 4096;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
	}
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->start_time;
}

static void fs_ctl_entry(struct fs *fs, fuse_req_t req, uint64_t ino)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = ino;
	/* The kernel may cache the names; attributes are asked every time. */
	e.entry_timeout = fs->cfg.entry_timeout;
	fs_ctl_attr(fs, ino, &e.attr);
	fuse_reply_entry(req, &e);
}

int fs_ctl_lookup(struct fs *fs, fuse_req_t req, uint64_t parent,
		  const char *name)
{
	if (parent == KV_ROOT_INO && strcmp(name, FS_CTL_NAME) == 0) {
		fs_ctl_entry(fs, req, FS_CTL_INO + FS_CTL_DIR);
		return 1;
	}
	if (parent != FS_CTL_INO + FS_CTL_DIR)
		return 0;
	for (unsigned i = FS_CTL_DIR + 1; i < FS_CTL_N; i++) {
		if (strcmp(name, fs_ctl_names[i]) == 0) {
			fs_ctl_entry(fs, req, FS_CTL_INO + i);
			return 1;
		}
	}
	fuse_reply_err(req, ENOENT);
	return 1;
}

void fs_ctl_getattr(struct fs *fs, fuse_req_t req, uint64_t ino)
{
	struct stat st;

	fs_ctl_attr(fs, ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void fs_ctl_share_stats(struct fs *fs, struct tbuf *t)
{
	struct share_stats s;

	share_get_stats(fs, &s);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_REACHABLE, s.reachable);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PUTS_QUEUED, s.queued);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PUTS, s.puts);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PUT_BYTES, s.put_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PUT_ERRORS, s.put_errors);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PUTS_DROPPED, s.puts_dropped);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PUT_US, s.put_us);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_REMOVES, s.removes);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PROBES, s.probes);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PROBE_US, s.probe_us);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_REMOTE_HITS, s.remote_hits);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_REMOTE_MISSES, s.remote_misses);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PULLS, s.pulls);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PULL_BYTES, s.pull_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_PULL_US, s.pull_us);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_ERRORS, s.errors);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_SHORT_DROPPED, s.short_dropped);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_QUARANTINED, s.quarantined);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_REMOTE_UNLINKS,
			    s.remote_unlinks);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_SWEEPER, s.sweeper);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_SWEEPS, s.sweeps);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_SWEPT, s.swept);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_SWEPT_BYTES, s.swept_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_USAGE_BYTES, s.usage_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RADOS_CAPACITY_BYTES, s.capacity);
}

/* The read-ahead cache's metrics (ra.h). */
static void fs_ctl_ra_stats(struct fs *fs, struct tbuf *t)
{
	struct ra_stats rs;

	ra_get_stats(fs, &rs);
	ctlproto_metric_put(t, CTLPROTO_M_RA_STARTED, rs.started);
	ctlproto_metric_put(t, CTLPROTO_M_RA_USED, rs.used);
	ctlproto_metric_put(t, CTLPROTO_M_RA_WASTED, rs.wasted);
	ctlproto_metric_put(t, CTLPROTO_M_RA_FAILED, rs.failed);
	ctlproto_metric_put(t, CTLPROTO_M_RA_SKIPPED, rs.skipped);
	ctlproto_metric_put(t, CTLPROTO_M_RA_READ_BYTES, rs.read_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RA_BYTES, rs.bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RA_PEAK_BYTES, rs.peak_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_RA_PENDING, rs.pending);
	ctlproto_metric_put(t, CTLPROTO_M_RA_BUDGET, fs->cfg.prefetch);
}

static void fs_ctl_stats(struct fs *fs, struct tbuf *t)
{
	struct idx_txn_stats xs;
	struct store_stats ss;
	struct wb_stats ws;
	struct vc_stats vs;
	uint64_t dirty;
	size_t nnodes;

	wb_get_stats(fs, &ws);
	vc_get_stats(fs->vc, &vs);
	store_get_stats(fs->store, &ss);
	pthread_mutex_lock(&fs->dirty_lock);
	dirty = fs->dirty_bytes;
	pthread_mutex_unlock(&fs->dirty_lock);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_PROBES, vs.probes);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_BATCHED_KEYS, vs.batched_keys);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_COALESCED, vs.coalesced);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_HITS, vs.hits);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_MISSES, vs.misses);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_CANCELLED, vs.cancelled);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUP_PROBE_ERRORS, vs.probe_errors);
	ctlproto_metric_put(t, CTLPROTO_M_MARKED_MISSES, vs.marked_misses);
	ctlproto_metric_put(t, CTLPROTO_M_STALE_RESULTS, vs.stale_discarded);
	ctlproto_metric_put(t, CTLPROTO_M_KERNEL_INVALIDATIONS,
			    notify_count(fs->notify));
	ctlproto_metric_put(t, CTLPROTO_M_VERDICTS, vs.nverdicts);
	ctlproto_metric_put(t, CTLPROTO_M_QUARANTINED, vs.nquarantined);
	ctlproto_metric_put(t, CTLPROTO_M_LOOKUPS_PARKED, vs.nparked);
	ctlproto_metric_put(t, CTLPROTO_M_DROPPED, atomic_load(&fs->dropped));
	ctlproto_metric_put(t, CTLPROTO_M_QUARANTINED_TOTAL,
			    atomic_load(&fs->quarantined));
	ctlproto_metric_put(t, CTLPROTO_M_STORE_APPENDS, ss.appends);
	ctlproto_metric_put(t, CTLPROTO_M_STORE_APPEND_BYTES, ss.append_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_STORE_READS, ss.reads);
	ctlproto_metric_put(t, CTLPROTO_M_STORE_READ_BYTES, ss.read_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_STORE_FREES, ss.frees);
	ctlproto_metric_put(t, CTLPROTO_M_STORE_FILES_REMOVED,
			    ss.files_removed);
	ctlproto_metric_put(t, CTLPROTO_M_READ_SHORT_RECORDS, ss.short_records);
	ctlproto_metric_put(t, CTLPROTO_M_READ_CHECKSUM_ERRORS, ss.crc_errors);
	ctlproto_metric_put(t, CTLPROTO_M_IO_ERRORS, ss.io_errors);
	ctlproto_metric_put(t, CTLPROTO_M_DISK_ENOSPC, ss.enospc);
	ctlproto_metric_put(t, CTLPROTO_M_EVICTED,
			    atomic_load(&fs->cap->evicted));
	ctlproto_metric_put(t, CTLPROTO_M_CAPACITY_ENOSPC,
			    atomic_load(&fs->cap->enospc));
	ctlproto_metric_put(t, CTLPROTO_M_TMP_REMOVED,
			    atomic_load(&fs->tmp_removed));
	ctlproto_metric_put(t, CTLPROTO_M_CAPACITY_BYTES, fs->cfg.capacity);
	ctlproto_metric_put(t, CTLPROTO_M_USED_BYTES, fs_used(fs));
	ctlproto_metric_put(t, CTLPROTO_M_DATA_FILES,
			    atomic_load(&fs->cap->ndatafiles));
	ctlproto_metric_put(t, CTLPROTO_M_DIRTY_BYTES, dirty);
	ctlproto_metric_put(t, CTLPROTO_M_DIRTY_WAITS,
			    atomic_load(&fs->dirty_waits));
	ctlproto_metric_put(t, CTLPROTO_M_DIRTY_WAIT_MS,
			    atomic_load(&fs->dirty_wait_ns) / 1000000);
	ctlproto_metric_put(t, CTLPROTO_M_DIRTY_REFUSED,
			    atomic_load(&fs->dirty_refused));
	ctlproto_metric_put(t, CTLPROTO_M_WB_QUEUED_FILES, ws.queued_files);
	ctlproto_metric_put(t, CTLPROTO_M_WB_QUEUED_BYTES, ws.queued_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_WB_QUEUED_PEAK_BYTES, ws.peak_bytes);
	ctlproto_metric_put(t, CTLPROTO_M_WB_APPENDS, ws.appends);
	ctlproto_metric_put(t, CTLPROTO_M_WB_WRITES, ws.writes);
	ctlproto_metric_put(t, CTLPROTO_M_WB_COMMITS, ws.commits);
	ctlproto_metric_put(t, CTLPROTO_M_WB_CANCELLED, ws.cancelled);
	ctlproto_metric_put(t, CTLPROTO_M_WB_FAILED, ws.failed);
	idx_get_txn_stats(fs->idx, &xs);
	ctlproto_metric_put(t, CTLPROTO_M_INDEX_COMMITS, xs.commits);
	ctlproto_metric_put(t, CTLPROTO_M_INDEX_BATCH, xs.open_changes);
	ctlproto_metric_put(t, CTLPROTO_M_INDEX_LOST, xs.lost_changes);
	pthread_mutex_lock(&fs->nodes_lock);
	nnodes = fs->nnodes;
	pthread_mutex_unlock(&fs->nodes_lock);
	ctlproto_metric_put(t, CTLPROTO_M_NODES, nnodes);
	ctlproto_metric_put(t, CTLPROTO_M_EXTENT_MADE,
			    atomic_load(&fs->ext_made));
	ctlproto_metric_put(t, CTLPROTO_M_EXTENT_WRITE_BYTES,
			    atomic_load(&fs->ext_write_bytes));
	ctlproto_metric_put(t, CTLPROTO_M_EXTENT_READ_BYTES,
			    atomic_load(&fs->ext_read_bytes));
	ctlproto_metric_put(t, CTLPROTO_M_PASSTHROUGH_OPENS,
			    atomic_load(&fs->pt_opens));
	ctlproto_metric_put(t, CTLPROTO_M_GETXATTRS,
			    atomic_load(&fs->getxattrs));
	ctlproto_metric_put(t, CTLPROTO_M_FUSE_REQUESTS,
			    atomic_load(&fs->fuse_requests));
	ctlproto_metric_put(t, CTLPROTO_M_WRITE_SWAPPED_BYTES,
			    atomic_load(&fs->write_swapped));
	ctlproto_metric_put(t, CTLPROTO_M_WRITE_COPIED_BYTES,
			    atomic_load(&fs->write_copied));
	fs_ctl_ra_stats(fs, t);
	fs_ctl_share_stats(fs, t);
}

static void fs_ctl_status(struct fs *fs, struct tbuf *t)
{
	uint64_t ninodes = 0, nbytes = 0, dirty;
	struct share_stats ss;
	struct timespec now;
	struct wb_stats ws;
	struct vc_stats vs;

	wb_get_stats(fs, &ws);
	clock_gettime(CLOCK_REALTIME, &now);
	vc_get_stats(fs->vc, &vs);
	idx_statfs(fs->idx, &ninodes, &nbytes);
	pthread_mutex_lock(&fs->dirty_lock);
	dirty = fs->dirty_bytes;
	pthread_mutex_unlock(&fs->dirty_lock);
	tbuf_printf(t, "{\"version\": \"%s\", \"datadir\": ", KVFS_VERSION);
	tbuf_json_str(t, fs->cfg.datadir);
	tbuf_printf(t, ", \"mountpoint\": ");
	tbuf_json_str(t, fs->cfg.mountpoint);
	tbuf_printf(t,
		    ", \"pid\": %ld, \"uptime_seconds\": %lld, "
		    "\"inodes\": %llu, \"bytes\": %llu, "
		    "\"dirty_bytes\": %llu, \"dirty_limit\": %llu, "
		    "\"wb_queued_files\": %llu, \"wb_queued_bytes\": %llu, "
		    "\"wb_queued_peak_bytes\": %llu, "
		    "\"verdicts\": %zu, \"quarantined\": %zu, "
		    "\"capacity\": %llu, \"used\": %llu, "
		    "\"data_files\": %llu, ",
		    (long)getpid(),
		    (long long)(now.tv_sec - fs->start_time.tv_sec),
		    (unsigned long long)ninodes, (unsigned long long)nbytes,
		    (unsigned long long)dirty,
		    (unsigned long long)fs->cfg.dirty_limit,
		    (unsigned long long)ws.queued_files,
		    (unsigned long long)ws.queued_bytes,
		    (unsigned long long)ws.peak_bytes, vs.nverdicts,
		    vs.nquarantined, (unsigned long long)fs->cfg.capacity,
		    (unsigned long long)fs_used(fs),
		    (unsigned long long)atomic_load(&fs->cap->ndatafiles));
	share_get_stats(fs, &ss);
	tbuf_printf(t, "\"rados_pool\": ");
	if (fs->cfg.rados_pool)
		tbuf_json_str(t, fs->cfg.rados_pool);
	else
		tbuf_printf(t, "null");
	tbuf_printf(t,
		    ", \"rados_reachable\": %d, \"rados_sweeper\": %d, "
		    "\"rados_puts_queued\": %llu, \"rados_remote_hits\": "
		    "%llu, \"rados_pulls\": %llu, \"rados_errors\": %llu, "
		    "\"rados_usage_bytes\": %llu, \"rados_capacity\": %llu}\n",
		    ss.reachable, ss.sweeper, (unsigned long long)ss.queued,
		    (unsigned long long)ss.remote_hits,
		    (unsigned long long)ss.pulls, (unsigned long long)ss.errors,
		    (unsigned long long)ss.usage_bytes,
		    (unsigned long long)ss.capacity);
}

void fs_ctl_open(struct fs *fs, fuse_req_t req, uint64_t ino,
		 struct fuse_file_info *fi)
{
	struct tbuf *t;

	if (ino == FS_CTL_INO + FS_CTL_DIR) {
		fi->fh = 0;
		fuse_reply_open(req, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	t = malloc(sizeof(*t));
	if (!t) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	tbuf_init(t);
	if (ino == FS_CTL_INO + FS_CTL_STATS)
		fs_ctl_stats(fs, t);
	else if (ino == FS_CTL_INO + FS_CTL_STATUS)
		fs_ctl_status(fs, t);
	else
		tbuf_printf(t, "kvfs %s\n", KVFS_VERSION);
	if (t->oom) {
		tbuf_release(t);
		free(t);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)t;
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi) != 0) {
		tbuf_release(t);
		free(t);
	}
}

void fs_ctl_read(fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct tbuf *t = (struct tbuf *)(uintptr_t)fi->fh;
	char *copy;

	if (!t || (size_t)off >= t->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > t->len - (size_t)off)
		size = t->len - (size_t)off;
	/*
	 * Reply from a copy: once the reply is out, the reader may close and
	 * RELEASE on another thread frees t before fuse_reply_buf returns.
	 */
	copy = malloc(size);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, t->buf + off, size);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

void fs_ctl_release(fuse_req_t req, struct fuse_file_info *fi)
{
	struct tbuf *t = (struct tbuf *)(uintptr_t)fi->fh;

	if (t) {
		tbuf_release(t);
		free(t);
	}
	fuse_reply_err(req, 0);
}

void fs_ctl_readdir(struct fs *fs, fuse_req_t req, size_t size, off_t off,
		    int plus)
{
	char *buf = malloc(size);
	size_t len = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t i = off; i < FS_CTL_N + 1; i++) {
		const char *name = i == 0   ? "."
				   : i == 1 ? ".."
					    : fs_ctl_names[i - 1];
		uint64_t ino = i == 0	? FS_CTL_INO
			       : i == 1 ? KV_ROOT_INO
					: FS_CTL_INO + (uint64_t)i - 1;
		/* ino 0 in a readdirplus entry: a plain entry, no lookup. */
		struct fuse_entry_param e = {0};
		size_t need;

		fs_ctl_attr(fs, ino, &e.attr);
		if (plus)
			need = fuse_add_direntry_plus(
				req, buf + len, size - len, name, &e, i + 1);
		else
			need = fuse_add_direntry(req, buf + len, size - len,
						 name, &e.attr, i + 1);
		if (need > size - len)
			break;
		len += need;
	}
	fuse_reply_buf(req, buf, len);
	free(buf);
}
