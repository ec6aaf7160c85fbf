/* SPDX-License-Identifier: MIT */
/*
 * Rebuilding the index from the data files: pick per inode the record
 * that holds its bytes and the one that names it, create the files (and
 * the directories on their paths) in a new database, and swap it in. See
 * rebuild.h. Single-threaded; the index is reached only through index.h.
 */
#include "rebuild.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "store.h"

/* A file to create: its newest whole data record, named by path. */
struct rebuild_new {
	const struct kvdb_rec *data;
	const char *path;
	uint64_t name_seq;
};

struct rebuild {
	struct kvdb *db;
	const struct rebuild_opts *o;
	struct kvdb_scan *scan;
	struct rebuild_result *r;
	struct rebuild_new *nw;
	size_t nnew;
	uint64_t next_ino; /* numbers new directories */
};

/* Records a note (both strings copied). */
static int rebuild_note(struct rebuild_result *r, const char *what,
			const char *why)
{
	struct rebuild_note *n;

	if (kvdb_grow((void **)&r->notes, &r->cap, r->nnotes,
		      sizeof(*r->notes)) < 0)
		return -ENOMEM;
	n = &r->notes[r->nnotes];
	n->what = strdup(what);
	n->why = strdup(why);
	if (!n->what || !n->why) {
		free(n->what);
		free(n->why);
		return -ENOMEM;
	}
	r->nnotes++;
	return 0;
}

/* A note about inode ino: "inode N: why"; counts it as left out. 0 or -ENOMEM. */
static int rebuild_left_out(struct rebuild_result *r, const char *path,
			    uint64_t ino, const char *why)
{
	char *s = NULL;
	int rc;

	if (asprintf(&s, "inode %llu: %s", (unsigned long long)ino, why) < 0)
		return -ENOMEM;
	rc = rebuild_note(r, path, s);
	free(s);
	r->skipped++;
	return rc;
}

