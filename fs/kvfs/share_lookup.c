/* SPDX-License-Identifier: MIT */
/*
 * The shared tier on the read side (share.h): lookups that fall through to
 * RADOS, the stubs and directories they leave in the local index, the
 * listing of a directory, and pulls of a stub's block with the failure
 * policy of a local read.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "crc32c.h"
#include "damage.h"
#include "filebuf.h"
#include "fs.h"
#include "node.h"
#include "notify.h"
#include "rtier.h"
#include "share.h"
#include "share_int.h"
#include "wb.h"

/* Most names one listing adds to the local index. */
#define SHARE_LIST_MAX 100000u

int share_is_stub(const struct node *n)
{
	return S_ISREG(n->attr.mode) && n->attr.size > 0 &&
	       n->attr.ext.file_id == 0 && n->attr.ext.hdr_len == KV_EXT_STUB &&
	       !n->dirty && !n->cached && !n->wb && !n->evicted &&
	       n->attr.nlink > 0;
}

/* Whether inode ino is a stub in the index (its bytes only in RADOS). */
static int share_ino_is_stub(struct fs *fs, uint64_t ino)
{
	struct idx_attr a;

	return idx_getattr(fs->idx, ino, &a) == 0 && S_ISREG(a.mode) &&
	       a.size > 0 && a.ext.file_id == 0 && a.ext.hdr_len == KV_EXT_STUB;
}

/* The local entry for a name RADOS lists with size (RTIER_DIR: a dir). */
static struct idx_attr share_new_attr(const struct share *sh, uint64_t size)
{
	int64_t now = fs_now_ns();

	return (struct idx_attr){.mode = size == RTIER_DIR ? S_IFDIR | 0755
							   : S_IFREG | 0644,
				 .uid = sh->uid,
				 .gid = sh->gid,
				 .size = size == RTIER_DIR ? 0 : size,
				 .atime_ns = now,
				 .mtime_ns = now,
				 .ctime_ns = now};
}

/*
 * Gives (parent, name), which RADOS has, a local entry: a directory, or a
 * stub of size bytes. *ino is the entry's (or the one a racing create
 * made). Owner: the mount's root directory's. The kernel's copy of the
 * parent's times and link count is left to its attribute timeout:
 * invalidating it would cost the next lookup there a GETATTR.
 */
static int share_materialize(struct fs *fs, uint64_t parent, const char *name,
			     uint64_t size, uint64_t *ino)
{
	struct idx_attr a = share_new_attr(fs->share, size);
	int rc = idx_create_many(fs->idx, parent, 1, &name, &a);

	if (rc == 0)
		rc = idx_lookup(fs->idx, parent, name, &a);
	if (rc < 0)
		return rc;
	*ino = a.ino;
	if (S_ISREG(a.mode))
		share_mark(fs->share, a.ino);
	return 0;
}

/* Removes (parent, name) = ino locally: another machine removed it. */
static int share_forget(struct fs *fs, uint64_t parent, const char *name,
			uint64_t ino)
{
	struct idx_name e = {.ino = ino, .parent = parent};

	snprintf(e.name, sizeof(e.name), "%s", name);
	if (node_is_busy(fs, ino) || !node_unname(fs, &e, 0))
		return 0;
	atomic_fetch_add(&fs->share->st.remote_unlinks, 1);
	log_info("shared tier: %s (inode %llu) was removed on another "
		 "machine; removed here too",
		 name, (unsigned long long)ino);
	return 1;
}

static uint64_t share_name_hash(uint64_t parent, const char *name)
{
	return crc32c((uint32_t)parent, name, strlen(name)) | (parent << 32) |
	       1;
}

static size_t share_ino_slot(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 40) % SHARE_RECENT;
}

/*
 * When this machine last knew directory ino's names in RADOS whole (a
 * whole listing, or made here while RADOS lacked it), if a miss is still
 * believed since (rados_negative_timeout); else 0.
 */
