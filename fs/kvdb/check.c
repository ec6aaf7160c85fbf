/* SPDX-License-Identifier: MIT */
/*
 * The fsck engine: walks the index from the root (idx_readdir), checks each
 * regular file's record in data-file order, repairs what is provably short
 * when asked, then matches the scanned record headers against the named
 * files. See check.h. Single-threaded; the index is reached only through
 * index.h.
 */
#include "check.h"
#include "audit.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "extfile.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "record.h"
#include "store.h"

/* Bytes read at a time, for payloads and headers. */
#define CHECK_BUF (1u << 20)

enum check_state { CHECK_OK, CHECK_BAD_SHORT, CHECK_BAD_CORRUPT };

struct check_dir {
	uint64_t ino;
	size_t parent; /* index into dirs; the root (0) is its own */
	char *name;
};

struct check_file {
	uint64_t ino;
	size_t dir;
	char *name;
	uint64_t size;
	struct kv_extent ext;
	enum check_state state;
	int64_t chunk; /* first chunk whose CRC failed, -1 */
	char *why;     /* what is wrong, malloc'd */
	int dropped;   /* repair removed it */
};

struct check {
	struct kvdb *db;
	const struct check_opts *o;
	struct kvdb_scan *scan;
	struct check_result *res;
	struct check_dir *dirs;
	size_t ndirs, capdirs;
	struct check_file *files;
	size_t nfiles, capfiles;
	uint64_t *nodes; /* special files and symlinks (one per name) */
	size_t nnodes, capnodes;
	uint64_t total; /* payload bytes, for progress */
	char *buf;	/* CHECK_BUF bytes */
};

