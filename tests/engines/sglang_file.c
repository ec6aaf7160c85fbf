/* SPDX-License-Identifier: MIT */
/*
 * sglang_file: replays SGLang's HiCache "file" storage backend against a
 * directory. It follows python/sglang/srt/mem_cache/hicache_storage.py in
 * the SGLang repository (HiCacheFile.__init__, set, get, exists,
 * _collect_existing_component_keys, _scan_existing_files_to_metadata_cache)
 * and, for eviction, python/sglang/srt/mem_cache/storage/file/
 * lru_file_evictor.py (LRUFileEvictor._scan_existing_files, reserve,
 * _evict_one_lru_locked, _fs_stats):
 *
 *   start   the directory from SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR;
 *           os.path.exists, else os.makedirs; with the metadata cache on,
 *           os.listdir of the directory; with eviction on, os.listdir +
 *           os.stat of every "*.bin", oldest mtime first, and statvfs
 *   layout  flat <dir>/<hash>_<model with '/'->'-'>_<tp rank>_<tp size>.bin
 *   store   exists(): skip; temp "<name>.tmp.<pid>.<thread id>.<uuid hex>";
 *           ndarray.tofile(temp) = open O_WRONLY|O_CREAT|O_TRUNC, write,
 *           close; os.replace(temp, name); on error os.remove(temp)
 *   lookup  os.path.exists (stat), or for a batch os.scandir of the whole
 *           directory matching names (metadata cache off)
 *   load    open(name, "rb", buffering=0) and one readinto (one read(2));
 *           a count other than the page size raises ("Short read"), a
 *           missing file is a miss
 *   evict   LRU by last use, os.remove; free space from statvfs
 *           (f_bavail * f_frsize)
 *
 * Every writer uses its own temp, so readers of a key that exists always
 * get one whole version: the race checks exactly that. The sequence also
 * fills the flat directory with 3000 pages and looks them up by listing
 * it, as batch lookups do.
 *
 * Usage: sglang_file DIR; transcript on stdout (see eng_common.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "eng_common.h"

static const char *prog = "sglang_file";
#include "tclient.h"

#define SUFFIX "_Qwen-Qwen3-0.6B_0_1"
#define FLAT_N 3000 /* pages in the flat-directory step */

struct sgl {
	char root[PATH_MAX];
	size_t bs;
	atomic_ulong uuid; /* uuid4().hex stand-in: unique per store */
};

static void sg_name(uint32_t key, char *out, size_t n)
{
	char hex[65];

	ec_hex(key, 64, hex);
	ec_fmt(out, n, "%s%s.bin", hex, SUFFIX);
}

static void sg_path(const struct sgl *c, uint32_t key, char *out)
{
	char name[NAME_MAX + 1];

	sg_name(key, name, sizeof(name));
	ec_fmt(out, PATH_MAX, "%s/%s", c->root, name);
}

