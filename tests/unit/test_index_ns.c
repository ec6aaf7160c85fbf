/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the namespace calls of index.h: create, lookup, getattr,
 * readlink, setattr, unlink and rmdir, rename's POSIX cases and nlink
 * bookkeeping, readdir and its cookies, idx_lookup_batch and xattrs, each
 * with its errors asserted.
 */
#include "test_index_fx.h"

/* ---- create, lookup, getattr, readlink, setattr ---- */

static void test_create(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = new_attr(S_IFREG | 0640), p, got;
	char buf[64];
	uint64_t dir, lnk, fifo;

	assert_int_equal(idx_create(f->idx, KV_ROOT_INO, "f", &a, NULL), 0);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.size, 0);
	assert_int_equal(a.ext.file_id, 0);
	got = getattr_ok(f, a.ino);
	assert_int_equal(got.mode, S_IFREG | 0640);
	assert_int_equal(got.uid, UID);
	assert_int_equal(got.gid, GID);
	assert_int_equal(got.nlink, 1);
	assert_int_equal(got.atime_ns, T0);
	assert_int_equal(got.mtime_ns, T0 + 1);
	assert_int_equal(got.ctime_ns, T0 + 2);
	p = getattr_ok(f, KV_ROOT_INO);
	assert_int_equal(p.nlink, 2);
	assert_int_equal(p.mtime_ns, T0 + 1);
	assert_int_equal(p.ctime_ns, T0 + 1);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "f"), a.ino);

	dir = mkdir_(f, KV_ROOT_INO, "d");
	assert_int_equal(nlink_of(f, dir), 2);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 3);
	mkdir_(f, dir, "sub");
	assert_int_equal(nlink_of(f, dir), 3);
	mkfile(f, dir, "file");
	assert_int_equal(nlink_of(f, dir), 3);

	a = new_attr(S_IFLNK | 0777);
	assert_int_equal(idx_create(f->idx, dir, "l", &a, "../some/target"), 0);
	lnk = a.ino;
	assert_int_equal(a.size, strlen("../some/target"));
	assert_int_equal(getattr_ok(f, lnk).size, strlen("../some/target"));
	assert_int_equal(idx_readlink(f->idx, lnk, buf, sizeof(buf)),
			 (int)strlen("../some/target"));
	assert_string_equal(buf, "../some/target");

	fifo = mk(f, dir, "fifo", S_IFIFO | 0600);
	assert_int_equal(getattr_ok(f, fifo).mode, S_IFIFO | 0600);
	statfs_eq(f, 7, 0);
}

static void test_create_errors(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = new_attr(S_IFREG | 0644);
	char longname[IDX_NAME_MAX + 2], target[5000];
	uint64_t file, d;

	file = mkfile(f, KV_ROOT_INO, "f");
	d = mkdir_(f, KV_ROOT_INO, "d");
	assert_int_equal(idx_create(f->idx, KV_ROOT_INO, "f", &a, NULL),
			 -EEXIST);
	a = new_attr(S_IFDIR | 0755);
	assert_int_equal(idx_create(f->idx, KV_ROOT_INO, "d", &a, NULL),
			 -EEXIST);
	assert_int_equal(idx_create(f->idx, 999, "x", &a, NULL), -ENOENT);
	assert_int_equal(idx_create(f->idx, file, "x", &a, NULL), -ENOTDIR);

	memset(longname, 'n', sizeof(longname));
	longname[IDX_NAME_MAX + 1] = '\0';
	assert_int_equal(idx_create(f->idx, d, longname, &a, NULL),
			 -ENAMETOOLONG);
	longname[IDX_NAME_MAX] = '\0';
	assert_int_equal(idx_create(f->idx, d, longname, &a, NULL), 0);
	assert_int_equal(lookup_ino(f, d, longname), a.ino);

	a = new_attr(S_IFREG | 0644);
	assert_int_equal(idx_create(f->idx, d, "", &a, NULL), -EINVAL);
	assert_int_equal(idx_create(f->idx, d, ".", &a, NULL), -EINVAL);
	assert_int_equal(idx_create(f->idx, d, "..", &a, NULL), -EINVAL);
	assert_int_equal(idx_create(f->idx, d, "a/b", &a, NULL), -EINVAL);
	a = new_attr(0644);
	assert_int_equal(idx_create(f->idx, d, "notype", &a, NULL), -EINVAL);
	a = new_attr(S_IFLNK | 0777);
	assert_int_equal(idx_create(f->idx, d, "l", &a, NULL), -EINVAL);
	memset(target, 't', sizeof(target));
	target[sizeof(target) - 1] = '\0';
	assert_int_equal(idx_create(f->idx, d, "l", &a, target), -ENAMETOOLONG);

	/* A removed directory takes no new entries (ext4: ENOENT). */
	mkdir_(f, d, "gone");
	{
		uint64_t gone = lookup_ino(f, d, "gone");

		assert_int_equal(unl(f, d, "gone", 1), 0);
		a = new_attr(S_IFREG | 0644);
		assert_int_equal(idx_create(f->idx, gone, "x", &a, NULL),
				 -ENOENT);
	}
	/* root, f, d, the 255-byte name; "gone" is an orphan. */
	statfs_eq(f, 4, 0);
	assert_int_equal(nlink_of(f, d), 3); /* 2 + the 255-byte dir */
}

static void test_lookup_getattr(void **state)
{
	struct fx *f = *state;
	char longname[IDX_NAME_MAX + 2];
	struct idx_attr a;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t x = mkfile(f, d, "x");

	assert_int_equal(idx_lookup(f->idx, d, "x", &a), 0);
	assert_int_equal(a.ino, x);
	assert_int_equal(a.mode, S_IFREG | 0644);
	assert_int_equal(idx_lookup(f->idx, d, "y", &a), -ENOENT);
	assert_int_equal(idx_lookup(f->idx, KV_ROOT_INO, "x", &a), -ENOENT);
	assert_int_equal(idx_lookup(f->idx, 12345, "x", &a), -ENOENT);
	memset(longname, 'n', sizeof(longname));
	longname[IDX_NAME_MAX + 1] = '\0';
	assert_int_equal(idx_lookup(f->idx, d, longname, &a), -ENAMETOOLONG);
	assert_int_equal(idx_getattr(f->idx, 12345, &a), -ENOENT);
	assert_int_equal(idx_getattr(f->idx, 0, &a), -ENOENT);
}

