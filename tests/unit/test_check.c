/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the fsck and rebuild engines (fs/kvdb/check.c,
 * fs/kvdb/rebuild.c) on a real index and a real block store in a temporary
 * data directory (kvdb_fixture.h). A clean directory has no findings; a
 * data file cut inside a record and a payload byte flipped give a SHORT
 * and a CORRUPT finding (data file, offset, inode, path, chunk); repair
 * drops only the provably short block; a rebuild of a deleted index
 * restores every name, size and byte.
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
#include <unistd.h>

#include "check.h"
#include "datafile.h"
#include "kvdb.h"
#include "kvdb_fixture.h"
#include "log.h"
#include "rebuild.h"
#include "record.h"

/* Records rotate to a new data file past this many bytes. */
#define TK_FILE_MAX (128u * 1024u)
#define TK_NFILES 6

struct tk {
	struct kf_file f[TK_NFILES];
	uint64_t sub; /* the directory "sub" */
};

/* Six files, one of them in /sub, over several data files. */
static void tk_populate(struct kf *k, struct tk *t)
{
	static const uint64_t lens[TK_NFILES] = {40000, 300000, 7000,
						 60000, 1,	90000};
	static const char *const names[TK_NFILES] = {"a", "b", "c",
						     "d", "e", "f"};

	kf_open(k, TK_FILE_MAX);
	t->sub = kf_mkdir(k);
	for (int i = 0; i < TK_NFILES; i++) {
		t->f[i] = (struct kf_file){.name = names[i],
					   .dir = i == 3 ? t->sub : 0,
					   .len = lens[i],
					   .seed = 300u + i};
		kf_write(k, &t->f[i]);
	}
	kf_close(k);
}

static struct kvdb *tk_open(struct kf *k, unsigned flags)
{
	struct kvdb_opts o = {
		.flags = KVDB_NO_INDEX | KVDB_INDEX_COUNT | flags,
		.who = "fsck",
		.hooks = {.error = kf_error, .arg = k},
	};
	struct kvdb_error err;
	struct kvdb *db = NULL;

	assert_int_equal(kvdb_open(&db, k->dir, &o, &err), 0);
	return db;
}

/* Opens the index of db and checks; the scan is done and freed here. */
static void tk_check(struct kvdb *db, int repair, struct check_result *res)
{
	struct check_opts o = {.repair = repair, .now_ns = 2};
	struct kvdb_scan scan = {0};
	struct kvdb_error err;

	assert_int_equal(kvdb_open_index(db, &err), 0);
	assert_int_equal(check_run(db, &o, &scan, res), 0);
	kvdb_scan_free(&scan);
}

static const struct check_finding *tk_find(const struct check_result *res,
					   enum check_kind kind, uint64_t ino)
{
	for (size_t i = 0; i < res->n; i++)
		if (res->v[i].kind == kind && res->v[i].ino == ino)
			return &res->v[i];
	return NULL;
}

static void test_check_clean(void **state)
{
	struct kf *k = *state;
	struct check_result res;
	struct kvdb *db;
	struct tk t;

	tk_populate(k, &t);
	db = tk_open(k, 0);
	tk_check(db, 0, &res);
	kvdb_close(db);
	assert_int_equal(res.sum.checked, TK_NFILES);
	assert_int_equal(res.sum.damaged, 0);
	assert_int_equal(res.sum.unreferenced + res.sum.torn, 0);
	assert_int_equal(res.n, 0);
	assert_string_equal(k->errors, "");
	check_result_free(&res);
}

/*
 * Damages t: cuts the data file of file b (the largest) 1000 bytes into
 * b's payload, and flips one payload byte of file a in its second chunk
 * when a sits in another data file (else in its first). Returns a's
 * damaged chunk.
 */
