/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for crash recovery (fs/kvdb/recover.c) on a real index and
 * store in a mkdtemp data directory, the store doing its I/O through
 * tests/fakes/fake_io.h (real system calls, counted). Records are appended
 * the way the daemon saves a file (append, point the index at it, done);
 * a crash is played by truncating a data file mid-record, or by appending a
 * record the index never learns about. The tests check that recovery drops
 * the names whose records are gone, keeps the intact ones, punches out the
 * records nobody references, and honours the recovery horizons (what lies
 * below a horizon is not read). The temp directory must support hole
 * punching (SEEK_HOLE is how reclaimed records are seen).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define _XOPEN_SOURCE_EXTENDED 1
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_clock.h"
#include "fake_io.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "recover.h"
#include "store.h"

struct tr {
	char dir[256];
	struct idx *idx;
	struct store *st;
	struct fake_io fio;
	struct store_io_ops fops;
	struct fake_clock clock; /* the clock recovery reads */
	int64_t now;		 /* inode times */
	uint64_t released[8];	 /* inodes the release callback got */
	size_t nreleased;
};

/* One file as the daemon would have saved it. */
struct tr_file {
	uint64_t ino;
	struct kv_extent ext;
};

/* What the daemon's node table does for an inode nobody holds. */
static void tr_release(void *ctx, uint64_t ino)
{
	struct tr *t = ctx;
	struct kv_extent ext;
	uint64_t refs = 1;

	if (t->nreleased < 8)
		t->released[t->nreleased++] = ino;
	if (idx_release_inode(t->idx, ino, &ext) < 0 || ext.file_id == 0)
		return;
	if (idx_datafile_refs(t->idx, ext.file_id, &refs) < 0)
		refs = 1;
	store_free(t->st, &ext, refs);
}

static void tr_open_store(struct tr *t)
{
	struct store_config cfg = {.nlanes = 1};

	assert_int_equal(store_open(&t->st, t->dir, &cfg, &t->fops), 0);
}

static int setup(void **state)
{
	struct tr *t = calloc(1, sizeof(*t));
	const char *tmp = getenv("TMPDIR");
	char db[300];

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "%s/kvfs-test-recover-XXXXXX",
		 tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	snprintf(db, sizeof(db), "%s/index.db", t->dir);
	assert_int_equal(idx_open(&t->idx, db, 0755, 0, 0), 0);
	fake_io_init(&t->fio);
	t->fops = fake_io_ops(&t->fio);
	tr_open_store(t);
	t->now = 1000000000;
	fake_clock_set(&t->clock, 2000000000);
	*state = t;
	return 0;
}

static int tr_rm(const char *path, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	return remove(path);
}

