/* SPDX-License-Identifier: MIT */
/*
 * tree_dump: prints one line per entry under DIR, sorted by path, with the
 * metadata that must be the same on every correct filesystem: type, mode,
 * owner, link count, size (not for directories), and on request times,
 * content hashes, symlink targets, user.* xattrs, device numbers and which
 * names are one file. Never printed: inode numbers, st_dev, st_blocks,
 * st_blksize, directory sizes.
 *
 * All entries are lstat()ed before any file is read, so printed atimes are
 * those from before this run read anything.
 *
 * Options:
 *   -m     print mtime (ns)
 *   -a     print atime (ns) of regular files (reads change directory and
 *          symlink atimes, so those are never printed)
 *   -c     print ctime (ns)
 *   -e     print times only for entries whose name starts with "t_"
 *          (times set explicitly by the test)
 *   -C     print content hash of regular files, targets of symlinks
 *   -x     print user.* xattrs (name and value hash)
 *   -r     print st_rdev of device nodes (rdev=MAJOR:MINOR)
 *   -I     print, for everything but directories, which names are one
 *          file: file=N, N the line (from 1, "." included) of its first
 *          name in this listing, the same for every name with its st_ino
 *          (so a listing does not depend on the inode numbers themselves)
 *   -i N   ignore top-level entry N (repeatable)
 *
 * Exit status: 0 on success, 1 if DIR cannot be walked, 2 on usage errors.
 * Per-entry errors are printed in the entry's line.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

struct ent {
	char *rel; /* path relative to DIR, "." for DIR itself */
	struct stat st;
	int err; /* lstat errno */
};

static struct ent *ents;
static size_t nents, cap;
static const char *ignored[16];
static int nignored;
static int opt_m, opt_a, opt_c, opt_e, opt_C, opt_x, opt_r, opt_I;

/* snprintf that treats truncation as a bug in the test. */
__attribute__((format(printf, 3, 4))) static void
xsnprintf(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	if (rc < 0 || (size_t)rc >= n) {
		fprintf(stderr, "path or name too long: %s\n", fmt);
		abort();
	}
}

static const char *ename(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "E?";
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--) {
		h ^= *c++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void add(const char *rel, const char *abs)
{
	struct ent *e;

	if (nents == cap) {
		cap = cap ? cap * 2 : 256;
		ents = realloc(ents, cap * sizeof(*ents));
		if (!ents) {
			perror("realloc");
			exit(1);
		}
	}
	e = &ents[nents++];
	e->rel = strdup(rel);
	e->err = lstat(abs, &e->st) < 0 ? errno : 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_ignored(const char *rel)
{
	int i;

	for (i = 0; i < nignored; i++)
		if (!strcmp(rel, ignored[i]))
			return 1;
	return 0;
}

/* Adds every entry below abs (relative name rel) in sorted order. */
static int walk(const char *abs, const char *rel)
{
	DIR *dh = opendir(abs);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, ncap = 0, i;

	if (!dh) {
		printf("%s: opendir: %s\n", rel, ename(errno));
		return -1;
	}
	while ((de = readdir(dh))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == ncap) {
			ncap = ncap ? ncap * 2 : 64;
			names = realloc(names, ncap * sizeof(*names));
			if (!names) {
				perror("realloc");
				exit(1);
			}
		}
		names[n++] = strdup(de->d_name);
	}
	closedir(dh);
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	for (i = 0; i < n; i++) {
		char a[PATH_MAX], r[PATH_MAX];

		xsnprintf(a, sizeof(a), "%s/%s", abs, names[i]);
		if (!strcmp(rel, "."))
			xsnprintf(r, sizeof(r), "%s", names[i]);
		else
			xsnprintf(r, sizeof(r), "%s/%s", rel, names[i]);
		if (!strcmp(rel, ".") && is_ignored(r)) {
			free(names[i]);
			continue;
		}
		add(r, a);
		if (!ents[nents - 1].err && S_ISDIR(ents[nents - 1].st.st_mode))
			walk(a, r);
		free(names[i]);
	}
	free(names);
	return 0;
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "reg";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "lnk";
	if (S_ISFIFO(m))
		return "fifo";
	if (S_ISSOCK(m))
		return "sock";
	if (S_ISCHR(m))
		return "chr";
	if (S_ISBLK(m))
		return "blk";
	return "?";
}

static void print_content(const char *abs)
{
	static char buf[1 << 20];
	uint64_t h = 0xcbf29ce484222325ull;
	long long total = 0;
	int fd = open(abs, O_RDONLY);

	if (fd < 0) {
		printf(" content=%s", ename(errno));
		return;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0) {
			printf(" content=%s@%lld", ename(errno), total);
			close(fd);
			return;
		}
		if (n == 0)
			break;
		h = fnv1a(h, buf, (size_t)n);
		total += n;
	}
	close(fd);
	printf(" content=%lld:%016llx", total, (unsigned long long)h);
}

