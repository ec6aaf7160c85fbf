/* SPDX-License-Identifier: MIT */
/*
 * LOOKUP through the lookup manager (core/verdict): a RESOLVED verdict is
 * answered at once; otherwise the request is parked and answered from the
 * probe worker when the batch it joined has been looked up in the index.
 * What a failed block read does to the name is damage.c's; the test-only
 * fault injection that makes probes slow is read here.
 *
 * Threads: fs_lookup runs on FUSE workers; fs_lookup_answer and fs_probe on
 * the verdict cache's probe worker, or on the FUSE worker whose lookup
 * probes its batch itself (inline probe); fs_lookup_interrupt on the FUSE
 * session thread. None of them ever calls a kernel notification directly
 * (they go through the notifier thread): the probe worker completes parked
 * LOOKUPs, and an invalidation from it would wait for them: the kernel's
 * entry invalidation blocks while a LOOKUP of that directory is parked
 * (kvfs(7), KERNEL FACTS).
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctlfiles.h"
#include "fs.h"
#include "lookup.h"
#include "node.h"
#include "notify.h"
#include "ra.h"
#include "share.h"

/*
 * What an inline probe (vc_config.inline_probe) read from the index, kept
 * for the answers vc_lookup() gives on the same thread before it returns:
 * their nodes are made from these attributes, without asking the index a
 * second time. Armed only around fs_lookup's vc_lookup() call; attributes
 * of names found on this machine only (the shared tier's have none). A
 * name removed between that probe and the reply (eviction) is answered as
 * one removed between node_get()'s own query and the reply always was:
 * found, the removal's invalidation already sent.
 */
static __thread struct {
	int armed;
	size_t n;
	struct idx_attr *attrs;
} fs_inline;

static const struct idx_attr *fs_inline_attr(uint64_t ino)
{
	for (size_t i = 0; fs_inline.attrs && i < fs_inline.n; i++)
		if (fs_inline.attrs[i].ino == ino)
			return &fs_inline.attrs[i];
	return NULL;
}

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

/*
 * Replies a lookup whose verdict is result (VC_HIT/VC_MISS or -errno); a
 * new node takes attr (may be NULL: read from the index).
 */
static void fs_reply_verdict(struct fs *fs, fuse_req_t req, uint64_t parent,
			     const char *name, int result, uint64_t ino,
			     const struct idx_attr *attr)
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
	rc = node_get(fs, ino, attr, parent, name, 1, &n);
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
	memset(&e, 0, sizeof(e));
	e.ino = a.ino;
	e.attr_timeout = fs->cfg.attr_timeout;
	e.entry_timeout = fs->cfg.entry_timeout;
	fs_fill_stat(fs, &e.attr, &a);
	if (fuse_reply_entry(req, &e) != 0)
		/* The requester is gone: the kernel took no reference. */
		node_forget_one(fs, a.ino);
	else
		/* An engine loads what it looked up: start reading it. */
		ra_offer(fs, n);
	node_put(fs, n, 0, 0, 1);
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
	if (rc == 0 && fs_inline.armed && !fs_inline.attrs) {
		fs_inline.attrs = attrs;
		fs_inline.n = n;
		attrs = NULL;
	}
	free(attrs);
	/* Then the shared tier, for what this machine lacks or got there. */
	if (rc == 0)
		share_probe(fs, n, parents, names, found, inos);
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
	fs_reply_verdict(w->fs, w->req, w->parent, w->name, result, ino,
			 result == VC_HIT ? fs_inline_attr(ino) : NULL);
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
	fs_inline.armed = 1;
	rc = vc_lookup(fs->vc, parent, name, w, &ino, &gen);
	fs_inline.armed = 0;
	free(fs_inline.attrs);
	fs_inline.attrs = NULL;
	if (rc == VC_PARKED)
		return; /* w belongs to the verdict cache now */
	fuse_req_interrupt_func(req, NULL, NULL);
	free(w);
	fs_reply_verdict(fs, req, parent, name, rc, ino, NULL);
}
