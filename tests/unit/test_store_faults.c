/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the block store (core/store.c) under injected faults,
 * through tests/fakes/fake_io.h: short transfers, transient -EINTR/-EAGAIN,
 * failing writes and syncs (nothing of a failed append stays visible), and
 * reads of records that are provably short, corrupt or failing. Shared
 * helpers in test_store.h; each test gets its own mkdtemp data directory.
 * The whole binary exits 77 when io_uring is unavailable.
 */
#include "test_store.h"

/* ---- short transfers, transient errors, faults (fake ops) ---- */

/* How many calls a write of total bytes takes under rule w, errors aside. */
static unsigned long ts_model_calls(const struct fake_io_rule *w,
				    uint64_t total)
{
	unsigned long call = 0;

	while (total > 0) {
		uint64_t lim = w->max_xfer ? w->max_xfer : UINT64_MAX;

		call++;
		if (w->short_at == call && w->short_len < lim)
			lim = w->short_len;
		assert_true(lim > 0);
		total -= lim < total ? lim : total;
	}
	return call;
}

static void test_short_writes(void **state)
{
	struct ts_ctx *t = *state;
	struct fake_io_rule *w = &t->fio.rule[FAKE_IO_PWRITEV];
	static const struct {
		size_t max_xfer;
		unsigned long short_at;
		size_t short_len;
		uint64_t len;
	} cases[] = {
		{1000, 0, 0, KV_CHUNK_SIZE + 1},
		{4096, 0, 0, KV_CHUNK_SIZE + 1},
		{7, 0, 0, 5000},
		{0, 1, 1, KV_CHUNK_SIZE + 1},
		{0, 1, 4095, 4096},
		{8192, 2, 4095, KV_CHUNK_SIZE + 1},
		{65536, 1, 4097, KV_CHUNK_SIZE + 1},
		{0, 1, 100, 0}, /* header-only record */
	};

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t total, before;
		struct store_hdr h;
		unsigned char *hb;
		struct ts_rec r;

		before = i ? ts_file_size(t, 1) : 0;
		ts_rec_init(&r, cases[i].len, 40 + (uint32_t)i);
		fake_io_clear(&t->fio);
		w->max_xfer = cases[i].max_xfer;
		w->short_at = cases[i].short_at;
		w->short_len = cases[i].short_len;
		ts_rec_append(t->st, &r, 1, "/short");
		total = kv_extent_span(&r.ext);
		assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PWRITEV),
				 ts_model_calls(w, total));
		assert_true(fake_io_calls(&t->fio, FAKE_IO_PWRITEV) > 1);
		assert_int_equal(r.ext.off, before);
		assert_int_equal(ts_file_size(t, 1), before + total);
		/* On disk: a decodable header and the exact payload. */
		hb = ts_read_hdr(t, 1, r.ext.off, &h);
		assert_int_equal(h.len, r.len);
		assert_int_equal(h.ino, 1);
		ts_free(hb);
		fake_io_clear(&t->fio);
		ts_check_read(t->st, &r, 0, (size_t)r.len);
		ts_check_read(t->st, &r, 3, 4099);
		ts_rec_free(&r);
	}
}

static void test_short_write_zero_is_error(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_rec a, r;
	uint64_t size;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&a, 5000, 51);
	ts_rec_init(&r, 20000, 52);
	ts_rec_append(t->st, &a, 1, "/a");
	size = ts_file_size(t, 1);
	/* A write that moves nothing after some progress: no endless loop. */
	t->fio.rule[FAKE_IO_PWRITEV].max_xfer = 8192;
	t->fio.rule[FAKE_IO_PWRITEV].short_at = 2;
	t->fio.rule[FAKE_IO_PWRITEV].short_len = 0;
	assert_int_equal(ts_rec_try_append(t->st, &r, 2, "/r"), -EIO);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PWRITEV), 2);
	assert_int_equal(ts_file_size(t, 1), size);
	fake_io_clear(&t->fio);
	ts_rec_append(t->st, &r, 2, "/r");
	assert_int_equal(r.ext.off, size);
	ts_check_read(t->st, &a, 0, 5000);
	ts_check_read(t->st, &r, 0, 20000);
	ts_rec_free(&a);
	ts_rec_free(&r);
}

