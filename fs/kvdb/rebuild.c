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
#include "datadir.h"
#include "store.h"

/*
 * One name to create: of a regular file (data: its newest whole data
 * record) or of a special file or symlink (node: its newest node record).
 * path is owned (directory moves applied).
 */
struct rebuild_new {
	const struct kvdb_rec *data;
	const struct kvdb_rec *node;
	char *path;
	uint64_t name_seq;
	uint64_t ino;
};

/* A directory move (a move record): old -> new, in sequence order. */
struct rebuild_move {
	uint64_t seq;
	const char *old, *new;
	size_t olen;
};

struct rebuild {
	struct kvdb *db;
	const struct rebuild_opts *o;
	struct kvdb_scan *scan;
	struct rebuild_result *r;
	struct rebuild_new *nw;
	size_t nnew, capnew;
	struct rebuild_move *mv;
	size_t nmv;
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

static int rebuild_move_by_seq(const void *a, const void *b)
{
	const struct rebuild_move *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Collects the whole move records, oldest first. */
static int rebuild_moves(struct rebuild *b)
{
	struct kvdb_scan *s = b->scan;

	b->mv = calloc(s->nrecs + 1, sizeof(*b->mv));
	if (!b->mv)
		return -ENOMEM;
	for (size_t i = 0; i < s->nrecs; i++) {
		const struct kvdb_rec *r = &s->recs[i];
		size_t olen;

		if (r->type != STORE_REC_MOVE || !r->path)
			continue;
		olen = strlen(r->path);
		if (olen + 1 >= r->path_len || olen == 0)
			continue; /* not "old\0new" */
		b->mv[b->nmv++] =
			(struct rebuild_move){.seq = r->seq,
					      .old = r->path,
					      .new = r->path + olen + 1,
					      .olen = olen};
	}
	qsort(b->mv, b->nmv, sizeof(*b->mv), rebuild_move_by_seq);
	return 0;
}

/*
 * name as recorded at sequence seq, with every later directory move
 * applied in order: a new string, or NULL (-ENOMEM).
 */
static char *rebuild_moved(const struct rebuild *b, const char *name,
			   uint64_t seq)
{
	size_t lo = 0, hi = b->nmv;
	char *p = strdup(name);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->mv[mid].seq <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; p && i < b->nmv; i++) {
		const struct rebuild_move *m = &b->mv[i];
		char *q;

		if (strncmp(p, m->old, m->olen) != 0 || p[m->olen] != '/')
			continue;
		if (asprintf(&q, "%s%s", m->new, p + m->olen) < 0)
			q = NULL;
		free(p);
		p = q;
	}
	return p;
}

/* Adds one name of inode (data or node) to b->nw, or a note. */
static int rebuild_add_name(struct rebuild *b, const struct kvdb_rec *data,
			    const struct kvdb_rec *node, const char *name,
			    uint64_t seq)
{
	const struct kvdb_rec *r = data ? data : node;
	char *path = rebuild_moved(b, name, seq), what[64];
	const char *bad;

	if (!path)
		return -ENOMEM;
	bad = r->ino <= KV_ROOT_INO ? "the record's inode number is not a "
				      "file's"
				    : rebuild_bad_path(path);
	if (bad) {
		free(path);
		snprintf(what, sizeof(what), "%06u.kvd+%llu", r->file_id,
			 (unsigned long long)r->off);
		b->r->skipped++;
		return rebuild_note(b->r, what, bad);
	}
	if (kvdb_grow((void **)&b->nw, &b->capnew, b->nnew, sizeof(*b->nw)) <
	    0) {
		free(path);
		return -ENOMEM;
	}
	b->nw[b->nnew++] = (struct rebuild_new){.data = data,
						.node = node,
						.path = path,
						.name_seq = seq,
						.ino = r->ino};
	return 0;
}

/*
 * Adds /lost+found/INO for the file that data restores, whose newest
 * record keeps no path (it was longer than a record holds, kvfs(5)).
 */
static int rebuild_add_lost(struct rebuild *b, const struct kvdb_rec *data,
			    uint64_t seq)
{
	char *path;
	int rc;

	if (asprintf(&path, "/lost+found/%llu", (unsigned long long)data->ino) <
	    0)
		return -ENOMEM;
	b->r->lost_found++;
	rc = rebuild_note(b->r, path,
			  "restored under lost+found: its path was longer "
			  "than its record keeps");
	if (rc == 0)
		rc = rebuild_add_name(b, data, NULL, path, seq);
	free(path);
	return rc;
}

/*
 * Adds every name in the len bytes at names (NUL-separated, record.h) for
 * the file that data or node restores.
 */
static int rebuild_add_names(struct rebuild *b, const struct kvdb_rec *data,
			     const struct kvdb_rec *node, const char *names,
			     size_t len, uint64_t seq)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < len; i += strlen(names + i) + 1)
		if (names[i])
			rc = rebuild_add_name(b, data, node, names + i, seq);
	return rc;
}

