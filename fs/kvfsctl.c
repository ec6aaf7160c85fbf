/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl: the operator's command for kvfs (kvfsctl(8)). It never goes
 * through the FUSE namespace except to read MOUNTPOINT/.kvfs/{status,stats}:
 * a stat() of a block would itself be a lookup and change the verdicts it
 * is asked about. What needs the daemon goes through its control files or
 * its control socket (ctlsock.h); what needs no daemon (fsck, an offline
 * status) opens DATADIR's index and data files directly.
 *
 * Subcommands: status, stats, verdicts, clear, evict here; fsck in
 * kvfsctl_fsck.c; gc in kvfsctl_gc.c. Each parses its own options (getopt_long), prints text by
 * default and one JSON document with --json, and returns an exit status
 * (KC_EXIT_*).
 */
#include "kvfsctl.h"

#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/un.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctlsock.h"
#include "index.h"
#include "log.h"

/* statfs(2) f_type of every FUSE file system. */
#define KC_FUSE_MAGIC 0x65735546
/* Largest control file or socket response read. */
#define KC_READ_MAX (16u << 20)
/* Seconds to wait for the daemon's answer on the control socket. */
#define KC_SOCK_TIMEOUT_S 60
/* ... for an eviction, which unlinks blocks one by one. */
#define KC_EVICT_TIMEOUT_S 3600

void kc_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	if (cmd)
		fprintf(stderr, "kvfsctl %s: ", cmd);
	else
		fprintf(stderr, "kvfsctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void kc_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

const char *kc_size(char *buf, size_t len, uint64_t bytes)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, v < 10 ? "%.2f %s" : "%.1f %s", v, unit[u]);
	return buf;
}

/* "3d 04:05:06" or "04:05:06". */
static const char *kc_duration(char *buf, size_t len, uint64_t s)
{
	unsigned long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;

	if (d)
		snprintf(buf, len, "%llud %02llu:%02llu:%02llu", d, h, m,
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%02llu:%02llu:%02llu", h, m,
			 (unsigned long long)(s % 60));
	return buf;
}

/*
 * JSON, as much as kvfs writes: one object of strings, numbers, booleans,
 * null, nested objects and arrays, flattened into "a.b" / "a.0" keys.
 */
struct kc_parser {
	const char *p;
	struct kc_json *j;
};

#define KC_JSON_DEPTH 8

static void kc_ws(struct kc_parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
	       *ps->p == '\r')
		ps->p++;
}

/* Adds key = val; takes ownership of val (also on failure). */
static int kc_json_add(struct kc_json *j, const char *key, char *val,
		       int is_str)
{
	char *k = strdup(key);

	if (!k)
		goto out_nomem;
	if (j->n == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 32;
		struct kc_kv *v = realloc(j->v, cap * sizeof(*v));

		if (!v)
			goto out_nomem;
		j->v = v;
		j->cap = cap;
	}
	j->v[j->n++] = (struct kc_kv){.key = k, .val = val, .is_str = is_str};
	return 0;
out_nomem:
	free(k);
	free(val);
	return -ENOMEM;
}

static int kc_hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -EINVAL;
	}
	*out = v;
	return 0;
}

/* Appends code point cp as UTF-8 at q; returns the new end. */
static char *kc_utf8(char *q, unsigned cp)
{
	if (cp < 0x80) {
		*q++ = (char)cp;
	} else if (cp < 0x800) {
		*q++ = (char)(0xc0 | cp >> 6);
		*q++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*q++ = (char)(0xe0 | cp >> 12);
		*q++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*q++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*q++ = (char)(0xf0 | cp >> 18);
		*q++ = (char)(0x80 | (cp >> 12 & 0x3f));
		*q++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*q++ = (char)(0x80 | (cp & 0x3f));
	}
	return q;
}

/* A string literal at ps->p; *out is malloc'd and decoded. */
static int kc_parse_string(struct kc_parser *ps, char **out)
{
	const char *p = ps->p + 1, *e = p;
	char *s, *q;

	if (*ps->p != '"')
		return -EINVAL;
	/* The decoded text is never longer than the literal. */
	while (*e && *e != '"')
		e += *e == '\\' && e[1] ? 2 : 1;
	if (*e != '"')
		return -EINVAL;
	s = q = malloc((size_t)(e - p) + 1);
	if (!s)
		return -ENOMEM;
	while (p < e) {
		unsigned cp, lo;

		if (*p != '\\') {
			*q++ = *p++;
			continue;
		}
		p++;
		switch (*p++) {
		case '"':
			*q++ = '"';
			break;
		case '\\':
			*q++ = '\\';
			break;
		case '/':
			*q++ = '/';
			break;
		case 'b':
			*q++ = '\b';
			break;
		case 'f':
			*q++ = '\f';
			break;
		case 'n':
			*q++ = '\n';
			break;
		case 'r':
			*q++ = '\r';
			break;
		case 't':
			*q++ = '\t';
			break;
		case 'u':
			if (p + 4 > e || kc_hex4(p, &cp) < 0)
				goto out_bad;
			p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && p + 6 <= e &&
			    p[0] == '\\' && p[1] == 'u' &&
			    kc_hex4(p + 2, &lo) == 0 && lo >= 0xdc00 &&
			    lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
				p += 6;
			}
			if (cp == 0)
				goto out_bad;
			q = kc_utf8(q, cp);
			break;
		default:
			goto out_bad;
		}
	}
	*q = '\0';
	ps->p = e + 1;
	*out = s;
	return 0;
out_bad:
	free(s);
	return -EINVAL;
}

static int kc_parse_value(struct kc_parser *ps, const char *key, int depth);

/* An object or array at ps->p; members get keys "prefix.name". */
static int kc_parse_container(struct kc_parser *ps, const char *prefix,
			      int depth)
{
	char close = *ps->p == '{' ? '}' : ']';
	size_t index = 0;
	int rc;

	if (depth > KC_JSON_DEPTH)
		return -EINVAL;
	ps->p++;
	kc_ws(ps);
	if (*ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *name = NULL, *key;
		char num[32];
		size_t klen;

		kc_ws(ps);
		if (close == '}') {
			rc = kc_parse_string(ps, &name);
			if (rc < 0)
				return rc;
			kc_ws(ps);
			if (*ps->p != ':') {
				free(name);
				return -EINVAL;
			}
			ps->p++;
		} else {
			snprintf(num, sizeof(num), "%zu", index++);
		}
		klen = strlen(prefix) + 1 + strlen(name ? name : num) + 1;
		key = malloc(klen);
		if (!key) {
			free(name);
			return -ENOMEM;
		}
		snprintf(key, klen, "%s%s%s", prefix, *prefix ? "." : "",
			 name ? name : num);
		free(name);
		rc = kc_parse_value(ps, key, depth + 1);
		free(key);
		if (rc < 0)
			return rc;
		kc_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p != close)
			return -EINVAL;
		ps->p++;
		return 0;
	}
}

static int kc_parse_value(struct kc_parser *ps, const char *key, int depth)
{
	const char *start;
	char *val;
	int rc;

	kc_ws(ps);
	switch (*ps->p) {
	case '{':
	case '[':
		return kc_parse_container(ps, key, depth);
	case '"':
		rc = kc_parse_string(ps, &val);
		return rc < 0 ? rc : kc_json_add(ps->j, key, val, 1);
	case 'n':
		if (strncmp(ps->p, "null", 4) != 0)
			return -EINVAL;
		ps->p += 4;
		return kc_json_add(ps->j, key, NULL, 0);
	default:
		break;
	}
	start = ps->p;
	while (*ps->p && strchr("+-0123456789.eEtruefals", *ps->p))
		ps->p++;
	if (ps->p == start)
		return -EINVAL;
	val = strndup(start, (size_t)(ps->p - start));
	if (!val)
		return -ENOMEM;
	return kc_json_add(ps->j, key, val, 0);
}

