/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the record codec (core/record.c: header encode and decode,
 * chunk CRCs; and CRC32C itself, core/crc32c.c) and the walk over a data
 * file's records:
 * whole records from the start or from an offset, clean end, a torn header
 * and a short payload at the tail, garbage and holes between records (with
 * and without resync and hole skipping), headers longer than the read
 * window, and reads through injected ops (tests/fakes/fake_io.h) with
 * transient errors and short transfers. Data files are built with
 * store_hdr_encode in a mkdtemp directory under $TMPDIR or /tmp.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_io.h"
#include "kvtypes.h"
#include "record.h"
#include "test_store.h"

/* Frees what a failed codec test left (cmocka longjmps out of it). */
static int tr_codec_teardown(void **state)
{
	(void)state;
	ts_free_all();
	return 0;
}

/* ---- crc32c ---- */

static void test_crc32c_vectors(void **state)
{
	unsigned char b[32];

	(void)state;
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(ts_ref_crc32c(0, "123456789", 9), 0xe3069283u);
	/* RFC 3720 B.4 */
	memset(b, 0, sizeof(b));
	assert_int_equal(crc32c(0, b, sizeof(b)), 0x8a9136aau);
	memset(b, 0xff, sizeof(b));
	assert_int_equal(crc32c(0, b, sizeof(b)), 0x62a8ab43u);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	assert_int_equal(crc32c(0, b, sizeof(b)), 0x46dd794eu);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	assert_int_equal(crc32c(0, b, sizeof(b)), 0x113fdb5cu);
	/* An empty extension changes nothing. */
	assert_int_equal(crc32c(0, b, 0), 0);
	assert_int_equal(crc32c(0xdeadbeefu, b, 0), 0xdeadbeefu);
}

/*
 * Lengths around the three-lane loop's block (3 x 4 KiB) and chunk sizes,
 * at odd offsets, against the bitwise reference: the lanes' join is exact.
 */
static void test_crc32c_three_lanes(void **state)
{
	enum { LEN = 3 * 128 * 1024 + 77 };
	static const size_t lens[] = {12287,	   12288,  12289,
				      24576 + 5,   36863,  131072,
				      131072 + 13, 262144, LEN - 3};
	unsigned char *buf = ts_alloc(LEN);

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < LEN; i++)
		buf[i] = ts_byte(11, i);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		for (size_t off = 0; off < 3; off++)
			assert_int_equal(
				crc32c(0x1234u, buf + off, lens[k]),
				ts_ref_crc32c(0x1234u, buf + off, lens[k]));
}

static void test_crc32c_incremental_unaligned(void **state)
{
	enum { LEN = 4096 + 64 };
	unsigned char *buf = ts_alloc(LEN);
	uint32_t whole;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < LEN; i++)
		buf[i] = ts_byte(7, i);
	/* Every start alignment and short lengths (the byte tail paths). */
	for (size_t start = 0; start < 16; start++)
		for (size_t len = 0; len <= 300; len++)
			assert_int_equal(crc32c(0, buf + start, len),
					 ts_ref_crc32c(0, buf + start, len));
	for (size_t start = 0; start < 16; start++)
		assert_int_equal(crc32c(0, buf + start, 4096 + 33),
				 ts_ref_crc32c(0, buf + start, 4096 + 33));
	/* Incremental over any split point equals one shot. */
	whole = crc32c(0, buf, 4096);
	assert_int_equal(whole, ts_ref_crc32c(0, buf, 4096));
	for (size_t k = 0; k <= 4096; k++) {
		uint32_t c = crc32c(0, buf, k);

		assert_int_equal(crc32c(c, buf + k, 4096 - k), whole);
	}
	for (size_t k = 1; k < 64; k += 3) {
		uint32_t c = crc32c(0, buf, k);

		c = crc32c(c, buf + k, 2 * k + 1);
		c = crc32c(c, buf + 3 * k + 1, 4096 - (3 * k + 1));
		assert_int_equal(c, whole);
	}
	ts_free(buf);
}

/* ---- header format ---- */

