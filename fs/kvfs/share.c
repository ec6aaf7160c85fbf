/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's daemon side (share.h): the connection and its
 * failures, the put queue and its thread, the lookup fall-through, pulls,
 * and the keeper (reconnects, last uses, the sweeper). The RADOS layout is
 * rtier.h's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* The put thread's nice value: below the handlers and write-behind. */
#define SHARE_NICE 10

enum share_kind { SHARE_PUT, SHARE_REMOVE };

struct share_op {
	struct share_op *next;
	enum share_kind kind;
	uint64_t ino;
	char path[]; /* SHARE_REMOVE */
};

static int share_unreachable_rc(int rc)
{
	return rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -ESHUTDOWN ||
	       rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ENETDOWN ||
	       rc == -ECONNRESET || rc == -ENOTSUP;
}

int share_is_tmp(const char *name)
{
	size_t len = strlen(name);

	return (len >= 4 && strcmp(name + len - 4, ".tmp") == 0) ||
	       strstr(name, ".tmp.") != NULL;
}

int share_path(struct fs *fs, uint64_t parent, const char *name, char *buf,
	       size_t len)
{
	int rc = idx_path(fs->idx, parent, buf, len);
	size_t l;

	if (rc < 0)
		return rc;
	l = strlen(buf);
	if (snprintf(buf + l, len - l, "%s%s", l > 1 ? "/" : "", name) >=
	    (int)(len - l))
		return -ENAMETOOLONG;
	return 0;
}

/* ---- the connection ---- */

struct rtier *share_rt_get(struct share *sh)
{
	pthread_rwlock_rdlock(&sh->rt_lock);
	if (sh->rt && atomic_load(&sh->reachable))
		return sh->rt;
	pthread_rwlock_unlock(&sh->rt_lock);
	return NULL;
}

void share_rt_put(struct share *sh)
{
	pthread_rwlock_unlock(&sh->rt_lock);
}

/*
 * After a failed RADOS call: counted, and when the cluster is out of
 * reach, the shared tier goes off (one log line) until the keeper gets a
 * new connection.
 */
void share_fail(struct share *sh, int rc, const char *what)
{
	atomic_fetch_add(&sh->st.errors, 1);
	if (!share_unreachable_rc(rc)) {
		log_warn("shared tier: %s: %s", what, strerror(-rc));
		return;
	}
	if (atomic_exchange(&sh->reachable, 0))
		log_warn("shared tier unreachable (%s: %s): serving the local "
			 "tier alone, trying again every %u s",
			 what, strerror(-rc), sh->fs->cfg.rados_retry);
	pthread_cond_broadcast(&sh->cond);
}

void share_connect(struct share *sh)
{
	const struct fs_config *c = &sh->fs->cfg;
	struct rtier_config rc = {.conf = c->ceph_conf,
				  .pool = c->rados_pool,
				  .ns = c->rados_ns,
				  .id = c->rados_id,
				  .timeout_s = c->rados_timeout};
	struct rtier *rt;
	char err[256] = "", fsid[64] = "";
	uint64_t quota = 0;
	int r;

	r = rtier_open(&rt, &rc, err, sizeof(err));
	if (r < 0) {
		if (!sh->said_down) {
			log_warn("shared tier: pool %s: %s; serving the local "
				 "tier alone, trying again every %u s",
				 c->rados_pool, err, c->rados_retry);
			sh->said_down = 1;
		}
		return;
	}
	if (!c->rados_capacity && rtier_quota(rt, &quota) == 0)
		atomic_store(&sh->capacity, quota);
	/*
	 * Another cluster (a new one after a loss): what this machine knew
	 * of the old one's names says nothing now, and its local copies
	 * must not look removed there.
	 */
	if (rtier_fsid(rt, fsid, sizeof(fsid)) == 0 && sh->fsid[0] &&
	    strcmp(fsid, sh->fsid) != 0) {
		log_warn(
			"shared tier: the cluster is another one now (fsid %s, "
			"was %s): local copies stay, the pool starts empty",
			fsid, sh->fsid);
		share_forget_all(sh);
	}
	snprintf(sh->fsid, sizeof(sh->fsid), "%s", fsid);
	/* Called while unreachable, after share_disconnect: no sh->rt. */
	pthread_rwlock_wrlock(&sh->rt_lock);
	sh->rt = rt;
	atomic_store(&sh->reachable, 1);
	pthread_rwlock_unlock(&sh->rt_lock);
	log_info("shared tier %s: pool %s%s%s, capacity %llu bytes",
		 sh->connected_once ? "reachable again" : "connected",
		 c->rados_pool, c->rados_ns ? ", namespace " : "",
		 c->rados_ns ? c->rados_ns : "",
		 (unsigned long long)atomic_load(&sh->capacity));
	sh->connected_once = 1;
	sh->said_down = 0;
	pthread_cond_broadcast(&sh->cond);
}

