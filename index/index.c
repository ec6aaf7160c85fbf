/* SPDX-License-Identifier: MIT */
/*
 * The namespace index: one SQLite database in WAL mode (synchronous=NORMAL,
 * busy_timeout 5 s) behind one connection and one mutex. This file is the
 * only one that includes sqlite3.h; index.h is the contract. It is not a
 * cache and knows nothing of open files: an inode whose last name goes stays
 * as an orphan (nlink 0) until idx_release_inode() deletes it.
 *
 * Database layout, format version 1 (described in kvfs(5)):
 *
 *   PRAGMA application_id = 0x4b564653 ("KVFS")
 *   PRAGMA user_version   = 1 (IDX_FORMAT_VERSION)
 *
 *   inodes      one row per inode, orphans (nlink 0) included
 *     ino       INTEGER PRIMARY KEY AUTOINCREMENT: never reused, root is 1
 *     mode      st_mode: S_IFMT type bits and permission bits
 *     uid, gid
 *     nlink     files: number of dentries; directories: 2 + number of
 *               subdirectories; 0 = orphan
 *     size      st_size (a symlink's is its target's length)
 *     atime_ns, mtime_ns, ctime_ns    nanoseconds since the epoch
 *     file_id   data file data/NNNNNN.kvd holding the bytes, 0 = no record
 *     rec_off   byte offset of the record in that data file
 *     hdr_len   record header bytes before the payload
 *     rec_len   payload bytes
 *     crcs      BLOB of little-endian uint32: CRC32C of each KV_CHUNK_SIZE
 *               chunk of the payload; NULL when there is no record
 *     target    TEXT: a symlink's target, NULL for everything else
 *   dentries    one row per name
 *     id        INTEGER PRIMARY KEY AUTOINCREMENT: the readdir cookie, never
 *               reused; a rename keeps the moved entry's id
 *     parent    inode of the directory
 *     name      TEXT: 1..255 bytes, stored as given (no '/', no NUL)
 *     ino       inode named
 *     UNIQUE (parent, name)
 *   xattrs      (ino, name) PRIMARY KEY -> value BLOB of at most 64 KiB;
 *               WITHOUT ROWID
 *   stats       a single row (id = 1): ninodes = inodes with nlink > 0,
 *               nbytes = sum of regular files' sizes (orphans included,
 *               their records are still stored); kept by the triggers
 *               inodes_ai, inodes_ad and inodes_au so statfs is O(1)
 *   indexes     dentries_ino (dentries.ino: a directory's only dentry, to
 *               walk up to the root), dentries_parent (dentries.parent, with
 *               the rowid: readdir in cookie order), inodes_file_id
 *               (inodes.file_id, rec_off: data-file references and the
 *               record at an offset, for crash recovery), inodes_orphans
 *               (inodes.ino WHERE nlink = 0: start-up purge without a scan)
 *
 * The root directory has no dentry. A directory has exactly one dentry; a
 * regular file may have several (nlink counts them), though kvfs itself never
 * makes a second one.
 *
 * Threads: any thread may call any function; idx->lock serialises them. Every
 * mutating call is one BEGIN IMMEDIATE ... COMMIT transaction that is rolled
 * back on any error. Statements are prepared once (persistent) in idx_open()
 * and reset after every use, so no statement is left active between calls.
 */
#include "index.h"

#include <sys/stat.h>
#include <sys/xattr.h>

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

#include <sqlite3.h>

#include "log.h"

#define IDX_BUSY_TIMEOUT_MS 5000
/* WAL pages after which the checkpointer copies the log back. */
#define IDX_CK_FRAMES 1000
/* WAL pages after which the checkpointer makes the log start over. */
#define IDX_CK_RESTART 8000
/* Size the WAL file is cut back to once it starts over (bytes). */
#define IDX_WAL_LIMIT "67108864"
/* XATTR_NAME_MAX and XATTR_SIZE_MAX of <linux/limits.h>. */
#define IDX_XATTR_NAME_MAX 255
#define IDX_XATTR_SIZE_MAX 65536
/* A symlink target is at most PATH_MAX - 1 bytes, as the VFS enforces. */
#define IDX_TARGET_MAX 4095
/* Deeper than any real tree; reaching it means the dentries form a loop. */
#define IDX_MAX_DEPTH (1 << 20)
/* Keeps the CRC blob below SQLite's default 1e9-byte value limit. */
#define IDX_MAX_CRCS (200u * 1000u * 1000u)

enum idx_sid {
	SID_BEGIN,
	SID_BEGIN_WRITE,
	SID_COMMIT,
	SID_ROLLBACK,
	SID_GETATTR,
	SID_LOOKUP,
	SID_READDIR,
	SID_INSERT_INODE,
	SID_INSERT_DENTRY,
	SID_TOUCH_DIR,
	SID_SET_NLINK,
	SID_SET_CTIME,
	SID_SETATTR,
	SID_READLINK,
	SID_SET_EXTENT,
	SID_GET_CRCS,
	SID_DELETE_DENTRY,
	SID_MOVE_DENTRY,
	SID_SET_DENTRY_INO,
	SID_HAS_CHILD,
	SID_PARENT_OF,
	SID_DELETE_XATTRS,
	SID_DELETE_INODE,
	SID_ORPHANS,
	SID_DELETE_ORPHAN_XATTRS,
	SID_DELETE_ORPHANS,
	SID_REFS,
	SID_XATTR_GET,
	SID_XATTR_SET,
	SID_XATTR_LIST,
	SID_XATTR_DELETE,
	SID_STATFS,
	SID_TOUCH,
	SID_LRU,
	SID_TMP_NAMES,
	SID_EXTENT_AT,
	SID_RECORDS_PAST,
	SID_NEXT_EXTENT,
	SID_INSERT_INODE_AT,
	SID_COUNT,
	SID_FILE_RECORDS,
	SID_MOVE_RECORD,
	IDX_NSTMT
};

/* Columns 0..IDX_ATTR_NCOLS-1 of every statement that yields attributes. */
#define IDX_ATTR_COLS                                                          \
	"i.ino, i.mode, i.uid, i.gid, i.nlink, i.size, i.atime_ns, "           \
	"i.mtime_ns, i.ctime_ns, i.file_id, i.rec_off, i.hdr_len, i.rec_len"
#define IDX_ATTR_NCOLS 13

