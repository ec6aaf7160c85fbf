/* SPDX-License-Identifier: MIT */
/*
 * The control socket's daemon side (protocol in ctlsock.h): a thread that
 * accepts one connection at a time on DATADIR/kvfs.sock, reads one request
 * line, answers it with one JSON object and closes the connection.
 *
 * Paths arrive relative to the mount and are resolved here, from the root
 * (KV_ROOT_INO), with idx_lookup(): every component but the last must be a
 * directory; the last one need not exist (a verdict may say "absent").
 *
 * The status counts scan the whole inode table, so they run on a second
 * index connection of this thread's own (opened on first use), never under
 * the lock the FUSE workers take.
 */
#include "ctlsock.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capacity.h"
#include "clock.h"
#include "ctlfiles.h"
#include "fs.h"
#include "ctlproto.h"
#include "node.h"
#include "notify.h"
#include "share.h"
#include "tbuf.h"
#include "wb.h"

struct ctlsock {
	struct fs *fs;
	int dir_fd; /* DATADIR, O_PATH: where the socket lives */
	int lfd;    /* the listening socket */
	int efd;    /* eventfd: ctlsock_stop() wants the thread to end */
	pthread_t thread;
	struct idx *scan; /* second connection, the thread's only */
	int scan_failed;  /* opening it failed once: do not retry */
};

/*
 * Resolves path (modified) to the key (*parent, *name) the lookup manager
 * uses; *name points into path. -EINVAL for the root itself or a "..",
 * -EPERM for the control files, else what idx_lookup() says about the
 * directories on the way (-ENOENT, -ENOTDIR, -ENAMETOOLONG, -EIO).
 */
static int ctlsock_resolve(struct fs *fs, char *path, uint64_t *parent,
			   const char **name, const char **why)
{
	uint64_t dir = KV_ROOT_INO;
	struct idx_attr a;
	char *p = path;
	int rc;

	*name = NULL;
	for (;;) {
		char *comp, *slash;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		comp = p;
		slash = strchr(p, '/');
		if (slash) {
			*slash = '\0';
			p = slash + 1;
		} else {
			p += strlen(p);
		}
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			*why = "\"..\" is not allowed in a path";
			return -EINVAL;
		}
		if (strlen(comp) > IDX_NAME_MAX)
			return -ENAMETOOLONG;
		if (*name) {
			/* The previous component is a directory on the way. */
			rc = idx_lookup(fs->idx, dir, *name, &a);
			if (rc == -ENOENT)
				*why = "a directory on the way does not exist";
			if (rc < 0)
				return rc;
			if (!S_ISDIR(a.mode)) {
				*why = "a component on the way is not a "
				       "directory";
				return -ENOTDIR;
			}
			dir = a.ino;
		}
		if (fs_ctl_reserved(dir, comp)) {
			*why = "the control files have no verdicts";
			return -EPERM;
		}
		*name = comp;
	}
	if (!*name) {
		*why = "the root directory has no verdict; name a file or "
		       "directory below it";
		return -EINVAL;
	}
	*parent = dir;
	return 0;
}

static const char *ctlsock_phase(enum vc_phase p)
{
	switch (p) {
	case VC_PENDING:
		return "pending";
	case VC_IN_FLIGHT:
		return "in_flight";
	default:
		return "resolved";
	}
}

static const char *ctlsock_result(enum vc_outcome r)
{
	switch (r) {
	case VC_HIT:
		return "hit";
	case VC_MISS:
		return "miss";
	default:
		return "unknown";
	}
}

static void ctlsock_verdict_json(struct tbuf *b, const struct vc_info *vi)
{
	tbuf_printf(
		b,
		"{\"phase\": \"%s\", \"result\": \"%s\", "
		"\"generation\": %llu, \"ino\": %llu, "
		"\"quarantined\": %s, \"waiters\": %u, "
		"\"holders\": %u}",
		ctlsock_phase(vi->phase), ctlsock_result(vi->result),
		(unsigned long long)vi->generation, (unsigned long long)vi->ino,
		vi->quarantined ? "true" : "false", vi->nwaiters, vi->nrefs);
}

