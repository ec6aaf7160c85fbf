/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's RADOS client (rtier.h): object names, the block and
 * directory-index layouts, and the checks a read makes, on librados; the
 * use shards and the sweeper are in rtier_use.c.
 */
#include "rtier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "crc32c.h"
#include "kvtypes.h"
#include "rtier_int.h"

/* Bytes a get asks for in its first round trip (most blocks fit). */
#define RTIER_FIRST_READ (4u << 20)
#define RTIER_XATTR_LEN "kvfs.len"
#define RTIER_XATTR_CRCS "kvfs.crcs"
/* Names a listing asks for per round trip. */
#define RTIER_LIST_PAGE 512u

static void rtier_say(char *err, size_t errlen, const char *what, int rc)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", what, strerror(-rc));
}

int rtier_open(struct rtier **out, const struct rtier_config *cfg, char *err,
	       size_t errlen)
{
	char tmo[16];
	struct rtier *rt;
	int rc;

	if (!cfg->pool || !*cfg->pool) {
		rtier_say(err, errlen, "no pool given", -EINVAL);
		return -EINVAL;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	pthread_mutex_init(&rt->dirs_lock, NULL);
	snprintf(tmo, sizeof(tmo), "%u", cfg->timeout_s ? cfg->timeout_s : 10);
	rc = rados_create(&rt->cluster, cfg->id);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot create a RADOS handle", rc);
		pthread_mutex_destroy(&rt->dirs_lock);
		free(rt);
		return rc;
	}
	rc = rados_conf_read_file(rt->cluster, cfg->conf);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot read the Ceph configuration",
			  rc);
		goto out_shutdown;
	}
	/* Nothing may wait without bound on a sick cluster. */
	if ((rc = rados_conf_set(rt->cluster, "rados_osd_op_timeout", tmo)) <
		    0 ||
	    (rc = rados_conf_set(rt->cluster, "rados_mon_op_timeout", tmo)) <
		    0 ||
	    (rc = rados_conf_set(rt->cluster, "client_mount_timeout", tmo)) <
		    0) {
		rtier_say(err, errlen, "cannot set the RADOS timeouts", rc);
		goto out_shutdown;
	}
	rc = rados_connect(rt->cluster);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot connect to the cluster", rc);
		goto out_shutdown;
	}
	rc = rados_ioctx_create(rt->cluster, cfg->pool, &rt->io);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot open the pool", rc);
		goto out_shutdown;
	}
	if (cfg->ns)
		rados_ioctx_set_namespace(rt->io, cfg->ns);
	*out = rt;
	return 0;
out_shutdown:
	rados_shutdown(rt->cluster);
	pthread_mutex_destroy(&rt->dirs_lock);
	free(rt);
	return rc;
}

/* Forgets every directory listed so far. Called with dirs_lock held. */
static void rtier_dirs_clear(struct rtier *rt)
{
	for (unsigned i = 0; i < RTIER_DIR_BUCKETS; i++) {
		while (rt->dirs[i]) {
			struct rtier_dirent *d = rt->dirs[i];

			rt->dirs[i] = d->next;
			free(d);
		}
	}
	rt->ndirs = 0;
}

int rtier_fsid(struct rtier *rt, char *buf, size_t len)
{
	int rc = rados_cluster_fsid(rt->cluster, buf, len);

	return rc < 0 ? rc : 0;
}

void rtier_close(struct rtier *rt)
{
	if (!rt)
		return;
	rados_ioctx_destroy(rt->io);
	rados_shutdown(rt->cluster);
	rtier_dirs_clear(rt);
	pthread_mutex_destroy(&rt->dirs_lock);
	free(rt);
}

/* The bucket of directory path (its first len bytes). */
static unsigned rtier_dir_bucket(const char *path, size_t len)
{
	return crc32c(0, path, len) % RTIER_DIR_BUCKETS;
}

/* Whether this struct rtier listed directory path (len bytes) already. */
static int rtier_dir_known(struct rtier *rt, const char *path, size_t len)
{
	const struct rtier_dirent *d;
	int known = 0;

	pthread_mutex_lock(&rt->dirs_lock);
	for (d = rt->dirs[rtier_dir_bucket(path, len)]; d && !known;
	     d = d->next)
		known = d->len == len && memcmp(d->path, path, len) == 0;
	pthread_mutex_unlock(&rt->dirs_lock);
	return known;
}

