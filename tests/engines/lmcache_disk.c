/* SPDX-License-Identifier: MIT */
/*
 * lmcache_disk: replays LMCache's local disk backend against a directory.
 * It follows lmcache/v1/storage_backend/local_disk_backend.py in the LMCache
 * repository (LocalDiskBackend.__init__, _key_to_path, submit_put_task,
 * write_file, read_file, remove, insert_key):
 *
 *   start   os.path.exists(path), else os.makedirs; os.statvfs(path)
 *           .f_bsize decides which sizes may use O_DIRECT
 *   layout  flat <path>/<key with '/' -> '-'>.pt
 *   store   in place, no temp: a size that is not a multiple of f_bsize,
 *           or use_odirect off: open("wb") = O_WRONLY|O_CREAT|O_TRUNC,
 *           one buffered write; else os.open(O_CREAT|O_WRONLY|O_DIRECT,
 *           0644) without O_TRUNC and one os.write whose count is not
 *           checked. The key enters the in-memory index after the write.
 *           A put of a key already being put by this process is skipped.
 *   lookup  the in-memory index only (no system call)
 *   load    open("rb") + readinto, or os.open(O_RDONLY|O_DIRECT) +
 *           unbuffered readinto (one read); the byte count is ignored;
 *           FileNotFoundError drops the key from the index
 *   evict   in-process LRU over a byte cap: pop from the index, os.remove
 *
 * The race runs two engine processes' worth of writers on one directory
 * (writers of even and odd ids dedupe their puts separately), so a key
 * can be rewritten in place while a loader reads it: a short read is then
 * the engine's own (silent) hazard, never wrong bytes, since a key always
 * holds the same bytes.
 *
 * Usage: lmcache_disk DIR; transcript on stdout (see eng_common.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "eng_common.h"

static const char *prog = "lmcache_disk";
#include "tclient.h"

#define NKEYS_MAX 64

struct ldisk {
	char root[PATH_MAX];
	size_t bs;
	unsigned long bsize;
	int use_odirect, mixed;
	pthread_mutex_t lock;	     /* the backend's disk_lock */
	uint8_t in_index[NKEYS_MAX]; /* the in-memory dict */
	uint8_t putting[2][NKEYS_MAX];
};

static void ld_path(const struct ldisk *c, uint32_t key, char *out)
{
	char hex[33];

	ec_hex(key, 32, hex);
	ec_fmt(out, PATH_MAX, "%s/vllm@meta-llama-Llama-3.1-8B@1@0@%s.pt",
	       c->root, hex);
}

/* use_odirect and an aligned size; the race also turns it off for odd keys
 * (two configurations sharing the directory). */
static int ld_direct(const struct ldisk *c, uint32_t key, size_t size)
{
	return c->use_odirect && size % c->bsize == 0 && !(c->mixed && key % 2);
}

/* write_file: returns 0 or -errno. */
static int ld_write_file(struct ldisk *c, uint32_t key,
			 const unsigned char *buf, size_t size)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	ld_path(c, key, p);
	if (!ld_direct(c, key, size)) {
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		n = ec_write_full(fd, buf, size, -1);
	} else {
		fd = open(p, O_CREAT | O_WRONLY | O_DIRECT, 0644);
		if (fd < 0)
			return -errno;
		n = write(fd, buf, size); /* the count is not checked */
		if (n < 0)
			n = -errno;
	}
	close(fd);
	return n < 0 ? (int)n : 0;
}

/* read_file: the byte count the read returned (the engine ignores it),
 * or -errno; ENOENT drops the key. */
static ssize_t ld_read_file(struct ldisk *c, uint32_t key, unsigned char *buf,
			    size_t size)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	ld_path(c, key, p);
	fd = open(p, O_RDONLY | O_CLOEXEC |
			     (ld_direct(c, key, size) ? O_DIRECT : 0));
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT) {
			pthread_mutex_lock(&c->lock);
			c->in_index[key] = 0;
			pthread_mutex_unlock(&c->lock);
		}
		return -e;
	}
	if (ld_direct(c, key, size)) {
		n = read(fd, buf, size);
		if (n < 0)
			n = -errno;
	} else {
		n = ec_read_full(fd, buf, size, -1);
	}
	close(fd);
	return n;
}

