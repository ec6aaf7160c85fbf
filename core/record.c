/* SPDX-License-Identifier: MIT */
/*
 * The record codec (header encode and decode, chunk CRCs) and the walk over
 * one data file's records; see record.h for the format. Not here: appending
 * or freeing records (store.c).
 */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"

/* Retries of -EINTR/-EAGAIN before a read error is reported. */
#define RECORD_RETRIES 8

static void record_put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void record_put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t record_le32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t record_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint32_t store_hdr_len(uint64_t len, size_t path_len)
{
	uint64_t raw = STORE_HDR_FIXED + 4ull * kv_nchunks(len) + 4 + path_len;

	return (uint32_t)kv_align_up(raw);
}

uint32_t store_hdr_encode(void *hdr, uint32_t type, uint64_t seq, uint64_t ino,
			  uint64_t len, const uint32_t *crcs, const char *path,
			  size_t path_len)
{
	uint32_t hdr_len = store_hdr_len(len, path_len);
	uint32_t n = kv_nchunks(len);
	unsigned char *p = hdr;

	memset(p, 0, hdr_len);
	memcpy(p, STORE_MAGIC, 8);
	record_put_le32(p + 8, STORE_FORMAT_VERSION);
	record_put_le32(p + 12, type);
	record_put_le32(p + 16, hdr_len);
	record_put_le64(p + 24, seq);
	record_put_le64(p + 32, ino);
	record_put_le64(p + 40, len);
	record_put_le32(p + 48, KV_CHUNK_SIZE);
	record_put_le32(p + 52, n);
	for (uint32_t i = 0; i < n; i++)
		record_put_le32(p + STORE_HDR_FIXED + 4 * i, crcs[i]);
	record_put_le32(p + STORE_HDR_FIXED + 4 * n, (uint32_t)path_len);
	memcpy(p + STORE_HDR_FIXED + 4 * n + 4, path, path_len);
	record_put_le32(p + 20, crc32c(0, p, hdr_len));
	return hdr_len;
}

int store_hdr_decode(const void *hdr, size_t avail, struct store_hdr *out)
{
	const unsigned char *p = hdr;
	unsigned char zero[4] = {0};
	uint32_t crc, n;
	uint64_t need;

	if (avail < STORE_HDR_FIXED || memcmp(p, STORE_MAGIC, 8) != 0 ||
	    record_le32(p + 8) != STORE_FORMAT_VERSION)
		return -EINVAL;
	out->type = record_le32(p + 12);
	out->hdr_len = record_le32(p + 16);
	if (out->hdr_len < KV_ALIGN || out->hdr_len % KV_ALIGN != 0 ||
	    out->type < STORE_REC_DATA || out->type > STORE_REC_MOVE)
		return -EINVAL;
	if (avail < out->hdr_len)
		return -EAGAIN;
	crc = crc32c(0, p, 20);
	crc = crc32c(crc, zero, 4);
	crc = crc32c(crc, p + 24, out->hdr_len - 24);
	if (crc != record_le32(p + 20))
		return -EINVAL;
	out->seq = record_le64(p + 24);
	out->ino = record_le64(p + 32);
	out->len = record_le64(p + 40);
	n = record_le32(p + 52);
	if (record_le32(p + 48) != KV_CHUNK_SIZE || n != kv_nchunks(out->len))
		return -EINVAL;
	need = STORE_HDR_FIXED + 4ull * n + 4;
	if (need > out->hdr_len)
		return -EINVAL;
	out->nchunks = n;
	out->crcs = p + STORE_HDR_FIXED;
	out->path_len = record_le32(p + STORE_HDR_FIXED + 4 * n);
	if (need + out->path_len > out->hdr_len)
		return -EINVAL;
	out->path = (const char *)p + need;
	return 0;
}

uint32_t store_hdr_crc(const struct store_hdr *h, uint32_t n)
{
	return record_le32(h->crcs + 4 * (size_t)n);
}

