/* SPDX-License-Identifier: MIT */
/*
 * lmcache_fs: replays LMCache's fs:// remote connector against a directory.
 * It follows lmcache/v1/storage_backend/connector/fs_connector.py in the
 * LMCache repository (FSConnector.put, .get, .exists_sync, .remove_sync,
 * .list, and _get_file_and_tmp_path without a relative tmp dir):
 *
 *   layout  flat <root>/<key>.data, the key's '/' replaced by '-'
 *   store   open("<key>.tmp", "wb") = O_WRONLY|O_CREAT|O_TRUNC, the same
 *           temp name for every writer of the key (no O_EXCL, no unique
 *           suffix); write of a 28-byte metadata header (save_chunk_meta
 *           on), write of the data; close; os.replace(tmp, final). On
 *           any error: if the temp exists, unlink it.
 *   lookup  os.path.exists (stat)
 *   load    open "rb"; readinto the 28-byte header (short: a miss); read
 *           the data until full or end of file; fewer bytes than the
 *           header's length is a miss ("partial read"). The file is kept.
 *           With save_chunk_meta off (the documented setting) there is no
 *           header: the bytes read, cut to whole tokens
 *           (reshape_partial_chunk), are a shorter chunk, and a count
 *           that is not whole tokens is a miss.
 *   evict   os.remove of the final name
 *   list    glob("*.data") of the directory
 *
 * Two writers of one key share the temp: the second's O_TRUNC can empty
 * the file the first is about to rename, and the second's rename then
 * fails with ENOENT. Keys are content hashes, so both write the same
 * bytes; readers may see a short file for a moment, never wrong bytes
 * (kvfs today sometimes returns a whole-length file whose first data
 * page reads as zeros here; ext4 never does: the race counts it torn).
 *
 * Usage: lmcache_fs DIR. stdout is the transcript (seq phase, then the
 * race of eng_common.c); exit 0 when the run completed, 1 on a failed
 * self-check (the transcript says which).
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_common.h"

static const char *prog = "lmcache_fs";
#include "tclient.h"

#define META_LEN 28 /* RemoteMetadata: seven 32-bit fields */

#define TOKEN_BYTES EC_PAGE /* one token's KV bytes in these chunks */

struct lfs {
	char root[PATH_MAX];
	size_t bs;
	int no_meta; /* save_chunk_meta: false (no header) */
};

static void lfs_paths(const struct lfs *c, uint32_t key, char *final, char *tmp)
{
	char hex[65];

	ec_hex(key, 64, hex);
	/* CacheEngineKey.to_string() with '/' replaced by '-'. */
	ec_fmt(final, PATH_MAX, "%s/vllm@meta-llama-Llama-3.1-8B@1@0@%s.data",
	       c->root, hex);
	ec_fmt(tmp, PATH_MAX, "%s/vllm@meta-llama-Llama-3.1-8B@1@0@%s.tmp",
	       c->root, hex);
}

/* The temp's open, as open("wb") issues it. */
static int lfs_open_tmp(const char *tmp)
{
	return open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
}

/* Header and data into an open temp. Returns 0 or -errno. */
static int lfs_write(int fd, const unsigned char *buf, size_t bs, int no_meta)
{
	uint32_t meta[META_LEN / 4] = {(uint32_t)bs, 1, 2, 32, 2, 256, 8};
	ssize_t n = no_meta ? 0 : ec_write_full(fd, meta, sizeof(meta), -1);

	if (n < 0)
		return (int)n;
	n = ec_write_full(fd, buf, bs, -1);
	return n < 0 ? (int)n : 0;
}

/* FSConnector's error path: if the temp exists, unlink it. */
static void lfs_cleanup(const char *tmp)
{
	struct stat st;

	if (stat(tmp, &st) == 0)
		unlink(tmp);
}

/* put(): returns 0 or -errno of the failing step (*step names it). */
static int lfs_put(struct lfs *c, uint32_t key, const unsigned char *buf,
		   const char **step)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	int fd, rc;

	lfs_paths(c, key, final, tmp);
	*step = "open";
	fd = lfs_open_tmp(tmp);
	if (fd < 0) {
		rc = -errno;
		lfs_cleanup(tmp);
		return rc;
	}
	*step = "write";
	rc = lfs_write(fd, buf, c->bs, c->no_meta);
	if (close(fd) < 0 && rc == 0) {
		*step = "close";
		rc = -errno;
	}
	if (rc == 0) {
		*step = "rename";
		rc = rename(tmp, final) < 0 ? -errno : 0;
	}
	if (rc < 0)
		lfs_cleanup(tmp);
	return rc;
}