static void test_short_reads(void **state)
{
	struct ts_ctx *t = *state;
	const uint64_t len = 3ull * KV_CHUNK_SIZE + 777;
	struct store_stats s0, s1;
	const void *data;
	struct ts_rec r;
	size_t n;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&r, len, 61);
	ts_rec_append(t->st, &r, 1, "/r");

	t->fio.rule[FAKE_IO_PREADV].max_xfer = 777;
	assert_int_equal(
		store_read(t->st, &r.ext, r.crcs, 0, (size_t)len, &data, &n),
		0);
	assert_int_equal(n, len);
	ts_assert_bytes(data, r.buf, (size_t)len, "read");
	/* Each call moved at most 777 bytes, and the loop needed them all. */
	assert_true(fake_io_calls(&t->fio, FAKE_IO_PREADV) >=
		    (len + 776) / 777);
	ts_check_read(t->st, &r, KV_CHUNK_SIZE - 5, 10);
	ts_check_read(t->st, &r, 1, KV_CHUNK_SIZE * 2);

	fake_io_clear(&t->fio);
	t->fio.rule[FAKE_IO_PREADV].short_at = 1;
	t->fio.rule[FAKE_IO_PREADV].short_len = 100;
	assert_int_equal(
		store_read(t->st, &r.ext, r.crcs, 0, (size_t)len, &data, &n),
		0);
	assert_int_equal(n, len);
	ts_assert_bytes(data, r.buf, (size_t)len, "read");
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PREADV), 2);

	/* 0 from a file that is long enough is not a short record. */
	fake_io_clear(&t->fio);
	t->fio.rule[FAKE_IO_PREADV].short_at = 2;
	t->fio.rule[FAKE_IO_PREADV].short_len = 0;
	t->fio.rule[FAKE_IO_PREADV].max_xfer = 65536;
	s0 = ts_stats(t->st);
	assert_int_equal(
		store_read(t->st, &r.ext, r.crcs, 0, (size_t)len, &data, &n),
		-EIO);
	assert_int_equal(n, 0);
	s1 = ts_stats(t->st);
	assert_int_equal(s1.short_records, s0.short_records);
	assert_int_equal(s1.io_errors, s0.io_errors + 1);
	assert_int_equal(s1.reads, s0.reads);
	ts_rec_free(&r);
}

/*
 * The retry bound is private to store.c: measure it with an endless run of
 * transient errors, then check that exactly that many are absorbed.
 */
static void test_transient_write_retries(void **state)
{
	struct ts_ctx *t = *state;
	struct fake_io_rule *w = &t->fio.rule[FAKE_IO_PWRITEV];
	unsigned long bound;
	struct ts_rec a, r;
	uint64_t size;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&a, 4096, 71);
	ts_rec_init(&r, 9000, 72);
	ts_rec_append(t->st, &a, 1, "/a");
	size = ts_file_size(t, 1);

	fake_io_clear(&t->fio);
	w->ntransient = 100000;
	w->transient_err = -EINTR;
	assert_int_equal(ts_rec_try_append(t->st, &r, 2, "/r"), -EINTR);
	bound = fake_io_calls(&t->fio, FAKE_IO_PWRITEV) - 1;
	assert_in_range(bound, 1, 100);
	assert_int_equal(ts_file_size(t, 1), size);

	fake_io_clear(&t->fio);
	w->ntransient = (unsigned)bound + 1;
	w->transient_err = -EAGAIN;
	assert_int_equal(ts_rec_try_append(t->st, &r, 2, "/r"), -EAGAIN);
	assert_int_equal(ts_file_size(t, 1), size);

	fake_io_clear(&t->fio);
	w->ntransient = (unsigned)bound;
	w->transient_err = -EAGAIN;
	ts_rec_append(t->st, &r, 2, "/r");
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PWRITEV), bound + 1);
	assert_int_equal(r.ext.off, size);

	/* Transients between short writes still end in the exact bytes. */
	fake_io_clear(&t->fio);
	w->ntransient = 2;
	w->transient_err = -EINTR;
	w->max_xfer = 3000;
	ts_rec_append(t->st, &a, 3, "/a2");
	fake_io_clear(&t->fio);
	ts_check_read(t->st, &a, 0, 4096);
	ts_check_read(t->st, &r, 0, 9000);
	ts_rec_free(&a);
	ts_rec_free(&r);
}