/*
 * Remembers that directory path (len bytes) is listed in its parent's
 * index. Memory is no reason to fail: an entry that cannot be kept is
 * listed again by the next put.
 */
static void rtier_dir_add(struct rtier *rt, const char *path, size_t len)
{
	unsigned b = rtier_dir_bucket(path, len);
	struct rtier_dirent *d;

	if (rtier_dir_known(rt, path, len))
		return;
	d = malloc(sizeof(*d) + len);
	if (!d)
		return;
	d->len = len;
	memcpy(d->path, path, len);
	pthread_mutex_lock(&rt->dirs_lock);
	if (rt->ndirs >= RTIER_DIR_SET_MAX)
		rtier_dirs_clear(rt);
	d->next = rt->dirs[b];
	rt->dirs[b] = d;
	rt->ndirs++;
	pthread_mutex_unlock(&rt->dirs_lock);
}

int rtier_batch_reserve(struct rtier_batch *b, size_t n)
{
	rados_completion_t *cs;
	rados_write_op_t *ops;
	int *rcs;

	if (n <= b->cap)
		return 0;
	ops = realloc(b->ops, n * sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	b->ops = ops;
	cs = realloc(b->cs, n * sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	b->cs = cs;
	rcs = realloc(b->rcs, n * sizeof(*rcs));
	if (!rcs)
		return -ENOMEM;
	b->rcs = rcs;
	b->cap = n;
	return 0;
}

int rtier_batch_add(struct rtier *rt, struct rtier_batch *b,
		    rados_write_op_t op, const char *oid)
{
	rados_completion_t c = NULL;
	int rc;

	if (b->n == b->cap &&
	    rtier_batch_reserve(b, b->cap ? 2 * b->cap : 8) < 0) {
		rados_release_write_op(op);
		return -ENOMEM;
	}
	rc = rados_aio_create_completion2(NULL, NULL, &c);
	if (rc == 0)
		rc = rados_aio_write_op_operate(op, rt->io, c, oid, NULL, 0);
	if (rc < 0 && c) {
		rados_aio_release(c);
		c = NULL;
	}
	b->ops[b->n] = op;
	b->cs[b->n] = c;
	b->rcs[b->n] = rc;
	b->n++;
	return rc;
}

int rtier_batch_wait(struct rtier_batch *b, int ignore)
{
	int first = 0;

	for (size_t i = 0; i < b->n; i++) {
		if (b->cs[i]) {
			rados_aio_wait_for_complete(b->cs[i]);
			b->rcs[i] = rados_aio_get_return_value(b->cs[i]);
			rados_aio_release(b->cs[i]);
		}
		rados_release_write_op(b->ops[i]);
		if (b->rcs[i] < 0 && b->rcs[i] != ignore && first == 0)
			first = b->rcs[i];
	}
	b->n = 0;
	return first;
}

void rtier_batch_free(struct rtier_batch *b)
{
	free(b->ops);
	free(b->cs);
	free(b->rcs);
	*b = (struct rtier_batch){0};
}

int rtier_names(const char *path, char *boid, char *doid, const char **name)
{
	size_t len = strlen(path);
	const char *slash;

	if (path[0] != '/' || len < 2 || len > RTIER_PATH_MAX ||
	    path[len - 1] == '/' || strstr(path, "//"))
		return -EINVAL;
	slash = strrchr(path, '/');
	snprintf(boid, RTIER_OID_MAX, "b:%s", path);
	if (slash == path)
		snprintf(doid, RTIER_OID_MAX, "d:/");
	else
		snprintf(doid, RTIER_OID_MAX, "d:%.*s", (int)(slash - path),
			 path);
	*name = slash + 1;
	return 0;
}

void rtier_le64(char *out, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		out[i] = (char)(v >> (8 * i));
}

uint64_t rtier_get_le64(const char *in)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | (unsigned char)in[i];
	return v;
}

/* The block's write: its bytes, length and chunk CRCs; NULL: no memory. */
static rados_write_op_t rtier_block_op(const void *buf, uint64_t len,
				       const uint32_t *crcs)
{
	uint32_t n = kv_nchunks(len);
	rados_write_op_t op;
	char slen[24];
	char *blob;

	blob = malloc((size_t)n * 4 + 1);
	if (!blob)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++)
			blob[4 * i + b] = (char)(crcs[i] >> (8 * b));
	snprintf(slen, sizeof(slen), "%" PRIu64, len);
	op = rados_create_write_op();
	if (op) {
		/* Values are copied into the op: blob can go now. */
		rados_write_op_write_full(op, buf, (size_t)len);
		rados_write_op_setxattr(op, RTIER_XATTR_LEN, slen,
					strlen(slen));
		rados_write_op_setxattr(op, RTIER_XATTR_CRCS, blob,
					(size_t)n * 4);
	}
	free(blob);
	return op;
}