static void ts_hdr_roundtrip(uint64_t len, size_t path_len, uint32_t type)
{
	const uint64_t seq = 0x0102030405060708ull + len;
	const uint64_t ino = 0x1122334455667788ull ^ path_len;
	uint32_t n = kv_nchunks(len), hl, *crcs;
	uint64_t raw = TS_HDR_FIXED + 4ull * n + 4 + path_len;
	struct store_hdr d;
	unsigned char *h;
	char *path;

	crcs = ts_calloc(n ? n : 1, sizeof(*crcs));
	path = ts_alloc(path_len + 1);
	assert_non_null(crcs);
	assert_non_null(path);
	for (uint32_t i = 0; i < n; i++)
		crcs[i] = 0x9e3779b9u * (i + 1) ^ (uint32_t)len;
	for (size_t i = 0; i < path_len; i++)
		path[i] = i % 16 == 0 ? '/' : (char)('a' + i % 26);

	hl = store_hdr_len(len, path_len);
	assert_int_equal(hl % KV_ALIGN, 0);
	assert_true(hl >= raw);
	assert_true(hl - raw < KV_ALIGN);
	h = ts_alloc(hl + KV_ALIGN);
	assert_non_null(h);
	memset(h, 0xa5, hl + KV_ALIGN);
	assert_int_equal(
		store_hdr_encode(h, type, seq, ino, len, crcs, path, path_len),
		hl);
	for (uint32_t i = hl; i < hl + KV_ALIGN; i++)
		assert_int_equal(h[i], 0xa5);

	/* The documented layout, byte for byte. */
	assert_memory_equal(h, "KVFSREC1", 8);
	assert_int_equal(ts_le32(h + 8), STORE_FORMAT_VERSION);
	assert_int_equal(ts_le32(h + 12), type);
	assert_int_equal(ts_le32(h + 16), hl);
	assert_int_equal(ts_le32(h + 20), ts_hdr_crc(h, hl));
	assert_int_equal(ts_le64(h + 24), seq);
	assert_int_equal(ts_le64(h + 32), ino);
	assert_int_equal(ts_le64(h + 40), len);
	assert_int_equal(ts_le32(h + 48), KV_CHUNK_SIZE);
	assert_int_equal(ts_le32(h + 52), n);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(ts_le32(h + TS_HDR_FIXED + 4 * i), crcs[i]);
	assert_int_equal(ts_le32(h + TS_HDR_FIXED + 4 * n), path_len);
	if (path_len)
		assert_memory_equal(h + TS_HDR_FIXED + 4 * n + 4, path,
				    path_len);
	for (uint64_t i = raw; i < hl; i++)
		assert_int_equal(h[i], 0);

	memset(&d, 0xcc, sizeof(d));
	assert_int_equal(store_hdr_decode(h, hl, &d), 0);
	assert_int_equal(d.type, type);
	assert_int_equal(d.hdr_len, hl);
	assert_int_equal(d.seq, seq);
	assert_int_equal(d.ino, ino);
	assert_int_equal(d.len, len);
	assert_int_equal(d.nchunks, n);
	assert_ptr_equal(d.crcs, h + TS_HDR_FIXED);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(ts_le32(d.crcs + 4 * i), crcs[i]);
	assert_int_equal(d.path_len, path_len);
	if (path_len)
		assert_memory_equal(d.path, path, path_len);
	/* More bytes than the header is fine; fewer asks for more. */
	assert_int_equal(store_hdr_decode(h, hl + KV_ALIGN, &d), 0);
	assert_int_equal(store_hdr_decode(h, hl - 1, &d), -EAGAIN);
	assert_int_equal(store_hdr_decode(h, TS_HDR_FIXED, &d), -EAGAIN);
	if (hl > KV_ALIGN)
		assert_int_equal(store_hdr_decode(h, KV_ALIGN, &d), -EAGAIN);
	ts_free(h);
	ts_free(path);
	ts_free(crcs);
}

/*
 * Chunk CRCs over pieces that split chunks at odd places equal those of
 * the flat buffer; with from, the CRCs given are kept as they are and
 * only the chunks after them are computed.
 */
