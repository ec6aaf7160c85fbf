/* SPDX-License-Identifier: MIT */
/*
 * The namespace index: inodes, dentries, xattrs and which data-file record
 * holds each regular file's bytes, in one SQLite database (WAL mode).
 *
 * Every SQL statement of kvfs lives in index/ (index.c, schema.c, ns.c,
 * xattr.c, records.c; index_int.h says which does what); nothing else
 * includes sqlite3.h. Every function returns 0 (or a count) on success
 * and -errno on failure, with SQLite's codes mapped once: BUSY/LOCKED ->
 * -EBUSY, NOMEM -> -ENOMEM, FULL -> -ENOSPC, READONLY -> -EROFS,
 * CANTOPEN/PERM -> -EACCES, CORRUPT/NOTADB/IOERR/anything else -> -EIO
 * (logged with sqlite3_errmsg).
 * Namespace errors are the ones ext4 gives (-ENOENT, -EEXIST, -ENOTDIR,
 * -EISDIR, -ENOTEMPTY, -EINVAL, -ENAMETOOLONG).
 *
 * Thread safety: one connection behind idx->lock; any thread may call any
 * function, calls are serialised. Each mutating call either happens whole
 * or not at all: one transaction, or one savepoint of a batch
 * (idx_set_batch()).
 *
 * The index does not know about open files or the kernel: an inode whose
 * nlink drops to 0 stays (an orphan) until idx_release_inode() removes it,
 * which the caller does once nothing holds it.
 */
#ifndef KVFS_INDEX_H
#define KVFS_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "kvtypes.h"

/*
 * On-disk format version of the database (PRAGMA user_version). Version 2
 * adds the horizons table to version 1, version 3 extent-file rows to
 * version 2, version 4 the device number (rdev) of special files to version
 * 3; schema.c lists the versions.
 */
#define IDX_FORMAT_VERSION 5
/* PRAGMA application_id that marks a kvfs database ("KVFS"). */
#define IDX_APPLICATION_ID 0x4b564653
#define IDX_NAME_MAX 255

struct idx;

struct idx_attr {
	uint64_t ino;
	uint32_t mode; /* S_IFMT type bits and permission bits */
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint64_t size;
	int64_t atime_ns; /* nanoseconds since the epoch */
	int64_t mtime_ns;
	int64_t ctime_ns;
	struct kv_extent ext; /* regular files only; file_id 0 = none */
	uint64_t rdev;	      /* device nodes only (st_rdev), else 0 */
};

/*
 * Opens (creating when missing) the database at path and prepares its
 * statements. A new database gets the schema and a root directory (ino 1,
 * mode S_IFDIR | root_mode, owned by root_uid/root_gid). An older format
 * version is upgraded to IDX_FORMAT_VERSION first, in one transaction.
 * Errors: -EMEDIUMTYPE when the file is not a kvfs database (not SQLite, or
 * another application's), -EPROTONOSUPPORT when its format version is newer
 * than IDX_FORMAT_VERSION, -EIO when corrupt, -EACCES/-EROFS when it cannot
 * be opened for writing. On success *out is freed with idx_close().
 */
int idx_open(struct idx **out, const char *path, uint32_t root_mode,
	     uint32_t root_uid, uint32_t root_gid);
/*
 * Starts a thread that checkpoints the WAL from its own connection, so
 * commits never wait for a checkpoint's fsyncs (without it SQLite
 * checkpoints inside whichever commit fills the log). Call it in the
 * process that will use idx (threads do not survive fork); idx_close()
 * stops it.
 */
int idx_start_checkpointer(struct idx *idx);
/* Checkpoints the WAL and closes. Accepts NULL. */
void idx_close(struct idx *idx);

/* Dentry (parent, name) -> its inode's attributes. -ENOENT when absent. */
int idx_lookup(struct idx *idx, uint64_t parent, const char *name,
	       struct idx_attr *out);
/* Attributes of ino (also of an orphan). -ENOENT when there is none. */
int idx_getattr(struct idx *idx, uint64_t ino, struct idx_attr *out);

