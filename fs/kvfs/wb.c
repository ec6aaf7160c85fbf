/* SPDX-License-Identifier: MIT */
/*
 * Write-behind (wb.h): the queue of saves, the writer threads that append
 * them, and the committer that makes them visible to the index in groups.
 *
 * A save (struct wb_job) owns the file's bytes from the FLUSH on; the node
 * points at them (node->wb) until the save is committed, so reads, stat,
 * rename and unlink go on as for any file. Jobs of one node are appended
 * one at a time and committed in the order they landed, so the index
 * always ends at the newest bytes; a queued save that a newer one replaces
 * is dropped, and so is one whose file lost its last name (its bytes go
 * back to the node, which may still be open).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "filebuf.h"
#include "fs.h"
#include "log.h"
#include "names.h"
#include "node.h"
#include "notify.h"
#include "wb.h"

/* Writers' nice value, relative to the daemon's handlers at 0. */
#define WB_NICE 5
/* Most saves committed in one index transaction. */
#define WB_BATCH 256
/*
 * Most saves a writer appends in one write, and the most bytes: small
 * files queued together go to the lane in one step (one I/O, one wake-up
 * of the committer), a file of this size or more alone.
 */
#define WB_APPEND_JOBS 32
#define WB_APPEND_BYTES (1u << 20)
/*
 * How long a writer lets small saves gather into one append (ns), unless
 * someone waits for them (fsync, sync, unmount) or they fill one: the
 * FLUSH has returned already, so only a crash sees the difference.
 */
#define WB_LINGER_NS 5000000ll
/* Slices in which waiters look for an interrupt (ns). */
#define WB_SLICE_NS 100000000ll

enum wb_state { WB_QUEUED, WB_RUNNING, WB_LANDED };

struct wb_job {
	struct wb_bytes b; /* first: node->wb points here */
	struct wb_job *next;
	struct node *n; /* pinned until the job is done */
	int64_t mtime_ns;
	int64_t queued_ns;   /* when the FLUSH queued it (monotonic) */
	uint64_t charged;    /* budget bytes: the segments */
	uint64_t reserved;   /* capacity bytes counted as used at the FLUSH */
	uint64_t span;	     /* disk bytes its record will take */
	enum wb_state state; /* under wb->lock */
	int superseded;	     /* a newer save replaced it while queued (lock) */
	int unlinked;	     /* the file had no name left (writer) */
	unsigned name_gen;   /* the node's renames when path was taken */
	uint64_t seq;	     /* the node's save_seq for this save */
	char *path;	     /* the file's path at the FLUSH: the record's */
	uint32_t *crcs;
	struct kv_extent ext; /* where it landed (file_id 0: not appended) */
	int rc;		      /* the append's outcome */
};

struct wb {
	struct fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t work;	      /* writers: a job may be pickable */
	pthread_cond_t landed;	      /* committer: a job landed */
	pthread_cond_t idle;	      /* waiters: a job is done */
	struct wb_job *qhead, *qtail; /* queued, in FLUSH order */
	struct wb_job *lhead, *ltail; /* landed, to commit in order */
	uint64_t outstanding;	      /* queued, running or landed */
	atomic_uint_fast64_t span;    /* disk bytes their records will take */
	int stop;
	uint64_t qspan;	    /* disk bytes of the queued jobs' records */
	unsigned qjobs;	    /* queued jobs */
	unsigned running;   /* writers appending a batch */
	unsigned lingering; /* writers letting small saves gather */
	unsigned waiting;   /* threads waiting for saves (wb_wait) */
	unsigned nwriters;
	pthread_t *writers;
	pthread_t committer;
	struct wb_stats st; /* under lock; queued_* computed on read */
};

