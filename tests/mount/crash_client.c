/* SPDX-License-Identifier: MIT */
/*
 * Client side of the crash test (crash.sh): the engine's store and load
 * sequences under load while the daemon is killed, and the check of what
 * survives against a manifest.
 *
 *   crash_client run ROOT MANIFEST ROUND NKEYS OLDLIST SALT
 *       8 writer and 8 reader threads until SIGTERM or SIGINT. Writers
 *       store keys of this round (vLLM's store: access, mkdir -p, O_EXCL
 *       O_DIRECT temp "<dest>_<n>.tmp", one write, close, rename), two or
 *       three of them at about the same time on each key, so renames
 *       replace; every other operation, while it has any left, a writer
 *       unlinks one of the OLDLIST keys from two or more rounds ago (an
 *       evictor's unlink; each old key has one unlinker, so ENOENT there
 *       is a failure). Readers load (O_DIRECT open, one read of the
 *       whole block, compare) keys of this round and of OLDLIST.
 *   crash_client verify ROOT MANIFEST LIVELIST
 *       walks ROOT and loads every block; checks them against MANIFEST
 *       (rules below) and writes the visible keys to LIVELIST.
 *   crash_client overwrite ROOT HEX SIZE SEED ROUND
 *       stores a block over HEX without the existence short-cut (used by
 *       crash.sh to prove that verify catches a wrong block).
 *
 * The manifest (O_APPEND, one write(2) per line, so a killed client leaves
 * at most a torn last line, which is ignored):
 *   I round hex seed size   close(2) of the temp returned 0; rename next
 *   D round hex seed size   rename(2) returned 0
 *   U hex                   unlink(2) next
 *   X hex                   unlink(2) returned 0 or ENOENT
 * Stores touch only keys of their own round and unlinks only keys of
 * earlier rounds, so a key's stores all precede its unlinks.
 *
 * What verify accepts for a key:
 *   X seen: absent.  U without X: absent, or present and acceptable.
 *   some D: present and acceptable.  only I: absent, or present and
 *   acceptable.  no line at all: absent (a phantom).
 * Acceptable: the block is whole (the size in the manifest, one version)
 * and its seed has an I line and was not superseded: seed S is superseded
 * when a store T of the same key has a D line and T's I line comes after
 * S's D line (T's rename started after S's had finished). No "*.tmp" may be
 * visible.
 *
 * Block contents identify themselves: a header (magic, seed, key, size)
 * then a stream derived from the seed, so any reader can tell a whole
 * version from anything else.
 *
 * Errors while the mount still answers (fstatfs on the root) fail the run;
 * errors after the daemon is gone (ENOTCONN, ECONNABORTED, EIO, short
 * counts) are expected and only counted. Exit status: 0 pass, 1 a check
 * failed, 2 usage or setup error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define KiB 1024ul
#define MiB (1024ul * 1024ul)
#define NWRITERS 8
#define NREADERS 8
#define NVERIFY 4
#define BLK_MAGIC 0x3148534152434b56ull /* "VKCRASH1" little-endian */
#define TOP "llama_5f2d1c9e_r0"
#define HEXLEN 16

struct blk_hdr {
	uint64_t magic;
	uint64_t seed;
	uint64_t key;
	uint64_t size;
};

static const char *prog = "crash_client";

#define TC_DIE_STATUS 2
#include "engine.h"
#include "tclient.h"

/* The block of key with seed: a header, then a stream from the seed. */
static void fill_block(unsigned char *b, uint64_t size, uint64_t key,
		       uint64_t seed)
{
	struct blk_hdr h = {
		.magic = BLK_MAGIC, .seed = seed, .key = key, .size = size};
	uint64_t s = seed ^ (size << 1) ^ key;

	tc_fill_stream(b + sizeof(h), size - sizeof(h), &s);
	memcpy(b, &h, sizeof(h));
}

/*
 * Whether b[0..size) is one whole version of key; its seed in *seed.
 * exp is scratch space of size bytes. On failure why says what is wrong.
 */
