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
 * The sections live in errno_battery_ns.c, errno_battery_io.c,
 * errno_battery_link.c (hard links), errno_battery_special.c (FIFOs,
 * sockets, device nodes, mkdir and symlink cases, truncate edges) and
 * errno_battery_perm.c (set-id bits, permissions as other users, the
 * sticky bit); see errno_battery.h.
 *
 * Exit status: 0 when the battery ran (the transcript is the verdict), 1 when
 * it could not start, 2 on usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "errno_battery.h"

static const char *prog = "errno_battery";

#include "tclient.h"

/* snprintf that treats truncation as a bug in the test. */
void xsnprintf(char *out, size_t n, const char *fmt, ...)
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

void report(const char *name, long r, int e, int count)
{
	if (r < 0)
		printf("%s: %s\n", name, ename(e));
	else if (count)
		printf("%s: OK %ld\n", name, r);
	else
		printf("%s: OK\n", name);
}

void fail_setup(const char *what)
{
	fprintf(stderr, "errno_battery: setup: %s: %s\n", what,
		strerror(errno));
	exit(1);
}

uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--) {
		h ^= *c++;
		h *= 0x100000001b3ull;
	}
	return h;
}

void pattern(unsigned char *b, size_t n, uint64_t seed)
{
	uint64_t s = seed;
	size_t i;

	for (i = 0; i < n; i += 8) {
		uint64_t v = splitmix(&s);

		memcpy(b + i, &v, n - i < 8 ? n - i : 8);
	}
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "errno_battery: out of memory\n");
		exit(1);
	}
	return p;
}

/* Opens and closes at once; returns 0 or -1 with errno from open. */
int topen(const char *p, int flags, mode_t m)
{
	int fd = open(p, flags, m);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Writes n pattern bytes (seed) to a new or truncated file. 0 or -1. */
int mkfile(const char *p, size_t n, uint64_t seed)
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

void must(int rc, const char *what)
{
	if (rc < 0)
		fail_setup(what);
}

const char *type_name(mode_t m)
{
	return S_ISREG(m)    ? "reg"
	       : S_ISDIR(m)  ? "dir"
	       : S_ISLNK(m)  ? "lnk"
	       : S_ISFIFO(m) ? "fifo"
	       : S_ISCHR(m)  ? "chr"
	       : S_ISBLK(m)  ? "blk"
	       : S_ISSOCK(m) ? "sock"
			     : "other";
}

/* "name: type=T mode=M nlink=N uid=U gid=G [size=S]" or the errno. */
void show_stat(const char *name, const char *p, int follow)
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

void show_mode(const char *name, const char *p)
{
	struct statx stx;

	if (statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, STATX_MODE, &stx) < 0)
		printf("%s: %s\n", name, ename(errno));
	else
		printf("%s: mode=%04o\n", name,
		       (unsigned)(stx.stx_mode & 07777));
}

void show_times(const char *name, const char *p, int follow)
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
ssize_t fd_slurp(int fd, unsigned char **out)
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

ssize_t slurp(const char *p, unsigned char **out)
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
void show_content(const char *name, const char *p)
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
void expect_content(const char *name, const char *p, const unsigned char *want,
		    size_t n)
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

int all_zero(const unsigned char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

void as_user(const char *name, uid_t id, gid_t extra, void (*fn)(void))
{
	pid_t pid;
	int st;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		fail_setup("fork");
	if (pid == 0) {
		if (setgroups(extra ? 1 : 0, &extra) < 0 ||
		    setresgid(id, id, id) < 0 || setresuid(id, id, id) < 0) {
			fprintf(stderr, "%s: cannot become %u: %s\n", name,
				(unsigned)id, strerror(errno));
			_exit(3);
		}
		fn();
		fflush(stdout);
		fflush(stderr);
		_exit(0);
	}
	if (waitpid(pid, &st, 0) < 0)
		fail_setup("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		printf("%s: exit=%d\n", name,
		       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
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
	sec_pwrite();
	sec_wronly_cache();
	sec_odirect();
	sec_statfs_sync();
	sec_readdir();
	sec_link();
	sec_link_rename();
	sec_link_open();
	sec_special();
	sec_special_io();
	sec_mkdir_symlink();
	sec_trunc_edges();
	sec_setid();
	sec_perm();
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
