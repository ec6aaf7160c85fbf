/* SPDX-License-Identifier: MIT */
/*
 * The record format of the data files (DATADIR/data/NNNNNN.kvd) and a
 * reader that walks one data file record by record. A record is a
 * self-describing header (store_hdr_len() bytes, a multiple of KV_ALIGN)
 * followed by the payload padded with zeros to KV_ALIGN, so payloads can be
 * read with O_DIRECT.
 *
 * Header layout (little-endian):
 *   0  magic "KVFSREC1"       8 bytes
 *   8  format version  u32    STORE_FORMAT_VERSION
 *  12  record type     u32    STORE_REC_DATA, _NAME or _EXTENT
 *  16  header length   u32    multiple of KV_ALIGN
 *  20  header CRC32C   u32    over the whole header with this field zero
 *  24  sequence        u64    grows with every record written
 *  32  inode           u64
 *  40  payload length  u64    0 for a name record
 *  48  chunk size      u32    KV_CHUNK_SIZE
 *  52  chunk count     u32    n
 *  56  n x u32                CRC32C of each payload chunk
 *  56+4n path length   u32    then the path within the mount, no NUL
 *
 * The codec keeps the block store's names (store_hdr_*, STORE_*): store.h
 * includes this header. Not here: where records go (store.h), which are
 * live (the index).
 *
 * Threads: the codec functions are pure and may be called from any thread;
 * a struct record_iter belongs to one thread at a time (no lock inside).
 * Errors are -errno.
 */
#ifndef KVFS_RECORD_H
#define KVFS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include <sys/uio.h>

#include "kvtypes.h"
#include "store_io.h"

#define STORE_MAGIC "KVFSREC1"
#define STORE_FORMAT_VERSION 1u
#define STORE_REC_DATA 1u
#define STORE_REC_NAME 2u
/* The header of an extent file (extfile.h), never in a data file. */
#define STORE_REC_EXTENT 3u
/*
 * A FIFO, socket, device node or symlink (no payload): the path field is
 * "MODE RDEV" (octal st_mode, decimal st_rdev), a NUL, the symlink's
 * target (empty for the others), a NUL, then its names, each ended by a
 * NUL. No names: the inode is gone (its last name was removed).
 */
#define STORE_REC_NODE 4u
/*
 * A directory renamed (ino: the directory): the path field is the old
 * path, a NUL, the new path. Every path recorded before it that starts
 * with the old path and a '/' is now under the new one.
 */
#define STORE_REC_MOVE 5u
/*
 * A name record's path field holds every name of the file, each but the
 * last followed by a NUL (one name: just the path, as it always was).
 * Name, node and move records are "metadata records": no payload.
 */
/* Longest path field of a metadata record (the names of a hard-linked file). */
#define STORE_META_MAX (64u * 1024u)
/* Longest path a header records (PATH_MAX). */
#define STORE_PATH_MAX 4096u
/* Bytes of a header before the chunk CRCs. */
#define STORE_HDR_FIXED 56u

/* A decoded header (store_hdr_decode). crcs points into the header buffer. */
struct store_hdr {
	uint32_t type;
	uint32_t hdr_len;
	uint64_t seq;
	uint64_t ino;
	uint64_t len;
	uint32_t nchunks;
	const unsigned char *crcs; /* nchunks little-endian u32 values */
	uint32_t path_len;
	const char *path; /* path_len bytes, not NUL-terminated */
};

/* Header bytes a record for this payload and path needs. */
uint32_t store_hdr_len(uint64_t len, size_t path_len);

/*
 * Encodes a header into hdr (hdr_len bytes, zeroed first) for a payload of
 * len bytes whose chunk CRCs are crcs. Returns hdr_len.
 */
uint32_t store_hdr_encode(void *hdr, uint32_t type, uint64_t seq, uint64_t ino,
			  uint64_t len, const uint32_t *crcs, const char *path,
			  size_t path_len);
/*
 * Checks and decodes a header read from disk (avail bytes at hdr). Returns
 * 0; -EINVAL when the magic, version, lengths or header CRC are wrong;
 * -EAGAIN when avail is shorter than the header says (read more: out->type
 * and out->hdr_len are set).
 */
int store_hdr_decode(const void *hdr, size_t avail, struct store_hdr *out);

