/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's RADOS client (fs/kvdb/rtier.c) against a real
 * throw-away cluster (tests/ceph/rtier.sh starts it):
 *
 *   rtier_test CONF POOL check
 *       blocks of 0 bytes, 5 bytes, 2 MiB and 5 MiB + 3 (two round trips)
 *       put and read back byte-exact; a probe of present and absent names
 *       in one directory gives the right sizes; a directory nobody stored
 *       into probes empty; remove makes a block absent (and a second
 *       remove says -ENOENT); malformed paths are refused (-EINVAL)
 *   rtier_test CONF POOL put PATH SIZE SEED
 *   rtier_test CONF POOL get PATH SIZE SEED
 *       one block: "put: OK", or "get: match" / "get: ERRNAME" (ENOENT,
 *       ENODATA, EBADMSG, ETIMEDOUT, ...)
 *   rtier_test CONF POOL open TIMEOUT_S
 *       connects with that timeout: "open: OK" or "open: ERRNAME: why"
 *   rtier_test CONF POOL dirs
 *       a put lists its ancestor directories (RTIER_DIR) so that "/" leads
 *       to the block; rtier_list of a directory (sizes, directories, three
 *       pages, stopping early, a directory nobody stored into)
 *   rtier_test CONF POOL use
 *       in a namespace of its own: puts and removes counted by
 *       rtier_usage, touches across shards, a sweep to a target removes
 *       the least recently used first (a use without its block included,
 *       not counted as removed), another namespace counts nothing
 *   rtier_test CONF POOL lock
 *       two connections: the first cookie takes the 2 s lease and renews
 *       it, the second (and the same cookie on the other connection) is
 *       refused, then takes it once the lease ran out; unlock frees it
 *   rtier_test CONF POOL quota
 *       "quota: BYTES" (0: none)
 *   rtier_test CONF POOL stalled FILE
 *       connects (3 s timeout), waits until FILE exists (the caller stops
 *       the cluster meanwhile), then calls each function once: one line
 *       "stalled: FUNCTION ERRNAME SECONDS" each
 *   rtier_test CONF POOL sweepbench N SIZE
 *       in a namespace of its own: N blocks of SIZE bytes put, counted,
 *       half of them swept, then the rest: the times taken
 * Exit status: 0 when the command ran (the output says how), 1 when a
 * check failed, 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "kvtypes.h"
#include "rtier.h"

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "rtier_test: %s:%d: %s\n", __FILE__,   \
				__LINE__, #cond);                              \
			failures++;                                            \
		}                                                              \
	} while (0)

static const char *ename(int e)
{
	switch (e) {
	case 0:
		return "OK";
	case ENOENT:
		return "ENOENT";
	case ENODATA:
		return "ENODATA";
	case EBADMSG:
		return "EBADMSG";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	case EINVAL:
		return "EINVAL";
	default:
		return strerror(e);
	}
}

/* size bytes of stream seed, and their chunk CRCs. */
static char *fill(uint64_t size, unsigned seed, uint32_t **crcs)
{
	char *buf = malloc(size ? size : 1);
	uint32_t n = kv_nchunks(size), x = seed * 2654435761u + 1;

	*crcs = calloc(n ? n : 1, sizeof(**crcs));
	if (!buf || !*crcs)
		abort();
	for (uint64_t i = 0; i < size; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (char)(x >> 16);
	}
	for (uint32_t c = 0; c < n; c++) {
		uint64_t off = (uint64_t)c * KV_CHUNK_SIZE;
		size_t len = size - off < KV_CHUNK_SIZE ? (size_t)(size - off)
							: KV_CHUNK_SIZE;

		(*crcs)[c] = crc32c(0, buf + off, len);
	}
	return buf;
}

static int put(struct rtier *rt, const char *path, uint64_t size, unsigned seed)
{
	uint32_t *crcs;
	char *buf = fill(size, seed, &crcs);
	int rc = rtier_put(rt, path, buf, size, crcs);

	free(buf);
	free(crcs);
	return rc;
}

/* 0 when path reads back as size bytes of seed; -errno or 1 otherwise. */
static int get(struct rtier *rt, const char *path, uint64_t size, unsigned seed)
{
	uint32_t *crcs;
	char *want = fill(size, seed, &crcs);
	uint64_t len = 0;
	void *got = NULL;
	int rc = rtier_get(rt, path, &got, &len);

	if (rc == 0)
		rc = len == size && memcmp(got, want, size) == 0 ? 0 : 1;
	free(got);
	free(want);
	free(crcs);
	return rc;
}

