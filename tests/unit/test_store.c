/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the block store (core/store.c, store_io.c): append and read
 * through the real io_uring ops, data-file naming and reopening, freeing,
 * lanes of writer threads, name records (also batched), recovery horizons
 * and statistics. Faults are in test_store_faults.c, the record codec and
 * CRC32C in test_record.c; the shared helpers in test_store.h. Each test
 * gets its own mkdtemp data directory. The whole binary exits 77 when
 * io_uring is unavailable. cmocka asserts run on the main thread only;
 * helper threads record results.
 */
#include "test_store.h"

/* ---- append and read through io_uring ---- */

static void test_append_read_roundtrip(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_rec r[TS_NSIZES + 1];
	uint64_t tail = 0, prev_seq = 0;
	char list[512], path[64];

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	for (size_t i = 0; i <= TS_NSIZES; i++) {
		/* The last one carries a path that needs a two-page header. */
		char *lp = NULL;

		ts_rec_init(&r[i],
			    i < TS_NSIZES ? ts_sizes[i] : 3 * KV_CHUNK_SIZE + 7,
			    (uint32_t)i + 1);
		snprintf(path, sizeof(path), "/kv/blk-%zu", i);
		if (i == TS_NSIZES) {
			lp = ts_alloc(STORE_PATH_MAX + 1);
			assert_non_null(lp);
			memset(lp, 'L', STORE_PATH_MAX);
			lp[STORE_PATH_MAX] = '\0';
		}
		ts_rec_append(t->st, &r[i], 100 + i, lp ? lp : path);
		assert_int_equal(r[i].ext.file_id, 1);
		/* Records are packed back to back without overlap. */
		assert_int_equal(r[i].ext.off, tail);
		assert_int_equal(kv_extent_span(&r[i].ext),
				 r[i].ext.hdr_len + kv_align_up(r[i].len));
		if (lp)
			assert_int_equal(r[i].ext.hdr_len, 2 * KV_ALIGN);
		tail += kv_extent_span(&r[i].ext);
		ts_free(lp);
	}
	ts_list_data(t, list, sizeof(list));
	assert_string_equal(list, "000001.kvd");
	assert_int_equal(ts_file_size(t, 1), tail);

	for (size_t i = 0; i <= TS_NSIZES; i++) {
		struct store_hdr h;
		unsigned char *hb;

		ts_check_read(t->st, &r[i], 0, (size_t)r[i].len);
		hb = ts_read_hdr(t, 1, r[i].ext.off, &h);
		assert_int_equal(h.type, STORE_REC_DATA);
		assert_int_equal(h.hdr_len, r[i].ext.hdr_len);
		assert_int_equal(h.ino, 100 + i);
		assert_int_equal(h.len, r[i].len);
		assert_true(h.seq > prev_seq);
		prev_seq = h.seq;
		for (uint32_t c = 0; c < h.nchunks; c++)
			assert_int_equal(ts_le32(h.crcs + 4 * c), r[i].crcs[c]);
		if (i < TS_NSIZES) {
			snprintf(path, sizeof(path), "/kv/blk-%zu", i);
			assert_int_equal(h.path_len, strlen(path));
			assert_memory_equal(h.path, path, h.path_len);
		} else {
			assert_int_equal(h.path_len, STORE_PATH_MAX);
		}
		ts_free(hb);
	}
	for (size_t i = 0; i <= TS_NSIZES; i++)
		ts_rec_free(&r[i]);
}

static void test_read_ranges(void **state)
{
	struct ts_ctx *t = *state;
	const uint64_t len = 5ull * KV_CHUNK_SIZE + 1234;
	struct ts_rec a, r, b;
	static const struct {
		uint64_t off;
		size_t len;
	} ranges[] = {
		{0, 1},
		{1, 1},
		{4095, 2},
		{4096, 4096},
		{KV_CHUNK_SIZE - 1, 2},
		{KV_CHUNK_SIZE, KV_CHUNK_SIZE},
		{3 * KV_CHUNK_SIZE - 100, KV_CHUNK_SIZE + 200},
		{12345, 3 * KV_CHUNK_SIZE + 17},
		{0, 5 * KV_CHUNK_SIZE + 1234},
		{0, 8 * TS_MIB},
		{5 * KV_CHUNK_SIZE + 1233, 1},
		{5 * KV_CHUNK_SIZE + 1233, 10},
		{5 * KV_CHUNK_SIZE + 1000, 4096},
		{5 * KV_CHUNK_SIZE, 1234},
		{5 * KV_CHUNK_SIZE + 1234, 1},
		{5 * KV_CHUNK_SIZE + 9000, 10},
		{100, 0},
		{0, 0},
	};
	uint64_t x = 88172645463325252ull;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&a, 5000, 11);
	ts_rec_init(&r, len, 12);
	ts_rec_init(&b, 3 * KV_CHUNK_SIZE, 13);
	ts_rec_append(t->st, &a, 1, "/a");
	ts_rec_append(t->st, &r, 2, "/r");
	ts_rec_append(t->st, &b, 3, "/b");
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		ts_check_read(t->st, &r, ranges[i].off, ranges[i].len);
	for (int i = 0; i < 300; i++) {
		uint64_t off, rl;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		off = x % (len + 5000);
		rl = (x >> 32) % (i % 3 ? 9000 : 2 * KV_CHUNK_SIZE + 5);
		ts_check_read(t->st, &r, off, (size_t)rl);
	}
	/* The neighbours are untouched. */
	ts_check_read(t->st, &a, 0, 5000);
	ts_check_read(t->st, &b, 0, (size_t)b.len);
	ts_rec_free(&a);
	ts_rec_free(&r);
	ts_rec_free(&b);
}

