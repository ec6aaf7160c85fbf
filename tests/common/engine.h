/* SPDX-License-Identifier: MIT */
/*
 * The engine's block I/O, written once for every test client (vllm_io,
 * crash_client, lookup_probe, torn_client, store_load): vLLM's FS tier
 * store and load sequences, exactly as the engine issues them (kvfs(7),
 * LIFE OF A BLOCK):
 *
 *   store: access(dest, F_OK) (exists: done, nothing written); mkdir -p of
 *          dest's parent (stat, then mkdir(0777) of each missing level,
 *          EEXIST followed by a stat showing a directory is success);
 *          open("<dest>_<suffix>.tmp", O_CREAT|O_EXCL|O_WRONLY|O_TRUNC
 *          [|O_DIRECT], 0644); one write(2) of the whole block (a short
 *          count is EIO); close; rename(tmp, dest), which replaces. On a
 *          failed write, close or rename the temp is unlinked.
 *   load:  open(path, O_RDONLY[|O_DIRECT]); one read(2) of the block size;
 *          close. 0 <= n < size is a provably short read, after which the
 *          engine unlinks the block by path; an open or read error leaves
 *          the file alone.
 *
 * Not here: what a block holds (each client fills and checks its own
 * format; the shared stream is tc_fill_stream in tclient.h), threads, and
 * what a client prints. Paths are relative to a directory descriptor
 * (AT_FDCWD for plain paths). No locks, no globals: callable from any
 * number of threads at once. Errors: -errno returns, never errno or exit.
 */
#ifndef KVFS_TESTS_ENGINE_H
#define KVFS_TESTS_ENGINE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Flags of eng_store and eng_load. */
#define ENG_DIRECT 0x1u /* O_DIRECT on the temp (store) or the open (load) */
#define ENG_ACCESS 0x2u /* store: the access(F_OK) short-cut first */
#define ENG_ACCESS_STRICT                                                      \
	0x4u		  /* store: an access error other than ENOENT
				  fails the store (step "access") */
#define ENG_NO_MKDIR 0x8u /* store: the parent exists, no mkdir -p */
#define ENG_UNLINK_SHORT                                                       \
	0x10u /* load: unlink after a short read, as the
				  engine does (checkers leave the file) */

/* eng_store's return values besides -errno. */
enum { ENG_STORED = 0, ENG_SKIPPED = 1 };

struct eng_store {
	int dirfd;	  /* AT_FDCWD or a directory */
	const char *path; /* the block's name, relative to dirfd */
	const void *buf;  /* size bytes (page-aligned for O_DIRECT) */
	size_t size;
	unsigned flags;		   /* ENG_DIRECT, ENG_ACCESS, ... */
	unsigned long long suffix; /* temp name: "<path>_<suffix>.tmp" */
	/* Optional hooks, called with arg: fill right before the temp's
	 * open (after mkdir -p), committed after close(2) of the temp
	 * returned 0 and before the rename. */
	void (*fill)(void *arg);
	void (*committed)(void *arg);
	void *arg;
	/* Optional transcript of the steps ("access=ENOENT mkdir=OK
	 * open=OK write=N close=OK rename=OK"), log_len bytes. */
	char *log;
	size_t log_len;
	/* Results: the step that failed (or the last one run) and the
	 * write(2) return value (-1 on error; short counts are EIO). */
	const char *step;
	ssize_t written;
};

/* Runs the store sequence. Returns ENG_STORED, ENG_SKIPPED (ENG_ACCESS and
 * the name exists) or -errno with s->step naming the failing step. */
int eng_store(struct eng_store *s);

struct eng_load {
	int dirfd;
	const char *path;
	void *buf; /* size bytes (page-aligned for O_DIRECT) */
	size_t size;
	unsigned flags;	 /* ENG_DIRECT, ENG_UNLINK_SHORT */
	struct stat *st; /* optional: fstat(2) of the open file, before the
			    read (st_size -1 when fstat fails) */
	/* Optional hook between a successful open and the read (a reader
	 * holding the descriptor while writers rename over the name). */
	void (*opened)(void *arg);
	void *arg;
	/* Results. */
	const char *step; /* "open" or "read" when that failed */
	int short_read;	  /* 0 <= n < size */
	int unlinked;	  /* the short-read unlink returned 0 */
	int unlink_err;	  /* its errno otherwise (0 when not tried) */
};

/* Runs the load sequence. Returns the byte count read (== size when
 * whole; less on a short read, see l->short_read) or -errno when open or
 * read failed (l->step says which). */
ssize_t eng_load(struct eng_load *l);

/* mkdir -p of path (relative to dirfd) as std::filesystem's
 * create_directories does it. Returns 0 or -errno (-ENOTDIR when a level
 * exists and is not a directory). */
int eng_mkdir_p(int dirfd, const char *path);

/* The parent directory of path into out (n bytes; "" when path has no
 * '/'; cut to n - 1 bytes). */
void eng_parent(const char *path, char *out, size_t n);

/* "<prefix>/<hex[0:3]>/<hex[3:5]>_g<group>/<hex>.bin" into out (n bytes):
 * the engine's block file layout under a namespace's "<base>_r<rank>"
 * directory. Returns 0, or -ENAMETOOLONG when it does not fit. */
int eng_block_path(char *out, size_t n, const char *prefix, const char *hex,
		   unsigned group);

#endif
