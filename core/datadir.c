/* SPDX-License-Identifier: MIT */
/*
 * The data directory's names, its lock and its data files' names, list and
 * sizes; see datadir.h. Not here: reading or writing data files.
 */
#include "datadir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int datadir_path(char *buf, size_t len, const char *datadir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", datadir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* --- kvfs.lock ---------------------------------------------------------- */

int datadir_lock_open(const char *datadir)
{
	char path[PATH_MAX];
	int fd, rc;

	rc = datadir_path(path, sizeof(path), datadir, DATADIR_LOCK);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	return fd < 0 ? -errno : fd;
}

int datadir_lock_try(int fd)
{
	return flock(fd, LOCK_EX | LOCK_NB) < 0 ? -errno : 0;
}

void datadir_lock_holder(int fd, char *buf, size_t len)
{
	ssize_t n;

	if (len == 0)
		return;
	n = pread(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

int datadir_lock_record_pid(int fd)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	ssize_t w;

	if (ftruncate(fd, 0) < 0)
		return -errno;
	w = pwrite(fd, pid, (size_t)n, 0);
	if (w < 0)
		return -errno;
	return w == n ? 0 : -EIO;
}

int datadir_lock_probe(const char *datadir, long *pid)
{
	char path[PATH_MAX], buf[32];
	int fd, rc;

	*pid = 0;
	rc = datadir_path(path, sizeof(path), datadir, DATADIR_LOCK);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
		rc = 0;
	} else if (errno == EWOULDBLOCK) {
		rc = 1;
		datadir_lock_holder(fd, buf, sizeof(buf));
		*pid = strtol(buf, NULL, 10);
	} else {
		rc = -errno;
	}
	close(fd);
	return rc;
}

void datadir_lock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* --- data files --------------------------------------------------------- */

int datadir_file_name(char *buf, size_t len, uint32_t id)
{
	int n = snprintf(buf, len, "%06u.kvd", id);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int datadir_parse_name(const char *name, uint32_t *id)
{
	unsigned v;
	int end = 0;

	/* Only names kvfs could have made: a digit first, nothing after. */
	if (name[0] < '0' || name[0] > '9' ||
	    sscanf(name, "%u.kvd%n", &v, &end) != 1 || end == 0 ||
	    name[end] != '\0')
		return -EINVAL;
	*id = v;
	return 0;
}

int datadir_each_at(int dfd, datadir_each_fn fn, void *arg)
{
	struct dirent *de;
	int fd, rc = 0;
	DIR *d;

	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (;;) {
		uint32_t id;

		errno = 0;
		de = readdir(d);
		if (!de) {
			rc = -errno;
			break;
		}
		if (datadir_parse_name(de->d_name, &id) < 0)
			continue;
		rc = fn(arg, dirfd(d), de->d_name, id);
		if (rc < 0)
			break;
	}
	closedir(d);
	return rc;
}

struct datadir_ids {
	uint32_t *v;
	size_t n, cap;
};

static int datadir_list_one(void *arg, int dirfd, const char *name, uint32_t id)
{
	struct datadir_ids *a = arg;

	(void)dirfd;
	(void)name;
	if (a->n == a->cap) {
		size_t ncap = a->cap ? 2 * a->cap : 64;
		uint32_t *nv = realloc(a->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = ncap;
	}
	a->v[a->n++] = id;
	return 0;
}

static int datadir_id_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int datadir_list_at(int dfd, uint32_t **ids, size_t *n)
{
	struct datadir_ids a = {0};
	int rc = datadir_each_at(dfd, datadir_list_one, &a);

	*ids = NULL;
	*n = 0;
	if (rc < 0) {
		free(a.v);
		return rc;
	}
	if (a.n == 0) {
		free(a.v);
		return 0;
	}
	qsort(a.v, a.n, sizeof(*a.v), datadir_id_cmp);
	*ids = a.v;
	*n = a.n;
	return 0;
}

/* Opens DATADIR/data (O_PATH): the fd, or -errno (-ENOENT: none). */
static int datadir_open_data(const char *datadir)
{
	char path[PATH_MAX];
	int fd, rc;

	rc = datadir_path(path, sizeof(path), datadir, DATADIR_DATA);
	if (rc < 0)
		return rc;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int datadir_list(const char *datadir, uint32_t **ids, size_t *n)
{
	int dfd = datadir_open_data(datadir), rc;

	*ids = NULL;
	*n = 0;
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	rc = datadir_list_at(dfd, ids, n);
	close(dfd);
	return rc;
}

static int datadir_usage_one(void *arg, int dirfd, const char *name,
			     uint32_t id)
{
	struct datadir_usage *u = arg;
	struct stat st;

	(void)id;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return 0; /* gone meanwhile, or not a data file */
	u->nfiles++;
	u->physical += (uint64_t)st.st_blocks * 512;
	u->apparent += (uint64_t)st.st_size;
	return 0;
}

int datadir_usage_at(int dfd, struct datadir_usage *u)
{
	memset(u, 0, sizeof(*u));
	return datadir_each_at(dfd, datadir_usage_one, u);
}

int datadir_usage(const char *datadir, struct datadir_usage *u)
{
	int dfd = datadir_open_data(datadir), rc;

	memset(u, 0, sizeof(*u));
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	rc = datadir_usage_at(dfd, u);
	close(dfd);
	return rc;
}

int datadir_is_engine_tmp(const char *name)
{
	const char *us = strrchr(name, '_');
	size_t len = strlen(name);

	if (!us || len < 5 || strcmp(name + len - 4, ".tmp") != 0)
		return 0;
	/* "_<digits>.tmp" after "X.bin" or ".o_direct_probe" */
	for (const char *p = us + 1; p < name + len - 4; p++)
		if (*p < '0' || *p > '9')
			return 0;
	if (us == name + len - 5)
		return 0;
	return (us - name >= 4 && strncmp(us - 4, ".bin", 4) == 0) ||
	       strncmp(name, ".o_direct_probe_", 16) == 0;
}
