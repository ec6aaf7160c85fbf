/* SPDX-License-Identifier: MIT */
/*
 * The index's connection: opening and closing the SQLite database (WAL
 * mode, synchronous=NORMAL, a 64 MiB page cache, retries of a busy
 * database every 250 us for 5 s), the one mutex that
 * serialises its use, the mapping of SQLite result codes to -errno, the
 * statement and transaction helpers the other files share (index_int.h),
 * the WAL checkpointer thread, idx_sync() and idx_set_durable(). It does
 * not know the tables: the layout and its versions are in schema.c, the
 * namespace, extended attributes and records in ns.c, xattr.c and
 * records.c.
 *
 * The index is not a cache and knows nothing of open files: an inode whose
 * last name goes stays as an orphan (nlink 0) until idx_release_inode()
 * deletes it.
 *
 * Threads: any thread may call any function; idx->lock serialises them.
 * Every mutating call is one BEGIN IMMEDIATE ... COMMIT transaction that is
 * rolled back on any error, or, while batching (idx_set_batch()), one
 * savepoint of a write transaction left open for many calls and committed
 * by idx_commit(); reads share a read transaction left open between calls
 * (idx_lock_read()), or run in the batch. Statements are prepared once
 * (persistent) in idx_open() and reset after every use, so no statement is
 * left active between calls. The checkpointer thread has a connection of
 * its own.
 */
#include "index_int.h"

#include <sys/stat.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define IDX_BUSY_TIMEOUT_MS 5000
/*
 * WAL pages added since the last checkpoint after which the checkpointer
 * copies the log back. Counted from that checkpoint, not from the log's
 * start: a log that is not starting over (readers keep it) stays past
 * any size, and then every commit woke a checkpoint and its two fsyncs
 * (394 in 0.6 s of 2 MiB stores on the local disk, 0.6x plain's rate).
 */
#define IDX_CK_FRAMES 1000
/*
 * WAL pages after which the checkpointer makes the log start over, even
 * though that blocks writers (see idx_checkpointer): 256 MiB.
 */
#define IDX_CK_MAX 65536
/*
 * Size the WAL file is cut back to once it starts over (bytes): none, so
 * that new frames are appended, never written over old ones. A frame is
 * 24 bytes more than a page, so writing over an old WAL whose pages the
 * kernel evicted reads them back from disk first, under the index lock
 * (measured: 2 MiB stores at half speed after a page-cache drop).
 */
#define IDX_WAL_LIMIT "0"

const char *const idx_txn_sql[IDX_NSTMT] = {
	[SID_BEGIN] = "BEGIN",
	[SID_BEGIN_WRITE] = "BEGIN IMMEDIATE",
	[SID_COMMIT] = "COMMIT",
	[SID_ROLLBACK] = "ROLLBACK",
	[SID_SAVEPOINT] = "SAVEPOINT op",
	[SID_RELEASE] = "RELEASE op",
	[SID_ROLLBACK_TO] = "ROLLBACK TO op",
};

/* Every file's statements; each id has its text in exactly one of them. */
static const char *const *const idx_sql_tables[] = {
	idx_txn_sql, idx_ns_sql, idx_path_sql, idx_xattr_sql, idx_rec_sql,
};

static int idx_begin(struct idx *idx, int write)
{
	return IDX_RUN(idx, idx->st[write ? SID_BEGIN_WRITE : SID_BEGIN]);
}

static void idx_mutex_lock(struct idx *idx)
{
	int rc = pthread_mutex_lock(&idx->lock);

	assert(rc == 0);
	(void)rc;
}

/*
 * Ends the open transaction: commits when rc >= 0 and returns rc (or the
 * commit's error), rolls back otherwise and returns rc.
 */
static int idx_end(struct idx *idx, int rc)
{
	if (rc >= 0) {
		int crc = IDX_RUN(idx, idx->st[SID_COMMIT]);

		if (crc == 0)
			return rc;
		rc = crc;
	}
	/* Some errors (IOERR, FULL, NOMEM) have rolled back already. */
	if (!sqlite3_get_autocommit(idx->db))
		IDX_RUN(idx, idx->st[SID_ROLLBACK]);
	return rc;
}