static void wb_job_to(struct wb_job **head, struct wb_job **tail,
		      struct wb_job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

/*
 * Room for job j's record, made at the FLUSH, which fails with -ENOSPC as
 * a synchronous save would: on the disk, counting the records still
 * queued, and under the capacity (evicting if it must), where it is
 * counted as used from then on, so that queued saves cannot together pass
 * either. wb_unreserve() gives back what the record did not take.
 */
static int wb_reserve(struct fs *fs, struct wb *wb, struct node *n,
		      struct wb_job *j)
{
	uint64_t span;
	int rc;

	if (n->attr.size == 0)
		return 0;
	span = store_hdr_len(n->attr.size, strlen(j->path)) +
	       kv_align_up(n->attr.size);
	rc = store_check_space(fs->store, atomic_load(&wb->span) + span);
	if (rc == 0 && fs->up.make_room)
		rc = fs->up.make_room(fs->up.ctx, span);
	if (rc < 0)
		return rc;
	if (fs->up.reserved) {
		fs->up.reserved(fs->up.ctx, (int64_t)span);
		j->reserved = span;
	}
	j->span = span;
	atomic_fetch_add(&wb->span, span);
	return 0;
}

/* Ends j's reservation: its record took landed bytes (0: none). */
static void wb_unreserve(struct fs *fs, struct wb *wb, struct wb_job *j,
			 uint64_t landed)
{
	atomic_fetch_sub(&wb->span, j->span);
	if (j->reserved)
		fs->up.reserved(fs->up.ctx, -(int64_t)j->reserved);
	if (landed && fs->up.used)
		fs->up.used(fs->up.ctx, (int64_t)landed);
}

/* Whether the queued jobs fill one append. wb->lock held. */
static int wb_batch_full(const struct wb *wb)
{
	return wb->qspan >= WB_APPEND_BYTES || wb->qjobs >= WB_APPEND_JOBS;
}

int wb_save_locked(struct fs *fs, struct node *n)
{
	struct wb *wb = fs->wb;
	struct wb_job *j;
	uint64_t size = n->attr.size, queued;
	int rc;

	if (n->x_dirty)
		return node_ext_save_locked(fs, n);
	if (!n->dirty)
		return 0;
	if (!wb || fs->cfg.durable)
		return node_flush_locked(fs, n);
	/*
	 * Nothing to append and no save of it queued to keep in order: an
	 * empty file is saved here, one change in the index's batch, without
	 * waking a writer and the committer.
	 */
	if (size == 0 && atomic_load(&n->wb_jobs) == 0)
		return node_flush_locked(fs, n);
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	/*
	 * The path now, while the open file holds its directories in the
	 * kernel (and so in the node table); a rename later is caught at
	 * commit by the rename count taken first.
	 */
	j->name_gen = atomic_load(&n->name_gen);
	j->path = node_path(fs, n);
	rc = j->path ? wb_reserve(fs, wb, n, j) : -ENOMEM;
	if (rc < 0) {
		free(j->path);
		free(j);
		return rc;
	}
	/* Records end on a KV_ALIGN boundary: zero the padding. */
	if (size > 0)
		node_zero(n, size, kv_align_up(size) - size);
	j->b = (struct wb_bytes){.segs = n->segs,
				 .nsegs = n->nsegs,
				 .size = size,
				 .crcs = n->seg_crcs,
				 .ncrcs = n->seg_ncrcs};
	j->charged = (uint64_t)n->nsegs * NODE_SEG;
	j->n = n;
	j->mtime_ns = n->attr.mtime_ns;
	j->seq = atomic_fetch_add(&n->save_seq, 1) + 1;
	n->segs = NULL;
	n->nsegs = 0;
	n->seg_crcs = NULL;
	n->seg_crcs_cap = n->seg_ncrcs = 0;
	n->seg_part_crc = n->seg_part_len = 0;
	n->dirty = 0;
	n->cached = 0;
	node_pin(fs, n);
	atomic_fetch_add(&n->wb_jobs, 1);
	pthread_mutex_lock(&wb->lock);
	if (wb->stop) {
		/* Stopping: nobody would append it. Undo and save now. */
		pthread_mutex_unlock(&wb->lock);
		n->segs = j->b.segs;
		n->nsegs = j->b.nsegs;
		n->dirty = 1;
		atomic_fetch_sub(&n->wb_jobs, 1);
		node_put(fs, n, 0, 0, 1);
		wb_unreserve(fs, wb, j, 0);
		free(j->b.crcs);
		free(j->path);
		free(j);
		return node_flush_locked(fs, n);
	}
	if (n->wb) {
		struct wb_job *prev = (struct wb_job *)n->wb;

		if (prev->state == WB_QUEUED)
			prev->superseded = 1;
	}
	n->wb = &j->b;
	j->queued_ns = (int64_t)clock_monotonic_ns();
	wb_job_to(&wb->qhead, &wb->qtail, j);
	wb->qspan += j->span;
	wb->qjobs++;
	wb->outstanding++;
	queued =
		atomic_fetch_add(&fs->wb_queued_bytes, j->charged) + j->charged;
	if (queued > wb->st.peak_bytes)
		wb->st.peak_bytes = queued;
	/*
	 * Small saves gather for a writer that lingers or appends (it takes
	 * this one with its next batch): waking another for each would cost
	 * a wake-up and an I/O per file. A full batch, or a large file, goes
	 * at once, at full queue depth.
	 */
	if ((wb->running == 0 && wb->lingering == 0) || wb_batch_full(wb))
		pthread_cond_signal(&wb->work);
	pthread_mutex_unlock(&wb->lock);
	return 0;
}

/*
 * The first queued job a writer may take: dropped ones at once, others
 * only while no other save of the same node is being appended (the
 * committer then sees one node's saves in FLUSH order), and only when its
 * record takes at most room bytes. wb->lock held.
 */
static struct wb_job *wb_pick(struct wb *wb, uint64_t room)
{
	struct wb_job **pp = &wb->qhead, *prev = NULL;

	for (struct wb_job *j = wb->qhead; j; prev = j, j = j->next) {
		if (!j->superseded && j->n->wb_writing > 0) {
			pp = &j->next;
			continue;
		}
		if (!j->superseded && j->span > room)
			return NULL;
		*pp = j->next;
		if (wb->qtail == j)
			wb->qtail = prev;
		wb->qspan -= j->span;
		wb->qjobs--;
		j->state = WB_RUNNING;
		if (!j->superseded)
			j->n->wb_writing++;
		return j;
	}
	return NULL;
}

/*
 * The jobs a writer appends in one write, into jobs (at most
 * WB_APPEND_JOBS): the first pickable one, then the next ones while their
 * records fit in WB_APPEND_BYTES with it. wb->lock held.
 */
static size_t wb_pick_batch(struct wb *wb, struct wb_job **jobs)
{
	uint64_t used = 0, room = UINT64_MAX; /* the first goes, any size */
	size_t k = 0;
	struct wb_job *j;

	while (k < WB_APPEND_JOBS && (j = wb_pick(wb, room))) {
		jobs[k++] = j;
		if (!j->superseded)
			used += j->span;
		room = used < WB_APPEND_BYTES ? WB_APPEND_BYTES - used : 0;
	}
	return k;
}

/*
 * Whether job j has bytes to append; sets j->unlinked. A job of a file
 * that lost its last name, or of an empty one, appends nothing. A file
 * renamed since its FLUSH (the engine's temporary name) is recorded under
 * its name now, so that no name record has to follow.
 */
static int wb_has_bytes(struct fs *fs, struct wb_job *j)
{
	struct node *n = j->n;
	unsigned gen;
	char *path;

	if (j->superseded)
		return 0;
	pthread_rwlock_rdlock(&n->rw);
	j->unlinked = n->attr.nlink == 0;
	pthread_rwlock_unlock(&n->rw);
	if (j->unlinked || j->b.size == 0)
		return 0;
	gen = atomic_load(&n->name_gen);
	if (gen != j->name_gen && (path = node_path(fs, n))) {
		free(j->path);
		j->path = path;
		j->name_gen = gen;
	}
	return 1;
}

/*
 * Appends the bytes of the k jobs as records, in one write (the writer's
 * part of a save): each job gets its extent, or its error in j->rc.
 * Whether it wrote.
 */
static int wb_append(struct fs *fs, struct wb_job **jobs, size_t k)
{
	struct store_rec recs[WB_APPEND_JOBS];
	struct wb_job *ours[WB_APPEND_JOBS];
	struct iovec *iov[WB_APPEND_JOBS] = {0};
	size_t m = 0;
	int rc = 0;

#ifdef KVFS_FAULT_INJECTION
	unsigned delay = atomic_load(&fs->fault_wb_delay_ms);

	if (delay)
		usleep(delay * 1000u);
#endif
	for (size_t i = 0; i < k; i++)
		if (wb_has_bytes(fs, jobs[i]))
			ours[m++] = jobs[i];
	for (size_t i = 0; i < m && rc == 0; i++) {
		struct wb_job *j = ours[i];
		uint64_t size = j->b.size;

		j->crcs = calloc(kv_nchunks(size), sizeof(*j->crcs));
		iov[i] = calloc(j->b.nsegs + 1, sizeof(*iov[i]));
		if (!j->crcs || !iov[i]) {
			rc = -ENOMEM;
			break;
		}
		recs[i] = (struct store_rec){
			.ino = j->n->ino,
			.path = j->path,
			.iov = iov[i],
			.iovcnt = node_segs_iov(j->b.segs, 0, kv_align_up(size),
						iov[i]),
			.len = size,
			.crcs = j->crcs,
			.known = node_crcs_known(j->b.crcs, j->b.ncrcs, size,
						 j->crcs)};
	}
#ifdef KVFS_FAULT_INJECTION
	if (rc == 0)
		rc = -atomic_load(&fs->fault_wb_error);
#endif
	/* Room was made at each FLUSH (wb_reserve). */
	if (rc == 0 && m > 0)
		rc = store_append_batch(fs->store, recs, m);
	for (size_t i = 0; i < m; i++) {
		struct wb_job *j = ours[i];

		if (rc < 0)
			log_warn("cannot save %s (inode %llu, %llu bytes): "
				 "%s; it goes back to its last saved state",
				 j->path, (unsigned long long)j->n->ino,
				 (unsigned long long)j->b.size, strerror(-rc));
		else
			j->ext = recs[i].ext;
		j->rc = rc;
		free(iov[i]);
	}
	return rc == 0 && m > 0;
}

/*
 * How long (ns) a writer lets the queued saves gather before it takes
 * them, or 0: take them now. wb->lock held.
 */
static int64_t wb_linger_ns(const struct wb *wb)
{
	int64_t left;

	if (!wb->qhead || wb->stop || wb->waiting || wb_batch_full(wb))
		return 0;
	left = wb->qhead->queued_ns + WB_LINGER_NS -
	       (int64_t)clock_monotonic_ns();
	return left > 0 ? left : 0;
}

static void *wb_writer(void *arg)
{
	struct wb *wb = arg;
	struct wb_job *jobs[WB_APPEND_JOBS];
	size_t k;
	int wrote;

	/*
	 * Below the request handlers: on a busy host the CPU goes first to
	 * answering the engine, the queue absorbs the difference.
	 */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), WB_NICE) < 0)
		log_debug("cannot lower the writer's priority: %s",
			  strerror(errno));

	pthread_mutex_lock(&wb->lock);
	for (;;) {
		int64_t linger = wb_linger_ns(wb);

		if (linger) {
			struct timespec ts = clock_ts(clock_realtime_ns() +
						      (uint64_t)linger);

			wb->lingering++;
			pthread_cond_timedwait(&wb->work, &wb->lock, &ts);
			wb->lingering--;
			continue;
		}
		k = wb_pick_batch(wb, jobs);
		if (!k && wb->stop)
			break;
		if (!k) {
			pthread_cond_wait(&wb->work, &wb->lock);
			continue;
		}
		/* What it leaves behind goes to another writer. */
		if (wb->qhead)
			pthread_cond_signal(&wb->work);
		wb->running++;
		pthread_mutex_unlock(&wb->lock);
		wrote = wb_append(wb->fs, jobs, k);
		pthread_mutex_lock(&wb->lock);
		wb->running--;
		wb->st.writes += wrote;
		for (size_t i = 0; i < k; i++) {
			struct wb_job *j = jobs[i];

			if (!j->superseded)
				j->n->wb_writing--;
			j->state = WB_LANDED;
			if (j->ext.file_id)
				wb->st.appends++;
			wb_job_to(&wb->lhead, &wb->ltail, j);
		}
		/*
		 * A save of the same node that this one held back is this
		 * writer's to take now, as it loops.
		 */
		pthread_cond_signal(&wb->landed);
	}
	pthread_mutex_unlock(&wb->lock);
	return NULL;
}