/*
 * Judges the records byino[i..j) of one inode (newest first). A regular
 * file: the newest whole data record holds the bytes; the newest data or
 * name record has the names. A special file or symlink: its newest node
 * record (with no names: it was removed). Adds its names to b->nw.
 */
static int rebuild_pick(struct rebuild *b, struct kvdb_rec **byino, size_t i,
			size_t j)
{
	const struct kvdb_rec *data = NULL, *name = NULL, *node = NULL;
	uint64_t ndata = 0;
	size_t head;

	for (size_t k = i; k < j; k++) {
		const struct kvdb_rec *r = byino[k];

		if (r->type == STORE_REC_NODE && !node)
			node = r;
		if (r->type == STORE_REC_NAME && !name)
			name = r;
		/* An extent file holds the bytes as a data record does. */
		if (r->type != STORE_REC_DATA && r->type != STORE_REC_EXTENT)
			continue;
		if (!name)
			name = r;
		if (!r->complete)
			b->r->torn++;
		else if (!data)
			data = r;
		ndata++;
	}
	if (!data && node && node->path) {
		/* "MODE RDEV\0TARGET\0names...": past the first two parts. */
		head = strlen(node->path) + 1;
		if (head < node->path_len)
			head += strlen(node->path + head) + 1;
		if (head > node->path_len)
			head = node->path_len;
		return rebuild_add_names(b, NULL, node, node->path + head,
					 node->path_len - head, node->seq);
	}
	if (!data) {
		b->r->no_data++;
		return 0;
	}
	b->r->superseded += ndata - 1;
	if (!name->path)
		return rebuild_add_name(b, data, NULL, "", name->seq);
	if (name->type != STORE_REC_NAME && !*name->path)
		return rebuild_add_lost(b, data, name->seq);
	return rebuild_add_names(b, data, NULL, name->path,
				 name->type == STORE_REC_NAME
					 ? name->path_len
					 : strlen(name->path),
				 name->seq);
}

