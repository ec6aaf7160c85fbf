/* SPDX-License-Identifier: MIT */
/*
 * dynamo_kvbm: replays NVIDIA Dynamo's KVBM disk tier (G3) against a
 * directory. It follows lib/llm/src/block_manager/storage/disk.rs in the
 * Dynamo repository (DiskStorage::new, allocate_file, DiskStorage::unlink):
 *
 *   start   the directory from DYN_KVBM_DISK_CACHE_DIR (default /tmp/),
 *           create_dir_all of it; mkostemp("<dir>/dynamo-kvbm-disk-cache-
 *           XXXXXX", O_CLOEXEC); fcntl(F_GETFL) and fcntl(F_SETFL, flags |
 *           O_DIRECT) unless DYN_KVBM_DISK_DISABLE_O_DIRECT is set;
 *           fallocate(fd, 0, 0, size), on EOPNOTSUPP ftruncate (or, with
 *           DYN_KVBM_DISK_ZEROFILL_FALLBACK, aligned zero writes); after
 *           the pool is registered with NIXL, unlink of the name while the
 *           descriptor stays open
 *   write   blocks at offsets in the pool: page-aligned O_DIRECT pwrite of
 *           whole blocks, many in flight at once (NIXL's POSIX backend)
 *   read    page-aligned O_DIRECT pread of whole blocks at offsets
 *   lookup  none on disk (the block manager's own tables)
 *   evict   none on disk (a slot is simply written again)
 *
 * The race: writer threads own the pool's slots (slot % writers) and
 * rewrite them; readers read any slot under a sequence counter, the block
 * manager's own record of which version a slot holds. A read that no
 * write overlapped must return exactly that version; a slot never
 * written must read as zeros (fallocate's holes).
 *
 * The pool is KVFS_ENGINES_POOL_MB MiB (default 256: past the default
 * record_max of kvfs(8), so kvfs keeps it as an extent file; the engine's
 * pools are many GiB, sized by DYN_KVBM_DISK_CACHE_GB).
 *
 * Usage: dynamo_kvbm DIR; transcript on stdout (see eng_common.h).
 */
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
#include <unistd.h>

#include "eng_common.h"
#include "engine.h"

static const char *prog = "dynamo_kvbm";
#include "tclient.h"

#define SLOT EC_MiB
#define MAXSLOTS 4096

struct pool {
	int fd;
	size_t size;
	uint32_t nslots;
	atomic_uint seq[MAXSLOTS]; /* odd: being written; 2v: version v */
	int nw, nr, iters;
	atomic_int writers_left;
	pthread_barrier_t bar;
	atomic_long verified, zeros, raced, bad;
};

/* DiskStorage::new: the pool's descriptor, or -errno at the failing step
 * (printed). */
static int pool_open(const char *dir, size_t size, char *name, size_t n)
{
	int fd, fl, rc;

	printf("start.create_dir_all: %s\n",
	       ename(-eng_mkdir_p(AT_FDCWD, dir)));
	ec_fmt(name, n, "%s/dynamo-kvbm-disk-cache-XXXXXX", dir);
	fd = mkostemp(name, O_CLOEXEC);
	printf("start.mkostemp: %s\n", ename(fd < 0 ? errno : 0));
	if (fd < 0)
		return -1;
	fl = fcntl(fd, F_GETFL);
	rc = fl < 0 ? errno : fcntl(fd, F_SETFL, fl | O_DIRECT) < 0 ? errno : 0;
	printf("start.fcntl-setfl-odirect: %s\n", ename(rc));
	fl = fcntl(fd, F_GETFL);
	printf("start.getfl: rdwr=%s direct=%s\n",
	       (fl & O_ACCMODE) == O_RDWR ? "yes" : "no",
	       fl & O_DIRECT ? "yes" : "no");
	rc = fallocate(fd, 0, 0, (off_t)size) < 0 ? errno : 0;
	printf("start.fallocate: %s\n", ename(rc));
	if (rc == EOPNOTSUPP)
		printf("start.ftruncate: %s\n",
		       ename(ftruncate(fd, (off_t)size) < 0 ? errno : 0));
	return fd;
}