/* Ends the read transaction a reader left open, if there is one. */
static void idx_end_read(struct idx *idx)
{
	if (!idx->rd_open)
		return;
	idx->rd_open = 0;
	/* An error may have rolled it back already. */
	if (!sqlite3_get_autocommit(idx->db))
		idx_end(idx, 0);
}

void idx_lock(struct idx *idx)
{
	idx_mutex_lock(idx);
	idx_end_read(idx);
}

/*
 * Why a read transaction may stay open: beginning and ending one cost a
 * lookup of an indexed name a third of its daemon time here (two fcntl
 * locks on the -shm file, an fstat), and a snapshot left open is never
 * stale, because this connection makes every change to the index
 * (kvfs.lock keeps other processes out; the checkpointer's connection only
 * copies pages) and idx_lock() ends it before any change. It does not hold
 * the log back: its snapshot is the newest, so a PASSIVE checkpoint copies
 * everything. The checkpointer ends an idle one each tick and before a
 * RESTART, which waits for every reader.
 */
void idx_lock_read(struct idx *idx)
{
	idx_mutex_lock(idx);
	if (idx->rd_open && sqlite3_get_autocommit(idx->db))
		idx->rd_open = 0; /* an error rolled it back */
	if (!idx->rd_open && !idx->wr_open && idx->rd_linger &&
	    idx_begin(idx, 0) == 0)
		idx->rd_open = 1;
}

void idx_unlock(struct idx *idx)
{
	int rc = pthread_mutex_unlock(&idx->lock);

	assert(rc == 0);
	(void)rc;
}

/*
 * The busy handler of the main connection: retries every 250 us for up to
 * IDX_BUSY_TIMEOUT_MS. SQLite's own (busy_timeout) sleeps 50 and 100 ms at
 * a time after its first few tries, which a checkpoint holding the writer
 * lock for a few ms turned into 50-100 ms stalls of requests.
 */
static int idx_busy(void *arg, int tries)
{
	(void)arg;
	if (tries >= IDX_BUSY_TIMEOUT_MS * 4)
		return 0;
	usleep(250);
	return 1;
}

/* Refines an SQLite I/O or open failure by the errno behind it. */
static int idx_os_errno(int sys, int dflt)
{
	switch (sys) {
	case EROFS:
		return -EROFS;
	case EACCES:
	case EPERM:
		return -EACCES;
	case ENOSPC:
	case EDQUOT:
		return -ENOSPC;
	default:
		return dflt;
	}
}

/*
 * Why a write failed when SQLite does not say (it keeps no errno for a failed
 * COMMIT): the database or its WAL is no longer writable, as after a
 * read-only remount (-EROFS) or chattr +i (-EACCES). 0 when both are.
 */
static int idx_unwritable_errno(const char *path)
{
	char wal[PATH_MAX];

	if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS))
		return idx_os_errno(errno, 0);
	if (snprintf(wal, sizeof(wal), "%s-wal", path) < (int)sizeof(wal) &&
	    faccessat(AT_FDCWD, wal, W_OK, AT_EACCESS) && errno != ENOENT)
		return idx_os_errno(errno, 0);
	return 0;
}

/* SQLITE_IOERR (rc, extended) as -errno, by the errno behind it if any. */
static int idx_ioerr_errno(struct idx *idx, int rc, int sys)
{
	int err;

	if (rc == SQLITE_IOERR_NOMEM)
		err = -ENOMEM;
	else if (rc == SQLITE_IOERR_SHORT_READ)
		err = -EIO;
	else if (sys)
		err = idx_os_errno(sys, -EIO);
	else
		err = idx_unwritable_errno(idx->path);
	return err ? err : -EIO;
}

/*
 * The one place where SQLite result codes become -errno (see index.h), logged
 * with sqlite3_errmsg(). Must run before any other call on idx->db, which
 * would replace the message. While idx_open() checks the file, NOTADB means
 * "not a kvfs database" (-EMEDIUMTYPE); later it is corruption (-EIO).
 */