/*
 * Creates a new inode and its dentry in one transaction. attr carries mode,
 * uid, gid and the three times; on success attr->ino, attr->nlink (1, or 2
 * for a directory) and size are filled in. target is the symlink target for
 * S_IFLNK (size = its length), NULL otherwise. The parent's mtime/ctime are
 * set to attr->mtime_ns, and for a directory its nlink grows by one.
 * Errors: -EEXIST, -ENOENT (no such parent), -ENOTDIR (parent not a dir),
 * -ENAMETOOLONG (name over IDX_NAME_MAX bytes).
 */
int idx_create(struct idx *idx, uint64_t parent, const char *name,
	       struct idx_attr *attr, const char *target);

/*
 * Entries the shared tier found, for n names in directory parent, in one
 * transaction: attrs[i] carries mode, owner and times. S_IFDIR makes a
 * directory; S_IFREG a stub: a regular file whose attrs[i].size bytes are
 * elsewhere, with no record, pending (see idx_purge_pending(), which
 * removes it after a crash) until its bytes are saved with
 * idx_set_extent(), and read back with ext.hdr_len KV_EXT_STUB. attrs[i]
 * gets its ino, 0 when that name was not made (it exists already, is not
 * a valid name, or another type). Returns how many were made, or -errno
 * when the transaction failed (then none was).
 */
int idx_create_many(struct idx *idx, uint64_t parent, size_t n,
		    const char *const *names, struct idx_attr *attrs);
/*
 * Copies a symlink's target into buf (NUL-terminated, truncated to len-1).
 * Returns its full length, -EINVAL when ino is not a symlink.
 */
int idx_readlink(struct idx *idx, uint64_t ino, char *buf, size_t len);

/*
 * Writes mode, uid, gid and the three times of attr->ino. The size and the
 * extent are left alone: only a save sets them (idx_set_extent), so that a
 * setattr racing a background save never pairs one save's size with
 * another's record. -ENOENT when there is no such inode.
 */
int idx_setattr(struct idx *idx, const struct idx_attr *attr);

/*
 * Points ino at a new record (ext, with ncrcs CRC32C values, one per
 * KV_CHUNK_SIZE chunk of ext->len bytes; ext->file_id 0 and ncrcs 0 for an
 * empty file) and sets its size and mtime/ctime, in one transaction. The
 * extent it replaces is copied to *old (file_id 0 when none) so the caller
 * can free it.
 */
int idx_set_extent(struct idx *idx, uint64_t ino, uint64_t size,
		   int64_t mtime_ns, const struct kv_extent *ext,
		   const uint32_t *crcs, uint32_t ncrcs, struct kv_extent *old);
/*
 * The path of ino within the file system ("/a/b", "/" for the root) by one
 * of its names, into buf (len bytes). -ENOENT when it has none,
 * -ENAMETOOLONG when buf is too small, -ELOOP past IDX_PATH_DEPTH levels.
 */
#define IDX_PATH_DEPTH 4096
int idx_path(struct idx *idx, uint64_t ino, char *buf, size_t len);

/* One save for idx_set_extents(). */
struct idx_save {
	uint64_t ino;
	uint64_t size;
	int64_t mtime_ns;
	struct kv_extent ext;
	const uint32_t *crcs; /* kv_nchunks(ext.len) values */
	struct kv_extent old; /* out: the extent replaced */
	int rc;		      /* out: 0 or -errno for this save */
};
/*
 * idx_set_extent() for n inodes in one transaction (group commit). A save
 * that fails on its own (-ENOENT, -EINVAL) gets its rc and the others go
 * on; when the transaction fails, every save gets its error. Returns 0 or
 * that error.
 */
int idx_set_extents(struct idx *idx, struct idx_save *v, size_t n);
/*
 * The CRC list of ino's record: *crcs (caller frees with free(); NULL when
 * there is none) and their count in *ncrcs.
 */