static void ctlsock_status(struct ctlsock *cs, struct tbuf *b)
{
	struct fs *fs = cs->fs;
	uint64_t ninodes = 0, nbytes = 0, dirty;
	struct idx_counts c;
	struct timespec now;
	struct vc_stats vs;
	char path[PATH_MAX];
	int rc, have_counts = 0;

	if (!cs->scan && !cs->scan_failed) {
		snprintf(path, sizeof(path), "%s/index.db", fs->cfg.datadir);
		rc = idx_open(&cs->scan, path, fs->cfg.root_mode, fs->uid,
			      fs->gid);
		if (rc < 0) {
			log_warn("cannot open a second connection to %s: %s; "
				 "status will not count files",
				 path, strerror(-rc));
			cs->scan_failed = 1;
		}
	}
	if (cs->scan && idx_count(cs->scan, &c) == 0)
		have_counts = 1;
	idx_statfs(fs->idx, &ninodes, &nbytes);
	vc_get_stats(fs->vc, &vs);
	pthread_mutex_lock(&fs->dirty_lock);
	dirty = fs->dirty_bytes;
	pthread_mutex_unlock(&fs->dirty_lock);
	clock_gettime(CLOCK_REALTIME, &now);

	tbuf_printf(b, "{\"ok\": true, \"version\": \"%s\", \"datadir\": ",
		    KVFS_VERSION);
	tbuf_json_str(b, fs->cfg.datadir);
	tbuf_printf(b, ", \"mountpoint\": ");
	tbuf_json_str(b, fs->cfg.mountpoint);
	tbuf_printf(b,
		    ", \"pid\": %ld, \"uptime_seconds\": %lld, "
		    "\"inodes\": %llu, \"bytes\": %llu",
		    (long)getpid(),
		    (long long)(now.tv_sec - fs->start_time.tv_sec),
		    (unsigned long long)ninodes, (unsigned long long)nbytes);
	if (have_counts)
		tbuf_printf(b,
			    ", \"files\": %llu, \"directories\": %llu, "
			    "\"others\": %llu, \"orphans\": %llu, "
			    "\"records\": %llu, \"record_bytes\": %llu",
			    (unsigned long long)c.files,
			    (unsigned long long)c.dirs,
			    (unsigned long long)c.others,
			    (unsigned long long)c.orphans,
			    (unsigned long long)c.records,
			    (unsigned long long)c.record_bytes);
	else
		tbuf_printf(b, ", \"files\": null, \"directories\": null");
	tbuf_printf(b,
		    ", \"dirty_bytes\": %llu, \"dirty_limit\": %llu, "
		    "\"verdicts\": %zu, \"quarantined\": %zu}\n",
		    (unsigned long long)dirty,
		    (unsigned long long)fs->cfg.dirty_limit, vs.nverdicts,
		    vs.nquarantined);
}

static void ctlsock_info(struct ctlsock *cs, struct tbuf *b)
{
	struct fs *fs = cs->fs;

	tbuf_printf(b, "{\"ok\": true, \"version\": \"%s\", \"datadir\": ",
		    KVFS_VERSION);
	tbuf_json_str(b, fs->cfg.datadir);
	tbuf_printf(b, ", \"mountpoint\": ");
	tbuf_json_str(b, fs->cfg.mountpoint);
	tbuf_printf(b, ", \"pid\": %ld}\n", (long)getpid());
}