int idx_errno(struct idx *idx, int rc, const char *caller)
{
	int sys = sqlite3_system_errno(idx->db);
	const char *msg = sqlite3_errmsg(idx->db);
	int err;

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		err = -EBUSY;
		break;
	case SQLITE_NOMEM:
		err = -ENOMEM;
		break;
	case SQLITE_FULL:
		err = -ENOSPC;
		break;
	case SQLITE_READONLY:
		err = -EROFS;
		break;
	case SQLITE_PERM:
		err = -EACCES;
		break;
	case SQLITE_CANTOPEN:
		err = sys == ENOENT ? -ENOENT : idx_os_errno(sys, -EACCES);
		break;
	case SQLITE_NOTADB:
		err = idx->opening ? -EMEDIUMTYPE : -EIO;
		break;
	case SQLITE_IOERR:
		err = idx_ioerr_errno(idx, rc, sys);
		break;
	default:
		err = -EIO;
		break;
	}
	if (err == -EMEDIUMTYPE)
		log_at(LOG_LVL_ERR, "%s: %s: not a kvfs database (%s)", caller,
		       idx->path, msg);
	else if (err == -EIO)
		log_at(LOG_LVL_ERR, "%s: %s: %s (SQLite error %d)", caller,
		       idx->path, msg, rc);
	else
		log_at(LOG_LVL_WARN, "%s: %s: %s: %s", caller, idx->path,
		       strerror(-err), msg);
	return err;
}

/*
 * Binding can fail only on a bad index, a bad type or an oversized value:
 * programming bugs, since every length is checked before we get here.
 */
void idx_bind_i64(sqlite3_stmt *st, int i, int64_t v)
{
	int rc = sqlite3_bind_int64(st, i, v);

	assert(rc == SQLITE_OK);
	(void)rc;
}

void idx_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	int rc = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC)
		   : sqlite3_bind_null(st, i);

	assert(rc == SQLITE_OK);
	(void)rc;
}

void idx_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len)
{
	int rc = len ? sqlite3_bind_blob(st, i, p, (int)len, SQLITE_STATIC)
		     : sqlite3_bind_zeroblob(st, i, 0);

	assert(rc == SQLITE_OK);
	(void)rc;
}

void idx_bind_args(sqlite3_stmt *st, const int64_t *args, int n)
{
	for (int i = 0; i < n; i++)
		idx_bind_i64(st, i + 1, args[i]);
}

void idx_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

int idx_step(struct idx *idx, sqlite3_stmt *st, const char *caller)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return idx_errno(idx, rc, caller);
}

int idx_run(struct idx *idx, sqlite3_stmt *st, const char *caller)
{
	int rc = idx_step(idx, st, caller);

	idx_done(st);
	return rc < 0 ? rc : 0;
}

int idx_run_sid(struct idx *idx, int sid, const int64_t *args, int nargs,
		const char *caller)
{
	sqlite3_stmt *st = idx->st[sid];

	idx_bind_args(st, args, nargs);
	return idx_run(idx, st, caller);
}

int idx_row(struct idx *idx, int sid, const int64_t *args, int nargs,
	    int64_t *cols, int ncols, const char *caller)
{
	sqlite3_stmt *st = idx->st[sid];
	int rc;

	idx_bind_args(st, args, nargs);
	rc = idx_step(idx, st, caller);
	if (rc == 1 && ncols > 0 && sqlite3_column_type(st, 0) == SQLITE_NULL)
		rc = 0;
	for (int i = 0; rc == 1 && i < ncols; i++)
		cols[i] = sqlite3_column_int64(st, i);
	idx_done(st);
	return rc;
}

int idx_get(struct idx *idx, int sid, const int64_t *args, int nargs,
	    int64_t *cols, int ncols, const char *caller)
{
	int rc;

	idx_lock_read(idx);
	rc = idx_row(idx, sid, args, nargs, cols, ncols, caller);
	idx_unlock(idx);
	return rc;
}

/*
 * The open batch is gone without a commit (a failed COMMIT, or an error
 * that made SQLite roll it back): its changes are lost together, as a
 * crash would lose them, and the index is as it was at its last commit.
 */
static void idx_batch_lost(struct idx *idx, int rc)
{
	log_err("%s: %u changes made since the index's last commit are lost "
		"(%s): the index is as it was at that commit, as after a "
		"crash",
		idx->path, idx->wr_ops, strerror(rc < 0 ? -rc : EIO));
	idx->lost[idx->lost_batches % IDX_LOST_KEPT] = idx->batch_no;
	idx->lost_batches++;
	idx->lost_changes += idx->wr_ops;
	idx->ended = idx->batch_no++;
	idx->wr_open = 0;
	idx->wr_ops = 0;
}

