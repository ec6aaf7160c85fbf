/* SPDX-License-Identifier: MIT */
/*
 * A temporary data directory for the unit tests of fs/kvdb (test_check,
 * test_compact): a real index and a real block store in a mkdtemp
 * directory, files written the way kvfs writes them (inode in the index,
 * record appended, extent committed), read back through store_read()
 * (which checks every chunk's CRC). The store's I/O goes through
 * tests/fakes/fake_io.h so a test can inject failures. Header-only with
 * static functions: include it from one test file, after cmocka.h.
 */
#ifndef KVFS_KVDB_FIXTURE_H
#define KVFS_KVDB_FIXTURE_H

#include <sys/stat.h>

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_io.h"
#include "index.h"
#include "kvdb.h"
#include "kvtypes.h"
#include "record.h"
#include "store.h"

struct kf {
	char dir[PATH_MAX];
	struct fake_io fio;
	struct store_io_ops fops;
	struct store *st;
	struct idx *idx;
	char errors[4096]; /* what the engines reported, one per line */
};

/* A file of the test: its name at the root (or in dir), size and bytes. */
struct kf_file {
	const char *name;
	uint64_t dir; /* parent inode, 0: the root */
	uint64_t len;
	unsigned seed;
	uint64_t ino; /* 0 until written */
	struct kv_extent ext;
};

static inline int kf_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");
	struct kf *k = calloc(1, sizeof(*k));

	if (!k)
		return -1;
	if (snprintf(k->dir, sizeof(k->dir), "%s/kvfs-test-kvdb-XXXXXX",
		     tmp && *tmp ? tmp : "/tmp") >= (int)sizeof(k->dir) ||
	    !mkdtemp(k->dir)) {
		free(k);
		return -1;
	}
	fake_io_init(&k->fio);
	k->fops = fake_io_ops(&k->fio);
	*state = k;
	return 0;
}