static uint64_t share_whole_since(struct share *sh, uint64_t ino, uint64_t now)
{
	uint64_t ttl = (uint64_t)(sh->fs->cfg.negative_timeout * 1e9), t = 0;
	size_t i = share_ino_slot(ino);

	pthread_mutex_lock(&sh->mark_lock);
	if (sh->whole[i].ino == ino && now - sh->whole[i].t < ttl)
		t = sh->whole[i].t;
	pthread_mutex_unlock(&sh->mark_lock);
	return t;
}

void share_set_whole(struct share *sh, uint64_t ino, uint64_t t)
{
	size_t i = share_ino_slot(ino);

	pthread_mutex_lock(&sh->mark_lock);
	sh->whole[i].ino = ino;
	sh->whole[i].t = t;
	pthread_mutex_unlock(&sh->mark_lock);
}

/* Directory ino lists more than SHARE_FETCH_BATCH names: probe by name. */
static int share_big(struct share *sh, uint64_t ino)
{
	size_t i = share_ino_slot(ino);
	int r;

	pthread_mutex_lock(&sh->mark_lock);
	r = sh->big[i] == ino;
	pthread_mutex_unlock(&sh->mark_lock);
	return r;
}

static void share_set_big(struct share *sh, uint64_t ino)
{
	pthread_mutex_lock(&sh->mark_lock);
	sh->big[share_ino_slot(ino)] = ino;
	pthread_mutex_unlock(&sh->mark_lock);
}

void share_mkdir(struct fs *fs, uint64_t parent, const char *name, uint64_t ino)
{
	struct share *sh = fs->share;
	uint64_t h, t;
	size_t i;

	if (!sh)
		return;
	t = share_whole_since(sh, parent, clock_monotonic_ns());
	h = share_name_hash(parent, name);
	i = (size_t)(h % SHARE_RECENT);
	pthread_mutex_lock(&sh->mark_lock);
	/* Its name was a miss in RADOS: nothing below it there either. */
	if (!t && sh->missed[i].parent == parent && sh->missed[i].hash == h)
		t = sh->missed[i].t;
	pthread_mutex_unlock(&sh->mark_lock);
	if (t)
		share_set_whole(sh, ino, t);
}

/* RADOS lacks (parent, name) as of now. */
static void share_note_miss(struct share *sh, uint64_t parent, const char *name)
{
	uint64_t h = share_name_hash(parent, name);
	size_t i = (size_t)(h % SHARE_RECENT);

	pthread_mutex_lock(&sh->mark_lock);
	sh->missed[i].parent = parent;
	sh->missed[i].hash = h;
	sh->missed[i].t = clock_monotonic_ns();
	pthread_mutex_unlock(&sh->mark_lock);
}

/* Applies RADOS's answer for one key of a probe. */
static void share_answer(struct fs *fs, uint64_t parent, const char *name,
			 int rfound, uint64_t size, int *found, uint64_t *ino)
{
	struct share *sh = fs->share;

	if (!*found) {
		if (!rfound) {
			atomic_fetch_add(&sh->st.remote_misses, 1);
			share_note_miss(sh, parent, name);
			return;
		}
		atomic_fetch_add(&sh->st.remote_hits, 1);
		if (share_materialize(fs, parent, name, size, ino) == 0)
			*found = 1;
		return;
	}
	/*
	 * Swept for room is not removed: the local copy stays; a stub has
	 * none, so it goes (a load would find the block nowhere).
	 */
	if (!rfound && (size != RTIER_SWEPT || share_ino_is_stub(fs, *ino)) &&
	    share_forget(fs, parent, name, *ino))
		*found = 0;
}

/* Whether key i needs RADOS: a local miss, or a name from the tier. */
static int share_wants(struct share *sh, const char *name, int found,
		       uint64_t ino)
{
	return !share_is_tmp(name) && (!found || share_marked(sh, ino));
}