static void ctlsock_verdicts(struct ctlsock *cs, struct tbuf *b)
{
	struct vc_stats vs;

	vc_get_stats(cs->fs->vc, &vs);
	tbuf_printf(
		b,
		"{\"ok\": true, \"verdicts\": %zu, \"pending\": %zu, "
		"\"quarantined\": %zu, \"parked\": %zu, \"probes\": %llu, "
		"\"batched_keys\": %llu, \"coalesced\": %llu, \"hits\": %llu, "
		"\"misses\": %llu, \"marked_misses\": %llu, "
		"\"stale_discarded\": %llu, \"cancelled\": %llu, "
		"\"probe_errors\": %llu, \"bumps\": %llu}\n",
		vs.nverdicts, vs.npending, vs.nquarantined, vs.nparked,
		(unsigned long long)vs.probes,
		(unsigned long long)vs.batched_keys,
		(unsigned long long)vs.coalesced, (unsigned long long)vs.hits,
		(unsigned long long)vs.misses,
		(unsigned long long)vs.marked_misses,
		(unsigned long long)vs.stale_discarded,
		(unsigned long long)vs.cancelled,
		(unsigned long long)vs.probe_errors,
		(unsigned long long)vs.bumps);
}

/* "verdict PATH" and "clear PATH"; path is decoded, then consumed. */
static void ctlsock_name(struct ctlsock *cs, struct tbuf *b, char *path,
			 int clear, const struct ucred *peer)
{
	struct fs *fs = cs->fs;
	const char *name, *why = NULL;
	struct vc_info vi = {0};
	struct idx_attr a;
	uint64_t parent;
	char *shown;
	int rc, had, changed, in_index;

	shown = strdup(path);
	if (!shown) {
		ctlproto_error(b, -ENOMEM, NULL);
		return;
	}
	rc = ctlsock_resolve(fs, path, &parent, &name, &why);
	if (rc < 0) {
		ctlproto_error(b, rc, why);
		goto out_free;
	}
	had = vc_query(fs->vc, parent, name, &vi) == 0;
	rc = idx_lookup(fs->idx, parent, name, &a);
	if (rc < 0 && rc != -ENOENT) {
		ctlproto_error(b, rc, "cannot read the index");
		goto out_free;
	}
	in_index = rc == 0;

	tbuf_printf(b, "{\"ok\": true, \"path\": ");
	tbuf_json_str(b, shown);
	tbuf_printf(b, ", \"parent\": %llu, \"name\": ",
		    (unsigned long long)parent);
	tbuf_json_str(b, name);
	if (in_index)
		tbuf_printf(b,
			    ", \"index\": {\"exists\": true, \"ino\": %llu, "
			    "\"size\": %llu}",
			    (unsigned long long)a.ino,
			    (unsigned long long)a.size);
	else
		tbuf_printf(b, ", \"index\": {\"exists\": false}");
	tbuf_printf(b, ", \"verdict\": ");
	if (had)
		ctlsock_verdict_json(b, &vi);
	else
		tbuf_printf(b, "null");

	if (clear) {
		changed = vc_clear(fs->vc, parent, name);
		/*
		 * Whatever the verdict was, the kernel may hold a negative
		 * entry that came from it: the next lookup must reach us.
		 */
		notify_entry_sync(fs->notify, parent, name);
		tbuf_printf(b, ", \"changed\": %s", changed ? "true" : "false");
		if (changed && had)
			log_info("cleared the verdict of %s (%s%s, generation "
				 "%llu) for uid %u pid %ld; the next lookup "
				 "asks the index",
				 shown, ctlsock_result(vi.result),
				 vi.quarantined ? ", quarantined" : "",
				 (unsigned long long)vi.generation,
				 (unsigned)peer->uid, (long)peer->pid);
		else
			log_info("clear of %s for uid %u pid %ld: %s", shown,
				 (unsigned)peer->uid, (long)peer->pid,
				 changed ? "cleared a verdict made meanwhile"
				 : had	 ? "its verdict is not resolved yet, "
					   "nothing to clear"
					 : "no verdict held, nothing to clear");
	}
	tbuf_printf(b, "}\n");
out_free:
	free(shown);
}

/*
 * Parses an eviction target: a byte count, or "N%" of the capacity (N at
 * most 100). -EINVAL for anything else.
 */
