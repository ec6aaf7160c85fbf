/* SPDX-License-Identifier: MIT */
/*
 * errno_battery: runs a fixed battery of namespace and data operations in a
 * fresh subdirectory of DIR and prints one transcript line per step,
 * "step: result", where result is OK, an errno name, a byte count, or a hash
 * of bytes read. Run it on a plain local directory and on a kvfs mount: a
 * correct filesystem gives the same transcript. Nothing that legitimately
 * differs between filesystems is printed on stdout (inode numbers, st_dev,
 * st_blocks, directory sizes, times taken from the clock); where only a
 * range is defined (UTIME_NOW, alignment rules of O_DIRECT) the step prints
 * whether the outcome is in the allowed set. Informational lines go to
 * stderr.
 *
 *   errno_battery DIR          the battery, in DIR/battery
 *   errno_battery -p N DIR     populate DIR/misc for remount phase N (1, 2)
 *
 * Exit status: 0 when the battery ran (the transcript is the verdict), 1 when
 * it could not start, 2 on usage errors.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "errno_battery";

#include "tclient.h"

#define KiB 1024ul
#define MiB (1024ul * 1024ul)
#define PAGE 4096ul

/* Reports a call's result: OK (or the returned count) or the errno name. */
#define T(name, call)                                                          \
	do {                                                                   \
		long r_ = (long)(call);                                        \
		int e_ = errno;                                                \
		report((name), r_, e_, 0);                                     \
	} while (0)
#define TN(name, call)                                                         \
	do {                                                                   \
		long r_ = (long)(call);                                        \
		int e_ = errno;                                                \
		report((name), r_, e_, 1);                                     \
	} while (0)

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

static void report(const char *name, long r, int e, int count)
{
	if (r < 0)
		printf("%s: %s\n", name, ename(e));
	else if (count)
		printf("%s: OK %ld\n", name, r);
	else
		printf("%s: OK\n", name);
}

static void fail_setup(const char *what)
{
	fprintf(stderr, "errno_battery: setup: %s: %s\n", what,
		strerror(errno));
	exit(1);
}

static uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--) {
		h ^= *c++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void pattern(unsigned char *b, size_t n, uint64_t seed)
{
	uint64_t s = seed;
	size_t i;

	for (i = 0; i < n; i += 8) {
		uint64_t v = splitmix(&s);

		memcpy(b + i, &v, n - i < 8 ? n - i : 8);
	}
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "errno_battery: out of memory\n");
		exit(1);
	}
	return p;
}

