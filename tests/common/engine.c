/* SPDX-License-Identifier: MIT */
/*
 * The engine's store and load sequences and the directory helpers they
 * need (see engine.h for the sequences and the contract). Not here: block
 * contents, threads, output.
 */
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* tclient.h's die() names the program; nothing here calls it. */
static const char *prog = "engine";
#include "tclient.h"

/* Appends to the optional transcript s->log. */
__attribute__((format(printf, 2, 3))) static void eng_log(struct eng_store *s,
							  const char *fmt, ...)
{
	size_t used;
	va_list ap;

	if (!s->log || s->log_len == 0)
		return;
	used = strlen(s->log);
	if (used + 1 >= s->log_len)
		return;
	va_start(ap, fmt);
	vsnprintf(s->log + used, s->log_len - used, fmt, ap);
	va_end(ap);
}

void eng_parent(const char *path, char *out, size_t n)
{
	const char *s = strrchr(path, '/');
	size_t len = s ? (size_t)(s - path) : 0;

	if (n == 0)
		return;
	if (len >= n)
		len = n - 1;
	memcpy(out, path, len);
	out[len] = '\0';
}

int eng_mkdir_p(int dirfd, const char *path)
{
	char parent[PATH_MAX];
	struct stat st;

	if (fstatat(dirfd, path, &st, 0) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno != ENOENT)
		return -errno;
	eng_parent(path, parent, sizeof(parent));
	if (parent[0] != '\0') {
		int rc = eng_mkdir_p(dirfd, parent);

		if (rc < 0)
			return rc;
	}
	if (mkdirat(dirfd, path, 0777) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	/* Another thread made it first: fine if it is a directory. */
	if (fstatat(dirfd, path, &st, 0) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int eng_block_path(char *out, size_t n, const char *prefix, const char *hex,
		   unsigned group)
{
	int rc = snprintf(out, n, "%s/%.3s/%.2s_g%u/%s.bin", prefix, hex,
			  hex + 3, group, hex);

	return rc < 0 || (size_t)rc >= n ? -ENAMETOOLONG : 0;
}

/* The access(F_OK) short-cut. Returns 0 to go on, ENG_SKIPPED or -errno. */
static int eng_store_access(struct eng_store *s)
{
	int e;

	s->step = "access";
	if (faccessat(s->dirfd, s->path, F_OK, 0) == 0) {
		eng_log(s, "access=OK skipped");
		return ENG_SKIPPED;
	}
	e = errno;
	if ((s->flags & ENG_ACCESS_STRICT) && e != ENOENT) {
		eng_log(s, "access=%s", ename(e));
		return -e;
	}
	eng_log(s, "access=%s ", ename(e));
	return 0;
}

/* write, close and rename of the open temp fd. Returns ENG_STORED or
 * -errno; the temp is gone on failure. */
static int eng_store_commit(struct eng_store *s, int fd, const char *tmp)
{
	int e;

	s->step = "write";
	s->written = write(fd, s->buf, s->size);
	e = errno;
	if (s->written < 0)
		eng_log(s, "write=%s ", ename(e));
	else
		eng_log(s, "write=%zd ", s->written);
	if (s->written != (ssize_t)s->size) {
		close(fd);
		unlinkat(s->dirfd, tmp, 0);
		return s->written < 0 ? -e : -EIO;
	}
	s->step = "close";
	if (close(fd) < 0) {
		e = errno;
		eng_log(s, "close=%s", ename(e));
		unlinkat(s->dirfd, tmp, 0);
		return -e;
	}
	eng_log(s, "close=OK ");
	if (s->committed)
		s->committed(s->arg);
	s->step = "rename";
	if (renameat(s->dirfd, tmp, s->dirfd, s->path) < 0) {
		e = errno;
		eng_log(s, "rename=%s", ename(e));
		unlinkat(s->dirfd, tmp, 0);
		return -e;
	}
	eng_log(s, "rename=OK");
	return ENG_STORED;
}

int eng_store(struct eng_store *s)
{
	char tmp[PATH_MAX + 32], dir[PATH_MAX];
	int fd, rc, e;

	if (s->log && s->log_len)
		s->log[0] = '\0';
	s->written = -1;
	s->step = NULL;
	if (s->flags & ENG_ACCESS) {
		rc = eng_store_access(s);
		if (rc != 0)
			return rc;
	}
	if (!(s->flags & ENG_NO_MKDIR)) {
		s->step = "mkdir";
		eng_parent(s->path, dir, sizeof(dir));
		rc = dir[0] ? eng_mkdir_p(s->dirfd, dir) : 0;
		eng_log(s, "mkdir=%s ", ename(-rc));
		if (rc < 0)
			return rc;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s_%llu.tmp", s->path,
			     s->suffix) >= sizeof(tmp)) {
		s->step = "open";
		return -ENAMETOOLONG;
	}
	if (s->fill)
		s->fill(s->arg);
	s->step = "open";
	fd = openat(s->dirfd, tmp,
		    O_CREAT | O_EXCL | O_WRONLY | O_TRUNC |
			    (s->flags & ENG_DIRECT ? O_DIRECT : 0),
		    0644);
	if (fd < 0) {
		e = errno;
		eng_log(s, "open=%s", ename(e));
		return -e;
	}
	eng_log(s, "open=OK ");
	return eng_store_commit(s, fd, tmp);
}

ssize_t eng_load(struct eng_load *l)
{
	ssize_t n;
	int fd, e;

	l->step = NULL;
	l->short_read = 0;
	l->unlinked = 0;
	l->unlink_err = 0;
	fd = openat(l->dirfd, l->path,
		    O_RDONLY | (l->flags & ENG_DIRECT ? O_DIRECT : 0));
	if (fd < 0) {
		l->step = "open";
		return -errno;
	}
	if (l->st && fstat(fd, l->st) < 0)
		l->st->st_size = -1;
	if (l->opened)
		l->opened(l->arg);
	n = read(fd, l->buf, l->size);
	e = errno;
	close(fd);
	if (n < 0) {
		l->step = "read";
		return -e;
	}
	if ((size_t)n < l->size) {
		l->short_read = 1;
		/* The engine deletes a provably short block, by path. */
		if (l->flags & ENG_UNLINK_SHORT) {
			if (unlinkat(l->dirfd, l->path, 0) == 0)
				l->unlinked = 1;
			else
				l->unlink_err = errno;
		}
	}
	return n;
}
