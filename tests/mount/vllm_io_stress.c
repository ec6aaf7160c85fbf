/* SPDX-License-Identifier: MIT */
/*
 * vllm_io's stress mode: 16 writer, 16 reader and one lookup thread over
 * overlapping keys, the hot keys stored by several writers at once (renames
 * replace) while readers load them, then a check that every key holds one
 * whole version and no temp is left. Counts go to stdout as transcript
 * lines, details to stderr. The counters in struct stress are atomics; the
 * rest of it is written before the threads start.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "vllm_io.h"

static const char *prog = "vllm_io";

#include "tclient.h"

struct stress {
	const char *root;
	size_t bs;
	int direct;
	int nw, nr, iters;
	uint32_t nhot, nstable, nkeys;
	pthread_barrier_t bar;
	atomic_uint started[MAX_WRITERS + 1];
	atomic_int writers_left;
	atomic_long loads, loads_absent, stores, skips;
	atomic_long rd_enoent_existing, rd_short, rd_torn, rd_err, rd_ver;
	atomic_long wr_err, lk_enoent, lk_size, lk_err;
};

static void stress_path(const struct stress *s, uint32_t key, char *out,
			size_t n)
{
	char hex[65];
	/* Mix 16/32/64-char names; keys share top-level dirs. */
	unsigned hl = key % 3 == 0 ? 16 : key % 3 == 1 ? 32 : 64;

	key_hex(key / 4, hl, hex);
	block_path(out, n, s->root, hex, key % 4);
}

static int key_always_exists(const struct stress *s, uint32_t key)
{
	return key < s->nstable;
}

struct warg {
	struct stress *s;
	int id;
};

static void *writer_thread(void *arg)
{
	struct warg *a = arg;
	struct stress *s = a->s;
	unsigned char *buf = abuf(s->bs);
	unsigned long long suffix =
		0x1000000000ull + (unsigned long long)a->id * 7919u;
	uint32_t ver = 0;
	char p[PATH_MAX], log[256];
	int i;

	pthread_barrier_wait(&s->bar);
	for (i = 0; i < s->iters; i++) {
		uint32_t key;
		int hot = i % 2 == 0, rc;

		if (hot)
			key = (uint32_t)(i / 2 + a->id) % s->nhot;
		else
			key = s->nhot + (uint32_t)(a->id * 7 + i * 3) %
						(s->nkeys - s->nhot);
		ver++;
		atomic_store(&s->started[a->id], ver);
		fill_block(buf, s->bs, key, (uint32_t)a->id, ver);
		stress_path(s, key, p, sizeof(p));
		/* Hot keys: a writer that passed access() before the others
		 * renamed; the last rename wins. */
		rc = vstore(p, buf, s->bs, s->direct, suffix, !hot, log,
			    sizeof(log));
		if (rc == SKIPPED) {
			atomic_fetch_add(&s->skips, 1);
		} else if (rc < 0) {
			atomic_fetch_add(&s->wr_err, 1);
			fprintf(stderr, "writer %d key %u: %s\n", a->id, key,
				log);
		} else {
			atomic_fetch_add(&s->stores, 1);
		}
	}
	atomic_fetch_sub(&s->writers_left, 1);
	afree(buf, s->bs);
	return NULL;
}

/* Sometimes hold the fd while writers rename over the name. */
static void hold_fd(void *arg)
{
	int n = *(const int *)arg;

	for (int k = 0; k < n; k++)
		sched_yield();
}

/* One reader load of key, checked and counted. */
static void reader_load(struct stress *s, int id, int j, uint32_t key,
			unsigned char *buf)
{
	int direct = s->direct && j % 3 != 0, nyield = j % 4 == 0 ? 20 : 0;
	char p[PATH_MAX], why[256];
	struct eng_load l = {.dirfd = AT_FDCWD,
			     .path = p,
			     .buf = buf,
			     .size = s->bs,
			     .flags = direct ? ENG_DIRECT : 0,
			     .opened = hold_fd,
			     .arg = &nyield};
	uint32_t w, v;
	ssize_t n;

	stress_path(s, key, p, sizeof(p));
	n = eng_load(&l);
	if (n < 0 && strcmp(l.step, "open") == 0) {
		if (n == -ENOENT && !key_always_exists(s, key)) {
			atomic_fetch_add(&s->loads_absent, 1);
			return;
		}
		if (n == -ENOENT)
			atomic_fetch_add(&s->rd_enoent_existing, 1);
		else
			atomic_fetch_add(&s->rd_err, 1);
		fprintf(stderr, "reader %d key %u: open: %s\n", id, key,
			ename((int)-n));
	} else if (n < 0) {
		atomic_fetch_add(&s->rd_err, 1);
		fprintf(stderr, "reader %d key %u: read: %s\n", id, key,
			ename((int)-n));
	} else if ((size_t)n != s->bs) {
		atomic_fetch_add(&s->rd_short, 1);
		fprintf(stderr, "reader %d key %u: read %zd of %zu\n", id, key,
			n, s->bs);
	} else if (check_block(buf, s->bs, key, &w, &v, why, sizeof(why))) {
		atomic_fetch_add(&s->rd_torn, 1);
		fprintf(stderr, "reader %d key %u (direct=%d): %s\n", id, key,
			direct, why);
	} else if (w > (uint32_t)s->nw || v > atomic_load(&s->started[w])) {
		atomic_fetch_add(&s->rd_ver, 1);
		fprintf(stderr,
			"reader %d key %u: version (w%u,v%u) never written\n",
			id, key, w, v);
	} else {
		atomic_fetch_add(&s->loads, 1);
	}
}