static void test_readlink(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = new_attr(S_IFLNK | 0777);
	char buf[16];
	uint64_t file = mkfile(f, KV_ROOT_INO, "f");

	assert_int_equal(
		idx_create(f->idx, KV_ROOT_INO, "l", &a, "0123456789abcdefXYZ"),
		0);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(idx_readlink(f->idx, a.ino, buf, 4), 19);
	assert_string_equal(buf, "012");
	assert_int_equal(idx_readlink(f->idx, a.ino, buf, sizeof(buf)), 19);
	assert_string_equal(buf, "0123456789abcde");
	assert_int_equal(idx_readlink(f->idx, a.ino, NULL, 0), 19);
	assert_int_equal(idx_readlink(f->idx, file, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(idx_readlink(f->idx, KV_ROOT_INO, buf, sizeof(buf)),
			 -EINVAL);
	assert_int_equal(idx_readlink(f->idx, 999, buf, sizeof(buf)), -ENOENT);
}

static void test_setattr(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	struct idx_attr a = getattr_ok(f, x), got;

	give_extent(f, x, 9, 0, 100);
	a.mode = S_IFDIR | 0600; /* type bits are ignored */
	a.uid = 42;
	a.gid = 43;
	a.size = 5000; /* left alone: sizes come from saves */
	a.atime_ns = T0 + 10;
	a.mtime_ns = T0 + 11;
	a.ctime_ns = T0 + 12;
	a.ext.file_id = 77; /* left alone */
	assert_int_equal(idx_setattr(f->idx, &a), 0);
	got = getattr_ok(f, x);
	assert_int_equal(got.mode, S_IFREG | 0600);
	assert_int_equal(got.uid, 42);
	assert_int_equal(got.gid, 43);
	assert_int_equal(got.size, 100);
	assert_int_equal(got.atime_ns, T0 + 10);
	assert_int_equal(got.mtime_ns, T0 + 11);
	assert_int_equal(got.ctime_ns, T0 + 12);
	assert_int_equal(got.ext.file_id, 9);
	assert_int_equal(got.ext.len, 100);
	statfs_eq(f, 2, 100);
	a.ino = 999;
	assert_int_equal(idx_setattr(f->idx, &a), -ENOENT);
}

/* ---- unlink, rmdir ---- */

static void test_unlink(void **state)
{
	struct fx *f = *state;
	char longname[IDX_NAME_MAX + 2];
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t x = mkfile(f, d, "x");
	uint64_t sub = mkdir_(f, d, "sub");
	uint64_t ino = 0;
	uint32_t nlink = 99;
	struct idx_attr a;

	assert_int_equal(idx_unlink(f->idx, d, "x", 0, NOW, &ino, &nlink), 0);
	assert_int_equal(ino, x);
	assert_int_equal(nlink, 0);
	assert_absent(f, d, "x");
	a = getattr_ok(f, x); /* an orphan until released */
	assert_int_equal(a.nlink, 0);
	assert_int_equal(a.ctime_ns, NOW);
	a = getattr_ok(f, d);
	assert_int_equal(a.mtime_ns, NOW);
	assert_int_equal(a.ctime_ns, NOW);
	assert_int_equal(a.nlink, 3);

	assert_int_equal(unl(f, d, "x", 0), -ENOENT);
	assert_int_equal(unl(f, d, "sub", 0), -EISDIR);
	assert_int_equal(unl(f, 999, "x", 0), -ENOENT);
	mkfile(f, d, "y");
	assert_int_equal(unl(f, lookup_ino(f, d, "y"), "z", 0), -ENOTDIR);
	memset(longname, 'n', sizeof(longname));
	longname[IDX_NAME_MAX + 1] = '\0';
	assert_int_equal(unl(f, d, longname, 0), -ENAMETOOLONG);

	/* rmdir */
	assert_int_equal(unl(f, d, "y", 1), -ENOTDIR);
	mkfile(f, sub, "inner");
	assert_int_equal(unl(f, d, "sub", 1), -ENOTEMPTY);
	assert_int_equal(unl(f, sub, "inner", 0), 0);
	assert_int_equal(idx_unlink(f->idx, d, "sub", 1, NOW, &ino, &nlink), 0);
	assert_int_equal(ino, sub);
	assert_int_equal(nlink, 0);
	assert_int_equal(nlink_of(f, sub), 0);
	assert_int_equal(nlink_of(f, d), 2);
	assert_int_equal(unl(f, d, "sub", 1), -ENOENT);
	assert_int_equal(unl(f, KV_ROOT_INO, "d", 1), -ENOTEMPTY);
	assert_int_equal(unl(f, d, "y", 0), 0);
	assert_int_equal(unl(f, KV_ROOT_INO, "d", 1), 0);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 2);
	statfs_eq(f, 1, 0);
}

static void test_unlink_hard_links(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	uint64_t ino;
	uint32_t nlink;

	fx_link(f, x, KV_ROOT_INO, "x2");
	assert_int_equal(nlink_of(f, x), 2);
	assert_int_equal(
		idx_unlink(f->idx, KV_ROOT_INO, "x", 0, NOW, &ino, &nlink), 0);
	assert_int_equal(ino, x);
	assert_int_equal(nlink, 1);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "x2"), x);
	assert_int_equal(idx_release_inode(f->idx, x, NULL), -EBUSY);
	assert_int_equal(
		idx_unlink(f->idx, KV_ROOT_INO, "x2", 0, NOW, &ino, &nlink), 0);
	assert_int_equal(nlink, 0);
	assert_int_equal(idx_release_inode(f->idx, x, NULL), 0);
}

