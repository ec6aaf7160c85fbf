/* SPDX-License-Identifier: MIT */
/*
 * The block store: appending records to a lane's active data file, freeing
 * records (punching holes, removing empty files), recovery horizons and
 * the crash-recovery walk of one data file; see store.h. Not here: reading
 * and checking payloads (store_read.c), the record format (record.c),
 * data-file names and listing (datadir.c), the I/O calls themselves
 * (store_io.c).
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "crc32c.h"
#include "datadir.h"
#include "log.h"
#include "store_int.h"

/* Header bytes read at once when walking a data file (most headers fit). */
#define STORE_HDR_READ (16u * 1024u)
#define STORE_DEFAULT_LANES 4u

/* The calling thread's lane (assigned round-robin on first append). */
static _Thread_local unsigned store_my_lane = UINT_MAX;

/* Opens data file id; O_DIRECT unless the filesystem refuses it (tmpfs). */
static int store_file_open(struct store *st, uint32_t id, int create)
{
	int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
	char name[DATADIR_NAME_MAX];
	int fd;

	datadir_file_name(name, sizeof(name), id);
	fd = openat(st->data_fd, name, flags | O_DIRECT, 0600);
	if (fd < 0 && errno == EINVAL)
		fd = openat(st->data_fd, name, flags, 0600);
	return fd < 0 ? -errno : fd;
}

/* Makes files[id] addressable. Call with files_lock held. */
static int store_files_reserve(struct store *st, uint32_t id)
{
	struct store_file **nf;
	uint32_t ncap;

	if (id < st->nfiles)
		return 0;
	ncap = st->nfiles ? st->nfiles : 64;
	while (ncap <= id)
		ncap *= 2;
	nf = realloc(st->files, ncap * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	memset(nf + st->nfiles, 0, (ncap - st->nfiles) * sizeof(*nf));
	st->files = nf;
	st->nfiles = ncap;
	return 0;
}

/*
 * The descriptor of data file id, opened on first use. -ENOENT when the file
 * does not exist, also when it was removed behind our back while we had it
 * open (an operator or a tool deleted it): its records are gone for good,
 * even though the open descriptor could still read them for a while.
 */
int store_file_fd(struct store *st, uint32_t id)
{
	struct store_file *f;
	struct stat sb;
	int rc, fd;

	pthread_mutex_lock(&st->files_lock);
	if (id < st->nfiles && st->files[id]) {
		f = st->files[id];
		if (fstat(f->fd, &sb) == 0 && sb.st_nlink == 0) {
			/*
			 * Its records will not survive a restart: they are
			 * gone now. An active file stays in the table until
			 * its lane rotates away from it (store_reserve).
			 */
			if (f->active || f->npending > 0) {
				pthread_mutex_unlock(&st->files_lock);
				return -ENOENT;
			}
			st->files[id] = NULL;
			pthread_mutex_unlock(&st->files_lock);
			log_warn("data file %06u.kvd was removed by someone "
				 "else; its records are lost",
				 id);
			close(f->fd);
			free(f);
			return -ENOENT;
		}
		fd = f->fd;
		pthread_mutex_unlock(&st->files_lock);
		return fd;
	}
	rc = store_files_reserve(st, id);
	if (rc < 0)
		goto out_unlock;
	rc = store_file_open(st, id, 0);
	if (rc < 0)
		goto out_unlock;
	fd = rc;
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		rc = -ENOMEM;
		goto out_unlock;
	}
	f->id = id;
	f->fd = fd;
	st->files[id] = f;
	rc = fd;
out_unlock:
	pthread_mutex_unlock(&st->files_lock);
	return rc;
}

/* Starts a new data file for lane l. Call with l->lock held. */
static int store_lane_rotate(struct store *st, struct store_lane *l)
{
	struct store_file *f;
	uint32_t id;
	int rc, fd;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&st->files_lock);
	id = st->next_id++;
	rc = store_files_reserve(st, id);
	if (rc < 0)
		goto out_free;
	rc = store_file_open(st, id, 1);
	if (rc < 0) {
		log_err("cannot create data file %06u.kvd: %s", id,
			strerror(-rc));
		goto out_free;
	}
	fd = rc;
	f->id = id;
	f->fd = fd;
	f->active = 1;
	st->files[id] = f;
	if (l->file)
		l->file->active = 0;
	pthread_mutex_unlock(&st->files_lock);
	l->file = f;
	l->tail = 0;
	return 0;
