/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl fsck: the offline check of a data directory, with the daemon kept
 * out by DATADIR/kvfs.lock (held, LOCK_EX, for the whole run).
 *
 * The check walks the index from the root (idx_readdir) and, for every
 * regular file with a record, in data-file order: the data file exists and
 * holds the whole record (else the block is provably short), the header
 * decodes and says what the index says, and every payload chunk has the
 * CRC32C the index lists. Then it reads the headers of every data file
 * (store_hdr_decode, page by page where no record starts, skipping holes)
 * and lists the records no named file points at, the records cut off by
 * the end of their file, and name records of inodes that are gone: space
 * that could be reclaimed.
 *
 * --repair drops what is provably short: the name goes (idx_unlink), the
 * inode is released (idx_release_inode) and what is left of its record is
 * punched. Corrupt blocks are listed and kept, like the daemon keeps them.
 *
 * --rebuild-index builds a new index.db from the record headers alone
 * (kvfs(5)), before the check: for each inode its newest whole data record,
 * named by the path of its newest record of either type; inode numbers are
 * kept; missing directories are made (0755), files get mode 0644, both owned
 * by the user running kvfsctl, with every time set to the time of the
 * rebuild. The old index.db (with its -wal and -shm) is moved aside to
 * index.db.old.<UTC time>.
 *
 * Single-threaded; the index is reached only through index.h.
 */
#include "kvfsctl.h"

#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "index.h"
#include "kvtypes.h"
#include "log.h"
#include "store.h"

/* Bytes read at a time, for payloads and for header scans. */
#define FSCK_BUF (1u << 20)

enum fsck_state { FSCK_OK, FSCK_SHORT, FSCK_CORRUPT };

struct fsck_dir {
	uint64_t ino;
	size_t parent; /* index into dirs; the root (0) is its own */
	char *name;
};

struct fsck_file {
	uint64_t ino;
	size_t dir;
	char *name;
	uint64_t size;
	struct kv_extent ext;
	enum fsck_state state;
	int64_t chunk; /* first chunk whose CRC failed, -1 */
	char *why;     /* what is wrong, malloc'd */
	int dropped;   /* --repair removed it */
};

/* A record header found by scanning a data file. */
struct fsck_rec {
	uint32_t file_id;
	uint32_t type;
	uint32_t hdr_len;
	uint32_t nchunks;
	uint64_t off;
	uint64_t seq;
	uint64_t ino;
	uint64_t len;
	int complete;	/* the file holds all of it */
	int referenced; /* a named file points at it */
	uint32_t *crcs; /* data records: nchunks values */
	char *path;	/* NULL when the header's path has a NUL byte */
};

/* Something the rebuild could not restore. */
struct fsck_note {
	char *what;
	char *why;
};

struct fsck {
	const char *cmd;
	char *datadir;
	int json;
	int repair;
	int rebuild;
	int progress; /* stderr is a terminal */
	int64_t now_ns;
	struct kc_datafile *dfs; /* sorted by id */
	size_t ndfs;
	struct idx *idx;
	struct idx_counts counts;
	struct fsck_dir *dirs;
	size_t ndirs, capdirs;
	struct fsck_file *files;
	size_t nfiles, capfiles;
	uint64_t nothers; /* symlinks and the like: nothing to check */
	struct fsck_rec *recs;
	size_t nrecs, caprecs;
	int scanned;
	struct fsck_note *notes;
	size_t nnotes, capnotes;
	char *buf; /* FSCK_BUF bytes */

	/* progress bar */
	const char *plabel;
	uint64_t ptotal;
	double plast;

	/* results */
	uint64_t nshort, ncorrupt, ndropped, repair_failed, payload_bytes;
	uint64_t nunref, unref_bytes, ntorn, torn_bytes, nstale_names;
	int index_damaged;
	struct {
		int done;
		char *old;
		uint64_t files, dirs, data_recs, name_recs, superseded, torn;
		uint64_t no_data, skipped;
	} rb;
};

static const char fsck_usage[] =
	"usage: kvfsctl fsck [--repair] [--rebuild-index] [--json] DATADIR\n"
	"\n"
	"Checks an unmounted data directory: the index against the data\n"
	"files, and every chunk's CRC32C. Reports each damaged block by path\n"
	"with the reason, and records that no name points at (space that\n"
	"could be reclaimed). Refuses to run while kvfs serves DATADIR.\n"
	"\n"
	"  --repair         drop the blocks that are provably short (their "
	"data\n"
	"                   file is missing or ends inside the record); "
	"corrupt\n"
	"                   blocks are listed and kept\n"
	"  --rebuild-index  move index.db aside (index.db.old.TIME) and build "
	"a\n"
	"                   new one from the data files alone, then check it\n"
	"  --json           print one JSON object instead of text\n"
	"  -h, --help       print this help\n"
	"\n"
	"Exit status: 0 clean, 1 damage found (also after --repair), 2 usage "
	"or\n"
	"operational error (DATADIR mounted, unreadable, ...).\n";

static double fsck_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts a progress bar (stderr, terminals only) over total units. */
static void fsck_progress_begin(struct fsck *f, const char *label,
				uint64_t total)
{
	f->plabel = label;
	f->ptotal = total ? total : 1;
	f->plast = 0;
}

static void fsck_progress(struct fsck *f, uint64_t done)
{
	char a[32], b[32], bar[31];
	double now;
	int fill;

	if (!f->progress)
		return;
	now = fsck_mono();
	if (now - f->plast < 0.1 && done < f->ptotal)
		return;
	f->plast = now;
	if (done > f->ptotal)
		done = f->ptotal;
	fill = (int)(done * 30 / f->ptotal);
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(30 - fill));
	bar[30] = '\0';
	fprintf(stderr, "\r%-20s [%s] %3d%% %s/%s\033[K", f->plabel, bar,
		(int)(done * 100 / f->ptotal), kc_size(a, sizeof(a), done),
		kc_size(b, sizeof(b), f->ptotal));
}

static void fsck_progress_end(struct fsck *f)
{
	if (f->progress)
		fprintf(stderr, "\r\033[K");
}