static int check_block(const unsigned char *b, uint64_t size, uint64_t key,
		       unsigned char *exp, uint64_t *seed, char *why,
		       size_t why_len)
{
	struct blk_hdr h;

	memcpy(&h, b, sizeof(h));
	if (h.magic != BLK_MAGIC || h.key != key || h.size != size) {
		snprintf(why, why_len,
			 "header wrong: magic %016llx key %016llx size %llu",
			 (unsigned long long)h.magic, (unsigned long long)h.key,
			 (unsigned long long)h.size);
		return -1;
	}
	fill_block(exp, size, key, h.seed);
	for (uint64_t off = 0; off < size; off += 4096) {
		uint64_t len = size - off < 4096 ? size - off : 4096;

		if (memcmp(exp + off, b + off, len) != 0) {
			snprintf(why, why_len,
				 "seed %llu: bytes at %llu differ from that "
				 "version",
				 (unsigned long long)h.seed,
				 (unsigned long long)off);
			return -1;
		}
	}
	*seed = h.seed;
	return 0;
}

/* Blocks are 512 KiB or 2 MiB, fixed per key (an engine's block size). */
static uint64_t key_size(uint64_t key)
{
	return (key >> 17) % 3 == 0 ? 2 * MiB : 512 * KiB;
}

static uint64_t key_of(uint64_t salt, unsigned round, unsigned i)
{
	uint64_t s = salt ^ ((uint64_t)round << 32) ^ i;

	return splitmix(&s);
}

/* TOP/<hex[0:3]>/<hex[3:5]>_g0/<hex>.bin, relative to the root. */
static void key_path(char *out, size_t n, uint64_t key)
{
	char hex[HEXLEN + 1];

	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)key);
	if (eng_block_path(out, n, TOP, hex, 0) < 0)
		die("block path too long");
}

/* One line to the manifest, in one write(2) on an O_APPEND descriptor. */
__attribute__((format(printf, 2, 3))) static void mlog(int fd, const char *fmt,
						       ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n <= 0 || (size_t)n >= sizeof(line) ||
	    write(fd, line, (size_t)n) != n)
		die("manifest write: %s", strerror(errno));
}

/* ---- run ---- */

struct old_key {
	unsigned round;
	uint64_t key;
	uint64_t size;
};

struct run {
	int root;
	int mfd;
	unsigned round;
	unsigned nkeys;
	uint64_t salt;
	struct old_key *old;
	size_t nold;
	atomic_uint next;     /* store slots handed out */
	atomic_uchar *stored; /* per key of this round: a rename returned */
	atomic_uint failures;
	atomic_ulong stores, exists, store_err, unlinks, loads, misses,
		load_err;
	pthread_mutex_t out_lock;
};

static atomic_int stop;

static void on_stop(int sig)
{
	(void)sig;
	atomic_store(&stop, 1);
}

/* Whether the mount still answers (statfs is never cached by the kernel). */
static int conn_alive(struct run *r)
{
	struct statfs sf;

	return fstatfs(r->root, &sf) == 0;
}

/*
 * An operation failed: fine once the daemon is gone, a failure while the
 * mount answers. Returns 1 when the thread should stop.
 */
__attribute__((format(printf, 3, 4))) static int
op_failed(struct run *r, int err, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err == ENOTCONN || err == ECONNABORTED || !conn_alive(r))
		return 1;
	atomic_fetch_add(&r->failures, 1);
	pthread_mutex_lock(&r->out_lock);
	fprintf(stderr, "FAIL while mounted: %s: %s\n", what, ename(err));
	pthread_mutex_unlock(&r->out_lock);
	return 0;
}

/* What store_one's hooks need. */
struct store_ctx {
	struct run *r;
	unsigned char *buf;
	uint64_t key, seed, size;
};

/* The engine copies its row into the buffer right before the open. */
static void store_fill(void *arg)
{
	struct store_ctx *c = arg;

	fill_block(c->buf, c->size, c->key, c->seed);
}

/* close(2) of the temp returned 0: the "intent" line, before the rename. */
static void store_committed(void *arg)
{
	struct store_ctx *c = arg;

	mlog(c->r->mfd, "I %u %016llx %llu %llu\n", c->r->round,
	     (unsigned long long)c->key, (unsigned long long)c->seed,
	     (unsigned long long)c->size);
}

/*
 * vLLM's store of one block (tests/common/engine.c; without the existence
 * short-cut when shortcut is 0), logged to the manifest. Returns 0 stored,
 * -1 existed, else an errno (*step names the failing step).
 */
