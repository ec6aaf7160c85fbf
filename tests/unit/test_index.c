/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of index/ (index.h), the database itself: a new index, reopening
 * one, format versions (a new index is version 2, version 1 is upgraded on
 * open, a newer one is refused), files that are not ours, corrupt or
 * read-only, idx_sync() during checkpoints, the read transaction reads
 * share, and concurrent renames, unlinks and lookups. The namespace calls
 * are tested in test_index_ns.c, records and extents in
 * test_index_records.c, the VFS in test_index_vfs.c.
 */
#include "test_index_fx.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <sqlite3.h>

/* ---- schema, open and reopen ---- */

static void test_new_db_has_root(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = getattr_ok(f, KV_ROOT_INO);
	struct dirlist l;
	char want[32];

	assert_int_equal(a.mode, S_IFDIR | 0755);
	assert_int_equal(a.uid, 0);
	assert_int_equal(a.gid, 0);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(a.size, 0);
	assert_true(a.mtime_ns > 0);
	assert_int_equal(idx_getattr(f->idx, 2, &a), -ENOENT);
	assert_absent(f, KV_ROOT_INO, "x");
	list_dir(f, KV_ROOT_INO, &l);
	assert_int_equal(l.n, 0);
	statfs_eq(f, 1, 0);

	snprintf(want, sizeof(want), "%d", IDX_APPLICATION_ID);
	assert_sql_text(f->db, "PRAGMA application_id", want);
	snprintf(want, sizeof(want), "%d", IDX_FORMAT_VERSION);
	assert_sql_text(f->db, "PRAGMA user_version", want);
	assert_sql_text(f->db, "PRAGMA journal_mode", "wal");
	/* The first new inode is 2: AUTOINCREMENT continues after root. */
	assert_int_equal(mkfile(f, KV_ROOT_INO, "first"), 2);
}

static void test_reopen_keeps_namespace(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t file = mkfile(f, d, "f");
	uint64_t g = mkfile(f, KV_ROOT_INO, "g");
	uint64_t ino;
	uint32_t nlink;
	struct kv_extent e;
	struct idx_attr root;

	give_extent(f, file, 3, 8192, 1000);
	assert_int_equal(idx_setxattr(f->idx, file, "user.k", "v", 1, 0), 0);
	/* g has the highest inode number; after it is gone, none is reused. */
	assert_int_equal(
		idx_unlink(f->idx, KV_ROOT_INO, "g", 0, NOW, &ino, &nlink), 0);
	assert_int_equal(idx_release_inode(f->idx, g, &e), 0);
	fx_reopen(f);

	root = getattr_ok(f, KV_ROOT_INO);
	assert_int_equal(root.mode, S_IFDIR | 0755); /* not the new 0700 */
	assert_int_equal(root.nlink, 3);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "d"), d);
	assert_int_equal(lookup_ino(f, d, "f"), file);
	assert_int_equal(getattr_ok(f, file).ext.file_id, 3);
	assert_int_equal(idx_getxattr(f->idx, file, "user.k", NULL, 0), 1);
	assert_absent(f, KV_ROOT_INO, "g");
	assert_true(mkfile(f, KV_ROOT_INO, "h") > g);
	statfs_eq(f, 4, 1000);
}

static void test_open_empty_file(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	struct idx *idx;
	struct idx_attr a;

	fx_path(f, path, "empty.db");
	write_file(path, "", 0);
	assert_int_equal(idx_open(&idx, path, 0711, 7, 8), 0);
	assert_int_equal(idx_getattr(idx, KV_ROOT_INO, &a), 0);
	assert_int_equal(a.mode, S_IFDIR | 0711);
	assert_int_equal(a.uid, 7);
	assert_int_equal(a.gid, 8);
	idx_close(idx);
	idx_close(NULL);
}

static void test_open_garbage(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], small[PATH_MAX];
	unsigned char junk[16384];
	uint32_t x = 12345;
	struct idx *idx = (struct idx *)1;
	char *after;
	size_t len;

	for (size_t i = 0; i < sizeof(junk); i++) {
		x = x * 1103515245 + 12345;
		junk[i] = (unsigned char)(x >> 16);
	}
	fx_path(f, path, "garbage.db");
	write_file(path, junk, sizeof(junk));
	assert_int_equal(idx_open(&idx, path, 0755, 0, 0), -EMEDIUMTYPE);
	assert_null(idx);
	/* Refusing a file must not change it. */
	after = read_file(path, &len);
	assert_int_equal(len, sizeof(junk));
	assert_memory_equal(after, junk, sizeof(junk));
	free(after);

	fx_path(f, small, "small.db");
	write_file(small, "hello, world\n", 13);
	assert_int_equal(idx_open(&idx, small, 0755, 0, 0), -EMEDIUMTYPE);
}

