/* SPDX-License-Identifier: MIT */
/*
 * Where file bytes are, in the index (index.h): each regular file's record
 * (data file, offset, header and payload length) and its chunk CRCs
 * (idx_set_extent, idx_get_crcs); last use for eviction (idx_touch,
 * idx_lru); the queries that crash recovery, the janitor and compaction
 * ask about data files (idx_datafile_refs, idx_tmp_names,
 * idx_records_past, idx_next_extent, idx_extent_at, idx_file_records,
 * idx_move_records); and the recovery horizons (idx_horizons_*). The
 * inodes themselves are ns.c's.
 *
 * Locking: each public function takes idx->lock for its whole call;
 * mutating ones run in one transaction (idx_enter()/idx_leave()).
 */
#include "index_int.h"

#include <sys/stat.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

/* Keeps the CRC blob below SQLite's default 1e9-byte value limit. */
#define IDX_MAX_CRCS (200u * 1000u * 1000u)

const char *const idx_rec_sql[IDX_NSTMT] = {
	/* ctime never goes back: a rename may have come before the save. */
	[SID_SET_EXTENT] = "UPDATE inodes SET size = ?2, mtime_ns = ?3, "
			   "ctime_ns = max(ctime_ns, ?3), file_id = ?4, "
			   "rec_off = ?5, "
			   "hdr_len = ?6, rec_len = ?7, crcs = ?8, "
			   "lru_ns = max(lru_ns, ?3) WHERE ino = ?1",
	[SID_GET_CRCS] = "SELECT crcs FROM inodes WHERE ino = ?1",
	[SID_REFS] = "SELECT count(*) FROM inodes WHERE file_id = ?1",
	/* idx_file_records(): a data file's records, by offset. */
	[SID_FILE_RECORDS] = "SELECT ino, file_id, rec_off, hdr_len, rec_len "
			     "FROM inodes INDEXED BY inodes_file_id "
			     "WHERE file_id = ?1 AND rec_off >= ?2 "
			     "ORDER BY rec_off, ino LIMIT ?3",
	/* idx_move_records(): only a row that is where the caller says. */
	[SID_MOVE_RECORD] = "UPDATE inodes SET file_id = ?4, rec_off = ?5 "
			    "WHERE ino = ?1 AND file_id = ?2 AND rec_off = ?3 "
			    "AND hdr_len = ?6 AND rec_len = ?7",
	[SID_TOUCH] = "UPDATE inodes SET lru_ns = ?2 "
		      "WHERE ino = ?1 AND lru_ns < ?2",
	/* A read: the visible atime moves with the last use (one clock). */
	[SID_TOUCH_ATIME] = "UPDATE inodes SET lru_ns = max(lru_ns, ?2), "
			    "atime_ns = max(atime_ns, ?2) WHERE ino = ?1",
	/* Least recently used first; (atime, ino) pages through ties. */
	[SID_LRU] = "SELECT i.ino, d.parent, d.name, i.lru_ns, i.size, d.id "
		    "FROM inodes AS i INDEXED BY inodes_lru "
		    "JOIN dentries AS d ON d.ino = i.ino "
		    "WHERE i.file_id != 0 AND i.nlink > 0 "
		    "AND (i.lru_ns, i.ino) > (?1, ?2) "
		    "ORDER BY i.lru_ns, i.ino LIMIT ?3",
	[SID_TMP_NAMES] = "SELECT i.ino, d.parent, d.name, i.mtime_ns, "
			  "i.size, d.id FROM dentries AS d "
			  "INDEXED BY dentries_tmp "
			  "JOIN inodes AS i ON i.ino = d.ino "
			  "WHERE d.name LIKE '%.tmp' AND d.id > ?1 "
			  "ORDER BY d.id LIMIT ?2",
	[SID_NEXT_EXTENT] = "SELECT min(rec_off) FROM inodes "
			    "WHERE file_id = ?1 AND rec_off > ?2",
	[SID_EXTENT_AT] = "SELECT 1 FROM inodes "
			  "WHERE file_id = ?1 AND rec_off = ?2 LIMIT 1",
	[SID_RECORDS_PAST] = "SELECT i.ino, d.parent, d.name, i.mtime_ns, "
			     "i.size, d.id FROM inodes AS i "
			     "LEFT JOIN dentries AS d ON d.ino = i.ino "
			     /*
			      * Records do not overlap: only the last one
			      * starting before ?2 and those after may pass
			      * it (an index range, not a scan of the file).
			      */
			     "WHERE i.file_id = ?1 AND i.rec_off >= "
			     "(SELECT coalesce(max(rec_off), 0) FROM inodes "
			     "WHERE file_id = ?1 AND rec_off < ?2) "
			     "AND i.rec_off + i.hdr_len "
			     "+ (i.rec_len + 4095) / 4096 * 4096 > ?2 "
			     "LIMIT ?3",
	[SID_HORIZONS_GET] = "SELECT file_id, off FROM horizons "
			     "ORDER BY file_id",
	[SID_HORIZONS_PUT] = "INSERT OR REPLACE INTO horizons "
			     "(file_id, off) VALUES (?1, ?2)",
	[SID_HORIZONS_DROP] = "DELETE FROM horizons WHERE file_id = ?1",
};