static void *reader_thread(void *arg)
{
	struct warg *a = arg;
	struct stress *s = a->s;
	unsigned char *buf = abuf(s->bs);
	uint64_t rnd = 0x5eed0000ull + (uint64_t)a->id;
	int j;

	pthread_barrier_wait(&s->bar);
	/* At least 2 * iters loads, and keep loading while writers write. */
	for (j = 0; j < 2 * s->iters || atomic_load(&s->writers_left) > 0;
	     j++) {
		uint32_t key;

		if (j % 2 == 0)
			key = (uint32_t)(splitmix(&rnd) % s->nhot);
		else
			key = (uint32_t)(splitmix(&rnd) % s->nkeys);
		reader_load(s, a->id, j, key, buf);
	}
	afree(buf, s->bs);
	return NULL;
}

/* vLLM's lookup thread: access(F_OK) and stat over keys that always exist. */
static void *lookup_thread(void *arg)
{
	struct stress *s = arg;
	char p[PATH_MAX];
	uint32_t key = 0;

	pthread_barrier_wait(&s->bar);
	while (atomic_load(&s->writers_left) > 0) {
		struct stat st;

		key = (key + 1) % s->nstable;
		stress_path(s, key, p, sizeof(p));
		if (access(p, F_OK) < 0) {
			if (errno == ENOENT)
				atomic_fetch_add(&s->lk_enoent, 1);
			else
				atomic_fetch_add(&s->lk_err, 1);
			fprintf(stderr, "lookup key %u: access: %s\n", key,
				ename(errno));
		}
		if (stat(p, &st) < 0) {
			if (errno == ENOENT)
				atomic_fetch_add(&s->lk_enoent, 1);
			else
				atomic_fetch_add(&s->lk_err, 1);
			fprintf(stderr, "lookup key %u: stat: %s\n", key,
				ename(errno));
		} else if ((size_t)st.st_size != s->bs) {
			atomic_fetch_add(&s->lk_size, 1);
			fprintf(stderr, "lookup key %u: st_size %lld\n", key,
				(long long)st.st_size);
		}
	}
	return NULL;
}

/* Counts files under dir whose name ends in suffix. */
static long count_suffix(const char *dir, const char *suffix)
{
	DIR *dh = opendir(dir);
	struct dirent *de;
	long n = 0;
	size_t sl = strlen(suffix);

	if (!dh)
		return 0;
	while ((de = readdir(dh))) {
		char p[PATH_MAX];
		struct stat st;
		size_t l = strlen(de->d_name);

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		xsnprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			n += count_suffix(p, suffix);
		else if (l >= sl && !strcmp(de->d_name + l - sl, suffix))
			n++;
	}
	closedir(dh);
	return n;
}

/* The options (-b bytes -w writers -r readers -n iters -d 0|1) into s.
 * Returns 0, or 2 on an unknown option. */
