/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the record side of index.h: extents and CRCs, releasing and
 * purging orphans, data-file references, statfs, the rebuild's
 * idx_create_ino, idx_count, idx_file_records, idx_move_records and the
 * recovery horizons.
 */
#include "test_index_fx.h"

#include <sqlite3.h>

/* ---- extents ---- */

static void test_extent_and_crcs(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	struct kv_extent e1 = {.file_id = 3,
			       .hdr_len = 4096,
			       .off = 4096,
			       .len = 2 * KV_CHUNK_SIZE + 5};
	struct kv_extent e2 = {
		.file_id = 4, .hdr_len = 4096, .off = 81920, .len = 10};
	struct kv_extent none = {0}, old;
	uint32_t c1[3] = {1, 0xdeadbeef, 0x80000001}, c2[1] = {7};
	uint32_t *got, n;
	struct idx_attr a;
	char sql[128];

	assert_int_equal(idx_get_crcs(f->idx, x, &got, &n), 0);
	assert_null(got);
	assert_int_equal(n, 0);

	memset(&old, 0xff, sizeof(old));
	assert_int_equal(
		idx_set_extent(f->idx, x, e1.len, T0 + 7, &e1, c1, 3, &old), 0);
	ext_eq(&old, &none);
	a = getattr_ok(f, x);
	ext_eq(&a.ext, &e1);
	assert_int_equal(a.size, e1.len);
	assert_int_equal(a.mtime_ns, T0 + 7);
	assert_int_equal(a.ctime_ns, T0 + 7);
	assert_int_equal(idx_get_crcs(f->idx, x, &got, &n), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(got, c1, sizeof(c1));
	free(got);
	/* Stored as little-endian uint32. */
	snprintf(sql, sizeof(sql),
		 "SELECT hex(crcs) FROM inodes WHERE ino = %" PRIu64, x);
	assert_sql_text(f->db, sql, "01000000EFBEADDE01000080");
	statfs_eq(f, 3, e1.len);

	assert_int_equal(
		idx_set_extent(f->idx, x, 10, T0 + 8, &e2, c2, 1, &old), 0);
	ext_eq(&old, &e1);
	assert_int_equal(idx_get_crcs(f->idx, x, &got, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(got[0], 7);
	free(got);

	/* Back to empty: no record, no CRCs. */
	assert_int_equal(
		idx_set_extent(f->idx, x, 0, T0 + 9, &none, NULL, 0, &old), 0);
	ext_eq(&old, &e2);
	assert_int_equal(idx_get_crcs(f->idx, x, &got, &n), 0);
	assert_null(got);
	assert_int_equal(n, 0);
	statfs_eq(f, 3, 0);

	/* Errors change nothing. */
	assert_int_equal(
		idx_set_extent(f->idx, x, e1.len, NOW, &e1, c1, 2, &old),
		-EINVAL);
	assert_int_equal(idx_set_extent(f->idx, x, 0, NOW, &none, c1, 1, &old),
			 -EINVAL);
	assert_int_equal(idx_set_extent(f->idx, d, 10, NOW, &e2, c2, 1, &old),
			 -EINVAL);
	assert_int_equal(idx_set_extent(f->idx, 999, 10, NOW, &e2, c2, 1, &old),
			 -ENOENT);
	assert_int_equal(idx_get_crcs(f->idx, 999, &got, &n), -ENOENT);
	a = getattr_ok(f, x);
	ext_eq(&a.ext, &none);
	assert_int_equal(a.mtime_ns, T0 + 9);
}

/* ---- release, purge, refs, statfs ---- */

static void test_release_inode(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	uint64_t ino;
	uint32_t nlink;
	struct kv_extent e, want = {5, 4096, 12288, 3000};
	uint32_t crc = 9;
	char sql[128];

	assert_int_equal(
		idx_set_extent(f->idx, x, 3000, NOW, &want, &crc, 1, &e), 0);
	assert_int_equal(idx_setxattr(f->idx, x, "user.a", "1", 1, 0), 0);
	assert_int_equal(idx_release_inode(f->idx, x, &e), -EBUSY);
	assert_int_equal(idx_release_inode(f->idx, KV_ROOT_INO, &e), -EBUSY);
	assert_int_equal(idx_release_inode(f->idx, 999, &e), -ENOENT);
	assert_int_equal(
		idx_unlink(f->idx, KV_ROOT_INO, "x", 0, NOW, &ino, &nlink), 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(idx_release_inode(f->idx, x, &e), 0);
	ext_eq(&e, &want);
	assert_int_equal(idx_release_inode(f->idx, x, &e), -ENOENT);
	assert_int_equal(idx_getattr(f->idx, x, &(struct idx_attr){0}),
			 -ENOENT);
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM xattrs WHERE ino = %" PRIu64, x);
	assert_sql_text(f->db, sql, "0");
	statfs_eq(f, 1, 0);
}

struct purged {
	int n;
	struct kv_extent e[8];
};

static void purge_fn(void *arg, const struct kv_extent *ext)
{
	struct purged *p = arg;

	assert_true(p->n < 8);
	p->e[p->n++] = *ext;
}

static void test_purge_orphans(void **state)
{
	struct fx *f = *state;
	uint64_t a = mkfile(f, KV_ROOT_INO, "a");
	uint64_t b = mkfile(f, KV_ROOT_INO, "b");
	uint64_t c = mkdir_(f, KV_ROOT_INO, "c");
	uint64_t live = mkfile(f, KV_ROOT_INO, "live");
	struct purged p = {0};
	uint64_t refs;

	give_extent(f, a, 11, 0, 100);
	give_extent(f, b, 12, 4096, 200);
	give_extent(f, live, 11, 8192, 300);
	assert_int_equal(idx_setxattr(f->idx, a, "user.z", "z", 1, 0), 0);
	assert_int_equal(idx_purge_orphans(f->idx, purge_fn, &p), 0);
	assert_int_equal(p.n, 0);
	assert_int_equal(unl(f, KV_ROOT_INO, "a", 0), 0);
	assert_int_equal(unl(f, KV_ROOT_INO, "b", 0), 0);
	assert_int_equal(unl(f, KV_ROOT_INO, "c", 1), 0);
	statfs_eq(f, 2, 600);
	assert_int_equal(idx_datafile_refs(f->idx, 11, &refs), 0);
	assert_int_equal(refs, 2);

	assert_int_equal(idx_purge_orphans(f->idx, purge_fn, &p), 3);
	assert_int_equal(p.n, 2); /* the directory had no extent */
	if (p.e[0].file_id != 11) {
		struct kv_extent t = p.e[0];

		p.e[0] = p.e[1];
		p.e[1] = t;
	}
	ext_eq(&p.e[0], &(struct kv_extent){11, 4096, 0, 100});
	ext_eq(&p.e[1], &(struct kv_extent){12, 4096, 4096, 200});
	assert_int_equal(idx_getattr(f->idx, a, &(struct idx_attr){0}),
			 -ENOENT);
	assert_int_equal(idx_getattr(f->idx, b, &(struct idx_attr){0}),
			 -ENOENT);
	assert_int_equal(idx_getattr(f->idx, c, &(struct idx_attr){0}),
			 -ENOENT);
	assert_int_equal(getattr_ok(f, live).ext.file_id, 11);
	assert_sql_text(f->db, "SELECT count(*) FROM xattrs", "0");
	statfs_eq(f, 2, 300);
	assert_int_equal(idx_datafile_refs(f->idx, 11, &refs), 0);
	assert_int_equal(refs, 1);
	assert_int_equal(idx_purge_orphans(f->idx, NULL, NULL), 0);
}

static void test_datafile_refs(void **state)
{
	struct fx *f = *state;
	uint64_t a = mkfile(f, KV_ROOT_INO, "a");
	uint64_t b = mkfile(f, KV_ROOT_INO, "b");
	uint64_t c = mkfile(f, KV_ROOT_INO, "c");
	uint64_t n = 99;
	struct kv_extent old;

	assert_int_equal(idx_datafile_refs(f->idx, 7, &n), 0);
	assert_int_equal(n, 0);
	give_extent(f, a, 7, 0, 10);
	give_extent(f, b, 7, 8192, 10);
	give_extent(f, c, 8, 0, 10);
	assert_int_equal(idx_datafile_refs(f->idx, 7, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(idx_datafile_refs(f->idx, 8, &n), 0);
	assert_int_equal(n, 1);
	/* A new record for b moves its reference. */
	give_extent(f, b, 8, 8192, 10);
	assert_int_equal(idx_datafile_refs(f->idx, 7, &n), 0);
	assert_int_equal(n, 1);
	/* An orphan's record is in use until the inode is released. */
	assert_int_equal(unl(f, KV_ROOT_INO, "a", 0), 0);
	assert_int_equal(idx_datafile_refs(f->idx, 7, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(idx_release_inode(f->idx, a, &old), 0);
	assert_int_equal(old.file_id, 7);
	assert_int_equal(idx_datafile_refs(f->idx, 7, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(idx_datafile_refs(f->idx, 8, &n), 0);
	assert_int_equal(n, 2);
}

static void test_statfs(void **state)
{
	struct fx *f = *state;
	uint64_t d, x, y;
	struct idx_attr a;

	statfs_eq(f, 1, 0);
	d = mkdir_(f, KV_ROOT_INO, "d");
	x = mkfile(f, d, "x");
	y = mkfile(f, d, "y");
	mk(f, d, "l", S_IFLNK | 0777); /* its size is not file data */
	statfs_eq(f, 5, 0);
	give_extent(f, x, 1, 0, 1000);
	give_extent(f, y, 1, 8192, 24);
	statfs_eq(f, 5, 1024);
	/* Sizes come from saves, never from setattr. */
	a = getattr_ok(f, x);
	a.size = 10;
	assert_int_equal(idx_setattr(f->idx, &a), 0);
	statfs_eq(f, 5, 1024);
	give_extent(f, x, 1, 16384, 10);
	statfs_eq(f, 5, 34);
	assert_int_equal(ren(f, d, "x", d, "y", 0, NULL, NULL), 0);
	statfs_eq(f, 4, 34); /* y is an orphan, its bytes still count */
	assert_int_equal(idx_release_inode(f->idx, y, NULL), 0);
	statfs_eq(f, 4, 10);
	assert_int_equal(unl(f, d, "y", 0), 0);
	assert_int_equal(unl(f, d, "l", 0), 0);
	assert_int_equal(idx_purge_orphans(f->idx, NULL, NULL), 2);
	statfs_eq(f, 2, 0);
	fx_reopen(f);
	statfs_eq(f, 2, 0);
}

/* ---- idx_create_ino, idx_count, idx_file_records, idx_move_records ---- */

static void test_create_ino(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = new_attr(S_IFREG | 0644),
			d = new_attr(S_IFDIR | 0755);
	uint64_t later;

	a.size = 77; /* ignored: a new file has no record */
	assert_int_equal(
		idx_create_ino(f->idx, KV_ROOT_INO, "dir", &d, NULL, 40), 0);
	assert_int_equal(d.ino, 40);
	assert_int_equal(d.nlink, 2);
	assert_int_equal(idx_create_ino(f->idx, 40, "f", &a, NULL, 1000), 0);
	assert_int_equal(a.ino, 1000);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.size, 0);
	assert_int_equal(a.ext.file_id, 0);
	assert_int_equal(lookup_ino(f, 40, "f"), 1000);
	assert_int_equal(getattr_ok(f, 1000).size, 0);
	/* The parent counts its new subdirectory. */
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 3);
	/* Numbers below an existing one may still be used ... */
	a = new_attr(S_IFREG | 0644);
	assert_int_equal(idx_create_ino(f->idx, 40, "g", &a, NULL, 500), 0);
	/* ... and plain creates number above every inode so far. */
	later = mkfile(f, KV_ROOT_INO, "later");
	assert_true(later > 1000);
	statfs_eq(f, 5, 0);
}

static void test_create_ino_errors(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = new_attr(S_IFREG | 0644);
	uint64_t dir = mkdir_(f, KV_ROOT_INO, "d"), file;

	assert_int_equal(idx_create_ino(f->idx, dir, "x", &a, NULL, 100), 0);
	file = a.ino;
	/* An inode number in use, even under another name. */
	a = new_attr(S_IFREG | 0644);
	assert_int_equal(idx_create_ino(f->idx, dir, "y", &a, NULL, 100),
			 -EEXIST);
	assert_int_equal(idx_create_ino(f->idx, dir, "y", &a, NULL, dir),
			 -EEXIST);
	/* A name in use. */
	assert_int_equal(idx_create_ino(f->idx, dir, "x", &a, NULL, 101),
			 -EEXIST);
	/* A symlink without a target, a bad type, or a number it may not give. */
	a = new_attr(S_IFLNK | 0777);
	assert_int_equal(idx_create_ino(f->idx, dir, "l", &a, NULL, 102),
			 -EINVAL);
	a = new_attr(0644);
	assert_int_equal(idx_create_ino(f->idx, dir, "p", &a, NULL, 103),
			 -EINVAL);
	/* Special files and symlinks keep their device number and target. */
	a = new_attr(S_IFCHR | 0600);
	a.rdev = 0x0103;
	assert_int_equal(idx_create_ino(f->idx, dir, "c", &a, NULL, 110), 0);
	assert_int_equal(idx_getattr(f->idx, 110, &a), 0);
	assert_int_equal(a.rdev, 0x0103);
	assert_true(S_ISCHR(a.mode));
	a = new_attr(S_IFLNK | 0777);
	assert_int_equal(idx_create_ino(f->idx, dir, "s", &a, "t/u", 111), 0);
	assert_int_equal(a.size, 3);
	a = new_attr(S_IFREG | 0644);
	assert_int_equal(
		idx_create_ino(f->idx, dir, "r", &a, NULL, KV_ROOT_INO),
		-EINVAL);
	assert_int_equal(idx_create_ino(f->idx, dir, "z", &a, NULL, 0),
			 -EINVAL);
	assert_int_equal(idx_create_ino(f->idx, dir, "big", &a, NULL,
					(uint64_t)INT64_MAX + 1),
			 -EINVAL);
	/* Parents that cannot hold it. */
	assert_int_equal(idx_create_ino(f->idx, 9999, "n", &a, NULL, 104),
			 -ENOENT);
	assert_int_equal(idx_create_ino(f->idx, file, "n", &a, NULL, 105),
			 -ENOTDIR);
	assert_int_equal(idx_create_ino(f->idx, dir, "", &a, NULL, 106),
			 -EINVAL);
	assert_absent(f, dir, "y");
	assert_absent(f, dir, "l");
	assert_absent(f, dir, "n");
	assert_int_equal(idx_getattr(f->idx, 101, &a), -ENOENT);
	assert_int_equal(idx_getattr(f->idx, 102, &a), -ENOENT);
	statfs_eq(f, 5, 0); /* dir, x, c, s and the root */
}

static void test_count(void **state)
{
	struct fx *f = *state;
	struct idx_counts c;
	struct idx_attr a = new_attr(S_IFLNK | 0777);
	uint64_t dir, f1, f2, f3, open;
	uint32_t nlink;
	uint64_t ino;

	assert_int_equal(idx_count(f->idx, &c), 0);
	assert_int_equal(c.files, 0);
	assert_int_equal(c.dirs, 1); /* the root */
	assert_int_equal(c.others + c.orphans + c.records + c.record_bytes, 0);

	dir = mkdir_(f, KV_ROOT_INO, "d");
	f1 = mkfile(f, dir, "f1");
	f2 = mkfile(f, dir, "f2");
	f3 = mkfile(f, dir, "empty");
	open = mkfile(f, dir, "open");
	(void)f3;
	assert_int_equal(idx_create(f->idx, dir, "ln", &a, "f1"), 0);
	a = new_attr(S_IFIFO | 0600);
	assert_int_equal(idx_create(f->idx, dir, "fifo", &a, NULL), 0);
	give_extent(f, f1, 1, 0, 5000);
	give_extent(f, f2, 2, 8192, 300000);
	give_extent(f, open, 1, 16384, 100);
	/* Unlinked while open: an orphan whose record is still counted. */
	assert_int_equal(idx_unlink(f->idx, dir, "open", 0, NOW, &ino, &nlink),
			 0);
	assert_int_equal(ino, open);
	assert_int_equal(nlink, 0);

	assert_int_equal(idx_count(f->idx, &c), 0);
	assert_int_equal(c.files, 3);
	assert_int_equal(c.dirs, 2);
	assert_int_equal(c.others, 2);
	assert_int_equal(c.orphans, 1);
	assert_int_equal(c.records, 3);
	assert_int_equal(c.record_bytes, 5000 + 300000 + 100);

	/* Released, the orphan and its record are gone from the counts. */
	{
		struct kv_extent e;

		assert_int_equal(idx_release_inode(f->idx, open, &e), 0);
	}
	assert_int_equal(idx_count(f->idx, &c), 0);
	assert_int_equal(c.orphans, 0);
	assert_int_equal(c.records, 2);
	assert_int_equal(c.record_bytes, 5000 + 300000);
}

static void test_count_corrupt(void **state)
{
	struct fx *f = *state;
	struct idx_counts c;

	mkfile(f, KV_ROOT_INO, "a");
	/* The inode table goes behind its back: no count, an error. */
	sql_exec(f->db, "DROP TABLE inodes;");
	assert_int_equal(idx_count(f->idx, &c), -EIO);
}

static void test_file_records_and_move(void **state)
{
	struct fx *f = *state;
	struct idx_rec r[8];
	uint64_t ino[5];
	struct idx_move mv[2];
	struct kv_extent e;
	uint32_t *crcs, ncrcs;
	struct idx_attr got;
	char name[8];

	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ino[i] = mkfile(f, KV_ROOT_INO, name);
	}
	/* Records in file 3 at 3 offsets, not in order of creation. */
	give_extent(f, ino[0], 3, 65536, 1000);
	give_extent(f, ino[1], 3, 0, 2000);
	give_extent(f, ino[2], 3, 8192, 3000);
	give_extent(f, ino[3], 4, 0, 4000);
	assert_int_equal(idx_file_records(f->idx, 3, 0, r, 8), 3);
	assert_int_equal(r[0].ino, ino[1]);
	assert_int_equal(r[1].ino, ino[2]);
	assert_int_equal(r[2].ino, ino[0]);
	ext_eq(&r[1].ext, &(struct kv_extent){3, 4096, 8192, 3000});
	/* Paged: from an offset on, at most max. */
	assert_int_equal(idx_file_records(f->idx, 3, 1, r, 1), 1);
	assert_int_equal(r[0].ino, ino[2]);
	assert_int_equal(idx_file_records(f->idx, 3, 65537, r, 8), 0);
	assert_int_equal(idx_file_records(f->idx, 9, 0, r, 8), 0);

	/* Two records move to file 7 in one transaction. */
	mv[0] = (struct idx_move){
		.ino = ino[1], .from = r[0].ext, .to = {7, 4096, 0, 2000}};
	assert_int_equal(idx_file_records(f->idx, 3, 0, r, 8), 3);
	mv[0].from = r[0].ext;
	mv[1] = (struct idx_move){
		.ino = ino[0], .from = r[2].ext, .to = {7, 4096, 8192, 1000}};
	assert_int_equal(idx_move_records(f->idx, mv, 2), 0);
	got = getattr_ok(f, ino[1]);
	ext_eq(&got.ext, &mv[0].to);
	got = getattr_ok(f, ino[0]);
	ext_eq(&got.ext, &mv[1].to);
	assert_int_equal(getattr_ok(f, ino[0]).size, 1000);
	assert_int_equal(idx_get_crcs(f->idx, ino[0], &crcs, &ncrcs), 0);
	assert_int_equal(ncrcs, 1);
	assert_int_equal(crcs[0], 0x11);
	free(crcs);
	assert_int_equal(idx_file_records(f->idx, 3, 0, r, 8), 1);
	assert_int_equal(idx_file_records(f->idx, 7, 0, r, 8), 2);

	/* A row not where the caller says: nothing moves. */
	e = getattr_ok(f, ino[2]).ext;
	mv[0] = (struct idx_move){
		.ino = ino[2], .from = e, .to = {8, 4096, 0, 3000}};
	mv[1] = (struct idx_move){.ino = ino[3],
				  .from = {4, 4096, 4096, 4000},
				  .to = {8, 4096, 8192, 4000}};
	assert_int_equal(idx_move_records(f->idx, mv, 2), -ESTALE);
	got = getattr_ok(f, ino[2]);
	ext_eq(&got.ext, &e);
	assert_int_equal(getattr_ok(f, ino[3]).ext.file_id, 4);
	/* A copy of another length, or to file 0: refused. */
	mv[0].to.len = 2999;
	assert_int_equal(idx_move_records(f->idx, mv, 1), -EINVAL);
	mv[0].to = (struct kv_extent){0, 4096, 0, 3000};
	assert_int_equal(idx_move_records(f->idx, mv, 1), -EINVAL);
	got = getattr_ok(f, ino[2]);
	ext_eq(&got.ext, &e);
	assert_int_equal(idx_move_records(f->idx, mv, 0), 0);
}

/* Recovery horizons: absent at first, put, replaced, dropped, reopened. */
static void test_horizons(void **state)
{
	struct fx *f = *state;
	uint32_t ids[4], put_ids[3] = {3, 1, 7}, drop_ids[2] = {7, 9};
	uint64_t offs[4], put_offs[3] = {300, 100, 700};

	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 4), 0);
	assert_int_equal(idx_horizons_put(f->idx, 3, put_ids, put_offs), 0);
	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 4), 3);
	assert_int_equal(ids[0], 1);
	assert_int_equal(offs[0], 100);
	assert_int_equal(ids[1], 3);
	assert_int_equal(offs[1], 300);
	assert_int_equal(ids[2], 7);
	assert_int_equal(offs[2], 700);
	put_offs[0] = 4096;
	assert_int_equal(idx_horizons_put(f->idx, 1, put_ids, put_offs), 0);
	assert_int_equal(idx_horizons_drop(f->idx, 2, drop_ids), 0);
	idx_close(f->idx);
	assert_int_equal(idx_open(&f->idx, f->db, 0755, 0, 0), 0);
	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 1), 1);
	assert_int_equal(ids[0], 1);
	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 4), 2);
	assert_int_equal(ids[1], 3);
	assert_int_equal(offs[1], 4096);
}

