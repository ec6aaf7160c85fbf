/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's last-use index and sweeper (rtier.h): the use shards
 * "u:" N, the pool's quota, the sweeper's lease on "kvfs.sweeper", and the
 * sweep that removes least recently used blocks. The shards are read in
 * parallel (one aio read per shard per page) and a sweep removes its
 * blocks in batches of parallel operations, so that a sweep of thousands
 * of blocks costs a few dozen round trip latencies, not thousands.
 */
#include "rtier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rados/librados.h>

#include "crc32c.h"
#include "rtier_int.h"

/* Use entries a shard read asks for per round trip. */
#define RTIER_USE_PAGE 1000u
/* Blocks a sweep removes per batch of parallel operations. */
#define RTIER_SWEEP_BATCH 128u
#define RTIER_SWEEP_OID "kvfs.sweeper"
#define RTIER_SWEEP_LOCK "sweep"

unsigned rtier_use_oid(const char *path, char *oid)
{
	unsigned shard = crc32c(0, path, strlen(path)) % RTIER_USE_SHARDS;

	snprintf(oid, RTIER_OID_MAX, "u:%u", shard);
	return shard;
}

void rtier_use_val(char *out, int64_t time_ns, uint64_t size)
{
	rtier_le64(out, (uint64_t)time_ns);
	rtier_le64(out + 8, size);
}

/* Checks that path is one a put accepts. */
static int rtier_path_ok(const char *path)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX];
	const char *name;

	return rtier_names(path, boid, doid, &name);
}

/* Adds to b the use of every path of shard s in one omap write. */
static int rtier_touch_shard(struct rtier *rt, struct rtier_batch *b,
			     unsigned s, size_t n, const char *const *paths,
			     const uint64_t *sizes, const int64_t *times_ns)
{
	const char **keys = malloc(n * sizeof(*keys));
	const char **vals = malloc(n * sizeof(*vals));
	size_t *lens = malloc(n * sizeof(*lens));
	char *blob = malloc(n * RTIER_USE_VAL), oid[RTIER_OID_MAX];
	rados_write_op_t op = NULL;
	size_t k = 0;
	int rc = -ENOMEM;

	if (!keys || !vals || !lens || !blob)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (rtier_use_oid(paths[i], oid) != s)
			continue;
		rtier_use_val(blob + k * RTIER_USE_VAL, times_ns[i], sizes[i]);
		keys[k] = paths[i];
		vals[k] = blob + k * RTIER_USE_VAL;
		lens[k] = RTIER_USE_VAL;
		k++;
	}
	rc = 0;
	if (k == 0)
		goto out;
	op = rados_create_write_op();
	if (!op) {
		rc = -ENOMEM;
		goto out;
	}
	/* Keys and values are copied into the op. */
	rados_write_op_omap_set(op, keys, vals, lens, k);
	snprintf(oid, sizeof(oid), "u:%u", s);
	rc = rtier_batch_add(rt, b, op, oid);
out:
	free(keys);
	free(vals);
	free(lens);
	free(blob);
	return rc;
}

_Static_assert(RTIER_USE_SHARDS <= 32, "rtier_touch's shard mask");

int rtier_touch(struct rtier *rt, size_t n, const char *const *paths,
		const uint64_t *sizes, const int64_t *times_ns)
{
	char oid[RTIER_OID_MAX];
	uint32_t used = 0;
	struct rtier_batch b = {0};
	int rc = 0, rc2;

	for (size_t i = 0; i < n; i++) {
		rc = rtier_path_ok(paths[i]);
		if (rc < 0)
			return rc;
		used |= 1u << rtier_use_oid(paths[i], oid);
	}
	for (unsigned s = 0; s < RTIER_USE_SHARDS && rc == 0; s++)
		if (used & 1u << s)
			rc = rtier_touch_shard(rt, &b, s, n, paths, sizes,
					       times_ns);
	rc2 = rtier_batch_wait(&b, 0);
	rtier_batch_free(&b);
	return rc < 0 ? rc : rc2;
}

/* Called for each use entry a scan finds; non-zero (-errno) stops it. */
typedef int (*rtier_use_fn)(void *arg, const char *path, int64_t time_ns,
			    uint64_t size);

/* One shard's read cursor in a scan of every shard. */
struct rtier_cursor {
	char after[RTIER_PATH_MAX + 1];
	rados_read_op_t op;
	rados_completion_t c;
	rados_omap_iter_t it;
	unsigned char more;
	int prval, rc, done;
};

