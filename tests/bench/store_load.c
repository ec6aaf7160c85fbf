/* SPDX-License-Identifier: MIT */
/*
 * Store/load throughput with vLLM's exact sequences (kvfs(7), LIFE OF A
 * BLOCK; the sequences are tests/common/engine.c): a benchmark helper, it
 * prints numbers and judges none.
 *
 *   store_load [-u OLDDIR] [-a THREADS] [-s [-c CMD]] store DIR SIZE
 *              NBLOCKS THREADS
 *       access(dest) -> mkdir -p -> open(tmp, O_CREAT|O_EXCL|O_WRONLY|
 *       O_TRUNC|O_DIRECT) -> one write -> close -> rename, per block
 *   store_load [-l BATCH [-w MS]] [-v] load DIR SIZE NBLOCKS THREADS
 *              direct|buffered
 *       open(O_RDONLY[|O_DIRECT]) -> one read -> close, per block; the
 *       first 4 bytes of each block are checked
 *       -l BATCH  lookup, then load, as an engine's lookup manager and
 *                 load job: each thread takes its blocks BATCH at a
 *                 time, access(F_OK)s the batch, then loads it; the
 *                 latencies are the loads', MiB/s is over the time
 *                 spent in both (a thread's; the slowest thread's)
 *       -w MS     with -l, the engine's scheduler step between a batch's
 *                 lookups and its loads: the thread sleeps MS ms, time
 *                 that is the engine's and not counted
 *       -v        every byte of each block checked (the buffer is
 *                 cleared before each load), outside the timed spans
 * Blocks are split into THREADS contiguous ranges, one per thread. Small
 * SIZEs (4096) make the store mode the small-file create benchmark.
 *
 * Store options:
 *   -u OLDDIR  deletes going on, as an engine evicting while it stores:
 *              after storing block i, the thread unlinks block i of the
 *              tree OLDDIR (an earlier store of as many blocks); a failed
 *              unlink is that block's error
 *   -a THREADS right after the last store (before any sync), one
 *              access(F_OK) pass over the NBLOCKS names just stored, with
 *              THREADS threads: the first lookup of a just-stored block;
 *              a missing name is an error. Its time is not store time.
 *   -s         the run ends when syncfs(2) on DIR returns, so that the
 *              store figures measure what reached the disk, not what was
 *              buffered
 *   -c CMD     after that syncfs, runs CMD with /bin/sh -c (a FUSE
 *              daemon's own sync, which syncfs cannot reach) and ends the
 *              run when it exits; a non-zero status is an error. What
 *              CMD prints goes to standard error.
 *
 * Prints one line: "OP MiB/s p50_ms p99_ms errors blocks/s first_error
 * sync_ms access_ops_s". MiB/s and blocks/s are over the stores plus the
 * final sync (-s, -c); sync_ms is that sync's share ("-" without -s);
 * access_ops_s the -a pass's rate ("-" without -a). The latencies are per
 * block: for a load the whole sequence, for a store from the temp's open
 * to the rename's return (create, write, close, rename; the unlink of -u
 * is not in it). first_error is the errno name of the first failed block
 * or step ("-" when none; EIO for a short write or read or wrong bytes;
 * "sync-cmd" when CMD failed). Each failed block is also counted; the exit
 * status is 1 when any did.
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

enum sl_op { SL_STORE, SL_LOAD, SL_ACCESS };

struct sl_job {
	const char *dir;
	const char *old; /* -u: the tree whose blocks go while storing */
	size_t size;
	int from, to;
	enum sl_op op;
	int direct;
	int batch;   /* -l: blocks looked up before they are loaded */
	int step_ms; /* -w */
	int verify;  /* -v */
	double busy; /* -l: seconds in lookups and loads */
	double *lat; /* seconds per block, indexed by block */
	long errors;
	int first_err; /* -errno of this thread's first failed block */
};

/* One pass of NBLOCKS over THREADS threads: what it needs and what it
 * found. */