/* get(): the data byte count (< bs: the engine's miss) or -errno. */
static ssize_t lfs_get(struct lfs *c, uint32_t key, unsigned char *buf)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	uint32_t meta[META_LEN / 4];
	ssize_t n;
	int fd;

	lfs_paths(c, key, final, tmp);
	fd = open(final, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (c->no_meta) {
		/* readinto the chunk; reshape_partial_chunk keeps a
		 * whole number of tokens, anything else is a miss. */
		n = ec_read_full(fd, buf, c->bs, -1);
		close(fd);
		return n >= 0 && n % TOKEN_BYTES ? 0 : n;
	}
	n = ec_read_full(fd, meta, sizeof(meta), -1);
	if (n == (ssize_t)sizeof(meta) && meta[0] == c->bs)
		n = ec_read_full(fd, buf, c->bs, -1);
	else if (n >= 0)
		n = 0; /* a partial or foreign header: a miss */
	close(fd);
	return n;
}

static int lfs_exists(struct lfs *c, uint32_t key)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	struct stat st;

	lfs_paths(c, key, final, tmp);
	if (stat(final, &st) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

/* ---- the race's engine calls ---- */

static int r_store(void *ctx, uint32_t key, const unsigned char *buf, size_t bs,
		   int writer, int racing)
{
	const char *step;
	int rc;

	(void)bs;
	(void)writer;
	/* The remote backend skips a put for a key it finds. */
	if (!racing && lfs_exists(ctx, key) == 1)
		return EC_SKIPPED;
	rc = lfs_put(ctx, key, buf, &step);
	return rc < 0 ? rc : EC_STORED;
}

static ssize_t r_load(void *ctx, uint32_t key, unsigned char *buf, size_t bs)
{
	(void)bs;
	return lfs_get(ctx, key, buf);
}

static int r_lookup(void *ctx, uint32_t key)
{
	return lfs_exists(ctx, key);
}

static int r_evict(void *ctx, uint32_t key)
{
	char final[PATH_MAX], tmp[PATH_MAX];

	lfs_paths(ctx, key, final, tmp);
	return unlink(final) < 0 ? -errno : 0;
}

/* ---- the deterministic sequence ---- */

static void seq_get(struct lfs *c, const char *tag, uint32_t key,
		    unsigned char *buf)
{
	ssize_t n = lfs_get(c, key, buf);
	uint32_t w, v;
	char why[200];

	if (n < 0)
		printf("%s: miss %s\n", tag, ename((int)-n));
	else if ((size_t)n < c->bs)
		printf("%s: miss (partial read %zd of %zu)\n", tag, n, c->bs);
	else if (ec_check(buf, c->bs, key, &w, &v, why, sizeof(why)))
		printf("%s: CORRUPT %s\n", tag, why);
	else
		printf("%s: hit whole\n", tag);
}

static int glob_err(const char *path, int err)
{
	(void)path;
	(void)err;
	return 0;
}

static void seq_list(struct lfs *c, const char *tag)
{
	char pat[PATH_MAX];
	glob_t g;
	int rc;

	ec_fmt(pat, sizeof(pat), "%s/*.data", c->root);
	rc = glob(pat, 0, glob_err, &g);
	printf("%s: %zu keys\n", tag, rc == 0 ? g.gl_pathc : 0);
	if (rc == 0)
		globfree(&g);
}

/* save_chunk_meta: false, the documented configuration: a file cut to a
 * whole number of tokens loads as that shorter chunk, otherwise a miss. */
static void seq_no_meta(struct lfs *c, unsigned char *buf)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	const char *step;
	off_t cut[3] = {0, 3 * TOKEN_BYTES, 3 * TOKEN_BYTES + 100};
	unsigned char *exp = ec_alloc(c->bs);
	int rc;

	ec_fill(exp, c->bs, 5, 0, 0);
	c->no_meta = 1;
	ec_fill(buf, c->bs, 5, 0, 0);
	rc = lfs_put(c, 5, buf, &step);
	printf("nometa.put5: %s\n", ename(-rc));
	lfs_paths(c, 5, final, tmp);
	ec_print_stat("nometa.final", final);
	for (int i = 0; i < 3; i++) {
		ssize_t n;

		if (cut[i] && truncate(final, cut[i]) < 0)
			die("truncate: %s", strerror(errno));
		n = lfs_get(c, 5, buf);
		if (n > 0 && (size_t)n < c->bs)
			printf("nometa.get5 (%lld bytes): partial chunk of %zd "
			       "tokens, bytes %s\n",
			       (long long)cut[i], n / TOKEN_BYTES,
			       memcmp(buf, exp, (size_t)n) ? "CORRUPT"
							   : "right");
		else if (n == (ssize_t)c->bs)
			seq_get(c, "nometa.get5", 5, buf);
		else
			printf("nometa.get5 (%lld bytes): miss\n",
			       (long long)cut[i]);
	}
	c->no_meta = 0;
	ec_free(exp, c->bs);
}