int idx_get_crcs(struct idx *idx, uint64_t ino, uint32_t **crcs,
		 uint32_t *ncrcs);

/*
 * Removes the dentry (parent, name) and drops its inode's nlink (a directory
 * goes to 0 at once and the parent's nlink drops by one), in one
 * transaction. The parent's mtime/ctime and the inode's ctime become now_ns.
 * rmdir is non-zero for rmdir(2): -ENOTDIR when the name is not a directory,
 * -ENOTEMPTY when it has entries; for unlink(2) a directory gives -EISDIR.
 * On success *ino and *nlink are the inode and its link count after.
 */
int idx_unlink(struct idx *idx, uint64_t parent, const char *name, int rmdir,
	       int64_t now_ns, uint64_t *ino, uint32_t *nlink);
/*
 * idx_unlink() of a file's name only while it still means inode ino, checked
 * in the same transaction: -ESTALE when it names another inode, -ENOENT when
 * it is gone. *nlink is ino's link count after.
 */
int idx_unlink_ino(struct idx *idx, uint64_t parent, const char *name,
		   uint64_t ino, int64_t now_ns, uint32_t *nlink);

/*
 * rename(2)/renameat2(2) in one transaction. flags is 0, RENAME_NOREPLACE or
 * RENAME_EXCHANGE (others: -EINVAL). Replacing follows POSIX: a file may
 * replace a file, a directory only an empty directory (-EISDIR, -ENOTDIR,
 * -ENOTEMPTY otherwise); moving a directory below itself is -EINVAL; a name
 * onto itself (same inode) is a successful no-op. With RENAME_NOREPLACE an
 * existing target is -EEXIST; with RENAME_EXCHANGE a missing one is -ENOENT.
 * Parents' mtime/ctime and the moved inode's ctime become now_ns; directory
 * parents' nlink follow a directory that moves. When a target inode lost its
 * name, *replaced is its ino and *replaced_nlink its link count after (0 for
 * a file that had one name); otherwise *replaced is 0. xattrs stay with
 * their inode.
 */
int idx_rename(struct idx *idx, uint64_t parent, const char *name,
	       uint64_t newparent, const char *newname, unsigned int flags,
	       int64_t now_ns, uint64_t *replaced, uint32_t *replaced_nlink);

/*
 * Deletes an inode whose nlink is 0 (and its xattrs), returning its extent in
 * *ext so the caller can free the record. -EBUSY when it still has links,
 * -ENOENT when there is no such inode.
 */
int idx_release_inode(struct idx *idx, uint64_t ino, struct kv_extent *ext);

/*
 * Deletes every inode with nlink 0 (left by a crash or unclean stop while
 * files were open) and calls fn for each one's extent (file_id != 0 only).
 * Returns the number deleted.
 */
typedef void (*idx_extent_fn)(void *arg, const struct kv_extent *ext);
int idx_purge_orphans(struct idx *idx, idx_extent_fn fn, void *arg);

/*
 * Removes the names of regular files created and never saved since (their
 * first save would have cleared the mark): after a crash, the files whose
 * bytes were still in the daemon's write-behind queue. fn (may be NULL)
 * gets each name before it goes; the inodes become orphans for
 * idx_purge_orphans(). Returns how many.
 */
typedef void (*idx_name_fn)(void *arg, uint64_t parent, const char *name);
int idx_purge_pending(struct idx *idx, idx_name_fn fn, void *arg);

/*
 * Number of live inodes whose record is in data file file_id.
 */
int idx_datafile_refs(struct idx *idx, uint32_t file_id, uint64_t *count);

/*
 * Lists dir's entries whose cookie is greater than after, in cookie order
 * (cookies are positive, stable, and never reused within a directory while
 * the entry exists). fn gets each name, its attributes and its cookie and
 * returns non-zero to stop. Returns 0, or -ENOTDIR / -ENOENT for dir.
 */
typedef int (*idx_dirent_fn)(void *arg, const char *name,
			     const struct idx_attr *attr, uint64_t cookie);