static int store_one(struct run *r, uint64_t key, uint64_t seed,
		     uint64_t suffix, unsigned char *buf, int shortcut,
		     const char **step)
{
	struct store_ctx c = {.r = r,
			      .buf = buf,
			      .key = key,
			      .seed = seed,
			      .size = key_size(key)};
	char rel[512];
	struct eng_store s = {
		.dirfd = r->root,
		.path = rel,
		.buf = buf,
		.size = c.size,
		.flags = ENG_DIRECT |
			 (shortcut ? ENG_ACCESS | ENG_ACCESS_STRICT : 0),
		.suffix = suffix,
		.fill = store_fill,
		.committed = store_committed,
		.arg = &c,
	};
	int rc;

	key_path(rel, sizeof(rel), key);
	rc = eng_store(&s);
	*step = s.step;
	if (rc == ENG_SKIPPED)
		return -1;
	if (rc < 0)
		return -rc;
	mlog(r->mfd, "D %u %016llx %llu %llu\n", r->round,
	     (unsigned long long)key, (unsigned long long)seed,
	     (unsigned long long)c.size);
	return 0;
}

struct thr {
	struct run *r;
	unsigned id;
	pthread_t t;
};

static void *writer_main(void *arg)
{
	struct thr *t = arg;
	struct run *r = t->r;
	uint64_t rnd = r->salt ^ ((uint64_t)r->round << 40) ^ t->id;
	/*
	 * vLLM picks one random temp suffix per I/O thread; here the low
	 * byte is the writer's id, so two writers never share a temp name.
	 */
	uint64_t suffix = ((splitmix(&rnd) >> 1) & ~0xffull) | t->id;
	uint64_t nstores = 0;
	unsigned char *buf = abuf(2 * MiB);
	size_t next_old = t->id;
	unsigned long op = 0;
	const char *step;
	char rel[512];
	int e;

	while (!atomic_load(&stop)) {
		/* The evictor's share: the old keys i with i % NWRITERS == id. */
		while (next_old < r->nold &&
		       r->old[next_old].round + 2 > r->round)
			next_old += NWRITERS;
		if (next_old < r->nold && (op++ & 1)) {
			uint64_t key = r->old[next_old].key;

			next_old += NWRITERS;
			key_path(rel, sizeof(rel), key);
			mlog(r->mfd, "U %016llx\n", (unsigned long long)key);
			e = unlinkat(r->root, rel, 0) == 0 ? 0 : errno;
			/*
			 * The key was visible after the last remount and only
			 * this writer unlinks it: ENOENT means it vanished.
			 */
			if (e == 0 || e == ENOENT)
				mlog(r->mfd, "X %016llx\n",
				     (unsigned long long)key);
			if (e == 0)
				atomic_fetch_add(&r->unlinks, 1);
			else if (op_failed(r, e, "unlink %s", rel))
				break;
			continue;
		}
		/* Two to three stores of each key start at about once. */
		unsigned slot = atomic_fetch_add(&r->next, 1);
		unsigned k =
			(slot / 2 + (unsigned)(splitmix(&rnd) % 3)) % r->nkeys;
		uint64_t key = key_of(r->salt, r->round, k);
		uint64_t seed = ((uint64_t)r->round << 40) |
				((uint64_t)t->id << 32) | ++nstores;

		e = store_one(r, key, seed, suffix, buf, 1, &step);
		if (e == 0) {
			atomic_store(&r->stored[k], 1);
			atomic_fetch_add(&r->stores, 1);
		} else if (e < 0) {
			atomic_fetch_add(&r->exists, 1);
		} else {
			atomic_fetch_add(&r->store_err, 1);
			key_path(rel, sizeof(rel), key);
			if (op_failed(r, e, "store %s: %s", rel, step))
				break;
		}
	}
	munmap(buf, 2 * MiB);
	return NULL;
}

/* vLLM's load of one block (tests/common/engine.c), checked; a short read
 * is a failure here, not an unlink. Returns 0, or 1 to stop. */
