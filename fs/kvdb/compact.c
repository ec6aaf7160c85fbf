/* SPDX-License-Identifier: MIT */
/*
 * The gc engine: classifies each data file's records as live or dead,
 * copies the live ones of files mostly dead to a new data file, moves the
 * index rows to the copies in one transaction and removes the old files.
 * See compact.h. Single-threaded; the index is reached only through
 * index.h.
 */
#include "compact.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "datadir.h"
#include "datafile.h"
#include "extfile.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "record.h"
#include "store.h"

/* Bytes copied at a time; a multiple of KV_CHUNK_SIZE and KV_ALIGN. */
#define COMPACT_BUF (1u << 20)
/* Index rows read at a time. */
#define COMPACT_BATCH 256

/* A record to keep: a data record (ino's row points at it) or a name one. */
struct compact_live {
	uint64_t ino;
	uint64_t off;
	uint32_t hdr_len;
	uint64_t len;
	uint32_t type;
};

/* A name or node record, as found by the first pass (compact_find_names). */
struct compact_name {
	uint64_t ino;
	uint64_t seq;
	uint32_t file_id;
	uint64_t off;
	uint32_t count; /* after the pass: the inode's name and node records */
};

struct compact {
	struct kvdb *db;
	const struct compact_opts *o;
	struct compact_result *r;
	unsigned char *buf; /* COMPACT_BUF bytes, KV_ALIGN-aligned */
	struct compact_live *live;
	size_t nlive, caplive;
	struct idx_move *moves;
	size_t capmoves;
	struct compact_name *names; /* the newest name record of each inode */
	size_t nnames, capnames;
	/* the data file copies go to */
	int out_fd;
	uint32_t out_id;
	uint32_t next_id;
	uint64_t out_tail;
};

/*
 * Writes len bytes of wbuf at off, or (wbuf NULL) reads len bytes into
 * rbuf: 0, -ENODATA when a read meets EOF, -EIO when a write moves
 * nothing, or -errno.
 */
static int compact_io(const struct store_io_ops *io, int fd, void *rbuf,
		      const void *wbuf, size_t len, uint64_t off)
{
	ssize_t n = kvdb_pio(io, fd, rbuf, wbuf, len, off);

	if (n < 0)
		return (int)n;
	if ((size_t)n < len)
		return wbuf ? -EIO : -ENODATA;
	return 0;
}

/* idx_purge_orphans() callback: punches the orphan's record. */
static void compact_free_orphan(void *arg, const struct kv_extent *ext)
{
	struct compact *g = arg;
	struct kvdb_datafile *f =
		kvdb_datafile_find(g->db->dfs, g->db->ndfs, ext->file_id);
	uint64_t span = kv_extent_span(ext);

	g->r->orphan_bytes += span;
	if (f && fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			   (off_t)ext->off, (off_t)span) < 0)
		log_warn("cannot punch the orphan record at %06u.kvd+%llu: "
			 "%s",
			 ext->file_id, (unsigned long long)ext->off,
			 strerror(errno));
}

static int compact_live_add(struct compact *g, const struct compact_live *l)
{
	if (kvdb_grow((void **)&g->live, &g->caplive, g->nlive,
		      sizeof(*g->live)) < 0)
		return -ENOMEM;
	g->live[g->nlive++] = *l;
	return 0;
}

