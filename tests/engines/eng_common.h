/* SPDX-License-Identifier: MIT */
/*
 * What the engine-compatibility clients share (the clients in tests/engines): the block
 * format, I/O loops, transcript helpers and the race harness that drives an
 * engine's store, load, lookup and eviction from many threads at once.
 * Each client supplies the engine's own calls (struct ec_engine) and its
 * deterministic sequence; the harness supplies the threads and the checks.
 *
 * Blocks are self-identifying: every 4 KiB page starts with (magic, key,
 * writer, version, page, size) followed by a stream derived from those, so a
 * reader proves it got one whole version that some writer wrote. Engines
 * whose keys are content hashes (the same key always holds the same bytes)
 * write writer 0, version 0 for every store of a key.
 *
 * Output: stdout is the transcript that must be identical on a plain
 * directory and on kvfs; anything timing-dependent goes to stderr. Helpers
 * here are thread-safe unless a comment says otherwise; errors are -errno
 * returns, except ec_die-style aborts for bugs in the test itself.
 */
#ifndef KVFS_TESTS_ENG_COMMON_H
#define KVFS_TESTS_ENG_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EC_PAGE 4096u
#define EC_KiB 1024ul
#define EC_MiB (1024ul * 1024ul)
#define EC_MAXW 32 /* writer threads */

/* snprintf that treats truncation as a bug in the test (abort). */
__attribute__((format(printf, 3, 4))) void ec_fmt(char *out, size_t n,
						  const char *fmt, ...);

/* Block contents (see above). */
void ec_fill(unsigned char *b, size_t size, uint32_t key, uint32_t writer,
	     uint32_t version);
/* 0 when b[0..size) is one whole version of key (stored in *w, *v), else -1
 * with the first bad page described in why. */
int ec_check(const unsigned char *b, size_t size, uint32_t key, uint32_t *w,
	     uint32_t *v, char *why, size_t why_len);
/* Key id -> lowercase hex name of len chars (16..64, a multiple of 16). */
void ec_hex(uint32_t key, unsigned len, char *out);

/* read(2) until n bytes or end of file; pread(2) when off >= 0. Returns the
 * byte count or -errno (EINTR retried). */
ssize_t ec_read_full(int fd, void *buf, size_t n, off_t off);
/* write(2) until n bytes; pwrite(2) when off >= 0. Returns n or -errno
 * (-EIO for a zero-byte write). */
ssize_t ec_write_full(int fd, const void *buf, size_t n, off_t off);

/* Prints "tag: OK size=N" or "tag: ERRNO" for stat(2) of path. */
void ec_print_stat(const char *tag, const char *path);
/* Sorted listing of dir (names matching nothing are skipped when filter is
 * set and returns 0): prints "tag: N entries" and one "tag: name size"
 * line per entry when verbose, else a hash of the lines. Recurses into
 * subdirectories (names joined with '/'). Single-threaded. */
void ec_print_listing(const char *tag, const char *dir, int verbose,
		      int (*filter)(const char *name));

/* The engine's calls, as the race harness drives them. */
enum { EC_STORED = 0, EC_SKIPPED = 1 };
struct ec_engine {
	void *ctx;
	/* Store key's block (bs bytes in buf). racing != 0: the writer
	 * passed the engine's exists check before another writer's store
	 * landed, so it writes even if the key now exists. Returns
	 * EC_STORED, EC_SKIPPED or -errno (an engine-level failure the
	 * engine itself tolerates, counted). */
	int (*store)(void *ctx, uint32_t key, const unsigned char *buf,
		     size_t bs, int writer, int racing);
	/* Load key into buf (bs bytes). Returns the byte count the engine
	 * read (< bs: the engine saw a short block and treats it as a
	 * miss) or -errno (-ENOENT: absent). */
	ssize_t (*load)(void *ctx, uint32_t key, unsigned char *buf, size_t bs);
	/* The engine's exists check: 1 present, 0 absent, -errno. */
	int (*lookup)(void *ctx, uint32_t key);
	/* The engine's eviction of one key: 0 or -errno. */
	int (*evict)(void *ctx, uint32_t key);
};

/* The race: nw writers, nr readers, one lookup thread and one evictor.
 * Keys [0, nhot) exist before the start and every writer replaces them
 * (racing stores) while readers load them; [nhot, nstable) exist and are
 * only looked up and read; [nstable, nkeys) start absent and are stored by
 * several writers each, each store after the engine's exists check;
 * [nkeys, nkeys + ndoomed) exist and the evictor removes them while
 * readers load them. */
struct ec_race {
	struct ec_engine eng;
	size_t bs;
	int nw, nr, iters;
	uint32_t nhot, nstable, nkeys, ndoomed;
	/* Writers of one key write the same bytes (content-hashed keys). */
	int same_content;
	/* The engine's own write pattern can leave a key being written short
	 * for a moment (a fixed temp name, an in-place rewrite): such reads
	 * are the engine's misses, not failures, and a store may fail the
	 * way the engine tolerates (a rename whose temp another writer
	 * took). A name that exists never vanishes. */
	int replace_gap;
	/* Internal. */
	pthread_barrier_t bar;
	atomic_uint started[EC_MAXW + 1];
	atomic_int writers_left;
	atomic_long whole, absent, shortr, skipped, stored, wr_err, evicted;
	atomic_long bad_absent, bad_short, torn, unknown, rd_err, lk_bad,
		ev_err;
};

/* Pre-stores, runs the threads, then loads every key once more; prints
 * "tag.race: ..." transcript lines (outcomes that are failures on every
 * correct filesystem, the final state) and returns the number of failed
 * invariants (0 on success). */
int ec_race_run(struct ec_race *r, const char *tag);

/* Page-aligned buffer of n bytes (O_DIRECT), freed with ec_free. */
void *ec_alloc(size_t n);
void ec_free(void *p, size_t n);

#endif
