/* SPDX-License-Identifier: MIT */
/*
 * Plain value types shared by core/, index/ and fs/: where a regular file's
 * bytes live. No functions, no locking: these are copied by value.
 */
#ifndef KVFS_KVTYPES_H
#define KVFS_KVTYPES_H

#include <stdint.h>

/* Payload is checksummed in chunks of this many bytes (the last may be short). */
#define KV_CHUNK_SIZE (128u * 1024u)
/* Every record starts and every payload ends on this boundary. */
#define KV_ALIGN 4096u
/* Root directory inode, as FUSE numbers it. */
#define KV_ROOT_INO 1u

/*
 * One regular file's bytes: a single record in one data file. file_id 0 means
 * the file has no record (it is empty, or its bytes are only in memory).
 */
struct kv_extent {
	uint32_t file_id; /* data/NNNNNN.kvd, 0 = none */
	uint32_t
		hdr_len; /* header bytes before the payload, KV_ALIGN multiple */
	uint64_t off;	 /* record start in the data file, KV_ALIGN multiple */
	uint64_t len;	 /* payload bytes (the file's size when written) */
};

/*
 * hdr_len of a stub: a regular file with no record (file_id 0) whose size
 * bytes are in the shared tier (fs/kvfs/share.h), not lost.
 */
#define KV_EXT_STUB UINT32_MAX
/*
 * hdr_len of an extent file (core/extfile.h): file_id 0, off the inode
 * whose DATADIR/extents/INO.kvx holds the bytes, len the size at the save.
 */
#define KV_EXT_LARGE (UINT32_MAX - 1)

static inline int kv_ext_large(const struct kv_extent *e)
{
	return e->file_id == 0 && e->hdr_len == KV_EXT_LARGE;
}

static inline uint64_t kv_align_up(uint64_t n)
{
	return (n + KV_ALIGN - 1) & ~(uint64_t)(KV_ALIGN - 1);
}

/* Bytes the record occupies in its data file: header plus padded payload. */
static inline uint64_t kv_extent_span(const struct kv_extent *e)
{
	return e->hdr_len + kv_align_up(e->len);
}

static inline uint32_t kv_nchunks(uint64_t len)
{
	return (uint32_t)((len + KV_CHUNK_SIZE - 1) / KV_CHUNK_SIZE);
}

#endif
