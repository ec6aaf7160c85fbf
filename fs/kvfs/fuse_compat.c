/* SPDX-License-Identifier: MIT */
/*
 * libfuse 3.14 and >= 3.18 (fuse_compat.h): the io_uring transport's
 * options, checks and INIT, and parallel lookups and passthrough with
 * libfuse 3.14.
 */
#include "fuse_compat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"

/*
 * FUSE passthrough (kernel 6.9, protocol 7.40), which linux/fuse.h of
 * Debian 12 (7.38) does not have: the INIT flag (in flags2), the OPEN
 * reply's flag and backing id, and the ioctls on /dev/fuse that register
 * and drop a backing file.
 */
#define COMPAT_INIT_EXT (1u << 30)
#define COMPAT_PASSTHROUGH2 (1u << 5) /* FUSE_PASSTHROUGH >> 32 */
#define COMPAT_FOPEN_PASSTHROUGH (1u << 7)
struct compat_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define COMPAT_BACKING_OPEN _IOW(229, 1, struct compat_backing_map)
#define COMPAT_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* Passthrough was asked for and the kernel took it in INIT. */
static atomic_int compat_pt;

#define FUSE_COMPAT_ENABLE_URING "/sys/module/fuse/parameters/enable_uring"
#define FUSE_COMPAT_URING_DISABLED "/proc/sys/kernel/io_uring_disabled"

int fuse_compat_has_uring(void)
{
#ifdef KVFS_FUSE_URING
	return 1;
#else
	return 0;
#endif
}

/* The first character of a small sysfs or procfs file, or -errno. */
static int fuse_compat_read_char(const char *path)
{
	char c;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, &c, 1);
	close(fd);
	return n == 1 ? (unsigned char)c : -EIO;
}

int fuse_compat_uring_check(void)
{
	int c;

	if (!fuse_compat_has_uring()) {
		fprintf(stderr,
			"kvfs: io_uring: this kvfs was built against "
			"libfuse %s, which has no FUSE over io_uring "
			"(needs >= 3.18: scripts/build "
			"--libfuse-uring)\n",
			fuse_pkgversion());
		return -ENOTSUP;
	}
	c = fuse_compat_read_char(FUSE_COMPAT_ENABLE_URING);
	if (c == -ENOENT) {
		fprintf(stderr, "kvfs: io_uring: the kernel has no FUSE over "
				"io_uring (no " FUSE_COMPAT_ENABLE_URING
				"; needs Linux >= 6.14)\n");
		return -ENOTSUP;
	}
	if (c != 'Y' && c != '1') {
		fprintf(stderr,
			"kvfs: io_uring: FUSE over io_uring is off in "
			"the kernel (" FUSE_COMPAT_ENABLE_URING
			" is not Y; as root: echo 1 > " FUSE_COMPAT_ENABLE_URING
			")\n");
		return -ENOTSUP;
	}
	/* 1 allows only io_uring_group; 2 none: kvfs may be either. */
	c = fuse_compat_read_char(FUSE_COMPAT_URING_DISABLED);
	if (c == '2') {
		fprintf(stderr, "kvfs: io_uring: io_uring is disabled "
				"(" FUSE_COMPAT_URING_DISABLED " is 2)\n");
		return -ENOTSUP;
	}
	return 0;
}

int fuse_compat_uring_args(struct fuse_args *args, unsigned q_depth)
{
	char opt[64];

	snprintf(opt, sizeof(opt), "-oio_uring,io_uring_q_depth=%u", q_depth);
	return fuse_opt_add_arg(args, opt) < 0 ? -ENOMEM : 0;
}

#ifndef KVFS_FUSE_URING
static atomic_int compat_pt_want; /* what fuse_compat_init was told */
#endif