static void test_chunk_crcs_iov_from(void **state)
{
	const uint64_t len = 5 * KV_CHUNK_SIZE + 1234;
	const size_t cuts[] = {4096, 3 * KV_CHUNK_SIZE - 4096 + 17,
			       KV_CHUNK_SIZE + 100};
	uint32_t n = kv_nchunks(len), want[8], got[8];
	unsigned char *buf = malloc(len);
	struct iovec iov[4];
	size_t at = 0;
	int cnt = 0;

	(void)state;
	assert_non_null(buf);
	for (uint64_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 13 + (i >> 9));
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		iov[cnt++] = (struct iovec){buf + at, cuts[i]};
		at += cuts[i];
	}
	iov[cnt++] = (struct iovec){buf + at, len - at};
	store_chunk_crcs(buf, len, want);
	for (uint32_t from = 0; from <= n; from++) {
		for (uint32_t c = 0; c < 8; c++)
			got[c] = 0xdead0000u + c;
		store_chunk_crcs_iov(iov, cnt, len, got, from);
		for (uint32_t c = 0; c < n; c++)
			assert_int_equal(got[c],
					 c < from ? 0xdead0000u + c : want[c]);
		assert_int_equal(got[n], 0xdead0000u + n);
	}
	free(buf);
}

static void test_hdr_roundtrip(void **state)
{
	(void)state;
	for (size_t i = 0; i < TS_NSIZES; i++) {
		uint64_t len = ts_sizes[i];
		uint32_t n = kv_nchunks(len);
		/* The longest path whose header still fits one page. */
		size_t fit = KV_ALIGN - TS_HDR_FIXED - 4 * n - 4;
		size_t plens[] = {0, 1, 22, fit, fit + 1, STORE_PATH_MAX};

		for (size_t j = 0; j < sizeof(plens) / sizeof(plens[0]); j++)
			ts_hdr_roundtrip(len, plens[j], STORE_REC_DATA);
		assert_int_equal(store_hdr_len(len, fit), KV_ALIGN);
		assert_int_equal(store_hdr_len(len, fit + 1), 2 * KV_ALIGN);
		assert_true(store_hdr_len(len, STORE_PATH_MAX) > KV_ALIGN);
	}
	ts_hdr_roundtrip(0, 17, STORE_REC_NAME);
	ts_hdr_roundtrip(0, STORE_PATH_MAX, STORE_REC_NAME);
}

/* A valid header to corrupt: 3 chunks, path of path_len bytes. */
static unsigned char *ts_mk_hdr(size_t path_len, uint32_t *hl)
{
	const uint64_t len = 2ull * KV_CHUNK_SIZE + 1;
	uint32_t crcs[3] = {0x11111111u, 0x22222222u, 0x33333333u};
	char *path = ts_alloc(path_len + 1);
	unsigned char *h;
	struct store_hdr d;

	assert_non_null(path);
	memset(path, 'p', path_len);
	*hl = store_hdr_len(len, path_len);
	h = ts_alloc(*hl);
	assert_non_null(h);
	store_hdr_encode(h, STORE_REC_DATA, 99, 5, len, crcs, path, path_len);
	assert_int_equal(store_hdr_decode(h, *hl, &d), 0);
	ts_free(path);
	return h;
}