/* remove(): pop from the index, then os.remove. */
static int ld_remove(struct ldisk *c, uint32_t key)
{
	char p[PATH_MAX];
	int had;

	pthread_mutex_lock(&c->lock);
	had = c->in_index[key];
	c->in_index[key] = 0;
	pthread_mutex_unlock(&c->lock);
	if (!had)
		return -ENOENT;
	ld_path(c, key, p);
	return unlink(p) < 0 ? -errno : 0;
}

/* ---- the race's engine calls ---- */

static int r_store(void *ctx, uint32_t key, const unsigned char *buf, size_t bs,
		   int writer, int racing)
{
	struct ldisk *c = ctx;
	int proc = writer % 2, rc;

	pthread_mutex_lock(&c->lock);
	if (c->putting[proc][key] || (!racing && c->in_index[key])) {
		pthread_mutex_unlock(&c->lock);
		return EC_SKIPPED;
	}
	c->putting[proc][key] = 1;
	pthread_mutex_unlock(&c->lock);
	rc = ld_write_file(c, key, buf, bs);
	pthread_mutex_lock(&c->lock);
	if (rc == 0)
		c->in_index[key] = 1; /* insert_key */
	c->putting[proc][key] = 0;
	pthread_mutex_unlock(&c->lock);
	return rc < 0 ? rc : EC_STORED;
}

static ssize_t r_load(void *ctx, uint32_t key, unsigned char *buf, size_t bs)
{
	struct ldisk *c = ctx;
	int in;

	pthread_mutex_lock(&c->lock);
	in = c->in_index[key];
	pthread_mutex_unlock(&c->lock);
	if (!in)
		return -ENOENT; /* contains() said no: never opened */
	return ld_read_file(c, key, buf, bs);
}

static int r_lookup(void *ctx, uint32_t key)
{
	struct ldisk *c = ctx;
	int in;

	pthread_mutex_lock(&c->lock);
	in = c->in_index[key];
	pthread_mutex_unlock(&c->lock);
	return in;
}

static int r_evict(void *ctx, uint32_t key)
{
	return ld_remove(ctx, key);
}

/* ---- the deterministic sequence ---- */

static void seq_read(struct ldisk *c, const char *tag, uint32_t key,
		     size_t size, unsigned char *buf)
{
	ssize_t n;
	uint32_t w, v;
	char why[200];

	memset(buf, 0xee, size);
	n = ld_read_file(c, key, buf, size);
	if (n < 0)
		printf("%s: %s\n", tag, ename((int)-n));
	else if (ec_check(buf, size, key, &w, &v, why, sizeof(why)))
		printf("%s: read %zd of %zu, buffer not whole\n", tag, n, size);
	else
		printf("%s: read %zd, whole\n", tag, n);
}

static void seq_put(struct ldisk *c, const char *tag, uint32_t key, size_t size,
		    unsigned char *buf)
{
	char p[PATH_MAX];

	ec_fill(buf, size, key, 0, 0);
	printf("%s: direct=%d %s\n", tag, ld_direct(c, key, size),
	       ename(-ld_write_file(c, key, buf, size)));
	ld_path(c, key, p);
	ec_print_stat(tag, p);
}

/* submit_put_task's eviction loop over a byte cap, then the write. */
static void seq_put_capped(struct ldisk *c, uint32_t *lru, int *nlru,
			   uint32_t key, unsigned char *buf, size_t cap)
{
	while ((size_t)(*nlru + 1) * c->bs > cap) {
		printf("cap.evict key%u: %s\n", lru[0],
		       ename(-ld_remove(c, lru[0])));
		memmove(lru, lru + 1, (size_t)(*nlru - 1) * sizeof(*lru));
		(*nlru)--;
	}
	ec_fill(buf, c->bs, key, 0, 0);
	printf("cap.put key%u: %s\n", key,
	       ename(-ld_write_file(c, key, buf, c->bs)));
	c->in_index[key] = 1;
	lru[(*nlru)++] = key;
}