static void test_transient_read_retries(void **state)
{
	struct ts_ctx *t = *state;
	struct fake_io_rule *rd = &t->fio.rule[FAKE_IO_PREADV];
	unsigned long bound;
	struct store_stats s;
	const void *data;
	struct ts_rec r;
	size_t n;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&r, 70000, 81);
	ts_rec_append(t->st, &r, 1, "/r");

	rd->ntransient = 100000;
	rd->transient_err = -EAGAIN;
	assert_int_equal(store_read(t->st, &r.ext, r.crcs, 0, 70000, &data, &n),
			 -EAGAIN);
	bound = fake_io_calls(&t->fio, FAKE_IO_PREADV) - 1;
	assert_in_range(bound, 1, 100);
	s = ts_stats(t->st);
	assert_int_equal(s.short_records, 0);
	assert_int_equal(s.io_errors, 1);

	fake_io_clear(&t->fio);
	rd->ntransient = (unsigned)bound;
	rd->transient_err = -EINTR;
	assert_int_equal(store_read(t->st, &r.ext, r.crcs, 0, 70000, &data, &n),
			 0);
	assert_int_equal(n, 70000);
	ts_assert_bytes(data, r.buf, 70000, "read");

	fake_io_clear(&t->fio);
	rd->ntransient = (unsigned)bound + 1;
	rd->transient_err = -EINTR;
	assert_int_equal(store_read(t->st, &r.ext, NULL, 5, 10, &data, &n),
			 -EINTR);
	ts_rec_free(&r);
}

/*
 * Fault loop: fail pwritev call N = 1, 2, ... until the append
 * succeeds. Writes move at most 8 KiB so an append takes several calls.
 */
static void ts_fault_loop_append(struct ts_ctx *t, int err)
{
	struct fake_io_rule *w = &t->fio.rule[FAKE_IO_PWRITEV];
	struct store_stats s0, s1;
	unsigned long n, good_calls;
	struct ts_rec a, r;
	uint64_t size;
	int rc;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&a, 5000, 91);
	ts_rec_init(&r, 40000, 92);

	/* First the fresh file, where the failed append created the file. */
	for (n = 1;; n++) {
		fake_io_clear(&t->fio);
		w->max_xfer = 8192;
		w->fail_at = n;
		w->fail_err = err;
		rc = ts_rec_try_append(t->st, &a, 1, "/a");
		if (rc == 0)
			break;
		assert_int_equal(rc, err);
		assert_int_equal(ts_file_size(t, 1), 0);
		assert_int_equal(ts_stats(t->st).appends, 0);
	}
	assert_int_equal(n, 3); /* 4 KiB header + 8 KiB payload, 8 KiB max */
	assert_int_equal(a.ext.off, 0);
	store_append_done(t->st, a.ext.file_id);
	size = ts_file_size(t, 1);

	for (n = 1;; n++) {
		unsigned char probe[64];

		fake_io_clear(&t->fio);
		w->max_xfer = 8192;
		w->fail_at = n;
		w->fail_err = err;
		s0 = ts_stats(t->st);
		rc = ts_rec_try_append(t->st, &r, 2, "/r");
		if (rc == 0)
			break;
		assert_int_equal(rc, err);
		/* Nothing visible: the tail is cut back to where it was. */
		assert_int_equal(ts_file_size(t, 1), size);
		assert_int_equal(
			ts_file_pread(t, 1, probe, sizeof(probe), size), 0);
		s1 = ts_stats(t->st);
		assert_int_equal(s1.appends, s0.appends);
		assert_int_equal(s1.io_errors,
				 s0.io_errors + (err == -ENOSPC ? 0 : 1));
		ts_check_read(t->st, &a, 0, 5000);
	}
	good_calls = fake_io_calls(&t->fio, FAKE_IO_PWRITEV);
	assert_int_equal(good_calls, (4096 + 40960 + 8191) / 8192);
	assert_int_equal(n, good_calls + 1);
	store_append_done(t->st, r.ext.file_id);
	/* The failed attempts' space was reused. */
	assert_int_equal(r.ext.off, size);
	assert_int_equal(ts_file_size(t, 1), size + kv_extent_span(&r.ext));
	fake_io_clear(&t->fio);
	ts_check_read(t->st, &a, 0, 5000);
	ts_check_read(t->st, &r, 0, 40000);
	ts_rec_free(&a);
	ts_rec_free(&r);
}