/*
 * "clipped to its length" must hold for any len, including one that
 * overflows off + len (a caller asking for "everything from off").
 */
static void test_read_huge_len_clipped(void **state)
{
	struct ts_ctx *t = *state;
	const void *data = NULL;
	struct ts_rec r;
	size_t n = 0;
	int rc;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&r, 10000, 21);
	ts_rec_append(t->st, &r, 1, "/r");
	ts_check_read(t->st, &r, 0, SIZE_MAX);
	/* crcs NULL: with CRCs the same bug walks chunks past the buffer. */
	rc = store_read(t->st, &r.ext, NULL, 1, SIZE_MAX, &data, &n);
	assert_int_equal(rc, 0);
	assert_int_equal(n, r.len - 1);
	ts_assert_bytes(data, r.buf + 1, (size_t)r.len - 1, "read");
	ts_rec_free(&r);
}

/*
 * store_read_segs: chunk-aligned reads land in the caller's buffers, byte
 * for byte and checked, across buffers as in one; misaligned calls are
 * refused; a flipped byte and a cut data file give the same errors as
 * store_read.
 */
static void test_read_segs(void **state)
{
	struct ts_ctx *t = *state;
	const uint64_t len = 3ull * KV_CHUNK_SIZE + 5000;
	const size_t one = 4 * KV_CHUNK_SIZE; /* one buffer for all */
	const size_t seg = 2 * KV_CHUNK_SIZE;
	struct ts_rec a, r;
	unsigned char v;
	char *buf = NULL, *segs[2] = {NULL, NULL}, *bad;
	size_t n = 1;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&a, 7000, 31);
	ts_rec_init(&r, len, 32);
	ts_rec_append(t->st, &a, 1, "/a");
	ts_rec_append(t->st, &r, 2, "/r");
	assert_int_equal(posix_memalign((void **)&buf, KV_ALIGN, one), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(
			posix_memalign((void **)&segs[i], KV_ALIGN, seg), 0);
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs, 0, SIZE_MAX,
					 &buf, one, &n),
			 0);
	assert_int_equal(n, len);
	ts_assert_bytes(buf, r.buf, (size_t)len, "read_segs whole");
	/* Two buffers of two chunks: the second holds the rest. */
	n = 1;
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs, 0, SIZE_MAX,
					 segs, seg, &n),
			 0);
	assert_int_equal(n, len);
	ts_assert_bytes(segs[0], r.buf, seg, "read_segs buffer 0");
	ts_assert_bytes(segs[1], r.buf + seg, (size_t)len - seg,
			"read_segs buffer 1");
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs,
					 2 * KV_CHUNK_SIZE, KV_CHUNK_SIZE, &buf,
					 one, &n),
			 0);
	assert_int_equal(n, KV_CHUNK_SIZE);
	ts_assert_bytes(buf, r.buf + 2 * KV_CHUNK_SIZE, KV_CHUNK_SIZE,
			"read_segs chunk 2");
	/* The tail: clipped to the record, 5000 bytes of a last chunk. */
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs,
					 3 * KV_CHUNK_SIZE, KV_CHUNK_SIZE, &buf,
					 one, &n),
			 0);
	assert_int_equal(n, 5000);
	ts_assert_bytes(buf, r.buf + 3 * KV_CHUNK_SIZE, 5000, "read_segs tail");
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs,
					 4 * KV_CHUNK_SIZE, 10, &buf, one, &n),
			 0);
	assert_int_equal(n, 0);
	assert_int_equal(
		store_read_segs(t->st, &r.ext, r.crcs, 4096, 10, &buf, one, &n),
		-EINVAL);
	bad = buf + 1;
	assert_int_equal(
		store_read_segs(t->st, &r.ext, r.crcs, 0, 10, &bad, one, &n),
		-EINVAL);
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs, 0, SIZE_MAX,
					 segs, seg + 4096, &n),
			 -EINVAL);
	ts_check_read(t->st, &a, 0, (size_t)a.len);
	/* A flipped byte in chunk 2 fails a read of it, not of chunk 0. */
	v = (unsigned char)(r.buf[2 * KV_CHUNK_SIZE + 9] ^ 0xff);
	ts_file_pwrite(t, 1, &v, 1,
		       r.ext.off + r.ext.hdr_len + 2 * KV_CHUNK_SIZE + 9);
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs, 0, SIZE_MAX,
					 &buf, one, &n),
			 -EBADMSG);
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs, 0, SIZE_MAX,
					 segs, seg, &n),
			 -EBADMSG);
	assert_int_equal(store_read_segs(t->st, &r.ext, r.crcs, 0,
					 KV_CHUNK_SIZE, &buf, one, &n),
			 0);
	/* Cut inside the second buffer: provably short. */
	ts_truncate(t, 1, r.ext.off + r.ext.hdr_len + seg + KV_CHUNK_SIZE);
	assert_int_equal(store_read_segs(t->st, &r.ext, NULL, 0, SIZE_MAX, segs,
					 seg, &n),
			 -ENODATA);
	assert_int_equal(
		store_read_segs(t->st, &r.ext, NULL, 0, seg, segs, seg, &n), 0);
	free(buf);
	free(segs[0]);
	free(segs[1]);
	ts_rec_free(&a);
	ts_rec_free(&r);
}

