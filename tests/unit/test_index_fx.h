/* SPDX-License-Identifier: MIT */
/*
 * What the index unit tests share (test_index.c, test_index_ns.c,
 * test_index_records.c; defined in test_index_fx.c): the fixture, helpers
 * that talk to SQLite directly, and helpers over index.h that assert
 * success.
 *
 * Each test gets its own mkdtemp(3) directory with the database file in it
 * (not :memory:, whose locking and journalling differ). The SQLite helpers
 * open a connection of their own, and only make databases the index never
 * makes itself: other applications' files, hard links, other format
 * versions.
 */
#ifndef KVFS_TEST_INDEX_FX_H
#define KVFS_TEST_INDEX_FX_H

#include "index.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "log.h"

#define T0 ((int64_t)1700000000 * 1000000000)
#define NOW (T0 + 5000)
#define UID 1000
#define GID 100
#define MAX_IMMUTABLE 4

struct fx {
	char dir[PATH_MAX / 2];
	char db[PATH_MAX];
	struct idx *idx;
	/* Files made immutable by a test; teardown makes them mutable again. */
	char immutable[MAX_IMMUTABLE][PATH_MAX];
	int nimmutable;
};

/* ---- fixture ---- */

/* A new directory with a new index (root 0755, owned by 0:0) in it. */
int setup(void **state);
/* Closes the index and removes the directory and everything in it. */
int teardown(void **state);
/* Makes path immutable (chattr +i) and remembers it for teardown. */
int fx_immutable(struct fx *f, const char *path);
void fx_mutable_again(struct fx *f);
/* A path next to the fixture's database. */
void fx_path(struct fx *f, char *buf, const char *name);
/* Closes and opens the fixture's index again. */
void fx_reopen(struct fx *f);

/* ---- SQLite and files, behind the index's back ---- */

/* Runs SQL on the database at path through a separate connection. */
void sql_exec(const char *path, const char *sql);
/* One text value of a query through a separate connection; caller frees. */
char *sql_text(const char *path, const char *sql);
void assert_sql_text(const char *path, const char *sql, const char *want);
/* Adds a second name for a file, as a hard link would. */
void fx_link(struct fx *f, uint64_t ino, uint64_t parent, const char *name);
void write_file(const char *path, const void *buf, size_t len);
/* The whole file; caller frees. */
char *read_file(const char *path, size_t *len);

/* ---- helpers over the API (each asserts success) ---- */

/* Attributes for idx_create: mode, UID:GID, times T0, T0+1, T0+2. */
struct idx_attr new_attr(uint32_t mode);
/* Creates (parent, name) with mode (a symlink's target is "target"). */
uint64_t mk(struct fx *f, uint64_t parent, const char *name, uint32_t mode);
uint64_t mkfile(struct fx *f, uint64_t parent, const char *name);
uint64_t mkdir_(struct fx *f, uint64_t parent, const char *name);
struct idx_attr getattr_ok(struct fx *f, uint64_t ino);
uint32_t nlink_of(struct fx *f, uint64_t ino);
uint64_t lookup_ino(struct fx *f, uint64_t parent, const char *name);
void assert_absent(struct fx *f, uint64_t parent, const char *name);
/* idx_rename at NOW; replaced and replaced_nlink may be NULL. */
int ren(struct fx *f, uint64_t parent, const char *name, uint64_t newparent,
	const char *newname, unsigned int flags, uint64_t *replaced,
	uint32_t *replaced_nlink);
/* idx_unlink at NOW, returning its result. */
int unl(struct fx *f, uint64_t parent, const char *name, int rmdir);
void ext_eq(const struct kv_extent *a, const struct kv_extent *b);
void statfs_eq(struct fx *f, uint64_t ninodes, uint64_t nbytes);
/* Gives a regular file a one-chunk record in data file file_id. */
void give_extent(struct fx *f, uint64_t ino, uint32_t file_id, uint64_t off,
		 uint64_t len);

/* Collects readdir entries; stops (without taking one) at limit. */
struct dirlist {
	int n, limit;
	char names[512][64];
	uint64_t inos[512];
	uint64_t cookies[512];
};

int dirlist_fn(void *arg, const char *name, const struct idx_attr *a,
	       uint64_t cookie);
/* All of dir's entries (up to 512) into *l. */
void list_dir(struct fx *f, uint64_t dir, struct dirlist *l);

/* cmocka's test with the fixture. */
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

#endif
