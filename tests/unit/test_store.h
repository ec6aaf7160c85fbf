/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the block store's unit tests (test_store.c,
 * test_store_faults.c, and the codec tests in test_record.c): a per-test
 * mkdtemp data directory with fault-injecting ops (tests/fakes/fake_io.h),
 * tracked allocations, reference CRC32C and little-endian helpers, records
 * of pattern bytes, and direct access to the data files. Header-only with
 * static inline functions: include it from each test program once. The
 * directory is under $TMPDIR or /tmp, which must support hole punching.
 * Main thread only, except where a helper says otherwise.
 */
#ifndef KVFS_TEST_STORE_H
#define KVFS_TEST_STORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fake_io.h"
#include "kvtypes.h"
#include "log.h"
#include "store.h"
#include "store_io.h"

#if defined(__SANITIZE_ADDRESS__)
#define TS_TEST_HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_TEST_HAVE_LSAN 1
#endif
#endif
#ifdef TS_TEST_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define TS_MIB (1024u * 1024u)
/* Fixed part of the header: up to and excluding the chunk CRCs. */
#define TS_HDR_FIXED 56u

static const uint64_t ts_sizes[] __attribute__((unused)) = {
	0, 1, 4095, 4096, 5000, KV_CHUNK_SIZE, KV_CHUNK_SIZE + 1, 5ull * TS_MIB,
};
#define TS_NSIZES (sizeof(ts_sizes) / sizeof(ts_sizes[0]))

struct ts_ctx {
	char dir[256]; /* short enough for every path built from it */
	struct fake_io fio;
	struct store_io_ops fops;
	struct store *st;
};

/* One appended record and what the test expects to read back. */
struct ts_rec {
	uint64_t len;
	unsigned char *buf; /* kv_align_up(len) bytes, zero tail */
	uint32_t *crcs;
	struct kv_extent ext;
};

/* ---- helpers ---- */

/*
 * Test allocations are tracked so that teardown frees what a failed test
 * (cmocka longjmps out of it) left behind: LeakSanitizer then reports only
 * the store's own leaks. Main thread only.
 */
static void *ts_allocs[256];
static size_t ts_nallocs;

static inline void *ts_track(void *p)
{
	assert_non_null(p);
	assert_true(ts_nallocs < sizeof(ts_allocs) / sizeof(ts_allocs[0]));
	ts_allocs[ts_nallocs++] = p;
	return p;
}

static inline void *ts_alloc(size_t len)
{
	return ts_track(malloc(len));
}

static inline void *ts_calloc(size_t n, size_t len)
{
	return ts_track(calloc(n, len));
}

static inline void ts_free(void *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < ts_nallocs; i++) {
		if (ts_allocs[i] == p) {
			ts_allocs[i] = ts_allocs[--ts_nallocs];
			break;
		}
	}
	free(p);
}

static inline void ts_free_all(void)
{
	while (ts_nallocs > 0)
		free(ts_allocs[--ts_nallocs]);
}

/* Bit-at-a-time CRC32C, independent of crc32c.c's table and SSE4.2 paths. */
static inline uint32_t ts_ref_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

static inline uint32_t ts_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t ts_le64(const unsigned char *p)
{
	return (uint64_t)ts_le32(p) | (uint64_t)ts_le32(p + 4) << 32;
}

static inline void ts_put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void ts_put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The header CRC as the format defines it: whole header, CRC field zero. */
static inline uint32_t ts_hdr_crc(const unsigned char *h, uint32_t hdr_len)
{
	static const unsigned char zero[4];
	uint32_t crc;

	crc = ts_ref_crc32c(0, h, 20);
	crc = ts_ref_crc32c(crc, zero, 4);
	return ts_ref_crc32c(crc, h + 24, hdr_len - 24);
}

/* Rewrites the header CRC after a test edited a field on purpose. */
static inline void ts_hdr_reseal(unsigned char *h, uint32_t hdr_len)
{
	ts_put_le32(h + 20, ts_hdr_crc(h, hdr_len));
}

static inline unsigned char ts_byte(uint32_t seed, uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + seed * 0xc2b2ae3d27d4eb4full;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return (unsigned char)(x >> 56);
}

/* An aligned payload of len pattern bytes, zero-padded to KV_ALIGN. */
static inline unsigned char *ts_payload(uint64_t len, uint32_t seed)
{
	size_t cap = len ? kv_align_up(len) : KV_ALIGN;
	void *p = NULL;
	unsigned char *b;

	assert_int_equal(posix_memalign(&p, KV_ALIGN, cap), 0);
	b = ts_track(p);
	for (uint64_t i = 0; i < len; i++)
		b[i] = ts_byte(seed, i);
	memset(b + len, 0, cap - len);
	return b;
}

