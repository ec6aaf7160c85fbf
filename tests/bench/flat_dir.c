/* SPDX-License-Identifier: MIT */
/*
 * One large flat directory, the layout of the engines that keep every
 * block in one directory (LMCache's local disk and fs:// tiers, SGLang's
 * file tier): how fast it is listed and how fast random names in it are
 * stat(2)ed. A benchmark helper for scripts/bench: it prints numbers and
 * never judges them, but it checks its answers (a listing must hold every
 * name exactly once, a stat must find the name) and exits 1 on a wrong one.
 *
 *   flat_dir create DIR N THREADS
 *       makes the N empty files DIR/<name of i>, i < N, THREADS threads
 *       (creat(2) and close(2) each); prints "create N files in T s"
 *   flat_dir list DIR N PASSES
 *       lists DIR PASSES times, each pass opendir, getdents64(2) with a
 *       buffer of FD_GETDENTS bytes (glibc's readdir(3) buffer) until the
 *       end, closedir; prints "list ENTRIES entries in MS ms" per pass,
 *       "." and ".." not counted. A pass that does not see exactly the N
 *       names, each once, is an error.
 *   flat_dir stat DIR N COUNT THREADS
 *       stat(2)s COUNT names drawn at random (the same every run) from the
 *       N, THREADS threads; prints "stat COUNT names in MS ms: R ops/s".
 *       A name that is not found is an error.
 *
 * Names: the 32 hexadecimal digits of two 64-bit mixes of i, then ".data"
 * (LMCache's "<key>.data"), so that their order has nothing to do with
 * the order they were made in, as with an engine's hashes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FD_GETDENTS 32768
#define FD_NAME_LEN 37 /* 32 hex digits and ".data" */
#define FD_MAX_THREADS 64

struct fd_job {
	const char *dir;
	uint64_t n;
	uint64_t count;
	unsigned nthreads;
	unsigned id;
	atomic_uint_fast64_t *next; /* create: the next i to make */
	long errors;
	pthread_t t;
};

static double fd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t fd_mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fd_name(char *buf, uint64_t i)
{
	snprintf(buf, FD_NAME_LEN + 1, "%016" PRIx64 "%016" PRIx64 ".data",
		 fd_mix(i), fd_mix(i ^ 0x5555555555555555ULL));
}

static void *fd_create_thread(void *arg)
{
	struct fd_job *j = arg;
	char path[4096], name[FD_NAME_LEN + 1];
	uint64_t i;

	while ((i = atomic_fetch_add(j->next, 1)) < j->n) {
		int fd;

		fd_name(name, i);
		snprintf(path, sizeof(path), "%s/%s", j->dir, name);
		fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0 || close(fd) < 0) {
			if (j->errors++ == 0)
				fprintf(stderr, "flat_dir: %s: %s\n", path,
					strerror(errno));
		}
	}
	return NULL;
}

static void *fd_stat_thread(void *arg)
{
	struct fd_job *j = arg;
	char path[4096], name[FD_NAME_LEN + 1];
	uint64_t r = fd_mix(0x1234 + j->id);

	for (uint64_t k = j->id; k < j->count; k += j->nthreads) {
		struct stat st;

		r = fd_mix(r);
		fd_name(name, r % j->n);
		snprintf(path, sizeof(path), "%s/%s", j->dir, name);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
			if (j->errors++ == 0)
				fprintf(stderr, "flat_dir: stat %s: %s\n", path,
					strerror(errno));
		}
	}
	return NULL;
}

static long fd_run(struct fd_job *jobs, unsigned nthreads, void *(*fn)(void *))
{
	long errors = 0;

	for (unsigned t = 0; t < nthreads; t++)
		if (pthread_create(&jobs[t].t, NULL, fn, &jobs[t]) != 0) {
			fprintf(stderr, "flat_dir: pthread_create failed\n");
			exit(2);
		}
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(jobs[t].t, NULL);
		errors += jobs[t].errors;
	}
	return errors;
}

/* The slot of name in seen[] (open addressing on its hash), or -1. */
static int64_t fd_slot(uint64_t *seen, uint64_t nslots, const char *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h |= 1; /* 0 marks an empty slot */
	for (uint64_t s = h % nslots;; s = (s + 1) % nslots) {
		if (seen[s] == 0) {
			seen[s] = h;
			return (int64_t)s;
		}
		if (seen[s] == h)
			return -1;
	}
}

