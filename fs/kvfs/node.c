/* SPDX-License-Identifier: MIT */
/*
 * The node table: inodes the kernel or an open handle holds, with their
 * cached attributes and unsaved bytes. See node.h for the lock rules and
 * fs.h for the lock order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs.h"
#include "filebuf.h"
#include "node.h"
#include "notify.h"

#define NODE_BUCKETS 65536u

static size_t node_hash(const struct fs *fs, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 16) % fs->nbuckets;
}

int node_table_init(struct fs *fs)
{
	fs->nbuckets = NODE_BUCKETS;
	fs->nodes = calloc(fs->nbuckets, sizeof(*fs->nodes));
	if (!fs->nodes)
		return -ENOMEM;
	pthread_mutex_init(&fs->nodes_lock, NULL);
	pthread_mutex_init(&fs->dirty_lock, NULL);
	pthread_mutex_init(&fs->frees_lock, NULL);
	pthread_cond_init(&fs->dirty_cond, NULL);
	pthread_cond_init(&fs->grow_cond, NULL);
	pthread_cond_init(&fs->unname_cond, NULL);
	return 0;
}

static void node_destroy(struct node *n)
{
	pthread_rwlock_destroy(&n->rw);
	extf_close(&n->x);
	free(n->crcs);
	free(n->segs);
	free(n->seg_crcs);
	free(n->name);
	free(n);
}

void node_table_free(struct fs *fs)
{
	if (!fs->nodes)
		return;
	for (size_t b = 0; b < fs->nbuckets; b++) {
		struct node *n = fs->nodes[b];

		while (n) {
			struct node *next = n->hnext;

			node_destroy(n);
			n = next;
		}
	}
	free(fs->nodes);
	fs->nodes = NULL;
	while (fs->nseg_pool > 0)
		node_seg_free(fs->seg_pool[--fs->nseg_pool]);
	/* What no commit freed stays on disk, unreferenced (kvfsctl gc). */
	free(fs->frees);
	fs->frees = NULL;
	fs->nfrees = fs->frees_cap = 0;
	free(fs->drops);
	fs->drops = NULL;
	fs->ndrops = fs->drops_cap = 0;
	pthread_mutex_destroy(&fs->frees_lock);
	pthread_mutex_destroy(&fs->nodes_lock);
	pthread_mutex_destroy(&fs->dirty_lock);
	pthread_cond_destroy(&fs->dirty_cond);
	pthread_cond_destroy(&fs->grow_cond);
	pthread_cond_destroy(&fs->unname_cond);
}

/* Call with nodes_lock held. */
static struct node *node_lookup_locked(struct fs *fs, uint64_t ino)
{
	struct node *n = fs->nodes[node_hash(fs, ino)];

	while (n && n->ino != ino)
		n = n->hnext;
	return n;
}

struct node *node_find(struct fs *fs, uint64_t ino)
{
	struct node *n;

	pthread_mutex_lock(&fs->nodes_lock);
	n = node_lookup_locked(fs, ino);
	if (n)
		n->pins++;
	pthread_mutex_unlock(&fs->nodes_lock);
	return n;
}

/*
 * Doubles the hash table (nodes_lock held): chains stay short when the
 * kernel keeps a million names looked up. Without memory it stays as is.
 */
static void node_grow(struct fs *fs)
{
	size_t old_nb = fs->nbuckets;
	struct node **old = fs->nodes, **nb;

	nb = calloc(2 * old_nb, sizeof(*nb));
	if (!nb)
		return;
	fs->nodes = nb;
	fs->nbuckets = 2 * old_nb;
	for (size_t b = 0; b < old_nb; b++) {
		while (old[b]) {
			struct node *n = old[b];
			size_t h = node_hash(fs, n->ino);

			old[b] = n->hnext;
			n->hnext = nb[h];
			nb[h] = n;
		}
	}
	free(old);
}

int node_get(struct fs *fs, uint64_t ino, const struct idx_attr *attr,
	     uint64_t parent, const char *name, uint64_t nlookup_inc,
	     struct node **out)
{
	struct idx_attr a;
	struct node *n, *nn;
	size_t b;
	int rc;

	pthread_mutex_lock(&fs->nodes_lock);
	n = node_lookup_locked(fs, ino);
	if (n) {
		n->pins += 1 + (nlookup_inc ? 1 : 0) * (n->nlookup == 0);
		n->nlookup += nlookup_inc;
		pthread_mutex_unlock(&fs->nodes_lock);
		*out = n;
		return 0;
	}
	pthread_mutex_unlock(&fs->nodes_lock);