static int load_one(struct run *r, uint64_t key, unsigned char *buf,
		    unsigned char *exp)
{
	uint64_t size = key_size(key), seed;
	char rel[512], why[256];
	struct eng_load l = {.dirfd = r->root,
			     .path = rel,
			     .buf = buf,
			     .size = size,
			     .flags = ENG_DIRECT};
	ssize_t n;

	key_path(rel, sizeof(rel), key);
	n = eng_load(&l);
	if (n == -ENOENT && strcmp(l.step, "open") == 0) {
		atomic_fetch_add(&r->misses, 1);
		/* A miss is cheap: leave the CPUs to the writers. */
		usleep(1000);
		return 0;
	}
	if (n < 0) {
		atomic_fetch_add(&r->load_err, 1);
		return op_failed(r, (int)-n, "load %s: %s", rel, l.step);
	}
	if (l.short_read) {
		atomic_fetch_add(&r->load_err, 1);
		return op_failed(r, EIO, "load %s: short read %zd of %llu", rel,
				 n, (unsigned long long)size);
	}
	/* A read that returned the whole size must be a whole version. */
	if (check_block(buf, size, key, exp, &seed, why, sizeof(why)) < 0) {
		atomic_fetch_add(&r->failures, 1);
		pthread_mutex_lock(&r->out_lock);
		fprintf(stderr, "FAIL MISMATCH load %s: %s\n", rel, why);
		pthread_mutex_unlock(&r->out_lock);
		return 0;
	}
	atomic_fetch_add(&r->loads, 1);
	return 0;
}

static void *reader_main(void *arg)
{
	struct thr *t = arg;
	struct run *r = t->r;
	uint64_t rnd = r->salt ^ ((uint64_t)r->round << 40) ^ (0x100u + t->id);
	unsigned char *buf = abuf(2 * MiB), *exp = abuf(2 * MiB);

	while (!atomic_load(&stop)) {
		uint64_t x = splitmix(&rnd), key;

		if ((x & 1) && r->nold > 0) {
			key = r->old[(x >> 1) % r->nold].key;
		} else {
			/* A key of this round stored lately, or about to be. */
			unsigned hi = atomic_load(&r->next) / 2 + 3;

			key = key_of(r->salt, r->round,
				     (unsigned)((x >> 1) % hi) % r->nkeys);
		}
		if (load_one(r, key, buf, exp))
			break;
	}
	munmap(buf, 2 * MiB);
	munmap(exp, 2 * MiB);
	return NULL;
}

static void read_old(struct run *r, const char *path)
{
	char hex[64];
	unsigned long long size;
	size_t cap = 0;
	unsigned round;
	FILE *f = fopen(path, "r");

	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fscanf(f, "%u %63s %llu", &round, hex, &size) == 3) {
		if (r->nold == cap) {
			cap = cap ? cap * 2 : 256;
			r->old = realloc(r->old, cap * sizeof(*r->old));
			if (!r->old)
				die("out of memory");
		}
		r->old[r->nold++] = (struct old_key){
			.round = round,
			.key = strtoull(hex, NULL, 16),
			.size = size,
		};
	}
	fclose(f);
}

static int cmd_run(char **argv)
{
	struct run r = {.out_lock = PTHREAD_MUTEX_INITIALIZER};
	struct thr w[NWRITERS], rd[NREADERS];
	struct sigaction sa = {.sa_handler = on_stop};
	unsigned nstored = 0;

	r.root = open(argv[0], O_RDONLY | O_DIRECTORY);
	if (r.root < 0)
		die("%s: %s", argv[0], strerror(errno));
	r.mfd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (r.mfd < 0)
		die("%s: %s", argv[1], strerror(errno));
	r.round = (unsigned)strtoul(argv[2], NULL, 0);
	r.nkeys = (unsigned)strtoul(argv[3], NULL, 0);
	read_old(&r, argv[4]);
	r.salt = strtoull(argv[5], NULL, 0);
	if (r.nkeys == 0)
		die("NKEYS must be positive");
	r.stored = calloc(r.nkeys, sizeof(*r.stored));
	if (!r.stored)
		die("out of memory");
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i] = (struct thr){.r = &r, .id = i};
		if (pthread_create(&w[i].t, NULL, writer_main, &w[i]) != 0)
			die("pthread_create");
	}
	for (unsigned i = 0; i < NREADERS; i++) {
		rd[i] = (struct thr){.r = &r, .id = i};
		if (pthread_create(&rd[i].t, NULL, reader_main, &rd[i]) != 0)
			die("pthread_create");
	}
	for (unsigned i = 0; i < NWRITERS; i++)
		pthread_join(w[i].t, NULL);
	for (unsigned i = 0; i < NREADERS; i++)
		pthread_join(rd[i].t, NULL);
	for (unsigned i = 0; i < r.nkeys; i++)
		nstored += atomic_load(&r.stored[i]);
	printf("run: round %u: %lu stores (%u keys), %lu existed, %lu store "
	       "errors; %lu unlinks of %zu old keys; %lu loads matched, %lu "
	       "missed, %lu load errors; %u failures while mounted\n",
	       r.round, atomic_load(&r.stores), nstored, atomic_load(&r.exists),
	       atomic_load(&r.store_err), atomic_load(&r.unlinks), r.nold,
	       atomic_load(&r.loads), atomic_load(&r.misses),
	       atomic_load(&r.load_err), atomic_load(&r.failures));
	free(r.stored);
	free(r.old);
	return atomic_load(&r.failures) ? 1 : 0;
}

