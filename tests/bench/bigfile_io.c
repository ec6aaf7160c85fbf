/* SPDX-License-Identifier: MIT */
/*
 * The large-file benchmark tool of scripts/bench-large: the I/O of a
 * worker's pool file and of one big file copied in and out, timed, on any
 * directory (a plain one or a kvfs mount).
 *
 *   bigfile_io pool DIR GIB THREADS OPS
 *       Dynamo KVBM's disk pool: mkostemp(3) a file in DIR, fallocate it
 *       to GIB GiB, fcntl(F_SETFL, O_DIRECT), unlink it while open, then
 *       THREADS threads do OPS random 1 MiB pwrite(2)s in all (1 MiB
 *       aligned offsets from a fixed seed), then fdatasync: the write
 *       phase; the page cache is dropped; then the same count of random
 *       1 MiB pread(2)s, each checked against the bytes its block holds:
 *       the read phase. Prints "pool write MIBS read MIBS".
 *   bigfile_io seq DIR GIB
 *       One file of GIB GiB written with buffered 1 MiB write(2)s, then
 *       fsync; read back once, untimed, the page cache dropped, and read
 *       back again (see cmd_seq()), with 1 MiB read(2)s, checked each
 *       time. Prints "seq write MIBS read MIBS". The file is removed.
 *
 * Dropping the page cache needs root (/proc/sys/vm/drop_caches). Exits 1
 * with a message on any error or a wrong byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ull << 20)

static void die(const char *what)
{
	fprintf(stderr, "bigfile_io: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void drop_caches(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0 || write(fd, "3\n", 2) != 2)
		die("drop_caches");
	close(fd);
}

/* Fills 1 MiB with a pattern of block blk: every 8 bytes say blk, i. */
static void fill(uint64_t *p, uint64_t blk)
{
	for (uint64_t i = 0; i < MIB / 8; i++)
		p[i] = (blk << 20) ^ (i * 0x9e3779b97f4a7c15ull);
}

static int same(const uint64_t *p, uint64_t blk)
{
	for (uint64_t i = 0; i < MIB / 8; i++)
		if (p[i] != ((blk << 20) ^ (i * 0x9e3779b97f4a7c15ull)))
			return 0;
	return 1;
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct pool_arg {
	int fd;
	int write;
	uint64_t nblocks;
	uint64_t ops;
	uint64_t seed;
	uint64_t *written; /* block -> 1 + the block whose bytes it holds */
	pthread_mutex_t *lock;
};

static void *pool_worker(void *argp)
{
	struct pool_arg *a = argp;
	uint64_t *buf, s = a->seed;
	void *p;

	if (posix_memalign(&p, 4096, MIB) != 0)
		die("posix_memalign");
	buf = p;
	for (uint64_t i = 0; i < a->ops; i++) {
		uint64_t blk = next_rand(&s) % a->nblocks;
		ssize_t n;

		if (a->write) {
			fill(buf, blk);
			n = pwrite(a->fd, buf, MIB, (off_t)(blk * MIB));
		} else {
			n = pread(a->fd, buf, MIB, (off_t)(blk * MIB));
		}
		if (n != (ssize_t)MIB)
			die(a->write ? "pwrite" : "pread");
		if (!a->write && a->written[blk] && !same(buf, blk)) {
			fprintf(stderr, "bigfile_io: block %llu: wrong bytes\n",
				(unsigned long long)blk);
			exit(1);
		}
		if (a->write) {
			pthread_mutex_lock(a->lock);
			a->written[blk] = 1;
			pthread_mutex_unlock(a->lock);
		}
	}
	free(p);
	return NULL;
}

static double pool_phase(int fd, int write, uint64_t nblocks, unsigned nthr,
			 uint64_t ops, uint64_t *written)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_t tid[64];
	struct pool_arg a[64];
	double t0 = now_s();

	for (unsigned i = 0; i < nthr; i++) {
		a[i] = (struct pool_arg){.fd = fd,
					 .write = write,
					 .nblocks = nblocks,
					 .ops = ops / nthr,
					 .seed = 0x1234567ull + i * 7919,
					 .written = written,
					 .lock = &lock};
		/* The reads visit other blocks than the writes did. */
		if (!write)
			a[i].seed ^= 0xabcdefull;
		if (pthread_create(&tid[i], NULL, pool_worker, &a[i]) != 0)
			die("pthread_create");
	}
	for (unsigned i = 0; i < nthr; i++)
		pthread_join(tid[i], NULL);
	if (write && fdatasync(fd) < 0)
		die("fdatasync");
	return (double)(ops / nthr * nthr) / (now_s() - t0);
}