static void seq_checks(int fd, const char *name, size_t size)
{
	unsigned char *buf = ec_alloc(SLOT), *zero = ec_alloc(SLOT);
	struct stat st;
	uint32_t w, v;
	char why[200];
	ssize_t n;

	memset(zero, 0, SLOT);
	if (fstat(fd, &st) < 0)
		die("fstat: %s", strerror(errno));
	printf("pool.fstat: size=%s blocks-cover=%s\n",
	       (size_t)st.st_size == size ? "pool" : "WRONG",
	       (size_t)st.st_blocks * 512 >= size ? "yes" : "no");
	n = ec_read_full(fd, buf, SLOT, 5 * (off_t)SLOT);
	printf("pool.hole-read: %zd zeros=%s\n", n,
	       n == SLOT && !memcmp(buf, zero, SLOT) ? "yes" : "no");
	printf("pool.unlink: %s\n", ename(unlink(name) < 0 ? errno : 0));
	ec_print_stat("pool.name-after-unlink", name);
	if (fstat(fd, &st) < 0)
		die("fstat: %s", strerror(errno));
	printf("pool.fstat-after-unlink: nlink=%lu size=%s\n",
	       (unsigned long)st.st_nlink,
	       (size_t)st.st_size == size ? "pool" : "WRONG");
	ec_fill(buf, SLOT, 3, 0, 1);
	printf("pool.pwrite-slot3: %zd\n",
	       ec_write_full(fd, buf, SLOT, 3 * (off_t)SLOT));
	memset(buf, 0, SLOT);
	n = ec_read_full(fd, buf, SLOT, 3 * (off_t)SLOT);
	printf("pool.pread-slot3: %zd %s\n", n,
	       n == SLOT && !ec_check(buf, SLOT, 3, &w, &v, why, sizeof(why))
		       ? "whole"
		       : "CORRUPT");
	n = ec_read_full(fd, buf, SLOT, (off_t)size - (off_t)SLOT / 2);
	printf("pool.pread-past-end: %zd\n", n);
	ec_free(buf, SLOT);
	ec_free(zero, SLOT);
}

/* ---- the race ---- */

static void *writer(void *arg)
{
	struct pool *p = arg;
	unsigned char *buf = ec_alloc(SLOT);
	static atomic_int ids;
	int id = atomic_fetch_add(&ids, 1);

	pthread_barrier_wait(&p->bar);
	for (int i = 0; i < p->iters; i++) {
		/* Writers keep to the first half: the rest stays holes. */
		uint32_t own = p->nslots / 2 / (uint32_t)p->nw;
		uint32_t slot =
			(uint32_t)id + (uint32_t)p->nw * ((uint32_t)i % own);
		uint32_t ver = atomic_load(&p->seq[slot]) / 2 + 1;

		ec_fill(buf, SLOT, slot, (uint32_t)id, ver);
		atomic_store(&p->seq[slot], 2 * ver - 1);
		if (ec_write_full(p->fd, buf, SLOT, (off_t)slot * SLOT) !=
		    SLOT) {
			atomic_fetch_add(&p->bad, 1);
			fprintf(stderr, "pwrite slot %u: %s\n", slot,
				strerror(errno));
		}
		atomic_store(&p->seq[slot], 2 * ver);
	}
	atomic_fetch_sub(&p->writers_left, 1);
	ec_free(buf, SLOT);
	return NULL;
}

