/* SPDX-License-Identifier: MIT */
/*
 * The block store: append-only data files under DATADIR/data/ holding one
 * record per stored file version. A record is a self-describing header
 * (store_hdr_len() bytes, a multiple of KV_ALIGN) followed by the payload
 * padded with zeros to KV_ALIGN, so payloads can be read with O_DIRECT.
 *
 * The record format and its codec are in record.h (included here, so the
 * codec keeps its store_hdr_* names).
 *
 * Each writer thread appends to its own active data file (a lane), so
 * concurrent stores never share a tail. What the store does not know: which
 * records are live (the index does), open files, FUSE.
 *
 * Threads: every function may be called from any thread. Reads and appends
 * do not block each other; a lane's lock covers only the offset reservation.
 */
#ifndef KVFS_STORE_H
#define KVFS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <sys/uio.h>

#include "kvtypes.h"
#include "record.h"
#include "store_io.h"

/* A data file is closed for appends once it reaches this size. */
#define STORE_FILE_MAX (1ull << 30)

struct store;

struct store_config {
	unsigned nlanes; /* active data files, one per writer thread in turn */
	uint64_t file_max; /* rotate a data file past this size; 0: default */
	int durable; /* fdatasync each record before store_append returns */
	/*
	 * Free space on the backing filesystem that appends leave alone, so
	 * the index can still commit (and so free space) when data has
	 * filled the disk. 0: the smaller of 64 MiB and 1% of the filesystem.
	 */
	uint64_t reserve;
	/*
	 * 1 (ignored with durable): a name record goes out with the next
	 * append rather than in a write of its own, or with
	 * store_flush_names() (call it about once a second; store_sync() and
	 * store_close() do). A crash loses those not yet written: only a
	 * rebuilt index notices (such a file keeps its earlier name).
	 */
	int batch_names;
};

/*
 * Opens the store in datadir (creating datadir/data/). ops NULL means
 * io_uring. New data files are numbered after the highest existing one.
 * Caller frees with store_close().
 */
int store_open(struct store **out, const char *datadir,
	       const struct store_config *cfg, const struct store_io_ops *ops);
void store_close(struct store *st);

/*
 * Appends a data record for inode ino at path (borrowed) whose payload is
 * the len bytes at buf. buf must be KV_ALIGN-aligned and hold
 * kv_align_up(len) bytes, the tail past len zeroed by the caller. crcs
 * receives kv_nchunks(len) values. On success *ext says where the record is;
 * the caller then commits it to the index and calls store_append_done().
 * A path longer than STORE_PATH_MAX is not kept: the record's path field
 * is empty (logged). Errors: -ENOSPC (also when the append would eat into
 * the reserve), -EIO, ... from the data file; nothing is left half visible
 * (a failed append's space is punched out).
 */
int store_append(struct store *st, uint64_t ino, const char *path,
		 const void *buf, uint64_t len, uint32_t *crcs,
		 struct kv_extent *ext);
/*
 * store_append() with the payload in iovcnt pieces: each piece's base and
 * length KV_ALIGN-aligned, together kv_align_up(len) bytes, the tail past
 * len zeroed by the caller. The first known chunks' CRCs are in crcs
 * already (the caller took them as the bytes came in, store_chunk_crcs
 * of record.h); the rest are computed here.
 */
int store_append_iov(struct store *st, uint64_t ino, const char *path,
		     const struct iovec *iov, int iovcnt, uint64_t len,
		     uint32_t *crcs, uint32_t known, struct kv_extent *ext);
/* One record of store_append_batch(): store_append_iov()'s arguments. */
struct store_rec {
	uint64_t ino;
	const char *path; /* borrowed */
	const struct iovec *iov;
	int iovcnt;
	uint64_t len;
	uint32_t *crcs; /* kv_nchunks(len) values, known of them set */
	uint32_t known;
	struct kv_extent ext; /* out: where it landed */
};
/*
 * Appends the n records of recs one after the other in one write to the
 * calling thread's lane, as n store_append_iov() calls would, each with
 * its own extent and its own store_append_done(). All or none: on an
 * error no record is appended.
 */
int store_append_batch(struct store *st, struct store_rec *recs, size_t n);
/*
 * Appends a name record: ino is now called path (with batch_names, later:
 * see store_config; the record's sequence number is taken now).
 */
int store_append_name(struct store *st, uint64_t ino, const char *path);
/*
 * The same for any metadata record (record.h): type STORE_REC_NAME, _NODE
 * or _MOVE, whose path field is the len bytes at blob (NULs allowed; at
 * most STORE_META_MAX, else -ENAMETOOLONG).
 */
int store_append_meta(struct store *st, uint32_t type, uint64_t ino,
		      const char *blob, size_t len);
/* Writes the name records kept back (batch_names), in one append. */
int store_flush_names(struct store *st);
/* Bytes of the name records kept back, not yet in a data file. */
uint64_t store_names_bytes(struct store *st);
/* The append of a record in file_id is committed or abandoned. */
void store_append_done(struct store *st, uint32_t file_id);