static void test_hdr_decode_rejects(void **state)
{
	struct store_hdr d;
	unsigned char *h, *c;
	uint32_t hl;

	(void)state;
	h = ts_mk_hdr(9, &hl);
	assert_int_equal(hl, KV_ALIGN);
	c = ts_alloc(hl);
	assert_non_null(c);

	/* Bad magic, each byte, even with a correct CRC. */
	for (int i = 0; i < 8; i++) {
		memcpy(c, h, hl);
		c[i] ^= 0x20;
		ts_hdr_reseal(c, hl);
		assert_int_equal(store_hdr_decode(c, hl, &d), -EINVAL);
	}
	/* Field edits, resealed so the field check (not the CRC) decides. */
	{
		static const struct {
			unsigned off, width;
			uint64_t val;
		} bad[] = {
			{8, 4, 0},
			{8, 4, STORE_FORMAT_VERSION + 1},
			{12, 4, 0},
			{12, 4, 6}, /* types are 1 to 5 */
			{16, 4, 0},
			{16, 4, KV_ALIGN / 2},
			{16, 4, KV_ALIGN + 1},
			{48, 4, KV_CHUNK_SIZE / 2},
			{52, 4, 2}, /* chunk count one short */
			{52, 4, 4}, /* one too many */
			{52, 4, 0},
			{40, 8, 3ull * KV_CHUNK_SIZE + 1}, /* length needs 4 */
			{40, 8, 2ull * KV_CHUNK_SIZE},	   /* length needs 2 */
			{40, 8, 0},
			/* path runs past the header */
			{TS_HDR_FIXED + 12, 4,
			 KV_ALIGN - TS_HDR_FIXED - 16 + 1},
			{TS_HDR_FIXED + 12, 4, 0xffffffffu},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memcpy(c, h, hl);
			if (bad[i].width == 4)
				ts_put_le32(c + bad[i].off,
					    (uint32_t)bad[i].val);
			else
				ts_put_le64(c + bad[i].off, bad[i].val);
			ts_hdr_reseal(c, hl);
			if (store_hdr_decode(c, hl, &d) != -EINVAL)
				fail_msg("field at %u = %llu accepted",
					 bad[i].off,
					 (unsigned long long)bad[i].val);
		}
	}
	/* The reseal itself is sound: edits that stay consistent pass. */
	memcpy(c, h, hl);
	ts_put_le64(c + 40, 2ull * KV_CHUNK_SIZE + 77);
	ts_put_le32(c + TS_HDR_FIXED + 12, KV_ALIGN - TS_HDR_FIXED - 16);
	ts_hdr_reseal(c, hl);
	assert_int_equal(store_hdr_decode(c, hl, &d), 0);
	assert_int_equal(d.len, 2ull * KV_CHUNK_SIZE + 77);
	assert_int_equal(d.path_len, KV_ALIGN - TS_HDR_FIXED - 16);

	/* Too few bytes for the header it announces. */
	assert_int_equal(store_hdr_decode(h, hl - 1, &d), -EAGAIN);
	assert_int_equal(store_hdr_decode(h, 100, &d), -EAGAIN);
	ts_free(c);
	ts_free(h);
}

/*
 * A flipped byte anywhere is caught. A flip in the header length may
 * instead announce a longer header than we have: -EAGAIN (read more),
 * which a torn tail then turns into a rejection.
 */
static void test_hdr_decode_flips(void **state)
{
	struct store_hdr d;
	unsigned char *h, *c;
	uint32_t hl;

	(void)state;
	for (int v = 0; v < 2; v++) {
		size_t plen = v ? STORE_PATH_MAX : 9;

		h = ts_mk_hdr(plen, &hl);
		c = ts_alloc(hl);
		assert_non_null(c);
		for (uint32_t i = 0; i < hl; i++) {
			static const unsigned char flips[] = {0x01, 0x80};

			for (int f = 0; f < 2; f++) {
				int rc;

				memcpy(c, h, hl);
				c[i] ^= flips[f];
				rc = store_hdr_decode(c, hl, &d);
				if (rc == -EINVAL ||
				    (rc == -EAGAIN && i >= 16 && i < 20))
					continue;
				fail_msg("hdr_len %u: flip 0x%02x at byte %u "
					 "gave %d",
					 hl, flips[f], i, rc);
			}
		}
		ts_free(c);
		ts_free(h);
	}
}

/* ---- walking a data file ---- */

struct tr_ctx {
	char dir[256];
	char path[300];
	int fd;
};