/* The n records of r as store_append_batch() takes them, one iovec each. */
static void ts_batch_recs(struct ts_rec *r, struct iovec *iov,
			  struct store_rec *recs, const char *const *paths,
			  size_t n)
{
	for (size_t i = 0; i < n; i++) {
		iov[i] = (struct iovec){.iov_base = r[i].buf,
					.iov_len = kv_align_up(r[i].len)};
		recs[i] = (struct store_rec){.ino = 50 + i,
					     .path = paths[i],
					     .iov = &iov[i],
					     .iovcnt = 1,
					     .len = r[i].len,
					     .crcs = r[i].crcs};
	}
}

/*
 * Records appended together go out in one write, back to back, each with
 * its own extent, header and pin; a failed write leaves none of them.
 */
static void test_append_batch(void **state)
{
	static const char *const paths[] = {"/b/0", "/b/1", "/b/2"};
	static const uint64_t lens[] = {5000, KV_CHUNK_SIZE + 1, 4096};
	struct ts_ctx *t = *state;
	struct fake_io_rule *w = &t->fio.rule[FAKE_IO_PWRITEV];
	struct store_rec recs[3];
	struct iovec iov[3];
	struct ts_rec r[3];
	uint64_t pos = 0, seq = 0;
	uint32_t ids[2];
	uint64_t offs[2];

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	for (size_t i = 0; i < 3; i++)
		ts_rec_init(&r[i], lens[i], 60 + (uint32_t)i);
	/* The second write call fails: nothing of the batch stays. */
	fake_io_clear(&t->fio);
	w->max_xfer = 65536;
	w->fail_at = 2;
	w->fail_err = -EIO;
	ts_batch_recs(r, iov, recs, paths, 3);
	assert_int_equal(store_append_batch(t->st, recs, 3), -EIO);
	assert_int_equal(ts_file_size(t, 1), 0);
	assert_int_equal(ts_stats(t->st).appends, 0);
	/* Every pin went with it: the file is quiet at 0. */
	assert_int_equal(store_horizons(t->st, ids, offs, 2), 0);

	fake_io_clear(&t->fio);
	ts_batch_recs(r, iov, recs, paths, 3);
	assert_int_equal(store_append_batch(t->st, recs, 3), 0);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PWRITEV), 1);
	assert_int_equal(ts_stats(t->st).appends, 3);
	for (size_t i = 0; i < 3; i++) {
		struct store_hdr h;
		unsigned char *hb;

		r[i].ext = recs[i].ext;
		assert_int_equal(r[i].ext.file_id, 1);
		assert_int_equal(r[i].ext.off, pos);
		assert_int_equal(r[i].ext.len, lens[i]);
		pos += kv_extent_span(&r[i].ext);
		hb = ts_read_hdr(t, 1, r[i].ext.off, &h);
		assert_int_equal(h.ino, 50 + i);
		assert_int_equal(h.len, lens[i]);
		assert_memory_equal(h.path, paths[i], strlen(paths[i]));
		assert_true(h.seq > seq);
		seq = h.seq;
		ts_free(hb);
		ts_check_read(t->st, &r[i], 0, (size_t)lens[i]);
	}
	assert_int_equal(ts_file_size(t, 1), pos);
	/* One pin per record: quiet only when the last is done. */
	store_append_done(t->st, 1);
	store_append_done(t->st, 1);
	assert_int_equal(store_horizons(t->st, ids, offs, 2), 0);
	store_append_done(t->st, 1);
	assert_int_equal(store_horizons(t->st, ids, offs, 2), 1);
	assert_int_equal(offs[0], pos);
	for (size_t i = 0; i < 3; i++)
		ts_rec_free(&r[i]);
}

