/* SPDX-License-Identifier: MIT */
/*
 * torn_records: lists the records in a kvfs data directory by walking every
 * DATADIR/data/NNNNNN.kvd from its start with store_hdr_decode (core/store.h),
 * without the daemon or the index. Used by scripts/torn-test to find where
 * each block lives before it damages a data file, and afterwards to show
 * what is left.
 *
 *   torn_records [-c] DATADIR
 *
 * One line per record, in file order:
 *
 *   FILE OFF HDR_LEN LEN SPAN TYPE SEQ INO STATE PATH
 *
 * FILE is the data file's number, OFF the record's offset in it, SPAN the
 * bytes the record occupies (header plus payload padded to 4 KiB), TYPE
 * "data" or "name", PATH the path within the mount the header records (for
 * a data record the name it was written under, usually the engine's temp
 * name; a name record holds the later name of INO). STATE is "short" when
 * the file ends before the record does, "crc" (only with -c, data records
 * only) when a payload chunk fails the CRC32C its header holds, "ok"
 * otherwise.
 *
 * A 4 KiB page that is not a valid header (a punched hole, garbage, a torn
 * header) is skipped: records start on 4 KiB boundaries. A header cut by
 * the end of the file is reported as "# FILE OFF torn header".
 *
 * Exit status: 0 when every data file could be read, 1 otherwise, 2 on
 * usage errors.
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

static int tr_file(int dirfd, const char *name, unsigned id, int check)
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
		uint64_t span, end;
		const char *state;
		ssize_t n;
		int d;

		n = tr_pread(fd, hdr, KV_ALIGN, off);
		if (n < 0) {
			fprintf(stderr, "%s: %s at %" PRIu64 ": %s\n", prog,
				name, off, strerror(errno));
			rc = -1;
			break;
		}
		d = store_hdr_decode(hdr, (size_t)n, &h);
		if (d == -EAGAIN && (size_t)n >= 20) {
			/* A header longer than one page: read all of it. */
			uint32_t want = tr_le32(hdr + 16);

			if (want > hcap) {
				unsigned char *nh = realloc(hdr, want);

				if (!nh) {
					fprintf(stderr, "%s: out of memory\n",
						prog);
					rc = -1;
					break;
				}
				hdr = nh;
				hcap = want;
			}
			n = tr_pread(fd, hdr, want, off);
			if (n < 0) {
				rc = -1;
				break;
			}
			d = store_hdr_decode(hdr, (size_t)n, &h);
		}
		if (d == -EAGAIN) {
			printf("# %u %" PRIu64 " torn header\n", id, off);
			break;
		}
		if (d < 0) {
			off += KV_ALIGN;
			continue;
		}
		span = h.hdr_len + kv_align_up(h.len);
		end = off + span;
		if (end > size)
			state = "short";
		else if (check && h.type == STORE_REC_DATA &&
			 !tr_crc_ok(fd, off + h.hdr_len, &h, chunk))
			state = "crc";
		else
			state = "ok";
		printf("%u %" PRIu64 " %" PRIu32 " %" PRIu64 " %" PRIu64
		       " %s %" PRIu64 " %" PRIu64 " %s %.*s\n",
		       id, off, h.hdr_len, h.len, span,
		       h.type == STORE_REC_DATA ? "data" : "name", h.seq, h.ino,
		       state, (int)h.path_len, h.path);
		off = end;
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

int main(int argc, char **argv)
{
	unsigned *ids = NULL;
	size_t nids = 0, cap = 0;
	int check = 0, rc = 0, dfd;
	struct dirent *de;
	char path[4096];
	DIR *d;

	if (argc == 3 && strcmp(argv[1], "-c") == 0) {
		check = 1;
		argv++;
		argc--;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: %s [-c] DATADIR\n", prog);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/data", argv[1]);
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
		if (tr_file(dfd, name, ids[i], check) < 0)
			rc = 1;
	}
	free(ids);
	closedir(d);
	return rc;
}
