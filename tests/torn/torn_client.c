/* SPDX-License-Identifier: MIT */
/*
 * torn_client: the engine side of the torn suite (tests/torn). Replays
 * vLLM's FS tier store, load and lookup sequences (kvfs(7), LIFE OF A
 * BLOCK; the sequences are tests/common/engine.c) over a manifest of
 * blocks, plus the damage the tests do to data files and the
 * fault-injection hook.
 *
 *   torn_client gen ROOT COUNT SEED [SIZE]
 *                                         print a manifest: COUNT blocks of
 *                                         mixed sizes (all SIZE bytes when
 *                                         given: same names and seeds)
 *                                         under ROOT
 *   torn_client store [-j N] MANIFEST     store each block; like vLLM's
 *                                         batch_store_block a thread stops
 *                                         at its first failure
 *   torn_client check [-j N] MANIFEST     per block: access, load, access
 *   torn_client evict MANIFEST            drop the kernel's cached pages of
 *                                         each block (fadvise DONTNEED)
 *   torn_client eio PATH SIZE SEED        inject EIO on PATH's reads, run
 *                                         the load sequence, clear it
 *   torn_client corrupt FILE OFF LEN      invert LEN bytes of FILE at OFF
 *
 * A manifest has one block a line: "path=PATH size=SIZE seed=SEED". A
 * block's bytes are a stream derived from SEED, so a load can prove it got
 * that version whole. Blocks whose size is a multiple of 4 KiB are stored
 * and loaded with O_DIRECT, the others buffered, as vLLM decides per
 * engine.
 *
 * Output is one line per block, in manifest order, of key=value words (the
 * scripts read them by name):
 *   store:  "path=PATH store=stored" | "path=PATH store=exists"
 *           | "path=PATH store=fail step=STEP err=ERRNO"
 *           | "path=PATH store=skipped" (after its thread's first failure)
 *   check:  "path=PATH pre=hit|miss|ERRNO load=RESULT post=hit|miss|ERRNO"
 *           RESULT: match | MISMATCH | short:N (the engine then unlinked
 *           the file: +unlinked or +unlink:ERRNO) | open:ERRNO
 *           | read:ERRNO
 *   eio:    "path=PATH inject=ERRNO pre=.. load=.. post=.. clear=ERRNO
 *           after=hit|miss|ERRNO"
 *   evict:  "path=PATH evict=ERRNO" for the blocks it could not evict
 * Exit status: 0 when the program ran (the lines say what happened), 1 when
 * it could not, 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PAGE 4096u
#define KiB 1024ul
#define MiB (1024ul * 1024ul)
#define MAX_THREADS 32
#define MODEL_DIR "meta-llama_Llama-3.2-1B_5f2d1c9e8a47_r0"
#define FAULT_XATTR "user.kvfs.fault.read"

static const char *prog = "torn_client";

#include "engine.h"
#include "tclient.h"

/* The bytes of block version seed: a splitmix stream, 8 bytes a step. */
static void fill(unsigned char *b, size_t len, uint64_t seed)
{
	uint64_t s = seed ^ 0x746f726e5f74657aull;

	tc_fill_stream(b, len, &s);
}

static unsigned direct_for(size_t size)
{
	return size % PAGE == 0 ? ENG_DIRECT : 0;
}

struct blk {
	char *path;
	size_t size;
	uint64_t seed;
	char out[160];	    /* the result line's tail */
	unsigned char *buf; /* store: the buffer fill() fills */
};

struct manifest {
	struct blk *b;
	size_t n;
};

static void manifest_read(const char *file, struct manifest *m)
{
	char line[8192], path[4096];
	size_t cap = 0;
	FILE *f = fopen(file, "r");

	if (!f)
		die("%s: %s", file, strerror(errno));
	memset(m, 0, sizeof(*m));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long size, seed;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "path=%4095s size=%llu seed=%llu", path, &size,
			   &seed) != 3)
			die("%s: bad line: %s", file, line);
		if (m->n == cap) {
			struct blk *nb;

			cap = cap ? cap * 2 : 256;
			nb = realloc(m->b, cap * sizeof(*nb));
			if (!nb)
				die("out of memory");
			m->b = nb;
		}
		m->b[m->n].path = strdup(path);
		if (!m->b[m->n].path)
			die("out of memory");
		m->b[m->n].size = (size_t)size;
		m->b[m->n].seed = seed;
		m->b[m->n].out[0] = '\0';
		m->n++;
	}
	fclose(f);
}

static void manifest_free(struct manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->b[i].path);
	free(m->b);
}

/* The engine copies its row into the buffer right before the open. */
static void store_fill(void *arg)
{
	struct blk *b = arg;

	fill(b->buf, b->size, b->seed);
}

