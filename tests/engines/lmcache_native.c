/* SPDX-License-Identifier: MIT */
/*
 * lmcache_native: replays LMCache's native (C++) file-system connector,
 * "fs_native", against a directory. It follows
 * csrc/storage_backends/fs/connector.cpp in the LMCache repository
 * (FSConnector::FSConnector, do_single_set, do_single_get,
 * do_single_exists, do_single_delete, try_enable_odirect), and for
 * capacity eviction and the start-up scan the L2 adapter of the same
 * layer, lmcache/v1/distributed/l2_adapters/fs_l2_adapter.py
 * (FSL2Adapter._recover_existing_files, FSL2Adapter.delete):
 *
 *   start   create_directories(base); statvfs(base).f_bsize is the O_DIRECT
 *           alignment unit; the eviction accounting scans the directory
 *           (scandir, lstat of each "*.data" name) when capacity is set
 *   layout  flat <base>/<model with '/'->'-SEP-'>@0x<rank>@<group>@<hash>.data
 *   store   std::filesystem::exists(final): skip; temp "<name>.tmp" (the
 *           extension replaced: one temp name per key, no O_EXCL);
 *           open(O_CREAT|O_WRONLY|O_TRUNC[|O_DIRECT], 0644), O_DIRECT
 *           only when the length and buffer are multiples of f_bsize;
 *           write loop (EINTR retried); close; rename; on a failed write
 *           or rename the temp is removed
 *   lookup  std::filesystem::exists (stat)
 *   load    open(O_RDONLY[|O_DIRECT]); without O_DIRECT and a read-ahead
 *           size, a read loop of the first read_ahead bytes, then of the
 *           rest; any byte count other than the block's is an error (a
 *           miss), the file is left alone
 *   evict   LRU over the stored keys' sizes; unlink, ENOENT counted as
 *           gone
 *
 * Usage: lmcache_native DIR; transcript on stdout (see eng_common.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "eng_common.h"

static const char *prog = "lmcache_native";
#include "tclient.h"

#define READ_AHEAD (16 * EC_KiB)
#define LRU_MAX 64

struct lnat {
	char root[PATH_MAX];
	size_t bs;
	unsigned long bsize; /* statvfs f_bsize */
	int use_odirect;
	/* Capacity eviction: keys in LRU order (oldest first). */
	uint32_t lru[LRU_MAX];
	int nlru, cap;
};

static void ln_name(const struct lnat *c, uint32_t key, char *final, char *tmp)
{
	char hex[65];

	ec_hex(key, 64, hex);
	ec_fmt(final, PATH_MAX,
	       "%s/meta-llama-SEP-Llama-3.1-8B@0x00010000@0@%s.data", c->root,
	       hex);
	ec_fmt(tmp, PATH_MAX,
	       "%s/meta-llama-SEP-Llama-3.1-8B@0x00010000@0@%s.tmp", c->root,
	       hex);
}

/* try_enable_odirect: length and buffer both multiples of f_bsize. */
static int ln_direct(const struct lnat *c, const void *buf, size_t len)
{
	return c->use_odirect && c->bsize && len % c->bsize == 0 &&
	       (uintptr_t)buf % c->bsize == 0;
}

static int ln_exists(struct lnat *c, uint32_t key)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	struct stat st;

	ln_name(c, key, final, tmp);
	if (stat(final, &st) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

/* do_single_set; racing skips the exists check. Returns EC_STORED,
 * EC_SKIPPED or -errno. */
static int ln_set(struct lnat *c, uint32_t key, const unsigned char *buf,
		  int racing)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	ssize_t n;
	int fd, rc = 0;

	if (!racing && ln_exists(c, key) == 1)
		return EC_SKIPPED;
	ln_name(c, key, final, tmp);
	fd = open(tmp,
		  O_CREAT | O_WRONLY | O_TRUNC |
			  (ln_direct(c, buf, c->bs) ? O_DIRECT : 0),
		  0644);
	if (fd < 0)
		return -errno;
	n = ec_write_full(fd, buf, c->bs, -1);
	if (n < 0) {
		close(fd);
		unlink(tmp);
		return (int)n;
	}
	close(fd);
	if (rename(tmp, final) < 0) {
		rc = -errno;
		unlink(tmp);
	}
	return rc < 0 ? rc : EC_STORED;
}