static int tr_setup(void **state)
{
	struct tr_ctx *t = calloc(1, sizeof(*t));
	const char *tmp = getenv("TMPDIR");

	if (!t)
		return -1;
	snprintf(t->dir, sizeof(t->dir), "%s/kvfs-record-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	snprintf(t->path, sizeof(t->path), "%s/000001.kvd", t->dir);
	t->fd = open(t->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (t->fd < 0)
		return -1;
	*state = t;
	return 0;
}

static int tr_teardown(void **state)
{
	struct tr_ctx *t = *state;

	close(t->fd);
	unlink(t->path);
	rmdir(t->dir);
	free(t);
	return 0;
}

/*
 * Writes a record of type for ino at off: header, then len payload bytes
 * (seeded pattern) padded to KV_ALIGN, or only up to keep bytes of the
 * whole record when keep is not 0 (a torn append). Returns its span.
 */
static uint64_t tr_put(struct tr_ctx *t, uint64_t off, uint32_t type,
		       uint64_t ino, uint64_t len, const char *path,
		       uint64_t keep)
{
	uint32_t n = kv_nchunks(len), hl = store_hdr_len(len, strlen(path));
	uint64_t span = hl + kv_align_up(len);
	unsigned char *buf = calloc(1, span);
	uint32_t *crcs = calloc(n + 1, sizeof(*crcs));

	assert_non_null(buf);
	assert_non_null(crcs);
	for (uint64_t i = 0; i < len; i++)
		buf[hl + i] = (unsigned char)(i * 7 + ino);
	store_chunk_crcs(buf + hl, len, crcs);
	store_hdr_encode(buf, type, 100 + ino, ino, len, crcs, path,
			 strlen(path));
	assert_int_equal(pwrite(t->fd, buf, keep ? keep : span, (off_t)off),
			 (ssize_t)(keep ? keep : span));
	free(crcs);
	free(buf);
	return span;
}

static void tr_garbage(struct tr_ctx *t, uint64_t off, size_t len)
{
	unsigned char *g = malloc(len);

	assert_non_null(g);
	memset(g, 0xa5, len);
	assert_int_equal(pwrite(t->fd, g, len, (off_t)off), (ssize_t)len);
	free(g);
}

/* Expects a whole record of ino at off; returns its next. */
static uint64_t tr_expect_ok(struct record_iter *it, uint64_t off, uint64_t ino,
			     uint64_t len)
{
	struct record r;

	assert_int_equal(record_iter_next(it, &r), RECORD_OK);
	assert_int_equal(r.off, off);
	assert_int_equal(r.hdr.ino, ino);
	assert_int_equal(r.hdr.seq, 100 + ino);
	assert_int_equal(r.hdr.len, len);
	assert_int_equal(r.span, r.hdr.hdr_len + kv_align_up(len));
	assert_int_equal(r.next, off + r.span);
	assert_int_equal(record_iter_tell(it), r.next);
	return r.next;
}

static void tr_expect_end(struct record_iter *it, uint64_t off)
{
	struct record r;

	assert_int_equal(record_iter_next(it, &r), RECORD_END);
	assert_int_equal(r.off, off);
	/* The end stays the end. */
	assert_int_equal(record_iter_next(it, &r), RECORD_END);
}

static void test_walk_whole(void **state)
{
	struct tr_ctx *t = *state;
	struct record_iter it;
	struct record r;
	uint64_t o[5];

	o[0] = 0;
	o[1] = o[0] + tr_put(t, o[0], STORE_REC_DATA, 1, 5000, "/a", 0);
	o[2] = o[1] + tr_put(t, o[1], STORE_REC_NAME, 1, 0, "/b", 0);
	o[3] = o[2] + tr_put(t, o[2], STORE_REC_DATA, 2, 0, "/empty", 0);
	o[4] = o[3] +
	       tr_put(t, o[3], STORE_REC_DATA, 3, KV_CHUNK_SIZE + 1, "/c", 0);

	assert_int_equal(record_iter_open(&it, t->fd, 0, NULL), 0);
	assert_int_equal(it.size, o[4]);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.hdr.type, STORE_REC_DATA);
	assert_int_equal(r.hdr.path_len, 2);
	assert_memory_equal(r.hdr.path, "/a", 2);
	assert_int_equal(r.next, o[1]);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.hdr.type, STORE_REC_NAME);
	assert_int_equal(r.off, o[1]);
	assert_int_equal(r.span, KV_ALIGN);
	tr_expect_ok(&it, o[2], 2, 0);
	tr_expect_ok(&it, o[3], 3, KV_CHUNK_SIZE + 1);
	tr_expect_end(&it, o[4]);
	record_iter_close(&it);

	/* From a record boundary, and by name in a directory. */
	{
		int dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		assert_true(dfd >= 0);
		assert_int_equal(
			record_iter_open_at(&it, dfd, "000001.kvd", o[2], NULL),
			0);
		close(dfd);
	}
	tr_expect_ok(&it, o[2], 2, 0);
	tr_expect_ok(&it, o[3], 3, KV_CHUNK_SIZE + 1);
	tr_expect_end(&it, o[4]);
	/* Seeking back walks again. */
	record_iter_seek(&it, o[1]);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.off, o[1]);
	record_iter_close(&it);
	record_iter_close(&it); /* twice is fine */

	/* An empty file ends at once. */
	assert_int_equal(ftruncate(t->fd, 0), 0);
	assert_int_equal(record_iter_open(&it, t->fd, 0, NULL), 0);
	tr_expect_end(&it, 0);
	record_iter_close(&it);
}