static int compact_live_cmp(const void *a, const void *b)
{
	const struct compact_live *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* The live data record of g->live[0..ndata) that starts at off, or NULL. */
static const struct compact_live *compact_data_at(const struct compact *g,
						  size_t ndata, uint64_t off)
{
	struct compact_live key = {.off = off};

	return ndata ? bsearch(&key, g->live, ndata, sizeof(*g->live),
			       compact_live_cmp)
		     : NULL;
}

/*
 * Whether the name record (ino, seq) still decides ino's name: ino has a
 * name and a record, and that data record is older. 1 yes, 0 no; when the
 * data record cannot be read, yes (keep what we cannot judge).
 */
/*
 * compact_name_live() for an extent file: its name record is needed when
 * it is newer than the path in the extent file's own header (or that
 * header cannot be read).
 */
static int compact_name_live_extent(struct compact *g, uint64_t ino,
				    uint64_t seq)
{
	struct extf_info *info = malloc(sizeof(*info));
	int rc;

	if (!info)
		return -ENOMEM;
	rc = g->db->ext_fd < 0 ? -ENOENT
			       : extf_read_hdr(g->db->ext_fd, ino, info);
	rc = rc < 0 || info->ino != ino ? 1 : seq > info->seq;
	free(info);
	return rc;
}

static int compact_name_live(struct compact *g, uint64_t ino, uint64_t seq)
{
	struct kvdb_hdr kh;
	struct kvdb_datafile *f;
	struct idx_attr a;
	int rc;

	rc = idx_getattr(g->db->idx, ino, &a);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if (a.nlink > 0 && S_ISREG(a.mode) && kv_ext_large(&a.ext))
		return compact_name_live_extent(g, ino, seq);
	if (a.nlink == 0 || !S_ISREG(a.mode) || a.ext.file_id == 0)
		return 0;
	f = kvdb_datafile_find(g->db->dfs, g->db->ndfs, a.ext.file_id);
	if (!f)
		return 1;
	rc = kvdb_hdr_read(f, a.ext.off, a.ext.hdr_len, &kh);
	if (rc == 0)
		rc = kh.r.hdr.ino != ino ? 1 : seq > kh.r.hdr.seq;
	else if (rc != -ENOMEM)
		rc = 1;
	kvdb_hdr_done(&kh);
	return rc;
}

typedef int (*compact_rec_fn)(struct compact *g, const struct kvdb_datafile *f,
			      uint64_t off, const struct store_hdr *h,
			      void *arg);

/*
 * Calls fn for each record header in f, skipping holes and the live data
 * records g->live[0..ndata) (sorted by offset). Where no header decodes,
 * the next page is tried. h is valid during the call only; fn returns 0
 * or -errno (which stops the walk).
 */
static int compact_walk(struct compact *g, const struct kvdb_datafile *f,
			size_t ndata, compact_rec_fn fn, void *arg)
{
	struct record_iter_opts o;
	struct record_iter it;
	struct record r;
	int rc;

	kvdb_iter_opts(f, 0, 0, &o);
	rc = record_iter_open(&it, f->fd, 0, &o);
	if (rc < 0)
		return rc;
	while (rc == 0) {
		int st = record_iter_next(&it, &r);
		const struct compact_live *l;

		if (st == RECORD_END || st == -ENOMEM) {
			rc = st == -ENOMEM ? st : 0;
			break;
		}
		/* A live data record: the index vouched for it, step over. */
		l = compact_data_at(g, ndata, r.off);
		if (l) {
			uint64_t end = r.off + l->hdr_len + kv_align_up(l->len);

			if (st != RECORD_OK || r.next != end)
				record_iter_seek(&it, end);
			continue;
		}
		if (st < 0 || st == RECORD_TORN || st == RECORD_INVALID) {
			record_iter_skip(&it); /* try the next page */
			continue;
		}
		rc = fn(g, f, r.off, &r.hdr, arg);
		if (st == RECORD_SHORT)
			record_iter_seek(&it, r.next); /* the end of the file */
	}
	record_iter_close(&it);
	return rc;
}

static int compact_name_cmp(const void *a, const void *b)
{
	const struct compact_name *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	/* Newest first; of equal copies, the one in the newest file. */
	if (x->seq != y->seq)
		return x->seq > y->seq ? -1 : 1;
	if (x->file_id != y->file_id)
		return x->file_id > y->file_id ? -1 : 1;
	return x->off > y->off ? -1 : x->off < y->off;
}

static int compact_find_name(struct compact *g, const struct kvdb_datafile *f,
			     uint64_t off, const struct store_hdr *h, void *arg)
{
	(void)arg;
	if (h->type != STORE_REC_NAME && h->type != STORE_REC_NODE)
		return 0;
	if (kvdb_grow((void **)&g->names, &g->capnames, g->nnames,
		      sizeof(*g->names)) < 0)
		return -ENOMEM;
	g->names[g->nnames++] = (struct compact_name){
		.ino = h->ino, .seq = h->seq, .file_id = f->id, .off = off};
	return 0;
}

/*
 * The first pass: every name record of every data file, reduced to the
 * one copy that decides each inode's name in a rebuild (the newest; of
 * copies of it, the one in the newest file).
 */
static int compact_find_names(struct compact *g)
{
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < g->db->ndfs; i++) {
		rc = compact_walk(g, &g->db->dfs[i], 0, compact_find_name,
				  NULL);
		if (rc < 0) {
			kvdb_report(g->db, "reading %06u.kvd: %s",
				    g->db->dfs[i].id, strerror(-rc));
			return rc;
		}
	}
	if (g->nnames == 0)
		return 0;
	qsort(g->names, g->nnames, sizeof(*g->names), compact_name_cmp);
	for (size_t i = 0; i < g->nnames; i++) {
		if (n == 0 || g->names[n - 1].ino != g->names[i].ino) {
			g->names[n] = g->names[i];
			g->names[n++].count = 0;
		}
		g->names[n - 1].count++;
	}
	g->nnames = n;
	return 0;
}

