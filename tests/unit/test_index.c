/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of index/ (index.h): every function's success and error paths
 * with the errno asserted, rename's POSIX cases and nlink bookkeeping,
 * concurrent renames, unlinks and lookups, and how a database that is not
 * ours, newer, corrupt or read-only is refused.
 *
 * Each test gets its own mkdtemp(3) directory with the database file in it
 * (not :memory:, whose locking and journalling differ). The fixture helpers
 * talk to SQLite directly, and only to make databases the index never makes
 * itself: other applications' files, hard links, newer format versions.
 */
#include "index.h"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "log.h"

#define T0 ((int64_t)1700000000 * 1000000000)
#define NOW (T0 + 5000)
#define UID 1000
#define GID 100
#define MAX_IMMUTABLE 4

struct fx {
	char dir[PATH_MAX / 2];
	char db[PATH_MAX];
	struct idx *idx;
	/* Files made immutable by a test; teardown makes them mutable again. */
	char immutable[MAX_IMMUTABLE][PATH_MAX];
	int nimmutable;
};

/* ---- fixture ---- */

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "%s/kvfs-test-index-XXXXXX",
		 tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/index.db", f->dir);
	assert_int_equal(idx_open(&f->idx, f->db, 0755, 0, 0), 0);
	*state = f;
	return 0;
}

static int set_immutable(const char *path, int on)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int flags, rc = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0) {
		rc = -errno;
	} else {
		if (on)
			flags |= FS_IMMUTABLE_FL;
		else
			flags &= ~FS_IMMUTABLE_FL;
		if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
			rc = -errno;
	}
	close(fd);
	return rc;
}

/* Makes path immutable and remembers it for teardown. */
static int fx_immutable(struct fx *f, const char *path)
{
	int rc;

	assert_true(f->nimmutable < MAX_IMMUTABLE);
	rc = set_immutable(path, 1);
	if (rc == 0)
		snprintf(f->immutable[f->nimmutable++], PATH_MAX, "%s", path);
	return rc;
}