static void test_fault_loop_append_eio(void **state)
{
	ts_fault_loop_append(*state, -EIO);
}

static void test_fault_loop_append_enospc(void **state)
{
	ts_fault_loop_append(*state, -ENOSPC);
}

static void test_fault_durable_sync(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_rec a, r;
	uint64_t size;

	t->st = ts_open_cfg(t, 1, 0, 1, 1);
	ts_rec_init(&a, 4096, 101);
	ts_rec_init(&r, 4096, 102);
	ts_rec_append(t->st, &a, 1, "/a");
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_SYNC), 1);
	size = ts_file_size(t, 1);
	fake_io_clear(&t->fio);
	t->fio.rule[FAKE_IO_SYNC].fail_at = 1;
	t->fio.rule[FAKE_IO_SYNC].fail_err = -EIO;
	assert_int_equal(ts_rec_try_append(t->st, &r, 2, "/r"), -EIO);
	assert_int_equal(ts_file_size(t, 1), size);
	ts_rec_append(t->st, &r, 2, "/r");
	assert_int_equal(r.ext.off, size);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_SYNC), 2);
	ts_check_read(t->st, &r, 0, 4096);

	/* store_sync syncs the one active file and reports its error. */
	fake_io_clear(&t->fio);
	assert_int_equal(store_sync(t->st), 0);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_SYNC), 1);
	t->fio.rule[FAKE_IO_SYNC].fail_at = 2;
	t->fio.rule[FAKE_IO_SYNC].fail_err = -EIO;
	assert_int_equal(store_sync(t->st), -EIO);
	ts_rec_free(&a);
	ts_rec_free(&r);
}

struct ts_hold {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int in_write; /* the first pwritev has started */
	int release;  /* ... and may go on */
};

static void ts_hold_first_write(void *ctx, enum fake_io_kind kind,
				unsigned long call)
{
	struct ts_hold *h = ctx;

	if (kind != FAKE_IO_PWRITEV || call != 1)
		return;
	pthread_mutex_lock(&h->lock);
	h->in_write = 1;
	pthread_cond_broadcast(&h->cond);
	while (!h->release)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

/*
 * store_free_run() punches records that follow each other in a data file
 * as one hole, and records with a live one between them as two.
 */
static void test_free_run_merges(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_rec r[5];
	struct kv_extent run[2];

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	for (int i = 0; i < 5; i++) {
		char path[8];

		snprintf(path, sizeof(path), "/r%d", i);
		ts_rec_init(&r[i], 3000 + 7000 * (size_t)i, 121 + i);
		ts_rec_append(t->st, &r[i], 1 + (uint64_t)i, path);
	}
	assert_int_equal(r[1].ext.off,
			 r[0].ext.off + kv_extent_span(&r[0].ext));
	run[0] = r[0].ext;
	run[1] = r[1].ext;
	assert_int_equal(store_free_run(t->st, run, 2, 2), 0);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PUNCH), 1);
	assert_int_equal(t->fio.punch_off, r[0].ext.off);
	assert_int_equal(t->fio.punch_len,
			 kv_extent_span(&r[0].ext) + kv_extent_span(&r[1].ext));
	/* r[3] is live between r[2] and r[4]: two holes. */
	run[0] = r[2].ext;
	run[1] = r[4].ext;
	assert_int_equal(store_free_run(t->st, run, 2, 1), 0);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PUNCH), 3);
	assert_int_equal(t->fio.punch_off, r[4].ext.off);
	assert_int_equal(t->fio.punch_len, kv_extent_span(&r[4].ext));
	assert_int_equal(ts_stats(t->st).frees, 4);
	ts_check_read(t->st, &r[3], 0, r[3].len);
	for (int i = 0; i < 5; i++)
		ts_rec_free(&r[i]);
}