static void print_xattrs(const char *abs)
{
	char list[65536], *names[512];
	ssize_t len = llistxattr(abs, list, sizeof(list));
	int n = 0, i;
	char *p;

	if (len < 0) {
		printf(" xattrs=%s", ename(errno));
		return;
	}
	for (p = list; p < list + len && n < 512; p += strlen(p) + 1)
		if (!strncmp(p, "user.", 5))
			names[n++] = p;
	qsort(names, (size_t)n, sizeof(*names), cmp_name);
	printf(" xattrs=[");
	for (i = 0; i < n; i++) {
		static char val[65536];
		ssize_t vl = lgetxattr(abs, names[i], val, sizeof(val));

		if (vl < 0)
			printf("%s%s=%s", i ? "," : "", names[i], ename(errno));
		else
			printf("%s%s=%zd:%016llx", i ? "," : "", names[i], vl,
			       (unsigned long long)fnv1a(0xcbf29ce484222325ull,
							 val, (size_t)vl));
	}
	printf("]");
}

static void print_time(const char *name, const struct timespec *ts)
{
	printf(" %s=%lld.%09ld", name, (long long)ts->tv_sec, ts->tv_nsec);
}

/* The line (from 1) of the first entry that is the same file as ents[i]. */
static size_t first_name(size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (!ents[j].err && ents[j].st.st_dev == ents[i].st.st_dev &&
		    ents[j].st.st_ino == ents[i].st.st_ino)
			return j + 1;
	return i + 1;
}

static void print_ent(const char *root, size_t i)
{
	const struct ent *e = &ents[i];
	const struct stat *st = &e->st;
	const char *base = strrchr(e->rel, '/');
	char abs[PATH_MAX];
	int times;

	base = base ? base + 1 : e->rel;
	times = !opt_e || !strncmp(base, "t_", 2);
	xsnprintf(abs, sizeof(abs), "%s/%s", root, e->rel);
	printf("%s", e->rel);
	if (e->err) {
		printf(" lstat=%s\n", ename(e->err));
		return;
	}
	printf(" %s mode=%04o uid=%u gid=%u nlink=%lu", type_name(st->st_mode),
	       (unsigned)(st->st_mode & 07777), (unsigned)st->st_uid,
	       (unsigned)st->st_gid, (unsigned long)st->st_nlink);
	if (!S_ISDIR(st->st_mode))
		printf(" size=%lld", (long long)st->st_size);
	if (opt_r && (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)))
		printf(" rdev=%u:%u", major(st->st_rdev), minor(st->st_rdev));
	if (opt_I && !S_ISDIR(st->st_mode))
		printf(" file=%zu", first_name(i));
	if (times && opt_m)
		print_time("mtime", &st->st_mtim);
	if (times && opt_a && S_ISREG(st->st_mode))
		print_time("atime", &st->st_atim);
	if (times && opt_c)
		print_time("ctime", &st->st_ctim);
	if (opt_C && S_ISREG(st->st_mode))
		print_content(abs);
	if (opt_C && S_ISLNK(st->st_mode)) {
		char t[PATH_MAX + 1];
		ssize_t n = readlink(abs, t, sizeof(t) - 1);

		if (n < 0) {
			printf(" target=%s", ename(errno));
		} else {
			t[n] = '\0';
			printf(" target=%zd:%016llx", n,
			       (unsigned long long)fnv1a(0xcbf29ce484222325ull,
							 t, (size_t)n));
		}
	}
	if (opt_x && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)))
		print_xattrs(abs);
	printf("\n");
}

int main(int argc, char **argv)
{
	const char *root;
	size_t i;
	int opt;

	while ((opt = getopt(argc, argv, "macCexrIi:")) != -1) {
		switch (opt) {
		case 'm':
			opt_m = 1;
			break;
		case 'a':
			opt_a = 1;
			break;
		case 'c':
			opt_c = 1;
			break;
		case 'e':
			opt_e = 1;
			break;
		case 'C':
			opt_C = 1;
			break;
		case 'x':
			opt_x = 1;
			break;
		case 'r':
			opt_r = 1;
			break;
		case 'I':
			opt_I = 1;
			break;
		case 'i':
			if (nignored < 16)
				ignored[nignored++] = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: tree_dump [-macCexrI] [-i NAME] DIR\n");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: tree_dump [-macCexrI] [-i NAME] DIR\n");
		return 2;
	}
	root = argv[optind];
	add(".", root);
	if (ents[0].err) {
		fprintf(stderr, "tree_dump: %s: %s\n", root,
			strerror(ents[0].err));
		return 1;
	}
	if (walk(root, ".") < 0)
		return 1;
	/* Metadata is all collected; only now read contents. */
	for (i = 0; i < nents; i++)
		print_ent(root, i);
	return 0;
}
