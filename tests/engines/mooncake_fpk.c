/* SPDX-License-Identifier: MIT */
/*
 * mooncake_fpk: replays Mooncake Store's file-per-key SSD offload backend
 * against a directory. It follows mooncake-store/src/storage_backend.cpp in
 * the Mooncake repository (StorageBackend::Init, StoreObject,
 * CreateFileForWriting, ResolvePath, create_file, WriteSlicesToFile,
 * LoadObject, RemoveFile), mooncake-store/src/config/file_storage_config.cpp
 * (FileStorageConfig::ValidatePath) and docs/source/design/store/
 * ssd-offload.md (the two-level hash-sharded layout, FIFO eviction):
 *
 *   start   the storage path must be an absolute directory: stat, S_ISDIR,
 *           access(W_OK), lstat (no symlink); with eviction on,
 *           create_directories(<path>/file_per_key_dir), statvfs for the
 *           quota (90 % of capacity), a recursive walk of the regular
 *           files, sorted by statx birth time (oldest first: the FIFO)
 *   layout  <path>/file_per_key_dir/<a-p>/<a-p>/<key> (the function that
 *           turns a key into a path, in StorageBackendAdaptor, was not
 *           found in the sources searched; this follows the design doc's
 *           "two-level hash-sharded directory" with letter levels, and
 *           names each file by a stand-in of the sanitized key)
 *   store   (writers of one path serialized by the engine's own lock)
 *           mkdir -p of the parent when it does not exist;
 *           open(O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) of the final
 *           name, in place; pwritev of the slices at offset 0; a count
 *           other than the total fails; close
 *   lookup  std::filesystem::exists (stat)
 *   load    open(O_RDONLY|O_CLOEXEC); preadv at 0; a count other than
 *           the object's length is FILE_READ_FAIL
 *   evict   FIFO: std::filesystem::remove (unlink) of the oldest file
 *
 * Readers take no lock, so a load racing an in-place rewrite may be short
 * (the engine's FILE_READ_FAIL); keys are content hashes, so bytes read
 * are never another version's.
 *
 * Usage: mooncake_fpk DIR; transcript on stdout (see eng_common.h).
 */
#include <dirent.h>
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
#include <sys/uio.h>
#include <unistd.h>

#include "eng_common.h"
#include "engine.h"

static const char *prog = "mooncake_fpk";
#include "tclient.h"

#define FSDIR "file_per_key_dir"
#define NLOCKS 16

struct mfpk {
	char root[PATH_MAX];
	size_t bs;
	pthread_mutex_t locks[NLOCKS]; /* file_path_mutexes_ */
};

static void mf_path(const struct mfpk *c, uint32_t key, char *out)
{
	char hex[33];
	uint64_t s = key * 0x9e3779b97f4a7c15ull;
	unsigned h = (unsigned)(splitmix(&s) & 0xff);

	ec_hex(key, 32, hex);
	ec_fmt(out, PATH_MAX, "%s/" FSDIR "/%c/%c/mooncake_kv_%s", c->root,
	       'a' + (h & 15), 'a' + (h >> 4), hex);
}

/* StoreObject: the slices are the block's halves. 0 or -errno. */
static int mf_store(struct mfpk *c, uint32_t key, const unsigned char *buf)
{
	pthread_mutex_t *m = &c->locks[key % NLOCKS];
	char p[PATH_MAX], dir[PATH_MAX];
	struct iovec iov[2] = {{(void *)buf, c->bs / 2},
			       {(void *)(buf + c->bs / 2), c->bs - c->bs / 2}};
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	mf_path(c, key, p);
	pthread_mutex_lock(m);
	eng_parent(p, dir, sizeof(dir));
	if (stat(dir, &st) < 0)
		rc = eng_mkdir_p(AT_FDCWD, dir);
	fd = rc < 0 ? -1
		    : open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 && rc == 0)
		rc = -errno;
	if (fd >= 0) {
		n = pwritev(fd, iov, 2, 0);
		if (n < 0)
			rc = -errno;
		else if ((size_t)n != c->bs)
			rc = -EIO;
		close(fd);
	}
	pthread_mutex_unlock(m);
	return rc;
}