/* Two writers of one key interleaved on the shared temp. */
static void seq_shared_tmp(struct lfs *c, unsigned char *buf)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	int a, b, e;

	lfs_paths(c, 3, final, tmp);
	ec_fill(buf, c->bs, 3, 0, 0);
	a = lfs_open_tmp(tmp);
	b = lfs_open_tmp(tmp);
	printf("shared.open: a=%s b=%s\n", ename(a < 0 ? errno : 0),
	       ename(b < 0 ? errno : 0));
	if (a < 0 || b < 0)
		die("shared temp: open failed");
	printf("shared.write: a=%s b=%s\n", ename(-lfs_write(a, buf, c->bs, 0)),
	       ename(-lfs_write(b, buf, c->bs, 0)));
	printf("shared.close-a: %s\n", ename(close(a) < 0 ? errno : 0));
	printf("shared.rename-a: %s\n",
	       ename(rename(tmp, final) < 0 ? errno : 0));
	printf("shared.close-b: %s\n", ename(close(b) < 0 ? errno : 0));
	e = rename(tmp, final) < 0 ? errno : 0;
	printf("shared.rename-b: %s\n", ename(e));
	if (e)
		lfs_cleanup(tmp);
	ec_print_stat("shared.tmp", tmp);
	ec_print_stat("shared.final", final);
	seq_get(c, "shared.get", 3, buf);
}

/* A loader holds the file open while a writer replaces it. */
static void seq_replace_under_reader(struct lfs *c, unsigned char *buf)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	const char *step;
	ssize_t n;
	int fd, rc;

	lfs_paths(c, 4, final, tmp);
	ec_fill(buf, c->bs, 4, 0, 0);
	rc = lfs_put(c, 4, buf, &step);
	printf("replace.put1: %s\n", ename(-rc));
	fd = open(final, O_RDONLY | O_CLOEXEC);
	printf("replace.open: %s\n", ename(fd < 0 ? errno : 0));
	rc = lfs_put(c, 4, buf, &step);
	printf("replace.put2: %s\n", ename(-rc));
	if (fd >= 0) {
		n = ec_read_full(fd, buf, META_LEN, -1);
		n = n == META_LEN ? ec_read_full(fd, buf, c->bs, -1) : -1;
		printf("replace.read-old: %zd\n", n);
		close(fd);
	}
	seq_get(c, "replace.get", 4, buf);
}

static void do_seq(struct lfs *c)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	unsigned char *buf = ec_alloc(c->bs);
	const char *step = "";
	int rc, fd;

	/* Path(p).mkdir(parents=True, exist_ok=True) */
	rc = mkdir(c->root, 0777) < 0 ? errno : 0;
	printf("init.mkdir: %s\n", ename(rc == EEXIST ? 0 : rc));
	ec_fill(buf, c->bs, 1, 0, 0);
	rc = lfs_put(c, 1, buf, &step);
	printf("put1: %s%s%s\n", ename(-rc), rc ? " at " : "", rc ? step : "");
	lfs_paths(c, 1, final, tmp);
	ec_print_stat("put1.final", final);
	ec_print_stat("put1.tmp", tmp);
	printf("exists1: %d exists2: %d\n", lfs_exists(c, 1), lfs_exists(c, 2));
	seq_get(c, "get1", 1, buf);
	seq_get(c, "get2", 2, buf);
	/* A temp left by a writer that died: the next put truncates it. */
	lfs_paths(c, 2, final, tmp);
	fd = lfs_open_tmp(tmp);
	if (fd < 0 || ec_write_full(fd, "leftover", 8, -1) != 8)
		die("leftover temp: %s", strerror(errno));
	close(fd);
	ec_fill(buf, c->bs, 2, 0, 0);
	rc = lfs_put(c, 2, buf, &step);
	printf("put2-over-leftover: %s\n", ename(-rc));
	ec_print_stat("put2.final", final);
	seq_get(c, "get2", 2, buf);
	/* Short files: cut data, cut header. */
	lfs_paths(c, 1, final, tmp);
	printf("cut1.truncate: %s\n",
	       ename(truncate(final, META_LEN + (off_t)c->bs / 2) ? errno : 0));
	seq_get(c, "cut1.get", 1, buf);
	ec_print_stat("cut1.kept", final);
	printf("cut1.truncate-meta: %s\n",
	       ename(truncate(final, 10) ? errno : 0));
	seq_get(c, "cut1.get", 1, buf);
	seq_no_meta(c, buf);
	seq_shared_tmp(c, buf);
	seq_replace_under_reader(c, buf);
	seq_list(c, "list");
	printf("remove1: %s\n", ename(-r_evict(c, 1)));
	printf("remove1-again: %s\n", ename(-r_evict(c, 1)));
	printf("exists1: %d\n", lfs_exists(c, 1));
	seq_list(c, "list");
	ec_print_listing("seq.files", c->root, 1, NULL);
	ec_free(buf, c->bs);
}

int main(int argc, char **argv)
{
	struct lfs seq = {.bs = 64 * EC_KiB}, race = {.bs = 256 * EC_KiB};
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
	int fails;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	if (argc != 2)
		die("usage: %s DIR", prog);
	ec_fmt(seq.root, sizeof(seq.root), "%s/seq", argv[1]);
	ec_fmt(race.root, sizeof(race.root), "%s/race", argv[1]);
	do_seq(&seq);
	if (mkdir(race.root, 0777) < 0)
		die("mkdir %s: %s", race.root, strerror(errno));
	fails = ec_race_run(&r, "lmcache_fs");
	ec_print_listing("race.files", race.root, 0, NULL);
	return fails ? 1 : 0;
}