static const char *const idx_sql[IDX_NSTMT] = {
	[SID_BEGIN] = "BEGIN",
	[SID_BEGIN_WRITE] = "BEGIN IMMEDIATE",
	[SID_COMMIT] = "COMMIT",
	[SID_ROLLBACK] = "ROLLBACK",
	[SID_GETATTR] = "SELECT " IDX_ATTR_COLS " FROM inodes AS i "
			"WHERE i.ino = ?1",
	/* LEFT JOIN, so a dentry without its inode shows up as corruption. */
	[SID_LOOKUP] = "SELECT " IDX_ATTR_COLS ", d.id FROM dentries AS d "
		       "LEFT JOIN inodes AS i ON i.ino = d.ino "
		       "WHERE d.parent = ?1 AND d.name = ?2",
	[SID_READDIR] = "SELECT " IDX_ATTR_COLS ", d.id, d.name "
			"FROM dentries AS d "
			"LEFT JOIN inodes AS i ON i.ino = d.ino "
			"WHERE d.parent = ?1 AND d.id > ?2 ORDER BY d.id",
	[SID_INSERT_INODE] = "INSERT INTO inodes (mode, uid, gid, nlink, size, "
			     "atime_ns, mtime_ns, ctime_ns, target) "
			     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	[SID_INSERT_DENTRY] = "INSERT INTO dentries (parent, name, ino) "
			      "VALUES (?1, ?2, ?3)",
	[SID_TOUCH_DIR] = "UPDATE inodes SET nlink = nlink + ?2, "
			  "mtime_ns = ?3, ctime_ns = ?3 WHERE ino = ?1",
	[SID_SET_NLINK] = "UPDATE inodes SET nlink = ?2, ctime_ns = ?3 "
			  "WHERE ino = ?1",
	[SID_SET_CTIME] = "UPDATE inodes SET ctime_ns = ?2 WHERE ino = ?1",
	/* The type bits never change: only permission bits come from ?2. */
	[SID_SETATTR] = "UPDATE inodes SET mode = (mode & 0xF000) | "
			"(?2 & 0x0FFF), uid = ?3, gid = ?4, size = ?5, "
			"atime_ns = ?6, mtime_ns = ?7, ctime_ns = ?8 "
			"WHERE ino = ?1",
	[SID_READLINK] = "SELECT mode, target FROM inodes WHERE ino = ?1",
	[SID_SET_EXTENT] = "UPDATE inodes SET size = ?2, mtime_ns = ?3, "
			   "ctime_ns = ?3, file_id = ?4, rec_off = ?5, "
			   "hdr_len = ?6, rec_len = ?7, crcs = ?8, "
			   "lru_ns = max(lru_ns, ?3) WHERE ino = ?1",
	[SID_GET_CRCS] = "SELECT crcs FROM inodes WHERE ino = ?1",
	[SID_DELETE_DENTRY] = "DELETE FROM dentries WHERE id = ?1",
	[SID_MOVE_DENTRY] = "UPDATE dentries SET parent = ?2, name = ?3 "
			    "WHERE id = ?1",
	[SID_SET_DENTRY_INO] = "UPDATE dentries SET ino = ?2 WHERE id = ?1",
	[SID_HAS_CHILD] = "SELECT 1 FROM dentries WHERE parent = ?1 LIMIT 1",
	[SID_PARENT_OF] = "SELECT parent FROM dentries WHERE ino = ?1 LIMIT 1",
	[SID_DELETE_XATTRS] = "DELETE FROM xattrs WHERE ino = ?1",
	[SID_DELETE_INODE] = "DELETE FROM inodes WHERE ino = ?1",
	[SID_ORPHANS] = "SELECT file_id, rec_off, hdr_len, rec_len "
			"FROM inodes WHERE nlink = 0",
	[SID_DELETE_ORPHAN_XATTRS] = "DELETE FROM xattrs WHERE ino IN "
				     "(SELECT ino FROM inodes "
				     "WHERE nlink = 0)",
	[SID_DELETE_ORPHANS] = "DELETE FROM inodes WHERE nlink = 0",
	[SID_REFS] = "SELECT count(*) FROM inodes WHERE file_id = ?1",
	[SID_XATTR_GET] = "SELECT value FROM xattrs "
			  "WHERE ino = ?1 AND name = ?2",
	[SID_XATTR_SET] = "INSERT OR REPLACE INTO xattrs (ino, name, value) "
			  "VALUES (?1, ?2, ?3)",
	[SID_XATTR_LIST] = "SELECT name FROM xattrs WHERE ino = ?1 "
			   "ORDER BY name",
	[SID_XATTR_DELETE] = "DELETE FROM xattrs WHERE ino = ?1 AND name = ?2",
	[SID_STATFS] = "SELECT ninodes, nbytes FROM stats WHERE id = 1",
	/* idx_create_ino(): the caller picks the inode number (?9). */
	[SID_INSERT_INODE_AT] = "INSERT INTO inodes (ino, mode, uid, gid, "
				"nlink, size, atime_ns, mtime_ns, ctime_ns) "
				"VALUES (?9, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	/* One pass over the inode table (idx_count()). */
	[SID_COUNT] = "SELECT "
		      "ifnull(sum((mode & 0xF000) = 0x8000 AND nlink > 0), 0), "
		      "ifnull(sum((mode & 0xF000) = 0x4000 AND nlink > 0), 0), "
		      "ifnull(sum((mode & 0xF000) NOT IN (0x8000, 0x4000) "
		      "AND nlink > 0), 0), "
		      "ifnull(sum(nlink = 0), 0), "
		      "ifnull(sum(file_id != 0), 0), "
		      "ifnull(sum(CASE WHEN file_id != 0 THEN rec_len "
		      "ELSE 0 END), 0) FROM inodes",
	/* idx_file_records(): a data file's records, by offset. */
	[SID_FILE_RECORDS] = "SELECT ino, file_id, rec_off, hdr_len, rec_len "
			     "FROM inodes INDEXED BY inodes_file_id "
			     "WHERE file_id = ?1 AND rec_off >= ?2 "
			     "ORDER BY rec_off, ino LIMIT ?3",
	/* idx_move_records(): only a row that is where the caller says. */
	[SID_MOVE_RECORD] = "UPDATE inodes SET file_id = ?4, rec_off = ?5 "
			    "WHERE ino = ?1 AND file_id = ?2 AND rec_off = ?3 "
			    "AND hdr_len = ?6 AND rec_len = ?7",
	[SID_TOUCH] = "UPDATE inodes SET lru_ns = ?2 "
		      "WHERE ino = ?1 AND lru_ns < ?2",
	/* Least recently used first; (atime, ino) pages through ties. */
	[SID_LRU] = "SELECT i.ino, d.parent, d.name, i.lru_ns, i.size, d.id "
		    "FROM inodes AS i INDEXED BY inodes_lru "
		    "JOIN dentries AS d ON d.ino = i.ino "
		    "WHERE i.file_id != 0 AND i.nlink > 0 "
		    "AND (i.lru_ns, i.ino) > (?1, ?2) "
		    "ORDER BY i.lru_ns, i.ino LIMIT ?3",
	[SID_TMP_NAMES] = "SELECT i.ino, d.parent, d.name, i.mtime_ns, "
			  "i.size, d.id FROM dentries AS d "
			  "INDEXED BY dentries_tmp "
			  "JOIN inodes AS i ON i.ino = d.ino "
			  "WHERE d.name LIKE '%.tmp' AND d.id > ?1 "
			  "ORDER BY d.id LIMIT ?2",
	[SID_NEXT_EXTENT] = "SELECT min(rec_off) FROM inodes "
			    "WHERE file_id = ?1 AND rec_off > ?2",
	[SID_EXTENT_AT] = "SELECT 1 FROM inodes "
			  "WHERE file_id = ?1 AND rec_off = ?2 LIMIT 1",
	[SID_RECORDS_PAST] = "SELECT i.ino, d.parent, d.name, i.mtime_ns, "
			     "i.size, d.id FROM inodes AS i "
			     "LEFT JOIN dentries AS d ON d.ino = i.ino "
			     /*
			      * Records do not overlap: only the last one
			      * starting before ?2 and those after may pass
			      * it (an index range, not a scan of the file).
			      */
			     "WHERE i.file_id = ?1 AND i.rec_off >= "
			     "(SELECT coalesce(max(rec_off), 0) FROM inodes "
			     "WHERE file_id = ?1 AND rec_off < ?2) "
			     "AND i.rec_off + i.hdr_len "
			     "+ (i.rec_len + 4095) / 4096 * 4096 > ?2 "
			     "LIMIT ?3",
};

/* Run in one transaction by idx_open() on an empty database. */
static const char idx_schema_sql[] =
	"CREATE TABLE inodes ("
	" ino INTEGER PRIMARY KEY AUTOINCREMENT,"
	" mode INTEGER NOT NULL,"
	" uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL,"
	" nlink INTEGER NOT NULL,"
	" size INTEGER NOT NULL DEFAULT 0,"
	" atime_ns INTEGER NOT NULL,"
	" mtime_ns INTEGER NOT NULL,"
	" ctime_ns INTEGER NOT NULL,"
	" file_id INTEGER NOT NULL DEFAULT 0,"
	" rec_off INTEGER NOT NULL DEFAULT 0,"
	" hdr_len INTEGER NOT NULL DEFAULT 0,"
	" rec_len INTEGER NOT NULL DEFAULT 0,"
	" crcs BLOB,"
	" target TEXT,"
	" lru_ns INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE dentries ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" parent INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" ino INTEGER NOT NULL,"
	" UNIQUE (parent, name));"
	"CREATE TABLE xattrs ("
	" ino INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" value BLOB NOT NULL,"
	" PRIMARY KEY (ino, name)) WITHOUT ROWID;"
	"CREATE TABLE stats ("
	" id INTEGER PRIMARY KEY CHECK (id = 1),"
	" ninodes INTEGER NOT NULL,"
	" nbytes INTEGER NOT NULL);"
	"INSERT INTO stats (id, ninodes, nbytes) VALUES (1, 0, 0);"
	"CREATE INDEX dentries_ino ON dentries (ino);"
	"CREATE INDEX dentries_parent ON dentries (parent);"
	"CREATE INDEX inodes_file_id ON inodes (file_id, rec_off);"
	"CREATE INDEX inodes_orphans ON inodes (ino) WHERE nlink = 0;"
	"CREATE INDEX inodes_lru ON inodes (lru_ns, ino) WHERE file_id != 0;"
	"CREATE INDEX dentries_tmp ON dentries (id) WHERE name LIKE '%.tmp';"
	"CREATE TRIGGER inodes_ai AFTER INSERT ON inodes BEGIN"
	" UPDATE stats SET ninodes = ninodes + (NEW.nlink > 0),"
	"  nbytes = nbytes + ((NEW.mode & 0xF000) = 0x8000) * NEW.size;"
	" END;"
	"CREATE TRIGGER inodes_ad AFTER DELETE ON inodes BEGIN"
	" UPDATE stats SET ninodes = ninodes - (OLD.nlink > 0),"
	"  nbytes = nbytes - ((OLD.mode & 0xF000) = 0x8000) * OLD.size;"
	" END;"
	"CREATE TRIGGER inodes_au AFTER UPDATE OF mode, nlink, size ON inodes"
	" BEGIN"
	" UPDATE stats SET"
	"  ninodes = ninodes - (OLD.nlink > 0) + (NEW.nlink > 0),"
	"  nbytes = nbytes - ((OLD.mode & 0xF000) = 0x8000) * OLD.size"
	"   + ((NEW.mode & 0xF000) = 0x8000) * NEW.size;"
	" END;";

struct idx {
	/* Serialises every use of db and st[]; the only lock of the index. */
	pthread_mutex_t lock;
	sqlite3 *db;		     /* protected by lock */
	sqlite3_stmt *st[IDX_NSTMT]; /* protected by lock, reset after use */
	int opening; /* protected by lock: idx_open() is checking the file */
	char *path;  /* read-only after idx_open(), for log lines */

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
	int ck_frames; /* WAL frames at the last commit, protected by ck_lock */
	int ck_frames_last; /* log the last checkpoint saw; its thread only */
};

static void idx_lock(struct idx *idx)
{
	int rc = pthread_mutex_lock(&idx->lock);

	assert(rc == 0);
	(void)rc;
}

