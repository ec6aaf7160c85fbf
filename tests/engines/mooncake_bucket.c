/* SPDX-License-Identifier: MIT */
/*
 * mooncake_bucket: replays Mooncake Store's bucket SSD offload backend (its
 * default) against a directory. It follows mooncake-store/src/
 * storage_backend.cpp in the Mooncake repository
 * (BucketStorageBackend::WriteBucket, StoreBucketMetadata,
 * LoadBucketMetadata, DeleteBucket, OpenFile, GetBucketDataPath,
 * GetBucketMetadataPath) and docs/source/design/store/ssd-offload.md
 * (grouping up to a size or key limit, in-flight read guards, the
 * two-phase FIFO eviction, the st_blocks physical cap, restart by
 * ScanMeta):
 *
 *   layout  flat <path>/<bucket id>.bucket and <path>/<bucket id>.meta;
 *           ids grow with time
 *   store   a bucket of many objects: open(<id>.bucket,
 *           O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644), one pwritev of
 *           every key and value at offset 0 (a short count fails),
 *           fdatasync (data before metadata), close; then <id>.meta
 *           written the same way; then the objects enter the in-memory
 *           index (a key offloaded again points to the newer bucket)
 *   lookup  the in-memory index only
 *   load    an in-flight guard on the bucket, open O_RDONLY, preadv of
 *           the value at its offset (or, O_DIRECT, of the aligned span
 *           around it), a short count fails
 *   evict   FIFO over a byte cap: the oldest bucket leaves the index,
 *           its .meta is unlinked, the evictor waits until no read is in
 *           flight, then unlinks the .bucket; the physical cap sums
 *           st_blocks * 512 of the directory's files
 *   restart the directory's *.meta files: stat for the size, a read of
 *           that many bytes, the bucket's size checked
 *
 * The bucket size cap is KVFS_ENGINES_BUCKET_MB (default 16; the engine's
 * default is 256).
 *
 * Usage: mooncake_bucket DIR; transcript on stdout (see eng_common.h).
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
#include <sys/uio.h>
#include <unistd.h>

#include "eng_common.h"

static const char *prog = "mooncake_bucket";
#include "tclient.h"

#define KEYLEN 32 /* a key's bytes in the bucket */
#define MAXOBJ 64 /* objects per bucket (the engine's limit is 500) */
#define MAXB 256  /* buckets ever written */
#define NHOT 4	  /* keys every writer offloads again */
#define MAXKEYS 4096
#define META_MAGIC 0x4154454d4b435542ull /* "BUCKMETA" */

struct bucket {
	int64_t id;
	uint32_t nobj;
	uint32_t keys[MAXOBJ];
	uint64_t off[MAXOBJ]; /* of the value */
	uint64_t data_size;
	atomic_int inflight; /* BucketReadGuard */
	int live;
};

struct loc {
	int b; /* index into buckets, -1: absent */
	uint64_t off;
	uint32_t len;
};

struct mbk {
	char root[PATH_MAX];
	size_t cap;	  /* bucket size limit */
	size_t total_cap; /* eviction threshold, bytes */
	pthread_mutex_t lock;
	struct bucket *b[MAXB];
	int nb, oldest; /* buckets [oldest, nb) may be live */
	uint64_t total; /* live bytes */
	struct loc idx[MAXKEYS];
	atomic_llong next_id;
	atomic_uint next_key;
	/* race */
	int nw, nr, per_writer;
	atomic_int writers_left;
	pthread_barrier_t bar;
	atomic_long loads, misses, bad, wr_err, evicted;
};

static uint32_t obj_len(uint32_t key)
{
	return (uint32_t)(16 * EC_KiB + (key * 7919u % 48u) * EC_PAGE +
			  key % 5);
}

static void mb_path(const struct mbk *c, int64_t id, const char *ext, char *out)
{
	ec_fmt(out, PATH_MAX, "%s/%lld%s", c->root, (long long)id, ext);
}

