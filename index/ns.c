/* SPDX-License-Identifier: MIT */
/*
 * The namespace half of the index (index.h): inodes and directory entries,
 * lookup, create, readlink, setattr, unlink, rename, readdir, link counts,
 * orphans (release and purge, which delete the inode's xattrs with it),
 * statfs and idx_count. Where a file's bytes are (records, extents, CRCs)
 * is records.c; reading and writing extended attributes is xattr.c.
 *
 * Link counts follow ext4: a file's nlink counts its dentries, a
 * directory's is 2 plus its subdirectories, and a removed directory drops
 * to 0 at once. The root directory (KV_ROOT_INO) has no dentry; every
 * other directory has exactly one, which idx_is_ancestor() walks.
 *
 * Locking: every public function takes idx->lock for its whole call (via
 * idx_enter()/idx_leave() for a transaction); the static helpers run with
 * it held, inside the caller's transaction.
 */
#include "index_int.h"

#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* A symlink target is at most PATH_MAX - 1 bytes, as the VFS enforces. */
#define IDX_TARGET_MAX 4095
/* Deeper than any real tree; reaching it means the dentries form a loop. */
#define IDX_MAX_DEPTH (1 << 20)

const char *const idx_ns_sql[IDX_NSTMT] = {
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
	/* The same with only what getdents(2) gives: ino, type, name. */
	[SID_READDIR_NAMES] = "SELECT i.ino, i.mode, d.id, d.name "
			      "FROM dentries AS d "
			      "LEFT JOIN inodes AS i ON i.ino = d.ino "
			      "WHERE d.parent = ?1 AND d.id > ?2 ORDER BY d.id",
	/*
	 * A new regular file is "pending" (hdr_len -1, no record) until its
	 * first save (idx_set_extent) : see idx_purge_pending().
	 */
	[SID_INSERT_INODE] = "INSERT INTO inodes (mode, uid, gid, nlink, size, "
			     "atime_ns, mtime_ns, ctime_ns, target, hdr_len, "
			     "rdev) "
			     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
			     "-((?1 & 0xF000) = 0x8000), ?10)",
	/* idx_create_ino(): the caller picks the inode number (?9). */
	[SID_INSERT_INODE_AT] = "INSERT INTO inodes (ino, mode, uid, gid, "
				"nlink, size, atime_ns, mtime_ns, ctime_ns, "
				"rdev, target) "
				"VALUES (?9, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
				"?10, ?11)",
	[SID_INSERT_DENTRY] = "INSERT INTO dentries (parent, name, ino) "
			      "VALUES (?1, ?2, ?3)",
	[SID_TOUCH_DIR] = "UPDATE inodes SET nlink = nlink + ?2, "
			  "mtime_ns = ?3, ctime_ns = ?3 WHERE ino = ?1",
	[SID_SET_NLINK] = "UPDATE inodes SET nlink = ?2, ctime_ns = ?3 "
			  "WHERE ino = ?1",
	[SID_SET_CTIME] = "UPDATE inodes SET ctime_ns = ?2 WHERE ino = ?1",
	/* The type bits never change: only permission bits come from ?2. */
	[SID_SETATTR] = "UPDATE inodes SET mode = (mode & 0xF000) | "
			"(?2 & 0x0FFF), uid = ?3, gid = ?4, "
			"atime_ns = ?6, mtime_ns = ?7, ctime_ns = ?8 "
			"WHERE ino = ?1",
	[SID_READLINK] = "SELECT mode, target FROM inodes WHERE ino = ?1",
	[SID_DELETE_DENTRY] = "DELETE FROM dentries WHERE id = ?1",
	[SID_MOVE_DENTRY] = "UPDATE dentries SET parent = ?2, name = ?3 "
			    "WHERE id = ?1",
	[SID_SET_DENTRY_INO] = "UPDATE dentries SET ino = ?2 WHERE id = ?1",
	[SID_HAS_CHILD] = "SELECT 1 FROM dentries WHERE parent = ?1 LIMIT 1",
	[SID_PARENT_OF] = "SELECT parent FROM dentries WHERE ino = ?1 LIMIT 1",
	[SID_DELETE_INODE] = "DELETE FROM inodes WHERE ino = ?1",
	/* An inode's xattrs go with it (idx_release_inode, the purge). */
	[SID_DELETE_XATTRS] = "DELETE FROM xattrs WHERE ino = ?1",
	[SID_ORPHANS] = "SELECT file_id, rec_off, hdr_len, rec_len "
			"FROM inodes WHERE nlink = 0",
	[SID_DELETE_ORPHAN_XATTRS] = "DELETE FROM xattrs WHERE ino IN "
				     "(SELECT ino FROM inodes "
				     "WHERE nlink = 0)",
	[SID_DELETE_ORPHANS] = "DELETE FROM inodes WHERE nlink = 0",
	/* idx_purge_pending(): files whose first save never landed. */
	[SID_PENDING_NAMES] = "SELECT d.parent, d.name FROM dentries AS d "
			      "JOIN inodes AS i ON i.ino = d.ino "
			      "WHERE " IDX_PENDING,
	[SID_DELETE_PENDING_NAMES] =
		"DELETE FROM dentries WHERE ino IN "
		"(SELECT ino FROM inodes AS i WHERE " IDX_PENDING ")",
	[SID_UNLINK_PENDING] =
		"UPDATE inodes AS i SET nlink = 0 WHERE " IDX_PENDING,
	[SID_STATFS] = "SELECT ninodes, nbytes FROM stats WHERE id = 1",
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
};

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
		.rdev = (uint64_t)sqlite3_column_int64(st, 13),
	};
	/*
	 * No record: hdr_len may be the pending mark (SID_INSERT_INODE); a
	 * pending file with a size is a stub (idx_create_many).
	 */
	if (!a->ext.file_id && a->ext.hdr_len != KV_EXT_LARGE)
		a->ext.hdr_len = a->ext.hdr_len == UINT32_MAX && a->size > 0
					 ? KV_EXT_STUB
					 : 0;
	return 0;
}