static inline int kf_rm(const char *path, const struct stat *sb, int flag,
			struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

static inline void kf_close(struct kf *k)
{
	store_close(k->st);
	idx_close(k->idx);
	k->st = NULL;
	k->idx = NULL;
}

static inline int kf_teardown(void **state)
{
	struct kf *k = *state;

	kf_close(k);
	nftw(k->dir, kf_rm, 16, FTW_DEPTH | FTW_PHYS);
	fake_io_destroy(&k->fio);
	free(k);
	return 0;
}

/* Opens the store (data files rotate past file_max) and the index. */
static inline void kf_open(struct kf *k, uint64_t file_max)
{
	struct store_config cfg = {.nlanes = 1, .file_max = file_max};
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/index.db", k->dir);
	assert_int_equal(store_open(&k->st, k->dir, &cfg, &k->fops), 0);
	assert_int_equal(idx_open(&k->idx, path, 0755, getuid(), getgid()), 0);
}

static inline void kf_fill(unsigned char *buf, uint64_t len, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (uint64_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (unsigned char)x;
	}
}

/* The path the record of f carries. */
static inline void kf_path(const struct kf_file *f, char *buf, size_t len)
{
	if (f->dir)
		snprintf(buf, len, "/sub/%s", f->name);
	else
		snprintf(buf, len, "/%s", f->name);
}

/*
 * Writes f (creating its inode the first time) as kvfs does: append the
 * record, then point the index at it. The record it replaces is left in
 * its data file, unreferenced (as a crash between commit and free would).
 */
static inline void kf_write(struct kf *k, struct kf_file *f)
{
	uint64_t padded = kv_align_up(f->len);
	uint32_t *crcs = calloc(kv_nchunks(f->len) + 1, sizeof(*crcs));
	struct kv_extent old;
	unsigned char *buf = NULL;
	char path[PATH_MAX];

	assert_non_null(crcs);
	assert_int_equal(posix_memalign((void **)&buf, KV_ALIGN,
					padded ? padded : KV_ALIGN),
			 0);
	memset(buf, 0, padded);
	kf_fill(buf, f->len, f->seed);
	kf_path(f, path, sizeof(path));
	if (!f->ino) {
		struct idx_attr a = {.mode = S_IFREG | 0644,
				     .uid = getuid(),
				     .gid = getgid()};

		assert_int_equal(idx_create(k->idx,
					    f->dir ? f->dir : KV_ROOT_INO,
					    f->name, &a, NULL),
				 0);
		f->ino = a.ino;
	}
	assert_int_equal(
		store_append(k->st, f->ino, path, buf, f->len, crcs, &f->ext),
		0);
	assert_int_equal(idx_set_extent(k->idx, f->ino, f->len, 1, &f->ext,
					crcs, kv_nchunks(f->len), &old),
			 0);
	store_append_done(k->st, f->ext.file_id);
	free(buf);
	free(crcs);
}

/* Appends the metadata record kvfs would write for ino's names now. */
static inline void kf_meta(struct kf *k, uint64_t ino)
{
	char *buf = malloc(STORE_META_MAX);
	struct idx_attr a;
	size_t used;
	int type;

	assert_non_null(buf);
	assert_int_equal(idx_getattr(k->idx, ino, &a), 0);
	type = idx_meta_field(k->idx, &a, buf, STORE_META_MAX, &used);
	assert_true(type > 0);
	assert_int_equal(
		store_append_meta(k->st, (uint32_t)type, ino, buf, used), 0);
	free(buf);
}

/* Makes directory "sub" at the root; returns its inode. */
static inline uint64_t kf_mkdir(struct kf *k)
{
	struct idx_attr a = {
		.mode = S_IFDIR | 0755, .uid = getuid(), .gid = getgid()};

	assert_int_equal(idx_create(k->idx, KV_ROOT_INO, "sub", &a, NULL), 0);
	return a.ino;
}

/* Unlinks f without freeing its record (it stays in its data file). */
static inline void kf_unlink(struct kf *k, struct kf_file *f)
{
	struct kv_extent ext;
	uint64_t ino;
	uint32_t nlink;

	assert_int_equal(idx_unlink(k->idx, f->dir ? f->dir : KV_ROOT_INO,
				    f->name, 0, 1, &ino, &nlink),
			 0);
	assert_int_equal(nlink, 0);
	assert_int_equal(idx_release_inode(k->idx, ino, &ext), 0);
}

/* f's index row now (its name must exist). */
static inline struct idx_attr kf_attr(struct kf *k, const struct kf_file *f)
{
	struct idx_attr a;

	assert_int_equal(
		idx_lookup(k->idx, f->dir ? f->dir : KV_ROOT_INO, f->name, &a),
		0);
	return a;
}

/* Reads f back through its index row: every byte and every chunk CRC. */
static inline void kf_verify(struct kf *k, const struct kf_file *f)
{
	struct idx_attr a = kf_attr(k, f);
	unsigned char *want = malloc(f->len + 1);
	uint32_t *crcs = NULL, ncrcs = 0;
	const void *data;
	size_t n;

	assert_non_null(want);
	assert_int_equal(a.size, f->len);
	assert_int_equal(idx_get_crcs(k->idx, a.ino, &crcs, &ncrcs), 0);
	assert_int_equal(ncrcs, kv_nchunks(f->len));
	assert_int_equal(
		store_read(k->st, &a.ext, crcs, 0, (size_t)f->len, &data, &n),
		0);
	assert_int_equal(n, f->len);
	kf_fill(want, f->len, f->seed);
	assert_memory_equal(data, want, f->len);
	free(want);
	free(crcs);
}

/* kvdb error hook: keeps the messages for the test to look at. */
static inline void kf_error(void *arg, const char *msg)
{
	struct kf *k = arg;
	size_t used = strlen(k->errors);

	snprintf(k->errors + used, sizeof(k->errors) - used, "%s\n", msg);
}

/* "DIR/data/NNNNNN.kvd" of data file id. */
static inline void kf_datafile(const struct kf *k, uint32_t id, char *buf,
			       size_t len)
{
	snprintf(buf, len, "%s/data/%06u.kvd", k->dir, id);
}

static inline int kf_exists(const struct kf *k, uint32_t id)
{
	char path[PATH_MAX + 32];

	kf_datafile(k, id, path, sizeof(path));
	return access(path, F_OK) == 0;
}

static inline uint64_t kf_size(const struct kf *k, uint32_t id)
{
	char path[PATH_MAX + 32];
	struct stat st;

	kf_datafile(k, id, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

#endif