static void check(struct rtier *rt)
{
	static const uint64_t sizes[] = {0, 5, 2u << 20, (5u << 20) + 3};
	const char *names[] = {"b0", "b1", "b2", "b3", "absent"};
	uint64_t got_sizes[5];
	int found[5];
	char path[64];

	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "/t/dir/b%d", i);
		CHECK(put(rt, path, sizes[i], (unsigned)i + 1) == 0);
	}
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "/t/dir/b%d", i);
		CHECK(get(rt, path, sizes[i], (unsigned)i + 1) == 0);
	}
	/* A block stored again is replaced whole. */
	CHECK(put(rt, "/t/dir/b1", 3, 9) == 0);
	CHECK(get(rt, "/t/dir/b1", 3, 9) == 0);
	CHECK(rtier_probe(rt, "/t/dir", 5, names, found, got_sizes) == 0);
	CHECK(found[0] && got_sizes[0] == 0);
	CHECK(found[1] && got_sizes[1] == 3);
	CHECK(found[2] && got_sizes[2] == sizes[2]);
	CHECK(found[3] && got_sizes[3] == sizes[3]);
	CHECK(!found[4]);
	CHECK(rtier_probe(rt, "/t/nothing", 2, names, found, got_sizes) == 0);
	CHECK(!found[0] && !found[1]);
	/* A block in the root directory. */
	CHECK(put(rt, "/top", 7, 4) == 0);
	CHECK(rtier_probe(rt, "/", 1, (const char *[]){"top"}, found,
			  got_sizes) == 0);
	CHECK(found[0] && got_sizes[0] == 7);
	CHECK(rtier_remove(rt, "/t/dir/b2") == 0);
	CHECK(get(rt, "/t/dir/b2", sizes[2], 3) == -ENOENT);
	CHECK(rtier_remove(rt, "/t/dir/b2") == -ENOENT);
	CHECK(rtier_probe(rt, "/t/dir", 5, names, found, got_sizes) == 0);
	CHECK(!found[2] && found[3]);
	CHECK(get(rt, "/t/dir/never", 1, 1) == -ENOENT);
	CHECK(put(rt, "relative", 1, 1) == -EINVAL);
	CHECK(put(rt, "/dir/", 1, 1) == -EINVAL);
	CHECK(rtier_probe(rt, "nope", 1, names, found, got_sizes) == -EINVAL);
}

/* Probes one name in dir: its size, or -1 when absent (or on error). */
static int64_t probe1(struct rtier *rt, const char *dir, const char *name)
{
	uint64_t size = 0;
	int found = 0;

	if (rtier_probe(rt, dir, 1, &name, &found, &size) < 0 || !found)
		return -1;
	return size == RTIER_DIR ? -2 : (int64_t)size;
}

struct listing {
	size_t n, stop_after;
	char names[4][32];
	uint64_t sizes[4];
	int sorted;
	char last[64];
};

static int list_one(void *arg, const char *name, uint64_t size)
{
	struct listing *l = arg;

	if (l->n < 4) {
		snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
		l->sizes[l->n] = size;
	}
	if (l->n > 0 && strcmp(l->last, name) >= 0)
		l->sorted = 0;
	snprintf(l->last, sizeof(l->last), "%s", name);
	l->n++;
	return l->stop_after && l->n >= l->stop_after;
}