static char *check_printf(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static char *check_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* --- walking the index ---------------------------------------------- */

struct check_walk {
	struct check *c;
	size_t dir;
	int err;
};

static int check_walk_entry(void *arg, const char *name,
			    const struct idx_attr *a, uint64_t cookie)
{
	struct check_walk *w = arg;
	struct check *c = w->c;
	char *copy = NULL;

	(void)cookie;
	/* Special files and symlinks: no bytes; their names are audited. */
	if (!S_ISDIR(a->mode) && !S_ISREG(a->mode)) {
		if (kvdb_grow((void **)&c->nodes, &c->capnodes, c->nnodes,
			      sizeof(*c->nodes)) < 0)
			goto out_nomem;
		c->nodes[c->nnodes++] = a->ino;
		return 0;
	}
	copy = strdup(name);
	if (!copy)
		goto out_nomem;
	if (S_ISDIR(a->mode)) {
		if (kvdb_grow((void **)&c->dirs, &c->capdirs, c->ndirs,
			      sizeof(*c->dirs)) < 0)
			goto out_nomem;
		c->dirs[c->ndirs++] = (struct check_dir){
			.ino = a->ino, .parent = w->dir, .name = copy};
		return 0;
	}
	if (kvdb_grow((void **)&c->files, &c->capfiles, c->nfiles,
		      sizeof(*c->files)) < 0)
		goto out_nomem;
	c->files[c->nfiles++] = (struct check_file){.ino = a->ino,
						    .dir = w->dir,
						    .name = copy,
						    .size = a->size,
						    .ext = a->ext,
						    .chunk = -1};
	return 0;
out_nomem:
	free(copy);
	w->err = -ENOMEM;
	return 1;
}

/* Lists every directory and regular file reachable from the root. */
static int check_walk(struct check *c)
{
	int rc;

	if (kvdb_grow((void **)&c->dirs, &c->capdirs, 0, sizeof(*c->dirs)) < 0)
		return -ENOMEM;
	c->dirs[0] = (struct check_dir){.ino = KV_ROOT_INO, .name = NULL};
	c->ndirs = 1;
	for (size_t i = 0; i < c->ndirs; i++) {
		struct check_walk w = {.c = c, .dir = i};

		/* A loop of directories would never end: the index says how many. */
		if (c->ndirs > c->db->counts.dirs + 1) {
			kvdb_report(c->db,
				    "the index is damaged: its directories "
				    "form a loop; rebuild it with "
				    "--rebuild-index");
			return -EIO;
		}
		rc = idx_readdir(c->db->idx, c->dirs[i].ino, 0,
				 check_walk_entry, &w);
		if (rc == 0)
			rc = w.err;
		if (rc < 0) {
			kvdb_report(
				c->db,
				"cannot list directory inode %llu of the "
				"index: %s%s",
				(unsigned long long)c->dirs[i].ino,
				strerror(-rc),
				rc == -EIO ? "; rebuild it with --rebuild-index"
					   : "");
			return rc;
		}
	}
	return 0;
}

/* "/a/b/name" of file x, malloc'd. */
static char *check_path(const struct check *c, const struct check_file *x)
{
	size_t len = strlen(x->name) + 2, d;
	char *p, *q;

	for (d = x->dir; d != 0; d = c->dirs[d].parent)
		len += strlen(c->dirs[d].name) + 1;
	p = malloc(len);
	if (!p)
		return NULL;
	q = p + len - 1;
	*q = '\0';
	q -= strlen(x->name);
	memcpy(q, x->name, strlen(x->name));
	*--q = '/';
	for (d = x->dir; d != 0; d = c->dirs[d].parent) {
		size_t l = strlen(c->dirs[d].name);

		q -= l;
		memcpy(q, c->dirs[d].name, l);
		*--q = '/';
	}
	return q == p ? p : memmove(p, q, strlen(q) + 1);
}

static int check_file_cmp(const void *a, const void *b)
{
	const struct check_file *x = a, *y = b;

	if (x->ext.file_id != y->ext.file_id)
		return x->ext.file_id < y->ext.file_id ? -1 : 1;
	return x->ext.off < y->ext.off ? -1 : x->ext.off > y->ext.off;
}

/* --- checking one block --------------------------------------------- */

/* Marks x damaged (the first reason only). */
static void check_damage(struct check_file *x, enum check_state s, char *why)
{
	if (x->state != CHECK_OK) {
		free(why);
		return;
	}
	x->state = s;
	x->why = why ? why : strdup("(out of memory describing it)");
}

/* Reads and CRC-checks the chunks of x's payload; the first bad one. */
static int check_chunks(struct check *c, struct check_file *x,
			const struct kvdb_datafile *df, const uint32_t *crcs,
			uint64_t *done, int64_t *first, uint32_t *nbad)
{
	uint64_t base = x->ext.off + x->ext.hdr_len, pos = 0;

	while (pos < x->ext.len) {
		size_t want = x->ext.len - pos < CHECK_BUF
				      ? (size_t)(x->ext.len - pos)
				      : CHECK_BUF;
		ssize_t got = kvdb_pio(df->io, df->fd, c->buf, NULL, want,
				       base + pos);

		if (got != (ssize_t)want) {
			check_damage(
				x, CHECK_BAD_CORRUPT,
				got < 0 ? check_printf("read error at payload "
						       "byte %llu: %s",
						       (unsigned long long)pos,
						       strerror((int)-got))
					: check_printf(
						  "data file %06u.kvd ended "
						  "while being read",
						  df->id));
			return -EIO;
		}
		for (size_t o = 0; o < want; o += KV_CHUNK_SIZE) {
			uint32_t k = (uint32_t)((pos + o) / KV_CHUNK_SIZE);
			size_t clen = want - o < KV_CHUNK_SIZE ? want - o
							       : KV_CHUNK_SIZE;

			if (crc32c(0, c->buf + o, clen) != crcs[k]) {
				if (*first < 0)
					*first = k;
				(*nbad)++;
			}
		}
		pos += want;
		*done += want;
		kvdb_progress(c->db, KVDB_PROGRESS_STEP, "checking blocks",
			      *done, c->total);
	}
	return 0;
}

/* Checks the payload's chunks against crcs, reading CHECK_BUF at a time. */
static void check_payload(struct check *c, struct check_file *x,
			  const struct kvdb_datafile *df, const uint32_t *crcs,
			  uint64_t *done)
{
	uint64_t base = x->ext.off + x->ext.hdr_len;
	uint32_t nbad = 0, n = kv_nchunks(x->ext.len);
	int64_t first = -1;

	posix_fadvise(df->fd, (off_t)base, (off_t)x->ext.len,
		      POSIX_FADV_SEQUENTIAL);
	if (check_chunks(c, x, df, crcs, done, &first, &nbad) < 0)
		return;
	posix_fadvise(df->fd, (off_t)base, (off_t)x->ext.len,
		      POSIX_FADV_DONTNEED);
	if (first >= 0) {
		uint64_t b0 = (uint64_t)first * KV_CHUNK_SIZE;
		uint64_t b1 = b0 + KV_CHUNK_SIZE < x->ext.len
				      ? b0 + KV_CHUNK_SIZE
				      : x->ext.len;

		x->chunk = first;
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("CRC mismatch at chunk %lld (payload "
					  "bytes %llu-%llu; %u of %u chunks "
					  "bad)",
					  (long long)first,
					  (unsigned long long)b0,
					  (unsigned long long)b1 - 1, nbad, n));
	}
}

