/* SPDX-License-Identifier: MIT */
/*
 * The notifier: the only thread that tells the kernel to forget a cached
 * name or inode (fuse_lowlevel_notify_inval_entry/_inval_inode). Called from
 * a LOOKUP handler of the same directory those calls deadlock the mount, and
 * they block while any LOOKUP of that directory is parked (measured: 1.2 to
 * 1.7 s, exactly until the parked lookup was answered; kvfs(7), KERNEL
 * FACTS), so handlers only queue work here and never wait for it. The
 * exception is notify_attrs_now(): forgetting an inode's attributes alone
 * takes none of the locks a request holds, so a handler does it itself.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_lowlevel.h>

#include "notify.h"
#include "log.h"

/* A caller waiting for its item to be sent. */
struct notify_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

struct notify_item {
	struct notify_item *next;
	struct notify_wait *wait; /* NULL: nobody waits */
	uint64_t parent;	  /* 0: an inode invalidation of ino */
	uint64_t ino;
	size_t name_len;
	char name[];
};

struct notify {
	struct fuse_session *se;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* protected by lock */
	struct notify_item *head, **tail;
	int stop;
	atomic_uint_fast64_t sent;
};

static void *notify_main(void *arg)
{
	struct notify *nt = arg;
	struct notify_item *it;
	int rc;

	pthread_mutex_lock(&nt->lock);
	for (;;) {
		while (!nt->head && !nt->stop)
			pthread_cond_wait(&nt->cond, &nt->lock);
		it = nt->head;
		if (!it)
			break;
		nt->head = it->next;
		if (!nt->head)
			nt->tail = &nt->head;
		pthread_mutex_unlock(&nt->lock);
		if (it->parent) {
			rc = fuse_lowlevel_notify_inval_entry(
				nt->se, it->parent, it->name, it->name_len);
			/*
			 * A name the kernel had not looked up: it left the
			 * directory alone, and a listing it keeps would still
			 * show the name. Dropping the directory's pages and
			 * attributes drops that listing.
			 */
			if (rc == -ENOENT)
				rc = fuse_lowlevel_notify_inval_inode(
					nt->se, it->parent, 0, 0);
		} else
			rc = fuse_lowlevel_notify_inval_inode(nt->se, it->ino,
							      0, 0);
		/* -ENOENT: the kernel had nothing cached, which is fine. */
		if (rc == 0)
			atomic_fetch_add(&nt->sent, 1);
		else if (rc != -ENOENT)
			log_debug("invalidation of %s %llu failed: %s",
				  it->parent ? it->name : "inode",
				  (unsigned long long)(it->parent ? it->parent
								  : it->ino),
				  strerror(-rc));
		if (it->wait) {
			pthread_mutex_lock(&it->wait->lock);
			it->wait->done = 1;
			pthread_cond_signal(&it->wait->cond);
			pthread_mutex_unlock(&it->wait->lock);
		}
		free(it);
		pthread_mutex_lock(&nt->lock);
	}
	pthread_mutex_unlock(&nt->lock);
	return NULL;
}

int notify_start(struct notify **out, struct fuse_session *se)
{
	struct notify *nt;
	sigset_t all, old;
	int rc;

	nt = calloc(1, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	nt->se = se;
	nt->tail = &nt->head;
	pthread_mutex_init(&nt->lock, NULL);
	pthread_cond_init(&nt->cond, NULL);
	/* Signals belong to libfuse's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&nt->thread, NULL, notify_main, nt);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pthread_mutex_destroy(&nt->lock);
		pthread_cond_destroy(&nt->cond);
		free(nt);
		return -rc;
	}
	*out = nt;
	return 0;
}

static void notify_push(struct notify *nt, struct notify_item *it)
{
	pthread_mutex_lock(&nt->lock);
	*nt->tail = it;
	nt->tail = &it->next;
	pthread_cond_signal(&nt->cond);
	pthread_mutex_unlock(&nt->lock);
}

static void notify_entry_common(struct notify *nt, uint64_t parent,
				const char *name, struct notify_wait *wait)
{
	size_t len = strlen(name);
	struct notify_item *it;

	it = calloc(1, sizeof(*it) + len + 1);
	if (!it) {
		log_err("out of memory: kernel keeps its entry for %s", name);
		return;
	}
	it->parent = parent;
	it->name_len = len;
	it->wait = wait;
	memcpy(it->name, name, len + 1);
	notify_push(nt, it);
	if (!wait)
		return;
	pthread_mutex_lock(&wait->lock);
	while (!wait->done)
		pthread_cond_wait(&wait->cond, &wait->lock);
	pthread_mutex_unlock(&wait->lock);
}

void notify_entry(struct notify *nt, uint64_t parent, const char *name)
{
	if (nt)
		notify_entry_common(nt, parent, name, NULL);
}

void notify_entry_sync(struct notify *nt, uint64_t parent, const char *name)
{
	struct notify_wait w = {.done = 0};

	if (!nt)
		return;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	notify_entry_common(nt, parent, name, &w);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
}

void notify_inode(struct notify *nt, uint64_t ino)
{
	struct notify_item *it;

	if (!nt)
		return;
	it = calloc(1, sizeof(*it));
	if (!it) {
		log_err("out of memory: kernel keeps inode %llu cached",
			(unsigned long long)ino);
		return;
	}
	it->ino = ino;
	notify_push(nt, it);
}

int notify_attrs_now(struct notify *nt, uint64_t ino)
{
	int rc;

	if (!nt)
		return 0;
	/* A negative offset: the attributes, not the pages (no page locks). */
	rc = fuse_lowlevel_notify_inval_inode(nt->se, ino, -1, 0);
	if (rc == 0)
		atomic_fetch_add(&nt->sent, 1);
	return rc == -ENOENT ? 0 : rc;
}

uint64_t notify_count(struct notify *nt)
{
	return nt ? atomic_load(&nt->sent) : 0;
}

void notify_stop(struct notify *nt)
{
	if (!nt)
		return;
	pthread_mutex_lock(&nt->lock);
	nt->stop = 1;
	pthread_cond_signal(&nt->cond);
	pthread_mutex_unlock(&nt->lock);
	pthread_join(nt->thread, NULL);
	pthread_mutex_destroy(&nt->lock);
	pthread_cond_destroy(&nt->cond);
	free(nt);
}