int idx_inode(struct idx *idx, uint64_t ino, struct idx_attr *a)
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
	return idx_row(idx, SID_HAS_CHILD, IDX_ARGS((int64_t)dir), NULL, 0,
		       __func__);
}

/* Adds delta to directory dir's nlink and sets its mtime and ctime. */
static int idx_touch_dir(struct idx *idx, uint64_t dir, int delta,
			 int64_t now_ns)
{
	return IDX_RUN_SID(idx, SID_TOUCH_DIR, (int64_t)dir, delta, now_ns);
}

static int idx_set_nlink(struct idx *idx, uint64_t ino, uint32_t nlink,
			 int64_t now_ns)
{
	return IDX_RUN_SID(idx, SID_SET_NLINK, (int64_t)ino, nlink, now_ns);
}

static int idx_set_ctime(struct idx *idx, uint64_t ino, int64_t now_ns)
{
	return IDX_RUN_SID(idx, SID_SET_CTIME, (int64_t)ino, now_ns);
}

static int idx_delete_dentry(struct idx *idx, int64_t id)
{
	return IDX_RUN_SID(idx, SID_DELETE_DENTRY, id);
}

/*
 * Whether directory anc is dir or one of dir's ancestors: 1, 0 or -errno.
 * Walks the single dentry of each directory up to the root.
 */
static int idx_is_ancestor(struct idx *idx, uint64_t anc, uint64_t dir)
{
	uint64_t cur = dir;
	int64_t parent;
	int rc;

	for (int depth = 0; depth < IDX_MAX_DEPTH; depth++) {
		if (cur == anc)
			return 1;
		if (cur == KV_ROOT_INO)
			return 0;
		rc = idx_row(idx, SID_PARENT_OF, IDX_ARGS((int64_t)cur),
			     &parent, 1, __func__);
		if (rc <= 0)
			return rc; /* a removed directory has no parent */
		cur = (uint64_t)parent;
	}
	log_err("%s: directory %" PRIu64 " is in a loop of dentries", idx->path,
		dir);
	return -EIO;
}

int idx_lookup(struct idx *idx, uint64_t parent, const char *name,
	       struct idx_attr *out)
{
	int rc = idx_check_name(name);

	if (rc)
		return rc;
	idx_lock_read(idx);
	rc = idx_find(idx, parent, name, out, NULL);
	idx_unlock(idx);
	if (rc == 0)
		return -ENOENT;
	return rc < 0 ? rc : 0;
}