static void dirs(struct rtier *rt)
{
	struct listing l = {.sorted = 1};
	char path[64];

	CHECK(put(rt, "/a/b/c.bin", 11, 5) == 0);
	CHECK(probe1(rt, "/", "a") == -2);
	CHECK(probe1(rt, "/a", "b") == -2);
	CHECK(probe1(rt, "/a/b", "c.bin") == 11);
	CHECK(put(rt, "/a/d.bin", 3, 6) == 0);
	CHECK(put(rt, "/a/b/e/f", 4, 6) == 0);
	CHECK(probe1(rt, "/a/b", "e") == -2);
	CHECK(rtier_list(rt, "/a", list_one, &l) == 0);
	CHECK(l.n == 2 && strcmp(l.names[0], "b") == 0 &&
	      l.sizes[0] == RTIER_DIR && strcmp(l.names[1], "d.bin") == 0 &&
	      l.sizes[1] == 3);
	l = (struct listing){.sorted = 1};
	CHECK(rtier_list(rt, "/a/b", list_one, &l) == 0);
	CHECK(l.n == 2 && strcmp(l.names[0], "c.bin") == 0 &&
	      l.sizes[0] == 11 && strcmp(l.names[1], "e") == 0 &&
	      l.sizes[1] == RTIER_DIR);
	/* More names than one page (512) of the index: three pages. */
	for (int i = 0; i < 1100; i++) {
		snprintf(path, sizeof(path), "/many/n%04d", i);
		CHECK(put(rt, path, (uint64_t)i % 7, 1) == 0);
	}
	l = (struct listing){.sorted = 1};
	CHECK(rtier_list(rt, "/many", list_one, &l) == 0);
	CHECK(l.n == 1100 && l.sorted && strcmp(l.last, "n1099") == 0);
	CHECK(strcmp(l.names[3], "n0003") == 0 && l.sizes[3] == 3);
	l = (struct listing){.sorted = 1, .stop_after = 600};
	CHECK(rtier_list(rt, "/many", list_one, &l) == 0);
	CHECK(l.n == 600);
	l = (struct listing){.sorted = 1};
	CHECK(rtier_list(rt, "/never/stored", list_one, &l) == 0);
	CHECK(l.n == 0);
	CHECK(rtier_list(rt, "rel", list_one, &l) == -EINVAL);
	l = (struct listing){.sorted = 1};
	CHECK(rtier_list(rt, "/", list_one, &l) == 0);
	CHECK(l.n >= 2 && strcmp(l.names[0], "a") == 0 &&
	      l.sizes[0] == RTIER_DIR);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* usage() is exactly bytes in blocks. */
static int usage_is(struct rtier *rt, uint64_t bytes, uint64_t blocks)
{
	uint64_t b = 0, n = 0;
	int rc = rtier_usage(rt, &b, &n);

	if (rc < 0 || b != bytes || n != blocks)
		fprintf(stderr,
			"rtier_test: usage %d: %" PRIu64 " bytes, %" PRIu64
			" blocks (want %" PRIu64 ", %" PRIu64 ")\n",
			rc, b, n, bytes, blocks);
	return rc == 0 && b == bytes && n == blocks;
}

static void use(struct rtier *rt, struct rtier *other)
{
	const char *newer[] = {"/u/b0", "/u/b1", "/u/b2"};
	const char *ghost = "/u/ghost";
	uint64_t sizes[3] = {1000, 1000, 1000}, removed = 9, freed = 9;
	int64_t times[3], t = now_ns() + 3600 * (int64_t)1000000000, t0 = 1;
	uint64_t gsize = 500;
	char path[32];

	CHECK(usage_is(rt, 0, 0));
	for (int i = 0; i < 10; i++) {
		snprintf(path, sizeof(path), "/u/b%d", i);
		CHECK(put(rt, path, 1000, (unsigned)i) == 0);
	}
	CHECK(usage_is(rt, 10000, 10));
	CHECK(usage_is(other, 0, 0)); /* another namespace */
	CHECK(rtier_remove(rt, "/u/b9") == 0);
	CHECK(usage_is(rt, 9000, 9));
	/* b0..b2 used last; a use whose block nobody stored, the oldest. */
	for (int i = 0; i < 3; i++)
		times[i] = t + i;
	CHECK(rtier_touch(rt, 3, newer, sizes, times) == 0);
	CHECK(rtier_touch(rt, 1, &ghost, &gsize, &t0) == 0);
	CHECK(rtier_touch(rt, 1, (const char *[]){"bad"}, sizes, times) ==
	      -EINVAL);
	CHECK(usage_is(rt, 9500, 10));
	/* Down to 5500: the ghost, then b3..b6 (b0..b2 are newer). */
	CHECK(rtier_sweep(rt, 5500, &removed, &freed) == 0);
	CHECK(removed == 4 && freed == 4000);
	CHECK(usage_is(rt, 5000, 5));
	for (int i = 0; i < 9; i++) {
		snprintf(path, sizeof(path), "/u/b%d", i);
		CHECK(get(rt, path, 1000, (unsigned)i) ==
		      (i >= 3 && i <= 6 ? -ENOENT : 0));
		CHECK(probe1(rt, "/u", path + 3) ==
		      (i >= 3 && i <= 6 ? -1 : 1000));
	}
	CHECK(rtier_sweep(rt, 5500, &removed, &freed) == 0);
	CHECK(removed == 0 && freed == 0);
	CHECK(usage_is(rt, 5000, 5));
	CHECK(rtier_sweep(rt, 0, &removed, &freed) == 0);
	CHECK(removed == 5 && freed == 5000);
	CHECK(usage_is(rt, 0, 0));
}

static void lock(struct rtier *a, struct rtier *b)
{
	double t0 = mono_s();

	CHECK(rtier_sweep_lock(a, "A", 2) == 1);
	CHECK(rtier_sweep_lock(b, "B", 2) == 0);
	CHECK(rtier_sweep_lock(b, "A", 2) == 0); /* another connection */
	CHECK(rtier_sweep_lock(a, "A", 2) == 1); /* renewed */
	CHECK(rtier_sweep_lock(a, "A", 0) == -EINVAL);
	t0 = mono_s();
	while (rtier_sweep_lock(b, "B", 2) == 0 && mono_s() - t0 < 10)
		usleep(100000);
	printf("lock: taken over after %.1f s\n", mono_s() - t0);
	CHECK(mono_s() - t0 >= 1.5 && mono_s() - t0 < 4);
	CHECK(rtier_sweep_lock(a, "A", 2) == 0);
	rtier_sweep_unlock(b, "B");
	CHECK(rtier_sweep_lock(a, "A", 2) == 1);
	rtier_sweep_unlock(a, "A");
	rtier_sweep_unlock(a, "A"); /* not held: nothing happens */
	CHECK(rtier_sweep_lock(b, "B", 2) == 1);
	rtier_sweep_unlock(b, "B");
}

static void sweepbench(struct rtier *rt, unsigned n, uint64_t size)
{
	uint64_t removed = 0, freed = 0, bytes = 0, blocks = 0;
	uint32_t *crcs;
	char *buf = fill(size, 1, &crcs), path[64];
	double t0 = mono_s(), t1, t2, t3, t4;

	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/bench/seq%u/blk%05u", i / 64, i);
		CHECK(rtier_put(rt, path, buf, size, crcs) == 0);
	}
	t1 = mono_s();
	CHECK(rtier_usage(rt, &bytes, &blocks) == 0);
	CHECK(bytes == n * size && blocks == n);
	t2 = mono_s();
	CHECK(rtier_sweep(rt, n / 2 * size, &removed, &freed) == 0);
	CHECK(removed == n - n / 2 && freed == removed * size);
	t3 = mono_s();
	CHECK(rtier_sweep(rt, 0, &removed, &freed) == 0);
	CHECK(removed == n / 2);
	t4 = mono_s();
	printf("sweepbench: %u puts of %" PRIu64 " B %.3f s (%.2f ms each), "
	       "usage %.3f s, sweep of %u %.3f s, sweep of %u %.3f s\n",
	       n, size, t1 - t0, (t1 - t0) * 1e3 / n, t2 - t1, n - n / 2,
	       t3 - t2, n / 2, t4 - t3);
	free(buf);
	free(crcs);
}