static int sg_exists(struct sgl *c, uint32_t key)
{
	char p[PATH_MAX];
	struct stat st;

	sg_path(c, key, p);
	if (stat(p, &st) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

/* set(): EC_STORED, EC_SKIPPED or -errno. */
static int sg_set(struct sgl *c, uint32_t key, const unsigned char *buf,
		  int writer, int racing)
{
	char p[PATH_MAX], tmp[PATH_MAX + 96];
	int fd, rc = 0;
	ssize_t n;

	if (!racing && sg_exists(c, key) == 1)
		return EC_SKIPPED;
	sg_path(c, key, p);
	ec_fmt(tmp, sizeof(tmp), "%s.tmp.%d.%d.%032lx", p, (int)getpid(),
	       1000 + writer, atomic_fetch_add(&c->uuid, 1) * 2654435761ul);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	n = ec_write_full(fd, buf, c->bs, -1);
	if (close(fd) < 0 && n >= 0)
		n = -errno;
	if (n >= 0 && rename(tmp, p) < 0)
		n = -errno;
	if (n < 0) {
		rc = (int)n;
		unlink(tmp);
	}
	return rc < 0 ? rc : EC_STORED;
}

/* get(): one read; the count (short: the engine raises) or -errno. */
static ssize_t sg_get(struct sgl *c, uint32_t key, unsigned char *buf)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	sg_path(c, key, p);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, c->bs);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

/* The batch lookup without the metadata cache: scandir the directory and
 * count the leading keys [first, first + n) whose file is there. */
static int sg_batch_exists(struct sgl *c, uint32_t first, uint32_t n)
{
	char want[16][NAME_MAX + 1];
	uint8_t found[16] = {0};
	struct dirent *de;
	uint32_t i;
	DIR *dh;

	if (n > 16)
		die("batch too large");
	for (i = 0; i < n; i++)
		sg_name(first + i, want[i], sizeof(want[i]));
	dh = opendir(c->root);
	if (!dh)
		return -errno;
	while ((de = readdir(dh))) {
		if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		for (i = 0; i < n; i++)
			if (!strcmp(de->d_name, want[i]))
				found[i] = 1;
	}
	closedir(dh);
	for (i = 0; i < n && found[i]; i++)
		;
	return (int)i;
}

/* ---- the race's engine calls ---- */

static int r_store(void *ctx, uint32_t key, const unsigned char *buf, size_t bs,
		   int writer, int racing)
{
	(void)bs;
	return sg_set(ctx, key, buf, writer, racing);
}

static ssize_t r_load(void *ctx, uint32_t key, unsigned char *buf, size_t bs)
{
	(void)bs;
	return sg_get(ctx, key, buf);
}

/* Odd keys by a one-key scandir batch, even keys by stat. */
static int r_lookup(void *ctx, uint32_t key)
{
	return key % 2 ? sg_batch_exists(ctx, key, 1) : sg_exists(ctx, key);
}

static int r_evict(void *ctx, uint32_t key)
{
	char p[PATH_MAX];

	sg_path(ctx, key, p);
	return unlink(p) < 0 ? -errno : 0;
}

/* ---- the deterministic sequence ---- */

static void seq_get(struct sgl *c, const char *tag, uint32_t key,
		    unsigned char *buf)
{
	ssize_t n = sg_get(c, key, buf);
	uint32_t w, v;
	char why[200];

	if (n == -ENOENT)
		printf("%s: miss\n", tag);
	else if (n < 0)
		printf("%s: %s\n", tag, ename((int)-n));
	else if ((size_t)n != c->bs)
		printf("%s: raises Short read (%zd of %zu)\n", tag, n, c->bs);
	else if (ec_check(buf, c->bs, key, &w, &v, why, sizeof(why)))
		printf("%s: CORRUPT %s\n", tag, why);
	else
		printf("%s: hit (w%u,v%u)\n", tag, w, v);
}

static void seq_set(struct sgl *c, const char *tag, uint32_t key, uint32_t ver,
		    unsigned char *buf)
{
	ec_fill(buf, c->bs, key, 0, ver);
	printf("%s: %d\n", tag, sg_set(c, key, buf, 0, 0));
}

/* The evictor's start-up scan: "*.bin" of this rank, oldest mtime first;
 * the names are printed as key numbers. */
static void seq_scan(struct sgl *c, const char *tag, uint32_t upto)
{
	struct ent {
		long long mt;
		uint32_t key;
	} e[32];
	int n = 0;

	for (uint32_t k = 0; k < upto; k++) {
		char p[PATH_MAX];
		struct stat st;

		sg_path(c, k, p);
		if (stat(p, &st) == 0 && n < 32)
			e[n++] = (struct ent){st.st_mtime, k};
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && e[j].mt < e[j - 1].mt; j--) {
			struct ent t = e[j];

			e[j] = e[j - 1];
			e[j - 1] = t;
		}
	printf("%s: lru", tag);
	for (int i = 0; i < n; i++)
		printf(" key%u", e[i].key);
	printf("\n");
}

static void seq_listdir(struct sgl *c, const char *tag)
{
	DIR *dh = opendir(c->root);
	struct dirent *de;
	int bins = 0, tmps = 0;

	if (!dh)
		die("opendir: %s", strerror(errno));
	while ((de = readdir(dh))) {
		size_t l = strlen(de->d_name);

		if (strstr(de->d_name, ".tmp."))
			tmps++;
		else if (l > sizeof(SUFFIX ".bin") &&
			 !strcmp(de->d_name + l - sizeof(SUFFIX ".bin") + 1,
				 SUFFIX ".bin"))
			bins++;
	}
	closedir(dh);
	printf("%s: %d blocks, %d temps\n", tag, bins, tmps);
}

/* A flat directory of many pages, as the backend keeps them: batch
 * lookups by listing the whole directory, and the start-up scan, must see
 * every one. */
static void seq_flat(const char *root)
{
	static struct sgl f = {.bs = EC_PAGE};
	unsigned char *buf = ec_alloc(EC_PAGE);
	uint32_t k, stored = 0;

	ec_fmt(f.root, sizeof(f.root), "%s", root);
	for (k = 1000; k < 1000 + FLAT_N; k++) {
		ec_fill(buf, EC_PAGE, k, 0, 1);
		stored += sg_set(&f, k, buf, 0, 0) == EC_STORED;
	}
	printf("flat: stored %u of %d pages\n", stored, FLAT_N);
	seq_listdir(&f, "flat.listdir");
	for (k = 1000; k < 1000 + FLAT_N; k += FLAT_N / 4)
		printf("flat.batch[%u..+16]: %d\n", k,
		       sg_batch_exists(&f, k, 16));
	printf("flat.batch[end-8..+16]: %d\n",
	       sg_batch_exists(&f, 1000 + FLAT_N - 8, 16));
	ec_free(buf, EC_PAGE);
}

static void do_seq(struct sgl *c)
{
	unsigned char *buf = ec_alloc(c->bs);
	struct statvfs sv;
	struct stat st;
	char p[PATH_MAX];

	if (stat(c->root, &st) < 0)
		printf("start.makedirs: %s\n",
		       ename(mkdir(c->root, 0777) < 0 ? errno : 0));
	seq_listdir(c, "start.metadata-scan");
	seq_set(c, "set1", 1, 1, buf);
	seq_set(c, "set1-again", 1, 2, buf);
	seq_get(c, "get1", 1, buf);
	seq_get(c, "get2", 2, buf);
	printf("batch[1..3]: %d\n", sg_batch_exists(c, 1, 3));
	seq_set(c, "set2", 2, 1, buf);
	seq_set(c, "set3", 3, 1, buf);
	printf("batch[1..3]: %d\n", sg_batch_exists(c, 1, 3));
	sg_path(c, 3, p);
	printf("cut3: %s\n", ename(truncate(p, 1000) ? errno : 0));
	seq_get(c, "get3", 3, buf);
	ec_print_stat("cut3.kept", p);
	seq_listdir(c, "listdir");
	seq_flat(c->root);
	seq_listdir(c, "listdir");
	/* A restart's LRU scan orders by mtime: give the files distinct
	 * ones (key 2 oldest), then evict the oldest under a cap of two. */
	for (uint32_t k = 1; k <= 3; k++) {
		struct timespec ts[2] = {
			{0, UTIME_OMIT},
			{1700000000 + (k == 2 ? 0 : k * 10), 0}};

		sg_path(c, k, p);
		printf("touch%u: %s\n", k,
		       ename(utimensat(AT_FDCWD, p, ts, 0) ? errno : 0));
	}
	seq_scan(c, "restart.scan", 8);
	sg_path(c, 2, p);
	printf("evict key2: %s\n", ename(unlink(p) ? errno : 0));
	seq_scan(c, "after.scan", 8);
	if (statvfs(c->root, &sv) < 0)
		die("statvfs: %s", strerror(errno));
	printf("statvfs: free-for-a-block=%s\n",
	       (unsigned long long)sv.f_bavail * sv.f_frsize >= c->bs ? "yes"
								      : "no");
	ec_print_listing("seq.files", c->root, 0, NULL);
	ec_free(buf, c->bs);
}

int main(int argc, char **argv)
{
	static struct sgl seq = {.bs = 64 * EC_KiB},
			  race = {.bs = 256 * EC_KiB};
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
		die("%s: %s", race.root, strerror(errno));
	fails = ec_race_run(&r, "sglang_file");
	ec_print_listing("race.files", race.root, 0, NULL);
	return fails ? 1 : 0;
}