/* Opens and closes at once; returns 0 or -1 with errno from open. */
static int topen(const char *p, int flags, mode_t m)
{
	int fd = open(p, flags, m);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Writes n pattern bytes (seed) to a new or truncated file. 0 or -1. */
static int mkfile(const char *p, size_t n, uint64_t seed)
{
	unsigned char *b = xmalloc(n);
	int fd, e;
	ssize_t w;

	pattern(b, n, seed);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		e = errno;
		free(b);
		errno = e;
		return -1;
	}
	w = write(fd, b, n);
	e = errno;
	free(b);
	if (close(fd) < 0 || w != (ssize_t)n) {
		errno = w < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

static void must(int rc, const char *what)
{
	if (rc < 0)
		fail_setup(what);
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m)   ? "reg"
	       : S_ISDIR(m) ? "dir"
	       : S_ISLNK(m) ? "lnk"
			    : "other";
}

/* "name: type=T mode=M nlink=N uid=U gid=G [size=S]" or the errno. */
static void show_stat(const char *name, const char *p, int follow)
{
	struct stat st;
	int rc = follow ? stat(p, &st) : lstat(p, &st);

	if (rc < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	printf("%s: type=%s mode=%04o nlink=%lu uid=%u gid=%u", name,
	       type_name(st.st_mode), (unsigned)(st.st_mode & 07777),
	       (unsigned long)st.st_nlink, (unsigned)st.st_uid,
	       (unsigned)st.st_gid);
	if (!S_ISDIR(st.st_mode))
		printf(" size=%lld", (long long)st.st_size);
	printf("\n");
}

static void show_times(const char *name, const char *p, int follow)
{
	struct stat st;
	int rc = follow ? stat(p, &st) : lstat(p, &st);

	if (rc < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	printf("%s: atime=%lld.%09ld mtime=%lld.%09ld\n", name,
	       (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
	       (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* Reads fd from offset 0 to EOF with pread; returns length or -errno. */
static ssize_t fd_slurp(int fd, unsigned char **out)
{
	size_t cap = 64 * KiB, len = 0;
	unsigned char *b = xmalloc(cap);

	for (;;) {
		ssize_t n;

		if (len == cap) {
			cap *= 2;
			b = realloc(b, cap);
			if (!b) {
				fprintf(stderr, "out of memory\n");
				exit(1);
			}
		}
		n = pread(fd, b + len, cap - len, (off_t)len);
		if (n < 0) {
			int e = errno;

			free(b);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*out = b;
	return (ssize_t)len;
}

static ssize_t slurp(const char *p, unsigned char **out)
{
	int fd = open(p, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = fd_slurp(fd, out);
	close(fd);
	return n;
}

/* "name: size=N hash=H" of the whole file, or the errno. */
static void show_content(const char *name, const char *p)
{
	unsigned char *b;
	ssize_t n = slurp(p, &b);

	if (n < 0) {
		printf("%s: %s\n", name, ename((int)-n));
		return;
	}
	printf("%s: size=%zd hash=%016llx\n", name, n,
	       (unsigned long long)fnv1a(b, (size_t)n));
	free(b);
}

/* "name: match" when file p holds exactly want[0..n), else what differs. */
static void expect_content(const char *name, const char *p,
			   const unsigned char *want, size_t n)
{
	unsigned char *b;
	ssize_t got = slurp(p, &b);
	size_t i;

	if (got < 0) {
		printf("%s: %s\n", name, ename((int)-got));
		return;
	}
	if ((size_t)got == n && !memcmp(b, want, n)) {
		printf("%s: match\n", name);
	} else {
		for (i = 0; i < n && i < (size_t)got && b[i] == want[i]; i++)
			;
		printf("%s: MISMATCH size=%zd want=%zu first-diff=%zu\n", name,
		       got, n, i);
	}
	free(b);
}

static int all_zero(const unsigned char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* ---- sections ---- */

static void sec_missing(void)
{
	struct stat st;
	char buf[16];
	struct timespec ts[2] = {{0, 0}, {0, 0}};

	T("missing.stat", stat("nope", &st));
	T("missing.lstat", lstat("nope", &st));
	T("missing.access", access("nope", F_OK));
	T("missing.open-rdonly", topen("nope", O_RDONLY, 0));
	T("missing.open-direct", topen("nope", O_RDONLY | O_DIRECT, 0));
	T("missing.stat-below", stat("nope/x", &st));
	T("missing.create-below", topen("nope/x", O_CREAT | O_WRONLY, 0644));
	T("missing.mkdir-below", mkdir("nope/x", 0777));
	T("missing.unlink", unlink("nope"));
	T("missing.rmdir", rmdir("nope"));
	T("missing.rename-src", rename("nope", "nope2"));
	T("missing.readlink", readlink("nope", buf, sizeof(buf)));
	T("missing.chmod", chmod("nope", 0644));
	T("missing.chown", chown("nope", 1, 1));
	T("missing.truncate", truncate("nope", 0));
	T("missing.utimensat", utimensat(AT_FDCWD, "nope", ts, 0));
	T("missing.getxattr", getxattr("nope", "user.a", buf, sizeof(buf)));
	T("missing.setxattr", setxattr("nope", "user.a", "v", 1, 0));
	T("missing.listxattr", listxattr("nope", buf, sizeof(buf)));
	T("missing.opendir", opendir("nope") ? 0 : -1);
	/* Ask twice: a cached negative entry must give the same answer. */
	T("missing.stat-again", stat("nope", &st));
	must(mkfile("now-here", 10, 1), "now-here");
	show_stat("missing.created-after-miss", "now-here", 0);
	T("missing.unlink-created", unlink("now-here"));
	T("missing.stat-after-unlink", stat("now-here", &st));
}

static void sec_nametoolong(void)
{
	char n255[256], n256[257], p[600];
	struct stat st;

	memset(n255, 'a', 255);
	n255[255] = '\0';
	memset(n256, 'b', 256);
	n256[256] = '\0';
	T("long.stat-256", stat(n256, &st));
	T("long.access-256", access(n256, F_OK));
	T("long.create-256", topen(n256, O_CREAT | O_WRONLY, 0644));
	T("long.mkdir-256", mkdir(n256, 0777));
	T("long.symlink-256", symlink("target", n256));
	T("long.create-255", topen(n255, O_CREAT | O_WRONLY, 0644));
	show_stat("long.stat-255", n255, 0);
	T("long.rename-255-to-256", rename(n255, n256));
	show_stat("long.stat-255-after", n255, 0);
	T("long.mkdir-dir", mkdir("ld", 0777));
	xsnprintf(p, sizeof(p), "ld/%s", n256);
	T("long.create-256-in-subdir", topen(p, O_CREAT | O_WRONLY, 0644));
	xsnprintf(p, sizeof(p), "ld/%s", n255);
	T("long.rename-to-255-in-subdir", rename(n255, p));
	show_stat("long.stat-255-in-subdir", p, 0);
	T("long.unlink-255", unlink(p));
	T("long.rmdir-dir", rmdir("ld"));
}

static void sec_notdir(void)
{
	struct stat st;

	must(mkfile("f", 100, 2), "f");
	T("notdir.stat", stat("f/x", &st));
	T("notdir.access", access("f/x", F_OK));
	T("notdir.create", topen("f/x", O_CREAT | O_WRONLY, 0644));
	T("notdir.mkdir", mkdir("f/x", 0777));
	T("notdir.unlink", unlink("f/x"));
	T("notdir.symlink", symlink("t", "f/x"));
	T("notdir.open-o-directory", topen("f", O_RDONLY | O_DIRECTORY, 0));
	T("notdir.opendir", opendir("f") ? 0 : -1);
	T("notdir.trailing-slash-stat", stat("f/", &st));
	T("notdir.trailing-slash-open", topen("f/", O_RDONLY, 0));
	T("notdir.rmdir-file", rmdir("f"));
	T("notdir.rename-under-file", rename("f", "f/y"));
}

static void sec_isdir(void)
{
	char buf[16];
	int fd;

	must(mkdir("d", 0777), "d");
	must(mkdir("d/sub", 0777), "d/sub");
	must(mkfile("d/sub/x", 10, 3), "d/sub/x");
	T("isdir.open-wronly", topen("d", O_WRONLY, 0));
	T("isdir.open-rdwr", topen("d", O_RDWR, 0));
	T("isdir.open-creat", topen("d", O_CREAT | O_WRONLY, 0644));
	T("isdir.open-creat-rdonly", topen("d", O_CREAT | O_RDONLY, 0644));
	T("isdir.unlink-dir", unlink("d"));
	T("isdir.truncate-dir", truncate("d", 0));
	fd = open("d", O_RDONLY);
	T("isdir.open-rdonly", fd);
	if (fd >= 0) {
		T("isdir.read-dir-fd", read(fd, buf, sizeof(buf)));
		close(fd);
	}
}

static void sec_notempty(void)
{
	struct stat st;

	T("notempty.rmdir-nonempty", rmdir("d"));
	T("notempty.rmdir-dotdot", rmdir("d/sub/.."));
	T("notempty.rmdir-dot", rmdir("d/sub/."));
	must(mkdir("d2", 0777), "d2");
	must(mkdir("d2/y", 0777), "d2/y");
	T("notempty.rename-dir-over-nonempty", rename("d2", "d"));
	show_stat("notempty.src-still-there", "d2/y", 0);
	must(mkdir("e", 0777), "e");
	T("notempty.rename-nonempty-over-empty", rename("d2", "e"));
	show_stat("notempty.moved-child", "e/y", 0);
	T("notempty.old-name-gone", stat("d2", &st));
	T("notempty.rmdir-child", rmdir("e/y"));
	T("notempty.rmdir-now-empty", rmdir("e"));
	T("notempty.stat-removed", stat("e", &st));
}

static void sec_exist(void)
{
	struct stat st;
	int rc;

	must(mkfile("g", 20, 4), "g");
	T("exist.mkdir-dir", mkdir("d", 0777));
	T("exist.mkdir-file", mkdir("f", 0777));
	T("exist.create-excl", topen("f", O_CREAT | O_EXCL | O_WRONLY, 0644));
	T("exist.create-excl-dir",
	  topen("d", O_CREAT | O_EXCL | O_WRONLY, 0644));
	T("exist.symlink", symlink("x", "f"));
	T("exist.link-onto-file", link("f", "g"));
	T("exist.link-onto-dir", link("f", "d"));
	show_content("exist.f-unchanged", "f");
	show_content("exist.g-unchanged", "g");
	/* link() may be refused by kvfs (DESIGN.md); only EEXIST is checked. */
	rc = link("f", "hardlink");
	fprintf(stderr, "info: link(new name): %s\n",
		ename(rc < 0 ? errno : 0));
	if (rc == 0) {
		if (stat("f", &st) == 0)
			fprintf(stderr, "info: nlink after link: %lu\n",
				(unsigned long)st.st_nlink);
		unlink("hardlink");
	}
}

static void sec_rename(void)
{
	unsigned char a[3000], b[5000];
	struct stat st;
	int rc;

	pattern(a, sizeof(a), 10);
	pattern(b, sizeof(b), 11);
	must(mkfile("r1", sizeof(a), 10), "r1");
	must(mkfile("r2", sizeof(b), 11), "r2");
	T("rename.file-over-dir", rename("r1", "d"));
	T("rename.dir-over-file", rename("d", "r1"));
	T("rename.dir-into-own-subdir", rename("d", "d/sub/inner"));
	T("rename.dir-onto-own-child", rename("d", "d/sub"));
	T("rename.dir-onto-own-parent", rename("d/sub", "d"));
	T("rename.into-missing-dir", rename("r1", "nope/r1"));
	T("rename.self", rename("r1", "r1"));
	expect_content("rename.self-content", "r1", a, sizeof(a));
	T("rename.noreplace-existing",
	  renameat2(AT_FDCWD, "r1", AT_FDCWD, "r2", RENAME_NOREPLACE));
	expect_content("rename.noreplace-src-kept", "r1", a, sizeof(a));
	expect_content("rename.noreplace-dst-kept", "r2", b, sizeof(b));
	T("rename.noreplace-new",
	  renameat2(AT_FDCWD, "r1", AT_FDCWD, "r3", RENAME_NOREPLACE));
	T("rename.noreplace-old-gone", stat("r1", &st));
	expect_content("rename.noreplace-new-content", "r3", a, sizeof(a));
	T("rename.exchange",
	  renameat2(AT_FDCWD, "r3", AT_FDCWD, "r2", RENAME_EXCHANGE));
	expect_content("rename.exchange-r3-has-r2", "r3", b, sizeof(b));
	expect_content("rename.exchange-r2-has-r3", "r2", a, sizeof(a));
	must(mkdir("e2", 0755), "e2");
	T("rename.exchange-file-dir",
	  renameat2(AT_FDCWD, "r3", AT_FDCWD, "e2", RENAME_EXCHANGE));
	show_stat("rename.exchange-file-dir-r3", "r3", 0);
	show_stat("rename.exchange-file-dir-e2", "e2", 0);
	expect_content("rename.exchange-file-dir-e2-content", "e2", b,
		       sizeof(b));
	T("rename.exchange-missing",
	  renameat2(AT_FDCWD, "e2", AT_FDCWD, "nope", RENAME_EXCHANGE));
	T("rename.exchange-noreplace-both",
	  renameat2(AT_FDCWD, "e2", AT_FDCWD, "r2",
		    RENAME_EXCHANGE | RENAME_NOREPLACE));
	T("rename.replace-file", rename("e2", "r2"));
	expect_content("rename.replace-file-content", "r2", b, sizeof(b));
	T("rename.replace-file-src-gone", stat("e2", &st));
	T("rename.dir-over-empty-dir", rename("r3", "d/sub/moved"));
	show_stat("rename.dir-moved", "d/sub/moved", 0);
	show_stat("rename.dir-moved-parent-nlink", "d/sub", 0);
	T("rename.dir-back", rename("d/sub/moved", "r3"));
	show_stat("rename.dir-back-parent-nlink", "d/sub", 0);
	must(mkdir("emptydir", 0755), "emptydir");
	T("rename.dir-over-empty", rename("r3", "emptydir"));
	show_stat("rename.dir-over-empty-result", "emptydir", 0);
	T("rename.dir-over-empty-src-gone", stat("r3", &st));
	rc = rmdir("emptydir");
	T("rename.cleanup", rc);
}

static void sec_rmdir_readlink(void)
{
	char buf[64];

	T("rmdir.on-file", rmdir("f"));
	T("rmdir.dot", rmdir("."));
	T("readlink.on-file", readlink("f", buf, sizeof(buf)));
	T("readlink.on-dir", readlink("d", buf, sizeof(buf)));
}

static void sec_symlink(void)
{
	char buf[2048], target[1001];
	ssize_t n;
	struct stat st;
	int fd;

	memset(target, 'q', 1000);
	target[1000] = '\0';
	T("symlink.create", symlink("f", "sl"));
	show_stat("symlink.lstat", "sl", 0);
	show_stat("symlink.stat", "sl", 1);
	n = readlink("sl", buf, sizeof(buf));
	if (n < 0)
		printf("symlink.readlink: %s\n", ename(errno));
	else
		printf("symlink.readlink: %.*s\n", (int)n, buf);
	n = readlink("sl", buf, 0 + 1);
	if (n < 0)
		printf("symlink.readlink-short-buf: %s\n", ename(errno));
	else
		printf("symlink.readlink-short-buf: %zd %.*s\n", n, (int)n,
		       buf);
	show_content("symlink.read-through", "sl");
	T("symlink.dangling", symlink("nope", "dang"));
	T("symlink.dangling-stat", stat("dang", &st));
	show_stat("symlink.dangling-lstat", "dang", 0);
	T("symlink.dangling-open", topen("dang", O_RDONLY, 0));
	T("symlink.loop1", symlink("loop2", "loop1"));
	T("symlink.loop2", symlink("loop1", "loop2"));
	T("symlink.loop-open", topen("loop1", O_RDONLY, 0));
	T("symlink.loop-stat", stat("loop1", &st));
	T("symlink.loop-access", access("loop1", F_OK));
	show_stat("symlink.loop-lstat", "loop1", 0);
	T("symlink.self", symlink("self", "self"));
	T("symlink.self-open", topen("self", O_RDONLY, 0));
	T("symlink.nofollow-open", topen("sl", O_RDONLY | O_NOFOLLOW, 0));
	T("symlink.path-nofollow-open", topen("sl", O_PATH | O_NOFOLLOW, 0));
	T("symlink.to-dir", symlink("d", "sld"));
	show_stat("symlink.to-dir-follow", "sld/", 1);
	show_content("symlink.to-dir-path", "sld/sub/x");
	T("symlink.long-target", symlink(target, "sllong"));
	n = readlink("sllong", buf, sizeof(buf));
	printf("symlink.long-readlink: %zd %s\n", n,
	       n == 1000 && !memcmp(buf, target, 1000) ? "match" : "MISMATCH");
	show_stat("symlink.long-lstat", "sllong", 0);
	T("symlink.empty-target", symlink("", "slempty"));
	T("symlink.unlink", unlink("sllong"));
	show_stat("symlink.unlink-target-kept", "f", 0);
	T("symlink.rename", rename("sl", "sl2"));
	show_content("symlink.rename-follows", "sl2");
	T("symlink.create-through-dangling",
	  topen("dang", O_CREAT | O_WRONLY, 0644));
	show_stat("symlink.created-target", "nope", 0);
	T("symlink.cleanup-target", unlink("nope"));
	fd = open("sl2", O_RDONLY | O_NOFOLLOW | O_PATH);
	if (fd >= 0) {
		T("symlink.fstat-opath", fstat(fd, &st));
		printf("symlink.fstat-opath-type: %s\n", type_name(st.st_mode));
		close(fd);
	}
}

static void sec_truncate(void)
{
	unsigned char *b;
	unsigned char want[10000];
	ssize_t n;
	int fd;

	pattern(want, sizeof(want), 20);
	must(mkfile("tr", sizeof(want), 20), "tr");
	T("truncate.down", truncate("tr", 3000));
	show_stat("truncate.down-stat", "tr", 0);
	expect_content("truncate.down-content", "tr", want, 3000);
	T("truncate.up", truncate("tr", 20000));
	show_stat("truncate.up-stat", "tr", 0);
	n = slurp("tr", &b);
	if (n < 0) {
		printf("truncate.up-content: %s\n", ename((int)-n));
	} else {
		printf("truncate.up-content: size=%zd head=%s tail=%s\n", n,
		       n >= 3000 && !memcmp(b, want, 3000) ? "match" : "BAD",
		       n == 20000 && all_zero(b + 3000, 17000) ? "zeros"
							       : "NONZERO");
		free(b);
	}
	/* Down then up must expose zeros, never the old bytes. */
	must(mkfile("tr2", sizeof(want), 20), "tr2");
	T("truncate.down-to-100", truncate("tr2", 100));
	T("truncate.up-to-10000", truncate("tr2", 10000));
	n = slurp("tr2", &b);
	if (n < 0) {
		printf("truncate.down-up-content: %s\n", ename((int)-n));
	} else {
		printf("truncate.down-up-content: size=%zd head=%s tail=%s\n",
		       n, n >= 100 && !memcmp(b, want, 100) ? "match" : "BAD",
		       n == 10000 && all_zero(b + 100, 9900) ? "zeros"
							     : "NONZERO");
		free(b);
	}
	fd = open("tr2", O_RDWR);
	T("truncate.open-rdwr", fd);
	if (fd >= 0) {
		unsigned char tail[64];

		T("truncate.ftruncate-down", ftruncate(fd, 50));
		T("truncate.ftruncate-up", ftruncate(fd, 4096 + 7));
		TN("truncate.pread-after", pread(fd, tail, sizeof(tail), 40));
		printf("truncate.pread-after-bytes: %s %s\n",
		       !memcmp(tail, want + 40, 10) ? "match" : "BAD",
		       all_zero(tail + 10, 54) ? "zeros" : "NONZERO");
		T("truncate.ftruncate-zero", ftruncate(fd, 0));
		TN("truncate.read-empty", pread(fd, tail, sizeof(tail), 0));
		close(fd);
	}
	T("truncate.up-from-empty", truncate("tr2", MiB + 3));
	n = slurp("tr2", &b);
	if (n >= 0) {
		printf("truncate.up-from-empty-content: size=%zd %s\n", n,
		       all_zero(b, (size_t)n) ? "zeros" : "NONZERO");
		free(b);
	}
	T("truncate.negative", truncate("tr2", -1));
	fd = open("tr2", O_RDONLY);
	if (fd >= 0) {
		T("truncate.ftruncate-rdonly-fd", ftruncate(fd, 0));
		close(fd);
	}
	show_stat("truncate.final", "tr2", 0);
}

static void sec_append_otrunc(void)
{
	unsigned char want[200], *b;
	ssize_t n;
	int fd, fd2;

	pattern(want, 100, 30);
	must(mkfile("ap", 100, 30), "ap");
	fd = open("ap", O_WRONLY | O_APPEND);
	T("append.open", fd);
	if (fd >= 0) {
		TN("append.write", write(fd, "abc", 3));
		T("append.lseek-0", lseek(fd, 0, SEEK_SET));
		TN("append.write-after-seek", write(fd, "def", 3));
		TN("append.pwrite-at-0", pwrite(fd, "ghi", 3, 0));
		close(fd);
	}
	memcpy(want + 100, "abcdefghi", 9);
	expect_content("append.content", "ap", want, 109);
	/* Two appenders interleaved: each write lands at the current end. */
	fd = open("ap2", O_WRONLY | O_CREAT | O_APPEND, 0644);
	fd2 = open("ap2", O_WRONLY | O_APPEND);
	T("append.two-fds", fd < 0 || fd2 < 0 ? -1 : 0);
	if (fd >= 0 && fd2 >= 0) {
		int i;

		for (i = 0; i < 5; i++) {
			if (write(fd, "1111", 4) != 4 ||
			    write(fd2, "22", 2) != 2)
				printf("append.two-fds-write: %s\n",
				       ename(errno));
		}
	}
	if (fd >= 0)
		close(fd);
	if (fd2 >= 0)
		close(fd2);
	expect_content("append.two-fds-content", "ap2",
		       (const unsigned char *)"111122111122111122111122111122",
		       30);

	/* O_TRUNC rewrite of an existing file. */
	must(mkfile("ot", 10000, 31), "ot");
	fd2 = open("ot", O_RDONLY);
	fd = open("ot", O_WRONLY | O_TRUNC);
	T("otrunc.open", fd);
	if (fd >= 0) {
		pattern(want, 100, 32);
		show_stat("otrunc.stat-after-open", "ot", 0);
		TN("otrunc.write", write(fd, want, 100));
		close(fd);
	}
	show_stat("otrunc.stat", "ot", 0);
	expect_content("otrunc.content", "ot", want, 100);
	if (fd2 >= 0) {
		n = fd_slurp(fd2, &b);
		if (n < 0) {
			printf("otrunc.old-fd-sees: %s\n", ename((int)-n));
		} else {
			printf("otrunc.old-fd-sees: size=%zd %s\n", n,
			       n == 100 && !memcmp(b, want, 100) ? "new"
								 : "OTHER");
			free(b);
		}
		close(fd2);
	}
	T("otrunc.open-no-write", topen("ot", O_WRONLY | O_TRUNC, 0));
	show_stat("otrunc.no-write-stat", "ot", 0);
	T("otrunc.creat-existing",
	  topen("ot", O_WRONLY | O_CREAT | O_TRUNC, 0600));
	show_stat("otrunc.creat-existing-mode-kept", "ot", 0);
}

static struct timespec now_coarse(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME_COARSE, &t);
	return t;
}

static struct timespec now_fine(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return t;
}

static int ts_le(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec ||
	       (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec);
}

/* Prints whether p's atime/mtime/ctime (which: 'a', 'm', 'c') is in [lo,hi]. */
static void in_window(const char *name, const char *p, int which,
		      struct timespec lo, struct timespec hi)
{
	struct stat st;
	struct timespec t;

	if (lstat(p, &st) < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	t = which == 'a' ? st.st_atim : which == 'm' ? st.st_mtim : st.st_ctim;
	if (ts_le(lo, t) && ts_le(t, hi)) {
		printf("%s: in-window\n", name);
	} else {
		printf("%s: OUT-OF-WINDOW\n", name);
		fprintf(stderr,
			"%s: %lld.%09ld not in [%lld.%09ld, %lld.%09ld]\n",
			name, (long long)t.tv_sec, t.tv_nsec,
			(long long)lo.tv_sec, lo.tv_nsec, (long long)hi.tv_sec,
			hi.tv_nsec);
	}
}

static void sec_utimens(void)
{
	struct timespec ts[2], lo, hi;
	int fd;

	must(mkfile("ut", 10, 40), "ut");
	ts[0] = (struct timespec){1000000000, 123456789};
	ts[1] = (struct timespec){1100000000, 987654321};
	T("utimens.set", utimensat(AT_FDCWD, "ut", ts, 0));
	show_times("utimens.set-read", "ut", 0);
	ts[0] = (struct timespec){0, UTIME_OMIT};
	ts[1] = (struct timespec){1200000000, 5};
	T("utimens.omit-atime", utimensat(AT_FDCWD, "ut", ts, 0));
	show_times("utimens.omit-atime-read", "ut", 0);
	ts[0] = (struct timespec){1300000000, 1};
	ts[1] = (struct timespec){0, UTIME_OMIT};
	T("utimens.omit-mtime", utimensat(AT_FDCWD, "ut", ts, 0));
	show_times("utimens.omit-mtime-read", "ut", 0);
	ts[0] = (struct timespec){0, UTIME_OMIT};
	ts[1] = (struct timespec){0, UTIME_OMIT};
	T("utimens.omit-both", utimensat(AT_FDCWD, "ut", ts, 0));
	show_times("utimens.omit-both-read", "ut", 0);
	ts[0] = (struct timespec){-86400, 500000000};
	ts[1] = (struct timespec){4102444800, 999999999};
	T("utimens.pre-epoch-and-2100", utimensat(AT_FDCWD, "ut", ts, 0));
	show_times("utimens.pre-epoch-and-2100-read", "ut", 0);
	ts[0] = (struct timespec){0, 1000000000};
	T("utimens.bad-nsec", utimensat(AT_FDCWD, "ut", ts, 0));

	lo = now_coarse();
	ts[0] = (struct timespec){0, UTIME_OMIT};
	ts[1] = (struct timespec){0, UTIME_NOW};
	T("utimens.now-mtime", utimensat(AT_FDCWD, "ut", ts, 0));
	hi = now_fine();
	in_window("utimens.now-mtime-value", "ut", 'm', lo, hi);
	{
		struct stat st;

		if (lstat("ut", &st) == 0)
			printf("utimens.now-mtime-atime-kept: %lld.%09ld\n",
			       (long long)st.st_atim.tv_sec,
			       st.st_atim.tv_nsec);
	}
	lo = now_coarse();
	T("utimens.null-times", utimensat(AT_FDCWD, "ut", NULL, 0));
	hi = now_fine();
	in_window("utimens.null-atime", "ut", 'a', lo, hi);
	in_window("utimens.null-mtime", "ut", 'm', lo, hi);

	/* futimens, on a directory, and on a symlink itself. */
	fd = open("ut", O_RDONLY);
	ts[0] = (struct timespec){1400000000, 11};
	ts[1] = (struct timespec){1400000001, 22};
	T("utimens.futimens", futimens(fd, ts));
	close(fd);
	show_times("utimens.futimens-read", "ut", 0);
	T("utimens.dir", utimensat(AT_FDCWD, "d", ts, 0));
	show_times("utimens.dir-read", "d", 0);
	must(symlink("ut", "utl"), "utl");
	ts[0] = (struct timespec){1500000000, 33};
	ts[1] = (struct timespec){1500000001, 44};
	T("utimens.symlink-nofollow",
	  utimensat(AT_FDCWD, "utl", ts, AT_SYMLINK_NOFOLLOW));
	show_times("utimens.symlink-own", "utl", 0);
	show_times("utimens.symlink-target-kept", "ut", 0);

	/* A write moves mtime and ctime to now; a chmod moves ctime. */
	lo = now_coarse();
	fd = open("ut", O_WRONLY);
	TN("utimens.write", write(fd, "x", 1));
	close(fd);
	hi = now_fine();
	in_window("utimens.write-mtime", "ut", 'm', lo, hi);
	in_window("utimens.write-ctime", "ut", 'c', lo, hi);
	lo = now_coarse();
	T("utimens.chmod", chmod("ut", 0640));
	hi = now_fine();
	in_window("utimens.chmod-ctime", "ut", 'c', lo, hi);
	lo = now_coarse();
	must(mkfile("d/newer", 1, 41), "d/newer");
	hi = now_fine();
	in_window("utimens.create-parent-mtime", "d", 'm', lo, hi);
	lo = now_coarse();
	T("utimens.rename-in-dir", rename("d/newer", "d/newest"));
	hi = now_fine();
	in_window("utimens.rename-parent-mtime", "d", 'm', lo, hi);
	lo = now_coarse();
	T("utimens.unlink-in-dir", unlink("d/newest"));
	hi = now_fine();
	in_window("utimens.unlink-parent-mtime", "d", 'm', lo, hi);
}

static void sec_chmod_chown(void)
{
	int fd;

	must(mkfile("cm", 10, 50), "cm");
	show_stat("mode.created-umask", "cm", 0);
	T("mode.chmod-600", chmod("cm", 0600));
	show_stat("mode.chmod-600-stat", "cm", 0);
	T("mode.chmod-2755", chmod("cm", 02755));
	show_stat("mode.chmod-2755-stat", "cm", 0);
	fd = open("cm", O_RDONLY);
	T("mode.fchmod-444", fchmod(fd, 0444));
	close(fd);
	show_stat("mode.fchmod-444-stat", "cm", 0);
	must(mkdir("md", 0750), "md");
	show_stat("mode.mkdir-750", "md", 0);
	must(mkdir("md2", 0777), "md2");
	show_stat("mode.mkdir-777-umask", "md2", 0);
	T("mode.chmod-dir-1777", chmod("md2", 01777));
	show_stat("mode.chmod-dir-1777-stat", "md2", 0);
	must(symlink("cm", "cml"), "cml");
	T("mode.chmod-through-symlink", chmod("cml", 0604));
	show_stat("mode.chmod-through-symlink-target", "cm", 0);
	show_stat("mode.chmod-through-symlink-link", "cml", 0);

	T("owner.chown", chown("cm", 1234, 5678));
	show_stat("owner.chown-stat", "cm", 0);
	T("owner.chown-gid-only", chown("cm", (uid_t)-1, 42));
	show_stat("owner.chown-gid-only-stat", "cm", 0);
	T("owner.chown-noop", chown("cm", (uid_t)-1, (gid_t)-1));
	show_stat("owner.chown-noop-stat", "cm", 0);
	T("owner.lchown", lchown("cml", 77, 88));
	show_stat("owner.lchown-link", "cml", 0);
	show_stat("owner.lchown-target-kept", "cm", 0);
	fd = open("cm", O_RDONLY);
	T("owner.fchown", fchown(fd, 0, 0));
	close(fd);
	show_stat("owner.fchown-stat", "cm", 0);
	T("owner.chown-dir", chown("md", 1, 2));
	show_stat("owner.chown-dir-stat", "md", 0);
	T("mode.chmod-4755", chmod("cm", 04755));
	T("owner.chown-kills-suid", chown("cm", 1234, 5678));
	show_stat("owner.chown-kills-suid-stat", "cm", 0);
}

static void show_xattr(const char *name, const char *p, const char *attr)
{
	char v[256];
	ssize_t n = getxattr(p, attr, v, sizeof(v));

	if (n < 0)
		printf("%s: %s\n", name, ename(errno));
	else
		printf("%s: %zd \"%.*s\"\n", name, n, (int)n, v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void show_xattr_list(const char *name, const char *p)
{
	char buf[4096], *names[64];
	ssize_t n = listxattr(p, buf, sizeof(buf));
	int k = 0, i;
	char *s;

	if (n < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	for (s = buf; s < buf + n && k < 64; s += strlen(s) + 1) {
		if (!strncmp(s, "user.", 5))
			names[k++] = s;
		else
			fprintf(stderr, "info: %s: non-user xattr %s\n", name,
				s);
	}
	qsort(names, (size_t)k, sizeof(*names), cmp_str);
	printf("%s: [", name);
	for (i = 0; i < k; i++)
		printf("%s%s", i ? "," : "", names[i]);
	printf("]\n");
}

static void sec_xattr(void)
{
	char v[1000], big[300], small[1];
	int fd;

	must(mkfile("xa", 10, 60), "xa");
	show_xattr_list("xattr.list-none", "xa");
	TN("xattr.list-none-size", listxattr("xa", NULL, 0));
	T("xattr.set", setxattr("xa", "user.alpha", "one", 3, 0));
	show_xattr("xattr.get", "xa", "user.alpha");
	TN("xattr.get-size", getxattr("xa", "user.alpha", NULL, 0));
	T("xattr.get-erange", getxattr("xa", "user.alpha", small, 1));
	T("xattr.get-missing", getxattr("xa", "user.missing", v, sizeof(v)));
	T("xattr.set-create-existing",
	  setxattr("xa", "user.alpha", "two", 3, XATTR_CREATE));
	show_xattr("xattr.create-existing-kept", "xa", "user.alpha");
	T("xattr.set-replace-missing",
	  setxattr("xa", "user.beta", "b", 1, XATTR_REPLACE));
	T("xattr.set-create-new",
	  setxattr("xa", "user.beta", "bee", 3, XATTR_CREATE));
	T("xattr.set-replace-existing",
	  setxattr("xa", "user.alpha", "uno!", 4, XATTR_REPLACE));
	show_xattr("xattr.replaced", "xa", "user.alpha");
	T("xattr.set-empty-value", setxattr("xa", "user.empty", "", 0, 0));
	show_xattr("xattr.empty-value", "xa", "user.empty");
	pattern((unsigned char *)v, sizeof(v), 61);
	T("xattr.set-1000-bytes", setxattr("xa", "user.big", v, sizeof(v), 0));
	{
		char back[1000];
		ssize_t n = getxattr("xa", "user.big", back, sizeof(back));

		printf("xattr.get-1000-bytes: %zd %s\n", n,
		       n == 1000 && !memcmp(back, v, 1000) ? "match"
							   : "MISMATCH");
	}
	T("xattr.set-binary", setxattr("xa", "user.bin", "\0\1\2\0\377", 5, 0));
	{
		char back[8];
		ssize_t n = getxattr("xa", "user.bin", back, sizeof(back));

		printf("xattr.get-binary: %zd %s\n", n,
		       n == 5 && !memcmp(back, "\0\1\2\0\377", 5) ? "match"
								  : "MISMATCH");
	}
	show_xattr_list("xattr.list", "xa");
	TN("xattr.list-size", listxattr("xa", NULL, 0));
	T("xattr.list-erange", listxattr("xa", small, 1));
	T("xattr.remove", removexattr("xa", "user.beta"));
	T("xattr.remove-missing", removexattr("xa", "user.beta"));
	T("xattr.get-removed", getxattr("xa", "user.beta", v, sizeof(v)));
	show_xattr_list("xattr.list-after-remove", "xa");
	memset(big, 'n', sizeof(big));
	memcpy(big, "user.", 5);
	big[sizeof(big) - 1] = '\0';
	T("xattr.name-too-long", setxattr("xa", big, "v", 1, 0));
	T("xattr.no-namespace", setxattr("xa", "alpha", "v", 1, 0));
	T("xattr.unknown-namespace", setxattr("xa", "bogus.alpha", "v", 1, 0));
	fd = open("xa", O_RDONLY);
	T("xattr.fsetxattr", fsetxattr(fd, "user.fd", "via-fd", 6, 0));
	TN("xattr.fgetxattr", fgetxattr(fd, "user.fd", v, sizeof(v)));
	T("xattr.fremovexattr", fremovexattr(fd, "user.fd"));
	close(fd);
	T("xattr.on-dir", setxattr("d", "user.dir", "dv", 2, 0));
	show_xattr("xattr.on-dir-get", "d", "user.dir");
	must(symlink("xa", "xal"), "xal");
	show_xattr("xattr.get-through-symlink", "xal", "user.alpha");
	T("xattr.lset-user-on-symlink", lsetxattr("xal", "user.x", "v", 1, 0));
	T("xattr.lget-on-symlink",
	  lgetxattr("xal", "user.alpha", v, sizeof(v)));

	/* vLLM fork style: xattr on the temp file, then rename to the name. */
	must(mkfile("blk.bin_123.tmp", 8192, 62), "tmp");
	T("xattr.tmp-set",
	  setxattr("blk.bin_123.tmp", "user.vllm_kv_crc32", "deadbeef", 8, 0));
	T("xattr.tmp-rename", rename("blk.bin_123.tmp", "blk.bin"));
	show_xattr("xattr.survives-rename", "blk.bin", "user.vllm_kv_crc32");
	show_xattr_list("xattr.survives-rename-list", "blk.bin");
	/* Rename over a file that had its own xattrs: the new ones win. */
	must(mkfile("blk2.tmp", 10, 63), "blk2.tmp");
	T("xattr.over-set", setxattr("blk2.tmp", "user.other", "o", 1, 0));
	T("xattr.over-rename", rename("blk2.tmp", "blk.bin"));
	show_xattr_list("xattr.over-list", "blk.bin");
	T("xattr.unlink", unlink("blk.bin"));
}

static void sec_open_unlink_rename(void)
{
	size_t n1 = MiB + 123, n2 = 2 * MiB;
	unsigned char *a = xmalloc(n2), *b = xmalloc(n2), *got;
	struct stat st;
	ssize_t n;
	int fd, fdd, fdw;

	pattern(a, n1, 70);
	must(mkfile("uo", n1, 70), "uo");
	fd = open("uo", O_RDONLY);
	T("unlinked.open", fd);
	T("unlinked.unlink", unlink("uo"));
	T("unlinked.stat-name", stat("uo", &st));
	T("unlinked.fstat", fstat(fd, &st));
	printf("unlinked.fstat-fields: nlink=%lu size=%lld\n",
	       (unsigned long)st.st_nlink, (long long)st.st_size);
	n = fd_slurp(fd, &got);
	printf("unlinked.read: %s\n",
	       n == (ssize_t)n1 && !memcmp(got, a, n1) ? "match" : "MISMATCH");
	if (n >= 0)
		free(got);
	close(fd);

	/* O_DIRECT fd opened before the unlink. */
	pattern(a, n2, 71);
	must(mkfile("uod", n2, 71), "uod");
	fdd = open("uod", O_RDONLY | O_DIRECT);
	T("unlinked.open-direct", fdd);
	T("unlinked.unlink-direct", unlink("uod"));
	if (fdd >= 0) {
		unsigned char *ab = abuf(n2);

		n = pread(fdd, ab, n2, 0);
		printf("unlinked.read-direct: %zd %s\n", n,
		       n == (ssize_t)n2 && !memcmp(ab, a, n2) ? "match"
							      : "MISMATCH");
		munmap(ab, n2);
		close(fdd);
	}

	/* A writable fd keeps working after the unlink. */
	must(mkfile("uow", 100, 72), "uow");
	fdw = open("uow", O_RDWR);
	T("unlinked.unlink-rw", unlink("uow"));
	TN("unlinked.pwrite", pwrite(fdw, "zzz", 3, 98));
	n = fd_slurp(fdw, &got);
	pattern(a, 100, 72);
	memcpy(a + 98, "zzz", 3);
	printf("unlinked.rw-read: %zd %s\n", n,
	       n == 101 && !memcmp(got, a, 101) ? "match" : "MISMATCH");
	if (n >= 0)
		free(got);
	close(fdw);
	T("unlinked.name-still-gone", stat("uow", &st));

	/* An fd on a file that gets renamed over keeps the old bytes. */
	pattern(a, n2, 73);
	pattern(b, n2, 74);
	must(mkfile("ro", n2, 73), "ro");
	fd = open("ro", O_RDONLY);
	fdd = open("ro", O_RDONLY | O_DIRECT);
	must(mkfile("ro.new", n2, 74), "ro.new");
	T("renamedover.rename", rename("ro.new", "ro"));
	n = fd_slurp(fd, &got);
	printf("renamedover.old-fd: %s\n",
	       n == (ssize_t)n2 && !memcmp(got, a, n2) ? "old-bytes"
						       : "MISMATCH");
	if (n >= 0)
		free(got);
	T("renamedover.old-fstat", fstat(fd, &st));
	printf("renamedover.old-fstat-fields: nlink=%lu size=%lld\n",
	       (unsigned long)st.st_nlink, (long long)st.st_size);
	if (fdd >= 0) {
		unsigned char *ab = abuf(n2);

		n = pread(fdd, ab, n2, 0);
		printf("renamedover.old-fd-direct: %s\n",
		       n == (ssize_t)n2 && !memcmp(ab, a, n2) ? "old-bytes"
							      : "MISMATCH");
		munmap(ab, n2);
		close(fdd);
	}
	close(fd);
	expect_content("renamedover.name-has-new", "ro", b, n2);
	T("renamedover.unlink", unlink("ro"));
	free(a);
	free(b);
}

static void sec_eof_pread(void)
{
	unsigned char want[5000], buf[256], *model, *got, *ab;
	uint64_t s = 99;
	size_t msize = 0, cap = 3 * MiB + 4096;
	ssize_t n;
	int fd, i, bad = 0;

	pattern(want, sizeof(want), 80);
	must(mkfile("eof", sizeof(want), 80), "eof");
	fd = open("eof", O_RDONLY);
	TN("eof.pread-at-eof", pread(fd, buf, 100, 5000));
	TN("eof.pread-after-eof", pread(fd, buf, 100, 10000));
	n = pread(fd, buf, 100, 4990);
	printf("eof.pread-across-eof: %zd %s\n", n,
	       n == 10 && !memcmp(buf, want + 4990, 10) ? "match" : "BAD");
	TN("eof.lseek-end", lseek(fd, 0, SEEK_END));
	TN("eof.lseek-past", lseek(fd, 6000, SEEK_SET));
	TN("eof.read-past", read(fd, buf, 100));
	TN("eof.pread-zero-len", pread(fd, buf, 0, 0));
	TN("eof.pread-negative-offset", pread(fd, buf, 10, -1));
	close(fd);
	fd = open("eof", O_RDONLY | O_DIRECT);
	T("eof.open-direct", fd);
	if (fd >= 0) {
		ab = abuf(8192);
		n = pread(fd, ab, 8192, 0);
		printf("eof.direct-across-eof: %zd %s\n", n,
		       n == 5000 && !memcmp(ab, want, 5000) ? "match" : "BAD");
		n = pread(fd, ab, 4096, 4096);
		printf("eof.direct-tail: %zd %s\n", n,
		       n == 904 && !memcmp(ab, want + 4096, 904) ? "match"
								 : "BAD");
		TN("eof.direct-after-eof", pread(fd, ab, 4096, 8192));
		munmap(ab, 8192);
		close(fd);
	}

	/* pwrite/pread at offsets, checked against an in-memory model. */
	model = calloc(1, cap);
	got = xmalloc(cap);
	fd = open("pw", O_RDWR | O_CREAT | O_TRUNC, 0644);
	T("pwrite.open", fd);
	for (i = 0; i < 300 && fd >= 0; i++) {
		static const size_t sizes[] = {
			1, 7, 100, 4095, 4096, 4097, 65536, 131073, 1, 1048577};
		size_t len = sizes[splitmix(&s) % 10];
		size_t off = (size_t)(splitmix(&s) % (cap - len - 4096));
		unsigned char chunk[4096];
		size_t k;

		if (i % 7 == 0)
			off = (off / 4096) * 4096 + 4096 - 3; /* straddle */
		if (i % 11 == 0)
			off = MiB - len / 2; /* straddle 1 MiB */
		for (k = 0; k < len; k += sizeof(chunk)) {
			size_t cl = len - k < sizeof(chunk) ? len - k
							    : sizeof(chunk);

			pattern(chunk, cl, splitmix(&s));
			if (pwrite(fd, chunk, cl, (off_t)(off + k)) !=
			    (ssize_t)cl) {
				printf("pwrite.step-%d: %s\n", i, ename(errno));
				bad++;
			}
			memcpy(model + off + k, chunk, cl);
		}
		if (off + len > msize)
			msize = off + len;
		if (i % 10 == 9) {
			size_t ro = (size_t)(splitmix(&s) % msize);
			size_t rl = (size_t)(splitmix(&s) % 300000);

			if (ro + rl > msize)
				rl = msize - ro;
			n = pread(fd, got, rl, (off_t)ro);
			if (n != (ssize_t)rl || memcmp(got, model + ro, rl)) {
				printf("pwrite.pread-%d: MISMATCH (%zd of %zu "
				       "at %zu)\n",
				       i, n, rl, ro);
				bad++;
			}
		}
	}
	if (fd >= 0) {
		struct stat st;

		fstat(fd, &st);
		printf("pwrite.size: %lld (model %zu)\n", (long long)st.st_size,
		       msize);
		close(fd);
	}
	printf("pwrite.interleaved-checks: %s\n", bad ? "FAILED" : "match");
	expect_content("pwrite.final-content", "pw", model, msize);
	free(got);
	/* A hole reads as zeros. */
	fd = open("hole", O_RDWR | O_CREAT | O_TRUNC, 0644);
	TN("pwrite.hole-write", pwrite(fd, "end", 3, 3 * MiB));
	n = fd_slurp(fd, &got);
	printf("pwrite.hole-read: %zd %s\n", n,
	       n == (ssize_t)(3 * MiB + 3) && all_zero(got, 3 * MiB) &&
			       !memcmp(got + 3 * MiB, "end", 3)
		       ? "zeros+end"
		       : "BAD");
	if (n >= 0)
		free(got);
	close(fd);
	free(model);
}

static void sec_odirect(void)
{
	size_t n = 64 * KiB;
	unsigned char *want = xmalloc(n), *ab = abuf(n + 2 * PAGE), *got;
	ssize_t r;
	int fd, e;

	pattern(want, n, 90);
	must(mkfile("od", n, 90), "od");
	fd = open("od", O_RDONLY | O_DIRECT);
	T("odirect.open", fd);
	if (fd < 0) {
		munmap(ab, n + 2 * PAGE);
		free(want);
		return;
	}
	r = pread(fd, ab, 8192, 4096);
	printf("odirect.aligned-pread: %zd %s\n", r,
	       r == 8192 && !memcmp(ab, want + 4096, 8192) ? "match" : "BAD");
	/*
	 * Unaligned O_DIRECT: ext4 refuses it (EINVAL); FUSE passes it to the
	 * daemon. Either is correct; wrong bytes or another errno are not.
	 */
	r = pread(fd, ab + 1, 10001, 3);
	e = errno;
	if (r < 0 && e == EINVAL)
		printf("odirect.unaligned-pread: ok (EINVAL or exact bytes)\n");
	else if (r == 10001 && !memcmp(ab + 1, want + 3, 10001))
		printf("odirect.unaligned-pread: ok (EINVAL or exact bytes)\n");
	else
		printf("odirect.unaligned-pread: BAD %zd %s\n", r,
		       r < 0 ? ename(e) : "wrong-bytes");
	fprintf(stderr, "info: unaligned O_DIRECT pread: %s\n",
		r < 0 ? ename(e) : "served");
	close(fd);

	/* O_DIRECT writes and buffered reads see one another. */
	fd = open("od", O_RDWR | O_DIRECT);
	T("odirect.open-rw", fd);
	if (fd >= 0) {
		memset(ab, 0xa5, 2 * PAGE);
		TN("odirect.aligned-pwrite", pwrite(fd, ab, 2 * PAGE, PAGE));
		memset(want + PAGE, 0xa5, 2 * PAGE);
		memset(ab + 1, 0x3c, 100);
		r = pwrite(fd, ab + 1, 100, 5);
		e = errno;
		if (r == 100)
			memset(want + 5, 0x3c, 100);
		if ((r < 0 && e == EINVAL) || r == 100)
			printf("odirect.unaligned-pwrite: ok (EINVAL or "
			       "written)\n");
		else
			printf("odirect.unaligned-pwrite: BAD %zd %s\n", r,
			       ename(r < 0 ? e : 0));
		fprintf(stderr, "info: unaligned O_DIRECT pwrite: %s\n",
			r < 0 ? ename(e) : "served");
		close(fd);
	}
	r = slurp("od", &got);
	printf("odirect.buffered-sees-direct: %s\n",
	       r == (ssize_t)n && !memcmp(got, want, n) ? "match" : "MISMATCH");
	if (r >= 0)
		free(got);
	munmap(ab, n + 2 * PAGE);
	free(want);
}

static void sec_statfs_sync(void)
{
	struct statvfs sv;
	int fd;

	T("statfs.statvfs", statvfs(".", &sv));
	fd = open("f", O_RDWR);
	T("statfs.fstatvfs", fstatvfs(fd, &sv));
	TN("sync.write", write(fd, "x", 1));
	T("sync.fsync", fsync(fd));
	T("sync.fdatasync", fdatasync(fd));
	close(fd);
	fd = open("d", O_RDONLY | O_DIRECTORY);
	T("sync.fsync-dir", fsync(fd));
	close(fd);
}

static void sec_readdir(void)
{
	enum { NFILES = 1200 };
	static char names[NFILES + 16][300];
	char *listed[NFILES + 32];
	int nn = 0, nl = 0, ndot = 0, ndotdot = 0, i, bad = 0, types[4] = {0};
	DIR *dh;
	struct dirent *de;

	must(mkdir("rd", 0755), "rd");
	dh = opendir("rd");
	for (i = 0; dh && (de = readdir(dh));)
		i++;
	if (dh)
		closedir(dh);
	printf("readdir.empty-count: %d\n", i);
	for (i = 0; i < NFILES; i++) {
		char p[320];

		xsnprintf(names[nn], sizeof(names[nn]), "n%04d%s", i,
			  i % 3 ? ".bin" : "_1234567890.tmp");
		xsnprintf(p, sizeof(p), "rd/%s", names[nn++]);
		must(topen(p, O_CREAT | O_WRONLY, 0644), "readdir create");
	}
	xsnprintf(names[nn++], 300, "%s", "dir one");
	xsnprintf(names[nn++], 300, "%s", "dir2");
	xsnprintf(names[nn++], 300, "%s", "link");
	xsnprintf(names[nn++], 300, "%s", "\xc3\xa9t\xc3\xa9");
	memset(names[nn], 'z', 255);
	names[nn++][255] = '\0';
	must(mkdir("rd/dir one", 0755), "dir one");
	must(mkdir("rd/dir2", 0755), "dir2");
	must(symlink("n0001.bin", "rd/link"), "link");
	must(mkfile("rd/\xc3\xa9t\xc3\xa9", 3, 1), "utf8");
	{
		char p[320];

		xsnprintf(p, sizeof(p), "rd/%s", names[nn - 1]);
		must(mkfile(p, 3, 1), "255");
	}
	dh = opendir("rd");
	while (dh && (de = readdir(dh))) {
		if (!strcmp(de->d_name, ".")) {
			ndot++;
			continue;
		}
		if (!strcmp(de->d_name, "..")) {
			ndotdot++;
			continue;
		}
		if (nl < NFILES + 32)
			listed[nl++] = strdup(de->d_name);
		types[de->d_type == DT_REG   ? 0
		      : de->d_type == DT_DIR ? 1
		      : de->d_type == DT_LNK ? 2
					     : 3]++;
	}
	if (dh)
		closedir(dh);
	printf("readdir.dots: .=%d ..=%d\n", ndot, ndotdot);
	printf("readdir.count: %d (created %d)\n", nl, nn);
	printf("readdir.d_type: reg=%d dir=%d lnk=%d other=%d\n", types[0],
	       types[1], types[2], types[3]);
	{
		char *sorted[NFILES + 16];

		for (i = 0; i < nn; i++)
			sorted[i] = names[i];
		qsort(sorted, (size_t)nn, sizeof(*sorted), cmp_str);
		qsort(listed, (size_t)nl, sizeof(*listed), cmp_str);
		for (i = 0; i < nn && i < nl; i++)
			if (strcmp(sorted[i], listed[i]))
				bad++;
		printf("readdir.names: %s\n",
		       nl == nn && !bad ? "exactly-the-created" : "MISMATCH");
	}
	for (i = 0; i < nl; i++)
		free(listed[i]);
	/* Remove every other file; the listing follows. */
	for (i = 0; i < NFILES; i += 2) {
		char p[320];

		xsnprintf(p, sizeof(p), "rd/%s", names[i]);
		if (unlink(p) < 0)
			bad++;
	}
	nl = 0;
	dh = opendir("rd");
	while (dh && (de = readdir(dh)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			nl++;
	if (dh)
		closedir(dh);
	printf("readdir.after-unlink-count: %d\n", nl);
	/* rewinddir gives the same listing again. */
	dh = opendir("rd");
	if (dh) {
		int c1 = 0, c2 = 0;

		while (readdir(dh))
			c1++;
		rewinddir(dh);
		while (readdir(dh))
			c2++;
		closedir(dh);
		printf("readdir.rewind: %s\n", c1 == c2 ? "same" : "DIFFERENT");
	}
}

static void battery(void)
{
	sec_missing();
	sec_nametoolong();
	sec_notdir();
	sec_isdir();
	sec_notempty();
	sec_exist();
	sec_rename();
	sec_rmdir_readlink();
	sec_symlink();
	sec_truncate();
	sec_append_otrunc();
	sec_utimens();
	sec_chmod_chown();
	sec_xattr();
	sec_open_unlink_rename();
	sec_eof_pread();
	sec_odirect();
	sec_statfs_sync();
	sec_readdir();
}

/* ---- remount population ---- */

static void set_times(const char *p, long long a, long long m, int flags)
{
	struct timespec ts[2] = {{(time_t)a, 123456789},
				 {(time_t)m, 987654321}};

	T(p, utimensat(AT_FDCWD, p, ts, flags));
}

static void populate(int phase)
{
	int fd, i;

	if (phase == 1) {
		must(mkdir("misc", 0755), "misc");
		must(chdir("misc"), "chdir misc");
		must(topen("empty", O_CREAT | O_WRONLY, 0644), "empty");
		must(mkfile("t_times", 100, 1), "t_times");
		set_times("t_times", 1000000000, 1100000000, 0);
		must(mkfile("mode600", 10, 2), "mode600");
		T("chmod mode600", chmod("mode600", 0600));
		must(mkfile("owned", 10, 3), "owned");
		T("chown owned", chown("owned", 1234, 5678));
		T("symlink sl", symlink("t_times", "sl"));
		T("symlink dangling", symlink("nope", "dangling"));
		must(mkfile("xa", 10, 4), "xa");
		T("setxattr a", setxattr("xa", "user.a", "alpha", 5, 0));
		T("setxattr b", setxattr("xa", "user.b", "beta", 4, 0));
		T("setxattr c", setxattr("xa", "user.c", "gamma", 5, 0));
		T("removexattr c", removexattr("xa", "user.c"));
		must(mkdir("t_dir", 0750), "t_dir");
		must(mkfile("t_dir/one", 5000, 5), "one");
		must(mkfile("t_dir/two", 1, 6), "two");
		set_times("t_dir", 1200000000, 1300000000, 0);
		fd = open("sparse", O_WRONLY | O_CREAT, 0644);
		TN("pwrite sparse", pwrite(fd, "tail", 4, 3 * MiB));
		close(fd);
		must(mkfile("trunc", 10000, 7), "trunc");
		T("truncate trunc", truncate("trunc", 777));
		must(mkfile("tmpname", 4096, 8), "tmpname");
		T("rename tmpname", rename("tmpname", "renamed"));
		fd = open("appended", O_WRONLY | O_CREAT | O_APPEND, 0644);
		for (i = 0; i < 10; i++)
			TN("append", write(fd, "0123456789", 10));
		close(fd);
		must(mkdir("sub", 0755), "sub");
		must(mkdir("sub/deep", 0755), "deep");
		must(mkdir("sub/deep/er", 0700), "er");
		must(mkfile("sub/deep/er/file", 300000, 9), "file");
		must(mkfile("blk.bin_77.tmp", 8192, 10), "tmp");
		T("setxattr tmp",
		  setxattr("blk.bin_77.tmp", "user.crc", "1234abcd", 8, 0));
		T("rename tmp", rename("blk.bin_77.tmp", "blk.bin"));
		must(mkfile("xa_dirfile", 10, 11), "x");
		T("setxattr dir", setxattr("sub", "user.d", "dir", 3, 0));
		must(mkfile("ex1", 111, 12), "ex1");
		must(mkfile("ex2", 222, 13), "ex2");
		T("exchange",
		  renameat2(AT_FDCWD, "ex1", AT_FDCWD, "ex2", RENAME_EXCHANGE));
		must(mkfile("symlink_target", 3, 14), "t");
		T("symlink t_sl", symlink("symlink_target", "t_sl"));
		set_times("t_sl", 1400000000, 1500000000, AT_SYMLINK_NOFOLLOW);
		must(mkfile("gone", 10, 15), "gone");
		T("unlink gone", unlink("gone"));
	} else {
		must(chdir("misc"), "chdir misc");
		T("chmod owned", chmod("owned", 0640));
		T("chown mode600", chown("mode600", 42, 43));
		T("unlink trunc", unlink("trunc"));
		T("rename renamed", rename("renamed", "sub/renamed2"));
		T("setxattr xa a",
		  setxattr("xa", "user.a", "ALPHA!", 6, XATTR_REPLACE));
		T("removexattr xa b", removexattr("xa", "user.b"));
		must(mkfile("t_times", 200, 16), "t_times");
		set_times("t_times", 1600000000, 1700000000, 0);
		fd = open("appended", O_WRONLY | O_APPEND);
		TN("append", write(fd, "more", 4));
		close(fd);
		fd = open("sparse", O_WRONLY);
		TN("pwrite sparse", pwrite(fd, "mid", 3, MiB));
		close(fd);
		T("rmdir er nonempty", rmdir("sub/deep/er"));
		T("unlink file", unlink("sub/deep/er/file"));
		T("rmdir er2", rmdir("sub/deep/er"));
		must(mkfile("new-after-remount", 12345, 17), "new");
		T("rename over", rename("new-after-remount", "blk.bin"));
		set_times("t_dir", 1800000000, 1900000000, 0);
	}
}

int main(int argc, char **argv)
{
	int phase = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	if (argc == 4 && !strcmp(argv[1], "-p"))
		phase = atoi(argv[2]);
	if (!(argc == 2 || (argc == 4 && (phase == 1 || phase == 2)))) {
		fprintf(stderr, "usage: errno_battery [-p 1|2] DIR\n");
		return 2;
	}
	if (chdir(argv[argc - 1]) < 0)
		fail_setup(argv[argc - 1]);
	if (phase) {
		populate(phase);
		return 0;
	}
	must(mkdir("battery", 0755), "battery");
	must(chdir("battery"), "chdir battery");
	battery();
	printf("battery: done\n");
	return 0;
}