/* Adds to b a write of one omap key (name -> vlen bytes of val) to oid. */
static int rtier_omap_set1(struct rtier *rt, struct rtier_batch *b,
			   const char *oid, const char *name, const char *val,
			   size_t vlen)
{
	rados_write_op_t op = rados_create_write_op();

	if (!op)
		return -ENOMEM;
	rados_write_op_omap_set(op, &name, &val, &vlen, 1);
	return rtier_batch_add(rt, b, op, oid);
}

/*
 * Adds to b the listing of each ancestor directory of path in its
 * parent's index that this struct rtier has not listed yet; *ends gets
 * each one's length in path (at most *n of them). "/a/b/c" lists "a" in
 * "d:/" and "b" in "d:/a".
 */
static int rtier_ancestors(struct rtier *rt, struct rtier_batch *b,
			   const char *path, size_t *ends, size_t *n)
{
	static const char dirval[] = "\xff\xff\xff\xff\xff\xff\xff\xff";
	char oid[RTIER_OID_MAX], name[RTIER_PATH_MAX + 1];
	size_t max = *n, prev = 0;
	const char *s;
	int rc = 0;

	*n = 0;
	for (s = strchr(path + 1, '/'); s && rc == 0; s = strchr(s + 1, '/')) {
		size_t end = (size_t)(s - path);

		if (*n < max && !rtier_dir_known(rt, path, end)) {
			if (prev == 0)
				snprintf(oid, sizeof(oid), "d:/");
			else
				snprintf(oid, sizeof(oid), "d:%.*s", (int)prev,
					 path);
			snprintf(name, sizeof(name), "%.*s",
				 (int)(end - prev - 1), path + prev + 1);
			rc = rtier_omap_set1(rt, b, oid, name, dirval, 8);
			ends[(*n)++] = end;
		}
		prev = end;
	}
	return rc;
}

int rtier_put(struct rtier *rt, const char *path, const void *buf, uint64_t len,
	      const uint32_t *crcs)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX], uoid[RTIER_OID_MAX];
	char vlen[8], use[RTIER_USE_VAL];
	size_t ends[RTIER_PATH_MAX / 2], nends = RTIER_PATH_MAX / 2;
	struct rtier_batch b = {0};
	struct timespec now;
	rados_write_op_t op;
	const char *name;
	int rc, rc2;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	rtier_use_oid(path, uoid);
	clock_gettime(CLOCK_REALTIME, &now);
	rtier_use_val(use, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, len);
	/*
	 * The use with the block: a use without its block is dropped by the
	 * sweeper, a block without its use would never be swept.
	 */
	op = rtier_block_op(buf, len, crcs);
	if (!op)
		return -ENOMEM;
	rc = rtier_batch_add(rt, &b, op, boid);
	if (rc == 0)
		rc = rtier_omap_set1(rt, &b, uoid, path, use, sizeof(use));
	rc2 = rtier_batch_wait(&b, 0);
	if (rc == 0)
		rc = rc2;
	/* The names after the block: whoever finds a name finds its bytes. */
	if (rc == 0) {
		rtier_le64(vlen, len);
		rc = rtier_omap_set1(rt, &b, doid, name, vlen, sizeof(vlen));
	}
	if (rc == 0)
		rc = rtier_ancestors(rt, &b, path, ends, &nends);
	else
		nends = 0;
	rc2 = rtier_batch_wait(&b, 0);
	if (rc == 0)
		rc = rc2;
	for (size_t i = 0; rc == 0 && i < nends; i++)
		rtier_dir_add(rt, path, ends[i]);
	rtier_batch_free(&b);
	return rc;
}

