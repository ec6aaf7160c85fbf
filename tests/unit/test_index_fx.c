/* SPDX-License-Identifier: MIT */
/*
 * The fixture and helpers that the index unit tests (test_index.c,
 * test_index_ns.c, test_index_records.c) share; test_index_fx.h declares
 * them. A failed check fails the calling test (cmocka asserts).
 */
#include "test_index_fx.h"

#include <sys/ioctl.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <unistd.h>

#include <sqlite3.h>

/* ---- fixture ---- */

int setup(void **state)
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
int fx_immutable(struct fx *f, const char *path)
{
	int rc;

	assert_true(f->nimmutable < MAX_IMMUTABLE);
	rc = set_immutable(path, 1);
	if (rc == 0)
		snprintf(f->immutable[f->nimmutable++], PATH_MAX, "%s", path);
	return rc;
}

void fx_mutable_again(struct fx *f)
{
	for (int i = 0; i < f->nimmutable; i++)
		set_immutable(f->immutable[i], 0);
	f->nimmutable = 0;
}

int teardown(void **state)
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
void fx_path(struct fx *f, char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%.64s", f->dir, name);
}

void fx_reopen(struct fx *f)
{
	idx_close(f->idx);
	f->idx = NULL;
	assert_int_equal(idx_open(&f->idx, f->db, 0700, 5, 5), 0);
}

/* Runs SQL on the database at path through a separate connection. */
void sql_exec(const char *path, const char *sql)
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
char *sql_text(const char *path, const char *sql)
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

void assert_sql_text(const char *path, const char *sql, const char *want)
{
	char *s = sql_text(path, sql);

	assert_string_equal(s, want);
	free(s);
}

/* Adds a second name for a file, as a hard link would. */
void fx_link(struct fx *f, uint64_t ino, uint64_t parent, const char *name)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "INSERT INTO dentries (parent, name, ino) "
		 "VALUES (%" PRIu64 ", '%s', %" PRIu64 ");"
		 "UPDATE inodes SET nlink = nlink + 1 WHERE ino = %" PRIu64,
		 parent, name, ino, ino);
	sql_exec(f->db, sql);
}

void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* The whole file; caller frees. */
char *read_file(const char *path, size_t *len)
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

struct idx_attr new_attr(uint32_t mode)
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

uint64_t mk(struct fx *f, uint64_t parent, const char *name, uint32_t mode)
{
	struct idx_attr a = new_attr(mode);

	assert_int_equal(idx_create(f->idx, parent, name, &a,
				    S_ISLNK(mode) ? "target" : NULL),
			 0);
	assert_true(a.ino > KV_ROOT_INO);
	return a.ino;
}

uint64_t mkfile(struct fx *f, uint64_t parent, const char *name)
{
	return mk(f, parent, name, S_IFREG | 0644);
}

uint64_t mkdir_(struct fx *f, uint64_t parent, const char *name)
{
	return mk(f, parent, name, S_IFDIR | 0755);
}

struct idx_attr getattr_ok(struct fx *f, uint64_t ino)
{
	struct idx_attr a;

	assert_int_equal(idx_getattr(f->idx, ino, &a), 0);
	assert_int_equal(a.ino, ino);
	return a;
}

uint32_t nlink_of(struct fx *f, uint64_t ino)
{
	return getattr_ok(f, ino).nlink;
}

uint64_t lookup_ino(struct fx *f, uint64_t parent, const char *name)
{
	struct idx_attr a;

	assert_int_equal(idx_lookup(f->idx, parent, name, &a), 0);
	return a.ino;
}

void assert_absent(struct fx *f, uint64_t parent, const char *name)
{
	struct idx_attr a;

	assert_int_equal(idx_lookup(f->idx, parent, name, &a), -ENOENT);
}

int ren(struct fx *f, uint64_t parent, const char *name, uint64_t newparent,
	const char *newname, unsigned int flags, uint64_t *replaced,
	uint32_t *replaced_nlink)
{
	uint64_t r;
	uint32_t rn;

	return idx_rename(f->idx, parent, name, newparent, newname, flags, NOW,
			  replaced ? replaced : &r,
			  replaced_nlink ? replaced_nlink : &rn);
}

int unl(struct fx *f, uint64_t parent, const char *name, int rmdir)
{
	uint64_t ino;
	uint32_t nlink;

	return idx_unlink(f->idx, parent, name, rmdir, NOW, &ino, &nlink);
}

void ext_eq(const struct kv_extent *a, const struct kv_extent *b)
{
	assert_int_equal(a->file_id, b->file_id);
	assert_int_equal(a->off, b->off);
	assert_int_equal(a->hdr_len, b->hdr_len);
	assert_int_equal(a->len, b->len);
}

void statfs_eq(struct fx *f, uint64_t ninodes, uint64_t nbytes)
{
	uint64_t ni, nb;

	assert_int_equal(idx_statfs(f->idx, &ni, &nb), 0);
	assert_int_equal(ni, ninodes);
	assert_int_equal(nb, nbytes);
}

/* Gives a regular file a one-chunk record in data file file_id. */
void give_extent(struct fx *f, uint64_t ino, uint32_t file_id, uint64_t off,
		 uint64_t len)
{
	struct kv_extent e = {file_id, 4096, off, len}, old;
	uint32_t crcs[4] = {0x11, 0x22, 0x33, 0x44};

	assert_true(kv_nchunks(len) <= 4);
	assert_int_equal(idx_set_extent(f->idx, ino, len, NOW, &e, crcs,
					kv_nchunks(len), &old),
			 0);
}

int dirlist_fn(void *arg, const char *name, const struct idx_attr *a,
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

void list_dir(struct fx *f, uint64_t dir, struct dirlist *l)
{
	memset(l, 0, sizeof(*l));
	l->limit = 512;
	assert_int_equal(idx_readdir(f->idx, dir, 0, dirlist_fn, l), 0);
}