/* Records by inode, newest first. */
static int rebuild_rec_by_ino(const void *a, const void *b)
{
	const struct kvdb_rec *x = *(struct kvdb_rec *const *)a;
	const struct kvdb_rec *y = *(struct kvdb_rec *const *)b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

static int rebuild_new_by_path(const void *a, const void *b)
{
	const struct rebuild_new *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	if (c)
		return c;
	return x->name_seq > y->name_seq ? -1 : x->name_seq < y->name_seq;
}

/*
 * Why path cannot name a file in a rebuilt index, or NULL when it can:
 * absolute, no empty, "." or ".." component, none over IDX_NAME_MAX, and
 * not the control directory.
 */
static const char *rebuild_bad_path(const char *path)
{
	const char *p = path;

	if (!path)
		return "the record's path has a NUL byte";
	if (*p != '/')
		return "the record's path is not absolute";
	if (strncmp(path, "/.kvfs", 6) == 0 && (!path[6] || path[6] == '/'))
		return "the record's path is in the control directory";
	while (*p == '/') {
		const char *c = ++p;

		while (*p && *p != '/')
			p++;
		if (p == c || (p - c == 1 && c[0] == '.') ||
		    (p - c == 2 && c[0] == '.' && c[1] == '.'))
			return "the record's path has an empty, \".\" or "
			       "\"..\" component";
		if (p - c > IDX_NAME_MAX)
			return "the record's path has a component over 255 "
			       "bytes";
	}
	return NULL;
}

/* --- choosing what to restore ---------------------------------------- */

/*
 * Judges the records byino[i..j) of one inode (newest first): the newest
 * whole data record holds the bytes; the newest record of either kind has
 * the name. Adds the file to b->nw, or a note.
 */
static int rebuild_pick(struct rebuild *b, struct kvdb_rec **byino, size_t i,
			size_t j)
{
	const struct kvdb_rec *data = NULL, *name = byino[i];
	const char *bad;
	uint64_t ndata = 0;
	char what[64];

	for (size_t k = i; k < j; k++) {
		/* An extent file holds the bytes as a data record does. */
		if (byino[k]->type != STORE_REC_DATA &&
		    byino[k]->type != STORE_REC_EXTENT)
			continue;
		if (!byino[k]->complete)
			b->r->torn++;
		else if (!data)
			data = byino[k];
		ndata++;
	}
	if (!data) {
		b->r->no_data++;
		return 0;
	}
	b->r->superseded += ndata - 1;
	bad = name->ino <= KV_ROOT_INO ? "the record's inode number is not a "
					 "file's"
				       : rebuild_bad_path(name->path);
	if (bad) {
		snprintf(what, sizeof(what), "%06u.kvd+%llu", data->file_id,
			 (unsigned long long)data->off);
		b->r->skipped++;
		return rebuild_note(b->r, what, bad);
	}
	b->nw[b->nnew++] = (struct rebuild_new){
		.data = data, .path = name->path, .name_seq = name->seq};
	return 0;
}

/* Fills b->nw (sorted by path) from the scanned records. */
static int rebuild_plan(struct rebuild *b)
{
	struct kvdb_scan *s = b->scan;
	struct kvdb_rec **byino = calloc(s->nrecs + 1, sizeof(*byino));
	int rc = 0;

	b->nw = calloc(s->nrecs + 1, sizeof(*b->nw));
	if (!byino || !b->nw) {
		free(byino);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->nrecs; i++) {
		byino[i] = &s->recs[i];
		if (s->recs[i].ino >= b->next_ino)
			b->next_ino = s->recs[i].ino + 1;
		if (s->recs[i].type != STORE_REC_NAME)
			b->r->data_recs++;
		else
			b->r->name_recs++;
	}
	qsort(byino, s->nrecs, sizeof(*byino), rebuild_rec_by_ino);
	for (size_t i = 0, j; rc == 0 && i < s->nrecs; i = j) {
		for (j = i; j < s->nrecs && byino[j]->ino == byino[i]->ino; j++)
			;
		rc = rebuild_pick(b, byino, i, j);
	}
	free(byino);
	if (rc == 0 && b->nnew)
		qsort(b->nw, b->nnew, sizeof(*b->nw), rebuild_new_by_path);
	return rc;
}

/* --- writing the new index ------------------------------------------- */

/* Attributes of what the rebuild creates. */
static struct idx_attr rebuild_attr(const struct rebuild *b, uint32_t mode)
{
	return (struct idx_attr){.mode = mode,
				 .uid = getuid(),
				 .gid = getgid(),
				 .atime_ns = b->o->now_ns,
				 .mtime_ns = b->o->now_ns,
				 .ctime_ns = b->o->now_ns};
}

/*
 * The directory path (its first len bytes) as an inode in the new index,
 * made when missing.
 */
static int rebuild_mkdirs(struct rebuild *b, struct idx *idx, const char *path,
			  size_t len, uint64_t *out)
{
	uint64_t dir = KV_ROOT_INO;
	char name[IDX_NAME_MAX + 1];
	size_t i = 0;
	int rc;

	while (i < len) {
		struct idx_attr a;
		size_t j;

		i++; /* the '/' */
		for (j = i; j < len && path[j] != '/'; j++)
			;
		memcpy(name, path + i, j - i);
		name[j - i] = '\0';
		i = j;
		rc = idx_lookup(idx, dir, name, &a);
		if (rc == 0 && !S_ISDIR(a.mode))
			return -ENOTDIR;
		if (rc == -ENOENT) {
			a = rebuild_attr(b, S_IFDIR | 0755);
			rc = idx_create_ino(idx, dir, name, &a, NULL,
					    b->next_ino++);
			if (rc == 0)
				b->r->dirs++;
		}
		if (rc < 0)
			return rc;
		dir = a.ino;
	}
	*out = dir;
	return 0;
}

/* Where the last file went, so files of one directory skip the lookups. */
struct rebuild_dircache {
	const char *path;
	size_t len;
	uint64_t dir;
};

/* Creates file nw[i] in idx, or notes why it is left out; -errno. */
static int rebuild_add(struct rebuild *b, struct idx *idx, size_t i,
		       struct rebuild_dircache *dc)
{
	const struct kvdb_rec *r = b->nw[i].data;
	const char *path = b->nw[i].path, *slash = strrchr(path, '/');
	size_t dlen = (size_t)(slash - path);
	struct kv_extent ext = {.file_id = r->file_id,
				.hdr_len = r->hdr_len,
				.off = r->off,
				.len = r->len},
			 old;
	struct idx_attr a = rebuild_attr(b, S_IFREG | 0644);
	uint64_t dir;
	int rc = 0;

	if (r->type == STORE_REC_EXTENT)
		ext = (struct kv_extent){
			.hdr_len = KV_EXT_LARGE, .off = r->ino, .len = r->len};

	if (i > 0 && strcmp(path, b->nw[i - 1].path) == 0)
		return rebuild_left_out(b->r, path, r->ino,
					"an inode with a newer name record "
					"has this path too; this one is left "
					"out");
	if (dc->path && dlen == dc->len && memcmp(path, dc->path, dlen) == 0)
		dir = dc->dir;
	else
		rc = rebuild_mkdirs(b, idx, path, dlen, &dir);
	if (rc == 0)
		rc = idx_create_ino(idx, dir, slash + 1, &a, NULL, r->ino);
	if (rc == -ENOTDIR || rc == -EEXIST)
		return rebuild_left_out(b->r, path, r->ino,
					rc == -EEXIST
						? "a directory has this path; "
						  "left out"
						: "a directory on the way is "
						  "a file; left out");
	if (rc == 0)
		rc = idx_set_extent(idx, r->ino, r->len, b->o->now_ns, &ext,
				    r->crcs, r->nchunks, &old);
	if (rc < 0) {
		kvdb_report(b->db, "cannot add %s (inode %llu): %s", path,
			    (unsigned long long)r->ino, strerror(-rc));
		return rc;
	}
	*dc = (struct rebuild_dircache){.path = path, .len = dlen, .dir = dir};
	b->r->files++;
	return 0;
}

/* Creates the files of b->nw (sorted by path) in idx. */
static int rebuild_populate(struct rebuild *b, struct idx *idx)
{
	struct rebuild_dircache dc = {.dir = KV_ROOT_INO};

	kvdb_progress(b->db, KVDB_PROGRESS_BEGIN, "rebuilding index", 0,
		      b->nnew);
	for (size_t i = 0; i < b->nnew; i++) {
		int rc;

		kvdb_progress(b->db, KVDB_PROGRESS_STEP, "rebuilding index", i,
			      b->nnew);
		rc = rebuild_add(b, idx, i, &dc);
		if (rc < 0)
			return rc;
	}
	kvdb_progress(b->db, KVDB_PROGRESS_END, "rebuilding index", b->nnew,
		      b->nnew);
	return 0;
}

/* Moves DATADIR/index.db{,-wal,-shm} to index.db.old.<time>{,...}. */
static int rebuild_move_old(struct rebuild *b)
{
	static const char *const sfx[] = {"", "-wal", "-shm"};
	char from[PATH_MAX], to[PATH_MAX], stamp[32];
	const char *datadir = b->db->datadir;
	struct stat st;
	struct tm tm;
	time_t now = time(NULL);
	int any = 0;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int n = 0;; n++) {
		snprintf(to, sizeof(to), "%s/index.db.old.%s%s%.0d", datadir,
			 stamp, n ? "." : "", n);
		if (lstat(to, &st) < 0 && errno == ENOENT)
			break;
	}
	for (int i = 0; i < 3; i++) {
		char dest[PATH_MAX + 8];

		snprintf(from, sizeof(from), "%s/index.db%s", datadir, sfx[i]);
		snprintf(dest, sizeof(dest), "%s%s", to, sfx[i]);
		if (rename(from, dest) == 0) {
			any = 1;
		} else if (errno != ENOENT) {
			int rc = -errno;

			kvdb_report(b->db, "cannot move %s to %s: %s", from,
				    dest, strerror(-rc));
			return rc;
		}
	}
	if (any) {
		b->r->old = strdup(strrchr(to, '/') + 1);
		if (!b->r->old)
			return -ENOMEM;
	}
	return 0;
}