/* Records a note; takes ownership of nothing. */
static int fsck_note(struct fsck *f, const char *what, const char *why)
{
	struct fsck_note *n;

	if (kc_grow((void **)&f->notes, &f->capnotes, f->nnotes,
		    sizeof(*f->notes)) < 0)
		return -ENOMEM;
	n = &f->notes[f->nnotes];
	n->what = strdup(what);
	n->why = strdup(why);
	if (!n->what || !n->why) {
		free(n->what);
		free(n->why);
		return -ENOMEM;
	}
	f->nnotes++;
	return 0;
}

static char *fsck_printf(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static char *fsck_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* --- scanning data files -------------------------------------------- */

static int fsck_add_rec(struct fsck *f, const struct kc_datafile *df,
			uint64_t off, const struct store_hdr *h)
{
	struct fsck_rec *r;
	uint64_t span = h->hdr_len + kv_align_up(h->len);

	if (kc_grow((void **)&f->recs, &f->caprecs, f->nrecs,
		    sizeof(*f->recs)) < 0)
		return -ENOMEM;
	r = &f->recs[f->nrecs];
	*r = (struct fsck_rec){
		.file_id = df->id,
		.type = h->type,
		.hdr_len = h->hdr_len,
		.nchunks = h->nchunks,
		.off = off,
		.seq = h->seq,
		.ino = h->ino,
		.len = h->len,
		.complete = h->len <= df->size && off + span <= df->size,
	};
	if (h->type == STORE_REC_DATA && h->nchunks) {
		r->crcs = malloc((size_t)h->nchunks * sizeof(*r->crcs));
		if (!r->crcs)
			return -ENOMEM;
		for (uint32_t i = 0; i < h->nchunks; i++)
			r->crcs[i] = kc_le32(h->crcs + 4 * i);
	}
	if (!memchr(h->path, '\0', h->path_len)) {
		r->path = strndup(h->path, h->path_len);
		if (!r->path) {
			free(r->crcs);
			return -ENOMEM;
		}
	}
	f->nrecs++;
	return 0;
}

/*
 * Finds every record header in df: at each KV_ALIGN boundary where no
 * record covers the bytes, a header that decodes starts a record. Stops at
 * the first record the file does not hold whole (appends are in order, so
 * nothing after it can be whole either).
 */
static int fsck_scan_file(struct fsck *f, const struct kc_datafile *df,
			  uint64_t *done)
{
	unsigned char *big = NULL;
	uint64_t pos = 0;
	int rc = 0;

	while (pos < df->size) {
		uint64_t start = kc_next_data(df, pos), o = 0;
		ssize_t n;

		*done += start > pos ? start - pos : 0;
		pos = start;
		if (pos >= df->size)
			break;
		n = kc_pio(df->fd, f->buf, NULL,
			   df->size - pos < FSCK_BUF ? df->size - pos
						     : FSCK_BUF,
			   pos);
		if (n <= 0) {
			rc = n < 0 ? (int)n : -EIO;
			kc_err(f->cmd, "data file %06u.kvd at %llu: %s", df->id,
			       (unsigned long long)pos, strerror(-rc));
			break;
		}
		while (o < (uint64_t)n) {
			struct store_hdr h;
			int drc =
				store_hdr_decode(f->buf + o, (size_t)n - o, &h);

			if (drc == -EAGAIN && o > 0)
				break; /* read again from here */
			if (drc == -EAGAIN) {
				/* f->buf holds the scan: the header goes to big. */
				drc = kc_read_hdr(df, pos, h.hdr_len, NULL, 0,
						  &big, &h);
				if (drc == -ENOMEM) {
					rc = drc;
					goto out;
				}
			}
			if (drc < 0) {
				o += KV_ALIGN;
				continue;
			}
			rc = fsck_add_rec(f, df, pos + o, &h);
			if (rc < 0)
				goto out;
			if (!f->recs[f->nrecs - 1].complete) {
				o = df->size - pos;
				break;
			}
			o += h.hdr_len + kv_align_up(h.len);
		}
		pos += o;
		*done += o;
		fsck_progress(f, *done);
	}
out:
	free(big);
	return rc;
}

static int fsck_scan(struct fsck *f)
{
	uint64_t total = 0, done = 0;
	int rc = 0;

	for (size_t i = 0; i < f->ndfs; i++)
		total += f->dfs[i].size;
	fsck_progress_begin(f, "reading headers", total);
	for (size_t i = 0; rc == 0 && i < f->ndfs; i++)
		rc = fsck_scan_file(f, &f->dfs[i], &done);
	fsck_progress_end(f);
	f->scanned = 1;
	return rc;
}

/* --- rebuilding the index ------------------------------------------- */

/* Records by inode, newest first. */
static int fsck_rec_by_ino(const void *a, const void *b)
{
	const struct fsck_rec *x = *(struct fsck_rec *const *)a;
	const struct fsck_rec *y = *(struct fsck_rec *const *)b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

/* A file to create: its newest whole data record, named by name. */
struct fsck_new {
	const struct fsck_rec *data;
	const char *path;
	uint64_t name_seq;
};

static int fsck_new_by_path(const void *a, const void *b)
{
	const struct fsck_new *x = a, *y = b;
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
static const char *fsck_bad_path(const char *path)
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

/*
 * The directory path (its first len bytes) as an inode in the new index,
 * made when missing; *next_ino numbers new directories.
 */
static int fsck_mkdirs(struct fsck *f, struct idx *idx, const char *path,
		       size_t len, uint64_t *next_ino, uint64_t *out)
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
			a = (struct idx_attr){.mode = S_IFDIR | 0755,
					      .uid = getuid(),
					      .gid = getgid(),
					      .atime_ns = f->now_ns,
					      .mtime_ns = f->now_ns,
					      .ctime_ns = f->now_ns};
			rc = idx_create_ino(idx, dir, name, &a, (*next_ino)++);
			if (rc == 0)
				f->rb.dirs++;
		}
		if (rc < 0)
			return rc;
		dir = a.ino;
	}
	*out = dir;
	return 0;
}