/* Issues cursor s's read of its shard's next page. */
static void rtier_cursor_issue(struct rtier *rt, struct rtier_cursor *cur,
			       unsigned s)
{
	char oid[RTIER_OID_MAX];

	snprintf(oid, sizeof(oid), "u:%u", s);
	cur->it = NULL;
	cur->c = NULL;
	cur->more = 0;
	cur->prval = 0;
	cur->op = rados_create_read_op();
	if (!cur->op) {
		cur->rc = -ENOMEM;
		return;
	}
	rados_read_op_omap_get_vals2(cur->op, cur->after, "", RTIER_USE_PAGE,
				     &cur->it, &cur->more, &cur->prval);
	cur->rc = rados_aio_create_completion2(NULL, NULL, &cur->c);
	if (cur->rc == 0)
		cur->rc = rados_aio_read_op_operate(cur->op, rt->io, cur->c,
						    oid, 0);
	if (cur->rc < 0 && cur->c) {
		rados_aio_release(cur->c);
		cur->c = NULL;
	}
}

/*
 * Waits for cursor cur's page, gives fn each entry (malformed ones are
 * skipped) unless an error came first (*rc), and releases the read.
 */
static void rtier_cursor_finish(struct rtier_cursor *cur, int *rc,
				rtier_use_fn fn, void *arg)
{
	char *key, *val;
	size_t vlen;

	if (cur->c) {
		rados_aio_wait_for_complete(cur->c);
		cur->rc = rados_aio_get_return_value(cur->c);
		rados_aio_release(cur->c);
		if (cur->rc == 0)
			cur->rc = cur->prval;
	}
	if (cur->rc == -ENOENT) {
		cur->rc = 0; /* a shard nobody used yet */
		cur->more = 0;
	}
	if (cur->rc < 0 && *rc == 0)
		*rc = cur->rc;
	while (*rc == 0 &&
	       rados_omap_get_next(cur->it, &key, &val, &vlen) == 0 && key) {
		if (strlen(key) > RTIER_PATH_MAX) {
			*rc = -EBADMSG; /* not a path a put stored */
			break;
		}
		strcpy(cur->after, key);
		if (vlen == RTIER_USE_VAL)
			*rc = fn(arg, key, (int64_t)rtier_get_le64(val),
				 rtier_get_le64(val + 8));
	}
	if (cur->it)
		rados_omap_get_end(cur->it);
	if (cur->op)
		rados_release_read_op(cur->op);
	cur->done = *rc < 0 || !cur->more;
}

/* fn for every entry of every use shard, the shards read in parallel. */
static int rtier_use_scan(struct rtier *rt, rtier_use_fn fn, void *arg)
{
	struct rtier_cursor *cur = calloc(RTIER_USE_SHARDS, sizeof(*cur));
	unsigned left = RTIER_USE_SHARDS;
	int rc = 0;

	if (!cur)
		return -ENOMEM;
	while (rc == 0 && left > 0) {
		for (unsigned s = 0; s < RTIER_USE_SHARDS; s++)
			if (!cur[s].done)
				rtier_cursor_issue(rt, &cur[s], s);
		left = 0;
		for (unsigned s = 0; s < RTIER_USE_SHARDS; s++) {
			if (cur[s].done)
				continue;
			rtier_cursor_finish(&cur[s], &rc, fn, arg);
			left += !cur[s].done;
		}
	}
	free(cur);
	return rc;
}

struct rtier_count {
	uint64_t bytes, blocks;
};

static int rtier_count_one(void *arg, const char *path, int64_t time_ns,
			   uint64_t size)
{
	struct rtier_count *c = arg;

	c->bytes += size;
	c->blocks++;
	return 0;
}

int rtier_usage(struct rtier *rt, uint64_t *bytes, uint64_t *blocks)
{
	struct rtier_count c = {0};
	int rc = rtier_use_scan(rt, rtier_count_one, &c);

	if (rc < 0)
		return rc;
	*bytes = c.bytes;
	*blocks = c.blocks;
	return 0;
}

/*
 * The value of "quota_max_bytes" in pool id's object of an "osd pool ls
 * detail" JSON reply (NUL-terminated): 0 or -EBADMSG.
 */
static int rtier_quota_parse(const char *json, int64_t id, uint64_t *bytes)
{
	static const char qkey[] = "\"quota_max_bytes\":";
	const char *pool, *next, *q;
	char idkey[48], *end;

	snprintf(idkey, sizeof(idkey), "\"pool_id\":%" PRId64 ",", id);
	pool = strstr(json, idkey);
	if (!pool)
		return -EBADMSG;
	next = strstr(pool + 1, "\"pool_id\":");
	q = strstr(pool, qkey);
	if (!q || (next && q > next))
		return -EBADMSG;
	q += strlen(qkey);
	while (*q == ' ')
		q++;
	*bytes = strtoull(q, &end, 10);
	return end == q ? -EBADMSG : 0;
}