int rtier_probe(struct rtier *rt, const char *dir, size_t n,
		const char *const *names, int *found, uint64_t *sizes)
{
	char doid[RTIER_OID_MAX];
	rados_omap_iter_t it = NULL;
	rados_read_op_t op;
	int rc, prval = 0;
	char *key, *val;
	size_t vlen;

	if (dir[0] != '/' || strlen(dir) > RTIER_PATH_MAX)
		return -EINVAL;
	snprintf(doid, sizeof(doid), "d:%s", dir);
	memset(found, 0, n * sizeof(*found));
	if (n == 0)
		return 0;
	op = rados_create_read_op();
	if (!op)
		return -ENOMEM;
	rados_read_op_omap_get_vals_by_keys(op, (char const *const *)names, n,
					    &it, &prval);
	rc = rados_read_op_operate(op, rt->io, doid, 0);
	if (rc == -ENOENT)
		rc = 0; /* nothing was ever stored in dir */
	else if (rc == 0 && prval < 0)
		rc = prval;
	else if (rc == 0)
		while (rados_omap_get_next(it, &key, &val, &vlen) == 0 && key)
			for (size_t i = 0; i < n; i++) {
				if (found[i] || strcmp(key, names[i]) != 0)
					continue;
				sizes[i] = vlen == 8 ? rtier_get_le64(val) : 0;
				found[i] = sizes[i] != RTIER_SWEPT;
			}
	/* Made when the op was prepared: freed whatever the outcome. */
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return rc;
}

/* The length and CRCs a block's xattrs give: 0, or -EBADMSG. */
static int rtier_meta(rados_xattrs_iter_t it, uint64_t *len, char **crcs,
		      size_t *ncrc_bytes)
{
	const char *name, *val;
	int have_len = 0;
	size_t vlen;

	*crcs = NULL;
	while (rados_getxattrs_next(it, &name, &val, &vlen) == 0 && name) {
		if (strcmp(name, RTIER_XATTR_LEN) == 0 && vlen < 24) {
			char tmp[24], *end;

			memcpy(tmp, val, vlen);
			tmp[vlen] = '\0';
			*len = strtoull(tmp, &end, 10);
			have_len = vlen > 0 && *end == '\0';
		} else if (strcmp(name, RTIER_XATTR_CRCS) == 0 && !*crcs) {
			*crcs = malloc(vlen + 1);
			/* An empty block's CRCs are empty: val may be NULL. */
			if (*crcs && vlen)
				memcpy(*crcs, val, vlen);
			*ncrc_bytes = vlen;
		}
	}
	return have_len && *crcs ? 0 : -EBADMSG;
}

/*
 * Checks len bytes, in buffers of seg bytes (a KV_CHUNK_SIZE multiple, or
 * one buffer of any size), against the stored CRCs.
 */
static int rtier_verify_segs(const char *const *segs, size_t seg, uint64_t len,
			     const char *crcs, size_t ncrc_bytes)
{
	uint32_t n = kv_nchunks(len);

	if (ncrc_bytes != (size_t)n * 4)
		return -EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = (uint64_t)i * KV_CHUNK_SIZE;
		size_t clen = len - off < KV_CHUNK_SIZE ? (size_t)(len - off)
							: KV_CHUNK_SIZE;
		uint32_t want = 0;

		for (int b = 3; b >= 0; b--)
			want = want << 8 | (unsigned char)crcs[4 * i + b];
		if (crc32c(0, segs[off / seg] + off % seg, clen) != want)
			return -EBADMSG;
	}
	return 0;
}