/*
 * Once the cluster is out of reach, its handle goes (the keeper; it waits
 * for the calls that hold it, each bounded by rados_timeout). A librados
 * handle left open keeps looking for its monitors; if a new cluster
 * (another fsid) answers at the same address with auth none, the handle
 * takes the new cluster's OSD maps as the next ones of the old and Ceph's
 * Objecter aborts the process (Objecter.cc "FAILED ceph_assert(e ==
 * osdmap->get_epoch())"). share_connect opens a new handle, which reads
 * its maps from scratch.
 */
void share_disconnect(struct share *sh)
{
	struct rtier *old;

	if (!sh->rt) /* the keeper is the only writer */
		return;
	pthread_rwlock_wrlock(&sh->rt_lock);
	old = atomic_load(&sh->reachable) ? NULL : sh->rt;
	if (old)
		sh->rt = NULL;
	pthread_rwlock_unlock(&sh->rt_lock);
	if (!old)
		return;
	rtier_close(old);
	if (atomic_exchange(&sh->sweeper, 0))
		log_info("shared tier: the sweeper lease lapses with the "
			 "connection");
	log_info("shared tier: closed the connection to the lost cluster "
		 "(fsid %s)",
		 sh->fsid);
}

/* ---- the put queue ---- */

/* Queues an op; a full queue drops it (counted, logged now and then). */
static void share_enqueue(struct share *sh, enum share_kind kind, uint64_t ino,
			  const char *path)
{
	size_t len = path ? strlen(path) + 1 : 0;
	struct share_op *op;

	pthread_mutex_lock(&sh->lock);
	if (kind == SHARE_PUT && set_has(&sh->queued, ino)) {
		pthread_mutex_unlock(&sh->lock);
		return; /* its path is read when it goes */
	}
	op = sh->nqueued < SHARE_QUEUE_MAX ? malloc(sizeof(*op) + len) : NULL;
	if (!op || (kind == SHARE_PUT && set_add(&sh->queued, ino) < 0)) {
		pthread_mutex_unlock(&sh->lock);
		free(op);
		if (atomic_fetch_add(&sh->st.puts_dropped, 1) % 1000 == 0)
			log_warn("shared tier: put queue full (%u entries): "
				 "blocks stay local only",
				 SHARE_QUEUE_MAX);
		return;
	}
	op->next = NULL;
	op->kind = kind;
	op->ino = ino;
	if (len)
		memcpy(op->path, path, len);
	if (sh->qtail)
		sh->qtail->next = op;
	else
		sh->qhead = op;
	sh->qtail = op;
	sh->nqueued++;
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
}

void share_saved(struct fs *fs, struct node *n, uint64_t seq)
{
	struct share *sh = fs->share;

	if (!sh)
		return;
	/* Pulled from the shared tier: it is there already. */
	if (atomic_exchange(&n->share_pulled, 0)) {
		share_mark(sh, n->ino);
		return;
	}
	/* Put already from the queued bytes (a rename came first). */
	if (seq && atomic_load(&n->share_put_seq) == seq)
		return;
	share_enqueue(sh, SHARE_PUT, n->ino, NULL);
}

