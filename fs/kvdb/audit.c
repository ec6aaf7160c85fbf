/* SPDX-License-Identifier: MIT */
/*
 * The audit of names (audit.h): the rebuild's plan (rebuild_names) next
 * to the index's names (idx_meta_field), inode by inode.
 */
#include "audit.h"

#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "log.h"
#include "rebuild.h"
#include "record.h"
#include "store.h"

/* One name of the rebuild's plan. */
struct audit_pair {
	uint64_t ino;
	char *path;
	int node;
};

struct audit {
	struct kvdb *db;
	struct check_result *res;
	int repair;
	struct audit_pair *v;
	size_t n, cap;
	struct store *st; /* opened for the first repair */
	char *buf;	  /* STORE_META_MAX bytes */
};

static int audit_pair_add(void *arg, uint64_t ino, const char *path, int node)
{
	struct audit *a = arg;
	char *p;

	if (kvdb_grow((void **)&a->v, &a->cap, a->n, sizeof(*a->v)) < 0 ||
	    !(p = strdup(path)))
		return -ENOMEM;
	a->v[a->n++] = (struct audit_pair){.ino = ino, .path = p, .node = node};
	return 0;
}

static int audit_pair_cmp(const void *x, const void *y)
{
	const struct audit_pair *a = x, *b = y;

	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return strcmp(a->path, b->path);
}

static int audit_str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The plan's names of ino: *first, their count. */
static size_t audit_plan(const struct audit *a, uint64_t ino, size_t *first)
{
	size_t lo = 0, hi = a->n, k;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->v[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = lo; k < a->n && a->v[k].ino == ino; k++)
		;
	*first = lo;
	return k - lo;
}

/* Appends a metadata record (type, the len bytes at field) for ino. */
static int audit_write(struct audit *a, uint32_t type, uint64_t ino,
		       const char *field, size_t len)
{
	struct store_config cfg = {.nlanes = 1, .durable = 1};
	int rc = 0;

	if (!a->st)
		rc = store_open(&a->st, a->db->datadir, &cfg, a->db->io);
	if (rc < 0) {
		a->st = NULL;
		kvdb_report(a->db,
			    "cannot open the data files to write name "
			    "records: %s",
			    strerror(-rc));
		return rc;
	}
	return store_append_meta(a->st, type, ino, field, len);
}

/* Adds the finding for ino (index path, or the plan's), repairing it. */
static int audit_found(struct audit *a, uint64_t ino, const char *path,
		       const char *detail, uint32_t type, const char *field,
		       size_t len)
{
	struct check_finding f = {.kind = CHECK_NAME,
				  .ino = ino,
				  .chunk = -1,
				  .path = strdup(path),
				  .detail = strdup(detail)};

	a->res->sum.names_wrong++;
	if (a->repair && audit_write(a, type, ino, field, len) == 0) {
		f.action = CHECK_ACTION_FIXED;
		a->res->sum.names_fixed++;
		log_warn("%s (inode %llu): %s; wrote a fresh name record", path,
			 (unsigned long long)ino, detail);
	}
	if (!f.path || !f.detail ||
	    kvdb_grow((void **)&a->res->v, &a->res->cap, a->res->n,
		      sizeof(*a->res->v)) < 0) {
		free(f.path);
		free(f.detail);
		return -ENOMEM;
	}
	a->res->v[a->res->n++] = f;
	return 0;
}

/*
 * Compares the names of ino in the index (the names part of its record
 * field) with the plan's; a finding when they differ.
 */
static int audit_one(struct audit *a, uint64_t ino)
{
	char **names = NULL, detail[4200];
	size_t used, head = 0, nn = 0, first, np, cap = 0;
	struct idx_attr at;
	int rc, type, same;

	rc = idx_getattr(a->db->idx, ino, &at);
	type = rc < 0 ? rc
		      : idx_meta_field(a->db->idx, &at, a->buf, STORE_META_MAX,
				       &used);
	if (type <= 0)
		return type == -ENOENT ? 0 : type;
	if (type == STORE_REC_NODE) {
		head = strlen(a->buf) + 1;
		head += strlen(a->buf + head) + 1;
	}
	/* Every name ends with a NUL now, the last one too. */
	a->buf[used] = '\0';
	for (size_t i = head; i < used; i += strlen(a->buf + i) + 1) {
		if (kvdb_grow((void **)&names, &cap, nn, sizeof(*names)) < 0) {
			free(names);
			return -ENOMEM;
		}
		names[nn++] = a->buf + i;
	}
	qsort(names, nn, sizeof(*names), audit_str_cmp);
	np = audit_plan(a, ino, &first);
	same = np == nn;
	for (size_t i = 0; same && i < nn; i++)
		same = strcmp(names[i], a->v[first + i].path) == 0;
	if (!same)
		snprintf(detail, sizeof(detail),
			 "a rebuild from the data files would restore it %s%s",
			 np ? "as " : "under no name",
			 np ? a->v[first].path : "");
	rc = same ? 0
		  : audit_found(a, ino, nn ? names[0] : "?", detail,
				(uint32_t)type, a->buf, used);
	free(names);
	return rc;
}

/* Special files of the plan the index does not have: removal records. */
static int audit_gone(struct audit *a)
{
	static const char gone[] = "0 0\0";
	struct idx_attr at;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < a->n; i++) {
		if (!a->v[i].node || (i > 0 && a->v[i - 1].ino == a->v[i].ino))
			continue;
		rc = idx_getattr(a->db->idx, a->v[i].ino, &at);
		if (rc == 0 && at.nlink > 0)
			continue;
		rc = rc == 0 || rc == -ENOENT
			     ? audit_found(a, a->v[i].ino, a->v[i].path,
					   "removed, but a rebuild from the "
					   "data files would bring it back",
					   STORE_REC_NODE, gone, sizeof(gone))
			     : rc;
	}
	return rc;
}

int audit_names(struct kvdb *db, struct kvdb_scan *scan, const uint64_t *inos,
		size_t n, int repair, struct check_result *res)
{
	struct audit a = {.db = db, .res = res, .repair = repair};
	int rc;

	a.buf = malloc(STORE_META_MAX + 1);
	rc = a.buf ? rebuild_names(db, scan, audit_pair_add, &a) : -ENOMEM;
	if (rc == 0 && a.n)
		qsort(a.v, a.n, sizeof(*a.v), audit_pair_cmp);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (i == 0 || inos[i] != inos[i - 1])
			rc = audit_one(&a, inos[i]);
	if (rc == 0)
		rc = audit_gone(&a);
	if (a.st)
		store_close(a.st);
	for (size_t i = 0; i < a.n; i++)
		free(a.v[i].path);
	free(a.v);
	free(a.buf);
	return rc;
}
