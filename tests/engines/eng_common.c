/* SPDX-License-Identifier: MIT */
/*
 * The engine clients' shared code (see eng_common.h): block format, I/O
 * loops, listings and the race harness. Not here: any engine's syscall
 * sequence (each client file has its own).
 */
#include "eng_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *prog = "engines";
#include "tclient.h"

#define EC_MAGIC 0x31454e49474e4543ull /* "CENGINE1" little-endian */

struct ec_hdr {
	uint64_t magic;
	uint32_t key;
	uint32_t writer;
	uint32_t version;
	uint32_t page;
	uint64_t size;
};

void ec_fmt(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	if (rc < 0 || (size_t)rc >= n) {
		fprintf(stderr, "name too long: %s\n", fmt);
		abort();
	}
}

static void ec_fill_page(unsigned char *p, size_t len, uint32_t key,
			 uint32_t writer, uint32_t version, uint32_t page,
			 uint64_t size)
{
	struct ec_hdr h = {EC_MAGIC, key, writer, version, page, size};
	uint64_t s = ((uint64_t)key << 40) ^ ((uint64_t)writer << 32) ^
		     ((uint64_t)version << 20) ^ page ^ (size << 7);
	size_t hl = len < sizeof(h) ? len : sizeof(h);

	memcpy(p, &h, hl);
	tc_fill_stream(p + hl, len - hl, &s);
}

void ec_fill(unsigned char *b, size_t size, uint32_t key, uint32_t writer,
	     uint32_t version)
{
	for (size_t off = 0; off < size; off += EC_PAGE) {
		size_t len = size - off < EC_PAGE ? size - off : EC_PAGE;

		ec_fill_page(b + off, len, key, writer, version,
			     (uint32_t)(off / EC_PAGE), size);
	}
}

int ec_check(const unsigned char *b, size_t size, uint32_t key, uint32_t *w,
	     uint32_t *v, char *why, size_t why_len)
{
	unsigned char exp[EC_PAGE];
	struct ec_hdr h0;

	if (size < sizeof(h0)) {
		ec_fmt(why, why_len, "block of %zu bytes has no header", size);
		return -1;
	}
	memcpy(&h0, b, sizeof(h0));
	if (h0.magic != EC_MAGIC || h0.key != key || h0.page != 0 ||
	    h0.size != size) {
		ec_fmt(why, why_len,
		       "page 0 header: magic %016llx key %u (want %u) size "
		       "%llu (want %zu)",
		       (unsigned long long)h0.magic, h0.key, key,
		       (unsigned long long)h0.size, size);
		return -1;
	}
	for (size_t off = 0; off < size; off += EC_PAGE) {
		size_t len = size - off < EC_PAGE ? size - off : EC_PAGE;
		struct ec_hdr h;

		ec_fill_page(exp, len, key, h0.writer, h0.version,
			     (uint32_t)(off / EC_PAGE), size);
		if (memcmp(exp, b + off, len) == 0)
			continue;
		memset(&h, 0, sizeof(h));
		memcpy(&h, b + off, len < sizeof(h) ? len : sizeof(h));
		ec_fmt(why, why_len,
		       "page %zu is not version (w%u,v%u): header says key "
		       "%u w%u v%u page %u magic %016llx",
		       off / EC_PAGE, h0.writer, h0.version, h.key, h.writer,
		       h.version, h.page, (unsigned long long)h.magic);
		return -1;
	}
	*w = h0.writer;
	*v = h0.version;
	return 0;
}

void ec_hex(uint32_t key, unsigned len, char *out)
{
	uint64_t s = 0x656e67696e657300ull ^ key;

	for (unsigned i = 0; i < len; i += 16)
		ec_fmt(out + i, 17, "%016llx",
		       (unsigned long long)splitmix(&s));
	out[len] = '\0';
}