/*
 * An extent file (core/extfile.h): its backing file must be there, with
 * its header, and hold the size the index says. It has no CRCs to check.
 */
static void check_extent_file(struct check *c, struct check_file *x)
{
	struct extf xf = EXTF_NONE;
	uint64_t size = 0;
	int rc;

	rc = c->db->ext_fd < 0 ? -ENOENT
			       : extf_open(c->db->ext_fd, x->ino, &xf);
	if (rc == 0)
		rc = extf_size(&xf, &size, NULL);
	extf_close(&xf);
	if (rc == -ENOENT || rc == -ENODATA)
		check_damage(x, CHECK_BAD_SHORT,
			     check_printf("extent file %s/%llu.kvx is missing "
					  "(provably short)",
					  EXTF_DIR,
					  (unsigned long long)x->ino));
	else if (rc == -EINVAL)
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("extent file %s/%llu.kvx has no "
					  "valid header of this inode",
					  EXTF_DIR,
					  (unsigned long long)x->ino));
	else if (rc < 0)
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("cannot read extent file "
					  "%s/%llu.kvx: %s",
					  EXTF_DIR, (unsigned long long)x->ino,
					  strerror(-rc)));
	else if (size < x->size)
		check_damage(x, CHECK_BAD_SHORT,
			     check_printf("extent file %s/%llu.kvx ends at "
					  "%llu, before the file's size %llu "
					  "(provably short)",
					  EXTF_DIR, (unsigned long long)x->ino,
					  (unsigned long long)size,
					  (unsigned long long)x->size));
}

/*
 * What the index says about x's record, before reading it: where it is
 * and whether its data file holds it. Returns its data file, or NULL when
 * x is judged already (or has no record).
 */
static const struct kvdb_datafile *check_location(struct check *c,
						  struct check_file *x)
{
	const struct kv_extent *e = &x->ext;
	const struct kvdb_datafile *df;
	uint64_t end;

	if (kv_ext_large(e)) {
		check_extent_file(c, x);
		return NULL;
	}
	if (e->file_id == 0) {
		/* A stub's bytes are in the shared tier (kvfs(8)). */
		if (x->size > 0 && e->hdr_len != KV_EXT_STUB)
			check_damage(x, CHECK_BAD_CORRUPT,
				     check_printf("the index has %llu bytes "
						  "but no record for them",
						  (unsigned long long)x->size));
		return NULL;
	}
	df = kvdb_datafile_find(c->db->dfs, c->db->ndfs, e->file_id);
	if (!df) {
		check_damage(x, CHECK_BAD_SHORT,
			     check_printf("data file %06u.kvd is missing "
					  "(provably short)",
					  e->file_id));
		return NULL;
	}
	if (e->hdr_len < KV_ALIGN || e->hdr_len % KV_ALIGN ||
	    e->hdr_len > RECORD_HDR_MAX || e->off % KV_ALIGN) {
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("the index's record location is "
					  "invalid (%06u.kvd at %llu, header "
					  "%u bytes)",
					  e->file_id,
					  (unsigned long long)e->off,
					  e->hdr_len));
		return NULL;
	}
	end = e->off + kv_extent_span(e);
	if (df->size < end) {
		check_damage(x, CHECK_BAD_SHORT,
			     check_printf("data file %06u.kvd ends at %llu, "
					  "before the record's end at %llu "
					  "(provably short)",
					  e->file_id,
					  (unsigned long long)df->size,
					  (unsigned long long)end));
		return NULL;
	}
	if (x->size != e->len)
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("the index says %llu bytes, its "
					  "record holds %llu",
					  (unsigned long long)x->size,
					  (unsigned long long)e->len));
	return df;
}