/* A directory's listing in RADOS, given local entries in batches. */
struct share_fetch {
	struct fs *fs;
	uint64_t dir;
	size_t max;		 /* names to take at most */
	const char *const *skip; /* the probing batch's names: no bump */
	size_t nskip;
	const char *names[SHARE_FETCH_BATCH];
	struct idx_attr attrs[SHARE_FETCH_BATCH];
	size_t n;
	size_t total;
	int full; /* more than max names */
	int rc;
};

static int share_skipped(const struct share_fetch *f, const char *name)
{
	for (size_t i = 0; i < f->nskip; i++)
		if (strcmp(f->skip[i], name) == 0)
			return 1;
	return 0;
}

/* Makes the gathered names local entries (one transaction). */
static void share_fetch_flush(struct share_fetch *f)
{
	struct share *sh = f->fs->share;
	int rc = f->n ? idx_create_many(f->fs->idx, f->dir, f->n, f->names,
					f->attrs)
		      : 0;

	for (size_t i = 0; i < f->n; i++) {
		if (rc > 0 && f->attrs[i].ino) {
			if (S_ISREG(f->attrs[i].mode))
				share_mark(sh, f->attrs[i].ino);
			/* A cached miss of it is wrong now. */
			if (!share_skipped(f, f->names[i]))
				vc_bump(f->fs->vc, f->dir, f->names[i], 1,
					f->attrs[i].ino);
		}
		free((char *)f->names[i]);
	}
	f->n = 0;
	if (rc < 0 && f->rc == 0)
		f->rc = rc;
}

static int share_fetch_one(void *arg, const char *name, uint64_t size)
{
	struct share_fetch *f = arg;

	if (f->total >= f->max) {
		f->full = 1;
		return 1;
	}
	f->total++;
	if (strlen(name) > IDX_NAME_MAX || strchr(name, '/') ||
	    share_is_tmp(name))
		return 0;
	f->names[f->n] = strdup(name);
	if (!f->names[f->n]) {
		f->rc = -ENOMEM;
		return 1;
	}
	f->attrs[f->n] = share_new_attr(f->fs->share, size);
	if (++f->n == SHARE_FETCH_BATCH)
		share_fetch_flush(f);
	return f->rc < 0;
}

/*
 * Lists directory dir (path) in RADOS, at most max names, and gives each
 * name a local entry (a stub or a directory). *whole: the listing had
 * every name. 0 or -errno.
 */
static int share_fetch(struct fs *fs, struct rtier *rt, uint64_t dir,
		       const char *path, size_t max, const char *const *skip,
		       size_t nskip, int *whole)
{
	struct share_fetch *f = calloc(1, sizeof(*f));
	int rc;

	*whole = 0;
	if (!f)
		return -ENOMEM;
	*f = (struct share_fetch){
		.fs = fs, .dir = dir, .max = max, .skip = skip, .nskip = nskip};
	rc = rtier_list(rt, path, share_fetch_one, f);
	share_fetch_flush(f);
	if (rc == 0)
		rc = f->rc;
	*whole = rc == 0 && !f->full;
	free(f);
	return rc;
}

/* RADOS's answers for keys idx[0..g) of a probe, by name: one omap read. */
static int share_probe_names(struct fs *fs, struct rtier *rt, uint64_t parent,
			     const char *dir, size_t g, const size_t *idx,
			     const char *const *names, int *found,
			     uint64_t *inos)
{
	struct share *sh = fs->share;
	const char **gn = calloc(g, sizeof(*gn));
	uint64_t *sizes = calloc(g, sizeof(*sizes));
	int *rf = calloc(g, sizeof(*rf));
	int rc = gn && sizes && rf ? 0 : -ENOMEM;

	for (size_t k = 0; rc == 0 && k < g; k++)
		gn[k] = names[idx[k]];
	if (rc == 0) {
		rc = rtier_probe(rt, dir, g, gn, rf, sizes);
		atomic_fetch_add(&sh->st.probes, 1);
		if (rc < 0)
			share_fail(sh, rc, dir);
	}
	for (size_t k = 0; rc == 0 && k < g; k++)
		share_answer(fs, parent, gn[k], rf[k], sizes[k], &found[idx[k]],
			     &inos[idx[k]]);
	free(gn);
	free(sizes);
	free(rf);
	return rc;
}