static void idx_unlock(struct idx *idx)
{
	int rc = pthread_mutex_unlock(&idx->lock);

	assert(rc == 0);
	(void)rc;
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

/*
 * The one place where SQLite result codes become -errno (see index.h), logged
 * with sqlite3_errmsg(). Must run before any other call on idx->db, which
 * would replace the message. While idx_open() checks the file, NOTADB means
 * "not a kvfs database" (-EMEDIUMTYPE); later it is corruption (-EIO).
 */
static int idx_errno(struct idx *idx, int rc, const char *caller)
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
		if (rc == SQLITE_IOERR_NOMEM)
			err = -ENOMEM;
		else if (rc == SQLITE_IOERR_SHORT_READ)
			err = -EIO;
		else if (sys)
			err = idx_os_errno(sys, -EIO);
		else
			err = idx_unwritable_errno(idx->path);
		if (!err)
			err = -EIO;
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

#define IDX_ERR(idx, rc) idx_errno((idx), (rc), __func__)

/*
 * Binding can fail only on a bad index, a bad type or an oversized value:
 * programming bugs, since every length is checked before we get here.
 */
static void idx_bind_i64(sqlite3_stmt *st, int i, int64_t v)
{
	int rc = sqlite3_bind_int64(st, i, v);

	assert(rc == SQLITE_OK);
	(void)rc;
}

/* Borrows s until the statement is reset (idx_done()). NULL binds NULL. */
static void idx_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	int rc = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC)
		   : sqlite3_bind_null(st, i);

	assert(rc == SQLITE_OK);
	(void)rc;
}

/* Binds ?1..?8 of an inode insert: mode, uid, gid, nlink, size, times. */
static void idx_bind_new_inode(sqlite3_stmt *st, const struct idx_attr *a)
{
	idx_bind_i64(st, 1, a->mode);
	idx_bind_i64(st, 2, a->uid);
	idx_bind_i64(st, 3, a->gid);
	idx_bind_i64(st, 4, a->nlink);
	idx_bind_i64(st, 5, (int64_t)a->size);
	idx_bind_i64(st, 6, a->atime_ns);
	idx_bind_i64(st, 7, a->mtime_ns);
	idx_bind_i64(st, 8, a->ctime_ns);
}

/* Borrows p; a zero length binds an empty BLOB, not NULL. */
static void idx_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len)
{
	int rc = len ? sqlite3_bind_blob(st, i, p, (int)len, SQLITE_STATIC)
		     : sqlite3_bind_zeroblob(st, i, 0);

	assert(rc == SQLITE_OK);
	(void)rc;
}

/* Resets st and drops its bindings (which may point at callers' memory). */
static void idx_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* One step: 1 for a row, 0 when done, -errno on failure. */
static int idx_step(struct idx *idx, sqlite3_stmt *st, const char *caller)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return idx_errno(idx, rc, caller);
}

#define IDX_STEP(idx, st) idx_step((idx), (st), __func__)

/* Runs a bound statement that returns no rows, then resets it. */
static int idx_run(struct idx *idx, sqlite3_stmt *st, const char *caller)
{
	int rc = idx_step(idx, st, caller);

	idx_done(st);
	return rc < 0 ? rc : 0;
}

#define IDX_RUN(idx, st) idx_run((idx), (st), __func__)