/*
 * Reads payload bytes [off, off + len) of the record at ext (clipped to its
 * length) and checks the CRC of every chunk they touch against crcs (may be
 * NULL to skip the check). *data points at the bytes in a buffer owned by
 * the calling thread, valid until its next store_read(); *n is their
 * count, never short of the clipped length.
 * Errors: -ENODATA when the record is provably short (its data file is gone
 * or ends before the record does); -EBADMSG on a CRC mismatch; -EIO or
 * another -errno on an I/O error (after bounded retries of -EINTR and
 * -EAGAIN); -ENOMEM.
 */
int store_read(struct store *st, const struct kv_extent *ext,
	       const uint32_t *crcs, uint64_t off, size_t len,
	       const void **data, size_t *n);
/*
 * store_read() straight into the caller's buffers, with no copy, in one
 * request for all of them (the disk sees them at once, not one after the
 * other): bytes [off, off + len) clipped to the record land in bufs[0],
 * bufs[1], ..., seg bytes in each. off and seg are multiples of
 * KV_CHUNK_SIZE; each buffer is KV_ALIGN-aligned with room for seg bytes
 * (the last: for its part rounded up to KV_ALIGN; the bytes past the
 * record are the data file's). *n is the clipped length. The same errors,
 * and -EINVAL for a misaligned call.
 */
int store_read_segs(struct store *st, const struct kv_extent *ext,
		    const uint32_t *crcs, uint64_t off, size_t len,
		    char *const *bufs, size_t seg, size_t *n);

/*
 * Frees the record at ext: punches a hole over it. When file_refs is 0 (the
 * index holds no record in that file) and the file is not being appended to,
 * the data file is removed.
 */
int store_free(struct store *st, const struct kv_extent *ext,
	       uint64_t file_refs);
/*
 * store_free() of n records of one data file, sorted by offset: records
 * that follow each other in the file are punched out as one hole (a hole
 * costs the backing file system a journal transaction, and waits for the
 * file's O_DIRECT writes in flight).
 */
int store_free_run(struct store *st, const struct kv_extent *exts, size_t n,
		   uint64_t file_refs);
/*
 * Removes data file file_id, which the index holds no record in, unless it
 * is being appended to.
 */
void store_drop_file(struct store *st, uint32_t file_id);

/*
 * -ENOSPC (counted as a refused append) when span more bytes would leave
 * less than the reserve free on the backing filesystem; 0 otherwise, also
 * when it cannot tell.
 */
int store_check_space(struct store *st, uint64_t span);

/*
 * The store's I/O table and a new sequence number, for the extent files
 * (extfile.h) that live beside the data files.
 */
const struct store_io_ops *store_io(struct store *st);
/*
 * The calling thread's read buffer (the one store_read() fills): at least
 * len bytes, KV_ALIGN-aligned, valid until its next store_read() or
 * store_buf(); NULL without memory.
 */
void *store_buf(size_t len);
uint64_t store_take_seq(struct store *st);

/* Makes every appended record durable (fdatasync of the active files). */
int store_sync(struct store *st);

/*
 * Physical bytes the data files take (st_blocks, so punched holes do not
 * count) and how many there are (datadir_usage_at(): regular files named
 * NNNNNN.kvd).
 */
int store_usage(struct store *st, uint64_t *bytes, uint64_t *nfiles);

/* Current size of data file id; -ENOENT when it does not exist. */
int store_file_size(struct store *st, uint32_t id, uint64_t *size);

/* The ids of the n newest data files (those a crash may have left torn). */
int store_newest(struct store *st, uint32_t *ids, size_t n);

/* What store_recover_file() found and did. */
struct store_recovery {
	uint64_t records; /* data records seen */
	uint64_t
		unreferenced; /* ... of which no index row pointed at: punched */
	uint64_t freed_bytes; /* bytes punched or cut off */
	int torn_tail; /* the file ended inside a record, or in garbage */
};

/*
 * Recovery horizons: for up to max data files appended to in this run,
 * ids[i] and offs[i] such that every record of that file below offs[i] is
 * committed to the index or abandoned (punched), as seen at some moment
 * when none of its appends was pending. Returns how many were filled.
 */
int store_horizons(struct store *st, uint32_t *ids, uint64_t *offs, size_t max);

/*
 * After a crash: walks data file id record by record from offset from (0,
 * or a record boundary such as a horizon) and punches every
 * data record for which referenced(arg, id, off) says 0 (appended, never
 * committed to the index). Where no whole record starts, it punches up to
 * the next committed record (next(arg, id, off, &next_off) returns 1 and
 * sets it), or cuts the file there when none follows (a torn tail). Only
 * for files nobody appends to yet (at start-up).
 */
typedef int (*store_ref_fn)(void *arg, uint32_t id, uint64_t off);
typedef int (*store_next_fn)(void *arg, uint32_t id, uint64_t off,
			     uint64_t *next_off);
int store_recover_file(struct store *st, uint32_t id, uint64_t from,
		       store_ref_fn referenced, store_next_fn next, void *arg,
		       struct store_recovery *out);

struct store_stats {
	uint64_t appends;
	uint64_t append_bytes;
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t frees;
	uint64_t files_removed;
	uint64_t short_records; /* -ENODATA outcomes */
	uint64_t crc_errors;
	uint64_t io_errors;
	uint64_t enospc; /* appends refused: the disk is full */
};
void store_get_stats(struct store *st, struct store_stats *out);

#endif