/*
 * The local misses among keys idx[0..*g) answered from a listing of the
 * directory, when it is small enough (SHARE_FETCH_BATCH names): every
 * name it has becomes local at once, so that the directory's next lookups
 * need no round trip. Those keys leave idx (*g shrinks).
 */
static int share_probe_listing(struct fs *fs, struct rtier *rt, uint64_t parent,
			       const char *dir, size_t *g, size_t *idx,
			       const char *const *names, int *found,
			       uint64_t *inos)
{
	struct share *sh = fs->share;
	uint64_t t0 = clock_monotonic_ns();
	const char **gn = calloc(*g, sizeof(*gn));
	struct idx_attr a;
	size_t m = 0;
	int rc, whole;

	if (!gn)
		return -ENOMEM;
	for (size_t k = 0; k < *g; k++)
		gn[k] = names[idx[k]];
	rc = share_fetch(fs, rt, parent, dir, SHARE_FETCH_BATCH, gn, *g,
			 &whole);
	free(gn);
	atomic_fetch_add(&sh->st.probes, 1);
	if (rc < 0) {
		share_fail(sh, rc, dir);
		return rc;
	}
	if (!whole) {
		share_set_big(sh, parent);
		return 0;
	}
	share_set_whole(sh, parent, t0);
	for (size_t k = 0; k < *g; k++) {
		size_t i = idx[k];

		if (found[i]) {
			idx[m++] = i; /* checked by name */
		} else if (idx_lookup(fs->idx, parent, names[i], &a) == 0) {
			found[i] = 1;
			inos[i] = a.ino;
			atomic_fetch_add(&sh->st.remote_hits, 1);
		} else {
			atomic_fetch_add(&sh->st.remote_misses, 1);
			share_note_miss(sh, parent, names[i]);
		}
	}
	*g = m;
	return 0;
}

/* Probes the keys of one directory (idx: their positions). */
static int share_probe_dir(struct fs *fs, struct rtier *rt, uint64_t parent,
			   size_t g, size_t *idx, const char *const *names,
			   int *found, uint64_t *inos)
{
	struct share *sh = fs->share;
	char dir[RTIER_PATH_MAX + 1];
	uint64_t t0 = clock_monotonic_ns();
	size_t nmiss = 0;
	int rc;

	rc = idx_path(fs->idx, parent, dir, sizeof(dir));
	for (size_t k = 0; k < g; k++)
		nmiss += !found[idx[k]];
	if (rc == 0 && nmiss && !share_big(sh, parent))
		rc = share_probe_listing(fs, rt, parent, dir, &g, idx, names,
					 found, inos);
	if (rc == 0 && g)
		rc = share_probe_names(fs, rt, parent, dir, g, idx, names,
				       found, inos);
	atomic_fetch_add(&sh->st.probe_us, (clock_monotonic_ns() - t0) / 1000);
	return rc;
}

