/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the daemon's capacity accounting (fs/kvfs/capacity.c)
 * without FUSE: a real index in a mkdtemp directory, a fake clock
 * (tests/fakes/fake_clock.h) for the access times, and a remove callback
 * standing in for the daemon's unlink that can call some inodes busy. The
 * tests check touch batching with the fake clock's timestamps, eviction
 * down to the low watermark in LRU order, busy blocks skipped, room made
 * for a store over the high watermark, a block opened while it was evicted
 * not counted as room, and -ENOSPC when everything left is busy. The data files are not involved (eviction works on the index and
 * the use estimate), so records point at made-up extents.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capacity.h"
#include "fake_clock.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"

#define TC_MIB (1024ull * 1024)
#define TC_NFILES 8
/* Each file: 3 pages, so it takes a header page more in a data file. */
#define TC_SIZE (3ull * KV_ALIGN)
#define TC_SPAN (KV_ALIGN + TC_SIZE)

struct tc {
	char dir[256];
	struct idx *idx;
	struct cap *cap;
	struct fake_clock clock;
	uint64_t ino[TC_NFILES];
	int busy[TC_NFILES];
	/* Opened between the busy check and the unlink: record not freed. */
	int opened[TC_NFILES];
	uint64_t removed[TC_NFILES]; /* inodes removed, in order */
	size_t nremoved;
};

static int tc_index_of(struct tc *t, uint64_t ino)
{
	for (int i = 0; i < TC_NFILES; i++)
		if (t->ino[i] == ino)
			return i;
	return -1;
}

/*
 * The daemon's node_evict_name, minus the node table and the kernel: the
 * record is freed (the estimate lowered) at once unless the file is open.
 */
static int tc_remove(void *ctx, const struct idx_name *e)
{
	struct tc *t = ctx;
	int i = tc_index_of(t, e->ino);
	uint32_t nlink;
	uint64_t ino;

	if (i < 0 || t->busy[i])
		return 0;
	if (idx_unlink(t->idx, e->parent, e->name, 0, 1, &ino, &nlink) < 0)
		return 0;
	t->removed[t->nremoved++] = e->ino;
	if (!t->opened[i])
		cap_used_add(t->cap, -(int64_t)TC_SPAN);
	return 1;
}

static void tc_new_cap(struct tc *t, uint64_t high, uint64_t low)
{
	const struct cap_config cfg = {
		.datadir = t->dir,
		.high_wm = high,
		.low_wm = low,
		.clock = fake_clock_src(&t->clock),
		.remove = tc_remove,
		.ctx = t,
	};

	cap_free(t->cap);
	assert_int_equal(cap_new(&t->cap, t->idx, NULL, &cfg), 0);
}

/* TC_NFILES files with a record each, last used at time 1. */
static int setup(void **state)
{
	struct tc *t = calloc(1, sizeof(*t));
	const char *tmp = getenv("TMPDIR");
	char db[300], name[32];

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "%s/kvfs-test-capacity-XXXXXX",
		 tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	snprintf(db, sizeof(db), "%s/index.db", t->dir);
	assert_int_equal(idx_open(&t->idx, db, 0755, 0, 0), 0);
	for (int i = 0; i < TC_NFILES; i++) {
		struct idx_attr a = {.mode = S_IFREG | 0644,
				     .atime_ns = 1,
				     .mtime_ns = 1,
				     .ctime_ns = 1};
		struct kv_extent ext = {.file_id = 1,
					.hdr_len = KV_ALIGN,
					.off = (uint64_t)i * TC_SPAN,
					.len = TC_SIZE},
				 old;
		uint32_t crcs[3] = {0};

		snprintf(name, sizeof(name), "%d.bin", i);
		assert_int_equal(
			idx_create(t->idx, KV_ROOT_INO, name, &a, NULL), 0);
		t->ino[i] = a.ino;
		assert_int_equal(idx_set_extent(t->idx, a.ino, TC_SIZE, 1, &ext,
						crcs, kv_nchunks(TC_SIZE),
						&old),
				 0);
	}
	fake_clock_set(&t->clock, 1000);
	tc_new_cap(t, 64 * TC_MIB, 32 * TC_MIB);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tc *t = *state;
	char path[300];

	cap_free(t->cap);
	idx_close(t->idx);
	for (const char *const *s =
		     (const char *const[]){"", "-wal", "-shm", NULL};
	     *s; s++) {
		snprintf(path, sizeof(path), "%s/index.db%s", t->dir, *s);
		unlink(path);
	}
	rmdir(t->dir);
	free(t);
	return 0;
}