/* Checks buf (len bytes) against the stored CRCs. */
static int rtier_verify(const char *buf, uint64_t len, const char *crcs,
			size_t ncrc_bytes)
{
	const char *segs[1] = {buf};

	return rtier_verify_segs(segs, len ? len : 1, len, crcs, ncrc_bytes);
}

/* What a get's read op learns besides the bytes (rtier_get_meta). */
struct rtier_got {
	rados_xattrs_iter_t it;
	int pr_stat, pr_x;
	uint64_t psize; /* the object's size */
	time_t mtime;
	uint64_t want; /* kvfs.len */
	char *crcs;    /* kvfs.crcs, malloc'd */
	size_t ncrc_bytes;
};

/* Asks op for the block's size and metadata too. */
static void rtier_want_meta(rados_read_op_t op, struct rtier_got *g)
{
	*g = (struct rtier_got){0};
	rados_read_op_stat(op, &g->psize, &g->mtime, &g->pr_stat);
	rados_read_op_getxattrs(op, &g->it, &g->pr_x);
}

/*
 * After op ran (rc): its metadata, then the lengths checked: -ENODATA when
 * the object holds fewer bytes than its length says (provably short),
 * -EBADMSG when more or when the metadata is damaged.
 */
static int rtier_got_meta(int rc, struct rtier_got *g)
{
	if (rc == 0 && g->pr_x == 0)
		rc = rtier_meta(g->it, &g->want, &g->crcs, &g->ncrc_bytes);
	/* Made when the op was prepared: freed whatever the outcome. */
	if (g->it)
		rados_getxattrs_end(g->it);
	g->it = NULL;
	if (rc == 0)
		rc = g->pr_stat < 0 ? g->pr_stat : g->pr_x;
	if (rc == 0 && g->psize < g->want)
		rc = -ENODATA;
	else if (rc == 0 && g->psize > g->want)
		rc = -EBADMSG;
	return rc;
}

/* Most buffers rtier_get_segs() reads into in its one round trip. */
#define RTIER_MAX_SEGS 64

int rtier_get_segs(struct rtier *rt, const char *path, char *const *segs,
		   size_t seg, size_t nsegs, uint64_t expect)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX];
	int rc, pr_read[RTIER_MAX_SEGS], pr_reads = 0;
	size_t got[RTIER_MAX_SEGS];
	struct rtier_got g;
	const char *name;
	rados_read_op_t op;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	if (seg % KV_CHUNK_SIZE || nsegs > RTIER_MAX_SEGS ||
	    (uint64_t)nsegs * seg < expect)
		return -EINVAL;
	op = rados_create_read_op();
	if (!op)
		return -ENOMEM;
	rtier_want_meta(op, &g);
	for (size_t i = 0; i < nsegs; i++) {
		uint64_t off = (uint64_t)i * seg;

		pr_read[i] = 0;
		rados_read_op_read(op, off,
				   expect - off < seg ? (size_t)(expect - off)
						      : seg,
				   segs[i], &got[i], &pr_read[i]);
	}
	rc = rados_read_op_operate(op, rt->io, boid, 0);
	for (size_t i = 0; i < nsegs && !pr_reads; i++)
		pr_reads = pr_read[i];
	rc = rtier_got_meta(rc == 0 ? pr_reads : rc, &g);
	rados_release_read_op(op);
	if (rc == 0 && g.want != expect)
		rc = -ESTALE;
	if (rc == 0)
		rc = rtier_verify_segs((const char *const *)segs, seg, g.want,
				       g.crcs, g.ncrc_bytes);
	free(g.crcs);
	return rc;
}