static void test_open_other_application(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], before_path[PATH_MAX], sql[128];
	struct idx *idx;
	char *before, *after;
	size_t blen, alen;

	/* Another application's database, application_id 0. */
	fx_path(f, path, "notes.db");
	sql_exec(path, "CREATE TABLE notes (t TEXT);"
		       "INSERT INTO notes VALUES ('hello');");
	before = read_file(path, &blen);
	assert_int_equal(idx_open(&idx, path, 0755, 0, 0), -EMEDIUMTYPE);
	after = read_file(path, &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(before);
	free(after);
	assert_sql_text(path, "PRAGMA journal_mode", "delete");

	/* Another application_id. */
	fx_path(f, before_path, "other.db");
	sql_exec(before_path, "PRAGMA application_id = 305419896;"
			      "CREATE TABLE inodes (x);");
	assert_int_equal(idx_open(&idx, before_path, 0755, 0, 0), -EMEDIUMTYPE);

	/* Our application_id and version, without our tables. */
	fx_path(f, path, "hollow.db");
	snprintf(sql, sizeof(sql),
		 "PRAGMA application_id = %d; PRAGMA user_version = %d;",
		 IDX_APPLICATION_ID, IDX_FORMAT_VERSION);
	sql_exec(path, sql);
	assert_int_equal(idx_open(&idx, path, 0755, 0, 0), -EMEDIUMTYPE);

	/* A kvfs database with a table missing. */
	sql_exec(f->db, "DROP TABLE xattrs");
	idx_close(f->idx);
	f->idx = NULL;
	assert_int_equal(idx_open(&idx, f->db, 0755, 0, 0), -EMEDIUMTYPE);
}

static void test_open_newer_version(void **state)
{
	struct fx *f = *state;
	struct idx *idx;

	mkfile(f, KV_ROOT_INO, "a");
	idx_close(f->idx);
	f->idx = NULL;
	sql_exec(f->db, "PRAGMA user_version = 99");
	assert_int_equal(idx_open(&idx, f->db, 0755, 0, 0), -EPROTONOSUPPORT);
	/* The same file is fine again with a supported version. */
	sql_exec(f->db, "PRAGMA user_version = 2");
	assert_int_equal(idx_open(&f->idx, f->db, 0755, 0, 0), 0);
	lookup_ino(f, KV_ROOT_INO, "a");
}

/* ---- format versions ---- */

#define UPGRADED "upgraded the index from format version 1 to 5"
#define UPGRADED2 "upgraded the index from format version 2 to 5"
#define UPGRADED3 "upgraded the index from format version 3 to 5"
#define UPGRADED4 "upgraded the index from format version 4 to 5"
#define NO_HORIZONS "SELECT count(*) FROM sqlite_schema WHERE name = 'horizons'"
/* The schema apart from horizons, which version 2 adds. */
#define V1_SCHEMA                                                              \
	"SELECT group_concat(type || ' ' || name || ': ' || ifnull(sql, ''), " \
	"char(10)) FROM (SELECT * FROM sqlite_schema "                         \
	"WHERE name != 'horizons' ORDER BY name)"

/*
 * Closes the fixture's index and makes it a version-1 index as releases
 * before format version 2 left it: version 1 is version 2 without the
 * horizons table, which those releases made on first use (with_horizons
 * keeps it and its rows).
 */
static void fx_make_v1(struct fx *f, int with_horizons)
{
	idx_close(f->idx);
	f->idx = NULL;
	if (!with_horizons)
		sql_exec(f->db, "DROP TABLE horizons");
	sql_exec(f->db, "ALTER TABLE inodes DROP COLUMN rdev");
	sql_exec(f->db, "PRAGMA user_version = 1");
	assert_sql_text(f->db, "PRAGMA user_version", "1");
	assert_sql_text(f->db, NO_HORIZONS, with_horizons ? "1" : "0");
}

/*
 * Opens the fixture's index with info lines on and stderr in a file; returns
 * how many times want was logged.
 */
static int fx_open_logged(struct fx *f, const char *want)
{
	char path[PATH_MAX], *buf, *p;
	int fd, saved, rc, n = 0;
	size_t len;

	fx_path(f, path, "stderr.txt");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	log_set_level(LOG_LVL_INFO);
	rc = idx_open(&f->idx, f->db, 0755, 0, 0);
	log_set_level(LOG_LVL_WARN);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fd);
	assert_int_equal(rc, 0);
	buf = read_file(path, &len);
	buf[len] = '\0';
	for (p = buf; (p = strstr(p, want)); p++)
		n++;
	free(buf);
	return n;
}

/* The horizons table is there and empty: one put reads back. */
static void assert_horizons_usable(struct fx *f, uint32_t id, uint64_t off)
{
	uint32_t ids[2];
	uint64_t offs[2];

	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 2), 0);
	assert_int_equal(idx_horizons_put(f->idx, 1, &id, &off), 0);
	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 2), 1);
	assert_int_equal(ids[0], id);
	assert_int_equal(offs[0], off);
}

