/* SPDX-License-Identifier: MIT */
/*
 * torn_records: lists the records in a kvfs data directory by walking every
 * DATADIR/data/NNNNNN.kvd from its start with core's record iterator
 * (core/record.h), without the daemon or the index. Used by the torn suite (tests/torn) to
 * find where each block lives before it damages a data file, and
 * afterwards to show what is left.
 *
 *   torn_records [-c] DATADIR
 *       one line per record, in file order:
 *         file=N off=O hdr_len=H len=L span=S type=T seq=Q ino=I state=X
 *         path=P
 *   torn_records [-c] -m MANIFEST -p MNT DATADIR
 *       the join of a torn_client manifest with the data records: for each
 *       block of MANIFEST (path=MNT/REL size= seed=), in manifest order,
 *         rel=REL size=N seed=S file=N off=O hdr_len=H len=L span=S ino=I
 *       from the one whole ("ok") data record the block was stored as (its
 *       path, the engine's temp name, is REL plus "_<n>.tmp"). A block
 *       without exactly one such record, or whose length is not its size,
 *       is named on stderr and makes the exit status 1.
 *
 * file is the data file's number, off the record's offset in it, span the
 * bytes the record occupies (header plus payload padded to 4 KiB), type
 * "data" or "name", path the path within the mount the header records (for
 * a data record the name it was written under, usually the engine's temp
 * name; a name record holds the later name of ino). state is "short" when
 * the file ends before the record does, "crc" (only with -c, data records
 * only) when a payload chunk fails the CRC32C its header holds, "ok"
 * otherwise. Lines are key=value words so that the scripts read fields by
 * name, never by position.
 *
 * A 4 KiB page that is not a valid header (a punched hole, garbage, a torn
 * header) is skipped: records start on 4 KiB boundaries. A header cut by
 * the end of the file is reported as "# file=N off=O torn header".
 *
 * Exit status: 0 when every data file could be read (and, with -m, every
 * block has its record), 1 otherwise, 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "datadir.h"
#include "kvtypes.h"
#include "record.h"

static const char *prog = "torn_records";

/* Reads up to len bytes at off; returns the count read (short at EOF). */
static ssize_t tr_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Checks every payload chunk of a complete data record: 1 good, 0 bad. */
static int tr_crc_ok(int fd, uint64_t base, const struct store_hdr *h,
		     unsigned char *chunk)
{
	for (uint32_t c = 0; c < h->nchunks; c++) {
		uint64_t cs = (uint64_t)c * KV_CHUNK_SIZE;
		size_t clen = h->len - cs < KV_CHUNK_SIZE ? h->len - cs
							  : KV_CHUNK_SIZE;
		ssize_t n = tr_pread(fd, chunk, clen, base + cs);

		if (n != (ssize_t)clen)
			return 0;
		if (crc32c(0, chunk, clen) != store_hdr_crc(h, c))
			return 0;
	}
	return 1;
}

/* One record as the walker found it; path points into the header. */
struct tr_rec {
	unsigned file;
	uint64_t off, len, span, seq, ino;
	uint32_t hdr_len;
	int data; /* a data record (else a name record) */
	const char *state;
	const char *path;
	uint32_t path_len;
};

typedef void (*tr_rec_fn)(const struct tr_rec *r, void *arg);

/* Walks data file name (number id) with core's record iterator, calling
 * fn for every record. A page with no header is passed over (resync); a
 * header cut by the end of the file ends the walk. 0 or -1. */