static int64_t tk_damage(struct kf *k, struct tk *t)
{
	const struct kf_file *a = &t->f[0], *b = &t->f[1];
	char path[PATH_MAX + 32];
	unsigned char c;
	uint64_t pos = 1000;
	int fd;

	assert_true(b->ext.file_id != a->ext.file_id ||
		    a->ext.off < b->ext.off);
	kf_datafile(k, b->ext.file_id, path, sizeof(path));
	assert_int_equal(
		truncate(path, (off_t)(b->ext.off + b->ext.hdr_len + 1000)), 0);
	kf_datafile(k, a->ext.file_id, path, sizeof(path));
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(
		pread(fd, &c, 1, (off_t)(a->ext.off + a->ext.hdr_len + pos)),
		1);
	c ^= 0x5a;
	assert_int_equal(
		pwrite(fd, &c, 1, (off_t)(a->ext.off + a->ext.hdr_len + pos)),
		1);
	close(fd);
	return (int64_t)(pos / KV_CHUNK_SIZE);
}

static void test_check_finds_short_and_corrupt(void **state)
{
	struct kf *k = *state;
	const struct check_finding *x;
	struct check_result res;
	struct kvdb *db;
	struct tk t;
	int64_t chunk;

	tk_populate(k, &t);
	chunk = tk_damage(k, &t);
	db = tk_open(k, 0);
	tk_check(db, 0, &res);
	kvdb_close(db);
	assert_int_equal(res.sum.nshort, 1);
	assert_int_equal(res.sum.ncorrupt, 1);
	assert_int_equal(res.sum.damaged, 2);
	assert_int_equal(res.sum.dropped, 0);

	x = tk_find(&res, CHECK_SHORT, t.f[1].ino);
	assert_non_null(x);
	assert_int_equal(x->data_file, t.f[1].ext.file_id);
	assert_int_equal(x->offset, t.f[1].ext.off);
	assert_string_equal(x->path, "/b");
	assert_non_null(strstr(x->detail, "provably short"));
	assert_int_equal(x->action, CHECK_ACTION_NONE);

	x = tk_find(&res, CHECK_CORRUPT, t.f[0].ino);
	assert_non_null(x);
	assert_int_equal(x->data_file, t.f[0].ext.file_id);
	assert_int_equal(x->offset, t.f[0].ext.off);
	assert_string_equal(x->path, "/a");
	assert_int_equal(x->chunk, chunk);
	assert_non_null(strstr(x->detail, "CRC mismatch"));
	assert_int_equal(x->action, CHECK_ACTION_KEPT);
	check_result_free(&res);
}

static void test_check_repair_drops_only_short(void **state)
{
	struct kf *k = *state;
	const struct check_finding *x;
	struct check_result res;
	struct idx_attr a;
	struct kvdb *db;
	struct tk t;

	tk_populate(k, &t);
	tk_damage(k, &t);
	db = tk_open(k, KVDB_DATA_RW);
	tk_check(db, 1, &res);
	kvdb_close(db);
	assert_int_equal(res.sum.dropped, 1);
	assert_int_equal(res.sum.repair_failed, 0);
	x = tk_find(&res, CHECK_SHORT, t.f[1].ino);
	assert_non_null(x);
	assert_int_equal(x->action, CHECK_ACTION_DROPPED);
	x = tk_find(&res, CHECK_CORRUPT, t.f[0].ino);
	assert_non_null(x);
	assert_int_equal(x->action, CHECK_ACTION_KEPT);
	check_result_free(&res);

	/* b is gone, a is kept (damaged), the others read back whole. */
	kf_open(k, TK_FILE_MAX);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "b", &a), -ENOENT);
	a = kf_attr(k, &t.f[0]);
	assert_int_equal(a.ext.file_id, t.f[0].ext.file_id);
	for (int i = 2; i < TK_NFILES; i++)
		kf_verify(k, &t.f[i]);
	kf_close(k);

	/* A second check finds the corrupt block only. */
	db = tk_open(k, 0);
	tk_check(db, 0, &res);
	kvdb_close(db);
	assert_int_equal(res.sum.nshort, 0);
	assert_int_equal(res.sum.ncorrupt, 1);
	check_result_free(&res);
}

static void tk_rm_index(struct kf *k)
{
	static const char *const sfx[] = {"", "-wal", "-shm"};
	char path[PATH_MAX + 32];

	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/index.db%s", k->dir, sfx[i]);
		unlink(path);
	}
}

