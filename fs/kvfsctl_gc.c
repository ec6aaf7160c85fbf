/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl gc: offline compaction of the data files of an unmounted data
 * directory, with the daemon kept out by DATADIR/kvfs.lock (held, LOCK_EX,
 * for the whole run).
 *
 * Deleting a block punches its record out, and a data file with no record
 * left is removed, but a file with a few live records among many dead ones
 * keeps what the holes cannot take back: name records (one page each,
 * appended at every rename and never freed), records that no index row
 * points at (a crash between append and commit in an older file), and the
 * file itself. gc copies the live records of such files to a new data file
 * and removes the old ones:
 *
 *  - Live are the data records an index row points at and the name records
 *    that still decide a name for --rebuild-index: the newest name record
 *    of an inode that has a name and a record, newer (by sequence) than its
 *    data record (of identical copies, the one in the newest file). A
 *    first pass over every data file's headers finds them. The rest are
 *    dead.
 *  - A file is compacted when its live records take less than the threshold
 *    share of its physical size (st_blocks); a file with no live record is
 *    removed.
 *  - Records are copied byte for byte: header (sequence, inode, path, chunk
 *    CRCs, header CRC) and payload, after checking the header against the
 *    index and every chunk against its CRC. A copy is the same record in
 *    another place, so --rebuild-index picks between the two as between
 *    equals, and the newest record of an inode stays the newest.
 *  - Crash safety, per source file: copies are appended to the new file and
 *    fdatasync'd (and the directory fsync'd when the file is new), then one
 *    index transaction (synchronous=FULL) moves the rows to the copies, and
 *    only then is the old file unlinked. Killed before the commit, the index
 *    still points at the old records and the copies are unreferenced (the
 *    next mount punches them: the new file is among the newest); killed
 *    after it, the old file's records are unreferenced and the next gc
 *    removes the file.
 *  - Orphans (inodes unlinked while open, which the next mount would free)
 *    are freed first, as kvfs does at start-up.
 *
 * A live record that is short or corrupt keeps its file as it is (reported;
 * kvfsctl fsck says more). Single-threaded; the index is reached only
 * through index.h.
 */
#include "kvfsctl.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "store.h"

/* Bytes copied at a time; a multiple of KV_CHUNK_SIZE and KV_ALIGN. */
#define GC_BUF (1u << 20)
/* Index rows read at a time. */
#define GC_BATCH 256
/* Default threshold: compact files less than this percent live. */
#define GC_DEFAULT_THRESHOLD 50

/* A record to keep: a data record (ino's row points at it) or a name one. */
struct gc_live {
	uint64_t ino;
	uint64_t off;
	uint32_t hdr_len;
	uint64_t len;
	uint32_t type;
};

/* A name record, as found by the first pass (gc_find_names). */
struct gc_name {
	uint64_t ino;
	uint64_t seq;
	uint32_t file_id;
	uint64_t off;
};

/* What happened to one data file, for the report. */
struct gc_result {
	uint32_t id;
	const char *action; /* "compacted", "removed", "kept", "skipped" */
	uint64_t physical;
	uint64_t live_bytes;
	uint64_t nlive, nnames, ndead_names, nunref;
	uint32_t out_id; /* compacted: where the copies went */
	char *why;	 /* skipped: the reason, malloc'd */
};

struct gc {
	const char *cmd;
	char *datadir;
	int json;
	int dry_run;
	unsigned threshold;
	struct idx *idx;
	int data_fd;		   /* DATADIR/data, O_RDONLY|O_DIRECTORY */
	struct kc_datafile *files; /* sorted by id */
	size_t nfiles;
	unsigned char *buf; /* GC_BUF bytes, KV_ALIGN-aligned */
	struct gc_live *live;
	size_t nlive, caplive;
	struct idx_move *moves;
	size_t capmoves;
	struct gc_name *names; /* the newest name record of each inode */
	size_t nnames, capnames;
	/* the data file copies go to */
	int out_fd;
	uint32_t out_id;
	uint32_t next_id;
	uint64_t out_tail;
	struct gc_result *res;
	size_t nres;

	/* totals */
	uint64_t ncompacted, nremoved, nskipped, copied_recs, copied_names;
	uint64_t copied_bytes, dead_names, unref_recs, orphans, orphan_bytes;
	int failed; /* an operational error stopped the run */
	struct kc_usage before, after;
};

