/* SPDX-License-Identifier: MIT */
/*
 * Extent files: the second shape of a regular file's bytes (kvfs(5)). A
 * file larger than record_max, or grown past it while being written, is
 * not one record in a shared data file but a file of its own,
 * DATADIR/extents/INO.kvx, that holds the file's bytes at their own
 * offsets, and beside it INO.kvh, a record header of type
 * STORE_REC_EXTENT (the inode, a sequence number and the path when it was
 * made, no payload): the kernel can then serve the file's I/O from the
 * backing file itself (FUSE passthrough, kvfs(7)). An extent file made
 * under index format 4 or before has no INO.kvh: its header comes first
 * and its bytes hdr_len bytes on; both shapes are read and written. Holes are
 * holes of the backing file and read as zeros; writes land in place while
 * the file is being written. Not here: which files take this shape and
 * when (fs/kvfs/fileio.c), the index row that points at one.
 *
 * Threads: no state; an struct extf may be used by several threads at once
 * for reads and writes (positional I/O), opened and closed by one.
 * Errors are -errno; -EINVAL for a header that is not an extent header of
 * the expected inode.
 */
#ifndef KVFS_EXTFILE_H
#define KVFS_EXTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "store_io.h"

/* The directory under DATADIR that holds extent files. */
#define EXTF_DIR "extents"
/* The header file beside INO.kvx. */
#define EXTF_HDR_SUFFIX ".kvh"
/* Bytes a buffer for an extent file name needs. */
#define EXTF_NAME_MAX 32u

/*
 * An open extent file. fd -1: none. dfd is the same file opened with
 * O_DIRECT (-1 where the file system refuses it): extf_read() and
 * extf_write() use it for aligned transfers, so that large I/O bypasses
 * the page cache as a plain file's O_DIRECT I/O does.
 */
struct extf {
	int fd;
	int dfd;
	uint32_t hdr_len; /* the file's byte 0 is at this offset */
};

/* An extent file that is not open. */
#define EXTF_NONE ((struct extf){.fd = -1, .dfd = -1})

/* What an extent file's header says (extf_read_hdr). */
struct extf_info {
	uint64_t ino;
	uint64_t seq;
	uint64_t size;	 /* the backing file's size less the header */
	uint64_t blocks; /* 512-byte blocks it takes, header included */
	char path[4097];
};

/* "INO.kvx" into buf: 0 or -ENAMETOOLONG. */
int extf_name(char *buf, size_t len, uint64_t ino);
/* The inode of a name extf_name() makes: 0, or -EINVAL for another name. */
int extf_parse_name(const char *name, uint64_t *ino);
/*
 * Opens (creating when create is set) DATADIR/extents as an O_PATH
 * directory fd: the fd, or -errno (-ENOENT when it is missing and create
 * is 0).
 */
int extf_dir_open(const char *datadir, int create);

/*
 * Makes the extent file of ino (replacing one left by an earlier life of
 * the inode), writes and syncs its header file (seq, path) and opens it
 * read-write into *x, hdr_len 0. An empty file: extf_truncate() gives it
 * a size.
 */
int extf_create(int dirfd, const struct store_io_ops *ops, uint64_t ino,
		uint64_t seq, const char *path, struct extf *x);
/*
 * Opens ino's extent file read-write and checks its header: -ENOENT when
 * there is none, -EINVAL when the header is not ino's.
 */
int extf_open(int dirfd, uint64_t ino, struct extf *x);
/*
 * Reads the header of ino's extent file in the directory at dirfd into
 * *info: the header file's, or without one the file's own. Returns the
 * offset of the file's byte 0 in INO.kvx (0 with a header file), or
 * -errno (-ENOENT: no INO.kvx; -EINVAL: no valid extent header).
 */
int extf_read_hdr(int dirfd, uint64_t ino, struct extf_info *info);
void extf_close(struct extf *x);
/* Removes ino's extent file and header file: 0, also when gone. */
int extf_remove(int dirfd, uint64_t ino);

/*
 * Writes len bytes at the file's offset off, all of them, or -errno. With
 * direct set and buf, off and len KV_ALIGN-aligned it goes through dfd
 * (the writer asked for O_DIRECT); otherwise through the page cache, and
 * a large one (128 KiB or more) streams: its writeback starts at once and
 * the backing file's pages written some MiB before it are dropped (the
 * mount's page cache holds the bytes; two copies would halve the memory).
 */
int extf_write(const struct store_io_ops *ops, const struct extf *x,
	       const void *buf, size_t len, uint64_t off, int direct);
/*
 * Reads up to len bytes at off into buf: *got is short of len only where
 * the backing file ends. 0 or -errno. With direct set or a large len (128
 * KiB or more), buf and off KV_ALIGN-aligned and room in buf for len
 * rounded up to KV_ALIGN, it goes through dfd; otherwise through the page
 * cache, and the pages of a large read are dropped from it after the read.
 */
int extf_read(const struct store_io_ops *ops, const struct extf *x, void *buf,
	      size_t len, uint64_t off, size_t *got, int direct);
/* The file's size, from the backing file's: -ENODATA when it is cut short. */
int extf_size(const struct extf *x, uint64_t *size, uint64_t *blocks);
/*
 * The 512-byte blocks ino's extent file INO.kvx takes: its st_blocks,
 * holes not counted (a header at its start, in the older shape, counted
 * too). 0 or -errno.
 */
int extf_blocks_at(int dirfd, uint64_t ino, uint64_t *blocks);
/* Sets the file's size (ftruncate of the backing file). */
int extf_truncate(const struct extf *x, uint64_t size);
/* fallocate(2) of [off, off + len) of the file with mode. */
int extf_allocate(const struct extf *x, int mode, uint64_t off, uint64_t len);
/* Makes the file's bytes durable (fdatasync). */
int extf_sync(const struct store_io_ops *ops, const struct extf *x);

#endif