static void test_rebuild_restores_names(void **state)
{
	struct kf *k = *state;
	struct rebuild_opts ro = {.now_ns = 3};
	struct check_opts co = {.now_ns = 3};
	struct rebuild_result rb;
	struct check_result res;
	struct kvdb_scan scan = {0};
	struct kvdb_error err;
	struct kvdb *db;
	struct tk t;

	tk_populate(k, &t);
	tk_rm_index(k);
	db = tk_open(k, 0);
	/* Without an index there is nothing to check. */
	assert_int_equal(kvdb_open_index(db, &err), -ENOENT);
	assert_int_equal(err.stage, KVDB_STAGE_INDEX_MISSING);
	assert_int_equal(rebuild_run(db, &ro, &scan, &rb), 0);
	assert_true(rb.done);
	assert_null(rb.old);
	assert_int_equal(rb.files, TK_NFILES);
	assert_int_equal(rb.dirs, 1);
	assert_int_equal(rb.data_recs, TK_NFILES);
	assert_int_equal(rb.skipped, 0);
	assert_int_equal(rb.nnotes, 0);
	/* The rebuilt index checks clean, on the same scan. */
	assert_int_equal(kvdb_open_index(db, &err), 0);
	assert_int_equal(check_run(db, &co, &scan, &res), 0);
	kvdb_close(db);
	assert_int_equal(res.sum.checked, TK_NFILES);
	assert_int_equal(res.sum.damaged, 0);
	check_result_free(&res);
	rebuild_result_free(&rb);
	kvdb_scan_free(&scan);

	/* Every name is back, with its inode number, size and bytes. */
	kf_open(k, TK_FILE_MAX);
	/* Directories get new numbers: records name files only. */
	{
		struct idx_attr sub;

		assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "sub", &sub),
				 0);
		assert_true(S_ISDIR(sub.mode));
		t.f[3].dir = sub.ino;
	}
	for (int i = 0; i < TK_NFILES; i++) {
		struct idx_attr a = kf_attr(k, &t.f[i]);

		assert_int_equal(a.ino, t.f[i].ino);
		kf_verify(k, &t.f[i]);
	}
	kf_close(k);
	assert_string_equal(k->errors, "");
}

/* Rebuilds the index of k->dir from its data files; opens it again. */
static void tk_rebuild(struct kf *k, struct rebuild_result *rb)
{
	struct rebuild_opts ro = {.now_ns = 3};
	struct kvdb_scan scan = {0};
	struct kvdb *db;

	tk_rm_index(k);
	db = tk_open(k, 0);
	assert_int_equal(rebuild_run(db, &ro, &scan, rb), 0);
	kvdb_close(db);
	kvdb_scan_free(&scan);
	kf_open(k, TK_FILE_MAX);
}

/*
 * Hard links, special files and directory moves survive a rebuild: every
 * name of a file (one inode), a FIFO and a device node with its rdev, a
 * symlink's target, a removed FIFO stays removed, and the files of a
 * renamed directory (and of one renamed inside it) are under the new
 * names.
 */