static void test_file_naming_and_reopen(void **state)
{
	static const char *const strays[] = {"000007.kvd", "000042.kvd.tmp",
					     "12.kvdx", "junk", "x000099.kvd"};
	struct ts_ctx *t = *state;
	struct ts_rec r1, r2, r3;
	char list[512], path[PATH_MAX + 32];
	struct store_hdr h1, h2;
	unsigned char *b1, *b2;
	int fd;

	t->st = ts_open_cfg(t, 2, 0, 0, 0);
	ts_rec_init(&r1, 4096, 31);
	ts_rec_append(t->st, &r1, 1, "/one");
	assert_int_equal(r1.ext.file_id, 1);
	assert_int_equal(r1.ext.off, 0);
	ts_list_data(t, list, sizeof(list));
	assert_string_equal(list, "000001.kvd");
	store_close(t->st);
	t->st = NULL;

	/* Strays: only NNNNNN.kvd counts. */
	for (size_t i = 0; i < sizeof(strays) / sizeof(strays[0]); i++) {
		snprintf(path, sizeof(path), "%s/data/%s", t->dir, strays[i]);
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	t->st = ts_open_cfg(t, 2, 0, 0, 0);
	ts_rec_init(&r2, 5000, 32);
	ts_rec_append(t->st, &r2, 2, "/two");
	assert_int_equal(r2.ext.file_id, 8);
	assert_int_equal(r2.ext.off, 0);
	assert_true(ts_file_exists(t, 8));
	assert_int_equal(ts_file_size(t, 7), 0);
	/* The old record still reads back, through a descriptor opened now. */
	ts_check_read(t->st, &r1, 0, 4096);
	ts_check_read(t->st, &r2, 0, 5000);
	assert_int_equal(ts_file_size(t, 1), kv_extent_span(&r1.ext));
	/* Sequence numbers keep growing across a reopen. */
	b1 = ts_read_hdr(t, 1, 0, &h1);
	b2 = ts_read_hdr(t, 8, 0, &h2);
	assert_true(h2.seq > h1.seq);
	ts_free(b1);
	ts_free(b2);

	ts_reopen(t, 1, 0, 0);
	ts_rec_init(&r3, 1, 33);
	ts_rec_append(t->st, &r3, 3, "/three");
	assert_int_equal(r3.ext.file_id, 9);
	ts_list_data(t, list, sizeof(list));
	assert_string_equal(list, "000001.kvd 000007.kvd 000008.kvd "
				  "000009.kvd 000042.kvd.tmp 12.kvdx junk "
				  "x000099.kvd");
	ts_rec_free(&r1);
	ts_rec_free(&r2);
	ts_rec_free(&r3);
}

/* ---- free ---- */

static void test_free_punches(void **state)
{
	struct ts_ctx *t = *state;
	struct stat sb0, sb1;
	struct ts_rec a, b, c;
	int64_t drop, span;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&a, TS_MIB, 161);
	ts_rec_init(&b, TS_MIB + 5, 162);
	ts_rec_init(&c, TS_MIB, 163);
	ts_rec_append(t->st, &a, 1, "/a");
	ts_rec_append(t->st, &b, 2, "/b");
	ts_rec_append(t->st, &c, 3, "/c");
	span = (int64_t)kv_extent_span(&b.ext);
	ts_file_stat(t, 1, &sb0);
	assert_true((int64_t)sb0.st_blocks * 512 >= 3 * span - 8192);

	assert_int_equal(store_free(t->st, &b.ext, 2), 0);
	ts_file_stat(t, 1, &sb1);
	drop = ((int64_t)sb0.st_blocks - (int64_t)sb1.st_blocks) * 512;
	if (drop < span - 16384 || drop > span + 16384)
		fail_msg("st_blocks dropped %lld bytes, record span %lld",
			 (long long)drop, (long long)span);
	assert_int_equal(sb1.st_size, sb0.st_size);
	assert_int_equal(ts_stats(t->st).frees, 1);
	assert_true(ts_file_exists(t, 1));
	ts_check_read(t->st, &a, 0, TS_MIB);
	ts_check_read(t->st, &c, 0, TS_MIB);
	/* The hole reads as zeros, which the CRCs refuse. */
	ts_expect_read_rc(t->st, &b, b.crcs, 0, 10, -EBADMSG);
	ts_rec_free(&a);
	ts_rec_free(&b);
	ts_rec_free(&c);
}

static void test_free_removes_inactive_file(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_rec a, b, c, d;

	/* Two 44 KiB records do not fit one 64 KiB file: each rotates. */
	t->st = ts_open_cfg(t, 1, 64 * 1024, 0, 0);
	ts_rec_init(&a, 40000, 171);
	ts_rec_init(&b, 40000, 172);
	ts_rec_init(&c, 40000, 173);
	ts_rec_init(&d, 40000, 174);
	ts_rec_append(t->st, &a, 1, "/a");
	ts_rec_append(t->st, &b, 2, "/b");
	assert_int_equal(a.ext.file_id, 1);
	assert_int_equal(b.ext.file_id, 2);
	assert_int_equal(b.ext.off, 0);

	/* Still referenced: kept. */
	assert_int_equal(store_free(t->st, &a.ext, 1), 0);
	assert_true(ts_file_exists(t, 1));
	assert_int_equal(store_free(t->st, &a.ext, 0), 0);
	assert_false(ts_file_exists(t, 1));
	assert_int_equal(ts_stats(t->st).files_removed, 1);
	ts_check_read(t->st, &b, 0, 40000);
	ts_expect_read_rc(t->st, &a, a.crcs, 0, 10, -ENODATA);

	/* The active file stays even with no references. */
	assert_int_equal(store_free(t->st, &b.ext, 0), 0);
	assert_true(ts_file_exists(t, 2));
	assert_int_equal(ts_stats(t->st).files_removed, 1);

	/* A pending (uncommitted) append pins an inactive file. */
	assert_int_equal(ts_rec_try_append(t->st, &c, 3, "/c"), 0);
	assert_int_equal(c.ext.file_id, 3);
	ts_rec_append(t->st, &d, 4, "/d");
	assert_int_equal(d.ext.file_id, 4);
	assert_int_equal(store_free(t->st, &c.ext, 0), 0);
	assert_true(ts_file_exists(t, 3));
	store_append_done(t->st, c.ext.file_id);
	assert_int_equal(store_free(t->st, &c.ext, 0), 0);
	assert_false(ts_file_exists(t, 3));
	assert_int_equal(ts_stats(t->st).files_removed, 2);
	ts_check_read(t->st, &d, 0, 40000);
	ts_rec_free(&a);
	ts_rec_free(&b);
	ts_rec_free(&c);
	ts_rec_free(&d);
}

