/* SPDX-License-Identifier: MIT */
/*
 * torn_client: the engine side of scripts/torn-test. Replays vLLM's FS
 * tier store, load and lookup sequences (vllm-fs-tier.md, "Exact syscall
 * sequences") over a manifest of blocks, plus the damage the test does to
 * data files and the fault-injection hook.
 *
 *   torn_client gen ROOT COUNT SEED       print a manifest: COUNT blocks of
 *                                         mixed sizes under ROOT
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
 * A manifest has one block a line: "PATH SIZE SEED". A block's bytes are a
 * stream derived from SEED, so a load can prove it got that version whole.
 * Blocks whose size is a multiple of 4 KiB are stored and loaded with
 * O_DIRECT, the others buffered, as vLLM decides per engine.
 *
 * Output is one line per block, in manifest order:
 *   store:  "PATH stored" | "PATH exists" | "PATH fail STEP ERRNO"
 *           | "PATH skipped" (after its thread's first failure)
 *   check:  "PATH pre=hit|miss|ERRNO load=RESULT post=hit|miss|ERRNO"
 *           RESULT: match | MISMATCH | short:N (the engine then unlinked
 *           the file: +unlinked or +unlink:ERRNO) | open:ERRNO
 *           | read:ERRNO
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

#include "tclient.h"

/* The bytes of block version seed: a splitmix stream, 8 bytes a step. */
static void fill(unsigned char *b, size_t len, uint64_t seed)
{
	uint64_t s = seed ^ 0x746f726e5f74657aull;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = splitmix(&s);

		memcpy(b + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = splitmix(&s);

		memcpy(b + i, &v, len - i);
	}
}

static int direct_for(size_t size)
{
	return size % PAGE == 0 ? O_DIRECT : 0;
}

struct blk {
	char *path;
	size_t size;
	uint64_t seed;
	char out[160]; /* the result line's tail */
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
		if (sscanf(line, "%4095s %llu %llu", path, &size, &seed) != 3)
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

/* mkdir -p of path's parent, tolerating EEXIST on a directory. */
static int mkdir_parent(const char *path)
{
	char buf[4096];
	struct stat sb;
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	p = strrchr(buf, '/');
	if (!p || p == buf)
		return 0;
	*p = '\0';
	if (stat(buf, &sb) == 0)
		return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return errno;
		*p = '/';
	}
	if (mkdir(buf, 0777) < 0 && errno != EEXIST)
		return errno;
	if (stat(buf, &sb) < 0)
		return errno;
	return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
}

/* vLLM's _store_block; the result goes to b->out. */
static void store_one(struct blk *b, unsigned char *buf, uint64_t suffix)
{
	char tmp[4200];
	ssize_t n;
	int fd, e;

	if (access(b->path, F_OK) == 0) {
		snprintf(b->out, sizeof(b->out), "exists");
		return;
	}
	e = mkdir_parent(b->path);
	if (e) {
		snprintf(b->out, sizeof(b->out), "fail mkdir %s", ename(e));
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", b->path, suffix);
	fill(buf, b->size, b->seed);
	fd = open(tmp,
		  O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | direct_for(b->size),
		  0644);
	if (fd < 0) {
		snprintf(b->out, sizeof(b->out), "fail open %s", ename(errno));
		return;
	}
	n = write(fd, buf, b->size);
	if (n != (ssize_t)b->size) {
		e = n < 0 ? errno : EIO;
		close(fd);
		unlink(tmp);
		snprintf(b->out, sizeof(b->out), "fail write %s", ename(e));
		return;
	}
	if (close(fd) < 0) {
		e = errno;
		unlink(tmp);
		snprintf(b->out, sizeof(b->out), "fail close %s", ename(e));
		return;
	}
	if (rename(tmp, b->path) < 0) {
		e = errno;
		unlink(tmp);
		snprintf(b->out, sizeof(b->out), "fail rename %s", ename(e));
		return;
	}
	snprintf(b->out, sizeof(b->out), "stored");
}

static const char *lookup(const char *path)
{
	if (access(path, F_OK) == 0)
		return "hit";
	return errno == ENOENT ? "miss" : ename(errno);
}

/* vLLM's _load_block into buf/want (size bytes each); appends to out. */
static void load_one(const struct blk *b, unsigned char *buf,
		     unsigned char *want, char *out, size_t outlen)
{
	ssize_t n;
	int fd;

	fd = open(b->path, O_RDONLY | direct_for(b->size));
	if (fd < 0) {
		snprintf(out, outlen, "open:%s", ename(errno));
		return;
	}
	n = read(fd, buf, b->size);
	if (n < 0) {
		int e = errno;

		close(fd);
		snprintf(out, outlen, "read:%s", ename(e));
		return;
	}
	close(fd);
	if ((size_t)n < b->size) {
		/* A provable short read: the engine deletes the file. */
		if (unlink(b->path) == 0)
			snprintf(out, outlen, "short:%zd+unlinked", n);
		else
			snprintf(out, outlen, "short:%zd+unlink:%s", n,
				 ename(errno));
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
			snprintf(b->out, sizeof(b->out), "skipped");
			continue;
		}
		store_one(b, buf, suffix);
		failed = strncmp(b->out, "fail", 4) == 0;
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
		printf("%s %s\n", m.b[i].path, m.b[i].out);
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

static int gen(const char *root, unsigned count, uint64_t seed)
{
	uint64_t s = seed;

	for (unsigned i = 0; i < count; i++) {
		uint64_t h1 = splitmix(&s), h2 = splitmix(&s);
		size_t size = gen_sizes[splitmix(&s) % (sizeof(gen_sizes) /
							sizeof(gen_sizes[0]))];
		char hex[40];

		snprintf(hex, sizeof(hex), "%016" PRIx64 "%016" PRIx64, h1, h2);
		printf("%s/%s/%.3s/%.2s_g0/%s.bin %zu %" PRIu64 "\n", root,
		       MODEL_DIR, hex, hex + 3, hex, size, seed * 1000003 + i);
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
			printf("%s evict:%s\n", m.b[i].path, ename(errno));
			continue;
		}
		e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
		if (e)
			printf("%s evict:%s\n", m.b[i].path, ename(e));
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
		printf("%s open:%s\n", path, ename(errno));
		return 0;
	}
	snprintf(inj, sizeof(inj), "%s",
		 ename(fsetxattr(fd, FAULT_XATTR, "5", 1, 0) == 0 ? 0 : errno));
	check_one(&b, buf, want);
	snprintf(clr, sizeof(clr), "%s",
		 ename(fsetxattr(fd, FAULT_XATTR, "0", 1, 0) == 0 ? 0 : errno));
	printf("%s inject=%s %s clear=%s after=%s\n", path, inj, b.out, clr,
	       lookup(path));
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
		"usage: %s gen ROOT COUNT SEED | store [-j N] MANIFEST |\n"
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
	if (strcmp(argv[1], "gen") == 0 && argc == 5)
		rc = gen(argv[2], (unsigned)strtoul(argv[3], NULL, 0),
			 strtoull(argv[4], NULL, 0));
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