void share_renamed(struct fs *fs, uint64_t ino, const char *old)
{
	struct share *sh = fs->share;

	if (!sh)
		return;
	if (old && *old && !share_is_tmp(old))
		share_enqueue(sh, SHARE_REMOVE, 0, old);
	share_enqueue(sh, SHARE_PUT, ino, NULL);
}

void share_removed(struct fs *fs, const char *path)
{
	struct share *sh = fs->share;
	const char *base = path ? strrchr(path, '/') : NULL;

	if (sh && base && !share_is_tmp(base + 1))
		share_enqueue(sh, SHARE_REMOVE, 0, path);
}

/* Copies size bytes of a node's buffer (segs) into buf. */
static void share_copy_segs(char *const *segs, uint64_t size, char *buf)
{
	struct iovec iov[1];

	for (uint64_t off = 0; off < size; off += iov[0].iov_len) {
		node_segs_iov(segs, off,
			      size - off < NODE_SEG ? size - off : NODE_SEG,
			      iov);
		memcpy(buf + off, iov[0].iov_base, iov[0].iov_len);
	}
}

/* Reads a record's size bytes into buf, every chunk checked. */
static int share_copy_record(struct fs *fs, const struct kv_extent *ext,
			     const uint32_t *crcs, uint64_t size, char *buf)
{
	uint64_t off = 0;
	int rc = 0;

	while (rc == 0 && off < size) {
		uint64_t piece = size - off < NODE_SEG ? size - off : NODE_SEG;
		const void *data;
		size_t got = 0;

		rc = store_read(fs->store, ext, crcs, off, piece, &data, &got);
		if (rc == 0 && got == 0)
			rc = -EIO;
		if (rc == 0)
			memcpy(buf + off, data, got);
		off += got;
	}
	return rc;
}

/*
 * ino's bytes from its node (queued or cached copy, or its record under
 * n->rw), or, when the kernel holds no node for it, from the index and its
 * record. -EAGAIN: nothing to put now (a stub, unsaved bytes a later
 * commit brings, or an extent file: those are never shared).
 */
static int share_bytes(struct fs *fs, uint64_t ino, char **buf, uint64_t *len)
{
	struct node *n = node_find(fs, ino);
	uint32_t *crcs = NULL, ncrcs = 0;
	struct idx_attr a;
	int rc = 0;

	if (n) {
		pthread_rwlock_rdlock(&n->rw);
		a = n->attr;
		if (n->evicted)
			rc = -ENOENT;
		else if (n->dirty || share_is_stub(n) ||
			 kv_ext_large(&n->attr.ext))
			rc = -EAGAIN; /* an extent file stays local */
	} else {
		rc = idx_getattr(fs->idx, ino, &a);
		if (rc == 0 && a.size > 0 && a.ext.file_id == 0)
			rc = -EAGAIN; /* a stub */
	}
	if (rc == 0 && (!S_ISREG(a.mode) || a.nlink == 0))
		rc = -ENOENT;
	if (rc == 0 && a.size && !(n && (n->cached || n->wb || n->crcs_loaded)))
		rc = idx_get_crcs(fs->idx, ino, &crcs, &ncrcs);
	*buf = rc == 0 ? malloc(a.size ? a.size : 1) : NULL;
	if (rc == 0 && !*buf)
		rc = -ENOMEM;
	if (rc == 0 && n && (n->cached || n->wb)) {
		share_copy_segs(n->cached ? n->segs : n->wb->segs, a.size,
				*buf);
		if (n->wb)
			atomic_store(&n->share_put_seq,
				     atomic_load(&n->save_seq));
	} else if (rc == 0) {
		rc = share_copy_record(fs, &a.ext,
				       n && n->crcs_loaded ? n->crcs : crcs,
				       a.size, *buf);
	}
	if (n) {
		pthread_rwlock_unlock(&n->rw);
		node_put(fs, n, 0, 0, 1);
	}
	free(crcs);
	*len = a.size;
	return rc;
}

