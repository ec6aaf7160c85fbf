/* SPDX-License-Identifier: MIT */
/*
 * errno_battery's namespace sections: missing names, ENAMETOOLONG,
 * ENOTDIR, EISDIR, ENOTEMPTY, EEXIST, rename, rmdir and readlink,
 * symlinks, truncate, O_APPEND and O_TRUNC. One transcript line per step
 * (see errno_battery.c).
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

void sec_missing(void)
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

void sec_nametoolong(void)
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

void sec_notdir(void)
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

void sec_isdir(void)
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

void sec_notempty(void)
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

void sec_exist(void)
{
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
	/* New hard links: sec_link (errno_battery_link.c). */
}

void sec_rename(void)
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

void sec_rmdir_readlink(void)
{
	char buf[64];

	T("rmdir.on-file", rmdir("f"));
	T("rmdir.dot", rmdir("."));
	T("readlink.on-file", readlink("f", buf, sizeof(buf)));
	T("readlink.on-dir", readlink("d", buf, sizeof(buf)));
}

void sec_symlink(void)
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

void sec_truncate(void)
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

void sec_append_otrunc(void)
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
