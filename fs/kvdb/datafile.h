/* SPDX-License-Identifier: MIT */
/*
 * The data files of a data directory opened whole, for the offline engines
 * (check, rebuild, compact): open every DATADIR/data/NNNNNN.kvd, find one
 * by number, read and write them through an injectable I/O table, read one
 * record header. Headers are decoded and walked by core's record
 * codec and iterator (record.h). Not the block store: nothing
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

#include "record.h"
#include "store.h"
#include "store_io.h"

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
/*
 * Options of a record iterator (record.h) over df: df's I/O table, holes
 * skipped (plain fds only), window bytes read at a time (0: the default),
 * and with resync pages where no header starts passed over.
 */
void kvdb_iter_opts(const struct kvdb_datafile *df, size_t window, int resync,
		    struct record_iter_opts *o);

/* The header of one record, read at a known offset (kvdb_hdr_read). */
struct kvdb_hdr {
	struct record_iter it;
	struct record r; /* r.hdr: valid until kvdb_hdr_done() */
	int open;
};

/*
 * Reads and decodes the header of the record at off in df through the
 * record iterator. With hdr_len (what the index says), a header that turns
 * out longer is not believed. 0 (kh->r.hdr valid, also when the file ends
 * in the payload), -ENODATA when the file ends first, -EINVAL when no
 * header decodes there, -ENOMEM or -errno of the read. Call
 * kvdb_hdr_done() whatever the outcome.
 */
int kvdb_hdr_read(const struct kvdb_datafile *df, uint64_t off,
		  uint32_t hdr_len, struct kvdb_hdr *kh);
void kvdb_hdr_done(struct kvdb_hdr *kh);

#endif