/* Commits the open batch (idx->lock held). 0 or -errno: then it is lost. */
static int idx_commit_locked(struct idx *idx)
{
	int rc;

	if (!idx->wr_open)
		return 0;
	if (sqlite3_get_autocommit(idx->db)) {
		idx_batch_lost(idx, -EIO);
		return -EIO;
	}
	rc = IDX_RUN(idx, idx->st[SID_COMMIT]);
	if (rc < 0) {
		if (!sqlite3_get_autocommit(idx->db))
			IDX_RUN(idx, idx->st[SID_ROLLBACK]);
		idx_batch_lost(idx, rc);
		return rc;
	}
	idx->commits++;
	idx->ended = idx->batch_no++;
	idx->wr_open = 0;
	idx->wr_ops = 0;
	return 0;
}

/* A change joins the batch, in a savepoint of its own (idx->lock held). */
static int idx_batch_enter(struct idx *idx)
{
	int rc;

	if (idx->wr_open && sqlite3_get_autocommit(idx->db))
		idx_batch_lost(idx, -EIO);
	if (!idx->wr_open) {
		rc = idx_begin(idx, 1);
		if (rc)
			return rc;
		idx->wr_open = 1;
	}
	rc = IDX_RUN(idx, idx->st[SID_SAVEPOINT]);
	if (rc == 0)
		idx->op = IDX_OP_BATCH;
	else if (sqlite3_get_autocommit(idx->db))
		idx_batch_lost(idx, rc);
	return rc;
}

/* Ends a change's savepoint: kept when rc >= 0, undone otherwise. */
static int idx_batch_leave(struct idx *idx, int rc)
{
	if (rc >= 0) {
		int r = IDX_RUN(idx, idx->st[SID_RELEASE]);

		if (r < 0)
			rc = r;
	}
	if (sqlite3_get_autocommit(idx->db)) {
		/* The error rolled back the whole batch, this change too. */
		idx_batch_lost(idx, rc < 0 ? rc : -EIO);
		return rc < 0 ? rc : -EIO;
	}
	if (rc < 0) {
		IDX_RUN(idx, idx->st[SID_ROLLBACK_TO]);
		IDX_RUN(idx, idx->st[SID_RELEASE]);
		return rc;
	}
	if (++idx->wr_ops >= idx->batch_max && !idx->hold) {
		int crc = idx_commit_locked(idx);

		if (crc < 0)
			return crc;
	}
	return rc;
}

int idx_enter(struct idx *idx, int write)
{
	int rc;

	if (write) {
		idx_lock(idx);
		idx->op = IDX_OP_WRITE;
		if (idx->batch_max) {
			rc = idx_batch_enter(idx);
			if (rc)
				idx_unlock(idx);
			return rc;
		}
	} else {
		idx_lock_read(idx);
		if (idx->rd_open || idx->wr_open) {
			idx->op = IDX_OP_SHARED;
			return 0;
		}
		idx->op = IDX_OP_READ;
	}
	rc = idx_begin(idx, write);
	if (rc)
		idx_unlock(idx);
	return rc;
}

int idx_leave(struct idx *idx, int rc)
{
	switch (idx->op) {
	case IDX_OP_BATCH:
		rc = idx_batch_leave(idx, rc);
		break;
	case IDX_OP_SHARED:
		/* A read in the transaction left open: it stays. */
		if (idx->wr_open && sqlite3_get_autocommit(idx->db))
			idx_batch_lost(idx, rc < 0 ? rc : -EIO);
		else if (rc < 0 && idx->rd_open)
			idx_end_read(idx);
		break;
	case IDX_OP_WRITE:
		rc = idx_end(idx, rc);
		if (rc >= 0)
			idx->commits++;
		break;
	default:
		rc = idx_end(idx, rc);
		break;
	}
	idx->op = IDX_OP_READ;
	idx_unlock(idx);
	return rc;
}