/* One checked read of slot: counted in p. */
static void read_slot(struct pool *p, uint32_t slot, unsigned char *buf)
{
	unsigned s1 = atomic_load(&p->seq[slot]), s2;
	ssize_t n = ec_read_full(p->fd, buf, SLOT, (off_t)slot * SLOT);
	uint32_t w, v;
	char why[200];

	s2 = atomic_load(&p->seq[slot]);
	if (n != SLOT) {
		atomic_fetch_add(&p->bad, 1);
		fprintf(stderr, "pread slot %u: %zd\n", slot, n);
	} else if (s1 != s2 || s1 % 2) {
		atomic_fetch_add(&p->raced, 1);
	} else if (s1 == 0) {
		for (size_t i = 0; i < SLOT; i++)
			if (buf[i]) {
				atomic_fetch_add(&p->bad, 1);
				fprintf(stderr, "slot %u: not zeros at %zu\n",
					slot, i);
				return;
			}
		atomic_fetch_add(&p->zeros, 1);
	} else if (ec_check(buf, SLOT, slot, &w, &v, why, sizeof(why)) ||
		   v != s1 / 2) {
		atomic_fetch_add(&p->bad, 1);
		fprintf(stderr, "slot %u (version %u): %s v%u\n", slot, s1 / 2,
			why, v);
	} else {
		atomic_fetch_add(&p->verified, 1);
	}
}

static void *reader(void *arg)
{
	struct pool *p = arg;
	unsigned char *buf = ec_alloc(SLOT);
	uint64_t rnd = (uint64_t)(uintptr_t)buf;

	pthread_barrier_wait(&p->bar);
	for (int j = 0; j < 2 * p->iters || atomic_load(&p->writers_left) > 0;
	     j++)
		read_slot(p, (uint32_t)(splitmix(&rnd) % p->nslots), buf);
	ec_free(buf, SLOT);
	return NULL;
}

static int do_race(struct pool *p)
{
	unsigned char *buf = ec_alloc(SLOT);
	pthread_t th[16];
	int n = 0;
	long before;

	pthread_barrier_init(&p->bar, NULL, (unsigned)(p->nw + p->nr));
	atomic_store(&p->writers_left, p->nw);
	for (int i = 0; i < p->nw + p->nr; i++)
		if (pthread_create(&th[n++], NULL, i < p->nw ? writer : reader,
				   p))
			die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&p->bar);
	before = atomic_load(&p->bad);
	for (uint32_t s = 0; s < p->nslots; s++)
		read_slot(p, s, buf);
	printf("race: slots=%u writers=%d readers=%d\n", p->nslots, p->nw,
	       p->nr);
	printf("race: failed reads=%ld (after the threads: %ld)\n",
	       atomic_load(&p->bad), atomic_load(&p->bad) - before);
	fprintf(stderr, "race info: verified=%ld zeros=%ld raced=%ld\n",
		atomic_load(&p->verified), atomic_load(&p->zeros),
		atomic_load(&p->raced));
	ec_free(buf, SLOT);
	return atomic_load(&p->bad) || !atomic_load(&p->verified) ||
	       !atomic_load(&p->zeros);
}

int main(int argc, char **argv)
{
	static struct pool p = {.nw = 4, .nr = 4, .iters = 64};
	const char *mb = getenv("KVFS_ENGINES_POOL_MB");
	char dir[PATH_MAX], name[PATH_MAX];
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	if (argc != 2)
		die("usage: %s DIR", prog);
	p.size = (mb ? strtoul(mb, NULL, 0) : 256) * EC_MiB;
	p.nslots = (uint32_t)(p.size / SLOT);
	if (p.nslots < 8 || p.nslots > MAXSLOTS)
		die("pool of %zu bytes: 8 to %u slots", p.size, MAXSLOTS);
	printf("pool: %s MiB\n", mb ? "KVFS_ENGINES_POOL_MB" : "256");
	ec_fmt(dir, sizeof(dir), "%s/kvbm", argv[1]);
	p.fd = pool_open(dir, p.size, name, sizeof(name));
	if (p.fd < 0)
		return 1;
	seq_checks(p.fd, name, p.size);
	atomic_store(&p.seq[3], 2);
	rc = do_race(&p);
	printf("close: %s\n", ename(close(p.fd) < 0 ? errno : 0));
	ec_print_listing("after.files", dir, 1, NULL);
	return rc ? 1 : 0;
}