/*
 * The node's side of a finished save: on success it now reads from the
 * record; on failure it goes back to its last saved state; a save dropped
 * for an unlink gives its bytes back (the file may still be open).
 */
static void wb_settle(struct fs *fs, struct wb_job *j, int rc, int *inval)
{
	struct node *n = j->n;
	int saved = rc == 0 && !j->unlinked && !j->superseded;

	pthread_rwlock_wrlock(&n->rw);
	if (saved) {
		free(n->crcs);
		n->crcs = j->crcs;
		n->ncrcs = kv_nchunks(j->b.size);
		n->crcs_loaded = 1;
		j->crcs = NULL;
		n->attr.ext = j->ext;
		n->disk_size = j->b.size;
	}
	if (rc < 0)
		n->wb_err = rc;
	if (n->wb == &j->b) {
		n->wb = NULL;
		if (rc < 0) {
			n->attr.size = n->disk_size;
			/* Never saved: empty now, so its name goes too. */
			*inval = n->attr.ext.file_id == 0 && n->attr.nlink > 0
					 ? 2
					 : 1;
		} else if (j->unlinked && !n->dirty && !n->cached &&
			   !n->evicted) {
			n->segs = j->b.segs;
			n->nsegs = j->b.nsegs;
			n->dirty = 1;
			j->b.segs = NULL;
			j->b.nsegs = 0;
		}
	}
	/* A utimensat(2) while queued: the commit wrote the FLUSH's mtime. */
	if (saved && n->attr.mtime_ns != j->mtime_ns && n->attr.nlink > 0) {
		struct idx_attr a = n->attr;

		a.size = n->disk_size;
		idx_setattr(fs->idx, &a);
	}
	pthread_rwlock_unlock(&n->rw);
}

