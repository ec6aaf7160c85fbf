/* SPDX-License-Identifier: MIT */
/*
 * errno_battery's permission sections. sec_setid: set-uid and set-gid bits
 * across chown, write, truncate and O_TRUNC by the owner (root), O_TRUNC of
 * an empty file (the times move), O_RDONLY|O_TRUNC. sec_perm: steps run as
 * other users (uid/gid 1001 with extra group 1003, and 1002), in children
 * forked for them (as_user): open, access, create, link, unlink, rename
 * without permission (EACCES), chmod, chown and explicit times by a
 * non-owner (EPERM), set-gid dropped by chmod from a non-member, set-id bits
 * cleared by a non-owner's write, truncate and O_TRUNC open, the sticky bit
 * (EPERM on another user's names), protected_hardlinks. Without root the
 * users cannot be taken on: sec_perm then prints one "skipped" line on every
 * filesystem. One transcript line per step (see errno_battery.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "errno_battery.h"

static const char *prog = "errno_battery";

#include "tclient.h"

#define U1 1001
#define U2 1002
#define G_EXTRA 1003

static void old_times(const char *p)
{
	struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};

	must(utimensat(AT_FDCWD, p, ts, 0), "old times");
}

/*
 * A set-gid file without group execute, written or truncated (truncate,
 * O_TRUNC) by a user outside its group: ext4 (setattr_should_drop_sgid) clears the set-gid bit, the
 * kernel's FUSE code (fuse_setattr without handle_killpriv) clears it only
 * for a group-executable file, so on a FUSE mount it stays. The transcript
 * gets the mode without that bit, stderr whether it is still set.
 */