/* A torn block's drop removes the name only while it means that inode. */
static void test_unlink_ino(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	uint64_t y = mkfile(f, KV_ROOT_INO, "y");
	uint32_t nlink = 99;

	assert_int_equal(
		idx_unlink_ino(f->idx, KV_ROOT_INO, "x", y, NOW, &nlink),
		-ESTALE);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "x"), x);
	assert_int_equal(nlink, 99);
	assert_int_equal(
		idx_unlink_ino(f->idx, KV_ROOT_INO, "x", 0, NOW, &nlink),
		-EINVAL);
	assert_int_equal(
		idx_unlink_ino(f->idx, KV_ROOT_INO, "x", x, NOW, &nlink), 0);
	assert_int_equal(nlink, 0);
	assert_absent(f, KV_ROOT_INO, "x");
	assert_int_equal(getattr_ok(f, x).ctime_ns, NOW);
	assert_int_equal(
		idx_unlink_ino(f->idx, KV_ROOT_INO, "x", x, NOW, &nlink),
		-ENOENT);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "y"), y);
}

/* ---- rename ---- */

static void test_rename_simple(void **state)
{
	struct fx *f = *state;
	uint64_t a = mkdir_(f, KV_ROOT_INO, "a");
	uint64_t b = mkdir_(f, KV_ROOT_INO, "b");
	uint64_t x = mkfile(f, a, "x");
	uint64_t rep = 99;
	uint32_t repn = 99;
	struct idx_attr attr;

	assert_int_equal(idx_setxattr(f->idx, x, "user.k", "v", 1, 0), 0);
	assert_int_equal(ren(f, a, "x", a, "y", 0, &rep, &repn), 0);
	assert_int_equal(rep, 0);
	assert_int_equal(repn, 0);
	assert_absent(f, a, "x");
	assert_int_equal(lookup_ino(f, a, "y"), x);
	attr = getattr_ok(f, x);
	assert_int_equal(attr.ctime_ns, NOW);
	assert_int_equal(attr.nlink, 1);
	attr = getattr_ok(f, a);
	assert_int_equal(attr.mtime_ns, NOW);
	assert_int_equal(attr.ctime_ns, NOW);

	/* To another directory: its nlink stays, a file has no "..". */
	assert_int_equal(ren(f, a, "y", b, "z", 0, &rep, &repn), 0);
	assert_int_equal(rep, 0);
	assert_int_equal(lookup_ino(f, b, "z"), x);
	assert_absent(f, a, "y");
	assert_int_equal(nlink_of(f, a), 2);
	assert_int_equal(nlink_of(f, b), 2);
	assert_int_equal(getattr_ok(f, b).mtime_ns, NOW);
	/* xattrs stay with their inode. */
	assert_int_equal(idx_getxattr(f->idx, x, "user.k", NULL, 0), 1);
	statfs_eq(f, 4, 0);
}

static void test_rename_file_over_file(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t tmp = mkfile(f, d, "tmp");
	uint64_t dest = mkfile(f, d, "dest");
	uint64_t rep = 0;
	uint32_t repn = 99;
	struct kv_extent e;

	give_extent(f, tmp, 1, 0, 100);
	give_extent(f, dest, 2, 0, 50);
	assert_int_equal(idx_setxattr(f->idx, dest, "user.old", "o", 1, 0), 0);
	assert_int_equal(ren(f, d, "tmp", d, "dest", 0, &rep, &repn), 0);
	assert_int_equal(rep, dest);
	assert_int_equal(repn, 0);
	assert_int_equal(lookup_ino(f, d, "dest"), tmp);
	assert_absent(f, d, "tmp");
	assert_int_equal(nlink_of(f, dest), 0);
	assert_int_equal(getattr_ok(f, dest).ctime_ns, NOW);
	assert_int_equal(nlink_of(f, d), 2);
	/* The orphan's bytes still count until it is released. */
	statfs_eq(f, 3, 150);
	assert_int_equal(idx_release_inode(f->idx, dest, &e), 0);
	assert_int_equal(e.file_id, 2);
	assert_int_equal(idx_getxattr(f->idx, dest, "user.old", NULL, 0),
			 -ENOENT);
	statfs_eq(f, 3, 100);
}

static void test_rename_dirs_nlink(void **state)
{
	struct fx *f = *state;
	uint64_t a = mkdir_(f, KV_ROOT_INO, "a");
	uint64_t b = mkdir_(f, KV_ROOT_INO, "b");
	uint64_t x = mkdir_(f, a, "x");
	uint64_t y, z, rep;
	uint32_t repn;

	mkdir_(f, x, "inner");
	assert_int_equal(nlink_of(f, a), 3);
	/* A directory moving to another parent takes its ".." along. */
	assert_int_equal(ren(f, a, "x", b, "x", 0, &rep, &repn), 0);
	assert_int_equal(rep, 0);
	assert_int_equal(nlink_of(f, a), 2);
	assert_int_equal(nlink_of(f, b), 3);
	assert_int_equal(nlink_of(f, x), 3);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 4);

	/* Over an empty directory in another parent. */
	y = mkdir_(f, a, "y");
	assert_int_equal(nlink_of(f, a), 3);
	assert_int_equal(ren(f, b, "x", a, "y", 0, &rep, &repn), 0);
	assert_int_equal(rep, y);
	assert_int_equal(repn, 0);
	assert_int_equal(nlink_of(f, y), 0);
	assert_int_equal(nlink_of(f, a), 3);
	assert_int_equal(nlink_of(f, b), 2);
	assert_int_equal(lookup_ino(f, a, "y"), x);
	assert_int_equal(idx_release_inode(f->idx, y, NULL), 0);

	/* Over an empty directory in the same parent. */
	z = mkdir_(f, a, "z");
	assert_int_equal(nlink_of(f, a), 4);
	assert_int_equal(ren(f, a, "y", a, "z", 0, &rep, &repn), 0);
	assert_int_equal(rep, z);
	assert_int_equal(repn, 0);
	assert_int_equal(nlink_of(f, a), 3);
	assert_int_equal(lookup_ino(f, a, "z"), x);
	assert_absent(f, a, "y");
	/* root, a, b, x, inner (z is an orphan) */
	statfs_eq(f, 5, 0);
}