/* LoadObject: the count preadv returned, or -errno. */
static ssize_t mf_load(struct mfpk *c, uint32_t key, unsigned char *buf)
{
	struct iovec iov[2] = {{buf, c->bs / 2},
			       {buf + c->bs / 2, c->bs - c->bs / 2}};
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	mf_path(c, key, p);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = preadv(fd, iov, 2, 0);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

static int mf_exists(struct mfpk *c, uint32_t key)
{
	char p[PATH_MAX];
	struct stat st;

	mf_path(c, key, p);
	if (stat(p, &st) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

/* RemoveFile: under the path's lock. */
static int mf_remove(struct mfpk *c, uint32_t key)
{
	pthread_mutex_t *m = &c->locks[key % NLOCKS];
	char p[PATH_MAX];
	int rc;

	mf_path(c, key, p);
	pthread_mutex_lock(m);
	rc = unlink(p) < 0 ? -errno : 0;
	pthread_mutex_unlock(m);
	return rc;
}

/* ---- the race's engine calls ---- */

static int r_store(void *ctx, uint32_t key, const unsigned char *buf, size_t bs,
		   int writer, int racing)
{
	int rc;

	(void)bs;
	(void)writer;
	/* The master offloads a key only while it has no disk replica. */
	if (!racing && mf_exists(ctx, key) == 1)
		return EC_SKIPPED;
	rc = mf_store(ctx, key, buf);
	return rc < 0 ? rc : EC_STORED;
}

static ssize_t r_load(void *ctx, uint32_t key, unsigned char *buf, size_t bs)
{
	(void)bs;
	return mf_load(ctx, key, buf);
}

static int r_lookup(void *ctx, uint32_t key)
{
	return mf_exists(ctx, key);
}

static int r_evict(void *ctx, uint32_t key)
{
	return mf_remove(ctx, key);
}

/* ---- the deterministic sequence ---- */

static void seq_validate(const char *root)
{
	struct stat st, lst;
	int e = stat(root, &st) ? errno : 0;
	int w = access(root, W_OK) == 0;
	int l = lstat(root, &lst) == 0 && S_ISLNK(lst.st_mode);

	printf("validate: stat=%s dir=%s writable=%s symlink=%s\n", ename(e),
	       !e && S_ISDIR(st.st_mode) ? "yes" : "no", w ? "yes" : "no",
	       l ? "yes" : "no");
}

struct ent {
	long long bt_sec, bt_nsec;
	unsigned have_btime;
	char name[NAME_MAX + 1];
};

static void walk(const char *dir, struct ent *e, int *n, int max)
{
	struct dirent *de;
	DIR *dh = opendir(dir);

	if (!dh)
		return;
	while ((de = readdir(dh))) {
		struct statx sx;
		char p[PATH_MAX];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ec_fmt(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx))
			continue;
		if (S_ISDIR(sx.stx_mode)) {
			walk(p, e, n, max);
		} else if (S_ISREG(sx.stx_mode) && *n < max) {
			e[*n].bt_sec = sx.stx_btime.tv_sec;
			e[*n].bt_nsec = sx.stx_btime.tv_nsec;
			e[*n].have_btime = !!(sx.stx_mask & STATX_BTIME);
			ec_fmt(e[*n].name, sizeof(e[*n].name), "%s",
			       de->d_name);
			(*n)++;
		}
	}
	closedir(dh);
}

static int older(const struct ent *a, const struct ent *b)
{
	if (!a->have_btime || !b->have_btime)
		return 0;
	return a->bt_sec < b->bt_sec ||
	       (a->bt_sec == b->bt_sec && a->bt_nsec < b->bt_nsec);
}

/* Init's scan: the files oldest first, printed as the keys they hold in
 * store order (key%u = stored %u-th). */
static void seq_init_scan(struct mfpk *c, const char *tag, uint32_t nkeys)
{
	struct ent e[16], t;
	char top[PATH_MAX];
	int n = 0, btimes = 0;

	ec_fmt(top, sizeof(top), "%s/" FSDIR, c->root);
	walk(top, e, &n, 16);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && older(&e[j], &e[j - 1]); j--) {
			t = e[j];
			e[j] = e[j - 1];
			e[j - 1] = t;
		}
	printf("%s: %d files, fifo:", tag, n);
	for (int i = 0; i < n; i++) {
		btimes += e[i].have_btime;
		for (uint32_t k = 0; k < nkeys; k++) {
			char p[PATH_MAX];

			mf_path(c, k, p);
			if (!strcmp(strrchr(p, '/') + 1, e[i].name))
				printf(" key%u", k);
		}
	}
	/* What the engine sees is the order; whether the file system has
	 * birth times at all (FUSE reports none: the sort then keeps the
	 * walk's order) is information. */
	printf("\n");
	fprintf(stderr, "%s: birth times on %d of %d files\n", tag, btimes, n);
}

static void seq_load(struct mfpk *c, const char *tag, uint32_t key,
		     unsigned char *buf)
{
	ssize_t n = mf_load(c, key, buf);
	uint32_t w, v;
	char why[200];

	if (n < 0)
		printf("%s: FILE_OPEN_FAIL %s\n", tag, ename((int)-n));
	else if ((size_t)n != c->bs)
		printf("%s: FILE_READ_FAIL (%zd of %zu)\n", tag, n, c->bs);
	else if (ec_check(buf, c->bs, key, &w, &v, why, sizeof(why)))
		printf("%s: CORRUPT %s\n", tag, why);
	else
		printf("%s: whole\n", tag);
}

static void do_seq(struct mfpk *c)
{
	unsigned char *buf = ec_alloc(c->bs);
	struct statvfs sv;
	char p[PATH_MAX], top[PATH_MAX];

	if (mkdir(c->root, 0755) < 0)
		die("mkdir %s: %s", c->root, strerror(errno));
	seq_validate(c->root);
	ec_fmt(top, sizeof(top), "%s/" FSDIR, c->root);
	printf("init.mkdir: %s\n", ename(-eng_mkdir_p(AT_FDCWD, top)));
	if (statvfs(top, &sv) < 0)
		die("statvfs: %s", strerror(errno));
	printf("init.space: capacity-known=%s\n", sv.f_blocks ? "yes" : "no");
	seq_init_scan(c, "init.scan", 8);
	/* Keys in order 5, 2, 7, 1: the FIFO after a restart must be that. */
	for (uint32_t i = 0, k; i < 4; i++) {
		k = (uint32_t[]){5, 2, 7, 1}[i];
		ec_fill(buf, c->bs, k, 0, 0);
		printf("store key%u: %s\n", k, ename(-mf_store(c, k, buf)));
	}
	printf("exists key5=%d key3=%d\n", mf_exists(c, 5), mf_exists(c, 3));
	seq_load(c, "load5", 5, buf);
	seq_load(c, "load3", 3, buf);
	/* An in-place rewrite of a longer object shrinks it (O_TRUNC). */
	mf_path(c, 2, p);
	printf("grow2: %s\n", ename(truncate(p, 3 * (off_t)c->bs) ? errno : 0));
	ec_fill(buf, c->bs, 2, 0, 0);
	printf("rewrite2: %s\n", ename(-mf_store(c, 2, buf)));
	ec_print_stat("rewrite2", p);
	mf_path(c, 7, p);
	printf("cut7: %s\n", ename(truncate(p, 777) ? errno : 0));
	seq_load(c, "load7", 7, buf);
	seq_init_scan(c, "restart.scan", 8);
	printf("fifo-evict key5: %s\n", ename(-mf_remove(c, 5)));
	printf("fifo-evict key5 again: %s\n", ename(-mf_remove(c, 5)));
	seq_load(c, "load5", 5, buf);
	ec_print_listing("seq.files", c->root, 1, NULL);
	ec_free(buf, c->bs);
}

int main(int argc, char **argv)
{
	static struct mfpk seq = {.bs = 64 * EC_KiB},
			   race = {.bs = 512 * EC_KiB};
	struct ec_race r = {
		.eng = {&race, r_store, r_load, r_lookup, r_evict},
		.bs = 512 * EC_KiB,
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
	for (int i = 0; i < NLOCKS; i++) {
		pthread_mutex_init(&seq.locks[i], NULL);
		pthread_mutex_init(&race.locks[i], NULL);
	}
	ec_fmt(seq.root, sizeof(seq.root), "%s/seq", argv[1]);
	ec_fmt(race.root, sizeof(race.root), "%s/race", argv[1]);
	do_seq(&seq);
	fails = ec_race_run(&r, "mooncake_fpk");
	ec_print_listing("race.files", race.root, 0, NULL);
	return fails ? 1 : 0;
}
