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
 * Exit status: 0 when the command ran (the output says how), 1 when a
 * check failed, 2 on bad usage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	if (strcmp(argv[3], "open") == 0 && argc == 5)
		cfg.timeout_s = (unsigned)atoi(argv[4]);
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
	} else {
		rtier_close(rt);
		goto usage;
	}
	rtier_close(rt);
	return failures ? 1 : 0;
usage:
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