static void test_walk_torn_tail(void **state)
{
	struct tr_ctx *t = *state;
	struct record_iter it;
	struct record r;
	uint64_t a, span;

	a = tr_put(t, 0, STORE_REC_DATA, 1, 3000, "/a", 0);
	/* A two-page header (long path) cut after its first page. */
	{
		char path[5000];

		memset(path, 'p', 4500);
		path[0] = '/';
		path[4500] = '\0';
		tr_put(t, a, STORE_REC_DATA, 2, 100, path, KV_ALIGN);
	}
	assert_int_equal(record_iter_open(&it, t->fd, 0, NULL), 0);
	tr_expect_ok(&it, 0, 1, 3000);
	assert_int_equal(record_iter_next(&it, &r), RECORD_TORN);
	assert_int_equal(r.off, a);
	assert_int_equal(r.hdr.hdr_len, 2 * KV_ALIGN);
	/* Not moved on: the caller decides. */
	assert_int_equal(record_iter_tell(&it), a);
	record_iter_close(&it);

	/* A payload cut short: the header decodes, the record is short. */
	assert_int_equal(ftruncate(t->fd, (off_t)a), 0);
	span = tr_put(t, a, STORE_REC_DATA, 3, 3 * KV_ALIGN, "/c",
		      2 * KV_ALIGN + 100);
	assert_int_equal(record_iter_open(&it, t->fd, 0, NULL), 0);
	tr_expect_ok(&it, 0, 1, 3000);
	assert_int_equal(record_iter_next(&it, &r), RECORD_SHORT);
	assert_int_equal(r.off, a);
	assert_int_equal(r.hdr.ino, 3);
	assert_int_equal(r.next, a + span);
	assert_true(r.next > it.size);
	assert_int_equal(record_iter_tell(&it), a);
	/* Past it: the end. */
	record_iter_seek(&it, r.next);
	tr_expect_end(&it, a + span);
	record_iter_close(&it);

	/* A tail shorter than a header's fixed part does not decode. */
	assert_int_equal(ftruncate(t->fd, (off_t)a), 0);
	tr_put(t, a, STORE_REC_DATA, 4, 0, "/d", 40);
	assert_int_equal(record_iter_open(&it, t->fd, 0, NULL), 0);
	tr_expect_ok(&it, 0, 1, 3000);
	assert_int_equal(record_iter_next(&it, &r), RECORD_INVALID);
	assert_int_equal(r.off, a);
	record_iter_skip(&it);
	tr_expect_end(&it, a + KV_ALIGN);
	record_iter_close(&it);
}

static void test_walk_garbage_and_holes(void **state)
{
	struct tr_ctx *t = *state;
	struct record_iter_opts resync = {.resync = 1};
	struct record_iter_opts holes = {.resync = 1, .skip_holes = 1};
	struct record_iter it;
	struct record r;
	uint64_t a, g, b, h, c, end;

	a = 0;
	g = a + tr_put(t, a, STORE_REC_DATA, 1, 5000, "/a", 0);
	tr_garbage(t, g, 2 * KV_ALIGN);
	b = g + 2 * KV_ALIGN;
	h = b + tr_put(t, b, STORE_REC_NAME, 2, 0, "/b", 0);
	c = h + tr_put(t, h, STORE_REC_DATA, 9, 70000, "/hole", 0);
	end = c + tr_put(t, c, STORE_REC_DATA, 3, 10, "/c", 0);
	/* The record at h is freed: punched to a hole. */
	assert_int_equal(fallocate(t->fd,
				   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   (off_t)h, (off_t)(c - h)),
			 0);

	/* Without resync: every bad page is reported and skipped by hand. */
	assert_int_equal(record_iter_open(&it, t->fd, 0, NULL), 0);
	tr_expect_ok(&it, a, 1, 5000);
	assert_int_equal(record_iter_next(&it, &r), RECORD_INVALID);
	assert_int_equal(r.off, g);
	record_iter_skip(&it);
	assert_int_equal(record_iter_next(&it, &r), RECORD_INVALID);
	assert_int_equal(r.off, g + KV_ALIGN);
	record_iter_skip(&it);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.off, b);
	assert_int_equal(record_iter_next(&it, &r), RECORD_INVALID);
	assert_int_equal(r.off, h);
	record_iter_seek(&it, c);
	tr_expect_ok(&it, c, 3, 10);
	tr_expect_end(&it, end);
	record_iter_close(&it);

	/* With resync, the garbage and the hole are passed and counted. */
	assert_int_equal(record_iter_open(&it, t->fd, 0, &resync), 0);
	tr_expect_ok(&it, a, 1, 5000);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.off, b);
	assert_int_equal(r.skipped, b - g);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.off, c);
	assert_int_equal(r.skipped, c - h);
	assert_int_equal(record_iter_next(&it, &r), RECORD_END);
	record_iter_close(&it);

	/* With hole skipping too: the same records. */
	assert_int_equal(record_iter_open(&it, t->fd, 0, &holes), 0);
	tr_expect_ok(&it, a, 1, 5000);
	tr_expect_ok(&it, b, 2, 0);
	assert_int_equal(record_iter_next(&it, &r), RECORD_OK);
	assert_int_equal(r.off, c);
	assert_int_equal(r.skipped, c - h);
	tr_expect_end(&it, end);
	record_iter_close(&it);

	/* Garbage to the end: resync reaches the end. */
	tr_garbage(t, end, 3 * KV_ALIGN + 17);
	assert_int_equal(record_iter_open(&it, t->fd, c, &resync), 0);
	tr_expect_ok(&it, c, 3, 10);
	assert_int_equal(record_iter_next(&it, &r), RECORD_END);
	assert_int_equal(r.skipped, 3 * KV_ALIGN + 17);
	record_iter_close(&it);
}