int kc_json_parse(const char *text, struct kc_json *out)
{
	struct kc_parser ps = {.p = text, .j = out};
	int rc;

	memset(out, 0, sizeof(*out));
	kc_ws(&ps);
	if (*ps.p != '{')
		return -EINVAL;
	rc = kc_parse_container(&ps, "", 0);
	if (rc == 0) {
		kc_ws(&ps);
		if (*ps.p)
			rc = -EINVAL;
	}
	if (rc < 0)
		kc_json_free(out);
	return rc;
}

void kc_json_free(struct kc_json *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->v[i].key);
		free(j->v[i].val);
	}
	free(j->v);
	memset(j, 0, sizeof(*j));
}

const char *kc_json_get(const struct kc_json *j, const char *key)
{
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->v[i].key, key) == 0)
			return j->v[i].val;
	return NULL;
}

int kc_json_u64(const struct kc_json *j, const char *key, uint64_t *out)
{
	const char *v = NULL;
	char *end;
	unsigned long long n;

	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->v[i].key, key) == 0 && !j->v[i].is_str)
			v = j->v[i].val;
	if (!v || *v < '0' || *v > '9')
		return -ENOENT;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end)
		return -ENOENT;
	*out = n;
	return 0;
}

/*
 * Reads a control file whole: *buf malloc'd and NUL-terminated. Each open
 * of one is a snapshot served with direct_io, so a short read is its end:
 * one READ request, not a second one to see EOF.
 */
static int kc_read_file(const char *path, char **buf)
{
	size_t len = 0, cap = 65536;
	char *b = malloc(cap);
	int fd, rc = 0;

	if (!b)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nb =
				cap < KC_READ_MAX ? realloc(b, 2 * cap) : NULL;

			if (!nb) {
				rc = cap < KC_READ_MAX ? -ENOMEM : -EFBIG;
				break;
			}
			b = nb;
			cap *= 2;
		}
		n = read(fd, b + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len + 1 < cap)
			break;
	}
	close(fd);
	if (rc == 0) {
		b[len] = '\0';
		*buf = b;
		return 0;
	}
out_free:
	free(b);
	return rc;
}

/* Opens DATADIR's control socket, connected, with a timeout; -errno. */
static int kc_sock_connect(const char *datadir, int timeout_s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = timeout_s};
	int fd, dfd = -1, n, rc;

	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", datadir,
		     CTLSOCK_NAME);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		/* Too long for sun_path: go through the directory's fd. */
		dfd = open(datadir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		snprintf(sa.sun_path, sizeof(sa.sun_path),
			 "/proc/self/fd/%d/%s", dfd, CTLSOCK_NAME);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out_close_dir;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		goto out_close_dir;
	}
	rc = fd;
out_close_dir:
	if (dfd >= 0)
		close(dfd);
	return rc;
}

/*
 * One request on DATADIR's control socket, waiting at most timeout_s
 * seconds for the answer. Returns 0 with *resp the daemon's answer (ok
 * true), 1 with *resp its error (ok false), or -errno when there was no
 * answer. *raw, when not NULL, gets the response text.
 */
static int kc_request_wait(const char *datadir, const char *line,
			   struct kc_json *resp, char **raw, int timeout_s)
{
	size_t len = 0, cap = 4096, llen = strlen(line);
	char *buf = NULL;
	const char *ok;
	int fd, rc;

	fd = kc_sock_connect(datadir, timeout_s);
	if (fd < 0)
		return fd;
	while (len < llen) {
		ssize_t n = send(fd, line + len, llen - len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out_close;
		}
		len += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	len = 0;
	buf = malloc(cap);
	if (!buf) {
		rc = -ENOMEM;
		goto out_close;
	}
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nb = cap < KC_READ_MAX ? realloc(buf, 2 * cap)
						     : NULL;

			if (!nb) {
				rc = -EFBIG;
				goto out_close;
			}
			buf = nb;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno == EAGAIN ? -ETIMEDOUT : -errno;
			goto out_close;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	rc = kc_json_parse(buf, resp);
	if (rc < 0) {
		rc = -EBADMSG;
		goto out_close;
	}
	ok = kc_json_get(resp, "ok");
	rc = ok && strcmp(ok, "true") == 0 ? 0 : 1;
	if (raw) {
		*raw = buf;
		buf = NULL;
	}
out_close:
	free(buf);
	close(fd);
	return rc;
}

/* kc_request_wait() with the usual timeout. */
static int kc_request(const char *datadir, const char *line,
		      struct kc_json *resp, char **raw)
{
	return kc_request_wait(datadir, line, resp, raw, KC_SOCK_TIMEOUT_S);
}

/* Prints the reason a request got no answer. */
static void kc_request_err(const char *cmd, const struct kc_target *t, int rc)
{
	if (rc == -ENOENT || rc == -ECONNREFUSED)
		kc_err(cmd,
		       "%s/%s does not answer (%s): is kvfs running, and did "
		       "it log that it could not create its control socket?",
		       t->datadir, CTLSOCK_NAME, strerror(-rc));
	else if (rc == -EBADMSG)
		kc_err(cmd, "%s/%s sent an answer that is not JSON", t->datadir,
		       CTLSOCK_NAME);
	else
		kc_err(cmd, "%s/%s: %s", t->datadir, CTLSOCK_NAME,
		       strerror(-rc));
}

/* Prints the error the daemon answered. */
static void kc_daemon_err(const char *cmd, const char *what,
			  const struct kc_json *resp)
{
	const char *msg = kc_json_get(resp, "message");
	const char *err = kc_json_get(resp, "error");

	kc_err(cmd, "%s: %s (%s)", what, msg ? msg : "failed", err ? err : "?");
}

static int kc_exists(const char *dir, const char *name, mode_t type)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/*
 * Whether a kvfs daemon holds DATADIR's lock: 1 (its pid in *pid when the
 * lock file says), 0 when not, -errno. Takes no lock for longer than the
 * test; never creates the lock file.
 */
static int kc_lock_probe(const char *datadir, long *pid)
{
	char path[PATH_MAX], buf[32];
	ssize_t n;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/kvfs.lock", datadir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
	} else if (errno == EWOULDBLOCK) {
		rc = 1;
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		*pid = strtol(buf, NULL, 10);
	} else {
		rc = -errno;
	}
	close(fd);
	return rc;
}

static int kc_status_file(struct kc_target *t)
{
	char path[PATH_MAX], *text;
	int rc;

	snprintf(path, sizeof(path), "%s/.kvfs/status", t->mountpoint);
	rc = kc_read_file(path, &text);
	if (rc < 0)
		return rc;
	rc = kc_json_parse(text, &t->status);
	free(text);
	if (rc == 0 && !kc_json_get(&t->status, "datadir")) {
		kc_json_free(&t->status);
		rc = -EINVAL;
	}
	return rc;
}