/* One listing pass; returns the entries seen or -1 on an error. */
static int64_t fd_list_pass(const char *dir, uint64_t n, uint64_t *seen,
			    uint64_t nslots, char *buf)
{
	int64_t entries = 0;
	long dups = 0, strays = 0;
	int fd;

	memset(seen, 0, nslots * sizeof(*seen));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "flat_dir: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (;;) {
		long got = syscall(SYS_getdents64, fd, buf, FD_GETDENTS);

		if (got < 0) {
			fprintf(stderr, "flat_dir: getdents64 %s: %s\n", dir,
				strerror(errno));
			close(fd);
			return -1;
		}
		if (got == 0)
			break;
		for (long off = 0; off < got;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);

			off += d->d_reclen;
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
				continue;
			entries++;
			if (strlen(d->d_name) != FD_NAME_LEN)
				strays++;
			else if (fd_slot(seen, nslots, d->d_name) < 0)
				dups++;
		}
	}
	close(fd);
	if (dups || strays || (uint64_t)entries != n) {
		fprintf(stderr,
			"flat_dir: %s listed %" PRId64 " entries, %" PRIu64
			" expected, %ld listed twice, %ld strays\n",
			dir, entries, n, dups, strays);
		return -1;
	}
	return entries;
}

static int fd_list(const char *dir, uint64_t n, int passes)
{
	uint64_t nslots = 2 * n + 1;
	uint64_t *seen = malloc(nslots * sizeof(*seen));
	char *buf = malloc(FD_GETDENTS);
	int rc = 0;

	if (!seen || !buf) {
		fprintf(stderr, "flat_dir: out of memory\n");
		return 2;
	}
	for (int p = 0; p < passes; p++) {
		double t0 = fd_now();
		int64_t e = fd_list_pass(dir, n, seen, nslots, buf);

		if (e < 0) {
			rc = 1;
			break;
		}
		printf("list %" PRId64 " entries in %.1f ms\n", e,
		       (fd_now() - t0) * 1e3);
		fflush(stdout);
	}
	free(seen);
	free(buf);
	return rc;
}

static int fd_usage(void)
{
	fprintf(stderr, "usage: flat_dir create DIR N THREADS\n"
			"       flat_dir list DIR N PASSES\n"
			"       flat_dir stat DIR N COUNT THREADS\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct fd_job jobs[FD_MAX_THREADS];
	atomic_uint_fast64_t next = 0;
	unsigned nthreads;
	double t0;
	long errors;
	uint64_t n;

	if (argc < 5)
		return fd_usage();
	n = strtoull(argv[3], NULL, 10);
	if (n == 0)
		return fd_usage();
	if (!strcmp(argv[1], "list"))
		return fd_list(argv[2], n, atoi(argv[4]));
	nthreads = (unsigned)atoi(argv[!strcmp(argv[1], "stat") ? 5 : 4]);
	if ((strcmp(argv[1], "create") && strcmp(argv[1], "stat")) ||
	    (!strcmp(argv[1], "stat") && argc < 6) || nthreads == 0 ||
	    nthreads > FD_MAX_THREADS)
		return fd_usage();
	for (unsigned t = 0; t < nthreads; t++)
		jobs[t] = (struct fd_job){.dir = argv[2],
					  .n = n,
					  .nthreads = nthreads,
					  .id = t,
					  .next = &next};
	t0 = fd_now();
	if (!strcmp(argv[1], "create")) {
		errors = fd_run(jobs, nthreads, fd_create_thread);
		printf("create %" PRIu64 " files in %.3f s\n", n,
		       fd_now() - t0);
	} else {
		uint64_t count = strtoull(argv[4], NULL, 10);
		double ms;

		for (unsigned t = 0; t < nthreads; t++)
			jobs[t].count = count;
		errors = fd_run(jobs, nthreads, fd_stat_thread);
		ms = (fd_now() - t0) * 1e3;
		printf("stat %" PRIu64 " names in %.1f ms: %.0f ops/s\n", count,
		       ms, ms > 0 ? (double)count / ms * 1e3 : 0);
	}
	if (errors)
		fprintf(stderr, "flat_dir: %ld errors\n", errors);
	return errors ? 1 : 0;
}