/* ---- verify ---- */

struct seed_ev {
	uint64_t seed;
	long i_line; /* -1: none */
	long d_line;
};

struct kstate {
	uint64_t key; /* 0: empty slot */
	unsigned round;
	uint64_t size;
	struct seed_ev *seeds;
	size_t nseeds;
	long u_line, x_line; /* last U and X, -1: none */
	int visible;
};

struct table {
	struct kstate *s;
	size_t cap, n;
};

static struct kstate *tget(struct table *t, uint64_t key, int add)
{
	size_t i;

	if (t->n * 2 >= t->cap && add) {
		struct table nt = {.cap = t->cap ? t->cap * 2 : 1024};

		nt.s = calloc(nt.cap, sizeof(*nt.s));
		if (!nt.s)
			die("out of memory");
		for (size_t j = 0; j < t->cap; j++) {
			if (!t->s[j].key)
				continue;
			for (i = t->s[j].key % nt.cap; nt.s[i].key;
			     i = (i + 1) % nt.cap)
				;
			nt.s[i] = t->s[j];
		}
		nt.n = t->n;
		free(t->s);
		*t = nt;
	}
	if (!t->cap)
		return NULL;
	for (i = key % t->cap; t->s[i].key; i = (i + 1) % t->cap)
		if (t->s[i].key == key)
			return &t->s[i];
	if (!add)
		return NULL;
	t->s[i] = (struct kstate){.key = key, .u_line = -1, .x_line = -1};
	t->n++;
	return &t->s[i];
}

static struct seed_ev *seed_of(struct kstate *k, uint64_t seed)
{
	for (size_t i = 0; i < k->nseeds; i++)
		if (k->seeds[i].seed == seed)
			return &k->seeds[i];
	k->seeds = realloc(k->seeds, (k->nseeds + 1) * sizeof(*k->seeds));
	if (!k->seeds)
		die("out of memory");
	k->seeds[k->nseeds] =
		(struct seed_ev){.seed = seed, .i_line = -1, .d_line = -1};
	return &k->seeds[k->nseeds++];
}

static void read_manifest(struct table *t, const char *path)
{
	char line[512], hex[64];
	unsigned long long seed, size;
	unsigned round;
	long no = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		struct kstate *k;
		struct seed_ev *s;

		no++;
		/* A client killed inside write(2) may leave a torn last line. */
		if (len == 0 || line[len - 1] != '\n')
			break;
		if ((line[0] == 'I' || line[0] == 'D') &&
		    sscanf(line + 1, "%u %63s %llu %llu", &round, hex, &seed,
			   &size) == 4) {
			k = tget(t, strtoull(hex, NULL, 16), 1);
			k->round = round;
			k->size = size;
			s = seed_of(k, seed);
			if (line[0] == 'I')
				s->i_line = no;
			else
				s->d_line = no;
		} else if ((line[0] == 'U' || line[0] == 'X') &&
			   sscanf(line + 1, "%63s", hex) == 1) {
			k = tget(t, strtoull(hex, NULL, 16), 1);
			if (line[0] == 'U')
				k->u_line = no;
			else
				k->x_line = no;
		} else {
			die("%s:%ld: bad line: %s", path, no, line);
		}
	}
	fclose(f);
}

/* Whether seed is an acceptable version of k (see the top comment). */
static int acceptable(const struct kstate *k, uint64_t seed)
{
	const struct seed_ev *s = NULL;

	for (size_t i = 0; i < k->nseeds; i++)
		if (k->seeds[i].seed == seed)
			s = &k->seeds[i];
	if (!s || s->i_line < 0)
		return 0;
	if (s->d_line < 0)
		return 1;
	for (size_t i = 0; i < k->nseeds; i++)
		if (k->seeds[i].d_line >= 0 && k->seeds[i].i_line > s->d_line)
			return 0;
	return 1;
}