int idx_getattr(struct idx *idx, uint64_t ino, struct idx_attr *out)
{
	int rc;

	idx_lock_read(idx);
	rc = idx_inode(idx, ino, out);
	idx_unlock(idx);
	if (rc == 0)
		return -ENOENT;
	return rc < 0 ? rc : 0;
}

/*
 * Whether name may be made in directory parent: 0, -ENOENT (no such
 * directory, or one removed while still open, like ext4), -ENOTDIR,
 * -EEXIST or -errno.
 */
static int idx_can_add(struct idx *idx, uint64_t parent, const char *name)
{
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
	return 0;
}

/* Binds ?1..?8 of an inode insert: mode, uid, gid, nlink, size, times. */
static void idx_bind_new_inode(sqlite3_stmt *st, const struct idx_attr *a)
{
	idx_bind_args(st, IDX_ARGS(a->mode, a->uid, a->gid, a->nlink,
				   (int64_t)a->size, a->atime_ns, a->mtime_ns,
				   a->ctime_ns));
	/* Only device nodes have one (st_rdev). */
	idx_bind_i64(st, 10,
		     S_ISCHR(a->mode) || S_ISBLK(a->mode) ? (int64_t)a->rdev
							  : 0);
}

/*
 * Gives the new inode a (number ino) its dentry (parent, name) and counts
 * it in parent; a->ino is set on success. Errors are logged as caller's.
 */
static int idx_add_dentry(struct idx *idx, uint64_t parent, const char *name,
			  struct idx_attr *a, uint64_t ino, const char *caller)
{
	sqlite3_stmt *st = idx->st[SID_INSERT_DENTRY];
	int rc;

	idx_bind_i64(st, 1, (int64_t)parent);
	idx_bind_text(st, 2, name);
	idx_bind_i64(st, 3, (int64_t)ino);
	rc = idx_run(idx, st, caller);
	if (!rc)
		rc = idx_touch_dir(idx, parent, S_ISDIR(a->mode), a->mtime_ns);
	if (!rc)
		a->ino = ino;
	return rc;
}

static int idx_create_txn(struct idx *idx, uint64_t parent, const char *name,
			  struct idx_attr *a, const char *target)
{
	sqlite3_stmt *st;
	int rc;

	rc = idx_can_add(idx, parent, name);
	if (rc)
		return rc;
	st = idx->st[SID_INSERT_INODE];
	idx_bind_new_inode(st, a);
	idx_bind_text(st, 9, target);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	return idx_add_dentry(idx, parent, name, a,
			      (uint64_t)sqlite3_last_insert_rowid(idx->db),
			      __func__);
}

static int idx_create_ino_txn(struct idx *idx, uint64_t parent,
			      const char *name, struct idx_attr *a,
			      const char *target, uint64_t ino)
{
	sqlite3_stmt *st;
	struct idx_attr old;
	int rc;

	rc = idx_can_add(idx, parent, name);
	if (rc)
		return rc;
	rc = idx_inode(idx, ino, &old);
	if (rc)
		return rc < 0 ? rc : -EEXIST;
	st = idx->st[SID_INSERT_INODE_AT];
	idx_bind_new_inode(st, a);
	idx_bind_i64(st, 9, (int64_t)ino);
	idx_bind_text(st, 11, target);
	rc = IDX_RUN(idx, st);
	if (rc)
		return rc;
	return idx_add_dentry(idx, parent, name, a, ino, __func__);
}

/*
 * Creates inode a (number ino; 0: the next free one) named (parent, name)
 * in one transaction. Sets its link count and no record first; on success
 * copies a, its number filled in, to *attr.
 */
static int idx_create_in(struct idx *idx, uint64_t parent, const char *name,
			 struct idx_attr *attr, struct idx_attr *a,
			 const char *target, uint64_t ino)
{
	int rc;

	a->nlink = S_ISDIR(a->mode) ? 2 : 1;
	a->ext = (struct kv_extent){0};
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, ino ? idx_create_ino_txn(idx, parent, name,
							     a, target, ino)
					: idx_create_txn(idx, parent, name, a,
							 target));
	if (!rc)
		*attr = *a;
	return rc;
}

/*
 * The size of a new inode of a's type (a symlink's is its target's length;
 * *target is cleared for the others). 0, -EINVAL or -ENAMETOOLONG.
 */