/*
 * Removes the name of n, a new file whose first save failed: it holds no
 * bytes now, and an empty file under a block's name would be a torn
 * block. The engine sees a miss (and stores it again); the log says why.
 */
static void wb_unname(struct fs *fs, struct node *n)
{
	struct idx_name e = {.ino = n->ino};
	char *path = node_path(fs, n);

	pthread_mutex_lock(&fs->nodes_lock);
	e.parent = n->parent;
	snprintf(e.name, sizeof(e.name), "%s", n->name ? n->name : "");
	pthread_mutex_unlock(&fs->nodes_lock);
	if (node_unname(fs, &e, 0))
		log_warn("%s removed: its bytes could not be saved",
			 path ? path : "?");
	free(path);
}

static uint32_t wb_nlink(struct node *n)
{
	uint32_t nlink;

	pthread_rwlock_rdlock(&n->rw);
	nlink = n->attr.nlink;
	pthread_rwlock_unlock(&n->rw);
	return nlink;
}

/* Ends job j (rc: the save's outcome) and frees it. */
static void wb_finish(struct fs *fs, struct wb *wb, struct wb_job *j,
		      const struct idx_save *s)
{
	struct node *n = j->n;
	int rc, inval = 0, saved;

	/* Evicted (its inode released) while its bytes were appended. */
	if (j->rc == 0 && s && s->rc == -ENOENT)
		j->unlinked = 1;
	rc = j->rc < 0 ? j->rc : (s && s->rc < 0 && !j->unlinked ? s->rc : 0);
	saved = rc == 0 && !j->unlinked && !j->superseded;

	wb_settle(fs, j, rc, &inval);
	if (inval)
		notify_inode(fs->notify, n->ino);
	if (inval == 2)
		wb_unname(fs, n);
	if (saved && s) {
		node_free_extent(fs, &s->old);
		if (fs->up.touch)
			fs->up.touch(fs->up.ctx, n->ino);
		/*
		 * The record has the path the save took: renamed since, or
		 * one of several names (hard links), the names go into a
		 * name record of their own.
		 */
		if (j->ext.file_id &&
		    (atomic_load(&n->name_gen) != j->name_gen ||
		     wb_nlink(n) > 1))
			names_record(fs, n->ino);
		if (fs->saved)
			fs->saved(fs, n, j->seq);
	}
	/* The reservation becomes the record's real size, or goes. */
	wb_unreserve(fs, wb, j, j->ext.file_id ? kv_extent_span(&j->ext) : 0);
	node_segs_release(fs, j->b.segs, j->b.nsegs);
	free(j->b.segs);
	free(j->b.crcs);
	free(j->crcs);
	free(j->path);
	atomic_fetch_sub(&fs->wb_queued_bytes, j->charged);
	atomic_fetch_sub(&n->wb_jobs, 1);
	node_put(fs, n, 0, 0, 1);
	pthread_mutex_lock(&wb->lock);
	if (rc < 0)
		wb->st.failed++;
	else if (j->unlinked || j->superseded)
		wb->st.cancelled++;
	wb->outstanding--;
	pthread_cond_broadcast(&wb->idle);
	pthread_mutex_unlock(&wb->lock);
	free(j);
}