struct verify {
	int root;
	struct table t;
	struct kstate **vis; /* visible keys, to load */
	size_t nvis, capvis;
	atomic_size_t next;
	atomic_uint bad;
	unsigned phantom, tmp;
	pthread_mutex_t out_lock;
};

static void vis_add(struct verify *v, struct kstate *k)
{
	if (v->nvis == v->capvis) {
		v->capvis = v->capvis ? v->capvis * 2 : 1024;
		v->vis = realloc(v->vis, v->capvis * sizeof(*v->vis));
		if (!v->vis)
			die("out of memory");
	}
	v->vis[v->nvis++] = k;
}

/* Whether rel is TOP/<hex[0:3]>/<hex[3:5]>_g0/<hex>.bin; its key in *key. */
static int parse_block_path(const char *rel, uint64_t *key)
{
	char want[512];
	unsigned long long k;
	int end = 0;
	const char *base = strrchr(rel, '/');

	base = base ? base + 1 : rel;
	if (strlen(base) != HEXLEN + 4 ||
	    sscanf(base, "%16llx.bin%n", &k, &end) != 1 || base[end] != '\0')
		return 0;
	key_path(want, sizeof(want), k);
	*key = k;
	return strcmp(want, rel) == 0;
}

static void walk(struct verify *v, int dfd, const char *rel)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d)
		die("opendir %s: %s", rel, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		char path[1024];
		struct stat st;
		struct kstate *k;
		uint64_t key;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (rel[0] == '\0' && strcmp(de->d_name, ".kvfs") == 0))
			continue;
		snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "",
			 de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			die("stat %s: %s", path, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY);

			if (sub < 0)
				die("open %s: %s", path, strerror(errno));
			walk(v, sub, path);
			continue;
		}
		if (strlen(path) > 4 &&
		    strcmp(path + strlen(path) - 4, ".tmp") == 0) {
			printf("TMP %s (size %lld)\n", path,
			       (long long)st.st_size);
			v->tmp++;
			continue;
		}
		if (!S_ISREG(st.st_mode) || !parse_block_path(path, &key) ||
		    !(k = tget(&v->t, key, 0)) || k->nseeds == 0) {
			printf("PHANTOM %s: not in the manifest\n", path);
			v->phantom++;
			continue;
		}
		k->visible = 1;
		vis_add(v, k);
	}
	closedir(d);
}

static void *verify_main(void *arg)
{
	struct verify *v = arg;
	unsigned char *buf = abuf(2 * MiB), *exp = abuf(2 * MiB);
	char rel[512], why[256];
	size_t i;

	while ((i = atomic_fetch_add(&v->next, 1)) < v->nvis) {
		struct kstate *k = v->vis[i];
		uint64_t seed;
		struct stat st;
		struct eng_load l = {.dirfd = v->root,
				     .path = rel,
				     .buf = buf,
				     .flags = ENG_DIRECT,
				     .st = &st};
		ssize_t n;

		key_path(rel, sizeof(rel), k->key);
		why[0] = '\0';
		l.size = k->size > 2 * MiB ? 2 * MiB : k->size;
		n = eng_load(&l);
		if (n < 0)
			snprintf(why, sizeof(why), "%s: %s", l.step,
				 ename((int)-n));
		else if ((uint64_t)n != k->size ||
			 (uint64_t)st.st_size != k->size)
			snprintf(why, sizeof(why),
				 "size %lld, read %zd (want %llu)",
				 (long long)st.st_size, n,
				 (unsigned long long)k->size);
		else if (check_block(buf, k->size, k->key, exp, &seed, why,
				     sizeof(why)) == 0 &&
			 !acceptable(k, seed))
			snprintf(why, sizeof(why),
				 "whole version of seed %llu, which the "
				 "manifest does not allow here",
				 (unsigned long long)seed);
		if (why[0]) {
			atomic_fetch_add(&v->bad, 1);
			pthread_mutex_lock(&v->out_lock);
			printf("BAD %s: %s\n", rel, why);
			for (size_t j = 0; j < k->nseeds; j++)
				printf("  manifest: seed %llu I line %ld D "
				       "line %ld\n",
				       (unsigned long long)k->seeds[j].seed,
				       k->seeds[j].i_line, k->seeds[j].d_line);
			pthread_mutex_unlock(&v->out_lock);
		}
	}
	munmap(buf, 2 * MiB);
	munmap(exp, 2 * MiB);
	return NULL;
}

