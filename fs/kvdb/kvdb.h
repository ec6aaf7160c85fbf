/* SPDX-License-Identifier: MIT */
/*
 * kvdb: a data directory opened as a whole, without FUSE. kvdb_open()
 * takes DATADIR/kvfs.lock (core's datadir.h: LOCK_EX, held until
 * kvdb_close(), with our pid in it so a daemon that tries to start says who
 * has it), opens the index (DATADIR/index.db) and then either every data
 * file (DATADIR/data/NNNNNN.kvd), for the offline engines, or the block
 * store (KVDB_STORE), for the daemon. The offline engines run on the
 * handle: check.h (fsck), rebuild.h (a new index from the data files),
 * compact.h (gc). The daemon asks for crash recovery with kvdb_recover(),
 * reopens the index after fork(2) with kvdb_reopen_index() (SQLite's POSIX
 * locks do not pass to the child) and ends with kvdb_close_clean(), which
 * leaves DATADIR/kvfs.clean for the next start to find.
 *
 * Error contract: functions return 0 or -errno. What failed, in words,
 * goes to the caller: kvdb_open() fills a struct kvdb_error; the engines
 * call the error hook (struct kvdb_hooks). Nothing here writes to stdout
 * or stderr; operator-visible changes are logged through log.h.
 *
 * Threads: a handle belongs to one thread; nothing here takes a lock
 * besides kvfs.lock, which keeps other processes out. With KVDB_STORE the
 * index and the store it opened lock themselves (index.h, store.h), so
 * other threads may use db->idx and db->store between kvdb_recover() and
 * kvdb_close_clean(); opening, reopening and closing stay on one thread.
 */
#ifndef KVFS_KVDB_H
#define KVFS_KVDB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "datafile.h"
#include "index.h"
#include "recover.h"
#include "store.h"
#include "store_io.h"

/* In DATADIR: written at a clean stop, removed by the next start. */
#define KVDB_CLEAN "kvfs.clean"

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
/*
 * Open the block store (db->store, kvdb_opts.store), not the data files:
 * the daemon, whose index connection also gets KVDB_DAEMON_CACHE_KIB of
 * page cache (idx_set_cache).
 */
#define KVDB_STORE 0x20u
#define KVDB_DAEMON_CACHE_KIB 65536u
/* A missing index.db is made: its root kvdb_opts.root_mode, our uid/gid. */
#define KVDB_INDEX_CREATE 0x40u

struct kvdb_opts {
	unsigned flags;	 /* KVDB_* */
	uint32_t max_id; /* open data files numbered up to this; 0: all */
	/* The command on whose behalf the lock is taken ("fsck", "gc"). */
	const char *who;
	/*
	 * I/O of the data files' bytes; NULL: pread(2)/pwrite(2), and with
	 * KVDB_STORE io_uring (checked with store_io_probe() first).
	 */
	const struct store_io_ops *io;
	struct kvdb_hooks hooks;
	/* With KVDB_STORE: lanes, rotation, durability; NULL: defaults. */
	const struct store_config *store;
	/* With KVDB_INDEX_CREATE: the mode bits of a new index's root. */
	unsigned root_mode;
	/* With KVDB_STORE: bytes of index.db read through a mapping. */
	uint64_t index_mmap;
};

/* The step of kvdb_open() that failed. */
enum kvdb_stage {
	KVDB_STAGE_NONE,
	KVDB_STAGE_LOCK_FILE, /* kvfs.lock cannot be opened or made */
	KVDB_STAGE_LOCK,      /* kvfs.lock is held (-EBUSY) or flock fails */
	KVDB_STAGE_INDEX_MISSING, /* there is no DATADIR/index.db */
	KVDB_STAGE_INDEX,	  /* index.db does not open or read */
	/* A pragma on the open index failed (the index logged why). */
	KVDB_STAGE_INDEX_SETUP,
	KVDB_STAGE_DATA,     /* a data file or data/ does not open */
	KVDB_STAGE_IO_URING, /* KVDB_STORE: io_uring does not work here */
	KVDB_STAGE_STORE,    /* KVDB_STORE: the block store does not open */
	KVDB_STAGE_MEMORY,
};