/* Compares the record's header with the index's row (crcs, ncrcs). */
static void check_header(struct check_file *x, int rc,
			 const struct store_hdr *h, const uint32_t *crcs,
			 uint32_t ncrcs, int crc_rc)
{
	const struct kv_extent *e = &x->ext;

	if (rc < 0) {
		check_damage(
			x, CHECK_BAD_CORRUPT,
			check_printf("header invalid (bad magic, version, "
				     "lengths or header CRC) at %06u.kvd+%llu",
				     e->file_id, (unsigned long long)e->off));
	} else if (h->type != STORE_REC_DATA || h->ino != x->ino ||
		   h->len != e->len || h->hdr_len != e->hdr_len) {
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("header invalid: it does not match "
					  "the index (type %u, inode %llu, "
					  "%llu bytes)",
					  h->type, (unsigned long long)h->ino,
					  (unsigned long long)h->len));
	}
	if (crc_rc < 0 || ncrcs != kv_nchunks(e->len)) {
		check_damage(x, CHECK_BAD_CORRUPT,
			     crc_rc < 0
				     ? check_printf("cannot read its CRCs "
						    "from the index: %s",
						    strerror(-crc_rc))
				     : check_printf("the index lists %u "
						    "chunk CRCs, the record "
						    "has %u chunks",
						    ncrcs, kv_nchunks(e->len)));
		return;
	}
	for (uint32_t i = 0; x->state == CHECK_OK && i < ncrcs; i++) {
		if (store_hdr_crc(h, i) == crcs[i])
			continue;
		check_damage(x, CHECK_BAD_CORRUPT,
			     check_printf("header invalid: its CRC of chunk %u "
					  "differs from the index's",
					  i));
	}
}

static void check_file(struct check *c, struct check_file *x, uint64_t *done)
{
	const struct kv_extent *e = &x->ext;
	const struct kvdb_datafile *df = check_location(c, x);
	uint32_t *crcs = NULL, ncrcs = 0;
	struct kvdb_hdr kh;
	int rc, crc_rc;

	if (!df)
		return;
	rc = kvdb_hdr_read(df, e->off, e->hdr_len, &kh);
	if (rc == -ENOMEM) {
		kvdb_hdr_done(&kh);
		check_damage(x, CHECK_BAD_CORRUPT, NULL);
		return;
	}
	crc_rc = idx_get_crcs(c->db->idx, x->ino, &crcs, &ncrcs);
	check_header(x, rc, &kh.r.hdr, crcs, ncrcs, crc_rc);
	kvdb_hdr_done(&kh);
	/* The payload is checked whatever the header says: bytes matter. */
	if (crcs && ncrcs == kv_nchunks(e->len))
		check_payload(c, x, df, crcs, done);
	else
		*done += e->len;
	free(crcs);
}