/* do_single_get: the byte count (short: the engine's error) or -errno. */
static ssize_t ln_get(struct lnat *c, uint32_t key, unsigned char *buf,
		      int read_ahead)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	int direct = ln_direct(c, buf, c->bs), fd;
	ssize_t n;

	ln_name(c, key, final, tmp);
	fd = open(final, O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	if (!direct && read_ahead && c->bs > READ_AHEAD) {
		n = ec_read_full(fd, buf, READ_AHEAD, -1);
		if (n == (ssize_t)READ_AHEAD) {
			ssize_t t = ec_read_full(fd, buf + READ_AHEAD,
						 c->bs - READ_AHEAD, -1);

			n = t < 0 ? t : n + t;
		}
	} else {
		n = ec_read_full(fd, buf, c->bs, -1);
	}
	close(fd);
	return n;
}

static int ln_delete(struct lnat *c, uint32_t key)
{
	char final[PATH_MAX], tmp[PATH_MAX];

	ln_name(c, key, final, tmp);
	return unlink(final) < 0 ? -errno : 0;
}

/* ---- capacity eviction (the L2 adapter's accounting) ---- */

static void lru_touch(struct lnat *c, uint32_t key)
{
	int i;

	for (i = 0; i < c->nlru && c->lru[i] != key; i++)
		;
	if (i < c->nlru)
		memmove(&c->lru[i], &c->lru[i + 1],
			(size_t)(c->nlru - i - 1) * sizeof(c->lru[0]));
	else if (c->nlru == LRU_MAX)
		die("lru full");
	else
		c->nlru++;
	c->lru[c->nlru - 1] = key;
}

/* A store under capacity: evict the oldest keys first (delete(): ENOENT
 * is gone too), then set. Prints what happened. */
static void seq_store_capped(struct lnat *c, uint32_t key, unsigned char *buf)
{
	while (c->nlru >= c->cap) {
		uint32_t victim = c->lru[0];
		int rc = ln_delete(c, victim);

		printf("cap.evict key%u: %s\n", victim, ename(-rc));
		memmove(&c->lru[0], &c->lru[1],
			(size_t)(c->nlru - 1) * sizeof(c->lru[0]));
		c->nlru--;
	}
	ec_fill(buf, c->bs, key, 0, 0);
	printf("cap.set key%u: %s\n", key, ename(-ln_set(c, key, buf, 0)));
	lru_touch(c, key);
}

/* _recover_existing_files: scandir, lstat of each parsable "*.data". */
static void seq_recover(struct lnat *c, const char *tag)
{
	DIR *dh = opendir(c->root);
	long long bytes = 0;
	struct dirent *de;
	int n = 0, other = 0;

	if (!dh) {
		printf("%s: opendir %s\n", tag, ename(errno));
		return;
	}
	while ((de = readdir(dh))) {
		char p[PATH_MAX];
		size_t l = strlen(de->d_name);
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ec_fmt(p, sizeof(p), "%s/%s", c->root, de->d_name);
		if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode) || l < 5 ||
		    strcmp(de->d_name + l - 5, ".data")) {
			other++;
			continue;
		}
		n++;
		bytes += st.st_size;
	}
	closedir(dh);
	printf("%s: recovered %d objects, %lld bytes, %d other names\n", tag, n,
	       bytes, other);
}

/* ---- the race's engine calls ---- */

static int r_store(void *ctx, uint32_t key, const unsigned char *buf, size_t bs,
		   int writer, int racing)
{
	(void)bs;
	(void)writer;
	return ln_set(ctx, key, buf, racing);
}

static ssize_t r_load(void *ctx, uint32_t key, unsigned char *buf, size_t bs)
{
	(void)bs;
	return ln_get(ctx, key, buf, key % 2);
}

static int r_lookup(void *ctx, uint32_t key)
{
	return ln_exists(ctx, key);
}

static int r_evict(void *ctx, uint32_t key)
{
	return ln_delete(ctx, key);
}

/* ---- the deterministic sequence ---- */

