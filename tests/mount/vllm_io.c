/* SPDX-License-Identifier: MIT */
/*
 * vllm_io: replays vLLM's FS offload tier syscall sequences (startup,
 * O_DIRECT probe, store, load, lookup; vllm-fs-tier.md "Exact syscall
 * sequences") against a directory, so the same run can be made on a plain
 * local directory and on a kvfs mount and the transcripts compared.
 *
 * Modes (ROOT is the tier's root_dir):
 *   seq ROOT             the contract sequences for 512 KiB, 2 MiB, 5 MiB and
 *                        a non-4 KiB-multiple size, mkdir -p races, lookups
 *   stress ROOT [opts]   16 writers + 16 readers + a lookup thread over
 *                        overlapping keys, including rename-over of the same
 *                        name while readers load it
 *   populate ROOT PHASE  stores the blocks of remount phase 1 or 2
 *   verify ROOT PHASE    loads every block expected after PHASE, byte-exact
 *
 * stdout is the transcript: deterministic lines "step: result" that must be
 * identical on every correct filesystem. stderr carries information that
 * may legitimately differ (counts, timings). Exit status: 0 when the run
 * itself completed (the transcript says what happened), 1 on a self-check
 * failure that makes the transcript meaningless, 2 on usage errors.
 *
 * Block contents are self-identifying: every 4 KiB page starts with a header
 * (magic, key id, writer id, version, page index) followed by a stream
 * derived from those, so a reader can prove it got one whole version.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define KiB 1024ul
#define MiB (1024ul * 1024ul)
#define BLK_MAGIC 0x3154535453465653ull /* "SVFSTST1" little-endian */
#define MODEL_DIR "meta-llama_Llama-3.2-1B_5f2d1c9e8a47"
#define MAX_WRITERS 64

/* Header at the start of every page of a test block. */
struct page_hdr {
	uint64_t magic;
	uint32_t key;
	uint32_t writer;
	uint32_t version;
	uint32_t page;
	uint64_t size;
};

static const char *prog = "vllm_io";

#include "tclient.h"

/* snprintf that treats truncation as a bug in the test. */
__attribute__((format(printf, 3, 4))) static void
xsnprintf(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	if (rc < 0 || (size_t)rc >= n) {
		fprintf(stderr, "path or name too long: %s\n", fmt);
		abort();
	}
}

/* Fills one page (or the short last page) of a block. */
static void fill_page(unsigned char *p, size_t len, uint32_t key,
		      uint32_t writer, uint32_t version, uint32_t page,
		      uint64_t size)
{
	struct page_hdr h = {.magic = BLK_MAGIC,
			     .key = key,
			     .writer = writer,
			     .version = version,
			     .page = page,
			     .size = size};
	uint64_t s = ((uint64_t)key << 40) ^ ((uint64_t)writer << 32) ^
		     ((uint64_t)version << 20) ^ page ^ size;
	size_t i, hl = len < sizeof(h) ? len : sizeof(h);

	memcpy(p, &h, hl);
	for (i = hl; i < len; i += 8) {
		uint64_t v = splitmix(&s);
		size_t k = len - i < 8 ? len - i : 8;

		memcpy(p + i, &v, k);
	}
}

static void fill_block(unsigned char *b, size_t size, uint32_t key,
		       uint32_t writer, uint32_t version)
{
	size_t off;

	for (off = 0; off < size; off += PAGE) {
		size_t len = size - off < PAGE ? size - off : PAGE;

		fill_page(b + off, len, key, writer, version,
			  (uint32_t)(off / PAGE), size);
	}
}

/*
 * Checks that b[0..size) is one whole version of key. On success stores the
 * writer and version and returns 0. Otherwise returns -1 and describes the
 * first bad page in why.
 */
static int check_block(const unsigned char *b, size_t size, uint32_t key,
		       uint32_t *writer, uint32_t *version, char *why,
		       size_t why_len)
{
	unsigned char exp[PAGE];
	struct page_hdr h0, h;
	size_t off;

	if (size < sizeof(h0)) {
		xsnprintf(why, why_len, "block shorter than a header");
		return -1;
	}
	memcpy(&h0, b, sizeof(h0));
	if (h0.magic != BLK_MAGIC || h0.key != key || h0.page != 0 ||
	    h0.size != size) {
		xsnprintf(why, why_len,
			  "page 0 header wrong: magic %016llx key %u (want %u)"
			  " page %u size %llu (want %zu)",
			  (unsigned long long)h0.magic, h0.key, key, h0.page,
			  (unsigned long long)h0.size, size);
		return -1;
	}
	for (off = 0; off < size; off += PAGE) {
		size_t len = size - off < PAGE ? size - off : PAGE;
		uint32_t pg = (uint32_t)(off / PAGE);

		fill_page(exp, len, key, h0.writer, h0.version, pg, size);
		if (memcmp(exp, b + off, len) == 0)
			continue;
		memset(&h, 0, sizeof(h));
		memcpy(&h, b + off, len < sizeof(h) ? len : sizeof(h));
		xsnprintf(why, why_len,
			  "page %u differs from version (w%u,v%u): its header"
			  " says key %u w%u v%u page %u",
			  pg, h0.writer, h0.version, h.key, h.writer, h.version,
			  h.page);
		return -1;
	}
	*writer = h0.writer;
	*version = h0.version;
	return 0;
}

