/* SPDX-License-Identifier: MIT */
/*
 * The data directory (DATADIR) on disk: the names in it, its lock, and the
 * names, list and sizes of its data files. Used alike by the daemon, the
 * block store and kvfsctl, so each rule is written once:
 *
 *   DATADIR/index.db       the index (SQLite; index/)
 *   DATADIR/data/          the data files, NNNNNN.kvd (the block store)
 *   DATADIR/kvfs.lock      flock(2)ed LOCK_EX by whoever owns DATADIR (a
 *                          daemon, or kvfsctl fsck/gc); holds its pid as
 *                          decimal text and a newline
 *   DATADIR/kvfs.sock      the daemon's control socket
 *
 * Not here: what is inside the files (record.h, index.h), opening them for
 * I/O (store.h).
 *
 * Errors are -errno. No state: every function may be called from any
 * thread. The lock is tied to the open file description, so it is held
 * until the descriptor (and every dup or fork of it) is closed.
 */
#ifndef KVFS_DATADIR_H
#define KVFS_DATADIR_H

#include <stddef.h>
#include <stdint.h>

#define DATADIR_INDEX "index.db"
#define DATADIR_DATA "data"
#define DATADIR_LOCK "kvfs.lock"
#define DATADIR_SOCK "kvfs.sock"

/* Bytes a buffer for a data file name needs (with room to spare). */
#define DATADIR_NAME_MAX 32u

/* Writes "datadir/name" into buf: 0, or -ENAMETOOLONG when it is cut. */
int datadir_path(char *buf, size_t len, const char *datadir, const char *name);

/* --- kvfs.lock ---------------------------------------------------------- */

/* Opens DATADIR/kvfs.lock (O_RDWR, created 0644): the fd, or -errno. */
int datadir_lock_open(const char *datadir);
/*
 * Takes the lock on fd (LOCK_EX, not waiting): 0, -EWOULDBLOCK (which is
 * -EAGAIN) when someone else holds it, or another -errno.
 */
int datadir_lock_try(int fd);
/*
 * The pid text in the lock file open at fd, up to the first newline (at
 * most len - 1 bytes); "" when it holds none or cannot be read.
 */
void datadir_lock_holder(int fd, char *buf, size_t len);
/* Replaces the text of the lock file (fd, locked) by our pid: 0 or -errno. */
int datadir_lock_record_pid(int fd);
/*
 * Whether someone holds DATADIR's lock: 1 (with the pid its file records in
 * *pid, 0 when none), 0 when not (or there is no lock file), or -errno.
 * Holds a shared lock only for the test; never creates the lock file.
 */
int datadir_lock_probe(const char *datadir, long *pid);
/* Gives the lock up: closes fd (nothing when fd < 0). */
void datadir_lock_release(int fd);

/* --- data files --------------------------------------------------------- */

/* The name of data file id, "%06u.kvd", into buf: 0 or -ENAMETOOLONG. */
int datadir_file_name(char *buf, size_t len, uint32_t id);
/*
 * Whether name (one path component) is one of vLLM's temporary names,
 * "<block>.bin_<digits>.tmp" or ".o_direct_probe_<digits>.tmp": the
 * daemon removes stale ones, and a rebuild keeps a file whose only name
 * is one in /lost+found instead.
 */
int datadir_is_engine_tmp(const char *name);
/*
 * The id of a directory entry named like a data file: starts with a digit,
 * then an unsigned number and ".kvd" (as sscanf "%u.kvd"), and nothing
 * after. 0, or -EINVAL for any other name. Callers add their own limits on
 * the id.
 */
int datadir_parse_name(const char *name, uint32_t *id);
/* Called with each entry named like a data file; 0 or -errno (stops). */
typedef int (*datadir_each_fn)(void *arg, int dirfd, const char *name,
			       uint32_t id);
/*
 * Calls fn for each entry of the data directory open at dfd (any open
 * mode, O_PATH too) that datadir_parse_name() accepts, in directory order,
 * with the entry's own name (which need not be the canonical
 * datadir_file_name(), e.g. "1.kvd") and a descriptor of the directory for
 * openat(2). Returns 0, the first negative value fn returned, or -errno.
 */
int datadir_each_at(int dfd, datadir_each_fn fn, void *arg);
/*
 * The ids of the entries of the data directory open at dfd (any open mode,
 * O_PATH too) that datadir_parse_name() accepts, whatever their file type,
 * sorted ascending, into *ids (malloc'd, the caller frees; NULL when *n is
 * 0). -errno, with nothing allocated, on failure. Only ids: a caller that
 * must open exactly the entries found uses datadir_each_at() and their
 * names ("1.kvd" is id 1 but not named datadir_file_name(1)).
 */
int datadir_list_at(int dfd, uint32_t **ids, size_t *n);
/* The same for DATADIR/data; none (0) when it does not exist. */
int datadir_list(const char *datadir, uint32_t **ids, size_t *n);

/* What the data files take. */
struct datadir_usage {
	uint64_t nfiles;   /* regular files named like data files */
	uint64_t physical; /* st_blocks * 512: punched holes do not count */
	uint64_t apparent; /* st_size */
};
/*
 * Measures the data files in the data directory open at dfd: entries that
 * datadir_parse_name() accepts and that are regular files (symbolic links
 * are not followed). 0 or -errno.
 */
int datadir_usage_at(int dfd, struct datadir_usage *u);
/* The same for DATADIR/data; all 0 when it does not exist. */
int datadir_usage(const char *datadir, struct datadir_usage *u);

#endif