static int cmd_pool(const char *dir, uint64_t gib, unsigned nthr, uint64_t ops)
{
	uint64_t nblocks = gib * 1024, *written;
	char path[4096];
	double w, r;
	int fd, e;

	snprintf(path, sizeof(path), "%s/pool.XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		die("mkostemp");
	e = posix_fallocate(fd, 0, (off_t)(gib << 30));
	if (e) {
		errno = e;
		die("posix_fallocate");
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) < 0)
		die("fcntl O_DIRECT");
	if (unlink(path) < 0)
		die("unlink");
	written = calloc(nblocks, sizeof(*written));
	if (!written || nthr == 0 || nthr > 64)
		die("arguments");
	w = pool_phase(fd, 1, nblocks, nthr, ops, written);
	drop_caches();
	r = pool_phase(fd, 0, nblocks, nthr, ops, written);
	close(fd);
	free(written);
	printf("pool write %.0f read %.0f\n", w, r);
	return 0;
}

/*
 * Reads the n MiB of path with 1 MiB read(2)s and checks them: seconds,
 * or -1 after a wrong byte.
 */
static double seq_read(const char *path, uint64_t n, uint64_t *buf)
{
	double t0 = now_s();
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die("open for reading");
	for (uint64_t i = 0; i < n; i++) {
		if (read(fd, buf, MIB) != (ssize_t)MIB)
			die("read");
		if (!same(buf, i)) {
			fprintf(stderr, "bigfile_io: MiB %llu: wrong bytes\n",
				(unsigned long long)i);
			close(fd);
			return -1;
		}
	}
	close(fd);
	return now_s() - t0;
}

/*
 * The timed read follows an untimed one and a cache drop. Why: on this VM
 * a page freed long ago costs several times more to touch first than one
 * freed a moment ago (the guest reports free memory to the host, which
 * takes it back), and a read through the page cache fills a page per
 * 4 KiB. 8 GiB written through kvfs (no page cache kept), dropped, read
 * with dd bs=1M: 572 and 684 MB/s; read once, dropped, read again: 1.8
 * and 2.2 GB/s; dropped and read 10 s later: 666 and 713 MB/s. Touching
 * and freeing anonymous memory first did not help (it is reported at
 * once). So each target reads right after freeing as much page cache as
 * the file, as a serving host's memory, recycled all day, would be.
 */
static int cmd_seq(const char *dir, uint64_t gib)
{
	uint64_t n = gib * 1024, *buf;
	char path[4096];
	double t0, w, r;
	void *p;
	int fd;

	if (posix_memalign(&p, 4096, MIB) != 0)
		die("posix_memalign");
	buf = p;
	snprintf(path, sizeof(path), "%s/seq.big", dir);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		die("open for writing");
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		fill(buf, i);
		if (write(fd, buf, MIB) != (ssize_t)MIB)
			die("write");
	}
	if (fsync(fd) < 0 || close(fd) < 0)
		die("fsync");
	w = (double)n / (now_s() - t0);
	if (seq_read(path, n, buf) < 0)
		return 1;
	drop_caches();
	r = seq_read(path, n, buf);
	if (r < 0)
		return 1;
	if (unlink(path) < 0)
		die("unlink");
	printf("seq write %.0f read %.0f\n", w, (double)n / r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "pool") == 0)
		return cmd_pool(argv[2], strtoull(argv[3], NULL, 10),
				(unsigned)atoi(argv[4]),
				strtoull(argv[5], NULL, 10));
	if (argc == 4 && strcmp(argv[1], "seq") == 0)
		return cmd_seq(argv[2], strtoull(argv[3], NULL, 10));
	fprintf(stderr, "usage: bigfile_io pool DIR GIB THREADS OPS\n"
			"       bigfile_io seq DIR GIB\n");
	return 2;
}