static void fx_mutable_again(struct fx *f)
{
	for (int i = 0; i < f->nimmutable; i++)
		set_immutable(f->immutable[i], 0);
	f->nimmutable = 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	struct dirent *de;
	char path[PATH_MAX + 256];
	DIR *d;

	fx_mutable_again(f);
	idx_close(f->idx);
	d = opendir(f->dir);
	if (d) {
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			snprintf(path, sizeof(path), "%s/%s", f->dir,
				 de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* A path next to the fixture's database. */
static void fx_path(struct fx *f, char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%.64s", f->dir, name);
}

static void fx_reopen(struct fx *f)
{
	idx_close(f->idx);
	f->idx = NULL;
	assert_int_equal(idx_open(&f->idx, f->db, 0700, 5, 5), 0);
}

/* Runs SQL on the database at path through a separate connection. */
static void sql_exec(const char *path, const char *sql)
{
	sqlite3 *db;

	assert_int_equal(
		sqlite3_open_v2(path, &db,
				SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
				NULL),
		SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* One text value of a query through a separate connection; caller frees. */
static char *sql_text(const char *path, const char *sql)
{
	sqlite3_stmt *st;
	sqlite3 *db;
	char *s = NULL;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		s = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	assert_non_null(s);
	return s;
}

static void assert_sql_text(const char *path, const char *sql, const char *want)
{
	char *s = sql_text(path, sql);

	assert_string_equal(s, want);
	free(s);
}

/* Adds a second name for a file, as a hard link would. */
static void fx_link(struct fx *f, uint64_t ino, uint64_t parent,
		    const char *name)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "INSERT INTO dentries (parent, name, ino) "
		 "VALUES (%" PRIu64 ", '%s', %" PRIu64 ");"
		 "UPDATE inodes SET nlink = nlink + 1 WHERE ino = %" PRIu64,
		 parent, name, ino, ino);
	sql_exec(f->db, sql);
}

static void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* The whole file; caller frees. */
static char *read_file(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* ---- helpers over the API ---- */

static struct idx_attr new_attr(uint32_t mode)
{
	return (struct idx_attr){
		.mode = mode,
		.uid = UID,
		.gid = GID,
		.atime_ns = T0,
		.mtime_ns = T0 + 1,
		.ctime_ns = T0 + 2,
	};
}

static uint64_t mk(struct fx *f, uint64_t parent, const char *name,
		   uint32_t mode)
{
	struct idx_attr a = new_attr(mode);

	assert_int_equal(idx_create(f->idx, parent, name, &a,
				    S_ISLNK(mode) ? "target" : NULL),
			 0);
	assert_true(a.ino > KV_ROOT_INO);
	return a.ino;
}

static uint64_t mkfile(struct fx *f, uint64_t parent, const char *name)
{
	return mk(f, parent, name, S_IFREG | 0644);
}

static uint64_t mkdir_(struct fx *f, uint64_t parent, const char *name)
{
	return mk(f, parent, name, S_IFDIR | 0755);
}

static struct idx_attr getattr_ok(struct fx *f, uint64_t ino)
{
	struct idx_attr a;

	assert_int_equal(idx_getattr(f->idx, ino, &a), 0);
	assert_int_equal(a.ino, ino);
	return a;
}

static uint32_t nlink_of(struct fx *f, uint64_t ino)
{
	return getattr_ok(f, ino).nlink;
}

static uint64_t lookup_ino(struct fx *f, uint64_t parent, const char *name)
{
	struct idx_attr a;

	assert_int_equal(idx_lookup(f->idx, parent, name, &a), 0);
	return a.ino;
}

static void assert_absent(struct fx *f, uint64_t parent, const char *name)
{
	struct idx_attr a;

	assert_int_equal(idx_lookup(f->idx, parent, name, &a), -ENOENT);
}

static int ren(struct fx *f, uint64_t parent, const char *name,
	       uint64_t newparent, const char *newname, unsigned int flags,
	       uint64_t *replaced, uint32_t *replaced_nlink)
{
	uint64_t r;
	uint32_t rn;

	return idx_rename(f->idx, parent, name, newparent, newname, flags, NOW,
			  replaced ? replaced : &r,
			  replaced_nlink ? replaced_nlink : &rn);
}

static int unl(struct fx *f, uint64_t parent, const char *name, int rmdir)
{
	uint64_t ino;
	uint32_t nlink;

	return idx_unlink(f->idx, parent, name, rmdir, NOW, &ino, &nlink);
}

static void ext_eq(const struct kv_extent *a, const struct kv_extent *b)
{
	assert_int_equal(a->file_id, b->file_id);
	assert_int_equal(a->off, b->off);
	assert_int_equal(a->hdr_len, b->hdr_len);
	assert_int_equal(a->len, b->len);
}

static void statfs_eq(struct fx *f, uint64_t ninodes, uint64_t nbytes)
{
	uint64_t ni, nb;

	assert_int_equal(idx_statfs(f->idx, &ni, &nb), 0);
	assert_int_equal(ni, ninodes);
	assert_int_equal(nb, nbytes);
}

/* Gives a regular file a one-chunk record in data file file_id. */
static void give_extent(struct fx *f, uint64_t ino, uint32_t file_id,
			uint64_t off, uint64_t len)
{
	struct kv_extent e = {file_id, 4096, off, len}, old;
	uint32_t crcs[4] = {0x11, 0x22, 0x33, 0x44};

	assert_true(kv_nchunks(len) <= 4);
	assert_int_equal(idx_set_extent(f->idx, ino, len, NOW, &e, crcs,
					kv_nchunks(len), &old),
			 0);
}

/* Collects readdir entries; stops (without taking one) at limit. */
struct dirlist {
	int n, limit;
	char names[512][64];
	uint64_t inos[512];
	uint64_t cookies[512];
};

static int dirlist_fn(void *arg, const char *name, const struct idx_attr *a,
		      uint64_t cookie)
{
	struct dirlist *l = arg;

	if (l->n == l->limit || l->n == 512)
		return 1;
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
	l->inos[l->n] = a->ino;
	l->cookies[l->n] = cookie;
	l->n++;
	return 0;
}

static void list_dir(struct fx *f, uint64_t dir, struct dirlist *l)
{
	memset(l, 0, sizeof(*l));
	l->limit = 512;
	assert_int_equal(idx_readdir(f->idx, dir, 0, dirlist_fn, l), 0);
}

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
	sql_exec(f->db, "PRAGMA user_version = 1");
	assert_int_equal(idx_open(&f->idx, f->db, 0755, 0, 0), 0);
	lookup_ino(f, KV_ROOT_INO, "a");
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
	a.size = 5000;
	a.atime_ns = T0 + 10;
	a.mtime_ns = T0 + 11;
	a.ctime_ns = T0 + 12;
	a.ext.file_id = 77; /* left alone */
	assert_int_equal(idx_setattr(f->idx, &a), 0);
	got = getattr_ok(f, x);
	assert_int_equal(got.mode, S_IFREG | 0600);
	assert_int_equal(got.uid, 42);
	assert_int_equal(got.gid, 43);
	assert_int_equal(got.size, 5000);
	assert_int_equal(got.atime_ns, T0 + 10);
	assert_int_equal(got.mtime_ns, T0 + 11);
	assert_int_equal(got.ctime_ns, T0 + 12);
	assert_int_equal(got.ext.file_id, 9);
	assert_int_equal(got.ext.len, 100);
	statfs_eq(f, 2, 5000);
	a.ino = 999;
	assert_int_equal(idx_setattr(f->idx, &a), -ENOENT);
}

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
	a = getattr_ok(f, x);
	a.size = 10;
	assert_int_equal(idx_setattr(f->idx, &a), 0);
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
 * with EBUSY now and then. Every commit is a few log frames, so this many
 * commits pass the RESTART threshold; the log must stay bounded.
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
	assert_true(st.st_size <= 64 << 20);
	assert_true(lookup_ino(f, KV_ROOT_INO, "f11999") > KV_ROOT_INO);
}

/* ---- idx_create_ino, idx_count, idx_file_records, idx_move_records ---- */

static void test_create_ino(void **state)
{
	struct fx *f = *state;
	struct idx_attr a = new_attr(S_IFREG | 0644),
			d = new_attr(S_IFDIR | 0755);
	uint64_t later;

	a.size = 77; /* ignored: a new file has no record */
	assert_int_equal(idx_create_ino(f->idx, KV_ROOT_INO, "dir", &d, 40), 0);
	assert_int_equal(d.ino, 40);
	assert_int_equal(d.nlink, 2);
	assert_int_equal(idx_create_ino(f->idx, 40, "f", &a, 1000), 0);
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
	assert_int_equal(idx_create_ino(f->idx, 40, "g", &a, 500), 0);
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

	assert_int_equal(idx_create_ino(f->idx, dir, "x", &a, 100), 0);
	file = a.ino;
	/* An inode number in use, even under another name. */
	a = new_attr(S_IFREG | 0644);
	assert_int_equal(idx_create_ino(f->idx, dir, "y", &a, 100), -EEXIST);
	assert_int_equal(idx_create_ino(f->idx, dir, "y", &a, dir), -EEXIST);
	/* A name in use. */
	assert_int_equal(idx_create_ino(f->idx, dir, "x", &a, 101), -EEXIST);
	/* Not a file or a directory, or not a number it may give. */
	a = new_attr(S_IFLNK | 0777);
	assert_int_equal(idx_create_ino(f->idx, dir, "l", &a, 102), -EINVAL);
	a = new_attr(S_IFIFO | 0644);
	assert_int_equal(idx_create_ino(f->idx, dir, "p", &a, 103), -EINVAL);
	a = new_attr(S_IFREG | 0644);
	assert_int_equal(idx_create_ino(f->idx, dir, "r", &a, KV_ROOT_INO),
			 -EINVAL);
	assert_int_equal(idx_create_ino(f->idx, dir, "z", &a, 0), -EINVAL);
	assert_int_equal(
		idx_create_ino(f->idx, dir, "big", &a, (uint64_t)INT64_MAX + 1),
		-EINVAL);
	/* Parents that cannot hold it. */
	assert_int_equal(idx_create_ino(f->idx, 9999, "n", &a, 104), -ENOENT);
	assert_int_equal(idx_create_ino(f->idx, file, "n", &a, 105), -ENOTDIR);
	assert_int_equal(idx_create_ino(f->idx, dir, "", &a, 106), -EINVAL);
	assert_absent(f, dir, "y");
	assert_absent(f, dir, "l");
	assert_absent(f, dir, "n");
	assert_int_equal(idx_getattr(f->idx, 101, &a), -ENOENT);
	assert_int_equal(idx_getattr(f->idx, 102, &a), -ENOENT);
	statfs_eq(f, 3, 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_new_db_has_root),
		T(test_reopen_keeps_namespace),
		T(test_open_empty_file),
		T(test_open_garbage),
		T(test_open_other_application),
		T(test_open_newer_version),
		T(test_open_missing_dir),
		T(test_corrupt_db_gives_eio),
		T(test_open_readonly_db),
		T(test_readonly_at_runtime),
		T(test_create),
		T(test_create_errors),
		T(test_lookup_getattr),
		T(test_readlink),
		T(test_setattr),
		T(test_extent_and_crcs),
		T(test_unlink),
		T(test_unlink_hard_links),
		T(test_rename_simple),
		T(test_rename_file_over_file),
		T(test_rename_dirs_nlink),
		T(test_rename_type_errors),
		T(test_rename_into_own_subtree),
		T(test_rename_same_inode),
		T(test_rename_noreplace),
		T(test_rename_exchange),
		T(test_rename_errors),
		T(test_release_inode),
		T(test_purge_orphans),
		T(test_datafile_refs),
		T(test_statfs),
		T(test_readdir),
		T(test_readdir_cookies_stable),
		T(test_lookup_batch),
		T(test_xattrs),
		T(test_race_renames_over_one_name),
		T(test_race_unlink_vs_rename),
		T(test_sync_during_checkpoints),
		T(test_horizons),
		T(test_create_ino),
		T(test_create_ino_errors),
		T(test_count),
		T(test_count_corrupt),
		T(test_file_records_and_move),
#undef T
	};

	/* Expected refusals log errors; info lines would only be noise. */
	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests_name("index", tests, NULL, NULL);
}