/* Group commit: one transaction, per-save outcomes, old extents returned. */
static void test_set_extents(void **state)
{
	struct fx *f = *state;
	uint32_t crcs[2] = {0xaa, 0xbb};
	struct idx_save v[4];
	struct idx_attr a;
	uint64_t x, y, d;

	d = mkdir_(f, KV_ROOT_INO, "d");
	x = mkfile(f, d, "x");
	y = mkfile(f, d, "y");
	give_extent(f, y, 1, 0, 100);
	memset(v, 0, sizeof(v));
	v[0] = (struct idx_save){.ino = x,
				 .size = 5000,
				 .mtime_ns = T0 + 1,
				 .ext = {2, 4096, 8192, 5000},
				 .crcs = crcs};
	v[1] = (struct idx_save){.ino = y, .size = 0, .mtime_ns = T0 + 2};
	v[2] = (struct idx_save){.ino = 999999, .size = 0}; /* no inode */
	v[3] = (struct idx_save){.ino = d, .size = 0};	    /* not a file */
	assert_int_equal(idx_set_extents(f->idx, v, 4), 0);
	assert_int_equal(v[0].rc, 0);
	assert_int_equal(v[0].old.file_id, 0);
	assert_int_equal(v[1].rc, 0);
	assert_int_equal(v[1].old.file_id, 1); /* y's old record, to free */
	assert_int_equal(v[1].old.len, 100);
	assert_int_equal(v[2].rc, -ENOENT);
	assert_int_equal(v[3].rc, -EINVAL);
	a = getattr_ok(f, x);
	assert_int_equal(a.size, 5000);
	assert_int_equal(a.ext.file_id, 2);
	assert_int_equal(a.ext.off, 8192);
	assert_int_equal(a.mtime_ns, T0 + 1);
	a = getattr_ok(f, y);
	assert_int_equal(a.size, 0);
	assert_int_equal(a.ext.file_id, 0);
	/* A CRC count that does not fit fails that save alone. */
	v[0].crcs = NULL;
	v[0].ext.len = 0;
	v[0].ext.file_id = 0;
	v[1].ext = (struct kv_extent){3, 4096, 0, 10};
	v[1].crcs = NULL; /* a record without CRCs: refused */
	assert_int_equal(idx_set_extents(f->idx, v, 2), 0);
	assert_int_equal(v[0].rc, 0);
	assert_int_equal(v[1].rc, -EINVAL);
	assert_int_equal(getattr_ok(f, y).ext.file_id, 0);
	assert_int_equal(idx_set_extents(f->idx, v, 0), 0);
}

