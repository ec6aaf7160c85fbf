/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes of the index (index.h): idx_setxattr, idx_getxattr,
 * idx_listxattr and idx_removexattr, with the limits and errors Linux's
 * xattr system calls have (names of 1..255 bytes, values of at most
 * 64 KiB, XATTR_CREATE/XATTR_REPLACE). An inode's attributes are deleted
 * with the inode in ns.c. Attributes are stored as given, in the xattrs
 * table (schema.c); the kernel checks namespaces and permissions.
 *
 * Locking: each public function takes idx->lock for its whole call, in one
 * transaction (a read transaction for get and list).
 */
#include "index_int.h"

#include <sys/xattr.h>

#include <assert.h>
#include <errno.h>
#include <string.h>

/* XATTR_NAME_MAX and XATTR_SIZE_MAX of <linux/limits.h>. */
#define IDX_XATTR_NAME_MAX 255
#define IDX_XATTR_SIZE_MAX 65536

const char *const idx_xattr_sql[IDX_NSTMT] = {
	[SID_XATTR_GET] = "SELECT value FROM xattrs "
			  "WHERE ino = ?1 AND name = ?2",
	[SID_XATTR_SET] = "INSERT OR REPLACE INTO xattrs (ino, name, value) "
			  "VALUES (?1, ?2, ?3)",
	[SID_XATTR_LIST] = "SELECT name FROM xattrs WHERE ino = ?1 "
			   "ORDER BY name",
	[SID_XATTR_DELETE] = "DELETE FROM xattrs WHERE ino = ?1 AND name = ?2",
};

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
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_setxattr_txn(idx, ino, name, value, len,
						     flags));
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
	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx,
			       idx_getxattr_txn(idx, ino, name, buf, size));
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

	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx, idx_listxattr_txn(idx, ino, buf, size));
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
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_removexattr_txn(idx, ino, name));
	return rc;
}