/* Repair of a provably short block: name, inode, and record go. */
static void check_drop(struct check *c, struct check_file *x, const char *path)
{
	struct kv_extent ext = {0};
	uint64_t ino;
	uint32_t nlink;
	int rc;

	rc = idx_unlink(c->db->idx, c->dirs[x->dir].ino, x->name, 0,
			c->o->now_ns, &ino, &nlink);
	/* Its other names (hard links) name the same short record. */
	while (rc == 0 && nlink > 0) {
		char name[IDX_NAME_MAX + 1];
		uint64_t dir;

		rc = idx_name_of(c->db->idx, ino, &dir, name, sizeof(name));
		if (rc == 0)
			rc = idx_unlink(c->db->idx, dir, name, 0, c->o->now_ns,
					&ino, &nlink);
	}
	if (rc == 0 && nlink == 0)
		rc = idx_release_inode(c->db->idx, ino, &ext);
	if (rc < 0) {
		kvdb_report(c->db, "cannot drop %s: %s", path, strerror(-rc));
		c->res->sum.repair_failed++;
		return;
	}
	if (kv_ext_large(&ext) && c->db->ext_fd >= 0)
		extf_remove(c->db->ext_fd, ext.off);
	if (ext.file_id) {
		struct kvdb_datafile *df = kvdb_datafile_find(
			c->db->dfs, c->db->ndfs, ext.file_id);

		/* What the file still holds of the record. */
		if (df && df->size > ext.off) {
			uint64_t span = kv_extent_span(&ext);
			uint64_t len = df->size - ext.off < span
					       ? df->size - ext.off
					       : span;

			if (fallocate(df->fd,
				      FALLOC_FL_PUNCH_HOLE |
					      FALLOC_FL_KEEP_SIZE,
				      (off_t)ext.off, (off_t)len) < 0 &&
			    errno != EOPNOTSUPP)
				kvdb_report(c->db,
					    "dropped %s, but cannot punch its "
					    "record: %s",
					    path, strerror(errno));
		}
	}
	x->dropped = 1;
	c->res->sum.dropped++;
	log_warn("dropped %s (inode %llu): %s; its name is removed and its "
		 "record freed",
		 path, (unsigned long long)x->ino, x->why);
}

/*
 * Keeps one name of each inode in files (sorted by record, so the names
 * of one hard-linked file are next to each other): a block is checked,
 * counted and dropped once. Returns the new count.
 */
static size_t check_one_per_inode(struct check_file *files, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (k > 0 && files[k - 1].ino == files[i].ino) {
			free(files[i].name);
			free(files[i].why);
			continue;
		}
		files[k++] = files[i];
	}
	return k;
}

static int check_blocks(struct check *c)
{
	struct check_summary *s = &c->res->sum;
	uint64_t done = 0;

	qsort(c->files, c->nfiles, sizeof(*c->files), check_file_cmp);
	c->nfiles = check_one_per_inode(c->files, c->nfiles);
	for (size_t i = 0; i < c->nfiles; i++)
		c->total += c->files[i].ext.len;
	kvdb_progress(c->db, KVDB_PROGRESS_BEGIN, "checking blocks", 0,
		      c->total);
	for (size_t i = 0; i < c->nfiles; i++) {
		struct check_file *x = &c->files[i];

		check_file(c, x, &done);
		s->payload_bytes += x->ext.len;
		if (x->state == CHECK_BAD_SHORT)
			s->nshort++;
		else if (x->state == CHECK_BAD_CORRUPT)
			s->ncorrupt++;
	}
	kvdb_progress(c->db, KVDB_PROGRESS_END, "checking blocks", done,
		      c->total);
	s->checked = c->nfiles;
	s->damaged = s->nshort + s->ncorrupt;
	if (!c->o->repair)
		return 0;
	for (size_t i = 0; i < c->nfiles; i++) {
		struct check_file *x = &c->files[i];
		char *path;

		if (x->state != CHECK_BAD_SHORT)
			continue;
		path = check_path(c, x);
		if (!path)
			return -ENOMEM;
		check_drop(c, x, path);
		free(path);
	}
	return 0;
}

/* --- what no name needs --------------------------------------------- */

static int check_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Judges one scanned data record against the named files. */
static void check_match_data(struct check *c, struct kvdb_rec *r)
{
	struct check_summary *s = &c->res->sum;
	struct check_file key = {.ext = {.file_id = r->file_id, .off = r->off}};
	struct check_file *x;

	x = c->nfiles ? bsearch(&key, c->files, c->nfiles, sizeof(*c->files),
				check_file_cmp)
		      : NULL;
	if (x && x->ino == r->ino) {
		r->referenced = 1;
	} else if (r->complete) {
		s->unreferenced++;
		s->unreferenced_bytes += r->hdr_len + kv_align_up(r->len);
	} else {
		s->torn++;
		s->torn_bytes +=
			kvdb_datafile_find(c->db->dfs, c->db->ndfs, r->file_id)
				->size -
			r->off;
	}
}