static void test_rename_type_errors(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t e = mkdir_(f, KV_ROOT_INO, "e");
	uint64_t file = mkfile(f, KV_ROOT_INO, "file");
	uint64_t rep = 99;
	uint32_t repn;

	mkfile(f, e, "inside");
	assert_int_equal(
		ren(f, KV_ROOT_INO, "file", KV_ROOT_INO, "d", 0, &rep, &repn),
		-EISDIR);
	assert_int_equal(rep, 0);
	assert_int_equal(
		ren(f, KV_ROOT_INO, "d", KV_ROOT_INO, "file", 0, NULL, NULL),
		-ENOTDIR);
	assert_int_equal(
		ren(f, KV_ROOT_INO, "d", KV_ROOT_INO, "e", 0, NULL, NULL),
		-ENOTEMPTY);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "d"), d);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "e"), e);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "file"), file);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 4);
	assert_int_equal(nlink_of(f, d), 2);
	assert_int_equal(nlink_of(f, file), 1);
}

static void test_rename_into_own_subtree(void **state)
{
	struct fx *f = *state;
	uint64_t a = mkdir_(f, KV_ROOT_INO, "a");
	uint64_t b = mkdir_(f, a, "b");
	uint64_t c = mkdir_(f, b, "c");

	mkfile(f, c, "f");
	assert_int_equal(ren(f, KV_ROOT_INO, "a", c, "a", 0, NULL, NULL),
			 -EINVAL);
	assert_int_equal(ren(f, KV_ROOT_INO, "a", a, "self", 0, NULL, NULL),
			 -EINVAL);
	assert_int_equal(ren(f, a, "b", c, "b", RENAME_NOREPLACE, NULL, NULL),
			 -EINVAL);
	/* Onto an ancestor: it is not empty (Linux: ENOTEMPTY). */
	assert_int_equal(ren(f, b, "c", KV_ROOT_INO, "a", 0, NULL, NULL),
			 -ENOTEMPTY);
	assert_int_equal(ren(f, c, "f", KV_ROOT_INO, "a", 0, NULL, NULL),
			 -ENOTEMPTY);
	/* Up the tree is fine. */
	assert_int_equal(ren(f, b, "c", KV_ROOT_INO, "c", 0, NULL, NULL), 0);
	assert_int_equal(nlink_of(f, b), 2);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 4);
	assert_int_equal(ren(f, KV_ROOT_INO, "a", c, "a", 0, NULL, NULL), 0);
	assert_int_equal(nlink_of(f, c), 3);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 3);
	assert_int_equal(lookup_ino(f, lookup_ino(f, c, "a"), "b"), b);
}

static void test_rename_same_inode(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t x = mkfile(f, d, "x");
	uint64_t y = mkfile(f, d, "y");
	uint64_t rep = 99;
	uint32_t repn = 99;

	assert_int_equal(ren(f, d, "x", d, "x", 0, &rep, &repn), 0);
	assert_int_equal(rep, 0);
	assert_int_equal(lookup_ino(f, d, "x"), x);
	assert_int_equal(getattr_ok(f, x).ctime_ns, T0 + 2); /* untouched */
	assert_int_equal(getattr_ok(f, d).mtime_ns, T0 + 1);
	assert_int_equal(
		ren(f, KV_ROOT_INO, "d", KV_ROOT_INO, "d", 0, &rep, &repn), 0);
	assert_int_equal(nlink_of(f, KV_ROOT_INO), 3);

	/* Two links of one file: a no-op, both names stay. */
	fx_link(f, x, d, "x2");
	assert_int_equal(ren(f, d, "x", d, "x2", 0, &rep, &repn), 0);
	assert_int_equal(rep, 0);
	assert_int_equal(lookup_ino(f, d, "x"), x);
	assert_int_equal(lookup_ino(f, d, "x2"), x);
	assert_int_equal(nlink_of(f, x), 2);
	assert_int_equal(ren(f, d, "x2", d, "x", RENAME_EXCHANGE, &rep, &repn),
			 0);
	assert_int_equal(lookup_ino(f, d, "x2"), x);

	/* Replacing one link of a linked file leaves it one. */
	assert_int_equal(ren(f, d, "y", d, "x2", 0, &rep, &repn), 0);
	assert_int_equal(rep, x);
	assert_int_equal(repn, 1);
	assert_int_equal(nlink_of(f, x), 1);
	assert_int_equal(lookup_ino(f, d, "x2"), y);
	assert_int_equal(lookup_ino(f, d, "x"), x);
}

static void test_rename_noreplace(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	uint64_t y = mkfile(f, KV_ROOT_INO, "y");
	uint64_t rep = 99;
	uint32_t repn;

	assert_int_equal(ren(f, KV_ROOT_INO, "x", KV_ROOT_INO, "y",
			     RENAME_NOREPLACE, &rep, &repn),
			 -EEXIST);
	assert_int_equal(rep, 0);
	/* Linux checks NOREPLACE before "same file": EEXIST here too. */
	assert_int_equal(ren(f, KV_ROOT_INO, "x", KV_ROOT_INO, "x",
			     RENAME_NOREPLACE, NULL, NULL),
			 -EEXIST);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "y"), y);
	assert_int_equal(ren(f, KV_ROOT_INO, "x", KV_ROOT_INO, "z",
			     RENAME_NOREPLACE, &rep, &repn),
			 0);
	assert_int_equal(rep, 0);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "z"), x);
	assert_absent(f, KV_ROOT_INO, "x");
}

