/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the walk over a data file's records (core/record.c):
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