static int idx_set_extent_txn(struct idx *idx, uint64_t ino, uint64_t size,
			      int64_t mtime_ns, const struct kv_extent *ext,
			      const uint8_t *blob, size_t blob_len,
			      struct kv_extent *old)
{
	sqlite3_stmt *st;
	struct idx_attr a;
	int rc;

	rc = idx_inode(idx, ino, &a);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	if (!S_ISREG(a.mode))
		return -EINVAL;
	st = idx->st[SID_SET_EXTENT];
	idx_bind_args(st, IDX_ARGS((int64_t)ino, (int64_t)size, mtime_ns,
				   ext->file_id, (int64_t)ext->off,
				   ext->hdr_len, (int64_t)ext->len));
	if (blob_len)
		idx_bind_blob(st, 8, blob, blob_len);
	else
		idx_bind_text(st, 8, NULL);
	rc = IDX_RUN(idx, st);
	if (!rc)
		*old = a.ext;
	return rc;
}

/*
 * Checks a save's CRC count and encodes the CRCs as the index stores them
 * (*blob, malloc'd; NULL when there are none).
 */
static int idx_crc_blob(struct idx *idx, uint64_t ino,
			const struct kv_extent *ext, const uint32_t *crcs,
			uint32_t ncrcs, uint8_t **blob)
{
	uint8_t *b;

	*blob = NULL;
	if (ext->file_id ? ncrcs != kv_nchunks(ext->len) : ncrcs != 0) {
		log_err("%s: inode %" PRIu64 ": %" PRIu32
			" CRCs for a record of %" PRIu64
			" bytes in file %" PRIu32,
			idx->path, ino, ncrcs, ext->len, ext->file_id);
		return -EINVAL;
	}
	if (ncrcs > IDX_MAX_CRCS)
		return -EFBIG;
	if (!ncrcs)
		return 0;
	assert(crcs);
	b = malloc((size_t)ncrcs * 4);
	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < ncrcs; i++) {
		b[4 * i] = (uint8_t)crcs[i];
		b[4 * i + 1] = (uint8_t)(crcs[i] >> 8);
		b[4 * i + 2] = (uint8_t)(crcs[i] >> 16);
		b[4 * i + 3] = (uint8_t)(crcs[i] >> 24);
	}
	*blob = b;
	return 0;
}

int idx_set_extent(struct idx *idx, uint64_t ino, uint64_t size,
		   int64_t mtime_ns, const struct kv_extent *ext,
		   const uint32_t *crcs, uint32_t ncrcs, struct kv_extent *old)
{
	static const struct kv_extent none;
	struct kv_extent prev;
	uint8_t *blob;
	int rc;

	if (!ext)
		ext = &none;
	rc = idx_crc_blob(idx, ino, ext, crcs, ncrcs, &blob);
	if (rc < 0)
		return rc;
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_set_extent_txn(
					    idx, ino, size, mtime_ns, ext, blob,
					    (size_t)ncrcs * 4, &prev));
	free(blob);
	if (!rc && old)
		*old = prev;
	return rc;
}