static int idx_new_size(struct idx_attr *a, const char **target)
{
	switch (a->mode & S_IFMT) {
	case S_IFLNK:
		if (!*target)
			return -EINVAL;
		if (strnlen(*target, IDX_TARGET_MAX + 1) > IDX_TARGET_MAX)
			return -ENAMETOOLONG;
		a->size = strlen(*target);
		return 0;
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		*target = NULL;
		a->size = 0;
		return 0;
	default:
		return -EINVAL;
	}
}

/* idx_create() with the inode number ino, or the next free one (0). */
static int idx_create_as(struct idx *idx, uint64_t parent, const char *name,
			 struct idx_attr *attr, const char *target,
			 uint64_t ino)
{
	struct idx_attr a = *attr;
	int rc = idx_check_new_name(name);

	if (!rc)
		rc = idx_new_size(&a, &target);
	if (rc)
		return rc;
	return idx_create_in(idx, parent, name, attr, &a, target, ino);
}

int idx_create(struct idx *idx, uint64_t parent, const char *name,
	       struct idx_attr *attr, const char *target)
{
	return idx_create_as(idx, parent, name, attr, target, 0);
}

int idx_create_many(struct idx *idx, uint64_t parent, size_t n,
		    const char *const *names, struct idx_attr *attrs)
{
	int rc, made = 0;

	rc = idx_enter(idx, 1);
	if (rc)
		return rc;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct idx_attr *a = &attrs[i];
		int r = idx_check_new_name(names[i]);

		if (r == 0 && !S_ISREG(a->mode) && !S_ISDIR(a->mode))
			r = -EINVAL;
		a->nlink = S_ISDIR(a->mode) ? 2 : 1;
		a->ext = (struct kv_extent){0};
		if (S_ISDIR(a->mode))
			a->size = 0;
		if (r == 0)
			r = idx_create_txn(idx, parent, names[i], a, NULL);
		if (r == 0 && S_ISREG(a->mode) && a->size > 0)
			a->ext.hdr_len = KV_EXT_STUB;
		if (r == 0)
			made++;
		else
			a->ino = 0;
		/* Only the transaction's own failures end it. */
		if (r < 0 && r != -EEXIST && r != -EINVAL && r != -ENAMETOOLONG)
			rc = r;
	}
	rc = idx_leave(idx, rc);
	return rc < 0 ? rc : made;
}

int idx_create_ino(struct idx *idx, uint64_t parent, const char *name,
		   struct idx_attr *attr, const char *target, uint64_t ino)
{
	if (ino <= KV_ROOT_INO || ino > INT64_MAX)
		return -EINVAL;
	return idx_create_as(idx, parent, name, attr, target, ino);
}

static int idx_link_txn(struct idx *idx, uint64_t ino, uint64_t parent,
			const char *name, int64_t now_ns, struct idx_attr *a)
{
	sqlite3_stmt *st = idx->st[SID_INSERT_DENTRY];
	int rc = idx_inode(idx, ino, a);

	if (rc == 0 || (rc > 0 && a->nlink == 0))
		return -ENOENT;
	if (rc < 0)
		return rc;
	if (S_ISDIR(a->mode))
		return -EPERM;
	if (a->nlink >= IDX_LINK_MAX)
		return -EMLINK;
	rc = idx_can_add(idx, parent, name);
	if (rc)
		return rc;
	idx_bind_i64(st, 1, (int64_t)parent);
	idx_bind_text(st, 2, name);
	idx_bind_i64(st, 3, (int64_t)ino);
	rc = idx_run(idx, st, __func__);
	if (!rc)
		rc = idx_touch_dir(idx, parent, 0, now_ns);
	if (!rc)
		rc = idx_set_nlink(idx, ino, a->nlink + 1, now_ns);
	if (!rc) {
		a->nlink++;
		a->ctime_ns = now_ns;
	}
	return rc;
}

int idx_link(struct idx *idx, uint64_t ino, uint64_t parent, const char *name,
	     int64_t now_ns, struct idx_attr *out)
{
	struct idx_attr a;
	int rc = idx_check_new_name(name);

	if (rc)
		return rc;
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(
			idx, idx_link_txn(idx, ino, parent, name, now_ns, &a));
	if (!rc)
		*out = a;
	return rc;
}

