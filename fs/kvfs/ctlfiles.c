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
#include "notify.h"
#include "tbuf.h"

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

static void fs_ctl_metric(struct tbuf *t, const char *name, const char *type,
			  const char *help, uint64_t v)
{
	tbuf_printf(t, "# HELP kvfs_%s %s\n# TYPE kvfs_%s %s\nkvfs_%s %llu\n",
		    name, help, name, type, name, (unsigned long long)v);
}

static void fs_ctl_stats(struct fs *fs, struct tbuf *t)
{
	struct store_stats ss;
	struct vc_stats vs;
	uint64_t dirty;
	size_t nnodes;

	vc_get_stats(fs->vc, &vs);
	store_get_stats(fs->store, &ss);
	pthread_mutex_lock(&fs->dirty_lock);
	dirty = fs->dirty_bytes;
	pthread_mutex_unlock(&fs->dirty_lock);
	fs_ctl_metric(t, "lookup_probes_total", "counter",
		      "Index probes (batches) run by the lookup manager.",
		      vs.probes);
	fs_ctl_metric(t, "lookup_batched_keys_total", "counter",
		      "Names sent to the index in probe batches.",
		      vs.batched_keys);
	fs_ctl_metric(t, "lookup_coalesced_total", "counter",
		      "Lookups that joined a probe already queued or running.",
		      vs.coalesced);
	fs_ctl_metric(t, "lookup_hits_total", "counter",
		      "Lookups answered: the name exists.", vs.hits);
	fs_ctl_metric(t, "lookup_misses_total", "counter",
		      "Lookups answered: the name does not exist.", vs.misses);
	fs_ctl_metric(t, "lookup_cancelled_total", "counter",
		      "Parked lookups interrupted by their caller.",
		      vs.cancelled);
	fs_ctl_metric(t, "lookup_probe_errors_total", "counter",
		      "Probe batches the index failed.", vs.probe_errors);
	fs_ctl_metric(t, "marked_misses_total", "counter",
		      "Names turned into misses after a failed read.",
		      vs.marked_misses);
	fs_ctl_metric(t, "stale_results_total", "counter",
		      "Probe results discarded for an older generation.",
		      vs.stale_discarded);
	fs_ctl_metric(t, "kernel_invalidations_total", "counter",
		      "Kernel cache invalidations sent.",
		      notify_count(fs->notify));
	fs_ctl_metric(t, "verdicts", "gauge", "Verdicts held.", vs.nverdicts);
	fs_ctl_metric(t, "quarantined", "gauge",
		      "Names quarantined after a failed read.",
		      vs.nquarantined);
	fs_ctl_metric(t, "lookups_parked", "gauge",
		      "Lookups waiting for a probe.", vs.nparked);
	fs_ctl_metric(t, "dropped_total", "counter",
		      "Blocks dropped because their record was cut short.",
		      atomic_load(&fs->dropped));
	fs_ctl_metric(t, "quarantined_total", "counter",
		      "Blocks quarantined after a failed read (data kept).",
		      atomic_load(&fs->quarantined));
	fs_ctl_metric(t, "store_appends_total", "counter",
		      "Records appended to data files.", ss.appends);
	fs_ctl_metric(t, "store_append_bytes_total", "counter",
		      "Bytes appended to data files.", ss.append_bytes);
	fs_ctl_metric(t, "store_reads_total", "counter",
		      "Reads from data files.", ss.reads);
	fs_ctl_metric(t, "store_read_bytes_total", "counter",
		      "Bytes read from data files.", ss.read_bytes);
	fs_ctl_metric(t, "store_frees_total", "counter",
		      "Records freed (holes punched).", ss.frees);
	fs_ctl_metric(t, "store_files_removed_total", "counter",
		      "Data files removed once empty.", ss.files_removed);
	fs_ctl_metric(t, "read_short_records_total", "counter",
		      "Reads that found a record cut short.", ss.short_records);
	fs_ctl_metric(t, "read_checksum_errors_total", "counter",
		      "Reads that failed a CRC32C check.", ss.crc_errors);
	fs_ctl_metric(t, "io_errors_total", "counter", "Data-file I/O errors.",
		      ss.io_errors);
	fs_ctl_metric(t, "disk_enospc_total", "counter",
		      "Stores refused because the backing disk is full.",
		      ss.enospc);
	fs_ctl_metric(t, "evicted_total", "counter",
		      "Blocks evicted to stay under the capacity.",
		      atomic_load(&fs->cap->evicted));
	fs_ctl_metric(t, "capacity_enospc_total", "counter",
		      "Stores refused: capacity reached, nothing evictable.",
		      atomic_load(&fs->cap->enospc));
	fs_ctl_metric(t, "tmp_removed_total", "counter",
		      "Stale engine temporary files removed.",
		      atomic_load(&fs->tmp_removed));
	fs_ctl_metric(t, "capacity_bytes", "gauge", "Configured capacity.",
		      fs->cfg.capacity);
	fs_ctl_metric(t, "used_bytes", "gauge",
		      "Physical bytes used by data files and the index.",
		      fs_used(fs));
	fs_ctl_metric(t, "data_files", "gauge", "Data files.",
		      atomic_load(&fs->cap->ndatafiles));
	fs_ctl_metric(t, "dirty_bytes", "gauge",
		      "Memory held by unsaved writes.", dirty);
	pthread_mutex_lock(&fs->nodes_lock);
	nnodes = fs->nnodes;
	pthread_mutex_unlock(&fs->nodes_lock);
	fs_ctl_metric(t, "nodes", "gauge", "Inodes held in memory.", nnodes);
}

static void fs_ctl_status(struct fs *fs, struct tbuf *t)
{
	uint64_t ninodes = 0, nbytes = 0, dirty;
	struct timespec now;
	struct vc_stats vs;

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
		    "\"verdicts\": %zu, \"quarantined\": %zu, "
		    "\"capacity\": %llu, \"used\": %llu, "
		    "\"data_files\": %llu}\n",
		    (long)getpid(),
		    (long long)(now.tv_sec - fs->start_time.tv_sec),
		    (unsigned long long)ninodes, (unsigned long long)nbytes,
		    (unsigned long long)dirty,
		    (unsigned long long)fs->cfg.dirty_limit, vs.nverdicts,
		    vs.nquarantined, (unsigned long long)fs->cfg.capacity,
		    (unsigned long long)fs_used(fs),
		    (unsigned long long)atomic_load(&fs->cap->ndatafiles));
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
