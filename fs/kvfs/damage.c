/* SPDX-License-Identifier: MIT */
/*
 * What a failed block read does to its name: a read that proved the record
 * short (its data file ends before the record does) drops the name
 * (fs_drop); any other failure quarantines it (fs_quarantine): lookups miss,
 * the data stays. Both tell the kernel to forget the name before the
 * failed read is answered. Also here: the test-only fault injection
 * (KVFS_FAULT_INJECTION) that makes reads fail or probes slow.
 *
 * Threads: called from FUSE workers (the read handler); the kernel
 * notifications go through the notifier thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "damage.h"
#include "fs.h"
#include "node.h"
#include "notify.h"

/*
 * A failed read of n is done with its name (fs_drop and fs_quarantine
 * count it in n->unnaming first). wait: it did not unname it itself
 * (another failed read of n had, or is at it), so its reply must not go out
 * before that one's entry invalidation has: it waits, bounded by
 * FS_UNNAME_WAIT_NS, until no other failed read of n is still unnaming.
 * (Queueing an invalidation of its own instead deadlocks: the notifier
 * would sit in the other's inode invalidation, which waits for the pages
 * this read holds until it is answered.)
 */
static void unname_end(struct fs *fs, struct node *n, int wait)
{
	uint64_t end = clock_monotonic_ns() + FS_UNNAME_WAIT_NS;

	pthread_mutex_lock(&fs->nodes_lock);
	if (--n->unnaming == 0)
		pthread_cond_broadcast(&fs->unname_cond);
	while (wait && n->unnaming > 0) {
		struct timespec ts;

		if (clock_monotonic_ns() >= end) {
			log_warn("inode %llu: another failed read's entry "
				 "invalidation took over %lld ms; answering "
				 "the read anyway",
				 (unsigned long long)n->ino,
				 FS_UNNAME_WAIT_NS / 1000000);
			break;
		}
		/* pthread_cond_timedwait's deadline is on CLOCK_REALTIME. */
		ts = clock_ts(clock_realtime_ns() + 50000000);
		pthread_cond_timedwait(&fs->unname_cond, &fs->nodes_lock, &ts);
	}
	pthread_mutex_unlock(&fs->nodes_lock);
}

void fs_quarantine(struct fs *fs, struct node *n, int rc)
{
	struct vc_info info;
	uint64_t parent, gen;
	char *name, *path;

	pthread_mutex_lock(&fs->nodes_lock);
	n->unnaming++;
	parent = n->parent;
	name = strdup(n->name);
	pthread_mutex_unlock(&fs->nodes_lock);
	path = node_path(fs, n);
	if (!name || !path || parent == 0 || n->attr.nlink == 0)
		goto out_wait;
	if (vc_query(fs->vc, parent, name, &info) == 0) {
		/*
		 * Only the verdict that said "this inode" may flip; a newer
		 * probe in flight decides for itself (the seed fix).
		 */
		if (info.phase != VC_RESOLVED || info.result != VC_HIT ||
		    info.ino != n->ino)
			goto out_wait;
		gen = info.generation;
	} else {
		gen = vc_bump(fs->vc, parent, name, 1, n->ino);
	}
	if (vc_mark_miss(fs->vc, parent, name, gen) != 1)
		goto out_wait;
	log_warn("quarantined %s (inode %llu): read failed: %s; data kept, "
		 "lookups miss until it is stored again",
		 path, (unsigned long long)n->ino, fs_read_error(rc));
	atomic_fetch_add(&fs->quarantined, 1);
	/*
	 * The reader's next access() must already miss: the reply to its
	 * read waits for the entry invalidation. Not for the inode one, which
	 * waits for pages the kernel locked until that reply.
	 */
	notify_entry_sync(fs->notify, parent, name);
	unname_end(fs, n, 0);
	notify_inode(fs->notify, n->ino);
	goto out_free;
out_wait:
	unname_end(fs, n, 1);
out_free:
	free(path);
	free(name);
}

void fs_drop(struct fs *fs, struct node *n)
{
	int64_t now = fs_now_ns();
	uint64_t parent;
	uint32_t nlink;
	char *name, *path;
	int rc;

	pthread_mutex_lock(&fs->nodes_lock);
	n->unnaming++;
	parent = n->parent;
	name = strdup(n->name);
	pthread_mutex_unlock(&fs->nodes_lock);
	path = node_path(fs, n);
	if (!name || !path || parent == 0)
		goto out_wait;
	/* Only the name that still means this inode goes. */
	rc = idx_unlink_ino(fs->idx, parent, name, n->ino, now, &nlink);
	if (rc < 0) {
		if (rc != -ENOENT && rc != -ESTALE)
			log_err("cannot drop %s: %s", path, strerror(-rc));
		goto out_wait;
	}
	vc_bump(fs->vc, parent, name, 0, 0);
	/* As an unlink: never undone by a crash (node_unname()). */
	node_commit(fs, 1);
	pthread_rwlock_wrlock(&n->rw);
	n->attr.nlink = nlink;
	n->attr.ctime_ns = now;
	pthread_rwlock_unlock(&n->rw);
	log_warn("dropped %s (inode %llu): its data file ends before the "
		 "record (torn); space is freed once no one has it open",
		 path, (unsigned long long)n->ino);
	/*
	 * The reader's next access() must already miss: the reply to its
	 * read waits for the entry invalidation. Not for the inode one, which
	 * waits for pages the kernel locked until that reply.
	 */
	notify_entry_sync(fs->notify, parent, name);
	unname_end(fs, n, 0);
	notify_inode(fs->notify, n->ino);
	atomic_fetch_add(&fs->dropped, 1);
	goto out_free;
out_wait:
	unname_end(fs, n, 1);
out_free:
	free(path);
	free(name);
}

