/* SPDX-License-Identifier: MIT */
/*
 * The session loop of rx.h. Each worker owns one receive segment and
 * reads into it with fuse_session_receive_buf(), the header in the room
 * before it. The main thread waits for the session to end, then stops the
 * workers: one blocked in read(2) on /dev/fuse is woken by RX_SIGNAL,
 * whose handler does nothing and is installed without SA_RESTART. The
 * signal is sent only while the worker is reading (w->lock orders the two,
 * and it is sent again until the worker is gone), so no handler's system
 * call is ever interrupted by it.
 */
#include "rx.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filebuf.h"
#include "fs.h"
#include "log.h"

/* What comes before a WRITE's bytes: its in_header and write_in. */
#define RX_HDR (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
/* Wakes a worker out of its read when the session ends. */
#define RX_SIGNAL SIGUSR2
/* How often the stopper signals a worker that is still reading. */
#define RX_KICK_NS 2000000l

struct rx;

struct rx_worker {
	struct rx *rx;
	pthread_t tid;
	int started;
	char *seg; /* the receive buffer: only its thread touches it */
	pthread_mutex_t lock; /* reading, against the stopper's signal */
	int reading;
	atomic_int done;
};

struct rx {
	struct fuse_session *se;
	sem_t ended;	/* posted by each worker that ends */
	atomic_int err; /* the first failed read (-errno) */
	unsigned n;
	struct rx_worker w[];
};

static _Thread_local struct rx_worker *rx_self;

static void rx_nothing(int sig)
{
	(void)sig;
}

int rx_swap(const void *buf, size_t size, char **seg)
{
	struct rx_worker *w = rx_self;
	char *mine;

	if (!w || buf != w->seg || size > NODE_SEG || !*seg)
		return 0;
	mine = w->seg;
	w->seg = *seg;
	*seg = mine;
	return 1;
}

static void rx_reading(struct rx_worker *w, int on)
{
	pthread_mutex_lock(&w->lock);
	w->reading = on;
	pthread_mutex_unlock(&w->lock);
}

static void *rx_work(void *arg)
{
	struct rx_worker *w = arg;
	struct fuse_session *se = w->rx->se;
	int rc = 0;

	rx_self = w;
	while (!fuse_session_exited(se)) {
		/*
		 * libfuse reads at most its buffer size (a header page and
		 * the largest WRITE, fs_init) from here: into the room
		 * around the segment and the segment.
		 */
		struct fuse_buf buf = {.mem = w->seg - RX_HDR,
				       .size = RX_HDR + NODE_SEG};

		rx_reading(w, 1);
		rc = fuse_session_exited(se)
			     ? 0
			     : fuse_session_receive_buf(se, &buf);
		rx_reading(w, 0);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc <= 0)
			break;
		fuse_session_process_buf(se, &buf);
	}
	if (rc < 0) {
		int none = 0;

		atomic_compare_exchange_strong(&w->rx->err, &none, rc);
	}
	/* Unmounted (libfuse ended the session), failed, or stopped. */
	fuse_session_exit(se);
	atomic_store(&w->done, 1);
	sem_post(&w->rx->ended);
	return NULL;
}

/* Ends worker w (the session has ended): wakes it out of its read. */
static void rx_stop(struct rx_worker *w)
{
	const struct timespec kick = {.tv_nsec = RX_KICK_NS};

	while (!atomic_load(&w->done)) {
		pthread_mutex_lock(&w->lock);
		if (w->reading)
			pthread_kill(w->tid, RX_SIGNAL);
		pthread_mutex_unlock(&w->lock);
		nanosleep(&kick, NULL);
	}
	pthread_join(w->tid, NULL);
}

/* Starts the workers; 0 or -errno (those started keep running). */
static int rx_start(struct rx *rx)
{
	for (unsigned i = 0; i < rx->n; i++) {
		struct rx_worker *w = &rx->w[i];
		int rc;

		w->rx = rx;
		pthread_mutex_init(&w->lock, NULL);
		w->seg = node_seg_new();
		if (!w->seg)
			return -ENOMEM;
		rc = pthread_create(&w->tid, NULL, rx_work, w);
		if (rc != 0)
			return -rc;
		w->started = 1;
	}
	return 0;
}

int rx_loop(struct fs *fs, unsigned nthreads)
{
	struct sigaction sa = {.sa_handler = rx_nothing}, old;
	struct rx *rx = calloc(1, sizeof(*rx) + nthreads * sizeof(rx->w[0]));
	int rc;

	if (!rx)
		return -ENOMEM;
	rx->se = fs->se;
	rx->n = nthreads;
	sem_init(&rx->ended, 0, 0);
	sigemptyset(&sa.sa_mask);
	sigaction(RX_SIGNAL, &sa, &old);
	rc = rx_start(rx);
	if (rc < 0)
		log_err("cannot start the FUSE workers: %s", strerror(-rc));
	else
		/* A signal here (SIGTERM: libfuse ends the session) or a
		 * worker that ended. */
		while (sem_wait(&rx->ended) < 0 && !fuse_session_exited(rx->se))
			;
	fuse_session_exit(rx->se);
	for (unsigned i = 0; i < nthreads; i++) {
		struct rx_worker *w = &rx->w[i];

		if (w->started)
			rx_stop(w);
		node_seg_free(w->seg);
		pthread_mutex_destroy(&w->lock);
	}
	sigaction(RX_SIGNAL, &old, NULL);
	sem_destroy(&rx->ended);
	if (rc == 0)
		rc = atomic_load(&rx->err);
	free(rx);
	return rc;
}
