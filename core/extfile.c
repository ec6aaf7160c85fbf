/* SPDX-License-Identifier: MIT */
/*
 * Extent files (extfile.h): one backing file per large file under
 * DATADIR/extents/ that holds the file's bytes at their own offsets, and
 * beside it a header file (record.h, type STORE_REC_EXTENT); files made
 * under index format 4 and before hold the header themselves, before the
 * bytes. Reads and writes go through the store's I/O table (io_uring by
 * default, a fake in tests); the calls that change the backing file's
 * shape (ftruncate, fallocate) are plain system calls. Not here: which
 * files are extent files, the index.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datadir.h"
#include "extfile.h"
#include "record.h"

/* Bounded retries of a transfer that moves nothing or is interrupted. */
#define EXTF_RETRIES 16
/*
 * Buffered transfers of at least this many bytes stream through the
 * backing file's page cache: the bytes are cached once, in the mount's
 * page cache, not twice (see extf_write, extf_read).
 */
#define EXTF_STREAM (128u << 10)
/* How far behind a streaming writer its written pages are dropped. */
#define EXTF_DROP_LAG (8ull << 20)

/* "INO" and suffix into buf: 0 or -ENAMETOOLONG. */
static int extf_name_as(char *buf, size_t len, uint64_t ino, const char *suffix)
{
	int n = snprintf(buf, len, "%" PRIu64 "%s", ino, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int extf_name(char *buf, size_t len, uint64_t ino)
{
	return extf_name_as(buf, len, ino, ".kvx");
}

int extf_parse_name(const char *name, uint64_t *ino)
{
	char *end;
	unsigned long long v;

	if (name[0] < '1' || name[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(name, &end, 10);
	if (errno || strcmp(end, ".kvx") != 0)
		return -EINVAL;
	*ino = v;
	return 0;
}

int extf_dir_open(const char *datadir, int create)
{
	char path[PATH_MAX];
	int rc, fd;

	rc = datadir_path(path, sizeof(path), datadir, EXTF_DIR);
	if (rc < 0)
		return rc;
	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Opens x->dfd beside x->fd; none where O_DIRECT is refused (tmpfs). */
static void extf_open_direct(int dirfd, uint64_t ino, struct extf *x)
{
	char name[EXTF_NAME_MAX];

	x->dfd = -1;
	if (extf_name(name, sizeof(name), ino) == 0)
		x->dfd = openat(dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (x->dfd < 0)
		x->dfd = -1;
}

/* Opens ino's file with suffix in the directory at dirfd with flags. */
static int extf_openat_as(int dirfd, uint64_t ino, const char *suffix,
			  int flags)
{
	char name[EXTF_NAME_MAX];
	int fd;

	if (extf_name_as(name, sizeof(name), ino, suffix) < 0)
		return -ENAMETOOLONG;
	fd = openat(dirfd, name, flags | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

/* Opens ino's extent file in the directory at dirfd with flags. */
static int extf_openat(int dirfd, uint64_t ino, int flags)
{
	return extf_openat_as(dirfd, ino, ".kvx", flags);
}

int extf_create(int dirfd, const struct store_io_ops *ops, uint64_t ino,
		uint64_t seq, const char *path, struct extf *x)
{
	size_t plen = strnlen(path, STORE_PATH_MAX + 1);
	uint32_t hlen;
	struct extf h = EXTF_NONE;
	void *hdr = NULL;
	int fd, rc;

	x->fd = x->dfd = -1;
	/* As a data record's: a path longer than a record keeps is left out. */
	if (plen > STORE_PATH_MAX)
		plen = 0;
	hlen = store_hdr_len(0, plen);
	/*
	 * The bytes' file first: one left without its header file (a crash
	 * in between) is an extent file no index points at, which the next
	 * start removes; a header file is never left alone (extf_remove).
	 */
	fd = extf_openat(dirfd, ino, O_RDWR | O_CREAT | O_TRUNC);
	if (fd < 0)
		return fd;
	h.fd = extf_openat_as(dirfd, ino, EXTF_HDR_SUFFIX,
			      O_WRONLY | O_CREAT | O_TRUNC);
	rc = h.fd < 0 ? h.fd : 0;
	if (rc == 0 && posix_memalign(&hdr, KV_ALIGN, hlen) != 0)
		rc = -ENOMEM;
	if (rc == 0) {
		store_hdr_encode(hdr, STORE_REC_EXTENT, seq, ino, 0, NULL, path,
				 plen);
		h.hdr_len = 0;
		rc = extf_write(ops, &h, hdr, hlen, 0, 0);
	}
	/*
	 * The header is what tells a rebuilt index that this file is ino's:
	 * durable before the index points at the file.
	 */
	if (rc == 0)
		rc = ops->sync(ops->ctx, h.fd);
	free(hdr);
	extf_close(&h);
	if (rc < 0)
		goto fail;
	x->fd = fd;
	x->hdr_len = 0;
	extf_open_direct(dirfd, ino, x);
	return 0;
fail:
	close(fd);
	extf_remove(dirfd, ino);
	return rc;
}

/* Decodes the extent header at the start of the file at fd into *h. */
static int extf_decode(int fd, unsigned char *small, size_t room,
		       unsigned char **buf, struct store_hdr *h)
{
	ssize_t got = pread(fd, small, room, 0);
	int rc;

	*buf = small;
	if (got < 0)
		return -errno;
	rc = store_hdr_decode(small, (size_t)got, h);
	if (rc == -EAGAIN && h->hdr_len <= RECORD_HDR_MAX) {
		*buf = malloc(h->hdr_len);
		if (!*buf)
			return -ENOMEM;
		got = pread(fd, *buf, h->hdr_len, 0);
		rc = got < 0 ? -errno : store_hdr_decode(*buf, (size_t)got, h);
	}
	if (rc == 0 && (h->type != STORE_REC_EXTENT || h->path_len >= 4097))
		rc = -EINVAL;
	return rc == -EAGAIN ? -EINVAL : rc; /* -EAGAIN: cut in its header */
}

/* extf_read_hdr() of ino's extent file, already open at fd. */
static int extf_hdr_of(int dirfd, uint64_t ino, int fd, struct extf_info *info)
{
	unsigned char small[KV_ALIGN], *buf = small;
	struct store_hdr h;
	uint32_t hlen = 0;
	struct stat st;
	int hfd, rc;

	hfd = extf_openat_as(dirfd, ino, EXTF_HDR_SUFFIX, O_RDONLY);
	rc = hfd < 0 && hfd != -ENOENT ? hfd : 0;
	if (rc == 0 && fstat(fd, &st) < 0)
		rc = -errno;
	if (rc == 0)
		rc = extf_decode(hfd >= 0 ? hfd : fd, small, sizeof(small),
				 &buf, &h);
	/* Without a header file: the older shape, the header first. */
	if (rc == 0 && hfd < 0)
		hlen = h.hdr_len;
	if (rc == 0) {
		info->ino = h.ino;
		info->seq = h.seq;
		info->size = (uint64_t)st.st_size > hlen
				     ? (uint64_t)st.st_size - hlen
				     : 0;
		info->blocks = (uint64_t)st.st_blocks;
		memcpy(info->path, h.path, h.path_len);
		info->path[h.path_len] = '\0';
		rc = (int)hlen;
	}
	if (buf != small)
		free(buf);
	if (hfd >= 0)
		close(hfd);
	return rc;
}

int extf_read_hdr(int dirfd, uint64_t ino, struct extf_info *info)
{
	int fd = extf_openat(dirfd, ino, O_RDONLY), rc;

	if (fd < 0)
		return fd;
	rc = extf_hdr_of(dirfd, ino, fd, info);
	close(fd);
	return rc;
}

int extf_open(int dirfd, uint64_t ino, struct extf *x)
{
	struct extf_info *info = malloc(sizeof(*info));
	int fd, rc;

	x->fd = x->dfd = -1;
	if (!info)
		return -ENOMEM;
	fd = extf_openat(dirfd, ino, O_RDWR);
	rc = fd < 0 ? fd : extf_hdr_of(dirfd, ino, fd, info);
	if (rc >= 0 && info->ino != ino)
		rc = -EINVAL;
	if (rc >= 0) {
		x->fd = fd;
		x->hdr_len = (uint32_t)rc;
		extf_open_direct(dirfd, ino, x);
		rc = 0;
	} else if (fd >= 0) {
		close(fd);
	}
	free(info);
	return rc;
}

void extf_close(struct extf *x)
{
	if (x->fd >= 0)
		close(x->fd);
	if (x->dfd >= 0)
		close(x->dfd);
	x->fd = x->dfd = -1;
}

int extf_remove(int dirfd, uint64_t ino)
{
	char name[EXTF_NAME_MAX];

	/*
	 * The header file first: a crash in between leaves bytes without a
	 * header, which no index points at and the next start removes.
	 */
	if (extf_name_as(name, sizeof(name), ino, EXTF_HDR_SUFFIX) < 0)
		return -ENAMETOOLONG;
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	extf_name(name, sizeof(name), ino);
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Whether a transfer may use O_DIRECT. */
static int extf_aligned(const void *buf, uint64_t off, uint64_t len)
{
	return (uintptr_t)buf % KV_ALIGN == 0 && off % KV_ALIGN == 0 &&
	       len % KV_ALIGN == 0;
}

/*
 * After a large buffered write of [off, off + len): its writeback starts
 * now, as a plain file's would under memory pressure, and the pages a
 * lag behind it, written back by now or soon, leave the backing file's
 * page cache: the mount's own page cache already holds these bytes.
 * Advice only: failures change nothing.
 */
static void extf_stream_write(const struct extf *x, uint64_t off, size_t len)
{
	uint64_t at = x->hdr_len + off;

	sync_file_range(x->fd, (off64_t)at, (off64_t)len,
			SYNC_FILE_RANGE_WRITE);
	if (at >= EXTF_DROP_LAG + x->hdr_len)
		posix_fadvise(x->fd, (off_t)(at - EXTF_DROP_LAG), (off_t)len,
			      POSIX_FADV_DONTNEED);
}

int extf_write(const struct store_io_ops *ops, const struct extf *x,
	       const void *buf, size_t len, uint64_t off, int direct)
{
	const char *p = buf;
	int idle = 0, fd = x->fd;
	size_t total = len;

	if (direct && x->dfd >= 0 && extf_aligned(buf, off, len))
		fd = x->dfd;
	while (len > 0) {
		struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
		ssize_t n =
			ops->pwritev(ops->ctx, fd, &iov, 1, x->hdr_len + off);

		if (n == -EINTR || n == -EAGAIN || n == 0) {
			if (++idle > EXTF_RETRIES)
				return n == 0 ? -EIO : (int)n;
			continue;
		}
		if (n < 0)
			return (int)n;
		idle = 0;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	if (fd == x->fd && total >= EXTF_STREAM)
		extf_stream_write(x, off - total, total);
	return 0;
}

int extf_read(const struct store_io_ops *ops, const struct extf *x, void *buf,
	      size_t len, uint64_t off, size_t *got, int direct)
{
	size_t want = len;
	char *p = buf;
	int idle = 0, fd = x->fd;

	/*
	 * A large read goes around the backing file's page cache too: the
	 * mount's page cache keeps the bytes, and a buffered read here
	 * copies them once more and then drops them again.
	 */
	if ((direct || len >= EXTF_STREAM) && x->dfd >= 0 &&
	    extf_aligned(buf, off, kv_align_up(len))) {
		fd = x->dfd;
		want = kv_align_up(len);
	}
	*got = 0;
	while (*got < want) {
		struct iovec iov = {.iov_base = p + *got,
				    .iov_len = want - *got};
		ssize_t n = ops->preadv(ops->ctx, fd, &iov, 1,
					x->hdr_len + off + *got);

		if (n == 0)
			break; /* the backing file ends here */
		if (n == -EINTR || n == -EAGAIN) {
			if (++idle > EXTF_RETRIES)
				return (int)n;
			continue;
		}
		if (n < 0)
			return (int)n;
		idle = 0;
		*got += (size_t)n;
	}
	if (*got > len)
		*got = len;
	/* Read once into the mount's page cache: not kept here as well. */
	if (fd == x->fd && *got >= EXTF_STREAM)
		posix_fadvise(x->fd, (off_t)(x->hdr_len + off), (off_t)*got,
			      POSIX_FADV_DONTNEED);
	return 0;
}

int extf_size(const struct extf *x, uint64_t *size, uint64_t *blocks)
{
	struct stat st;

	if (fstat(x->fd, &st) < 0)
		return -errno;
	if (blocks)
		*blocks = (uint64_t)st.st_blocks;
	if ((uint64_t)st.st_size < x->hdr_len)
		return -ENODATA;
	*size = (uint64_t)st.st_size - x->hdr_len;
	return 0;
}

int extf_blocks_at(int dirfd, uint64_t ino, uint64_t *blocks)
{
	char name[EXTF_NAME_MAX];
	struct stat st;

	if (extf_name(name, sizeof(name), ino) < 0)
		return -ENAMETOOLONG;
	if (fstatat(dirfd, name, &st, 0) < 0)
		return -errno;
	*blocks = (uint64_t)st.st_blocks;
	return 0;
}

int extf_truncate(const struct extf *x, uint64_t size)
{
	if (size > (uint64_t)INT64_MAX - x->hdr_len)
		return -EFBIG;
	return ftruncate(x->fd, (off_t)(x->hdr_len + size)) < 0 ? -errno : 0;
}

int extf_allocate(const struct extf *x, int mode, uint64_t off, uint64_t len)
{
	if (off + len > (uint64_t)INT64_MAX - x->hdr_len)
		return -EFBIG;
	return fallocate(x->fd, mode, (off_t)(x->hdr_len + off), (off_t)len) < 0
		       ? -errno
		       : 0;
}

int extf_sync(const struct store_io_ops *ops, const struct extf *x)
{
	return ops->sync(ops->ctx, x->fd);
}