/* Headers longer than the read window are read whole. */
static void test_walk_long_headers(void **state)
{
	struct tr_ctx *t = *state;
	struct record_iter_opts small = {.window = 100}; /* one page */
	/* 5000 chunks of CRCs: a 20 KiB header, over RECORD_READ. */
	const uint64_t huge = 5000ull * KV_CHUNK_SIZE;
	uint32_t hl = store_hdr_len(huge, 2);
	uint64_t a, b, end;
	struct record_iter it;
	char path[5000];

	assert_true(hl > RECORD_READ);
	memset(path, 'q', 4200);
	path[0] = '/';
	path[4200] = '\0';
	a = tr_put(t, 0, STORE_REC_NAME, 1, 0, path, 0);
	assert_int_equal(a, 2 * KV_ALIGN);
	b = a + tr_put(t, a, STORE_REC_DATA, 2, 10, "/x", 0);
	/* The huge record: its header, then a sparse payload. */
	{
		uint32_t *crcs = calloc(kv_nchunks(huge), sizeof(*crcs));
		unsigned char *h = calloc(1, hl);

		assert_non_null(crcs);
		assert_non_null(h);
		store_hdr_encode(h, STORE_REC_DATA, 103, 3, huge, crcs, "/h",
				 2);
		assert_int_equal(pwrite(t->fd, h, hl, (off_t)b), (ssize_t)hl);
		free(h);
		free(crcs);
	}
	end = b + hl + huge;
	assert_int_equal(ftruncate(t->fd, (off_t)end), 0);

	assert_int_equal(record_iter_open(&it, t->fd, 0, &small), 0);
	tr_expect_ok(&it, 0, 1, 0);
	tr_expect_ok(&it, a, 2, 10);
	assert_int_equal(tr_expect_ok(&it, b, 3, huge), end);
	tr_expect_end(&it, end);
	record_iter_close(&it);

	assert_int_equal(record_iter_open(&it, t->fd, b, NULL), 0);
	assert_int_equal(tr_expect_ok(&it, b, 3, huge), end);
	record_iter_close(&it);

	/* The huge header cut by the end of the file: torn. */
	assert_int_equal(ftruncate(t->fd, (off_t)(b + 3 * KV_ALIGN)), 0);
	assert_int_equal(record_iter_open(&it, t->fd, a, NULL), 0);
	tr_expect_ok(&it, a, 2, 10);
	{
		struct record r;

		assert_int_equal(record_iter_next(&it, &r), RECORD_TORN);
		assert_int_equal(r.off, b);
		assert_int_equal(r.hdr.hdr_len, hl);
	}
	record_iter_close(&it);
}