int rtier_quota(struct rtier *rt, uint64_t *bytes)
{
	/*
	 * The OSD map's pool entry: "osd pool get-quota" needs a manager's
	 * pool statistics in Ceph 16 ("no stats for pool" without one),
	 * while the quota itself is in the OSD map.
	 */
	const char *cmd[] = {
		"{\"prefix\":\"osd pool ls\",\"detail\":\"detail\","
		"\"format\":\"json\"}"};
	char *out = NULL, *outs = NULL, *json;
	size_t outlen = 0, outslen = 0;
	int rc;

	rc = rados_mon_command(rt->cluster, cmd, 1, "", 0, &out, &outlen, &outs,
			       &outslen);
	if (rc < 0)
		goto out;
	json = malloc(outlen + 1);
	if (!json) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(json, out, outlen);
	json[outlen] = '\0';
	rc = rtier_quota_parse(json, rados_ioctx_get_id(rt->io), bytes);
	free(json);
out:
	if (out)
		rados_buffer_free(out);
	if (outs)
		rados_buffer_free(outs);
	return rc;
}

int rtier_sweep_lock(struct rtier *rt, const char *cookie, unsigned lease_s)
{
	struct timeval lease = {.tv_sec = lease_s};
	int rc;

	/* A zero duration would be a lock that never runs out. */
	if (lease_s == 0 || !cookie || !*cookie)
		return -EINVAL;
	rc = rados_lock_exclusive(rt->io, RTIER_SWEEP_OID, RTIER_SWEEP_LOCK,
				  cookie, "kvfs sweeper", &lease,
				  LIBRADOS_LOCK_FLAG_MAY_RENEW);
	if (rc == 0)
		return 1;
	if (rc == -EBUSY || rc == -EEXIST)
		return 0;
	return rc;
}

void rtier_sweep_unlock(struct rtier *rt, const char *cookie)
{
	/* Not held (-ENOENT) or unreachable: the lease runs out by itself. */
	rados_unlock(rt->io, RTIER_SWEEP_OID, RTIER_SWEEP_LOCK, cookie);
}

/* A block a sweep removes. */
struct rtier_victim {
	int64_t time_ns;
	uint64_t size;
	char *path;
};

/*
 * The oldest use entries whose sizes add up to at least excess: a heap
 * with the newest on top, which gives its top back whenever the others
 * cover excess without it.
 */
struct rtier_pick {
	uint64_t excess, sum;
	size_t n, cap;
	struct rtier_victim *v;
};

static void rtier_pick_swap(struct rtier_victim *a, struct rtier_victim *b)
{
	struct rtier_victim t = *a;

	*a = *b;
	*b = t;
}

/* Drops the heap's top (its newest entry). */
static void rtier_pick_pop(struct rtier_pick *p)
{
	struct rtier_victim *v = p->v;
	size_t i = 0;

	p->sum -= v[0].size;
	free(v[0].path);
	v[0] = v[--p->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, top = i;

		if (l < p->n && v[l].time_ns > v[top].time_ns)
			top = l;
		if (r < p->n && v[r].time_ns > v[top].time_ns)
			top = r;
		if (top == i)
			break;
		rtier_pick_swap(&v[i], &v[top]);
		i = top;
	}
}

static int rtier_pick_one(void *arg, const char *path, int64_t time_ns,
			  uint64_t size)
{
	struct rtier_pick *p = arg;
	struct rtier_victim *v;
	size_t i;

	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;

		v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	v = p->v;
	i = p->n;
	v[i] = (struct rtier_victim){time_ns, size, strdup(path)};
	if (!v[i].path)
		return -ENOMEM;
	p->n++;
	p->sum += size;
	for (; i > 0 && v[(i - 1) / 2].time_ns < v[i].time_ns; i = (i - 1) / 2)
		rtier_pick_swap(&v[i], &v[(i - 1) / 2]);
	while (p->n > 0 && p->sum - v[0].size >= p->excess)
		rtier_pick_pop(p);
	return 0;
}

