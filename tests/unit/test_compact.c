/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the gc engine (fs/kvdb/compact.c) on a real index and a
 * real block store in a temporary data directory (kvdb_fixture.h): files
 * spread over several data files, some records dead (files rewritten or
 * unlinked without their records freed). Compaction keeps every live file
 * byte-exact and moves its index row into the new data file, removes the
 * old files and every dead record; a dry run changes nothing; a write or
 * sync that fails in the middle leaves the index and the old data files as
 * they were.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compact.h"
#include "datafile.h"
#include "kvdb.h"
#include "kvdb_fixture.h"
#include "scan.h"
#include "log.h"

/* Records rotate to a new data file past this many bytes. */
#define TC_FILE_MAX (96u * 1024u)
#define TC_NFILES 8

/* The scenario: which of the files end up live. */
struct tc {
	struct kf_file f[TC_NFILES];
	int live[TC_NFILES];
	uint32_t max_id; /* the highest data file number before gc */
};

/*
 * Writes TC_NFILES files, rewrites two (their first records go dead) and
 * unlinks two (their records stay in the data files, dead).
 */
static void tc_populate(struct kf *k, struct tc *t)
{
	static const uint64_t lens[TC_NFILES] = {20000, 70000, 5000, 150000,
						 33333, 1,     9000, 45000};
	static const char *const names[TC_NFILES] = {"a", "b", "c", "d",
						     "e", "f", "g", "h"};

	kf_open(k, TC_FILE_MAX);
	for (int i = 0; i < TC_NFILES; i++) {
		t->f[i] = (struct kf_file){
			.name = names[i], .len = lens[i], .seed = 100u + i};
		kf_write(k, &t->f[i]);
		t->live[i] = 1;
	}
	/* Rewritten: the first record is dead, the second live. */
	t->f[1].seed = 201;
	kf_write(k, &t->f[1]);
	t->f[4].seed = 204;
	t->f[4].len = 12345;
	kf_write(k, &t->f[4]);
	kf_unlink(k, &t->f[2]);
	kf_unlink(k, &t->f[6]);
	t->live[2] = t->live[6] = 0;
	t->max_id = 0;
	for (int i = 0; i < TC_NFILES; i++)
		if (t->f[i].ext.file_id > t->max_id)
			t->max_id = t->f[i].ext.file_id;
	assert_true(t->max_id >= 3); /* several data files */
	kf_close(k);
}

static struct kvdb *tc_open(struct kf *k, const struct store_io_ops *io)
{
	struct kvdb_opts o = {
		.flags = KVDB_DATA_RW | KVDB_DATA_DIR | KVDB_INDEX_DURABLE,
		.max_id = COMPACT_MAX_ID,
		.who = "gc",
		.io = io,
		.hooks = {.error = kf_error, .arg = k},
	};
	struct kvdb_error err;
	struct kvdb *db = NULL;

	assert_int_equal(kvdb_open(&db, k->dir, &o, &err), 0);
	assert_non_null(db);
	return db;
}

/* How many data records of ino the data files hold. */
static unsigned tc_records_of(struct kvdb_scan *s, uint64_t ino)
{
	unsigned n = 0;

	for (size_t i = 0; i < s->nrecs; i++)
		n += s->recs[i].ino == ino && s->recs[i].type == STORE_REC_DATA;
	return n;
}

static const struct compact_file *tc_result_of(const struct compact_result *r,
					       uint32_t id)
{
	for (size_t i = 0; i < r->nfiles; i++)
		if (r->files[i].id == id)
			return &r->files[i];
	return NULL;
}