/* Puts ino's bytes under path (resolved at dequeue). Put thread. */
static void share_put_one(struct share *sh, uint64_t ino, const char *path)
{
	struct fs *fs = sh->fs;
	uint32_t *crcs = NULL;
	struct rtier *rt;
	uint64_t len = 0, t0;
	char *buf = NULL;
	int rc;

	rc = share_bytes(fs, ino, &buf, &len);
	if (rc < 0) {
		if (rc != -EAGAIN && rc != -ENOENT)
			log_warn("shared tier: cannot read %s for its put: %s",
				 path, fs_read_error(rc));
		free(buf);
		return;
	}
	crcs = malloc((kv_nchunks(len) + 1) * sizeof(*crcs));
	for (uint32_t i = 0; crcs && i < kv_nchunks(len); i++) {
		uint64_t o = (uint64_t)i * KV_CHUNK_SIZE;

		crcs[i] = crc32c(0, buf + o,
				 len - o < KV_CHUNK_SIZE ? len - o
							 : KV_CHUNK_SIZE);
	}
	rt = crcs ? share_rt_get(sh) : NULL;
	t0 = clock_monotonic_ns();
	rc = rt ? rtier_put(rt, path, buf, len, crcs) : -ENOTCONN;
	if (rt)
		share_rt_put(sh);
	if (rc == 0) {
		atomic_fetch_add(&sh->st.puts, 1);
		atomic_fetch_add(&sh->st.put_bytes, len);
		atomic_fetch_add(&sh->st.put_us,
				 (clock_monotonic_ns() - t0) / 1000);
		share_mark(sh, ino);
	} else {
		atomic_fetch_add(&sh->st.put_errors, 1);
		if (rt)
			share_fail(sh, rc, path);
		/* Out of reach: it goes again when the cluster is back. */
		if (share_unreachable_rc(rc))
			share_enqueue(sh, SHARE_PUT, ino, NULL);
	}
	free(crcs);
	free(buf);
}

static void share_remove_one(struct share *sh, const char *path)
{
	struct rtier *rt = share_rt_get(sh);
	int rc = rt ? rtier_remove(rt, path) : -ENOTCONN;

	if (rt)
		share_rt_put(sh);
	if (rc == 0)
		atomic_fetch_add(&sh->st.removes, 1);
	else if (rc != -ENOENT && rt)
		share_fail(sh, rc, path);
	if (share_unreachable_rc(rc))
		share_enqueue(sh, SHARE_REMOVE, 0, path);
}

/*
 * The path of the queue's first op (a put's is its inode's name now):
 * 0, or -errno when the op has nothing to do (no name, a temporary one).
 * sh->lock held.
 */
static int share_head_path(struct share *sh, char *path, size_t len)
{
	const struct share_op *op = sh->qhead;
	int rc;

	if (op->kind == SHARE_REMOVE) {
		snprintf(path, len, "%s", op->path);
		return 0;
	}
	rc = idx_path(sh->fs->idx, op->ino, path, len);
	if (rc == 0 && share_is_tmp(strrchr(path, '/') + 1))
		rc = -EAGAIN;
	return rc;
}

/*
 * The slot of the op running on path ("": an idle slot), or -1. sh->lock
 * held.
 */
static int share_running(const struct share *sh, const char *path)
{
	for (int i = 0; i < SHARE_PUTTERS; i++)
		if (strcmp(sh->running[i], path) == 0)
			return i;
	return -1;
}

/*
 * One of SHARE_PUTTERS put threads. Ops start in queue order, and one on
 * a path some thread is running waits for it (the queue's head waits, so
 * the ops on one path keep their order: a remove is never overtaken by an
 * earlier put of the same path).
 */