/*
 * A data file removed behind the store's back (an operator, a tool): its
 * records are provably gone even though a cached descriptor could still read
 * them, and an active file is replaced by a new one.
 */
static void test_file_removed_while_open(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_rec a, b, c;
	char path[PATH_MAX], list[256];
	struct store_stats s;

	t->st = ts_open_cfg(t, 1, 64 * 1024, 0, 0);
	ts_rec_init(&a, 40000, 231);
	ts_rec_init(&b, 40000, 232);
	ts_rec_init(&c, 3000, 233);
	ts_rec_append(t->st, &a, 1, "/a");
	ts_rec_append(t->st, &b, 2, "/b");
	assert_int_equal(a.ext.file_id, 1);
	assert_int_equal(b.ext.file_id, 2);
	ts_check_read(t->st, &a, 0, 40000); /* caches file 1's descriptor */

	ts_data_path(t, 1, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	ts_expect_read_rc(t->st, &a, a.crcs, 0, 40000, -ENODATA);
	ts_expect_read_rc(t->st, &a, NULL, 0, 1, -ENODATA);
	ts_check_read(t->st, &b, 0, 40000);

	/* The active file: the next append starts a new one. */
	ts_data_path(t, 2, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	ts_rec_append(t->st, &c, 3, "/c");
	assert_int_equal(c.ext.file_id, 3);
	assert_int_equal(c.ext.off, 0);
	ts_check_read(t->st, &c, 0, 3000);
	ts_expect_read_rc(t->st, &b, b.crcs, 0, 40000, -ENODATA);
	ts_list_data(t, list, sizeof(list));
	assert_string_equal(list, "000003.kvd");
	s = ts_stats(t->st);
	assert_int_equal(s.short_records, 3);
	assert_int_equal(s.io_errors, 0);
	ts_rec_free(&a);
	ts_rec_free(&b);
	ts_rec_free(&c);
}

/*
 * file_id 0 means "no record" (kvtypes.h), so the store must never hand it
 * out, whatever names it finds in data/ at startup.
 */
static void test_never_issues_file_id_0(void **state)
{
	struct ts_ctx *t = *state;
	char path[PATH_MAX];
	struct ts_rec r;
	int fd, rc;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	store_close(t->st);
	t->st = NULL;
	snprintf(path, sizeof(path), "%s/data/4294967295.kvd", t->dir);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&r, 4096, 241);
	rc = ts_rec_try_append(t->st, &r, 1, "/r");
	if (rc == 0) {
		store_append_done(t->st, r.ext.file_id);
		assert_int_not_equal(r.ext.file_id, 0);
		ts_check_read(t->st, &r, 0, 4096);
	}
	assert_false(ts_file_exists(t, 0));
	ts_rec_free(&r);
}

/* ---- lanes ---- */

#define TS_NTHREADS 4
#define TS_NPERTHREAD 6

struct ts_lane {
	struct store *st;
	pthread_barrier_t *start;
	unsigned idx;
	struct ts_rec r[TS_NPERTHREAD];
	int rc[TS_NPERTHREAD];
};

static void *ts_lane_main(void *arg)
{
	struct ts_lane *l = arg;
	char path[64];

	pthread_barrier_wait(l->start);
	for (int i = 0; i < TS_NPERTHREAD; i++) {
		snprintf(path, sizeof(path), "/t%u/%d", l->idx, i);
		l->rc[i] = ts_rec_try_append(l->st, &l->r[i],
					     l->idx * 100 + (unsigned)i, path);
		if (l->rc[i] == 0)
			store_append_done(l->st, l->r[i].ext.file_id);
	}
	return NULL;
}

static void test_lanes_threads(void **state)
{
	static const uint64_t lens[TS_NPERTHREAD] = {
		1, 4096, 5000, KV_CHUNK_SIZE + 1, TS_MIB, 0,
	};
	struct ts_ctx *t = *state;
	struct ts_lane *l = ts_calloc(TS_NTHREADS, sizeof(*l));
	pthread_t th[TS_NTHREADS];
	pthread_barrier_t start;
	char list[512];

	assert_non_null(l);
	t->st = ts_open_cfg(t, TS_NTHREADS, 0, 0, 0);
	pthread_barrier_init(&start, NULL, TS_NTHREADS);
	for (unsigned i = 0; i < TS_NTHREADS; i++) {
		l[i].st = t->st;
		l[i].start = &start;
		l[i].idx = i;
		for (int j = 0; j < TS_NPERTHREAD; j++)
			ts_rec_init(&l[i].r[j], lens[j], i * 16 + (uint32_t)j);
		assert_int_equal(
			pthread_create(&th[i], NULL, ts_lane_main, &l[i]), 0);
	}
	for (unsigned i = 0; i < TS_NTHREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&start);

	for (unsigned i = 0; i < TS_NTHREADS; i++) {
		uint32_t id = l[i].r[0].ext.file_id;
		uint64_t tail = 0;

		for (int j = 0; j < TS_NPERTHREAD; j++) {
			assert_int_equal(l[i].rc[j], 0);
			/* One file per thread, its records back to back. */
			assert_int_equal(l[i].r[j].ext.file_id, id);
			assert_int_equal(l[i].r[j].ext.off, tail);
			tail += kv_extent_span(&l[i].r[j].ext);
		}
		assert_int_equal(ts_file_size(t, id), tail);
		for (unsigned k = 0; k < i; k++)
			assert_int_not_equal(l[k].r[0].ext.file_id, id);
	}
	ts_list_data(t, list, sizeof(list));
	assert_string_equal(list,
			    "000001.kvd 000002.kvd 000003.kvd 000004.kvd");
	for (unsigned i = 0; i < TS_NTHREADS; i++) {
		for (int j = 0; j < TS_NPERTHREAD; j++) {
			ts_check_read(t->st, &l[i].r[j], 0,
				      (size_t)l[i].r[j].len);
			ts_rec_free(&l[i].r[j]);
		}
	}
	ts_free(l);
}

/* ---- name records, stats ---- */

static void test_append_name(void **state)
{
	struct ts_ctx *t = *state;
	const char *name = "/kv/model-7/layer3/blk_000123.bin";
	struct store_hdr h, hd;
	unsigned char *hb, *hdb;
	uint64_t size;
	struct ts_rec r;
	char *lp;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&r, 5000, 181);
	ts_rec_append(t->st, &r, 77, "/kv/tmp.123");
	size = ts_file_size(t, 1);

	assert_int_equal(store_append_name(t->st, 77, name), 0);
	assert_int_equal(ts_file_size(t, 1), size + KV_ALIGN);
	hb = ts_read_hdr(t, 1, size, &h);
	hdb = ts_read_hdr(t, 1, 0, &hd);
	assert_int_equal(h.type, STORE_REC_NAME);
	assert_int_equal(h.hdr_len, KV_ALIGN);
	assert_int_equal(h.ino, 77);
	assert_int_equal(h.len, 0);
	assert_int_equal(h.nchunks, 0);
	assert_int_equal(h.path_len, strlen(name));
	assert_memory_equal(h.path, name, h.path_len);
	assert_true(h.seq > hd.seq);
	ts_free(hb);
	ts_free(hdb);

	lp = ts_alloc(STORE_PATH_MAX + 2);
	assert_non_null(lp);
	memset(lp, 'n', STORE_PATH_MAX);
	lp[STORE_PATH_MAX] = '\0';
	assert_int_equal(store_append_name(t->st, 78, lp), 0);
	hb = ts_read_hdr(t, 1, size + KV_ALIGN, &h);
	assert_int_equal(h.type, STORE_REC_NAME);
	assert_int_equal(h.hdr_len, 2 * KV_ALIGN);
	assert_int_equal(h.path_len, STORE_PATH_MAX);
	assert_memory_equal(h.path, lp, STORE_PATH_MAX);
	ts_free(hb);
	size += 3 * KV_ALIGN;
	assert_int_equal(ts_file_size(t, 1), size);

	/*
	 * Longer than STORE_PATH_MAX: a name record is refused, nothing
	 * written; a data record is kept, with an empty path.
	 */
	lp[STORE_PATH_MAX] = 'n';
	lp[STORE_PATH_MAX + 1] = '\0';
	assert_int_equal(store_append_name(t->st, 79, lp), -ENAMETOOLONG);
	assert_int_equal(ts_file_size(t, 1), size);
	assert_int_equal(
		store_append(t->st, 79, lp, r.buf, r.len, r.crcs, &r.ext), 0);
	store_append_done(t->st, r.ext.file_id);
	hb = ts_read_hdr(t, 1, size, &h);
	assert_int_equal(h.type, STORE_REC_DATA);
	assert_int_equal(h.ino, 79);
	assert_int_equal(h.len, r.len);
	assert_int_equal(h.path_len, 0);
	ts_free(hb);
	ts_check_read(t->st, &r, 0, (size_t)r.len);
	ts_free(lp);
	ts_rec_free(&r);
}