static int idx_begin(struct idx *idx, int write)
{
	return IDX_RUN(idx, idx->st[write ? SID_BEGIN_WRITE : SID_BEGIN]);
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

static int64_t idx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A name for lookups: -ENAMETOOLONG over IDX_NAME_MAX bytes. */
static int idx_check_name(const char *name)
{
	if (strnlen(name, IDX_NAME_MAX + 1) > IDX_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * A name for a new dentry. The kernel never sends "", ".", ".." or a '/';
 * refusing them keeps a buggy caller from making an unreachable entry.
 */
static int idx_check_new_name(const char *name)
{
	int rc = idx_check_name(name);

	if (rc)
		return rc;
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

/* Fills a from columns 0..IDX_ATTR_NCOLS-1; -EIO for a dangling dentry. */
static int idx_row_attr(struct idx *idx, sqlite3_stmt *st, struct idx_attr *a)
{
	if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
		log_err("%s: a dentry names a missing inode", idx->path);
		return -EIO;
	}
	*a = (struct idx_attr){
		.ino = (uint64_t)sqlite3_column_int64(st, 0),
		.mode = (uint32_t)sqlite3_column_int64(st, 1),
		.uid = (uint32_t)sqlite3_column_int64(st, 2),
		.gid = (uint32_t)sqlite3_column_int64(st, 3),
		.nlink = (uint32_t)sqlite3_column_int64(st, 4),
		.size = (uint64_t)sqlite3_column_int64(st, 5),
		.atime_ns = sqlite3_column_int64(st, 6),
		.mtime_ns = sqlite3_column_int64(st, 7),
		.ctime_ns = sqlite3_column_int64(st, 8),
		.ext =
			{
				.file_id =
					(uint32_t)sqlite3_column_int64(st, 9),
				.off = (uint64_t)sqlite3_column_int64(st, 10),
				.hdr_len =
					(uint32_t)sqlite3_column_int64(st, 11),
				.len = (uint64_t)sqlite3_column_int64(st, 12),
			},
	};
	return 0;
}

/* Inode ino: 1 and *a when it exists, 0 when not, -errno. */
static int idx_inode(struct idx *idx, uint64_t ino, struct idx_attr *a)
{
	sqlite3_stmt *st = idx->st[SID_GETATTR];
	int rc;

	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		rc = idx_row_attr(idx, st, a);
		if (rc == 0)
			rc = 1;
	}
	idx_done(st);
	return rc;
}

/* Directory ino into *a: 0, -ENOENT, -ENOTDIR or -errno. */
static int idx_dir(struct idx *idx, uint64_t ino, struct idx_attr *a)
{
	int rc = idx_inode(idx, ino, a);

	if (rc < 0)
		return rc;
	if (rc == 0)
		return -ENOENT;
	return S_ISDIR(a->mode) ? 0 : -ENOTDIR;
}

/*
 * Dentry (parent, name): 1 with its inode in *a and its id in *id (may be
 * NULL) when it exists, 0 when not, -errno.
 */
static int idx_find(struct idx *idx, uint64_t parent, const char *name,
		    struct idx_attr *a, int64_t *id)
{
	sqlite3_stmt *st = idx->st[SID_LOOKUP];
	int rc;

	idx_bind_i64(st, 1, (int64_t)parent);
	idx_bind_text(st, 2, name);
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		rc = idx_row_attr(idx, st, a);
		if (rc == 0) {
			if (id)
				*id = sqlite3_column_int64(st, IDX_ATTR_NCOLS);
			rc = 1;
		}
	}
	idx_done(st);
	return rc;
}

/* Whether directory dir has any entry: 1, 0 or -errno. */
static int idx_has_child(struct idx *idx, uint64_t dir)
{
	sqlite3_stmt *st = idx->st[SID_HAS_CHILD];
	int rc;

	idx_bind_i64(st, 1, (int64_t)dir);
	rc = IDX_STEP(idx, st);
	idx_done(st);
	return rc;
}

/* Adds delta to directory dir's nlink and sets its mtime and ctime. */
static int idx_touch_dir(struct idx *idx, uint64_t dir, int delta,
			 int64_t now_ns)
{
	sqlite3_stmt *st = idx->st[SID_TOUCH_DIR];

	idx_bind_i64(st, 1, (int64_t)dir);
	idx_bind_i64(st, 2, delta);
	idx_bind_i64(st, 3, now_ns);
	return IDX_RUN(idx, st);
}

static int idx_set_nlink(struct idx *idx, uint64_t ino, uint32_t nlink,
			 int64_t now_ns)
{
	sqlite3_stmt *st = idx->st[SID_SET_NLINK];

	idx_bind_i64(st, 1, (int64_t)ino);
	idx_bind_i64(st, 2, nlink);
	idx_bind_i64(st, 3, now_ns);
	return IDX_RUN(idx, st);
}

static int idx_set_ctime(struct idx *idx, uint64_t ino, int64_t now_ns)
{
	sqlite3_stmt *st = idx->st[SID_SET_CTIME];

	idx_bind_i64(st, 1, (int64_t)ino);
	idx_bind_i64(st, 2, now_ns);
	return IDX_RUN(idx, st);
}

static int idx_delete_dentry(struct idx *idx, int64_t id)
{
	sqlite3_stmt *st = idx->st[SID_DELETE_DENTRY];

	idx_bind_i64(st, 1, id);
	return IDX_RUN(idx, st);
}

/*
 * Whether directory anc is dir or one of dir's ancestors: 1, 0 or -errno.
 * Walks the single dentry of each directory up to the root.
 */
static int idx_is_ancestor(struct idx *idx, uint64_t anc, uint64_t dir)
{
	sqlite3_stmt *st = idx->st[SID_PARENT_OF];
	uint64_t cur = dir;
	int rc;

	for (int depth = 0; depth < IDX_MAX_DEPTH; depth++) {
		if (cur == anc)
			return 1;
		if (cur == KV_ROOT_INO)
			return 0;
		idx_bind_i64(st, 1, (int64_t)cur);
		rc = IDX_STEP(idx, st);
		if (rc == 1)
			cur = (uint64_t)sqlite3_column_int64(st, 0);
		idx_done(st);
		if (rc <= 0)
			return rc; /* a removed directory has no parent */
	}
	log_err("%s: directory %" PRIu64 " is in a loop of dentries", idx->path,
		dir);
	return -EIO;
}

/* Runs sql, which must yield one integer, into *out. */
static int idx_query_int(struct idx *idx, const char *sql, int64_t *out)
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

static int idx_exec(struct idx *idx, const char *sql)
{
	int rc = sqlite3_exec(idx->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : IDX_ERR(idx, rc);
}

/*
 * Decides what the file at idx->path is, reading only: *fresh = 1 for an
 * empty database (a new file), 0 for a kvfs database we can use.
 */
static int idx_check_format(struct idx *idx, int *fresh)
{
	int64_t app, ver, nobj, ntab;
	int rc;

	rc = idx_query_int(idx, "PRAGMA application_id", &app);
	if (!rc)
		rc = idx_query_int(idx, "PRAGMA user_version", &ver);
	if (!rc)
		rc = idx_query_int(idx, "SELECT count(*) FROM sqlite_schema",
				   &nobj);
	if (rc)
		return rc;
	if (app == 0 && ver == 0 && nobj == 0) {
		*fresh = 1;
		return 0;
	}
	*fresh = 0;
	if (app != IDX_APPLICATION_ID) {
		log_err("%s: not a kvfs database (SQLite application_id "
			"%#" PRIx64 ", kvfs uses %#x)",
			idx->path, (uint64_t)(uint32_t)app, IDX_APPLICATION_ID);
		return -EMEDIUMTYPE;
	}
	if (ver > IDX_FORMAT_VERSION) {
		log_err("%s: index format version %" PRId64
			" is newer than this kvfs supports (%d)",
			idx->path, ver, IDX_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	rc = idx_query_int(idx,
			   "SELECT count(*) FROM sqlite_schema "
			   "WHERE type = 'table' AND name IN "
			   "('inodes', 'dentries', 'xattrs', 'stats')",
			   &ntab);
	if (rc)
		return rc;
	if (ver < 1 || ntab != 4) {
		log_err("%s: not a kvfs database (format version %" PRId64
			", %" PRId64 " of 4 kvfs tables)",
			idx->path, ver, ntab);
		return -EMEDIUMTYPE;
	}
	return 0;
}

/*
 * Creates the schema and the root directory in one transaction. Another
 * process may have done so since idx_check_format(): then nothing happens
 * and 1 is returned so the caller checks again.
 */
static int idx_create_schema(struct idx *idx, uint32_t root_mode,
			     uint32_t root_uid, uint32_t root_gid)
{
	char pragmas[128];
	sqlite3_stmt *st = NULL;
	int64_t nobj, now = idx_now_ns();
	int rc;

	rc = idx_exec(idx, "BEGIN IMMEDIATE");
	if (rc)
		return rc;
	rc = idx_query_int(idx, "SELECT count(*) FROM sqlite_schema", &nobj);
	if (rc) {
		sqlite3_exec(idx->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	if (nobj) {
		rc = idx_exec(idx, "COMMIT");
		return rc ? rc : 1;
	}
	snprintf(pragmas, sizeof(pragmas),
		 "PRAGMA application_id = %d; PRAGMA user_version = %d;",
		 IDX_APPLICATION_ID, IDX_FORMAT_VERSION);
	rc = idx_exec(idx, pragmas);
	if (!rc)
		rc = idx_exec(idx, idx_schema_sql);
	if (!rc) {
		rc = sqlite3_prepare_v2(
			idx->db,
			"INSERT INTO inodes (ino, mode, uid, gid, nlink, "
			"atime_ns, mtime_ns, ctime_ns) "
			"VALUES (?1, ?2, ?3, ?4, 2, ?5, ?5, ?5)",
			-1, &st, NULL);
		rc = rc == SQLITE_OK ? 0 : IDX_ERR(idx, rc);
	}
	if (!rc) {
		idx_bind_i64(st, 1, KV_ROOT_INO);
		idx_bind_i64(st, 2, S_IFDIR | (root_mode & 07777));
		idx_bind_i64(st, 3, root_uid);
		idx_bind_i64(st, 4, root_gid);
		idx_bind_i64(st, 5, now);
		rc = IDX_RUN(idx, st);
	}
	sqlite3_finalize(st);
	if (!rc)
		rc = idx_exec(idx, "COMMIT");
	if (rc && !sqlite3_get_autocommit(idx->db))
		sqlite3_exec(idx->db, "ROLLBACK", NULL, NULL, NULL);
	if (!rc)
		log_info("%s: created a new index", idx->path);
	return rc;
}

/* WAL and its settings; journal_mode must be set outside a transaction. */
static int idx_set_pragmas(struct idx *idx)
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
	return idx_exec(idx, "PRAGMA synchronous = NORMAL");
}

static int idx_prepare_all(struct idx *idx)
{
	for (int i = 0; i < IDX_NSTMT; i++) {
		int rc = sqlite3_prepare_v3(idx->db, idx_sql[i], -1,
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

/* Opens, checks and (when new) initialises the database; idx->lock held. */
static int idx_open_db(struct idx *idx, uint32_t root_mode, uint32_t root_uid,
		       uint32_t root_gid)
{
	struct idx_attr root;
	int rc, fresh;

	rc = sqlite3_open_v2(idx->path, &idx->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX,
			     NULL);
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
	sqlite3_busy_timeout(idx->db, IDX_BUSY_TIMEOUT_MS);

	idx->opening = 1;
	do {
		rc = idx_check_format(idx, &fresh);
		if (rc || !fresh)
			break;
		rc = idx_set_pragmas(idx);
		if (!rc)
			rc = idx_create_schema(idx, root_mode, root_uid,
					       root_gid);
	} while (rc == 1);
	idx->opening = 0;
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
 * checkpointer once the log has grown past IDX_CK_FRAMES pages.
 */
static int idx_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct idx *idx = arg;

	pthread_mutex_lock(&idx->ck_lock);
	idx->ck_frames = frames;
	if (frames >= IDX_CK_FRAMES)
		pthread_cond_signal(&idx->ck_cond);
	pthread_mutex_unlock(&idx->ck_lock);
	return SQLITE_OK;
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
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
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
		int nlog = 0, ndone = 0;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (idx->ck_frames < IDX_CK_FRAMES)
			pthread_cond_timedwait(&idx->ck_cond, &idx->ck_lock,
					       &ts);
		if (idx->ck_stop || idx->ck_frames == 0)
			continue;
		idx->ck_frames = 0;
		pthread_mutex_unlock(&idx->ck_lock);
		/*
		 * PASSIVE never blocks writers, but under a steady stream of
		 * commits it never catches up and the log only grows; past
		 * IDX_CK_RESTART frames, RESTART waits for the writer once
		 * so the next commit starts the log over.
		 */
		pthread_mutex_lock(&idx->ck_run);
		rc = sqlite3_wal_checkpoint_v2(
			db, NULL,
			idx->ck_frames_last >= IDX_CK_RESTART
				? SQLITE_CHECKPOINT_RESTART
				: SQLITE_CHECKPOINT_PASSIVE,
			&nlog, &ndone);
		pthread_mutex_unlock(&idx->ck_run);
		if (rc == SQLITE_BUSY) {
			/* A reader or the writer held on: next tick. */
		} else if (rc != SQLITE_OK) {
			log_warn("%s: checkpoint: %s", idx->path,
				 sqlite3_errmsg(db));
		} else if (nlog < 0) {
			log_warn("%s: checkpoint found no write-ahead log",
				 idx->path);
		} else {
			idx->ck_frames_last = nlog;
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
	idx_unlock(idx);
	return 0;
}

static void idx_stop_checkpointer(struct idx *idx)
{
	if (!idx->ck_running)
		return;
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

int idx_lookup(struct idx *idx, uint64_t parent, const char *name,
	       struct idx_attr *out)
{
	int rc = idx_check_name(name);

	if (rc)
		return rc;
	idx_lock(idx);
	rc = idx_find(idx, parent, name, out, NULL);
	idx_unlock(idx);
	if (rc == 0)
		return -ENOENT;
	return rc < 0 ? rc : 0;
}

int idx_getattr(struct idx *idx, uint64_t ino, struct idx_attr *out)
{
	int rc;

	idx_lock(idx);
	rc = idx_inode(idx, ino, out);
	idx_unlock(idx);
	if (rc == 0)
		return -ENOENT;
	return rc < 0 ? rc : 0;
}

static int idx_create_txn(struct idx *idx, uint64_t parent, const char *name,
			  struct idx_attr *a, const char *target)
{
	sqlite3_stmt *st;
	struct idx_attr dir, old;
	int isdir = S_ISDIR(a->mode);
	int64_t ino;
	int rc;

	rc = idx_dir(idx, parent, &dir);
	if (rc)
		return rc;
	if (dir.nlink == 0)
		return -ENOENT; /* removed while still open, like ext4 */
	rc = idx_find(idx, parent, name, &old, NULL);
	if (rc)
		return rc < 0 ? rc : -EEXIST;

	st = idx->st[SID_INSERT_INODE];
	idx_bind_new_inode(st, a);
	idx_bind_text(st, 9, target);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	ino = sqlite3_last_insert_rowid(idx->db);

	st = idx->st[SID_INSERT_DENTRY];
	idx_bind_i64(st, 1, (int64_t)parent);
	idx_bind_text(st, 2, name);
	idx_bind_i64(st, 3, ino);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	rc = idx_touch_dir(idx, parent, isdir, a->mtime_ns);
	if (rc)
		return rc;
	a->ino = (uint64_t)ino;
	return 0;
}

int idx_create(struct idx *idx, uint64_t parent, const char *name,
	       struct idx_attr *attr, const char *target)
{
	struct idx_attr a = *attr;
	int rc = idx_check_new_name(name);

	if (rc)
		return rc;
	switch (attr->mode & S_IFMT) {
	case S_IFLNK:
		if (!target)
			return -EINVAL;
		if (strnlen(target, IDX_TARGET_MAX + 1) > IDX_TARGET_MAX)
			return -ENAMETOOLONG;
		a.size = strlen(target);
		break;
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		target = NULL;
		a.size = 0;
		break;
	default:
		return -EINVAL;
	}
	a.nlink = S_ISDIR(a.mode) ? 2 : 1;
	a.ext = (struct kv_extent){0};

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx,
			     idx_create_txn(idx, parent, name, &a, target));
	idx_unlock(idx);
	if (!rc)
		*attr = a;
	return rc;
}

int idx_readlink(struct idx *idx, uint64_t ino, char *buf, size_t len)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_READLINK];
	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_STEP(idx, st);
	if (rc == 0) {
		rc = -ENOENT;
	} else if (rc == 1) {
		const char *t = (const char *)sqlite3_column_text(st, 1);
		size_t tlen = (size_t)sqlite3_column_bytes(st, 1);

		if (!S_ISLNK((mode_t)sqlite3_column_int64(st, 0))) {
			rc = -EINVAL;
		} else if (sqlite3_column_type(st, 1) == SQLITE_NULL) {
			log_err("%s: symlink %" PRIu64 " has no target",
				idx->path, ino);
			rc = -EIO;
		} else if (!t) {
			rc = -ENOMEM;
		} else {
			if (len > 0) {
				size_t n = tlen < len - 1 ? tlen : len - 1;

				memcpy(buf, t, n);
				buf[n] = '\0';
			}
			rc = (int)tlen;
		}
	}
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

int idx_setattr(struct idx *idx, const struct idx_attr *attr)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc) {
		st = idx->st[SID_SETATTR];
		idx_bind_i64(st, 1, (int64_t)attr->ino);
		idx_bind_i64(st, 2, attr->mode);
		idx_bind_i64(st, 3, attr->uid);
		idx_bind_i64(st, 4, attr->gid);
		idx_bind_i64(st, 5, (int64_t)attr->size);
		idx_bind_i64(st, 6, attr->atime_ns);
		idx_bind_i64(st, 7, attr->mtime_ns);
		idx_bind_i64(st, 8, attr->ctime_ns);
		rc = IDX_RUN(idx, st);
		if (!rc && sqlite3_changes(idx->db) == 0)
			rc = -ENOENT;
		rc = idx_end(idx, rc);
	}
	idx_unlock(idx);
	return rc;
}

static int idx_set_extent_txn(struct idx *idx, uint64_t ino, uint64_t size,
			      int64_t mtime_ns, const struct kv_extent *ext,
			      const uint8_t *blob, size_t blob_len,
			      struct kv_extent *old)
{
	sqlite3_stmt *st;
	struct idx_attr a;
	int rc;

	rc = idx_inode(idx, ino, &a);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	if (!S_ISREG(a.mode))
		return -EINVAL;
	st = idx->st[SID_SET_EXTENT];
	idx_bind_i64(st, 1, (int64_t)ino);
	idx_bind_i64(st, 2, (int64_t)size);
	idx_bind_i64(st, 3, mtime_ns);
	idx_bind_i64(st, 4, ext->file_id);
	idx_bind_i64(st, 5, (int64_t)ext->off);
	idx_bind_i64(st, 6, ext->hdr_len);
	idx_bind_i64(st, 7, (int64_t)ext->len);
	if (blob_len)
		idx_bind_blob(st, 8, blob, blob_len);
	else
		idx_bind_text(st, 8, NULL);
	rc = IDX_RUN(idx, st);
	if (!rc)
		*old = a.ext;
	return rc;
}

int idx_set_extent(struct idx *idx, uint64_t ino, uint64_t size,
		   int64_t mtime_ns, const struct kv_extent *ext,
		   const uint32_t *crcs, uint32_t ncrcs, struct kv_extent *old)
{
	static const struct kv_extent none;
	struct kv_extent prev;
	uint8_t *blob = NULL;
	int rc;

	if (!ext)
		ext = &none;
	if (ext->file_id ? ncrcs != kv_nchunks(ext->len) : ncrcs != 0) {
		log_err("%s: inode %" PRIu64 ": %" PRIu32
			" CRCs for a record of %" PRIu64
			" bytes in file %" PRIu32,
			idx->path, ino, ncrcs, ext->len, ext->file_id);
		return -EINVAL;
	}
	if (ncrcs > IDX_MAX_CRCS)
		return -EFBIG;
	assert(crcs || ncrcs == 0);
	if (ncrcs) {
		blob = malloc((size_t)ncrcs * 4);
		if (!blob)
			return -ENOMEM;
		for (uint32_t i = 0; i < ncrcs; i++) {
			blob[4 * i] = (uint8_t)crcs[i];
			blob[4 * i + 1] = (uint8_t)(crcs[i] >> 8);
			blob[4 * i + 2] = (uint8_t)(crcs[i] >> 16);
			blob[4 * i + 3] = (uint8_t)(crcs[i] >> 24);
		}
	}
	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_set_extent_txn(idx, ino, size, mtime_ns,
						     ext, blob,
						     (size_t)ncrcs * 4, &prev));
	idx_unlock(idx);
	free(blob);
	if (!rc && old)
		*old = prev;
	return rc;
}

int idx_get_crcs(struct idx *idx, uint64_t ino, uint32_t **crcs,
		 uint32_t *ncrcs)
{
	sqlite3_stmt *st;
	uint32_t *v = NULL;
	size_t n = 0;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_GET_CRCS];
	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_STEP(idx, st);
	if (rc == 0) {
		rc = -ENOENT;
	} else if (rc == 1) {
		const uint8_t *p = sqlite3_column_blob(st, 0);
		size_t bytes = (size_t)sqlite3_column_bytes(st, 0);

		rc = 0;
		n = bytes / 4;
		if (bytes % 4) {
			log_err("%s: inode %" PRIu64 ": CRC list of %zu bytes",
				idx->path, ino, bytes);
			rc = -EIO;
		} else if (n && !p) {
			rc = -ENOMEM;
		} else if (n) {
			v = malloc(n * sizeof(*v));
			if (!v)
				rc = -ENOMEM;
			for (size_t i = 0; v && i < n; i++)
				v[i] = (uint32_t)p[4 * i] |
				       (uint32_t)p[4 * i + 1] << 8 |
				       (uint32_t)p[4 * i + 2] << 16 |
				       (uint32_t)p[4 * i + 3] << 24;
		}
	}
	idx_done(st);
	idx_unlock(idx);
	if (rc)
		return rc;
	*crcs = v;
	*ncrcs = (uint32_t)n;
	return 0;
}

static int idx_unlink_txn(struct idx *idx, uint64_t parent, const char *name,
			  int rmdir, int64_t now_ns, uint64_t *ino,
			  uint32_t *nlink)
{
	struct idx_attr dir, a;
	uint32_t left;
	int64_t id;
	int isdir, rc;

	rc = idx_dir(idx, parent, &dir);
	if (rc)
		return rc;
	rc = idx_find(idx, parent, name, &a, &id);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	isdir = S_ISDIR(a.mode);
	if (rmdir && !isdir)
		return -ENOTDIR;
	if (!rmdir && isdir)
		return -EISDIR;
	if (isdir) {
		rc = idx_has_child(idx, a.ino);
		if (rc)
			return rc < 0 ? rc : -ENOTEMPTY;
	}
	/* A directory's own "." link goes with its name. */
	left = isdir || a.nlink == 0 ? 0 : a.nlink - 1;
	rc = idx_delete_dentry(idx, id);
	if (!rc)
		rc = idx_set_nlink(idx, a.ino, left, now_ns);
	if (!rc)
		rc = idx_touch_dir(idx, parent, isdir ? -1 : 0, now_ns);
	if (!rc) {
		*ino = a.ino;
		*nlink = left;
	}
	return rc;
}

int idx_unlink(struct idx *idx, uint64_t parent, const char *name, int rmdir,
	       int64_t now_ns, uint64_t *ino, uint32_t *nlink)
{
	uint64_t i = 0;
	uint32_t n = 0;
	int rc = idx_check_name(name);

	if (rc)
		return rc;
	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_unlink_txn(idx, parent, name, rmdir,
						 now_ns, &i, &n));
	idx_unlock(idx);
	if (!rc) {
		*ino = i;
		*nlink = n;
	}
	return rc;
}

/* The arguments of one idx_rename() call, and what it replaced. */
struct idx_rename_op {
	uint64_t parent, newparent;
	const char *name, *newname;
	unsigned int flags;
	int64_t now_ns;
	uint64_t replaced;
	uint32_t replaced_nlink;
};

/* Swaps the inodes of two dentries (RENAME_EXCHANGE). */
static int idx_exchange(struct idx *idx, struct idx_rename_op *op,
			const struct idx_attr *src, int64_t src_id,
			const struct idx_attr *dst, int64_t dst_id)
{
	sqlite3_stmt *st = idx->st[SID_SET_DENTRY_INO];
	int src_dir = S_ISDIR(src->mode), dst_dir = S_ISDIR(dst->mode);
	int delta = 0, rc;

	idx_bind_i64(st, 1, src_id);
	idx_bind_i64(st, 2, (int64_t)dst->ino);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	idx_bind_i64(st, 1, dst_id);
	idx_bind_i64(st, 2, (int64_t)src->ino);
	rc = IDX_RUN(idx, st);
	if (!rc)
		rc = idx_set_ctime(idx, src->ino, op->now_ns);
	if (!rc)
		rc = idx_set_ctime(idx, dst->ino, op->now_ns);
	if (rc)
		return rc;
	/* A directory that changes parent moves its ".." link along. */
	if (op->parent != op->newparent)
		delta = dst_dir - src_dir;
	rc = idx_touch_dir(idx, op->parent, delta, op->now_ns);
	if (!rc && op->parent != op->newparent)
		rc = idx_touch_dir(idx, op->newparent, -delta, op->now_ns);
	return rc;
}

/* The order of checks follows Linux's do_renameat2() and vfs_rename(). */
static int idx_rename_txn(struct idx *idx, struct idx_rename_op *op)
{
	sqlite3_stmt *st;
	struct idx_attr pdir, npdir, src, dst;
	int64_t src_id, dst_id;
	int have_dst, src_dir, dst_dir = 0, pdelta = 0, npdelta = 0, rc;

	rc = idx_dir(idx, op->parent, &pdir);
	if (!rc)
		rc = idx_dir(idx, op->newparent, &npdir);
	if (rc)
		return rc;
	rc = idx_find(idx, op->parent, op->name, &src, &src_id);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	have_dst = idx_find(idx, op->newparent, op->newname, &dst, &dst_id);
	if (have_dst < 0)
		return have_dst;
	if (have_dst && (op->flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (!have_dst && (op->flags & RENAME_EXCHANGE))
		return -ENOENT;
	if (!have_dst && npdir.nlink == 0)
		return -ENOENT;
	src_dir = S_ISDIR(src.mode);
	if (have_dst)
		dst_dir = S_ISDIR(dst.mode);
	if (src_dir) {
		rc = idx_is_ancestor(idx, src.ino, op->newparent);
		if (rc)
			return rc < 0 ? rc : -EINVAL;
	}
	if (dst_dir) {
		rc = idx_is_ancestor(idx, dst.ino, op->parent);
		if (rc < 0)
			return rc;
		if (rc)
			return op->flags & RENAME_EXCHANGE ? -EINVAL
							   : -ENOTEMPTY;
	}
	if (have_dst && dst.ino == src.ino)
		return 0; /* the same name, or two links of one file */
	if (op->flags & RENAME_EXCHANGE)
		return idx_exchange(idx, op, &src, src_id, &dst, dst_id);

	if (have_dst) {
		uint32_t nlink = dst_dir || dst.nlink == 0 ? 0 : dst.nlink - 1;

		if (src_dir && !dst_dir)
			return -ENOTDIR;
		if (!src_dir && dst_dir)
			return -EISDIR;
		if (dst_dir) {
			rc = idx_has_child(idx, dst.ino);
			if (rc)
				return rc < 0 ? rc : -ENOTEMPTY;
			npdelta--;
		}
		rc = idx_delete_dentry(idx, dst_id);
		if (!rc)
			rc = idx_set_nlink(idx, dst.ino, nlink, op->now_ns);
		if (rc)
			return rc;
		op->replaced = dst.ino;
		op->replaced_nlink = nlink;
	}
	st = idx->st[SID_MOVE_DENTRY];
	idx_bind_i64(st, 1, src_id);
	idx_bind_i64(st, 2, (int64_t)op->newparent);
	idx_bind_text(st, 3, op->newname);
	rc = IDX_RUN(idx, st);
	if (!rc)
		rc = idx_set_ctime(idx, src.ino, op->now_ns);
	if (rc)
		return rc;
	if (src_dir && op->parent != op->newparent) {
		pdelta--;
		npdelta++;
	}
	if (op->parent == op->newparent)
		return idx_touch_dir(idx, op->parent, pdelta + npdelta,
				     op->now_ns);
	rc = idx_touch_dir(idx, op->parent, pdelta, op->now_ns);
	if (!rc)
		rc = idx_touch_dir(idx, op->newparent, npdelta, op->now_ns);
	return rc;
}

int idx_rename(struct idx *idx, uint64_t parent, const char *name,
	       uint64_t newparent, const char *newname, unsigned int flags,
	       int64_t now_ns, uint64_t *replaced, uint32_t *replaced_nlink)
{
	struct idx_rename_op op = {
		.parent = parent,
		.newparent = newparent,
		.name = name,
		.newname = newname,
		.flags = flags,
		.now_ns = now_ns,
	};
	int rc;

	*replaced = 0;
	*replaced_nlink = 0;
	if (flags & ~(unsigned int)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	rc = idx_check_name(name);
	if (!rc)
		rc = flags & RENAME_EXCHANGE ? idx_check_name(newname)
					     : idx_check_new_name(newname);
	if (rc)
		return rc;
	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_rename_txn(idx, &op));
	idx_unlock(idx);
	if (!rc) {
		*replaced = op.replaced;
		*replaced_nlink = op.replaced_nlink;
	}
	return rc;
}

static int idx_release_txn(struct idx *idx, uint64_t ino, struct kv_extent *ext)
{
	sqlite3_stmt *st;
	struct idx_attr a;
	int rc;

	rc = idx_inode(idx, ino, &a);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	if (a.nlink > 0)
		return -EBUSY;
	st = idx->st[SID_DELETE_XATTRS];
	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	st = idx->st[SID_DELETE_INODE];
	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_RUN(idx, st);
	if (!rc)
		*ext = a.ext;
	return rc;
}

int idx_release_inode(struct idx *idx, uint64_t ino, struct kv_extent *ext)
{
	struct kv_extent e = {0};
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_release_txn(idx, ino, &e));
	idx_unlock(idx);
	if (!rc && ext)
		*ext = e;
	return rc;
}

/* Orphans' extents collected by idx_purge_txn() (file_id != 0 only). */
struct idx_extents {
	struct kv_extent *v;
	size_t n, cap;
};

static int idx_extents_add(struct idx_extents *xs, const struct kv_extent *e)
{
	if (xs->n == xs->cap) {
		size_t cap = xs->cap ? 2 * xs->cap : 64;
		struct kv_extent *v = realloc(xs->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		xs->v = v;
		xs->cap = cap;
	}
	xs->v[xs->n++] = *e;
	return 0;
}

/* Deletes all orphans; returns how many. */
static int idx_purge_txn(struct idx *idx, struct idx_extents *xs)
{
	sqlite3_stmt *st = idx->st[SID_ORPHANS];
	int count = 0, rc;

	while ((rc = IDX_STEP(idx, st)) == 1) {
		struct kv_extent e = {
			.file_id = (uint32_t)sqlite3_column_int64(st, 0),
			.off = (uint64_t)sqlite3_column_int64(st, 1),
			.hdr_len = (uint32_t)sqlite3_column_int64(st, 2),
			.len = (uint64_t)sqlite3_column_int64(st, 3),
		};

		count++;
		if (e.file_id) {
			rc = idx_extents_add(xs, &e);
			if (rc)
				break;
		}
	}
	idx_done(st);
	if (rc < 0)
		return rc;
	rc = IDX_RUN(idx, idx->st[SID_DELETE_ORPHAN_XATTRS]);
	if (!rc)
		rc = IDX_RUN(idx, idx->st[SID_DELETE_ORPHANS]);
	return rc < 0 ? rc : count;
}

int idx_purge_orphans(struct idx *idx, idx_extent_fn fn, void *arg)
{
	struct idx_extents xs = {0};
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_purge_txn(idx, &xs));
	idx_unlock(idx);
	/* Only after the commit: the caller frees what fn is given. */
	for (size_t i = 0; rc >= 0 && fn && i < xs.n; i++)
		fn(arg, &xs.v[i]);
	free(xs.v);
	return rc;
}

int idx_datafile_refs(struct idx *idx, uint32_t file_id, uint64_t *count)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_REFS];
	idx_bind_i64(st, 1, file_id);
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		*count = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == 0) {
		rc = -EIO; /* count(*) always yields a row */
	}
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

static int idx_readdir_txn(struct idx *idx, uint64_t dir, uint64_t after,
			   idx_dirent_fn fn, void *arg)
{
	sqlite3_stmt *st = idx->st[SID_READDIR];
	struct idx_attr a;
	int rc;

	rc = idx_dir(idx, dir, &a);
	if (rc || after > INT64_MAX)
		return rc;
	idx_bind_i64(st, 1, (int64_t)dir);
	idx_bind_i64(st, 2, (int64_t)after);
	while ((rc = IDX_STEP(idx, st)) == 1) {
		int64_t cookie = sqlite3_column_int64(st, IDX_ATTR_NCOLS);
		const char *name;

		rc = idx_row_attr(idx, st, &a);
		if (rc)
			break;
		name = (const char *)sqlite3_column_text(st,
							 IDX_ATTR_NCOLS + 1);
		if (!name) {
			rc = -ENOMEM;
			break;
		}
		if (fn(arg, name, &a, (uint64_t)cookie))
			break;
	}
	idx_done(st);
	return rc < 0 ? rc : 0;
}

/*
 * fn runs with idx->lock held and the statement active: it must not call
 * into the index. name is valid only during the call.
 */
int idx_readdir(struct idx *idx, uint64_t dir, uint64_t after, idx_dirent_fn fn,
		void *arg)
{
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 0);
	if (!rc)
		rc = idx_end(idx, idx_readdir_txn(idx, dir, after, fn, arg));
	idx_unlock(idx);
	return rc;
}

/* xattr names: 1..255 bytes, as Linux's setxattr(2) requires (-ERANGE). */
static int idx_check_xattr_name(const char *name)
{
	size_t len = strnlen(name, IDX_XATTR_NAME_MAX + 1);

	return len == 0 || len > IDX_XATTR_NAME_MAX ? -ERANGE : 0;
}

/* -ENOENT unless inode ino exists. */
static int idx_need_inode(struct idx *idx, uint64_t ino)
{
	struct idx_attr a;
	int rc = idx_inode(idx, ino, &a);

	return rc <= 0 ? (rc < 0 ? rc : -ENOENT) : 0;
}

static int idx_setxattr_txn(struct idx *idx, uint64_t ino, const char *name,
			    const void *value, size_t len, int flags)
{
	sqlite3_stmt *st;
	int rc;

	rc = idx_need_inode(idx, ino);
	if (rc)
		return rc;
	if (flags) {
		st = idx->st[SID_XATTR_GET];
		idx_bind_i64(st, 1, (int64_t)ino);
		idx_bind_text(st, 2, name);
		rc = IDX_STEP(idx, st);
		idx_done(st);
		if (rc < 0)
			return rc;
		if (rc && (flags & XATTR_CREATE))
			return -EEXIST;
		if (!rc && (flags & XATTR_REPLACE))
			return -ENODATA;
	}
	st = idx->st[SID_XATTR_SET];
	idx_bind_i64(st, 1, (int64_t)ino);
	idx_bind_text(st, 2, name);
	idx_bind_blob(st, 3, value, len);
	return IDX_RUN(idx, st);
}

int idx_setxattr(struct idx *idx, uint64_t ino, const char *name,
		 const void *value, size_t len, int flags)
{
	int rc = idx_check_xattr_name(name);

	if (rc)
		return rc;
	if (len > IDX_XATTR_SIZE_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE) ||
	    flags == (XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	assert(value || len == 0);
	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_setxattr_txn(idx, ino, name, value, len,
						   flags));
	idx_unlock(idx);
	return rc;
}

static int idx_getxattr_txn(struct idx *idx, uint64_t ino, const char *name,
			    void *buf, size_t size)
{
	sqlite3_stmt *st = idx->st[SID_XATTR_GET];
	int rc;

	idx_bind_i64(st, 1, (int64_t)ino);
	idx_bind_text(st, 2, name);
	rc = IDX_STEP(idx, st);
	if (rc == 0) {
		idx_done(st);
		rc = idx_need_inode(idx, ino);
		return rc ? rc : -ENODATA;
	}
	if (rc == 1) {
		const void *p = sqlite3_column_blob(st, 0);
		size_t len = (size_t)sqlite3_column_bytes(st, 0);

		if (len && !p) {
			rc = -ENOMEM;
		} else if (size > 0 && size < len) {
			rc = -ERANGE;
		} else {
			if (size > 0 && len)
				memcpy(buf, p, len);
			rc = (int)len;
		}
	}
	idx_done(st);
	return rc;
}

int idx_getxattr(struct idx *idx, uint64_t ino, const char *name, void *buf,
		 size_t size)
{
	int rc = idx_check_xattr_name(name);

	if (rc)
		return rc;
	idx_lock(idx);
	rc = idx_begin(idx, 0);
	if (!rc)
		rc = idx_end(idx, idx_getxattr_txn(idx, ino, name, buf, size));
	idx_unlock(idx);
	return rc;
}

static int idx_listxattr_txn(struct idx *idx, uint64_t ino, char *buf,
			     size_t size)
{
	sqlite3_stmt *st = idx->st[SID_XATTR_LIST];
	size_t total = 0;
	int rc;

	rc = idx_need_inode(idx, ino);
	if (rc)
		return rc;
	idx_bind_i64(st, 1, (int64_t)ino);
	while ((rc = IDX_STEP(idx, st)) == 1) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		size_t len = (size_t)sqlite3_column_bytes(st, 0) + 1;

		if (!name) {
			rc = -ENOMEM;
			break;
		}
		if (size > 0 && total + len > size) {
			rc = -ERANGE;
			break;
		}
		if (size > 0)
			memcpy(buf + total, name, len);
		total += len;
	}
	idx_done(st);
	if (rc < 0)
		return rc;
	return total > INT32_MAX ? -E2BIG : (int)total;
}

