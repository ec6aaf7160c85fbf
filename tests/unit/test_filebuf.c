/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the daemon's file buffers (fs/kvfs/filebuf.c) without
 * FUSE: the dirty budget's wait (node_budget_wait) against a bare struct
 * fs, with another thread standing in for the write-behind queue that
 * drains, and a stop callback standing in for an INTERRUPT; and segments
 * going back to the pool and the budget. Real time is used only for
 * bounded waits (the test's own limit is 300 ms); nothing asserts a
 * duration.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filebuf.h"
#include "fs.h"
#include "log.h"
#include "record.h"

#define MIB (1024ull * 1024)

static int setup(void **state)
{
	struct fs *fs = calloc(1, sizeof(*fs));

	assert_non_null(fs);
	pthread_mutex_init(&fs->dirty_lock, NULL);
	pthread_cond_init(&fs->dirty_cond, NULL);
	fs->cfg.dirty_limit = 4 * MIB;
	fs->cfg.dirty_wait_ns = 300 * 1000000ll;
	*state = fs;
	return 0;
}

static int teardown(void **state)
{
	struct fs *fs = *state;

	for (size_t i = 0; i < fs->nseg_pool; i++)
		node_seg_free(fs->seg_pool[i]);
	pthread_mutex_destroy(&fs->dirty_lock);
	pthread_cond_destroy(&fs->dirty_cond);
	free(fs);
	return 0;
}

/* Room: no wait, nothing counted. The first writer may take any amount. */
static void test_room(void **state)
{
	struct fs *fs = *state;

	assert_int_equal(node_budget_wait(fs, 64 * MIB, NULL, NULL), 0);
	fs->dirty_bytes = 2 * MIB;
	assert_int_equal(node_budget_wait(fs, 2 * MIB, NULL, NULL), 0);
	assert_int_equal(atomic_load(&fs->dirty_waits), 0);
	assert_int_equal(atomic_load(&fs->dirty_refused), 0);
}

/* Budget held by open files (queue empty): refused at once, no wait. */
static void test_refused_when_nothing_drains(void **state)
{
	struct fs *fs = *state;

	fs->dirty_bytes = 4 * MIB;
	assert_int_equal(node_budget_wait(fs, 4096, NULL, NULL), -EDQUOT);
	assert_int_equal(atomic_load(&fs->dirty_refused), 1);
	assert_int_equal(atomic_load(&fs->dirty_waits), 0);
}

static void *drain_later(void *arg)
{
	struct fs *fs = arg;

	usleep(50 * 1000);
	pthread_mutex_lock(&fs->dirty_lock);
	fs->dirty_bytes -= 2 * MIB;
	atomic_store(&fs->wb_queued_bytes, 0);
	pthread_cond_broadcast(&fs->dirty_cond);
	pthread_mutex_unlock(&fs->dirty_lock);
	return NULL;
}

/* Queued bytes drain on their own: the writer waits, then gets room. */
static void test_waits_for_the_queue(void **state)
{
	struct fs *fs = *state;
	pthread_t t;

	fs->dirty_bytes = 4 * MIB;
	atomic_store(&fs->wb_queued_bytes, 2 * MIB);
	assert_int_equal(pthread_create(&t, NULL, drain_later, fs), 0);
	assert_int_equal(node_budget_wait(fs, MIB, NULL, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&fs->dirty_waits), 1);
	assert_true(atomic_load(&fs->dirty_wait_ns) > 0);
	assert_int_equal(atomic_load(&fs->dirty_refused), 0);
}

/* A queue that never drains: refused once the bound is reached. */
static void test_bounded(void **state)
{
	struct fs *fs = *state;

	fs->dirty_bytes = 4 * MIB;
	atomic_store(&fs->wb_queued_bytes, 4 * MIB);
	assert_int_equal(node_budget_wait(fs, MIB, NULL, NULL), -EDQUOT);
	assert_int_equal(atomic_load(&fs->dirty_waits), 1);
	assert_int_equal(atomic_load(&fs->dirty_refused), 1);
}

static int stop_calls;

static int stop_second(void *arg)
{
	(void)arg;
	return ++stop_calls >= 2;
}

/* An interrupted writer stops waiting with -EINTR, not refused. */
static void test_interrupted(void **state)
{
	struct fs *fs = *state;

	fs->dirty_bytes = 4 * MIB;
	atomic_store(&fs->wb_queued_bytes, 4 * MIB);
	fs->cfg.dirty_wait_ns = 3600ll * 1000000000;
	stop_calls = 0;
	assert_int_equal(node_budget_wait(fs, MIB, stop_second, NULL), -EINTR);
	assert_int_equal(stop_calls, 2);
	assert_int_equal(atomic_load(&fs->dirty_refused), 0);
}

/* Released segments leave the budget; the pool keeps them for reuse. */
static void test_segs_release(void **state)
{
	struct fs *fs = *state;
	char **segs = calloc(2, sizeof(*segs));
	struct iovec iov[4];

	assert_non_null(segs);
	for (int i = 0; i < 2; i++) {
		segs[i] = node_seg_new();
		assert_non_null(segs[i]);
		memset(segs[i], 'a' + i, NODE_SEG);
	}
	/* A range across the segment boundary: two pieces. */
	assert_int_equal(node_segs_iov(segs, NODE_SEG - 10, 20, iov), 2);
	assert_int_equal(iov[0].iov_len, 10);
	assert_int_equal(((char *)iov[0].iov_base)[0], 'a');
	assert_int_equal(iov[1].iov_len, 10);
	assert_int_equal(((char *)iov[1].iov_base)[0], 'b');
	fs->dirty_bytes = 2 * NODE_SEG;
	node_segs_release(fs, segs, 2);
	free(segs);
	assert_int_equal(fs->dirty_bytes, 0);
	assert_int_equal(fs->nseg_pool, 2);
}

/* The CRCs node_crcs_known() gives for n's first size bytes. */
static uint32_t fb_known(struct node *n, uint64_t size, uint32_t *got)
{
	return node_crcs_known(n->seg_crcs, n->seg_ncrcs, size, got);
}

/*
 * Writes take the CRCs of the chunks they complete in order, whatever
 * their sizes; a rewrite, a hole or a write out of order forgets from
 * the chunk it touches; only chunks whole in the file's size are given,
 * and each one given is the CRC of the bytes the buffer holds.
 */
static void test_crcs_taken(void **state)
{
	const uint64_t size = 2 * NODE_SEG + 3 * KV_CHUNK_SIZE;
	struct fs *fs = *state;
	struct node n = {0};
	unsigned char *src = malloc(size), *flat = malloc(size);
	uint32_t want[64], got[64];
	uint64_t off = 0;

	assert_non_null(src);
	assert_non_null(flat);
	for (uint64_t i = 0; i < size; i++)
		src[i] = (unsigned char)(i * 31 + (i >> 12));
	assert_int_equal(node_reserve(fs, &n, size), 0);
	/* In order, in pieces that end inside chunks and across segments. */
	for (size_t piece = 4096; off < size; piece = piece * 3 + 4096) {
		size_t take = size - off < piece ? (size_t)(size - off) : piece;

		node_copy_in(&n, off, src + off, take);
		off += take;
	}
	store_chunk_crcs(src, size, want);
	assert_int_equal(fb_known(&n, size, got), size / KV_CHUNK_SIZE);
	assert_memory_equal(got, want, size / KV_CHUNK_SIZE * sizeof(*got));
	/* A shorter size: only the chunks whole in it. */
	assert_int_equal(fb_known(&n, KV_CHUNK_SIZE + 5, got), 1);
	/* A rewrite inside chunk 3 forgets from chunk 3 on. */
	src[3 * KV_CHUNK_SIZE + 7] ^= 0xff;
	node_copy_in(&n, 3 * KV_CHUNK_SIZE + 7, src + 3 * KV_CHUNK_SIZE + 7, 1);
	assert_int_equal(fb_known(&n, size, got), 3);
	assert_memory_equal(got, want, 3 * sizeof(*got));
	/* Rewritten from 0 in one write: all taken again, of the new bytes. */
	node_copy_in(&n, 0, src, (size_t)size);
	store_chunk_crcs(src, size, want);
	assert_int_equal(fb_known(&n, size, got), size / KV_CHUNK_SIZE);
	assert_memory_equal(got, want, size / KV_CHUNK_SIZE * sizeof(*got));
	/* Zeroing (a hole, the padding) forgets from where it starts. */
	node_zero(&n, KV_CHUNK_SIZE + 1, 10);
	assert_int_equal(fb_known(&n, size, got), 1);
	/* Out of order: a write past the CRCs taken takes none. */
	node_copy_in(&n, 4 * KV_CHUNK_SIZE, src + 4 * KV_CHUNK_SIZE,
		     KV_CHUNK_SIZE);
	assert_int_equal(fb_known(&n, size, got), 1);
	/* What is given matches the buffer's bytes. */
	for (uint64_t i = 0; i < size; i += NODE_SEG)
		memcpy(flat + i, n.segs[i / NODE_SEG],
		       size - i < NODE_SEG ? size - i : NODE_SEG);
	store_chunk_crcs(flat, size, want);
	assert_int_equal(got[0], want[0]);
	/* Discarded: none. */
	fs->dirty_bytes = n.nsegs * NODE_SEG;
	node_discard(fs, &n);
	assert_int_equal(fb_known(&n, size, got), 0);
	free(n.seg_crcs);
	free(src);
	free(flat);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_room, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_refused_when_nothing_drains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waits_for_the_queue, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interrupted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_segs_release, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_crcs_taken, setup,
						teardown),
	};

	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests_name("filebuf", tests, NULL, NULL);
}
