/* SPDX-License-Identifier: MIT */
/*
 * The database layout of the index: creating it in a new file, checking
 * that an existing file is a kvfs index of a format version we know, and
 * upgrading an older version when idx_open() opens it. The statements that
 * use the tables are in ns.c, xattr.c and records.c; the connection is in
 * index.c.
 *
 * Format versions (PRAGMA user_version; kvfs(5) describes the layout):
 *
 *   1  inodes, dentries, xattrs, stats and their indexes and triggers.
 *      Later kvfs releases of version 1 added the horizons table on first
 *      use without changing user_version, so a version-1 index may or may
 *      not have it.
 *   2  version 1 plus the horizons table, always present.
 *   3  version 2 whose inodes may be extent files (core/extfile.h):
 *      file_id 0, hdr_len -2 (KV_EXT_LARGE), rec_off the inode. The
 *      tables are the same; a release that knows only version 2 would
 *      take such a file for one with no record, so it must refuse.
 *   4  version 3 plus inodes.rdev: the device number of character and
 *      block device nodes, which kvfs makes since this version (with
 *      FIFOs and sockets, and hard links: several dentries per file).
 *   5  version 4 whose extent files may keep their header in a file of
 *      its own beside bytes at their own offsets (core/extfile.h). The
 *      tables are the same; a release that knows only version 4 would
 *      find no header in such a file and drop it, so it must refuse.
 *
 * idx_open() creates a new index at version 5, upgrades a version-1 to -4
 * index to 5 in one transaction (creating horizons when it is missing,
 * adding the rdev column; every other table is left as it is) and logs
 * one line saying so, and refuses a version above 5 with
 * -EPROTONOSUPPORT. A version below 1, or a
 * version whose tables are missing, is not a kvfs database (-EMEDIUMTYPE).
 *
 * Layout, format version 5:
 *
 *   PRAGMA application_id = 0x4b564653 ("KVFS")
 *   PRAGMA user_version   = 5 (IDX_FORMAT_VERSION)
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
 *     lru_ns    last use for eviction (idx_touch), not the visible atime
 *     rdev      st_rdev of a character or block device node, else 0
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
 *   horizons    file_id INTEGER PRIMARY KEY -> off: every record of that
 *               data file below off is committed or abandoned, so crash
 *               recovery reads the file from there (idx_horizons_*)
 *   indexes     dentries_ino (dentries.ino: a directory's only dentry, to
 *               walk up to the root), dentries_parent (dentries.parent, with
 *               the rowid: readdir in cookie order), inodes_file_id
 *               (inodes.file_id, rec_off: data-file references and the
 *               record at an offset, for crash recovery), inodes_orphans
 *               (inodes.ino WHERE nlink = 0: start-up purge without a scan),
 *               inodes_lru (lru_ns, ino of inodes with a record: eviction
 *               order), dentries_tmp (dentries.id of names ending in
 *               ".tmp": the stale temp-file sweep)
 *
 * The root directory has no dentry. A directory has exactly one dentry; a
 * regular file, FIFO, socket, device node or symlink may have several
 * (hard links: nlink counts them).
 *
 * Locking: every function here runs inside idx_open() with idx->lock held
 * and idx->opening set; other processes are kept out by SQLite's own
 * locks (BEGIN IMMEDIATE).
 */
#include "index_int.h"

#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "log.h"

/* Version 2 adds this table; version 1 made it on first use. */
#define IDX_HORIZONS_SQL                                                       \
	"CREATE TABLE IF NOT EXISTS horizons ("                                \
	" file_id INTEGER PRIMARY KEY,"                                        \
	" off INTEGER NOT NULL);"

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
	" lru_ns INTEGER NOT NULL DEFAULT 0,"
	" rdev INTEGER NOT NULL DEFAULT 0);"
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
	"INSERT INTO stats (id, ninodes, nbytes) VALUES (1, 0, "
	"0);" IDX_HORIZONS_SQL "CREATE INDEX dentries_ino ON dentries (ino);"
	"CREATE INDEX dentries_parent ON dentries (parent);"
	"CREATE INDEX inodes_file_id ON inodes (file_id, rec_off);"
	"CREATE INDEX inodes_orphans ON inodes (ino) WHERE nlink = 0;"
	"CREATE INDEX inodes_lru ON inodes (lru_ns, ino) WHERE file_id != 0;"
	"CREATE INDEX dentries_tmp ON dentries (id) WHERE name LIKE "
	"'%.tmp';" IDX_PENDING_INDEX_SQL
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