void share_probe(struct fs *fs, size_t n, const uint64_t *parents,
		 const char *const *names, int *found, uint64_t *inos)
{
	struct share *sh = fs->share;
	uint64_t whole;
	char *done;
	size_t *idx;
	struct rtier *rt;

	if (!sh)
		return;
	done = calloc(n, 1);
	idx = calloc(n, sizeof(*idx));
	rt = done && idx ? share_rt_get(sh) : NULL;
	for (size_t i = 0; rt && i < n; i++) {
		size_t g = 0;

		if (done[i])
			continue;
		whole = share_whole_since(sh, parents[i], clock_monotonic_ns());
		/* The batch's keys in this directory: one round trip. */
		for (size_t j = i; j < n; j++) {
			if (done[j] || parents[j] != parents[i])
				continue;
			done[j] = 1;
			if (!share_wants(sh, names[j], found[j], inos[j]))
				continue;
			/* A directory RADOS lacked: a miss, no round trip. */
			if (whole && !found[j])
				atomic_fetch_add(&sh->st.remote_misses, 1);
			else
				idx[g++] = j;
		}
		if (g && share_probe_dir(fs, rt, parents[i], g, idx, names,
					 found, inos) < 0)
			break;
	}
	if (rt)
		share_rt_put(sh);
	free(done);
	free(idx);
}

void share_list(struct fs *fs, uint64_t dir)
{
	char path[RTIER_PATH_MAX + 1];
	struct rtier *rt;
	int rc, whole;

	if (!fs->share || idx_path(fs->idx, dir, path, sizeof(path)) < 0)
		return;
	rt = share_rt_get(fs->share);
	if (!rt)
		return;
	rc = share_fetch(fs, rt, dir, path, SHARE_LIST_MAX, NULL, 0, &whole);
	share_rt_put(fs->share);
	if (rc < 0)
		share_fail(fs->share, rc, path);
	else if (whole)
		share_set_whole(fs->share, dir, clock_monotonic_ns());
}

static int share_req_stop(void *arg)
{
	return arg ? fuse_req_interrupted(arg) : 0;
}

/*
 * A pull that failed (rc from rtier_get), with the local failure policy:
 * provably short: the object and the name go; removed there: the stub
 * goes; damaged or failed: the name is quarantined, the object kept; out
 * of reach: an error, nothing changes.
 */
static int share_pull_failed(struct fs *fs, struct rtier *rt, struct node *n,
			     const char *path, int rc)
{
	struct share *sh = fs->share;
	uint64_t parent;
	char *name;
	int r;

	if (rc == -ENOENT) {
		pthread_mutex_lock(&fs->nodes_lock);
		parent = n->parent;
		name = strdup(n->name);
		pthread_mutex_unlock(&fs->nodes_lock);
		if (name && parent)
			share_forget(fs, parent, name, n->ino);
		free(name);
		return -ENOENT;
	}
	if (rc == -ENODATA) {
		r = rtier_remove(rt, path);
		log_warn("shared tier: %s is short (its object holds fewer "
			 "bytes than its length); object %s, name dropped",
			 path, r == 0 ? "removed" : "not removed");
		atomic_fetch_add(&sh->st.short_dropped, 1);
		fs_drop(fs, n);
		return -EIO;
	}
	share_fail(sh, rc, path);
	if (rc == -EBADMSG || rc == -EIO) {
		atomic_fetch_add(&sh->st.quarantined, 1);
		fs_quarantine(fs, n, rc);
	}
	return -EIO;
}

/*
 * Makes n's bytes len bytes in segs (nsegs, taken over) and saves them
 * locally. n->rw exclusive.
 */
static int share_install(struct fs *fs, struct node *n, char **segs,
			 size_t nsegs, uint64_t len)
{
	int rc;

	node_discard(fs, n); /* a stub holds none; be sure */
	n->segs = segs;
	n->nsegs = nsegs;
	n->attr.size = len;
	n->dirty = 1;
	atomic_store(&n->share_pulled, 1);
	rc = wb_save_locked(fs, n);
	if (rc < 0) {
		/* No room here: served from memory while it is open. */
		log_warn("shared tier: pulled inode %llu not kept locally: %s",
			 (unsigned long long)n->ino, strerror(-rc));
		atomic_store(&n->share_pulled, 0);
		n->dirty = 0;
		n->cached = 1;
	}
	return 0;
}