/* Every record referenced; no committed record after a gap. */
static int ts_all_referenced(void *arg, uint32_t id, uint64_t off)
{
	(void)arg;
	(void)id;
	(void)off;
	return 1;
}

static int ts_no_next(void *arg, uint32_t id, uint64_t off, uint64_t *next)
{
	(void)arg;
	(void)id;
	(void)off;
	(void)next;
	return 0;
}

/*
 * A file's horizon moves only when none of its appends is pending, to the
 * end of what was reserved; recovery from a horizon reads only past it.
 */
static void test_horizons(void **state)
{
	struct ts_ctx *t = *state;
	struct store_recovery rec;
	struct ts_rec a, b, c;
	uint32_t ids[4];
	uint64_t offs[4], end;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	assert_int_equal(store_horizons(t->st, ids, offs, 4), 0);
	ts_rec_init(&a, 5000, 1);
	ts_rec_init(&b, 9000, 2);
	ts_rec_init(&c, 3000, 3);
	assert_int_equal(ts_rec_try_append(t->st, &a, 10, "/a"), 0);
	assert_int_equal(ts_rec_try_append(t->st, &b, 11, "/b"), 0);
	/* Both pending, then one: no horizon yet. */
	assert_int_equal(store_horizons(t->st, ids, offs, 4), 0);
	store_append_done(t->st, b.ext.file_id);
	assert_int_equal(store_horizons(t->st, ids, offs, 4), 0);
	store_append_done(t->st, a.ext.file_id);
	end = ts_file_size(t, 1);
	assert_int_equal(store_horizons(t->st, ids, offs, 4), 1);
	assert_int_equal(ids[0], 1);
	assert_int_equal(offs[0], end);
	/* A pending append keeps it where it was. */
	assert_int_equal(ts_rec_try_append(t->st, &c, 12, "/c"), 0);
	assert_int_equal(store_horizons(t->st, ids, offs, 4), 1);
	assert_int_equal(offs[0], end);
	assert_int_equal(c.ext.off, end);
	/* Recovery from the horizon reads the one record after it. */
	assert_int_equal(store_recover_file(t->st, 1, end, ts_all_referenced,
					    ts_no_next, NULL, &rec),
			 0);
	assert_int_equal(rec.records, 1);
	assert_int_equal(rec.unreferenced, 0);
	assert_int_equal(rec.torn_tail, 0);
	assert_int_equal(store_recover_file(t->st, 1, 0, ts_all_referenced,
					    ts_no_next, NULL, &rec),
			 0);
	assert_int_equal(rec.records, 3);
	store_append_done(t->st, c.ext.file_id);
	assert_int_equal(store_horizons(t->st, ids, offs, 4), 1);
	assert_int_equal(offs[0], ts_file_size(t, 1));
	ts_rec_free(&a);
	ts_rec_free(&b);
	ts_rec_free(&c);
}