/* Removes db and its -wal and -shm files (those that exist); all or not. */
static void rebuild_unlink_db(const char *db, int main_too)
{
	static const char *const sfx[] = {"", "-wal", "-shm"};
	char p[PATH_MAX];

	for (int i = main_too ? 0 : 1; i < 3; i++)
		if (snprintf(p, sizeof(p), "%s%s", db, sfx[i]) < (int)sizeof(p))
			unlink(p);
}

/* Writes b->nw into index.db.rebuild and swaps it in for index.db. */
static int rebuild_write(struct rebuild *b)
{
	char tmp[PATH_MAX], final[PATH_MAX];
	struct idx *idx = NULL;
	int rc, dfd;

	snprintf(tmp, sizeof(tmp), "%s/index.db.rebuild", b->db->datadir);
	snprintf(final, sizeof(final), "%s/index.db", b->db->datadir);
	rebuild_unlink_db(tmp, 1);
	rc = idx_open(&idx, tmp, 0755, getuid(), getgid());
	if (rc < 0) {
		kvdb_report(b->db, "cannot create %s: %s", tmp, strerror(-rc));
		return rc;
	}
	rc = rebuild_populate(b, idx);
	idx_close(idx);
	if (rc < 0) {
		rebuild_unlink_db(tmp, 1);
		return rc;
	}
	/*
	 * Closed and checkpointed, the database is the one file; a -wal left
	 * behind must not follow it to its new name.
	 */
	rebuild_unlink_db(tmp, 0);
	rc = rebuild_move_old(b);
	if (rc == 0 && rename(tmp, final) < 0) {
		rc = -errno;
		kvdb_report(b->db, "cannot rename %s to %s: %s", tmp, final,
			    strerror(-rc));
	}
	if (rc < 0)
		return rc;
	dfd = open(b->db->datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int rebuild_run(struct kvdb *db, const struct rebuild_opts *o,
		struct kvdb_scan *scan, struct rebuild_result *r)
{
	struct rebuild b = {.db = db,
			    .o = o,
			    .scan = scan,
			    .r = r,
			    .next_ino = KV_ROOT_INO + 1};
	int rc;

	memset(r, 0, sizeof(*r));
	rc = scan->done ? 0 : kvdb_scan(db, scan);
	if (rc == 0 && !scan->extents_done)
		rc = kvdb_scan_extents(db, scan);
	if (rc == 0)
		rc = rebuild_plan(&b);
	if (rc == 0)
		rc = rebuild_write(&b);
	free(b.nw);
	if (rc < 0)
		return rc;
	r->done = 1;
	log_warn("rebuilt %s/index.db from %llu records in %zu data files: "
		 "%llu files, %llu directories, %llu left out; old index "
		 "moved to %s",
		 db->datadir, (unsigned long long)scan->nrecs, db->ndfs,
		 (unsigned long long)r->files, (unsigned long long)r->dirs,
		 (unsigned long long)r->skipped,
		 r->old ? r->old : "(there was none)");
	return 0;
}

void rebuild_result_free(struct rebuild_result *r)
{
	for (size_t i = 0; i < r->nnotes; i++) {
		free(r->notes[i].what);
		free(r->notes[i].why);
	}
	free(r->notes);
	free(r->old);
	memset(r, 0, sizeof(*r));
}
