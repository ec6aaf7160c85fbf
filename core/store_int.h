/* SPDX-License-Identifier: MIT */
/*
 * The block store's private state, shared by store.c (appends, frees,
 * horizons, recovery) and store_read.c (reads and their checks). Not for
 * any other file: the contract is store.h.
 */
#ifndef KVFS_STORE_INT_H
#define KVFS_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "store.h"

/* Name records kept back at most (store_config.batch_names). */
#define STORE_NAMES_MAX 64u
/* Retries of -EINTR/-EAGAIN before an I/O error is reported. */
#define STORE_RETRIES 8
/* Most iovecs in one write or read; longer ones go in several. */
#define STORE_IOV_MAX 1024

struct store_file {
	uint32_t id;
	int fd;
	/* protected by st->files_lock */
	int active;	   /* some lane appends to it */
	unsigned npending; /* appends not yet committed or abandoned */
	uint64_t end;	   /* end of the last reservation this run */
	/* Every record below is committed or abandoned (store_horizons). */
	uint64_t quiet;
};

struct store_lane {
	pthread_mutex_t lock;
	struct store_file *file; /* protected by lock */
	uint64_t tail;		 /* protected by lock */
};

struct store {
	int data_fd; /* DATADIR/data, O_PATH|O_DIRECTORY */
	struct store_io_ops ops;
	uint64_t file_max;
	uint64_t reserve; /* see store_config.reserve */
	int durable;
	/* Lock order: a lane's lock before files_lock. */
	pthread_mutex_t files_lock;
	struct store_file **files; /* indexed by id, protected by files_lock */
	uint32_t nfiles;	   /* capacity of files[] */
	uint32_t next_id;	   /* protected by files_lock */
	unsigned nlanes;
	struct store_lane *lanes;
	atomic_uint lane_next;
	atomic_uint_fast64_t seq;
	/*
	 * Name records waiting to go out in front of the next append, or
	 * with store_flush_names() (store_config.batch_names).
	 */
	int batch_names;
	pthread_mutex_t names_lock;
	struct iovec names[STORE_NAMES_MAX]; /* protected by names_lock */
	unsigned nnames;		     /* protected by names_lock */
	uint64_t names_bytes;		     /* protected by names_lock */
	struct {
		atomic_uint_fast64_t appends, append_bytes, reads, read_bytes;
		atomic_uint_fast64_t frees, files_removed, short_records;
		atomic_uint_fast64_t crc_errors, io_errors, enospc;
	} stats;
};

/*
 * The descriptor of data file id, opened on first use; -ENOENT when the
 * file does not exist or was removed behind the store's back.
 */
int store_file_fd(struct store *st, uint32_t id);
/*
 * Writes (write) or reads all of the iovecs at off, looping over short
 * transfers and retrying -EINTR/-EAGAIN a few times; consumes the iovecs.
 * A write that moves nothing is -EIO; a read that meets the file's end is
 * -ENODATA when the file ends before off (provably short), else -EIO.
 */
int store_xfer_all(struct store *st, int fd, struct iovec *iov, int iovcnt,
		   uint64_t off, int write);
/* Consumes the first n bytes of the iovecs *iov, *cnt of them. */
void store_iov_advance(struct iovec **iov, int *cnt, size_t n);

#endif