/* vLLM's _store_block (tests/common/engine.c); the result goes to b->out. */
static void store_one(struct blk *b, unsigned char *buf, uint64_t suffix)
{
	struct eng_store s = {
		.dirfd = AT_FDCWD,
		.path = b->path,
		.buf = buf,
		.size = b->size,
		.flags = ENG_ACCESS | direct_for(b->size),
		.suffix = suffix,
		.fill = store_fill,
		.arg = b,
	};
	int rc;

	b->buf = buf;
	rc = eng_store(&s);
	if (rc == ENG_SKIPPED)
		snprintf(b->out, sizeof(b->out), "store=exists");
	else if (rc == ENG_STORED)
		snprintf(b->out, sizeof(b->out), "store=stored");
	else
		snprintf(b->out, sizeof(b->out), "store=fail step=%s err=%s",
			 s.step, ename(-rc));
}

static const char *lookup(const char *path)
{
	if (access(path, F_OK) == 0)
		return "hit";
	return errno == ENOENT ? "miss" : ename(errno);
}

/* vLLM's _load_block (tests/common/engine.c) into buf/want (size bytes
 * each); the result to out. */
static void load_one(const struct blk *b, unsigned char *buf,
		     unsigned char *want, char *out, size_t outlen)
{
	struct eng_load l = {.dirfd = AT_FDCWD,
			     .path = b->path,
			     .buf = buf,
			     .size = b->size,
			     .flags = direct_for(b->size) | ENG_UNLINK_SHORT};
	ssize_t n = eng_load(&l);

	if (n < 0) {
		snprintf(out, outlen, "%s:%s", l.step, ename((int)-n));
		return;
	}
	if (l.short_read) {
		/* A provable short read: the engine deleted the file. */
		if (l.unlinked)
			snprintf(out, outlen, "short:%zd+unlinked", n);
		else
			snprintf(out, outlen, "short:%zd+unlink:%s", n,
				 ename(l.unlink_err));
		return;
	}
	fill(want, b->size, b->seed);
	snprintf(out, outlen, "%s",
		 memcmp(buf, want, b->size) == 0 ? "match" : "MISMATCH");
}

static void check_one(struct blk *b, unsigned char *buf, unsigned char *want)
{
	char pre[16], load[96];

	snprintf(pre, sizeof(pre), "%s", lookup(b->path));
	load_one(b, buf, want, load, sizeof(load));
	snprintf(b->out, sizeof(b->out), "pre=%s load=%s post=%s", pre, load,
		 lookup(b->path));
}

struct worker {
	pthread_t tid;
	struct manifest *m;
	unsigned idx, nthreads;
	int mode; /* 's' store, 'c' check */
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	size_t max = 0;
	unsigned char *buf, *want = NULL;
	uint64_t suffix = 0x5eed0000ull + (uint64_t)getpid() * 64 + w->idx;
	int failed = 0;

	for (size_t i = w->idx; i < w->m->n; i += w->nthreads)
		if (w->m->b[i].size > max)
			max = w->m->b[i].size;
	max = (max + PAGE - 1) / PAGE * PAGE;
	buf = abuf(max);
	if (w->mode == 'c')
		want = abuf(max);
	for (size_t i = w->idx; i < w->m->n; i += w->nthreads) {
		struct blk *b = &w->m->b[i];

		if (w->mode == 'c') {
			check_one(b, buf, want);
			continue;
		}
		if (failed) {
			snprintf(b->out, sizeof(b->out), "store=skipped");
			continue;
		}
		store_one(b, buf, suffix);
		failed = strncmp(b->out, "store=fail", 10) == 0;
	}
	afree(buf, max);
	if (want)
		afree(want, max);
	return NULL;
}

static int run_manifest(int mode, int argc, char **argv)
{
	struct worker w[MAX_THREADS];
	unsigned nthreads = 1;
	struct manifest m;

	if (argc == 5 && strcmp(argv[2], "-j") == 0) {
		nthreads = (unsigned)atoi(argv[3]);
		argv += 2;
		argc -= 2;
	}
	if (argc != 3 || nthreads < 1 || nthreads > MAX_THREADS)
		return -1;
	manifest_read(argv[2], &m);
	if (nthreads > m.n && m.n > 0)
		nthreads = (unsigned)m.n;
	for (unsigned t = 0; t < nthreads; t++) {
		w[t] = (struct worker){
			.m = &m, .idx = t, .nthreads = nthreads, .mode = mode};
		if (pthread_create(&w[t].tid, NULL, worker_run, &w[t]) != 0)
			die("pthread_create failed");
	}
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(w[t].tid, NULL);
	for (size_t i = 0; i < m.n; i++)
		printf("path=%s %s\n", m.b[i].path, m.b[i].out);
	manifest_free(&m);
	return 0;
}

/*
 * Block sizes: what engines with different models and block sizes store.
 * Most are multiples of 4 KiB (O_DIRECT); a few are not (buffered). Several
 * span many 128 KiB checksum chunks.
 */
static const size_t gen_sizes[] = {
	4 * KiB,   12 * KiB,  64 * KiB,	 128 * KiB,	132 * KiB,
	256 * KiB, 384 * KiB, 512 * KiB, 640 * KiB,	1 * MiB,
	2 * MiB,   10000,     200001,	 1 * MiB + 123,
};