static void test_rebuild_links_nodes_moves(void **state)
{
	struct kf *k = *state;
	struct kf_file f = {.name = "f", .len = 5000, .seed = 9};
	struct kf_file g = {.name = "g", .len = 3000, .seed = 10};
	struct idx_attr a, fifo = {.mode = S_IFIFO | 0600},
			   dev = {.mode = S_IFCHR | 0600, .rdev = 0x0103},
			   lnk = {.mode = S_IFLNK | 0777},
			   gone = {.mode = S_IFIFO | 0600},
			   d2 = {.mode = S_IFDIR | 0755};
	struct rebuild_result rb;
	uint64_t replaced;
	uint32_t rn;
	char t[16];

	kf_open(k, TK_FILE_MAX);
	f.dir = kf_mkdir(k);
	g.dir = f.dir;
	kf_write(k, &f);
	kf_write(k, &g);
	assert_int_equal(idx_create(k->idx, f.dir, "d2", &d2, NULL), 0);
	/* f gets a second name; FIFO, device, symlink; a FIFO made, removed. */
	assert_int_equal(idx_link(k->idx, f.ino, KV_ROOT_INO, "f2", 2, &a), 0);
	kf_meta(k, f.ino);
	assert_int_equal(idx_create(k->idx, f.dir, "p", &fifo, NULL), 0);
	kf_meta(k, fifo.ino);
	assert_int_equal(idx_create(k->idx, KV_ROOT_INO, "c", &dev, NULL), 0);
	kf_meta(k, dev.ino);
	assert_int_equal(idx_create(k->idx, KV_ROOT_INO, "l", &lnk, "sub/g"),
			 0);
	kf_meta(k, lnk.ino);
	assert_int_equal(idx_create(k->idx, KV_ROOT_INO, "q", &gone, NULL), 0);
	kf_meta(k, gone.ino);
	assert_int_equal(
		idx_unlink(k->idx, KV_ROOT_INO, "q", 0, 2, &replaced, &rn), 0);
	kf_meta(k, gone.ino);
	/* /sub -> /top, then /top/d2 -> /d3 after g moved into it. */
	assert_int_equal(idx_rename(k->idx, KV_ROOT_INO, "sub", KV_ROOT_INO,
				    "top", 0, 2, &replaced, &rn),
			 0);
	assert_int_equal(store_append_meta(k->st, STORE_REC_MOVE, f.dir,
					   "/sub\0/top", 9),
			 0);
	assert_int_equal(idx_rename(k->idx, f.dir, "g", d2.ino, "g", 0, 2,
				    &replaced, &rn),
			 0);
	kf_meta(k, g.ino);
	assert_int_equal(idx_rename(k->idx, f.dir, "d2", KV_ROOT_INO, "d3", 0,
				    2, &replaced, &rn),
			 0);
	assert_int_equal(store_append_meta(k->st, STORE_REC_MOVE, d2.ino,
					   "/top/d2\0/d3", 11),
			 0);
	kf_close(k);

	tk_rebuild(k, &rb);
	assert_int_equal(rb.files, 5); /* f, g, the FIFO, device, symlink */
	assert_int_equal(rb.skipped, 0);
	rebuild_result_free(&rb);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "top", &a), 0);
	assert_int_equal(idx_lookup(k->idx, a.ino, "f", &a), 0);
	assert_int_equal(a.ino, f.ino);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "f2", &a), 0);
	assert_int_equal(a.ino, f.ino);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "d3", &a), 0);
	assert_int_equal(idx_lookup(k->idx, a.ino, "g", &a), 0);
	assert_int_equal(a.ino, g.ino);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "top", &a), 0);
	assert_int_equal(idx_lookup(k->idx, a.ino, "p", &a), 0);
	assert_true(S_ISFIFO(a.mode));
	assert_int_equal(a.mode & 07777, 0600);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "c", &a), 0);
	assert_true(S_ISCHR(a.mode));
	assert_int_equal(a.rdev, 0x0103);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "l", &a), 0);
	assert_int_equal(idx_readlink(k->idx, a.ino, t, sizeof(t)), 5);
	assert_string_equal(t, "sub/g");
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "q", &a), -ENOENT);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "sub", &a), -ENOENT);
	kf_close(k);
	assert_string_equal(k->errors, "");
}

/*
 * A rename whose name record is missing (lost with another record, or
 * never written): fsck's audit finds it (NAME), repair appends a fresh
 * name record, and a rebuild then restores the final name.
 */