static void test_compact_moves_live_drops_dead(void **state)
{
	struct kf *k = *state;
	struct compact_opts o = {.threshold = 100};
	struct compact_result r;
	struct kvdb_scan scan = {0};
	struct kvdb *db;
	struct tc t;

	tc_populate(k, &t);
	db = tc_open(k, NULL);
	assert_int_equal(compact_run(db, &o, &r), 0);
	assert_false(r.failed);
	assert_int_equal(r.nfiles, t.max_id);
	assert_true(r.ncompacted + r.nremoved > 0);
	assert_int_equal(r.nskipped, 0);
	assert_true(r.after.physical < r.before.physical);
	kvdb_close(db);
	/* No dead record is left anywhere: one data record per live file. */
	db = tc_open(k, NULL);
	assert_int_equal(kvdb_scan(db, &scan), 0);
	kvdb_close(db);
	for (int i = 0; i < TC_NFILES; i++)
		assert_int_equal(tc_records_of(&scan, t.f[i].ino), t.live[i]);
	kvdb_scan_free(&scan);

	kf_open(k, TC_FILE_MAX);
	for (int i = 0; i < TC_NFILES; i++) {
		const struct compact_file *cf =
			tc_result_of(&r, t.f[i].ext.file_id);
		struct idx_attr a;

		if (!t.live[i]) {
			assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO,
						    t.f[i].name, &a),
					 -ENOENT);
			continue;
		}
		assert_non_null(cf);
		a = kf_attr(k, &t.f[i]);
		if (cf->action == COMPACT_COMPACTED) {
			/* The index points into the new file. */
			assert_int_equal(a.ext.file_id, cf->out_id);
			assert_true(cf->out_id > t.max_id);
		} else {
			assert_int_equal(cf->action, COMPACT_KEPT);
			assert_int_equal(a.ext.file_id, t.f[i].ext.file_id);
		}
		kf_verify(k, &t.f[i]);
	}
	for (size_t i = 0; i < r.nfiles; i++) {
		const struct compact_file *cf = &r.files[i];

		if (cf->action == COMPACT_COMPACTED ||
		    cf->action == COMPACT_REMOVED)
			assert_false(kf_exists(k, cf->id));
		else
			assert_true(kf_exists(k, cf->id));
	}
	assert_string_equal(k->errors, "");
	compact_result_free(&r);
}

/* How many records of type of ino the data files hold (a scan of k). */
static unsigned tc_count(struct kf *k, uint64_t ino, uint32_t type)
{
	struct kvdb_scan scan = {0};
	struct kvdb *db = tc_open(k, NULL);
	unsigned n = 0;

	assert_int_equal(kvdb_scan(db, &scan), 0);
	kvdb_close(db);
	for (size_t i = 0; i < scan.nrecs; i++)
		n += scan.recs[i].ino == ino && scan.recs[i].type == type;
	kvdb_scan_free(&scan);
	return n;
}

/* One gc run with o, which must succeed. */
static void tc_gc(struct kf *k, const struct compact_opts *o)
{
	struct kvdb *db = tc_open(k, NULL);
	struct compact_result r;

	assert_int_equal(compact_run(db, o, &r), 0);
	kvdb_close(db);
	compact_result_free(&r);
}

/*
 * Node and move records: gc keeps the newest node record of a special
 * file, a removal while an older node record of that file is left (the
 * next gc drops it), and every move record; it drops superseded node
 * records.
 */
static void test_compact_node_move_records(void **state)
{
	struct kf *k = *state;
	struct compact_opts o = {.threshold = 100};
	struct idx_attr p = {.mode = S_IFIFO | 0644},
			q = {.mode = S_IFSOCK | 0755}, a;
	uint64_t ino;
	uint32_t n;
	struct tc t;

	tc_populate(k, &t);
	kf_open(k, TC_FILE_MAX);
	assert_int_equal(idx_create(k->idx, KV_ROOT_INO, "p", &p, NULL), 0);
	kf_meta(k, p.ino);
	assert_int_equal(idx_rename(k->idx, KV_ROOT_INO, "p", KV_ROOT_INO, "p2",
				    0, 2, &ino, &n),
			 0);
	kf_meta(k, p.ino);
	assert_int_equal(idx_create(k->idx, KV_ROOT_INO, "q", &q, NULL), 0);
	kf_meta(k, q.ino);
	assert_int_equal(idx_unlink(k->idx, KV_ROOT_INO, "q", 0, 2, &ino, &n),
			 0);
	kf_meta(k, q.ino);
	assert_int_equal(idx_release_inode(k->idx, q.ino, &a.ext), 0);
	assert_int_equal(
		store_append_meta(k->st, STORE_REC_MOVE, 77, "/x\0/y", 5), 0);
	kf_close(k);
	assert_int_equal(tc_count(k, p.ino, STORE_REC_NODE), 2);
	assert_int_equal(tc_count(k, q.ino, STORE_REC_NODE), 2);

	tc_gc(k, &o);
	assert_int_equal(tc_count(k, p.ino, STORE_REC_NODE), 1);
	assert_int_equal(tc_count(k, q.ino, STORE_REC_NODE), 1);
	assert_int_equal(tc_count(k, 77, STORE_REC_MOVE), 1);
	/* Now that the removal is all that is left, it goes too. */
	tc_gc(k, &o);
	assert_int_equal(tc_count(k, p.ino, STORE_REC_NODE), 1);
	assert_int_equal(tc_count(k, q.ino, STORE_REC_NODE), 0);
	assert_int_equal(tc_count(k, 77, STORE_REC_MOVE), 1);
	assert_string_equal(k->errors, "");
}

/* Everything the tests compare before and after. */
struct tc_snap {
	uint64_t size[64];
	int exists[64];
	struct kv_extent ext[TC_NFILES];
};