/* Uses file i at the fake clock's next tick. */
static void tc_use(struct tc *t, int i)
{
	fake_clock_advance(&t->clock, 1000);
	cap_touch(t->cap, t->ino[i]);
}

/*
 * Touches are queued with the clock's time, not written, until a flush;
 * the queue holds at most CAP_TOUCH_MAX, and a flush writes them all.
 */
static void test_touch_batching(void **state)
{
	struct tc *t = *state;
	struct idx_name lru[TC_NFILES];

	tc_use(t, 5);
	tc_use(t, 2);
	assert_int_equal(t->cap->ntouch, 2);
	assert_int_equal(t->cap->touch_ino[0], t->ino[5]);
	assert_int_equal(t->cap->touch_ns[0], 2000);
	assert_int_equal(t->cap->touch_ns[1], 3000);
	/* Not in the index yet: every file is still at time 1. */
	assert_int_equal(idx_lru(t->idx, INT64_MIN, 0, lru, TC_NFILES),
			 TC_NFILES);
	assert_int_equal(lru[TC_NFILES - 1].time_ns, 1);
	cap_flush_touches(t->cap);
	assert_int_equal(t->cap->ntouch, 0);
	assert_int_equal(idx_lru(t->idx, INT64_MIN, 0, lru, TC_NFILES),
			 TC_NFILES);
	assert_int_equal(lru[TC_NFILES - 2].ino, t->ino[5]);
	assert_int_equal(lru[TC_NFILES - 2].time_ns, 2000);
	assert_int_equal(lru[TC_NFILES - 1].ino, t->ino[2]);
	assert_int_equal(lru[TC_NFILES - 1].time_ns, 3000);
	/* A full queue drops further touches rather than block. */
	for (int i = 0; i < CAP_TOUCH_MAX + 10; i++)
		cap_touch(t->cap, t->ino[0]);
	assert_int_equal(t->cap->ntouch, CAP_TOUCH_MAX);
	cap_flush_touches(t->cap);
	assert_int_equal(t->cap->ntouch, 0);
}

/*
 * Eviction to a target removes least recently used first, by the fake
 * clock's times (queued touches count: eviction flushes them first),
 * skips busy files, and stops once the estimate is at the target.
 */
static void test_evict_lru_order(void **state)
{
	struct tc *t = *state;
	static const int order[TC_NFILES] = {6, 3, 0, 7, 1, 4, 2, 5};
	struct fs_evict_result r;
	uint64_t used = 20 * TC_SPAN;

	for (int i = 0; i < TC_NFILES; i++)
		tc_use(t, order[i]);
	t->busy[3] = 1; /* open: second in line, must be skipped */
	cap_used_add(t->cap, (int64_t)used);
	assert_int_equal(cap_used(t->cap), used);
	cap_evict(t->cap, used - 3 * TC_SPAN, &r);
	assert_int_equal(r.used_before, used);
	assert_int_equal(r.used_after, used - 3 * TC_SPAN);
	assert_int_equal(r.blocks, 3);
	assert_int_equal(r.bytes, 3 * TC_SIZE);
	assert_int_equal(t->nremoved, 3);
	assert_int_equal(t->removed[0], t->ino[6]);
	assert_int_equal(t->removed[1], t->ino[0]);
	assert_int_equal(t->removed[2], t->ino[7]);
	assert_int_equal(atomic_load(&t->cap->evicted), 3);
	assert_int_equal(cap_used(t->cap), used - 3 * TC_SPAN);
}

