/* SPDX-License-Identifier: MIT */
/*
 * Fills a fresh kvfs data directory with stored blocks through the index
 * and store APIs, without a mount, for scripts/bench-startup: a benchmark
 * helper, it judges nothing.
 *
 *   startup_gen DATADIR NBLOCKS [BLOCK_BYTES [THREADS]]   (4096, 4)
 *
 * Each block goes the way an engine's store goes through the daemon
 * (kvfs(7), LIFE OF A BLOCK): its directories <model>_r0/<hex[0:3]>/
 * <hex[3:5]>_g0 are created when missing (mode 0755), then the temp file
 * "<hex>.bin_<n>.tmp" (0644), whose bytes are appended as a data record
 * under the temp's path and committed to the index (close), then renamed
 * to "<hex>.bin" with a name record for the new path (rename). THREADS
 * threads store blocks i = t, t + THREADS, ... at once, so the records
 * spread over the store's lanes as the daemon's worker threads spread
 * them. Keys are the 8-byte hex names the tests use. The index's log is
 * checkpointed every SG_SYNC_EVERY blocks and at the end, and the daemon's
 * clean-stop marker is written last, so the data directory looks like one
 * after a clean unmount (empty log, no crash recovery at the next start).
 *
 * Prints "startup_gen: N blocks of S bytes in T s (R blocks/s)", and its
 * progress every tenth on stderr.
 *
 *   startup_gen -l MOUNTPOINT NBLOCKS [THREADS]                  (4)
 *
 * Asks a kvfs mount of such a data directory for each of the NBLOCKS
 * names with access(F_OK), as an engine's lookups do, so that the daemon
 * holds a node for every block (for scripts/bench's memory row). Prints
 * "startup_gen: N of M names present in T s"; exits 1 when any is absent.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "index.h"
#include "store.h"

#define SG_TOP "meta-llama_Llama-3.2-1B_5f2d1c9e8a47_r0"
#define SG_MAX_THREADS 64
/* Blocks between two checkpoints of the index's log (idx_sync). */
#define SG_SYNC_EVERY 1000
/* The daemon's clean-stop marker (KVDB_CLEAN in fs/kvdb/kvdb.h). */
#define SG_CLEAN "kvfs.clean"

struct sg {
	struct idx *idx;
	struct store *store;
	uint64_t nblocks;
	uint64_t size;
	unsigned nthreads;
	uint64_t top; /* inode of SG_TOP */
	atomic_uint_fast64_t done;
	double t0;
};

struct sg_thread {
	struct sg *g;
	unsigned id;
	pthread_t t;
	int rc;
};

static int64_t sg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t sg_mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void sg_attr(struct idx_attr *a, uint32_t mode)
{
	int64_t now = sg_now_ns();

	*a = (struct idx_attr){.mode = mode,
			       .uid = getuid(),
			       .gid = getgid(),
			       .atime_ns = now,
			       .mtime_ns = now,
			       .ctime_ns = now};
}

/* The directory name in parent, created when missing: its inode. */
static int sg_dir(struct sg *g, uint64_t parent, const char *name,
		  uint64_t *ino)
{
	struct idx_attr a;
	int rc = idx_lookup(g->idx, parent, name, &a);

	if (rc == -ENOENT) {
		sg_attr(&a, S_IFDIR | 0755);
		rc = idx_create(g->idx, parent, name, &a, NULL);
		/* Another thread made it first: mkdir's EEXIST, then stat. */
		if (rc == -EEXIST)
			rc = idx_lookup(g->idx, parent, name, &a);
	}
	if (rc < 0)
		return rc;
	*ino = a.ino;
	return 0;
}

/* Block i's directories and file name, the engine's layout. */
static void sg_names(uint64_t i, char dir3[4], char dir2[8], char name[64])
{
	char hex[17];

	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)sg_mix(i));
	snprintf(dir3, 4, "%.3s", hex);
	snprintf(dir2, 8, "%.2s_g0", hex + 3);
	snprintf(name, 64, "%s.bin", hex);
}

