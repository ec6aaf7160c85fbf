/* SPDX-License-Identifier: MIT */
/*
 * vllm_io: replays vLLM's FS offload tier syscall sequences (start-up,
 * O_DIRECT probe, store, load, lookup; kvfs(7), LIFE OF A BLOCK) against a
 * directory, so the same run can be made on a plain local directory and on
 * a kvfs mount and the transcripts compared.
 *
 * Modes (ROOT is the tier's root_dir):
 *   seq ROOT             the contract sequences for 512 KiB, 2 MiB, 5 MiB and
 *                        a non-4 KiB-multiple size, mkdir -p races, lookups
 *                        (vllm_io_seq.c)
 *   stress ROOT [opts]   16 writers + 16 readers + a lookup thread over
 *                        overlapping keys, including rename-over of the same
 *                        name while readers load it (vllm_io_stress.c)
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
 * derived from those, so a reader can prove it got one whole version. The
 * store and load sequences themselves are tests/common/engine.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "engine.h"
#include "vllm_io.h"

#define BLK_MAGIC 0x3154535453465653ull /* "SVFSTST1" little-endian */

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
void xsnprintf(char *out, size_t n, const char *fmt, ...)
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
	size_t hl = len < sizeof(h) ? len : sizeof(h);

	memcpy(p, &h, hl);
	tc_fill_stream(p + hl, len - hl, &s);
}

void fill_block(unsigned char *b, size_t size, uint32_t key, uint32_t writer,
		uint32_t version)
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
int check_block(const unsigned char *b, size_t size, uint32_t key,
		uint32_t *writer, uint32_t *version, char *why, size_t why_len)
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
void key_hex(uint32_t key, unsigned hex_len, char *out)
{
	uint64_t s = 0x6b76667300000000ull ^ key;
	unsigned i;

	for (i = 0; i < hex_len; i += 16)
		xsnprintf(out + i, 17, "%016llx",
			  (unsigned long long)splitmix(&s));
	out[hex_len] = '\0';
}

/* <root>/<model>_r0/<hex[0:3]>/<hex[3:5]>_g<group>/<hex>.bin */
void block_path(char *out, size_t n, const char *root, const char *hex,
		unsigned group)
{
	char prefix[PATH_MAX];

	xsnprintf(prefix, sizeof(prefix), "%s/%s_r0", root, MODEL_DIR);
	if (eng_block_path(out, n, prefix, hex, group) < 0) {
		fprintf(stderr, "path too long: %s/%s\n", prefix, hex);
		abort();
	}
}

/* The engine's store (tests/common/engine.c) with vllm_io's transcript. */
int vstore(const char *dest, const void *buf, size_t size, int direct,
	   unsigned long long suffix, int check_access, char *log,
	   size_t log_len)
{
	struct eng_store s = {
		.dirfd = AT_FDCWD,
		.path = dest,
		.buf = buf,
		.size = size,
		.flags = (direct ? ENG_DIRECT : 0) |
			 (check_access ? ENG_ACCESS : 0),
		.suffix = suffix,
		.log = log,
		.log_len = log ? log_len : 0,
	};

	return eng_store(&s);
}

/* The engine's load: one read, unlink only on a provably short read. */
ssize_t vload(const char *path, void *buf, size_t size, int direct, int *shortp,
	      int *unlink_errp)
{
	struct eng_load l = {
		.dirfd = AT_FDCWD,
		.path = path,
		.buf = buf,
		.size = size,
		.flags = (direct ? ENG_DIRECT : 0) | ENG_UNLINK_SHORT,
	};
	ssize_t n = eng_load(&l);

	*shortp = l.short_read;
	*unlink_errp = l.unlink_err;
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

const char config_json[] =
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
void print_stat(const char *tag, const char *path)
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
int startup(const char *root, const char *tag)
{
	char base[PATH_MAX], cfg[PATH_MAX];
	struct stat st;
	int rc, fd, e;

	xsnprintf(base, sizeof(base), "%s/%s", root, MODEL_DIR);
	xsnprintf(cfg, sizeof(cfg), "%s/config.json", base);
	rc = eng_mkdir_p(AT_FDCWD, base);
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

/*
 * Loads b with vLLM's sequence and prints the outcome: bytes read and
 * whether they are the expected (key, writer, version).
 */
void seq_load(const char *tag, const char *path, size_t size, int direct,
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
