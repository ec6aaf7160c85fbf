/* SPDX-License-Identifier: MIT */
/*
 * Private to index/: what index.c, schema.c, ns.c, xattr.c and records.c
 * share. Nothing outside index/ includes this file (or sqlite3.h); the
 * contract for callers is index.h.
 *
 * The files split the index by concern:
 *   index.c    the connection: open and close, pragmas, the lock, SQLite
 *              result codes -> -errno, statement helpers, transactions,
 *              the WAL checkpointer thread, idx_sync and idx_set_durable
 *   schema.c   the database layout, creating it, checking a file's format
 *              version and upgrading older versions on open
 *   ns.c       the namespace: inodes, directory entries, link counts
 *   paths.c    the paths of an inode's names, walked up to the root
 *   xattr.c    extended attributes
 *   records.c  where file bytes are (records, extents, CRCs), last use for
 *              eviction, recovery horizons, record queries for recovery/gc
 *   vfs.c      the SQLite VFS every connection uses: the default one, with
 *              read-around of database pages missing from the page cache
 *
 * Statements: every SQL statement that runs more than once has an id (enum
 * idx_sid), is prepared once by idx_open() with SQLITE_PREPARE_PERSISTENT
 * and lives in idx->st[]. Its text is in the table of the file that uses
 * it (idx_*_sql[], indexed by the id); idx_open() prepares the one entry
 * each id has across those tables.
 *
 * Locking: idx->lock serialises every use of idx->db and idx->st[]. Every
 * helper declared here that takes a struct idx must be called with
 * idx->lock held, except idx_lock(), idx_lock_read(), idx_enter() and
 * idx_get(), which take it (idx_get() drops it again, idx_leave() drops
 * what idx_enter() took).
 * A statement is reset (idx_done()) before the lock is released, so none
 * stays active between calls. The checkpointer's fields have their own
 * locks (struct idx).
 *
 * Errors: helpers return 0 (or 1 for "a row", or a count) and -errno, with
 * SQLite's codes mapped by idx_errno() as index.h says.
 */
#ifndef KVFS_INDEX_INT_H
#define KVFS_INDEX_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "index.h"

/* The VFS of vfs.c: the default one, reading around missing pages. */
#define IDX_VFS_NAME "kvfs"
/* Registers it once; its name for sqlite3_open_v2(), NULL: use the default. */
const char *idx_vfs_name(void);

enum idx_sid {
	/* index.c: transactions */
	SID_BEGIN,
	SID_BEGIN_WRITE,
	SID_COMMIT,
	SID_ROLLBACK,
	SID_SAVEPOINT,
	SID_RELEASE,
	SID_ROLLBACK_TO,
	/* ns.c */
	SID_GETATTR,
	SID_LOOKUP,
	SID_READDIR,
	SID_READDIR_NAMES,
	SID_INSERT_INODE,
	SID_INSERT_INODE_AT,
	SID_INSERT_DENTRY,
	SID_TOUCH_DIR,
	SID_SET_NLINK,
	SID_SET_CTIME,
	SID_SETATTR,
	SID_READLINK,
	SID_DELETE_DENTRY,
	SID_MOVE_DENTRY,
	SID_SET_DENTRY_INO,
	SID_HAS_CHILD,
	SID_PARENT_OF,
	SID_NAME_OF,
	SID_NAMES_OF,
	SID_DELETE_INODE,
	SID_DELETE_XATTRS,
	SID_ORPHANS,
	SID_DELETE_ORPHAN_XATTRS,
	SID_DELETE_ORPHANS,
	SID_PENDING_NAMES,
	SID_DELETE_PENDING_NAMES,
	SID_UNLINK_PENDING,
	SID_STATFS,
	SID_COUNT,
	/* xattr.c */
	SID_XATTR_GET,
	SID_XATTR_SET,
	SID_XATTR_LIST,
	SID_XATTR_DELETE,
	/* records.c */
	SID_SET_EXTENT,
	SID_GET_CRCS,
	SID_REFS,
	SID_TOUCH,
	SID_TOUCH_ATIME,
	SID_LRU,
	SID_TMP_NAMES,
	SID_EXTENT_AT,
	SID_RECORDS_PAST,
	SID_NEXT_EXTENT,
	SID_FILE_RECORDS,
	SID_MOVE_RECORD,
	SID_HORIZONS_GET,
	SID_HORIZONS_PUT,
	SID_HORIZONS_DROP,
	IDX_NSTMT
};

/* The statement texts of each file, indexed by enum idx_sid (sparse). */
extern const char *const idx_txn_sql[IDX_NSTMT];
extern const char *const idx_ns_sql[IDX_NSTMT];
extern const char *const idx_path_sql[IDX_NSTMT];
extern const char *const idx_xattr_sql[IDX_NSTMT];
extern const char *const idx_rec_sql[IDX_NSTMT];