static const char gc_usage[] =
	"usage: kvfsctl gc [--threshold PERCENT] [--dry-run] [--json] DATADIR\n"
	"\n"
	"Compacts the data files of an unmounted data directory: each data\n"
	"file whose live records (those the index points at, and the name\n"
	"records a rebuild of the index needs) take less than PERCENT of its\n"
	"physical size gets its live records copied, byte for byte, to a new\n"
	"data file, and is removed. Dead name records and records no name\n"
	"points at go with it; a file with no live record is just removed.\n"
	"Every block stays readable if gc is killed at any point. Refuses to\n"
	"run while kvfs serves DATADIR.\n"
	"\n"
	"  --threshold PERCENT  compact files less than PERCENT live, 1 to\n"
	"                       100 (default 50)\n"
	"  --dry-run            say what would be done, change nothing\n"
	"  --json               print one JSON object instead of text\n"
	"  -h, --help           print this help\n"
	"\n"
	"Exit status: 0 success, 1 a data file was left alone because a live\n"
	"record in it is damaged (see kvfsctl fsck), 2 usage or operational\n"
	"error (DATADIR mounted, unreadable, no space, ...).\n";

/*
 * Writes len bytes of wbuf at off, or (wbuf NULL) reads len bytes into
 * rbuf: 0, -ENODATA when a read meets EOF, -EIO when a write moves
 * nothing, or -errno.
 */
static int gc_io(int fd, void *rbuf, const void *wbuf, size_t len, uint64_t off)
{
	ssize_t n = kc_pio(fd, rbuf, wbuf, len, off);

	if (n < 0)
		return (int)n;
	if ((size_t)n < len)
		return wbuf ? -EIO : -ENODATA;
	return 0;
}

/* Opens every DATADIR/data/NNNNNN.kvd read-write; next_id follows them. */
static int gc_open_files(struct gc *g)
{
	int rc = kc_datafiles_open(g->cmd, g->datadir, O_RDWR, UINT32_MAX - 2,
				   &g->data_fd, &g->files, &g->nfiles);

	g->next_id = g->nfiles ? g->files[g->nfiles - 1].id + 1 : 1;
	return rc;
}

/* idx_purge_orphans() callback: punches the orphan's record. */
static void gc_free_orphan(void *arg, const struct kv_extent *ext)
{
	struct gc *g = arg;
	struct kc_datafile *f =
		kc_datafile_find(g->files, g->nfiles, ext->file_id);
	uint64_t span = kv_extent_span(ext);

	g->orphan_bytes += span;
	if (f && fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			   (off_t)ext->off, (off_t)span) < 0)
		log_warn("cannot punch the orphan record at %06u.kvd+%llu: "
			 "%s",
			 ext->file_id, (unsigned long long)ext->off,
			 strerror(errno));
}

static int gc_live_add(struct gc *g, const struct gc_live *l)
{
	if (kc_grow((void **)&g->live, &g->caplive, g->nlive,
		    sizeof(*g->live)) < 0)
		return -ENOMEM;
	g->live[g->nlive++] = *l;
	return 0;
}

static int gc_live_cmp(const void *a, const void *b)
{
	const struct gc_live *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* The live data record of g->live[0..ndata) that starts at off, or NULL. */
static const struct gc_live *gc_data_at(const struct gc *g, size_t ndata,
					uint64_t off)
{
	struct gc_live key = {.off = off};

	return ndata ? bsearch(&key, g->live, ndata, sizeof(*g->live),
			       gc_live_cmp)
		     : NULL;
}

/*
 * Whether the name record (ino, seq) still decides ino's name: ino has a
 * name and a record, and that data record is older. 1 yes, 0 no; when the
 * data record cannot be read, yes (keep what we cannot judge).
 */
static int gc_name_live(struct gc *g, uint64_t ino, uint64_t seq)
{
	unsigned char *big = NULL;
	struct store_hdr h;
	struct kc_datafile *f;
	struct idx_attr a;
	int rc;

	rc = idx_getattr(g->idx, ino, &a);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if (a.nlink == 0 || !S_ISREG(a.mode) || a.ext.file_id == 0)
		return 0;
	f = kc_datafile_find(g->files, g->nfiles, a.ext.file_id);
	if (!f)
		return 1;
	rc = kc_read_hdr(f, a.ext.off, a.ext.hdr_len, g->buf, GC_BUF, &big, &h);
	free(big);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0 || h.ino != ino)
		return 1;
	return seq > h.seq;
}

typedef int (*gc_rec_fn)(struct gc *g, const struct kc_datafile *f,
			 uint64_t off, const struct store_hdr *h, void *arg);

/*
 * Calls fn for each record header in f, skipping holes and the live data
 * records g->live[0..ndata) (sorted by offset). Where no header decodes,
 * the next page is tried. h is valid during the call only; fn returns 0
 * or -errno (which stops the walk).
 */