/* The records an index "holds" during a recovery test. */
struct ts_refs {
	const uint64_t *offs; /* committed records of file 1, ascending */
	size_t n;
};

static int ts_referenced(void *arg, uint32_t id, uint64_t off)
{
	const struct ts_refs *r = arg;

	for (size_t i = 0; i < r->n; i++)
		if (id == 1 && r->offs[i] == off)
			return 1;
	return 0;
}

static int ts_next_ref(void *arg, uint32_t id, uint64_t off, uint64_t *next)
{
	const struct ts_refs *r = arg;

	for (size_t i = 0; i < r->n; i++) {
		if (id == 1 && r->offs[i] > off) {
			*next = r->offs[i];
			return 1;
		}
	}
	return 0;
}

/* Whether [off, off + len) of data file 1 reads as zeros. */
static int ts_zeros(const struct ts_ctx *t, uint64_t off, size_t len)
{
	unsigned char *buf = ts_alloc(len);
	int zero = ts_file_pread(t, 1, buf, len, off) == (ssize_t)len;

	for (size_t i = 0; zero && i < len; i++)
		zero = buf[i] == 0;
	ts_free(buf);
	return zero;
}

/*
 * Recovery after a crash: records no index row points at are punched,
 * garbage before a committed record is punched up to it, and a torn tail
 * is cut off.
 */
static void test_recover_file(void **state)
{
	struct ts_ctx *t = *state;
	struct store_recovery rec;
	struct ts_rec a, b, c;
	uint64_t offs[2], end, garbage = 3 * KV_ALIGN;
	struct ts_refs refs = {.offs = offs, .n = 2};
	unsigned char *junk = ts_alloc(garbage);

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&a, 5000, 1);
	ts_rec_init(&b, 2 * KV_CHUNK_SIZE, 2);
	ts_rec_init(&c, 3000, 3);
	ts_rec_append(t->st, &a, 10, "/a");
	ts_rec_append(t->st, &b, 11, "/b");
	ts_rec_append(t->st, &c, 12, "/c");
	end = ts_file_size(t, 1);
	/* A crash: a cut record (its header and a bit) at the end. */
	{
		size_t cut = b.ext.hdr_len + KV_ALIGN;
		unsigned char *h = ts_alloc(cut);

		assert_int_equal(ts_file_pread(t, 1, h, cut, b.ext.off),
				 (ssize_t)cut);
		ts_file_pwrite(t, 1, h, cut, end);
		ts_free(h);
	}
	ts_reopen(t, 1, 0, 0);
	offs[0] = a.ext.off;
	offs[1] = c.ext.off;
	assert_int_equal(store_recover_file(t->st, 1, 0, ts_referenced,
					    ts_next_ref, &refs, &rec),
			 0);
	assert_int_equal(rec.records, 3);
	assert_int_equal(rec.unreferenced, 1);
	assert_int_equal(rec.torn_tail, 1);
	assert_int_equal(rec.freed_bytes,
			 kv_extent_span(&b.ext) + b.ext.hdr_len + KV_ALIGN);
	assert_int_equal(ts_file_size(t, 1), end);
	assert_true(ts_zeros(t, b.ext.off, (size_t)kv_extent_span(&b.ext)));
	ts_check_read(t->st, &a, 0, (size_t)a.len);
	ts_check_read(t->st, &c, 0, (size_t)c.len);

	/* Garbage where b was (now a hole), then c: punched up to c. */
	memset(junk, 0x5a, garbage);
	ts_file_pwrite(t, 1, junk, garbage, b.ext.off);
	ts_reopen(t, 1, 0, 0);
	assert_int_equal(store_recover_file(t->st, 1, 0, ts_referenced,
					    ts_next_ref, &refs, &rec),
			 0);
	assert_int_equal(rec.records, 2);
	assert_int_equal(rec.unreferenced, 0);
	assert_int_equal(rec.torn_tail, 0);
	assert_int_equal(rec.freed_bytes, c.ext.off - b.ext.off);
	assert_true(ts_zeros(t, b.ext.off, (size_t)garbage));
	assert_int_equal(ts_file_size(t, 1), end);

	/* Nothing committed after the garbage: the file ends before it. */
	ts_file_pwrite(t, 1, junk, garbage, c.ext.off);
	ts_reopen(t, 1, 0, 0);
	refs.n = 1;
	assert_int_equal(store_recover_file(t->st, 1, 0, ts_referenced,
					    ts_next_ref, &refs, &rec),
			 0);
	assert_int_equal(rec.records, 1);
	assert_int_equal(rec.torn_tail, 1);
	assert_int_equal(ts_file_size(t, 1), b.ext.off);
	ts_check_read(t->st, &a, 0, (size_t)a.len);
	ts_free(junk);
	ts_rec_free(&a);
	ts_rec_free(&b);
	ts_rec_free(&c);
}

