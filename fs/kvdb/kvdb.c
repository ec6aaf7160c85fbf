/* SPDX-License-Identifier: MIT */
/*
 * Opening a data directory as a whole: kvfs.lock, the index and the data
 * files, in the order and modes the offline commands need, or the block
 * store for the daemon, with its start-up recovery and the clean-stop
 * marker (kvfs.clean). See kvdb.h.
 */
#include "kvdb.h"

#include <errno.h>
#include <inttypes.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
#include "extfile.h"
#include "index.h"
#include "log.h"

static void kvdb_fail(struct kvdb_error *e, int err, enum kvdb_stage stage,
		      const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Fills *e (when given) with what failed. */
static void kvdb_fail(struct kvdb_error *e, int err, enum kvdb_stage stage,
		      const char *path, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	e->err = err;
	e->stage = stage;
	e->holder[0] = '\0';
	snprintf(e->path, sizeof(e->path), "%s", path ? path : "");
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

int kvdb_lock(const char *datadir, const char *who, int *fd_out,
	      struct kvdb_error *err)
{
	char path[PATH_MAX], pid[32] = "";
	int fd, rc;

	datadir_path(path, sizeof(path), datadir, DATADIR_LOCK);
	fd = datadir_lock_open(datadir);
	if (fd < 0) {
		kvdb_fail(err, fd, KVDB_STAGE_LOCK_FILE, path, "%s: %s", path,
			  strerror(-fd));
		return fd;
	}
	rc = datadir_lock_try(fd);
	if (rc < 0) {
		/* The daemon names the holder whatever flock(2) said. */
		datadir_lock_holder(fd, pid, sizeof(pid));
		datadir_lock_release(fd);
	}
	if (rc == -EWOULDBLOCK) {
		rc = -EBUSY;
		kvdb_fail(err, rc, KVDB_STAGE_LOCK, path,
			  "%s is locked by process %s: a kvfs serves it or "
			  "another kvfsctl fsck or gc runs; %s works on an "
			  "unmounted data directory only",
			  datadir, pid[0] ? pid : "unknown", who);
	} else if (rc < 0) {
		kvdb_fail(err, rc, KVDB_STAGE_LOCK, path, "%s: %s", path,
			  strerror(-rc));
	}
	if (rc < 0) {
		if (err)
			snprintf(err->holder, sizeof(err->holder), "%s", pid);
		return rc;
	}
	/* Who holds it, for a kvfs that tries to start meanwhile. */
	if (datadir_lock_record_pid(fd) < 0)
		log_warn("cannot record our pid in %s", path);
	*fd_out = fd;
	return 0;
}

int kvdb_open_index(struct kvdb *db, struct kvdb_error *err)
{
	char path[PATH_MAX];
	int rc;

	datadir_path(path, sizeof(path), db->datadir, DATADIR_INDEX);
	if (!(db->flags & KVDB_INDEX_CREATE) && access(path, F_OK) < 0) {
		rc = -errno;
		kvdb_fail(err, rc, KVDB_STAGE_INDEX_MISSING, path, "%s: %s",
			  path, strerror(-rc));
		return rc;
	}
	rc = idx_open(&db->idx, path, db->root_mode, getuid(), getgid());
	if (rc < 0) {
		kvdb_fail(err, rc, KVDB_STAGE_INDEX, path, "cannot open %s: %s",
			  path, strerror(-rc));
		return rc;
	}
	/* The daemon's connection (idx_set_cache); a failure only costs speed. */
	if ((db->flags & KVDB_STORE) &&
	    idx_set_cache(db->idx, KVDB_DAEMON_CACHE_KIB) < 0)
		log_warn("%s: cannot enlarge the index's page cache", path);
	if ((db->flags & KVDB_STORE) && db->index_mmap &&
	    idx_set_mmap(db->idx, db->index_mmap) < 0)
		log_warn("%s: cannot map the index; it is read with pread(2)",
			 path);
	/* Every commit synchronous: gc unlinks nothing before it is durable. */
	if (db->flags & KVDB_INDEX_DURABLE) {
		rc = idx_set_durable(db->idx, 1);
		/* The index stays open: kvdb_close() closes it. */
		if (rc < 0) {
			kvdb_fail(err, rc, KVDB_STAGE_INDEX_SETUP, path,
				  "cannot open %s: %s", path, strerror(-rc));
			return rc;
		}
	}
	if (db->flags & KVDB_INDEX_COUNT) {
		rc = idx_count(db->idx, &db->counts);
		if (rc < 0) {
			kvdb_fail(err, rc, KVDB_STAGE_INDEX, path,
				  "cannot open %s: %s", path, strerror(-rc));
			idx_close(db->idx);
			db->idx = NULL;
		}
	}
	return rc;
}

int kvdb_reopen_index(struct kvdb *db, struct kvdb_error *err)
{
	idx_close(db->idx);
	db->idx = NULL;
	return kvdb_open_index(db, err);
}

/* The block store of a KVDB_STORE handle, on io_uring unless db->io. */
static int kvdb_open_store(struct kvdb *db, struct kvdb_error *err)
{
	char path[PATH_MAX];
	int rc;

	if (!db->io) {
		rc = store_io_probe();
		if (rc < 0) {
			kvdb_fail(err, rc, KVDB_STAGE_IO_URING, NULL,
				  "io_uring is not available: %s",
				  strerror(-rc));
			return rc;
		}
	}
	rc = store_open(&db->store, db->datadir, &db->scfg, db->io);
	if (rc < 0) {
		db->store = NULL;
		datadir_path(path, sizeof(path), db->datadir, DATADIR_DATA);
		kvdb_fail(err, rc, KVDB_STAGE_STORE, path,
			  "cannot open data files in %s: %s", path,
			  strerror(-rc));
	}
	return rc;
}

/* The data files, for the offline engines. */
static int kvdb_open_datafiles(struct kvdb *db, const struct kvdb_opts *o,
			       struct kvdb_error *err)
{
	char msg[sizeof(err->msg)];
	int rc;

	rc = kvdb_datafiles_open(db->datadir,
				 o->flags & KVDB_DATA_RW ? O_RDWR : O_RDONLY,
				 o->max_id ? o->max_id : UINT32_MAX,
				 o->flags & KVDB_DATA_DIR ? &db->data_fd : NULL,
				 &db->dfs, &db->ndfs, msg, sizeof(msg));
	if (rc < 0)
		kvdb_fail(err, rc, KVDB_STAGE_DATA, NULL, "%s", msg);
	for (size_t i = 0; i < db->ndfs; i++)
		db->dfs[i].io = o->io;
	return rc;
}

/* A handle on datadir with nothing open yet, or NULL. */
static struct kvdb *kvdb_new(const char *datadir, const struct kvdb_opts *o)
{
	struct kvdb *db = calloc(1, sizeof(*db));

	if (db)
		db->datadir = strdup(datadir);
	if (!db || !db->datadir) {
		free(db);
		return NULL;
	}
	db->lock_fd = -1;
	db->data_fd = -1;
	db->ext_fd = -1;
	db->io = o->io;
	db->hooks = o->hooks;
	db->flags = o->flags;
	db->index_mmap = o->index_mmap;
	db->root_mode = o->flags & KVDB_INDEX_CREATE ? o->root_mode : 0755;
	if (o->store)
		db->scfg = *o->store;
	return db;
}

int kvdb_open(struct kvdb **out, const char *datadir, const struct kvdb_opts *o,
	      struct kvdb_error *err)
{
	struct kvdb *db = kvdb_new(datadir, o);
	int rc;

	*out = NULL;
	if (!db) {
		kvdb_fail(err, -ENOMEM, KVDB_STAGE_MEMORY, NULL, "%s",
			  strerror(ENOMEM));
		return -ENOMEM;
	}
	rc = kvdb_lock(datadir, o->who, &db->lock_fd, err);
	if (rc == 0 && !(o->flags & KVDB_NO_INDEX))
		rc = kvdb_open_index(db, err);
	if (rc == 0)
		rc = o->flags & KVDB_STORE ? kvdb_open_store(db, err)
					   : kvdb_open_datafiles(db, o, err);
	if (rc == 0) {
		/* The daemon makes it; a tool finds it or there is none. */
		db->ext_fd = extf_dir_open(datadir, !!(o->flags & KVDB_STORE));
		if (db->ext_fd < 0 && db->ext_fd != -ENOENT) {
			rc = db->ext_fd;
			kvdb_fail(err, rc, KVDB_STAGE_STORE, EXTF_DIR,
				  "cannot open %s/%s: %s", datadir, EXTF_DIR,
				  strerror(-rc));
		}
		if (db->ext_fd < 0)
			db->ext_fd = -1;
	}
	if (rc < 0) {
		kvdb_close(db);
		return rc;
	}
	*out = db;
	return 0;
}

/* fsync(2)s directory dir, so a name made or removed in it stays so. */
static void kvdb_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static void kvdb_log_pending(void *arg, uint64_t parent, const char *name)
{
	(void)arg;
	log_info("lost at the crash (still queued, or a shared-tier stub "
		 "found again on demand): %s in directory inode "
		 "%" PRIu64,
		 name, parent);
}

void kvdb_sweep_extents(struct kvdb *db)
{
	struct dirent *de;
	unsigned removed = 0;
	DIR *d;
	int fd;

	if (db->ext_fd < 0)
		return;
	fd = openat(db->ext_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		log_warn("cannot list %s/%s: %s", db->datadir, EXTF_DIR,
			 strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct idx_attr a;
		uint64_t ino;
		int rc;

		if (extf_parse_name(de->d_name, &ino) < 0)
			continue;
		rc = idx_getattr(db->idx, ino, &a);
		/* Only what the index says is gone goes; unsure: kept. */
		if (rc < 0 && rc != -ENOENT)
			continue;
		if (rc == 0 && a.nlink > 0 && kv_ext_large(&a.ext) &&
		    a.ext.off == ino)
			continue;
		if (extf_remove(db->ext_fd, ino) == 0)
			removed++;
	}
	closedir(d);
	if (removed)
		log_info("removed %u extent files of files gone in the last "
			 "run (unlinked while open, or never saved)",
			 removed);
}

void kvdb_recover(struct kvdb *db, idx_extent_fn free_extent,
		  const struct recover_ops *ops, struct recover_result *out)
{
	char path[PATH_MAX];
	int rc;

	datadir_path(path, sizeof(path), db->datadir, KVDB_CLEAN);
	if (access(path, F_OK) != 0) {
		/*
		 * Files created and never saved: after a crash, those whose
		 * bytes were still queued (write-behind). Gone, never shown
		 * empty or short under their names.
		 */
		rc = idx_purge_pending(db->idx, kvdb_log_pending, NULL);
		if (rc > 0)
			log_warn("removed %d files whose bytes were still "
				 "queued at the crash",
				 rc);
		else if (rc < 0)
			log_err("cannot remove the files still queued at the "
				"crash: %s",
				strerror(-rc));
	}
	/* Files unlinked while open when the last run ended. */
	rc = idx_purge_orphans(db->idx, free_extent, ops->ctx);
	if (rc > 0)
		log_info("released %d files unlinked during the last run", rc);
	kvdb_sweep_extents(db);
	/*
	 * The marker says the last run stopped cleanly: every record it
	 * appended is committed, nothing to recover. It is removed (and the
	 * removal made durable) before anything is appended.
	 */
	datadir_path(path, sizeof(path), db->datadir, KVDB_CLEAN);
	if (unlink(path) == 0) {
		kvdb_sync_dir(db->datadir);
		log_info("the last run stopped cleanly: no recovery needed");
		recover_run(db->idx, db->store, 0, ops, out);
	} else {
		recover_run(db->idx, db->store, 1, ops, out);
	}
	db->recovered = 1;
}

/* Writes DATADIR/kvfs.clean durably (see kvdb_recover). */
static void kvdb_mark_clean(const char *datadir)
{
	char path[PATH_MAX];
	int fd;

	datadir_path(path, sizeof(path), datadir, KVDB_CLEAN);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_warn("cannot write %s: the next start will check the "
			 "newest data files",
			 path);
		return;
	}
	close(fd);
	kvdb_sync_dir(datadir);
}

void kvdb_close(struct kvdb *db)
{
	if (!db)
		return;
	kvdb_datafiles_close(db->dfs, db->ndfs);
	if (db->data_fd >= 0)
		close(db->data_fd);
	if (db->ext_fd >= 0)
		close(db->ext_fd);
	store_close(db->store);
	idx_close(db->idx);
	datadir_lock_release(db->lock_fd);
	free(db->datadir);
	free(db);
}

void kvdb_close_clean(struct kvdb *db)
{
	int clean;

	if (!db)
		return;
	clean = db->recovered && db->store && db->idx;
	store_close(db->store);
	db->store = NULL;
	idx_close(db->idx);
	db->idx = NULL;
	if (clean)
		kvdb_mark_clean(db->datadir);
	kvdb_close(db);
}

void kvdb_report(const struct kvdb *db, const char *fmt, ...)
{
	char msg[PATH_MAX + 512];
	va_list ap;

	if (!db->hooks.error)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	db->hooks.error(db->hooks.arg, msg);
}

void kvdb_progress(const struct kvdb *db, enum kvdb_progress what,
		   const char *label, uint64_t done, uint64_t total)
{
	if (db->hooks.progress)
		db->hooks.progress(db->hooks.arg, what, label, done, total);
}