void store_chunk_crcs(const void *buf, uint64_t len, uint32_t *crcs)
{
	const unsigned char *p = buf;
	uint32_t n = kv_nchunks(len);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = (uint64_t)i * KV_CHUNK_SIZE;
		uint64_t clen =
			len - off < KV_CHUNK_SIZE ? len - off : KV_CHUNK_SIZE;

		crcs[i] = crc32c(0, p + off, clen);
	}
}

void store_chunk_crcs_iov(const struct iovec *iov, int iovcnt, uint64_t len,
			  uint32_t *crcs, uint32_t from)
{
	uint32_t n = kv_nchunks(len), c = from;
	uint64_t skip = (uint64_t)from * KV_CHUNK_SIZE, in_chunk = 0;
	uint32_t crc = 0;

	for (int i = 0; i < iovcnt && c < n; i++) {
		const unsigned char *p = iov[i].iov_base;
		uint64_t left = iov[i].iov_len;

		if (skip >= left) {
			skip -= left;
			continue;
		}
		p += skip;
		left -= skip;
		skip = 0;
		while (left > 0 && c < n) {
			uint64_t clen = len - (uint64_t)c * KV_CHUNK_SIZE;
			uint64_t take;

			if (clen > KV_CHUNK_SIZE)
				clen = KV_CHUNK_SIZE;
			take = clen - in_chunk < left ? clen - in_chunk : left;
			crc = crc32c(crc, p, take);
			p += take;
			left -= take;
			in_chunk += take;
			if (in_chunk == clen) {
				crcs[c++] = crc;
				crc = 0;
				in_chunk = 0;
			}
		}
	}
}

/* --- walking a data file ------------------------------------------------ */

static int record_iter_size_of(struct record_iter *it)
{
	struct stat sb;

	if (it->have_ops)
		return it->ops.size(it->ops.ctx, it->fd, &it->size);
	if (fstat(it->fd, &sb) < 0)
		return -errno;
	it->size = (uint64_t)sb.st_size;
	return 0;
}

int record_iter_open(struct record_iter *it, int fd, uint64_t from,
		     const struct record_iter_opts *opts)
{
	size_t window = opts && opts->window ? opts->window : RECORD_READ;

	memset(it, 0, sizeof(*it));
	it->fd = fd;
	it->off = from;
	it->window = (size_t)kv_align_up(window);
	if (opts && opts->ops) {
		it->ops = *opts->ops;
		it->have_ops = 1;
	}
	it->skip_holes = opts && opts->skip_holes && !it->have_ops;
	it->resync = opts && opts->resync;
	return record_iter_size_of(it);
}

int record_iter_open_at(struct record_iter *it, int dirfd, const char *name,
			uint64_t from, const struct record_iter_opts *opts)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		memset(it, 0, sizeof(*it));
		it->fd = -1;
		return -errno;
	}
	rc = record_iter_open(it, fd, from, opts);
	it->own_fd = 1;
	if (rc < 0)
		record_iter_close(it);
	return rc;
}

void record_iter_close(struct record_iter *it)
{
	if (it->own_fd && it->fd >= 0)
		close(it->fd);
	free(it->buf);
	it->buf = NULL;
	it->cap = 0;
	it->buf_len = 0;
	it->fd = -1;
	it->own_fd = 0;
}

void record_iter_skip(struct record_iter *it)
{
	it->off += KV_ALIGN;
}

void record_iter_seek(struct record_iter *it, uint64_t off)
{
	it->off = off;
	it->buf_len = 0; /* the caller may have written there: read anew */
}

uint64_t record_iter_tell(const struct record_iter *it)
{
	return it->off;
}