static void test_rename_exchange(void **state)
{
	struct fx *f = *state;
	uint64_t a = mkdir_(f, KV_ROOT_INO, "a");
	uint64_t b = mkdir_(f, KV_ROOT_INO, "b");
	uint64_t fa = mkfile(f, a, "fa");
	uint64_t fb = mkfile(f, b, "fb");
	uint64_t da = mkdir_(f, a, "da");
	uint64_t db = mkdir_(f, b, "db");
	uint64_t rep = 99;
	uint32_t repn = 99;

	assert_int_equal(
		ren(f, a, "fa", b, "nothing", RENAME_EXCHANGE, &rep, &repn),
		-ENOENT);
	assert_int_equal(
		ren(f, a, "nothing", b, "fb", RENAME_EXCHANGE, &rep, &repn),
		-ENOENT);

	/* Two files across parents. */
	assert_int_equal(ren(f, a, "fa", b, "fb", RENAME_EXCHANGE, &rep, &repn),
			 0);
	assert_int_equal(rep, 0);
	assert_int_equal(lookup_ino(f, a, "fa"), fb);
	assert_int_equal(lookup_ino(f, b, "fb"), fa);
	assert_int_equal(nlink_of(f, fa), 1);
	assert_int_equal(nlink_of(f, fb), 1);
	assert_int_equal(getattr_ok(f, fa).ctime_ns, NOW);
	assert_int_equal(getattr_ok(f, fb).ctime_ns, NOW);
	assert_int_equal(getattr_ok(f, a).mtime_ns, NOW);
	assert_int_equal(getattr_ok(f, b).mtime_ns, NOW);

	/* A directory and a file across parents: both parents' nlink. */
	assert_int_equal(nlink_of(f, a), 3);
	assert_int_equal(nlink_of(f, b), 3);
	assert_int_equal(ren(f, a, "da", b, "fb", RENAME_EXCHANGE, &rep, &repn),
			 0);
	assert_int_equal(lookup_ino(f, b, "fb"), da);
	assert_int_equal(lookup_ino(f, a, "da"), fa);
	assert_int_equal(nlink_of(f, a), 2);
	assert_int_equal(nlink_of(f, b), 4);
	assert_int_equal(nlink_of(f, da), 2);
	/* And back the other way round. */
	assert_int_equal(ren(f, a, "da", b, "fb", RENAME_EXCHANGE, &rep, &repn),
			 0);
	assert_int_equal(nlink_of(f, a), 3);
	assert_int_equal(nlink_of(f, b), 3);

	/* Two directories: nlink unchanged. */
	assert_int_equal(ren(f, a, "da", b, "db", RENAME_EXCHANGE, &rep, &repn),
			 0);
	assert_int_equal(lookup_ino(f, a, "da"), db);
	assert_int_equal(lookup_ino(f, b, "db"), da);
	assert_int_equal(nlink_of(f, a), 3);
	assert_int_equal(nlink_of(f, b), 3);

	/* A directory with its own ancestor or descendant. */
	assert_int_equal(
		ren(f, KV_ROOT_INO, "a", a, "da", RENAME_EXCHANGE, &rep, &repn),
		-EINVAL);
	assert_int_equal(
		ren(f, a, "da", KV_ROOT_INO, "a", RENAME_EXCHANGE, &rep, &repn),
		-EINVAL);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "a"), a);
	/* root, a, b, fa, fb, da, db */
	statfs_eq(f, 7, 0);
}

static void test_rename_errors(void **state)
{
	struct fx *f = *state;
	char longname[IDX_NAME_MAX + 2];
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t file = mkfile(f, KV_ROOT_INO, "file");
	uint64_t gone = mkdir_(f, KV_ROOT_INO, "gone");

	assert_int_equal(ren(f, KV_ROOT_INO, "file", d, "x", 4, NULL, NULL),
			 -EINVAL);
	assert_int_equal(ren(f, KV_ROOT_INO, "file", d, "x",
			     RENAME_NOREPLACE | RENAME_EXCHANGE, NULL, NULL),
			 -EINVAL);
	assert_int_equal(ren(f, KV_ROOT_INO, "nope", d, "x", 0, NULL, NULL),
			 -ENOENT);
	assert_int_equal(ren(f, 999, "file", d, "x", 0, NULL, NULL), -ENOENT);
	assert_int_equal(ren(f, KV_ROOT_INO, "file", 999, "x", 0, NULL, NULL),
			 -ENOENT);
	assert_int_equal(ren(f, KV_ROOT_INO, "file", file, "x", 0, NULL, NULL),
			 -ENOTDIR);
	assert_int_equal(ren(f, file, "x", d, "x", 0, NULL, NULL), -ENOTDIR);
	memset(longname, 'n', sizeof(longname));
	longname[IDX_NAME_MAX + 1] = '\0';
	assert_int_equal(
		ren(f, KV_ROOT_INO, "file", d, longname, 0, NULL, NULL),
		-ENAMETOOLONG);
	assert_int_equal(ren(f, KV_ROOT_INO, longname, d, "x", 0, NULL, NULL),
			 -ENAMETOOLONG);
	assert_int_equal(ren(f, KV_ROOT_INO, "file", d, "", 0, NULL, NULL),
			 -EINVAL);
	assert_int_equal(unl(f, KV_ROOT_INO, "gone", 1), 0);
	assert_int_equal(ren(f, KV_ROOT_INO, "file", gone, "x", 0, NULL, NULL),
			 -ENOENT);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "file"), file);
	statfs_eq(f, 3, 0);
}

/* ---- readdir ---- */