/*
 * A failed append that is no longer the lane's tail (another append reserved
 * after it) cannot be truncated away: its range is punched.
 */
static void test_fault_not_at_tail_punched(void **state)
{
	struct ts_ctx *t = *state;
	struct ts_hold h = {.lock = PTHREAD_MUTEX_INITIALIZER,
			    .cond = PTHREAD_COND_INITIALIZER};
	struct ts_appender ap;
	unsigned char *hb;
	struct ts_rec a, b, c;
	uint64_t span_a;
	pthread_t th;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&a, 10000, 111);
	ts_rec_init(&b, 20000, 112);
	ts_rec_init(&c, 3000, 113);
	span_a = store_hdr_len(a.len, strlen("/held")) + kv_align_up(a.len);

	t->fio.rule[FAKE_IO_PWRITEV].fail_at = 1;
	t->fio.rule[FAKE_IO_PWRITEV].fail_err = -EIO;
	t->fio.hook = ts_hold_first_write;
	t->fio.hook_ctx = &h;
	ap = (struct ts_appender){.st = t->st, .r = &a, .rc = 1};
	assert_int_equal(pthread_create(&th, NULL, ts_appender_main, &ap), 0);
	pthread_mutex_lock(&h.lock);
	while (!h.in_write)
		pthread_cond_wait(&h.cond, &h.lock);
	pthread_mutex_unlock(&h.lock);
	/* Same lane (nlanes 1): b lands after a's reservation. */
	ts_rec_append(t->st, &b, 2, "/b");
	pthread_mutex_lock(&h.lock);
	h.release = 1;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	assert_int_equal(pthread_join(th, NULL), 0);

	assert_int_equal(ap.rc, -EIO);
	assert_int_equal(b.ext.off, span_a);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PUNCH), 1);
	assert_int_equal(t->fio.punch_off, 0);
	assert_int_equal(t->fio.punch_len, span_a);
	/* No record at a's place: its header page is all zeros. */
	hb = ts_calloc(1, KV_ALIGN);
	assert_non_null(hb);
	assert_int_equal(ts_file_pread(t, 1, hb, KV_ALIGN, 0), KV_ALIGN);
	for (size_t i = 0; i < KV_ALIGN; i++)
		assert_int_equal(hb[i], 0);
	ts_free(hb);
	fake_io_clear(&t->fio);
	ts_check_read(t->st, &b, 0, 20000);
	/* The tail did not move back over b. */
	ts_rec_append(t->st, &c, 3, "/c");
	assert_int_equal(c.ext.off, b.ext.off + kv_extent_span(&b.ext));
	ts_check_read(t->st, &c, 0, 3000);
	ts_check_read(t->st, &b, 0, 20000);
	ts_rec_free(&a);
	ts_rec_free(&b);
	ts_rec_free(&c);
}

/* ---- provably short, corrupt, or failing reads ---- */