void fuse_compat_init(struct fuse_conn_info *conn, int uring, int passthrough)
{
#ifdef KVFS_FUSE_URING
	/*
	 * Backing files on a plain file system (depth 0): kvfs's mount is
	 * then one deep, and the kernel refuses backing files on a stack.
	 */
	if (passthrough && (conn->capable & FUSE_CAP_PASSTHROUGH)) {
		conn->want |= FUSE_CAP_PASSTHROUGH;
		conn->max_backing_stack_depth = 1;
		atomic_store(&compat_pt, 1);
	}
	/* conn->want: kvfs's init sets the 32-bit word, never want_ext. */
	if (uring && (conn->capable & FUSE_CAP_OVER_IO_URING))
		conn->want |= (uint32_t)FUSE_CAP_OVER_IO_URING;
	else
		conn->want &= ~(uint32_t)FUSE_CAP_OVER_IO_URING;
	/*
	 * libfuse 3.18 matches an INTERRUPT only to requests read from
	 * /dev/fuse: one for a ring entry's request stays queued for good
	 * (and is leaked at exit). Without interrupts the kernel sends none.
	 */
	if (uring)
		conn->no_interrupt = 1;
#else
	(void)uring;
	atomic_store(&compat_pt_want, passthrough);
#endif
	/*
	 * LOOKUPs and READDIRs of one directory at once (libfuse < 3.17.1
	 * drops the flag: fuse_compat_parallel_dirops adds it to the reply).
	 */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	else
		log_warn("the kernel does not offer FUSE_PARALLEL_DIROPS: "
			 "lookups in one directory run one at a time");
}

int fuse_compat_ring_threads(void)
{
	char path[64], comm[32];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");
	int n = 0, fd;
	ssize_t len;

	if (!dir)
		return 0;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.16s/comm",
			 d->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (len > 0) {
			comm[len] = '\0';
			n += strncmp(comm, "fuse-ring-", 10) == 0;
		}
	}
	closedir(dir);
	return n;
}

int fuse_compat_serve_init(struct fuse_session *se, int uring)
{
	struct fuse_buf buf = {.mem = NULL};
	int rc, nthreads;

	/* The kernel sends INIT first and nothing else until it is answered. */
	do {
		if (fuse_session_exited(se))
			return 1;
		rc = fuse_session_receive_buf(se, &buf);
	} while (rc == -EINTR || rc == -EAGAIN);
	if (rc == 0) {
		free(buf.mem);
		return 1; /* unmounted */
	}
	if (rc < 0) {
		free(buf.mem);
		log_err("reading INIT from /dev/fuse: %s", strerror(-rc));
		return rc;
	}
	fuse_session_process_buf(se, &buf);
	free(buf.mem);
	/* libfuse ends the session when it refuses INIT (it logged why). */
	if (fuse_session_exited(se))
		return -EPROTO;
	if (!uring)
		return 0;
	/* libfuse joins its ring threads again when a ring fails to start. */
	nthreads = fuse_compat_ring_threads();
	if (nthreads == 0) {
		log_err("io_uring: libfuse did not start FUSE over io_uring "
			"(the kernel did not offer it in INIT, or a ring "
			"failed); "
			"not serving on /dev/fuse instead");
		return -EPROTONOSUPPORT;
	}
	log_info("serving FUSE over io_uring: %d ring threads", nthreads);
	return 0;
}

int fuse_compat_loop_uring(struct fuse_session *se)
{
	struct fuse_buf buf = {.mem = NULL};
	int rc = 0;

	while (!fuse_session_exited(se)) {
		rc = fuse_session_receive_buf(se, &buf);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc <= 0)
			break;
		fuse_session_process_buf(se, &buf);
	}
	free(buf.mem);
	return rc < 0 && rc != -EINTR && rc != -EAGAIN ? rc : 0;
}

void fuse_compat_stop_rings(struct fuse_session *se)
{
	/* libfuse's loop on an ended session only stops the rings. */
	fuse_session_exit(se);
	(void)fuse_session_loop(se);
}

int fuse_compat_req_in_ring(fuse_req_t req)
{
#ifdef KVFS_FUSE_URING
	return fuse_req_is_uring(req);
#else
	(void)req;
	return 0;
#endif
}

