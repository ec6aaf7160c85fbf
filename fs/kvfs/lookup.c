/* SPDX-License-Identifier: MIT */
/*
 * LOOKUP through the lookup manager (core/verdict): a RESOLVED verdict is
 * answered at once; otherwise the request is parked and answered from the
 * probe worker when the batch it joined has been looked up in the index.
 * Also here: what a failed block read does to the name (quarantine), and
 * the test-only fault injection that makes reads fail or probes slow.
 *
 * Threads: fs_lookup runs on FUSE workers; fs_lookup_answer and fs_probe on
 * the verdict cache's probe worker; fs_lookup_interrupt on the FUSE session
 * thread. None of them ever calls a kernel notification directly (they go
 * through the notifier thread): the probe worker completes parked LOOKUPs,
 * and an invalidation from it would wait for them (fuse-facts.md fact 3).
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_int.h"
#include "notify.h"

/* A LOOKUP parked in the verdict cache. */
struct fs_waiter {
	fuse_req_t req;
	struct fs *fs;
	uint64_t parent;
	char name[];
};

static void fs_reply_negative(struct fs *fs, fuse_req_t req)
{
	struct fuse_entry_param e;

	/* ino 0 with a timeout: the kernel caches the absence. */
	memset(&e, 0, sizeof(e));
	e.entry_timeout = fs->cfg.negative_timeout;
	fuse_reply_entry(req, &e);
}

/* Replies a lookup whose verdict is result (VC_HIT/VC_MISS or -errno). */
static void fs_reply_verdict(struct fs *fs, fuse_req_t req, uint64_t parent,
			     const char *name, int result, uint64_t ino)
{
	struct fuse_entry_param e;
	struct idx_attr a;
	struct node *n;
	int rc;

	if (result < 0) {
		fuse_reply_err(req, -result);
		return;
	}
	if (result == VC_MISS) {
		fs_reply_negative(fs, req);
		return;
	}
	rc = node_get(fs, ino, NULL, parent, name, 1, &n);
	if (rc == -ENOENT) {
		fs_reply_negative(fs, req);
		return;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_rwlock_rdlock(&n->rw);
	a = n->attr;
	pthread_rwlock_unlock(&n->rw);
	node_put(fs, n, 0, 0, 1);
	memset(&e, 0, sizeof(e));
	e.ino = a.ino;
	e.attr_timeout = fs->cfg.attr_timeout;
	e.entry_timeout = fs->cfg.entry_timeout;
	fs_fill_stat(&e.attr, &a);
	if (fuse_reply_entry(req, &e) != 0)
		/* The requester is gone: the kernel took no reference. */
		node_forget_one(fs, a.ino);
}

int fs_probe(void *ctx, size_t n, const uint64_t *parents,
	     const char *const *names, int *found, uint64_t *inos)
{
	struct fs *fs = ctx;
	struct idx_attr *attrs;
	int rc;

#ifdef KVFS_FAULT_INJECTION
	unsigned delay = atomic_load(&fs->fault_probe_delay_ms);

	if (delay) {
		struct timespec ts = {.tv_sec = delay / 1000,
				      .tv_nsec =
					      (long)(delay % 1000) * 1000000};

		nanosleep(&ts, NULL);
	}
#endif
	attrs = calloc(n, sizeof(*attrs));
	if (!attrs)
		return -ENOMEM;
	rc = idx_lookup_batch(fs->idx, n, parents, names, found, attrs);
	for (size_t i = 0; rc == 0 && i < n; i++)
		inos[i] = found[i] ? attrs[i].ino : 0;
	free(attrs);
	return rc;
}

void fs_lookup_answer(void *ctx, void *waiter, int result, uint64_t ino,
		      uint64_t generation)
{
	struct fs_waiter *w = waiter;

	/*
	 * Unhook the interrupt callback first: this waits for a callback that
	 * is running, and no later one can see w.
	 */
	fuse_req_interrupt_func(w->req, NULL, NULL);
	fs_reply_verdict(w->fs, w->req, w->parent, w->name, result, ino);
	free(w);
}

static void fs_lookup_interrupt(fuse_req_t req, void *data)
{
	struct fs_waiter *w = data;

	/* Exactly one reply: ours when the waiter was still parked. */
	if (vc_cancel(w->fs->vc, w) == 0) {
		fuse_reply_err(req, EINTR);
		free(w);
	}
}

void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	size_t len = strlen(name);
	struct fs_waiter *w;
	uint64_t ino = 0, gen;
	int rc;

	if (len > IDX_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	if (fs_ctl_lookup(fs, req, parent, name))
		return;
	w = malloc(sizeof(*w) + len + 1);
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->req = req;
	w->fs = fs;
	w->parent = parent;
	memcpy(w->name, name, len + 1);
	fuse_req_interrupt_func(req, fs_lookup_interrupt, w);
	rc = vc_lookup(fs->vc, parent, name, w, &ino, &gen);
	if (rc == VC_PARKED)
		return; /* w belongs to the verdict cache now */
	fuse_req_interrupt_func(req, NULL, NULL);
	free(w);
	fs_reply_verdict(fs, req, parent, name, rc, ino);
}

void fs_quarantine(struct fs *fs, struct node *n, int rc)
{
	struct vc_info info;
	uint64_t parent, gen;
	char *name, *path;

	pthread_mutex_lock(&fs->nodes_lock);
	parent = n->parent;
	name = strdup(n->name);
	pthread_mutex_unlock(&fs->nodes_lock);
	path = node_path(fs, n);
	if (!name || !path || parent == 0 || n->attr.nlink == 0)
		goto out_free;
	if (vc_query(fs->vc, parent, name, &info) == 0) {
		/*
		 * Only the verdict that said "this inode" may flip; a newer
		 * probe in flight decides for itself (the seed fix).
		 */
		if (info.phase != VC_RESOLVED || info.result != VC_HIT ||
		    info.ino != n->ino)
			goto out_free;
		gen = info.generation;
	} else {
		gen = vc_bump(fs->vc, parent, name, 1, n->ino);
	}
	if (vc_mark_miss(fs->vc, parent, name, gen) != 1)
		goto out_free;
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
	notify_inode(fs->notify, n->ino);
out_free:
	free(path);
	free(name);
}

void fs_drop(struct fs *fs, struct node *n)
{
	int64_t now = fs_now_ns();
	struct idx_attr a;
	uint64_t parent, ino;
	uint32_t nlink;
	char *name, *path;
	int rc;

	pthread_mutex_lock(&fs->nodes_lock);
	parent = n->parent;
	name = strdup(n->name);
	pthread_mutex_unlock(&fs->nodes_lock);
	path = node_path(fs, n);
	if (!name || !path || parent == 0)
		goto out_free;
	/* Only the name that still means this inode goes. */
	rc = idx_lookup(fs->idx, parent, name, &a);
	if (rc < 0 || a.ino != n->ino)
		goto out_free;
	rc = idx_unlink(fs->idx, parent, name, 0, now, &ino, &nlink);
	if (rc < 0) {
		log_err("cannot drop %s: %s", path, strerror(-rc));
		goto out_free;
	}
	vc_bump(fs->vc, parent, name, 0, 0);
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
	notify_inode(fs->notify, n->ino);
	atomic_fetch_add(&fs->dropped, 1);
out_free:
	free(path);
	free(name);
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