static int gc_walk(struct gc *g, const struct kc_datafile *f, size_t ndata,
		   gc_rec_fn fn, void *arg)
{
	unsigned char *big = NULL;
	uint64_t pos = 0;
	int rc = 0;

	while (pos < f->size) {
		uint64_t d = kc_next_data(f, pos);
		const struct gc_live *l;
		struct store_hdr h;

		if (d > pos)
			pos = d;
		if (pos >= f->size)
			break;
		l = gc_data_at(g, ndata, pos);
		if (l) {
			pos += l->hdr_len + kv_align_up(l->len);
			continue;
		}
		rc = kc_read_hdr(f, pos, 0, g->buf, GC_BUF, &big, &h);
		if (rc == -ENOMEM)
			break;
		if (rc < 0) {
			rc = 0;
			pos += KV_ALIGN;
			continue;
		}
		rc = fn(g, f, pos, &h, arg);
		if (rc < 0)
			break;
		pos += h.hdr_len + kv_align_up(h.len);
	}
	free(big);
	return rc;
}

static int gc_name_cmp(const void *a, const void *b)
{
	const struct gc_name *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	/* Newest first; of equal copies, the one in the newest file. */
	if (x->seq != y->seq)
		return x->seq > y->seq ? -1 : 1;
	if (x->file_id != y->file_id)
		return x->file_id > y->file_id ? -1 : 1;
	return x->off > y->off ? -1 : x->off < y->off;
}

static int gc_find_name(struct gc *g, const struct kc_datafile *f, uint64_t off,
			const struct store_hdr *h, void *arg)
{
	(void)arg;
	if (h->type != STORE_REC_NAME)
		return 0;
	if (kc_grow((void **)&g->names, &g->capnames, g->nnames,
		    sizeof(*g->names)) < 0)
		return -ENOMEM;
	g->names[g->nnames++] = (struct gc_name){
		.ino = h->ino, .seq = h->seq, .file_id = f->id, .off = off};
	return 0;
}

/*
 * The first pass: every name record of every data file, reduced to the
 * one copy that decides each inode's name in a rebuild (the newest; of
 * copies of it, the one in the newest file).
 */
static int gc_find_names(struct gc *g)
{
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < g->nfiles; i++) {
		rc = gc_walk(g, &g->files[i], 0, gc_find_name, NULL);
		if (rc < 0) {
			kc_err(g->cmd, "reading %06u.kvd: %s", g->files[i].id,
			       strerror(-rc));
			return rc;
		}
	}
	if (g->nnames == 0)
		return 0;
	qsort(g->names, g->nnames, sizeof(*g->names), gc_name_cmp);
	for (size_t i = 0; i < g->nnames; i++)
		if (n == 0 || g->names[n - 1].ino != g->names[i].ino)
			g->names[n++] = g->names[i];
	g->nnames = n;
	return 0;
}