/*
 * A block opened between its busy check and its unlink keeps its record
 * until closed: eviction does not count it as room and evicts the next.
 */
static void test_evict_opened_meanwhile(void **state)
{
	struct tc *t = *state;
	struct fs_evict_result r;
	uint64_t used = 20 * TC_SPAN;

	for (int i = 0; i < TC_NFILES; i++)
		tc_use(t, i);
	t->opened[0] = 1;
	cap_used_add(t->cap, (int64_t)used);
	cap_evict(t->cap, used - 2 * TC_SPAN, &r);
	assert_int_equal(r.blocks, 3);
	assert_int_equal(t->removed[0], t->ino[0]);
	assert_int_equal(t->removed[2], t->ino[2]);
	assert_int_equal(r.used_after, used - 2 * TC_SPAN);
	assert_int_equal(cap_used(t->cap), used - 2 * TC_SPAN);
}

/*
 * A store that would go over the high watermark evicts down to the low
 * watermark first, in LRU order; one that fits evicts nothing.
 */
static void test_make_room(void **state)
{
	struct tc *t = *state;
	/* Watermarks in spans: evict above 10, down to 6. */
	uint64_t high = 10 * TC_SPAN + 10 * TC_SPAN / 64, low = 6 * TC_SPAN;

	tc_new_cap(t, high, low);
	for (int i = TC_NFILES - 1; i >= 0; i--)
		tc_use(t, i); /* file 7 oldest ... file 0 newest */
	cap_used_add(t->cap, 8 * TC_SPAN);
	/* One span more fits under the high watermark with its slack. */
	assert_int_equal(cap_make_room(t->cap, TC_SPAN), 0);
	assert_int_equal(t->nremoved, 0);
	/* Three more do not: down to the low watermark, oldest first. */
	assert_int_equal(cap_make_room(t->cap, 3 * TC_SPAN), 0);
	assert_int_equal(t->nremoved, 2);
	assert_int_equal(t->removed[0], t->ino[7]);
	assert_int_equal(t->removed[1], t->ino[6]);
	/* The evicted records were freed at once, not when forgotten. */
	assert_int_equal(cap_used(t->cap), 6 * TC_SPAN);
	assert_true(cap_used(t->cap) + 3 * TC_SPAN <= high);
	assert_int_equal(atomic_load(&t->cap->enospc), 0);
}

/* Nothing evictable (all busy): the store is refused with -ENOSPC. */
static void test_enospc_when_all_busy(void **state)
{
	struct tc *t = *state;

	tc_new_cap(t, 4 * TC_SPAN, 2 * TC_SPAN);
	for (int i = 0; i < TC_NFILES; i++) {
		tc_use(t, i);
		t->busy[i] = 1;
	}
	cap_used_add(t->cap, 4 * TC_SPAN);
	assert_int_equal(cap_make_room(t->cap, TC_SPAN), -ENOSPC);
	assert_int_equal(t->nremoved, 0);
	assert_int_equal(atomic_load(&t->cap->enospc), 1);
	/* A store bigger than the watermark is refused without evicting. */
	t->busy[0] = 0;
	assert_int_equal(cap_make_room(t->cap, 5 * TC_SPAN), -ENOSPC);
	assert_int_equal(t->nremoved, 0);
	assert_int_equal(atomic_load(&t->cap->enospc), 2);
	/* One not busy: evicting it makes room. */
	assert_int_equal(cap_make_room(t->cap, TC_SPAN / 2), 0);
	assert_int_equal(t->nremoved, 1);
	assert_int_equal(t->removed[0], t->ino[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_touch_batching, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_evict_lru_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_evict_opened_meanwhile,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_make_room, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_enospc_when_all_busy,
						setup, teardown),
	};

	log_set_level(LOG_LVL_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