int idx_readlink(struct idx *idx, uint64_t ino, char *buf, size_t len)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock_read(idx);
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
	int rc;

	rc = idx_enter(idx, 1);
	if (rc)
		return rc;
	rc = IDX_RUN_SID(idx, SID_SETATTR, (int64_t)attr->ino, attr->mode,
			 attr->uid, attr->gid, (int64_t)attr->size,
			 attr->atime_ns, attr->mtime_ns, attr->ctime_ns);
	if (!rc && sqlite3_changes(idx->db) == 0)
		rc = -ENOENT;
	return idx_leave(idx, rc);
}

/* expect: the inode the name must mean (-ESTALE otherwise), 0 for any. */
static int idx_unlink_txn(struct idx *idx, uint64_t parent, const char *name,
			  int rmdir, uint64_t expect, int64_t now_ns,
			  uint64_t *ino, uint32_t *nlink)
{
	struct idx_attr dir, a;
	uint32_t left;
	int64_t id = 0;
	int isdir, rc;

	rc = idx_dir(idx, parent, &dir);
	if (rc)
		return rc;
	rc = idx_find(idx, parent, name, &a, &id);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	if (expect && a.ino != expect)
		return -ESTALE;
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

static int idx_unlink_common(struct idx *idx, uint64_t parent, const char *name,
			     int rmdir, uint64_t expect, int64_t now_ns,
			     uint64_t *ino, uint32_t *nlink)
{
	uint64_t i = 0;
	uint32_t n = 0;
	int rc = idx_check_name(name);

	if (rc)
		return rc;
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_unlink_txn(idx, parent, name, rmdir,
						   expect, now_ns, &i, &n));
	if (!rc) {
		*ino = i;
		*nlink = n;
	}
	return rc;
}

int idx_unlink(struct idx *idx, uint64_t parent, const char *name, int rmdir,
	       int64_t now_ns, uint64_t *ino, uint32_t *nlink)
{
	return idx_unlink_common(idx, parent, name, rmdir, 0, now_ns, ino,
				 nlink);
}

int idx_unlink_ino(struct idx *idx, uint64_t parent, const char *name,
		   uint64_t ino, int64_t now_ns, uint32_t *nlink)
{
	uint64_t i;

	if (ino == 0)
		return -EINVAL;
	return idx_unlink_common(idx, parent, name, 0, ino, now_ns, &i, nlink);
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
	int src_dir = S_ISDIR(src->mode), dst_dir = S_ISDIR(dst->mode);
	int delta = 0, rc;

	rc = IDX_RUN_SID(idx, SID_SET_DENTRY_INO, src_id, (int64_t)dst->ino);
	if (rc)
		return rc;
	rc = IDX_RUN_SID(idx, SID_SET_DENTRY_INO, dst_id, (int64_t)src->ino);
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
	int64_t src_id = 0, dst_id = 0;
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
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_rename_txn(idx, &op));
	if (!rc) {
		*replaced = op.replaced;
		*replaced_nlink = op.replaced_nlink;
	}
	return rc;
}

static int idx_release_txn(struct idx *idx, uint64_t ino, struct kv_extent *ext)
{
	struct idx_attr a;
	int rc;

	rc = idx_inode(idx, ino, &a);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	if (a.nlink > 0)
		return -EBUSY;
	rc = IDX_RUN_SID(idx, SID_DELETE_XATTRS, (int64_t)ino);
	if (rc)
		return rc;
	rc = IDX_RUN_SID(idx, SID_DELETE_INODE, (int64_t)ino);
	if (!rc)
		*ext = a.ext;
	return rc;
}

int idx_release_inode(struct idx *idx, uint64_t ino, struct kv_extent *ext)
{
	struct kv_extent e = {0};
	int rc;

	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_release_txn(idx, ino, &e));
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

	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_purge_txn(idx, &xs));
	/* Only after the commit: the caller frees what fn is given. */
	for (size_t i = 0; rc >= 0 && fn && i < xs.n; i++)
		fn(arg, &xs.v[i]);
	free(xs.v);
	return rc;
}