int idx_readdir(struct idx *idx, uint64_t dir, uint64_t after, idx_dirent_fn fn,
		void *arg);
/*
 * The same for a listing that needs no attributes (getdents(2)): attr
 * holds only ino and mode, everything else is zero.
 */
int idx_readdir_names(struct idx *idx, uint64_t dir, uint64_t after,
		      idx_dirent_fn fn, void *arg);

/*
 * xattrs of ino. flags: 0, XATTR_CREATE (-EEXIST if set) or XATTR_REPLACE
 * (-ENODATA if unset). getxattr copies into buf when size > 0 (-ERANGE when
 * too small) and returns the value's length; -ENODATA when unset.
 * listxattr writes the NUL-separated names the same way and returns the
 * total length. Values are at most 64 KiB (-E2BIG).
 */
int idx_setxattr(struct idx *idx, uint64_t ino, const char *name,
		 const void *value, size_t len, int flags);
int idx_getxattr(struct idx *idx, uint64_t ino, const char *name, void *buf,
		 size_t size);
int idx_listxattr(struct idx *idx, uint64_t ino, char *buf, size_t size);
int idx_removexattr(struct idx *idx, uint64_t ino, const char *name);

/*
 * durable: every commit is synced before it returns (synchronous=FULL);
 * otherwise a power cut may lose the last commits, never corrupt the
 * database (synchronous=NORMAL, the default).
 */
int idx_set_durable(struct idx *idx, int durable);

/*
 * SQLite's page cache of this connection, in KiB (SQLite's default is
 * 2000): the daemon's main connection keeps its hot pages in the process,
 * not only in the kernel's page cache, which a serving host's other I/O
 * keeps evicting. Connections that scan (counts, fsck) keep the default,
 * which a scan would otherwise fill.
 */
int idx_set_cache(struct idx *idx, unsigned kib);
/*
 * Reads of this connection take up to bytes of the database file straight
 * from a memory mapping of it (PRAGMA mmap_size; 0: none) instead of a
 * pread(2) and a copy per page. An I/O error of a mapped page is a SIGBUS
 * then, not an error code.
 */
int idx_set_mmap(struct idx *idx, uint64_t bytes);

/*
 * Makes every committed transaction durable (a full WAL checkpoint, which
 * syncs the log and the database file).
 */
int idx_sync(struct idx *idx);

/*
 * Batched commits (the daemon's, unless durable): with max > 0 a mutating
 * call no longer commits on its own. Its change joins one write transaction
 * left open, in a savepoint of it (a failed call still undoes only
 * itself), and one commit covers every change made since the last:
 * idx_commit(), idx_sync(), idx_close(), and the call that brings the batch
 * to max changes. This connection's reads see each change at once; other
 * connections, and the index after a crash, see only what was committed,
 * as it was at the last commit. A commit that fails loses the whole batch
 * the same way (logged with its count, and counted). max 0 commits the open
 * batch and turns batching off.
 */
int idx_set_batch(struct idx *idx, unsigned max);
/* Commits the open batch, if any; unless force, not while held. */
int idx_commit(struct idx *idx, int force);
/*
 * idx_commit(), then, with no batch open, whether each of the n data files
 * files[] is still referenced: unused[i] 1 when no inode points into it,
 * 0 when one does, 2 when a batch is still open (held, or the commit
 * failed): then nobody can tell, as a crash would go back to the last
 * commit. A file not referenced once committed can be removed.
 */
int idx_commit_files(struct idx *idx, int force, const uint32_t *files,
		     size_t n, unsigned char *unused);
/* Whether idx_set_batch() turned batching on. */
int idx_batching(struct idx *idx);
/* Test hook: while on, only a forced idx_commit() ends the batch. */
void idx_hold(struct idx *idx, int on);
/*
 * For work that must wait until a change is committed (freeing what it no
 * longer points at): the number of the batch a change made before this
 * call is in, 0 when every change so far is committed. idx_batch_done()
 * says what became of it: 1 committed, 0 still open, -1 lost.
 */