/* Key id -> lowercase hex name of hex_len chars (16, 32 or 64 in tests). */
static void key_hex(uint32_t key, unsigned hex_len, char *out)
{
	uint64_t s = 0x6b76667300000000ull ^ key;
	unsigned i;

	for (i = 0; i < hex_len; i += 16)
		xsnprintf(out + i, 17, "%016llx",
			  (unsigned long long)splitmix(&s));
	out[hex_len] = '\0';
}

/* <root>/<model>_r0/<hex[0:3]>/<hex[3:5]>_g<group>/<hex>.bin */
static void block_path(char *out, size_t n, const char *root, const char *hex,
		       unsigned group)
{
	xsnprintf(out, n, "%s/%s_r0/%.3s/%.2s_g%u/%s.bin", root, MODEL_DIR, hex,
		  hex + 3, group, hex);
}

static void parent_of(const char *p, char *out, size_t n)
{
	const char *s = strrchr(p, '/');
	size_t len = s ? (size_t)(s - p) : 0;

	if (len >= n)
		len = n - 1;
	memcpy(out, p, len);
	out[len] = '\0';
}

/*
 * std::filesystem::create_directories: stat; if missing, create the parent
 * first, then mkdir(0777); EEXIST is success when stat shows a directory.
 * Returns 0 or -errno.
 */
static int mkdir_p(const char *path)
{
	char parent[PATH_MAX];
	struct stat st;

	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -EEXIST;
	if (errno != ENOENT)
		return -errno;
	parent_of(path, parent, sizeof(parent));
	if (parent[0] != '\0') {
		int rc = mkdir_p(parent);

		if (rc < 0)
			return rc;
	}
	if (mkdir(path, 0777) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -EEXIST;
}

enum { STORED = 0, SKIPPED = 1 };

/*
 * vLLM's _store_block. check_access=0 models a racing writer that passed the
 * access() check before another writer's rename landed. Appends the step
 * results to log. Returns STORED, SKIPPED or -errno.
 */
static int vstore(const char *dest, const void *buf, size_t size, int direct,
		  unsigned long long suffix, int check_access, char *log,
		  size_t log_len)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	size_t used = 0;
	ssize_t n;
	int fd, rc, e;

#define LOG(...)                                                               \
	do {                                                                   \
		if (log && used < log_len)                                     \
			used += (size_t)snprintf(log + used, log_len - used,   \
						 __VA_ARGS__);                 \
	} while (0)
	if (log)
		log[0] = '\0';
	if (check_access) {
		if (access(dest, F_OK) == 0) {
			LOG("access=OK skipped");
			return SKIPPED;
		}
		LOG("access=%s ", ename(errno));
	}
	parent_of(dest, dir, sizeof(dir));
	rc = mkdir_p(dir);
	LOG("mkdir=%s ", ename(-rc));
	if (rc < 0)
		return rc;
	xsnprintf(tmp, sizeof(tmp), "%s_%llu.tmp", dest, suffix);
	fd = open(tmp,
		  O_CREAT | O_EXCL | O_WRONLY | O_TRUNC |
			  (direct ? O_DIRECT : 0),
		  0644);
	if (fd < 0) {
		e = errno;
		LOG("open=%s", ename(e));
		return -e;
	}
	LOG("open=OK ");
	n = write(fd, buf, size);
	e = errno;
	if (n < 0) {
		LOG("write=%s ", ename(e));
	} else {
		LOG("write=%zd ", n);
	}
	if (n != (ssize_t)size) {
		close(fd);
		unlink(tmp);
		return n < 0 ? -e : -EIO;
	}
	if (close(fd) < 0) {
		e = errno;
		LOG("close=%s", ename(e));
		unlink(tmp);
		return -e;
	}
	LOG("close=OK ");
	if (rename(tmp, dest) < 0) {
		e = errno;
		LOG("rename=%s", ename(e));
		unlink(tmp);
		return -e;
	}
	LOG("rename=OK");
	return STORED;
#undef LOG
}

/*
 * vLLM's _load_block: open, one read, unlink only on a provably short read.
 * Returns the byte count read (== size on success) or -errno; *shortp is set
 * when the short-read unlink path was taken.
 */
static ssize_t vload(const char *path, void *buf, size_t size, int direct,
		     int *shortp, int *unlink_errp)
{
	ssize_t n;
	int fd, e;

	*shortp = 0;
	*unlink_errp = 0;
	fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size);
	e = errno;
	close(fd);
	if (n < 0)
		return -e;
	if ((size_t)n < size) {
		*shortp = 1;
		if (unlink(path) < 0)
			*unlink_errp = errno;
	}
	return n;
}