static void sgid_info(const char *name, const char *p)
{
	struct stat st;

	if (lstat(p, &st) < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	printf("%s: mode-without-sgid=%04o size=%lld\n", name,
	       (unsigned)(st.st_mode & 05777), (long long)st.st_size);
	fprintf(stderr,
		"info: %s: set-gid bit %s (ext4 clears it when a non-member "
		"writes or truncates; FUSE only when group-executable)\n",
		name, st.st_mode & S_ISGID ? "kept" : "cleared");
}

/* Opens p with flags and closes it; prints the open's result. */
static void topen_t(const char *name, const char *p, int flags)
{
	T(name, topen(p, flags, 0));
}

void sec_setid(void)
{
	struct timespec lo, hi;
	int fd;

	must(mkdir("si", 0755), "si");
	must(chdir("si"), "chdir si");
	must(mkfile("s1", 100, 90), "s1");
	T("setid.chmod-6755", chmod("s1", 06755));
	T("setid.chown-noop", chown("s1", (uid_t)-1, (gid_t)-1));
	show_stat("setid.chown-noop-stat", "s1", 0);
	T("setid.chmod-6755-again", chmod("s1", 06755));
	T("setid.chown-uid", chown("s1", 1234, (gid_t)-1));
	show_stat("setid.chown-uid-stat", "s1", 0);
	T("setid.chmod-2745", chmod("s1", 02745));
	T("setid.chown-gid-nox", chown("s1", (uid_t)-1, 77));
	show_stat("setid.chown-gid-nox-stat", "s1", 0);
	must(mkdir("sd", 0755), "sd");
	T("setid.chmod-dir-6755", chmod("sd", 06755));
	T("setid.chown-dir", chown("sd", 1234, 77));
	show_stat("setid.chown-dir-stat", "sd", 0);
	must(mkfile("s2", 100, 91), "s2");
	T("setid.chmod-s2", chmod("s2", 06777));
	fd = open("s2", O_WRONLY);
	TN("setid.root-write", write(fd, "x", 1));
	close(fd);
	show_stat("setid.root-write-stat", "s2", 0);
	T("setid.root-truncate", truncate("s2", 50));
	show_stat("setid.root-truncate-stat", "s2", 0);
	T("setid.root-otrunc", topen("s2", O_WRONLY | O_TRUNC, 0));
	show_stat("setid.root-otrunc-stat", "s2", 0);

	/* O_TRUNC of an empty file still sets mtime and ctime. */
	must(topen("e1", O_CREAT | O_WRONLY, 0644), "e1");
	old_times("e1");
	lo = now_coarse();
	T("otrunc-empty.open", topen("e1", O_WRONLY | O_TRUNC, 0));
	hi = now_fine();
	in_window("otrunc-empty.mtime", "e1", 'm', lo, hi);
	in_window("otrunc-empty.ctime", "e1", 'c', lo, hi);
	old_times("e1");
	lo = now_coarse();
	T("otrunc-empty.open-rdonly", topen("e1", O_RDONLY | O_TRUNC, 0));
	hi = now_fine();
	in_window("otrunc-empty.rdonly-mtime", "e1", 'm', lo, hi);
	old_times("e1");
	lo = now_coarse();
	T("otrunc-empty.creat", topen("e1", O_CREAT | O_WRONLY | O_TRUNC, 0));
	hi = now_fine();
	in_window("otrunc-empty.creat-mtime", "e1", 'm', lo, hi);
	/* O_RDONLY|O_TRUNC truncates a file with bytes. */
	must(mkfile("r1", 5000, 92), "r1");
	fd = open("r1", O_RDONLY | O_TRUNC);
	T("otrunc-rdonly.open", fd);
	show_stat("otrunc-rdonly.stat", "r1", 0);
	if (fd >= 0) {
		char b[8];

		TN("otrunc-rdonly.read", read(fd, b, sizeof(b)));
		close(fd);
	}
	must(mkfile("r2", 5000, 93), "r2");
	fd = open("r2", O_RDONLY);
	T("otrunc-rdonly.creat", topen("r2", O_CREAT | O_RDONLY | O_TRUNC, 0));
	show_stat("otrunc-rdonly.creat-stat", "r2", 0);
	if (fd >= 0) {
		char b[8];

		TN("otrunc-rdonly.old-fd-read", read(fd, b, sizeof(b)));
		close(fd);
	}
	/* Not implemented by kvfs (EOPNOTSUPP): kept out of the transcript. */
	fd = open(".", O_TMPFILE | O_RDWR, 0600);
	fprintf(stderr, "info: O_TMPFILE: %s\n", ename(fd < 0 ? errno : 0));
	if (fd >= 0)
		close(fd);
	must(chdir(".."), "chdir ..");
}

/* What 1001 does first: refusals in root's files and directories. */
static void user1_refused(void)
{
	struct timespec ts[2] = {{1500000000, 0}, {1500000000, 0}};
	struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
	struct stat st;
	int fd;

	topen_t("perm1.open-600-rdonly", "p600", O_RDONLY);
	topen_t("perm1.open-644-rdonly", "p644", O_RDONLY);
	topen_t("perm1.open-644-wronly", "p644", O_WRONLY);
	topen_t("perm1.open-644-rdwr", "p644", O_RDWR);
	topen_t("perm1.open-644-trunc", "p644", O_RDONLY | O_TRUNC);
	topen_t("perm1.open-666-rdwr", "open/p666", O_RDWR);
	T("perm1.access-600-r", access("p600", R_OK));
	T("perm1.access-644-r", access("p644", R_OK));
	T("perm1.access-644-w", access("p644", W_OK));
	T("perm1.access-644-x", access("p644", X_OK));
	T("perm1.create-in-755", topen("new", O_CREAT | O_WRONLY, 0644));
	T("perm1.mkdir-in-755", mkdir("newd", 0755));
	T("perm1.mkfifo-in-755", mkfifo("newp", 0644));
	T("perm1.symlink-in-755", symlink("x", "news"));
	T("perm1.link-in-755", link("p644", "newl"));
	T("perm1.unlink-in-755", unlink("p644"));
	T("perm1.rename-in-755", rename("p644", "p644b"));
	T("perm1.rename-out-of-755", rename("p644", "open/p644"));
	T("perm1.stat-in-744", stat("px/f", &st));
	T("perm1.open-in-744", topen("px/f", O_RDONLY, 0));
	T("perm1.chdir-744", chdir("px"));
	T("perm1.create-in-744", topen("px/new", O_CREAT | O_WRONLY, 0644));
	T("perm1.create-in-776",
	  topen("open/nx/new", O_CREAT | O_WRONLY, 0644));
	T("perm1.stat-in-776", stat("open/nx/f", &st));
	T("perm1.unlink-in-776", unlink("open/nx/f"));
	T("perm1.create-in-773",
	  topen("open/wx/new", O_CREAT | O_WRONLY, 0644));
	T("perm1.unlink-in-773", unlink("open/wx/new"));
	T("perm1.chmod-not-owner", chmod("p644", 0666));
	T("perm1.chown-not-owner", chown("p644", U1, (gid_t)-1));
	T("perm1.chgrp-not-owner", chown("p644", (uid_t)-1, U1));
	T("perm1.utimens-not-owner-no-w", utimensat(AT_FDCWD, "p644", ts, 0));
	T("perm1.utimens-null-no-w", utimensat(AT_FDCWD, "p644", NULL, 0));
	T("perm1.utimens-now-no-w", utimensat(AT_FDCWD, "p644", now, 0));
	T("perm1.utimens-not-owner-w", utimensat(AT_FDCWD, "open/p666", ts, 0));
	T("perm1.utimens-null-w", utimensat(AT_FDCWD, "open/p666", NULL, 0));
	T("perm1.utimens-now-w", utimensat(AT_FDCWD, "open/p666", now, 0));
	T("perm1.truncate-no-w", truncate("p644", 3));
	T("perm1.truncate-w", truncate("open/p666", 3));
	show_stat("perm1.truncate-w-stat", "open/p666", 0);
	fd = open("p644", O_RDONLY);
	T("perm1.ftruncate-rdonly", ftruncate(fd, 0));
	close(fd);
	T("perm1.link-600", link("open/hl600", "open/hl600b"));
	T("perm1.link-644", link("open/hl644", "open/hl644b"));
	T("perm1.link-666", link("open/hl666", "open/hl666b"));
	show_stat("perm1.link-666-nlink", "open/hl666", 0);
	T("perm1.link-4777", link("open/hl4777", "open/hl4777b"));
}

/* 1001 on its own files and on set-id files root lets it write. */
static void user1_owned(void)
{
	struct timespec lo, hi;
	int fd;

	must(mkfile("open/own", 10, 94), "own");
	show_stat("perm1.own-created", "open/own", 0);
	T("perm1.own-chmod", chmod("open/own", 0600));
	T("perm1.own-chown-other-uid", chown("open/own", U2, (gid_t)-1));
	T("perm1.own-chown-same-uid", chown("open/own", U1, (gid_t)-1));
	T("perm1.own-chgrp-member", chown("open/own", (uid_t)-1, G_EXTRA));
	show_stat("perm1.own-chgrp-member-stat", "open/own", 0);
	T("perm1.own-chgrp-nonmember", chown("open/own", (uid_t)-1, 1004));
	T("perm1.given-chmod-sgid", chmod("open/given", 02755));
	show_stat("perm1.given-chmod-sgid-stat", "open/given", 0);
	T("perm1.own-chmod-sgid", chmod("open/own", 02755));
	show_stat("perm1.own-chmod-sgid-stat", "open/own", 0);
	T("perm1.own-chmod-suid", chmod("open/own", 06755));
	show_stat("perm1.own-chmod-suid-stat", "open/own", 0);
	T("perm1.own-chgrp-clears-setid", chown("open/own", (uid_t)-1, U1));
	show_stat("perm1.own-chgrp-clears-setid-stat", "open/own", 0);
	T("perm1.own-chmod-644", chmod("open/own", 0644));
	T("perm1.mknod-chr", mknod("open/cdev", S_IFCHR | 0644, makedev(1, 3)));
	T("perm1.mknod-blk", mknod("open/bdev", S_IFBLK | 0644, makedev(7, 1)));
	T("perm1.mknod-fifo", mknod("open/fifo", S_IFIFO | 0644, 0));
	T("perm1.mknod-sock", mknod("open/sock", S_IFSOCK | 0644, 0));
	show_stat("perm1.mknod-fifo-stat", "open/fifo", 0);
	T("perm1.noatime-not-owner",
	  topen("open/noatime", O_RDONLY | O_NOATIME, 0));
	T("perm1.noatime-owner", topen("open/own", O_RDONLY | O_NOATIME, 0));
	T("perm1.lchown-not-owner", lchown("open/hl644", U1, U1));
	must(mkdir("open/dd1001", 0755), "open/dd1001");
	must(mkdir("open/dd1001/in", 0755), "open/dd1001/in");
	fd = open("open/su", O_WRONLY);
	TN("perm1.setid-write", write(fd, "x", 1));
	show_mode("perm1.setid-write-mode", "open/su");
	close(fd);
	show_stat("perm1.setid-write-stat", "open/su", 0);
	fd = open("open/sgnx", O_WRONLY);
	TN("perm1.sgid-nox-write", write(fd, "x", 1));
	close(fd);
	sgid_info("perm1.sgid-nox-write-stat", "open/sgnx");
	T("perm1.sgid-nox-truncate", truncate("open/sgnx2", 5));
	sgid_info("perm1.sgid-nox-truncate-stat", "open/sgnx2");
	topen_t("perm1.sgid-nox-otrunc", "open/sgnx3", O_WRONLY | O_TRUNC);
	sgid_info("perm1.sgid-nox-otrunc-stat", "open/sgnx3");
	T("perm1.setid-truncate", truncate("open/su2", 5));
	show_stat("perm1.setid-truncate-stat", "open/su2", 0);
	topen_t("perm1.setid-otrunc", "open/su3", O_WRONLY | O_TRUNC);
	show_mode("perm1.setid-otrunc-mode", "open/su3");
	show_stat("perm1.setid-otrunc-stat", "open/su3", 0);
	lo = now_coarse();
	topen_t("perm1.setid-otrunc-empty", "open/su4", O_WRONLY | O_TRUNC);
	hi = now_fine();
	show_stat("perm1.setid-otrunc-empty-stat", "open/su4", 0);
	in_window("perm1.setid-otrunc-empty-mtime", "open/su4", 'm', lo, hi);
	in_window("perm1.setid-otrunc-empty-ctime", "open/su4", 'c', lo, hi);
	topen_t("perm1.setid-otrunc-rdonly", "open/su5", O_RDONLY | O_TRUNC);
	show_stat("perm1.setid-otrunc-rdonly-stat", "open/su5", 0);
	topen_t("perm1.otrunc-rdonly", "open/rt", O_RDONLY | O_TRUNC);
	show_stat("perm1.otrunc-rdonly-stat", "open/rt", 0);
	must(mkfile("st/f1001", 10, 95), "st/f1001");
	must(mkdir("st/d1001", 0755), "st/d1001");
	must(mkfile("open/g1001", 10, 96), "open/g1001");
}

/* 1002 in the sticky directory and the open one. */
static void user2(void)
{
	T("perm2.sticky-unlink-other", unlink("st/f1001"));
	T("perm2.sticky-rename-other", rename("st/f1001", "st/x"));
	T("perm2.sticky-rename-other-out", rename("st/f1001", "open/x"));
	T("perm2.sticky-rmdir-other", rmdir("st/d1001"));
	T("perm2.sticky-unlink-root", unlink("st/froot"));
	T("perm2.sticky-open-other-w", topen("st/f1001", O_WRONLY, 0));
	must(mkfile("st/f1002", 10, 97), "st/f1002");
	T("perm2.sticky-rename-own-over-other", rename("st/f1002", "st/f1001"));
	T("perm2.sticky-rename-own", rename("st/f1002", "st/f1002b"));
	T("perm2.sticky-link-into", link("st/f1002b", "st/f1002c"));
	show_stat("perm2.sticky-link-into-stat", "st/f1002c", 0);
	T("perm2.sticky-unlink-own-link", unlink("st/f1002c"));
	T("perm2.open-unlink-other", unlink("open/g1001"));
	T("perm2.chmod-other", chmod("open/own", 0777));
	T("perm2.link-other-644", link("open/own", "open/own2"));
	/* Moving another user's directory to another parent rewrites its
	 * "..": it needs write permission on the directory itself. */
	T("perm2.rename-other-dir-across",
	  rename("open/dd1001", "open/sub/dd"));
	T("perm2.rename-other-dir-same-parent",
	  rename("open/dd1001", "open/dd2"));
	T("perm2.rmdir-in-other-dir", rmdir("open/dd2/in"));
	T("perm2.create-in-other-dir",
	  topen("open/dd2/x", O_CREAT | O_WRONLY, 0644));
	T("perm2.unlink-other-fifo", unlink("open/fifo"));
	T("perm2.rename-other-file-across", rename("open/own", "open/sub/own"));
	show_stat("perm2.rename-other-file-across-stat", "open/sub/own", 0);
}

/* 1001 again: its own names in the sticky directory are its to remove. */
static void user1_again(void)
{
	T("perm1.sticky-rename-other", rename("st/f1002b", "st/y"));
	T("perm1.sticky-unlink-own", unlink("st/f1001"));
	T("perm1.sticky-rmdir-own", rmdir("st/d1001"));
}

/* A file of n bytes (seeded with seed) with mode, or the battery ends. */
static void mkfile_mode(const char *p, size_t n, uint64_t seed, mode_t mode)
{
	must(mkfile(p, n, seed), p);
	must(chmod(p, mode), p);
}

/* A directory with mode (set after mkdir, past the umask). */
static void mkdir_mode(const char *p, mode_t mode)
{
	must(mkdir(p, 0755), p);
	must(chmod(p, mode), p);
}

static void perm_setup(void)
{
	must(mkdir("pm", 0755), "pm");
	must(chdir("pm"), "chdir pm");
	mkfile_mode("p600", 10, 100, 0600);
	mkfile_mode("p644", 10, 101, 0644);
	must(mkdir("px", 0744), "px");
	mkfile_mode("px/f", 10, 102, 0644);
	mkdir_mode("st", 01777);
	mkfile_mode("st/froot", 10, 103, 0666);
	mkdir_mode("open", 0777);
	mkfile_mode("open/p666", 10, 104, 0666);
	mkfile_mode("open/hl600", 10, 105, 0600);
	mkfile_mode("open/hl644", 10, 106, 0644);
	mkfile_mode("open/hl666", 10, 107, 0666);
	mkfile_mode("open/hl4777", 10, 108, 04777);
	mkfile_mode("open/given", 10, 109, 0644);
	must(chown("open/given", U1, 0), "chown given");
	mkfile_mode("open/su", 100, 110, 06777);
	mkfile_mode("open/sgnx", 100, 111, 02766);
	mkfile_mode("open/sgnx2", 100, 116, 02766);
	mkfile_mode("open/sgnx3", 100, 117, 02766);
	must(mkdir("open/nx", 0755), "open/nx");
	mkfile_mode("open/nx/f", 1, 119, 0644);
	must(chmod("open/nx", 0776), "chmod open/nx");
	mkdir_mode("open/wx", 0773);
	mkdir_mode("open/sub", 0777);
	mkfile_mode("open/noatime", 10, 118, 0666);
	mkfile_mode("open/su2", 100, 112, 06777);
	mkfile_mode("open/su3", 100, 113, 06777);
	must(topen("open/su4", O_CREAT | O_WRONLY, 0644), "su4");
	must(chmod("open/su4", 06777), "chmod su4");
	old_times("open/su4");
	mkfile_mode("open/su5", 100, 114, 06777);
	mkfile_mode("open/rt", 100, 115, 0666);
}

void sec_perm(void)
{
	if (geteuid() != 0) {
		printf("perm: skipped (not root)\n");
		return;
	}
	perm_setup();
	as_user("perm1.refused", U1, G_EXTRA, user1_refused);
	as_user("perm1.owned", U1, G_EXTRA, user1_owned);
	as_user("perm2", U2, 0, user2);
	as_user("perm1.again", U1, G_EXTRA, user1_again);
	T("perm.root-sticky-unlink-other", unlink("st/f1002b"));
	T("perm.root-sticky-unlink-own", unlink("st/froot"));
	T("perm.root-sticky-rmdir-empty", rmdir("st"));
	show_stat("perm.su-final", "open/su", 0);
	must(chdir(".."), "chdir ..");
}
