/* SPDX-License-Identifier: MIT */
/*
 * Lookup rate: how many access(F_OK) calls per second a directory tree
 * answers, the engine's "is this block here?" question. A benchmark, not a
 * test: it prints numbers and never judges them.
 *
 *   lookup_rate create DIR NDIRS NFILES
 *       makes DIR/dNNN/fNNNNNNN.bin (empty), NFILES spread over NDIRS
 *   lookup_rate rate DIR NDIRS NFILES KIND THREADS PASSES
 *       KIND present: the names made by create; absent: names never made.
 *       Runs PASSES passes over all names split across THREADS threads and
 *       prints "KIND THREADS ops/s" for the pass (the first pass is the
 *       cold one when the caches were dropped just before, later passes are
 *       warm). Prints each pass on its own line.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct lr_job {
	const char *dir;
	int ndirs;
	int from, to;
	int absent;
	long errors;
};

static void lr_name(char *buf, size_t len, const char *dir, int ndirs, int i,
		    int absent)
{
	snprintf(buf, len, "%s/d%03d/%s%07d.bin", dir, i % ndirs,
		 absent ? "a" : "f", i);
}

static void *lr_thread(void *arg)
{
	struct lr_job *j = arg;
	char path[4096];

	for (int i = j->from; i < j->to; i++) {
		int ok;

		lr_name(path, sizeof(path), j->dir, j->ndirs, i, j->absent);
		ok = access(path, F_OK) == 0;
		if (ok == j->absent)
			j->errors++;
	}
	return NULL;
}

static double lr_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int lr_create(const char *dir, int ndirs, int nfiles)
{
	char path[4096];

	for (int d = 0; d < ndirs; d++) {
		snprintf(path, sizeof(path), "%s/d%03d", dir, d);
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			perror(path);
			return 1;
		}
	}
	for (int i = 0; i < nfiles; i++) {
		int fd;

		lr_name(path, sizeof(path), dir, ndirs, i, 0);
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		if (fd < 0) {
			perror(path);
			return 1;
		}
		close(fd);
	}
	return 0;
}

static int lr_rate(const char *dir, int ndirs, int nfiles, const char *kind,
		   int nthreads, int passes)
{
	int absent = strcmp(kind, "absent") == 0;
	struct lr_job *jobs = calloc((size_t)nthreads, sizeof(*jobs));
	pthread_t *t = calloc((size_t)nthreads, sizeof(*t));

	if (!jobs || !t)
		return 1;
	for (int p = 0; p < passes; p++) {
		long errors = 0;
		double t0 = lr_now(), dt;

		for (int i = 0; i < nthreads; i++) {
			jobs[i] = (struct lr_job){
				.dir = dir,
				.ndirs = ndirs,
				.from = (int)((long)nfiles * i / nthreads),
				.to = (int)((long)nfiles * (i + 1) / nthreads),
				.absent = absent};
			pthread_create(&t[i], NULL, lr_thread, &jobs[i]);
		}
		for (int i = 0; i < nthreads; i++) {
			pthread_join(t[i], NULL);
			errors += jobs[i].errors;
		}
		dt = lr_now() - t0;
		printf("%s %d %.0f%s\n", kind, nthreads, nfiles / dt,
		       errors ? " WRONG-ANSWERS" : "");
	}
	free(jobs);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "create") == 0)
		return lr_create(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 8 && strcmp(argv[1], "rate") == 0)
		return lr_rate(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5],
			       atoi(argv[6]), atoi(argv[7]));
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