static void test_audit_repairs_lost_name(void **state)
{
	struct kf *k = *state;
	struct kf_file f = {.name = "x.bin_7.tmp", .len = 9000, .seed = 4};
	const struct check_finding *x;
	struct check_result res;
	struct rebuild_result rb;
	struct kvdb *db;
	struct idx_attr a;
	uint64_t replaced;
	uint32_t rn;

	kf_open(k, TK_FILE_MAX);
	kf_write(k, &f);
	assert_int_equal(idx_rename(k->idx, KV_ROOT_INO, f.name, KV_ROOT_INO,
				    "x.bin", 0, 2, &replaced, &rn),
			 0);
	kf_close(k);
	/* Checked: the name a rebuild would give is the temporary one. */
	db = tk_open(k, 0);
	tk_check(db, 0, &res);
	kvdb_close(db);
	x = tk_find(&res, CHECK_NAME, f.ino);
	assert_non_null(x);
	assert_string_equal(x->path, "/x.bin");
	assert_int_equal(x->action, CHECK_ACTION_NONE);
	assert_int_equal(res.sum.names_wrong, 1);
	assert_int_equal(res.sum.names_fixed, 0);
	check_result_free(&res);
	/* Repaired, then clean. */
	db = tk_open(k, KVDB_DATA_RW);
	tk_check(db, 1, &res);
	kvdb_close(db);
	assert_int_equal(tk_find(&res, CHECK_NAME, f.ino)->action,
			 CHECK_ACTION_FIXED);
	assert_int_equal(res.sum.names_fixed, 1);
	check_result_free(&res);
	db = tk_open(k, 0);
	tk_check(db, 0, &res);
	kvdb_close(db);
	assert_int_equal(res.sum.names_wrong, 0);
	check_result_free(&res);
	/* The rebuild restores the final name. */
	tk_rebuild(k, &rb);
	assert_int_equal(rb.lost_found, 0);
	rebuild_result_free(&rb);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "x.bin", &a), 0);
	assert_int_equal(a.ino, f.ino);
	kf_close(k);
}

/*
 * Without the repair, the rebuild keeps the file in /lost+found (under its
 * temporary name and its inode number), where the daemon's sweep of stale
 * temporary files does not remove it.
 */
static void test_rebuild_lost_found(void **state)
{
	struct kf *k = *state;
	struct kf_file f = {.name = "y.bin_7.tmp", .len = 100, .seed = 5};
	struct rebuild_result rb;
	struct idx_attr a;
	uint64_t replaced;
	uint32_t rn;
	char name[64];

	kf_open(k, TK_FILE_MAX);
	kf_write(k, &f);
	assert_int_equal(idx_rename(k->idx, KV_ROOT_INO, f.name, KV_ROOT_INO,
				    "y.bin", 0, 2, &replaced, &rn),
			 0);
	kf_close(k);
	tk_rebuild(k, &rb);
	assert_int_equal(rb.lost_found, 1);
	assert_int_equal(rb.nnotes, 1);
	snprintf(name, sizeof(name), "y.bin_7.tmp.%llu",
		 (unsigned long long)f.ino);
	assert_string_equal(rb.notes[0].what + strlen("/lost+found/"), name);
	rebuild_result_free(&rb);
	assert_int_equal(idx_lookup(k->idx, KV_ROOT_INO, "lost+found", &a), 0);
	assert_int_equal(idx_lookup(k->idx, a.ino, name, &a), 0);
	assert_int_equal(a.ino, f.ino);
	assert_int_equal(a.size, 100);
	kf_close(k);
}

static void test_kvdb_lock_busy(void **state)
{
	struct kf *k = *state;
	struct kvdb_error err;
	struct kvdb *db, *db2 = NULL;
	struct tk t;
	int fd;

	tk_populate(k, &t);
	db = tk_open(k, 0);
	/* flock(2) locks belong to the open file: a second open is refused. */
	assert_int_equal(kvdb_lock(k->dir, "fsck", &fd, &err), -EBUSY);
	assert_int_equal(err.stage, KVDB_STAGE_LOCK);
	assert_non_null(strstr(err.msg, "is locked by process"));
	assert_non_null(strstr(err.msg, "fsck works on an unmounted"));
	kvdb_close(db);
	db2 = tk_open(k, 0);
	kvdb_close(db2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, kf_setup, kf_teardown)
		T(test_check_clean),
		T(test_check_finds_short_and_corrupt),
		T(test_check_repair_drops_only_short),
		T(test_rebuild_restores_names),
		T(test_rebuild_links_nodes_moves),
		T(test_audit_repairs_lost_name),
		T(test_rebuild_lost_found),
		T(test_kvdb_lock_busy),
#undef T
	};

	/* Repair and rebuild log what they change. */
	log_set_level(LOG_LVL_ERR);
	return cmocka_run_group_tests_name("check", tests, NULL, NULL);
}