/*
 * A file created and never saved is pending: after a crash its name goes
 * (the bytes were still queued), it is an orphan for idx_purge_orphans.
 * Saved files, empty saved files, directories and symlinks stay.
 */
static int npending;

static void pending_fn(void *arg, uint64_t parent, const char *name)
{
	(void)arg;
	(void)parent;
	assert_string_equal(name, "queued");
	npending++;
}

static void test_purge_pending(void **state)
{
	struct fx *f = *state;
	uint64_t d, q, e;

	d = mkdir_(f, KV_ROOT_INO, "d");
	q = mkfile(f, d, "queued");
	give_extent(f, mkfile(f, d, "saved"), 1, 0, 100);
	e = mkfile(f, d, "empty");
	assert_int_equal(idx_set_extent(f->idx, e, 0, NOW, NULL, NULL, 0, NULL),
			 0);
	mk(f, d, "l", S_IFLNK | 0777);
	assert_int_equal(getattr_ok(f, q).ext.hdr_len, 0); /* mark not shown */
	npending = 0;
	assert_int_equal(idx_purge_pending(f->idx, pending_fn, NULL), 1);
	assert_int_equal(npending, 1);
	assert_absent(f, d, "queued");
	assert_int_not_equal(lookup_ino(f, d, "saved"), 0);
	assert_int_not_equal(lookup_ino(f, d, "empty"), 0);
	assert_int_not_equal(lookup_ino(f, d, "l"), 0);
	assert_int_equal(getattr_ok(f, q).nlink, 0);
	assert_int_equal(getattr_ok(f, d).nlink, 2);
	assert_int_equal(idx_purge_orphans(f->idx, NULL, NULL), 1);
	assert_int_equal(idx_purge_pending(f->idx, NULL, NULL), 0);
}