/*
 * How many of the tables format version ver needs the file has, into
 * *have, and how many that is, into *need.
 */
static int idx_count_tables(struct idx *idx, int64_t ver, int64_t *have,
			    int *need)
{
	int64_t nhz = 0;
	int rc;

	rc = idx_query_int(idx,
			   "SELECT count(*) FROM sqlite_schema "
			   "WHERE type = 'table' AND name IN "
			   "('inodes', 'dentries', 'xattrs', 'stats')",
			   have);
	*need = 4;
	if (!rc && ver >= 2) {
		rc = idx_query_int(idx,
				   "SELECT count(*) FROM sqlite_schema "
				   "WHERE type = 'table' AND name = 'horizons'",
				   &nhz);
		*have += nhz;
		*need = 5;
	}
	return rc;
}

int idx_check_format(struct idx *idx, int64_t *version)
{
	int64_t app, ver, nobj, ntab;
	int rc, need;

	rc = idx_query_int(idx, "PRAGMA application_id", &app);
	if (!rc)
		rc = idx_query_int(idx, "PRAGMA user_version", &ver);
	if (!rc)
		rc = idx_query_int(idx, "SELECT count(*) FROM sqlite_schema",
				   &nobj);
	if (rc)
		return rc;
	*version = 0;
	if (app == 0 && ver == 0 && nobj == 0)
		return 0;
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
	rc = idx_count_tables(idx, ver, &ntab, &need);
	if (rc)
		return rc;
	if (ver < 1 || ntab != need) {
		log_err("%s: not a kvfs database (format version %" PRId64
			", %" PRId64 " of %d kvfs tables)",
			idx->path, ver, ntab, need);
		return -EMEDIUMTYPE;
	}
	*version = ver;
	return 0;
}

/* Rolls back what the open transaction did, if it is still open. */
static void idx_schema_rollback(struct idx *idx)
{
	if (!sqlite3_get_autocommit(idx->db))
		sqlite3_exec(idx->db, "ROLLBACK", NULL, NULL, NULL);
}

int idx_create_schema(struct idx *idx, uint32_t root_mode, uint32_t root_uid,
		      uint32_t root_gid)
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
		idx_bind_args(st, IDX_ARGS(KV_ROOT_INO,
					   S_IFDIR | (root_mode & 07777),
					   root_uid, root_gid, now));
		rc = IDX_RUN(idx, st);
	}
	sqlite3_finalize(st);
	if (!rc)
		rc = idx_exec(idx, "COMMIT");
	if (rc)
		idx_schema_rollback(idx);
	if (!rc)
		log_info("%s: created a new index", idx->path);
	return rc;
}

int idx_upgrade_schema(struct idx *idx)
{
	char pragma[64];
	int64_t ver = 0, has_rdev = 0;
	int rc;

	rc = idx_exec(idx, "BEGIN IMMEDIATE");
	if (!rc)
		rc = idx_query_int(idx, "PRAGMA user_version", &ver);
	/* Another process may have upgraded it since idx_check_format(). */
	if (!rc && ver >= IDX_FORMAT_VERSION) {
		rc = idx_exec(idx, "COMMIT");
		if (rc)
			idx_schema_rollback(idx);
		return rc;
	}
	snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d;",
		 IDX_FORMAT_VERSION);
	/*
	 * 1 -> 2: the horizons table, which version 1 made on first use;
	 * 2 -> 3: nothing but the number; 3 -> 4: the rdev column; 4 -> 5:
	 * nothing but the number.
	 */
	if (!rc && ver < 2)
		rc = idx_exec(idx, IDX_HORIZONS_SQL);
	/* (A file whose number was lowered by hand may have it already.) */
	if (!rc && ver < 4)
		rc = idx_query_int(idx,
				   "SELECT count(*) FROM pragma_table_info("
				   "'inodes') WHERE name = 'rdev'",
				   &has_rdev);
	if (!rc && ver < 4 && !has_rdev)
		rc = idx_exec(idx, "ALTER TABLE inodes ADD COLUMN rdev INTEGER "
				   "NOT NULL DEFAULT 0;");
	if (!rc)
		rc = idx_exec(idx, pragma);
	if (!rc)
		rc = idx_exec(idx, "COMMIT");
	if (rc) {
		idx_schema_rollback(idx);
		return rc;
	}
	log_info("%s: upgraded the index from format version %" PRId64 " to %d",
		 idx->path, ver, IDX_FORMAT_VERSION);
	return 0;
}