static void test_readdir(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t file = mkfile(f, KV_ROOT_INO, "file");
	uint64_t inos[5];
	struct dirlist l;
	const char *names[5] = {"e", "b", "d", "a", "c"};

	for (int i = 0; i < 5; i++)
		inos[i] = mk(f, d, names[i],
			     i == 2 ? S_IFDIR | 0700 : S_IFREG | 0600);
	give_extent(f, inos[1], 4, 0, 77);
	list_dir(f, d, &l);
	assert_int_equal(l.n, 5);
	for (int i = 0; i < 5; i++) {
		/* Creation (cookie) order, not name order. */
		assert_string_equal(l.names[i], names[i]);
		assert_int_equal(l.inos[i], inos[i]);
		assert_true(l.cookies[i] > 0);
		if (i)
			assert_true(l.cookies[i] > l.cookies[i - 1]);
	}

	/* Attributes come along. */
	{
		struct dirlist one = {.limit = 1};
		struct idx_attr a;

		assert_int_equal(
			idx_readdir(f->idx, d, l.cookies[0], dirlist_fn, &one),
			0);
		assert_int_equal(one.n, 1);
		assert_string_equal(one.names[0], "b");
		assert_int_equal(idx_lookup(f->idx, d, "b", &a), 0);
		assert_int_equal(a.size, 77);
	}

	/* Resume after a cookie; past the last one there is nothing. */
	memset(&l, 0, sizeof(l));
	l.limit = 512;
	assert_int_equal(idx_readdir(f->idx, d, 0, dirlist_fn, &l), 0);
	{
		struct dirlist rest = {.limit = 512};

		assert_int_equal(
			idx_readdir(f->idx, d, l.cookies[2], dirlist_fn, &rest),
			0);
		assert_int_equal(rest.n, 2);
		assert_string_equal(rest.names[0], "a");
		assert_string_equal(rest.names[1], "c");
		rest.n = 0;
		assert_int_equal(
			idx_readdir(f->idx, d, l.cookies[4], dirlist_fn, &rest),
			0);
		assert_int_equal(rest.n, 0);
		assert_int_equal(
			idx_readdir(f->idx, d, UINT64_MAX, dirlist_fn, &rest),
			0);
		assert_int_equal(rest.n, 0);
	}

	assert_int_equal(idx_readdir(f->idx, file, 0, dirlist_fn, &l),
			 -ENOTDIR);
	assert_int_equal(idx_readdir(f->idx, 999, 0, dirlist_fn, &l), -ENOENT);
	list_dir(f, inos[2], &l);
	assert_int_equal(l.n, 0);
	list_dir(f, KV_ROOT_INO, &l);
	assert_int_equal(l.n, 2);
}

/* idx_readdir_names(): a names-only listing of what idx_readdir() gives. */
struct name_row {
	int n;
	char names[8][64];
	struct idx_attr attrs[8];
	uint64_t cookies[8];
};

static int name_row_fn(void *arg, const char *name, const struct idx_attr *a,
		       uint64_t cookie)
{
	struct name_row *r = arg;

	assert_true(r->n < 8);
	snprintf(r->names[r->n], sizeof(r->names[r->n]), "%s", name);
	r->attrs[r->n] = *a;
	r->cookies[r->n++] = cookie;
	return 0;
}

static void test_readdir_names(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t file = mkfile(f, KV_ROOT_INO, "file");
	struct name_row full = {0}, names = {0}, rest = {0};

	mk(f, d, "z", S_IFREG | 0600);
	mk(f, d, "sub", S_IFDIR | 0700);
	give_extent(f, mk(f, d, "a", S_IFREG | 0644), 4, 0, 77);
	assert_int_equal(idx_readdir(f->idx, d, 0, name_row_fn, &full), 0);
	assert_int_equal(idx_readdir_names(f->idx, d, 0, name_row_fn, &names),
			 0);
	assert_int_equal(names.n, 3);
	assert_int_equal(full.n, 3);
	for (int i = 0; i < 3; i++) {
		const struct idx_attr *a = &names.attrs[i];

		assert_string_equal(names.names[i], full.names[i]);
		assert_int_equal(names.cookies[i], full.cookies[i]);
		assert_int_equal(a->ino, full.attrs[i].ino);
		assert_int_equal(a->mode, full.attrs[i].mode);
		/* Only what a plain listing needs; nothing else is filled. */
		assert_true(!a->uid && !a->gid && !a->nlink && !a->size &&
			    !a->atime_ns && !a->mtime_ns && !a->ctime_ns &&
			    !a->ext.file_id && !a->ext.off && !a->ext.hdr_len &&
			    !a->ext.len);
	}
	assert_int_equal(full.attrs[2].size, 77);
	assert_int_equal(names.attrs[1].mode, S_IFDIR | 0700);
	assert_int_equal(idx_readdir_names(f->idx, d, names.cookies[0],
					   name_row_fn, &rest),
			 0);
	assert_int_equal(rest.n, 2);
	assert_string_equal(rest.names[0], "sub");
	assert_int_equal(idx_readdir_names(f->idx, file, 0, name_row_fn, &rest),
			 -ENOTDIR);
	assert_int_equal(idx_readdir_names(f->idx, 999, 0, name_row_fn, &rest),
			 -ENOENT);
}

/*
 * Entries come in cookie order and cookies survive changes between calls:
 * an entry present all along is listed exactly once, a removed one that was
 * not reached yet is not listed, and nothing is listed twice.
 */
