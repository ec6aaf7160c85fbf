/* SPDX-License-Identifier: MIT */
/*
 * The header scan of a data directory (kvdb_scan). See scan.h.
 */
#include "scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datafile.h"
#include "extfile.h"
#include "kvdb.h"
#include "kvtypes.h"
#include "record.h"
#include "store.h"

/* Bytes read at a time by the header scan. */
#define KVDB_SCAN_BUF (1u << 20)

static int kvdb_scan_add(struct kvdb_scan *s, const struct kvdb_datafile *df,
			 uint64_t off, const struct store_hdr *h)
{
	struct kvdb_rec *r;
	uint64_t span = h->hdr_len + kv_align_up(h->len);

	if (kvdb_grow((void **)&s->recs, &s->cap, s->nrecs, sizeof(*s->recs)) <
	    0)
		return -ENOMEM;
	r = &s->recs[s->nrecs];
	*r = (struct kvdb_rec){
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
	if (h->type == STORE_REC_EXTENT)
		return 0; /* only an extent file starts with one */
	if (h->type == STORE_REC_DATA && h->nchunks) {
		r->crcs = malloc((size_t)h->nchunks * sizeof(*r->crcs));
		if (!r->crcs)
			return -ENOMEM;
		for (uint32_t i = 0; i < h->nchunks; i++)
			r->crcs[i] = store_hdr_crc(h, i);
	}
	/*
	 * A data record's path is one path; a metadata record's field may
	 * hold several, separated by NULs (record.h): kept whole, with a NUL
	 * after it, so path is its first string.
	 */
	if (h->type != STORE_REC_DATA || !memchr(h->path, '\0', h->path_len)) {
		r->path = malloc((size_t)h->path_len + 1);
		if (!r->path) {
			free(r->crcs);
			return -ENOMEM;
		}
		memcpy(r->path, h->path, h->path_len);
		r->path[h->path_len] = '\0';
		r->path_len = h->path_len;
	}
	s->nrecs++;
	return 0;
}

/*
 * Adds every record header of df to s: holes skipped, pages with no header
 * passed over. Stops at the first record the file does not hold whole.
 */
static int kvdb_scan_file(struct kvdb *db, struct kvdb_scan *s,
			  const struct kvdb_datafile *df, uint64_t *done,
			  uint64_t total)
{
	struct record_iter_opts o;
	struct record_iter it;
	struct record r;
	int rc;

	kvdb_iter_opts(df, KVDB_SCAN_BUF, 1, &o);
	rc = record_iter_open(&it, df->fd, 0, &o);
	if (rc < 0) {
		kvdb_report(db, "data file %06u.kvd: %s", df->id,
			    strerror(-rc));
		return rc;
	}
	while (rc == 0) {
		rc = record_iter_next(&it, &r);
		if (rc == RECORD_END || rc < 0)
			break;
		if (rc == RECORD_TORN) {
			record_iter_skip(&it);
			rc = 0;
			continue;
		}
		rc = kvdb_scan_add(s, df, r.off, &r.hdr);
		if (rc == 0 && !s->recs[s->nrecs - 1].complete)
			break; /* nothing after it can be whole */
		kvdb_progress(db, KVDB_PROGRESS_STEP, "reading headers",
			      *done + record_iter_tell(&it), total);
	}
	if (rc < 0 && rc != -ENOMEM)
		kvdb_report(db, "data file %06u.kvd at %llu: %s", df->id,
			    (unsigned long long)record_iter_tell(&it),
			    strerror(-rc));
	record_iter_close(&it);
	*done += df->size;
	return rc < 0 ? rc : 0;
}

int kvdb_scan(struct kvdb *db, struct kvdb_scan *s)
{
	uint64_t total = 0, done = 0;
	int rc = 0;

	for (size_t i = 0; i < db->ndfs; i++)
		total += db->dfs[i].size;
	kvdb_progress(db, KVDB_PROGRESS_BEGIN, "reading headers", 0, total);
	for (size_t i = 0; rc == 0 && i < db->ndfs; i++)
		rc = kvdb_scan_file(db, s, &db->dfs[i], &done, total);
	kvdb_progress(db, KVDB_PROGRESS_END, "reading headers", done, total);
	s->done = 1;
	return rc;
}

void kvdb_scan_free(struct kvdb_scan *s)
{
	for (size_t i = 0; i < s->nrecs; i++) {
		free(s->recs[i].crcs);
		free(s->recs[i].path);
	}
	free(s->recs);
	memset(s, 0, sizeof(*s));
}

int kvdb_scan_extents(struct kvdb *db, struct kvdb_scan *s)
{
	struct extf_info *info = malloc(sizeof(*info));
	struct dirent *de;
	DIR *d = NULL;
	int fd, rc = 0;

	fd = db->ext_fd < 0 ? -1
			    : openat(db->ext_fd, ".",
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && info)
		d = fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		free(info);
		s->extents_done = !!info;
		return info ? 0 : -ENOMEM;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		uint64_t ino;
		int hlen;

		if (extf_parse_name(de->d_name, &ino) < 0)
			continue;
		hlen = extf_read_hdr(fd, ino, info);
		if (hlen < 0 || info->ino != ino)
			continue;
		if (kvdb_grow((void **)&s->recs, &s->cap, s->nrecs,
			      sizeof(*s->recs)) < 0) {
			rc = -ENOMEM;
			break;
		}
		s->recs[s->nrecs] = (struct kvdb_rec){
			.type = STORE_REC_EXTENT,
			.hdr_len = (uint32_t)hlen,
			.seq = info->seq,
			.ino = ino,
			.len = info->size,
			.complete = 1,
			.path = strdup(info->path),
		};
		if (!s->recs[s->nrecs].path)
			rc = -ENOMEM;
		else
			s->nrecs++;
	}
	closedir(d);
	free(info);
	s->extents_done = rc == 0;
	return rc;
}