int idx_set_batch(struct idx *idx, unsigned max)
{
	int rc = 0;

	idx_lock(idx);
	if (max == 0)
		rc = idx_commit_locked(idx);
	/*
	 * A savepoint keeps the pages it changes in a statement journal: in
	 * memory, not a temporary file (a pwrite(2) of each page before its
	 * first change in every call: a tenth of a store's daemon time).
	 */
	else
		rc = idx_exec(idx, "PRAGMA temp_store = MEMORY");
	if (rc == 0)
		idx->batch_max = max;
	idx_unlock(idx);
	return rc;
}

int idx_commit_files(struct idx *idx, int force, const uint32_t *files,
		     size_t n, unsigned char *unused)
{
	int rc = 0;

	idx_lock(idx);
	if (force || !idx->hold)
		rc = idx_commit_locked(idx);
	for (size_t i = 0; i < n; i++) {
		int64_t refs = 1;

		unused[i] = 2;
		if (!idx->wr_open && idx_row(idx, SID_REFS, IDX_ARGS(files[i]),
					     &refs, 1, __func__) == 1)
			unused[i] = refs == 0;
	}
	idx_unlock(idx);
	return rc;
}

int idx_commit(struct idx *idx, int force)
{
	return idx_commit_files(idx, force, NULL, 0, NULL);
}

int idx_batching(struct idx *idx)
{
	int on;

	idx_mutex_lock(idx);
	on = idx->batch_max != 0;
	idx_unlock(idx);
	return on;
}

void idx_hold(struct idx *idx, int on)
{
	idx_mutex_lock(idx);
	idx->hold = on;
	idx_unlock(idx);
}

uint64_t idx_batch_seq(struct idx *idx)
{
	uint64_t seq;

	idx_mutex_lock(idx);
	seq = idx->wr_open ? idx->batch_no : 0;
	idx_unlock(idx);
	return seq;
}

int idx_batch_done(struct idx *idx, uint64_t seq)
{
	int rc = 1;

	idx_mutex_lock(idx);
	if (seq > idx->ended)
		rc = 0;
	for (uint64_t i = 0; rc && i < idx->lost_batches && i < IDX_LOST_KEPT;
	     i++)
		if (idx->lost[i] == seq)
			rc = -1;
	idx_unlock(idx);
	return rc;
}

void idx_get_txn_stats(struct idx *idx, struct idx_txn_stats *out)
{
	idx_mutex_lock(idx);
	out->commits = idx->commits;
	out->lost_batches = idx->lost_batches;
	out->lost_changes = idx->lost_changes;
	out->open_changes = idx->wr_open ? idx->wr_ops : 0;
	idx_unlock(idx);
}

int64_t idx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int idx_query_int(struct idx *idx, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(idx->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return IDX_ERR(idx, rc);
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		*out = sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == 0) {
		log_err("%s: %s: no result", idx->path, sql);
		rc = -EIO;
	}
	sqlite3_finalize(st);
	return rc;
}

int idx_exec(struct idx *idx, const char *sql)
{
	int rc = sqlite3_exec(idx->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : IDX_ERR(idx, rc);
}

int idx_set_pragmas(struct idx *idx)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(idx->db, "PRAGMA journal_mode = WAL", -1, &st,
				NULL);
	if (rc != SQLITE_OK)
		return IDX_ERR(idx, rc);
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		const char *mode = (const char *)sqlite3_column_text(st, 0);

		rc = 0;
		if (!mode || strcmp(mode, "wal")) {
			log_err("%s: cannot use WAL mode (journal_mode is %s)",
				idx->path, mode ? mode : "unknown");
			rc = -EIO;
		}
	} else if (rc == 0) {
		rc = -EIO;
	}
	sqlite3_finalize(st);
	if (rc)
		return rc;
	/*
	 * Debian builds SQLite with secure_delete on: every deleted cell and
	 * freed page is overwritten with zeros. The index holds names and
	 * numbers that the data files and ls(1) show anyway.
	 */
	rc = idx_exec(idx, "PRAGMA secure_delete = OFF");
	if (rc)
		return rc;
	return idx_exec(idx, "PRAGMA synchronous = NORMAL");
}

