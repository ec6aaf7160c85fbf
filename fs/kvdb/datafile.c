/* SPDX-License-Identifier: MIT */
/*
 * The data files of an unmounted data directory, as the offline engines
 * use them: open them all, find one by number, read and write them whole,
 * skip their holes, and read a record header. See datafile.h.
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
#include "kvtypes.h"
#include "record.h"
#include "store.h"

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