/* Whether the name record at (file_id, off) is ino's deciding one. */
static int gc_name_newest(const struct gc *g, uint64_t ino, uint32_t file_id,
			  uint64_t off)
{
	size_t lo = 0, hi = g->nnames;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->names[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < g->nnames && g->names[lo].ino == ino &&
	       g->names[lo].file_id == file_id && g->names[lo].off == off;
}

/* gc_walk() callback of gc_classify(): judges one record not live yet. */
static int gc_classify_one(struct gc *g, const struct kc_datafile *f,
			   uint64_t off, const struct store_hdr *h, void *arg)
{
	struct gc_result *r = arg;
	uint32_t hdr_len = h->hdr_len;
	int rc;

	if (h->type == STORE_REC_DATA) {
		r->nunref++;
		return 0;
	}
	rc = gc_name_newest(g, h->ino, f->id, off)
		     ? gc_name_live(g, h->ino, h->seq)
		     : 0;
	if (rc < 0)
		return rc;
	if (rc == 0) {
		r->ndead_names++;
		return 0;
	}
	rc = gc_live_add(g, &(struct gc_live){.ino = h->ino,
					      .off = off,
					      .hdr_len = hdr_len,
					      .type = STORE_REC_NAME});
	if (rc < 0)
		return rc;
	r->nnames++;
	r->live_bytes += hdr_len;
	return 0;
}

/*
 * Sorts out f's records into g->live (by offset): the data records the
 * index points at, each checked against its header, and the name records
 * still needed. Counts the dead ones in r. Returns 0, 1 when a live record
 * is damaged (r->why says how), or -errno.
 */
static int gc_classify(struct gc *g, const struct kc_datafile *f,
		       struct gc_result *r)
{
	struct idx_rec recs[GC_BATCH];
	unsigned char *big = NULL;
	uint64_t from = 0;
	size_t ndata;
	int got, rc = 0;

	g->nlive = 0;
	while ((got = idx_file_records(g->idx, f->id, from, recs, GC_BATCH)) >
	       0) {
		for (int i = 0; i < got; i++) {
			const struct kv_extent *e = &recs[i].ext;
			struct store_hdr h;

			rc = kc_read_hdr(f, e->off, e->hdr_len, g->buf, GC_BUF,
					 &big, &h);
			if (rc == -ENOMEM)
				goto out;
			if (rc == 0 &&
			    (h.type != STORE_REC_DATA || h.ino != recs[i].ino ||
			     h.len != e->len))
				rc = -EINVAL;
			if (rc == 0 && e->off + kv_extent_span(e) > f->size)
				rc = -ENODATA;
			if (rc < 0) {
				r->why = NULL;
				if (asprintf(&r->why,
					     "the record of inode %llu at "
					     "offset %llu is %s",
					     (unsigned long long)recs[i].ino,
					     (unsigned long long)e->off,
					     rc == -ENODATA
						     ? "cut short by the end "
						       "of the file"
						     : "damaged (its header "
						       "does not match the "
						       "index)") < 0)
					r->why = NULL;
				rc = r->why ? 1 : -ENOMEM;
				goto out;
			}
			rc = gc_live_add(g, &(struct gc_live){
						    .ino = recs[i].ino,
						    .off = e->off,
						    .hdr_len = e->hdr_len,
						    .len = e->len,
						    .type = STORE_REC_DATA,
					    });
			if (rc < 0)
				goto out;
			r->nlive++;
			r->live_bytes += kv_extent_span(e);
		}
		from = recs[got - 1].ext.off + 1;
		if (got < GC_BATCH)
			break;
	}
	if (got < 0) {
		rc = got;
		goto out;
	}
	ndata = g->nlive;
	/* The rest: name records to judge, dead data records to count. */
	rc = gc_walk(g, f, ndata, gc_classify_one, r);
	if (rc < 0)
		goto out;
	if (g->nlive)
		qsort(g->live, g->nlive, sizeof(*g->live), gc_live_cmp);
out:
	free(big);
	return rc;
}

/* Makes the removal or creation of a data file durable. */
static int gc_sync_dir(struct gc *g)
{
	return fsync(g->data_fd) < 0 ? -errno : 0;
}

/* Finishes the output file: synced, closed. */
static int gc_out_close(struct gc *g)
{
	int rc = 0;

	if (g->out_fd < 0)
		return 0;
	if (fdatasync(g->out_fd) < 0)
		rc = -errno;
	close(g->out_fd);
	g->out_fd = -1;
	return rc;
}

/* Starts a new output data file, numbered after every existing one. */
static int gc_out_open(struct gc *g)
{
	char name[32];
	int rc;

	rc = gc_out_close(g);
	if (rc < 0)
		return rc;
	snprintf(name, sizeof(name), "%06u.kvd", g->next_id);
	g->out_fd = openat(g->data_fd, name,
			   O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (g->out_fd < 0) {
		rc = -errno;
		kc_err(g->cmd, "cannot create %s/data/%s: %s", g->datadir, name,
		       strerror(-rc));
		return rc;
	}
	g->out_id = g->next_id++;
	g->out_tail = 0;
	/* The index will point into it: its name must survive a crash. */
	return gc_sync_dir(g);
}

/*
 * Copies the record l of f to the output file at g->out_tail, checking the
 * payload's chunk CRCs against the header. Returns 0, 1 when the record is
 * damaged (*why set), or -errno (an I/O error of either file).
 */
static int gc_copy_one(struct gc *g, const struct kc_datafile *f,
		       const struct gc_live *l, const char **why)
{
	uint64_t padded = kv_align_up(l->len), done = 0;
	unsigned char *big = NULL, *crcs = NULL;
	const unsigned char *hdr;
	struct store_hdr h;
	int rc;

	rc = kc_read_hdr(f, l->off, l->hdr_len, g->buf, GC_BUF, &big, &h);
	if (rc == -ENOMEM || (rc < 0 && rc != -ENODATA && rc != -EINVAL))
		goto out;
	if (rc < 0 || h.ino != l->ino || h.type != l->type || h.len != l->len) {
		*why = "its header changed or does not decode";
		rc = 1;
		goto out;
	}
	hdr = big ? big : g->buf;
	rc = gc_io(g->out_fd, NULL, hdr, l->hdr_len, g->out_tail);
	if (rc < 0)
		goto out;
	/* g->buf is reused for the payload: keep the chunk CRCs. */
	if (h.nchunks) {
		crcs = malloc((size_t)h.nchunks * 4);
		if (!crcs) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(crcs, h.crcs, (size_t)h.nchunks * 4);
	}
	while (done < padded) {
		size_t n = padded - done < GC_BUF ? (size_t)(padded - done)
						  : GC_BUF;

		rc = gc_io(f->fd, g->buf, NULL, n, l->off + l->hdr_len + done);
		if (rc == -ENODATA) {
			*why = "the file ends inside it";
			rc = 1;
			goto out;
		}
		if (rc < 0)
			goto out;
		/* GC_BUF is a KV_CHUNK_SIZE multiple: whole chunks here. */
		for (uint64_t c = 0; c < n && done + c < l->len;
		     c += KV_CHUNK_SIZE) {
			uint64_t left = l->len - (done + c);
			uint32_t k = (uint32_t)((done + c) / KV_CHUNK_SIZE);

			if (crc32c(0, g->buf + c,
				   left < KV_CHUNK_SIZE ? left
							: KV_CHUNK_SIZE) !=
			    kc_le32(crcs + 4 * k)) {
				*why = "a chunk fails its CRC32C";
				rc = 1;
				goto out;
			}
		}
		rc = gc_io(g->out_fd, NULL, g->buf, n,
			   g->out_tail + l->hdr_len + done);
		if (rc < 0)
			goto out;
		done += n;
	}
	rc = 0;
out:
	free(crcs);
	free(big);
	return rc;
}

/*
 * Copies f's live records (g->live) to the output file, then points the
 * index at the copies. Returns 0, 1 when a record turned out damaged (the
 * copies are cut off again, r->why set), or -errno.
 */
static int gc_copy(struct gc *g, const struct kc_datafile *f,
		   struct gc_result *r)
{
	uint64_t start, nmoves = 0;
	const char *why = NULL;
	int rc;

	if (g->out_fd < 0 ||
	    (g->out_tail > 0 && g->out_tail + r->live_bytes > STORE_FILE_MAX)) {
		rc = gc_out_open(g);
		if (rc < 0)
			return rc;
	}
	if (kc_grow((void **)&g->moves, &g->capmoves, g->nlive,
		    sizeof(*g->moves)) < 0)
		return -ENOMEM;
	start = g->out_tail;
	for (size_t i = 0; i < g->nlive; i++) {
		const struct gc_live *l = &g->live[i];
		struct kv_extent from = {.file_id = f->id,
					 .hdr_len = l->hdr_len,
					 .off = l->off,
					 .len = l->len};

		rc = gc_copy_one(g, f, l, &why);
		if (rc == 1 &&
		    asprintf(&r->why,
			     "the %s record of inode %llu at offset "
			     "%llu is damaged: %s",
			     l->type == STORE_REC_DATA ? "data" : "name",
			     (unsigned long long)l->ino,
			     (unsigned long long)l->off, why) < 0)
			r->why = NULL;
		if (rc != 0)
			goto out_undo;
		if (l->type == STORE_REC_DATA) {
			struct kv_extent to = from;

			to.file_id = g->out_id;
			to.off = g->out_tail;
			g->moves[nmoves++] = (struct idx_move){
				.ino = l->ino, .from = from, .to = to};
		}
		g->out_tail += kv_extent_span(&from);
	}
	/* The copies are on disk before the index points at them. */
	if (fdatasync(g->out_fd) < 0) {
		rc = -errno;
		kc_err(g->cmd, "fdatasync of %06u.kvd: %s", g->out_id,
		       strerror(-rc));
		goto out_undo;
	}
	rc = idx_move_records(g->idx, g->moves, nmoves);
	if (rc < 0) {
		kc_err(g->cmd,
		       "cannot point the index at the copies of "
		       "%06u.kvd's records: %s; %06u.kvd is kept",
		       f->id, strerror(-rc), f->id);
		goto out_undo;
	}
	r->out_id = g->out_id;
	g->copied_bytes += g->out_tail - start;
	return 0;
out_undo:
	/* Nothing points at the copies: cut them off. */
	if (ftruncate(g->out_fd, (off_t)start) == 0)
		g->out_tail = start;
	if (rc == 1 && !r->why)
		rc = -ENOMEM;
	return rc;
}

/* Removes data file f (nothing in the index points into it). */
static int gc_remove(struct gc *g, struct kc_datafile *f)
{
	char name[32];
	uint64_t refs = 1;
	int rc;

	/* The index is the authority: check once more. */
	rc = idx_datafile_refs(g->idx, f->id, &refs);
	if (rc == 0 && refs > 0)
		rc = -ESTALE;
	if (rc < 0) {
		kc_err(g->cmd,
		       "%06u.kvd: the index still points into it "
		       "(%s); kept",
		       f->id, strerror(-rc));
		return rc;
	}
	snprintf(name, sizeof(name), "%06u.kvd", f->id);
	if (unlinkat(g->data_fd, name, 0) < 0) {
		rc = -errno;
		kc_err(g->cmd, "cannot remove %s/data/%s: %s", g->datadir, name,
		       strerror(-rc));
		return rc;
	}
	close(f->fd);
	f->fd = -1;
	return 0;
}

/* Decides about one data file and carries it out. -errno stops the run. */
static int gc_one(struct gc *g, struct kc_datafile *f, struct gc_result *r)
{
	int rc;

	r->id = f->id;
	r->physical = f->physical;
	rc = gc_classify(g, f, r);
	if (rc < 0) {
		kc_err(g->cmd, "%06u.kvd: %s", f->id, strerror(-rc));
		return rc;
	}
	if (rc == 1) {
		r->action = "skipped";
		g->nskipped++;
		log_warn("gc: %06u.kvd left alone: %s", f->id, r->why);
		return 0;
	}
	if (r->nlive + r->nnames > 0 &&
	    r->live_bytes * 100 >= (uint64_t)g->threshold * f->physical) {
		r->action = "kept";
		return 0;
	}
	r->action = r->nlive + r->nnames ? "compacted" : "removed";
	if (g->dry_run)
		return 0;
	if (r->nlive + r->nnames) {
		rc = gc_copy(g, f, r);
		if (rc == 1) {
			r->action = "skipped";
			g->nskipped++;
			log_warn("gc: %06u.kvd left alone: %s", f->id, r->why);
			return 0;
		}
		if (rc < 0) {
			if (rc != -ESTALE)
				kc_err(g->cmd, "copying %06u.kvd's records: %s",
				       f->id, strerror(-rc));
			return rc;
		}
	}
	rc = gc_remove(g, f);
	if (rc < 0)
		return rc;
	if (r->nlive + r->nnames) {
		g->ncompacted++;
		g->copied_recs += r->nlive;
		g->copied_names += r->nnames;
		log_info("gc: compacted %06u.kvd: copied %llu data and %llu "
			 "name records (%llu bytes) to %06u.kvd, dropped %llu "
			 "dead name records and %llu unreferenced records; "
			 "%llu bytes were in use",
			 f->id, (unsigned long long)r->nlive,
			 (unsigned long long)r->nnames,
			 (unsigned long long)r->live_bytes, r->out_id,
			 (unsigned long long)r->ndead_names,
			 (unsigned long long)r->nunref,
			 (unsigned long long)f->physical);
	} else {
		g->nremoved++;
		log_info("gc: removed %06u.kvd: no live records (%llu dead "
			 "name records, %llu unreferenced records, %llu bytes "
			 "in use)",
			 f->id, (unsigned long long)r->ndead_names,
			 (unsigned long long)r->nunref,
			 (unsigned long long)f->physical);
	}
	g->dead_names += r->ndead_names;
	g->unref_recs += r->nunref;
	return 0;
}

static int gc_run(struct gc *g)
{
	size_t nexisting = g->nfiles;
	int rc;

	if (!g->dry_run) {
		rc = idx_purge_orphans(g->idx, gc_free_orphan, g);
		if (rc < 0) {
			kc_err(g->cmd, "cannot free the orphans: %s",
			       strerror(-rc));
			return rc;
		}
		g->orphans = (uint64_t)rc;
		if (rc > 0)
			log_info("gc: freed %d orphans (inodes unlinked while "
				 "open), %llu bytes",
				 rc, (unsigned long long)g->orphan_bytes);
	}
	rc = gc_find_names(g);
	if (rc < 0)
		return rc;
	g->res = calloc(nexisting + 1, sizeof(*g->res));
	if (!g->res)
		return -ENOMEM;
	for (size_t i = 0; i < nexisting; i++) {
		rc = gc_one(g, &g->files[i], &g->res[g->nres++]);
		if (rc < 0)
			return rc;
	}
	rc = gc_out_close(g);
	if (rc == 0 && g->data_fd >= 0 && !g->dry_run)
		rc = gc_sync_dir(g);
	if (rc < 0)
		kc_err(g->cmd, "syncing %s/data: %s", g->datadir,
		       strerror(-rc));
	return rc;
}

/* --- report ---------------------------------------------------------- */

static void gc_report_text(const struct gc *g)
{
	char a[32], b[32], c[32];
	const char *verb = g->dry_run ? "would be " : "";

	printf("gc %s%s: %zu data files examined, threshold %u%% live\n",
	       g->datadir, g->dry_run ? " (dry run)" : "", g->nres,
	       g->threshold);
	for (size_t i = 0; i < g->nres; i++) {
		const struct gc_result *r = &g->res[i];
		unsigned pct =
			r->physical
				? (unsigned)(r->live_bytes * 100 / r->physical)
				: 0;

		if (strcmp(r->action, "skipped") == 0) {
			printf("SKIPPED    %06u.kvd: %s; run kvfsctl fsck\n",
			       r->id, r->why);
			continue;
		}
		printf("%-10s %06u.kvd: %llu data + %llu name records live "
		       "(%s of %s, %u%%), %llu dead name records, %llu "
		       "unreferenced",
		       r->action, r->id, (unsigned long long)r->nlive,
		       (unsigned long long)r->nnames,
		       kc_size(a, sizeof(a), r->live_bytes),
		       kc_size(b, sizeof(b), r->physical), pct,
		       (unsigned long long)r->ndead_names,
		       (unsigned long long)r->nunref);
		if (r->out_id)
			printf(" -> %06u.kvd", r->out_id);
		printf("\n");
	}
	if (g->dry_run) {
		printf("nothing changed (dry run)\n");
		return;
	}
	printf("%scompacted %llu, removed %llu, skipped %llu data files; "
	       "copied %llu data and %llu name records (%s)\n",
	       verb, (unsigned long long)g->ncompacted,
	       (unsigned long long)g->nremoved, (unsigned long long)g->nskipped,
	       (unsigned long long)g->copied_recs,
	       (unsigned long long)g->copied_names,
	       kc_size(a, sizeof(a), g->copied_bytes));
	printf("dropped %llu dead name records and %llu unreferenced records; "
	       "freed %llu orphans\n",
	       (unsigned long long)g->dead_names,
	       (unsigned long long)g->unref_recs,
	       (unsigned long long)g->orphans);
	printf("physical %s in %llu data files -> %s in %llu data files "
	       "(%s reclaimed)\n",
	       kc_size(a, sizeof(a), g->before.physical),
	       (unsigned long long)g->before.nfiles,
	       kc_size(b, sizeof(b), g->after.physical),
	       (unsigned long long)g->after.nfiles,
	       kc_size(c, sizeof(c),
		       g->before.physical > g->after.physical
			       ? g->before.physical - g->after.physical
			       : 0));
}

static void gc_report_json(const struct gc *g)
{
	printf("{\"datadir\": ");
	kc_json_str(stdout, g->datadir);
	printf(", \"threshold\": %u, \"dry_run\": %s, \"files\": [",
	       g->threshold, g->dry_run ? "true" : "false");
	for (size_t i = 0; i < g->nres; i++) {
		const struct gc_result *r = &g->res[i];

		printf("%s{\"file\": \"%06u.kvd\", \"action\": \"%s\", "
		       "\"physical_bytes\": %llu, \"live_bytes\": %llu, "
		       "\"live_records\": %llu, \"live_name_records\": %llu, "
		       "\"dead_name_records\": %llu, "
		       "\"unreferenced_records\": %llu, \"to\": ",
		       i ? ", " : "", r->id, r->action,
		       (unsigned long long)r->physical,
		       (unsigned long long)r->live_bytes,
		       (unsigned long long)r->nlive,
		       (unsigned long long)r->nnames,
		       (unsigned long long)r->ndead_names,
		       (unsigned long long)r->nunref);
		if (r->out_id)
			printf("\"%06u.kvd\"", r->out_id);
		else
			printf("null");
		printf(", \"reason\": ");
		if (r->why)
			kc_json_str(stdout, r->why);
		else
			printf("null");
		printf("}");
	}
	printf("], \"examined\": %zu, \"compacted\": %llu, \"removed\": %llu, "
	       "\"skipped\": %llu, \"records_copied\": %llu, "
	       "\"name_records_copied\": %llu, \"bytes_copied\": %llu, "
	       "\"dead_name_records\": %llu, \"unreferenced_records\": %llu, "
	       "\"orphans_freed\": %llu, \"physical_before\": %llu, "
	       "\"physical_after\": %llu, \"data_files_before\": %llu, "
	       "\"data_files_after\": %llu, \"bytes_reclaimed\": %llu}\n",
	       g->nres, (unsigned long long)g->ncompacted,
	       (unsigned long long)g->nremoved, (unsigned long long)g->nskipped,
	       (unsigned long long)g->copied_recs,
	       (unsigned long long)g->copied_names,
	       (unsigned long long)g->copied_bytes,
	       (unsigned long long)g->dead_names,
	       (unsigned long long)g->unref_recs,
	       (unsigned long long)g->orphans,
	       (unsigned long long)g->before.physical,
	       (unsigned long long)g->after.physical,
	       (unsigned long long)g->before.nfiles,
	       (unsigned long long)g->after.nfiles,
	       (unsigned long long)(g->before.physical > g->after.physical
					    ? g->before.physical -
						      g->after.physical
					    : 0));
}

/* --- the command ------------------------------------------------------ */

static int gc_parse(struct gc *g, int argc, char **argv, int *help)
{
	static const struct option opts[] = {
		{"threshold", required_argument, NULL, 't'},
		{"dry-run", no_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long v;
	char *end;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (*end == '%')
				end++;
			if (errno || end == optarg || *end || v < 1 ||
			    v > 100 || optarg[0] < '0' || optarg[0] > '9') {
				kc_err(g->cmd,
				       "--threshold wants a percentage from 1 "
				       "to 100, not '%s'",
				       optarg);
				return -1;
			}
			g->threshold = (unsigned)v;
			break;
		case 'n':
			g->dry_run = 1;
			break;
		case 'j':
			g->json = 1;
			break;
		case 'h':
			*help = 1;
			break;
		case ':':
			kc_err(g->cmd,
			       "option '%s' needs a value; try 'kvfsctl gc "
			       "--help'",
			       argv[optind - 1]);
			return -1;
		default:
			kc_err(g->cmd,
			       "unknown option '%s'; try 'kvfsctl gc --help'",
			       argv[optind - 1]);
			return -1;
		}
	}
	if (*help)
		return 0;
	if (argc - optind != 1) {
		kc_err(g->cmd, "%s; try 'kvfsctl gc --help'",
		       argc - optind < 1
			       ? "missing DATADIR"
			       : "too many arguments: expected DATADIR");
		return -1;
	}
	return optind;
}

static void gc_free(struct gc *g)
{
	kc_datafiles_close(g->files, g->nfiles);
	for (size_t i = 0; i < g->nres; i++)
		free(g->res[i].why);
	free(g->res);
	free(g->live);
	free(g->moves);
	free(g->names);
	free(g->buf);
	if (g->out_fd >= 0)
		close(g->out_fd);
	if (g->data_fd >= 0)
		close(g->data_fd);
	idx_close(g->idx);
	free(g->datadir);
}

int kc_gc(int argc, char **argv)
{
	struct gc g = {.cmd = "gc",
		       .threshold = GC_DEFAULT_THRESHOLD,
		       .data_fd = -1,
		       .out_fd = -1};
	struct kc_target t;
	char path[PATH_MAX];
	int help = 0, i, rc, lock_fd = -1, ret = KC_EXIT_ERROR;

	i = gc_parse(&g, argc, argv, &help);
	if (i < 0)
		return KC_EXIT_ERROR;
	if (help) {
		fputs(gc_usage, stdout);
		return KC_EXIT_OK;
	}
	if (kc_target_open(g.cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (t.mounted) {
		if (t.mountpoint)
			kc_err(g.cmd,
			       "%s is being served by kvfs (pid %ld, mounted "
			       "at %s): gc works on an unmounted data "
			       "directory only; unmount it first (fusermount3 "
			       "-u %s), or use kvfsctl evict on the mount",
			       t.datadir, t.pid, t.mountpoint, t.mountpoint);
		else
			kc_err(g.cmd,
			       "%s is locked by process %ld: a kvfs serves it "
			       "or another kvfsctl fsck or gc runs; gc works "
			       "on an unmounted data directory only",
			       t.datadir, t.pid);
		kc_target_free(&t);
		return KC_EXIT_ERROR;
	}
	g.datadir = t.datadir;
	t.datadir = NULL;
	kc_target_free(&t);
	if (!g.dry_run) {
		/* What an operator changed goes to the system log. */
		log_use_syslog("kvfsctl");
		log_set_level(LOG_LVL_INFO);
	}
	if (posix_memalign((void **)&g.buf, KV_ALIGN, GC_BUF) != 0) {
		g.buf = NULL;
		kc_err(g.cmd, "%s", strerror(ENOMEM));
		goto out_free;
	}
	if (kc_lock_datadir(g.cmd, g.datadir, &lock_fd) < 0)
		goto out_free;
	snprintf(path, sizeof(path), "%s/index.db", g.datadir);
	if (access(path, F_OK) < 0) {
		kc_err(g.cmd,
		       "%s: %s; gc needs the index to tell live records from "
		       "dead ones (kvfsctl fsck --rebuild-index makes one)",
		       path, strerror(errno));
		goto out_free;
	}
	rc = idx_open(&g.idx, path, 0755, getuid(), getgid());
	/* Nothing is unlinked before the commit that frees it is durable. */
	if (rc == 0)
		rc = idx_set_durable(g.idx, 1);
	if (rc < 0) {
		kc_err(g.cmd, "cannot open %s: %s", path, strerror(-rc));
		goto out_free;
	}
	if (kc_data_usage(g.datadir, &g.before) < 0 || gc_open_files(&g) < 0)
		goto out_free;
	rc = gc_run(&g);
	if (rc < 0) {
		g.failed = 1;
		log_warn("gc of %s stopped: %s", g.datadir, strerror(-rc));
	}
	if (kc_data_usage(g.datadir, &g.after) < 0)
		g.after = g.before;
	if (!g.dry_run && !g.failed)
		log_info("gc of %s: compacted %llu and removed %llu data "
			 "files, skipped %llu; physical use %llu -> %llu bytes",
			 g.datadir, (unsigned long long)g.ncompacted,
			 (unsigned long long)g.nremoved,
			 (unsigned long long)g.nskipped,
			 (unsigned long long)g.before.physical,
			 (unsigned long long)g.after.physical);
	if (g.json)
		gc_report_json(&g);
	else
		gc_report_text(&g);
	ret = g.failed	   ? KC_EXIT_ERROR
	      : g.nskipped ? KC_EXIT_DAMAGE
			   : KC_EXIT_OK;
out_free:
	gc_free(&g);
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}