out_free:
	pthread_mutex_unlock(&st->files_lock);
	free(f);
	return rc;
}

/*
 * The ids of the data files, ascending, without the two highest ids a
 * uint32_t can hold (never issued: next_id must stay above every id).
 */
static int store_list(struct store *st, uint32_t **ids, size_t *n)
{
	int rc = datadir_list_at(st->data_fd, ids, n);

	while (rc == 0 && *n > 0 && (*ids)[*n - 1] >= UINT32_MAX - 1)
		(*n)--;
	return rc;
}

/* New data files are numbered after the highest existing one. */
static int store_scan_ids(struct store *st)
{
	uint32_t *ids;
	size_t n;
	int rc = store_list(st, &ids, &n);

	if (rc == 0 && n > 0 && ids[n - 1] >= st->next_id)
		st->next_id = ids[n - 1] + 1;
	free(ids);
	return rc;
}

int store_open(struct store **out, const char *datadir,
	       const struct store_config *cfg, const struct store_io_ops *ops)
{
	struct store *st;
	char path[PATH_MAX];
	int rc;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->ops = ops ? *ops : store_io_uring;
	st->file_max = cfg && cfg->file_max ? cfg->file_max : STORE_FILE_MAX;
	st->durable = cfg ? cfg->durable : 0;
	st->reserve = cfg ? cfg->reserve : 0;
	st->nlanes = cfg && cfg->nlanes ? cfg->nlanes : STORE_DEFAULT_LANES;
	st->batch_names = cfg && cfg->batch_names && !cfg->durable;
	st->next_id = 1;
	pthread_mutex_init(&st->files_lock, NULL);
	pthread_mutex_init(&st->names_lock, NULL);
	/*
	 * Sequence numbers only need to grow across restarts: start from the
	 * wall clock in ns, which is past any sequence an earlier run issued
	 * as long as that run wrote fewer records than nanoseconds elapsed.
	 */
	atomic_init(&st->seq, clock_realtime_ns());
	st->data_fd = -1;
	rc = datadir_path(path, sizeof(path), datadir, DATADIR_DATA);
	if (rc < 0) {
		log_err("%s/%s: %s", datadir, DATADIR_DATA, strerror(-rc));
		goto out_free;
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		log_err("cannot create %s: %s", path, strerror(-rc));
		goto out_free;
	}
	st->data_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (st->data_fd < 0) {
		rc = -errno;
		log_err("cannot open %s: %s", path, strerror(-rc));
		goto out_free;
	}
	if (st->reserve == 0) {
		struct statvfs sv;

		st->reserve = 64ull << 20;
		if (fstatvfs(st->data_fd, &sv) == 0 &&
		    (uint64_t)sv.f_blocks * sv.f_frsize / 100 < st->reserve)
			st->reserve = (uint64_t)sv.f_blocks * sv.f_frsize / 100;
	}
	rc = store_scan_ids(st);
	if (rc < 0) {
		log_err("cannot list %s: %s", path, strerror(-rc));
		goto out_free;
	}
	st->lanes = calloc(st->nlanes, sizeof(*st->lanes));
	if (!st->lanes) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (unsigned i = 0; i < st->nlanes; i++)
		pthread_mutex_init(&st->lanes[i].lock, NULL);
	*out = st;
	return 0;
out_free:
	store_close(st);
	return rc;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	if (st->lanes && store_flush_names(st) < 0)
		log_warn("name records of the last renames are lost: a rebuilt "
			 "index lists those files under their old names");
	for (unsigned i = 0; i < st->nnames; i++)
		free(st->names[i].iov_base);
	for (uint32_t i = 0; i < st->nfiles; i++) {
		if (st->files[i]) {
			close(st->files[i]->fd);
			free(st->files[i]);
		}
	}
	free(st->files);
	if (st->lanes) {
		for (unsigned i = 0; i < st->nlanes; i++)
			pthread_mutex_destroy(&st->lanes[i].lock);
		free(st->lanes);
	}
	if (st->data_fd >= 0)
		close(st->data_fd);
	pthread_mutex_destroy(&st->files_lock);
	pthread_mutex_destroy(&st->names_lock);
	free(st);
}