/* The text of statement sid: the one entry it has in idx_sql_tables. */
static const char *idx_sql_of(int sid)
{
	const char *sql = NULL;
	size_t ntab = sizeof(idx_sql_tables) / sizeof(idx_sql_tables[0]);

	for (size_t t = 0; t < ntab; t++) {
		if (idx_sql_tables[t][sid]) {
			assert(!sql);
			sql = idx_sql_tables[t][sid];
		}
	}
	assert(sql);
	return sql;
}

static int idx_prepare_all(struct idx *idx)
{
	for (int i = 0; i < IDX_NSTMT; i++) {
		int rc = sqlite3_prepare_v3(idx->db, idx_sql_of(i), -1,
					    SQLITE_PREPARE_PERSISTENT,
					    &idx->st[i], NULL);

		if (rc != SQLITE_OK)
			return IDX_ERR(idx, rc);
	}
	return 0;
}

static void idx_finalize_all(struct idx *idx)
{
	for (int i = 0; i < IDX_NSTMT; i++) {
		sqlite3_finalize(idx->st[i]);
		idx->st[i] = NULL;
	}
}

/*
 * Makes the file at idx->path a kvfs database of the current format: a new
 * one gets the schema, an older one is upgraded (schema.c).
 */
static int idx_format_db(struct idx *idx, uint32_t root_mode, uint32_t root_uid,
			 uint32_t root_gid)
{
	int64_t version;
	int rc;

	idx->opening = 1;
	do {
		rc = idx_check_format(idx, &version);
		if (rc)
			break;
		if (version == 0) {
			rc = idx_set_pragmas(idx);
			if (!rc)
				rc = idx_create_schema(idx, root_mode, root_uid,
						       root_gid);
		} else if (version < IDX_FORMAT_VERSION) {
			rc = idx_upgrade_schema(idx);
		}
	} while (rc == 1);
	idx->opening = 0;
	return rc;
}

/* Opens, checks and (when new) initialises the database; idx->lock held. */
static int idx_open_db(struct idx *idx, uint32_t root_mode, uint32_t root_uid,
		       uint32_t root_gid)
{
	struct idx_attr root;
	int rc;

	rc = sqlite3_open_v2(idx->path, &idx->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX,
			     idx_vfs_name());
	if (!idx->db)
		return -ENOMEM;
	if (rc != SQLITE_OK)
		return IDX_ERR(idx, rc);
	sqlite3_extended_result_codes(idx->db, 1);
	/* SQLite falls back to read-only when it cannot open for writing. */
	if (sqlite3_db_readonly(idx->db, "main") == 1) {
		rc = idx_unwritable_errno(idx->path);
		if (rc != -EROFS)
			rc = -EACCES;
		log_err("%s: cannot open the index for writing: %s", idx->path,
			strerror(-rc));
		return rc;
	}
	sqlite3_busy_handler(idx->db, idx_busy, NULL);

	rc = idx_format_db(idx, root_mode, root_uid, root_gid);
	if (rc)
		return rc;
	rc = idx_set_pragmas(idx);
	if (!rc)
		rc = idx_prepare_all(idx);
	if (!rc)
		rc = idx_inode(idx, KV_ROOT_INO, &root);
	if (rc == 0 || (rc == 1 && !S_ISDIR(root.mode))) {
		log_err("%s: the index has no root directory", idx->path);
		rc = -EIO;
	}
	return rc < 0 ? rc : 0;
}

int idx_open(struct idx **out, const char *path, uint32_t root_mode,
	     uint32_t root_uid, uint32_t root_gid)
{
	struct idx *idx;
	int rc;

	*out = NULL;
	idx = calloc(1, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	idx->path = strdup(path);
	if (!idx->path) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = pthread_mutex_init(&idx->lock, NULL);
	if (rc) {
		rc = -rc;
		goto out_free_path;
	}
	pthread_mutex_init(&idx->ck_lock, NULL);
	pthread_mutex_init(&idx->ck_run, NULL);
	pthread_cond_init(&idx->ck_cond, NULL);
	idx->batch_no = 1;
	idx_lock(idx);
	rc = idx_open_db(idx, root_mode, root_uid, root_gid);
	idx_unlock(idx);
	if (rc)
		goto out_close_db;
	*out = idx;
	return 0;

out_close_db:
	idx_finalize_all(idx);
	sqlite3_close(idx->db);
	pthread_mutex_destroy(&idx->lock);
	pthread_mutex_destroy(&idx->ck_lock);
	pthread_mutex_destroy(&idx->ck_run);
	pthread_cond_destroy(&idx->ck_cond);
out_free_path:
	free(idx->path);
out_free:
	free(idx);
	return rc;
}

/*
 * After each commit (main connection, idx->lock held): wake the
 * checkpointer once the log has grown IDX_CK_FRAMES pages since its last
 * checkpoint.
 */
static int idx_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct idx *idx = arg;

	pthread_mutex_lock(&idx->ck_lock);
	if (frames < idx->ck_base)
		idx->ck_base = 0; /* the log started over */
	idx->ck_frames = frames;
	if (frames - idx->ck_base >= IDX_CK_FRAMES)
		pthread_cond_signal(&idx->ck_cond);
	pthread_mutex_unlock(&idx->ck_lock);
	return SQLITE_OK;
}

