/* SPDX-License-Identifier: MIT */
/*
 * Listings of one flat directory while other threads create and unlink
 * names in it, for tests/mount/flatdir.sh: what readdir(3) promises under
 * concurrent changes, checked the same way on the plain directory and on
 * kvfs.
 *
 *   dir_race race DIR STABLE THREADS SECONDS
 *       Makes STABLE files "s<6 digits>" in DIR, then for SECONDS lets
 *       THREADS threads each create "c<thread>_<n>" and unlink the one it
 *       made CR_WINDOW creates before, while the main thread lists DIR over
 *       and over with getdents64(2) and a small buffer (many requests,
 *       each resuming from a cookie). Every pass must show each stable name
 *       exactly once, no name twice, no name that was never made and no
 *       name whose unlink returned before the listing began. Once
 *       per pass it also walks DIR with readdir(3), keeps telldir(3) of
 *       some entries and seekdir(3)s back to each: the next stable name
 *       read must be the one that followed it. When the threads have
 *       stopped, a last listing must hold exactly the names that exist.
 *       Prints "race: ok" (the pass count goes to stderr), or what was
 *       wrong, and exits 1.
 *   dir_race list DIR
 *       Prints the names in DIR ("." and ".." left out), sorted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Names each churn thread keeps at most. */
#define CR_WINDOW 16
#define CR_MAX_THREADS 16
/* getdents64 buffer: a handful of entries per request. */
#define CR_SMALL_BUF 512
/* telldir positions checked per pass. */
#define CR_SEEKS 8

struct cr_churn {
	const char *dir;
	unsigned id;
	atomic_int *stop;
	atomic_ulong made; /* names made; the last CR_WINDOW exist */
	int err;
	pthread_t t;
};

static int cr_fail;

__attribute__((format(printf, 1, 2))) static void cr_error(const char *fmt, ...)
{
	va_list ap;

	/* The first few say what went wrong; a flood says nothing more. */
	if (cr_fail++ >= 10)
		return;
	fputs("race: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

static void cr_path(char *buf, size_t len, const char *dir, unsigned t,
		    unsigned long k)
{
	snprintf(buf, len, "%s/c%u_%lu", dir, t, k);
}

static void *cr_churn_main(void *arg)
{
	struct cr_churn *c = arg;
	char path[4096];

	while (!atomic_load(c->stop)) {
		int fd;

		cr_path(path, sizeof(path), c->dir, c->id, c->made);
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0 || close(fd) < 0) {
			c->err = errno;
			return NULL;
		}
		atomic_fetch_add(&c->made, 1);
		if (c->made > CR_WINDOW) {
			cr_path(path, sizeof(path), c->dir, c->id,
				c->made - CR_WINDOW - 1);
			if (unlink(path) < 0) {
				c->err = errno;
				return NULL;
			}
		}
	}
	return NULL;
}

/* Index of a stable name "s<digits>" below nstable, or -1. */
static long cr_stable(const char *name, long nstable)
{
	char *end;
	long i;

	if (name[0] != 's')
		return -1;
	i = strtol(name + 1, &end, 10);
	return *end || i < 0 || i >= nstable ? -1 : i;
}

/* Whether name is "c<t>_<k>" with t < nthreads. */
static int cr_is_churn(const char *name, unsigned nthreads,
		       unsigned long *t_out, unsigned long *k_out)
{
	char *end;
	unsigned long t, k;

	if (name[0] != 'c')
		return 0;
	t = strtoul(name + 1, &end, 10);
	if (*end != '_' || t >= nthreads)
		return 0;
	k = strtoul(end + 1, &end, 10);
	if (*end)
		return 0;
	*t_out = t;
	*k_out = k;
	return 1;
}

/* A name seen in this pass: a small open-addressing set of strings. */
struct cr_set {
	char (*names)[256];
	size_t nslots;
};

static int cr_set_add(struct cr_set *s, const char *name)
{
	size_t h = 5381;

	for (const char *p = name; *p; p++)
		h = h * 33 + (unsigned char)*p;
	for (size_t i = h % s->nslots;; i = (i + 1) % s->nslots) {
		if (!s->names[i][0]) {
			snprintf(s->names[i], sizeof(s->names[i]), "%s", name);
			return 1;
		}
		if (!strcmp(s->names[i], name))
			return 0;
	}
}

/*
 * One getdents64 pass over dir; with churn stopped (final) the churn names
 * must be exactly each thread's last CR_WINDOW.
 */
static void cr_pass(const char *dir, long nstable, struct cr_churn *ch,
		    unsigned nthreads, struct cr_set *set, int final)
{
	char buf[CR_SMALL_BUF];
	long nseen = 0, nchurn = 0, want = 0;
	unsigned long snap[CR_MAX_THREADS];
	char *seen = calloc((size_t)nstable, 1);
	int fd;

	/* What each thread had made (and so unlinked) before the listing. */
	for (unsigned t = 0; t < nthreads; t++)
		snap[t] = atomic_load(&ch[t].made);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!seen || fd < 0) {
		cr_error("cannot list %s: %s", dir, strerror(errno));
		free(seen);
		return;
	}
	memset(set->names, 0, set->nslots * sizeof(*set->names));
	for (;;) {
		long got = syscall(SYS_getdents64, fd, buf, sizeof(buf));

		if (got <= 0) {
			if (got < 0)
				cr_error("getdents64 %s: %s", dir,
					 strerror(errno));
			break;
		}
		for (long off = 0; off < got;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			unsigned long t, k;
			long i;

			off += d->d_reclen;
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
				continue;
			if (!cr_set_add(set, d->d_name))
				cr_error("%s listed twice", d->d_name);
			i = cr_stable(d->d_name, nstable);
			if (i >= 0) {
				nseen += !seen[i];
				seen[i] = 1;
			} else if (cr_is_churn(d->d_name, nthreads, &t, &k)) {
				if (k >= ch[t].made && final)
					cr_error("%s was never made",
						 d->d_name);
				if (final && k + CR_WINDOW < ch[t].made)
					cr_error("%s was unlinked", d->d_name);
				/* Its unlink returned before the opendir. */
				if (k + CR_WINDOW + 2 <= snap[t])
					cr_error("%s was unlinked before the "
						 "listing began",
						 d->d_name);
				nchurn++;
			} else {
				cr_error("stray name %s", d->d_name);
			}
		}
	}
	close(fd);
	if (nseen != nstable)
		cr_error("%s: a listing missed stable names: %ld missing", dir,
			 nstable - nseen);
	for (unsigned t = 0; final && t < nthreads; t++)
		want += ch[t].made < CR_WINDOW ? (long)ch[t].made : CR_WINDOW;
	if (final && nchurn != want)
		cr_error("%s: the last listing has a wrong count of churn "
			 "names: %ld",
			 dir, nchurn - want);
	free(seen);
}