/* WriteBucket + StoreBucketMetadata for b (objects filled here). */
static int mb_write(struct mbk *c, struct bucket *b)
{
	struct iovec iov[2 * MAXOBJ];
	char p[PATH_MAX], keys[MAXOBJ][KEYLEN + 1];
	unsigned char *vals[MAXOBJ];
	uint64_t meta[3 + 3 * MAXOBJ], off = 0;
	int fd, rc = 0;
	ssize_t n;

	for (uint32_t i = 0; i < b->nobj; i++) {
		uint32_t len = obj_len(b->keys[i]);

		ec_hex(b->keys[i], KEYLEN, keys[i]);
		vals[i] = ec_alloc(len);
		ec_fill(vals[i], len, b->keys[i], 0, 0);
		iov[2 * i] = (struct iovec){keys[i], KEYLEN};
		iov[2 * i + 1] = (struct iovec){vals[i], len};
		b->off[i] = off + KEYLEN;
		off += KEYLEN + len;
		meta[3 + 3 * i] = b->keys[i];
		meta[4 + 3 * i] = b->off[i];
		meta[5 + 3 * i] = len;
	}
	b->data_size = off;
	mb_path(c, b->id, ".bucket", p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	n = pwritev(fd, iov, (int)(2 * b->nobj), 0);
	if (n != (ssize_t)off)
		rc = n < 0 ? -errno : -EIO;
	else if (fdatasync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc < 0)
		goto out;
	meta[0] = META_MAGIC;
	meta[1] = b->nobj;
	meta[2] = b->data_size;
	mb_path(c, b->id, ".meta", p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	n = ec_write_full(fd, meta, (3 + 3 * b->nobj) * sizeof(uint64_t), -1);
	rc = n < 0 ? (int)n : 0;
	close(fd);
out:
	for (uint32_t i = 0; i < b->nobj; i++)
		ec_free(vals[i], obj_len(b->keys[i]));
	return rc;
}

/* DeleteBucket for index bi, the lock held on entry and exit. */
static void mb_evict_locked(struct mbk *c, int bi)
{
	struct bucket *b = c->b[bi];
	char p[PATH_MAX];

	b->live = 0;
	for (uint32_t i = 0; i < b->nobj; i++)
		if (c->idx[b->keys[i]].b == bi)
			c->idx[b->keys[i]].b = -1;
	c->total -= b->data_size;
	pthread_mutex_unlock(&c->lock);
	mb_path(c, b->id, ".meta", p);
	if (unlink(p) < 0)
		atomic_fetch_add(&c->bad, 1);
	while (atomic_load(&b->inflight) > 0)
		sched_yield();
	mb_path(c, b->id, ".bucket", p);
	if (unlink(p) < 0)
		atomic_fetch_add(&c->bad, 1);
	atomic_fetch_add(&c->evicted, 1);
	pthread_mutex_lock(&c->lock);
}

/* Evicts oldest-first while the live bytes exceed cap (lock held). */
static void mb_evict_to(struct mbk *c, uint64_t cap)
{
	while (c->total > cap && c->oldest < c->nb) {
		int bi = c->oldest++;

		if (c->b[bi]->live)
			mb_evict_locked(c, bi);
	}
}

/* Offloads nobj objects (keys from keys[]) as one new bucket. */
static int mb_offload(struct mbk *c, const uint32_t *keys, uint32_t nobj)
{
	struct bucket *b = calloc(1, sizeof(*b));
	int rc, bi;

	if (!b)
		die("out of memory");
	b->nobj = nobj;
	memcpy(b->keys, keys, nobj * sizeof(*keys));
	b->id = atomic_fetch_add(&c->next_id, 1);
	rc = mb_write(c, b);
	if (rc < 0) {
		free(b);
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	mb_evict_to(c, c->total_cap > b->data_size ? c->total_cap - b->data_size
						   : 0);
	if (c->nb == MAXB)
		die("too many buckets");
	bi = c->nb++;
	c->b[bi] = b;
	b->live = 1;
	c->total += b->data_size;
	for (uint32_t i = 0; i < nobj; i++)
		c->idx[keys[i]] = (struct loc){bi, b->off[i], obj_len(keys[i])};
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* BatchLoad of one key: 1 whole, 0 not in the index, -1 failed (a
 * message on stderr). direct: O_DIRECT read of the aligned span. */
static int mb_load(struct mbk *c, uint32_t key, int direct)
{
	struct loc l;
	struct bucket *b;
	char p[PATH_MAX], why[200];
	unsigned char *buf;
	uint64_t start, span;
	uint32_t w, v;
	ssize_t n;
	int fd, ok = -1;

	pthread_mutex_lock(&c->lock);
	l = c->idx[key];
	if (l.b < 0) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	b = c->b[l.b];
	atomic_fetch_add(&b->inflight, 1);
	pthread_mutex_unlock(&c->lock);
	start = direct ? l.off / EC_PAGE * EC_PAGE : l.off;
	span = direct ? (l.off + l.len - start + EC_PAGE - 1) / EC_PAGE *
				EC_PAGE
		      : l.len;
	buf = ec_alloc(span);
	mb_path(c, b->id, ".bucket", p);
	fd = open(p, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (fd < 0) {
		fprintf(stderr, "load key %u: open %s: %s\n", key, p,
			strerror(errno));
	} else {
		struct iovec iov = {buf, span};

		n = preadv(fd, &iov, 1, (off_t)start);
		close(fd);
		if (n < (ssize_t)(l.off - start + l.len))
			fprintf(stderr, "load key %u: read %zd\n", key, n);
		else if (ec_check(buf + (l.off - start), l.len, key, &w, &v,
				  why, sizeof(why)))
			fprintf(stderr, "load key %u: %s\n", key, why);
		else
			ok = 1;
	}
	atomic_fetch_sub(&b->inflight, 1);
	ec_free(buf, span);
	return ok;
}

/* Restart: every *.meta read back and checked against its bucket. */
static void mb_scan(struct mbk *c, const char *tag)
{
	int metas = 0, bad = 0, objs = 0;
	struct dirent *de;
	DIR *dh = opendir(c->root);

	if (!dh)
		die("opendir: %s", strerror(errno));
	while ((de = readdir(dh))) {
		uint64_t meta[3 + 3 * MAXOBJ];
		char p[PATH_MAX], bp[PATH_MAX];
		size_t l = strlen(de->d_name);
		struct stat st, bst;
		ssize_t n;
		int fd;

		if (l < 6 || strcmp(de->d_name + l - 5, ".meta"))
			continue;
		metas++;
		ec_fmt(p, sizeof(p), "%s/%s", c->root, de->d_name);
		ec_fmt(bp, sizeof(bp), "%s/%.*s.bucket", c->root, (int)(l - 5),
		       de->d_name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 ||
		    (size_t)st.st_size > sizeof(meta)) {
			bad++;
			if (fd >= 0)
				close(fd);
			continue;
		}
		n = ec_read_full(fd, meta, (size_t)st.st_size, -1);
		close(fd);
		if (n != st.st_size || meta[0] != META_MAGIC ||
		    stat(bp, &bst) < 0 || (uint64_t)bst.st_size != meta[2])
			bad++;
		else
			objs += (int)meta[1];
	}
	closedir(dh);
	/* The race's bucket count depends on timing: counts to stderr. */
	if (strncmp(tag, "race", 4))
		printf("%s: %d buckets, %d objects, %d inconsistent\n", tag,
		       metas, objs, bad);
	else
		printf("%s: %s buckets, %d inconsistent\n", tag,
		       metas ? "some" : "no", bad);
	fprintf(stderr, "%s: %d buckets, %d objects\n", tag, metas, objs);
}

/* The physical cap's scan: st_blocks * 512 of every file, against sizes. */
static void mb_physical(struct mbk *c, const char *tag)
{
	unsigned long long blocks = 0, bytes = 0;
	struct dirent *de;
	DIR *dh = opendir(c->root);

	if (!dh)
		die("opendir: %s", strerror(errno));
	while ((de = readdir(dh))) {
		char p[PATH_MAX];
		struct stat st;

		ec_fmt(p, sizeof(p), "%s/%s", c->root, de->d_name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			blocks += (unsigned long long)st.st_blocks * 512;
			bytes += (unsigned long long)st.st_size;
		}
	}
	closedir(dh);
	printf("%s: st_blocks cover the sizes: %s\n", tag,
	       blocks >= bytes ? "yes" : "no");
	fprintf(stderr, "%s: %llu bytes in %llu allocated\n", tag, bytes,
		blocks);
}

/* ---- the race ---- */

static void *writer(void *arg)
{
	struct mbk *c = arg;
	uint32_t keys[MAXOBJ];

	pthread_barrier_wait(&c->bar);
	for (int i = 0; i < c->per_writer; i++) {
		uint32_t n = 0;
		size_t size = 0;

		/* Every bucket carries a hot key again (re-offloaded). */
		keys[n++] = (uint32_t)i % NHOT;
		size += obj_len(keys[0]) + KEYLEN;
		while (n < MAXOBJ) {
			uint32_t k = atomic_load(&c->next_key);

			if (size + obj_len(k) + KEYLEN > c->cap)
				break;
			k = atomic_fetch_add(&c->next_key, 1);
			if (k >= MAXKEYS)
				die("too many keys");
			keys[n++] = k;
			size += obj_len(k) + KEYLEN;
		}
		if (mb_offload(c, keys, n) < 0)
			atomic_fetch_add(&c->wr_err, 1);
	}
	atomic_fetch_sub(&c->writers_left, 1);
	return NULL;
}

static void *reader(void *arg)
{
	struct mbk *c = arg;
	uint64_t rnd = 0x5eed;

	pthread_barrier_wait(&c->bar);
	for (int j = 0; atomic_load(&c->writers_left) > 0 || j < 64; j++) {
		uint32_t top = atomic_load(&c->next_key);
		uint32_t key = (uint32_t)(splitmix(&rnd) % (top ? top : 1));
		int rc;

		if (j % 3 == 0)
			key = (uint32_t)(splitmix(&rnd) % NHOT);
		rc = mb_load(c, key, j % 2);
		if (rc > 0)
			atomic_fetch_add(&c->loads, 1);
		else if (rc == 0 && atomic_fetch_add(&c->misses, 1) >= 0)
			sched_yield();
		else
			atomic_fetch_add(&c->bad, 1);
	}
	return NULL;
}

static int do_race(struct mbk *c)
{
	pthread_t th[32];
	int n = 0, whole = 0, indexed = 0, live = 0;

	pthread_barrier_init(&c->bar, NULL, (unsigned)(c->nw + c->nr));
	atomic_store(&c->writers_left, c->nw);
	for (int i = 0; i < c->nw + c->nr; i++)
		if (pthread_create(&th[n++], NULL, i < c->nw ? writer : reader,
				   c))
			die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&c->bar);
	pthread_mutex_lock(&c->lock);
	mb_evict_to(c, 4 * c->cap);
	for (int i = 0; i < c->nb; i++)
		live += c->b[i]->live;
	pthread_mutex_unlock(&c->lock);
	for (uint32_t k = 0; k < atomic_load(&c->next_key); k++) {
		int rc = c->idx[k].b >= 0 ? mb_load(c, k, k % 2) : 0;

		indexed += c->idx[k].b >= 0;
		whole += rc > 0;
	}
	printf("race: writers=%d readers=%d buckets-per-writer=%d\n", c->nw,
	       c->nr, c->per_writer);
	printf("race: failed loads=%ld write errors=%ld\n",
	       atomic_load(&c->bad), atomic_load(&c->wr_err));
	printf("race.final: every indexed key whole: %s\n",
	       whole == indexed && indexed > 0 ? "yes" : "no");
	fprintf(stderr,
		"race info: live=%d indexed=%d loads=%ld misses=%ld "
		"evicted=%ld\n",
		live, indexed, atomic_load(&c->loads), atomic_load(&c->misses),
		atomic_load(&c->evicted));
	mb_scan(c, "race.restart");
	mb_physical(c, "race.physical");
	return whole != indexed || atomic_load(&c->bad) ||
	       !atomic_load(&c->loads);
}

/* ---- the deterministic sequence ---- */

static void do_seq(struct mbk *c)
{
	uint32_t keys[3][3] = {
		{100, 101, 102}, {103, 100, 104}, {105, 106, 107}};
	char p[PATH_MAX];

	if (mkdir(c->root, 0755) < 0)
		die("mkdir %s: %s", c->root, strerror(errno));
	for (int i = 0; i < 3; i++)
		printf("offload bucket %d: %s\n", i,
		       ename(-mb_offload(c, keys[i], 3)));
	mb_scan(c, "scan");
	mb_physical(c, "physical");
	for (uint32_t k = 100; k <= 108; k++)
		printf("load key%u: %d direct: %d\n", k, mb_load(c, k, 0),
		       mb_load(c, k, 1));
	/* A truncated bucket: the load's count falls short. */
	mb_path(c, c->b[2]->id, ".bucket", p);
	printf("cut bucket 2: %s\n", ename(truncate(p, 5000) ? errno : 0));
	printf("load key106: %d\n", mb_load(c, 106, 0));
	mb_scan(c, "scan");
	pthread_mutex_lock(&c->lock);
	mb_evict_to(c, c->b[1]->data_size + c->b[2]->data_size);
	pthread_mutex_unlock(&c->lock);
	printf("fifo evict: bucket 0 live=%d, key100 now in bucket %d\n",
	       c->b[0]->live, c->idx[100].b);
	printf("load key101: %d key100: %d\n", mb_load(c, 101, 0),
	       mb_load(c, 100, 0));
	mb_scan(c, "scan");
	for (int i = 0; i < c->nb; i++)
		free(c->b[i]);
}

static void mbk_init(struct mbk *c, const char *dir, const char *sub)
{
	const char *mb = getenv("KVFS_ENGINES_BUCKET_MB");

	memset(c, 0, sizeof(*c));
	ec_fmt(c->root, sizeof(c->root), "%s/%s", dir, sub);
	c->cap = (mb ? strtoul(mb, NULL, 0) : 16) * EC_MiB;
	c->total_cap = 6 * c->cap;
	pthread_mutex_init(&c->lock, NULL);
	for (int i = 0; i < MAXKEYS; i++)
		c->idx[i].b = -1;
	atomic_store(&c->next_id, 1700000000000001ll);
}

int main(int argc, char **argv)
{
	static struct mbk seq, race;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	if (argc != 2)
		die("usage: %s DIR", prog);
	mbk_init(&seq, argv[1], "seq");
	do_seq(&seq);
	mbk_init(&race, argv[1], "race");
	race.nw = 3;
	race.nr = 4;
	race.per_writer = 8;
	atomic_store(&race.next_key, NHOT);
	if (mkdir(race.root, 0755) < 0)
		die("mkdir: %s", strerror(errno));
	return do_race(&race) ? 1 : 0;
}