static int teardown(void **state)
{
	struct tr *t = *state;

	store_close(t->st);
	idx_close(t->idx);
	fake_io_destroy(&t->fio);
	nftw(t->dir, tr_rm, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

/* Appends a record of len bytes for ino; commit 0 leaves it unreferenced. */
static struct kv_extent tr_append(struct tr *t, uint64_t ino, const char *name,
				  uint64_t len)
{
	unsigned char *buf = aligned_alloc(KV_ALIGN, kv_align_up(len));
	uint32_t crcs[64];
	struct kv_extent ext;

	assert_non_null(buf);
	assert_true(kv_nchunks(len) <= 64);
	memset(buf, 0, kv_align_up(len));
	memset(buf, 'a' + (int)(ino % 26), len);
	assert_int_equal(store_append(t->st, ino, name, buf, len, crcs, &ext),
			 0);
	free(buf);
	return ext;
}

/* Creates /name with a record of len bytes, committed to the index. */
static struct tr_file tr_save(struct tr *t, const char *name, uint64_t len)
{
	struct idx_attr a = {.mode = S_IFREG | 0644};
	unsigned char *buf = aligned_alloc(KV_ALIGN, kv_align_up(len));
	struct kv_extent old;
	struct tr_file f;
	uint32_t crcs[64];

	assert_non_null(buf);
	a.atime_ns = a.mtime_ns = a.ctime_ns = t->now;
	assert_int_equal(idx_create(t->idx, KV_ROOT_INO, name, &a, NULL), 0);
	f.ino = a.ino;
	memset(buf, 0, kv_align_up(len));
	memset(buf, 'a' + (int)(f.ino % 26), len);
	assert_int_equal(
		store_append(t->st, f.ino, name, buf, len, crcs, &f.ext), 0);
	assert_int_equal(idx_set_extent(t->idx, f.ino, len, t->now, &f.ext,
					crcs, kv_nchunks(len), &old),
			 0);
	store_append_done(t->st, f.ext.file_id);
	free(buf);
	return f;
}

static void tr_path(struct tr *t, uint32_t id, char *path, size_t len)
{
	snprintf(path, len, "%s/data/%06u.kvd", t->dir, id);
}

/* Whether [off, off + len) of data file id is one hole. */
static int tr_is_hole(struct tr *t, uint32_t id, uint64_t off)
{
	char path[300];
	off_t hole;
	int fd;

	tr_path(t, id, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	hole = lseek(fd, (off_t)off, SEEK_HOLE);
	close(fd);
	return hole == (off_t)off;
}

static uint64_t tr_file_size(struct tr *t, uint32_t id)
{
	char path[300];
	struct stat sb;

	tr_path(t, id, path, sizeof(path));
	assert_int_equal(stat(path, &sb), 0);
	return (uint64_t)sb.st_size;
}

static int tr_exists(struct tr *t, const char *name)
{
	struct idx_attr a;

	return idx_lookup(t->idx, KV_ROOT_INO, name, &a) == 0;
}

/* Plays a crash: the store goes away without its horizons, size cut. */
static void tr_crash(struct tr *t, uint32_t id, uint64_t cut)
{
	char path[300];

	store_close(t->st);
	t->st = NULL;
	if (cut) {
		tr_path(t, id, path, sizeof(path));
		assert_int_equal(truncate(path, (off_t)cut), 0);
	}
	tr_open_store(t);
	fake_io_clear(&t->fio);
}

static void tr_recover(struct tr *t, int crashed, struct recover_result *r)
{
	const struct recover_ops ops = {.clock = fake_clock_src(&t->clock),
					.release = tr_release,
					.ctx = t};

	recover_run(t->idx, t->st, crashed, &ops, r);
}

/*
 * A data file cut mid-record: the name of the cut record is dropped and its
 * inode released, the names before it stay, and a record appended but
 * never committed is punched out. The file gets a horizon at its new end.
 */
static void test_torn_file(void **state)
{
	struct tr *t = *state;
	struct kv_extent orphan;
	struct recover_result r;
	struct tr_file a, b, c;
	uint64_t offs[4], cut;
	uint32_t ids[4];

	a = tr_save(t, "a.bin", 3 * KV_ALIGN);
	orphan = tr_append(t, 999, "orphan.bin", 2 * KV_ALIGN);
	store_append_done(t->st, orphan.file_id);
	b = tr_save(t, "b.bin", 5000);
	c = tr_save(t, "c.bin", 4 * KV_ALIGN);
	assert_int_equal(a.ext.file_id, c.ext.file_id);
	assert_int_equal(orphan.file_id, c.ext.file_id);
	assert_false(tr_is_hole(t, orphan.file_id, orphan.off));
	/* The crash: c's record ends half way through its payload. */
	cut = c.ext.off + c.ext.hdr_len + 2 * KV_ALIGN;
	tr_crash(t, c.ext.file_id, cut);

	tr_recover(t, 1, &r);
	assert_int_equal(r.dropped, 1);
	assert_int_equal(r.nfiles, 1);
	assert_int_equal(r.walked, cut);
	assert_true(tr_exists(t, "a.bin"));
	assert_true(tr_exists(t, "b.bin"));
	assert_false(tr_exists(t, "c.bin"));
	assert_int_equal(t->nreleased, 1);
	assert_int_equal(t->released[0], c.ino);
	/* The record nobody pointed at is reclaimed; a's and b's are not. */
	assert_true(tr_is_hole(t, orphan.file_id, orphan.off));
	assert_false(tr_is_hole(t, a.ext.file_id, a.ext.off));
	assert_false(tr_is_hole(t, b.ext.file_id, b.ext.off));
	/* The next recovery starts at the file's end. */
	assert_int_equal(idx_horizons_get(t->idx, ids, offs, 4), 1);
	assert_int_equal(ids[0], c.ext.file_id);
	assert_int_equal(offs[0], tr_file_size(t, c.ext.file_id));
}

/*
 * A horizon at a file's end: the file is not read at all, and an
 * unreferenced record below a horizon is left alone (it is not walked),
 * while one above it is reclaimed.
 */
static void test_horizons(void **state)
{
	struct tr *t = *state;
	struct kv_extent below, above;
	struct recover_result r;
	struct tr_file a, b;
	uint64_t end, mid;
	uint32_t id;

	a = tr_save(t, "a.bin", KV_ALIGN);
	id = a.ext.file_id;
	end = tr_file_size(t, id);
	assert_int_equal(idx_horizons_put(t->idx, 1, &id, &end), 0);
	tr_crash(t, id, 0);
	tr_recover(t, 1, &r);
	assert_int_equal(r.dropped, 0);
	assert_int_equal(r.walked, 0);
	assert_int_equal(r.nfiles, 1);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PREADV), 0);
	assert_true(tr_exists(t, "a.bin"));

	/* Now a horizon in the middle of the next file (a new store appends
	 * to a new one). */
	below = tr_append(t, 998, "below.bin", KV_ALIGN);
	store_append_done(t->st, below.file_id);
	b = tr_save(t, "b.bin", KV_ALIGN);
	mid = b.ext.off;
	above = tr_append(t, 999, "above.bin", KV_ALIGN);
	store_append_done(t->st, above.file_id);
	assert_true(below.file_id > id);
	id = below.file_id;
	assert_int_equal(b.ext.file_id, id);
	assert_int_equal(above.file_id, id);
	assert_int_equal(idx_horizons_put(t->idx, 1, &id, &mid), 0);
	end = tr_file_size(t, id);
	tr_crash(t, id, 0);
	tr_recover(t, 1, &r);
	assert_int_equal(r.dropped, 0);
	assert_int_equal(r.walked, end - mid);
	assert_true(fake_io_calls(&t->fio, FAKE_IO_PREADV) > 0);
	assert_true(tr_exists(t, "a.bin"));
	assert_true(tr_exists(t, "b.bin"));
	assert_false(tr_is_hole(t, id, below.off));
	assert_true(tr_is_hole(t, id, above.off));
	assert_false(tr_is_hole(t, id, b.ext.off));
}

/*
 * After a clean stop nothing is read; the newest files get a horizon at
 * their end and the horizons of removed files are forgotten.
 */
static void test_clean_stop(void **state)
{
	struct tr *t = *state;
	struct recover_result r;
	uint32_t ids[4], gone = 77;
	uint64_t offs[4], zero = 0;
	struct tr_file a;

	a = tr_save(t, "a.bin", 3 * KV_ALIGN);
	assert_int_equal(idx_horizons_put(t->idx, 1, &gone, &zero), 0);
	tr_crash(t, a.ext.file_id, 0);
	tr_recover(t, 0, &r);
	assert_int_equal(r.dropped, 0);
	assert_int_equal(r.walked, 0);
	assert_int_equal(r.nfiles, 1);
	assert_int_equal(fake_io_calls(&t->fio, FAKE_IO_PREADV), 0);
	assert_int_equal(idx_horizons_get(t->idx, ids, offs, 4), 1);
	assert_int_equal(ids[0], a.ext.file_id);
	assert_int_equal(offs[0], tr_file_size(t, a.ext.file_id));
	assert_true(tr_exists(t, "a.bin"));
}

/* A data file cut inside its first record: every name in it is dropped. */
static void test_file_gone(void **state)
{
	struct tr *t = *state;
	struct recover_result r;
	struct tr_file a;

	a = tr_save(t, "a.bin", KV_ALIGN);
	tr_save(t, "b.bin", KV_ALIGN);
	tr_crash(t, a.ext.file_id, KV_ALIGN / 2);
	tr_recover(t, 1, &r);
	assert_int_equal(r.dropped, 2);
	assert_false(tr_exists(t, "a.bin"));
	assert_false(tr_exists(t, "b.bin"));
	assert_int_equal(t->nreleased, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_torn_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_horizons, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clean_stop, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_file_gone, setup,
						teardown),
	};

	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