/*
 * Marks the scanned records that a named file points at (or pointed at,
 * for blocks repair dropped), and counts the rest: unreferenced and torn
 * data records, and name records of inodes that have no name left.
 */
static void check_match(struct check *c)
{
	uint64_t *inos = malloc((c->nfiles + 1) * sizeof(*inos));
	size_t ninos = 0;

	for (size_t i = 0; inos && i < c->nfiles; i++)
		if (!c->files[i].dropped)
			inos[ninos++] = c->files[i].ino;
	if (inos)
		qsort(inos, ninos, sizeof(*inos), check_u64_cmp);
	for (size_t i = 0; i < c->scan->nrecs; i++) {
		struct kvdb_rec *r = &c->scan->recs[i];

		if (r->type == STORE_REC_DATA) {
			check_match_data(c, r);
		} else if (r->type == STORE_REC_NAME && inos &&
			   !bsearch(&r->ino, inos, ninos, sizeof(*inos),
				    check_u64_cmp)) {
			r->referenced = -1; /* stale */
			c->res->sum.stale_names++;
		}
	}
	free(inos);
}

/* Whether a named file that repair kept is the extent file of ino. */
static int check_names_extent(const struct check *c, uint64_t ino)
{
	for (size_t i = 0; i < c->nfiles; i++)
		if (c->files[i].ino == ino && !c->files[i].dropped &&
		    kv_ext_large(&c->files[i].ext))
			return 1;
	return 0;
}

/* --- the findings --------------------------------------------------- */

static int check_add(struct check_result *res, const struct check_finding *f)
{
	if (kvdb_grow((void **)&res->v, &res->cap, res->n, sizeof(*res->v)) < 0)
		return -ENOMEM;
	res->v[res->n++] = *f;
	return 0;
}

/* The damaged blocks, in data-file order; their strings move to res. */
static int check_list_damaged(struct check *c)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		struct check_file *x = &c->files[i];
		struct check_finding f;

		if (x->state == CHECK_OK)
			continue;
		f = (struct check_finding){
			.kind = x->state == CHECK_BAD_SHORT ? CHECK_SHORT
							    : CHECK_CORRUPT,
			.action = x->dropped ? CHECK_ACTION_DROPPED
				  : x->state == CHECK_BAD_CORRUPT
					  ? CHECK_ACTION_KEPT
					  : CHECK_ACTION_NONE,
			.data_file = x->ext.file_id,
			.offset = x->ext.off,
			.ino = x->ino,
			.path = check_path(c, x),
			.detail = x->why,
			.chunk = x->chunk,
			.bytes = kv_ext_large(&x->ext)
					 ? x->size
					 : kv_extent_span(&x->ext),
		};
		if (check_add(c->res, &f) < 0) {
			free(f.path);
			return -ENOMEM;
		}
		x->why = NULL;
	}
	return 0;
}