static int ctlsock_target(const struct fs *fs, const char *arg,
			  uint64_t *target)
{
	unsigned long long v;
	char *end;

	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno)
		return -EINVAL;
	if (end[0] == '%' && end[1] == '\0') {
		if (v > 100)
			return -EINVAL;
		*target = fs->cfg.capacity / 100 * v +
			  fs->cfg.capacity % 100 * v / 100;
		return 0;
	}
	if (*end)
		return -EINVAL;
	*target = v;
	return 0;
}

/* "evict TARGET": evicts least-recently-used blocks down to TARGET. */
static void ctlsock_evict(struct ctlsock *cs, struct tbuf *b, const char *arg,
			  const struct ucred *peer)
{
	struct fs *fs = cs->fs;
	struct fs_evict_result r;
	uint64_t target;
	int reached;

	if (ctlsock_target(fs, arg, &target) < 0) {
		ctlproto_error(b, -EINVAL,
			       "bad eviction target; expected a byte count or "
			       "a percentage of the capacity (N%)");
		return;
	}
	fs_evict(fs, target, &r);
	reached = r.used_after <= target;
	if (r.blocks)
		log_info("evicted %llu blocks (%llu bytes) for uid %u pid %ld "
			 "(kvfsctl evict): use %llu -> %llu bytes, target "
			 "%llu%s",
			 (unsigned long long)r.blocks,
			 (unsigned long long)r.bytes, (unsigned)peer->uid,
			 (long)peer->pid, (unsigned long long)r.used_before,
			 (unsigned long long)r.used_after,
			 (unsigned long long)target,
			 reached ? ""
				 : " not reached (what is left is open, or is "
				   "the index)");
	else
		log_info("eviction to %llu bytes for uid %u pid %ld (kvfsctl "
			 "evict): %s",
			 (unsigned long long)target, (unsigned)peer->uid,
			 (long)peer->pid,
			 reached ? "use is already there, nothing evicted"
				 : "nothing could be evicted (all open)");
	tbuf_printf(b,
		    "{\"ok\": true, \"target\": %llu, \"capacity\": %llu, "
		    "\"used_before\": %llu, \"used_after\": %llu, "
		    "\"evicted\": %llu, \"evicted_bytes\": %llu, "
		    "\"evicted_total\": %llu, \"reached\": %s}\n",
		    (unsigned long long)target,
		    (unsigned long long)fs->cfg.capacity,
		    (unsigned long long)r.used_before,
		    (unsigned long long)r.used_after,
		    (unsigned long long)r.blocks, (unsigned long long)r.bytes,
		    (unsigned long long)atomic_load(&fs->cap->evicted),
		    reached ? "true" : "false");
}

/*
 * "sync": waits until the write-behind queue is empty (every file closed
 * before is saved and committed), then makes the data files and the index
 * durable. syncfs(2) on the mount cannot ask for this: the kernel sends
 * FUSE_SYNCFS to virtiofs only.
 */
static void ctlsock_sync(struct ctlsock *cs, struct tbuf *b)
{
	struct fs *fs = cs->fs;
	uint64_t start = clock_monotonic_ns(), local;
	struct wb_stats ws;
	int rc, shared;

	wb_get_stats(fs, &ws);
	rc = wb_drain(fs, CTLPROTO_SYNC_WAIT_S * 1000);
	if (rc == -ETIMEDOUT) {
		log_warn("kvfsctl sync: the write-behind queue did not drain "
			 "in %d s",
			 CTLPROTO_SYNC_WAIT_S);
		ctlproto_error(b, rc,
			       "the write-behind queue did not drain in time");
		return;
	}
	rc = store_sync(fs->store);
	if (rc == 0)
		rc = idx_sync(fs->idx);
	node_free_committed(fs);
	if (rc < 0) {
		log_err("kvfsctl sync: %s", strerror(-rc));
		ctlproto_error(b, rc, "cannot make the data durable");
		return;
	}
	local = clock_monotonic_ns();
	/* Then the shared tier's puts of what was just committed. */
	shared = share_drain(fs, CTLPROTO_SYNC_WAIT_S * 1000);
	if (shared < 0)
		log_warn("kvfsctl sync: shared-tier puts not done: %s",
			 shared == -ENOTCONN ? "the cluster is out of reach"
					     : "still queued after the wait");
	tbuf_printf(
		b,
		"{\"ok\": true, \"queued_files\": %llu, "
		"\"queued_bytes\": %llu, \"waited_ms\": %llu, "
		"\"local_ms\": %llu, \"shared\": %s}\n",
		(unsigned long long)ws.queued_files,
		(unsigned long long)ws.queued_bytes,
		(unsigned long long)((clock_monotonic_ns() - start) / 1000000),
		(unsigned long long)((local - start) / 1000000),
		!fs->share	      ? "\"off\""
		: shared == 0	      ? "\"done\""
		: shared == -ENOTCONN ? "\"unreachable\""
				      : "\"pending\"");
}

