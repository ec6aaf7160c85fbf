/* SPDX-License-Identifier: MIT */
/*
 * What kvfsctl fsck and kvfsctl gc both do with the data files of an
 * unmounted data directory: open them all, find one by number, read and
 * write them whole, skip their holes and read a record header. See
 * kvfsctl.h.
 */
#include "kvfsctl.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvtypes.h"
#include "store.h"

int kc_grow(void **v, size_t *cap, size_t n, size_t sz)
{
	void *nv;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? 2 * *cap : 64;
	nv = realloc(*v, ncap * sz);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

uint32_t kc_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

ssize_t kc_pio(int fd, void *rbuf, const void *wbuf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wbuf ? pwrite(fd, (const char *)wbuf + done,
					  len - done, (off_t)(off + done))
				 : pread(fd, (char *)rbuf + done, len - done,
					 (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int kc_datafile_cmp(const void *a, const void *b)
{
	const struct kc_datafile *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

struct kc_datafile *kc_datafile_find(struct kc_datafile *v, size_t n,
				     uint32_t id)
{
	struct kc_datafile key = {.id = id};

	return n ? bsearch(&key, v, n, sizeof(*v), kc_datafile_cmp) : NULL;
}

int kc_datafiles_open(const char *cmd, const char *datadir, int flags,
		      uint32_t max_id, int *dir_fd, struct kc_datafile **v,
		      size_t *n)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int rc = 0, dfd;

	snprintf(path, sizeof(path), "%s/data", datadir);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		kc_err(cmd, "%s: %s", path, strerror(-rc));
		return rc;
	}
	d = fdopendir(dfd);
	if (!d) {
		rc = -errno;
		kc_err(cmd, "%s: %s", path, strerror(-rc));
		close(dfd);
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		unsigned id;
		int end = 0, fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9' ||
		    sscanf(de->d_name, "%u.kvd%n", &id, &end) != 1 ||
		    de->d_name[end] != '\0' || id > max_id)
			continue;
		fd = openat(dfd, de->d_name, flags | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			rc = fd < 0 ? -errno : -EINVAL;
			kc_err(cmd, "%s/%s: %s", path, de->d_name,
			       strerror(-rc));
			if (fd >= 0)
				close(fd);
			break;
		}
		if (kc_grow((void **)v, &cap, *n, sizeof(**v)) < 0) {
			close(fd);
			rc = -ENOMEM;
			break;
		}
		(*v)[(*n)++] = (struct kc_datafile){
			.id = id,
			.fd = fd,
			.size = (uint64_t)st.st_size,
			.physical = (uint64_t)st.st_blocks * 512,
		};
	}
	if (dir_fd) {
		*dir_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
		if (*dir_fd < 0 && rc == 0) {
			rc = -errno;
			kc_err(cmd, "%s: %s", path, strerror(-rc));
		}
	}
	closedir(d);
	if (*n)
		qsort(*v, *n, sizeof(**v), kc_datafile_cmp);
	return rc;
}

void kc_datafiles_close(struct kc_datafile *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].fd >= 0)
			close(v[i].fd);
	free(v);
}

uint64_t kc_next_data(const struct kc_datafile *df, uint64_t pos)
{
	off_t d = lseek(df->fd, (off_t)pos, SEEK_DATA);

	if (d < 0)
		return errno == ENXIO ? df->size : pos;
	return (uint64_t)d & ~(uint64_t)(KV_ALIGN - 1);
}

int kc_read_hdr(const struct kc_datafile *df, uint64_t off, uint32_t hdr_len,
		unsigned char *buf, size_t buflen, unsigned char **big,
		struct store_hdr *h)
{
	size_t want = hdr_len ? hdr_len : KC_HDR_READ;
	unsigned char *p = buf;
	ssize_t n;
	int rc;

	if (off >= df->size)
		return -ENODATA;
	if (!hdr_len && want > df->size - off)
		want = (size_t)(df->size - off);
	if (want > buflen) {
		if (want > KC_HDR_MAX)
			return -EINVAL;
		free(*big);
		*big = malloc(want);
		if (!*big)
			return -ENOMEM;
		p = *big;
	}
	n = kc_pio(df->fd, p, NULL, want, off);
	if (n < 0)
		return (int)n;
	if ((size_t)n < want)
		return -ENODATA;
	rc = store_hdr_decode(p, want, h);
	if (rc == -EAGAIN && !hdr_len)
		return kc_read_hdr(df, off, h->hdr_len, buf, buflen, big, h);
	return rc == -EAGAIN ? -EINVAL : rc;
}