int idx_listxattr(struct idx *idx, uint64_t ino, char *buf, size_t size)
{
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 0);
	if (!rc)
		rc = idx_end(idx, idx_listxattr_txn(idx, ino, buf, size));
	idx_unlock(idx);
	return rc;
}

static int idx_removexattr_txn(struct idx *idx, uint64_t ino, const char *name)
{
	sqlite3_stmt *st = idx->st[SID_XATTR_DELETE];
	int rc;

	rc = idx_need_inode(idx, ino);
	if (rc)
		return rc;
	idx_bind_i64(st, 1, (int64_t)ino);
	idx_bind_text(st, 2, name);
	rc = IDX_RUN(idx, st);
	if (!rc && sqlite3_changes(idx->db) == 0)
		rc = -ENODATA;
	return rc;
}

int idx_removexattr(struct idx *idx, uint64_t ino, const char *name)
{
	int rc = idx_check_xattr_name(name);

	if (rc)
		return rc;
	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_removexattr_txn(idx, ino, name));
	idx_unlock(idx);
	return rc;
}

int idx_set_durable(struct idx *idx, int durable)
{
	int rc;

	idx_lock(idx);
	rc = idx_exec(idx, durable ? "PRAGMA synchronous = FULL"
				   : "PRAGMA synchronous = NORMAL");
	idx_unlock(idx);
	return rc;
}