/* Reads through injected ops: retried transients, short transfers. */
static void test_walk_ops(void **state)
{
	struct tr_ctx *t = *state;
	struct fake_io fio;
	struct store_io_ops ops;
	struct record_iter_opts o = {.ops = &ops};
	struct record_iter it;
	struct record r;
	uint64_t a, b, end;

	fake_io_init(&fio);
	ops = fake_io_ops(&fio);
	a = tr_put(t, 0, STORE_REC_DATA, 1, 5000, "/a", 0);
	b = a + tr_put(t, a, STORE_REC_DATA, 2, 3 * KV_CHUNK_SIZE, "/b", 0);
	end = b + tr_put(t, b, STORE_REC_NAME, 3, 0, "/c", 0);

	fio.rule[FAKE_IO_PREADV].max_xfer = 1000;
	fio.rule[FAKE_IO_PREADV].ntransient = 3;
	fio.rule[FAKE_IO_PREADV].transient_err = -EINTR;
	assert_int_equal(record_iter_open(&it, t->fd, 0, &o), 0);
	assert_int_equal(fake_io_calls(&fio, FAKE_IO_SIZE), 1);
	tr_expect_ok(&it, 0, 1, 5000);
	tr_expect_ok(&it, a, 2, 3 * KV_CHUNK_SIZE);
	tr_expect_ok(&it, b, 3, 0);
	tr_expect_end(&it, end);
	assert_true(fake_io_calls(&fio, FAKE_IO_PREADV) > 3);
	record_iter_close(&it);

	/* Too many transients, or a hard error, come back as errors. */
	fake_io_clear(&fio);
	fio.rule[FAKE_IO_PREADV].ntransient = 100;
	fio.rule[FAKE_IO_PREADV].transient_err = -EAGAIN;
	assert_int_equal(record_iter_open(&it, t->fd, 0, &o), 0);
	assert_int_equal(record_iter_next(&it, &r), -EAGAIN);
	record_iter_close(&it);
	fake_io_clear(&fio);
	fio.rule[FAKE_IO_PREADV].fail_at = 2;
	fio.rule[FAKE_IO_PREADV].fail_err = -EIO;
	assert_int_equal(record_iter_open(&it, t->fd, a, &o), 0);
	tr_expect_ok(&it, a, 2, 3 * KV_CHUNK_SIZE);
	assert_int_equal(record_iter_next(&it, &r), -EIO);
	record_iter_close(&it);
	/* The file ends before its size said: an error, not an end. */
	fake_io_clear(&fio);
	fio.rule[FAKE_IO_PREADV].short_at = 1;
	fio.rule[FAKE_IO_PREADV].short_len = 0;
	assert_int_equal(record_iter_open(&it, t->fd, 0, &o), 0);
	assert_int_equal(record_iter_next(&it, &r), -EIO);
	record_iter_close(&it);
	/* A size error fails the open. */
	fake_io_clear(&fio);
	fio.rule[FAKE_IO_SIZE].fail_at = 1;
	fio.rule[FAKE_IO_SIZE].fail_err = -EBADF;
	assert_int_equal(record_iter_open(&it, t->fd, 0, &o), -EBADF);
	record_iter_close(&it);
	fake_io_destroy(&fio);
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_crc32c_vectors,
					  tr_codec_teardown),
		cmocka_unit_test_teardown(test_crc32c_incremental_unaligned,
					  tr_codec_teardown),
		cmocka_unit_test_teardown(test_crc32c_three_lanes,
					  tr_codec_teardown),
		cmocka_unit_test_teardown(test_chunk_crcs_iov_from,
					  tr_codec_teardown),
		cmocka_unit_test_teardown(test_hdr_roundtrip,
					  tr_codec_teardown),
		cmocka_unit_test_teardown(test_hdr_decode_rejects,
					  tr_codec_teardown),
		cmocka_unit_test_teardown(test_hdr_decode_flips,
					  tr_codec_teardown),
#define T(fn) cmocka_unit_test_setup_teardown(fn, tr_setup, tr_teardown)
		T(test_walk_whole),
		T(test_walk_torn_tail),
		T(test_walk_garbage_and_holes),
		T(test_walk_long_headers),
		T(test_walk_ops),
#undef T
	};

	return cmocka_run_group_tests_name("record", tests, NULL, NULL);
}