static int rtier_victim_cmp(const void *a, const void *b)
{
	const struct rtier_victim *x = a, *y = b;

	return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

/*
 * Adds to b one removal of the keys of the n victims v whose ok[i] is set
 * from each use shard they are in.
 */
static int rtier_sweep_uses(struct rtier *rt, struct rtier_batch *b,
			    const struct rtier_victim *v, const int *ok,
			    size_t n)
{
	const char *keys[RTIER_SWEEP_BATCH];
	char oid[RTIER_OID_MAX];
	int rc = 0;

	for (unsigned s = 0; s < RTIER_USE_SHARDS && rc == 0; s++) {
		rados_write_op_t op;
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (ok[i] && rtier_use_oid(v[i].path, oid) == s)
				keys[k++] = v[i].path;
		if (k == 0)
			continue;
		op = rados_create_write_op();
		if (!op)
			return -ENOMEM;
		rados_write_op_omap_rm_keys(op, keys, k);
		snprintf(oid, sizeof(oid), "u:%u", s);
		rc = rtier_batch_add(rt, b, op, oid);
	}
	return rc;
}

/*
 * Adds to b a write op for each victim i with go[i] set: the removal of its
 * name from its directory's index (blocks 0) or of its block (blocks 1);
 * map[k] is the victim of the k-th op. Returns how many were added, or
 * -ENOMEM (then none was).
 */
static int rtier_sweep_step(struct rtier *rt, struct rtier_batch *b,
			    const struct rtier_victim *v, size_t n,
			    const int *go, int blocks, size_t *map)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX];
	const char *name;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		rados_write_op_t op;

		if (!go[i] || rtier_names(v[i].path, boid, doid, &name) < 0)
			continue;
		op = rados_create_write_op();
		if (!op) {
			rtier_batch_wait(b, 0);
			return -ENOMEM;
		}
		if (blocks) {
			rados_write_op_remove(op);
		} else {
			/* Swept, not removed: machines keep their copies. */
			char val[8];
			const char *vals[1] = {val};
			size_t lens[1] = {sizeof(val)};

			rtier_le64(val, RTIER_SWEPT);
			rados_write_op_omap_set(op, &name, vals, lens, 1);
		}
		/* Room was reserved: the op is recorded, whatever the outcome. */
		rtier_batch_add(rt, b, op, blocks ? boid : doid);
		map[k++] = i;
	}
	return (int)k;
}

/*
 * Removes n (<= RTIER_SWEEP_BATCH) victims as rtier_remove() would, each
 * step for all of them at once: names, then blocks, then uses. A victim
 * whose name or block could not be removed keeps its use; one whose path
 * is malformed (never a block) only loses its use.
 */
static int rtier_sweep_batch(struct rtier *rt, struct rtier_batch *b,
			     const struct rtier_victim *v, size_t n,
			     uint64_t *removed, uint64_t *freed)
{
	char boid[RTIER_OID_MAX], doid[RTIER_OID_MAX];
	int go[RTIER_SWEEP_BATCH], rc = 0, rc2, k;
	size_t map[RTIER_SWEEP_BATCH];
	const char *name;

	for (size_t i = 0; i < n; i++)
		go[i] = rtier_names(v[i].path, boid, doid, &name) == 0;
	for (int blocks = 0; blocks <= 1; blocks++) {
		k = rtier_sweep_step(rt, b, v, n, go, blocks, map);
		if (k < 0)
			return k;
		rc2 = rtier_batch_wait(b, -ENOENT);
		rc = rc < 0 ? rc : rc2;
		for (int j = 0; j < k; j++) {
			int r = b->rcs[j];

			go[map[j]] = r == 0 || r == -ENOENT;
			if (blocks && r == 0) {
				(*removed)++;
				*freed += v[map[j]].size;
			}
		}
	}
	/* Malformed paths (never a block) lose their use too. */
	for (size_t i = 0; i < n; i++)
		if (rtier_names(v[i].path, boid, doid, &name) < 0)
			go[i] = 1;
	rc2 = rtier_sweep_uses(rt, b, v, go, n);
	rc = rc < 0 ? rc : rc2;
	rc2 = rtier_batch_wait(b, -ENOENT);
	return rc < 0 ? rc : rc2;
}

int rtier_sweep(struct rtier *rt, uint64_t target, uint64_t *removed,
		uint64_t *freed)
{
	struct rtier_pick pick = {0};
	struct rtier_batch b = {0};
	uint64_t bytes, blocks;
	int rc;

	*removed = 0;
	*freed = 0;
	rc = rtier_usage(rt, &bytes, &blocks);
	if (rc < 0 || bytes <= target)
		return rc;
	/*
	 * A second pass picks the oldest entries covering the excess: memory
	 * for the victims only, not for every block in the pool.
	 */
	pick.excess = bytes - target;
	rc = rtier_use_scan(rt, rtier_pick_one, &pick);
	if (rc == 0)
		rc = rtier_batch_reserve(&b, RTIER_SWEEP_BATCH);
	if (rc == 0)
		qsort(pick.v, pick.n, sizeof(*pick.v), rtier_victim_cmp);
	for (size_t i = 0; rc == 0 && i < pick.n; i += RTIER_SWEEP_BATCH) {
		size_t n = pick.n - i < RTIER_SWEEP_BATCH ? pick.n - i
							  : RTIER_SWEEP_BATCH;

		rc = rtier_sweep_batch(rt, &b, pick.v + i, n, removed, freed);
	}
	for (size_t i = 0; i < pick.n; i++)
		free(pick.v[i].path);
	free(pick.v);
	rtier_batch_free(&b);
	return rc;
}
