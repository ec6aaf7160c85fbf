/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's private state, shared by rtier.c (the connection,
 * blocks, directory indexes) and rtier_use.c (the use shards, the quota,
 * the sweeper). Not for any other file: the contract is rtier.h.
 */
#ifndef KVFS_RTIER_INT_H
#define KVFS_RTIER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rados/librados.h>

#include "rtier.h"

/* Room for an object name: a two-character prefix, PATH and a NUL. */
#define RTIER_OID_MAX (RTIER_PATH_MAX + 3)
/* Buckets of the set of directories this struct rtier has listed. */
#define RTIER_DIR_BUCKETS 4096u
/* The set is emptied past this many directories (then listed again). */
#define RTIER_DIR_SET_MAX 65536u
/* Bytes of a use shard's value: last use (LE ns) and size (LE). */
#define RTIER_USE_VAL 16

/* One directory this struct rtier listed in its parent's index. */
struct rtier_dirent {
	struct rtier_dirent *next;
	size_t len;
	char path[];
};

struct rtier {
	rados_t cluster;
	rados_ioctx_t io;
	pthread_mutex_t dirs_lock;
	/* protected by dirs_lock */
	struct rtier_dirent *dirs[RTIER_DIR_BUCKETS];
	size_t ndirs;
};

/*
 * Write operations issued together (aio) and waited for together: the
 * round trips of one step cost one latency.
 */
struct rtier_batch {
	size_t n, cap;
	rados_write_op_t *ops;
	rados_completion_t *cs;
	int *rcs; /* each operation's result, after rtier_batch_wait() */
};

/*
 * The object names of path: its block's ("b:" PATH) and its directory's
 * ("d:" DIR), each RTIER_OID_MAX bytes, and a pointer to its name within
 * path. -EINVAL for a malformed path.
 */
int rtier_names(const char *path, char *boid, char *doid, const char **name);
void rtier_le64(char *out, uint64_t v);
uint64_t rtier_get_le64(const char *in);

/*
 * Room in b for n operations in all: then rtier_batch_add() cannot fail
 * for want of memory. 0 or -ENOMEM.
 */
int rtier_batch_reserve(struct rtier_batch *b, size_t n);
/*
 * Issues op (taking ownership of it) on object oid as b's next operation
 * and returns 0. An operation librados refuses is released, its result
 * recorded and returned. When b has no room and cannot grow: -ENOMEM, op
 * released, nothing recorded.
 */
int rtier_batch_add(struct rtier *rt, struct rtier_batch *b,
		    rados_write_op_t op, const char *oid);
/*
 * Waits for every operation of b and releases them: b->rcs[i] is each
 * one's result. Returns the first error other than ignore (-ENOENT, or 0
 * for none), 0 when there is none. b can then take new operations.
 */
int rtier_batch_wait(struct rtier_batch *b, int ignore);
void rtier_batch_free(struct rtier_batch *b);

/*
 * The use shard of path: writes its object name ("u:" N) into oid
 * (RTIER_OID_MAX bytes) and returns N.
 */
unsigned rtier_use_oid(const char *path, char *oid);
/* A use shard's value: time_ns then size, 8 bytes LE each. */
void rtier_use_val(char *out, int64_t time_ns, uint64_t size);

#endif