/*
 * Reads path's block into new segments (*segs, *nsegs, *len): straight
 * into them when it holds the stub's size bytes, else copied from
 * rtier_get()'s buffer (it was rewritten elsewhere). No node lock held.
 */
static int share_fetch_block(struct fs *fs, struct rtier *rt, const char *path,
			     uint64_t size, fuse_req_t req, char ***segs,
			     size_t *nsegs, uint64_t *len)
{
	void *buf = NULL;
	int rc;

	*segs = NULL;
	rc = node_budget_wait(fs, (size + NODE_SEG - 1) / NODE_SEG * NODE_SEG,
			      share_req_stop, req);
	if (rc == 0)
		rc = node_segs_alloc(fs, size, segs, nsegs);
	if (rc == 0)
		rc = rtier_get_segs(rt, path, *segs, NODE_SEG, *nsegs, size);
	*len = size;
	if (rc != -ESTALE && rc != -EINVAL)
		goto out;
	rc = rtier_get(rt, path, &buf, len);
	if (rc == 0) {
		node_segs_release(fs, *segs, *nsegs);
		free(*segs);
		rc = node_segs_alloc(fs, *len, segs, nsegs);
	}
	for (size_t i = 0; rc == 0 && i < *nsegs; i++) {
		uint64_t off = (uint64_t)i * NODE_SEG;

		memcpy((*segs)[i], (char *)buf + off,
		       *len - off < NODE_SEG ? *len - off : NODE_SEG);
	}
	free(buf);
out:
	if (rc < 0 && *segs) {
		node_segs_release(fs, *segs, *nsegs);
		free(*segs);
		*segs = NULL;
	}
	return rc;
}

int share_pull(struct fs *fs, struct node *n, fuse_req_t req)
{
	struct share *sh = fs->share;
	char path[RTIER_PATH_MAX + 1], **segs = NULL;
	uint64_t len = 0, size, t0;
	struct rtier *rt;
	size_t nsegs = 0;
	int rc, stub;

	if (!sh)
		return 0;
	pthread_rwlock_rdlock(&n->rw);
	stub = share_is_stub(n);
	size = n->attr.size;
	pthread_rwlock_unlock(&n->rw);
	if (!stub)
		return 0;
	rc = idx_path(fs->idx, n->ino, path, sizeof(path));
	if (rc < 0)
		return rc;
	rt = share_rt_get(sh);
	if (!rt) {
		log_warn("shared tier: cannot load %s: the cluster is out of "
			 "reach",
			 path);
		return -EIO;
	}
	t0 = clock_monotonic_ns();
	rc = share_fetch_block(fs, rt, path, size, req, &segs, &nsegs, &len);
	if (rc < 0 && rc != -EINTR && rc != -EDQUOT && rc != -ENOMEM)
		rc = share_pull_failed(fs, rt, n, path, rc);
	share_rt_put(sh);
	if (rc < 0)
		return rc;
	pthread_rwlock_wrlock(&n->rw);
	if (share_is_stub(n)) {
		rc = share_install(fs, n, segs, nsegs, len);
		segs = NULL;
	}
	pthread_rwlock_unlock(&n->rw);
	if (segs) {
		node_segs_release(fs, segs, nsegs);
		free(segs);
	}
	/*
	 * Rewritten elsewhere with another length: the kernel's size is
	 * stale. Its attributes go before the reply (the caller's first read
	 * stops at the size it holds), its pages in the background.
	 */
	if (len != size) {
		notify_attrs_now(fs->notify, n->ino);
		notify_inode(fs->notify, n->ino);
	}
	if (rc == 0) {
		atomic_fetch_add(&sh->st.pulls, 1);
		atomic_fetch_add(&sh->st.pull_bytes, len);
		atomic_fetch_add(&sh->st.pull_us,
				 (clock_monotonic_ns() - t0) / 1000);
	}
	return rc;
}