static void *share_putter(void *arg)
{
	char path[RTIER_PATH_MAX + 1];
	struct share *sh = arg;
	struct share_op *op;
	int rc, slot;

	if (setpriority(PRIO_PROCESS, (id_t)gettid(), SHARE_NICE) < 0)
		log_debug("shared tier: put thread keeps nice 0: %s",
			  strerror(errno));
	pthread_mutex_lock(&sh->lock);
	for (;;) {
		/* Ops wait for a connection; stopping drops what is left. */
		while (!sh->stop &&
		       (!sh->qhead || !atomic_load(&sh->reachable)))
			pthread_cond_wait(&sh->cond, &sh->lock);
		if (sh->stop)
			break;
		rc = share_head_path(sh, path, sizeof(path));
		if (rc == 0 && share_running(sh, path) >= 0) {
			pthread_cond_wait(&sh->cond, &sh->lock);
			continue;
		}
		op = sh->qhead;
		sh->qhead = op->next;
		if (!sh->qhead)
			sh->qtail = NULL;
		if (op->kind == SHARE_PUT)
			set_del(&sh->queued, op->ino);
		slot = rc == 0 ? share_running(sh, "") : -1;
		if (slot >= 0) {
			snprintf(sh->running[slot], sizeof(sh->running[slot]),
				 "%s", path);
			pthread_mutex_unlock(&sh->lock);
			if (op->kind == SHARE_PUT)
				share_put_one(sh, op->ino, path);
			else
				share_remove_one(sh, op->path);
			pthread_mutex_lock(&sh->lock);
			sh->running[slot][0] = '\0';
		}
		free(op);
		sh->nqueued--;
		pthread_cond_broadcast(&sh->cond);
		pthread_cond_broadcast(&sh->idle);
	}
	pthread_mutex_unlock(&sh->lock);
	return NULL;
}

void share_queue_clear(struct share *sh)
{
	while (sh->qhead) {
		struct share_op *op = sh->qhead;

		sh->qhead = op->next;
		free(op);
	}
	sh->qtail = NULL;
}

int share_drain(struct fs *fs, int timeout_ms)
{
	struct share *sh = fs->share;
	struct timespec dl;
	int rc = 0;

	if (!sh)
		return 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&sh->lock);
	while (sh->nqueued && rc == 0) {
		if (!atomic_load(&sh->reachable)) {
			rc = -ENOTCONN;
			break;
		}
		rc = -pthread_cond_timedwait(&sh->idle, &sh->lock, &dl);
	}
	pthread_mutex_unlock(&sh->lock);
	return rc;
}

/* ---- start, stop, counters ---- */

int share_start(struct fs *fs)
{
	char host[64] = "";
	struct idx_attr root;
	struct share *sh;
	int rc;

	if (!fs->cfg.rados_pool)
		return 0;
	sh = calloc(1, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	sh->fs = fs;
	pthread_mutex_init(&sh->lock, NULL);
	pthread_cond_init(&sh->cond, NULL);
	pthread_cond_init(&sh->idle, NULL);
	pthread_mutex_init(&sh->mark_lock, NULL);
	pthread_rwlock_init(&sh->rt_lock, NULL);
	atomic_store(&sh->capacity, fs->cfg.rados_capacity);
	/* The lease's cookie: this daemon, on this machine, this start. */
	gethostname(host, sizeof(host) - 1);
	snprintf(sh->cookie, sizeof(sh->cookie), "%.63s.%ld.%llx", host,
		 (long)getpid(), (unsigned long long)clock_monotonic_ns());
	if (idx_getattr(fs->idx, KV_ROOT_INO, &root) == 0) {
		sh->uid = root.uid;
		sh->gid = root.gid;
	}
	fs->share = sh;
	fs->saved = share_saved;
	/* The keeper connects first thing: a sick cluster never holds up
	 * the mount's first requests (rados_timeout). */
	rc = share_threads_start(sh, share_putter);
	if (rc < 0) {
		fs->saved = NULL;
		fs->share = NULL;
		share_free(sh);
	}
	return rc;
}

void share_get_stats(struct fs *fs, struct share_stats *out)
{
	struct share *sh = fs->share;

	memset(out, 0, sizeof(*out));
	if (!sh)
		return;
	out->reachable = atomic_load(&sh->reachable);
	out->sweeper = atomic_load(&sh->sweeper);
	pthread_mutex_lock(&sh->lock);
	out->queued = sh->nqueued;
	pthread_mutex_unlock(&sh->lock);
#define SHARE_COPY(f) out->f = atomic_load(&sh->st.f);
	SHARE_COUNTERS(SHARE_COPY)
#undef SHARE_COPY
	out->capacity = atomic_load(&sh->capacity);
}