static void test_new_db_is_version_5(void **state)
{
	struct fx *f = *state;

	assert_int_equal(IDX_FORMAT_VERSION, 5);
	assert_sql_text(f->db, "PRAGMA user_version", "5");
	assert_sql_text(f->db, NO_HORIZONS, "1");
	assert_horizons_usable(f, 5, 8192);
	/* Opening a current index changes nothing and says nothing. */
	idx_close(f->idx);
	f->idx = NULL;
	assert_int_equal(fx_open_logged(f, "index"), 0);
	assert_sql_text(f->db, "PRAGMA user_version", "5");
}

/*
 * An index of format version v (2 or 3: no rdev column; 4) opened: one
 * log line (log), version 5, the column added (0 for every inode), the
 * schema and a file's record as they were.
 */
static void upgrade_from(struct fx *f, int v, const char *log)
{
	uint64_t file = mkfile(f, KV_ROOT_INO, "f");
	char *before, *after;

	give_extent(f, file, 3, 8192, 1000);
	idx_close(f->idx);
	f->idx = NULL;
	before = sql_text(f->db, V1_SCHEMA);
	if (v < 4)
		sql_exec(f->db, "ALTER TABLE inodes DROP COLUMN rdev");
	sql_exec(f->db, v == 2	 ? "PRAGMA user_version = 2"
			: v == 3 ? "PRAGMA user_version = 3"
				 : "PRAGMA user_version = 4");
	assert_int_equal(fx_open_logged(f, log), 1);
	assert_sql_text(f->db, "PRAGMA user_version", "5");
	after = sql_text(f->db, V1_SCHEMA);
	assert_string_equal(after, before);
	free(before);
	free(after);
	assert_int_equal(getattr_ok(f, file).ext.file_id, 3);
	assert_int_equal(getattr_ok(f, file).rdev, 0);
}

/* A version-3 index becomes version 5. */
static void test_upgrade_from_v3(void **state)
{
	upgrade_from(*state, 3, UPGRADED3);
}

/*
 * A version-4 index becomes version 5 (extent files may keep their header
 * in a file of their own) with one log line and nothing else changed.
 */
static void test_upgrade_from_v4(void **state)
{
	upgrade_from(*state, 4, UPGRADED4);
}

/*
 * A version-2 index becomes version 5 (extent files may appear in it)
 * with one log line and nothing else changed.
 */
static void test_upgrade_from_v2(void **state)
{
	upgrade_from(*state, 2, UPGRADED2);
}

/*
 * A version-1 index without horizons: idx_open() upgrades it once, with
 * one log line, and keeps every row; the schema apart from horizons is the
 * same before and after.
 */
static void test_upgrade_from_v1(void **state)
{
	struct fx *f = *state;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	uint64_t file = mkfile(f, d, "f");
	uint32_t ids[2];
	uint64_t offs[2];
	char *before, *after;
	char val[4];

	give_extent(f, file, 3, 8192, 1000);
	assert_int_equal(idx_setxattr(f->idx, file, "user.k", "v", 1, 0), 0);
	idx_close(f->idx);
	f->idx = NULL;
	before = sql_text(f->db, V1_SCHEMA);
	fx_make_v1(f, 0);

	assert_int_equal(fx_open_logged(f, UPGRADED), 1);
	assert_sql_text(f->db, "PRAGMA user_version", "5");
	assert_sql_text(f->db, NO_HORIZONS, "1");
	after = sql_text(f->db, V1_SCHEMA);
	assert_string_equal(after, before);
	free(before);
	free(after);

	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "d"), d);
	assert_int_equal(lookup_ino(f, d, "f"), file);
	assert_int_equal(getattr_ok(f, file).ext.file_id, 3);
	assert_int_equal(getattr_ok(f, file).ext.off, 8192);
	assert_int_equal(idx_getxattr(f->idx, file, "user.k", val, 4), 1);
	assert_int_equal(val[0], 'v');
	statfs_eq(f, 3, 1000);
	assert_true(mkfile(f, d, "g") > file);

	assert_horizons_usable(f, 3, 4096);

	/* Once is enough: the next open finds version 5. */
	idx_close(f->idx);
	f->idx = NULL;
	assert_int_equal(fx_open_logged(f, UPGRADED), 0);
	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 2), 1);
}

/* A version-1 index whose horizons table was made on first use keeps it. */
static void test_upgrade_from_v1_with_horizons(void **state)
{
	struct fx *f = *state;
	uint32_t ids[4], put_ids[2] = {2, 9};
	uint64_t offs[4], put_offs[2] = {4096, 65536};
	uint64_t file = mkfile(f, KV_ROOT_INO, "f");

	assert_int_equal(idx_horizons_put(f->idx, 2, put_ids, put_offs), 0);
	fx_make_v1(f, 1);

	assert_int_equal(fx_open_logged(f, UPGRADED), 1);
	assert_sql_text(f->db, "PRAGMA user_version", "5");
	assert_int_equal(idx_horizons_get(f->idx, ids, offs, 4), 2);
	assert_int_equal(ids[0], 2);
	assert_int_equal(offs[0], 4096);
	assert_int_equal(ids[1], 9);
	assert_int_equal(offs[1], 65536);
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "f"), file);
}