static void do_seq(struct ldisk *c)
{
	size_t big = 2 * c->bs + EC_PAGE;
	unsigned char *buf = ec_alloc(big);
	uint32_t lru[8];
	struct statvfs sv;
	struct stat st;
	char p[PATH_MAX];
	int nlru = 0;

	if (stat(c->root, &st) < 0)
		printf("start.mkdirs: %s\n",
		       ename(mkdir(c->root, 0777) < 0 ? errno : 0));
	if (statvfs(c->root, &sv) < 0)
		die("statvfs: %s", strerror(errno));
	c->bsize = sv.f_bsize;
	printf("start.statvfs: OK %zu-byte chunks aligned=%s\n", c->bs,
	       c->bs % c->bsize ? "no" : "yes");
	seq_put(c, "put1.buffered", 1, c->bs, buf);
	seq_read(c, "read1", 1, c->bs, buf);
	c->use_odirect = 1;
	seq_put(c, "put2.odirect", 2, c->bs, buf);
	seq_read(c, "read2.odirect", 2, c->bs, buf);
	seq_put(c, "put3.unaligned", 3, c->bs + 100, buf);
	seq_read(c, "read3", 3, c->bs + 100, buf);
	/* O_DIRECT without O_TRUNC over a longer file keeps its tail. */
	seq_put(c, "put4.long", 4, big, buf);
	seq_put(c, "put4.odirect-over", 4, c->bs, buf);
	seq_read(c, "read4.odirect", 4, c->bs, buf);
	/* A short file: readinto's count is ignored by the engine. */
	ld_path(c, 1, p);
	printf("cut1: %s\n", ename(truncate(p, (off_t)c->bs / 2) ? errno : 0));
	c->use_odirect = 0;
	seq_read(c, "cut1.read", 1, c->bs, buf);
	/* A file gone under the engine: FileNotFoundError drops the key. */
	c->in_index[2] = 1;
	ld_path(c, 2, p);
	printf("gone2.unlink: %s\n", ename(unlink(p) ? errno : 0));
	seq_read(c, "gone2.read", 2, c->bs, buf);
	printf("gone2.indexed: %d\n", c->in_index[2]);
	/* LRU over a cap of three chunks. */
	for (uint32_t k = 10; k < 15; k++)
		seq_put_capped(c, lru, &nlru, k, buf, 3 * c->bs);
	ec_print_listing("seq.files", c->root, 1, NULL);
	ec_free(buf, big);
}

int main(int argc, char **argv)
{
	static struct ldisk seq = {.bs = 64 * EC_KiB},
			    race = {.bs = 256 * EC_KiB,
				    .use_odirect = 1,
				    .mixed = 1};
	struct ec_race r = {
		.eng = {&race, r_store, r_load, r_lookup, r_evict},
		.bs = 256 * EC_KiB,
		.nw = 8,
		.nr = 8,
		.iters = 48,
		.nhot = 2,
		.nstable = 6,
		.nkeys = 24,
		.ndoomed = 4,
		.same_content = 1,
		.replace_gap = 1,
	};
	struct statvfs sv;
	int fails;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	if (argc != 2)
		die("usage: %s DIR", prog);
	pthread_mutex_init(&seq.lock, NULL);
	pthread_mutex_init(&race.lock, NULL);
	ec_fmt(seq.root, sizeof(seq.root), "%s/seq", argv[1]);
	ec_fmt(race.root, sizeof(race.root), "%s/race", argv[1]);
	do_seq(&seq);
	if (mkdir(race.root, 0777) < 0 || statvfs(race.root, &sv) < 0)
		die("%s: %s", race.root, strerror(errno));
	race.bsize = sv.f_bsize;
	fails = ec_race_run(&r, "lmcache_disk");
	ec_print_listing("race.files", race.root, 0, NULL);
	return fails ? 1 : 0;
}
