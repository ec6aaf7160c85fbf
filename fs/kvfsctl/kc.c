/* SPDX-License-Identifier: MIT */
/*
 * What every kvfsctl command shares (kc.h): error messages, sizes, the
 * JSON that kvfs writes, the control files, the control-socket client,
 * MOUNTPOINT|DATADIR resolution, data-file usage and the option prologue
 * of a command. The commands themselves are in cmd-*.c, the dispatch in
 * main.c.
 *
 * kvfsctl never goes through the FUSE namespace except to read
 * MOUNTPOINT/.kvfs/{status,stats}: a stat() of a block would itself be a
 * lookup and change the verdicts it is asked about. What needs the daemon
 * goes through its control files or its control socket; what needs no
 * daemon opens DATADIR's index and data files directly.
 */
#include "kc.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"

/* statfs(2) f_type of every FUSE file system. */
#define KC_FUSE_MAGIC 0x65735546
/* Largest control file or socket response read. */
#define KC_READ_MAX (16u << 20)

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

/*
 * Reads fd into *buf (malloc'd, NUL-terminated) until EOF or, with
 * short_is_end, until a read returns less than asked. -errno: -EFBIG past
 * KC_READ_MAX, -ETIMEDOUT when a socket's SO_RCVTIMEO expired.
 */
static int kc_read_all(int fd, size_t cap, int short_is_end, char **buf)
{
	size_t len = 0;
	char *b = malloc(cap);

	if (!b)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nb =
				cap < KC_READ_MAX ? realloc(b, 2 * cap) : NULL;

			if (!nb) {
				free(b);
				return cap < KC_READ_MAX ? -ENOMEM : -EFBIG;
			}
			b = nb;
			cap *= 2;
		}
		n = read(fd, b + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(b);
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (short_is_end && len + 1 < cap)
			break;
	}
	b[len] = '\0';
	*buf = b;
	return 0;
}

/*
 * Each open of a control file is a snapshot served with direct_io, so a
 * short read is its end: one READ request, not a second one to see EOF.
 */
int kc_read_file(const char *path, char **buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = kc_read_all(fd, 65536, 1, buf);
	close(fd);
	return rc;
}