/* Prints how fn's call ended and how long it took. */
#define STALLED(fn, call)                                                      \
	do {                                                                   \
		double t_ = mono_s();                                          \
		int rc_ = (call);                                              \
		printf("stalled: %s %s %.1f\n", fn, ename(rc_ < 0 ? -rc_ : 0), \
		       mono_s() - t_);                                         \
		fflush(stdout);                                                \
	} while (0)

static int count_one(void *arg, const char *name, uint64_t size)
{
	return 0;
}

static void stalled(struct rtier *rt, const char *file)
{
	const char *p = "/s/x";
	uint64_t a = 0, b = 0, size = 1;
	int64_t t = now_ns();
	int found = 0;

	while (access(file, F_OK) != 0)
		usleep(50000);
	STALLED("put", put(rt, p, 1000, 1));
	STALLED("probe", rtier_probe(rt, "/s", 1, &p, &found, &a));
	STALLED("get", get(rt, p, 1000, 1));
	STALLED("list", rtier_list(rt, "/s", count_one, NULL));
	STALLED("touch", rtier_touch(rt, 1, &p, &size, &t));
	STALLED("usage", rtier_usage(rt, &a, &b));
	STALLED("quota", rtier_quota(rt, &a));
	STALLED("sweep_lock", rtier_sweep_lock(rt, "S", 30));
	STALLED("sweep", rtier_sweep(rt, 0, &a, &b));
	STALLED("remove", rtier_remove(rt, p));
}