/* Version 6 is newer than this kvfs: refused, and the file is left alone. */
static void test_open_version_6(void **state)
{
	struct fx *f = *state;
	struct idx *idx = (struct idx *)1;
	char *before, *after;
	size_t blen, alen;

	mkfile(f, KV_ROOT_INO, "a");
	idx_close(f->idx);
	f->idx = NULL;
	sql_exec(f->db, "PRAGMA user_version = 6");
	before = read_file(f->db, &blen);
	assert_int_equal(idx_open(&idx, f->db, 0755, 0, 0), -EPROTONOSUPPORT);
	assert_null(idx);
	after = read_file(f->db, &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(before);
	free(after);
	assert_sql_text(f->db, "PRAGMA user_version", "6");
}

/* Version 2 promises the horizons table: without it, not a kvfs index. */
static void test_v2_without_horizons(void **state)
{
	struct fx *f = *state;
	struct idx *idx;

	idx_close(f->idx);
	f->idx = NULL;
	sql_exec(f->db, "DROP TABLE horizons");
	assert_int_equal(idx_open(&idx, f->db, 0755, 0, 0), -EMEDIUMTYPE);
	/* Version 1 without it is fine, and gets it. */
	sql_exec(f->db, "PRAGMA user_version = 1");
	assert_int_equal(idx_open(&f->idx, f->db, 0755, 0, 0), 0);
	assert_sql_text(f->db, NO_HORIZONS, "1");
}

static void test_open_missing_dir(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	struct idx *idx;

	fx_path(f, path, "no/such/dir/index.db");
	assert_int_equal(idx_open(&idx, path, 0755, 0, 0), -ENOENT);
}

#define NCORRUPT 3000

static void test_corrupt_db_gives_eio(void **state)
{
	struct fx *f = *state;
	static uint64_t inos[NCORRUPT];
	uint64_t dirs[4], ni, nb;
	char name[160], fill[4096];
	struct idx_attr a;
	struct stat st;
	struct dirlist l;
	int fd, neio = 0, nok = 0, rc, saved_stderr, devnull;
	off_t npages;

	for (int d = 0; d < 4; d++) {
		snprintf(name, sizeof(name), "dir%d", d);
		dirs[d] = mkdir_(f, KV_ROOT_INO, name);
	}
	for (int i = 0; i < NCORRUPT; i++) {
		snprintf(name, sizeof(name),
			 "block-%05d-0123456789abcdef0123456789abcdef"
			 "0123456789abcdef0123456789abcdef",
			 i);
		inos[i] = mkfile(f, dirs[i % 4], name);
		give_extent(f, inos[i], 1 + i % 7, 8192 * (uint64_t)i,
			    1 + (uint64_t)i);
	}
	/* Close checkpoints the WAL into the file and removes the WAL. */
	idx_close(f->idx);
	f->idx = NULL;
	assert_int_equal(stat(f->db, &st), 0);
	npages = st.st_size / 4096;
	assert_true(npages > 60);
	memset(fill, 0xa5, sizeof(fill));
	fd = open(f->db, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (off_t p = npages / 3; p < 2 * npages / 3; p++)
		assert_int_equal(pwrite(fd, fill, sizeof(fill), p * 4096),
				 4096);
	close(fd);

	rc = idx_open(&f->idx, f->db, 0755, 0, 0);
	if (rc == -EIO)
		return; /* refused at open: fine */
	assert_int_equal(rc, 0);
	/* Every -EIO logs a line; a thousand of them would bury the rest. */
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(saved_stderr >= 0 && devnull >= 0);
	dup2(devnull, STDERR_FILENO);
	close(devnull);
	for (int i = 0; i < NCORRUPT; i++) {
		snprintf(name, sizeof(name),
			 "block-%05d-0123456789abcdef0123456789abcdef"
			 "0123456789abcdef0123456789abcdef",
			 i);
		rc = idx_lookup(f->idx, dirs[i % 4], name, &a);
		if (rc == -EIO) {
			neio++;
			continue;
		}
		/* Never success with wrong data. */
		assert_int_equal(rc, 0);
		assert_int_equal(a.ino, inos[i]);
		assert_int_equal(a.size, 1 + (uint64_t)i);
		assert_int_equal(a.ext.file_id, 1 + i % 7);
		nok++;
	}
	assert_true(neio > 0);
	for (int d = 0; d < 4; d++) {
		memset(&l, 0, sizeof(l));
		l.limit = 512;
		rc = idx_readdir(f->idx, dirs[d], 0, dirlist_fn, &l);
		assert_true(rc == 0 || rc == -EIO);
	}
	rc = idx_statfs(f->idx, &ni, &nb);
	assert_true(rc == 0 || rc == -EIO);
	for (int i = 0; i < NCORRUPT; i += 97) {
		snprintf(name, sizeof(name), "new-%d", i);
		a = new_attr(S_IFREG | 0644);
		rc = idx_create(f->idx, dirs[i % 4], name, &a, NULL);
		assert_true(rc == 0 || rc == -EIO);
		rc = ren(f, dirs[i % 4], name, dirs[(i + 1) % 4], name, 0, NULL,
			 NULL);
		assert_true(rc == 0 || rc == -EIO || rc == -ENOENT);
	}
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	print_message("corrupt: %d lookups -EIO, %d intact\n", neio, nok);
}

/* ---- read-only databases ---- */

static void test_open_readonly_db(void **state)
{
	struct fx *f = *state;
	struct idx *idx;
	int rc;

	mkfile(f, KV_ROOT_INO, "a");
	idx_close(f->idx);
	f->idx = NULL;
	rc = fx_immutable(f, f->db);
	if (rc) {
		print_message("chattr +i unsupported here: %s\n",
			      strerror(-rc));
		skip();
	}
	rc = idx_open(&idx, f->db, 0755, 0, 0);
	assert_true(rc == -EACCES || rc == -EROFS);
	fx_mutable_again(f);
	assert_int_equal(idx_open(&f->idx, f->db, 0755, 0, 0), 0);
	lookup_ino(f, KV_ROOT_INO, "a");
}

/*
 * The files become unwritable under an open index (as when ext4 remounts
 * itself read-only after an error): writes fail, reads go on, and once the
 * files are writable again so are we.
 */
static void test_readonly_at_runtime(void **state)
{
	struct fx *f = *state;
	char wal[PATH_MAX + 8];
	uint64_t a, d, ino, ni, nb;
	uint32_t nlink;
	struct idx_attr attr;
	struct dirlist l;
	struct kv_extent e = {0}, old;
	int rc;

	d = mkdir_(f, KV_ROOT_INO, "d");
	a = mkfile(f, d, "a");
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	assert_int_equal(access(wal, F_OK), 0);
	rc = fx_immutable(f, f->db);
	if (rc == 0)
		rc = fx_immutable(f, wal);
	if (rc) {
		print_message("chattr +i unsupported here: %s\n",
			      strerror(-rc));
		skip();
	}

	attr = new_attr(S_IFREG | 0644);
	rc = idx_create(f->idx, d, "b", &attr, NULL);
	assert_true(rc == -EACCES || rc == -EROFS);
	rc = ren(f, d, "a", d, "c", 0, NULL, NULL);
	assert_true(rc == -EACCES || rc == -EROFS);
	rc = idx_unlink(f->idx, d, "a", 0, NOW, &ino, &nlink);
	assert_true(rc == -EACCES || rc == -EROFS);
	rc = idx_setxattr(f->idx, a, "user.x", "1", 1, 0);
	assert_true(rc == -EACCES || rc == -EROFS);
	rc = idx_set_extent(f->idx, a, 0, NOW, &e, NULL, 0, &old);
	assert_true(rc == -EACCES || rc == -EROFS);

	assert_int_equal(lookup_ino(f, d, "a"), a);
	assert_absent(f, d, "b");
	assert_absent(f, d, "c");
	assert_int_equal(nlink_of(f, a), 1);
	list_dir(f, d, &l);
	assert_int_equal(l.n, 1);
	assert_int_equal(idx_statfs(f->idx, &ni, &nb), 0);
	assert_int_equal(ni, 3);

	fx_mutable_again(f);
	attr = new_attr(S_IFREG | 0644);
	assert_int_equal(idx_create(f->idx, d, "b", &attr, NULL), 0);
	assert_int_equal(ren(f, d, "a", d, "c", 0, NULL, NULL), 0);
	assert_int_equal(lookup_ino(f, d, "c"), a);
	fx_reopen(f);
	assert_int_equal(lookup_ino(f, d, "c"), a);
	lookup_ino(f, d, "b");
}

/* ---- races ---- */

enum { NRENAMERS = 8, NLOOKERS = 4, NROUNDS = 60 };

struct race {
	struct idx *idx;
	uint64_t dir;
	pthread_barrier_t start;
	atomic_int published; /* a rename onto "dest" has returned */
	atomic_int renamers_left;
	atomic_int bad;
	atomic_long nlookups;
	uint64_t created[NRENAMERS][NROUNDS];
	uint64_t replaced[NRENAMERS][NROUNDS];
};

struct race_arg {
	struct race *r;
	int id;
};

static void *race_renamer(void *p)
{
	struct race_arg *ra = p;
	struct race *r = ra->r;
	char name[32];

	pthread_barrier_wait(&r->start);
	for (int k = 0; k < NROUNDS; k++) {
		struct idx_attr a = new_attr(S_IFREG | 0644);
		struct kv_extent e = {
			.file_id = (uint32_t)ra->id + 1,
			.hdr_len = 4096,
			.off = (uint64_t)k * 8192,
			.len = 4096,
		};
		struct kv_extent old;
		uint32_t crc = (uint32_t)k, repn = 99;
		uint64_t rep = 99;

		snprintf(name, sizeof(name), "tmp.%d.%d", ra->id, k);
		if (idx_create(r->idx, r->dir, name, &a, NULL) ||
		    idx_set_extent(r->idx, a.ino, 4096, NOW, &e, &crc, 1,
				   &old) ||
		    idx_rename(r->idx, r->dir, name, r->dir, "dest", 0, NOW,
			       &rep, &repn)) {
			atomic_fetch_add(&r->bad, 1);
			break;
		}
		if (rep && repn != 0)
			atomic_fetch_add(&r->bad, 1);
		r->created[ra->id][k] = a.ino;
		r->replaced[ra->id][k] = rep;
		atomic_store(&r->published, 1);
	}
	atomic_fetch_sub(&r->renamers_left, 1);
	return NULL;
}

static void *race_looker(void *p)
{
	struct race_arg *ra = p;
	struct race *r = ra->r;
	const char *names[1] = {"dest"};
	uint64_t parents[1] = {r->dir};

	pthread_barrier_wait(&r->start);
	while (atomic_load(&r->renamers_left) > 0) {
		int published = atomic_load(&r->published);
		struct idx_attr a;
		int rc, found = 0;

		if (ra->id % 2) {
			rc = idx_lookup_batch(r->idx, 1, parents, names, &found,
					      &a);
			if (rc == 0 && !found)
				rc = -ENOENT;
		} else {
			rc = idx_lookup(r->idx, r->dir, "dest", &a);
		}
		atomic_fetch_add(&r->nlookups, 1);
		if (rc != 0 && rc != -ENOENT)
			atomic_fetch_add(&r->bad, 1);
		/* Once the name exists it never goes missing. */
		if (published && rc != 0)
			atomic_fetch_add(&r->bad, 1);
		if (rc == 0 && (!S_ISREG(a.mode) || a.nlink != 1 ||
				a.size != 4096 || a.ext.file_id == 0))
			atomic_fetch_add(&r->bad, 1);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_race_renames_over_one_name(void **state)
{
	struct fx *f = *state;
	static struct race r;
	static uint64_t all[NRENAMERS * NROUNDS], gone[NRENAMERS * NROUNDS];
	pthread_t th[NRENAMERS + NLOOKERS];
	struct race_arg args[NRENAMERS + NLOOKERS];
	struct dirlist l;
	uint64_t dest, refs = 0;
	size_t ngone = 0, n = 0;

	memset(&r, 0, sizeof(r));
	r.idx = f->idx;
	r.dir = mkdir_(f, KV_ROOT_INO, "blocks");
	atomic_init(&r.renamers_left, NRENAMERS);
	assert_int_equal(
		pthread_barrier_init(&r.start, NULL, NRENAMERS + NLOOKERS), 0);
	for (int i = 0; i < NRENAMERS + NLOOKERS; i++) {
		args[i] = (struct race_arg){&r,
					    i < NRENAMERS ? i : i - NRENAMERS};
		assert_int_equal(pthread_create(&th[i], NULL,
						i < NRENAMERS ? race_renamer
							      : race_looker,
						&args[i]),
				 0);
	}
	for (int i = 0; i < NRENAMERS + NLOOKERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&r.start);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_true(atomic_load(&r.nlookups) > 0);

	list_dir(f, r.dir, &l);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.names[0], "dest");
	dest = l.inos[0];
	for (int t = 0; t < NRENAMERS; t++) {
		for (int k = 0; k < NROUNDS; k++) {
			all[n++] = r.created[t][k];
			if (r.replaced[t][k])
				gone[ngone++] = r.replaced[t][k];
		}
	}
	/* Every rename but the first replaced someone, each only once. */
	assert_int_equal(ngone, n - 1);
	gone[ngone++] = dest;
	qsort(all, n, sizeof(all[0]), cmp_u64);
	qsort(gone, ngone, sizeof(gone[0]), cmp_u64);
	assert_memory_equal(all, gone, n * sizeof(all[0]));
	for (size_t i = 0; i < n; i++) {
		struct kv_extent e;

		if (all[i] == dest)
			continue;
		assert_int_equal(nlink_of(f, all[i]), 0);
		assert_int_equal(idx_release_inode(f->idx, all[i], &e), 0);
		assert_int_equal(e.len, 4096);
	}
	assert_int_equal(nlink_of(f, dest), 1);
	for (uint32_t id = 1; id <= NRENAMERS; id++) {
		uint64_t c;

		assert_int_equal(idx_datafile_refs(f->idx, id, &c), 0);
		refs += c;
	}
	assert_int_equal(refs, 1);
	statfs_eq(f, 3, 4096);
	assert_int_equal(idx_purge_orphans(f->idx, NULL, NULL), 0);
}

enum { NPAIRS = 4, NPAIR_ROUNDS = 150 };

struct pair {
	struct idx *idx;
	uint64_t dir;
	int id;
	pthread_barrier_t go, done;
	int unlink_rc, rename_rc;
	int nunlinked, nrenamed;
	atomic_int *bad;
};

/* Creates x, races unlink against rename(x, y), checks and cleans up. */
static void *pair_unlinker(void *p)
{
	struct pair *pr = p;
	char x[16], y[16];

	snprintf(x, sizeof(x), "x%d", pr->id);
	snprintf(y, sizeof(y), "y%d", pr->id);
	for (int k = 0; k < NPAIR_ROUNDS; k++) {
		struct idx_attr a = new_attr(S_IFREG | 0644), b;
		uint64_t ino = 0, ino2 = 0;
		uint32_t nlink = 99;
		int bad = 0;

		if (idx_create(pr->idx, pr->dir, x, &a, NULL))
			bad++;
		pthread_barrier_wait(&pr->go);
		pr->unlink_rc =
			idx_unlink(pr->idx, pr->dir, x, 0, NOW, &ino, &nlink);
		pthread_barrier_wait(&pr->done);

		if (idx_lookup(pr->idx, pr->dir, x, &b) != -ENOENT)
			bad++;
		if (pr->unlink_rc == 0 && pr->rename_rc == -ENOENT) {
			pr->nunlinked++;
			if (ino != a.ino || nlink != 0 ||
			    idx_lookup(pr->idx, pr->dir, y, &b) != -ENOENT)
				bad++;
		} else if (pr->rename_rc == 0 && pr->unlink_rc == -ENOENT) {
			pr->nrenamed++;
			if (idx_lookup(pr->idx, pr->dir, y, &b) ||
			    b.ino != a.ino || b.nlink != 1 ||
			    idx_unlink(pr->idx, pr->dir, y, 0, NOW, &ino2,
				       &nlink) ||
			    ino2 != a.ino)
				bad++;
		} else {
			bad++;
		}
		if (idx_release_inode(pr->idx, a.ino, NULL))
			bad++;
		if (bad)
			atomic_fetch_add(pr->bad, bad);
	}
	return NULL;
}

static void *pair_renamer(void *p)
{
	struct pair *pr = p;
	char x[16], y[16];
	uint64_t rep;
	uint32_t repn;

	snprintf(x, sizeof(x), "x%d", pr->id);
	snprintf(y, sizeof(y), "y%d", pr->id);
	for (int k = 0; k < NPAIR_ROUNDS; k++) {
		pthread_barrier_wait(&pr->go);
		pr->rename_rc = idx_rename(pr->idx, pr->dir, x, pr->dir, y, 0,
					   NOW, &rep, &repn);
		if (pr->rename_rc == 0 && rep != 0)
			atomic_fetch_add(pr->bad, 1);
		pthread_barrier_wait(&pr->done);
	}
	return NULL;
}

static void test_race_unlink_vs_rename(void **state)
{
	struct fx *f = *state;
	static struct pair pairs[NPAIRS];
	pthread_t th[2 * NPAIRS];
	atomic_int bad;
	uint64_t d = mkdir_(f, KV_ROOT_INO, "d");
	struct dirlist l;
	int nunlinked = 0, nrenamed = 0;

	atomic_init(&bad, 0);
	for (int i = 0; i < NPAIRS; i++) {
		struct pair *pr = &pairs[i];

		memset(pr, 0, sizeof(*pr));
		pr->idx = f->idx;
		pr->dir = d;
		pr->id = i;
		pr->bad = &bad;
		assert_int_equal(pthread_barrier_init(&pr->go, NULL, 2), 0);
		assert_int_equal(pthread_barrier_init(&pr->done, NULL, 2), 0);
		assert_int_equal(
			pthread_create(&th[2 * i], NULL, pair_unlinker, pr), 0);
		assert_int_equal(
			pthread_create(&th[2 * i + 1], NULL, pair_renamer, pr),
			0);
	}
	for (int i = 0; i < 2 * NPAIRS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NPAIRS; i++) {
		pthread_barrier_destroy(&pairs[i].go);
		pthread_barrier_destroy(&pairs[i].done);
		nunlinked += pairs[i].nunlinked;
		nrenamed += pairs[i].nrenamed;
	}
	assert_int_equal(atomic_load(&bad), 0);
	assert_int_equal(nunlinked + nrenamed, NPAIRS * NPAIR_ROUNDS);
	print_message("unlink won %d, rename won %d\n", nunlinked, nrenamed);
	list_dir(f, d, &l);
	assert_int_equal(l.n, 0);
	assert_int_equal(nlink_of(f, d), 2);
	statfs_eq(f, 2, 0);
	assert_int_equal(idx_purge_orphans(f->idx, NULL, NULL), 0);
}

/* ---- checkpoints ---- */

#define NCK_FILES 12000

struct ck_writer {
	struct idx *idx;
	atomic_int done;
	int rc;
};

static void *ck_writer_run(void *arg)
{
	struct ck_writer *w = arg;
	char name[32];

	for (int i = 0; i < NCK_FILES && w->rc == 0; i++) {
		struct idx_attr a = new_attr(S_IFREG | 0644);

		snprintf(name, sizeof(name), "f%d", i);
		w->rc = idx_create(w->idx, KV_ROOT_INO, name, &a, NULL);
	}
	atomic_store(&w->done, 1);
	return NULL;
}

/*
 * idx_sync() (fsync in durable mode) while the checkpointer thread copies
 * the log back on its own connection: SQLite runs one checkpoint at a time
 * and refuses a second at once, so without coordination fsync would fail
 * with EBUSY now and then. The log must stay bounded (below the RESTART
 * threshold and what comes meanwhile).
 */
static void test_sync_during_checkpoints(void **state)
{
	struct fx *f = *state;
	struct ck_writer w = {.idx = f->idx};
	char wal[PATH_MAX + 8];
	struct stat st;
	pthread_t th;
	int nsync = 0, nfail = 0, rc;

	assert_int_equal(idx_start_checkpointer(f->idx), 0);
	assert_int_equal(pthread_create(&th, NULL, ck_writer_run, &w), 0);
	while (!atomic_load(&w.done)) {
		rc = idx_sync(f->idx);
		nsync++;
		if (rc != 0) {
			print_message("idx_sync: %s\n", strerror(-rc));
			nfail++;
		}
	}
	pthread_join(th, NULL);
	assert_int_equal(w.rc, 0);
	assert_int_equal(nfail, 0);
	assert_true(nsync > 0);
	assert_int_equal(idx_sync(f->idx), 0);
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	assert_int_equal(stat(wal, &st), 0);
	print_message("%d syncs, log %lld bytes after %d commits\n", nsync,
		      (long long)st.st_size, NCK_FILES);
	/*
	 * Bounded as designed: passive checkpoints, and a RESTART once the
	 * log passes 65536 pages (256 MiB; index.c, IDX_CK_MAX), plus what
	 * the writer appends meanwhile. Passive ones alone left 91 MB here
	 * once, under this test's 300,000 syncs: within the design.
	 */
	assert_true(st.st_size <= (256ll + 64) << 20);
	assert_true(lookup_ino(f, KV_ROOT_INO, "f11999") > KV_ROOT_INO);
}

/*
 * Reads share a read transaction that stays open between them (index.c,
 * idx_lock_read()) while the checkpointer runs: a write after one still
 * commits at once, and once reads stop the transaction ends within two of
 * the checkpointer's ticks (1 s each), so a change made behind the index's
 * back, which its open snapshot cannot see, is seen again.
 */
static void test_read_transaction_ends(void **state)
{
	struct fx *f = *state;
	uint64_t a, ino = 0;
	int i;

	assert_int_equal(idx_start_checkpointer(f->idx), 0);
	a = mkfile(f, KV_ROOT_INO, "a");
	assert_int_equal(lookup_ino(f, KV_ROOT_INO, "a"), a);
	/* A write right after a read is committed, not left in its snapshot. */
	mkfile(f, KV_ROOT_INO, "b");
	assert_sql_text(f->db, "SELECT count(*) FROM dentries WHERE name = 'b'",
			"1");
	assert_true(lookup_ino(f, KV_ROOT_INO, "b") > KV_ROOT_INO);
	fx_link(f, a, KV_ROOT_INO, "x");
	for (i = 0; i < 500; i++) {
		struct idx_attr at;

		if (idx_lookup(f->idx, KV_ROOT_INO, "x", &at) == 0) {
			ino = at.ino;
			break;
		}
		usleep(10000);
	}
	print_message("the name added behind the index's back seen after %d "
		      "ms\n",
		      i * 10);
	assert_int_equal(ino, a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_new_db_has_root),
		T(test_reopen_keeps_namespace),
		T(test_open_empty_file),
		T(test_open_garbage),
		T(test_open_other_application),
		T(test_open_newer_version),
		T(test_new_db_is_version_5),
		T(test_upgrade_from_v2),
		T(test_upgrade_from_v4),
		T(test_upgrade_from_v3),
		T(test_upgrade_from_v1),
		T(test_upgrade_from_v1_with_horizons),
		T(test_open_version_6),
		T(test_v2_without_horizons),
		T(test_open_missing_dir),
		T(test_corrupt_db_gives_eio),
		T(test_open_readonly_db),
		T(test_readonly_at_runtime),
		T(test_race_renames_over_one_name),
		T(test_race_unlink_vs_rename),
		T(test_sync_during_checkpoints),
		T(test_read_transaction_ends),
	};

	/* Expected refusals log errors; info lines would only be noise. */
	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests_name("index", tests, NULL, NULL);
}
