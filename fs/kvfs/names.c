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

void names_record(struct fs *fs, uint64_t ino)
{
	char *buf = malloc(STORE_META_MAX);
	struct idx_attr a;
	size_t used = 0;
	int rc;

	rc = buf ? idx_getattr(fs->idx, ino, &a) : -ENOMEM;
	/* A file not saved yet gets its names with its save (wb.c). */
	if (rc == 0 && S_ISREG(a.mode) && !a.ext.file_id &&
	    !kv_ext_large(&a.ext))
		goto out;
	if (rc == 0)
		rc = idx_meta_field(fs->idx, &a, buf, STORE_META_MAX, &used);
	/* A regular file with no name left: its record goes with it. */
	if (rc > 0)
		rc = names_append(fs, (uint32_t)rc, ino, buf, used);
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