static int sg_store(struct sg *g, uint64_t i, unsigned char *buf,
		    uint32_t *crcs, uint64_t suffix)
{
	char dir3[4], dir2[8], name[64], tmp[96], path[256];
	struct kv_extent ext, old;
	uint64_t d3, leaf, replaced;
	uint32_t rnlink;
	struct idx_attr a;
	int rc;

	sg_names(i, dir3, dir2, name);
	snprintf(tmp, sizeof(tmp), "%s_%llu.tmp", name,
		 (unsigned long long)suffix);
	rc = sg_dir(g, g->top, dir3, &d3);
	if (rc == 0)
		rc = sg_dir(g, d3, dir2, &leaf);
	if (rc < 0)
		return rc;
	/* open(O_CREAT | O_EXCL), write, close */
	sg_attr(&a, S_IFREG | 0644);
	rc = idx_create(g->idx, leaf, tmp, &a, NULL);
	if (rc < 0)
		return rc;
	memcpy(buf, &i, sizeof(i));
	snprintf(path, sizeof(path), "/%s/%s/%s/%s", SG_TOP, dir3, dir2, tmp);
	rc = store_append(g->store, a.ino, path, buf, g->size, crcs, &ext);
	if (rc < 0)
		return rc;
	rc = idx_set_extent(g->idx, a.ino, g->size, sg_now_ns(), &ext, crcs,
			    kv_nchunks(g->size), &old);
	store_append_done(g->store, ext.file_id);
	if (rc < 0)
		return rc;
	/* rename(tmp, dest) */
	rc = idx_rename(g->idx, leaf, tmp, leaf, name, 0, sg_now_ns(),
			&replaced, &rnlink);
	if (rc < 0)
		return rc;
	snprintf(path, sizeof(path), "/%s/%s/%s/%s", SG_TOP, dir3, dir2, name);
	return store_append_name(g->store, a.ino, path);
}

static void *sg_main(void *arg)
{
	struct sg_thread *t = arg;
	struct sg *g = t->g;
	unsigned char *buf = NULL;
	uint32_t *crcs;

	crcs = calloc(kv_nchunks(g->size) + 1, sizeof(*crcs));
	if (!crcs ||
	    posix_memalign((void **)&buf, KV_ALIGN, kv_align_up(g->size))) {
		t->rc = -ENOMEM;
		free(crcs);
		return NULL;
	}
	for (uint64_t j = 0; j < kv_align_up(g->size); j++)
		buf[j] = j < g->size ? (unsigned char)sg_mix(j + t->id) : 0;
	for (uint64_t i = t->id; i < g->nblocks && t->rc == 0;
	     i += g->nthreads) {
		uint64_t tenth = g->nblocks / 10 ? g->nblocks / 10 : 1, n;

		t->rc = sg_store(g, i, buf, crcs, sg_mix(t->id) >> 1);
		n = atomic_fetch_add(&g->done, 1) + 1;
		/*
		 * The index's checkpointer thread never checkpoints (its
		 * connection has not read the database yet, so SQLite does
		 * not know it is in WAL mode): without this the log grows by
		 * some 130 KB a block, 50 GB at 400k blocks.
		 */
		if (t->rc == 0 && n % SG_SYNC_EVERY == 0)
			t->rc = idx_sync(g->idx);
		if (n % tenth == 0)
			fprintf(stderr, "startup_gen: %llu blocks, %.0f s\n",
				(unsigned long long)n,
				(double)sg_now_ns() / 1e9 - g->t0);
	}
	free(buf);
	free(crcs);
	return NULL;
}

struct sg_lookup {
	const char *mnt;
	uint64_t nblocks;
	unsigned nthreads, id;
	pthread_t t;
	uint64_t present;
};

static void *sg_lookup_main(void *arg)
{
	struct sg_lookup *l = arg;
	char dir3[4], dir2[8], name[64], path[4096 + 128];

	for (uint64_t i = l->id; i < l->nblocks; i += l->nthreads) {
		sg_names(i, dir3, dir2, name);
		snprintf(path, sizeof(path), "%.4000s/%s/%s/%s/%s", l->mnt,
			 SG_TOP, dir3, dir2, name);
		if (access(path, F_OK) == 0)
			l->present++;
	}
	return NULL;
}