int fuse_compat_stage_iov(fuse_req_t req, const struct iovec *iov, int count,
			  size_t *len)
{
#ifdef KVFS_FUSE_URING
	char *payload;
	size_t room, got = 0;
	int i;

	if (!fuse_req_is_uring(req) ||
	    fuse_req_get_payload(req, &payload, &room, NULL) != 0)
		return 0;
	for (i = 0; i < count; i++) {
		if (iov[i].iov_len > room - got)
			return 0;
		memcpy(payload + got, iov[i].iov_base, iov[i].iov_len);
		got += iov[i].iov_len;
	}
	*len = got;
	return 1;
#else
	(void)req;
	(void)iov;
	(void)count;
	(void)len;
	return 0;
#endif
}

void fuse_compat_reply_staged(fuse_req_t req, size_t len)
{
#ifdef KVFS_FUSE_URING
	char *payload = NULL;
	size_t room;

	/* libfuse sends the entry's own buffer without copying it. */
	if (fuse_req_get_payload(req, &payload, &room, NULL) != 0) {
		fuse_reply_err(req, EIO);
		return;
	}
	fuse_reply_buf(req, payload, len);
#else
	(void)len;
	fuse_reply_err(req, EIO);
#endif
}

int fuse_compat_passthrough(void)
{
	return atomic_load(&compat_pt);
}

int fuse_compat_backing_open(struct fuse_session *se, int fd)
{
	struct compat_backing_map map = {.fd = fd};
	int id = ioctl(fuse_session_fd(se), COMPAT_BACKING_OPEN, &map);

	return id < 0 ? -errno : id == 0 ? -EIO : id;
}

void fuse_compat_backing_close(struct fuse_session *se, int id)
{
	uint32_t v = (uint32_t)id;

	if (ioctl(fuse_session_fd(se), COMPAT_BACKING_CLOSE, &v) < 0)
		log_warn("cannot drop FUSE backing file %d: %s", id,
			 strerror(errno));
}

#ifdef KVFS_FUSE_URING
int fuse_compat_reply_open(fuse_req_t req, struct fuse_file_info *fi,
			   int backing_id)
{
	fi->backing_id = backing_id;
	return fuse_reply_open(req, fi);
}

int fuse_compat_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			     struct fuse_file_info *fi, int backing_id)
{
	fi->backing_id = backing_id;
	return fuse_reply_create(req, e, fi);
}

int fuse_compat_hooks(struct fuse_session *se)
{
	(void)se;
	return 0; /* libfuse passes what fuse_compat_init asks for */
}
#else
/*
 * With libfuse < 3.17.1, which never puts FUSE_PARALLEL_DIROPS in its
 * INIT reply (want or not) and knows nothing of passthrough, the
 * session's reads and writes go through these two hooks. The kernel
 * sends INIT first and nothing else until it is answered: the read hook
 * looks at the first request only and notes what INIT offers; the write
 * hook adds to INIT's reply what kvfs asked for and the kernel offers,
 * and to an OPEN or CREATE reply the backing file that
 * fuse_compat_reply_open() or _create() set on the replying thread.
 * Nothing else is touched: every other request and reply passes through
 * as read(2) and writev(2) would pass it.
 */
static atomic_int compat_first_read;	  /* the first request was looked at */
static _Atomic uint64_t compat_init_id;	  /* INIT's unique, until replied */
static atomic_uint compat_init_offer;	  /* of INIT's flags: DIROPS, EXT */
static atomic_uint compat_init_offer2;	  /* INIT's flags2 */
static _Thread_local int compat_open_bid; /* fuse_compat_reply_open's */

static ssize_t compat_read(int fd, void *buf, size_t len, void *userdata)
{
	const size_t need = sizeof(struct fuse_in_header) +
			    offsetof(struct fuse_init_in, flags2) +
			    sizeof(uint32_t);
	struct fuse_init_in in;
	struct fuse_in_header h;
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	if (n <= 0 ||
	    atomic_load_explicit(&compat_first_read, memory_order_relaxed) ||
	    atomic_exchange(&compat_first_read, 1) || n < (ssize_t)need)
		return n;
	memcpy(&h, buf, sizeof(h));
	if (h.opcode != FUSE_INIT)
		return n;
	memcpy(&in, (char *)buf + sizeof(h),
	       offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t));
	atomic_store(&compat_init_offer, in.flags);
	atomic_store(&compat_init_offer2,
		     in.flags & COMPAT_INIT_EXT ? in.flags2 : 0);
	atomic_store(&compat_init_id, h.unique);
	return n;
}