uint64_t idx_batch_seq(struct idx *idx);
int idx_batch_done(struct idx *idx, uint64_t seq);

struct idx_txn_stats {
	uint64_t commits;      /* write transactions committed */
	uint64_t lost_batches; /* batches a failed commit lost */
	uint64_t lost_changes; /* the changes they held */
	unsigned open_changes; /* changes in the open batch */
};
void idx_get_txn_stats(struct idx *idx, struct idx_txn_stats *out);

/* A name found by a listing: its inode, where it is, one time, a size. */
struct idx_name {
	uint64_t ino;
	uint64_t parent; /* 0 when the inode has no name (an orphan) */
	char name[IDX_NAME_MAX + 1];
	int64_t time_ns; /* idx_lru: last use; others: mtime */
	uint64_t size;
	uint64_t cookie; /* the dentry's readdir cookie */
};

/*
 * Records uses (opens, stores, reads) for eviction: raises the last-use
 * time of each inos[i] to times_ns[i] (never lowers it), in one
 * transaction; where atime[i] is non-zero (atime may be NULL) the visible
 * atime too, from the same clock (a read the daemon's atime rules let
 * through; setattr changes it otherwise).
 */
int idx_touch(struct idx *idx, size_t n, const uint64_t *inos,
	      const int64_t *times_ns, const unsigned char *atime);
/*
 * Up to max named regular files with a record, least recently used first
 * (by last-use time, see idx_touch; a store counts as a use), strictly
 * after (after_ns, after_ino) in that order. Returns the count written to
 * out.
 */
int idx_lru(struct idx *idx, int64_t after_ns, uint64_t after_ino,
	    struct idx_name *out, size_t max);
/*
 * Up to max names ending in ".tmp" with a cookie above after, in cookie
 * order (time_ns is the inode's mtime). Returns the count.
 */
int idx_tmp_names(struct idx *idx, uint64_t after, struct idx_name *out,
		  size_t max);
/*
 * Up to max inodes whose record in data file file_id ends past byte end
 * (the file is shorter than the record). Returns the count.
 */
int idx_records_past(struct idx *idx, uint32_t file_id, uint64_t end,
		     struct idx_name *out, size_t max);
/*
 * The first record start after off in data file file_id: 1 and *next set,
 * or 0 when no record follows.
 */
int idx_next_extent(struct idx *idx, uint32_t file_id, uint64_t off,
		    uint64_t *next);
/* 1 when an inode's record starts at off in data file file_id, else 0. */
int idx_extent_at(struct idx *idx, uint32_t file_id, uint64_t off);

/* Counts for statfs: live inodes and the sum of regular files' sizes. */
int idx_statfs(struct idx *idx, uint64_t *ninodes, uint64_t *nbytes);

/*
 * Answers a batch of lookups in one read transaction (the lookup manager's
 * probe): for each i, found[i] = 1 and attrs[i] filled when (parents[i],
 * names[i]) exists, found[i] = 0 otherwise.
 */
int idx_lookup_batch(struct idx *idx, size_t n, const uint64_t *parents,
		     const char *const *names, int *found,
		     struct idx_attr *attrs);

/*
 * idx_create() for a rebuild of the index from the data files: the new
 * inode gets the number ino (above KV_ROOT_INO and unused, -EEXIST
 * otherwise) instead of the next free one, so the rebuilt index keeps the
 * numbers the records carry. Any type idx_create() makes, with target for a
 * symlink; a regular file has size 0 and no record (see idx_set_extent).
 * Later idx_create() calls number above every inode created so far.
 */
int idx_create_ino(struct idx *idx, uint64_t parent, const char *name,
		   struct idx_attr *attr, const char *target, uint64_t ino);

/*
 * A new name (parent, name) for inode ino, which must not be a directory
 * (-EPERM) and must still have a name (-ENOENT for an orphan, as ext4
 * answers a link of an unlinked file); nlink grows by one and ino's ctime
 * and the parent's mtime and ctime become now_ns. On success *out has ino's
 * attributes. Errors as idx_create(), and -EMLINK at IDX_LINK_MAX names.
 */