static void test_short_truncated(void **state)
{
	struct ts_ctx *t = *state;
	const uint64_t len = 3ull * KV_CHUNK_SIZE + 5000;
	struct ts_rec p, r;
	struct store_stats s;
	uint64_t base;
	/* Payload offsets to cut the file at, in shrinking order. */
	const uint64_t cuts[] = {len + 1, len,	2 * KV_CHUNK_SIZE + 8192,
				 200007,  4096, 1};
	unsigned nshort = 0;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&p, 9000, 121);
	ts_rec_init(&r, len, 122);
	ts_rec_append(t->st, &p, 1, "/p");
	ts_rec_append(t->st, &r, 2, "/r");
	base = r.ext.off + r.ext.hdr_len;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		uint64_t cut = cuts[i];

		ts_truncate(t, r.ext.file_id, base + cut);
		ts_expect_read_rc(t->st, &r, r.crcs, 0, (size_t)len, -ENODATA);
		ts_expect_read_rc(t->st, &r, NULL, 0, (size_t)len, -ENODATA);
		ts_expect_read_rc(t->st, &r, NULL, len - 1, 1, -ENODATA);
		nshort += 3;
		/*
		 * Bytes before the cut are still there to read; with CRCs
		 * only when their whole chunk is.
		 */
		if (cut >= KV_CHUNK_SIZE) {
			ts_check_read(t->st, &r, 0, 4096 - 10);
			ts_check_read(t->st, &r, KV_CHUNK_SIZE - 9, 9);
		} else if (cut >= 4096) {
			ts_check_read1(t->st, &r, NULL, 0, 4096 - 10);
			ts_expect_read_rc(t->st, &r, r.crcs, 0, 10, -ENODATA);
			nshort++;
		}
		ts_check_read(t->st, &p, 0, 9000);
	}
	/* Cut inside the header, then at the record's start. */
	ts_truncate(t, r.ext.file_id, r.ext.off + 100);
	ts_expect_read_rc(t->st, &r, r.crcs, 7, 10, -ENODATA);
	ts_truncate(t, r.ext.file_id, r.ext.off);
	ts_expect_read_rc(t->st, &r, NULL, 0, 1, -ENODATA);
	nshort += 2;
	s = ts_stats(t->st);
	assert_int_equal(s.short_records, nshort);
	assert_int_equal(s.io_errors, 0);
	assert_int_equal(s.crc_errors, 0);
	ts_check_read(t->st, &p, 0, 9000);
	ts_rec_free(&p);
	ts_rec_free(&r);
}

static void test_short_file_removed(void **state)
{
	struct ts_ctx *t = *state;
	char path[PATH_MAX];
	struct store_stats s;
	struct ts_rec r;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&r, 8192, 131);
	ts_rec_append(t->st, &r, 1, "/r");
	store_close(t->st);
	t->st = NULL;
	ts_data_path(t, r.ext.file_id, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_expect_read_rc(t->st, &r, r.crcs, 0, 8192, -ENODATA);
	ts_expect_read_rc(t->st, &r, NULL, 100, 1, -ENODATA);
	s = ts_stats(t->st);
	assert_int_equal(s.short_records, 2);
	assert_int_equal(s.io_errors, 0);
	/* Freeing a record whose file is gone is not an error. */
	assert_int_equal(store_free(t->st, &r.ext, 0), 0);
	ts_rec_free(&r);
}

static void test_crc_mismatch(void **state)
{
	struct ts_ctx *t = *state;
	const uint64_t len = 3ull * KV_CHUNK_SIZE + 100;
	const uint64_t bad = KV_CHUNK_SIZE + 1000;
	struct store_stats s;
	const void *data;
	unsigned char v;
	struct ts_rec r;
	size_t n;

	t->st = ts_open_cfg(t, 1, 0, 0, 0);
	ts_rec_init(&r, len, 141);
	ts_rec_append(t->st, &r, 1, "/r");
	v = r.buf[bad] ^ 0x40;
	ts_file_pwrite(t, r.ext.file_id, &v, 1,
		       r.ext.off + r.ext.hdr_len + bad);

	ts_expect_read_rc(t->st, &r, r.crcs, 0, (size_t)len, -EBADMSG);
	/* Any read touching chunk 1 checks all of chunk 1. */
	ts_expect_read_rc(t->st, &r, r.crcs, KV_CHUNK_SIZE + 5000, 10,
			  -EBADMSG);
	ts_expect_read_rc(t->st, &r, r.crcs, KV_CHUNK_SIZE - 1, 2, -EBADMSG);
	/* Other chunks are fine. */
	assert_int_equal(
		store_read(t->st, &r.ext, r.crcs, 0, KV_CHUNK_SIZE, &data, &n),
		0);
	ts_assert_bytes(data, r.buf, KV_CHUNK_SIZE, "chunk 0");
	assert_int_equal(store_read(t->st, &r.ext, r.crcs,
				    2 * KV_CHUNK_SIZE + 3, 100000, &data, &n),
			 0);
	ts_assert_bytes(data, r.buf + 2 * KV_CHUNK_SIZE + 3, n, "chunk 2");
	/* Without CRCs the bytes come back as the file has them. */
	assert_int_equal(
		store_read(t->st, &r.ext, NULL, 0, (size_t)len, &data, &n), 0);
	assert_int_equal(n, len);
	assert_int_equal(((const unsigned char *)data)[bad], v);
	ts_assert_bytes(data, r.buf, (size_t)bad, "before");
	ts_assert_bytes((const unsigned char *)data + bad + 1, r.buf + bad + 1,
			(size_t)(len - bad - 1), "after");
	s = ts_stats(t->st);
	assert_int_equal(s.crc_errors, 3);
	assert_int_equal(s.short_records, 0);
	assert_int_equal(s.io_errors, 0);
	ts_rec_free(&r);
}