/* CRC32C of each KV_CHUNK_SIZE chunk of buf (kv_nchunks(len) values). */
void store_chunk_crcs(const void *buf, uint64_t len, uint32_t *crcs);
/*
 * The same over the first len bytes held by iov[0..iovcnt), but for the
 * first from chunks: their CRCs are in crcs already (taken as the bytes
 * came in) and are neither read nor changed.
 */
void store_chunk_crcs_iov(const struct iovec *iov, int iovcnt, uint64_t len,
			  uint32_t *crcs, uint32_t from);

/* The n-th chunk CRC of a decoded header. */
uint32_t store_hdr_crc(const struct store_hdr *h, uint32_t n);

/* --- walking a data file ------------------------------------------------ */

/* Bytes read at once by default (most headers fit). */
#define RECORD_READ (16u * 1024u)
/* A header longer than this is not believed (a 64 GiB payload's is 2 MiB). */
#define RECORD_HDR_MAX (64u << 20)

/* What record_iter_next() found at record.off. */
enum record_status {
	RECORD_OK,	/* a whole record: header and payload in the file */
	RECORD_END,	/* the end of the file: nothing more */
	RECORD_SHORT,	/* the header decodes, the file ends in the payload */
	RECORD_TORN,	/* the file ends inside a header (hdr.hdr_len, .type) */
	RECORD_INVALID, /* no header starts here (garbage, zeros, a hole) */
};

struct record_iter_opts {
	/* How to read: NULL means pread(2) and fstat(2) on the fd. */
	const struct store_io_ops *ops;
	/* Bytes read at once (0: RECORD_READ), rounded up to KV_ALIGN. */
	size_t window;
	/* Skip holes with lseek(SEEK_DATA) (plain reads only: not with ops). */
	int skip_holes;
	/*
	 * Never report RECORD_INVALID: go on page (KV_ALIGN) by page to the
	 * next offset where a header decodes, counting the bytes passed.
	 */
	int resync;
};

/* One step of the walk. */
struct record {
	uint64_t off;	  /* where the record (or the finding) starts */
	uint64_t span;	  /* hdr.hdr_len + kv_align_up(hdr.len) (OK, SHORT) */
	uint64_t next;	  /* off + span: where the next record starts */
	uint64_t skipped; /* bytes passed over before off (holes, resync) */
	/* Valid for OK and SHORT until the next call on the iterator. */
	struct store_hdr hdr;
};

/* A walk over one data file; the fields are private but for fd and size. */
struct record_iter {
	int fd;
	uint64_t size; /* the file's size when the walk started */
	uint64_t off;  /* where the next record_iter_next() looks */
	int own_fd;
	int have_ops;
	struct store_io_ops ops;
	size_t window;
	int skip_holes;
	int resync;
	unsigned char *buf; /* KV_ALIGN-aligned, cap bytes */
	size_t cap;
	uint64_t buf_off; /* buf holds the file's bytes [buf_off, +buf_len) */
	size_t buf_len;
};

/*
 * Starts a walk of the data file open at fd (borrowed) from offset from (0
 * or a record boundary). opts may be NULL (defaults). 0 or -errno (of the
 * size, or -ENOMEM). Close with record_iter_close().
 */
int record_iter_open(struct record_iter *it, int fd, uint64_t from,
		     const struct record_iter_opts *opts);
/* The same on dirfd/name, opened O_RDONLY and closed by record_iter_close. */
int record_iter_open_at(struct record_iter *it, int dirfd, const char *name,
			uint64_t from, const struct record_iter_opts *opts);
void record_iter_close(struct record_iter *it);

/*
 * Looks at the current offset (after holes with skip_holes, and after pages
 * with no header with resync): returns an enum record_status and fills *r,
 * or -errno of a read (after bounded retries of -EINTR and -EAGAIN; -EIO
 * when the file ends before its size said) or -ENOMEM. RECORD_OK moves the
 * walk on to r->next; every other status leaves it at r->off, for the
 * caller to choose: record_iter_skip(), record_iter_seek() (to r->next
 * past a short record, or to a boundary the caller knows) or stopping.
 */
int record_iter_next(struct record_iter *it, struct record *r);
/* Moves the walk one page (KV_ALIGN) on, to look for a header there. */
void record_iter_skip(struct record_iter *it);
/*
 * Moves the walk to off, forgetting the bytes read so far (the walk reads a
 * window at a time and does not see later writes to bytes it holds).
 */
void record_iter_seek(struct record_iter *it, uint64_t off);
/* Where the next record_iter_next() looks (before skipping anything). */
uint64_t record_iter_tell(const struct record_iter *it);

#endif