/* Answers one parsed request into b. */
static void ctlsock_dispatch(struct ctlsock *cs, struct tbuf *b,
			     struct ctlproto_req *req, const struct ucred *peer)
{
	switch (req->cmd) {
	case CTLPROTO_INFO:
		ctlsock_info(cs, b);
		break;
	case CTLPROTO_STATUS:
		ctlsock_status(cs, b);
		break;
	case CTLPROTO_VERDICTS:
		ctlsock_verdicts(cs, b);
		break;
	case CTLPROTO_VERDICT:
	case CTLPROTO_CLEAR:
		ctlsock_name(cs, b, req->arg, req->cmd == CTLPROTO_CLEAR, peer);
		break;
	case CTLPROTO_EVICT:
		ctlsock_evict(cs, b, req->arg, peer);
		break;
	case CTLPROTO_SYNC:
		ctlsock_sync(cs, b);
		break;
	default:
		ctlproto_error(b, -EINVAL, NULL);
		break;
	}
}

static void ctlsock_serve(struct ctlsock *cs, int fd)
{
	struct timeval tv = {.tv_sec = CTLPROTO_TIMEOUT_S};
	struct ctlproto_req req;
	struct ucred peer;
	socklen_t plen = sizeof(peer);
	const char *why;
	struct tbuf b;
	char *line;
	ssize_t n;
	int rc;

	tbuf_init(&b);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &plen) < 0)
		return;
	if (peer.uid != 0 && peer.uid != cs->fs->uid) {
		log_warn("refused a control connection from uid %u pid %ld",
			 (unsigned)peer.uid, (long)peer.pid);
		ctlproto_error(&b, -EACCES,
			       "only root and the owner of the mount may use "
			       "the control socket");
		goto out_reply;
	}
	line = malloc(CTLPROTO_LINE_MAX + 1);
	if (!line) {
		ctlproto_error(&b, -ENOMEM, NULL);
		goto out_reply;
	}
	n = ctlproto_recv_request(fd, line, CTLPROTO_LINE_MAX + 1);
	if (n < 0) {
		ctlproto_error(&b, (int)n, "cannot read the request");
		goto out_line;
	}
	rc = ctlproto_parse(line, (size_t)n, &req, &why);
	if (rc < 0) {
		ctlproto_error(&b, rc, why);
		goto out_line;
	}
	log_debug("request \"%s\" from uid %u pid %ld",
		  ctlproto_cmd_name(req.cmd), (unsigned)peer.uid,
		  (long)peer.pid);
	ctlsock_dispatch(cs, &b, &req, &peer);
out_line:
	free(line);
out_reply:
	if (b.oom)
		ctlproto_send_all(fd, CTLPROTO_OOM_RESPONSE,
				  sizeof(CTLPROTO_OOM_RESPONSE) - 1);
	else
		ctlproto_send_all(fd, b.buf, b.len);
	tbuf_release(&b);
}