/* Commits k landed jobs in one index transaction, then ends each. */
static void wb_commit(struct fs *fs, struct wb *wb, struct wb_job **jobs,
		      size_t k)
{
	struct idx_save *saves = calloc(k, sizeof(*saves));
	int *slot = calloc(k, sizeof(*slot));
	size_t m = 0;

	for (size_t i = 0; i < k; i++) {
		struct wb_job *j = jobs[i];

		slot[i] = -1;
		if (!saves || !slot || j->unlinked || j->superseded ||
		    j->rc < 0)
			continue;
		saves[m] = (struct idx_save){.ino = j->n->ino,
					     .size = j->b.size,
					     .mtime_ns = j->mtime_ns,
					     .ext = j->ext,
					     .crcs = j->crcs};
		slot[i] = (int)m++;
	}
	if (!saves || !slot) {
		for (size_t i = 0; i < k; i++)
			if (!jobs[i]->unlinked && !jobs[i]->superseded &&
			    jobs[i]->rc == 0)
				jobs[i]->rc = -ENOMEM;
	} else if (m > 0) {
		int rc = idx_set_extents(fs->idx, saves, m);

		if (rc < 0)
			log_err("cannot commit %zu saves to the index: %s", m,
				strerror(-rc));
		pthread_mutex_lock(&wb->lock);
		wb->st.commits++;
		pthread_mutex_unlock(&wb->lock);
	}
	for (size_t i = 0; i < k; i++) {
		struct wb_job *j = jobs[i];
		const struct idx_save *s =
			slot && slot[i] >= 0 ? &saves[slot[i]] : NULL;

		/* Appended but not committed: nothing points at it. */
		if (j->ext.file_id && (!s || s->rc < 0))
			node_free_extent(fs, &j->ext);
		if (j->ext.file_id)
			store_append_done(fs->store, j->ext.file_id);
		wb_finish(fs, wb, j, s);
	}
	free(saves);
	free(slot);
}

