/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for extent files (core/extfile.c), through the fault-
 * injecting I/O table (tests/fakes/fake_io.h) on a real directory: names,
 * the header a new file gets and what opening checks, positional reads and
 * writes (also cut into short transfers and interrupted), the short read
 * where the backing file ends, holes, truncation and fallocate, blocks,
 * and the write and sync errors that reach the caller.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "extfile.h"
#include "fake_io.h"
#include "record.h"

struct tx {
	char dir[64];
	int dirfd;
	struct fake_io fio;
	struct store_io_ops ops;
};

static int tx_setup(void **state)
{
	struct tx *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/var/tmp/kvfs-extf.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	t->dirfd = extf_dir_open(t->dir, 1);
	assert_true(t->dirfd >= 0);
	fake_io_init(&t->fio);
	t->ops = fake_io_ops(&t->fio);
	*state = t;
	return 0;
}

static int tx_teardown(void **state)
{
	struct tx *t = *state;
	char cmd[128];

	close(t->dirfd);
	fake_io_destroy(&t->fio);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	assert_int_equal(system(cmd), 0);
	free(t);
	return 0;
}

static void test_names(void **state)
{
	char buf[EXTF_NAME_MAX];
	uint64_t ino = 0;

	(void)state;
	assert_int_equal(extf_name(buf, sizeof(buf), 42), 0);
	assert_string_equal(buf, "42.kvx");
	assert_int_equal(extf_parse_name("42.kvx", &ino), 0);
	assert_int_equal(ino, 42);
	assert_int_equal(extf_parse_name("042.kvx", &ino), -EINVAL);
	assert_int_equal(extf_parse_name("42.kvd", &ino), -EINVAL);
	assert_int_equal(extf_parse_name("42.kvx.tmp", &ino), -EINVAL);
	assert_int_equal(extf_parse_name("x.kvx", &ino), -EINVAL);
	assert_int_equal(extf_name(buf, 4, 12345), -ENAMETOOLONG);
}

/* A new file's header, what open checks, bytes at their offsets. */
static void test_create_open_rw(void **state)
{
	struct tx *t = *state;
	struct extf x = EXTF_NONE, y = EXTF_NONE;
	struct extf_info info;
	char out[64] = {0};
	uint64_t size = 0;
	size_t got = 0;
	int fd;

	assert_int_equal(extf_create(t->dirfd, &t->ops, 7, 99, "/a/b.bin", &x),
			 0);
	/* The bytes at their own offsets, the header in a file beside. */
	assert_int_equal(x.hdr_len, 0);
	assert_int_equal(faccessat(t->dirfd, "7.kvh", F_OK, 0), 0);
	assert_int_equal(extf_size(&x, &size, NULL), 0);
	assert_int_equal(size, 0);
	assert_int_equal(extf_write(&t->ops, &x, "hello", 5, 1000, 0), 0);
	assert_int_equal(extf_size(&x, &size, NULL), 0);
	assert_int_equal(size, 1005);
	/* The hole before the bytes reads as zeros. */
	assert_int_equal(extf_read(&t->ops, &x, out, 10, 995, &got, 0), 0);
	assert_int_equal(got, 10);
	assert_memory_equal(out, "\0\0\0\0\0hello", 10);
	/* Past the end: short, not an error. */
	assert_int_equal(extf_read(&t->ops, &x, out, 10, 1003, &got, 0), 0);
	assert_int_equal(got, 2);
	extf_close(&x);

	assert_int_equal(extf_open(t->dirfd, 7, &y), 0);
	assert_int_equal(y.hdr_len, 0);
	assert_int_equal(extf_read(&t->ops, &y, out, 5, 1000, &got, 0), 0);
	assert_memory_equal(out, "hello", 5);
	assert_int_equal(pread(y.fd, out, 5, 1000), 5);
	assert_memory_equal(out, "hello", 5);
	assert_int_equal(extf_read_hdr(t->dirfd, 7, &info), 0);
	assert_int_equal(info.ino, 7);
	assert_int_equal(info.seq, 99);
	assert_int_equal(info.size, 1005);
	assert_string_equal(info.path, "/a/b.bin");
	extf_close(&y);

	/* Another inode's name, or none: refused. */
	assert_int_equal(extf_open(t->dirfd, 8, &y), -ENOENT);
	fd = openat(t->dirfd, "8.kvx", O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "garbage", 7), 7);
	close(fd);
	assert_int_equal(extf_open(t->dirfd, 8, &y), -EINVAL);
	assert_int_equal(renameat(t->dirfd, "7.kvx", t->dirfd, "9.kvx"), 0);
	assert_int_equal(renameat(t->dirfd, "7.kvh", t->dirfd, "9.kvh"), 0);
	assert_int_equal(extf_open(t->dirfd, 9, &y), -EINVAL);
	assert_int_equal(y.fd, -1);
	/* Bytes without their header file: no header of 9 either. */
	assert_int_equal(unlinkat(t->dirfd, "9.kvh", 0), 0);
	assert_int_equal(extf_open(t->dirfd, 9, &y), -EINVAL);
	assert_int_equal(extf_remove(t->dirfd, 9), 0);
	assert_int_equal(extf_remove(t->dirfd, 9), 0); /* gone: fine */
	assert_int_equal(faccessat(t->dirfd, "9.kvx", F_OK, 0), -1);
}