int kc_target_open(const char *cmd, const char *arg, struct kc_target *t)
{
	struct kc_json info;
	struct statfs sf;
	struct stat st;
	uint64_t pid;
	int rc;

	memset(t, 0, sizeof(*t));
	t->path = realpath(arg, NULL);
	rc = 0;
	if (!t->path || stat(t->path, &st) < 0 || statfs(t->path, &sf) < 0)
		rc = -errno;
	if (rc == -ENOTCONN || rc == -ECONNABORTED) {
		kc_err(cmd,
		       "%s: %s: the daemon of this mount is gone; unmount it "
		       "with fusermount3 -u %s",
		       arg, strerror(-rc), arg);
		goto out_free;
	}
	if (rc < 0) {
		kc_err(cmd, "%s: %s", arg, strerror(-rc));
		goto out_free;
	}
	if (!S_ISDIR(st.st_mode)) {
		kc_err(cmd, "%s: not a directory", arg);
		rc = -ENOTDIR;
		goto out_free;
	}
	if (sf.f_type == KC_FUSE_MAGIC) {
		t->mountpoint = strdup(t->path);
		if (!t->mountpoint) {
			rc = -ENOMEM;
			goto out_free;
		}
		rc = kc_status_file(t);
		if (rc < 0) {
			kc_err(cmd,
			       "%s is on a FUSE file system but is not a kvfs "
			       "mount point (%s/.kvfs/status: %s)",
			       arg, t->path, strerror(-rc));
			goto out_free;
		}
		t->datadir = strdup(kc_json_get(&t->status, "datadir"));
		if (!t->datadir) {
			rc = -ENOMEM;
			goto out_free;
		}
		if (kc_json_u64(&t->status, "pid", &pid) == 0)
			t->pid = (long)pid;
		t->mounted = 1;
		t->given_mount = 1;
		return 0;
	}
	if (!kc_exists(t->path, "index.db", S_IFREG) &&
	    !kc_exists(t->path, "data", S_IFDIR) &&
	    !kc_exists(t->path, "kvfs.lock", S_IFREG)) {
		kc_err(cmd,
		       "%s is neither a kvfs mount point nor a kvfs data "
		       "directory (it has no .kvfs/status, index.db or data/)",
		       arg);
		rc = -EINVAL;
		goto out_free;
	}
	t->datadir = strdup(t->path);
	if (!t->datadir) {
		rc = -ENOMEM;
		goto out_free;
	}
	/* A data directory: ask its daemon, if any, where it is mounted. */
	rc = kc_request(t->datadir, "info\n", &info, NULL);
	if (rc == 0) {
		const char *mnt = kc_json_get(&info, "mountpoint");

		if (kc_json_u64(&info, "pid", &pid) == 0)
			t->pid = (long)pid;
		t->mounted = 1;
		t->mountpoint = mnt ? strdup(mnt) : NULL;
		kc_json_free(&info);
		if (t->mountpoint && kc_status_file(t) < 0) {
			free(t->mountpoint);
			t->mountpoint = NULL;
		}
		return 0;
	}
	if (rc == 1)
		kc_json_free(&info);
	rc = kc_lock_probe(t->datadir, &t->pid);
	if (rc < 0) {
		kc_err(cmd, "%s/kvfs.lock: %s", t->datadir, strerror(-rc));
		goto out_free;
	}
	t->mounted = rc;
	return 0;
out_free:
	kc_target_free(t);
	return rc;
}

void kc_target_free(struct kc_target *t)
{
	free(t->path);
	free(t->datadir);
	free(t->mountpoint);
	kc_json_free(&t->status);
	memset(t, 0, sizeof(*t));
}

/*
 * A target that must be served by a running daemon whose mount point is
 * known: prints why not and returns -errno otherwise.
 */
static int kc_need_mounted(const char *cmd, const struct kc_target *t)
{
	if (!t->mounted) {
		kc_err(cmd,
		       "%s is not mounted: kvfs keeps counters and verdicts "
		       "only while it runs",
		       t->datadir);
		return -ENOTCONN;
	}
	return 0;
}

/* Percent-encodes path for a request line (see ctlsock.h). */
static char *kc_encode(const char *path)
{
	char *out = malloc(3 * strlen(path) + 1), *q = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if (*p > 0x20 && *p < 0x7f && *p != '%')
			*q++ = (char)*p;
		else
			q += sprintf(q, "%%%02X", *p);
	}
	*q = '\0';
	return out;
}

/*
 * PATH as the daemon wants it, relative to the mount's root and starting
 * with '/': an absolute path under the mount point loses that prefix;
 * anything else already is one. malloc'd.
 */
static char *kc_mount_rel(const struct kc_target *t, const char *path)
{
	size_t n = t->mountpoint ? strlen(t->mountpoint) : 0;
	char *out;

	if (n > 1 && strncmp(path, t->mountpoint, n) == 0 &&
	    (path[n] == '/' || path[n] == '\0'))
		path += n;
	out = malloc(strlen(path) + 2);
	if (out)
		sprintf(out, "%s%s", path[0] == '/' ? "" : "/", path);
	return out;
}

int kc_data_usage(const char *datadir, struct kc_usage *u)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	memset(u, 0, sizeof(*u));
	snprintf(path, sizeof(path), "%s/data", datadir);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		unsigned id;
		int end = 0;

		if (de->d_name[0] < '0' || de->d_name[0] > '9' ||
		    sscanf(de->d_name, "%u.kvd%n", &id, &end) != 1 ||
		    de->d_name[end] != '\0')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
			    0 ||
		    !S_ISREG(st.st_mode))
			continue;
		u->nfiles++;
		u->physical += (uint64_t)st.st_blocks * 512;
		u->apparent += (uint64_t)st.st_size;
	}
	closedir(d);
	return 0;
}

/* Parses the options of a subcommand; see kc_getopt(). */
struct kc_opts {
	int json;
	int help;
	double watch;
	long count;
};

enum { KC_OPT_JSON = 1000, KC_OPT_WATCH, KC_OPT_COUNT };

/*
 * getopt_long over argv (argv[0] is the subcommand) with --json, --help and,
 * when watch is set, --watch SECONDS and --count N. Returns the index of the
 * first positional argument, or -1 after printing a usage error.
 */