void store_iov_advance(struct iovec **iov, int *cnt, size_t n)
{
	while (*cnt > 0 && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		(*cnt)--;
	}
	if (*cnt > 0) {
		(*iov)->iov_base = (char *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

int store_xfer_all(struct store *st, int fd, struct iovec *iov, int iovcnt,
		   uint64_t off, int write)
{
	uint64_t fsize;
	int retries = 0, rc;

	while (iovcnt > 0) {
		ssize_t n = write ? st->ops.pwritev(st->ops.ctx, fd, iov,
						    iovcnt, off)
				  : st->ops.preadv(st->ops.ctx, fd, iov, iovcnt,
						   off);

		if (n == -EINTR || n == -EAGAIN) {
			if (++retries > STORE_RETRIES)
				return (int)n;
			continue;
		}
		if (n < 0)
			return (int)n;
		if (n == 0 && write)
			return -EIO;
		if (n == 0) {
			/* EOF inside the record: prove it with the size. */
			rc = st->ops.size(st->ops.ctx, fd, &fsize);
			if (rc < 0)
				return rc;
			return fsize <= off ? -ENODATA : -EIO;
		}
		off += (uint64_t)n;
		store_iov_advance(&iov, &iovcnt, (size_t)n);
	}
	return 0;
}

/* Whether someone removed the data file f from the data directory. */
static int store_file_gone(const struct store_file *f)
{
	struct stat sb;

	if (fstat(f->fd, &sb) < 0 || sb.st_nlink > 0)
		return 0;
	log_warn("active data file %06u.kvd was removed by someone else; "
		 "starting a new one",
		 f->id);
	return 1;
}

static struct store_lane *store_lane_of_thread(struct store *st)
{
	if (store_my_lane == UINT_MAX)
		store_my_lane = atomic_fetch_add(&st->lane_next, 1);
	return &st->lanes[store_my_lane % st->nlanes];
}

int store_check_space(struct store *st, uint64_t span)
{
	struct statvfs sv;

	if (fstatvfs(st->data_fd, &sv) < 0)
		return 0; /* let the write itself tell */
	if ((uint64_t)sv.f_bavail * sv.f_frsize >= span + st->reserve)
		return 0;
	atomic_fetch_add(&st->stats.enospc, 1);
	return -ENOSPC;
}

/*
 * Reserves span bytes in the calling thread's active data file and pins the
 * file with pins pending appends (one per record store_append_done ends).
 */
static int store_reserve(struct store *st, uint64_t span, unsigned pins,
			 struct store_file **file, uint64_t *off)
{
	struct store_lane *l = store_lane_of_thread(st);
	int rc;

	rc = store_check_space(st, span);
	if (rc < 0)
		return rc;

	pthread_mutex_lock(&l->lock);
	if (!l->file || (l->tail > 0 && l->tail + span > st->file_max) ||
	    store_file_gone(l->file))
		rc = store_lane_rotate(st, l);
	if (rc == 0) {
		*file = l->file;
		*off = l->tail;
		l->tail += span;
		pthread_mutex_lock(&st->files_lock);
		l->file->npending += pins;
		l->file->end = l->tail;
		pthread_mutex_unlock(&st->files_lock);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

/* Gives back a failed append's space: truncate when it is the tail. */
static void store_unreserve(struct store *st, struct store_file *f,
			    uint64_t off, uint64_t span, unsigned pins)
{
	struct store_lane *l = store_lane_of_thread(st);
	int at_tail;

	pthread_mutex_lock(&l->lock);
	at_tail = l->file == f && l->tail == off + span;
	if (at_tail) {
		l->tail = off;
		if (ftruncate(f->fd, (off_t)off) < 0) {
			at_tail = 0;
		} else {
			pthread_mutex_lock(&st->files_lock);
			f->end = off;
			pthread_mutex_unlock(&st->files_lock);
		}
	}
	pthread_mutex_unlock(&l->lock);
	if (!at_tail)
		st->ops.punch(st->ops.ctx, f->fd, off, span);
	while (pins--)
		store_append_done(st, f->id);
}

/* Takes the name records kept back; the caller writes and frees them. */
static unsigned store_take_names(struct store *st, struct iovec *out,
				 uint64_t *bytes)
{
	unsigned n;

	*bytes = 0;
	if (!st->batch_names)
		return 0;
	pthread_mutex_lock(&st->names_lock);
	n = st->nnames;
	memcpy(out, st->names, n * sizeof(*out));
	*bytes = st->names_bytes;
	st->nnames = 0;
	st->names_bytes = 0;
	pthread_mutex_unlock(&st->names_lock);
	return n;
}

uint64_t store_names_bytes(struct store *st)
{
	uint64_t n;

	pthread_mutex_lock(&st->names_lock);
	n = st->names_bytes;
	pthread_mutex_unlock(&st->names_lock);
	return n;
}

/* One record of an append: its header's fields, then its payload. */
struct store_out {
	uint32_t type;
	uint64_t ino;
	const char *path;
	size_t path_len;
	const struct iovec *data;
	int ndata;
	uint64_t len;
	const uint32_t *crcs;
	struct kv_extent *ext; /* where it landed */
};

/* Writes niov iovecs at off in writes of at most STORE_IOV_MAX. */
static int store_write_iovs(struct store *st, int fd, struct iovec *iov,
			    int niov, uint64_t off)
{
	int rc = 0;

	/* store_xfer_all consumes the iovecs it was given. */
	for (int done = 0; rc == 0 && done < niov;) {
		int cnt = niov - done;
		uint64_t bytes = 0;

		if (cnt > STORE_IOV_MAX)
			cnt = STORE_IOV_MAX;
		for (int i = 0; i < cnt; i++)
			bytes += iov[done + i].iov_len;
		rc = store_xfer_all(st, fd, iov + done, cnt, off, 1);
		done += cnt;
		off += bytes;
	}
	return rc;
}

/*
 * Appends npre whole records (pre: name records kept back, pre_bytes in
 * all, freed here) and then the n records of out, in one write; each
 * record's extent goes to its out->ext (meaningless on an error), and
 * with n 0 (only the pre records) the reservation's to *pre_ext. Each
 * record pins the data file until its store_append_done(), as a lone pre
 * write does once.
 */
static int store_append_rec(struct store *st, const struct store_out *out,
			    size_t n, struct iovec *pre, unsigned npre,
			    uint64_t pre_bytes, struct kv_extent *pre_ext)
{
	unsigned pins = n ? (unsigned)n : 1;
	int niov = (int)npre;
	struct iovec *iov = NULL;
	void **hdrs = NULL;
	struct store_file *f = NULL;
	uint64_t off = 0, span = pre_bytes;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (out[i].path_len > (out[i].type == STORE_REC_DATA
					       ? STORE_PATH_MAX
					       : STORE_META_MAX)) {
			rc = -ENAMETOOLONG;
			goto out_free;
		}
		niov += 1 + out[i].ndata;
	}
	iov = calloc((size_t)niov + 1, sizeof(*iov));
	hdrs = calloc(n + 1, sizeof(*hdrs));
	if (!iov || !hdrs) {
		rc = -ENOMEM;
		goto out_free;
	}
	memcpy(iov, pre, npre * sizeof(*iov));
	niov = (int)npre;
	/* Each extent's offset from the write's start, until it is known. */
	for (size_t i = 0; i < n; i++) {
		const struct store_out *o = &out[i];
		uint32_t hdr_len = store_hdr_len(o->len, o->path_len);

		if (posix_memalign(&hdrs[i], KV_ALIGN, hdr_len) != 0) {
			rc = -ENOMEM;
			goto out_free;
		}
		store_hdr_encode(hdrs[i], o->type,
				 atomic_fetch_add(&st->seq, 1), o->ino, o->len,
				 o->crcs, o->path, o->path_len);
		iov[niov++] =
			(struct iovec){.iov_base = hdrs[i], .iov_len = hdr_len};
		memcpy(iov + niov, o->data, (size_t)o->ndata * sizeof(*iov));
		niov += o->ndata;
		*o->ext = (struct kv_extent){
			.hdr_len = hdr_len, .off = span, .len = o->len};
		span += hdr_len + kv_align_up(o->len);
	}
	rc = store_reserve(st, span, pins, &f, &off);
	if (rc < 0)
		goto out_free;
	rc = store_write_iovs(st, f->fd, iov, niov, off);
	if (rc == 0 && st->durable)
		rc = st->ops.sync(st->ops.ctx, f->fd);
	if (rc < 0) {
		if (rc != -ENOSPC)
			atomic_fetch_add(&st->stats.io_errors, 1);
		log_warn("append to %06u.kvd at %llu failed: %s", f->id,
			 (unsigned long long)off, strerror(-rc));
		store_unreserve(st, f, off, span, pins);
		goto out_free;
	}
	if (n == 0)
		*pre_ext = (struct kv_extent){.file_id = f->id, .off = off};
	for (size_t i = 0; i < n; i++) {
		out[i].ext->file_id = f->id;
		out[i].ext->off += off;
	}
	atomic_fetch_add(&st->stats.appends, pins);
	atomic_fetch_add(&st->stats.append_bytes, span);
out_free:
	if (rc < 0 && npre)
		log_warn("%u name records lost (%s): a rebuilt index lists "
			 "those files under their old names",
			 npre, strerror(-rc));
	for (unsigned i = 0; i < npre; i++)
		free(pre[i].iov_base);
	for (size_t i = 0; hdrs && i < n; i++)
		free(hdrs[i]);
	free(hdrs);
	free(iov);
	return rc;
}

int store_append_batch(struct store *st, struct store_rec *recs, size_t n)
{
	struct iovec pre[STORE_NAMES_MAX];
	struct store_out *out = calloc(n ? n : 1, sizeof(*out));
	uint64_t pre_bytes;
	unsigned npre;
	int rc;

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct store_rec *r = &recs[i];
		size_t path_len = strlen(r->path);

		if (path_len > STORE_PATH_MAX) {
			/* Only a rebuild reads the path; the bytes count. */
			log_warn("inode %llu: its path (%zu bytes) is longer "
				 "than a record keeps (%u): saved without it; "
				 "a rebuilt index restores it under "
				 "/lost+found",
				 (unsigned long long)r->ino, path_len,
				 STORE_PATH_MAX);
			path_len = 0;
		}
		if (r->len)
			store_chunk_crcs_iov(r->iov, r->iovcnt, r->len, r->crcs,
					     r->known);
		out[i] = (struct store_out){.type = STORE_REC_DATA,
					    .ino = r->ino,
					    .path = r->path,
					    .path_len = path_len,
					    .data = r->iov,
					    .ndata = r->len ? r->iovcnt : 0,
					    .len = r->len,
					    .crcs = r->crcs,
					    .ext = &r->ext};
	}
	npre = store_take_names(st, pre, &pre_bytes);
	rc = store_append_rec(st, out, n, pre, npre, pre_bytes, NULL);
	free(out);
	return rc;
}

int store_append_iov(struct store *st, uint64_t ino, const char *path,
		     const struct iovec *iov, int iovcnt, uint64_t len,
		     uint32_t *crcs, uint32_t known, struct kv_extent *ext)
{
	struct store_rec r = {.ino = ino,
			      .path = path,
			      .iov = iov,
			      .iovcnt = iovcnt,
			      .len = len,
			      .crcs = crcs,
			      .known = known};
	int rc = store_append_batch(st, &r, 1);

	if (rc == 0)
		*ext = r.ext;
	return rc;
}

int store_append(struct store *st, uint64_t ino, const char *path,
		 const void *buf, uint64_t len, uint32_t *crcs,
		 struct kv_extent *ext)
{
	struct iovec iov = {.iov_base = (void *)buf,
			    .iov_len = kv_align_up(len)};

	return store_append_iov(st, ino, path, &iov, 1, len, crcs, 0, ext);
}

int store_flush_names(struct store *st)
{
	struct iovec pre[STORE_NAMES_MAX];
	struct kv_extent ext;
	uint64_t bytes;
	unsigned n = store_take_names(st, pre, &bytes);
	int rc;

	if (n == 0)
		return 0;
	rc = store_append_rec(st, NULL, 0, pre, n, bytes, &ext);
	if (rc == 0)
		store_append_done(st, ext.file_id);
	return rc;
}

int store_append_name(struct store *st, uint64_t ino, const char *path)
{
	size_t len = strlen(path);

	/* One path: no longer than a data record's. */
	if (len > STORE_PATH_MAX)
		return -ENAMETOOLONG;
	return store_append_meta(st, STORE_REC_NAME, ino, path, len);
}

int store_append_meta(struct store *st, uint32_t type, uint64_t ino,
		      const char *path, size_t path_len)
{
	struct kv_extent ext;
	uint32_t hdr_len;
	void *hdr;
	int full, rc;

	if (type != STORE_REC_NAME && type != STORE_REC_NODE &&
	    type != STORE_REC_MOVE)
		return -EINVAL;
	if (path_len > STORE_META_MAX)
		return -ENAMETOOLONG;
	if (!st->batch_names) {
		struct store_out o = {.type = type,
				      .ino = ino,
				      .path = path,
				      .path_len = path_len,
				      .ext = &ext};

		rc = store_append_rec(st, &o, 1, NULL, 0, 0, NULL);
		if (rc == 0)
			store_append_done(st, ext.file_id);
		return rc;
	}
	hdr_len = store_hdr_len(0, path_len);
	if (posix_memalign(&hdr, KV_ALIGN, hdr_len) != 0)
		return -ENOMEM;
	/* The sequence number says when: the record may go out later. */
	store_hdr_encode(hdr, type, atomic_fetch_add(&st->seq, 1), ino, 0, NULL,
			 path, path_len);
	rc = 0;
	/* When as many are kept back as it keeps: those go out first. */
	for (int tries = 0; tries < 2; tries++) {
		pthread_mutex_lock(&st->names_lock);
		full = st->nnames == STORE_NAMES_MAX;
		if (!full) {
			st->names[st->nnames++] = (struct iovec){
				.iov_base = hdr, .iov_len = hdr_len};
			st->names_bytes += hdr_len;
		}
		pthread_mutex_unlock(&st->names_lock);
		if (!full)
			return rc;
		rc = store_flush_names(st);
	}
	free(hdr);
	return rc < 0 ? rc : -EAGAIN;
}

void store_append_done(struct store *st, uint32_t file_id)
{
	struct store_file *f;

	pthread_mutex_lock(&st->files_lock);
	f = file_id < st->nfiles ? st->files[file_id] : NULL;
	if (f && f->npending > 0 && --f->npending == 0)
		f->quiet = f->end;
	pthread_mutex_unlock(&st->files_lock);
}

int store_horizons(struct store *st, uint32_t *ids, uint64_t *offs, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&st->files_lock);
	for (uint32_t id = 0; id < st->nfiles && n < max; id++) {
		struct store_file *f = st->files[id];

		if (f && f->quiet > 0) {
			ids[n] = id;
			offs[n++] = f->quiet;
		}
	}
	pthread_mutex_unlock(&st->files_lock);
	return (int)n;
}

int store_free_run(struct store *st, const struct kv_extent *exts, size_t n,
		   uint64_t file_refs)
{
	uint32_t id = n ? exts[0].file_id : 0;
	int fd, rc;

	if (id == 0)
		return 0;
	fd = store_file_fd(st, id);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	for (size_t i = 0; i < n;) {
		uint64_t off = exts[i].off,
			 end = off + kv_extent_span(&exts[i]);

		/* Records that follow each other: one hole over them all. */
		for (i++; i < n && exts[i].off == end; i++)
			end += kv_extent_span(&exts[i]);
		rc = st->ops.punch(st->ops.ctx, fd, off, end - off);
		if (rc < 0 && rc != -EOPNOTSUPP)
			log_warn("cannot punch %06u.kvd at %llu: %s", id,
				 (unsigned long long)off, strerror(-rc));
	}
	atomic_fetch_add(&st->stats.frees, n);
	if (file_refs == 0)
		store_drop_file(st, id);
	return 0;
}

int store_free(struct store *st, const struct kv_extent *ext,
	       uint64_t file_refs)
{
	return store_free_run(st, ext, 1, file_refs);
}

void store_drop_file(struct store *st, uint32_t file_id)
{
	char name[DATADIR_NAME_MAX];
	struct store_file *f;

	pthread_mutex_lock(&st->files_lock);
	f = file_id < st->nfiles ? st->files[file_id] : NULL;
	if (f && !f->active && f->npending == 0) {
		st->files[file_id] = NULL;
		datadir_file_name(name, sizeof(name), f->id);
		if (unlinkat(st->data_fd, name, 0) == 0)
			atomic_fetch_add(&st->stats.files_removed, 1);
	} else {
		f = NULL;
	}
	pthread_mutex_unlock(&st->files_lock);
	if (f) {
		close(f->fd);
		free(f);
	}
}

const struct store_io_ops *store_io(struct store *st)
{
	return &st->ops;
}

uint64_t store_take_seq(struct store *st)
{
	return atomic_fetch_add(&st->seq, 1);
}

int store_usage(struct store *st, uint64_t *bytes, uint64_t *nfiles)
{
	struct datadir_usage u;
	int rc = datadir_usage_at(st->data_fd, &u);

	*bytes = u.physical;
	*nfiles = u.nfiles;
	return rc;
}

int store_newest(struct store *st, uint32_t *ids, size_t n)
{
	uint32_t *all;
	size_t have, i;
	int rc = store_list(st, &all, &have);

	if (rc < 0)
		return rc;
	/* Largest first, at most n. */
	for (i = 0; i < n && i < have; i++)
		ids[i] = all[have - 1 - i];
	free(all);
	return (int)i;
}

int store_file_size(struct store *st, uint32_t id, uint64_t *size)
{
	int fd = store_file_fd(st, id);

	if (fd < 0)
		return fd;
	return st->ops.size(st->ops.ctx, fd, size);
}

/* Punches [off, off + len) of a file being recovered (best effort). */
static void store_recover_punch(struct store *st, int fd, uint64_t off,
				uint64_t len, uint64_t *freed)
{
	st->ops.punch(st->ops.ctx, fd, off, len);
	*freed += len;
}

int store_recover_file(struct store *st, uint32_t id, uint64_t from,
		       store_ref_fn referenced, store_next_fn next, void *arg,
		       struct store_recovery *out)
{
	struct record_iter_opts opts = {.ops = &st->ops,
					.window = STORE_HDR_READ};
	struct record_iter it;
	struct record r;
	uint64_t nxt;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	fd = store_file_fd(st, id);
	if (fd < 0)
		return fd;
	rc = record_iter_open(&it, fd, from, &opts);
	if (rc < 0)
		return rc;
	for (;;) {
		rc = record_iter_next(&it, &r);
		if (rc < 0 || rc == RECORD_END)
			break;
		if (rc != RECORD_OK) {
			/*
			 * Not a whole record: a crash cut it, or it is
			 * garbage. When a committed record follows (another
			 * thread's append that finished), punch up to it;
			 * otherwise this is the torn tail.
			 */
			if (next(arg, id, r.off, &nxt) != 1 || nxt <= r.off ||
			    nxt > it.size)
				break;
			store_recover_punch(st, fd, r.off, nxt - r.off,
					    &out->freed_bytes);
			record_iter_seek(&it, nxt);
			continue;
		}
		if (r.hdr.type != STORE_REC_DATA)
			continue;
		out->records++;
		if (!referenced(arg, id, r.off)) {
			store_recover_punch(st, fd, r.off, r.span,
					    &out->freed_bytes);
			out->unreferenced++;
		}
	}
	if (rc == RECORD_END) {
		rc = 0;
	} else if (rc > 0) {
		/* Garbage or a cut record at the end: nobody points at it. */
		out->torn_tail = 1;
		out->freed_bytes += it.size - r.off;
		rc = ftruncate(fd, (off_t)r.off) < 0 ? -errno : 0;
	}
	record_iter_close(&it);
	return rc;
}

int store_sync(struct store *st)
{
	int rc = store_flush_names(st);

	for (unsigned i = 0; i < st->nlanes; i++) {
		struct store_lane *l = &st->lanes[i];
		int r = 0;

		pthread_mutex_lock(&l->lock);
		if (l->file)
			r = st->ops.sync(st->ops.ctx, l->file->fd);
		pthread_mutex_unlock(&l->lock);
		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}

void store_get_stats(struct store *st, struct store_stats *out)
{
	out->appends = atomic_load(&st->stats.appends);
	out->append_bytes = atomic_load(&st->stats.append_bytes);
	out->reads = atomic_load(&st->stats.reads);
	out->read_bytes = atomic_load(&st->stats.read_bytes);
	out->frees = atomic_load(&st->stats.frees);
	out->files_removed = atomic_load(&st->stats.files_removed);
	out->short_records = atomic_load(&st->stats.short_records);
	out->crc_errors = atomic_load(&st->stats.crc_errors);
	out->io_errors = atomic_load(&st->stats.io_errors);
	out->enospc = atomic_load(&st->stats.enospc);
}
