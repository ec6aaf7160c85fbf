/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the daemon's way of opening a data directory
 * (fs/kvdb/kvdb.c with KVDB_STORE): a fresh DATADIR gets an index (its
 * root with the mode asked for) and a data directory; a second open while
 * the first holds kvfs.lock fails with -EBUSY naming the holder's pid; a
 * file written through the handle survives kvdb_reopen_index() and a close
 * and reopen; kvdb_close_clean() leaves kvfs.clean, which the next
 * kvdb_recover() takes away, skipping the walk a crash would need.
 * The store's I/O goes through tests/fakes/fake_io.h (kvdb_fixture.h).
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

#include "clock.h"
#include "kvdb.h"
#include "kvdb_fixture.h"
#include "log.h"

/* Opens k->dir as the daemon does, on the fixture's I/O; 0 or -errno. */
static int tv_open(struct kf *k, unsigned flags, struct kvdb **db,
		   struct kvdb_error *err)
{
	const struct store_config scfg = {.nlanes = 1, .batch_names = 1};
	const struct kvdb_opts o = {
		.flags = KVDB_STORE | flags,
		.who = "kvfs",
		.io = &k->fops,
		.store = &scfg,
		.root_mode = 0710,
	};

	return kvdb_open(db, k->dir, &o, err);
}

static struct kvdb *tv_open_ok(struct kf *k)
{
	struct kvdb_error err;
	struct kvdb *db = NULL;

	assert_int_equal(tv_open(k, KVDB_INDEX_CREATE, &db, &err), 0);
	assert_non_null(db->idx);
	assert_non_null(db->store);
	assert_int_equal(db->ndfs, 0);
	return db;
}

/* Lends db's index and store to the fixture's helpers (kf_write...). */
static void tv_lend(struct kf *k, struct kvdb *db)
{
	k->idx = db ? db->idx : NULL;
	k->st = db ? db->store : NULL;
}

static int tv_exists(const struct kf *k, const char *name)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", k->dir, name);
	return access(path, F_OK) == 0;
}

static void tv_no_release(void *ctx, uint64_t ino)
{
	(void)ctx;
	(void)ino;
}

static void tv_free_extent(void *arg, const struct kv_extent *ext)
{
	(void)arg;
	(void)ext;
}

static void tv_recover(struct kvdb *db, struct recover_result *r)
{
	const struct recover_ops ops = {.clock = clock_realtime,
					.release = tv_no_release};

	memset(r, 0, sizeof(*r));
	kvdb_recover(db, tv_free_extent, &ops, r);
}

static void test_open_fresh(void **state)
{
	struct kf *k = *state;
	struct kvdb_error err;
	struct idx_attr root;
	struct kvdb *db = NULL;
	struct stat st;
	char pid[32], buf[32] = "", path[PATH_MAX + 16];
	int fd;

	/* Without KVDB_INDEX_CREATE a missing index is an error. */
	assert_int_equal(tv_open(k, 0, &db, &err), -ENOENT);
	assert_null(db);
	assert_int_equal(err.stage, KVDB_STAGE_INDEX_MISSING);
	assert_false(tv_exists(k, "index.db"));

	db = tv_open_ok(k);
	assert_true(tv_exists(k, "index.db"));
	snprintf(path, sizeof(path), "%s/data", k->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(idx_getattr(db->idx, KV_ROOT_INO, &root), 0);
	assert_int_equal(root.mode, S_IFDIR | 0710);
	assert_int_equal(root.uid, getuid());
	/* kvfs.lock records who holds it. */
	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	snprintf(path, sizeof(path), "%s/kvfs.lock", k->dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) > 0);
	close(fd);
	assert_string_equal(buf, pid);
	kvdb_close(db);
}

static void test_open_busy(void **state)
{
	struct kf *k = *state;
	struct kvdb *db = tv_open_ok(k), *db2 = NULL;
	struct kvdb_error err;
	char pid[32];

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	/* flock(2) locks belong to the open file: a second open is refused. */
	assert_int_equal(tv_open(k, KVDB_INDEX_CREATE, &db2, &err), -EBUSY);
	assert_null(db2);
	assert_int_equal(err.err, -EBUSY);
	assert_int_equal(err.stage, KVDB_STAGE_LOCK);
	assert_string_equal(err.holder, pid);
	assert_non_null(strstr(err.msg, "is locked by process"));
	assert_non_null(strstr(err.msg, pid));
	assert_non_null(strstr(err.msg, "kvfs works on an unmounted"));
	/* The holder's handle is untouched by the refused open. */
	assert_int_equal(idx_sync(db->idx), 0);
	kvdb_close(db);
	db2 = tv_open_ok(k);
	kvdb_close(db2);
}

static void test_reopen(void **state)
{
	struct kf *k = *state;
	struct kf_file f = {.name = "blk", .len = 70000, .seed = 7};
	struct kvdb_error err;
	struct kvdb *db = tv_open_ok(k);

	tv_lend(k, db);
	kf_write(k, &f);
	/* As the daemon does in its child after fork(2). */
	assert_int_equal(kvdb_reopen_index(db, &err), 0);
	assert_non_null(db->idx);
	tv_lend(k, db);
	kf_verify(k, &f);
	tv_lend(k, NULL);
	kvdb_close(db);

	db = tv_open_ok(k);
	tv_lend(k, db);
	kf_verify(k, &f);
	tv_lend(k, NULL);
	kvdb_close(db);
}

static void test_clean_marker(void **state)
{
	struct kf *k = *state;
	struct kf_file f = {.name = "blk", .len = 300000, .seed = 9};
	struct recover_result r;
	struct kvdb *db = tv_open_ok(k);

	tv_recover(db, &r);
	tv_lend(k, db);
	kf_write(k, &f);
	tv_lend(k, NULL);
	/* A stop without kvdb_close_clean() is a crash for the next start. */
	kvdb_close(db);
	assert_false(tv_exists(k, KVDB_CLEAN));
	db = tv_open_ok(k);
	tv_recover(db, &r);
	assert_true(r.walked >= f.len);
	assert_int_equal(r.dropped, 0);
	kvdb_close_clean(db);
	assert_true(tv_exists(k, KVDB_CLEAN));

	/* After a clean stop nothing is walked and the marker goes. */
	db = tv_open_ok(k);
	tv_recover(db, &r);
	assert_false(tv_exists(k, KVDB_CLEAN));
	assert_int_equal(r.walked, 0);
	tv_lend(k, db);
	kf_verify(k, &f);
	tv_lend(k, NULL);
	kvdb_close(db);

	/* No marker from a handle that never recovered. */
	db = tv_open_ok(k);
	kvdb_close_clean(db);
	assert_false(tv_exists(k, KVDB_CLEAN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, kf_setup, kf_teardown)
		T(test_open_fresh),
		T(test_open_busy),
		T(test_reopen),
		T(test_clean_marker),
#undef T
	};

	/* Recovery logs what it did. */
	log_set_level(LOG_LVL_ERR);
	return cmocka_run_group_tests_name("kvdb", tests, NULL, NULL);
}