/* Stable names in readdir order, with their telldir positions. */
static void cr_seeks(const char *dir, long nstable)
{
	long *pos = malloc((size_t)nstable * sizeof(*pos));
	long *idx = malloc((size_t)nstable * sizeof(*idx));
	long n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d || !pos || !idx) {
		cr_error("opendir %s: %s", dir, strerror(errno));
		goto out;
	}
	for (;;) {
		long here = telldir(d);
		long i;

		e = readdir(d);
		if (!e)
			break;
		i = cr_stable(e->d_name, nstable);
		if (i >= 0 && n < nstable) {
			pos[n] = here;
			idx[n++] = i;
		}
	}
	for (int s = 0; s < CR_SEEKS && n > 0; s++) {
		long k = (long)((unsigned long)rand() % (unsigned long)n);

		seekdir(d, pos[k]);
		while ((e = readdir(d)) && cr_stable(e->d_name, nstable) < 0)
			;
		if (!e || cr_stable(e->d_name, nstable) != idx[k]) {
			cr_error("%s: seekdir back to a telldir position gave "
				 "another name (%ld)",
				 dir, k);
			break;
		}
	}
out:
	if (d)
		closedir(d);
	free(pos);
	free(idx);
}

static int cr_race(const char *dir, long nstable, unsigned nthreads,
		   double seconds)
{
	struct cr_churn ch[CR_MAX_THREADS];
	struct cr_set set = {.nslots = 4 * ((size_t)nstable + 64 * CR_WINDOW)};
	atomic_int stop = 0;
	struct timespec t0, now;
	char path[4096];
	long passes = 0;

	set.names = calloc(set.nslots, sizeof(*set.names));
	if (!set.names)
		return 2;
	for (long i = 0; i < nstable; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/s%06ld", dir, i);
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0 || close(fd) < 0) {
			printf("race: cannot create %s: %s\n", path,
			       strerror(errno));
			return 1;
		}
	}
	for (unsigned t = 0; t < nthreads; t++) {
		ch[t] = (struct cr_churn){.dir = dir, .id = t, .stop = &stop};
		if (pthread_create(&ch[t].t, NULL, cr_churn_main, &ch[t]))
			return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		cr_pass(dir, nstable, ch, nthreads, &set, 0);
		cr_seeks(dir, nstable);
		passes++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (!cr_fail &&
		 (double)(now.tv_sec - t0.tv_sec) +
				 (double)(now.tv_nsec - t0.tv_nsec) / 1e9 <
			 seconds);
	atomic_store(&stop, 1);
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(ch[t].t, NULL);
		if (ch[t].err) {
			printf("race: churn thread %u: %s\n", t,
			       strerror(ch[t].err));
			cr_fail = 1;
		}
	}
	if (!cr_fail)
		cr_pass(dir, nstable, ch, nthreads, &set, 1);
	fprintf(stderr, "dir_race: %ld passes\n", passes);
	free(set.names);
	if (!cr_fail)
		printf("race: ok\n");
	return cr_fail;
}

static int cr_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cr_list(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (!d) {
		printf("list: %s\n", strerror(errno));
		return 1;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				return 2;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cr_cmp);
	for (size_t i = 0; i < n; i++) {
		puts(names[i]);
		free(names[i]);
	}
	free(names);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "list"))
		return cr_list(argv[2]);
	if (argc == 6 && !strcmp(argv[1], "race")) {
		long nstable = atol(argv[3]);
		int nthreads = atoi(argv[4]);

		if (nstable > 0 && nstable < 1000000 && nthreads > 0 &&
		    nthreads <= CR_MAX_THREADS)
			return cr_race(argv[2], nstable, (unsigned)nthreads,
				       atof(argv[5]));
	}
	fprintf(stderr, "usage: dir_race race DIR STABLE THREADS SECONDS\n"
			"       dir_race list DIR\n");
	return 2;
}