static int kc_getopt(const char *cmd, int argc, char **argv, struct kc_opts *o,
		     int watch)
{
	static const struct option all[] = {
		{"json", no_argument, NULL, KC_OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{"watch", required_argument, NULL, KC_OPT_WATCH},
		{"count", required_argument, NULL, KC_OPT_COUNT},
		{NULL, 0, NULL, 0},
	};
	static const struct option basic[] = {
		{"json", no_argument, NULL, KC_OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", watch ? all : basic, NULL)) !=
	       -1) {
		switch (c) {
		case KC_OPT_JSON:
			o->json = 1;
			break;
		case 'h':
			o->help = 1;
			break;
		case KC_OPT_WATCH:
			errno = 0;
			o->watch = strtod(optarg, &end);
			if (errno || end == optarg || *end || o->watch < 0.1 ||
			    o->watch > 86400) {
				kc_err(cmd,
				       "--watch wants a number of seconds "
				       "from 0.1 to 86400, not '%s'",
				       optarg);
				return -1;
			}
			break;
		case KC_OPT_COUNT:
			errno = 0;
			o->count = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o->count < 1) {
				kc_err(cmd,
				       "--count wants a positive number, not "
				       "'%s'",
				       optarg);
				return -1;
			}
			break;
		case ':':
			kc_err(cmd,
			       "option '%s' needs a value; try 'kvfsctl %s "
			       "--help'",
			       argv[optind - 1], cmd);
			return -1;
		default:
			kc_err(cmd,
			       "unknown option '%s'; try 'kvfsctl %s --help'",
			       argv[optind - 1], cmd);
			return -1;
		}
	}
	if (o->count && !o->watch) {
		kc_err(cmd, "--count needs --watch");
		return -1;
	}
	return optind;
}

/* Checks the number of positional arguments; prints a usage error. */
static int kc_nargs(const char *cmd, int have, int min, int max,
		    const char *what)
{
	if (have >= min && have <= max)
		return 0;
	kc_err(cmd, "%s %s; try 'kvfsctl %s --help'",
	       have < min ? "missing" : "too many arguments: expected", what,
	       cmd);
	return -1;
}

#define KC_BEGIN_HELP (-2)

/*
 * A subcommand's options, --help and argument count (min to max, named
 * args in errors): returns the index of its first argument, KC_BEGIN_HELP
 * once usage is printed, or -1 after an error message.
 */
static int kc_begin(const char *cmd, int argc, char **argv, int watch,
		    const char *usage, int min, int max, const char *args,
		    struct kc_opts *o)
{
	int i = kc_getopt(cmd, argc, argv, o, watch);

	if (i < 0)
		return -1;
	if (o->help) {
		fputs(usage, stdout);
		return KC_BEGIN_HELP;
	}
	if (kc_nargs(cmd, argc - i, min, max, args) < 0)
		return -1;
	return i;
}

/* --- status --------------------------------------------------------- */

static const char kc_status_usage[] =
	"usage: kvfsctl status [--json] MOUNTPOINT|DATADIR\n"
	"\n"
	"Capacity, use, blocks, data files, dirty memory, verdict-cache size,\n"
	"uptime and version of a kvfs mount. For a data directory that is not\n"
	"mounted, what can be read offline from its index and data files.\n"
	"\n"
	"  --json      print one JSON object instead of text\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 success, 2 usage or operational error.\n";

/* Everything status shows; UINT64_MAX where unknown. */
struct kc_status {
	uint64_t uptime, capacity, used, fs_size, fs_free, stored, blocks;
	uint64_t dirs, others, orphans, inodes, dirty, dirty_limit, verdicts;
	uint64_t quarantined;
	struct kc_usage u;
	const char *version;
	const char *count_err; /* why blocks is unknown */
};

#define KC_UNKNOWN UINT64_MAX

static void kc_status_offline(const struct kc_target *t, struct kc_status *s)
{
	struct idx_counts c;
	char path[PATH_MAX];
	struct idx *idx;
	int rc;

	snprintf(path, sizeof(path), "%s/index.db", t->datadir);
	if (!kc_exists(t->datadir, "index.db", S_IFREG)) {
		s->count_err = "no index.db";
		return;
	}
	rc = idx_open(&idx, path, 0755, getuid(), getgid());
	if (rc < 0) {
		s->count_err = strerror(-rc);
		return;
	}
	if (idx_statfs(idx, &s->inodes, &s->stored) < 0)
		s->inodes = s->stored = KC_UNKNOWN;
	rc = idx_count(idx, &c);
	if (rc == 0) {
		s->blocks = c.files;
		s->dirs = c.dirs;
		s->others = c.others;
		s->orphans = c.orphans;
	} else {
		s->count_err = strerror(-rc);
	}
	idx_close(idx);
}

static void kc_status_live(const struct kc_target *t, struct kc_status *s)
{
	const struct kc_json *j = &t->status;
	struct kc_json resp;
	int rc;

	s->version = kc_json_get(j, "version");
	kc_json_u64(j, "uptime_seconds", &s->uptime);
	kc_json_u64(j, "bytes", &s->stored);
	kc_json_u64(j, "inodes", &s->inodes);
	kc_json_u64(j, "dirty_bytes", &s->dirty);
	kc_json_u64(j, "dirty_limit", &s->dirty_limit);
	kc_json_u64(j, "verdicts", &s->verdicts);
	kc_json_u64(j, "quarantined", &s->quarantined);
	kc_json_u64(j, "capacity", &s->capacity);
	kc_json_u64(j, "used", &s->used);
	/* Counting blocks scans the index: the daemon does it on request. */
	rc = kc_request(t->datadir, "status\n", &resp, NULL);
	if (rc < 0) {
		s->count_err = "the control socket does not answer";
		return;
	}
	if (rc == 0) {
		kc_json_u64(&resp, "files", &s->blocks);
		kc_json_u64(&resp, "directories", &s->dirs);
		kc_json_u64(&resp, "others", &s->others);
		kc_json_u64(&resp, "orphans", &s->orphans);
	}
	if (s->blocks == KC_UNKNOWN)
		s->count_err = "the daemon could not count them";
	kc_json_free(&resp);
}

/* Prints v as a JSON number, or null when unknown. */
static void kc_jnum(const char *key, uint64_t v, int last)
{
	if (v == KC_UNKNOWN)
		printf("\"%s\": null%s", key, last ? "" : ", ");
	else
		printf("\"%s\": %llu%s", key, (unsigned long long)v,
		       last ? "" : ", ");
}

static void kc_status_json(const struct kc_target *t, const struct kc_status *s)
{
	printf("{\"mounted\": %s, \"datadir\": ",
	       t->mounted ? "true" : "false");
	kc_json_str(stdout, t->datadir);
	printf(", \"mountpoint\": ");
	if (t->mountpoint)
		kc_json_str(stdout, t->mountpoint);
	else
		printf("null");
	printf(", \"version\": ");
	kc_json_str(stdout, s->version ? s->version : KVFS_VERSION);
	printf(", ");
	kc_jnum("pid", t->pid ? (uint64_t)t->pid : KC_UNKNOWN, 0);
	kc_jnum("uptime_seconds", s->uptime, 0);
	kc_jnum("capacity_bytes", s->capacity, 0);
	kc_jnum("used_bytes", s->used, 0);
	kc_jnum("fs_size_bytes", s->fs_size, 0);
	kc_jnum("fs_free_bytes", s->fs_free, 0);
	kc_jnum("stored_bytes", s->stored, 0);
	kc_jnum("physical_bytes", s->u.physical, 0);
	kc_jnum("apparent_bytes", s->u.apparent, 0);
	kc_jnum("data_files", s->u.nfiles, 0);
	kc_jnum("blocks", s->blocks, 0);
	kc_jnum("directories", s->dirs, 0);
	kc_jnum("other_inodes", s->others, 0);
	kc_jnum("orphans", s->orphans, 0);
	kc_jnum("inodes", s->inodes, 0);
	kc_jnum("dirty_bytes", s->dirty, 0);
	kc_jnum("dirty_limit", s->dirty_limit, 0);
	kc_jnum("verdicts", s->verdicts, 0);
	kc_jnum("quarantined", s->quarantined, 1);
	printf("}\n");
}

static void kc_status_text(const struct kc_target *t, const struct kc_status *s)
{
	char a[32], b[32], c[32];

	if (t->mounted && t->mountpoint)
		printf("kvfs %s, mounted at %s (pid %ld), up %s\n",
		       s->version ? s->version : "?", t->mountpoint, t->pid,
		       s->uptime == KC_UNKNOWN
			       ? "?"
			       : kc_duration(a, sizeof(a), s->uptime));
	else
		printf("kvfs data directory, not mounted (read offline by "
		       "kvfsctl %s)\n",
		       KVFS_VERSION);
	printf("data directory  %s\n", t->datadir);
	printf("capacity        ");
	if (s->capacity != KC_UNKNOWN)
		printf("%s configured, %s used; ",
		       kc_size(a, sizeof(a), s->capacity),
		       s->used == KC_UNKNOWN ? "?"
					     : kc_size(b, sizeof(b), s->used));
	printf("backing filesystem %s, %s free\n",
	       kc_size(c, sizeof(c), s->fs_size),
	       kc_size(b, sizeof(b), s->fs_free));
	printf("stored          %s in ",
	       s->stored == KC_UNKNOWN ? "?"
				       : kc_size(a, sizeof(a), s->stored));
	if (s->blocks == KC_UNKNOWN)
		printf("? blocks (%s)\n", s->count_err ? s->count_err : "?");
	else
		printf("%llu blocks (regular files)\n",
		       (unsigned long long)s->blocks);
	printf("physical        %s in %llu data files (st_blocks of data/; "
	       "apparent size %s)\n",
	       kc_size(a, sizeof(a), s->u.physical),
	       (unsigned long long)s->u.nfiles,
	       kc_size(b, sizeof(b), s->u.apparent));
	if (s->blocks != KC_UNKNOWN)
		printf("namespace       %llu directories, %llu other inodes, "
		       "%llu orphans (unlinked while open)\n",
		       (unsigned long long)s->dirs,
		       (unsigned long long)s->others,
		       (unsigned long long)s->orphans);
	if (!t->mounted || !t->mountpoint) {
		printf("dirty memory    - (not mounted)\n");
		printf("verdict cache   - (not mounted)\n");
		return;
	}
	printf("dirty memory    %s of %s\n", kc_size(a, sizeof(a), s->dirty),
	       kc_size(b, sizeof(b), s->dirty_limit));
	printf("verdict cache   %llu verdicts, %llu quarantined\n",
	       (unsigned long long)s->verdicts,
	       (unsigned long long)s->quarantined);
}

static int kc_status(int argc, char **argv)
{
	const char *cmd = "status";
	struct kc_status s;
	struct kc_target t;
	struct statvfs sv;
	struct kc_opts o;
	int i;

	i = kc_begin(cmd, argc, argv, 0, kc_status_usage, 1, 1,
		     "MOUNTPOINT|DATADIR", &o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	memset(&s, 0xff, sizeof(s)); /* every number unknown */
	s.version = NULL;
	s.count_err = NULL;
	if (t.mounted && !t.mountpoint) {
		kc_err(cmd,
		       "%s is locked by process %ld (a kvfs whose control "
		       "socket does not answer, or a kvfsctl fsck); ask its "
		       "mount point instead",
		       t.datadir, t.pid);
		kc_target_free(&t);
		return KC_EXIT_ERROR;
	}
	if (statvfs(t.datadir, &sv) == 0) {
		s.fs_size = (uint64_t)sv.f_blocks * sv.f_frsize;
		s.fs_free = (uint64_t)sv.f_bavail * sv.f_frsize;
	}
	if (kc_data_usage(t.datadir, &s.u) < 0)
		memset(&s.u, 0, sizeof(s.u));
	if (t.mounted)
		kc_status_live(&t, &s);
	else
		kc_status_offline(&t, &s);
	if (o.json)
		kc_status_json(&t, &s);
	else
		kc_status_text(&t, &s);
	kc_target_free(&t);
	return KC_EXIT_OK;
}

/* --- stats ---------------------------------------------------------- */

static const char kc_stats_usage[] =
	"usage: kvfsctl stats [--json] [--watch SECONDS [--count N]]\n"
	"                     MOUNTPOINT|DATADIR\n"
	"\n"
	"The counters of a running kvfs (MOUNTPOINT/.kvfs/stats): lookups,\n"
	"hits, misses, probes, coalesced lookups, appends (stores), reads\n"
	"(loads), bytes, drops, quarantines, kernel invalidations and errors\n"
	"by kind. With --watch, a header line and then one line of per-second\n"
	"rates every SECONDS, like vmstat(8), until interrupted or N lines.\n"
	"\n"
	"  --json            one JSON object (with --watch: one per line)\n"
	"  --watch SECONDS   print rates every SECONDS (0.1 to 86400)\n"
	"  --count N         stop after N lines of rates\n"
	"  -h, --help        print this help\n"
	"\n"
	"Exit status: 0 success, 2 usage or operational error (also when the\n"
	"data directory is not mounted).\n";

struct kc_metric {
	char *name;
	char *text; /* the value as written */
	double v;
};

struct kc_metrics {
	struct kc_metric *m;
	size_t n;
};

static void kc_metrics_free(struct kc_metrics *ms)
{
	for (size_t i = 0; i < ms->n; i++) {
		free(ms->m[i].name);
		free(ms->m[i].text);
	}
	free(ms->m);
	memset(ms, 0, sizeof(*ms));
}

/* Parses Prometheus text: "name[{labels}] value [timestamp]" lines. */
static int kc_metrics_parse(char *text, struct kc_metrics *ms)
{
	size_t cap = 0;

	memset(ms, 0, sizeof(*ms));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *name, *val, *end, *save;
		double v;

		if (line[0] == '#' || line[0] == '\0')
			continue;
		name = strtok_r(line, " \t", &save);
		val = strtok_r(NULL, " \t", &save);
		if (!name || !val)
			continue;
		v = strtod(val, &end);
		if (end == val || *end)
			continue;
		if (ms->n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct kc_metric *nm =
				realloc(ms->m, ncap * sizeof(*nm));

			if (!nm)
				goto out_nomem;
			ms->m = nm;
			cap = ncap;
		}
		ms->m[ms->n] = (struct kc_metric){
			.name = strdup(name), .text = strdup(val), .v = v};
		if (!ms->m[ms->n].name || !ms->m[ms->n].text) {
			free(ms->m[ms->n].name);
			free(ms->m[ms->n].text);
			goto out_nomem;
		}
		ms->n++;
	}
	return 0;
out_nomem:
	kc_metrics_free(ms);
	return -ENOMEM;
}

/* The value of kvfs_NAME; -1 when the daemon does not export it. */
static double kc_metric(const struct kc_metrics *ms, const char *name)
{
	char full[128];

	snprintf(full, sizeof(full), "kvfs_%s", name);
	for (size_t i = 0; i < ms->n; i++)
		if (strcmp(ms->m[i].name, full) == 0)
			return ms->m[i].v;
	return -1;
}

/* Sum of the metrics that exist (0 when none does). */
static double kc_metric_sum(const struct kc_metrics *ms,
			    const char *const *names)
{
	double sum = 0;

	for (; *names; names++) {
		double v = kc_metric(ms, *names);

		if (v >= 0)
			sum += v;
	}
	return sum;
}

static const char *const kc_error_metrics[] = {
	"read_short_records_total", "read_checksum_errors_total",
	"io_errors_total",	    "lookup_probe_errors_total",
	"capacity_enospc_total",    NULL,
};

/* One summary value: a counter or a sum of counters. */
struct kc_col {
	const char *key;  /* JSON name */
	const char *head; /* --watch column header */
	const char *names[4];
	double scale; /* for --watch: 1, or 2^20 for MiB/s */
};

static const struct kc_col kc_cols[] = {
	{"lookups",
	 "lookup/s",
	 {"lookup_hits_total", "lookup_misses_total"},
	 1},
	{"hits", "hit/s", {"lookup_hits_total"}, 1},
	{"misses", "miss/s", {"lookup_misses_total"}, 1},
	{"probes", "probe/s", {"lookup_probes_total"}, 1},
	{"coalesced", "coal/s", {"lookup_coalesced_total"}, 1},
	{"appends", "store/s", {"store_appends_total"}, 1},
	{"append_bytes", "stMiB/s", {"store_append_bytes_total"}, 1 << 20},
	{"reads", "load/s", {"store_reads_total"}, 1},
	{"read_bytes", "ldMiB/s", {"store_read_bytes_total"}, 1 << 20},
	{"drops", "drop/s", {"dropped_total"}, 1},
	{"quarantines", "quar/s", {"quarantined_total"}, 1},
	{"kernel_invalidations", "inval/s", {"kernel_invalidations_total"}, 1},
};
#define KC_NCOLS (sizeof(kc_cols) / sizeof(kc_cols[0]))

static double kc_col_value(const struct kc_metrics *ms, const struct kc_col *c)
{
	return kc_metric_sum(ms, c->names);
}

static int kc_stats_read(const char *mnt, struct kc_metrics *ms)
{
	char path[PATH_MAX], *text;
	int rc;

	snprintf(path, sizeof(path), "%s/.kvfs/stats", mnt);
	rc = kc_read_file(path, &text);
	if (rc < 0)
		return rc;
	rc = kc_metrics_parse(text, ms);
	free(text);
	return rc;
}

/* "123" or "-" for a metric the daemon does not export. */
static const char *kc_num(char *buf, size_t len, double v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f", v);
	return buf;
}

/* A byte-count metric as a size ("-" when the daemon did not report it). */
static const char *kc_size_metric(char *buf, size_t len, double v)
{
	if (v < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	return kc_size(buf, len, (uint64_t)v);
}

static void kc_stats_text(const struct kc_metrics *ms)
{
	char a[32], b[32], c[32], d[32], e[32], f[32];

#define M(name) kc_metric(ms, name)
	printf("lookups        %12.0f  hits %s, misses %s\n",
	       kc_metric_sum(ms, kc_cols[0].names),
	       kc_num(a, sizeof(a), M("lookup_hits_total")),
	       kc_num(b, sizeof(b), M("lookup_misses_total")));
	printf("probes         %12s  names probed %s, coalesced %s, "
	       "cancelled %s, stale results %s\n",
	       kc_num(a, sizeof(a), M("lookup_probes_total")),
	       kc_num(b, sizeof(b), M("lookup_batched_keys_total")),
	       kc_num(c, sizeof(c), M("lookup_coalesced_total")),
	       kc_num(d, sizeof(d), M("lookup_cancelled_total")),
	       kc_num(e, sizeof(e), M("stale_results_total")));
	printf("stores         %12s  appends (data and name records), %s\n",
	       kc_num(a, sizeof(a), M("store_appends_total")),
	       kc_size_metric(b, sizeof(b), M("store_append_bytes_total")));
	printf("loads          %12s  reads from data files, %s\n",
	       kc_num(a, sizeof(a), M("store_reads_total")),
	       kc_size_metric(b, sizeof(b), M("store_read_bytes_total")));
	printf("frees          %12s  records punched; data files removed "
	       "%s\n",
	       kc_num(a, sizeof(a), M("store_frees_total")),
	       kc_num(b, sizeof(b), M("store_files_removed_total")));
	printf("drops          %12s  provably short blocks removed\n",
	       kc_num(a, sizeof(a), M("dropped_total")));
	printf("quarantines    %12s  quarantined now %s, marked misses %s\n",
	       kc_num(a, sizeof(a), M("quarantined_total")),
	       kc_num(b, sizeof(b), M("quarantined")),
	       kc_num(c, sizeof(c), M("marked_misses_total")));
	printf("invalidations  %12s  kernel entries and inodes\n",
	       kc_num(a, sizeof(a), M("kernel_invalidations_total")));
	if (M("evicted_total") >= 0)
		printf("evictions      %12s  blocks evicted for capacity\n",
		       kc_num(a, sizeof(a), M("evicted_total")));
	printf("errors         %12.0f  short records %s, checksum %s, I/O "
	       "%s, probe %s, no space %s\n",
	       kc_metric_sum(ms, kc_error_metrics),
	       kc_num(a, sizeof(a), M("read_short_records_total")),
	       kc_num(b, sizeof(b), M("read_checksum_errors_total")),
	       kc_num(c, sizeof(c), M("io_errors_total")),
	       kc_num(d, sizeof(d), M("lookup_probe_errors_total")),
	       kc_num(f, sizeof(f), M("capacity_enospc_total")));
	printf("verdicts       %12s  held; %s lookups parked\n",
	       kc_num(a, sizeof(a), M("verdicts")),
	       kc_num(b, sizeof(b), M("lookups_parked")));
#undef M
}

static void kc_stats_json(const struct kc_metrics *ms)
{
	printf("{\"summary\": {");
	for (size_t i = 0; i < KC_NCOLS; i++)
		printf("\"%s\": %.0f, ", kc_cols[i].key,
		       kc_col_value(ms, &kc_cols[i]));
	printf("\"errors\": %.0f}, \"metrics\": {",
	       kc_metric_sum(ms, kc_error_metrics));
	for (size_t i = 0; i < ms->n; i++) {
		printf("%s", i ? ", " : "");
		kc_json_str(stdout, ms->m[i].name);
		printf(": %s", ms->m[i].text);
	}
	printf("}}\n");
}

static double kc_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void kc_sleep_until(double t)
{
	double left = t - kc_mono();
	struct timespec ts;

	if (left <= 0)
		return;
	ts.tv_sec = (time_t)left;
	ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int kc_stats_watch(const char *cmd, const char *mnt,
			  const struct kc_opts *o)
{
	struct kc_metrics prev, cur;
	double t0, t1, next;
	int rc;

	rc = kc_stats_read(mnt, &prev);
	if (rc < 0) {
		kc_err(cmd, "%s/.kvfs/stats: %s", mnt, strerror(-rc));
		return KC_EXIT_ERROR;
	}
	t0 = next = kc_mono();
	if (!o->json) {
		for (size_t i = 0; i < KC_NCOLS; i++)
			if (i != 1 && i != 2)
				printf("%9s", kc_cols[i].head);
		printf("%9s\n", "err/s");
	}
	for (long n = 0; !o->count || n < o->count; n++) {
		double dt;

		next += o->watch;
		kc_sleep_until(next);
		rc = kc_stats_read(mnt, &cur);
		if (rc < 0) {
			kc_err(cmd, "%s/.kvfs/stats: %s (was it unmounted?)",
			       mnt, strerror(-rc));
			kc_metrics_free(&prev);
			return KC_EXIT_ERROR;
		}
		t1 = kc_mono();
		dt = t1 - t0 > 0 ? t1 - t0 : o->watch;
		if (o->json)
			printf("{\"interval_seconds\": %.3f, \"rates\": {", dt);
		for (size_t i = 0; i < KC_NCOLS; i++) {
			double r = (kc_col_value(&cur, &kc_cols[i]) -
				    kc_col_value(&prev, &kc_cols[i])) /
				   dt;

			if (o->json)
				printf("\"%s\": %.3f, ", kc_cols[i].key, r);
			else if (i != 1 && i != 2) /* hits, misses: JSON */
				printf("%9.1f", r / kc_cols[i].scale);
		}
		if (o->json)
			printf("\"errors\": %.3f}}\n",
			       (kc_metric_sum(&cur, kc_error_metrics) -
				kc_metric_sum(&prev, kc_error_metrics)) /
				       dt);
		else
			printf("%9.1f\n",
			       (kc_metric_sum(&cur, kc_error_metrics) -
				kc_metric_sum(&prev, kc_error_metrics)) /
				       dt);
		fflush(stdout);
		kc_metrics_free(&prev);
		prev = cur;
		t0 = t1;
	}
	kc_metrics_free(&prev);
	return KC_EXIT_OK;
}

static int kc_stats(int argc, char **argv)
{
	const char *cmd = "stats";
	struct kc_metrics ms;
	struct kc_target t;
	struct kc_opts o;
	int i, rc, ret = KC_EXIT_ERROR;

	i = kc_begin(cmd, argc, argv, 1, kc_stats_usage, 1, 1,
		     "MOUNTPOINT|DATADIR", &o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (kc_need_mounted(cmd, &t) < 0)
		goto out_free;
	if (!t.mountpoint) {
		kc_err(cmd,
		       "%s is locked by process %ld (a kvfs whose control "
		       "socket does not answer, or a kvfsctl fsck); give the "
		       "mount point",
		       t.datadir, t.pid);
		goto out_free;
	}
	if (o.watch) {
		ret = kc_stats_watch(cmd, t.mountpoint, &o);
		goto out_free;
	}
	rc = kc_stats_read(t.mountpoint, &ms);
	if (rc < 0) {
		kc_err(cmd, "%s/.kvfs/stats: %s", t.mountpoint, strerror(-rc));
		goto out_free;
	}
	if (o.json)
		kc_stats_json(&ms);
	else
		kc_stats_text(&ms);
	kc_metrics_free(&ms);
	ret = KC_EXIT_OK;
out_free:
	kc_target_free(&t);
	return ret;
}

/* --- verdicts, clear ------------------------------------------------ */

static const char kc_verdicts_usage[] =
	"usage: kvfsctl verdicts [--json] MOUNTPOINT|DATADIR [PATH]\n"
	"\n"
	"The lookup manager's view of PATH: whether the index has the name,\n"
	"and the verdict held for it (phase, result, generation, quarantined,\n"
	"waiters), or, without PATH, its totals. PATH is relative to the\n"
	"mount's root; an absolute path below MOUNTPOINT works too. kvfsctl\n"
	"never looks PATH up through the mount, which would change the\n"
	"verdict.\n"
	"\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 success, 2 usage or operational error (not mounted, a\n"
	"directory on the way to PATH does not exist, ...).\n";

static const char kc_clear_usage[] =
	"usage: kvfsctl clear [--json] MOUNTPOINT|DATADIR PATH\n"
	"\n"
	"Lifts a quarantine: forgets the verdict held for PATH and makes the\n"
	"kernel forget its cached entry, so the next lookup asks the index\n"
	"again. The data of a quarantined block was kept; if it is still bad,\n"
	"the next failed read quarantines it again. PATH as for verdicts.\n"
	"\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 success (also when there was nothing to clear), 2\n"
	"usage or operational error.\n";

/* The string value of key, "?" when absent or null. */
static const char *kc_str(const struct kc_json *j, const char *key)
{
	const char *v = kc_json_get(j, key);

	return v ? v : "?";
}

static void kc_verdict_text(const struct kc_json *r)
{
	const char *v;
	uint64_t n, m;

	printf("path       %s (parent inode ", kc_str(r, "path"));
	if (kc_json_u64(r, "parent", &n) == 0)
		printf("%llu", (unsigned long long)n);
	printf(", name \"%s\")\n", kc_str(r, "name"));
	v = kc_json_get(r, "index.exists");
	if (v && strcmp(v, "true") == 0 &&
	    kc_json_u64(r, "index.ino", &n) == 0 &&
	    kc_json_u64(r, "index.size", &m) == 0)
		printf("index      exists: inode %llu, %llu bytes\n",
		       (unsigned long long)n, (unsigned long long)m);
	else
		printf("index      no such name\n");
	if (!kc_json_get(r, "verdict.phase")) {
		printf("verdict    none held (the next lookup asks the "
		       "index)\n");
		return;
	}
	printf("verdict    %s, %s", kc_str(r, "verdict.phase"),
	       kc_str(r, "verdict.result"));
	v = kc_json_get(r, "verdict.quarantined");
	if (v && strcmp(v, "true") == 0)
		printf(", quarantined (data kept; lift with kvfsctl clear)");
	if (kc_json_u64(r, "verdict.ino", &n) == 0 && n)
		printf(", inode %llu", (unsigned long long)n);
	printf("\n");
	if (kc_json_u64(r, "verdict.generation", &n) == 0)
		printf("generation %llu\n", (unsigned long long)n);
	if (kc_json_u64(r, "verdict.waiters", &n) == 0 &&
	    kc_json_u64(r, "verdict.holders", &m) == 0)
		printf("waiters    %llu parked lookups, %llu request holders\n",
		       (unsigned long long)n, (unsigned long long)m);
}

static void kc_totals_text(const struct kc_json *r)
{
#define U(k) (kc_json_u64(r, k, &v) == 0 ? (unsigned long long)v : 0ull)
	uint64_t v;

	printf("verdicts      %llu held: %llu pending, %llu quarantined; "
	       "%llu lookups parked\n",
	       U("verdicts"), U("pending"), U("quarantined"), U("parked"));
	printf("answers       %llu hits, %llu misses, %llu coalesced, "
	       "%llu cancelled\n",
	       U("hits"), U("misses"), U("coalesced"), U("cancelled"));
	printf("probes        %llu batches for %llu names, %llu failed, "
	       "%llu stale results discarded\n",
	       U("probes"), U("batched_keys"), U("probe_errors"),
	       U("stale_discarded"));
	printf("changes       %llu namespace bumps, %llu marked misses\n",
	       U("bumps"), U("marked_misses"));
#undef U
}

/* verdicts (clear = 0) and clear (clear = 1). */
static int kc_verdicts_common(int argc, char **argv, int clear)
{
	const char *cmd = clear ? "clear" : "verdicts";
	struct kc_json resp;
	struct kc_target t;
	struct kc_opts o;
	char *line = NULL, *enc = NULL, *raw = NULL, *rel = NULL;
	int i, rc, ret = KC_EXIT_ERROR;

	i = kc_begin(
		cmd, argc, argv, 0, clear ? kc_clear_usage : kc_verdicts_usage,
		clear ? 2 : 1, 2,
		clear ? "MOUNTPOINT|DATADIR PATH" : "MOUNTPOINT|DATADIR [PATH]",
		&o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (argc - i == 2 && argv[i + 1][0] == '\0') {
		kc_err(cmd, "PATH is empty");
		return KC_EXIT_ERROR;
	}
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (kc_need_mounted(cmd, &t) < 0)
		goto out_free;
	if (argc - i == 2) {
		rel = kc_mount_rel(&t, argv[i + 1]);
		enc = rel ? kc_encode(rel) : NULL;
		line = enc ? malloc(strlen(enc) + 16) : NULL;
		if (!line) {
			kc_err(cmd, "%s", strerror(ENOMEM));
			goto out_free;
		}
		sprintf(line, "%s %s\n", clear ? "clear" : "verdict", enc);
		if (strlen(line) > CTLSOCK_LINE_MAX) {
			kc_err(cmd, "PATH is too long");
			goto out_free;
		}
	}
	rc = kc_request(t.datadir, line ? line : "verdicts\n", &resp, &raw);
	if (rc < 0) {
		kc_request_err(cmd, &t, rc);
		goto out_free;
	}
	if (rc == 1) {
		kc_daemon_err(cmd, rel ? rel : "verdicts", &resp);
		kc_json_free(&resp);
		goto out_free;
	}
	if (o.json) {
		fputs(raw, stdout);
	} else if (!rel) {
		kc_totals_text(&resp);
	} else if (!clear) {
		kc_verdict_text(&resp);
	} else {
		const char *changed = kc_json_get(&resp, "changed");
		const char *q = kc_json_get(&resp, "verdict.quarantined");

		if (changed && strcmp(changed, "true") == 0)
			printf("cleared the verdict of %s (was: %s%s); the "
			       "next lookup asks the index\n",
			       kc_str(&resp, "path"),
			       kc_str(&resp, "verdict.result"),
			       q && strcmp(q, "true") == 0 ? ", quarantined"
							   : "");
		else
			printf("%s: no resolved verdict held, nothing to "
			       "clear (the kernel's cached entry was dropped "
			       "anyway)\n",
			       kc_str(&resp, "path"));
	}
	kc_json_free(&resp);
	ret = KC_EXIT_OK;
out_free:
	free(raw);
	free(line);
	free(enc);
	free(rel);
	kc_target_free(&t);
	return ret;
}

static int kc_verdicts(int argc, char **argv)
{
	return kc_verdicts_common(argc, argv, 0);
}

static int kc_clear(int argc, char **argv)
{
	return kc_verdicts_common(argc, argv, 1);
}

/* --- evict ---------------------------------------------------------- */

static const char kc_evict_usage[] =
	"usage: kvfsctl evict [--json] --to SIZE MOUNTPOINT|DATADIR\n"
	"\n"
	"Asks the running kvfs to evict least-recently-used blocks until its\n"
	"use (the data files' physical size plus the index, as df shows it)\n"
	"is at or below SIZE, the way it does above its high watermark:\n"
	"blocks that are open are never evicted, each evicted name is gone\n"
	"from the mount at once, and its space is freed once the kernel lets\n"
	"go of it. SIZE is a byte count with an optional K, M, G or T suffix\n"
	"(powers of 1024, as for -o capacity), or N% of the capacity.\n"
	"\n"
	"  --to SIZE   the use to get down to (required)\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 use is at or below SIZE, 1 it is not (what is left is\n"
	"open, or the index alone is larger), 2 usage or operational error\n"
	"(not mounted, bad SIZE, ...); nothing is evicted on exit status 2.\n";

/*
 * Parses an eviction target: "N" with an optional K/M/G/T suffix, or
 * "N%" (N up to 100). Writes the control-socket argument (a byte count or
 * "N%") into arg. -EINVAL for anything else, -ERANGE on overflow.
 */
static int kc_parse_target(const char *s, char *arg, size_t arg_len)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (end[0] == '%' && end[1] == '\0') {
		if (v > 100)
			return -ERANGE;
		snprintf(arg, arg_len, "%llu%%", v);
		return 0;
	}
	switch (*end) {
	case 'T':
	case 't':
		shift += 10;
		/* fall through */
	case 'G':
	case 'g':
		shift += 10;
		/* fall through */
	case 'M':
	case 'm':
		shift += 10;
		/* fall through */
	case 'K':
	case 'k':
		shift += 10;
		end++;
		break;
	default:
		break;
	}
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	snprintf(arg, arg_len, "%llu", v << shift);
	return 0;
}

static int kc_evict(int argc, char **argv)
{
	static const struct option opts[] = {
		{"to", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *cmd = "evict", *to = NULL, *reached;
	char arg[32], line[64], *raw = NULL, a[32], b[32], c[32], d[32];
	int json = 0, help = 0, ch, rc, ret = KC_EXIT_ERROR;
	uint64_t target = 0, before = 0, after = 0, n = 0, bytes = 0, cap = 0;
	struct kc_json resp;
	struct kc_target t;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 't':
			to = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			help = 1;
			break;
		case ':':
			kc_err(cmd,
			       "option '%s' needs a value; try 'kvfsctl %s "
			       "--help'",
			       argv[optind - 1], cmd);
			return KC_EXIT_ERROR;
		default:
			kc_err(cmd,
			       "unknown option '%s'; try 'kvfsctl %s --help'",
			       argv[optind - 1], cmd);
			return KC_EXIT_ERROR;
		}
	}
	if (help) {
		fputs(kc_evict_usage, stdout);
		return KC_EXIT_OK;
	}
	if (!to) {
		kc_err(cmd, "missing --to SIZE; try 'kvfsctl %s --help'", cmd);
		return KC_EXIT_ERROR;
	}
	rc = kc_parse_target(to, arg, sizeof(arg));
	if (rc < 0) {
		kc_err(cmd, "bad SIZE '%s': %s", to,
		       rc == -ERANGE
			       ? "too large (a percentage is at most 100%)"
			       : "want a number of bytes with an optional K, "
				 "M, G or T suffix, or a percentage of the "
				 "capacity such as 50%");
		return KC_EXIT_ERROR;
	}
	if (kc_nargs(cmd, argc - optind, 1, 1, "MOUNTPOINT|DATADIR") < 0 ||
	    kc_target_open(cmd, argv[optind], &t) < 0)
		return KC_EXIT_ERROR;
	if (!t.mounted) {
		kc_err(cmd,
		       "%s is not mounted: only a running kvfs evicts (kvfsctl "
		       "gc compacts an unmounted data directory)",
		       t.datadir);
		goto out_free;
	}
	snprintf(line, sizeof(line), "evict %s\n", arg);
	rc = kc_request_wait(t.datadir, line, &resp, &raw, KC_EVICT_TIMEOUT_S);
	if (rc < 0) {
		kc_request_err(cmd, &t, rc);
		goto out_free;
	}
	if (rc == 1) {
		kc_daemon_err(cmd, "evict", &resp);
		kc_json_free(&resp);
		goto out_free;
	}
	if (kc_json_u64(&resp, "target", &target) < 0 ||
	    kc_json_u64(&resp, "used_before", &before) < 0 ||
	    kc_json_u64(&resp, "used_after", &after) < 0 ||
	    kc_json_u64(&resp, "evicted", &n) < 0 ||
	    kc_json_u64(&resp, "evicted_bytes", &bytes) < 0) {
		kc_err(cmd, "%s/%s: the answer lacks the eviction's numbers",
		       t.datadir, CTLSOCK_NAME);
		kc_json_free(&resp);
		goto out_free;
	}
	kc_json_u64(&resp, "capacity", &cap);
	reached = kc_json_get(&resp, "reached");
	ret = reached && strcmp(reached, "true") == 0 ? KC_EXIT_OK
						      : KC_EXIT_DAMAGE;
	if (json) {
		fputs(raw, stdout);
	} else {
		printf("evicted %llu blocks (%s) from %s\n",
		       (unsigned long long)n, kc_size(a, sizeof(a), bytes),
		       t.mountpoint ? t.mountpoint : t.datadir);
		printf("use      %s -> %s (target %s, capacity %s)\n",
		       kc_size(a, sizeof(a), before),
		       kc_size(b, sizeof(b), after),
		       kc_size(c, sizeof(c), target),
		       kc_size(d, sizeof(d), cap));
		if (ret != KC_EXIT_OK)
			printf("target not reached: the blocks left are open, "
			       "or the index alone takes more\n");
	}
	kc_json_free(&resp);
out_free:
	free(raw);
	kc_target_free(&t);
	return ret;
}

/* --- main ----------------------------------------------------------- */

struct kc_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct kc_cmd kc_cmds[] = {
	{"status", kc_status, "capacity, use, blocks, memory, uptime"},
	{"stats", kc_stats, "counters and rates (--watch)"},
	{"fsck", kc_fsck, "check the index against the data files (offline)"},
	{"verdicts", kc_verdicts, "the lookup manager's view of a name"},
	{"clear", kc_clear, "lift a quarantine"},
	{"evict", kc_evict, "evict least-recently-used blocks down to a size"},
	{"gc", kc_gc, "compact mostly dead data files (offline)"},
};
#define KC_NCMDS (sizeof(kc_cmds) / sizeof(kc_cmds[0]))

static void kc_usage(FILE *f)
{
	fprintf(f, "usage: kvfsctl COMMAND [options] ARGS...\n"
		   "       kvfsctl COMMAND --help\n"
		   "       kvfsctl --version\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < KC_NCMDS; i++)
		fprintf(f, "  %-9s %s\n", kc_cmds[i].name, kc_cmds[i].summary);
	fprintf(f, "\nExit status: 0 success, 1 fsck found damage (see each "
		   "command's --help),\n2 usage or operational error. See "
		   "kvfsctl(8).\n");
}

int main(int argc, char **argv)
{
	/* Index messages only when something fails; we say what failed. */
	log_set_level(LOG_LVL_ERR);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		kc_err(NULL, "missing COMMAND");
		kc_usage(stderr);
		return KC_EXIT_ERROR;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		if (argc > 2 && strcmp(argv[1], "help") == 0) {
			char *h[] = {argv[2], (char *)"--help", NULL};

			for (size_t i = 0; i < KC_NCMDS; i++)
				if (strcmp(argv[2], kc_cmds[i].name) == 0)
					return kc_cmds[i].fn(2, h);
			kc_err(NULL, "unknown command '%s'", argv[2]);
			return KC_EXIT_ERROR;
		}
		kc_usage(stdout);
		return KC_EXIT_OK;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("kvfsctl %s\n", KVFS_VERSION);
		return KC_EXIT_OK;
	}
	for (size_t i = 0; i < KC_NCMDS; i++)
		if (strcmp(argv[1], kc_cmds[i].name) == 0)
			return kc_cmds[i].fn(argc - 1, argv + 1);
	kc_err(NULL, "unknown command '%s'; try 'kvfsctl --help'", argv[1]);
	return KC_EXIT_ERROR;
}