/*
 * Whether the name or node record at (file_id, off) is ino's deciding one:
 * 0 no, else how many name and node records ino has.
 */
static uint32_t compact_name_newest(const struct compact *g, uint64_t ino,
				    uint32_t file_id, uint64_t off)
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
			       g->names[lo].file_id == file_id &&
			       g->names[lo].off == off
		       ? g->names[lo].count
		       : 0;
}

/*
 * compact_name_live() for a node record (a special file or symlink, or
 * one removed: no names): needed while the index has the inode, and a
 * removal while an older node record of it is left somewhere (count > 1),
 * which a rebuild would otherwise bring back.
 */
static int compact_node_live(struct compact *g, const struct store_hdr *h,
			     uint32_t count)
{
	size_t head = strnlen(h->path, h->path_len) + 1;
	struct idx_attr a;
	int rc;

	if (head < h->path_len)
		head += strnlen(h->path + head, h->path_len - head) + 1;
	if (head >= h->path_len)
		return count > 1;
	rc = idx_getattr(g->db->idx, h->ino, &a);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	return a.nlink > 0 && !S_ISREG(a.mode) && !S_ISDIR(a.mode);
}

/* compact_walk() callback of compact_classify(): judges one record not live yet. */
static int compact_classify_one(struct compact *g,
				const struct kvdb_datafile *f, uint64_t off,
				const struct store_hdr *h, void *arg)
{
	struct compact_file *r = arg;
	uint32_t hdr_len = h->hdr_len, count;
	int rc;

	if (h->type == STORE_REC_DATA) {
		r->nunref++;
		return 0;
	}
	count = compact_name_newest(g, h->ino, f->id, off);
	/* A directory's move is kept: records older than it may need it. */
	if (h->type == STORE_REC_MOVE)
		rc = 1;
	else if (!count)
		rc = 0;
	else if (h->type == STORE_REC_NODE)
		rc = compact_node_live(g, h, count);
	else
		rc = compact_name_live(g, h->ino, h->seq);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		r->ndead_names++;
		return 0;
	}
	rc = compact_live_add(g, &(struct compact_live){.ino = h->ino,
							.off = off,
							.hdr_len = hdr_len,
							.type = h->type});
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
static int compact_classify(struct compact *g, const struct kvdb_datafile *f,
			    struct compact_file *r)
{
	struct idx_rec recs[COMPACT_BATCH];
	uint64_t from = 0;
	size_t ndata;
	int got, rc = 0;