int idx_sync(struct idx *idx)
{
	int rc;

	pthread_mutex_lock(&idx->ck_run);
	idx_lock(idx);
	/*
	 * A FULL checkpoint syncs the WAL, copies it into the database and
	 * syncs that: every commit so far survives a power cut.
	 */
	rc = sqlite3_wal_checkpoint_v2(idx->db, NULL, SQLITE_CHECKPOINT_FULL,
				       NULL, NULL);
	if (rc != SQLITE_OK)
		rc = idx_errno(idx, rc, __func__);
	idx_unlock(idx);
	pthread_mutex_unlock(&idx->ck_run);
	return rc;
}

int idx_touch(struct idx *idx, size_t n, const uint64_t *inos,
	      const int64_t *times_ns)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (rc == 0) {
		st = idx->st[SID_TOUCH];
		for (size_t i = 0; rc == 0 && i < n; i++) {
			idx_bind_i64(st, 1, (int64_t)inos[i]);
			idx_bind_i64(st, 2, times_ns[i]);
			rc = IDX_RUN(idx, st);
		}
		rc = idx_end(idx, rc);
	}
	idx_unlock(idx);
	return rc;
}

/* Runs a listing statement (bound by the caller) into out[0..max). */
static int idx_list_names(struct idx *idx, sqlite3_stmt *st,
			  struct idx_name *out, size_t max)
{
	size_t n = 0;
	int rc;