struct sl_pass {
	const char *dir, *old;
	size_t size;
	int n, nthreads;
	enum sl_op op;
	int direct;
	int batch;
	int step_ms;
	int verify;
	double busy; /* -l: the largest of the threads' */
	double *lat;
	long errors;
	const char *first_err; /* errno name of the first failure, or "-" */
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

/* eng_store's fill hook: the time of the temp's open. */
static void sl_mark(void *arg)
{
	*(double *)arg = sl_now();
}

/* The engine's store of block i (tests/common/engine.c), then with -u the
 * unlink of the old tree's block i. *lat: from the temp's open to the
 * rename's return (the whole sequence when it stopped before the open).
 * 0 or -errno. */
static int sl_store_one(struct sl_job *j, unsigned char *buf, int i,
			double *lat)
{
	char dest[PATH_MAX];
	double t_open = sl_now();
	struct eng_store s = {
		.dirfd = AT_FDCWD,
		.path = dest,
		.buf = buf,
		.size = j->size,
		.flags = ENG_DIRECT | ENG_ACCESS,
		.suffix = (unsigned long long)(pthread_self() % 1000000),
		.fill = sl_mark,
		.arg = &t_open,
	};
	int rc;

	sl_path(dest, j->dir, i);
	memcpy(buf, &i, sizeof(i));
	rc = eng_store(&s);
	*lat = sl_now() - t_open;
	if (rc < 0)
		return rc;
	if (j->old) {
		sl_path(dest, j->old, i);
		if (unlink(dest) < 0)
			return -errno;
	}
	return 0;
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

/* -v: whether buf holds block i as sl_store_one() wrote it, byte for byte
 * (its number, then the 0x5a fill). */
static int sl_bytes_ok(const unsigned char *buf, size_t size, int i)
{
	int got;

	memcpy(&got, buf, sizeof(got));
	if (got != i)
		return 0;
	for (size_t k = sizeof(got); k < size; k++)
		if (buf[k] != 0x5a)
			return 0;
	return 1;
}

/* -w: sleeps ms milliseconds, whole. */
static void sl_sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* access(F_OK) of block i, which must be there. 0 or -errno. */
static int sl_access_one(struct sl_job *j, int i)
{
	char dest[PATH_MAX];

	sl_path(dest, j->dir, i);
	return access(dest, F_OK) < 0 ? -errno : 0;
}

static void *sl_thread(void *arg)
{
	struct sl_job *j = arg;
	unsigned char *buf = NULL;

	if (j->op != SL_ACCESS) {
		buf = mmap(NULL, j->size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED) {
			j->errors = j->to - j->from;
			j->first_err = -ENOMEM;
			return NULL;
		}
		memset(buf, 0x5a, j->size);
	}
	for (int i = j->from; i < j->to; i++) {
		double t0;
		int rc;

		/* -l: the batch's lookups first, as the lookup manager's. */
		if (j->op == SL_LOAD && j->batch &&
		    (i - j->from) % j->batch == 0) {
			t0 = sl_now();
			for (int k = i; k < j->to && k < i + j->batch; k++)
				if ((rc = sl_access_one(j, k)) < 0 &&
				    j->errors++ == 0)
					j->first_err = rc;
			j->busy += sl_now() - t0;
			if (j->step_ms)
				sl_sleep_ms(j->step_ms);
		}
		if (j->verify)
			memset(buf, 0, j->size);
		t0 = sl_now();
		switch (j->op) {
		case SL_STORE:
			rc = sl_store_one(j, buf, i, &j->lat[i]);
			break;
		case SL_LOAD:
			rc = sl_load_one(j, buf, i);
			j->lat[i] = sl_now() - t0;
			j->busy += j->lat[i];
			if (rc == 0 && j->verify &&
			    !sl_bytes_ok(buf, j->size, i))
				rc = -EIO;
			break;
		default:
			rc = sl_access_one(j, i);
			j->lat[i] = sl_now() - t0;
			break;
		}
		if (rc < 0 && j->errors++ == 0)
			j->first_err = rc;
	}
	if (buf)
		munmap(buf, j->size);
	return NULL;
}

/* Runs one pass: p->n blocks split across p->nthreads threads. 0, or -1
 * when the threads could not be made. */
static int sl_run_pass(struct sl_pass *p)
{
	struct sl_job *jobs = calloc((size_t)p->nthreads, sizeof(*jobs));
	pthread_t *t = calloc((size_t)p->nthreads, sizeof(*t));

	if (!jobs || !t) {
		free(jobs);
		free(t);
		return -1;
	}
	for (int i = 0; i < p->nthreads; i++) {
		jobs[i] = (struct sl_job){
			.dir = p->dir,
			.old = p->old,
			.size = p->size,
			.from = (int)((long)p->n * i / p->nthreads),
			.to = (int)((long)p->n * (i + 1) / p->nthreads),
			.op = p->op,
			.direct = p->direct,
			.batch = p->batch,
			.step_ms = p->step_ms,
			.verify = p->verify,
			.lat = p->lat};
		pthread_create(&t[i], NULL, sl_thread, &jobs[i]);
	}
	for (int i = 0; i < p->nthreads; i++) {
		pthread_join(t[i], NULL);
		if (jobs[i].busy > p->busy)
			p->busy = jobs[i].busy;
		if (jobs[i].errors && !p->errors)
			p->first_err = strerrorname_np(-jobs[i].first_err);
		p->errors += jobs[i].errors;
	}
	if (!p->first_err)
		p->first_err = "?";
	free(jobs);
	free(t);
	return 0;
}

/* Runs cmd with /bin/sh -c, its standard output sent to our standard
 * error: ours carries the one result line. Its status as system(3)'s. */
static int sl_system(const char *cmd)
{
	int out = dup(STDOUT_FILENO), rc;

	fflush(stdout);
	if (out < 0)
		return -1;
	if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		close(out);
		return -1;
	}
	rc = system(cmd);
	dup2(out, STDOUT_FILENO);
	close(out);
	return rc;
}

/* The final sync: syncfs(2) on dir, then cmd (may be NULL). Counts a
 * failure into p. */
static void sl_sync(struct sl_pass *p, const char *cmd)
{
	const char *err = NULL;
	int fd = open(p->dir, O_RDONLY | O_DIRECTORY);

	if (fd < 0 || syncfs(fd) < 0)
		err = strerrorname_np(errno) ? strerrorname_np(errno) : "?";
	if (fd >= 0)
		close(fd);
	if (!err && cmd && sl_system(cmd) != 0)
		err = "sync-cmd";
	if (err && p->errors++ == 0)
		p->first_err = err;
}

static int sl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int sl_usage(void)
{
	fprintf(stderr, "usage: see the comment in %s\n", __FILE__);
	return 2;
}

int main(int argc, char **argv)
{
	struct sl_pass p = {.first_err = "-"}, a = {.first_err = "-"};
	const char *cmd = NULL;
	double t0, dt, dsync = -1, rate_a = -1;
	char sync_ms[32] = "-", access_rate[32] = "-";
	int opt, sync = 0, athreads = 0, n;

	while ((opt = getopt(argc, argv, "+u:a:sc:l:w:v")) != -1) {
		switch (opt) {
		case 'w':
			p.step_ms = atoi(optarg);
			if (p.step_ms <= 0)
				return sl_usage();
			break;
		case 'v':
			p.verify = 1;
			break;
		case 'l':
			p.batch = atoi(optarg);
			if (p.batch <= 0)
				return sl_usage();
			break;
		case 'u':
			p.old = optarg;
			break;
		case 'a':
			athreads = atoi(optarg);
			break;
		case 's':
			sync = 1;
			break;
		case 'c':
			cmd = optarg;
			break;
		default:
			return sl_usage();
		}
	}
	argv += optind - 1;
	argc -= optind - 1;
	if (argc < 6 ||
	    (strcmp(argv[1], "store") != 0 && strcmp(argv[1], "load") != 0))
		return sl_usage();
	p.op = strcmp(argv[1], "store") == 0 ? SL_STORE : SL_LOAD;
	p.dir = argv[2];
	p.size = strtoull(argv[3], NULL, 0);
	p.n = n = atoi(argv[4]);
	p.nthreads = atoi(argv[5]);
	p.direct = p.op == SL_STORE ||
		   (argc > 6 && strcmp(argv[6], "direct") == 0);
	if (n <= 0 || p.nthreads <= 0 || athreads < 0 ||
	    (p.op != SL_STORE && (p.old || athreads || sync || cmd)) ||
	    (p.op != SL_LOAD && (p.batch || p.verify)) ||
	    (p.step_ms && !p.batch))
		return sl_usage();
	p.lat = calloc((size_t)n, sizeof(*p.lat));
	a.lat = calloc((size_t)n, sizeof(*a.lat));
	if (!p.lat || !a.lat)
		return 2;
	t0 = sl_now();
	if (sl_run_pass(&p) < 0)
		return 2;
	dt = p.batch ? p.busy : sl_now() - t0;
	if (athreads) {
		a = (struct sl_pass){.dir = p.dir,
				     .n = n,
				     .nthreads = athreads,
				     .op = SL_ACCESS,
				     .lat = a.lat};
		t0 = sl_now();
		if (sl_run_pass(&a) < 0)
			return 2;
		rate_a = n / (sl_now() - t0);
		if (a.errors && !p.errors)
			p.first_err = a.first_err;
		p.errors += a.errors;
	}
	if (sync) {
		t0 = sl_now();
		sl_sync(&p, cmd);
		dsync = sl_now() - t0;
		dt += dsync;
		snprintf(sync_ms, sizeof(sync_ms), "%.1f", dsync * 1e3);
	}
	if (rate_a >= 0)
		snprintf(access_rate, sizeof(access_rate), "%.0f", rate_a);
	qsort(p.lat, (size_t)n, sizeof(*p.lat), sl_cmp);
	printf("%s %.1f %.3f %.3f %ld %.0f %s %s %s\n", argv[1],
	       (double)p.size * n / (1024.0 * 1024.0) / dt, p.lat[n / 2] * 1e3,
	       p.lat[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1] * 1e3,
	       p.errors, n / dt, p.first_err, sync_ms, access_rate);
	free(p.lat);
	free(a.lat);
	return p.errors ? 1 : 0;
}
