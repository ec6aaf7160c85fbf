/* SPDX-License-Identifier: MIT */
/*
 * The data files of an unmounted data directory, as the offline engines
 * use them: open them all, find one by number, read and write them whole,
 * skip their holes, read a record header, and scan every record header.
 * See datafile.h.
 */
#include "datafile.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvdb.h"
#include "kvtypes.h"
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

uint32_t kvdb_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
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
static int kvdb_datafile_add(int dfd, const char *dir, const char *name,
			     unsigned id, int flags, struct kvdb_datafile **v,
			     size_t *n, size_t *cap, char *msg, size_t msglen)
{
	struct stat st;
	int rc, fd;

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
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int rc = 0, dfd;

	snprintf(path, sizeof(path), "%s/data", datadir);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		snprintf(msg, msglen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	d = fdopendir(dfd);
	if (!d) {
		rc = -errno;
		snprintf(msg, msglen, "%s: %s", path, strerror(-rc));
		close(dfd);
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		unsigned id;
		int end = 0;

		if (de->d_name[0] < '0' || de->d_name[0] > '9' ||
		    sscanf(de->d_name, "%u.kvd%n", &id, &end) != 1 ||
		    de->d_name[end] != '\0' || id > max_id)
			continue;
		rc = kvdb_datafile_add(dfd, path, de->d_name, id, flags, v, n,
				       &cap, msg, msglen);
		if (rc < 0)
			break;
	}
	if (dir_fd) {
		*dir_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
		if (*dir_fd < 0 && rc == 0) {
			rc = -errno;
			snprintf(msg, msglen, "%s: %s", path, strerror(-rc));
		}
	}
	closedir(d);
	if (*n)
		qsort(*v, *n, sizeof(**v), kvdb_datafile_cmp);
	return rc;
}

void kvdb_datafiles_close(struct kvdb_datafile *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].fd >= 0)
			close(v[i].fd);
	free(v);
}

uint64_t kvdb_next_data(const struct kvdb_datafile *df, uint64_t pos)
{
	off_t d = lseek(df->fd, (off_t)pos, SEEK_DATA);

	if (d < 0)
		return errno == ENXIO ? df->size : pos;
	return (uint64_t)d & ~(uint64_t)(KV_ALIGN - 1);
}

int kvdb_read_hdr(const struct kvdb_datafile *df, uint64_t off,
		  uint32_t hdr_len, unsigned char *buf, size_t buflen,
		  unsigned char **big, struct store_hdr *h)
{
	size_t want = hdr_len ? hdr_len : KVDB_HDR_READ;
	unsigned char *p = buf;
	ssize_t n;
	int rc;

	if (off >= df->size)
		return -ENODATA;
	if (!hdr_len && want > df->size - off)
		want = (size_t)(df->size - off);
	if (want > buflen) {
		if (want > KVDB_HDR_MAX)
			return -EINVAL;
		free(*big);
		*big = malloc(want);
		if (!*big)
			return -ENOMEM;
		p = *big;
	}
	n = kvdb_pio(df->io, df->fd, p, NULL, want, off);
	if (n < 0)
		return (int)n;
	if ((size_t)n < want)
		return -ENODATA;
	rc = store_hdr_decode(p, want, h);
	if (rc == -EAGAIN && !hdr_len)
		return kvdb_read_hdr(df, off, h->hdr_len, buf, buflen, big, h);
	return rc == -EAGAIN ? -EINVAL : rc;
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
			r->crcs[i] = kvdb_le32(h->crcs + 4 * i);
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
 * Decodes the headers in buf (n bytes of df from pos) into s. Returns how
 * far it got (bytes from pos; past a torn record, to the file's end) or
 * -ENOMEM.
 */
static int64_t kvdb_scan_buf(struct kvdb_scan *s,
			     const struct kvdb_datafile *df,
			     const unsigned char *buf, uint64_t n, uint64_t pos,
			     unsigned char **big)
{
	uint64_t o = 0;

	while (o < n) {
		struct store_hdr h;
		int drc = store_hdr_decode(buf + o, (size_t)(n - o), &h);

		if (drc == -EAGAIN && o > 0)
			break; /* read again from here */
		if (drc == -EAGAIN) {
			/* buf holds the scan: the header goes to big. */
			drc = kvdb_read_hdr(df, pos, h.hdr_len, NULL, 0, big,
					    &h);
			if (drc == -ENOMEM)
				return drc;
		}
		if (drc < 0) {
			o += KV_ALIGN;
			continue;
		}
		if (kvdb_scan_add(s, df, pos + o, &h) < 0)
			return -ENOMEM;
		if (!s->recs[s->nrecs - 1].complete)
			return (int64_t)(df->size - pos);
		o += h.hdr_len + kv_align_up(h.len);
	}
	return (int64_t)o;
}

static int kvdb_scan_file(struct kvdb *db, struct kvdb_scan *s,
			  const struct kvdb_datafile *df, unsigned char *buf,
			  uint64_t *done, uint64_t total)
{
	unsigned char *big = NULL;
	uint64_t pos = 0;
	int rc = 0;

	while (pos < df->size) {
		uint64_t start = kvdb_next_data(df, pos);
		int64_t o;
		ssize_t n;

		*done += start > pos ? start - pos : 0;
		pos = start;
		if (pos >= df->size)
			break;
		n = kvdb_pio(df->io, df->fd, buf, NULL,
			     df->size - pos < KVDB_SCAN_BUF ? df->size - pos
							    : KVDB_SCAN_BUF,
			     pos);
		if (n <= 0) {
			rc = n < 0 ? (int)n : -EIO;
			kvdb_report(db, "data file %06u.kvd at %llu: %s",
				    df->id, (unsigned long long)pos,
				    strerror(-rc));
			break;
		}
		o = kvdb_scan_buf(s, df, buf, (uint64_t)n, pos, &big);
		if (o < 0) {
			rc = (int)o;
			break;
		}
		pos += (uint64_t)o;
		*done += (uint64_t)o;
		kvdb_progress(db, KVDB_PROGRESS_STEP, "reading headers", *done,
			      total);
	}
	free(big);
	return rc;
}

int kvdb_scan(struct kvdb *db, struct kvdb_scan *s)
{
	uint64_t total = 0, done = 0;
	unsigned char *buf = malloc(KVDB_SCAN_BUF);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < db->ndfs; i++)
		total += db->dfs[i].size;
	kvdb_progress(db, KVDB_PROGRESS_BEGIN, "reading headers", 0, total);
	for (size_t i = 0; rc == 0 && i < db->ndfs; i++)
		rc = kvdb_scan_file(db, s, &db->dfs[i], buf, &done, total);
	kvdb_progress(db, KVDB_PROGRESS_END, "reading headers", done, total);
	s->done = 1;
	free(buf);
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