ssize_t ec_read_full(int fd, void *buf, size_t n, off_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = off >= 0 ? pread(fd, (char *)buf + got, n - got,
					     off + (off_t)got)
				     : read(fd, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

ssize_t ec_write_full(int fd, const void *buf, size_t n, off_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = off >= 0 ? pwrite(fd, (const char *)buf + done,
					      n - done, off + (off_t)done)
				     : write(fd, (const char *)buf + done,
					     n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return (ssize_t)n;
}

void ec_print_stat(const char *tag, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		printf("%s: %s\n", tag, ename(errno));
	else
		printf("%s: OK size=%lld\n", tag, (long long)st.st_size);
}

void *ec_alloc(size_t n)
{
	return abuf(n);
}

void ec_free(void *p, size_t n)
{
	afree(p, n);
}

/* ---- listings ---- */

struct ec_names {
	char **v;
	size_t n, cap;
};

static void ec_names_add(struct ec_names *ns, const char *s)
{
	if (ns->n == ns->cap) {
		ns->cap = ns->cap ? 2 * ns->cap : 64;
		ns->v = realloc(ns->v, ns->cap * sizeof(*ns->v));
		if (!ns->v)
			die("out of memory");
	}
	ns->v[ns->n] = strdup(s);
	if (!ns->v[ns->n++])
		die("out of memory");
}

static int ec_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects "rel size" lines of every file under dir/rel. */
static void ec_collect(const char *dir, const char *rel, struct ec_names *ns,
		       int (*filter)(const char *name))
{
	char p[PATH_MAX], r[PATH_MAX], line[PATH_MAX + 32];
	struct dirent *de;
	DIR *dh;

	ec_fmt(p, sizeof(p), "%s%s%s", dir, *rel ? "/" : "", rel);
	dh = opendir(p);
	if (!dh)
		return;
	while ((de = readdir(dh))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ec_fmt(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "",
		       de->d_name);
		ec_fmt(p, sizeof(p), "%s/%s", dir, r);
		if (lstat(p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			ec_fmt(line, sizeof(line), "%s/", r);
			ec_names_add(ns, line);
			ec_collect(dir, r, ns, filter);
			continue;
		}
		if (filter && !filter(de->d_name))
			continue;
		ec_fmt(line, sizeof(line), "%s %lld", r, (long long)st.st_size);
		ec_names_add(ns, line);
	}
	closedir(dh);
}

void ec_print_listing(const char *tag, const char *dir, int verbose,
		      int (*filter)(const char *name))
{
	struct ec_names ns = {0};
	uint64_t h = 1469598103934665603ull;

	ec_collect(dir, "", &ns, filter);
	if (ns.n)
		qsort(ns.v, ns.n, sizeof(*ns.v), ec_cmp);
	printf("%s: %zu entries\n", tag, ns.n);
	for (size_t i = 0; i < ns.n; i++) {
		if (verbose)
			printf("%s: %s\n", tag, ns.v[i]);
		else
			fprintf(stderr, "%s: %s\n", tag, ns.v[i]);
		for (const char *c = ns.v[i]; *c; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ull;
		h = (h ^ '\n') * 1099511628211ull;
		free(ns.v[i]);
	}
	if (!verbose)
		printf("%s: hash %016llx\n", tag, (unsigned long long)h);
	free(ns.v);
}

/* ---- the race ---- */

struct ec_targ {
	struct ec_race *r;
	int id;
};

static uint32_t ec_w(const struct ec_race *r, int writer)
{
	return r->same_content ? 0 : (uint32_t)writer;
}

static void *ec_writer(void *arg)
{
	struct ec_targ *a = arg;
	struct ec_race *r = a->r;
	unsigned char *buf = ec_alloc(r->bs);
	uint32_t ver = 0;

	pthread_barrier_wait(&r->bar);
	for (int i = 0; i < r->iters; i++) {
		int hot = i % 2 == 0, rc;
		uint32_t key;

		if (hot)
			key = (uint32_t)(i / 2 + a->id) % r->nhot;
		else
			key = r->nstable + (uint32_t)(a->id * 7 + i * 3) %
						   (r->nkeys - r->nstable);
		ver++;
		atomic_store(&r->started[a->id], ver);
		ec_fill(buf, r->bs, key, ec_w(r, a->id),
			r->same_content ? 0 : ver);
		rc = r->eng.store(r->eng.ctx, key, buf, r->bs, a->id, hot);
		if (rc == EC_SKIPPED) {
			atomic_fetch_add(&r->skipped, 1);
		} else if (rc < 0) {
			atomic_fetch_add(&r->wr_err, 1);
			fprintf(stderr, "writer %d key %u: %s\n", a->id, key,
				ename(-rc));
		} else {
			atomic_fetch_add(&r->stored, 1);
		}
	}
	atomic_fetch_sub(&r->writers_left, 1);
	ec_free(buf, r->bs);
	return NULL;
}

/* Whether a reader may find key absent: new keys are not stored yet,
 * doomed ones go away; a name that exists never vanishes (renames and
 * in-place rewrites keep it). */
static int ec_may_miss(const struct ec_race *r, uint32_t key)
{
	return key >= r->nstable;
}

/* Whether a reader may find key short: only a key being written, under an
 * engine whose writes leave a gap. */
static int ec_may_short(const struct ec_race *r, uint32_t key)
{
	return r->replace_gap &&
	       (key < r->nhot || (key >= r->nstable && key < r->nkeys));
}

static void ec_reader_load(struct ec_race *r, int id, uint32_t key,
			   unsigned char *buf)
{
	ssize_t n = r->eng.load(r->eng.ctx, key, buf, r->bs);
	uint32_t w, v;
	char why[256];

	if (n == -ENOENT) {
		if (ec_may_miss(r, key)) {
			atomic_fetch_add(&r->absent, 1);
			return;
		}
		atomic_fetch_add(&r->bad_absent, 1);
		fprintf(stderr, "reader %d key %u: ENOENT\n", id, key);
	} else if (n < 0) {
		atomic_fetch_add(&r->rd_err, 1);
		fprintf(stderr, "reader %d key %u: %s\n", id, key,
			ename((int)-n));
	} else if ((size_t)n < r->bs) {
		if (ec_may_short(r, key)) {
			atomic_fetch_add(&r->shortr, 1);
			return;
		}
		atomic_fetch_add(&r->bad_short, 1);
		fprintf(stderr, "reader %d key %u: short %zd of %zu\n", id, key,
			n, r->bs);
	} else if (ec_check(buf, r->bs, key, &w, &v, why, sizeof(why))) {
		atomic_fetch_add(&r->torn, 1);
		fprintf(stderr, "reader %d key %u: %s\n", id, key, why);
	} else if (w > (uint32_t)r->nw || v > atomic_load(&r->started[w])) {
		atomic_fetch_add(&r->unknown, 1);
		fprintf(stderr, "reader %d key %u: (w%u,v%u) never written\n",
			id, key, w, v);
	} else {
		atomic_fetch_add(&r->whole, 1);
	}
}

static void *ec_reader(void *arg)
{
	struct ec_targ *a = arg;
	struct ec_race *r = a->r;
	unsigned char *buf = ec_alloc(r->bs);
	uint64_t rnd = 0x5eed0000ull + (uint64_t)a->id;
	uint32_t all = r->nkeys + r->ndoomed;

	pthread_barrier_wait(&r->bar);
	for (int j = 0; j < 2 * r->iters || atomic_load(&r->writers_left) > 0;
	     j++) {
		uint32_t key = (uint32_t)(splitmix(&rnd) % all);

		if (j % 3 == 0)
			key = (uint32_t)(splitmix(&rnd) % r->nhot);
		ec_reader_load(r, a->id, key, buf);
	}
	ec_free(buf, r->bs);
	return NULL;
}

/* The engine's lookups of keys that always exist, while writers write. */
static void *ec_lookup(void *arg)
{
	struct ec_race *r = arg;
	uint32_t key = 0;

	pthread_barrier_wait(&r->bar);
	while (atomic_load(&r->writers_left) > 0) {
		int rc;

		key = (key + 1) % r->nstable;
		rc = r->eng.lookup(r->eng.ctx, key);
		if (rc != 1) {
			atomic_fetch_add(&r->lk_bad, 1);
			fprintf(stderr, "lookup key %u: %d\n", key, rc);
		}
	}
	return NULL;
}

/* Evicts the doomed keys one by one while readers load them. */
static void *ec_evictor(void *arg)
{
	struct ec_race *r = arg;

	pthread_barrier_wait(&r->bar);
	for (uint32_t k = 0; k < r->ndoomed; k++) {
		int rc;

		for (int y = 0; y < 200; y++)
			sched_yield();
		rc = r->eng.evict(r->eng.ctx, r->nkeys + k);
		if (rc < 0) {
			atomic_fetch_add(&r->ev_err, 1);
			fprintf(stderr, "evict key %u: %s\n", r->nkeys + k,
				ename(-rc));
		} else {
			atomic_fetch_add(&r->evicted, 1);
		}
	}
	return NULL;
}

static void ec_prestore(struct ec_race *r)
{
	unsigned char *buf = ec_alloc(r->bs);

	for (uint32_t key = 0; key < r->nkeys + r->ndoomed; key++) {
		int rc;

		if (key >= r->nstable && key < r->nkeys)
			continue;
		ec_fill(buf, r->bs, key, ec_w(r, r->nw), 0);
		rc = r->eng.store(r->eng.ctx, key, buf, r->bs, r->nw, 0);
		if (rc != EC_STORED)
			die("pre-store of key %u: %s", key,
			    rc < 0 ? ename(-rc) : "skipped");
	}
	ec_free(buf, r->bs);
}

static void ec_threads(struct ec_race *r)
{
	pthread_t th[2 * EC_MAXW + 2];
	struct ec_targ args[2 * EC_MAXW];
	int n = 0;

	if (r->nw > EC_MAXW || r->nr > EC_MAXW || r->nhot == 0 ||
	    r->nstable <= r->nhot || r->nkeys <= r->nstable)
		die("race: bad parameters");
	pthread_barrier_init(&r->bar, NULL, (unsigned)(r->nw + r->nr + 2));
	atomic_store(&r->writers_left, r->nw);
	for (int i = 0; i < r->nw + r->nr; i++) {
		args[i] = (struct ec_targ){r, i < r->nw ? i : i - r->nw};
		if (pthread_create(&th[n++], NULL,
				   i < r->nw ? ec_writer : ec_reader, &args[i]))
			die("pthread_create");
	}
	if (pthread_create(&th[n++], NULL, ec_lookup, r) ||
	    pthread_create(&th[n++], NULL, ec_evictor, r))
		die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&r->bar);
}

/* Final state: every key whole, every doomed key gone. Returns failures. */
static int ec_final(struct ec_race *r, const char *tag)
{
	unsigned char *buf = ec_alloc(r->bs);
	uint32_t whole = 0, gone = 0;

	for (uint32_t key = 0; key < r->nkeys + r->ndoomed; key++) {
		ssize_t n = r->eng.load(r->eng.ctx, key, buf, r->bs);
		uint32_t w, v;
		char why[256];

		if (key >= r->nkeys) {
			gone += n == -ENOENT;
			continue;
		}
		if (n == (ssize_t)r->bs &&
		    !ec_check(buf, r->bs, key, &w, &v, why, sizeof(why)))
			whole++;
		else
			fprintf(stderr, "final key %u: %zd %s\n", key, n,
				n == (ssize_t)r->bs ? why : "");
	}
	ec_free(buf, r->bs);
	printf("%s.race.final: whole=%u/%u evicted-gone=%u/%u\n", tag, whole,
	       r->nkeys, gone, r->ndoomed);
	return (whole != r->nkeys) + (gone != r->ndoomed);
}

int ec_race_run(struct ec_race *r, const char *tag)
{
	long bad;
	int fails;

	printf("%s.race.params: bs=%zu writers=%d readers=%d iters=%d "
	       "keys=%u hot=%u stable=%u doomed=%u\n",
	       tag, r->bs, r->nw, r->nr, r->iters, r->nkeys, r->nhot,
	       r->nstable, r->ndoomed);
	ec_prestore(r);
	ec_threads(r);
	fails = ec_final(r, tag);
	printf("%s.race.readers: absent-when-present=%ld short=%ld torn=%ld "
	       "unknown-version=%ld errors=%ld\n",
	       tag, atomic_load(&r->bad_absent), atomic_load(&r->bad_short),
	       atomic_load(&r->torn), atomic_load(&r->unknown),
	       atomic_load(&r->rd_err));
	printf("%s.race.lookups: missed=%ld\n", tag, atomic_load(&r->lk_bad));
	/* Under a gap-free engine every store succeeds or skips. */
	if (!r->replace_gap)
		printf("%s.race.writers: errors=%ld\n", tag,
		       atomic_load(&r->wr_err));
	printf("%s.race.evictor: errors=%ld\n", tag, atomic_load(&r->ev_err));
	fprintf(stderr,
		"%s race info: stored=%ld skipped=%ld store-errors=%ld "
		"whole-loads=%ld misses=%ld engine-short=%ld evicted=%ld\n",
		tag, atomic_load(&r->stored), atomic_load(&r->skipped),
		atomic_load(&r->wr_err), atomic_load(&r->whole),
		atomic_load(&r->absent), atomic_load(&r->shortr),
		atomic_load(&r->evicted));
	bad = atomic_load(&r->bad_absent) + atomic_load(&r->bad_short) +
	      atomic_load(&r->torn) + atomic_load(&r->unknown) +
	      atomic_load(&r->rd_err) + atomic_load(&r->lk_bad) +
	      atomic_load(&r->ev_err) +
	      (r->replace_gap ? 0 : atomic_load(&r->wr_err));
	/* A race in which no reader ever got a whole block proves nothing. */
	if (atomic_load(&r->whole) == 0) {
		printf("%s.race: NO WHOLE LOADS\n", tag);
		fails++;
	}
	return fails + (bad != 0);
}
