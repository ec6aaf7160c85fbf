/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl's private declarations, shared by kvfsctl.c (the command line and
 * the commands that talk to a running daemon: status, stats, verdicts,
 * clear, evict), kvfsctl_fsck.c (the offline check and repair) and
 * kvfsctl_gc.c (offline compaction of data files). kvfsctl is a
 * single-threaded command-line program; none of this is thread-safe.
 */
#ifndef KVFS_KVFSCTL_H
#define KVFS_KVFSCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses, as kvfsctl(8) states them. */
#define KC_EXIT_OK 0
#define KC_EXIT_DAMAGE 1 /* fsck found damage */
#define KC_EXIT_ERROR 2	 /* usage or operational error */

/* A parsed JSON object, flattened: nested keys are joined with '.'. */
struct kc_kv {
	char *key;
	char *val; /* decoded string, number text, "true"/"false"; NULL: null */
	int is_str;
};
struct kc_json {
	struct kc_kv *v;
	size_t n;
	size_t cap;
};

/* Parses one JSON object; 0 or -EINVAL/-ENOMEM. Free with kc_json_free(). */
int kc_json_parse(const char *text, struct kc_json *out);
void kc_json_free(struct kc_json *j);
/* The value of key, NULL when absent or null. Borrowed from j. */
const char *kc_json_get(const struct kc_json *j, const char *key);
/* The value of key as a number: 0, or -ENOENT when absent, null or not one. */
int kc_json_u64(const struct kc_json *j, const char *key, uint64_t *out);

/* What a MOUNTPOINT|DATADIR argument turned out to be. */
struct kc_target {
	char *path;	       /* the argument, resolved (realpath) */
	char *datadir;	       /* the data directory (realpath) */
	char *mountpoint;      /* where it is mounted; NULL if not or unknown */
	int mounted;	       /* a kvfs daemon serves datadir */
	int given_mount;       /* the argument was the mount point */
	long pid;	       /* the daemon's process ID, 0 if unknown */
	struct kc_json status; /* MOUNTPOINT/.kvfs/status when mounted */
};

/*
 * Works out what arg is: a kvfs mount point (it has .kvfs/status) or a data
 * directory (index.db, data/ or kvfs.lock in it), and whether a daemon
 * serves it. Prints what is wrong ("kvfsctl CMD: ...") and returns -errno
 * when it is neither. Reads no name inside the mount but .kvfs/status.
 * Free with kc_target_free().
 */
int kc_target_open(const char *cmd, const char *arg, struct kc_target *t);
void kc_target_free(struct kc_target *t);

/* "kvfsctl CMD: message" on stderr. */
void kc_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Writes s as a JSON string literal. */
void kc_json_str(FILE *f, const char *s);
/* Human size: "0 B", "4.0 KiB", "1.50 GiB". Returns buf. */
const char *kc_size(char *buf, size_t len, uint64_t bytes);

/* Counts and sizes of DATADIR/data/NNNNNN.kvd. */
struct kc_usage {
	uint64_t nfiles;
	uint64_t physical; /* st_blocks * 512 */
	uint64_t apparent; /* st_size */
};
/* Measures DATADIR's data files (none when data/ is missing); -errno. */
int kc_data_usage(const char *datadir, struct kc_usage *u);

/*
 * Takes DATADIR/kvfs.lock (LOCK_EX) the way kvfs does and writes our pid
 * into it, so no daemon can start meanwhile; *fd_out holds it until closed.
 * -EBUSY, after saying who holds it ("kvfsctl CMD: ..."), when a kvfs or
 * another kvfsctl has it; other -errno after saying what failed.
 */
int kc_lock_datadir(const char *cmd, const char *datadir, int *fd_out);

/* The fsck command (kvfsctl_fsck.c): returns the exit status. */
int kc_fsck(int argc, char **argv);
/* The gc command (kvfsctl_gc.c): returns the exit status. */
int kc_gc(int argc, char **argv);

#endif
