/* SPDX-License-Identifier: MIT */
/*
 * llmd_fs: replays llm-d's file-system KV connector and its external
 * evictor against a directory. It follows, in the llm-d-kv-cache
 * repository, kv_connectors/llmd_fs_backend/csrc/storage/storage_offload.cpp
 * (StorageOffloadEngine::async_store_gpu_blocks, async_load_gpu_blocks),
 * kv_connectors/llmd_fs_backend/csrc/storage/file_io.cpp
 * (write_buffer_to_file, read_buffer_from_file, update_atime; the atime
 * argument order as in csrc/storage/backends/fs_io/file_io.cpp's
 * FileIO::update_atime, times[0] = UTIME_NOW, times[1] = UTIME_OMIT), and
 * for eviction kv_connectors/pvc_evictor/CONFIGURATION.md (crawlers, a
 * 60-minute access-time threshold, deletion between 85 % and 70 % disk
 * use):
 *
 *   layout  vLLM's: <root>/<model>_<h>_r<rank>/<3 hex>/<2 hex>_g<g>/<hash>.bin
 *   store   std::ifstream(dst).good() (open O_RDONLY, close): the file
 *           exists, so utimensat(atime = now, mtime = omit) and done;
 *           else create_directories(parent); temp "<dst>_<per-thread
 *           random>.tmp" opened O_WRONLY|O_CREAT|O_TRUNC (std::ofstream)
 *           with a 1 MiB stream buffer, written through it, flushed,
 *           renamed over dst while still open, closed after the rename;
 *           a failed write or rename removes the temp
 *   lookup  os.path.exists (stat)
 *   load    open O_RDONLY, lseek to the end for the size, lseek to 0,
 *           the size must fit the staging buffer, a read of that many
 *           bytes; fewer bytes than the size is a failed load
 *   evict   the pvc evictor: walk the tree, stat every file, statvfs for
 *           disk use, unlink ("rm -f") files whose atime is older than the
 *           threshold, then the directories left empty
 *
 * Usage: llmd_fs DIR; transcript on stdout (see eng_common.h).
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
#include <time.h>
#include <unistd.h>

#include "eng_common.h"
#include "engine.h"

static const char *prog = "llmd_fs";
#include "tclient.h"

#define STREAM_BUF EC_MiB
#define OLD_SECS 7200 /* two hours: older than the 60-minute threshold */

struct llmd {
	char root[PATH_MAX];
	size_t bs;
};

static void lm_path(const struct llmd *c, uint32_t key, char *out)
{
	char prefix[PATH_MAX], hex[65];

	ec_hex(key, key % 2 ? 64 : 32, hex);
	ec_fmt(prefix, sizeof(prefix), "%s/meta-llama_Llama-3.1-8B_5f2d1c9e_r0",
	       c->root);
	if (eng_block_path(out, PATH_MAX, prefix, hex, key % 3))
		die("path too long");
}

/* update_atime: atime now, mtime untouched. */
static int lm_touch(const char *p)
{
	struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};

	return utimensat(AT_FDCWD, p, t, 0) < 0 ? -errno : 0;
}

/* The ifstream(dst).good() probe. */
static int lm_probe(const char *p)
{
	int fd = open(p, O_RDONLY);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* write_buffer_to_file: 0 or -errno. */
static int lm_write(struct llmd *c, const char *dst, const unsigned char *buf,
		    int writer)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 32];
	int fd, rc;

	eng_parent(dst, dir, sizeof(dir));
	rc = eng_mkdir_p(AT_FDCWD, dir);
	if (rc < 0)
		return rc;
	ec_fmt(tmp, sizeof(tmp), "%s_%u.tmp", dst,
	       2654435761u * (unsigned)(writer + 1));
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	if (fd < 0)
		return -errno;
	/* Through the 1 MiB stream buffer: whole buffer-sized writes. */
	for (size_t off = 0; off < c->bs && rc == 0; off += STREAM_BUF) {
		size_t n = c->bs - off < STREAM_BUF ? c->bs - off : STREAM_BUF;
		ssize_t w = ec_write_full(fd, buf + off, n, -1);

		rc = w < 0 ? (int)w : 0;
	}
	if (rc == 0 && rename(tmp, dst) < 0)
		rc = -errno;
	close(fd);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* The store task: EC_STORED, EC_SKIPPED (exists: atime touched) or -errno. */