/* Fails with the first differing offset instead of a byte dump. */
static inline void ts_assert_bytes(const void *got, const void *want, size_t n,
				   const char *what)
{
	const unsigned char *g = got, *w = want;

	if (memcmp(g, w, n) == 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (g[i] != w[i]) {
			fail_msg("%s: byte %zu of %zu is 0x%02x, want 0x%02x",
				 what, i, n, g[i], w[i]);
		}
	}
}

static inline void ts_rec_init(struct ts_rec *r, uint64_t len, uint32_t seed)
{
	uint32_t n = kv_nchunks(len);

	memset(r, 0, sizeof(*r));
	r->len = len;
	r->buf = ts_payload(len, seed);
	r->crcs = ts_calloc(n ? n : 1, sizeof(*r->crcs));
	assert_non_null(r->crcs);
}

static inline void ts_rec_free(struct ts_rec *r)
{
	ts_free(r->buf);
	ts_free(r->crcs);
	r->buf = NULL;
	r->crcs = NULL;
}

static inline int ts_rec_try_append(struct store *st, struct ts_rec *r,
				    uint64_t ino, const char *path)
{
	return store_append(st, ino, path, r->buf, r->len, r->crcs, &r->ext);
}

/* Appends r, checks the extent's shape and commits it. */
static inline void ts_rec_append(struct store *st, struct ts_rec *r,
				 uint64_t ino, const char *path)
{
	assert_int_equal(ts_rec_try_append(st, r, ino, path), 0);
	assert_int_not_equal(r->ext.file_id, 0);
	assert_int_equal(r->ext.len, r->len);
	assert_int_equal(r->ext.off % KV_ALIGN, 0);
	assert_int_equal(r->ext.hdr_len % KV_ALIGN, 0);
	assert_int_equal(r->ext.hdr_len, store_hdr_len(r->len, strlen(path)));
	for (uint32_t c = 0; c < kv_nchunks(r->len); c++) {
		uint64_t cs = (uint64_t)c * KV_CHUNK_SIZE;
		uint64_t cl = r->len - cs < KV_CHUNK_SIZE ? r->len - cs
							  : KV_CHUNK_SIZE;

		assert_int_equal(r->crcs[c], ts_ref_crc32c(0, r->buf + cs, cl));
	}
	store_append_done(st, r->ext.file_id);
}

static inline size_t ts_clip(const struct ts_rec *r, uint64_t off, size_t len)
{
	if (off >= r->len)
		return 0;
	return len < r->len - off ? len : (size_t)(r->len - off);
}

/* Reads [off, off + len) of r; the bytes must be exact. */
static inline void ts_check_read1(struct store *st, const struct ts_rec *r,
				  const uint32_t *crcs, uint64_t off,
				  size_t len)
{
	size_t want = ts_clip(r, off, len);
	const void *data = NULL;
	size_t n = 12345;
	int rc;

	rc = store_read(st, &r->ext, crcs, off, len, &data, &n);
	if (rc != 0)
		fail_msg("read off %llu len %zu of %llu (crcs %s): %d",
			 (unsigned long long)off, len,
			 (unsigned long long)r->len, crcs ? "on" : "off", rc);
	assert_int_equal(n, want);
	if (want) {
		assert_non_null(data);
		ts_assert_bytes(data, r->buf + off, want, "read");
	}
}

/* The same with and without CRCs. */
static inline void ts_check_read(struct store *st, const struct ts_rec *r,
				 uint64_t off, size_t len)
{
	ts_check_read1(st, r, r->crcs, off, len);
	ts_check_read1(st, r, NULL, off, len);
}

static inline void ts_data_path(const struct ts_ctx *t, uint32_t id, char *buf,
				size_t len)
{
	snprintf(buf, len, "%s/data/%06u.kvd", t->dir, id);
}

static inline int ts_file_exists(const struct ts_ctx *t, uint32_t id)
{
	char path[PATH_MAX];
	struct stat sb;

	ts_data_path(t, id, path, sizeof(path));
	return stat(path, &sb) == 0;
}

/* fstat of data file id through a descriptor of our own. */
static inline void ts_file_stat(const struct ts_ctx *t, uint32_t id,
				struct stat *sb)
{
	char path[PATH_MAX];
	int fd;

	ts_data_path(t, id, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, sb), 0);
	close(fd);
}

static inline uint64_t ts_file_size(const struct ts_ctx *t, uint32_t id)
{
	struct stat sb;

	ts_file_stat(t, id, &sb);
	return (uint64_t)sb.st_size;
}

/* Reads len bytes at off of data file id; returns the count read. */
static inline ssize_t ts_file_pread(const struct ts_ctx *t, uint32_t id,
				    void *buf, size_t len, uint64_t off)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	ts_data_path(t, id, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = pread(fd, buf, len, (off_t)off);
	close(fd);
	return n;
}

