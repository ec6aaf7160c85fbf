/* SPDX-License-Identifier: MIT */
/*
 * kvdb: a data directory opened as a whole, without FUSE. kvdb_open()
 * takes DATADIR/kvfs.lock (core's datadir.h: LOCK_EX, held until
 * kvdb_close(), with our pid in it so a daemon that tries to start says who
 * has it), opens the index
 * (DATADIR/index.db) and every data file (DATADIR/data/NNNNNN.kvd). The
 * offline engines run on the handle: check.h (fsck), rebuild.h (a new
 * index from the data files), compact.h (gc).
 *
 * Error contract: functions return 0 or -errno. What failed, in words,
 * goes to the caller: kvdb_open() fills a struct kvdb_error; the engines
 * call the error hook (struct kvdb_hooks). Nothing here writes to stdout
 * or stderr; operator-visible changes are logged through log.h.
 *
 * Threads: a handle belongs to one thread; nothing here takes a lock
 * besides kvfs.lock, which keeps other processes out.
 */
#ifndef KVFS_KVDB_H
#define KVFS_KVDB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "datafile.h"
#include "index.h"
#include "store_io.h"

/* Progress of a long step: begin (total known), steps, end. */
enum kvdb_progress {
	KVDB_PROGRESS_BEGIN,
	KVDB_PROGRESS_STEP,
	KVDB_PROGRESS_END,
};

/* How an engine talks back while it runs; every member may be NULL. */
struct kvdb_hooks {
	/* A message for the operator about an error (fatal or not). */
	void (*error)(void *arg, const char *msg);
	/* label says what runs; done of total units (bytes or files). */
	void (*progress)(void *arg, enum kvdb_progress what, const char *label,
			 uint64_t done, uint64_t total);
	void *arg;
};

/* kvdb_open() flags. */
#define KVDB_DATA_RW 0x1u	/* data files O_RDWR (else O_RDONLY) */
#define KVDB_DATA_DIR 0x2u	/* keep DATADIR/data open (db->data_fd) */
#define KVDB_NO_INDEX 0x4u	/* open the index later (kvdb_open_index) */
#define KVDB_INDEX_DURABLE 0x8u /* every commit synchronous=FULL */
#define KVDB_INDEX_COUNT 0x10u	/* read db->counts (proves it readable) */

struct kvdb_opts {
	unsigned flags;	 /* KVDB_* */
	uint32_t max_id; /* open data files numbered up to this; 0: all */
	/* The command on whose behalf the lock is taken ("fsck", "gc"). */
	const char *who;
	/* I/O of the data files' bytes; NULL: pread(2)/pwrite(2). */
	const struct store_io_ops *io;
	struct kvdb_hooks hooks;
};

/* The step of kvdb_open() that failed. */
enum kvdb_stage {
	KVDB_STAGE_NONE,
	KVDB_STAGE_LOCK,	  /* kvfs.lock: busy (-EBUSY) or unusable */
	KVDB_STAGE_INDEX_MISSING, /* there is no DATADIR/index.db */
	KVDB_STAGE_INDEX,	  /* index.db does not open or read */
	KVDB_STAGE_DATA,	  /* a data file or data/ does not open */
	KVDB_STAGE_MEMORY,
};

/* Why kvdb_open() failed: msg is ready to print; path names the file. */
struct kvdb_error {
	int err; /* -errno */
	enum kvdb_stage stage;
	char path[PATH_MAX];
	char msg[PATH_MAX + 512];
};

struct kvdb {
	char *datadir;	 /* as given */
	int lock_fd;	 /* DATADIR/kvfs.lock, LOCK_EX */
	struct idx *idx; /* NULL until the index is open */
	int data_fd;	 /* DATADIR/data with KVDB_DATA_DIR, else -1 */
	struct kvdb_datafile *dfs; /* sorted by id */
	size_t ndfs;
	struct idx_counts counts; /* with KVDB_INDEX_COUNT */
	const struct store_io_ops *io;
	struct kvdb_hooks hooks;
	unsigned flags;
};

/*
 * Opens datadir: lock, then the index (unless KVDB_NO_INDEX), then the
 * data files. 0, or -errno with *err saying which step failed and why
 * (nothing is left open then).
 */
int kvdb_open(struct kvdb **out, const char *datadir, const struct kvdb_opts *o,
	      struct kvdb_error *err);
/* Opens the index of a handle opened with KVDB_NO_INDEX; as kvdb_open(). */
int kvdb_open_index(struct kvdb *db, struct kvdb_error *err);
/* Closes the index, the data files and the lock; db may be NULL. */
void kvdb_close(struct kvdb *db);

/*
 * Takes datadir/kvfs.lock as kvfs does (LOCK_EX, non-blocking) and writes
 * our pid into it; *fd_out holds it until closed. -EBUSY when a kvfs or
 * another kvfsctl has it (*err says by which pid), other -errno when the
 * file is unusable. who names the command in the message.
 */
int kvdb_lock(const char *datadir, const char *who, int *fd_out,
	      struct kvdb_error *err);

/* Calls db's error hook with the formatted message. */
void kvdb_report(const struct kvdb *db, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Calls db's progress hook. */
void kvdb_progress(const struct kvdb *db, enum kvdb_progress what,
		   const char *label, uint64_t done, uint64_t total);

#endif