static void *wb_committer(void *arg)
{
	struct wb *wb = arg;
	struct wb_job *jobs[WB_BATCH];

	pthread_mutex_lock(&wb->lock);
	for (;;) {
		size_t k = 0;

		while (!wb->lhead && !(wb->stop && wb->outstanding == 0))
			pthread_cond_wait(&wb->landed, &wb->lock);
		if (!wb->lhead)
			break;
		while (wb->lhead && k < WB_BATCH) {
			jobs[k++] = wb->lhead;
			wb->lhead = wb->lhead->next;
		}
		if (!wb->lhead)
			wb->ltail = NULL;
		pthread_mutex_unlock(&wb->lock);
		wb_commit(wb->fs, wb, jobs, k);
		pthread_mutex_lock(&wb->lock);
	}
	pthread_mutex_unlock(&wb->lock);
	return NULL;
}

int wb_start(struct fs *fs, unsigned nwriters)
{
	struct wb *wb = calloc(1, sizeof(*wb));
	int rc;

	if (!wb)
		return -ENOMEM;
	wb->fs = fs;
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->work, NULL);
	pthread_cond_init(&wb->landed, NULL);
	pthread_cond_init(&wb->idle, NULL);
	wb->writers = calloc(nwriters, sizeof(*wb->writers));
	if (!wb->writers) {
		free(wb);
		return -ENOMEM;
	}
	rc = -pthread_create(&wb->committer, NULL, wb_committer, wb);
	if (rc < 0) {
		log_err("cannot start the write-behind threads: %s",
			strerror(-rc));
		free(wb->writers);
		free(wb);
		return rc;
	}
	for (; rc == 0 && wb->nwriters < nwriters; wb->nwriters++)
		rc = -pthread_create(&wb->writers[wb->nwriters], NULL,
				     wb_writer, wb);
	fs->wb = wb;
	if (rc < 0) {
		log_err("cannot start the write-behind threads: %s",
			strerror(-rc));
		wb_stop(fs);
	}
	return rc;
}

