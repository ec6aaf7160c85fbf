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
 *   lookup_rate walk DIR THREADS
 *       lstat(2)s every name under DIR, THREADS threads taking directories
 *       from one shared stack, so that a FUSE daemon looks up (and keeps
 *       a node for) each name; prints "walk FILES DIRS seconds".
 */
#include <dirent.h>
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

/* The directories still to read; protected by lock. */
struct lr_walk {
	pthread_mutex_t lock;
	pthread_cond_t more; /* a push, or the walk is over */
	char **dirs;
	size_t ndirs, cap;
	unsigned busy; /* threads reading a directory */
	long nfiles, nsubdirs;
	int err; /* first errno, 0 when none */
};

/* Pushes path (taken over); 0 or -ENOMEM. Called with the lock held. */
static int lr_push(struct lr_walk *w, char *path)
{
	if (w->ndirs == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 1024;
		char **d = realloc(w->dirs, cap * sizeof(*d));

		if (!d) {
			free(path);
			return -ENOMEM;
		}
		w->dirs = d;
		w->cap = cap;
	}
	w->dirs[w->ndirs++] = path;
	pthread_cond_signal(&w->more);
	return 0;
}

/* Reads one directory: counts and lstats its names, pushes its subdirs. */
static int lr_walk_dir(struct lr_walk *w, const char *path)
{
	long nfiles = 0;
	struct dirent *e;
	int rc = 0;
	DIR *d;

	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		char *sub;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			rc = -errno;
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			nfiles++;
			continue;
		}
		if (asprintf(&sub, "%s/%s", path, e->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		pthread_mutex_lock(&w->lock);
		w->nsubdirs++;
		rc = lr_push(w, sub);
		pthread_mutex_unlock(&w->lock);
		if (rc < 0)
			break;
	}
	closedir(d);
	pthread_mutex_lock(&w->lock);
	w->nfiles += nfiles;
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static void *lr_walk_thread(void *arg)
{
	struct lr_walk *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		char *path;
		int rc;

		while (w->ndirs == 0 && w->busy > 0 && !w->err)
			pthread_cond_wait(&w->more, &w->lock);
		if (w->ndirs == 0 || w->err)
			break;
		path = w->dirs[--w->ndirs];
		w->busy++;
		pthread_mutex_unlock(&w->lock);
		rc = lr_walk_dir(w, path);
		if (rc < 0)
			fprintf(stderr, "lookup_rate: %s: %s\n", path,
				strerror(-rc));
		free(path);
		pthread_mutex_lock(&w->lock);
		w->busy--;
		if (rc < 0 && !w->err)
			w->err = -rc;
	}
	/* Whoever leaves wakes the others: the stack may be empty for good. */
	pthread_cond_broadcast(&w->more);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int lr_walk(const char *dir, int nthreads)
{
	struct lr_walk w = {.lock = PTHREAD_MUTEX_INITIALIZER,
			    .more = PTHREAD_COND_INITIALIZER};
	pthread_t *t = calloc((size_t)nthreads, sizeof(*t));
	char *root = strdup(dir);
	double t0 = lr_now();

	if (!t || !root || nthreads <= 0 || lr_push(&w, root) < 0) {
		free(t);
		return 1;
	}
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, lr_walk_thread, &w);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (size_t i = 0; i < w.ndirs; i++)
		free(w.dirs[i]);
	free(w.dirs);
	free(t);
	printf("walk %ld %ld %.2f\n", w.nfiles, w.nsubdirs, lr_now() - t0);
	return w.err ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "create") == 0)
		return lr_create(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 4 && strcmp(argv[1], "walk") == 0)
		return lr_walk(argv[2], atoi(argv[3]));
	if (argc == 8 && strcmp(argv[1], "rate") == 0)
		return lr_rate(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5],
			       atoi(argv[6]), atoi(argv[7]));
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