	while (n < max && (rc = IDX_STEP(idx, st)) == 1) {
		const unsigned char *name = sqlite3_column_text(st, 2);
		struct idx_name *e = &out[n++];

		e->ino = (uint64_t)sqlite3_column_int64(st, 0);
		e->parent = (uint64_t)sqlite3_column_int64(st, 1);
		snprintf(e->name, sizeof(e->name), "%s",
			 name ? (const char *)name : "");
		e->time_ns = sqlite3_column_int64(st, 3);
		e->size = (uint64_t)sqlite3_column_int64(st, 4);
		e->cookie = (uint64_t)sqlite3_column_int64(st, 5);
	}
	if (n == max)
		rc = 0;
	idx_done(st);
	return rc < 0 ? rc : (int)n;
}

/* Binds args[0..nargs) and max (the last parameter) to statement sid. */
static int idx_names_by(struct idx *idx, int sid, const int64_t *args,
			int nargs, struct idx_name *out, size_t max)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[sid];
	for (int i = 0; i < nargs; i++)
		idx_bind_i64(st, i + 1, args[i]);
	idx_bind_i64(st, nargs + 1, (int64_t)max);
	rc = idx_list_names(idx, st, out, max);
	idx_unlock(idx);
	return rc;
}

int idx_lru(struct idx *idx, int64_t after_ns, uint64_t after_ino,
	    struct idx_name *out, size_t max)
{
	const int64_t args[] = {after_ns, (int64_t)after_ino};

	return idx_names_by(idx, SID_LRU, args, 2, out, max);
}

int idx_tmp_names(struct idx *idx, uint64_t after, struct idx_name *out,
		  size_t max)
{
	const int64_t args[] = {(int64_t)after};

	return idx_names_by(idx, SID_TMP_NAMES, args, 1, out, max);
}

int idx_records_past(struct idx *idx, uint32_t file_id, uint64_t end,
		     struct idx_name *out, size_t max)
{
	const int64_t args[] = {file_id, (int64_t)end};

	return idx_names_by(idx, SID_RECORDS_PAST, args, 2, out, max);
}

int idx_extent_at(struct idx *idx, uint32_t file_id, uint64_t off)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_EXTENT_AT];
	idx_bind_i64(st, 1, file_id);
	idx_bind_i64(st, 2, (int64_t)off);
	rc = IDX_STEP(idx, st);
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

int idx_next_extent(struct idx *idx, uint32_t file_id, uint64_t off,
		    uint64_t *next)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_NEXT_EXTENT];
	idx_bind_i64(st, 1, file_id);
	idx_bind_i64(st, 2, (int64_t)off);
	rc = IDX_STEP(idx, st);
	if (rc == 1 && sqlite3_column_type(st, 0) == SQLITE_NULL)
		rc = 0;
	else if (rc == 1)
		*next = (uint64_t)sqlite3_column_int64(st, 0);
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

int idx_statfs(struct idx *idx, uint64_t *ninodes, uint64_t *nbytes)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_STATFS];
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		*ninodes = (uint64_t)sqlite3_column_int64(st, 0);
		*nbytes = (uint64_t)sqlite3_column_int64(st, 1);
		rc = 0;
	} else if (rc == 0) {
		log_err("%s: the stats row is missing", idx->path);
		rc = -EIO;
	}
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