/* A manifest of count blocks under root; every block fixed_size bytes
 * when that is not 0 (the sizes are drawn all the same, so names and seeds
 * do not change). */
static int gen(const char *root, unsigned count, uint64_t seed,
	       size_t fixed_size)
{
	uint64_t s = seed;
	char prefix[4096];

	snprintf(prefix, sizeof(prefix), "%s/%s", root, MODEL_DIR);

	for (unsigned i = 0; i < count; i++) {
		uint64_t h1 = splitmix(&s), h2 = splitmix(&s);
		size_t size = gen_sizes[splitmix(&s) % (sizeof(gen_sizes) /
							sizeof(gen_sizes[0]))];
		char hex[40], path[4200];

		snprintf(hex, sizeof(hex), "%016" PRIx64 "%016" PRIx64, h1, h2);
		if (eng_block_path(path, sizeof(path), prefix, hex, 0) < 0)
			die("%s: path too long", root);
		printf("path=%s size=%zu seed=%" PRIu64 "\n", path,
		       fixed_size ? fixed_size : size, seed * 1000003 + i);
	}
	return 0;
}

static int evict(const char *file)
{
	struct manifest m;

	manifest_read(file, &m);
	for (size_t i = 0; i < m.n; i++) {
		int fd = open(m.b[i].path, O_RDONLY);
		int e;

		if (fd < 0) {
			printf("path=%s evict=%s\n", m.b[i].path, ename(errno));
			continue;
		}
		e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
		if (e)
			printf("path=%s evict=%s\n", m.b[i].path, ename(e));
	}
	manifest_free(&m);
	return 0;
}

/*
 * Scenario 5: make PATH's reads fail with EIO through the fault hook,
 * run the engine's lookup and load on it, then clear the fault. The hook
 * is set and cleared through a descriptor opened first: once the read has
 * failed the name is a miss, so it cannot be reached by path.
 */
static int eio(const char *path, size_t size, uint64_t seed)
{
	struct blk b = {.path = (char *)path, .size = size, .seed = seed};
	size_t asz = (size + PAGE - 1) / PAGE * PAGE;
	unsigned char *buf = abuf(asz), *want = abuf(asz);
	char inj[16], clr[16];
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("path=%s open=%s\n", path, ename(errno));
		return 0;
	}
	snprintf(inj, sizeof(inj), "%s",
		 ename(fsetxattr(fd, FAULT_XATTR, "5", 1, 0) == 0 ? 0 : errno));
	check_one(&b, buf, want);
	snprintf(clr, sizeof(clr), "%s",
		 ename(fsetxattr(fd, FAULT_XATTR, "0", 1, 0) == 0 ? 0 : errno));
	printf("path=%s inject=%s %s clear=%s after=%s\n", path, inj, b.out,
	       clr, lookup(path));
	close(fd);
	afree(buf, asz);
	afree(want, asz);
	return 0;
}

static int corrupt(const char *file, uint64_t off, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	ssize_t n;
	int fd;

	if (!buf)
		die("out of memory");
	fd = open(file, O_RDWR);
	if (fd < 0)
		die("%s: %s", file, strerror(errno));
	n = pread(fd, buf, len, (off_t)off);
	if (n != (ssize_t)len)
		die("%s: cannot read %zu bytes at %" PRIu64, file, len, off);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)~buf[i];
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		die("%s: cannot write at %" PRIu64 ": %s", file, off,
		    strerror(errno));
	if (fsync(fd) < 0 || close(fd) < 0)
		die("%s: %s", file, strerror(errno));
	free(buf);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s gen ROOT COUNT SEED [SIZE] | store [-j N] MANIFEST "
		"|\n"
		"       check [-j N] MANIFEST | evict MANIFEST |\n"
		"       eio PATH SIZE SEED | corrupt FILE OFF LEN\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	int rc = -1;

	if (argc < 2)
		usage();
	if (strcmp(argv[1], "gen") == 0 && (argc == 5 || argc == 6))
		rc = gen(argv[2], (unsigned)strtoul(argv[3], NULL, 0),
			 strtoull(argv[4], NULL, 0),
			 argc == 6 ? strtoull(argv[5], NULL, 0) : 0);
	else if (strcmp(argv[1], "store") == 0)
		rc = run_manifest('s', argc, argv);
	else if (strcmp(argv[1], "check") == 0)
		rc = run_manifest('c', argc, argv);
	else if (strcmp(argv[1], "evict") == 0 && argc == 3)
		rc = evict(argv[2]);
	else if (strcmp(argv[1], "eio") == 0 && argc == 5)
		rc = eio(argv[2], strtoull(argv[3], NULL, 0),
			 strtoull(argv[4], NULL, 0));
	else if (strcmp(argv[1], "corrupt") == 0 && argc == 5)
		rc = corrupt(argv[2], strtoull(argv[3], NULL, 0),
			     strtoull(argv[4], NULL, 0));
	if (rc < 0)
		usage();
	fflush(stdout);
	return rc;
}