/* Creates the files of nw[0..n) (sorted by path) in idx. */
static int fsck_populate(struct fsck *f, struct idx *idx, struct fsck_new *nw,
			 size_t n, uint64_t next_ino)
{
	const char *cached = NULL;
	size_t cached_len = 0;
	uint64_t cached_dir = KV_ROOT_INO;
	int rc;

	fsck_progress_begin(f, "rebuilding index", n);
	for (size_t i = 0; i < n; i++) {
		const struct fsck_rec *r = nw[i].data;
		const char *path = nw[i].path, *slash = strrchr(path, '/');
		size_t dlen = (size_t)(slash - path);
		struct kv_extent ext = {.file_id = r->file_id,
					.hdr_len = r->hdr_len,
					.off = r->off,
					.len = r->len},
				 old;
		struct idx_attr a = {.mode = S_IFREG | 0644,
				     .uid = getuid(),
				     .gid = getgid(),
				     .atime_ns = f->now_ns,
				     .mtime_ns = f->now_ns,
				     .ctime_ns = f->now_ns};
		uint64_t dir;

		fsck_progress(f, i);
		if (i > 0 && strcmp(path, nw[i - 1].path) == 0) {
			char *why = fsck_printf(
				"inode %llu: an inode with a newer name record "
				"has this path too; this one is left out",
				(unsigned long long)r->ino);

			rc = why ? fsck_note(f, path, why) : -ENOMEM;
			free(why);
			f->rb.skipped++;
			if (rc < 0)
				return rc;
			continue;
		}
		if (cached && dlen == cached_len &&
		    memcmp(path, cached, dlen) == 0) {
			dir = cached_dir;
			rc = 0;
		} else {
			rc = fsck_mkdirs(f, idx, path, dlen, &next_ino, &dir);
		}
		if (rc == 0)
			rc = idx_create_ino(idx, dir, slash + 1, &a, r->ino);
		if (rc == -ENOTDIR || rc == -EEXIST) {
			char *why = fsck_printf(
				"inode %llu: %s; left out",
				(unsigned long long)r->ino,
				rc == -EEXIST
					? "a directory has this path"
					: "a directory on the way is a file");

			rc = why ? fsck_note(f, path, why) : -ENOMEM;
			free(why);
			f->rb.skipped++;
			if (rc < 0)
				return rc;
			continue;
		}
		if (rc == 0)
			rc = idx_set_extent(idx, r->ino, r->len, f->now_ns,
					    &ext, r->crcs, r->nchunks, &old);
		if (rc < 0) {
			kc_err(f->cmd, "cannot add %s (inode %llu): %s", path,
			       (unsigned long long)r->ino, strerror(-rc));
			return rc;
		}
		cached = path;
		cached_len = dlen;
		cached_dir = dir;
		f->rb.files++;
	}
	fsck_progress_end(f);
	return 0;
}

/* Moves DATADIR/index.db{,-wal,-shm} to index.db.old.<time>{,...}. */
static int fsck_move_old(struct fsck *f)
{
	static const char *const sfx[] = {"", "-wal", "-shm"};
	char from[PATH_MAX], to[PATH_MAX], stamp[32];
	struct stat st;
	struct tm tm;
	time_t now = time(NULL);
	int any = 0;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int n = 0;; n++) {
		snprintf(to, sizeof(to), "%s/index.db.old.%s%s%.0d", f->datadir,
			 stamp, n ? "." : "", n);
		if (lstat(to, &st) < 0 && errno == ENOENT)
			break;
	}
	for (int i = 0; i < 3; i++) {
		char dest[PATH_MAX + 8];

		snprintf(from, sizeof(from), "%s/index.db%s", f->datadir,
			 sfx[i]);
		snprintf(dest, sizeof(dest), "%s%s", to, sfx[i]);
		if (rename(from, dest) == 0) {
			any = 1;
		} else if (errno != ENOENT) {
			int rc = -errno;

			kc_err(f->cmd, "cannot move %s to %s: %s", from, dest,
			       strerror(-rc));
			return rc;
		}
	}
	if (any) {
		f->rb.old = strdup(strrchr(to, '/') + 1);
		if (!f->rb.old)
			return -ENOMEM;
	}
	return 0;
}

/* Removes a database and its -wal and -shm files (those that exist). */
static void fsck_unlink_db(const char *db)
{
	static const char *const sfx[] = {"", "-wal", "-shm"};
	char p[PATH_MAX];

	for (int i = 0; i < 3; i++)
		if (snprintf(p, sizeof(p), "%s%s", db, sfx[i]) < (int)sizeof(p))
			unlink(p);
}