/* Fills b->nw (sorted by path) from the scanned records. */
static int rebuild_plan(struct rebuild *b)
{
	struct kvdb_scan *s = b->scan;
	struct kvdb_rec **byino = calloc(s->nrecs + 1, sizeof(*byino));
	int rc = byino ? rebuild_moves(b) : -ENOMEM;

	for (size_t i = 0; rc == 0 && i < s->nrecs; i++) {
		byino[i] = &s->recs[i];
		if (s->recs[i].ino >= b->next_ino)
			b->next_ino = s->recs[i].ino + 1;
		if (s->recs[i].type == STORE_REC_DATA ||
		    s->recs[i].type == STORE_REC_EXTENT)
			b->r->data_recs++;
		else
			b->r->name_recs++;
	}
	if (rc == 0)
		qsort(byino, s->nrecs, sizeof(*byino), rebuild_rec_by_ino);
	for (size_t i = 0, j; rc == 0 && i < s->nrecs; i = j) {
		for (j = i; j < s->nrecs && byino[j]->ino == byino[i]->ino; j++)
			;
		/* A directory's move records name no file. */
		if (byino[i]->type != STORE_REC_MOVE)
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

/*
 * Where nw[i] goes: its path, or for a regular file whose name is one of
 * the engine's temporary names (its final name was in a record that is
 * damaged or was never written; the daemon would remove it as a stale
 * temporary file) /lost+found/NAME.INO, with a note. 0 or -ENOMEM.
 */
static int rebuild_place(struct rebuild *b, size_t i, char **out)
{
	const struct rebuild_new *w = &b->nw[i];
	const char *base = strrchr(w->path, '/') + 1;
	char *p;

	*out = w->path;
	if (!w->data || !datadir_is_engine_tmp(base))
		return 0;
	if (asprintf(&p, "/lost+found/%.200s.%llu", base,
		     (unsigned long long)w->ino) < 0)
		return -ENOMEM;
	*out = p;
	b->r->lost_found++;
	return rebuild_note(b->r, p,
			    "restored under lost+found: its only name is an "
			    "engine's temporary one (the record with its "
			    "final name is damaged or was never written)");
}

/* Gives inode nw[i] (not made yet) its attributes, bytes or target. */
static int rebuild_make(struct rebuild *b, struct idx *idx, size_t i,
			uint64_t dir, const char *name)
{
	const struct rebuild_new *w = &b->nw[i];
	const struct kvdb_rec *r = w->data ? w->data : w->node;
	struct idx_attr a = rebuild_attr(b, S_IFREG | 0644);
	struct kv_extent ext = {.file_id = r->file_id,
				.hdr_len = r->hdr_len,
				.off = r->off,
				.len = r->len},
			 old;
	const char *target = NULL;
	int rc;

	if (w->node) {
		char *end;

		a.mode = (uint32_t)strtoul(r->path, &end, 8);
		a.rdev = strtoull(end, NULL, 10);
		target = r->path + strlen(r->path) + 1;
		if (S_ISREG(a.mode) || S_ISDIR(a.mode))
			return -EINVAL;
		return idx_create_ino(idx, dir, name, &a, target, r->ino);
	}
	if (r->type == STORE_REC_EXTENT)
		ext = (struct kv_extent){
			.hdr_len = KV_EXT_LARGE, .off = r->ino, .len = r->len};
	rc = idx_create_ino(idx, dir, name, &a, NULL, r->ino);
	if (rc == 0)
		rc = idx_set_extent(idx, r->ino, r->len, b->o->now_ns, &ext,
				    r->crcs, r->nchunks, &old);
	return rc;
}

/*
 * Creates nw[i] in idx: the inode with its first name, a hard link for
 * the next ones; or notes why it is left out. -errno.
 */
static int rebuild_add(struct rebuild *b, struct idx *idx, size_t i,
		       struct rebuild_dircache *dc)
{
	const struct rebuild_new *w = &b->nw[i];
	const char *path, *slash;
	struct idx_attr a;
	uint64_t dir;
	size_t dlen;
	int rc, made;

	if (i > 0 && strcmp(w->path, b->nw[i - 1].path) == 0)
		return rebuild_left_out(b->r, w->path, w->ino,
					"an inode with a newer name record "
					"has this path too; this one is left "
					"out");
	rc = rebuild_place(b, i, (char **)&path);
	if (rc < 0)
		return rc;
	slash = strrchr(path, '/');
	dlen = (size_t)(slash - path);
	if (dc->path && dlen == dc->len && memcmp(path, dc->path, dlen) == 0)
		dir = dc->dir;
	else
		rc = rebuild_mkdirs(b, idx, path, dlen, &dir);
	made = rc == 0 ? idx_getattr(idx, w->ino, &a) == 0 : 0;
	if (rc == 0)
		rc = made ? idx_link(idx, w->ino, dir, slash + 1, b->o->now_ns,
				     &a)
			  : rebuild_make(b, idx, i, dir, slash + 1);
	if (rc == -ENOTDIR || rc == -EEXIST || rc == -EINVAL)
		rc = rebuild_left_out(b->r, path, w->ino,
				      rc == -EEXIST ? "a directory has this "
						      "path; left out"
				      : rc == -EINVAL
					      ? "its node record is "
						"not valid; left out"
					      : "a directory on the way "
						"is a file; left out");
	else if (rc < 0)
		kvdb_report(b->db, "cannot add %s (inode %llu): %s", path,
			    (unsigned long long)w->ino, strerror(-rc));
	else if (!made)
		b->r->files++;
	if (rc == 0 && path == w->path)
		*dc = (struct rebuild_dircache){
			.path = path, .len = dlen, .dir = dir};
	if (path != w->path)
		free((char *)path);
	return rc;
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
	for (size_t i = 0; i < b.nnew; i++)
		free(b.nw[i].path);
	free(b.nw);
	free(b.mv);
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

int rebuild_names(struct kvdb *db, struct kvdb_scan *scan, rebuild_name_fn fn,
		  void *arg)
{
	struct rebuild_result res = {0};
	struct rebuild_opts o = {0};
	struct rebuild b = {.db = db,
			    .o = &o,
			    .scan = scan,
			    .r = &res,
			    .next_ino = KV_ROOT_INO + 1};
	int rc;

	rc = scan->done ? 0 : kvdb_scan(db, scan);
	if (rc == 0 && !scan->extents_done)
		rc = kvdb_scan_extents(db, scan);
	if (rc == 0)
		rc = rebuild_plan(&b);
	for (size_t i = 0; rc == 0 && i < b.nnew; i++) {
		char *path;

		/* As rebuild_add(): of two inodes with one path, the newer. */
		if (i > 0 && strcmp(b.nw[i].path, b.nw[i - 1].path) == 0)
			continue;
		rc = rebuild_place(&b, i, &path);
		if (rc == 0)
			rc = fn(arg, b.nw[i].ino, path, b.nw[i].node != NULL);
		if (path != b.nw[i].path)
			free(path);
	}
	for (size_t i = 0; i < b.nnew; i++)
		free(b.nw[i].path);
	free(b.nw);
	free(b.mv);
	rebuild_result_free(&res);
	return rc;
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
