/* SPDX-License-Identifier: MIT */
/*
 * The block store's reads: a record's payload bytes into the calling
 * thread's buffer or the caller's segments, each chunk they touch checked
 * against its CRC; see store.h. Not here: appends, frees and recovery
 * (store.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "crc32c.h"
#include "store_int.h"

/* The calling thread's read buffer, freed when the thread exits. */
struct store_rbuf {
	void *buf;
	size_t cap;
};
static pthread_key_t store_rbuf_key;
static pthread_once_t store_rbuf_once = PTHREAD_ONCE_INIT;

static void store_rbuf_free(void *p)
{
	struct store_rbuf *rb = p;

	free(rb->buf);
	free(rb);
}

static void store_rbuf_key_init(void)
{
	if (pthread_key_create(&store_rbuf_key, store_rbuf_free) != 0)
		abort();
}

/* The calling thread's read buffer, at least len bytes, KV_ALIGN-aligned. */
static void *store_rbuf_get(size_t len)
{
	struct store_rbuf *rb;

	pthread_once(&store_rbuf_once, store_rbuf_key_init);
	rb = pthread_getspecific(store_rbuf_key);
	if (!rb) {
		rb = calloc(1, sizeof(*rb));
		if (!rb)
			return NULL;
		if (pthread_setspecific(store_rbuf_key, rb) != 0) {
			free(rb);
			return NULL;
		}
	}
	if (rb->cap < len) {
		void *p;
		size_t cap = len < (1u << 20) + 2 * KV_CHUNK_SIZE
				     ? (1u << 20) + 2 * KV_CHUNK_SIZE
				     : len;

		if (posix_memalign(&p, KV_ALIGN, cap) != 0)
			return NULL;
		free(rb->buf);
		rb->buf = p;
		rb->cap = cap;
	}
	return rb->buf;
}

/*
 * Reads [rstart, rend) of the record at ext into bufs, seg bytes in each
 * (the last holds the rest), at most STORE_IOV_MAX buffers a request, and
 * checks the chunks of [off, end) against crcs (NULL: no check); rstart
 * and rend are the KV_ALIGN-aligned (and, with crcs, chunk-aligned) span
 * around them, seg a KV_CHUNK_SIZE multiple when there is more than one.
 */
static int store_read_span(struct store *st, const struct kv_extent *ext,
			   const uint32_t *crcs, uint64_t off, uint64_t end,
			   uint64_t rstart, uint64_t rend, char *const *bufs,
			   uint64_t seg)
{
	struct iovec iov[STORE_IOV_MAX];
	uint64_t pos = rstart;
	int fd, rc = 0;

	fd = store_file_fd(st, ext->file_id);
	if (fd == -ENOENT) {
		rc = -ENODATA;
		goto out_err;
	}
	if (fd < 0) {
		rc = fd;
		goto out_err;
	}
	for (size_t b = 0; rc == 0 && pos < rend;) {
		uint64_t from = pos;
		int cnt = 0;

		for (; cnt < STORE_IOV_MAX && pos < rend; cnt++, b++) {
			uint64_t l = rend - pos < seg ? rend - pos : seg;

			iov[cnt] = (struct iovec){.iov_base = bufs[b],
						  .iov_len = (size_t)l};
			pos += l;
		}
		rc = store_xfer_all(st, fd, iov, cnt,
				    ext->off + ext->hdr_len + from, 0);
	}
	if (rc < 0)
		goto out_err;
	if (crcs) {
		uint32_t c0 = (uint32_t)(off / KV_CHUNK_SIZE);
		uint32_t c1 = (uint32_t)((end - 1) / KV_CHUNK_SIZE);

		for (uint32_t c = c0; c <= c1; c++) {
			uint64_t cs = (uint64_t)c * KV_CHUNK_SIZE;
			uint64_t clen = ext->len - cs < KV_CHUNK_SIZE
						? ext->len - cs
						: KV_CHUNK_SIZE;
			const char *p =
				bufs[(cs - rstart) / seg] + (cs - rstart) % seg;

			if (crc32c(0, p, clen) != crcs[c]) {
				rc = -EBADMSG;
				goto out_err;
			}
		}
	}
	atomic_fetch_add(&st->stats.reads, 1);
	atomic_fetch_add(&st->stats.read_bytes, end - off);
	return 0;
out_err:
	if (rc == -ENODATA)
		atomic_fetch_add(&st->stats.short_records, 1);
	else if (rc == -EBADMSG)
		atomic_fetch_add(&st->stats.crc_errors, 1);
	else
		atomic_fetch_add(&st->stats.io_errors, 1);
	return rc;
}

int store_read(struct store *st, const struct kv_extent *ext,
	       const uint32_t *crcs, uint64_t off, size_t len,
	       const void **data, size_t *n)
{
	uint64_t end, rstart, rend;
	char *buf;
	int rc;

	*n = 0;
	if (off >= ext->len || len == 0)
		return 0;
	end = len < ext->len - off ? off + len : ext->len;
	rstart = off;
	rend = end;
	if (crcs) {
		rstart = off / KV_CHUNK_SIZE * KV_CHUNK_SIZE;
		rend = (end + KV_CHUNK_SIZE - 1) / KV_CHUNK_SIZE *
		       KV_CHUNK_SIZE;
		if (rend > ext->len)
			rend = ext->len;
	}
	rstart &= ~(uint64_t)(KV_ALIGN - 1);
	rend = kv_align_up(rend);
	buf = store_rbuf_get(rend - rstart);
	if (!buf)
		return -ENOMEM;
	rc = store_read_span(st, ext, crcs, off, end, rstart, rend, &buf,
			     rend - rstart);
	if (rc < 0)
		return rc;
	*data = buf + (off - rstart);
	*n = end - off;
	return 0;
}

int store_read_segs(struct store *st, const struct kv_extent *ext,
		    const uint32_t *crcs, uint64_t off, size_t len,
		    char *const *bufs, size_t seg, size_t *n)
{
	uint64_t end;
	int rc;

	*n = 0;
	if (off % KV_CHUNK_SIZE || seg == 0 || seg % KV_CHUNK_SIZE)
		return -EINVAL;
	if (off >= ext->len || len == 0)
		return 0;
	end = len < ext->len - off ? off + len : ext->len;
	for (uint64_t b = 0; b * seg < end - off; b++)
		if ((uintptr_t)bufs[b] % KV_ALIGN)
			return -EINVAL;
	rc = store_read_span(st, ext, crcs, off, end, off, kv_align_up(end),
			     bufs, seg);
	if (rc == 0)
		*n = end - off;
	return rc;
}

void *store_buf(size_t len)
{
	return store_rbuf_get(len);
}
