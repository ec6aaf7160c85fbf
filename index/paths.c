/* SPDX-License-Identifier: MIT */
/*
 * Paths of inodes: the path of one name (idx_path, for records and log
 * lines) and every name of a file (idx_names, for the name records of
 * hard-linked files). Walks the single dentry of each directory up to the
 * root; the namespace itself (links, renames) is ns.c's.
 */
#include "index_int.h"

#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "record.h"

const char *const idx_path_sql[IDX_NSTMT] = {
	[SID_NAME_OF] = "SELECT parent, name FROM dentries WHERE ino = ?1 "
			"LIMIT 1",
	/* Every name of a file, oldest first (idx_names). */
	[SID_NAMES_OF] = "SELECT parent, name FROM dentries WHERE ino = ?1 "
			 "ORDER BY id",
};

/* idx_path()'s walk, in a read transaction: names from ino up, reversed. */
static int idx_path_txn(struct idx *idx, uint64_t ino, char *buf, size_t len)
{
	sqlite3_stmt *st = idx->st[SID_NAME_OF];
	size_t end = len - 1;
	int depth = 0, rc = 0;

	buf[end] = '\0';
	while (ino != KV_ROOT_INO && rc == 0) {
		const char *name;
		size_t n;

		if (++depth > IDX_PATH_DEPTH)
			return -ELOOP;
		idx_bind_i64(st, 1, (int64_t)ino);
		rc = IDX_STEP(idx, st);
		if (rc == 1) {
			ino = (uint64_t)sqlite3_column_int64(st, 0);
			name = (const char *)sqlite3_column_text(st, 1);
			n = name ? strlen(name) : 0;
			if (n + 1 > end)
				rc = -ENAMETOOLONG;
			else {
				end -= n;
				memcpy(buf + end, name, n);
				buf[--end] = '/';
				rc = 0;
			}
		} else if (rc == 0) {
			rc = -ENOENT;
		}
		idx_done(st);
	}
	if (rc == 0 && end == len - 1)
		buf[--end] = '/';
	if (rc == 0)
		memmove(buf, buf + end, len - end);
	return rc;
}

int idx_path(struct idx *idx, uint64_t ino, char *buf, size_t len)
{
	int rc;

	if (len < 2)
		return -ENAMETOOLONG;
	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx, idx_path_txn(idx, ino, buf, len));
	return rc;
}

/*
 * Appends "DIRPATH/name\0" to buf at *used (directory parent's path):
 * -ENAMETOOLONG when it does not fit in len bytes.
 */
static int idx_names_add(struct idx *idx, uint64_t parent, const char *name,
			 char *buf, size_t len, size_t *used)
{
	char dir[4096];
	size_t dl, nl = strlen(name);
	int rc = idx_path_txn(idx, parent, dir, sizeof(dir));

	if (rc < 0)
		return rc;
	dl = parent == KV_ROOT_INO ? 0 : strlen(dir);
	if (*used + dl + 1 + nl + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf + *used, dir, dl);
	buf[*used + dl] = '/';
	memcpy(buf + *used + dl + 1, name, nl + 1);
	*used += dl + 1 + nl + 1;
	return 0;
}

static int idx_names_txn(struct idx *idx, uint64_t ino, char *buf, size_t len,
			 size_t *used)
{
	sqlite3_stmt *st = idx->st[SID_NAMES_OF];
	int rc, n = 0;

	idx_bind_i64(st, 1, (int64_t)ino);
	while ((rc = IDX_STEP(idx, st)) == 1) {
		const char *name = (const char *)sqlite3_column_text(st, 1);

		rc = idx_names_add(idx, (uint64_t)sqlite3_column_int64(st, 0),
				   name ? name : "", buf, len, used);
		if (rc < 0)
			break;
		n++;
	}
	idx_done(st);
	return rc < 0 ? rc : n;
}

int idx_meta_field(struct idx *idx, const struct idx_attr *a, char *buf,
		   size_t len, size_t *used)
{
	size_t head = 0, n = 0;
	int rc;

	*used = 0;
	if (S_ISDIR(a->mode))
		return 0;
	if (!S_ISREG(a->mode)) {
		/* "MODE RDEV", the target, then the names (record.h). */
		head = (size_t)snprintf(buf, len, "%o %llu", (unsigned)a->mode,
					(unsigned long long)a->rdev) +
		       1;
		rc = S_ISLNK(a->mode)
			     ? idx_readlink(idx, a->ino, buf + head, len - head)
			     : 0;
		if (rc < 0)
			return rc;
		if ((size_t)rc + 1 >= len - head)
			return -ENAMETOOLONG;
		buf[head + (size_t)rc] = '\0';
		head += (size_t)rc + 1;
	}
	rc = idx_names(idx, a->ino, buf + head, len - head, &n);
	if (rc == -ENOENT && !S_ISREG(a->mode))
		rc = 0; /* a node record without names: removed */
	if (rc < 0)
		return rc;
	/* A name record's names are separated, not ended, by NULs. */
	*used = head + (S_ISREG(a->mode) ? n - 1 : n);
	return S_ISREG(a->mode) ? STORE_REC_NAME : STORE_REC_NODE;
}

int idx_name_of(struct idx *idx, uint64_t ino, uint64_t *parent, char *name,
		size_t len)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock_read(idx);
	st = idx->st[SID_NAME_OF];
	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_STEP(idx, st);
	if (rc == 1) {
		const char *n = (const char *)sqlite3_column_text(st, 1);

		*parent = (uint64_t)sqlite3_column_int64(st, 0);
		rc = !n ? -ENOMEM
		     : (size_t)snprintf(name, len, "%s", n) >= len
			     ? -ENAMETOOLONG
			     : 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	idx_done(st);
	idx_unlock(idx);
	return rc;
}

int idx_names(struct idx *idx, uint64_t ino, char *buf, size_t len,
	      size_t *used)
{
	int rc;

	*used = 0;
	rc = idx_enter(idx, 0);
	if (!rc)
		rc = idx_leave(idx, idx_names_txn(idx, ino, buf, len, used));
	if (rc == 0)
		rc = -ENOENT;
	return rc;
}