static void seq_get(struct lnat *c, const char *tag, uint32_t key,
		    unsigned char *buf, int read_ahead)
{
	ssize_t n = ln_get(c, key, buf, read_ahead);
	uint32_t w, v;
	char why[200];

	if (n < 0)
		printf("%s: error %s\n", tag, ename((int)-n));
	else if ((size_t)n != c->bs)
		printf("%s: incomplete read (%zd of %zu)\n", tag, n, c->bs);
	else if (ec_check(buf, c->bs, key, &w, &v, why, sizeof(why)))
		printf("%s: CORRUPT %s\n", tag, why);
	else
		printf("%s: whole\n", tag);
}

static void seq_start(struct lnat *c)
{
	struct statvfs sv;
	int rc = mkdir(c->root, 0777) < 0 ? errno : 0;

	printf("start.mkdir: %s\n", ename(rc == EEXIST ? 0 : rc));
	if (statvfs(c->root, &sv) < 0)
		die("statvfs: %s", strerror(errno));
	c->bsize = sv.f_bsize;
	/* What the connector derives from f_bsize, not the value itself
	 * (it legitimately differs between filesystems). */
	printf("start.statvfs: OK odirect-usable-for-%zu=%s\n", c->bs,
	       c->bs % c->bsize == 0 ? "yes" : "no");
	fprintf(stderr, "f_bsize=%lu\n", c->bsize);
}

static void do_seq(struct lnat *c)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	unsigned char *buf = ec_alloc(c->bs);

	seq_start(c);
	ec_fill(buf, c->bs, 1, 0, 0);
	printf("set1: %d\n", ln_set(c, 1, buf, 0));
	printf("set1-again: %d (1 = skipped)\n", ln_set(c, 1, buf, 0));
	ln_name(c, 1, final, tmp);
	ec_print_stat("set1.final", final);
	ec_print_stat("set1.tmp", tmp);
	printf("exists1=%d exists2=%d\n", ln_exists(c, 1), ln_exists(c, 2));
	seq_get(c, "get1.direct", 1, buf, 0);
	c->use_odirect = 0;
	seq_get(c, "get1.read-ahead", 1, buf, 1);
	seq_get(c, "get2", 2, buf, 0);
	printf("cut1.truncate: %s\n",
	       ename(truncate(final, (off_t)c->bs - 100) ? errno : 0));
	seq_get(c, "cut1.get.read-ahead", 1, buf, 1);
	printf("cut1.truncate: %s\n",
	       ename(truncate(final, READ_AHEAD / 2) ? errno : 0));
	seq_get(c, "cut1.get.read-ahead", 1, buf, 1);
	c->use_odirect = 1;
	seq_get(c, "cut1.get.direct", 1, buf, 0);
	ec_print_stat("cut1.kept", final);
	printf("delete1: %s\n", ename(-ln_delete(c, 1)));
	printf("delete1-again: %s\n", ename(-ln_delete(c, 1)));
	/* Capacity 3: the fourth and fifth stores evict the oldest. */
	c->cap = 3;
	for (uint32_t k = 10; k < 15; k++)
		seq_store_capped(c, k, buf);
	/* A hit refreshes key 12; the next store evicts 13, not 12. */
	seq_get(c, "get12", 12, buf, 0);
	lru_touch(c, 12);
	seq_store_capped(c, 15, buf);
	seq_recover(c, "restart");
	ec_print_listing("seq.files", c->root, 1, NULL);
	ec_free(buf, c->bs);
}

int main(int argc, char **argv)
{
	struct lnat seq = {.bs = 64 * EC_KiB, .use_odirect = 1};
	struct lnat race = {.bs = 256 * EC_KiB, .use_odirect = 1};
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
	ec_fmt(seq.root, sizeof(seq.root), "%s/seq", argv[1]);
	ec_fmt(race.root, sizeof(race.root), "%s/race", argv[1]);
	do_seq(&seq);
	if (mkdir(race.root, 0777) < 0 || statvfs(race.root, &sv) < 0)
		die("%s: %s", race.root, strerror(errno));
	race.bsize = sv.f_bsize;
	fails = ec_race_run(&r, "lmcache_native");
	ec_print_listing("race.files", race.root, 0, NULL);
	return fails ? 1 : 0;
}