/* One read attempt: bytes read (0 at EOF) or -errno. */
static ssize_t record_pread(struct record_iter *it, void *buf, size_t len,
			    uint64_t off)
{
	ssize_t n;

	if (it->have_ops) {
		struct iovec iov = {.iov_base = buf, .iov_len = len};

		return it->ops.preadv(it->ops.ctx, it->fd, &iov, 1, off);
	}
	n = pread(it->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

/*
 * Fills buf with the file's bytes from off on: at least len of them (fewer
 * only where the file ends), reading whole pages for O_DIRECT.
 */
static int record_fill(struct record_iter *it, uint64_t off, size_t len)
{
	uint64_t left = it->size - off;
	size_t want = len < left ? len : (size_t)left;
	size_t rlen = (size_t)kv_align_up(want), done = 0;
	int retries = 0;

	it->buf_len = 0;
	if (rlen > it->cap) {
		void *p;

		if (posix_memalign(&p, KV_ALIGN, rlen) != 0)
			return -ENOMEM;
		free(it->buf);
		it->buf = p;
		it->cap = rlen;
	}
	while (done < want) {
		ssize_t n = record_pread(it, it->buf + done, rlen - done,
					 off + done);

		if (n == -EINTR || n == -EAGAIN) {
			if (++retries > RECORD_RETRIES)
				return (int)n;
			continue;
		}
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO; /* shorter than its size said */
		done += (size_t)n;
	}
	it->buf_off = off;
	it->buf_len = want;
	return 0;
}

/* The next offset at or after off that holds data (skip_holes). */
static uint64_t record_next_data(struct record_iter *it, uint64_t off)
{
	off_t d;

	if (!it->skip_holes || off >= it->size)
		return off;
	d = lseek(it->fd, (off_t)off, SEEK_DATA);
	if (d < 0)
		return errno == ENXIO ? it->size : off;
	d &= ~(off_t)(KV_ALIGN - 1);
	return (uint64_t)d > off ? (uint64_t)d : off;
}

/* Decodes the header at it->off into r: an enum record_status or -errno. */
static int record_decode(struct record_iter *it, struct record *r)
{
	uint64_t off = it->off, left = it->size - off;
	size_t avail = 0;
	int drc, rc;

	if (it->buf_len && off >= it->buf_off &&
	    off < it->buf_off + it->buf_len)
		avail = (size_t)(it->buf_off + it->buf_len - off);
	if (avail < STORE_HDR_FIXED && avail < left) {
		rc = record_fill(it, off, it->window);
		if (rc < 0)
			return rc;
		avail = it->buf_len;
	}
	drc = store_hdr_decode(it->buf + (off - it->buf_off), avail, &r->hdr);
	if (drc == -EAGAIN && avail < left &&
	    r->hdr.hdr_len <= RECORD_HDR_MAX) {
		/* Not all of it read yet (a long header): read it whole. */
		size_t need = r->hdr.hdr_len;

		rc = record_fill(it, off,
				 need > it->window ? need : it->window);
		if (rc < 0)
			return rc;
		avail = it->buf_len;
		drc = store_hdr_decode(it->buf, avail, &r->hdr);
	}
	if (drc == -EAGAIN)
		return avail >= left ? RECORD_TORN : RECORD_INVALID;
	if (drc < 0)
		return RECORD_INVALID;
	r->span = r->hdr.hdr_len + kv_align_up(r->hdr.len);
	r->next = off + r->span;
	if (r->hdr.len > it->size || r->next > it->size)
		return RECORD_SHORT;
	return RECORD_OK;
}

int record_iter_next(struct record_iter *it, struct record *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	for (;;) {
		uint64_t d = record_next_data(it, it->off);

		r->skipped += d - it->off;
		it->off = d;
		r->off = d;
		r->next = d;
		if (it->off >= it->size)
			return RECORD_END;
		rc = record_decode(it, r);
		if (rc == RECORD_OK)
			it->off = r->next;
		if (rc != RECORD_INVALID || !it->resync)
			return rc;
		r->skipped += it->size - it->off < KV_ALIGN ? it->size - it->off
							    : KV_ALIGN;
		it->off += KV_ALIGN;
	}
}