/* The saves of idx_set_extents(); blobs[i] is v[i]'s encoded CRCs. */
static int idx_set_extents_txn(struct idx *idx, struct idx_save *v, size_t n,
			       uint8_t **blobs)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t ncrcs =
			v[i].ext.file_id ? kv_nchunks(v[i].ext.len) : 0;
		int rc;

		if (v[i].rc < 0)
			continue;
		rc = idx_set_extent_txn(idx, v[i].ino, v[i].size, v[i].mtime_ns,
					&v[i].ext, blobs[i], (size_t)ncrcs * 4,
					&v[i].old);
		/* A save of its own that fails leaves the others. */
		if (rc == -ENOENT || rc == -EINVAL)
			v[i].rc = rc;
		else if (rc < 0)
			return rc;
	}
	return 0;
}

int idx_set_extents(struct idx *idx, struct idx_save *v, size_t n)
{
	uint8_t **blobs = calloc(n ? n : 1, sizeof(*blobs));
	int rc;

	if (!blobs)
		rc = -ENOMEM;
	else
		rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct kv_extent *e = &v[i].ext;

		v[i].old = (struct kv_extent){0};
		if (e->file_id && !v[i].crcs) {
			v[i].rc = -EINVAL;
			continue;
		}
		v[i].rc = idx_crc_blob(idx, v[i].ino, e, v[i].crcs,
				       e->file_id ? kv_nchunks(e->len) : 0,
				       &blobs[i]);
	}
	if (rc == 0)
		rc = idx_enter(idx, 1);
	if (rc == 0)
		rc = idx_leave(idx, idx_set_extents_txn(idx, v, n, blobs));
	for (size_t i = 0; i < n; i++) {
		if (rc < 0)
			v[i].rc = rc;
		if (blobs)
			free(blobs[i]);
	}
	free(blobs);
	return rc;
}

int idx_get_crcs(struct idx *idx, uint64_t ino, uint32_t **crcs,
		 uint32_t *ncrcs)
{
	sqlite3_stmt *st;
	uint32_t *v = NULL;
	size_t n = 0;
	int rc;

	idx_lock_read(idx);
	st = idx->st[SID_GET_CRCS];
	idx_bind_i64(st, 1, (int64_t)ino);
	rc = IDX_STEP(idx, st);
	if (rc == 0) {
		rc = -ENOENT;
	} else if (rc == 1) {
		const uint8_t *p = sqlite3_column_blob(st, 0);
		size_t bytes = (size_t)sqlite3_column_bytes(st, 0);

		rc = 0;
		n = bytes / 4;
		if (bytes % 4) {
			log_err("%s: inode %" PRIu64 ": CRC list of %zu bytes",
				idx->path, ino, bytes);
			rc = -EIO;
		} else if (n && !p) {
			rc = -ENOMEM;
		} else if (n) {
			v = malloc(n * sizeof(*v));
			if (!v)
				rc = -ENOMEM;
			for (size_t i = 0; v && i < n; i++)
				v[i] = (uint32_t)p[4 * i] |
				       (uint32_t)p[4 * i + 1] << 8 |
				       (uint32_t)p[4 * i + 2] << 16 |
				       (uint32_t)p[4 * i + 3] << 24;
		}
	}
	idx_done(st);
	idx_unlock(idx);
	if (rc)
		return rc;
	*crcs = v;
	*ncrcs = (uint32_t)n;
	return 0;
}

int idx_datafile_refs(struct idx *idx, uint32_t file_id, uint64_t *count)
{
	int64_t n;
	int rc = idx_get(idx, SID_REFS, IDX_ARGS(file_id), &n, 1, __func__);

	if (rc == 0)
		return -EIO; /* count(*) always yields a row */
	if (rc < 0)
		return rc;
	*count = (uint64_t)n;
	return 0;
}

