/* SPDX-License-Identifier: MIT */
/*
 * The metadata records of names.h: built from the index (which has just
 * committed the change) and appended through the store.
 */
#include "names.h"

#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "record.h"
#include "store.h"

/* Appends a metadata record, counted against the capacity first. */
static int names_append(struct fs *fs, uint32_t type, uint64_t ino,
			const char *blob, size_t len)
{
	uint64_t span = store_hdr_len(0, len);
	int rc = fs->up.make_room ? fs->up.make_room(fs->up.ctx, span) : 0;

	if (rc == 0)
		rc = store_append_meta(fs->store, type, ino, blob, len);
	if (rc == 0 && fs->up.used)
		fs->up.used(fs->up.ctx, (int64_t)span);
	return rc;
}

/*
 * The path field of a node record for a (see record.h) into buf; its
 * length, or -errno.
 */
static int names_node_blob(struct fs *fs, const struct idx_attr *a, char *buf,
			   size_t len, size_t *out)
{
	size_t head, used = 0;
	int rc;

	head = (size_t)snprintf(buf, len, "%o %llu", (unsigned)a->mode,
				(unsigned long long)a->rdev) +
	       1;
	if (S_ISLNK(a->mode)) {
		rc = idx_readlink(fs->idx, a->ino, buf + head, len - head);
		if (rc < 0)
			return rc;
		if ((size_t)rc >= len - head - 1)
			return -ENAMETOOLONG;
		head += (size_t)rc + 1;
	} else {
		buf[head++] = '\0';
	}
	rc = idx_names(fs->idx, a->ino, buf + head, len - head, &used);
	if (rc == -ENOENT)
		used = 0; /* gone: a record without names */
	else if (rc < 0)
		return rc;
	*out = head + used;
	return 0;
}

void names_record(struct fs *fs, uint64_t ino)
{
	char *buf = malloc(STORE_META_MAX);
	struct idx_attr a;
	size_t used = 0;
	int rc;

	rc = buf ? idx_getattr(fs->idx, ino, &a) : -ENOMEM;
	if (rc < 0 || S_ISDIR(a.mode))
		goto out;
	if (S_ISREG(a.mode)) {
		/* Not saved yet: its save records its names (wb.c). */
		if (!a.ext.file_id && !kv_ext_large(&a.ext))
			goto out;
		rc = idx_names(fs->idx, ino, buf, STORE_META_MAX, &used);
		if (rc == -ENOENT) {
			rc = 0; /* no name left: its record goes with it */
			goto out;
		}
		/* Names are separated by NULs, the last one ends the field. */
		if (rc > 0)
			rc = names_append(fs, STORE_REC_NAME, ino, buf,
					  used - 1);
	} else {
		rc = names_node_blob(fs, &a, buf, STORE_META_MAX, &used);
		if (rc == 0)
			rc = names_append(fs, STORE_REC_NODE, ino, buf, used);
	}
out:
	if (rc < 0 && rc != -ENOENT)
		log_warn("no name record for inode %llu: %s; a rebuilt index "
			 "would restore its earlier names",
			 (unsigned long long)ino, strerror(-rc));
	free(buf);
}

void names_record_move(struct fs *fs, uint64_t ino, const char *old,
		       const char *new)
{
	size_t ol = strlen(old), nl = strlen(new);
	char *buf = malloc(ol + 1 + nl);
	int rc = -ENOMEM;

	if (buf) {
		memcpy(buf, old, ol + 1);
		memcpy(buf + ol + 1, new, nl);
		rc = names_append(fs, STORE_REC_MOVE, ino, buf, ol + 1 + nl);
	}
	if (rc < 0)
		log_warn("no record of the move of directory %s to %s: %s; a "
			 "rebuilt index would restore its files under %s",
			 old, new, strerror(-rc), old);
	free(buf);
}

int names_path_of(struct fs *fs, uint64_t parent, const char *name, char *buf,
		  size_t len)
{
	size_t dl, nl = strlen(name);
	int rc = idx_path(fs->idx, parent, buf, len);

	if (rc < 0)
		return rc;
	dl = parent == KV_ROOT_INO ? 0 : strlen(buf);
	if (dl + 1 + nl + 1 > len)
		return -ENAMETOOLONG;
	buf[dl] = '/';
	memcpy(buf + dl + 1, name, nl + 1);
	return 0;
}