/* vLLM's probe_o_direct; prints each step. Returns 1 if O_DIRECT works. */
static int probe_o_direct(const char *base, const char *tag)
{
	char p[PATH_MAX];
	void *page = abuf(PAGE);
	ssize_t n = -1;
	int fd, ok = 0, e;

	memset(page, 0x5a, PAGE);
	xsnprintf(p, sizeof(p), "%s/.o_direct_probe_%llu.tmp", base,
		  4611686018427387904ull + 12345);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0644);
	printf("%s.probe-open: %s\n", tag, ename(fd < 0 ? errno : 0));
	if (fd >= 0) {
		n = write(fd, page, PAGE);
		e = errno;
		if (n < 0)
			printf("%s.probe-write: %s\n", tag, ename(e));
		else
			printf("%s.probe-write: %zd\n", tag, n);
		e = close(fd) < 0 ? errno : 0;
		printf("%s.probe-close: %s\n", tag, ename(e));
		ok = n == PAGE && e == 0;
	}
	e = unlink(p) < 0 ? errno : 0;
	printf("%s.probe-unlink: %s\n", tag, ename(e));
	e = access(p, F_OK) < 0 ? errno : 0;
	printf("%s.probe-gone: %s\n", tag, ename(e));
	printf("%s.o_direct: %s\n", tag, ok ? "yes" : "no");
	afree(page, PAGE);
	return ok;
}

static const char config_json[] =
	"{\n"
	"    \"blocks_per_file\": 1,\n"
	"    \"dtype\": \"bfloat16\",\n"
	"    \"inference_engine\": \"vllm\",\n"
	"    \"kv_cache_groups\": [\n"
	"        {\n"
	"            \"layer_names\": [\"model.layers.0.self_attn.attn\"],\n"
	"            \"tokens_per_block\": 16\n"
	"        }\n"
	"    ],\n"
	"    \"model_name\": \"meta-llama/Llama-3.2-1B\",\n"
	"    \"tokens_per_hash\": 16\n"
	"}";

/* Prints "tag: OK size=N mode=0MMM type=T" or the stat errno. */
static void print_stat(const char *tag, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		printf("%s: %s\n", tag, ename(errno));
		return;
	}
	printf("%s: OK type=%s mode=0%03o", tag,
	       S_ISREG(st.st_mode)   ? "reg"
	       : S_ISDIR(st.st_mode) ? "dir"
				     : "other",
	       (unsigned)(st.st_mode & 07777));
	if (!S_ISDIR(st.st_mode))
		printf(" size=%lld", (long long)st.st_size);
	printf("\n");
}