int idx_touch(struct idx *idx, size_t n, const uint64_t *inos,
	      const int64_t *times_ns, const unsigned char *atime)
{
	int rc;

	rc = idx_enter(idx, 1);
	if (rc)
		return rc;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = IDX_RUN_SID(
			idx, atime && atime[i] ? SID_TOUCH_ATIME : SID_TOUCH,
			(int64_t)inos[i], times_ns[i]);
	return idx_leave(idx, rc);
}

/* Runs a listing statement (bound by the caller) into out[0..max). */
static int idx_list_names(struct idx *idx, sqlite3_stmt *st,
			  struct idx_name *out, size_t max)
{
	size_t n = 0;
	int rc;

	while (n < max && (rc = IDX_STEP(idx, st)) == 1) {
		const unsigned char *name = sqlite3_column_text(st, 2);
		struct idx_name *e = &out[n++];

		e->ino = (uint64_t)sqlite3_column_int64(st, 0);
		e->parent = (uint64_t)sqlite3_column_int64(st, 1);
		snprintf(e->name, sizeof(e->name), "%s",
			 name ? (const char *)name : "");
		e->time_ns = sqlite3_column_int64(st, 3);
		e->size = (uint64_t)sqlite3_column_int64(st, 4);
		e->cookie = (uint64_t)sqlite3_column_int64(st, 5);
	}
	if (n == max)
		rc = 0;
	idx_done(st);
	return rc < 0 ? rc : (int)n;
}

/* Binds args[0..nargs) and max (the last parameter) to statement sid. */
static int idx_names_by(struct idx *idx, int sid, const int64_t *args,
			int nargs, struct idx_name *out, size_t max)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock_read(idx);
	st = idx->st[sid];
	idx_bind_args(st, args, nargs);
	idx_bind_i64(st, nargs + 1, (int64_t)max);
	rc = idx_list_names(idx, st, out, max);
	idx_unlock(idx);
	return rc;
}

int idx_lru(struct idx *idx, int64_t after_ns, uint64_t after_ino,
	    struct idx_name *out, size_t max)
{
	const int64_t args[] = {after_ns, (int64_t)after_ino};

	return idx_names_by(idx, SID_LRU, args, 2, out, max);
}

int idx_tmp_names(struct idx *idx, uint64_t after, struct idx_name *out,
		  size_t max)
{
	const int64_t args[] = {(int64_t)after};

	return idx_names_by(idx, SID_TMP_NAMES, args, 1, out, max);
}

int idx_records_past(struct idx *idx, uint32_t file_id, uint64_t end,
		     struct idx_name *out, size_t max)
{
	const int64_t args[] = {file_id, (int64_t)end};

	return idx_names_by(idx, SID_RECORDS_PAST, args, 2, out, max);
}

int idx_extent_at(struct idx *idx, uint32_t file_id, uint64_t off)
{
	return idx_get(idx, SID_EXTENT_AT, IDX_ARGS(file_id, (int64_t)off),
		       NULL, 0, __func__);
}

int idx_next_extent(struct idx *idx, uint32_t file_id, uint64_t off,
		    uint64_t *next)
{
	int64_t min;
	/* min() of no rows is NULL, which idx_get() reads as none. */
	int rc = idx_get(idx, SID_NEXT_EXTENT, IDX_ARGS(file_id, (int64_t)off),
			 &min, 1, __func__);

	if (rc == 1)
		*next = (uint64_t)min;
	return rc;
}

int idx_file_records(struct idx *idx, uint32_t file_id, uint64_t from,
		     struct idx_rec *out, size_t max)
{
	sqlite3_stmt *st;
	size_t n = 0;
	int rc = 0;