static void test_readdir_cookies_stable(void **state)
{
	struct fx *f = *state;
	enum { NFILES = 60, CHUNK = 7 };
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	int removed[NFILES] = {0}, seen[NFILES] = {0}, nseen_new = 0;
	int next_new = 0, last_seen = -1, first_unremoved_seen = 0;
	struct dirlist l;
	uint64_t after = 0, last_cookie = 0;
	char name[32];

	for (int i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		mkfile(f, d, name);
	}
	for (;;) {
		memset(&l, 0, sizeof(l));
		l.limit = CHUNK;
		assert_int_equal(idx_readdir(f->idx, d, after, dirlist_fn, &l),
				 0);
		if (l.n == 0)
			break;
		for (int i = 0; i < l.n; i++) {
			int k;

			assert_true(l.cookies[i] > last_cookie);
			last_cookie = l.cookies[i];
			if (l.names[i][0] == 'n') {
				nseen_new++;
				continue;
			}
			k = atoi(l.names[i] + 1);
			assert_false(removed[k]);
			assert_int_equal(seen[k], 0);
			seen[k] = 1;
			last_seen = k;
		}
		after = l.cookies[l.n - 1];

		/* Remove one entry ahead and one behind, add one. */
		for (int k = NFILES - 1; k > last_seen; k--) {
			if (!removed[k]) {
				snprintf(name, sizeof(name), "f%02d", k);
				assert_int_equal(unl(f, d, name, 0), 0);
				removed[k] = 1;
				break;
			}
		}
		while (first_unremoved_seen <= last_seen &&
		       removed[first_unremoved_seen])
			first_unremoved_seen++;
		if (first_unremoved_seen <= last_seen) {
			snprintf(name, sizeof(name), "f%02d",
				 first_unremoved_seen);
			assert_int_equal(unl(f, d, name, 0), 0);
			removed[first_unremoved_seen] = 1;
		}
		if (next_new < 5) {
			snprintf(name, sizeof(name), "n%02d", next_new++);
			mkfile(f, d, name);
		}
	}
	for (int k = 0; k < NFILES; k++)
		assert_true(seen[k] || removed[k]);
	/* New names get higher cookies, so each one shows up once. */
	assert_int_equal(nseen_new, next_new);
}

/* ---- lookup_batch ---- */

static void test_lookup_batch(void **state)
{
	struct fx *f = *state;
	char longname[IDX_NAME_MAX + 2];
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t x = mkfile(f, d, "x");
	uint64_t y = mkfile(f, KV_ROOT_INO, "y");
	uint64_t parents[5] = {d, d, KV_ROOT_INO, 999, KV_ROOT_INO};
	const char *names[5] = {"x", "y", "y", "x", longname};
	int found[5];
	struct idx_attr attrs[5];

	memset(longname, 'n', sizeof(longname));
	longname[IDX_NAME_MAX + 1] = '\0';
	memset(found, 0x55, sizeof(found));
	assert_int_equal(
		idx_lookup_batch(f->idx, 5, parents, names, found, attrs), 0);
	assert_int_equal(found[0], 1);
	assert_int_equal(attrs[0].ino, x);
	assert_int_equal(found[1], 0);
	assert_int_equal(found[2], 1);
	assert_int_equal(attrs[2].ino, y);
	assert_int_equal(attrs[2].mode, S_IFREG | 0644);
	assert_int_equal(found[3], 0);
	assert_int_equal(found[4], 0);
	assert_int_equal(idx_lookup_batch(f->idx, 0, NULL, NULL, NULL, NULL),
			 0);
}

/* ---- xattrs ---- */