/* Opens DATADIR's control socket, connected, with a timeout; -errno. */
static int kc_sock_connect(const char *datadir, int timeout_s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = timeout_s};
	int fd, dfd = -1, n, rc;

	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", datadir,
		     CTLPROTO_SOCK_NAME);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		/* Too long for sun_path: go through the directory's fd. */
		dfd = open(datadir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		snprintf(sa.sun_path, sizeof(sa.sun_path),
			 "/proc/self/fd/%d/%s", dfd, CTLPROTO_SOCK_NAME);
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

int kc_request_wait(const char *datadir, enum ctlproto_cmd cmd, const char *arg,
		    struct ctlproto_json *resp, char **raw, int timeout_s)
{
	char *line, *buf = NULL;
	int fd, rc;

	rc = ctlproto_request(cmd, arg, &line);
	if (rc < 0)
		return rc;
	fd = kc_sock_connect(datadir, timeout_s);
	if (fd < 0) {
		free(line);
		return fd;
	}
	rc = ctlproto_send_all(fd, line, strlen(line));
	free(line);
	if (rc < 0)
		goto out_close;
	shutdown(fd, SHUT_WR);
	rc = kc_read_all(fd, 4096, 0, &buf);
	if (rc < 0)
		goto out_close;
	rc = ctlproto_response_parse(buf, resp);
	if (rc >= 0 && raw) {
		*raw = buf;
		buf = NULL;
	}
out_close:
	free(buf);
	close(fd);
	return rc;
}

int kc_request(const char *datadir, enum ctlproto_cmd cmd, const char *arg,
	       struct ctlproto_json *resp, char **raw)
{
	return kc_request_wait(datadir, cmd, arg, resp, raw,
			       CTLPROTO_REPLY_TIMEOUT_S);
}

/* Prints the reason a request got no answer. */
void kc_request_err(const char *cmd, const struct kc_target *t, int rc)
{
	if (rc == -ENOENT || rc == -ECONNREFUSED)
		kc_err(cmd,
		       "%s/%s does not answer (%s): is kvfs running, and did "
		       "it log that it could not create its control socket?",
		       t->datadir, CTLPROTO_SOCK_NAME, strerror(-rc));
	else if (rc == -EBADMSG)
		kc_err(cmd, "%s/%s sent an answer that is not JSON", t->datadir,
		       CTLPROTO_SOCK_NAME);
	else
		kc_err(cmd, "%s/%s: %s", t->datadir, CTLPROTO_SOCK_NAME,
		       strerror(-rc));
}

/* Prints the error the daemon answered. */
void kc_daemon_err(const char *cmd, const char *what,
		   const struct ctlproto_json *resp)
{
	const char *msg = ctlproto_json_get(resp, "message");
	const char *err = ctlproto_json_get(resp, "error");

	kc_err(cmd, "%s: %s (%s)", what, msg ? msg : "failed", err ? err : "?");
}

int kc_exists(const char *dir, const char *name, mode_t type)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static int kc_status_file(struct kc_target *t)
{
	char path[PATH_MAX], *text;
	int rc;

	snprintf(path, sizeof(path), "%s/.kvfs/status", t->mountpoint);
	rc = kc_read_file(path, &text);
	if (rc < 0)
		return rc;
	rc = ctlproto_json_parse(text, &t->status);
	free(text);
	if (rc == 0 && !ctlproto_json_get(&t->status, "datadir")) {
		ctlproto_json_free(&t->status);
		rc = -EINVAL;
	}
	return rc;
}

int kc_target_open(const char *cmd, const char *arg, struct kc_target *t)
{
	struct ctlproto_json info;
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
		t->datadir = strdup(ctlproto_json_get(&t->status, "datadir"));
		if (!t->datadir) {
			rc = -ENOMEM;
			goto out_free;
		}
		if (ctlproto_json_u64(&t->status, "pid", &pid) == 0)
			t->pid = (long)pid;
		t->mounted = 1;
		t->given_mount = 1;
		return 0;
	}
	if (!kc_exists(t->path, DATADIR_INDEX, S_IFREG) &&
	    !kc_exists(t->path, DATADIR_DATA, S_IFDIR) &&
	    !kc_exists(t->path, DATADIR_LOCK, S_IFREG)) {
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
	rc = kc_request(t->datadir, CTLPROTO_INFO, NULL, &info, NULL);
	if (rc == 0) {
		const char *mnt = ctlproto_json_get(&info, "mountpoint");

		if (ctlproto_json_u64(&info, "pid", &pid) == 0)
			t->pid = (long)pid;
		t->mounted = 1;
		t->mountpoint = mnt ? strdup(mnt) : NULL;
		ctlproto_json_free(&info);
		if (t->mountpoint && kc_status_file(t) < 0) {
			free(t->mountpoint);
			t->mountpoint = NULL;
		}
		return 0;
	}
	if (rc == 1)
		ctlproto_json_free(&info);
	rc = datadir_lock_probe(t->datadir, &t->pid);
	if (rc < 0) {
		kc_err(cmd, "%s/%s: %s", t->datadir, DATADIR_LOCK,
		       strerror(-rc));
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
	ctlproto_json_free(&t->status);
	memset(t, 0, sizeof(*t));
}

/*
 * A target that must be served by a running daemon whose mount point is
 * known: prints why not and returns -errno otherwise.
 */
int kc_need_mounted(const char *cmd, const struct kc_target *t)
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

/*
 * PATH as the daemon wants it, relative to the mount's root and starting
 * with '/': an absolute path under the mount point loses that prefix;
 * anything else already is one. malloc'd.
 */
char *kc_mount_rel(const struct kc_target *t, const char *path)
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

enum { KC_OPT_JSON = 1000, KC_OPT_WATCH, KC_OPT_COUNT };

int kc_opt_error(const char *cmd, char **argv, int ch)
{
	if (ch == ':')
		kc_err(cmd,
		       "option '%s' needs a value; try 'kvfsctl %s --help'",
		       argv[optind - 1], cmd);
	else
		kc_err(cmd, "unknown option '%s'; try 'kvfsctl %s --help'",
		       argv[optind - 1], cmd);
	return -1;
}

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
		default:
			return kc_opt_error(cmd, argv, c);
		}
	}
	if (o->count && !o->watch) {
		kc_err(cmd, "--count needs --watch");
		return -1;
	}
	return optind;
}

/* Checks the number of positional arguments; prints a usage error. */
int kc_nargs(const char *cmd, int have, int min, int max, const char *what)
{
	if (have >= min && have <= max)
		return 0;
	kc_err(cmd, "%s %s; try 'kvfsctl %s --help'",
	       have < min ? "missing" : "too many arguments: expected", what,
	       cmd);
	return -1;
}

/*
 * A subcommand's options, --help and argument count (min to max, named
 * args in errors): returns the index of its first argument, KC_BEGIN_HELP
 * once usage is printed, or -1 after an error message.
 */
int kc_begin(const char *cmd, int argc, char **argv, int watch,
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
/* The string value of key, "?" when absent or null. */
const char *kc_str(const struct ctlproto_json *j, const char *key)
{
	const char *v = ctlproto_json_get(j, key);

	return v ? v : "?";
}