static int idx_lookup_batch_txn(struct idx *idx, size_t n,
				const uint64_t *parents,
				const char *const *names, int *found,
				struct idx_attr *attrs)
{
	for (size_t i = 0; i < n; i++) {
		int rc = 0;

		if (idx_check_name(names[i]) == 0)
			rc = idx_find(idx, parents[i], names[i], &attrs[i],
				      NULL);
		if (rc < 0)
			return rc;
		found[i] = rc;
	}
	return 0;
}

int idx_lookup_batch(struct idx *idx, size_t n, const uint64_t *parents,
		     const char *const *names, int *found,
		     struct idx_attr *attrs)
{
	int rc;

	if (n == 0)
		return 0;
	idx_lock(idx);
	rc = idx_begin(idx, 0);
	if (!rc)
		rc = idx_end(idx, idx_lookup_batch_txn(idx, n, parents, names,
						       found, attrs));
	idx_unlock(idx);
	return rc;
}

static int idx_create_ino_txn(struct idx *idx, uint64_t parent,
			      const char *name, struct idx_attr *a,
			      uint64_t ino)
{
	sqlite3_stmt *st;
	struct idx_attr dir, old;
	int rc;

	rc = idx_dir(idx, parent, &dir);
	if (rc)
		return rc;
	if (dir.nlink == 0)
		return -ENOENT;
	rc = idx_find(idx, parent, name, &old, NULL);
	if (rc)
		return rc < 0 ? rc : -EEXIST;
	rc = idx_inode(idx, ino, &old);
	if (rc)
		return rc < 0 ? rc : -EEXIST;

	st = idx->st[SID_INSERT_INODE_AT];
	idx_bind_new_inode(st, a);
	idx_bind_i64(st, 9, (int64_t)ino);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;

	st = idx->st[SID_INSERT_DENTRY];
	idx_bind_i64(st, 1, (int64_t)parent);
	idx_bind_text(st, 2, name);
	idx_bind_i64(st, 3, (int64_t)ino);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	rc = idx_touch_dir(idx, parent, S_ISDIR(a->mode), a->mtime_ns);
	if (rc)
		return rc;
	a->ino = ino;
	return 0;
}

int idx_create_ino(struct idx *idx, uint64_t parent, const char *name,
		   struct idx_attr *attr, uint64_t ino)
{
	struct idx_attr a = *attr;
	int rc = idx_check_new_name(name);

	if (rc)
		return rc;
	if ((!S_ISREG(a.mode) && !S_ISDIR(a.mode)) || ino <= KV_ROOT_INO ||
	    ino > INT64_MAX)
		return -EINVAL;
	a.size = 0;
	a.nlink = S_ISDIR(a.mode) ? 2 : 1;
	a.ext = (struct kv_extent){0};

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx,
			     idx_create_ino_txn(idx, parent, name, &a, ino));
	idx_unlock(idx);
	if (!rc)
		*attr = a;
	return rc;
}

int idx_count(struct idx *idx, struct idx_counts *out)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(idx);
	st = idx->st[SID_COUNT];
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		*out = (struct idx_counts){
			.files = (uint64_t)sqlite3_column_int64(st, 0),
			.dirs = (uint64_t)sqlite3_column_int64(st, 1),
			.others = (uint64_t)sqlite3_column_int64(st, 2),
			.orphans = (uint64_t)sqlite3_column_int64(st, 3),
			.records = (uint64_t)sqlite3_column_int64(st, 4),
			.record_bytes = (uint64_t)sqlite3_column_int64(st, 5),
		};
		rc = 0;
	} else if (rc == 0) {
		rc = -EIO; /* an aggregate always yields a row */
	}
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

int idx_file_records(struct idx *idx, uint32_t file_id, uint64_t from,
		     struct idx_rec *out, size_t max)
{
	sqlite3_stmt *st;
	size_t n = 0;
	int rc = 0;

	if (from > INT64_MAX)
		return 0;
	idx_lock(idx);
	st = idx->st[SID_FILE_RECORDS];
	idx_bind_i64(st, 1, file_id);
	idx_bind_i64(st, 2, (int64_t)from);
	idx_bind_i64(st, 3, (int64_t)(max < INT32_MAX ? max : INT32_MAX));
	while (n < max && (rc = IDX_STEP(idx, st)) == 1) {
		out[n++] = (struct idx_rec){
			.ino = (uint64_t)sqlite3_column_int64(st, 0),
			.ext = {.file_id =
					(uint32_t)sqlite3_column_int64(st, 1),
				.off = (uint64_t)sqlite3_column_int64(st, 2),
				.hdr_len =
					(uint32_t)sqlite3_column_int64(st, 3),
				.len = (uint64_t)sqlite3_column_int64(st, 4)},
		};
	}
	idx_done(st);
	idx_unlock(idx);
	return rc < 0 ? rc : (int)n;
}

static int idx_move_txn(struct idx *idx, const struct idx_move *mv, size_t n)
{
	sqlite3_stmt *st = idx->st[SID_MOVE_RECORD];

	for (size_t i = 0; i < n; i++) {
		int rc;

		idx_bind_i64(st, 1, (int64_t)mv[i].ino);
		idx_bind_i64(st, 2, mv[i].from.file_id);
		idx_bind_i64(st, 3, (int64_t)mv[i].from.off);
		idx_bind_i64(st, 4, mv[i].to.file_id);
		idx_bind_i64(st, 5, (int64_t)mv[i].to.off);
		idx_bind_i64(st, 6, mv[i].from.hdr_len);
		idx_bind_i64(st, 7, (int64_t)mv[i].from.len);
		rc = IDX_RUN(idx, st);
		if (rc)
			return rc;
		if (sqlite3_changes(idx->db) != 1) {
			log_warn("%s: inode %" PRIu64
				 " has no record at %" PRIu32 "+%" PRIu64
				 " any more; no record moved",
				 idx->path, mv[i].ino, mv[i].from.file_id,
				 mv[i].from.off);
			return -ESTALE;
		}
	}
	return 0;
}

int idx_move_records(struct idx *idx, const struct idx_move *mv, size_t n)
{
	int rc;

	for (size_t i = 0; i < n; i++)
		if (mv[i].to.file_id == 0 || mv[i].from.file_id == 0 ||
		    mv[i].to.hdr_len != mv[i].from.hdr_len ||
		    mv[i].to.len != mv[i].from.len || mv[i].to.off > INT64_MAX)
			return -EINVAL;
	if (n == 0)
		return 0;
	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (!rc)
		rc = idx_end(idx, idx_move_txn(idx, mv, n));
	idx_unlock(idx);
	return rc;
}

/* ---- recovery horizons ---- */

/*
 * Made on first use: databases of earlier versions lack it, and a missing
 * table reads as "no horizons" (recovery walks those files whole).
 */
static const char idx_horizons_sql[] = "CREATE TABLE IF NOT EXISTS horizons ("
				       " file_id INTEGER PRIMARY KEY,"
				       " off INTEGER NOT NULL)";

int idx_horizons_get(struct idx *idx, uint32_t *ids, uint64_t *offs, size_t max)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0;
	int rc;

	idx_lock(idx);
	rc = sqlite3_prepare_v2(idx->db,
				"SELECT file_id, off FROM horizons "
				"ORDER BY file_id",
				-1, &st, NULL);
	if (rc != SQLITE_OK) {
		/* No such table: nothing recorded yet. */
		rc = 0;
		goto out;
	}
	while (n < max && (rc = IDX_STEP(idx, st)) == 1) {
		int64_t id = sqlite3_column_int64(st, 0);
		int64_t off = sqlite3_column_int64(st, 1);

		if (id <= 0 || id > UINT32_MAX || off < 0)
			continue;
		ids[n] = (uint32_t)id;
		offs[n++] = (uint64_t)off;
	}
	rc = rc < 0 ? rc : (int)n;
out:
	sqlite3_finalize(st);
	idx_unlock(idx);
	return rc;
}

/* Runs sql (binding ?1 = id, ?2 = off) for each pair, in one transaction. */
static int idx_horizons_each(struct idx *idx, const char *sql, size_t n,
			     const uint32_t *ids, const uint64_t *offs)
{
	sqlite3_stmt *st = NULL;
	int rc;

	idx_lock(idx);
	rc = idx_begin(idx, 1);
	if (rc == 0)
		rc = idx_exec(idx, idx_horizons_sql);
	if (rc == 0) {
		int prc = sqlite3_prepare_v2(idx->db, sql, -1, &st, NULL);

		rc = prc == SQLITE_OK ? 0 : IDX_ERR(idx, prc);
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		idx_bind_i64(st, 1, ids[i]);
		if (offs)
			idx_bind_i64(st, 2, (int64_t)offs[i]);
		rc = IDX_RUN(idx, st);
	}
	sqlite3_finalize(st);
	rc = idx_end(idx, rc);
	idx_unlock(idx);
	return rc;
}

int idx_horizons_put(struct idx *idx, size_t n, const uint32_t *ids,
		     const uint64_t *offs)
{
	return idx_horizons_each(idx,
				 "INSERT OR REPLACE INTO horizons "
				 "(file_id, off) VALUES (?1, ?2)",
				 n, ids, offs);
}

int idx_horizons_drop(struct idx *idx, size_t n, const uint32_t *ids)
{
	return idx_horizons_each(idx, "DELETE FROM horizons WHERE file_id = ?1",
				 n, ids, NULL);
}