void fs_read_damage(struct fs *fs, struct node *n, long long off, int rc,
		    const char *what)
{
	char *path = node_path(fs, n);

	log_warn("%s of %s (inode %llu) at %lld failed: %s", what,
		 path ? path : "?", (unsigned long long)n->ino, off,
		 fs_read_error(rc));
	free(path);
	/* Only a provably short record is dropped; any other failure keeps
	 * the data. */
	if (rc == -ENODATA)
		fs_drop(fs, n);
	else
		fs_quarantine(fs, n, rc);
}

const char *fs_read_error(int rc)
{
	switch (rc) {
	case -ENODATA:
		return "data file ends before the record";
	case -EBADMSG:
		return "checksum mismatch";
	default:
		return strerror(-rc);
	}
}

#ifdef KVFS_FAULT_INJECTION
int fs_fault_read(struct fs *fs, uint64_t ino)
{
	int rc = 0;

	pthread_mutex_lock(&fs->fault_lock);
	for (size_t i = 0; i < fs->nfaults; i++)
		if (fs->faults[i].ino == ino)
			rc = -fs->faults[i].err;
	pthread_mutex_unlock(&fs->fault_lock);
	return rc;
}

/*
 * Test hooks, set with setxattr on the mount:
 * - "user.kvfs.fault.read" = errno number on a file: its reads fail so
 *   ("0" clears);
 * - "user.kvfs.fault.probe_delay_ms" = N on any inode: each probe sleeps N
 *   ms first.
 * - "user.kvfs.fault.wb_delay_ms" = N on any inode: each write-behind
 *   write (of one save or of several small ones) sleeps N ms first
 *   (keeps the queue full).
 * - "user.kvfs.fault.wb_error" = ERRNO on any inode: each write-behind
 *   append fails with it (0 stops).
 * - "user.kvfs.fault.ext_delay_ms" = N on any inode: each queued write to
 *   an extent file sleeps N ms first (keeps it in the queue).
 * - "user.kvfs.fault.ext_error" = ERRNO on any inode: each queued write to
 *   an extent file fails with it (0 stops).
 * - "user.kvfs.fault.backing_error" = ERRNO on any inode: registering a
 *   backing file for passthrough fails with it, as a kernel's refusal.
 * - "user.kvfs.fault.ra_error" = ERRNO on any inode: each read-ahead
 *   fails with it before reading (0 stops).
 * - "user.kvfs.fault.idx_hold" = 1 on any inode: the index's batch is
 *   committed only by fsync(2), kvfsctl sync, an eviction, an unlink,
 *   rmdir or replacing rename, and unmount (0 ends it), so that a crash
 *   loses what it holds.
 * Returns 1 when name was a hook (rc in *rc), 0 otherwise.
 */
int fs_fault_setxattr(struct fs *fs, uint64_t ino, const char *name,
		      const char *value, size_t size, int *rc)
{
	char buf[16];
	long v;

	if (strncmp(name, "user.kvfs.fault.", 16) != 0)
		return 0;
	if (size == 0 || size >= sizeof(buf)) {
		*rc = -EINVAL;
		return 1;
	}
	memcpy(buf, value, size);
	buf[size] = '\0';
	v = strtol(buf, NULL, 10);
	*rc = 0;
	if (strcmp(name, "user.kvfs.fault.probe_delay_ms") == 0) {
		atomic_store(&fs->fault_probe_delay_ms, (unsigned)v);
	} else if (strcmp(name, "user.kvfs.fault.wb_delay_ms") == 0) {
		atomic_store(&fs->fault_wb_delay_ms, (unsigned)v);
	} else if (strcmp(name, "user.kvfs.fault.wb_error") == 0) {
		atomic_store(&fs->fault_wb_error, (int)v);
	} else if (strcmp(name, "user.kvfs.fault.ext_delay_ms") == 0) {
		atomic_store(&fs->fault_ext_delay_ms, (unsigned)v);
	} else if (strcmp(name, "user.kvfs.fault.ext_error") == 0) {
		atomic_store(&fs->fault_ext_error, (int)v);
	} else if (strcmp(name, "user.kvfs.fault.backing_error") == 0) {
		atomic_store(&fs->fault_backing_error, (int)v);
	} else if (strcmp(name, "user.kvfs.fault.ra_error") == 0) {
		atomic_store(&fs->fault_ra_error, (int)v);
	} else if (strcmp(name, "user.kvfs.fault.idx_hold") == 0) {
		idx_hold(fs->idx, v != 0);
	} else if (strcmp(name, "user.kvfs.fault.read") == 0) {
		size_t i;

		pthread_mutex_lock(&fs->fault_lock);
		for (i = 0; i < fs->nfaults && fs->faults[i].ino != ino; i++)
			;
		if (v == 0 && i < fs->nfaults) {
			fs->faults[i] = fs->faults[--fs->nfaults];
		} else if (v != 0 && i < fs->nfaults) {
			fs->faults[i].err = (int)v;
		} else if (v != 0 && fs->nfaults < FS_MAX_FAULTS) {
			fs->faults[fs->nfaults].ino = ino;
			fs->faults[fs->nfaults++].err = (int)v;
		} else if (v != 0) {
			*rc = -ENOSPC;
		}
		pthread_mutex_unlock(&fs->fault_lock);
	} else {
		*rc = -EINVAL;
	}
	log_info("fault injection: %s = %ld on inode %llu", name, v,
		 (unsigned long long)ino);
	return 1;
}
#endif
