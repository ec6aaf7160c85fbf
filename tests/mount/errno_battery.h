/* SPDX-License-Identifier: MIT */
/*
 * What the parts of errno_battery share: the transcript helpers (one line
 * "step: result" per call), file helpers, and the battery's sections.
 * errno_battery.c holds main, the helpers and the remount population;
 * errno_battery_ns.c the namespace sections (missing names, ENOTDIR,
 * EISDIR, ENOTEMPTY, EEXIST, rename, symlinks, truncate, O_APPEND and
 * O_TRUNC); errno_battery_io.c times, permissions, xattrs, open files
 * across unlink and rename, EOF and pread/pwrite, O_DIRECT, statfs and
 * readdir; errno_battery_link.c hard links; errno_battery_special.c FIFOs,
 * sockets, device nodes, mkdir/rmdir, symlink and truncate edges;
 * errno_battery_perm.c set-id bits and permission cases run as other users
 * (as_user forks a child for each). Single-threaded apart from those
 * children; every section works in the current directory.
 * Helpers that cannot set up what a step needs exit 1 (fail_setup).
 */
#ifndef KVFS_TESTS_ERRNO_BATTERY_H
#define KVFS_TESTS_ERRNO_BATTERY_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define KiB 1024ul
#define MiB (1024ul * 1024ul)
#define PAGE 4096ul

/* Reports a call's result: OK (or the returned count) or the errno name. */
#define T(name, call)                                                          \
	do {                                                                   \
		long r_ = (long)(call);                                        \
		int e_ = errno;                                                \
		report((name), r_, e_, 0);                                     \
	} while (0)
#define TN(name, call)                                                         \
	do {                                                                   \
		long r_ = (long)(call);                                        \
		int e_ = errno;                                                \
		report((name), r_, e_, 1);                                     \
	} while (0)

/* snprintf that treats truncation as a bug in the test (abort). */
__attribute__((format(printf, 3, 4))) void xsnprintf(char *out, size_t n,
						     const char *fmt, ...);
/* "name: OK", "name: OK r" (count) or "name: ERRNO" when r < 0. */
void report(const char *name, long r, int e, int count);
/* A step the battery needs could not be set up: exit 1. */
__attribute__((noreturn)) void fail_setup(const char *what);
uint64_t fnv1a(const void *p, size_t n);
/* n deterministic bytes from seed. */
void pattern(unsigned char *b, size_t n, uint64_t seed);
void *xmalloc(size_t n);
/* Opens and closes at once; returns 0 or -1 with errno from open. */
int topen(const char *p, int flags, mode_t m);
/* Writes n pattern bytes (seed) to a new or truncated file. 0 or -1. */
/* qsort(3) order of an array of strings. */
int cmp_str(const void *a, const void *b);
int mkfile(const char *p, size_t n, uint64_t seed);
/* rc < 0: fail_setup(what). */
void must(int rc, const char *what);
const char *type_name(mode_t m);
/* "name: type=T mode=M nlink=N uid=U gid=G [size=S]" or the errno. */
void show_stat(const char *name, const char *p, int follow);
/*
 * p's permission bits as statx(2) asking for STATX_MODE alone gives them:
 * what the kernel holds, unless it knows its copy is stale.
 */
void show_mode(const char *name, const char *p);
/* The atime and mtime of p (follow: stat, else lstat). */
void show_times(const char *name, const char *p, int follow);
/* Reads fd from offset 0 to EOF with pread; returns length or -errno. */
ssize_t fd_slurp(int fd, unsigned char **out);
/* The whole file p; returns its length or -errno. */
ssize_t slurp(const char *p, unsigned char **out);
/* "name: size=N hash=H" of the whole file, or the errno. */
void show_content(const char *name, const char *p);
/* "name: match" when file p holds exactly want[0..n), else what differs. */
void expect_content(const char *name, const char *p, const unsigned char *want,
		    size_t n);
int all_zero(const unsigned char *b, size_t n);
/* The clock, coarse (a window's start) and fine (its end). */
struct timespec now_coarse(void);
struct timespec now_fine(void);
/* "name: in-window" when p's atime/mtime/ctime (which: 'a', 'm', 'c') is in
 * [lo, hi], else OUT-OF-WINDOW (the values go to stderr). */
void in_window(const char *name, const char *p, int which, struct timespec lo,
	       struct timespec hi);
/* Runs fn as uid and gid id (no supplementary groups but extra, when not
 * 0) in a child, after the transcript so far is flushed; prints
 * "name: exit=N" when the child does not end with 0. */
void as_user(const char *name, uid_t id, gid_t extra, void (*fn)(void));

/* The sections, in battery order. */
void sec_missing(void);
void sec_nametoolong(void);
void sec_notdir(void);
void sec_isdir(void);
void sec_notempty(void);
void sec_exist(void);
void sec_rename(void);
void sec_rmdir_readlink(void);
void sec_symlink(void);
void sec_truncate(void);
void sec_append_otrunc(void);
void sec_utimens(void);
void sec_chmod_chown(void);
void sec_xattr(void);
void sec_open_unlink_rename(void);
void sec_eof_pread(void);
void sec_pwrite(void);
void sec_wronly_cache(void);
void sec_odirect(void);
void sec_statfs_sync(void);
void sec_readdir(void);
void sec_link(void);
void sec_link_rename(void);
void sec_link_open(void);
void sec_special(void);
void sec_special_io(void);
void sec_mkdir_symlink(void);
void sec_trunc_edges(void);
void sec_setid(void);
void sec_perm(void);

#endif
