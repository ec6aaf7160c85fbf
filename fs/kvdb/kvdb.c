/* SPDX-License-Identifier: MIT */
/*
 * Opening a data directory as a whole: kvfs.lock, the index and the data
 * files, in the order and modes the offline commands need. See kvdb.h.
 */
#include "kvdb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
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
	snprintf(e->path, sizeof(e->path), "%s", path ? path : "");
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

int kvdb_lock(const char *datadir, const char *who, int *fd_out,
	      struct kvdb_error *err)
{
	char path[PATH_MAX], pid[32] = "";
	int fd;

	datadir_path(path, sizeof(path), datadir, DATADIR_LOCK);
	fd = datadir_lock_take(datadir, pid, sizeof(pid));
	if (fd == -EWOULDBLOCK) {
		kvdb_fail(err, -EBUSY, KVDB_STAGE_LOCK, path,
			  "%s is locked by process %s: a kvfs serves it or "
			  "another kvfsctl fsck or gc runs; %s works on an "
			  "unmounted data directory only",
			  datadir, pid[0] ? pid : "unknown", who);
		return -EBUSY;
	}
	if (fd < 0) {
		kvdb_fail(err, fd, KVDB_STAGE_LOCK, path, "%s: %s", path,
			  strerror(-fd));
		return fd;
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
	if (access(path, F_OK) < 0) {
		rc = -errno;
		kvdb_fail(err, rc, KVDB_STAGE_INDEX_MISSING, path, "%s: %s",
			  path, strerror(-rc));
		return rc;
	}
	rc = idx_open(&db->idx, path, 0755, getuid(), getgid());
	/* Nothing is unlinked before the commit that frees it is durable. */
	if (rc == 0 && (db->flags & KVDB_INDEX_DURABLE))
		rc = idx_set_durable(db->idx, 1);
	if (rc == 0 && (db->flags & KVDB_INDEX_COUNT))
		rc = idx_count(db->idx, &db->counts);
	if (rc < 0) {
		kvdb_fail(err, rc, KVDB_STAGE_INDEX, path, "cannot open %s: %s",
			  path, strerror(-rc));
		idx_close(db->idx);
		db->idx = NULL;
	}
	return rc;
}

int kvdb_open(struct kvdb **out, const char *datadir, const struct kvdb_opts *o,
	      struct kvdb_error *err)
{
	struct kvdb *db = calloc(1, sizeof(*db));
	char msg[sizeof(err->msg)];
	int rc;

	*out = NULL;
	if (db)
		db->datadir = strdup(datadir);
	if (!db || !db->datadir) {
		free(db);
		kvdb_fail(err, -ENOMEM, KVDB_STAGE_MEMORY, NULL, "%s",
			  strerror(ENOMEM));
		return -ENOMEM;
	}
	db->lock_fd = -1;
	db->data_fd = -1;
	db->io = o->io;
	db->hooks = o->hooks;
	db->flags = o->flags;
	rc = kvdb_lock(datadir, o->who, &db->lock_fd, err);
	if (rc == 0 && !(o->flags & KVDB_NO_INDEX))
		rc = kvdb_open_index(db, err);
	if (rc == 0) {
		rc = kvdb_datafiles_open(
			datadir, o->flags & KVDB_DATA_RW ? O_RDWR : O_RDONLY,
			o->max_id ? o->max_id : UINT32_MAX,
			o->flags & KVDB_DATA_DIR ? &db->data_fd : NULL,
			&db->dfs, &db->ndfs, msg, sizeof(msg));
		if (rc < 0)
			kvdb_fail(err, rc, KVDB_STAGE_DATA, NULL, "%s", msg);
		for (size_t i = 0; i < db->ndfs; i++)
			db->dfs[i].io = o->io;
	}
	if (rc < 0) {
		kvdb_close(db);
		return rc;
	}
	*out = db;
	return 0;
}

void kvdb_close(struct kvdb *db)
{
	if (!db)
		return;
	kvdb_datafiles_close(db->dfs, db->ndfs);
	if (db->data_fd >= 0)
		close(db->data_fd);
	idx_close(db->idx);
	datadir_lock_release(db->lock_fd);
	free(db->datadir);
	free(db);
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