/* Columns 0..IDX_ATTR_NCOLS-1 of every statement that yields attributes. */
/*
 * A regular file created and never saved since (see idx_purge_pending).
 * "+file_id": so that SQLite searches inodes_pending, not inodes_file_id
 * (every inode without a record: 0.6 s with 1M blocks).
 */
#define IDX_PENDING                                                            \
	"i.hdr_len = -1 AND (i.mode & 0xF000) = 32768 AND +i.file_id = 0 "
/* The partial index that finds them without reading every inode. */
#define IDX_PENDING_INDEX_SQL                                                  \
	"CREATE INDEX IF NOT EXISTS inodes_pending ON inodes (ino) "           \
	"WHERE hdr_len = -1;"

#define IDX_ATTR_COLS                                                          \
	"i.ino, i.mode, i.uid, i.gid, i.nlink, i.size, i.atime_ns, "           \
	"i.mtime_ns, i.ctime_ns, i.file_id, i.rec_off, i.hdr_len, i.rec_len, " \
	"i.rdev"
#define IDX_ATTR_NCOLS 14

/* Lost batches idx_batch_done() remembers (one is rare: a failed commit). */
#define IDX_LOST_KEPT 16

/* How the call between idx_enter() and idx_leave() runs. */
enum idx_op {
	IDX_OP_READ,   /* a read in a transaction of its own */
	IDX_OP_WRITE,  /* a change in a transaction of its own */
	IDX_OP_SHARED, /* a read in the transaction left open (read or batch) */
	IDX_OP_BATCH,  /* a change in a savepoint of the batch */
};

struct idx {
	/* Serialises every use of db and st[]; the only lock of the index. */
	pthread_mutex_t lock;
	sqlite3 *db;		     /* protected by lock */
	sqlite3_stmt *st[IDX_NSTMT]; /* protected by lock, reset after use */
	int opening; /* protected by lock: idx_open() is checking the file */
	/*
	 * Protected by lock. rd_open: a read transaction is open between
	 * calls, for the next reader (idx_lock_read()); rd_linger: one may be
	 * (set while the checkpointer runs, which ends an idle one).
	 */
	int rd_open;
	int rd_linger;
	/*
	 * Protected by lock. The batch (idx_set_batch()): a write transaction
	 * left open between mutating calls, each of which runs in a savepoint
	 * of it, so that one commit covers many changes. batch_max: the most
	 * changes it holds before a call commits it (0: no batch, each call
	 * commits); wr_open: it is open; wr_ops: the changes in it; hold:
	 * idx_commit(idx, 0) leaves it open (a test hook); op: how the call
	 * between idx_enter() and idx_leave() runs (enum idx_op).
	 */
	unsigned batch_max;
	int wr_open;
	unsigned wr_ops;
	int hold;
	int op;
	/*
	 * Protected by lock. Batches are numbered from 1 in the order they
	 * open: batch_no is the open one's (or the next one's), ended the
	 * last that was committed or lost, lost[] the last IDX_LOST_KEPT lost
	 * ones (for idx_batch_done()).
	 */
	uint64_t batch_no, ended;
	uint64_t lost[IDX_LOST_KEPT];
	/* Protected by lock: counts for idx_get_txn_stats(). */
	uint64_t commits, lost_batches, lost_changes;
	char *path; /* read-only after idx_open(), for log lines */

	/* The checkpointer (idx_start_checkpointer), with its own lock. */
	pthread_mutex_t ck_lock;
	pthread_cond_t ck_cond;
	/*
	 * Held around every checkpoint: SQLite lets one run at a time and
	 * answers SQLITE_BUSY at once, without the busy handler, to a second
	 * one. Taken before idx->lock, never after it.
	 */
	pthread_mutex_t ck_run;
	pthread_t ck_thread;
	int ck_running; /* written before the thread starts / after it ends */
	int ck_stop;	/* protected by ck_lock */
	/*
	 * WAL frames at the last commit, and those the last checkpoint found
	 * (0 once the log starts over); protected by ck_lock.
	 */
	int ck_frames, ck_base;
};

/* ---- index.c: the lock, errors, statements, transactions ---- */

/* Takes idx->lock and ends a read transaction left open (rd_open). */
void idx_lock(struct idx *idx);
void idx_unlock(struct idx *idx);
/*
 * Takes idx->lock for statements that only read (every call that only
 * reads takes it so): they run in the read transaction left open by the
 * last reader, or in a new one left open for the next (while rd_linger
 * allows it), else each in its own.
 */
void idx_lock_read(struct idx *idx);