static int fsck_rebuild(struct fsck *f)
{
	char tmp[PATH_MAX], final[PATH_MAX];
	struct fsck_rec **byino = NULL;
	struct fsck_new *nw = NULL;
	struct idx *idx = NULL;
	uint64_t next_ino = KV_ROOT_INO + 1;
	size_t nnew = 0;
	int rc, dfd;

	rc = fsck_scan(f);
	if (rc < 0)
		return rc;
	byino = calloc(f->nrecs + 1, sizeof(*byino));
	nw = calloc(f->nrecs + 1, sizeof(*nw));
	if (!byino || !nw) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < f->nrecs; i++) {
		byino[i] = &f->recs[i];
		if (f->recs[i].ino >= next_ino)
			next_ino = f->recs[i].ino + 1;
		if (f->recs[i].type == STORE_REC_DATA)
			f->rb.data_recs++;
		else
			f->rb.name_recs++;
	}
	qsort(byino, f->nrecs, sizeof(*byino), fsck_rec_by_ino);
	/*
	 * Per inode (newest record first): the newest whole data record
	 * holds the bytes; the newest record of either kind has the name.
	 */
	for (size_t i = 0, j; i < f->nrecs; i = j) {
		const struct fsck_rec *data = NULL, *name = byino[i];
		uint64_t ndata = 0;

		for (j = i; j < f->nrecs && byino[j]->ino == byino[i]->ino;
		     j++) {
			const struct fsck_rec *r = byino[j];

			if (r->type != STORE_REC_DATA)
				continue;
			if (!r->complete)
				f->rb.torn++;
			else if (!data)
				data = r;
			ndata++;
		}
		if (!data) {
			f->rb.no_data++;
			continue;
		}
		f->rb.superseded += ndata - 1;
		if (byino[i]->ino <= KV_ROOT_INO || fsck_bad_path(name->path)) {
			char what[64];

			snprintf(what, sizeof(what), "%06u.kvd+%llu",
				 data->file_id, (unsigned long long)data->off);
			rc = fsck_note(f, what,
				       byino[i]->ino <= KV_ROOT_INO
					       ? "the record's inode number "
						 "is not a file's"
					       : fsck_bad_path(name->path));
			if (rc < 0)
				goto out_free;
			f->rb.skipped++;
			continue;
		}
		nw[nnew++] = (struct fsck_new){.data = data,
					       .path = name->path,
					       .name_seq = name->seq};
	}
	qsort(nw, nnew, sizeof(*nw), fsck_new_by_path);

	snprintf(tmp, sizeof(tmp), "%s/index.db.rebuild", f->datadir);
	snprintf(final, sizeof(final), "%s/index.db", f->datadir);
	fsck_unlink_db(tmp);
	rc = idx_open(&idx, tmp, 0755, getuid(), getgid());
	if (rc < 0) {
		kc_err(f->cmd, "cannot create %s: %s", tmp, strerror(-rc));
		goto out_free;
	}
	rc = fsck_populate(f, idx, nw, nnew, next_ino);
	idx_close(idx);
	if (rc < 0) {
		fsck_unlink_db(tmp);
		goto out_free;
	}
	/*
	 * Closed and checkpointed, the database is the one file; a -wal left
	 * behind must not follow it to its new name.
	 */
	if (snprintf(final, sizeof(final), "%s-wal", tmp) < (int)sizeof(final))
		unlink(final);
	if (snprintf(final, sizeof(final), "%s-shm", tmp) < (int)sizeof(final))
		unlink(final);
	snprintf(final, sizeof(final), "%s/index.db", f->datadir);
	rc = fsck_move_old(f);
	if (rc == 0 && rename(tmp, final) < 0) {
		rc = -errno;
		kc_err(f->cmd, "cannot rename %s to %s: %s", tmp, final,
		       strerror(-rc));
	}
	if (rc < 0)
		goto out_free;
	dfd = open(f->datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	f->rb.done = 1;
	log_warn("rebuilt %s from %llu records in %zu data files: %llu files, "
		 "%llu directories, %llu left out; old index moved to %s",
		 final, (unsigned long long)f->nrecs, f->ndfs,
		 (unsigned long long)f->rb.files,
		 (unsigned long long)f->rb.dirs,
		 (unsigned long long)f->rb.skipped,
		 f->rb.old ? f->rb.old : "(there was none)");
out_free:
	free(byino);
	free(nw);
	return rc;
}

/* --- walking and checking the index --------------------------------- */

struct fsck_walk {
	struct fsck *f;
	size_t dir;
	int err;
};