int rtier_get(struct rtier *rt, const char *path, void **out, uint64_t *len)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX];
	int rc, pr_read = 0;
	struct rtier_got g;
	size_t got = 0;
	char *buf, *nb;
	const char *name;
	rados_read_op_t op;
	uint64_t want;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	buf = malloc(RTIER_FIRST_READ);
	op = rados_create_read_op();
	if (!buf || !op) {
		free(buf);
		if (op)
			rados_release_read_op(op);
		return -ENOMEM;
	}
	/* One round trip: size, metadata and (most often) every byte. */
	rtier_want_meta(op, &g);
	rados_read_op_read(op, 0, RTIER_FIRST_READ, buf, &got, &pr_read);
	rc = rados_read_op_operate(op, rt->io, boid, 0);
	rc = rtier_got_meta(rc == 0 ? pr_read : rc, &g);
	rados_release_read_op(op);
	want = g.want;
	if (rc == 0 && want > got) {
		nb = realloc(buf, (size_t)want);
		if (!nb)
			rc = -ENOMEM;
		else
			buf = nb;
		while (rc == 0 && got < want) {
			int r = rados_read(rt->io, boid, buf + got,
					   (size_t)(want - got), got);

			if (r < 0)
				rc = r;
			else if (r == 0)
				rc = -ENODATA; /* cut short meanwhile */
			else
				got += (size_t)r;
		}
	}
	if (rc == 0)
		rc = rtier_verify(buf, want, g.crcs, g.ncrc_bytes);
	free(g.crcs);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = want;
	return 0;
}

int rtier_remove(struct rtier *rt, const char *path)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX], uoid[RTIER_OID_MAX];
	rados_write_op_t op;
	const char *name;
	int rc, rc2, rc3;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	/* The name first: nobody is sent to a block that is going. */
	op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	rados_write_op_omap_rm_keys(op, &name, 1);
	rc2 = rados_write_op_operate(op, rt->io, doid, NULL, 0);
	rados_release_write_op(op);
	/* A name still there keeps its block (and a sick cluster one wait). */
	if (rc2 < 0 && rc2 != -ENOENT)
		return rc2;
	rc = rados_remove(rt->io, boid);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	/* Its use last: a block is never left where the sweeper cannot see. */
	rtier_use_oid(path, uoid);
	op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	rados_write_op_omap_rm_keys(op, &path, 1);
	rc3 = rados_write_op_operate(op, rt->io, uoid, NULL, 0);
	rados_release_write_op(op);
	if (rc == 0 && rc3 < 0 && rc3 != -ENOENT)
		rc = rc3;
	return rc;
}

/*
 * One page of directory oid's index after key *after: fn for each name,
 * *after the page's last name, *more whether names follow. 1 when fn
 * stopped, 0, or -errno.
 */
static int rtier_list_page(struct rtier *rt, const char *oid, char *after,
			   unsigned char *more, rtier_list_fn fn, void *arg)
{
	rados_omap_iter_t it = NULL;
	int rc, prval = 0, stop = 0;
	rados_read_op_t op;
	char *key, *val;
	uint64_t size;
	size_t vlen;

	*more = 0;
	op = rados_create_read_op();
	if (!op)
		return -ENOMEM;
	rados_read_op_omap_get_vals2(op, after, "", RTIER_LIST_PAGE, &it, more,
				     &prval);
	rc = rados_read_op_operate(op, rt->io, oid, 0);
	if (rc == 0)
		rc = prval;
	while (rc == 0 && !stop &&
	       rados_omap_get_next(it, &key, &val, &vlen) == 0 && key) {
		if (strlen(key) > RTIER_PATH_MAX) {
			rc = -EBADMSG; /* not a name a put stored */
			break;
		}
		strcpy(after, key);
		size = vlen == 8 ? rtier_get_le64(val) : 0;
		stop = size == RTIER_SWEPT ? 0 : fn(arg, key, size);
	}
	/* Made when the op was prepared: freed whatever the outcome. */
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	if (rc < 0)
		*more = 0;
	return rc < 0 ? rc : stop ? 1 : 0;
}

int rtier_list(struct rtier *rt, const char *dir, rtier_list_fn fn, void *arg)
{
	char doid[RTIER_OID_MAX], after[RTIER_PATH_MAX + 1] = "";
	unsigned char more = 0;
	int rc;

	if (dir[0] != '/' || strlen(dir) > RTIER_PATH_MAX)
		return -EINVAL;
	snprintf(doid, sizeof(doid), "d:%s", dir);
	do {
		rc = rtier_list_page(rt, doid, after, &more, fn, arg);
	} while (rc == 0 && more);
	if (rc == -ENOENT)
		return 0; /* nothing was ever stored in dir */
	return rc < 0 ? rc : 0;
}