/* A read error during recovery is reported, and nothing is cut. */
static void test_recover_file_read_error(void **state)
{
	struct ts_ctx *t = *state;
	struct store_recovery rec;
	struct ts_rec a;
	uint64_t end;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&a, 5000, 1);
	ts_rec_append(t->st, &a, 10, "/a");
	end = ts_file_size(t, 1);
	ts_reopen(t, 1, 0, 1);
	fake_io_clear(&t->fio);
	t->fio.rule[FAKE_IO_PREADV].fail_at = 1;
	t->fio.rule[FAKE_IO_PREADV].fail_err = -EIO;
	assert_int_equal(store_recover_file(t->st, 1, 0, ts_all_referenced,
					    ts_no_next, NULL, &rec),
			 -EIO);
	assert_int_equal(ts_file_size(t, 1), end);
	assert_int_equal(rec.torn_tail, 0);
	ts_rec_free(&a);
}

/*
 * batch_names: a name record waits for the next append (written in front
 * of its record, in the same write) or for store_flush_names(), and keeps
 * the sequence number of when it was made; durable mode writes at once.
 */
static void test_batch_names(void **state)
{
	struct ts_ctx *t = *state;
	struct store_config cfg = {.nlanes = 1, .batch_names = 1};
	struct store_hdr h;
	struct ts_rec a, b;
	unsigned char *hb;
	uint64_t size, seq_name;

	assert_int_equal(store_open(&t->st, t->dir, &cfg, NULL), 0);
	ts_rec_init(&a, 5000, 11);
	ts_rec_init(&b, 7000, 12);
	ts_rec_append(t->st, &a, 21, "/kv/a.tmp");
	size = ts_file_size(t, 1);
	assert_int_equal(store_append_name(t->st, 21, "/kv/a.bin"), 0);
	assert_int_equal(ts_file_size(t, 1), size);
	/* The next record's write carries it, in front. */
	ts_rec_append(t->st, &b, 22, "/kv/b.tmp");
	assert_int_equal(b.ext.off, size + KV_ALIGN);
	hb = ts_read_hdr(t, 1, size, &h);
	assert_int_equal(h.type, STORE_REC_NAME);
	assert_int_equal(h.ino, 21);
	assert_memory_equal(h.path, "/kv/a.bin", h.path_len);
	seq_name = h.seq;
	ts_free(hb);
	hb = ts_read_hdr(t, 1, b.ext.off, &h);
	assert_int_equal(h.type, STORE_REC_DATA);
	assert_true(h.seq > seq_name);
	ts_free(hb);
	ts_check_read(t->st, &a, 0, a.len);
	ts_check_read(t->st, &b, 0, b.len);
	/* Nothing kept back: a flush writes nothing. */
	size = ts_file_size(t, 1);
	assert_int_equal(store_flush_names(t->st), 0);
	assert_int_equal(ts_file_size(t, 1), size);
	/* More than it keeps back: the older ones go out by themselves. */
	for (int i = 0; i < 70; i++)
		assert_int_equal(store_append_name(t->st, 100 + i, "/kv/n"), 0);
	assert_int_equal(ts_file_size(t, 1), size + 64 * KV_ALIGN);
	assert_int_equal(store_flush_names(t->st), 0);
	assert_int_equal(ts_file_size(t, 1), size + 70 * KV_ALIGN);
	/* store_close() writes what is kept back. */
	assert_int_equal(store_append_name(t->st, 200, "/kv/last"), 0);
	store_close(t->st);
	t->st = NULL;
	assert_int_equal(ts_file_size(t, 1), size + 71 * KV_ALIGN);
	hb = ts_read_hdr(t, 1, size + 70 * KV_ALIGN, &h);
	assert_int_equal(h.ino, 200);
	ts_free(hb);

	/* Durable: at once (a reopened store appends to a new file). */
	cfg.durable = 1;
	assert_int_equal(store_open(&t->st, t->dir, &cfg, NULL), 0);
	assert_int_equal(store_append_name(t->st, 201, "/kv/d"), 0);
	assert_int_equal(ts_file_size(t, 2), KV_ALIGN);
	ts_rec_free(&a);
	ts_rec_free(&b);
}

/*
 * A failed append gives back its reservation, the name records it carried
 * in front included: they are lost (a warning says so), and the next
 * append writes only itself.
 */