/* Why kvdb_open() failed: msg is ready to print; path names the file. */
struct kvdb_error {
	int err; /* -errno */
	enum kvdb_stage stage;
	char path[PATH_MAX];
	char msg[PATH_MAX + 512];
	/* KVDB_STAGE_LOCK: the pid kvfs.lock records ("" when none). */
	char holder[32];
};

struct kvdb {
	char *datadir;	 /* as given */
	int lock_fd;	 /* DATADIR/kvfs.lock, LOCK_EX */
	struct idx *idx; /* NULL until the index is open */
	int data_fd;	 /* DATADIR/data with KVDB_DATA_DIR, else -1 */
	struct kvdb_datafile *dfs; /* sorted by id; none with KVDB_STORE */
	size_t ndfs;
	struct store *store; /* with KVDB_STORE, else NULL */
	/* DATADIR/extents (extfile.h, O_PATH), -1 when there is none. */
	int ext_fd;
	struct store_config scfg;
	unsigned root_mode;	  /* of a new index (KVDB_INDEX_CREATE) */
	uint64_t index_mmap;	  /* kvdb_opts.index_mmap */
	int recovered;		  /* kvdb_recover() ran */
	struct idx_counts counts; /* with KVDB_INDEX_COUNT */
	const struct store_io_ops *io;
	struct kvdb_hooks hooks;
	unsigned flags;
};

/*
 * Removes the extent files (core/extfile.h) no named inode points at:
 * those of files unlinked while open (a worker's pool file), or made and
 * never saved before a crash. One index lookup per extent file; there are
 * few. Logs what it removed. kvdb_recover() and gc call it.
 */
void kvdb_sweep_extents(struct kvdb *db);

/*
 * Opens datadir: lock, then the index (unless KVDB_NO_INDEX), then the
 * data files, or with KVDB_STORE the block store. 0, or -errno with *err
 * saying which step failed and why (nothing is left open then).
 */
int kvdb_open(struct kvdb **out, const char *datadir, const struct kvdb_opts *o,
	      struct kvdb_error *err);
/* Opens the index of a handle opened with KVDB_NO_INDEX; as kvdb_open(). */
int kvdb_open_index(struct kvdb *db, struct kvdb_error *err);
/*
 * Closes db->idx and opens index.db again, as kvdb_open() did: in a child
 * after fork(2), whose parent's SQLite locks it does not hold. On error
 * db->idx is NULL (or, at KVDB_STAGE_INDEX_SETUP, open without the pragma).
 */
int kvdb_reopen_index(struct kvdb *db, struct kvdb_error *err);
/*
 * Start-up recovery of a KVDB_STORE handle, before anything else uses the
 * index or the store: releases the inodes unlinked while open when the
 * last run ended (free_extent(ops->ctx, ...) gets each of their records),
 * then takes DATADIR/kvfs.clean away (durably) and runs recover_run(),
 * as after a crash unless that marker was there. Best effort, like
 * recover_run(); logs what it did.
 */
void kvdb_recover(struct kvdb *db, idx_extent_fn free_extent,
		  const struct recover_ops *ops, struct recover_result *out);
/* Closes the store, the index, the data files and the lock; db may be NULL. */
void kvdb_close(struct kvdb *db);
/*
 * kvdb_close(), writing DATADIR/kvfs.clean between closing the index and
 * giving up the lock when kvdb_recover() ran and the store and index are
 * still open: the caller says every record it appended is committed, so
 * the next start needs no recovery.
 */
void kvdb_close_clean(struct kvdb *db);

/*
 * Takes datadir/kvfs.lock (LOCK_EX, non-blocking) and writes our pid into
 * it; *fd_out holds it until closed. -EBUSY when a kvfs or a kvfsctl has
 * it (*err says by which pid, also in err->holder), other -errno when the
 * file does not open (KVDB_STAGE_LOCK_FILE) or flock(2) fails. who names
 * the command in the message.
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