/* idx_create_many() of one name: its ino, or 0 when it was not made. */
static uint64_t mk_many(struct fx *f, const char *name, uint32_t mode,
			uint64_t size, struct idx_attr *out)
{
	const char *names[1] = {name};
	struct idx_attr a = {.mode = mode, .size = size};
	int made = idx_create_many(f->idx, KV_ROOT_INO, 1, names, &a);

	assert_true(made == 0 || made == 1);
	assert_int_equal(made, a.ino != 0);
	if (out)
		*out = a;
	return a.ino;
}

/*
 * Stubs (the shared tier), made with idx_create_many(): a regular file
 * with a size and no record, shown with KV_EXT_STUB, pending until its
 * bytes are saved, so a crash removes it (the shared tier finds it again).
 * Directories are made plainly; other types, names that exist and bad
 * names are not made, and the others of the batch still are.
 */
static void test_create_stub(void **state)
{
	struct fx *f = *state;
	struct kv_extent ext = {.file_id = 1, .hdr_len = 4096, .len = 5000};
	const char *names[4] = {"s", "x/y", "n", "m"};
	struct idx_attr a, v[4];
	uint32_t crcs[1] = {7};
	uint64_t s, k;

	s = mk_many(f, "s", S_IFREG | 0644, 5000, &a);
	assert_int_not_equal(s, 0);
	assert_int_equal(a.ext.hdr_len, KV_EXT_STUB);
	assert_int_equal(getattr_ok(f, s).size, 5000);
	assert_int_equal(getattr_ok(f, s).ext.file_id, 0);
	assert_int_equal(getattr_ok(f, s).ext.hdr_len, KV_EXT_STUB);
	k = mk_many(f, "k", S_IFREG | 0644, 9, NULL);
	assert_int_not_equal(k, 0);
	assert_int_equal(
		idx_set_extent(f->idx, k, 5000, NOW, &ext, crcs, 1, NULL), 0);
	assert_int_equal(getattr_ok(f, k).ext.hdr_len, 4096);
	assert_int_not_equal(mk_many(f, "d", S_IFDIR | 0755, 0, NULL), 0);
	assert_true(
		S_ISDIR(getattr_ok(f, lookup_ino(f, KV_ROOT_INO, "d")).mode));
	assert_int_equal(mk_many(f, "p", S_IFIFO | 0644, 0, NULL), 0);
	assert_absent(f, KV_ROOT_INO, "p");
	assert_int_equal(mk_many(f, "s", S_IFREG | 0644, 1, NULL), 0);
	assert_int_equal(getattr_ok(f, s).size, 5000);
	/* A batch: one exists, one is not a name, two are made. */
	for (int i = 0; i < 4; i++)
		v[i] = (struct idx_attr){.mode = S_IFREG | 0644, .size = 3};
	assert_int_equal(idx_create_many(f->idx, KV_ROOT_INO, 4, names, v), 2);
	assert_int_equal(v[0].ino, 0);
	assert_int_equal(v[1].ino, 0);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "n"), v[2].ino);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "m"), v[3].ino);
	assert_int_equal(idx_purge_pending(f->idx, NULL, NULL), 3);
	assert_absent(f, KV_ROOT_INO, "s");
	assert_absent(f, KV_ROOT_INO, "n");
	assert_int_not_equal(lookup_ino(f, KV_ROOT_INO, "k"), 0);
	assert_int_not_equal(lookup_ino(f, KV_ROOT_INO, "d"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_extent_and_crcs),
		T(test_release_inode),
		T(test_purge_orphans),
		T(test_datafile_refs),
		T(test_statfs),
		T(test_horizons),
		T(test_create_ino),
		T(test_create_ino_errors),
		T(test_count),
		T(test_count_corrupt),
		T(test_file_records_and_move),
		T(test_set_extents),
		T(test_purge_pending),
		T(test_create_stub),
	};

	/* Expected refusals log errors; info lines would only be noise. */
	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests_name("index_records", tests, NULL, NULL);
}