/* startup_gen -l MOUNTPOINT NBLOCKS [THREADS] */
static int sg_lookup_all(int argc, char **argv)
{
	struct sg_lookup l[SG_MAX_THREADS];
	uint64_t nblocks, present = 0;
	unsigned nthreads = 4;
	double t0;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: %s -l MOUNTPOINT NBLOCKS [THREADS]\n",
			argv[0]);
		return 2;
	}
	nblocks = strtoull(argv[3], NULL, 0);
	if (argc > 4)
		nthreads = (unsigned)strtoul(argv[4], NULL, 0);
	if (nthreads == 0 || nthreads > SG_MAX_THREADS) {
		fprintf(stderr, "startup_gen: bad thread count\n");
		return 2;
	}
	t0 = (double)sg_now_ns() / 1e9;
	for (unsigned i = 0; i < nthreads; i++) {
		l[i] = (struct sg_lookup){.mnt = argv[2],
					  .nblocks = nblocks,
					  .nthreads = nthreads,
					  .id = i};
		if (pthread_create(&l[i].t, NULL, sg_lookup_main, &l[i]) != 0) {
			fprintf(stderr, "startup_gen: pthread_create failed\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(l[i].t, NULL);
		present += l[i].present;
	}
	printf("startup_gen: %llu of %llu names present in %.1f s\n",
	       (unsigned long long)present, (unsigned long long)nblocks,
	       (double)sg_now_ns() / 1e9 - t0);
	return present == nblocks ? 0 : 1;
}

/* Writes DATADIR's clean-stop marker, durably; 0 or -errno. */
static int sg_mark_clean(const char *datadir)
{
	char path[4096 + 16];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%.4000s/%s", datadir, SG_CLEAN);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	fd = open(datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	struct store_config scfg = {0};
	struct sg_thread t[SG_MAX_THREADS];
	struct sg g = {.size = 4096, .nthreads = 4};
	char path[4096];
	double t0, t1;
	int rc = 0;

	if (argc > 1 && strcmp(argv[1], "-l") == 0)
		return sg_lookup_all(argc, argv);
	if (argc < 3 || argc > 5) {
		fprintf(stderr,
			"usage: %s DATADIR NBLOCKS [BLOCK_BYTES [THREADS]]\n",
			argv[0]);
		return 2;
	}
	g.nblocks = strtoull(argv[2], NULL, 0);
	if (argc > 3)
		g.size = strtoull(argv[3], NULL, 0);
	if (argc > 4)
		g.nthreads = (unsigned)strtoul(argv[4], NULL, 0);
	if (g.size == 0 || g.nthreads == 0 || g.nthreads > SG_MAX_THREADS) {
		fprintf(stderr,
			"startup_gen: bad block size or thread count\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%.4000s/index.db", argv[1]);
	if (access(path, F_OK) == 0) {
		fprintf(stderr,
			"startup_gen: %s exists: want a fresh DATADIR\n", path);
		return 2;
	}
	rc = idx_open(&g.idx, path, 0755, getuid(), getgid());
	if (rc == 0)
		rc = idx_start_checkpointer(g.idx);
	if (rc == 0)
		rc = store_open(&g.store, argv[1], &scfg, NULL);
	if (rc == 0)
		rc = sg_dir(&g, KV_ROOT_INO, SG_TOP, &g.top);
	if (rc < 0) {
		fprintf(stderr, "startup_gen: cannot set up %s: %s\n", argv[1],
			strerror(-rc));
		store_close(g.store);
		idx_close(g.idx);
		return 1;
	}
	t0 = (double)sg_now_ns() / 1e9;
	g.t0 = t0;
	for (unsigned i = 0; i < g.nthreads; i++) {
		t[i] = (struct sg_thread){.g = &g, .id = i};
		if (pthread_create(&t[i].t, NULL, sg_main, &t[i]) != 0) {
			fprintf(stderr, "startup_gen: pthread_create failed\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < g.nthreads; i++) {
		pthread_join(t[i].t, NULL);
		if (t[i].rc < 0 && rc == 0)
			rc = t[i].rc;
	}
	t1 = (double)sg_now_ns() / 1e9;
	store_close(g.store);
	idx_close(g.idx);
	if (rc < 0) {
		fprintf(stderr, "startup_gen: store failed: %s\n",
			strerror(-rc));
		return 1;
	}
	rc = sg_mark_clean(argv[1]);
	if (rc < 0) {
		fprintf(stderr, "startup_gen: cannot write %s/%s: %s\n",
			argv[1], SG_CLEAN, strerror(-rc));
		return 1;
	}
	printf("startup_gen: %llu blocks of %llu bytes in %.1f s (%.0f "
	       "blocks/s)\n",
	       (unsigned long long)g.nblocks, (unsigned long long)g.size,
	       t1 - t0, (double)g.nblocks / (t1 - t0));
	return 0;
}