static void test_read_io_errors(void **state)
{
	struct ts_ctx *t = *state;
	struct fake_io_rule *rd = &t->fio.rule[FAKE_IO_PREADV];
	struct store_stats s0, s1;
	const void *data;
	struct ts_rec r;
	unsigned long n;
	size_t got;
	int rc;

	t->st = ts_open_cfg(t, 1, 0, 0, 1);
	ts_rec_init(&r, 40000, 151);
	ts_rec_append(t->st, &r, 1, "/r");

	rd->fail_at = 1;
	rd->fail_err = -EIO;
	s0 = ts_stats(t->st);
	ts_expect_read_rc(t->st, &r, r.crcs, 0, 40000, -EIO);
	s1 = ts_stats(t->st);
	assert_int_equal(s1.io_errors, s0.io_errors + 1);
	assert_int_equal(s1.short_records, s0.short_records);

	/* Fault loop over a read that takes several calls. */
	for (n = 1;; n++) {
		fake_io_clear(&t->fio);
		rd->max_xfer = 8192;
		rd->fail_at = n;
		rd->fail_err = -EIO;
		rc = store_read(t->st, &r.ext, r.crcs, 0, 40000, &data, &got);
		if (rc == 0)
			break;
		assert_int_equal(rc, -EIO);
		assert_int_equal(got, 0);
	}
	assert_int_equal(n, fake_io_calls(&t->fio, FAKE_IO_PREADV) + 1);
	assert_int_equal(n, (40960 + 8191) / 8192 + 1);
	assert_int_equal(got, 40000);
	ts_assert_bytes(data, r.buf, 40000, "read");

	/* A short file whose size cannot be checked is not provably short. */
	fake_io_clear(&t->fio);
	ts_truncate(t, r.ext.file_id, r.ext.off + r.ext.hdr_len + 8192);
	t->fio.rule[FAKE_IO_SIZE].fail_at = 1;
	t->fio.rule[FAKE_IO_SIZE].fail_err = -EIO;
	ts_expect_read_rc(t->st, &r, r.crcs, 0, 40000, -EIO);
	ts_expect_read_rc(t->st, &r, r.crcs, 0, 40000, -ENODATA);
	ts_rec_free(&r);
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_short_writes),
		T(test_short_write_zero_is_error),
		T(test_short_reads),
		T(test_transient_write_retries),
		T(test_transient_read_retries),
		T(test_append_batch),
		T(test_fault_loop_append_eio),
		T(test_fault_loop_append_enospc),
		T(test_fault_durable_sync),
		T(test_fault_not_at_tail_punched),
		T(test_free_run_merges),
		T(test_short_truncated),
		T(test_short_file_removed),
		T(test_crc_mismatch),
		T(test_read_io_errors),
#undef T
	};
	int rc;

	rc = store_io_probe();
	if (rc < 0) {
		fprintf(stderr,
			"test_store_faults: io_uring unavailable (%s), skip\n",
			strerror(-rc));
		return 77;
	}
	/* The fault tests make store.c warn on purpose. */
	log_set_level(LOG_LVL_ERR);
	return cmocka_run_group_tests_name("store_faults", tests, NULL, NULL);
}