	if (!attr) {
		rc = idx_getattr(fs->idx, ino, &a);
		if (rc < 0)
			return rc;
		attr = &a;
	}
	nn = calloc(1, sizeof(*nn));
	if (!nn)
		return -ENOMEM;
	nn->name = strdup(name ? name : "");
	if (!nn->name) {
		free(nn);
		return -ENOMEM;
	}
	nn->ino = ino;
	nn->x = EXTF_NONE;
	nn->attr = *attr;
	nn->disk_size = attr->size;
	nn->parent = parent;
	pthread_rwlock_init(&nn->rw, NULL);

	pthread_mutex_lock(&fs->nodes_lock);
	n = node_lookup_locked(fs, ino);
	if (n) {
		/* Another thread made it meanwhile: use theirs. */
		n->pins += 1 + (nlookup_inc ? 1 : 0) * (n->nlookup == 0);
		n->nlookup += nlookup_inc;
		pthread_mutex_unlock(&fs->nodes_lock);
		node_destroy(nn);
		*out = n;
		return 0;
	}
	if (fs->nnodes >= 2 * fs->nbuckets)
		node_grow(fs);
	b = node_hash(fs, ino);
	nn->hnext = fs->nodes[b];
	fs->nodes[b] = nn;
	fs->nnodes++;
	nn->nlookup = nlookup_inc;
	nn->pins = 1 + (nlookup_inc ? 1 : 0);
	pthread_mutex_unlock(&fs->nodes_lock);
	*out = nn;
	return 0;
}

void node_pin(struct fs *fs, struct node *n)
{
	pthread_mutex_lock(&fs->nodes_lock);
	n->pins++;
	pthread_mutex_unlock(&fs->nodes_lock);
}

void node_open_inc(struct fs *fs, struct node *n)
{
	pthread_mutex_lock(&fs->nodes_lock);
	n->nopen++;
	n->pins++;
	pthread_mutex_unlock(&fs->nodes_lock);
}

void node_put(struct fs *fs, struct node *n, uint64_t nlookup_dec,
	      unsigned nopen_dec, int op)
{
	struct node **pp;
	unsigned drop = (op ? 1 : 0) + nopen_dec;
	int gone = 0;

	pthread_mutex_lock(&fs->nodes_lock);
	if (nlookup_dec) {
		if (nlookup_dec > n->nlookup) {
			log_err("kernel forgot %llu lookups of inode %llu "
				"which has %llu",
				(unsigned long long)nlookup_dec,
				(unsigned long long)n->ino,
				(unsigned long long)n->nlookup);
			nlookup_dec = n->nlookup;
		}
		n->nlookup -= nlookup_dec;
		if (n->nlookup == 0 && nlookup_dec)
			drop++;
	}
	n->nopen -= nopen_dec;
	n->pins -= drop;
	if (n->pins == 0) {
		pp = &fs->nodes[node_hash(fs, n->ino)];
		while (*pp != n)
			pp = &(*pp)->hnext;
		*pp = n->hnext;
		fs->nnodes--;
		gone = 1;
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	if (!gone)
		return;
	/* Nobody can reach n any more: no lock needed. */
	if (n->dirty && n->attr.nlink > 0) {
		int rc = node_flush_locked(fs, n);

		if (rc < 0)
			log_err("inode %llu: unsaved data lost: %s",
				(unsigned long long)n->ino, strerror(-rc));
	}
	if (n->x_dirty && n->attr.nlink > 0)
		node_ext_save_locked(fs, n);
	/* Closed before its file goes with the inode. */
	extf_close(&n->x);
	node_discard(fs, n);
	if (n->attr.nlink == 0)
		node_release_inode(fs, n->ino);
	node_destroy(n);
}

unsigned node_nopen(struct fs *fs, struct node *n)
{
	unsigned nopen;

	pthread_mutex_lock(&fs->nodes_lock);
	nopen = n->nopen;
	pthread_mutex_unlock(&fs->nodes_lock);
	return nopen;
}

int node_is_busy(struct fs *fs, uint64_t ino)
{
	struct node *n;
	int busy = 0;

	pthread_mutex_lock(&fs->nodes_lock);
	n = node_lookup_locked(fs, ino);
	if (n)
		busy = n->nopen > 0 || n->dirty;
	pthread_mutex_unlock(&fs->nodes_lock);
	return busy;
}

void node_forget_one(struct fs *fs, uint64_t ino)
{
	struct node *n = node_find(fs, ino);

	if (n)
		node_put(fs, n, 1, 0, 1);
}

int node_rename(struct fs *fs, struct node *n, uint64_t parent,
		const char *name)
{
	char *copy = strdup(name);

	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&fs->nodes_lock);
	free(n->name);
	n->name = copy;
	n->parent = parent;
	pthread_mutex_unlock(&fs->nodes_lock);
	atomic_fetch_add(&n->name_gen, 1);
	return 0;
}