/* Engine start-up: mkdir -p the namespace dir, config.json if absent, probe. */
static int startup(const char *root, const char *tag)
{
	char base[PATH_MAX], cfg[PATH_MAX];
	struct stat st;
	int rc, fd, e;

	xsnprintf(base, sizeof(base), "%s/%s", root, MODEL_DIR);
	xsnprintf(cfg, sizeof(cfg), "%s/config.json", base);
	rc = mkdir_p(base);
	printf("%s.mkdir-base: %s\n", tag, ename(-rc));
	if (stat(cfg, &st) == 0) {
		printf("%s.config-stat: OK (kept)\n", tag);
	} else {
		printf("%s.config-stat: %s\n", tag, ename(errno));
		fd = open(cfg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		printf("%s.config-open: %s\n", tag, ename(fd < 0 ? errno : 0));
		if (fd >= 0) {
			ssize_t n =
				write(fd, config_json, sizeof(config_json) - 1);
			printf("%s.config-write: %zd\n", tag, n);
			e = close(fd) < 0 ? errno : 0;
			printf("%s.config-close: %s\n", tag, ename(e));
		}
	}
	print_stat("config.stat", cfg);
	return probe_o_direct(base, tag);
}

/* Reads a whole file into a malloc'd buffer; returns its length or -errno. */
static ssize_t slurp(const char *path, unsigned char **out)
{
	size_t cap = 1 << 16, len = 0;
	unsigned char *b = malloc(cap);
	int fd = open(path, O_RDONLY);

	if (!b)
		die("out of memory");
	if (fd < 0) {
		int e = errno;

		free(b);
		return -e;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			cap *= 2;
			b = realloc(b, cap);
			if (!b)
				die("out of memory");
		}
		n = read(fd, b + len, cap - len);
		if (n < 0) {
			int e = errno;

			close(fd);
			free(b);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	*out = b;
	return (ssize_t)len;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Prints every entry under dir (relative path, type, size of regular files),
 * sorted, one per line, prefixed by tag.
 */
static void list_tree(const char *tag, const char *dir)
{
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	char *stack[4096];
	int sp = 0;
	size_t dlen = strlen(dir);

	stack[sp++] = strdup(dir);
	while (sp > 0) {
		char *d = stack[--sp];
		DIR *dh = opendir(d);
		struct dirent *de;

		if (!dh) {
			printf("%s: opendir %s: %s\n", tag, d + dlen,
			       ename(errno));
			free(d);
			continue;
		}
		while ((de = readdir(dh))) {
			char p[PATH_MAX], line[PATH_MAX + 64];
			struct stat st;

			if (!strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			xsnprintf(p, sizeof(p), "%s/%s", d, de->d_name);
			if (lstat(p, &st) < 0) {
				xsnprintf(line, sizeof(line), "%s lstat=%s",
					  p + dlen, ename(errno));
			} else if (S_ISDIR(st.st_mode)) {
				xsnprintf(line, sizeof(line), "%s/ dir",
					  p + dlen);
				if (sp < 4096)
					stack[sp++] = strdup(p);
			} else {
				xsnprintf(line, sizeof(line), "%s %s size=%lld",
					  p + dlen,
					  S_ISREG(st.st_mode) ? "reg" : "other",
					  (long long)st.st_size);
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				names = realloc(names, cap * sizeof(*names));
				if (!names)
					die("out of memory");
			}
			names[n++] = strdup(line);
		}
		closedir(dh);
		free(d);
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		printf("%s: %s\n", tag, names[i]);
		free(names[i]);
	}
	free(names);
}

/* One block of the seq scenario. */
struct blk {
	const char *name; /* transcript label */
	uint32_t key;
	unsigned hex_len;
	unsigned group;
	size_t size;
	const char *hex; /* fixed hex (shares dirs on purpose) or NULL */
};

static void blk_path(const struct blk *b, const char *root, char *out, size_t n)
{
	char hex[65];

	if (b->hex)
		xsnprintf(hex, sizeof(hex), "%s", b->hex);
	else
		key_hex(b->key, b->hex_len, hex);
	block_path(out, n, root, hex, b->group);
}

/*
 * Loads b with vLLM's sequence and prints the outcome: bytes read and
 * whether they are the expected (key, writer, version).
 */
static void seq_load(const char *tag, const char *path, size_t size, int direct,
		     uint32_t key, uint32_t writer, uint32_t version)
{
	unsigned char *buf = abuf(size);
	uint32_t w = 0, v = 0;
	char why[256];
	int sh, ue;
	ssize_t n = vload(path, buf, size, direct, &sh, &ue);

	if (n < 0) {
		printf("%s: open/read=%s\n", tag, ename((int)-n));
	} else if (sh) {
		printf("%s: read=%zd short unlink=%s\n", tag, n, ename(ue));
	} else if (check_block(buf, size, key, &w, &v, why, sizeof(why))) {
		printf("%s: read=%zd CORRUPT\n", tag, n);
		fprintf(stderr, "%s: %s\n", tag, why);
	} else if (w != writer || v != version) {
		printf("%s: read=%zd whole but version (w%u,v%u), want "
		       "(w%u,v%u)\n",
		       tag, n, w, v, writer, version);
	} else {
		printf("%s: read=%zd match\n", tag, n);
	}
	afree(buf, size);
}

/* Thread argument of the mkdir -p race. */
struct race_arg {
	pthread_barrier_t *bar;
	const char *root;
	const struct blk *b;
	int direct;
	int rc;
	char log[256];
};

static void *race_thread(void *arg)
{
	struct race_arg *a = arg;
	char p[PATH_MAX];
	unsigned char *buf = abuf(a->b->size);

	blk_path(a->b, a->root, p, sizeof(p));
	fill_block(buf, a->b->size, a->b->key, 0, 1);
	pthread_barrier_wait(a->bar);
	a->rc = vstore(p, buf, a->b->size, a->direct,
		       1000ull + (unsigned long long)a->b->key, 1, a->log,
		       sizeof(a->log));
	afree(buf, a->b->size);
	return NULL;
}

/* Stores nb blocks from nb threads released together. */
static void seq_race(const char *tag, const char *root, const struct blk *bs,
		     int nb, int direct)
{
	pthread_barrier_t bar;
	pthread_t th[16];
	struct race_arg a[16];
	int i, ok = 0;

	pthread_barrier_init(&bar, NULL, (unsigned)nb);
	for (i = 0; i < nb; i++) {
		a[i] = (struct race_arg){.bar = &bar,
					 .root = root,
					 .b = &bs[i],
					 .direct = direct};
		if (pthread_create(&th[i], NULL, race_thread, &a[i]))
			die("pthread_create");
	}
	for (i = 0; i < nb; i++) {
		pthread_join(th[i], NULL);
		if (a[i].rc == STORED)
			ok++;
		else
			printf("%s: %s: %s\n", tag, bs[i].name, a[i].log);
	}
	pthread_barrier_destroy(&bar);
	printf("%s: %d/%d stored\n", tag, ok, nb);
}

/* Shares first-level and leaf directories between keys on purpose. */
static const char hex_a[] = "abc12f0e9d8c7b6a";
static const char hex_b[] = "abc12000111122223333444455556666";
static const char hex_c[] = "abc34f0e9d8c7b6a5948372615fedcba"
			    "0123456789abcdef0123456789abcdef";

static int do_seq(const char *root)
{
	const struct blk blocks[] = {
		{"512k-a", 1, 16, 0, 512 * KiB, hex_a},
		{"512k-b", 2, 32, 0, 512 * KiB, hex_b},
		{"512k-c", 3, 64, 1, 512 * KiB, hex_c},
		{"2m-a", 4, 16, 0, 2 * MiB, NULL},
		{"2m-b", 5, 64, 0, 2 * MiB, NULL},
		{"5m-a", 6, 32, 0, 5 * MiB, NULL},
		{"5m-b", 7, 64, 1, 5 * MiB, NULL},
		{"3m123-a", 8, 16, 0, 3 * MiB + 123, NULL},
		{"3m123-b", 9, 64, 0, 3 * MiB + 123, NULL},
	};
	const int nblocks = (int)(sizeof(blocks) / sizeof(blocks[0]));
	/* Same new leaf dir for all: concurrent mkdir -p of one path. */
	struct blk race1[8], race2[8];
	char hexes1[8][17], hexes2[8][17];
	char p[PATH_MAX], base[PATH_MAX], log[256], tag[128];
	unsigned char *cfg = NULL;
	int odirect, i;
	ssize_t n;

	xsnprintf(base, sizeof(base), "%s/%s", root, MODEL_DIR);
	/* 1. Startup twice: the second sees config.json and keeps it. */
	odirect = startup(root, "startup1");
	n = slurp(strcat(strcpy(p, base), "/config.json"), &cfg);
	if (n >= 0) {
		printf("config.content: size=%zd %s\n", n,
		       (size_t)n == sizeof(config_json) - 1 &&
				       !memcmp(cfg, config_json, (size_t)n)
			       ? "match"
			       : "MISMATCH");
		free(cfg);
	} else {
		printf("config.content: %s\n", ename((int)-n));
	}
	if (startup(root, "startup2") != odirect)
		printf("startup2: probe result changed\n");

	/* 2. Lookup before anything is stored. */
	for (i = 0; i < 2; i++) {
		blk_path(&blocks[i], root, p, sizeof(p));
		printf("lookup-empty.%s: access=%s\n", blocks[i].name,
		       ename(access(p, F_OK) < 0 ? errno : 0));
	}

	/* 3. Store each block (O_DIRECT iff probed and a 4 KiB multiple). */
	for (i = 0; i < nblocks; i++) {
		const struct blk *b = &blocks[i];
		int direct = odirect && b->size % PAGE == 0;
		unsigned char *buf = abuf(b->size);
		int rc;

		fill_block(buf, b->size, b->key, 0, 1);
		blk_path(b, root, p, sizeof(p));
		rc = vstore(p, buf, b->size, direct, 77ull + (unsigned)i, 1,
			    log, sizeof(log));
		printf("store.%s: direct=%d %s -> %s\n", b->name, direct, log,
		       rc == STORED ? "stored" : ename(-rc));
		xsnprintf(tag, sizeof(tag), "store.%s.stat", b->name);
		print_stat(tag, p);
		afree(buf, b->size);
	}

	/* 4. Re-store of an existing key: access() short-cut, bytes kept. */
	{
		const struct blk *b = &blocks[3];
		unsigned char *buf = abuf(b->size);
		int rc;

		fill_block(buf, b->size, b->key, 0, 2);
		blk_path(b, root, p, sizeof(p));
		rc = vstore(p, buf, b->size, odirect, 99, 1, log, sizeof(log));
		printf("restore.%s: %s -> %s\n", b->name, log,
		       rc == SKIPPED ? "skipped" : ename(-rc));
		seq_load("restore.load", p, b->size, odirect, b->key, 0, 1);
		afree(buf, b->size);
	}

	/* 5. An existing temp of the same name fails the store with EEXIST. */
	{
		const struct blk b = {"excl", 20, 16, 0, 512 * KiB, NULL};
		unsigned char *buf = abuf(b.size);
		char tmp[PATH_MAX + 32];
		int rc, fd;

		fill_block(buf, b.size, b.key, 0, 1);
		blk_path(&b, root, p, sizeof(p));
		parent_of(p, tmp, sizeof(tmp));
		printf("excl.mkdir: %s\n", ename(-mkdir_p(tmp)));
		xsnprintf(tmp, sizeof(tmp), "%s_%llu.tmp", p, 4242ull);
		fd = open(tmp, O_CREAT | O_WRONLY, 0644);
		printf("excl.plant: %s\n", ename(fd < 0 ? errno : 0));
		if (fd >= 0)
			close(fd);
		rc = vstore(p, buf, b.size, odirect, 4242ull, 1, log,
			    sizeof(log));
		printf("excl.store: %s -> %s\n", log,
		       rc == STORED ? "stored" : ename(-rc));
		printf("excl.lookup: access=%s\n",
		       ename(access(p, F_OK) < 0 ? errno : 0));
		printf("excl.cleanup: %s\n",
		       ename(unlink(tmp) < 0 ? errno : 0));
		afree(buf, b.size);
	}

	/* 6. mkdir -p races: 8 writers, one new leaf dir / one new top dir. */
	for (i = 0; i < 8; i++) {
		xsnprintf(hexes1[i], sizeof(hexes1[i]), "fee77%011x",
			  (unsigned)i * 0x1111u);
		race1[i] = (struct blk){"race1", 100u + (unsigned)i, 16,
					0,	 512 * KiB,	     hexes1[i]};
		xsnprintf(hexes2[i], sizeof(hexes2[i]), "dad%02x%011x",
			  (unsigned)i * 17u, (unsigned)i);
		race2[i] = (struct blk){"race2", 200u + (unsigned)i, 16,
					3,	 512 * KiB,	     hexes2[i]};
	}
	seq_race("race.same-leaf", root, race1, 8, odirect);
	seq_race("race.same-top", root, race2, 8, odirect);
	for (i = 0; i < 8; i++) {
		xsnprintf(tag, sizeof(tag), "race.same-leaf.load.%d", i);
		blk_path(&race1[i], root, p, sizeof(p));
		seq_load(tag, p, race1[i].size, odirect, race1[i].key, 0, 1);
		xsnprintf(tag, sizeof(tag), "race.same-top.load.%d", i);
		blk_path(&race2[i], root, p, sizeof(p));
		seq_load(tag, p, race2[i].size, odirect, race2[i].key, 0, 1);
	}

	/* 7. Loads: O_DIRECT when the size allows, one read, byte compare. */
	for (i = 0; i < nblocks; i++) {
		const struct blk *b = &blocks[i];

		xsnprintf(tag, sizeof(tag), "load.%s", b->name);
		blk_path(b, root, p, sizeof(p));
		seq_load(tag, p, b->size, odirect && b->size % PAGE == 0,
			 b->key, 0, 1);
		/* The buffered path too (the Python fallback, old builds). */
		xsnprintf(tag, sizeof(tag), "load-buffered.%s", b->name);
		seq_load(tag, p, b->size, 0, b->key, 0, 1);
	}

	/* 8. Lookups: present and absent names. */
	for (i = 0; i < nblocks; i++) {
		struct stat st;

		blk_path(&blocks[i], root, p, sizeof(p));
		printf("lookup.%s: access=%s", blocks[i].name,
		       ename(access(p, F_OK) < 0 ? errno : 0));
		if (stat(p, &st) < 0)
			printf(" stat=%s\n", ename(errno));
		else
			printf(" stat=OK size=%lld\n", (long long)st.st_size);
	}
	{
		const char *absent[] = {
			/* same leaf dir, other name */
			"abc12f0e9d8c7b6b",
			/* existing top dir, missing leaf */
			"abc99f0e9d8c7b6a",
			/* missing top dir */
			"0000000000000000",
			/* a prefix of a stored name */
			"abc12f0e9d8c7b6",
		};

		for (i = 0; i < 4; i++) {
			block_path(p, sizeof(p), root, absent[i], 0);
			printf("lookup-absent.%d: access=%s", i,
			       ename(access(p, F_OK) < 0 ? errno : 0));
			printf(" stat=%s\n",
			       ename(stat(p, &(struct stat){0}) < 0 ? errno
								    : 0));
		}
		block_path(p, sizeof(p), root, hex_a, 1);
		printf("lookup-absent.other-group: access=%s\n",
		       ename(access(p, F_OK) < 0 ? errno : 0));
	}

	/* 9. A load of a missing block fails at open and touches nothing. */
	{
		block_path(p, sizeof(p), root, "abc12f0e9d8c7b6b", 0);
		seq_load("load-absent", p, 512 * KiB, odirect, 1, 0, 1);
	}

	/* 10. A longer file loads its first block_size bytes. */
	{
		const struct blk b = {"long", 30, 16, 0, 512 * KiB, NULL};
		size_t big = b.size + PAGE;
		unsigned char *buf = abuf(big);

		fill_block(buf, b.size, b.key, 0, 1);
		memset(buf + b.size, 0xee, PAGE);
		blk_path(&b, root, p, sizeof(p));
		vstore(p, buf, big, odirect, 5, 1, log, sizeof(log));
		printf("long.store: %s\n", log);
		seq_load("long.load", p, b.size, odirect, b.key, 0, 1);
		printf("long.lookup: access=%s\n",
		       ename(access(p, F_OK) < 0 ? errno : 0));
		afree(buf, big);
	}

	/* 11. A provably short block: the load unlinks it, lookup misses. */
	{
		const struct blk b = {"short", 31, 16, 0, 512 * KiB, NULL};
		unsigned char buf[10];

		memset(buf, 'x', sizeof(buf));
		blk_path(&b, root, p, sizeof(p));
		vstore(p, buf, sizeof(buf), 0, 6, 1, log, sizeof(log));
		printf("short.store: %s\n", log);
		print_stat("short.stat", p);
		seq_load("short.load", p, b.size, odirect, b.key, 0, 1);
		printf("short.lookup: access=%s\n",
		       ename(access(p, F_OK) < 0 ? errno : 0));
	}

	/* 12. The namespace holds exactly what was stored: no temps. */
	list_tree("tree.base", base);
	xsnprintf(p, sizeof(p), "%s_r0", base);
	list_tree("tree.blocks", p);
	return 0;
}

/* ---- stress ---- */

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

static void *reader_thread(void *arg)
{
	struct warg *a = arg;
	struct stress *s = a->s;
	unsigned char *buf = abuf(s->bs);
	uint64_t rnd = 0x5eed0000ull + (uint64_t)a->id;
	char p[PATH_MAX], why[256];
	int j;

	pthread_barrier_wait(&s->bar);
	/* At least 2 * iters loads, and keep loading while writers write. */
	for (j = 0; j < 2 * s->iters || atomic_load(&s->writers_left) > 0;
	     j++) {
		uint32_t key, w, v;
		int direct = s->direct && j % 3 != 0, fd, k;
		ssize_t n;

		if (j % 2 == 0)
			key = (uint32_t)(splitmix(&rnd) % s->nhot);
		else
			key = (uint32_t)(splitmix(&rnd) % s->nkeys);
		stress_path(s, key, p, sizeof(p));
		fd = open(p, O_RDONLY | (direct ? O_DIRECT : 0));
		if (fd < 0) {
			if (errno == ENOENT && !key_always_exists(s, key)) {
				atomic_fetch_add(&s->loads_absent, 1);
				continue;
			}
			if (errno == ENOENT) {
				atomic_fetch_add(&s->rd_enoent_existing, 1);
			} else {
				atomic_fetch_add(&s->rd_err, 1);
			}
			fprintf(stderr, "reader %d key %u: open: %s\n", a->id,
				key, ename(errno));
			continue;
		}
		/* Sometimes hold the fd while writers rename over the name. */
		for (k = 0; k < (j % 4 == 0 ? 20 : 0); k++)
			sched_yield();
		n = read(fd, buf, s->bs);
		if (n < 0) {
			atomic_fetch_add(&s->rd_err, 1);
			fprintf(stderr, "reader %d key %u: read: %s\n", a->id,
				key, ename(errno));
		} else if ((size_t)n != s->bs) {
			atomic_fetch_add(&s->rd_short, 1);
			fprintf(stderr, "reader %d key %u: read %zd of %zu\n",
				a->id, key, n, s->bs);
		} else if (check_block(buf, s->bs, key, &w, &v, why,
				       sizeof(why))) {
			atomic_fetch_add(&s->rd_torn, 1);
			fprintf(stderr, "reader %d key %u (direct=%d): %s\n",
				a->id, key, direct, why);
		} else if (w > (uint32_t)s->nw ||
			   v > atomic_load(&s->started[w])) {
			atomic_fetch_add(&s->rd_ver, 1);
			fprintf(stderr,
				"reader %d key %u: version (w%u,v%u) never "
				"written\n",
				a->id, key, w, v);
		} else {
			atomic_fetch_add(&s->loads, 1);
		}
		close(fd);
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

static int do_stress(const char *root, int argc, char **argv)
{
	struct stress *s = calloc(1, sizeof(*s));
	pthread_t th[2 * MAX_WRITERS + 1];
	struct warg args[2 * MAX_WRITERS];
	char p[PATH_MAX], log[256];
	unsigned char *buf;
	uint32_t key, present = 0, whole = 0;
	int opt, i, nth = 0;

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
	printf("stress.params: bs=%zu writers=%d readers=%d iters=%d "
	       "keys=%u hot=%u always-present=%u\n",
	       s->bs, s->nw, s->nr, s->iters, s->nkeys, s->nhot, s->nstable);
	i = startup(root, "stress.startup");
	if (s->direct < 0)
		s->direct = i && s->bs % PAGE == 0;
	printf("stress.direct: %d\n", s->direct);

	/* Keys below nstable exist before the threads start (writer nw). */
	buf = abuf(s->bs);
	for (key = 0; key < s->nstable; key++) {
		int rc;

		fill_block(buf, s->bs, key, (uint32_t)s->nw, 0);
		stress_path(s, key, p, sizeof(p));
		rc = vstore(p, buf, s->bs, s->direct, 1, 1, log, sizeof(log));
		if (rc != STORED)
			die("stress: pre-store of key %u: %s", key, log);
	}
	afree(buf, s->bs);

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

	/* Final state: every key exists and holds one whole version. */
	buf = abuf(s->bs);
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
	xsnprintf(p, sizeof(p), "%s/%s_r0", root, MODEL_DIR);
	printf("stress.final: present=%u/%u whole=%u/%u\n", present, s->nkeys,
	       whole, s->nkeys);
	printf("stress.final: bin-files=%ld tmp-files=%ld\n",
	       count_suffix(p, ".bin"), count_suffix(p, ".tmp"));
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

/* ---- remount phases ---- */

/* Block of a remount phase: (key, size, writer, version). */
struct pblk {
	uint32_t key;
	size_t size;
	uint32_t version;
};

static const struct pblk phase1[] = {
	{1, 512 * KiB, 1},     {2, 512 * KiB, 1},     {3, 2 * MiB, 1},
	{4, 2 * MiB, 1},       {5, 5 * MiB, 1},	      {6, 5 * MiB, 1},
	{7, 3 * MiB + 123, 1}, {8, 3 * MiB + 123, 1},
};

/* Phase 2 stores new keys, rewrites key 1 (rename over), evicts key 2. */
static const struct pblk phase2_new[] = {
	{9, 2 * MiB, 1},
	{10, 2 * MiB, 1},
	{1, 512 * KiB, 2},
};

static void pblk_path(const char *root, uint32_t key, char *out, size_t n)
{
	char hex[65];

	key_hex(key, key % 2 ? 64 : 32, hex);
	block_path(out, n, root, hex, key % 2);
}

static int do_populate(const char *root, int phase)
{
	const struct pblk *v = phase == 1 ? phase1 : phase2_new;
	size_t nv = phase == 1 ? sizeof(phase1) / sizeof(phase1[0])
			       : sizeof(phase2_new) / sizeof(phase2_new[0]);
	char p[PATH_MAX], log[256];
	int odirect = startup(root, phase == 1 ? "startup1" : "startup2");
	size_t i;

	for (i = 0; i < nv; i++) {
		unsigned char *buf = abuf(v[i].size);
		int direct = odirect && v[i].size % PAGE == 0, rc;

		fill_block(buf, v[i].size, v[i].key, 0, v[i].version);
		pblk_path(root, v[i].key, p, sizeof(p));
		/* A rewrite skips the access() short-cut (a racing store). */
		rc = vstore(p, buf, v[i].size, direct, 31337ull + i,
			    v[i].version == 1, log, sizeof(log));
		printf("populate%d.key%u: %s -> %s\n", phase, v[i].key, log,
		       rc == STORED ? "stored" : ename(-rc));
		afree(buf, v[i].size);
	}
	if (phase == 2) {
		pblk_path(root, 2, p, sizeof(p));
		printf("populate2.evict-key2: %s\n",
		       ename(unlink(p) < 0 ? errno : 0));
	}
	return 0;
}

static int do_verify(const char *root, int phase)
{
	char p[PATH_MAX], tag[64];
	uint32_t key;

	for (key = 1; key <= 10; key++) {
		const struct pblk *b = NULL;
		size_t i;

		for (i = 0; i < sizeof(phase1) / sizeof(phase1[0]); i++)
			if (phase1[i].key == key)
				b = &phase1[i];
		if (phase == 2) {
			for (i = 0;
			     i < sizeof(phase2_new) / sizeof(phase2_new[0]);
			     i++)
				if (phase2_new[i].key == key)
					b = &phase2_new[i];
			if (key == 2)
				b = NULL;
		}
		pblk_path(root, key, p, sizeof(p));
		xsnprintf(tag, sizeof(tag), "verify%d.key%u", phase, key);
		if (!b) {
			printf("%s: absent access=%s\n", tag,
			       ename(access(p, F_OK) < 0 ? errno : 0));
			continue;
		}
		seq_load(tag, p, b->size, b->size % PAGE == 0, key, 0,
			 b->version);
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s seq ROOT\n"
		"       %s stress ROOT [-b bytes] [-w writers] [-r readers] "
		"[-n iters] [-d 0|1]\n"
		"       %s populate|verify ROOT 1|2\n",
		prog, prog, prog);
	exit(2);
}

int main(int argc, char **argv)
{
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	if (argc < 3)
		usage();
	if (!strcmp(argv[1], "seq") && argc == 3) {
		rc = do_seq(argv[2]);
	} else if (!strcmp(argv[1], "stress")) {
		rc = do_stress(argv[2], argc - 2, argv + 2);
	} else if ((!strcmp(argv[1], "populate") ||
		    !strcmp(argv[1], "verify")) &&
		   argc == 4 &&
		   (!strcmp(argv[3], "1") || !strcmp(argv[3], "2"))) {
		int phase = atoi(argv[3]);

		rc = argv[1][0] == 'p' ? do_populate(argv[2], phase)
				       : do_verify(argv[2], phase);
	} else {
		usage();
		rc = 2;
	}
	fflush(stdout);
	return rc;
}