static void test_xattrs(void **state)
{
	struct fx *f = *state;
	uint64_t x = mkfile(f, KV_ROOT_INO, "x");
	char buf[64], longname[300];
	static char big[65537];

	assert_int_equal(idx_listxattr(f->idx, x, NULL, 0), 0);
	assert_int_equal(idx_getxattr(f->idx, x, "user.a", buf, sizeof(buf)),
			 -ENODATA);
	assert_int_equal(idx_setxattr(f->idx, x, "user.b", "two", 3, 0), 0);
	assert_int_equal(
		idx_setxattr(f->idx, x, "user.a", "1", 1, XATTR_CREATE), 0);
	assert_int_equal(
		idx_setxattr(f->idx, x, "user.a", "9", 1, XATTR_CREATE),
		-EEXIST);
	assert_int_equal(
		idx_setxattr(f->idx, x, "user.c", "9", 1, XATTR_REPLACE),
		-ENODATA);
	assert_int_equal(
		idx_setxattr(f->idx, x, "user.a", "one", 3, XATTR_REPLACE), 0);
	assert_int_equal(idx_getxattr(f->idx, x, "user.a", NULL, 0), 3);
	assert_int_equal(idx_getxattr(f->idx, x, "user.a", buf, sizeof(buf)),
			 3);
	assert_memory_equal(buf, "one", 3);
	assert_int_equal(idx_getxattr(f->idx, x, "user.a", buf, 2), -ERANGE);
	assert_int_equal(idx_getxattr(f->idx, x, "user.a", buf, 3), 3);

	/* Empty values exist and are not "unset". */
	assert_int_equal(idx_setxattr(f->idx, x, "user.empty", "", 0, 0), 0);
	assert_int_equal(
		idx_getxattr(f->idx, x, "user.empty", buf, sizeof(buf)), 0);

	/* Names in order, NUL-separated. */
	assert_int_equal(idx_listxattr(f->idx, x, NULL, 0), 25);
	assert_int_equal(idx_listxattr(f->idx, x, buf, sizeof(buf)), 25);
	assert_memory_equal(buf, "user.a\0user.b\0user.empty\0", 25);
	assert_int_equal(idx_listxattr(f->idx, x, buf, 24), -ERANGE);

	/* 64 KiB is the limit. */
	memset(big, 'v', sizeof(big));
	assert_int_equal(idx_setxattr(f->idx, x, "user.big", big, 65537, 0),
			 -E2BIG);
	assert_int_equal(idx_setxattr(f->idx, x, "user.big", big, 65536, 0), 0);
	assert_int_equal(idx_getxattr(f->idx, x, "user.big", NULL, 0), 65536);

	memset(longname, 'n', sizeof(longname));
	longname[256] = '\0';
	assert_int_equal(idx_setxattr(f->idx, x, longname, "1", 1, 0), -ERANGE);
	assert_int_equal(idx_setxattr(f->idx, x, "", "1", 1, 0), -ERANGE);
	assert_int_equal(idx_getxattr(f->idx, x, longname, buf, sizeof(buf)),
			 -ERANGE);
	assert_int_equal(idx_setxattr(f->idx, x, "user.f", "1", 1, 4), -EINVAL);

	assert_int_equal(idx_removexattr(f->idx, x, "user.b"), 0);
	assert_int_equal(idx_removexattr(f->idx, x, "user.b"), -ENODATA);
	assert_int_equal(idx_getxattr(f->idx, x, "user.b", buf, sizeof(buf)),
			 -ENODATA);

	assert_int_equal(idx_setxattr(f->idx, 999, "user.a", "1", 1, 0),
			 -ENOENT);
	assert_int_equal(idx_getxattr(f->idx, 999, "user.a", buf, sizeof(buf)),
			 -ENOENT);
	assert_int_equal(idx_listxattr(f->idx, 999, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(idx_removexattr(f->idx, 999, "user.a"), -ENOENT);

	/* Directories have xattrs too. */
	assert_int_equal(idx_setxattr(f->idx, KV_ROOT_INO, "user.r", "r", 1, 0),
			 0);
	assert_int_equal(idx_listxattr(f->idx, KV_ROOT_INO, buf, sizeof(buf)),
			 7);
}

/* idx_path: the path of an inode by its names, from the index alone. */
static void test_path(void **state)
{
	struct fx *f = *state;
	char buf[64], tiny[4];
	uint64_t d, e, x;

	d = mkdir_(f, KV_ROOT_INO, "d");
	e = mkdir_(f, d, "e");
	x = mkfile(f, e, "x.bin");
	assert_int_equal(idx_path(f->idx, KV_ROOT_INO, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/");
	assert_int_equal(idx_path(f->idx, d, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/d");
	assert_int_equal(idx_path(f->idx, x, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/d/e/x.bin");
	assert_int_equal(ren(f, e, "x.bin", d, "y.bin", 0, NULL, NULL), 0);
	assert_int_equal(idx_path(f->idx, x, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/d/y.bin");
	assert_int_equal(idx_path(f->idx, x, tiny, sizeof(tiny)),
			 -ENAMETOOLONG);
	assert_int_equal(idx_path(f->idx, 987654, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(unl(f, d, "y.bin", 0), 0);
	assert_int_equal(idx_path(f->idx, x, buf, sizeof(buf)), -ENOENT);
}

/* idx_link and idx_names: hard links across directories. */
static void test_link(void **state)
{
	struct fx *f = *state;
	struct idx_attr a;
	char buf[64];
	size_t used;
	uint64_t d, e, x;

	d = mkdir_(f, KV_ROOT_INO, "d");
	e = mkdir_(f, KV_ROOT_INO, "e");
	x = mkfile(f, d, "x");
	assert_int_equal(idx_link(f->idx, x, e, "y", NOW + 1, &a), 0);
	assert_int_equal(a.ino, x);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(a.ctime_ns, NOW + 1);
	assert_int_equal(lookup_ino(f, e, "y"), x);
	assert_int_equal(getattr_ok(f, x).nlink, 2);
	assert_int_equal(getattr_ok(f, e).mtime_ns, NOW + 1);
	assert_int_equal(idx_names(f->idx, x, buf, sizeof(buf), &used), 2);
	assert_int_equal(used, sizeof("/d/x") + sizeof("/e/y"));
	assert_memory_equal(buf, "/d/x\0/e/y", used);
	assert_int_equal(idx_names(f->idx, x, buf, 6, &used), -ENAMETOOLONG);
	/* Refusals: a name in use, a directory, no such inode or parent. */
	assert_int_equal(idx_link(f->idx, x, d, "x", NOW, &a), -EEXIST);
	assert_int_equal(idx_link(f->idx, d, e, "dd", NOW, &a), -EPERM);
	assert_int_equal(idx_link(f->idx, 98765, e, "z", NOW, &a), -ENOENT);
	assert_int_equal(idx_link(f->idx, x, 98765, "z", NOW, &a), -ENOENT);
	assert_int_equal(idx_link(f->idx, x, x, "z", NOW, &a), -ENOTDIR);
	assert_int_equal(idx_link(f->idx, x, e, "", NOW, &a), -EINVAL);
	/* One name goes, the other stays; the last one makes an orphan. */
	assert_int_equal(unl(f, d, "x", 0), 0);
	assert_int_equal(getattr_ok(f, x).nlink, 1);
	assert_int_equal(idx_names(f->idx, x, buf, sizeof(buf), &used), 1);
	assert_string_equal(buf, "/e/y");
	assert_int_equal(unl(f, e, "y", 0), 0);
	assert_int_equal(idx_names(f->idx, x, buf, sizeof(buf), &used),
			 -ENOENT);
	/* An orphan cannot get a name back (ext4 says ENOENT too). */
	assert_int_equal(idx_link(f->idx, x, e, "back", NOW, &a), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_create),
		T(test_create_errors),
		T(test_lookup_getattr),
		T(test_readlink),
		T(test_setattr),
		T(test_unlink),
		T(test_unlink_hard_links),
		T(test_unlink_ino),
		T(test_rename_simple),
		T(test_rename_file_over_file),
		T(test_rename_dirs_nlink),
		T(test_rename_type_errors),
		T(test_rename_into_own_subtree),
		T(test_rename_same_inode),
		T(test_rename_noreplace),
		T(test_rename_exchange),
		T(test_rename_errors),
		T(test_readdir),
		T(test_readdir_cookies_stable),
		T(test_readdir_names),
		T(test_lookup_batch),
		T(test_xattrs),
		T(test_path),
		T(test_link),
	};

	/* Expected refusals log errors; info lines would only be noise. */
	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests_name("index_ns", tests, NULL, NULL);
}
