/* SPDX-License-Identifier: MIT */
/*
 * errno_battery's data and metadata sections: utimensat, chmod and chown,
 * xattrs, open files across unlink and rename, reads at EOF, pread and
 * pwrite against a model, O_DIRECT, statfs and sync, readdir. One
 * transcript line per step (see errno_battery.c).
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

#include "errno_battery.h"

static const char *prog = "errno_battery";

#include "tclient.h"

struct timespec now_coarse(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME_COARSE, &t);
	return t;
}

struct timespec now_fine(void)
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
void in_window(const char *name, const char *p, int which, struct timespec lo,
	       struct timespec hi)
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

void sec_utimens(void)
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

void sec_chmod_chown(void)
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

void sec_xattr(void)
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

void sec_open_unlink_rename(void)
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

/* Reads at, across and after EOF, buffered and O_DIRECT. */
void sec_eof_pread(void)
{
	unsigned char want[5000], buf[256], *ab;
	ssize_t n;
	int fd;

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
}

/* pwrite/pread at offsets, checked against an in-memory model; a hole
 * reads as zeros. */
void sec_pwrite(void)
{
	unsigned char *model, *got;
	uint64_t s = 99;
	size_t msize = 0, cap = 3 * MiB + 4096;
	ssize_t n;
	int fd, i, bad = 0;

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

/*
 * What a write-only handle writes is what every other handle reads next:
 * one that read the pages before, one that maps them, a new one (kvfs
 * serves write-only handles without the page cache). A write-only
 * descriptor cannot be mapped.
 */
void sec_wronly_cache(void)
{
	unsigned char want[3 * PAGE], got[3 * PAGE];
	unsigned char *map = MAP_FAILED;
	int r, w, r2;

	if (mkfile("wo", sizeof(want), 5) < 0)
		fail_setup("mkfile wo");
	pattern(want, sizeof(want), 5);
	r = open("wo", O_RDONLY);
	T("wronly.reader-open", r);
	TN("wronly.reader-read", pread(r, got, sizeof(got), 0));
	if (r >= 0)
		map = mmap(NULL, sizeof(want), PROT_READ, MAP_SHARED, r, 0);
	printf("wronly.reader-map: %s\n",
	       map == MAP_FAILED ? ename(errno) : "OK");
	if (map != MAP_FAILED)
		printf("wronly.map-before: %s\n",
		       memcmp(map, want, sizeof(want)) ? "BAD" : "match");
	w = open("wo", O_WRONLY);
	T("wronly.writer-open", w);
	T("wronly.writer-mmap",
	  mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, w, 0) == MAP_FAILED ? -1
								       : 0);
	memset(want + PAGE, 'B', PAGE);
	memcpy(want + 100, "unaligned", 9);
	TN("wronly.write-page", pwrite(w, want + PAGE, PAGE, PAGE));
	TN("wronly.write-bytes", pwrite(w, want + 100, 9, 100));
	memset(got, 0, sizeof(got));
	TN("wronly.reader-again", pread(r, got, sizeof(got), 0));
	printf("wronly.reader-sees: %s\n",
	       memcmp(got, want, sizeof(want)) ? "STALE" : "match");
	if (map != MAP_FAILED) {
		printf("wronly.map-sees: %s\n",
		       memcmp(map, want, sizeof(want)) ? "STALE" : "match");
		munmap(map, sizeof(want));
	}
	r2 = open("wo", O_RDONLY);
	memset(got, 0, sizeof(got));
	TN("wronly.new-reader", pread(r2, got, sizeof(got), 0));
	printf("wronly.new-reader-sees: %s\n",
	       memcmp(got, want, sizeof(want)) ? "STALE" : "match");
	close(r2);
	close(w);
	close(r);
	expect_content("wronly.content", "wo", want, sizeof(want));
}

void sec_odirect(void)
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

void sec_statfs_sync(void)
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

static void readdir_after_unlink(char (*names)[300], int nfiles);

/* Listing a directory of 1200 files and a few odd names. */
void sec_readdir(void)
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
	readdir_after_unlink(names, NFILES);
}

/* Removes every other one of the first nfiles names in rd: the listing
 * follows; rewinddir gives the same listing again. */
static void readdir_after_unlink(char (*names)[300], int nfiles)
{
	struct dirent *de;
	int i, nl = 0;
	DIR *dh;

	for (i = 0; i < nfiles; i += 2) {
		char p[320];

		xsnprintf(p, sizeof(p), "rd/%s", names[i]);
		unlink(p);
	}
	dh = opendir("rd");
	while (dh && (de = readdir(dh)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			nl++;
	if (dh)
		closedir(dh);
	printf("readdir.after-unlink-count: %d\n", nl);
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