static int cmd_verify(char **argv)
{
	struct verify v = {.out_lock = PTHREAD_MUTEX_INITIALIZER};
	unsigned must = 0, missing = 0, maybe = 0, gone = 0;
	unsigned long long bytes = 0;
	pthread_t t[NVERIFY];
	FILE *live;
	int dfd;

	read_manifest(&v.t, argv[1]);
	v.root = open(argv[0], O_RDONLY | O_DIRECTORY);
	if (v.root < 0)
		die("%s: %s", argv[0], strerror(errno));
	dfd = dup(v.root);
	if (dfd < 0)
		die("dup: %s", strerror(errno));
	walk(&v, dfd, "");
	for (size_t i = 0; i < v.t.cap; i++) {
		struct kstate *k = &v.t.s[i];
		int has_d = 0;

		if (!k->key)
			continue;
		for (size_t j = 0; j < k->nseeds; j++)
			has_d |= k->seeds[j].d_line >= 0;
		if (k->x_line >= 0) {
			gone++;
			if (k->visible) {
				printf("BAD key %016llx: visible after its "
				       "unlink returned\n",
				       (unsigned long long)k->key);
				atomic_fetch_add(&v.bad, 1);
			}
		} else if (k->u_line < 0 && has_d) {
			must++;
			if (!k->visible) {
				char rel[512];

				key_path(rel, sizeof(rel), k->key);
				printf("MISSING %s: a rename of it returned "
				       "(round %u)\n",
				       rel, k->round);
				missing++;
			}
		} else {
			maybe++;
		}
	}
	for (int i = 0; i < NVERIFY; i++)
		if (pthread_create(&t[i], NULL, verify_main, &v) != 0)
			die("pthread_create");
	for (int i = 0; i < NVERIFY; i++)
		pthread_join(t[i], NULL);
	live = fopen(argv[2], "w");
	if (!live)
		die("%s: %s", argv[2], strerror(errno));
	for (size_t i = 0; i < v.nvis; i++) {
		fprintf(live, "%u %016llx %llu\n", v.vis[i]->round,
			(unsigned long long)v.vis[i]->key,
			(unsigned long long)v.vis[i]->size);
		bytes += v.vis[i]->size;
	}
	if (fclose(live) != 0)
		die("%s: %s", argv[2], strerror(errno));
	printf("verify: %zu keys in the manifest; %zu visible (%llu bytes); "
	       "%u must be present, %u missing; %u bad; %u phantom; %u tmp; "
	       "%u either way; %u unlinked\n",
	       v.t.n, v.nvis, bytes, must, missing, atomic_load(&v.bad),
	       v.phantom, v.tmp, maybe, gone);
	for (size_t i = 0; i < v.t.cap; i++)
		free(v.t.s[i].seeds);
	free(v.t.s);
	free(v.vis);
	return missing || atomic_load(&v.bad) || v.phantom || v.tmp ? 1 : 0;
}

static int cmd_overwrite(char **argv)
{
	struct run r = {.root = open(argv[0], O_RDONLY | O_DIRECTORY),
			.mfd = open("/dev/null", O_WRONLY),
			.round = (unsigned)strtoul(argv[4], NULL, 0)};
	uint64_t key = strtoull(argv[1], NULL, 16);
	unsigned char *buf = abuf(2 * MiB);
	const char *step;
	int e;

	if (r.root < 0 || r.mfd < 0)
		die("%s: %s", argv[0], strerror(errno));
	if (strtoull(argv[2], NULL, 0) != key_size(key))
		die("key %s has size %llu", argv[1],
		    (unsigned long long)key_size(key));
	e = store_one(&r, key, strtoull(argv[3], NULL, 0), 1, buf, 0, &step);
	printf("overwrite: %s %s\n", step, ename(e));
	munmap(buf, 2 * MiB);
	close(r.root);
	close(r.mfd);
	return e ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 8 && strcmp(argv[1], "run") == 0)
		return cmd_run(argv + 2);
	if (argc == 5 && strcmp(argv[1], "verify") == 0)
		return cmd_verify(argv + 2);
	if (argc == 7 && strcmp(argv[1], "overwrite") == 0)
		return cmd_overwrite(argv + 2);
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