/*
 * Ends the read transaction a reader left open unless the index is in use:
 * it is not kept open for more than two ticks (1 s each) once reads stop.
 */
static void idx_end_idle_read(struct idx *idx)
{
	if (pthread_mutex_trylock(&idx->lock) != 0)
		return;
	idx_end_read(idx);
	idx_unlock(idx);
}

/*
 * Copies the WAL back into the database from a connection of its own, so
 * that the fsyncs of a checkpoint never run under idx->lock: writers keep
 * committing meanwhile (a PASSIVE checkpoint takes no writer lock). Runs
 * when the log is long, and once a second while it is not empty.
 */
static void *idx_checkpointer(void *arg)
{
	struct idx *idx = arg;
	sqlite3 *db = NULL;
	struct timespec ts;
	int rc;

	rc = sqlite3_open_v2(idx->path, &db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			     idx_vfs_name());
	if (rc != SQLITE_OK) {
		log_err("%s: checkpointer cannot open the index: %s", idx->path,
			sqlite3_errstr(rc));
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 5000);
	/*
	 * A connection learns that the database is in WAL mode only when it
	 * first reads it; until then a checkpoint does nothing and reports
	 * success.
	 */
	rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", NULL, NULL,
			  NULL);
	if (rc != SQLITE_OK)
		log_warn("%s: checkpointer cannot read the index: %s",
			 idx->path, sqlite3_errmsg(db));
	pthread_mutex_lock(&idx->ck_lock);
	while (!idx->ck_stop) {
		int nlog = 0, ndone = 0, upto;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (idx->ck_frames - idx->ck_base < IDX_CK_FRAMES)
			pthread_cond_timedwait(&idx->ck_cond, &idx->ck_lock,
					       &ts);
		if (idx->ck_stop)
			continue;
		if (idx->ck_frames == idx->ck_base) {
			/* Nothing committed since the last checkpoint. */
			pthread_mutex_unlock(&idx->ck_lock);
			idx_end_idle_read(idx);
			pthread_mutex_lock(&idx->ck_lock);
			continue;
		}
		upto = idx->ck_frames;
		pthread_mutex_unlock(&idx->ck_lock);
		/*
		 * PASSIVE never blocks writers. Under a steady stream of
		 * commits it never quite catches up, and the log starts over
		 * only in a pause, so it grows (to 80 MB under 4 GiB of 2 MiB
		 * stores here). RESTART makes it start over but blocks the
		 * writers while it waits and copies: 50-90 ms stalls of
		 * CREATE and RENAME, even right after a PASSIVE caught up
		 * (p99 of a 2 MiB store 42-60 ms with it, 13-15 ms without).
		 * So only past IDX_CK_MAX, to bound the log.
		 */
		pthread_mutex_lock(&idx->ck_run);
		rc = sqlite3_wal_checkpoint_v2(
			db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &ndone);
		if (rc == SQLITE_OK && nlog >= IDX_CK_MAX) {
			/*
			 * RESTART waits for every reader and writer: end
			 * ours (the read left open, the batch).
			 */
			idx_lock(idx);
			if (!idx->hold)
				idx_commit_locked(idx);
			idx_unlock(idx);
			rc = sqlite3_wal_checkpoint_v2(
				db, NULL, SQLITE_CHECKPOINT_RESTART, &nlog,
				&ndone);
		}
		pthread_mutex_unlock(&idx->ck_run);
		pthread_mutex_lock(&idx->ck_lock);
		/* Commits during it are counted, from what it was for. */
		idx->ck_base = upto;
		pthread_mutex_unlock(&idx->ck_lock);
		if (rc == SQLITE_BUSY) {
			/* A reader or the writer held on: next tick. */
		} else if (rc != SQLITE_OK) {
			log_warn("%s: checkpoint: %s", idx->path,
				 sqlite3_errmsg(db));
		} else if (nlog < 0) {
			log_warn("%s: checkpoint found no write-ahead log",
				 idx->path);
		}
		pthread_mutex_lock(&idx->ck_lock);
	}
	pthread_mutex_unlock(&idx->ck_lock);
	sqlite3_close(db);
	return NULL;
}

