/* SPDX-License-Identifier: MIT */
/*
 * The data files of a data directory opened whole, for the offline engines
 * (check, rebuild, compact): open every DATADIR/data/NNNNNN.kvd, find one
 * by number, read and write them through an injectable I/O table, skip
 * their holes, read one record header, and scan every header of every
 * file into a list of records (kvdb_scan). Not the block store: nothing
 * here appends for a writer or knows the index.
 *
 * Errors are -errno; where a message helps, it goes to the caller's error
 * hook (kvdb.h) and nothing is printed. Single-threaded: one engine owns
 * the files while it runs.
 */
#ifndef KVFS_KVDB_DATAFILE_H
#define KVFS_KVDB_DATAFILE_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_io.h"

struct kvdb;

/* Header bytes read first when the header's length is unknown. */
#define KVDB_HDR_READ (16u * 1024u)
/* A header longer than this is not believed (a 64 GiB payload's is 2 MiB). */
#define KVDB_HDR_MAX (64u << 20)

/* One open DATADIR/data/NNNNNN.kvd. */
struct kvdb_datafile {
	uint32_t id;
	int fd;		   /* -1 once closed */
	uint64_t size;	   /* st_size */
	uint64_t physical; /* st_blocks * 512 */
	/* reads and writes of fd; NULL: pread(2)/pwrite(2) */
	const struct store_io_ops *io;
};

/* Grows *v (of *cap elements of size sz) to hold n + 1: 0 or -ENOMEM. */
int kvdb_grow(void **v, size_t *cap, size_t n, size_t sz);
/* The little-endian 32-bit value at p. */
uint32_t kvdb_le32(const unsigned char *p);
/*
 * Writes len bytes of wbuf at off, or (wbuf NULL) reads len bytes into
 * rbuf, through io (NULL: pread/pwrite), going on after short transfers
 * and EINTR. Returns the bytes moved (fewer than len at EOF, or when a
 * write moves none) or -errno.
 */
ssize_t kvdb_pio(const struct store_io_ops *io, int fd, void *rbuf,
		 const void *wbuf, size_t len, uint64_t off);
/* fdatasync(2) of fd through io (NULL: the system call); 0 or -errno. */
int kvdb_sync(const struct store_io_ops *io, int fd);

/*
 * Opens (open(2) flags | O_CLOEXEC | O_NOFOLLOW) every regular
 * DATADIR/data/NNNNNN.kvd numbered max_id at most into *v (*n of them,
 * sorted by id; the caller starts with *v NULL and *n 0, and frees with
 * kvdb_datafiles_close() whatever the outcome). None when data/ is
 * missing. With dir_fd, *dir_fd gets data/ itself (O_RDONLY|O_DIRECTORY).
 * Returns -errno after writing what failed into msg (msglen bytes).
 */
int kvdb_datafiles_open(const char *datadir, int flags, uint32_t max_id,
			int *dir_fd, struct kvdb_datafile **v, size_t *n,
			char *msg, size_t msglen);
/* Data file id of v[0..n) (sorted by id), or NULL. */
struct kvdb_datafile *kvdb_datafile_find(struct kvdb_datafile *v, size_t n,
					 uint32_t id);
/* Closes the open ones of v[0..n) and frees v. */
void kvdb_datafiles_close(struct kvdb_datafile *v, size_t n);
/* The next offset at or after pos (KV_ALIGN-aligned) that holds data. */
uint64_t kvdb_next_data(const struct kvdb_datafile *df, uint64_t pos);
/*
 * Reads and decodes the header of the record at off in df: hdr_len bytes,
 * or when hdr_len is 0 what it turns out to need. The bytes go to buf when
 * they fit its buflen, else to *big (malloc'd, the old *big freed; the
 * caller frees the last); h points into them. 0, -ENODATA when the file
 * ends first, -EINVAL when the header does not decode (or is over
 * KVDB_HDR_MAX), -ENOMEM, or -errno of the read.
 */
int kvdb_read_hdr(const struct kvdb_datafile *df, uint64_t off,
		  uint32_t hdr_len, unsigned char *buf, size_t buflen,
		  unsigned char **big, struct store_hdr *h);

/* A record header found by scanning a data file. */
struct kvdb_rec {
	uint32_t file_id;
	uint32_t type; /* STORE_REC_DATA or STORE_REC_NAME */
	uint32_t hdr_len;
	uint32_t nchunks;
	uint64_t off;
	uint64_t seq;
	uint64_t ino;
	uint64_t len;
	int complete;	/* the file holds all of it */
	int referenced; /* check: 1 a named file points at it, -1 stale name */
	uint32_t *crcs; /* data records: nchunks values */
	char *path;	/* NULL when the header's path has a NUL byte */
};

/* Every record header of a data directory (kvdb_scan()). */
struct kvdb_scan {
	struct kvdb_rec *recs; /* in file, then offset order */
	size_t nrecs, cap;
	int done; /* the scan ran */
};

/*
 * Finds every record header in every data file of db: at each KV_ALIGN
 * boundary where no record covers the bytes, a header that decodes starts
 * a record. A file's scan stops at the first record it does not hold
 * whole (appends are in order, so nothing after it can be whole either).
 * Reports progress ("reading headers", bytes) through db's hooks. 0 or
 * -errno (an I/O error is also reported through the error hook).
 */
int kvdb_scan(struct kvdb *db, struct kvdb_scan *s);
void kvdb_scan_free(struct kvdb_scan *s);

#endif