static void *ctlsock_main(void *arg)
{
	struct ctlsock *cs = arg;
	struct pollfd pfd[2] = {{.fd = cs->lfd, .events = POLLIN},
				{.fd = cs->efd, .events = POLLIN}};

	for (;;) {
		int fd;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s; the control socket stops",
				strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		fd = accept4(cs->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of descriptors or memory: do not spin. */
			if (errno != EINTR && errno != ECONNABORTED)
				poll(NULL, 0, 100);
			continue;
		}
		ctlsock_serve(cs, fd);
		close(fd);
	}
	return NULL;
}

/* Binds lfd to DATADIR/kvfs.sock, through /proc when the path is long. */
static int ctlsock_bind(struct ctlsock *cs)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *datadir = cs->fs->cfg.datadir;
	struct stat st;
	int n;

	if (fstatat(cs->dir_fd, CTLPROTO_SOCK_NAME, &st, AT_SYMLINK_NOFOLLOW) ==
	    0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_err("%s/%s exists and is not a socket; remove it "
				"to get the control socket",
				datadir, CTLPROTO_SOCK_NAME);
			return -EEXIST;
		}
		/* Left by a daemon that was killed: we hold the lock now. */
		if (unlinkat(cs->dir_fd, CTLPROTO_SOCK_NAME, 0) < 0)
			return -errno;
	}
	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", datadir,
		     CTLPROTO_SOCK_NAME);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		snprintf(sa.sun_path, sizeof(sa.sun_path),
			 "/proc/self/fd/%d/%s", cs->dir_fd, CTLPROTO_SOCK_NAME);
	if (bind(cs->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (fchmodat(cs->dir_fd, CTLPROTO_SOCK_NAME, 0600, 0) < 0 ||
	    listen(cs->lfd, 16) < 0) {
		int rc = -errno;

		unlinkat(cs->dir_fd, CTLPROTO_SOCK_NAME, 0);
		return rc;
	}
	return 0;
}

int ctlsock_start(struct fs *fs)
{
	struct ctlsock *cs;
	sigset_t all, old;
	int rc;

	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	cs->fs = fs;
	cs->lfd = cs->efd = -1;
	cs->dir_fd = open(fs->cfg.datadir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cs->dir_fd < 0) {
		rc = -errno;
		goto out_free;
	}
	cs->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cs->efd = eventfd(0, EFD_CLOEXEC);
	if (cs->lfd < 0 || cs->efd < 0) {
		rc = -errno;
		goto out_close;
	}
	rc = ctlsock_bind(cs);
	if (rc < 0)
		goto out_close;
	/* Signals belong to libfuse's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = -pthread_create(&cs->thread, NULL, ctlsock_main, cs);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		unlinkat(cs->dir_fd, CTLPROTO_SOCK_NAME, 0);
		goto out_close;
	}
	fs->ctlsock = cs;
	return 0;

out_close:
	if (cs->efd >= 0)
		close(cs->efd);
	if (cs->lfd >= 0)
		close(cs->lfd);
	if (cs->dir_fd >= 0)
		close(cs->dir_fd);
out_free:
	log_err("cannot create the control socket %s/%s: %s; kvfsctl "
		"verdicts and clear will not work",
		fs->cfg.datadir, CTLPROTO_SOCK_NAME, strerror(-rc));
	free(cs);
	return rc;
}

void ctlsock_stop(struct fs *fs)
{
	struct ctlsock *cs = fs->ctlsock;
	uint64_t one = 1;

	if (!cs)
		return;
	if (write(cs->efd, &one, sizeof(one)) != sizeof(one))
		log_warn("cannot wake the control socket thread: %s",
			 strerror(errno));
	pthread_join(cs->thread, NULL);
	unlinkat(cs->dir_fd, CTLPROTO_SOCK_NAME, 0);
	close(cs->lfd);
	close(cs->efd);
	close(cs->dir_fd);
	idx_close(cs->scan);
	free(cs);
	fs->ctlsock = NULL;
}
