/* SPDX-License-Identifier: MIT */
/*
 * Store/load throughput with vLLM's exact sequences (kvfs(7), LIFE OF A
 * BLOCK; the sequences are tests/common/engine.c): a benchmark helper, it
 * prints numbers and judges none.
 *
 *   store_load store DIR SIZE NBLOCKS THREADS
 *       access(dest) -> mkdir -p -> open(tmp, O_CREAT|O_EXCL|O_WRONLY|
 *       O_TRUNC|O_DIRECT) -> one write -> close -> rename, per block
 *   store_load load DIR SIZE NBLOCKS THREADS direct|buffered
 *       open(O_RDONLY[|O_DIRECT]) -> one read -> close, per block; the
 *       first 4 bytes of each block are checked
 * Blocks are split into THREADS contiguous ranges, one per thread. Small
 * SIZEs (4096) make the store mode the small-file create benchmark.
 *
 * Prints one line: "OP MiB/s p50_ms p99_ms errors blocks/s first_error",
 * the latencies per block, first_error the errno name of the first failed
 * block ("-" when none; EIO for a short write or read or wrong bytes).
 * Each failed block is also counted; the exit status is 1 when any did.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

struct sl_job {
	const char *dir;
	size_t size;
	int from, to;
	int store;
	int direct;
	double *lat; /* seconds per block, indexed by block */
	long errors;
	int first_err; /* -errno of this thread's first failed block */
};

static double sl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The engine's layout: <dir>/<h3>/<h2>_g0/<hex>.bin, into dest (PATH_MAX
 * bytes). */
static void sl_path(char *dest, const char *dir, int i)
{
	char hex[17];

	snprintf(hex, sizeof(hex), "%016llx",
		 (unsigned long long)(i * 0x9e3779b97f4a7c15ull));
	if (eng_block_path(dest, PATH_MAX, dir, hex, 0) < 0)
		snprintf(dest, PATH_MAX, "/path-too-long");
}

/* The engine's store of block i (tests/common/engine.c). 0 or -errno. */
static int sl_store_one(struct sl_job *j, unsigned char *buf, int i)
{
	char dest[PATH_MAX];
	struct eng_store s = {
		.dirfd = AT_FDCWD,
		.path = dest,
		.buf = buf,
		.size = j->size,
		.flags = ENG_DIRECT | ENG_ACCESS,
		.suffix = (unsigned long long)(pthread_self() % 1000000),
	};
	int rc;

	sl_path(dest, j->dir, i);
	memcpy(buf, &i, sizeof(i));
	rc = eng_store(&s);
	return rc < 0 ? rc : 0;
}

/* The engine's load of block i, its first 4 bytes checked. 0 or -errno
 * (-EIO for a short read or wrong bytes). */
static int sl_load_one(struct sl_job *j, unsigned char *buf, int i)
{
	char dest[PATH_MAX];
	struct eng_load l = {.dirfd = AT_FDCWD,
			     .path = dest,
			     .buf = buf,
			     .size = j->size,
			     .flags = j->direct ? ENG_DIRECT : 0};
	ssize_t n;
	int got;

	sl_path(dest, j->dir, i);
	n = eng_load(&l);
	if (n < 0)
		return (int)n;
	memcpy(&got, buf, sizeof(got));
	return n == (ssize_t)j->size && got == i ? 0 : -EIO;
}

static void *sl_thread(void *arg)
{
	struct sl_job *j = arg;
	unsigned char *buf;

	buf = mmap(NULL, j->size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		j->errors = j->to - j->from;
		j->first_err = -ENOMEM;
		return NULL;
	}
	memset(buf, 0x5a, j->size);
	for (int i = j->from; i < j->to; i++) {
		double t0 = sl_now();
		int rc = j->store ? sl_store_one(j, buf, i)
				  : sl_load_one(j, buf, i);

		j->lat[i] = sl_now() - t0;
		if (rc < 0 && j->errors++ == 0)
			j->first_err = rc;
	}
	munmap(buf, j->size);
	return NULL;
}

static int sl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct sl_job *jobs;
	pthread_t *t;
	double *lat, t0, dt;
	const char *first_err = "-";
	long errors = 0;
	size_t size;
	int n, nthreads, store;

	if (argc < 6 ||
	    (strcmp(argv[1], "store") != 0 && strcmp(argv[1], "load") != 0)) {
		fprintf(stderr, "usage: see the comment in %s\n", __FILE__);
		return 2;
	}
	store = strcmp(argv[1], "store") == 0;
	size = strtoull(argv[3], NULL, 0);
	n = atoi(argv[4]);
	nthreads = atoi(argv[5]);
	jobs = calloc((size_t)nthreads, sizeof(*jobs));
	t = calloc((size_t)nthreads, sizeof(*t));
	lat = calloc((size_t)n, sizeof(*lat));
	if (!jobs || !t || !lat || n <= 0 || nthreads <= 0)
		return 2;
	t0 = sl_now();
	for (int i = 0; i < nthreads; i++) {
		jobs[i] = (struct sl_job){
			.dir = argv[2],
			.size = size,
			.from = (int)((long)n * i / nthreads),
			.to = (int)((long)n * (i + 1) / nthreads),
			.store = store,
			.direct = store ||
				  (argc > 6 && strcmp(argv[6], "direct") == 0),
			.lat = lat};
		pthread_create(&t[i], NULL, sl_thread, &jobs[i]);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		if (jobs[i].errors && !errors)
			first_err = strerrorname_np(-jobs[i].first_err);
		errors += jobs[i].errors;
	}
	dt = sl_now() - t0;
	qsort(lat, (size_t)n, sizeof(*lat), sl_cmp);
	printf("%s %.1f %.3f %.3f %ld %.0f %s\n", argv[1],
	       (double)size * n / (1024.0 * 1024.0) / dt, lat[n / 2] * 1e3,
	       lat[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1] * 1e3, errors,
	       n / dt, first_err ? first_err : "?");
	free(jobs);
	free(t);
	free(lat);
	return errors ? 1 : 0;
}