static int fsck_walk_entry(void *arg, const char *name,
			   const struct idx_attr *a, uint64_t cookie)
{
	struct fsck_walk *w = arg;
	struct fsck *f = w->f;
	char *copy;

	(void)cookie;
	if (!S_ISDIR(a->mode) && !S_ISREG(a->mode)) {
		f->nothers++;
		return 0;
	}
	copy = strdup(name);
	if (!copy)
		goto out_nomem;
	if (S_ISDIR(a->mode)) {
		if (kc_grow((void **)&f->dirs, &f->capdirs, f->ndirs,
			    sizeof(*f->dirs)) < 0)
			goto out_nomem;
		f->dirs[f->ndirs++] = (struct fsck_dir){
			.ino = a->ino, .parent = w->dir, .name = copy};
		return 0;
	}
	if (kc_grow((void **)&f->files, &f->capfiles, f->nfiles,
		    sizeof(*f->files)) < 0)
		goto out_nomem;
	f->files[f->nfiles++] = (struct fsck_file){.ino = a->ino,
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
static int fsck_walk(struct fsck *f)
{
	int rc;

	if (kc_grow((void **)&f->dirs, &f->capdirs, 0, sizeof(*f->dirs)) < 0)
		return -ENOMEM;
	f->dirs[0] = (struct fsck_dir){.ino = KV_ROOT_INO, .name = NULL};
	f->ndirs = 1;
	for (size_t i = 0; i < f->ndirs; i++) {
		struct fsck_walk w = {.f = f, .dir = i};

		/* A loop of directories would never end: the index says how many. */
		if (f->ndirs > f->counts.dirs + 1) {
			kc_err(f->cmd,
			       "the index is damaged: its directories form a "
			       "loop; rebuild it with --rebuild-index");
			return -EIO;
		}
		rc = idx_readdir(f->idx, f->dirs[i].ino, 0, fsck_walk_entry,
				 &w);
		if (rc == 0)
			rc = w.err;
		if (rc < 0) {
			kc_err(f->cmd,
			       "cannot list directory inode %llu of the index: "
			       "%s%s",
			       (unsigned long long)f->dirs[i].ino,
			       strerror(-rc),
			       rc == -EIO ? "; rebuild it with --rebuild-index"
					  : "");
			return rc;
		}
	}
	return 0;
}

/* "/a/b/name" of file x, malloc'd. */
static char *fsck_path(const struct fsck *f, const struct fsck_file *x)
{
	size_t len = strlen(x->name) + 2, d;
	char *p, *q;

	for (d = x->dir; d != 0; d = f->dirs[d].parent)
		len += strlen(f->dirs[d].name) + 1;
	p = malloc(len);
	if (!p)
		return NULL;
	q = p + len - 1;
	*q = '\0';
	q -= strlen(x->name);
	memcpy(q, x->name, strlen(x->name));
	*--q = '/';
	for (d = x->dir; d != 0; d = f->dirs[d].parent) {
		size_t l = strlen(f->dirs[d].name);

		q -= l;
		memcpy(q, f->dirs[d].name, l);
		*--q = '/';
	}
	return q == p ? p : memmove(p, q, strlen(q) + 1);
}

static int fsck_file_cmp(const void *a, const void *b)
{
	const struct fsck_file *x = a, *y = b;

	if (x->ext.file_id != y->ext.file_id)
		return x->ext.file_id < y->ext.file_id ? -1 : 1;
	return x->ext.off < y->ext.off ? -1 : x->ext.off > y->ext.off;
}

/* Marks x damaged (the first reason only). */
static void fsck_damage(struct fsck_file *x, enum fsck_state s, char *why)
{
	if (x->state != FSCK_OK) {
		free(why);
		return;
	}
	x->state = s;
	x->why = why ? why : strdup("(out of memory describing it)");
}

/* Checks the payload's chunks against crcs, reading FSCK_BUF at a time. */
static void fsck_check_payload(struct fsck *f, struct fsck_file *x,
			       const struct kc_datafile *df,
			       const uint32_t *crcs, uint64_t *done)
{
	uint64_t base = x->ext.off + x->ext.hdr_len, pos = 0;
	uint32_t nbad = 0, n = kv_nchunks(x->ext.len);
	int64_t first = -1;

	posix_fadvise(df->fd, (off_t)base, (off_t)x->ext.len,
		      POSIX_FADV_SEQUENTIAL);
	while (pos < x->ext.len) {
		size_t want = x->ext.len - pos < FSCK_BUF
				      ? (size_t)(x->ext.len - pos)
				      : FSCK_BUF;
		ssize_t got = kc_pio(df->fd, f->buf, NULL, want, base + pos);

		if (got != (ssize_t)want) {
			fsck_damage(
				x, FSCK_CORRUPT,
				got < 0 ? fsck_printf("read error at payload "
						      "byte %llu: %s",
						      (unsigned long long)pos,
						      strerror((int)-got))
					: fsck_printf(
						  "data file %06u.kvd ended "
						  "while being read",
						  df->id));
			return;
		}
		for (size_t o = 0; o < want; o += KV_CHUNK_SIZE) {
			uint32_t c = (uint32_t)((pos + o) / KV_CHUNK_SIZE);
			size_t clen = want - o < KV_CHUNK_SIZE ? want - o
							       : KV_CHUNK_SIZE;

			if (crc32c(0, f->buf + o, clen) != crcs[c]) {
				if (first < 0)
					first = c;
				nbad++;
			}
		}
		pos += want;
		*done += want;
		fsck_progress(f, *done);
	}
	posix_fadvise(df->fd, (off_t)base, (off_t)x->ext.len,
		      POSIX_FADV_DONTNEED);
	if (first >= 0) {
		uint64_t b0 = (uint64_t)first * KV_CHUNK_SIZE;
		uint64_t b1 = b0 + KV_CHUNK_SIZE < x->ext.len
				      ? b0 + KV_CHUNK_SIZE
				      : x->ext.len;

		x->chunk = first;
		fsck_damage(x, FSCK_CORRUPT,
			    fsck_printf("CRC mismatch at chunk %lld (payload "
					"bytes %llu-%llu; %u of %u chunks bad)",
					(long long)first,
					(unsigned long long)b0,
					(unsigned long long)b1 - 1, nbad, n));
	}
}

static void fsck_check_file(struct fsck *f, struct fsck_file *x, uint64_t *done)
{
	const struct kv_extent *e = &x->ext;
	const struct kc_datafile *df;
	uint32_t *crcs = NULL, ncrcs = 0;
	unsigned char *big = NULL;
	struct store_hdr h;
	uint64_t end;
	int rc;

	if (e->file_id == 0) {
		if (x->size > 0)
			fsck_damage(x, FSCK_CORRUPT,
				    fsck_printf("the index has %llu bytes but "
						"no record for them",
						(unsigned long long)x->size));
		return;
	}
	df = kc_datafile_find(f->dfs, f->ndfs, e->file_id);
	if (!df) {
		fsck_damage(x, FSCK_SHORT,
			    fsck_printf("data file %06u.kvd is missing "
					"(provably short)",
					e->file_id));
		return;
	}
	if (e->hdr_len < KV_ALIGN || e->hdr_len % KV_ALIGN ||
	    e->hdr_len > KC_HDR_MAX || e->off % KV_ALIGN) {
		fsck_damage(x, FSCK_CORRUPT,
			    fsck_printf("the index's record location is "
					"invalid (%06u.kvd at %llu, header "
					"%u bytes)",
					e->file_id, (unsigned long long)e->off,
					e->hdr_len));
		return;
	}
	end = e->off + kv_extent_span(e);
	if (df->size < end) {
		fsck_damage(x, FSCK_SHORT,
			    fsck_printf("data file %06u.kvd ends at %llu, "
					"before the record's end at %llu "
					"(provably short)",
					e->file_id,
					(unsigned long long)df->size,
					(unsigned long long)end));
		return;
	}
	if (x->size != e->len)
		fsck_damage(x, FSCK_CORRUPT,
			    fsck_printf("the index says %llu bytes, its "
					"record holds %llu",
					(unsigned long long)x->size,
					(unsigned long long)e->len));
	rc = kc_read_hdr(df, e->off, e->hdr_len, (unsigned char *)f->buf,
			 FSCK_BUF, &big, &h);
	if (rc == -ENOMEM) {
		fsck_damage(x, FSCK_CORRUPT, NULL);
		return;
	}
	if (rc < 0) {
		fsck_damage(
			x, FSCK_CORRUPT,
			fsck_printf("header invalid (bad magic, version, "
				    "lengths or header CRC) at %06u.kvd+%llu",
				    e->file_id, (unsigned long long)e->off));
	} else if (h.type != STORE_REC_DATA || h.ino != x->ino ||
		   h.len != e->len || h.hdr_len != e->hdr_len) {
		fsck_damage(x, FSCK_CORRUPT,
			    fsck_printf("header invalid: it does not match the "
					"index (type %u, inode %llu, %llu "
					"bytes)",
					h.type, (unsigned long long)h.ino,
					(unsigned long long)h.len));
	}
	rc = idx_get_crcs(f->idx, x->ino, &crcs, &ncrcs);
	if (rc < 0 || ncrcs != kv_nchunks(e->len)) {
		fsck_damage(
			x, FSCK_CORRUPT,
			rc < 0 ? fsck_printf("cannot read its CRCs from the "
					     "index: %s",
					     strerror(-rc))
			       : fsck_printf("the index lists %u chunk "
					     "CRCs, the record has %u "
					     "chunks",
					     ncrcs, kv_nchunks(e->len)));
	} else if (x->state == FSCK_OK) {
		for (uint32_t i = 0; i < ncrcs; i++) {
			if (kc_le32(h.crcs + 4 * i) == crcs[i])
				continue;
			fsck_damage(x, FSCK_CORRUPT,
				    fsck_printf("header invalid: its CRC of "
						"chunk %u differs from the "
						"index's",
						i));
			break;
		}
	}
	free(big);
	/* The payload is checked whatever the header says: bytes matter. */
	if (crcs && ncrcs == kv_nchunks(e->len))
		fsck_check_payload(f, x, df, crcs, done);
	else
		*done += e->len;
	free(crcs);
}

/* --repair of a provably short block: name, inode, and record go. */
static void fsck_drop(struct fsck *f, struct fsck_file *x, const char *path)
{
	struct kv_extent ext = {0};
	uint64_t ino;
	uint32_t nlink;
	int rc;

	rc = idx_unlink(f->idx, f->dirs[x->dir].ino, x->name, 0, f->now_ns,
			&ino, &nlink);
	if (rc == 0 && nlink == 0)
		rc = idx_release_inode(f->idx, ino, &ext);
	if (rc < 0) {
		kc_err(f->cmd, "cannot drop %s: %s", path, strerror(-rc));
		f->repair_failed++;
		return;
	}
	if (ext.file_id) {
		struct kc_datafile *df =
			kc_datafile_find(f->dfs, f->ndfs, ext.file_id);

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
				kc_err(f->cmd,
				       "dropped %s, but cannot punch its "
				       "record: %s",
				       path, strerror(errno));
		}
	}
	x->dropped = 1;
	f->ndropped++;
	log_warn("dropped %s (inode %llu): %s; its name is removed and its "
		 "record freed",
		 path, (unsigned long long)x->ino, x->why);
}

static int fsck_check(struct fsck *f)
{
	uint64_t total = 0, done = 0;

	qsort(f->files, f->nfiles, sizeof(*f->files), fsck_file_cmp);
	for (size_t i = 0; i < f->nfiles; i++)
		total += f->files[i].ext.len;
	fsck_progress_begin(f, "checking blocks", total);
	for (size_t i = 0; i < f->nfiles; i++) {
		struct fsck_file *x = &f->files[i];

		fsck_check_file(f, x, &done);
		f->payload_bytes += x->ext.len;
		if (x->state == FSCK_SHORT)
			f->nshort++;
		else if (x->state == FSCK_CORRUPT)
			f->ncorrupt++;
	}
	fsck_progress_end(f);
	if (!f->repair)
		return 0;
	for (size_t i = 0; i < f->nfiles; i++) {
		struct fsck_file *x = &f->files[i];
		char *path;

		if (x->state != FSCK_SHORT)
			continue;
		path = fsck_path(f, x);
		if (!path)
			return -ENOMEM;
		fsck_drop(f, x, path);
		free(path);
	}
	return 0;
}

static int fsck_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Marks the scanned records that a named file points at (or pointed at,
 * for blocks --repair dropped), and counts the rest: unreferenced and torn
 * data records, and name records of inodes that have no name left.
 */
static void fsck_match(struct fsck *f)
{
	uint64_t *inos = malloc((f->nfiles + 1) * sizeof(*inos));
	size_t ninos = 0;

	for (size_t i = 0; inos && i < f->nfiles; i++)
		if (!f->files[i].dropped)
			inos[ninos++] = f->files[i].ino;
	if (inos)
		qsort(inos, ninos, sizeof(*inos), fsck_u64_cmp);
	for (size_t i = 0; i < f->nrecs; i++) {
		struct fsck_rec *r = &f->recs[i];
		struct fsck_file key = {
			.ext = {.file_id = r->file_id, .off = r->off}};
		struct fsck_file *x;

		if (r->type != STORE_REC_DATA) {
			if (inos && !bsearch(&r->ino, inos, ninos,
					     sizeof(*inos), fsck_u64_cmp)) {
				r->referenced = -1; /* stale */
				f->nstale_names++;
			}
			continue;
		}
		x = f->nfiles ? bsearch(&key, f->files, f->nfiles,
					sizeof(*f->files), fsck_file_cmp)
			      : NULL;
		if (x && x->ino == r->ino) {
			r->referenced = 1;
		} else if (r->complete) {
			f->nunref++;
			f->unref_bytes += r->hdr_len + kv_align_up(r->len);
		} else {
			f->ntorn++;
			f->torn_bytes +=
				kc_datafile_find(f->dfs, f->ndfs, r->file_id)
					->size -
				r->off;
		}
	}
	free(inos);
}

/* --- report ---------------------------------------------------------- */

static void fsck_report_text(struct fsck *f)
{
	char a[32], b[32];

	printf("fsck of %s: index.db, %zu data files\n", f->datadir, f->ndfs);
	if (f->rb.done)
		printf("rebuilt index.db from the data files: %llu files, "
		       "%llu directories (%llu data records, %llu name "
		       "records; %llu superseded, %llu torn, %llu inodes "
		       "without a whole data record, %llu left out); %s%s\n",
		       (unsigned long long)f->rb.files,
		       (unsigned long long)f->rb.dirs,
		       (unsigned long long)f->rb.data_recs,
		       (unsigned long long)f->rb.name_recs,
		       (unsigned long long)f->rb.superseded,
		       (unsigned long long)f->rb.torn,
		       (unsigned long long)f->rb.no_data,
		       (unsigned long long)f->rb.skipped,
		       f->rb.old ? "old index moved to "
				 : "there was no old index",
		       f->rb.old ? f->rb.old : "");
	for (size_t i = 0; i < f->nnotes; i++)
		printf("LEFT OUT %s: %s\n", f->notes[i].what, f->notes[i].why);
	for (size_t i = 0; i < f->nfiles; i++) {
		struct fsck_file *x = &f->files[i];
		char *path;

		if (x->state == FSCK_OK)
			continue;
		path = fsck_path(f, x);
		printf("%-8s %s: %s%s\n",
		       x->state == FSCK_SHORT ? "SHORT" : "CORRUPT",
		       path ? path : "?", x->why,
		       x->dropped		  ? " -> dropped"
		       : x->state == FSCK_CORRUPT ? " -> kept"
		       : f->repair		  ? " -> not dropped"
						  : "");
		free(path);
	}
	for (size_t i = 0; i < f->nrecs; i++) {
		const struct fsck_rec *r = &f->recs[i];

		if (r->referenced > 0 ||
		    (r->type != STORE_REC_DATA && r->referenced == 0))
			continue;
		printf("%-8s %06u.kvd+%llu: %s record of inode %llu (%s), %s\n",
		       r->type != STORE_REC_DATA ? "STALE"
		       : r->complete		 ? "UNREF"
						 : "TORN",
		       r->file_id, (unsigned long long)r->off,
		       r->type == STORE_REC_DATA ? "data" : "name",
		       (unsigned long long)r->ino, r->path ? r->path : "?",
		       kc_size(a, sizeof(a), r->hdr_len + kv_align_up(r->len)));
	}
	printf("checked %zu blocks (%s of payload): %llu damaged (%llu "
	       "provably short, %llu corrupt)",
	       f->nfiles, kc_size(a, sizeof(a), f->payload_bytes),
	       (unsigned long long)(f->nshort + f->ncorrupt),
	       (unsigned long long)f->nshort, (unsigned long long)f->ncorrupt);
	if (f->repair)
		printf(", %llu dropped", (unsigned long long)f->ndropped);
	printf("\nreclaimable: %llu unreferenced records (%s), %llu torn "
	       "records (%s), %llu stale name records, %llu orphaned inodes "
	       "(freed at the next mount)\n",
	       (unsigned long long)f->nunref,
	       kc_size(a, sizeof(a), f->unref_bytes),
	       (unsigned long long)f->ntorn,
	       kc_size(b, sizeof(b), f->torn_bytes),
	       (unsigned long long)f->nstale_names,
	       (unsigned long long)f->counts.orphans);
}

static void fsck_report_json(struct fsck *f)
{
	int first = 1;

	printf("{\"datadir\": ");
	kc_json_str(stdout, f->datadir);
	printf(", \"data_files\": %zu, \"rebuilt\": ", f->ndfs);
	if (f->rb.done) {
		printf("{\"files\": %llu, \"directories\": %llu, "
		       "\"data_records\": %llu, \"name_records\": %llu, "
		       "\"superseded\": %llu, \"torn\": %llu, "
		       "\"no_whole_data\": %llu, \"left_out\": %llu, "
		       "\"old_index\": ",
		       (unsigned long long)f->rb.files,
		       (unsigned long long)f->rb.dirs,
		       (unsigned long long)f->rb.data_recs,
		       (unsigned long long)f->rb.name_recs,
		       (unsigned long long)f->rb.superseded,
		       (unsigned long long)f->rb.torn,
		       (unsigned long long)f->rb.no_data,
		       (unsigned long long)f->rb.skipped);
		if (f->rb.old)
			kc_json_str(stdout, f->rb.old);
		else
			printf("null");
		printf(", \"notes\": [");
		for (size_t i = 0; i < f->nnotes; i++) {
			printf("%s{\"what\": ", i ? ", " : "");
			kc_json_str(stdout, f->notes[i].what);
			printf(", \"why\": ");
			kc_json_str(stdout, f->notes[i].why);
			printf("}");
		}
		printf("]}");
	} else {
		printf("null");
	}
	printf(", \"checked\": %zu, \"payload_bytes\": %llu, \"damaged\": [",
	       f->nfiles, (unsigned long long)f->payload_bytes);
	for (size_t i = 0; i < f->nfiles; i++) {
		struct fsck_file *x = &f->files[i];
		char *path;

		if (x->state == FSCK_OK)
			continue;
		path = fsck_path(f, x);
		printf("%s{\"path\": ", first ? "" : ", ");
		first = 0;
		kc_json_str(stdout, path ? path : "?");
		printf(", \"ino\": %llu, \"reason\": \"%s\", \"detail\": ",
		       (unsigned long long)x->ino,
		       x->state == FSCK_SHORT ? "short" : "corrupt");
		kc_json_str(stdout, x->why);
		printf(", \"data_file\": %u, \"offset\": %llu, \"chunk\": ",
		       x->ext.file_id, (unsigned long long)x->ext.off);
		if (x->chunk >= 0)
			printf("%lld", (long long)x->chunk);
		else
			printf("null");
		printf(", \"action\": \"%s\"}", x->dropped ? "dropped"
						: x->state == FSCK_CORRUPT
							? "kept"
							: "none");
		free(path);
	}
	printf("], \"short\": %llu, \"corrupt\": %llu, \"dropped\": %llu, "
	       "\"reclaimable\": [",
	       (unsigned long long)f->nshort, (unsigned long long)f->ncorrupt,
	       (unsigned long long)f->ndropped);
	first = 1;
	for (size_t i = 0; i < f->nrecs; i++) {
		const struct fsck_rec *r = &f->recs[i];

		if (r->referenced > 0 ||
		    (r->type != STORE_REC_DATA && r->referenced == 0))
			continue;
		printf("%s{\"kind\": \"%s\", \"data_file\": %u, \"offset\": "
		       "%llu, \"ino\": %llu, \"bytes\": %llu, \"path\": ",
		       first ? "" : ", ",
		       r->type != STORE_REC_DATA ? "stale_name"
		       : r->complete		 ? "unreferenced"
						 : "torn",
		       r->file_id, (unsigned long long)r->off,
		       (unsigned long long)r->ino,
		       (unsigned long long)(r->hdr_len + kv_align_up(r->len)));
		first = 0;
		if (r->path)
			kc_json_str(stdout, r->path);
		else
			printf("null");
		printf("}");
	}
	printf("], \"unreferenced_bytes\": %llu, \"torn_bytes\": %llu, "
	       "\"stale_name_records\": %llu, \"orphans\": %llu, "
	       "\"clean\": %s}\n",
	       (unsigned long long)f->unref_bytes,
	       (unsigned long long)f->torn_bytes,
	       (unsigned long long)f->nstale_names,
	       (unsigned long long)f->counts.orphans,
	       f->nshort + f->ncorrupt + f->rb.skipped ? "false" : "true");
}

/* --- the command ------------------------------------------------------ */

int kc_lock_datadir(const char *cmd, const char *datadir, int *fd_out)
{
	char path[PATH_MAX], pid[32];
	ssize_t n;
	int fd, len;

	snprintf(path, sizeof(path), "%s/kvfs.lock", datadir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int rc = -errno;

		kc_err(cmd, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;

		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (rc == -EBUSY)
			kc_err(cmd,
			       "%s is locked by process %s: a kvfs serves it "
			       "or another kvfsctl fsck or gc runs; %s works "
			       "on an unmounted data directory only",
			       datadir, pid[0] ? pid : "unknown", cmd);
		else
			kc_err(cmd, "%s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	/* Who holds it, for a kvfs that tries to start meanwhile. */
	len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)len, 0) != len)
		kc_err(cmd, "cannot record our pid in %s", path);
	*fd_out = fd;
	return 0;
}

static void fsck_free(struct fsck *f)
{
	kc_datafiles_close(f->dfs, f->ndfs);
	for (size_t i = 0; i < f->ndirs; i++)
		free(f->dirs[i].name);
	free(f->dirs);
	for (size_t i = 0; i < f->nfiles; i++) {
		free(f->files[i].name);
		free(f->files[i].why);
	}
	free(f->files);
	for (size_t i = 0; i < f->nrecs; i++) {
		free(f->recs[i].crcs);
		free(f->recs[i].path);
	}
	free(f->recs);
	for (size_t i = 0; i < f->nnotes; i++) {
		free(f->notes[i].what);
		free(f->notes[i].why);
	}
	free(f->notes);
	free(f->rb.old);
	free(f->buf);
	free(f->datadir);
	idx_close(f->idx);
}

static int fsck_parse(struct fsck *f, int argc, char **argv, int *help)
{
	static const struct option opts[] = {
		{"repair", no_argument, NULL, 'r'},
		{"rebuild-index", no_argument, NULL, 'R'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			f->repair = 1;
			break;
		case 'R':
			f->rebuild = 1;
			break;
		case 'j':
			f->json = 1;
			break;
		case 'h':
			*help = 1;
			break;
		default:
			kc_err(f->cmd,
			       "unknown option '%s'; try 'kvfsctl fsck --help'",
			       argv[optind - 1]);
			return -1;
		}
	}
	if (*help)
		return 0;
	if (argc - optind != 1) {
		kc_err(f->cmd, "%s; try 'kvfsctl fsck --help'",
		       argc - optind < 1
			       ? "missing DATADIR"
			       : "too many arguments: expected DATADIR");
		return -1;
	}
	return optind;
}

int kc_fsck(int argc, char **argv)
{
	struct fsck f = {.cmd = "fsck"};
	struct kc_target t;
	char path[PATH_MAX];
	struct timespec ts;
	int help = 0, i, rc, lock_fd = -1, ret = KC_EXIT_ERROR;

	i = fsck_parse(&f, argc, argv, &help);
	if (i < 0)
		return KC_EXIT_ERROR;
	if (help) {
		fputs(fsck_usage, stdout);
		return KC_EXIT_OK;
	}
	if (kc_target_open(f.cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (t.mounted && t.mountpoint) {
		kc_err(f.cmd,
		       "%s is being served by kvfs (pid %ld, mounted at %s): "
		       "fsck works on an unmounted data directory only; "
		       "unmount it first (fusermount3 -u %s)",
		       t.datadir, t.pid, t.mountpoint, t.mountpoint);
		kc_target_free(&t);
		return KC_EXIT_ERROR;
	}
	if (t.mounted) {
		kc_err(f.cmd,
		       "%s is locked by process %ld: a kvfs serves it or "
		       "another kvfsctl fsck runs; fsck works on an unmounted "
		       "data directory only",
		       t.datadir, t.pid);
		kc_target_free(&t);
		return KC_EXIT_ERROR;
	}
	f.datadir = t.datadir;
	t.datadir = NULL;
	kc_target_free(&t);
	f.progress = isatty(STDERR_FILENO);
	clock_gettime(CLOCK_REALTIME, &ts);
	f.now_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (f.repair || f.rebuild) {
		/* What an operator changed goes to the system log. */
		log_use_syslog("kvfsctl");
		log_set_level(LOG_LVL_INFO);
	}
	f.buf = malloc(FSCK_BUF);
	if (!f.buf || kc_lock_datadir(f.cmd, f.datadir, &lock_fd) < 0 ||
	    kc_datafiles_open(f.cmd, f.datadir, f.repair ? O_RDWR : O_RDONLY,
			      UINT32_MAX, NULL, &f.dfs, &f.ndfs) < 0)
		goto out_free;
	if (f.rebuild && fsck_rebuild(&f) < 0)
		goto out_free;
	snprintf(path, sizeof(path), "%s/index.db", f.datadir);
	if (access(path, F_OK) < 0) {
		kc_err(f.cmd,
		       "%s: %s; to make one from the data files run kvfsctl "
		       "fsck --rebuild-index %s",
		       path, strerror(errno), f.datadir);
		goto out_free;
	}
	rc = idx_open(&f.idx, path, 0755, getuid(), getgid());
	if (rc == 0)
		rc = idx_count(f.idx, &f.counts);
	if (rc < 0) {
		kc_err(f.cmd, "cannot read %s: %s%s", path, strerror(-rc),
		       rc == -EIO || rc == -EMEDIUMTYPE
			       ? "; rebuild it with --rebuild-index"
			       : "");
		goto out_free;
	}
	if (fsck_walk(&f) < 0 || fsck_check(&f) < 0)
		goto out_free;
	if (!f.scanned && fsck_scan(&f) < 0)
		goto out_free;
	fsck_match(&f);
	if (f.json)
		fsck_report_json(&f);
	else
		fsck_report_text(&f);
	ret = f.nshort + f.ncorrupt + f.rb.skipped ? KC_EXIT_DAMAGE
						   : KC_EXIT_OK;
	if (f.repair_failed)
		ret = KC_EXIT_ERROR;
out_free:
	fsck_free(&f);
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}