static int stress_opts(struct stress *s, int argc, char **argv)
{
	int opt;

	optind = 1;
	while ((opt = getopt(argc, argv, "b:w:r:n:d:")) != -1) {
		switch (opt) {
		case 'b':
			s->bs = strtoul(optarg, NULL, 0);
			break;
		case 'w':
			s->nw = atoi(optarg);
			break;
		case 'r':
			s->nr = atoi(optarg);
			break;
		case 'n':
			s->iters = atoi(optarg);
			break;
		case 'd':
			s->direct = atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (s->nw < 1 || s->nw > MAX_WRITERS || s->nr < 1 ||
	    s->nr > MAX_WRITERS || s->iters < 1 || s->bs < PAGE)
		die("stress: bad parameters");
	return 0;
}

/* Keys below nstable exist before the threads start (writer nw). */
static void stress_prestore(struct stress *s)
{
	unsigned char *buf = abuf(s->bs);
	char p[PATH_MAX], log[256];

	for (uint32_t key = 0; key < s->nstable; key++) {
		int rc;

		fill_block(buf, s->bs, key, (uint32_t)s->nw, 0);
		stress_path(s, key, p, sizeof(p));
		rc = vstore(p, buf, s->bs, s->direct, 1, 1, log, sizeof(log));
		if (rc != STORED)
			die("stress: pre-store of key %u: %s", key, log);
	}
	afree(buf, s->bs);
}

/* The writers, readers and the lookup thread, released together. */
static void stress_threads(struct stress *s)
{
	pthread_t th[2 * MAX_WRITERS + 1];
	struct warg args[2 * MAX_WRITERS];
	int i, nth = 0;

	pthread_barrier_init(&s->bar, NULL, (unsigned)(s->nw + s->nr + 1));
	atomic_store(&s->writers_left, s->nw);
	for (i = 0; i < s->nw + s->nr; i++) {
		args[i] =
			(struct warg){.s = s, .id = i < s->nw ? i : i - s->nw};
		if (pthread_create(&th[nth++], NULL,
				   i < s->nw ? writer_thread : reader_thread,
				   &args[i]))
			die("pthread_create");
	}
	if (pthread_create(&th[nth++], NULL, lookup_thread, s))
		die("pthread_create");
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&s->bar);
}

/* Final state: every key exists and holds one whole version. */
static void stress_final(struct stress *s)
{
	unsigned char *buf = abuf(s->bs);
	uint32_t key, present = 0, whole = 0;
	char p[PATH_MAX];

	for (key = 0; key < s->nkeys; key++) {
		uint32_t w, v;
		char why[256];
		int sh, ue;
		ssize_t n;

		stress_path(s, key, p, sizeof(p));
		n = vload(p, buf, s->bs, s->direct, &sh, &ue);
		if (n < 0) {
			fprintf(stderr, "final key %u: %s\n", key,
				ename((int)-n));
			continue;
		}
		present++;
		if (sh) {
			fprintf(stderr, "final key %u: short %zd\n", key, n);
			continue;
		}
		if (check_block(buf, s->bs, key, &w, &v, why, sizeof(why))) {
			fprintf(stderr, "final key %u: %s\n", key, why);
			continue;
		}
		whole++;
	}
	afree(buf, s->bs);
	xsnprintf(p, sizeof(p), "%s/%s_r0", s->root, MODEL_DIR);
	printf("stress.final: present=%u/%u whole=%u/%u\n", present, s->nkeys,
	       whole, s->nkeys);
	printf("stress.final: bin-files=%ld tmp-files=%ld\n",
	       count_suffix(p, ".bin"), count_suffix(p, ".tmp"));
}

int do_stress(const char *root, int argc, char **argv)
{
	struct stress *s = calloc(1, sizeof(*s));
	int odirect;

	if (!s)
		die("out of memory");
	*s = (struct stress){.root = root,
			     .bs = 1 * MiB,
			     .nw = 16,
			     .nr = 16,
			     .iters = 24,
			     .nhot = 2,
			     .nstable = 8,
			     .nkeys = 40};
	s->direct = -1;
	if (stress_opts(s, argc, argv)) {
		free(s);
		return 2;
	}
	printf("stress.params: bs=%zu writers=%d readers=%d iters=%d "
	       "keys=%u hot=%u always-present=%u\n",
	       s->bs, s->nw, s->nr, s->iters, s->nkeys, s->nhot, s->nstable);
	odirect = startup(root, "stress.startup");
	if (s->direct < 0)
		s->direct = odirect && s->bs % PAGE == 0;
	printf("stress.direct: %d\n", s->direct);
	stress_prestore(s);
	stress_threads(s);
	stress_final(s);
	printf("stress.writers: errors=%ld\n", atomic_load(&s->wr_err));
	printf("stress.readers: enoent-on-existing=%ld short=%ld torn=%ld "
	       "unknown-version=%ld errors=%ld\n",
	       atomic_load(&s->rd_enoent_existing), atomic_load(&s->rd_short),
	       atomic_load(&s->rd_torn), atomic_load(&s->rd_ver),
	       atomic_load(&s->rd_err));
	printf("stress.lookups: enoent-on-existing=%ld wrong-size=%ld "
	       "errors=%ld\n",
	       atomic_load(&s->lk_enoent), atomic_load(&s->lk_size),
	       atomic_load(&s->lk_err));
	fprintf(stderr,
		"stress info: stores=%ld skipped=%ld whole-loads=%ld "
		"absent-loads=%ld\n",
		atomic_load(&s->stores), atomic_load(&s->skips),
		atomic_load(&s->loads), atomic_load(&s->loads_absent));
	/* A run whose readers never loaded anything proves nothing. */
	if (atomic_load(&s->loads) == 0)
		printf("stress.readers: NO WHOLE LOADS\n");
	free(s);
	return 0;
}