static inline void ts_file_pwrite(const struct ts_ctx *t, uint32_t id,
				  const void *buf, size_t len, uint64_t off)
{
	char path[PATH_MAX];
	int fd;

	ts_data_path(t, id, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static inline void ts_truncate(const struct ts_ctx *t, uint32_t id,
			       uint64_t size)
{
	char path[PATH_MAX];

	ts_data_path(t, id, path, sizeof(path));
	assert_int_equal(truncate(path, (off_t)size), 0);
}

/* Names of the entries in DATADIR/data, sorted, joined with ' '. */
static inline void ts_list_data(const struct ts_ctx *t, char *out,
				size_t out_len)
{
	char path[PATH_MAX], names[64][256];
	struct dirent *de;
	size_t nnames = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/data", t->dir);
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		assert_true(nnames < 64);
		snprintf(names[nnames++], sizeof(names[0]), "%s", de->d_name);
	}
	closedir(d);
	qsort(names, nnames, sizeof(names[0]),
	      (int (*)(const void *, const void *))strcmp);
	out[0] = '\0';
	for (size_t i = 0; i < nnames; i++) {
		size_t used = strlen(out);

		snprintf(out + used, out_len - used, "%s%s", i ? " " : "",
			 names[i]);
	}
}

/* Reads and decodes the header of the record at off in data file id. */
static inline unsigned char *ts_read_hdr(const struct ts_ctx *t, uint32_t id,
					 uint64_t off, struct store_hdr *h)
{
	unsigned char *buf = ts_alloc(3 * KV_ALIGN);
	ssize_t n;

	assert_non_null(buf);
	n = ts_file_pread(t, id, buf, 3 * KV_ALIGN, off);
	assert_true(n >= (ssize_t)KV_ALIGN);
	assert_int_equal(store_hdr_decode(buf, (size_t)n, h), 0);
	return buf;
}

static inline struct store *ts_open_cfg(struct ts_ctx *t, unsigned nlanes,
					uint64_t file_max, int durable,
					int fake)
{
	struct store_config cfg = {
		.nlanes = nlanes, .file_max = file_max, .durable = durable};
	struct store *st = NULL;

	assert_int_equal(store_open(&st, t->dir, &cfg, fake ? &t->fops : NULL),
			 0);
	assert_non_null(st);
	return st;
}

/* Replaces t->st with a fresh store on the same directory. */
static inline void ts_reopen(struct ts_ctx *t, unsigned nlanes,
			     uint64_t file_max, int fake)
{
	store_close(t->st);
	t->st = ts_open_cfg(t, nlanes, file_max, 0, fake);
}

static inline struct store_stats ts_stats(struct store *st)
{
	struct store_stats s;

	memset(&s, 0xee, sizeof(s));
	store_get_stats(st, &s);
	return s;
}

static inline int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");
	struct ts_ctx *t = calloc(1, sizeof(*t));

	if (!t)
		return -1;
	if (snprintf(t->dir, sizeof(t->dir), "%s/kvfs-test-store-XXXXXX",
		     tmp && *tmp ? tmp : "/tmp") >= (int)sizeof(t->dir) ||
	    !mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	fake_io_init(&t->fio);
	t->fops = fake_io_ops(&t->fio);
	*state = t;
	return 0;
}

static inline int teardown(void **state)
{
	struct ts_ctx *t = *state;
	char path[2 * PATH_MAX];
	struct dirent *de;
	DIR *d;

	store_close(t->st);
	snprintf(path, sizeof(path), "%s/data", t->dir);
	d = opendir(path);
	if (d) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/data/%s", t->dir,
				 de->d_name);
			unlink(path);
		}
		closedir(d);
		snprintf(path, sizeof(path), "%s/data", t->dir);
		rmdir(path);
	}
	rmdir(t->dir);
	fake_io_destroy(&t->fio);
	ts_free_all();
	free(t);
	return 0;
}

static inline void ts_expect_read_rc(struct store *st, const struct ts_rec *r,
				     const uint32_t *crcs, uint64_t off,
				     size_t len, int want)
{
	const void *data = NULL;
	size_t n = 777;
	int rc;

	rc = store_read(st, &r->ext, crcs, off, len, &data, &n);
	if (rc != want)
		fail_msg("read off %llu len %zu (crcs %s): %d, want %d",
			 (unsigned long long)off, len, crcs ? "on" : "off", rc,
			 want);
	if (want < 0)
		assert_int_equal(n, 0);
}

struct ts_appender {
	struct store *st;
	struct ts_rec *r;
	int rc;
};

static inline void *ts_appender_main(void *arg)
{
	struct ts_appender *a = arg;

	a->rc = ts_rec_try_append(a->st, a->r, 1, "/held");
	return NULL;
}

#endif