/* The records no name needs, in scan order. */
static int check_list_reclaimable(struct check *c)
{
	for (size_t i = 0; i < c->scan->nrecs; i++) {
		const struct kvdb_rec *r = &c->scan->recs[i];
		struct check_finding f = {
			.kind = r->type != STORE_REC_DATA ? CHECK_STALE_NAME
				: r->complete		  ? CHECK_UNREFERENCED
							  : CHECK_TORN,
			.data_file = r->file_id,
			.offset = r->off,
			.ino = r->ino,
			.chunk = -1,
			.bytes = r->hdr_len + kv_align_up(r->len),
		};

		if (r->referenced > 0 ||
		    (r->type != STORE_REC_DATA && r->referenced == 0))
			continue;
		if (r->path) {
			f.path = strdup(r->path);
			if (!f.path)
				return -ENOMEM;
		}
		if (check_add(c->res, &f) < 0) {
			free(f.path);
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * The extent files no named file points at (unlinked while open, never
 * saved): listed as unreferenced, with the path their header recorded.
 * The daemon's next start, and gc, remove them.
 */
static int check_list_extents(struct check *c)
{
	struct extf_info *info = malloc(sizeof(*info));
	struct dirent *de;
	DIR *d = NULL;
	int fd, rc = 0;

	fd = c->db->ext_fd < 0 ? -1
			       : openat(c->db->ext_fd, ".",
					O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		d = fdopendir(fd);
	if (!d || !info) {
		if (fd >= 0 && !d)
			close(fd);
		free(info);
		if (d)
			closedir(d);
		return info ? 0 : -ENOMEM;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct check_finding f = {.kind = CHECK_UNREFERENCED,
					  .chunk = -1};

		if (extf_parse_name(de->d_name, &f.ino) < 0 ||
		    check_names_extent(c, f.ino))
			continue;
		if (extf_read_hdr(fd, f.ino, info) >= 0) {
			f.path = strdup(info->path);
			f.bytes = info->blocks * 512;
		}
		c->res->sum.unreferenced++;
		c->res->sum.unreferenced_bytes += f.bytes;
		rc = check_add(c->res, &f);
		if (rc < 0)
			free(f.path);
	}
	closedir(d);
	free(info);
	return rc;
}

static void check_free(struct check *c)
{
	for (size_t i = 0; i < c->ndirs; i++)
		free(c->dirs[i].name);
	free(c->dirs);
	for (size_t i = 0; i < c->nfiles; i++) {
		free(c->files[i].name);
		free(c->files[i].why);
	}
	free(c->files);
	free(c->nodes);
	free(c->buf);
}

/* audit_fn: a CHECK_NAME finding. */
static int check_audit_found(void *arg, uint64_t ino, const char *path,
			     const char *detail, int fixed)
{
	struct check_result *res = arg;
	struct check_finding f = {.kind = CHECK_NAME,
				  .action = fixed ? CHECK_ACTION_FIXED
						  : CHECK_ACTION_NONE,
				  .ino = ino,
				  .chunk = -1,
				  .path = strdup(path),
				  .detail = strdup(detail)};

	res->sum.names_wrong++;
	res->sum.names_fixed += (uint64_t)fixed;
	if (!f.path || !f.detail || check_add(res, &f) < 0) {
		free(f.path);
		free(f.detail);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The audit of names (audit.h) over the files whose bytes are sound and
 * the special files and symlinks.
 */
static int check_audit(struct check *c)
{
	uint64_t *inos = malloc((c->nfiles + c->nnodes + 1) * sizeof(*inos));
	size_t n = 0;
	int rc;

	if (!inos)
		return -ENOMEM;
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct check_file *x = &c->files[i];

		if (x->state == CHECK_OK && !x->dropped &&
		    (x->ext.file_id || kv_ext_large(&x->ext)))
			inos[n++] = x->ino;
	}
	for (size_t i = 0; i < c->nnodes; i++)
		inos[n++] = c->nodes[i];
	qsort(inos, n, sizeof(*inos), check_u64_cmp);
	rc = audit_names(c->db, c->scan, inos, n, c->o->repair,
			 check_audit_found, c->res);
	free(inos);
	return rc;
}

int check_run(struct kvdb *db, const struct check_opts *o,
	      struct kvdb_scan *scan, struct check_result *res)
{
	struct check c = {.db = db, .o = o, .scan = scan, .res = res};
	int rc;

	memset(res, 0, sizeof(*res));
	res->sum.orphans = db->counts.orphans;
	c.buf = malloc(CHECK_BUF);
	rc = c.buf ? check_walk(&c) : -ENOMEM;
	if (rc == 0)
		rc = check_blocks(&c);
	if (rc == 0 && !scan->done)
		rc = kvdb_scan(db, scan);
	if (rc == 0) {
		check_match(&c);
		rc = check_list_damaged(&c);
	}
	if (rc == 0)
		rc = check_list_reclaimable(&c);
	if (rc == 0)
		rc = check_list_extents(&c);
	if (rc == 0)
		rc = check_audit(&c);
	check_free(&c);
	return rc;
}

void check_result_free(struct check_result *res)
{
	for (size_t i = 0; i < res->n; i++) {
		free(res->v[i].path);
		free(res->v[i].detail);
	}
	free(res->v);
	memset(res, 0, sizeof(*res));
}