/* An extent file of the older shape, its header first, still works. */
static void test_header_first(void **state)
{
	struct tx *t = *state;
	struct extf y = EXTF_NONE;
	struct extf_info info;
	uint32_t hlen = store_hdr_len(0, 4);
	char *buf = calloc(1, hlen + 5), out[8];
	size_t got = 0;
	uint64_t blocks = 0, size = 0;
	int fd;

	assert_non_null(buf);
	store_hdr_encode(buf, STORE_REC_EXTENT, 3, 11, 0, NULL, "/old", 4);
	memcpy(buf + hlen, "bytes", 5);
	fd = openat(t->dirfd, "11.kvx", O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, hlen + 5), (ssize_t)(hlen + 5));
	close(fd);
	free(buf);
	assert_int_equal(extf_read_hdr(t->dirfd, 11, &info), (int)hlen);
	assert_int_equal(info.size, 5);
	assert_string_equal(info.path, "/old");
	assert_int_equal(extf_open(t->dirfd, 11, &y), 0);
	assert_int_equal(y.hdr_len, hlen);
	assert_int_equal(extf_read(&t->ops, &y, out, 8, 0, &got, 0), 0);
	assert_int_equal(got, 5);
	assert_memory_equal(out, "bytes", 5);
	assert_int_equal(extf_blocks_at(t->dirfd, 11, &blocks), 0);
	assert_true(blocks >= hlen / 512); /* the header's blocks count */
	/* Cut inside its header: the size says so. */
	assert_int_equal(ftruncate(y.fd, 100), 0);
	assert_int_equal(extf_size(&y, &size, NULL), -ENODATA);
	extf_close(&y);
	assert_int_equal(extf_remove(t->dirfd, 11), 0);
}

/* Short and interrupted transfers are retried; errors reach the caller. */
static void test_faults(void **state)
{
	struct tx *t = *state;
	struct extf x = EXTF_NONE;
	char in[20000], out[20000];
	size_t got = 0;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7);
	assert_int_equal(extf_create(t->dirfd, &t->ops, 3, 1, "/p", &x), 0);
	t->fio.rule[FAKE_IO_PWRITEV] = (struct fake_io_rule){
		.max_xfer = 3000, .ntransient = 2, .transient_err = -EINTR};
	assert_int_equal(extf_write(&t->ops, &x, in, sizeof(in), 5, 0), 0);
	t->fio.rule[FAKE_IO_PREADV] = (struct fake_io_rule){
		.max_xfer = 777, .short_at = 3, .short_len = 100};
	assert_int_equal(extf_read(&t->ops, &x, out, sizeof(out), 5, &got, 0),
			 0);
	assert_int_equal(got, sizeof(out));
	assert_memory_equal(in, out, sizeof(in));
	fake_io_clear(&t->fio);
	t->fio.rule[FAKE_IO_PWRITEV] =
		(struct fake_io_rule){.fail_at = 1, .fail_err = -ENOSPC};
	assert_int_equal(extf_write(&t->ops, &x, in, 10, 0, 0), -ENOSPC);
	t->fio.rule[FAKE_IO_PREADV] =
		(struct fake_io_rule){.fail_at = 1, .fail_err = -EIO};
	assert_int_equal(extf_read(&t->ops, &x, out, 10, 0, &got, 0), -EIO);
	t->fio.rule[FAKE_IO_SYNC] =
		(struct fake_io_rule){.fail_at = 1, .fail_err = -EIO};
	assert_int_equal(extf_sync(&t->ops, &x), -EIO);
	fake_io_clear(&t->fio);
	extf_close(&x);
}

/* Size changes, reservations and holes, and aligned O_DIRECT transfers. */
static void test_shape(void **state)
{
	struct tx *t = *state;
	struct extf x = EXTF_NONE;
	uint64_t size = 0, blocks = 0, b2 = 0;
	size_t got = 0;
	void *page;

	assert_int_equal(extf_create(t->dirfd, &t->ops, 5, 2, "/pool", &x), 0);
	assert_int_equal(extf_truncate(&x, 1ull << 30), 0);
	assert_int_equal(extf_size(&x, &size, &blocks), 0);
	assert_int_equal(size, 1ull << 30);
	assert_true(blocks < 64); /* sparse */
	assert_int_equal(extf_allocate(&x, 0, 0, 8 << 20), 0);
	assert_int_equal(extf_blocks_at(t->dirfd, 5, &b2), 0);
	assert_true(b2 >= (8 << 20) / 512);
	assert_int_equal(
		extf_allocate(&x, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			      8 << 20),
		0);
	assert_int_equal(extf_blocks_at(t->dirfd, 5, &b2), 0);
	assert_true(b2 < 64);
	assert_int_equal(posix_memalign(&page, KV_ALIGN, 2 * KV_ALIGN), 0);
	memset(page, 'z', 2 * KV_ALIGN);
	assert_int_equal(
		extf_write(&t->ops, &x, page, 2 * KV_ALIGN, KV_ALIGN * 10, 1),
		0);
	memset(page, 0, 2 * KV_ALIGN);
	/* An O_DIRECT read of a length that is not whole pages. */
	assert_int_equal(extf_read(&t->ops, &x, page, KV_ALIGN + 5,
				   KV_ALIGN * 10, &got, 1),
			 0);
	assert_int_equal(got, KV_ALIGN + 5);
	assert_int_equal(((char *)page)[KV_ALIGN + 4], 'z');
	/* Cut: the size is the backing file's. */
	assert_int_equal(ftruncate(x.fd, 100), 0);
	assert_int_equal(extf_size(&x, &size, NULL), 0);
	assert_int_equal(size, 100);
	free(page);
	extf_close(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test_setup_teardown(test_create_open_rw, tx_setup,
						tx_teardown),
		cmocka_unit_test_setup_teardown(test_header_first, tx_setup,
						tx_teardown),
		cmocka_unit_test_setup_teardown(test_faults, tx_setup,
						tx_teardown),
		cmocka_unit_test_setup_teardown(test_shape, tx_setup,
						tx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