/* Waits on cond until done() or the deadline (ns, monotonic; <0: none). */
static int wb_wait(struct wb *wb, int64_t deadline, int (*stop)(void *),
		   void *arg, int (*done)(struct wb *, void *), void *darg)
{
	int rc = 0;

	pthread_mutex_lock(&wb->lock);
	/* Writers letting small saves gather take them now. */
	wb->waiting++;
	pthread_cond_broadcast(&wb->work);
	while (!done(wb, darg)) {
		struct timespec ts;

		if (stop && stop(arg)) {
			rc = -EINTR;
			break;
		}
		if (deadline >= 0 &&
		    (int64_t)clock_monotonic_ns() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		ts = clock_ts(clock_realtime_ns() + WB_SLICE_NS);
		pthread_cond_timedwait(&wb->idle, &wb->lock, &ts);
	}
	wb->waiting--;
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

static int wb_node_done(struct wb *wb, void *arg)
{
	(void)wb;
	return atomic_load(&((struct node *)arg)->wb_jobs) == 0;
}

static int wb_empty(struct wb *wb, void *arg)
{
	(void)arg;
	return wb->outstanding == 0;
}

int wb_wait_node(struct fs *fs, struct node *n, int (*stop)(void *), void *arg)
{
	int rc = 0;

	if (fs->wb)
		rc = wb_wait(fs->wb, -1, stop, arg, wb_node_done, n);
	if (rc < 0)
		return rc;
	pthread_rwlock_wrlock(&n->rw);
	rc = n->wb_err;
	n->wb_err = 0;
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

int wb_drain(struct fs *fs, int timeout_ms)
{
	int64_t deadline = -1;

	if (!fs->wb)
		return 0;
	if (timeout_ms >= 0)
		deadline = (int64_t)clock_monotonic_ns() +
			   (int64_t)timeout_ms * 1000000;
	return wb_wait(fs->wb, deadline, NULL, NULL, wb_empty, NULL);
}

void wb_stop(struct fs *fs)
{
	struct wb *wb = fs->wb;

	if (!wb)
		return;
	wb_drain(fs, -1);
	pthread_mutex_lock(&wb->lock);
	wb->stop = 1;
	pthread_cond_broadcast(&wb->work);
	pthread_cond_broadcast(&wb->landed);
	pthread_mutex_unlock(&wb->lock);
	for (unsigned i = 0; i < wb->nwriters; i++)
		pthread_join(wb->writers[i], NULL);
	pthread_join(wb->committer, NULL);
	fs->wb = NULL;
	pthread_mutex_destroy(&wb->lock);
	pthread_cond_destroy(&wb->work);
	pthread_cond_destroy(&wb->landed);
	pthread_cond_destroy(&wb->idle);
	free(wb->writers);
	free(wb);
}

void wb_get_stats(struct fs *fs, struct wb_stats *out)
{
	struct wb *wb = fs->wb;

	memset(out, 0, sizeof(*out));
	if (!wb)
		return;
	pthread_mutex_lock(&wb->lock);
	*out = wb->st;
	out->queued_files = wb->outstanding;
	pthread_mutex_unlock(&wb->lock);
	out->queued_bytes = atomic_load(&fs->wb_queued_bytes);
}