static int tr_file(int dirfd, const char *name, unsigned id, int check,
		   tr_rec_fn fn, void *arg)
{
	const struct record_iter_opts opts = {.resync = 1};
	unsigned char *chunk = malloc(KV_CHUNK_SIZE);
	struct record_iter it;
	int rc = 0, st;

	if (!chunk) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	st = record_iter_open_at(&it, dirfd, name, 0, &opts);
	if (st < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, name, strerror(-st));
		free(chunk);
		return -1;
	}
	for (;;) {
		struct record r;
		struct tr_rec t = {.file = id};

		st = record_iter_next(&it, &r);
		if (st < 0) {
			fprintf(stderr, "%s: %s at %" PRIu64 ": %s\n", prog,
				name, record_iter_tell(&it), strerror(-st));
			rc = -1;
			break;
		}
		if (st == RECORD_END)
			break;
		if (st == RECORD_TORN) {
			printf("# file=%u off=%" PRIu64 " torn header\n", id,
			       r.off);
			break;
		}
		t.off = r.off;
		t.hdr_len = r.hdr.hdr_len;
		t.len = r.hdr.len;
		t.span = r.span;
		t.seq = r.hdr.seq;
		t.ino = r.hdr.ino;
		t.data = r.hdr.type == STORE_REC_DATA;
		t.path = r.hdr.path;
		t.path_len = r.hdr.path_len;
		if (st == RECORD_SHORT)
			t.state = "short";
		else if (check && t.data &&
			 !tr_crc_ok(it.fd, r.off + r.hdr.hdr_len, &r.hdr,
				    chunk))
			t.state = "crc";
		else
			t.state = "ok";
		fn(&t, arg);
		if (st == RECORD_SHORT)
			record_iter_seek(&it, r.next);
	}
	record_iter_close(&it);
	free(chunk);
	return rc;
}

/* Walks every DATADIR/data/NNNNNN.kvd in number order. Returns 0, or 1
 * when a data file could not be read. */
static int tr_walk(const char *datadir, int check, tr_rec_fn fn, void *arg)
{
	uint32_t *ids = NULL;
	size_t nids = 0;
	char path[4096];
	int rc = 0, dfd, e;

	e = datadir_list(datadir, &ids, &nids);
	if (e == 0)
		e = datadir_path(path, sizeof(path), datadir, DATADIR_DATA);
	dfd = e == 0 ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (dfd < 0) {
		fprintf(stderr, "%s: %s/%s: %s\n", prog, datadir, DATADIR_DATA,
			strerror(e ? -e : errno));
		free(ids);
		return 1;
	}
	for (size_t i = 0; i < nids; i++) {
		char name[DATADIR_NAME_MAX];

		if (datadir_file_name(name, sizeof(name), ids[i]) < 0 ||
		    tr_file(dfd, name, ids[i], check, fn, arg) < 0)
			rc = 1;
	}
	free(ids);
	close(dfd);
	return rc;
}

/* The listing mode: one key=value line per record. */
static void tr_print(const struct tr_rec *r, void *arg)
{
	(void)arg;
	printf("file=%u off=%" PRIu64 " hdr_len=%" PRIu32 " len=%" PRIu64
	       " span=%" PRIu64 " type=%s seq=%" PRIu64 " ino=%" PRIu64
	       " state=%s path=%.*s\n",
	       r->file, r->off, r->hdr_len, r->len, r->span,
	       r->data ? "data" : "name", r->seq, r->ino, r->state,
	       (int)r->path_len, r->path);
}

/* A block of the manifest and the whole data records stored for it. */
struct tr_block {
	char *rel; /* the path within the mount */
	unsigned long long size, seed;
	unsigned nrec;	   /* whole data records under rel's temp names */
	struct tr_rec rec; /* the last one (path not kept) */
};

struct tr_join {
	struct tr_block *b;
	size_t n;
};

/* Whether path[0..len) is rel + "_<digits>.tmp" (the engine's temp) or
 * rel itself. */
static int tr_is_temp_of(const char *path, size_t len, const char *rel)
{
	size_t rl = strlen(rel), i;

	if (len == rl && memcmp(path, rel, rl) == 0)
		return 1;
	if (len < rl + 6 || memcmp(path, rel, rl) != 0 || path[rl] != '_' ||
	    memcmp(path + len - 4, ".tmp", 4) != 0)
		return 0;
	for (i = rl + 1; i < len - 4; i++)
		if (path[i] < '0' || path[i] > '9')
			return 0;
	return i > rl + 1;
}