static int lm_store(struct llmd *c, uint32_t key, const unsigned char *buf,
		    int writer, int racing)
{
	char p[PATH_MAX];
	int rc;

	lm_path(c, key, p);
	if (!racing && lm_probe(p)) {
		rc = lm_touch(p);
		return rc < 0 ? rc : EC_SKIPPED;
	}
	rc = lm_write(c, p, buf, writer);
	return rc < 0 ? rc : EC_STORED;
}

/* read_buffer_from_file: the byte count read (the file's own size when it
 * is whole) or -errno; a file larger than the staging buffer is -EFBIG. */
static ssize_t lm_read(struct llmd *c, uint32_t key, unsigned char *buf,
		       size_t *sizep, int direct)
{
	char p[PATH_MAX];
	off_t end;
	ssize_t n;
	int fd;

	lm_path(c, key, p);
	fd = open(p, O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	end = lseek(fd, 0, SEEK_END);
	if (end < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	*sizep = (size_t)end;
	if ((size_t)end > c->bs) {
		close(fd);
		return -EFBIG;
	}
	n = ec_read_full(fd, buf, (size_t)end, -1);
	close(fd);
	return n;
}

/* ---- the race's engine calls ---- */

static int r_store(void *ctx, uint32_t key, const unsigned char *buf, size_t bs,
		   int writer, int racing)
{
	(void)bs;
	return lm_store(ctx, key, buf, writer, racing);
}

static ssize_t r_load(void *ctx, uint32_t key, unsigned char *buf, size_t bs)
{
	size_t size = 0;
	ssize_t n = lm_read(ctx, key, buf, &size, 0);

	(void)bs;
	return n >= 0 && (size_t)n != size ? 0 : n;
}

static int r_lookup(void *ctx, uint32_t key)
{
	char p[PATH_MAX];
	struct stat st;

	lm_path(ctx, key, p);
	if (stat(p, &st) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

static int r_evict(void *ctx, uint32_t key)
{
	char p[PATH_MAX];

	lm_path(ctx, key, p);
	return unlink(p) < 0 ? -errno : 0;
}

/* ---- the evictor ---- */

struct crawl {
	time_t now;
	int files, cold, deleted, dirs_removed;
	char seen[8][PATH_MAX]; /* the files judged cold, for the transcript */
	int nseen;
};

/* Walks dir: files whose atime is older than the threshold are deleted;
 * returns 1 when dir is left empty. */
static int crawl_dir(struct crawl *cr, const char *dir)
{
	struct dirent *de;
	int left = 0;
	DIR *dh = opendir(dir);

	if (!dh)
		die("opendir %s: %s", dir, strerror(errno));
	while ((de = readdir(dh))) {
		char p[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ec_fmt(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st) < 0) {
			left++;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (crawl_dir(cr, p) && rmdir(p) == 0)
				cr->dirs_removed++;
			else
				left++;
			continue;
		}
		cr->files++;
		if (cr->now - st.st_atime < 3600) {
			left++;
			continue;
		}
		cr->cold++;
		if (cr->nseen < 8)
			ec_fmt(cr->seen[cr->nseen++], PATH_MAX, "%s", p);
		/* rm -f: a file already gone is fine. */
		if (unlink(p) == 0 || errno == ENOENT)
			cr->deleted++;
		else
			left++;
	}
	closedir(dh);
	return left == 0;
}

/* ---- the deterministic sequence ---- */

static void seq_load(struct llmd *c, const char *tag, uint32_t key,
		     unsigned char *buf, int direct)
{
	size_t size = 0;
	ssize_t n = lm_read(c, key, buf, &size, direct);
	uint32_t w, v;
	char why[200];

	if (n < 0)
		printf("%s: failed %s\n", tag, ename((int)-n));
	else if ((size_t)n != size)
		printf("%s: failed, read %zd of %zu\n", tag, n, size);
	else if (size != c->bs)
		printf("%s: read the whole %zu-byte file (block is %zu)\n", tag,
		       size, c->bs);
	else if (ec_check(buf, c->bs, key, &w, &v, why, sizeof(why)))
		printf("%s: CORRUPT %s\n", tag, why);
	else
		printf("%s: whole (w%u,v%u)\n", tag, w, v);
}

/* Sets a file's atime and mtime to now - ago seconds. */
static void set_times(const char *p, time_t now, time_t ago)
{
	struct timespec t[2] = {{now - ago, 0}, {now - ago, 0}};

	if (utimensat(AT_FDCWD, p, t, 0) < 0)
		die("utimensat %s: %s", p, strerror(errno));
}

static void seq_touch_check(struct llmd *c, unsigned char *buf, time_t now)
{
	char p[PATH_MAX];
	struct stat a, b;

	lm_path(c, 1, p);
	set_times(p, now, OLD_SECS);
	if (stat(p, &a) < 0)
		die("stat: %s", strerror(errno));
	ec_fill(buf, c->bs, 1, 0, 2);
	printf("store1-again: %d (1 = exists, atime touched)\n",
	       lm_store(c, 1, buf, 0, 0));
	if (stat(p, &b) < 0)
		die("stat: %s", strerror(errno));
	printf("touch1: mtime-kept=%s atime-now=%s\n",
	       a.st_mtim.tv_sec == b.st_mtim.tv_sec ? "yes" : "no",
	       b.st_atime >= now - 60 ? "yes" : "no");
}

static void do_seq(struct llmd *c)
{
	unsigned char *buf = ec_alloc(c->bs);
	time_t now = time(NULL);
	struct crawl cr = {.now = now};
	struct statvfs sv;
	char p[PATH_MAX];

	for (uint32_t k = 1; k <= 5; k++) {
		ec_fill(buf, c->bs, k, 0, 1);
		printf("store%u: %d\n", k, lm_store(c, k, buf, 0, 0));
	}
	seq_touch_check(c, buf, now);
	seq_load(c, "load1", 1, buf, 0);
	seq_load(c, "load9", 9, buf, 0);
	lm_path(c, 2, p);
	printf("cut2: %s\n", ename(truncate(p, 5000) ? errno : 0));
	seq_load(c, "load2", 2, buf, 0);
	/* Keys 2, 3 and 4 go cold (atime = mtime, two hours ago); reading
	 * 3 and 4 makes them hot again (relatime: an atime not after the
	 * mtime is updated by a read); 5 stays hot. Key 3 is read with
	 * O_DIRECT (the connector's GDS mode). Key 4 is read buffered right
	 * after this process wrote it: a read the page cache answers, which
	 * kvfs(8) says leaves the atime alone, so on kvfs today the evictor
	 * deletes a block the engine just used (the known gap this line
	 * guards). */
	for (uint32_t k = 2; k <= 4; k++) {
		lm_path(c, k, p);
		set_times(p, now, OLD_SECS);
	}
	seq_load(c, "load3.odirect", 3, buf, 1);
	seq_load(c, "load4.buffered-after-write", 4, buf, 0);
	if (statvfs(c->root, &sv) < 0)
		die("statvfs: %s", strerror(errno));
	printf("evictor.statvfs: OK used-fraction-defined=%s\n",
	       sv.f_blocks > 0 && sv.f_bfree <= sv.f_blocks ? "yes" : "no");
	crawl_dir(&cr, c->root);
	printf("evictor: files=%d cold=%d deleted=%d empty-dirs-removed=%d\n",
	       cr.files, cr.cold, cr.deleted, cr.dirs_removed);
	for (uint32_t k = 1; k <= 5; k++) {
		int cold = 0;

		lm_path(c, k, p);
		for (int i = 0; i < cr.nseen; i++)
			cold |= !strcmp(cr.seen[i], p);
		printf("evictor judged key%u %s\n", k, cold ? "cold" : "hot");
	}
	ec_print_listing("seq.files", c->root, 1, NULL);
	ec_free(buf, c->bs);
}

int main(int argc, char **argv)
{
	static struct llmd seq = {.bs = 64 * EC_KiB},
			   race = {.bs = 2 * EC_MiB + 64 * EC_KiB};
	struct ec_race r = {
		.eng = {&race, r_store, r_load, r_lookup, r_evict},
		.bs = 2 * EC_MiB + 64 * EC_KiB,
		.nw = 6,
		.nr = 6,
		.iters = 32,
		.nhot = 2,
		.nstable = 6,
		.nkeys = 20,
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
	fails = ec_race_run(&r, "llmd_fs");
	ec_print_listing("race.files", race.root, 0, NULL);
	return fails ? 1 : 0;
}