/* Unnames every pending file (reporting each to fn first); their count. */
static int idx_purge_pending_txn(struct idx *idx, idx_name_fn fn, void *arg)
{
	sqlite3_stmt *st = idx->st[SID_PENDING_NAMES];
	int count = 0, rc;

	/*
	 * Pending files are few: their own index finds them (IDX_PENDING).
	 * Made here for an index written by an older kvfs (once: a scan),
	 * which ignores it.
	 */
	rc = idx_exec(idx, IDX_PENDING_INDEX_SQL);
	if (rc < 0)
		return rc;
	while ((rc = IDX_STEP(idx, st)) == 1) {
		count++;
		if (fn)
			fn(arg, (uint64_t)sqlite3_column_int64(st, 0),
			   (const char *)sqlite3_column_text(st, 1));
	}
	idx_done(st);
	if (rc < 0)
		return rc;
	rc = IDX_RUN(idx, idx->st[SID_DELETE_PENDING_NAMES]);
	if (!rc)
		rc = IDX_RUN(idx, idx->st[SID_UNLINK_PENDING]);
	return rc < 0 ? rc : count;
}

int idx_purge_pending(struct idx *idx, idx_name_fn fn, void *arg)
{
	int rc = idx_enter(idx, 1);

	if (!rc)
		rc = idx_leave(idx, idx_purge_pending_txn(idx, fn, arg));
	return rc;
}

/* A row of SID_READDIR_NAMES: attr gets ino and mode, the rest zero. */
static int idx_row_name(struct idx *idx, sqlite3_stmt *st, struct idx_attr *a)
{
	if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
		log_err("%s: a dentry names a missing inode", idx->path);
		return -EIO;
	}
	*a = (struct idx_attr){.ino = (uint64_t)sqlite3_column_int64(st, 0),
			       .mode = (uint32_t)sqlite3_column_int64(st, 1)};
	return 0;
}

static int idx_readdir_txn(struct idx *idx, uint64_t dir, uint64_t after,
			   int names_only, idx_dirent_fn fn, void *arg)
{
	sqlite3_stmt *st =
		idx->st[names_only ? SID_READDIR_NAMES : SID_READDIR];
	int ncols = names_only ? 2 : IDX_ATTR_NCOLS;
	struct idx_attr a;
	int rc;

	rc = idx_dir(idx, dir, &a);
	if (rc || after > INT64_MAX)
		return rc;
	idx_bind_i64(st, 1, (int64_t)dir);
	idx_bind_i64(st, 2, (int64_t)after);
	while ((rc = IDX_STEP(idx, st)) == 1) {
		int64_t cookie = sqlite3_column_int64(st, ncols);
		const char *name;

		rc = names_only ? idx_row_name(idx, st, &a)
				: idx_row_attr(idx, st, &a);
		if (rc)
			break;
		name = (const char *)sqlite3_column_text(st, ncols + 1);
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

	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx,
			       idx_readdir_txn(idx, dir, after, 0, fn, arg));
	return rc;
}

int idx_readdir_names(struct idx *idx, uint64_t dir, uint64_t after,
		      idx_dirent_fn fn, void *arg)
{
	int rc;

	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx,
			       idx_readdir_txn(idx, dir, after, 1, fn, arg));
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
	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx, idx_lookup_batch_txn(idx, n, parents, names,
							 found, attrs));
	return rc;
}

int idx_statfs(struct idx *idx, uint64_t *ninodes, uint64_t *nbytes)
{
	int64_t c[2];
	int rc = idx_get(idx, SID_STATFS, NULL, 0, c, 2, __func__);

	if (rc == 0) {
		log_err("%s: the stats row is missing", idx->path);
		return -EIO;
	}
	if (rc < 0)
		return rc;
	*ninodes = (uint64_t)c[0];
	*nbytes = (uint64_t)c[1];
	return 0;
}

int idx_count(struct idx *idx, struct idx_counts *out)
{
	int64_t c[6];
	int rc = idx_get(idx, SID_COUNT, NULL, 0, c, 6, __func__);

	if (rc == 0)
		return -EIO; /* an aggregate always yields a row */
	if (rc < 0)
		return rc;
	*out = (struct idx_counts){
		.files = (uint64_t)c[0],
		.dirs = (uint64_t)c[1],
		.others = (uint64_t)c[2],
		.orphans = (uint64_t)c[3],
		.records = (uint64_t)c[4],
		.record_bytes = (uint64_t)c[5],
	};
	return 0;
}