int idx_start_checkpointer(struct idx *idx)
{
	sigset_t all, old;
	int rc;

	if (idx->ck_running)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&idx->ck_thread, NULL, idx_checkpointer, idx);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	idx->ck_running = 1;
	idx_lock(idx);
	idx_exec(idx, "PRAGMA journal_size_limit = " IDX_WAL_LIMIT);
	sqlite3_wal_autocheckpoint(idx->db, 0);
	sqlite3_wal_hook(idx->db, idx_wal_hook, idx);
	idx->rd_linger = 1;
	idx_unlock(idx);
	return 0;
}

static void idx_stop_checkpointer(struct idx *idx)
{
	if (!idx->ck_running)
		return;
	idx_lock(idx);
	idx->rd_linger = 0;
	idx_unlock(idx);
	pthread_mutex_lock(&idx->ck_lock);
	idx->ck_stop = 1;
	pthread_cond_signal(&idx->ck_cond);
	pthread_mutex_unlock(&idx->ck_lock);
	pthread_join(idx->ck_thread, NULL);
	idx->ck_running = 0;
}

void idx_close(struct idx *idx)
{
	int rc;

	if (!idx)
		return;
	idx_stop_checkpointer(idx);
	idx_lock(idx);
	idx_commit_locked(idx);
	rc = sqlite3_wal_checkpoint_v2(idx->db, NULL,
				       SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	if (rc != SQLITE_OK)
		IDX_ERR(idx, rc);
	idx_finalize_all(idx);
	rc = sqlite3_close(idx->db);
	if (rc != SQLITE_OK)
		log_err("%s: close: %s", idx->path, sqlite3_errstr(rc));
	idx_unlock(idx);
	pthread_mutex_destroy(&idx->lock);
	pthread_mutex_destroy(&idx->ck_lock);
	pthread_mutex_destroy(&idx->ck_run);
	pthread_cond_destroy(&idx->ck_cond);
	free(idx->path);
	free(idx);
}

/* One setting of this connection (a PRAGMA), under idx->lock. */
static int idx_exec_locked(struct idx *idx, const char *sql)
{
	int rc;

	idx_lock(idx);
	rc = idx_exec(idx, sql);
	idx_unlock(idx);
	return rc;
}

int idx_set_durable(struct idx *idx, int durable)
{
	return idx_exec_locked(idx, durable ? "PRAGMA synchronous = FULL"
					    : "PRAGMA synchronous = NORMAL");
}

int idx_set_cache(struct idx *idx, unsigned kib)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%u", kib);
	return idx_exec_locked(idx, sql);
}

int idx_set_mmap(struct idx *idx, uint64_t bytes)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "PRAGMA mmap_size = %llu",
		 (unsigned long long)bytes);
	return idx_exec_locked(idx, sql);
}

int idx_sync(struct idx *idx)
{
	int rc;

	pthread_mutex_lock(&idx->ck_run);
	idx_lock(idx);
	/*
	 * The batch first, then a FULL checkpoint, which syncs the WAL,
	 * copies it into the database and syncs that: every change so far
	 * survives a power cut.
	 */
	rc = idx_commit_locked(idx);
	if (rc == 0) {
		rc = sqlite3_wal_checkpoint_v2(
			idx->db, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL);
		if (rc != SQLITE_OK)
			rc = idx_errno(idx, rc, __func__);
	}
	idx_unlock(idx);
	pthread_mutex_unlock(&idx->ck_run);
	return rc;
}
