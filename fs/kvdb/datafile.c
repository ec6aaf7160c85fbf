/* SPDX-License-Identifier: MIT */
/*
 * The data files of an unmounted data directory, as the offline engines
 * use them: open them all, find one by number, read and write them whole,
 * skip their holes, read a record header, and scan every record header.
 * See datafile.h.
 */
#include "datafile.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
#include "kvdb.h"
#include "kvtypes.h"
#include "record.h"
#include "store.h"

/* Bytes read at a time by the header scan. */
#define KVDB_SCAN_BUF (1u << 20)

int kvdb_grow(void **v, size_t *cap, size_t n, size_t sz)
{
	void *nv;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? 2 * *cap : 64;
	nv = realloc(*v, ncap * sz);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

/* One transfer attempt through io, or the plain system call. */
static ssize_t kvdb_xfer(const struct store_io_ops *io, int fd, void *rbuf,
			 const void *wbuf, size_t len, uint64_t off)
{
	struct iovec iov = {.iov_base = wbuf ? (void *)(uintptr_t)wbuf : rbuf,
			    .iov_len = len};
	ssize_t n;

	if (io)
		return wbuf ? io->pwritev(io->ctx, fd, &iov, 1, off)
			    : io->preadv(io->ctx, fd, &iov, 1, off);
	n = wbuf ? pwrite(fd, wbuf, len, (off_t)off)
		 : pread(fd, rbuf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

ssize_t kvdb_pio(const struct store_io_ops *io, int fd, void *rbuf,
		 const void *wbuf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = kvdb_xfer(io, fd, wbuf ? NULL : (char *)rbuf + done,
				      wbuf ? (const char *)wbuf + done : NULL,
				      len - done, off + done);

		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int kvdb_sync(const struct store_io_ops *io, int fd)
{
	if (io)
		return io->sync(io->ctx, fd);
	return fdatasync(fd) < 0 ? -errno : 0;
}

static int kvdb_datafile_cmp(const void *a, const void *b)
{
	const struct kvdb_datafile *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

struct kvdb_datafile *kvdb_datafile_find(struct kvdb_datafile *v, size_t n,
					 uint32_t id)
{
	struct kvdb_datafile key = {.id = id};

	return n ? bsearch(&key, v, n, sizeof(*v), kvdb_datafile_cmp) : NULL;
}

/* Opens data/name (number id) into the next slot of *v; -errno. */
static int kvdb_datafile_add(int dfd, const char *dir, uint32_t id, int flags,
			     struct kvdb_datafile **v, size_t *n, size_t *cap,
			     char *msg, size_t msglen)
{
	char name[DATADIR_NAME_MAX];
	struct stat st;
	int rc, fd;

	datadir_file_name(name, sizeof(name), id);
	fd = openat(dfd, name, flags | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fd < 0 ? -errno : -EINVAL;
		snprintf(msg, msglen, "%s/%s: %s", dir, name, strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (kvdb_grow((void **)v, cap, *n, sizeof(**v)) < 0) {
		close(fd);
		snprintf(msg, msglen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	(*v)[(*n)++] = (struct kvdb_datafile){
		.id = id,
		.fd = fd,
		.size = (uint64_t)st.st_size,
		.physical = (uint64_t)st.st_blocks * 512,
	};
	return 0;
}

int kvdb_datafiles_open(const char *datadir, int flags, uint32_t max_id,
			int *dir_fd, struct kvdb_datafile **v, size_t *n,
			char *msg, size_t msglen)
{
	char path[PATH_MAX];
	uint32_t *ids = NULL;
	size_t nids = 0, cap = 0;
	int rc, dfd;

	datadir_path(path, sizeof(path), datadir, DATADIR_DATA);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		snprintf(msg, msglen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	/* In id order; a name that is not NNNNNN.kvd is none of ours. */
	rc = datadir_list_at(dfd, &ids, &nids);
	if (rc < 0)
		snprintf(msg, msglen, "%s: %s", path, strerror(-rc));
	for (size_t i = 0; rc == 0 && i < nids && ids[i] <= max_id; i++)
		rc = kvdb_datafile_add(dfd, path, ids[i], flags, v, n, &cap,
				       msg, msglen);
	free(ids);
	if (dir_fd) {
		*dir_fd = dfd;
		return rc;
	}
	close(dfd);
	return rc;
}

void kvdb_datafiles_close(struct kvdb_datafile *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].fd >= 0)
			close(v[i].fd);
	free(v);
}

void kvdb_iter_opts(const struct kvdb_datafile *df, size_t window, int resync,
		    struct record_iter_opts *o)
{
	*o = (struct record_iter_opts){
		.ops = df->io,
		.window = window,
		.skip_holes = 1, /* ignored with io: it reads plain fds only */
		.resync = resync,
	};
}

int kvdb_hdr_read(const struct kvdb_datafile *df, uint64_t off,
		  uint32_t hdr_len, struct kvdb_hdr *kh)
{
	struct record_iter_opts o = {.ops = df->io};
	int rc;

	kh->open = 0;
	rc = record_iter_open(&kh->it, df->fd, off, &o);
	if (rc < 0)
		return rc;
	kh->open = 1;
	rc = record_iter_next(&kh->it, &kh->r);
	if (rc < 0)
		return rc;
	switch (rc) {
	case RECORD_OK:
	case RECORD_SHORT: /* the header is whole: that is all we read */
		/* A header longer than the index says is not the one it means. */
		return hdr_len && kh->r.hdr.hdr_len > hdr_len ? -EINVAL : 0;
	case RECORD_END:
	case RECORD_TORN:
		return -ENODATA;
	default:
		return -EINVAL;
	}
}

void kvdb_hdr_done(struct kvdb_hdr *kh)
{
	if (kh->open)
		record_iter_close(&kh->it);
	kh->open = 0;
}

/* --- scanning every header ------------------------------------------ */

static int kvdb_scan_add(struct kvdb_scan *s, const struct kvdb_datafile *df,
			 uint64_t off, const struct store_hdr *h)
{
	struct kvdb_rec *r;
	uint64_t span = h->hdr_len + kv_align_up(h->len);

	if (kvdb_grow((void **)&s->recs, &s->cap, s->nrecs, sizeof(*s->recs)) <
	    0)
		return -ENOMEM;
	r = &s->recs[s->nrecs];
	*r = (struct kvdb_rec){
		.file_id = df->id,
		.type = h->type,
		.hdr_len = h->hdr_len,
		.nchunks = h->nchunks,
		.off = off,
		.seq = h->seq,
		.ino = h->ino,
		.len = h->len,
		.complete = h->len <= df->size && off + span <= df->size,
	};
	if (h->type == STORE_REC_DATA && h->nchunks) {
		r->crcs = malloc((size_t)h->nchunks * sizeof(*r->crcs));
		if (!r->crcs)
			return -ENOMEM;
		for (uint32_t i = 0; i < h->nchunks; i++)
			r->crcs[i] = store_hdr_crc(h, i);
	}
	if (!memchr(h->path, '\0', h->path_len)) {
		r->path = strndup(h->path, h->path_len);
		if (!r->path) {
			free(r->crcs);
			return -ENOMEM;
		}
	}
	s->nrecs++;
	return 0;
}

/*
 * Adds every record header of df to s: holes skipped, pages with no header
 * passed over. Stops at the first record the file does not hold whole.
 */
static int kvdb_scan_file(struct kvdb *db, struct kvdb_scan *s,
			  const struct kvdb_datafile *df, uint64_t *done,
			  uint64_t total)
{
	struct record_iter_opts o;
	struct record_iter it;
	struct record r;
	int rc;

	kvdb_iter_opts(df, KVDB_SCAN_BUF, 1, &o);
	rc = record_iter_open(&it, df->fd, 0, &o);
	if (rc < 0) {
		kvdb_report(db, "data file %06u.kvd: %s", df->id,
			    strerror(-rc));
		return rc;
	}
	while (rc == 0) {
		rc = record_iter_next(&it, &r);
		if (rc == RECORD_END || rc < 0)
			break;
		if (rc == RECORD_TORN) {
			record_iter_skip(&it);
			rc = 0;
			continue;
		}
		rc = kvdb_scan_add(s, df, r.off, &r.hdr);
		if (rc == 0 && !s->recs[s->nrecs - 1].complete)
			break; /* nothing after it can be whole */
		kvdb_progress(db, KVDB_PROGRESS_STEP, "reading headers",
			      *done + record_iter_tell(&it), total);
	}
	if (rc < 0 && rc != -ENOMEM)
		kvdb_report(db, "data file %06u.kvd at %llu: %s", df->id,
			    (unsigned long long)record_iter_tell(&it),
			    strerror(-rc));
	record_iter_close(&it);
	*done += df->size;
	return rc < 0 ? rc : 0;
}

int kvdb_scan(struct kvdb *db, struct kvdb_scan *s)
{
	uint64_t total = 0, done = 0;
	int rc = 0;

	for (size_t i = 0; i < db->ndfs; i++)
		total += db->dfs[i].size;
	kvdb_progress(db, KVDB_PROGRESS_BEGIN, "reading headers", 0, total);
	for (size_t i = 0; rc == 0 && i < db->ndfs; i++)
		rc = kvdb_scan_file(db, s, &db->dfs[i], &done, total);
	kvdb_progress(db, KVDB_PROGRESS_END, "reading headers", done, total);
	s->done = 1;
	return rc;
}

void kvdb_scan_free(struct kvdb_scan *s)
{
	for (size_t i = 0; i < s->nrecs; i++) {
		free(s->recs[i].crcs);
		free(s->recs[i].path);
	}
	free(s->recs);
	memset(s, 0, sizeof(*s));
}