static void tc_snapshot(struct kf *k, const struct tc *t, struct tc_snap *s)
{
	memset(s, 0, sizeof(*s));
	for (uint32_t id = 1; id < 64; id++) {
		s->exists[id] = kf_exists(k, id);
		s->size[id] = s->exists[id] ? kf_size(k, id) : 0;
	}
	kf_open(k, TC_FILE_MAX);
	for (int i = 0; i < TC_NFILES; i++)
		if (t->live[i])
			s->ext[i] = kf_attr(k, &t->f[i]).ext;
	kf_close(k);
}

/*
 * The data files and the index are as in before (but for the files r says
 * were removed: no live record was in them); every live file reads.
 */
static void tc_unchanged(struct kf *k, const struct tc *t,
			 const struct tc_snap *before,
			 const struct compact_result *r)
{
	struct tc_snap now;

	tc_snapshot(k, t, &now);
	for (uint32_t id = 1; id <= t->max_id; id++) {
		const struct compact_file *cf = r ? tc_result_of(r, id) : NULL;

		if (cf && cf->action == COMPACT_REMOVED && !now.exists[id])
			continue;
		assert_int_equal(now.exists[id], before->exists[id]);
		assert_int_equal(now.size[id], before->size[id]);
	}
	kf_open(k, TC_FILE_MAX);
	for (int i = 0; i < TC_NFILES; i++) {
		if (!t->live[i])
			continue;
		assert_memory_equal(&now.ext[i], &before->ext[i],
				    sizeof(now.ext[i]));
		kf_verify(k, &t->f[i]);
	}
	kf_close(k);
}

static void test_compact_dry_run_changes_nothing(void **state)
{
	struct kf *k = *state;
	struct compact_opts o = {.threshold = 100, .dry_run = 1};
	struct compact_result r;
	struct tc_snap before;
	struct kvdb *db;
	struct tc t;
	int planned = 0;

	tc_populate(k, &t);
	tc_snapshot(k, &t, &before);
	db = tc_open(k, NULL);
	assert_int_equal(compact_run(db, &o, &r), 0);
	kvdb_close(db);
	for (size_t i = 0; i < r.nfiles; i++)
		planned += r.files[i].action == COMPACT_COMPACTED ||
			   r.files[i].action == COMPACT_REMOVED;
	assert_true(planned > 0);
	assert_int_equal(r.ncompacted + r.nremoved, 0);
	assert_int_equal(r.before.physical, r.after.physical);
	tc_unchanged(k, &t, &before, NULL);
	compact_result_free(&r);
}

/* A failure of kind (call number at) stops gc and changes nothing. */
static void tc_fail(struct kf *k, enum fake_io_kind kind, unsigned long at)
{
	struct compact_opts o = {.threshold = 100};
	struct compact_result r;
	struct tc_snap before;
	struct kvdb *db;
	struct tc t;

	tc_populate(k, &t);
	tc_snapshot(k, &t, &before);
	fake_io_clear(&k->fio);
	k->fio.rule[kind].fail_at = at;
	k->fio.rule[kind].fail_err = -EIO;
	db = tc_open(k, &k->fops);
	assert_int_equal(compact_run(db, &o, &r), -EIO);
	kvdb_close(db);
	assert_true(r.failed);
	assert_int_equal(k->fio.nfailed[kind], 1);
	/* Files with no live record may be gone; none was compacted. */
	assert_int_equal(r.ncompacted, 0);
	assert_non_null(strstr(k->errors, "Input/output error"));
	fake_io_clear(&k->fio);
	tc_unchanged(k, &t, &before, &r);
	/* The copies were cut off again: the new file holds nothing. */
	if (kf_exists(k, t.max_id + 1))
		assert_int_equal(kf_size(k, t.max_id + 1), 0);
	compact_result_free(&r);
}

static void test_compact_write_fails_midway(void **state)
{
	/* The second write: the first record's payload. */
	tc_fail(*state, FAKE_IO_PWRITEV, 2);
}

static void test_compact_sync_fails(void **state)
{
	/* The copies' fdatasync, before the index would point at them. */
	tc_fail(*state, FAKE_IO_SYNC, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, kf_setup, kf_teardown)
		T(test_compact_moves_live_drops_dead),
		T(test_compact_node_move_records),
		T(test_compact_dry_run_changes_nothing),
		T(test_compact_write_fails_midway),
		T(test_compact_sync_fails),
#undef T
	};

	/* The failure tests make the engine warn on purpose. */
	log_set_level(LOG_LVL_ERR);
	return cmocka_run_group_tests_name("compact", tests, NULL, NULL);
}