	g->nlive = 0;
	while ((got = idx_file_records(g->db->idx, f->id, from, recs,
				       COMPACT_BATCH)) > 0) {
		for (int i = 0; i < got; i++) {
			const struct kv_extent *e = &recs[i].ext;
			struct kvdb_hdr kh;

			rc = kvdb_hdr_read(f, e->off, e->hdr_len, &kh);
			if (rc == 0 && (kh.r.hdr.type != STORE_REC_DATA ||
					kh.r.hdr.ino != recs[i].ino ||
					kh.r.hdr.len != e->len))
				rc = -EINVAL;
			kvdb_hdr_done(&kh);
			if (rc == -ENOMEM)
				goto out;
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
			rc = compact_live_add(g, &(struct compact_live){
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
		if (got < COMPACT_BATCH)
			break;
	}
	if (got < 0) {
		rc = got;
		goto out;
	}
	ndata = g->nlive;
	/* The rest: name records to judge, dead data records to count. */
	rc = compact_walk(g, f, ndata, compact_classify_one, r);
	if (rc < 0)
		goto out;
	if (g->nlive)
		qsort(g->live, g->nlive, sizeof(*g->live), compact_live_cmp);
out:
	return rc;
}

/* Makes the removal or creation of a data file durable. */
static int compact_sync_dir(struct compact *g)
{
	return fsync(g->db->data_fd) < 0 ? -errno : 0;
}

/* Finishes the output file: synced, closed. */
static int compact_out_close(struct compact *g)
{
	int rc = 0;

	if (g->out_fd < 0)
		return 0;
	rc = kvdb_sync(g->db->io, g->out_fd);
	close(g->out_fd);
	g->out_fd = -1;
	return rc;
}

/* Starts a new output data file, numbered after every existing one. */
static int compact_out_open(struct compact *g)
{
	char name[DATADIR_NAME_MAX];
	int rc;

	rc = compact_out_close(g);
	if (rc < 0)
		return rc;
	datadir_file_name(name, sizeof(name), g->next_id);
	g->out_fd = openat(g->db->data_fd, name,
			   O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (g->out_fd < 0) {
		rc = -errno;
		kvdb_report(g->db, "cannot create %s/data/%s: %s",
			    g->db->datadir, name, strerror(-rc));
		return rc;
	}
	g->out_id = g->next_id++;
	g->out_tail = 0;
	/* The index will point into it: its name must survive a crash. */
	return compact_sync_dir(g);
}

/*
 * Copies the record l of f to the output file at g->out_tail, checking the
 * payload's chunk CRCs against the header. Returns 0, 1 when the record is
 * damaged (*why set), or -errno (an I/O error of either file).
 */
static int compact_copy_one(struct compact *g, const struct kvdb_datafile *f,
			    const struct compact_live *l, const char **why)
{
	uint64_t padded = kv_align_up(l->len), done = 0;
	unsigned char *big = NULL, *hdr = g->buf;
	uint32_t *crcs = NULL;
	struct store_hdr h;
	int rc;

	/* The header's bytes are copied as they are: read them raw. */
	if (l->hdr_len > COMPACT_BUF) {
		big = l->hdr_len <= RECORD_HDR_MAX ? malloc(l->hdr_len) : NULL;
		if (!big && l->hdr_len <= RECORD_HDR_MAX)
			return -ENOMEM;
		hdr = big;
	}
	rc = hdr ? compact_io(f->io, f->fd, hdr, NULL, l->hdr_len, l->off)
		 : -EINVAL;
	if (rc == 0 && store_hdr_decode(hdr, l->hdr_len, &h) < 0)
		rc = -EINVAL;
	if (rc < 0 && rc != -ENODATA && rc != -EINVAL)
		goto out;
	if (rc < 0 || h.ino != l->ino || h.type != l->type || h.len != l->len) {
		*why = "its header changed or does not decode";
		rc = 1;
		goto out;
	}
	rc = compact_io(g->db->io, g->out_fd, NULL, hdr, l->hdr_len,
			g->out_tail);
	if (rc < 0)
		goto out;
	/* g->buf is reused for the payload: keep the chunk CRCs. */
	if (h.nchunks) {
		crcs = malloc((size_t)h.nchunks * sizeof(*crcs));
		if (!crcs) {
			rc = -ENOMEM;
			goto out;
		}
		for (uint32_t k = 0; k < h.nchunks; k++)
			crcs[k] = store_hdr_crc(&h, k);
	}
	while (done < padded) {
		size_t n = padded - done < COMPACT_BUF ? (size_t)(padded - done)
						       : COMPACT_BUF;

		rc = compact_io(f->io, f->fd, g->buf, NULL, n,
				l->off + l->hdr_len + done);
		if (rc == -ENODATA) {
			*why = "the file ends inside it";
			rc = 1;
			goto out;
		}
		if (rc < 0)
			goto out;
		/* COMPACT_BUF is a KV_CHUNK_SIZE multiple: whole chunks here. */
		for (uint64_t c = 0; c < n && done + c < l->len;
		     c += KV_CHUNK_SIZE) {
			uint64_t left = l->len - (done + c);
			uint32_t k = (uint32_t)((done + c) / KV_CHUNK_SIZE);

			if (crc32c(0, g->buf + c,
				   left < KV_CHUNK_SIZE
					   ? left
					   : KV_CHUNK_SIZE) != crcs[k]) {
				*why = "a chunk fails its CRC32C";
				rc = 1;
				goto out;
			}
		}
		rc = compact_io(g->db->io, g->out_fd, NULL, g->buf, n,
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
static int compact_copy(struct compact *g, const struct kvdb_datafile *f,
			struct compact_file *r)
{
	uint64_t start, nmoves = 0;
	const char *why = NULL;
	int rc;

	if (g->out_fd < 0 ||
	    (g->out_tail > 0 && g->out_tail + r->live_bytes > STORE_FILE_MAX)) {
		rc = compact_out_open(g);
		if (rc < 0)
			return rc;
	}
	if (kvdb_grow((void **)&g->moves, &g->capmoves, g->nlive,
		      sizeof(*g->moves)) < 0)
		return -ENOMEM;
	start = g->out_tail;
	for (size_t i = 0; i < g->nlive; i++) {
		const struct compact_live *l = &g->live[i];
		struct kv_extent from = {.file_id = f->id,
					 .hdr_len = l->hdr_len,
					 .off = l->off,
					 .len = l->len};

		rc = compact_copy_one(g, f, l, &why);
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
	rc = kvdb_sync(g->db->io, g->out_fd);
	if (rc < 0) {
		kvdb_report(g->db, "fdatasync of %06u.kvd: %s", g->out_id,
			    strerror(-rc));
		goto out_undo;
	}
	rc = idx_move_records(g->db->idx, g->moves, nmoves);
	if (rc < 0) {
		kvdb_report(g->db,
			    "cannot point the index at the copies of "
			    "%06u.kvd's records: %s; %06u.kvd is kept",
			    f->id, strerror(-rc), f->id);
		goto out_undo;
	}
	r->out_id = g->out_id;
	g->r->copied_bytes += g->out_tail - start;
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
static int compact_remove(struct compact *g, struct kvdb_datafile *f)
{
	char name[DATADIR_NAME_MAX];
	uint64_t refs = 1;
	int rc;

	/* The index is the authority: check once more. */
	rc = idx_datafile_refs(g->db->idx, f->id, &refs);
	if (rc == 0 && refs > 0)
		rc = -ESTALE;
	if (rc < 0) {
		kvdb_report(g->db,
			    "%06u.kvd: the index still points into it "
			    "(%s); kept",
			    f->id, strerror(-rc));
		return rc;
	}
	datadir_file_name(name, sizeof(name), f->id);
	if (unlinkat(g->db->data_fd, name, 0) < 0) {
		rc = -errno;
		kvdb_report(g->db, "cannot remove %s/data/%s: %s",
			    g->db->datadir, name, strerror(-rc));
		return rc;
	}
	close(f->fd);
	f->fd = -1;
	return 0;
}

/* Decides about one data file and carries it out. -errno stops the run. */
static int compact_one(struct compact *g, struct kvdb_datafile *f,
		       struct compact_file *r)
{
	int rc;

	r->id = f->id;
	r->physical = f->physical;
	rc = compact_classify(g, f, r);
	if (rc < 0) {
		kvdb_report(g->db, "%06u.kvd: %s", f->id, strerror(-rc));
		return rc;
	}
	if (rc == 1) {
		r->action = COMPACT_SKIPPED;
		g->r->nskipped++;
		log_warn("gc: %06u.kvd left alone: %s", f->id, r->why);
		return 0;
	}
	if (r->nlive + r->nnames > 0 &&
	    r->live_bytes * 100 >= (uint64_t)g->o->threshold * f->physical) {
		r->action = COMPACT_KEPT;
		return 0;
	}
	r->action = r->nlive + r->nnames ? COMPACT_COMPACTED : COMPACT_REMOVED;
	if (g->o->dry_run)
		return 0;
	if (r->nlive + r->nnames) {
		rc = compact_copy(g, f, r);
		if (rc == 1) {
			r->action = COMPACT_SKIPPED;
			g->r->nskipped++;
			log_warn("gc: %06u.kvd left alone: %s", f->id, r->why);
			return 0;
		}
		if (rc < 0) {
			if (rc != -ESTALE)
				kvdb_report(g->db,
					    "copying %06u.kvd's records: %s",
					    f->id, strerror(-rc));
			return rc;
		}
	}
	rc = compact_remove(g, f);
	if (rc < 0)
		return rc;
	if (r->nlive + r->nnames) {
		g->r->ncompacted++;
		g->r->copied_recs += r->nlive;
		g->r->copied_names += r->nnames;
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
		g->r->nremoved++;
		log_info("gc: removed %06u.kvd: no live records (%llu dead "
			 "name records, %llu unreferenced records, %llu bytes "
			 "in use)",
			 f->id, (unsigned long long)r->ndead_names,
			 (unsigned long long)r->nunref,
			 (unsigned long long)f->physical);
	}
	g->r->dead_names += r->ndead_names;
	g->r->unref_recs += r->nunref;
	return 0;
}

/* Frees the orphans, finds the name records, then judges each file. */
static int compact_pass(struct compact *g)
{
	size_t nexisting = g->db->ndfs;
	int rc;

	if (!g->o->dry_run) {
		rc = idx_purge_orphans(g->db->idx, compact_free_orphan, g);
		if (rc < 0) {
			kvdb_report(g->db, "cannot free the orphans: %s",
				    strerror(-rc));
			return rc;
		}
		g->r->orphans = (uint64_t)rc;
		if (rc > 0)
			log_info("gc: freed %d orphans (inodes unlinked while "
				 "open), %llu bytes",
				 rc, (unsigned long long)g->r->orphan_bytes);
		kvdb_sweep_extents(g->db);
	}
	rc = compact_find_names(g);
	if (rc < 0)
		return rc;
	g->r->files = calloc(nexisting + 1, sizeof(*g->r->files));
	if (!g->r->files)
		return -ENOMEM;
	for (size_t i = 0; i < nexisting; i++) {
		rc = compact_one(g, &g->db->dfs[i],
				 &g->r->files[g->r->nfiles++]);
		if (rc < 0)
			return rc;
	}
	rc = compact_out_close(g);
	if (rc == 0 && g->db->data_fd >= 0 && !g->o->dry_run)
		rc = compact_sync_dir(g);
	if (rc < 0)
		kvdb_report(g->db, "syncing %s/data: %s", g->db->datadir,
			    strerror(-rc));
	return rc;
}

const char *compact_action_name(enum compact_action a)
{
	switch (a) {
	case COMPACT_COMPACTED:
		return "compacted";
	case COMPACT_REMOVED:
		return "removed";
	case COMPACT_SKIPPED:
		return "skipped";
	case COMPACT_KEPT:
		break;
	}
	return "kept";
}

int compact_run(struct kvdb *db, const struct compact_opts *o,
		struct compact_result *r)
{
	struct compact g = {.db = db, .o = o, .r = r, .out_fd = -1};
	int rc;

	memset(r, 0, sizeof(*r));
	rc = datadir_usage(db->datadir, &r->before);
	if (rc < 0)
		return rc;
	r->started = 1;
	g.next_id = db->ndfs ? db->dfs[db->ndfs - 1].id + 1 : 1;
	if (posix_memalign((void **)&g.buf, KV_ALIGN, COMPACT_BUF) != 0) {
		g.buf = NULL;
		kvdb_report(db, "%s", strerror(ENOMEM));
		rc = -ENOMEM;
	} else {
		rc = compact_pass(&g);
	}
	if (rc < 0) {
		r->failed = 1;
		log_warn("gc of %s stopped: %s", db->datadir, strerror(-rc));
	}
	if (datadir_usage(db->datadir, &r->after) < 0)
		r->after = r->before;
	if (!o->dry_run && !r->failed)
		log_info("gc of %s: compacted %llu and removed %llu data "
			 "files, skipped %llu; physical use %llu -> %llu bytes",
			 db->datadir, (unsigned long long)r->ncompacted,
			 (unsigned long long)r->nremoved,
			 (unsigned long long)r->nskipped,
			 (unsigned long long)r->before.physical,
			 (unsigned long long)r->after.physical);
	free(g.live);
	free(g.moves);
	free(g.names);
	free(g.buf);
	if (g.out_fd >= 0)
		close(g.out_fd);
	return rc;
}

void compact_result_free(struct compact_result *r)
{
	for (size_t i = 0; i < r->nfiles; i++)
		free(r->files[i].why);
	free(r->files);
	memset(r, 0, sizeof(*r));
}