static void test_batch_names_append_fails(void **state)
{
	struct ts_ctx *t = *state;
	struct store_config cfg = {.nlanes = 1, .batch_names = 1};
	struct ts_rec a, b;
	struct store_hdr h;
	unsigned char *hb;

	assert_int_equal(store_open(&t->st, t->dir, &cfg, &t->fops), 0);
	ts_rec_init(&a, 5000, 21);
	ts_rec_init(&b, 6000, 22);
	assert_int_equal(store_append_name(t->st, 30, "/kv/x.bin"), 0);
	assert_int_equal(store_names_bytes(t->st), KV_ALIGN);
	t->fio.rule[FAKE_IO_PWRITEV].fail_at = 1;
	t->fio.rule[FAKE_IO_PWRITEV].fail_err = -EIO;
	assert_int_equal(ts_rec_try_append(t->st, &a, 31, "/kv/a"), -EIO);
	assert_int_equal(store_names_bytes(t->st), 0);
	assert_int_equal(ts_file_size(t, 1), 0);
	ts_rec_append(t->st, &b, 32, "/kv/b");
	assert_int_equal(b.ext.off, 0);
	hb = ts_read_hdr(t, 1, 0, &h);
	assert_int_equal(h.type, STORE_REC_DATA);
	assert_int_equal(h.ino, 32);
	ts_free(hb);
	ts_check_read(t->st, &b, 0, b.len);
	ts_rec_free(&a);
	ts_rec_free(&b);
}

static void test_stats(void **state)
{
	struct ts_ctx *t = *state;
	struct store_stats s;
	const void *data;
	struct ts_rec a, b;
	unsigned char v = 0x5a;
	size_t n;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	s = ts_stats(t->st);
	assert_int_equal(s.appends, 0);
	assert_int_equal(s.append_bytes, 0);
	assert_int_equal(s.reads, 0);
	assert_int_equal(s.read_bytes, 0);
	assert_int_equal(s.frees, 0);
	assert_int_equal(s.files_removed, 0);
	assert_int_equal(s.short_records, 0);
	assert_int_equal(s.crc_errors, 0);
	assert_int_equal(s.io_errors, 0);

	ts_rec_init(&a, 10000, 191);
	ts_rec_init(&b, 300000, 192);
	ts_rec_append(t->st, &a, 1, "/a");
	ts_rec_append(t->st, &b, 2, "/b");
	s = ts_stats(t->st);
	assert_int_equal(s.appends, 2);
	assert_int_equal(s.append_bytes,
			 kv_extent_span(&a.ext) + kv_extent_span(&b.ext));

	assert_int_equal(store_read(t->st, &a.ext, a.crcs, 0, 10000, &data, &n),
			 0);
	assert_int_equal(store_read(t->st, &b.ext, b.crcs, 5, 100, &data, &n),
			 0);
	assert_int_equal(
		store_read(t->st, &b.ext, NULL, 299990, 4096, &data, &n), 0);
	s = ts_stats(t->st);
	assert_int_equal(s.reads, 3);
	assert_int_equal(s.read_bytes, 10000 + 100 + 10);

	ts_file_pwrite(t, 1, &v, 1, b.ext.off + b.ext.hdr_len + 7);
	ts_expect_read_rc(t->st, &b, b.crcs, 0, 10, -EBADMSG);
	s = ts_stats(t->st);
	assert_int_equal(s.crc_errors, 1);
	assert_int_equal(s.reads, 3);

	ts_truncate(t, 1, b.ext.off + b.ext.hdr_len + 4096);
	ts_expect_read_rc(t->st, &b, NULL, 200000, 10, -ENODATA);
	s = ts_stats(t->st);
	assert_int_equal(s.short_records, 1);
	assert_int_equal(s.crc_errors, 1);

	assert_int_equal(store_free(t->st, &a.ext, 1), 0);
	s = ts_stats(t->st);
	assert_int_equal(s.frees, 1);
	assert_int_equal(s.files_removed, 0);
	assert_int_equal(s.io_errors, 0);
	assert_int_equal(s.reads, 3);
	ts_rec_free(&a);
	ts_rec_free(&b);
}

/*
 * A thread that reads and exits must not leak its read buffer (FUSE worker
 * threads come and go). LeakSanitizer reports it at exit.
 */
static void *ts_reader_main(void *arg)
{
	struct ts_appender *a = arg;
	const void *data;
	size_t n;

	a->rc = store_read(a->st, &a->r->ext, a->r->crcs, 0, (size_t)a->r->len,
			   &data, &n);
	if (a->rc == 0 && (n != a->r->len || memcmp(data, a->r->buf, n) != 0))
		a->rc = -EILSEQ;
	return NULL;
}

static void test_reader_thread_exit(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_appender ap;
	struct ts_rec r;
	pthread_t th;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&r, 3 * TS_MIB, 201);
	ts_rec_append(t->st, &r, 1, "/r");
	ap = (struct ts_appender){.st = t->st, .r = &r, .rc = 1};
	assert_int_equal(pthread_create(&th, NULL, ts_reader_main, &ap), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(ap.rc, 0);
	ts_rec_free(&r);
#ifdef TS_TEST_HAVE_LSAN
	/* Everything the test allocated is freed or still reachable. */
	assert_int_equal(__lsan_do_recoverable_leak_check(), 0);
#endif
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_append_read_roundtrip),
		T(test_read_ranges),
		T(test_read_huge_len_clipped),
		T(test_read_segs),
		T(test_file_naming_and_reopen),
		T(test_free_punches),
		T(test_free_removes_inactive_file),
		T(test_file_removed_while_open),
		T(test_never_issues_file_id_0),
		T(test_lanes_threads),
		T(test_append_name),
		T(test_horizons),
		T(test_recover_file),
		T(test_recover_file_read_error),
		T(test_batch_names),
		T(test_batch_names_append_fails),
		T(test_stats),
		T(test_reader_thread_exit),
#undef T
	};
	int rc;

	rc = store_io_probe();
	if (rc < 0) {
		fprintf(stderr, "test_store: io_uring unavailable (%s), skip\n",
			strerror(-rc));
		return 77;
	}
	/* The fault tests make store.c warn on purpose. */
	log_set_level(LOG_LVL_ERR);
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
