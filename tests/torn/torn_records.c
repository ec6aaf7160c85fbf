/* SPDX-License-Identifier: MIT */
/*
 * torn_records: lists the records in a kvfs data directory by walking every
 * DATADIR/data/NNNNNN.kvd from its start with store_hdr_decode (core/store.h),
 * without the daemon or the index. Used by the torn suite (tests/torn) to
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "kvtypes.h"
#include "store.h"

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

static uint32_t tr_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
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
		if (crc32c(0, chunk, clen) != tr_le32(h->crcs + 4 * c))
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

/* Reads the header at off into *hdr (grown as needed) and decodes it.
 * Returns store_hdr_decode's result, or -EIO (message printed) when the
 * file cannot be read. */
static int tr_read_hdr(int fd, const char *name, uint64_t off,
		       unsigned char **hdr, size_t *hcap, struct store_hdr *h)
{
	ssize_t n = tr_pread(fd, *hdr, KV_ALIGN, off);
	int d;

	if (n < 0) {
		fprintf(stderr, "%s: %s at %" PRIu64 ": %s\n", prog, name, off,
			strerror(errno));
		return -EIO;
	}
	d = store_hdr_decode(*hdr, (size_t)n, h);
	if (d == -EAGAIN && (size_t)n >= 20) {
		/* A header longer than one page: read all of it. */
		uint32_t want = tr_le32(*hdr + 16);

		if (want > *hcap) {
			unsigned char *nh = realloc(*hdr, want);

			if (!nh) {
				fprintf(stderr, "%s: out of memory\n", prog);
				return -EIO;
			}
			*hdr = nh;
			*hcap = want;
		}
		n = tr_pread(fd, *hdr, want, off);
		if (n < 0)
			return -EIO;
		d = store_hdr_decode(*hdr, (size_t)n, h);
	}
	return d;
}

/* Walks data file name (number id), calling fn for every record. */
static int tr_file(int dirfd, const char *name, unsigned id, int check,
		   tr_rec_fn fn, void *arg)
{
	unsigned char *hdr = NULL, *chunk = NULL;
	size_t hcap = KV_ALIGN;
	uint64_t off = 0, size;
	struct stat sb;
	int fd, rc = 0;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	size = (uint64_t)sb.st_size;
	hdr = malloc(hcap);
	chunk = malloc(KV_CHUNK_SIZE);
	if (!hdr || !chunk) {
		fprintf(stderr, "%s: out of memory\n", prog);
		rc = -1;
		goto out;
	}
	while (off < size) {
		struct store_hdr h;
		struct tr_rec r = {.file = id, .off = off};
		int d = tr_read_hdr(fd, name, off, &hdr, &hcap, &h);

		if (d == -EIO) {
			rc = -1;
			break;
		}
		if (d == -EAGAIN) {
			printf("# file=%u off=%" PRIu64 " torn header\n", id,
			       off);
			break;
		}
		if (d < 0) {
			off += KV_ALIGN;
			continue;
		}
		r.hdr_len = h.hdr_len;
		r.len = h.len;
		r.span = h.hdr_len + kv_align_up(h.len);
		r.seq = h.seq;
		r.ino = h.ino;
		r.data = h.type == STORE_REC_DATA;
		r.path = h.path;
		r.path_len = h.path_len;
		if (off + r.span > size)
			r.state = "short";
		else if (check && r.data &&
			 !tr_crc_ok(fd, off + h.hdr_len, &h, chunk))
			r.state = "crc";
		else
			r.state = "ok";
		fn(&r, arg);
		off += r.span;
	}
out:
	free(chunk);
	free(hdr);
	close(fd);
	return rc;
}

static int tr_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/* Walks every DATADIR/data/NNNNNN.kvd in number order. Returns 0, or 1
 * when a data file could not be read. */
static int tr_walk(const char *datadir, int check, tr_rec_fn fn, void *arg)
{
	unsigned *ids = NULL;
	size_t nids = 0, cap = 0;
	struct dirent *de;
	char path[4096];
	int rc = 0, dfd;
	DIR *d;

	snprintf(path, sizeof(path), "%s/data", datadir);
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return 1;
	}
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		unsigned id;
		int end = 0;

		if (sscanf(de->d_name, "%u.kvd%n", &id, &end) != 1 ||
		    de->d_name[end] != '\0')
			continue;
		if (nids == cap) {
			unsigned *n;

			cap = cap ? cap * 2 : 16;
			n = realloc(ids, cap * sizeof(*ids));
			if (!n) {
				fprintf(stderr, "%s: out of memory\n", prog);
				free(ids);
				closedir(d);
				return 1;
			}
			ids = n;
		}
		ids[nids++] = id;
	}
	if (nids > 1)
		qsort(ids, nids, sizeof(*ids), tr_cmp);
	for (size_t i = 0; i < nids; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%06u.kvd", ids[i]);
		if (tr_file(dfd, name, ids[i], check, fn, arg) < 0)
			rc = 1;
	}
	free(ids);
	closedir(d);
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