#define IDX_LINK_MAX 65000
int idx_link(struct idx *idx, uint64_t ino, uint64_t parent, const char *name,
	     int64_t now_ns, struct idx_attr *out);

/*
 * Every name of ino as absolute paths, oldest first, each ended by a NUL,
 * into buf (len bytes; *used gets the bytes written). Returns how many
 * (> 0), -ENOENT when ino has none, -ENAMETOOLONG when buf is too small.
 */
int idx_names(struct idx *idx, uint64_t ino, char *buf, size_t len,
	      size_t *used);
/*
 * The path field of the metadata record (core/record.h) that gives inode
 * a (its attributes, as from idx_getattr) its names in a rebuild: a name
 * record's for a regular file (every name; -ENOENT with none), a node
 * record's for any other file (type, rdev, target, names; none: removed).
 * Into buf (len bytes, *used set). Returns the record type, 0 for a
 * directory (nothing to record), or -errno (-ENAMETOOLONG: too long).
 */
int idx_meta_field(struct idx *idx, const struct idx_attr *a, char *buf,
		   size_t len, size_t *used);

/* One name of ino: its directory and entry name. 0, -ENOENT or -errno. */
int idx_name_of(struct idx *idx, uint64_t ino, uint64_t *parent, char *name,
		size_t len);

/* What the index holds (idx_count). */
struct idx_counts {
	uint64_t files;	       /* regular files with a name */
	uint64_t dirs;	       /* directories, the root included */
	uint64_t others;       /* symlinks, FIFOs, sockets, devices */
	uint64_t orphans;      /* inodes without a name (nlink 0) */
	uint64_t records;      /* inodes with a record, orphans included */
	uint64_t record_bytes; /* their payload bytes */
};
/*
 * Counts inodes by kind. Reads every inode row, holding idx->lock for the
 * whole scan: give it a connection of its own (a second idx_open()) where
 * other threads use the index.
 */
int idx_count(struct idx *idx, struct idx_counts *out);

/* A record the index points at (idx_file_records). */
struct idx_rec {
	uint64_t ino;
	struct kv_extent ext;
};
/*
 * Up to max inodes (orphans included) whose record is in data file file_id
 * at offset from or later, by offset. Returns the count written to out.
 */
int idx_file_records(struct idx *idx, uint32_t file_id, uint64_t from,
		     struct idx_rec *out, size_t max);

/* One record copied elsewhere, byte for byte (idx_move_records). */
struct idx_move {
	uint64_t ino;
	struct kv_extent from; /* where the index has it now */
	struct kv_extent to;   /* the copy: same hdr_len and len */
};
/*
 * Points each mv[i].ino at its copy, in one transaction; nothing else of
 * the inode changes (sizes, times, CRCs: the copy is the same record).
 * -ESTALE when an inode's record is not at mv[i].from (nothing is moved),
 * -EINVAL when a copy differs in hdr_len or len or names file 0.
 */
int idx_move_records(struct idx *idx, const struct idx_move *mv, size_t n);

/*
 * Recovery horizons (store_horizons): every record of data file ids[i]
 * below offs[i] is committed or abandoned, so crash recovery walks the file
 * from there. idx_horizons_get fills up to max pairs, ids ascending, and
 * returns how many (0 when none were ever put); idx_horizons_put inserts
 * or replaces n pairs, idx_horizons_drop forgets n files (removed data
 * files: a later file may get the same id). Each put or drop is one
 * transaction.
 */
int idx_horizons_get(struct idx *idx, uint32_t *ids, uint64_t *offs,
		     size_t max);
int idx_horizons_put(struct idx *idx, size_t n, const uint32_t *ids,
		     const uint64_t *offs);
int idx_horizons_drop(struct idx *idx, size_t n, const uint32_t *ids);

#endif