/* ORs v into the 32-bit word at offset at of iov's reply argument. */
static void compat_or(struct iovec *iov, size_t at, uint32_t v)
{
	uint32_t w;

	memcpy(&w, (char *)iov->iov_base + at, sizeof(w));
	w |= v;
	memcpy((char *)iov->iov_base + at, &w, sizeof(w));
}

/* INIT's reply (iov[1]): the flags kvfs wants that libfuse left out. */
static void compat_init_reply(struct iovec *iov)
{
	const size_t depth = offsetof(struct fuse_init_out, unused);
	uint32_t one = 1;

	if (atomic_load(&compat_init_offer) & FUSE_PARALLEL_DIROPS)
		compat_or(iov, offsetof(struct fuse_init_out, flags),
			  FUSE_PARALLEL_DIROPS);
	if (!atomic_load(&compat_pt_want) ||
	    !(atomic_load(&compat_init_offer2) & COMPAT_PASSTHROUGH2) ||
	    iov->iov_len < depth + sizeof(one))
		return;
	compat_or(iov, offsetof(struct fuse_init_out, flags), COMPAT_INIT_EXT);
	compat_or(iov, offsetof(struct fuse_init_out, flags2),
		  COMPAT_PASSTHROUGH2);
	/* max_stack_depth, in the first unused word of 7.38: see above. */
	memcpy((char *)iov->iov_base + depth, &one, sizeof(one));
	atomic_store(&compat_pt, 1);
}

/*
 * An OPEN reply (fuse_open_out) or a CREATE reply (fuse_entry_out, then
 * fuse_open_out) in iov: passed through to compat_open_bid.
 */
static void compat_open_reply(struct iovec *iov)
{
	uint32_t bid = (uint32_t)compat_open_bid;
	size_t at;

	if (iov->iov_len == sizeof(struct fuse_open_out))
		at = 0;
	else if (iov->iov_len ==
		 sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out))
		at = sizeof(struct fuse_entry_out);
	else
		return;
	compat_or(iov, at + offsetof(struct fuse_open_out, open_flags),
		  COMPAT_FOPEN_PASSTHROUGH);
	/* backing_id, in the padding word of 7.38. */
	memcpy((char *)iov->iov_base + at +
		       offsetof(struct fuse_open_out, padding),
	       &bid, sizeof(bid));
}

static ssize_t compat_writev(int fd, struct iovec *iov, int count,
			     void *userdata)
{
	uint64_t id = atomic_load(&compat_init_id);
	struct fuse_out_header h;

	(void)userdata;
	if (count < 2 || iov[0].iov_len != sizeof(h))
		return writev(fd, iov, count);
	memcpy(&h, iov[0].iov_base, sizeof(h));
	if (id && h.unique == id && h.error == 0 &&
	    iov[1].iov_len >=
		    offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t)) {
		compat_init_reply(&iov[1]);
		atomic_store(&compat_init_id, 0);
	} else if (compat_open_bid > 0 && h.error == 0) {
		compat_open_reply(&iov[1]);
	}
	return writev(fd, iov, count);
}

int fuse_compat_reply_open(fuse_req_t req, struct fuse_file_info *fi,
			   int backing_id)
{
	int rc;

	compat_open_bid = backing_id;
	rc = fuse_reply_open(req, fi);
	compat_open_bid = 0;
	return rc;
}

int fuse_compat_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			     struct fuse_file_info *fi, int backing_id)
{
	int rc;

	compat_open_bid = backing_id;
	rc = fuse_reply_create(req, e, fi);
	compat_open_bid = 0;
	return rc;
}

int fuse_compat_hooks(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {.read = compat_read,
						 .writev = compat_writev};
	int rc = fuse_session_custom_io(se, &io, fuse_session_fd(se));

	return rc < 0 ? rc : 0;
}
#endif