/* Runs a command needing one or two connections; 2 on bad usage. */
static int run(struct rtier_config *cfg, struct rtier *rt, int argc,
	       char **argv)
{
	struct rtier *rt2 = NULL;
	char err[256] = "";
	uint64_t quota = 0;
	int rc = 0;

	if (strcmp(argv[3], "use") == 0 || strcmp(argv[3], "lock") == 0) {
		/* lock: the same namespace; use: another one. */
		if (strcmp(argv[3], "use") == 0)
			cfg->ns = "kvfs-test-other";
		rc = rtier_open(&rt2, cfg, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "rtier_test: %s\n", err);
			return 1;
		}
	}
	if (strcmp(argv[3], "dirs") == 0 && argc == 4)
		dirs(rt);
	else if (strcmp(argv[3], "use") == 0 && argc == 4)
		use(rt, rt2);
	else if (strcmp(argv[3], "lock") == 0 && argc == 4)
		lock(rt, rt2);
	else if (strcmp(argv[3], "stalled") == 0 && argc == 5) {
		stalled(rt, argv[4]);
		return 0;
	} else if (strcmp(argv[3], "quota") == 0 && argc == 4) {
		rc = rtier_quota(rt, &quota);
		printf("quota: %s%" PRIu64 "\n", rc ? ename(-rc) : "", quota);
	} else if (strcmp(argv[3], "sweepbench") == 0 && argc == 6)
		sweepbench(rt, (unsigned)atoi(argv[4]),
			   strtoull(argv[5], NULL, 10));
	else
		rc = 2;
	rtier_close(rt2);
	if (rc != 2 && strcmp(argv[3], "quota") != 0)
		printf("%s: %d failures\n", argv[3], failures);
	return rc == 2 ? 2 : failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct rtier_config cfg = {0};
	struct rtier *rt;
	char err[256] = "";
	int rc;

	if (argc < 4)
		goto usage;
	cfg.conf = argv[1];
	cfg.pool = argv[2];
	cfg.timeout_s = 10;
	/* These start from an empty namespace of their own. */
	if (strcmp(argv[3], "use") == 0 || strcmp(argv[3], "sweepbench") == 0)
		cfg.ns = argv[3];
	if (strcmp(argv[3], "open") == 0 && argc == 5)
		cfg.timeout_s = (unsigned)atoi(argv[4]);
	if (strcmp(argv[3], "stalled") == 0)
		cfg.timeout_s = 3;
	rc = rtier_open(&rt, &cfg, err, sizeof(err));
	if (strcmp(argv[3], "open") == 0 && argc == 5) {
		printf("open: %s%s%s\n", ename(-rc), rc ? ": " : "",
		       rc ? err : "");
		if (rc == 0)
			rtier_close(rt);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "rtier_test: %s\n", err);
		return 1;
	}
	if (strcmp(argv[3], "check") == 0 && argc == 4) {
		check(rt);
		printf("check: %d failures\n", failures);
	} else if (strcmp(argv[3], "put") == 0 && argc == 7) {
		rc = put(rt, argv[4], strtoull(argv[5], NULL, 10),
			 (unsigned)atoi(argv[6]));
		printf("put: %s\n", ename(-rc));
	} else if (strcmp(argv[3], "get") == 0 && argc == 7) {
		rc = get(rt, argv[4], strtoull(argv[5], NULL, 10),
			 (unsigned)atoi(argv[6]));
		printf("get: %s\n", rc == 0   ? "match"
				    : rc == 1 ? "differs"
					      : ename(-rc));
	} else if ((rc = run(&cfg, rt, argc, argv)) == 2) {
		rtier_close(rt);
		goto usage;
	}
	rtier_close(rt);
	return failures ? 1 : 0;
usage:
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