char *node_path(struct fs *fs, struct node *n)
{
	const char *parts[256];
	size_t nparts = 0, len = 0;
	struct node *p = n;
	char *path, *q;

	pthread_mutex_lock(&fs->nodes_lock);
	while (p && p->ino != KV_ROOT_INO && nparts < 256) {
		parts[nparts++] = p->name;
		len += strlen(p->name) + 1;
		p = node_lookup_locked(fs, p->parent);
	}
	path = malloc(len + 2);
	if (path) {
		q = path;
		if (nparts == 0)
			*q++ = '/';
		while (nparts > 0) {
			size_t l = strlen(parts[--nparts]);

			*q++ = '/';
			memcpy(q, parts[nparts], l);
			q += l;
		}
		*q = '\0';
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	return path;
}

/* Data file id may hold no record once committed: node_commit() checks. */
static void node_drop_later(struct fs *fs, uint32_t id)
{
	pthread_mutex_lock(&fs->frees_lock);
	for (size_t i = 0; i < fs->ndrops; i++)
		if (fs->drops[i] == id)
			id = 0;
	if (id && fs->ndrops == fs->drops_cap) {
		size_t ncap = fs->drops_cap ? 2 * fs->drops_cap : 16;
		uint32_t *nd = realloc(fs->drops, ncap * sizeof(*nd));

		if (nd) {
			fs->drops = nd;
			fs->drops_cap = ncap;
		}
	}
	/* Without memory the file stays, empty: kvfsctl gc removes it. */
	if (id && fs->ndrops < fs->drops_cap)
		fs->drops[fs->ndrops++] = id;
	pthread_mutex_unlock(&fs->frees_lock);
}

/*
 * Frees n records (exts, sorted by offset) of one data file, or one extent
 * file (n 1).
 */
static void node_free_run(struct fs *fs, const struct kv_extent *exts, size_t n)
{
	uint32_t id = exts[0].file_id;
	uint64_t refs = 1;
	int rc;

	if (kv_ext_large(&exts[0])) {
		rc = extf_remove(fs->ext_fd, exts[0].off);
		if (rc < 0)
			log_warn("cannot remove extent file %s/%llu.kvx: %s",
				 EXTF_DIR, (unsigned long long)exts[0].off,
				 strerror(-rc));
		return;
	}
	if (id == 0)
		return;
	for (size_t i = 0; fs->up.used && i < n; i++)
		fs->up.used(fs->up.ctx, -(int64_t)kv_extent_span(&exts[i]));
	/*
	 * While batching, the index's view of the file includes changes not
	 * committed yet, which a crash would undo: whether the file goes is
	 * decided at a commit (node_commit()).
	 */
	if (idx_batching(fs->idx)) {
		node_drop_later(fs, id);
		refs = 1;
	} else if (idx_datafile_refs(fs->idx, id, &refs) < 0) {
		refs = 1; /* keep the file when unsure */
	}
	rc = store_free_run(fs->store, exts, n, refs);
	if (rc < 0)
		log_warn("cannot free %zu records in %06u.kvd: %s", n, id,
			 strerror(-rc));
}

static void node_free_now(struct fs *fs, const struct kv_extent *ext)
{
	node_free_run(fs, ext, 1);
}

/* Orders frees by data file, then offset; extent files last. */
static int node_free_cmp(const void *a, const void *b)
{
	const struct kv_extent *x = a, *y = b;
	int lx = kv_ext_large(x), ly = kv_ext_large(y);

	if (lx != ly)
		return lx - ly;
	if (x->file_id != y->file_id)
		return x->file_id < y->file_id ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

void node_free_extent(struct fs *fs, const struct kv_extent *ext)
{
	uint64_t seq;
	int queued = 1;

	if (!kv_ext_large(ext) && ext->file_id == 0)
		return;
	/* Bytes read ahead for it are never served again. */
	if (fs->ra_forget)
		fs->ra_forget(fs, ext);
	seq = idx_batch_seq(fs->idx);
	/* Extent files go seldom, and their room is large: commit now. */
	if (seq && kv_ext_large(ext) && node_commit(fs, 1) == 0)
		seq = 0;
	if (seq == 0) {
		node_free_now(fs, ext);
		return;
	}
	pthread_mutex_lock(&fs->frees_lock);
	if (fs->nfrees == fs->frees_cap) {
		size_t ncap = fs->frees_cap ? 2 * fs->frees_cap : 64;
		struct fs_free *nf = realloc(fs->frees, ncap * sizeof(*nf));

		if (nf) {
			fs->frees = nf;
			fs->frees_cap = ncap;
		}
	}
	if (fs->nfrees < fs->frees_cap)
		fs->frees[fs->nfrees++] = (struct fs_free){*ext, seq};
	else
		queued = 0;
	pthread_mutex_unlock(&fs->frees_lock);
	/* No memory to wait with: commit now rather than free too early. */
	if (!queued && node_commit(fs, 1) == 0)
		node_free_now(fs, ext);
}

void node_free_committed(struct fs *fs)
{
	struct kv_extent *exts;
	struct fs_free *done = NULL;
	size_t ndone = 0, k = 0;

	pthread_mutex_lock(&fs->frees_lock);
	if (fs->nfrees > 0)
		done = malloc(fs->nfrees * sizeof(*done));
	for (size_t i = 0; done && i < fs->nfrees; i++) {
		int st = idx_batch_done(fs->idx, fs->frees[i].seq);

		if (st == 0)
			fs->frees[k++] = fs->frees[i];
		else if (st > 0)
			done[ndone++] = fs->frees[i];
		/* Lost: the index still points at it, so it stays. */
	}
	if (done)
		fs->nfrees = k;
	pthread_mutex_unlock(&fs->frees_lock);
	exts = ndone ? malloc(ndone * sizeof(*exts)) : NULL;
	for (size_t i = 0; exts && i < ndone; i++)
		exts[i] = done[i].ext;
	if (exts)
		qsort(exts, ndone, sizeof(*exts), node_free_cmp);
	/* A data file's records at once: neighbours are one hole. */
	for (size_t i = 0, j; exts && i < ndone; i = j) {
		for (j = i + 1; j < ndone && !kv_ext_large(&exts[i]) &&
				exts[j].file_id == exts[i].file_id &&
				!kv_ext_large(&exts[j]);
		     j++)
			;
		node_free_run(fs, exts + i, j - i);
	}
	/* Without memory to sort them: one by one. */
	for (size_t i = 0; !exts && i < ndone; i++)
		node_free_now(fs, &done[i].ext);
	free(exts);
	free(done);
}

/*
 * Removes the data files of fs->drops that the committed index holds no
 * record in; keeps for later those it cannot tell yet (a batch is open).
 */
static int node_commit_drops(struct fs *fs, int force)
{
	uint32_t *ids = NULL;
	unsigned char *unused = NULL;
	size_t n;
	int rc;

	pthread_mutex_lock(&fs->frees_lock);
	n = fs->ndrops;
	if (n > 0) {
		ids = malloc(n * sizeof(*ids));
		unused = malloc(n);
	}
	if (ids && unused) {
		memcpy(ids, fs->drops, n * sizeof(*ids));
		fs->ndrops = 0;
	} else {
		n = 0;
	}
	pthread_mutex_unlock(&fs->frees_lock);
	rc = idx_commit_files(fs->idx, force, ids, n, unused);
	for (size_t i = 0; i < n; i++) {
		if (unused[i] == 1)
			store_drop_file(fs->store, ids[i]);
		else if (unused[i] == 2)
			node_drop_later(fs, ids[i]);
	}
	free(ids);
	free(unused);
	return rc;
}

int node_commit(struct fs *fs, int force)
{
	/* Files the frees below leave empty are checked at the next one. */
	int rc = node_commit_drops(fs, force);

	node_free_committed(fs);
	return rc;
}

void node_release_inode(struct fs *fs, uint64_t ino)
{
	struct kv_extent ext;
	int rc;

	rc = idx_release_inode(fs->idx, ino, &ext);
	if (rc == -EBUSY || rc == -ENOENT)
		return;
	if (rc < 0) {
		log_err("cannot release inode %llu: %s",
			(unsigned long long)ino, strerror(-rc));
		return;
	}
	node_free_extent(fs, &ext);
}

int node_flush_locked(struct fs *fs, struct node *n)
{
	struct kv_extent ext = {0}, old;
	uint64_t size = n->attr.size;
	struct iovec *iov = NULL;
	uint32_t *crcs = NULL;
	char *path = NULL;
	int rc, cnt;

	if (!n->dirty)
		return 0;
	if (size > 0) {
		crcs = calloc(kv_nchunks(size), sizeof(*crcs));
		iov = calloc(n->nsegs + 1, sizeof(*iov));
		path = node_path(fs, n);
		if (!crcs || !iov || !path) {
			rc = -ENOMEM;
			goto out_free;
		}
		rc = fs->up.make_room
			     ? fs->up.make_room(
				       fs->up.ctx,
				       store_hdr_len(size, strlen(path)) +
					       kv_align_up(size))
			     : 0;
		if (rc < 0)
			goto out_free;
		/* Records end on a KV_ALIGN boundary: zero the padding. */
		node_zero(n, size, kv_align_up(size) - size);
		cnt = node_iov(n, 0, kv_align_up(size), iov);
		rc = store_append_iov(
			fs->store, n->ino, path, iov, cnt, size, crcs,
			node_crcs_known(n->seg_crcs, n->seg_ncrcs, size, crcs),
			&ext);
		if (rc < 0)
			goto out_free;
		if (fs->up.used)
			fs->up.used(fs->up.ctx, (int64_t)kv_extent_span(&ext));
	}
	rc = idx_set_extent(fs->idx, n->ino, size, n->attr.mtime_ns, &ext, crcs,
			    kv_nchunks(size), &old);
	if (rc < 0 && ext.file_id)
		node_free_extent(fs, &ext);
	/* Committed or punched: below the file's recovery horizon now. */
	if (ext.file_id)
		store_append_done(fs->store, ext.file_id);
	if (rc < 0)
		goto out_free;
	free(n->crcs);
	n->crcs = crcs;
	n->ncrcs = kv_nchunks(size);
	n->crcs_loaded = 1;
	crcs = NULL;
	n->attr.ext = ext;
	n->disk_size = size;
	node_discard(fs, n);
	node_free_extent(fs, &old);
	if (fs->up.touch)
		fs->up.touch(fs->up.ctx, n->ino);
	if (fs->saved)
		fs->saved(fs, n, 0);
out_free:
	if (rc < 0)
		log_warn("cannot save %s (inode %llu, %llu bytes): %s",
			 path ? path : "?", (unsigned long long)n->ino,
			 (unsigned long long)size, strerror(-rc));
	free(iov);
	free(crcs);
	free(path);
	return rc;
}

int node_ext_save_locked(struct fs *fs, struct node *n)
{
	struct kv_extent ext = {.hdr_len = KV_EXT_LARGE, .off = n->ino}, old;
	int rc;

	if (!n->x_dirty)
		return 0;
	ext.len = n->attr.size;
	rc = idx_set_extent(fs->idx, n->ino, n->attr.size, n->attr.mtime_ns,
			    &ext, NULL, 0, &old);
	if (rc < 0) {
		log_warn("cannot save the size of extent file inode %llu: %s",
			 (unsigned long long)n->ino, strerror(-rc));
		return rc;
	}
	n->x_dirty = 0;
	n->disk_size = n->attr.size;
	/* The same file, already in the index: nothing to free. */
	if (!kv_ext_large(&old))
		node_free_extent(fs, &old);
	return 0;
}

void node_flush_all(struct fs *fs, int (*save)(struct fs *fs, struct node *n))
{
	struct node **dirty = NULL;
	size_t ndirty = 0, cap = 0;

	pthread_mutex_lock(&fs->nodes_lock);
	for (size_t b = 0; b < fs->nbuckets; b++) {
		for (struct node *n = fs->nodes[b]; n; n = n->hnext) {
			if (!n->dirty && !n->x_dirty)
				continue;
			if (ndirty == cap) {
				size_t ncap = cap ? 2 * cap : 64;
				struct node **nd =
					realloc(dirty, ncap * sizeof(*nd));

				if (!nd)
					break;
				dirty = nd;
				cap = ncap;
			}
			n->pins++;
			dirty[ndirty++] = n;
		}
	}
	pthread_mutex_unlock(&fs->nodes_lock);
	for (size_t i = 0; i < ndirty; i++) {
		pthread_rwlock_wrlock(&dirty[i]->rw);
		if (dirty[i]->attr.nlink > 0)
			save(fs, dirty[i]);
		pthread_rwlock_unlock(&dirty[i]->rw);
		node_put(fs, dirty[i], 0, 0, 1);
	}
	free(dirty);
}

/*
 * fs_relink; with evict set (an eviction by the daemon), an inode left
 * with no name and no open handle has its record freed now, not when the
 * kernel forgets it: that comes only after the entry invalidation and a
 * FORGET that waits for a free loop thread, and the store that evicted it
 * to make room must not write while the record still takes space. The
 * node is marked evicted under the lock under which fs_open_node counts
 * opens, so a racing OPEN is either counted in time or refused. Not for
 * unlink and rename: an OPEN racing with those must still find the file.
 */
static void node_relink(struct fs *fs, uint64_t ino, uint32_t nlink,
			int64_t now, int evict)
{
	struct node *n = node_find(fs, ino);
	int free_now;

	if (!n) {
		if (nlink == 0)
			node_release_inode(fs, ino);
		return;
	}
	pthread_rwlock_wrlock(&n->rw);
	n->attr.nlink = nlink;
	n->attr.ctime_ns = now;
	free_now = evict && nlink == 0 && S_ISREG(n->attr.mode) &&
		   node_nopen(fs, n) == 0;
	if (free_now)
		n->evicted = 1;
	pthread_rwlock_unlock(&n->rw);
	if (free_now)
		node_release_inode(fs, ino);
	node_put(fs, n, 0, 0, 1);
}

void fs_relink(struct fs *fs, uint64_t ino, uint32_t nlink, int64_t now)
{
	node_relink(fs, ino, nlink, now, 0);
}

static struct timespec fs_ts(int64_t ns)
{
	/* Floor division: times before 1970 keep tv_nsec in [0, 1e9). */
	int64_t sec = ns / 1000000000, nsec = ns % 1000000000;

	if (nsec < 0) {
		sec--;
		nsec += 1000000000;
	}
	return (struct timespec){.tv_sec = sec, .tv_nsec = nsec};
}

void fs_fill_stat(struct fs *fs, struct stat *st, const struct idx_attr *a)
{
	uint64_t blocks;

	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_rdev = (dev_t)a->rdev;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	/* Directories look like ext4's smallest ones to tools like du. */
	st->st_size = S_ISDIR(a->mode) ? 4096 : (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)(kv_align_up((uint64_t)st->st_size) / 512);
	/* An extent file's holes take no room, as du(1) sees on ext4. */
	if (kv_ext_large(&a->ext) &&
	    extf_blocks_at(fs->ext_fd, a->ino, &blocks) == 0)
		st->st_blocks = (blkcnt_t)blocks;
	st->st_atim = fs_ts(a->atime_ns);
	st->st_mtim = fs_ts(a->mtime_ns);
	st->st_ctim = fs_ts(a->ctime_ns);
}

int node_unname(struct fs *fs, const struct idx_name *e, int evict)
{
	int64_t now = fs_now_ns();
	uint64_t ino = e->ino;
	uint32_t nlink;

	/* The name may have been replaced since the listing. */
	if (idx_unlink_ino(fs->idx, e->parent, e->name, ino, now, &nlink) < 0)
		return 0;
	vc_bump(fs->vc, e->parent, e->name, 0, 0);
	notify_entry(fs->notify, e->parent, e->name);
	/* An evicted file's bytes go: every name of it (hard links) goes. */
	while (evict && nlink > 0) {
		struct idx_name o = {.ino = ino};

		if (idx_name_of(fs->idx, ino, &o.parent, o.name,
				sizeof(o.name)) < 0 ||
		    idx_unlink(fs->idx, o.parent, o.name, 0, now, &ino,
			       &nlink) < 0)
			break;
		vc_bump(fs->vc, o.parent, o.name, 0, 0);
		notify_entry(fs->notify, o.parent, o.name);
	}
	node_relink(fs, ino, nlink, now, evict);
	/*
	 * A removal by the daemon is never undone by a crash either; and an
	 * eviction's room is made when the record is freed, after the commit.
	 */
	node_commit(fs, 1);
	return 1;
}

int node_evict_name(struct fs *fs, const struct idx_name *e)
{
	return node_is_busy(fs, e->ino) ? 0 : node_unname(fs, e, 1);
}