static void tr_join_rec(const struct tr_rec *r, void *arg)
{
	struct tr_join *j = arg;

	if (!r->data || strcmp(r->state, "ok") != 0)
		return;
	for (size_t i = 0; i < j->n; i++) {
		if (!tr_is_temp_of(r->path, r->path_len, j->b[i].rel))
			continue;
		j->b[i].nrec++;
		j->b[i].rec = *r;
		j->b[i].rec.path = NULL;
		return;
	}
}

/* The value of "key=" among the words of line, or NULL. */
static const char *tr_kv(char *line, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);

	for (char *w = line; *w;) {
		size_t wl = strcspn(w, " \t\n");

		if (wl > kl && strncmp(w, key, kl) == 0 && w[kl] == '=') {
			snprintf(out, n, "%.*s", (int)(wl - kl - 1),
				 w + kl + 1);
			return out;
		}
		w += wl;
		w += strspn(w, " \t\n");
	}
	return NULL;
}

/* Reads a torn_client manifest (path= size= seed= lines) into j, the
 * paths made relative to mnt. Exits 1 on a line it cannot use. */
static void tr_read_manifest(struct tr_join *j, const char *file,
			     const char *mnt)
{
	char line[8192], path[4096], size[32], seed[32];
	size_t cap = 0, ml = strlen(mnt);
	FILE *f = fopen(file, "r");

	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, file, strerror(errno));
		exit(1);
	}
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!tr_kv(line, "path", path, sizeof(path)) ||
		    !tr_kv(line, "size", size, sizeof(size)) ||
		    !tr_kv(line, "seed", seed, sizeof(seed)) ||
		    strncmp(path, mnt, ml) != 0) {
			fprintf(stderr, "%s: %s: bad line (mount %s): %s", prog,
				file, mnt, line);
			exit(1);
		}
		if (j->n == cap) {
			cap = cap ? cap * 2 : 256;
			j->b = realloc(j->b, cap * sizeof(*j->b));
			if (!j->b) {
				fprintf(stderr, "%s: out of memory\n", prog);
				exit(1);
			}
		}
		j->b[j->n] = (struct tr_block){
			.rel = strdup(path + ml),
			.size = strtoull(size, NULL, 10),
			.seed = strtoull(seed, NULL, 10),
		};
		if (!j->b[j->n].rel)
			exit(1);
		j->n++;
	}
	fclose(f);
}

/* The join mode: one line per manifest block. Returns the exit status. */
static int tr_join_main(const char *datadir, const char *man, const char *mnt,
			int check)
{
	struct tr_join j = {0};
	int rc;

	tr_read_manifest(&j, man, mnt);
	rc = tr_walk(datadir, check, tr_join_rec, &j);
	for (size_t i = 0; i < j.n; i++) {
		const struct tr_block *b = &j.b[i];

		if (b->nrec != 1 || b->rec.len != b->size) {
			fprintf(stderr, "no single whole record for %s (%u)\n",
				b->rel, b->nrec);
			rc = 1;
		} else {
			printf("rel=%s size=%llu seed=%llu file=%u off=%" PRIu64
			       " hdr_len=%" PRIu32 " len=%" PRIu64
			       " span=%" PRIu64 " ino=%" PRIu64 "\n",
			       b->rel, b->size, b->seed, b->rec.file,
			       b->rec.off, b->rec.hdr_len, b->rec.len,
			       b->rec.span, b->rec.ino);
		}
		free(b->rel);
	}
	free(j.b);
	return rc;
}

static int tr_usage(void)
{
	fprintf(stderr, "usage: %s [-c] [-m MANIFEST -p MNT] DATADIR\n", prog);
	return 2;
}

int main(int argc, char **argv)
{
	const char *man = NULL, *mnt = NULL;
	int check = 0, opt;

	while ((opt = getopt(argc, argv, "cm:p:")) != -1) {
		switch (opt) {
		case 'c':
			check = 1;
			break;
		case 'm':
			man = optarg;
			break;
		case 'p':
			mnt = optarg;
			break;
		default:
			return tr_usage();
		}
	}
	if (optind != argc - 1 || !man != !mnt)
		return tr_usage();
	if (man)
		return tr_join_main(argv[optind], man, mnt, check);
	return tr_walk(argv[optind], check, tr_print, NULL);
}