	if (from > INT64_MAX)
		return 0;
	idx_lock_read(idx);
	st = idx->st[SID_FILE_RECORDS];
	idx_bind_args(st,
		      IDX_ARGS(file_id, (int64_t)from,
			       (int64_t)(max < INT32_MAX ? max : INT32_MAX)));
	while (n < max && (rc = IDX_STEP(idx, st)) == 1) {
		out[n++] = (struct idx_rec){
			.ino = (uint64_t)sqlite3_column_int64(st, 0),
			.ext = {.file_id =
					(uint32_t)sqlite3_column_int64(st, 1),
				.off = (uint64_t)sqlite3_column_int64(st, 2),
				.hdr_len =
					(uint32_t)sqlite3_column_int64(st, 3),
				.len = (uint64_t)sqlite3_column_int64(st, 4)},
		};
	}
	idx_done(st);
	idx_unlock(idx);
	return rc < 0 ? rc : (int)n;
}

static int idx_move_txn(struct idx *idx, const struct idx_move *mv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = IDX_RUN_SID(idx, SID_MOVE_RECORD, (int64_t)mv[i].ino,
				     mv[i].from.file_id,
				     (int64_t)mv[i].from.off, mv[i].to.file_id,
				     (int64_t)mv[i].to.off, mv[i].from.hdr_len,
				     (int64_t)mv[i].from.len);

		if (rc)
			return rc;
		if (sqlite3_changes(idx->db) != 1) {
			log_warn("%s: inode %" PRIu64
				 " has no record at %" PRIu32 "+%" PRIu64
				 " any more; no record moved",
				 idx->path, mv[i].ino, mv[i].from.file_id,
				 mv[i].from.off);
			return -ESTALE;
		}
	}
	return 0;
}

int idx_move_records(struct idx *idx, const struct idx_move *mv, size_t n)
{
	int rc;

	for (size_t i = 0; i < n; i++)
		if (mv[i].to.file_id == 0 || mv[i].from.file_id == 0 ||
		    mv[i].to.hdr_len != mv[i].from.hdr_len ||
		    mv[i].to.len != mv[i].from.len || mv[i].to.off > INT64_MAX)
			return -EINVAL;
	if (n == 0)
		return 0;
	rc = idx_enter(idx, 1);
	if (!rc)
		rc = idx_leave(idx, idx_move_txn(idx, mv, n));
	return rc;
}

/* ---- recovery horizons (a table since format version 2) ---- */

int idx_horizons_get(struct idx *idx, uint32_t *ids, uint64_t *offs, size_t max)
{
	sqlite3_stmt *st;
	size_t n = 0;
	int rc = 0;

	idx_lock_read(idx);
	st = idx->st[SID_HORIZONS_GET];
	while (n < max && (rc = IDX_STEP(idx, st)) == 1) {
		int64_t id = sqlite3_column_int64(st, 0);
		int64_t off = sqlite3_column_int64(st, 1);

		if (id <= 0 || id > UINT32_MAX || off < 0)
			continue;
		ids[n] = (uint32_t)id;
		offs[n++] = (uint64_t)off;
	}
	idx_done(st);
	idx_unlock(idx);
	return rc < 0 ? rc : (int)n;
}

/* Runs sid (binding ?1 = id, ?2 = off) for each pair, in one transaction. */
static int idx_horizons_each(struct idx *idx, int sid, size_t n,
			     const uint32_t *ids, const uint64_t *offs)
{
	int rc = idx_enter(idx, 1);

	if (rc)
		return rc;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (offs)
			rc = IDX_RUN_SID(idx, sid, ids[i], (int64_t)offs[i]);
		else
			rc = IDX_RUN_SID(idx, sid, ids[i]);
	}
	return idx_leave(idx, rc);
}

int idx_horizons_put(struct idx *idx, size_t n, const uint32_t *ids,
		     const uint64_t *offs)
{
	return idx_horizons_each(idx, SID_HORIZONS_PUT, n, ids, offs);
}

int idx_horizons_drop(struct idx *idx, size_t n, const uint32_t *ids)
{
	return idx_horizons_each(idx, SID_HORIZONS_DROP, n, ids, NULL);
}