/*
 * The one place where SQLite result codes become -errno, logged under the
 * name caller. Must run before any other call on idx->db.
 */
int idx_errno(struct idx *idx, int rc, const char *caller);
#define IDX_ERR(idx, rc) idx_errno((idx), (rc), __func__)

/* Binding helpers; a failed bind is a programming bug (asserted). */
void idx_bind_i64(sqlite3_stmt *st, int i, int64_t v);
/* Borrows s until the statement is reset (idx_done()). NULL binds NULL. */
void idx_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Borrows p; a zero length binds an empty BLOB, not NULL. */
void idx_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len);
/* Binds args[0..n) to ?1..?n. */
void idx_bind_args(sqlite3_stmt *st, const int64_t *args, int n);
/* Resets st and drops its bindings (which may point at callers' memory). */
void idx_done(sqlite3_stmt *st);

/* One step: 1 for a row, 0 when done, -errno on failure. */
int idx_step(struct idx *idx, sqlite3_stmt *st, const char *caller);
#define IDX_STEP(idx, st) idx_step((idx), (st), __func__)
/* Runs a bound statement that returns no rows, then resets it. */
int idx_run(struct idx *idx, sqlite3_stmt *st, const char *caller);
#define IDX_RUN(idx, st) idx_run((idx), (st), __func__)

/*
 * Statement sid with integer arguments: the pattern "bind ?1..?n, step,
 * reset" that most statements follow. IDX_ARGS(a, b, ...) expands to the
 * array and its length.
 */
#define IDX_ARGS(...)                                                          \
	(const int64_t[]){__VA_ARGS__},                                        \
		(int)(sizeof((const int64_t[]){__VA_ARGS__}) /                 \
		      sizeof(int64_t))
/* Runs sid (no rows) with args bound. */
int idx_run_sid(struct idx *idx, int sid, const int64_t *args, int nargs,
		const char *caller);
#define IDX_RUN_SID(idx, sid, ...)                                             \
	idx_run_sid((idx), (sid), IDX_ARGS(__VA_ARGS__), __func__)
/*
 * Steps sid once with args bound and copies its first ncols integer
 * columns into cols: 1 for a row, 0 for none (a row whose first column is
 * NULL, as min() of nothing gives, counts as none), -errno.
 */
int idx_row(struct idx *idx, int sid, const int64_t *args, int nargs,
	    int64_t *cols, int ncols, const char *caller);
/* idx_row() for a public reader: takes and drops idx->lock around it. */
int idx_get(struct idx *idx, int sid, const int64_t *args, int nargs,
	    int64_t *cols, int ncols, const char *caller);

/*
 * Takes idx->lock and opens a transaction (write: BEGIN IMMEDIATE), or,
 * while batching (idx_set_batch()), a savepoint of the open batch for a
 * write and nothing for a read. On failure the lock is dropped again and
 * -errno returned.
 */
int idx_enter(struct idx *idx, int write);
/*
 * Ends what idx_enter() opened (commits or releases the savepoint when rc
 * >= 0, rolls back otherwise) and drops idx->lock. Returns rc or the
 * commit's error.
 */
int idx_leave(struct idx *idx, int rc);

/* Runs sql, which yields no rows, outside the statement table. */
int idx_exec(struct idx *idx, const char *sql);
/* Runs sql, which must yield one integer, into *out. */
int idx_query_int(struct idx *idx, const char *sql, int64_t *out);
/* WAL and its settings; journal_mode must be set outside a transaction. */
int idx_set_pragmas(struct idx *idx);
int64_t idx_now_ns(void);

/* ---- schema.c ---- */

/*
 * Reads what the file at idx->path is: *version 0 for an empty database
 * (a new file), else its format version (1..IDX_FORMAT_VERSION) once it is
 * a kvfs database we can use. -EMEDIUMTYPE when it is not one,
 * -EPROTONOSUPPORT when it is newer than IDX_FORMAT_VERSION.
 */
int idx_check_format(struct idx *idx, int64_t *version);
/*
 * Creates the schema (format IDX_FORMAT_VERSION) and the root directory in
 * one transaction. Returns 1, having done nothing, when another process
 * did so since idx_check_format().
 */
int idx_create_schema(struct idx *idx, uint32_t root_mode, uint32_t root_uid,
		      uint32_t root_gid);
/*
 * Upgrades an older format to IDX_FORMAT_VERSION in one transaction and
 * logs one line saying so (nothing when another process just did it).
 */
int idx_upgrade_schema(struct idx *idx);

/* ---- ns.c: inodes and dentries, for the other files ---- */

/* Inode ino: 1 and *a when it exists, 0 when not, -errno. */
int idx_inode(struct idx *idx, uint64_t ino, struct idx_attr *a);

#endif
