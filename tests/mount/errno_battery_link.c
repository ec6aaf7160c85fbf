/* SPDX-License-Identifier: MIT */
/*
 * errno_battery's hard link sections: link(2)'s refusals (EEXIST, ENOENT,
 * EPERM on a directory, ENOTDIR), links to symlinks (with and without
 * AT_SYMLINK_FOLLOW), st_nlink after link, unlink and rename, one inode's
 * bytes, mode, xattrs and size seen through every name, ctime and the
 * parent's mtime on link, rename over a link and of one name onto another
 * name of the same inode (a no-op), and names unlinked while a descriptor is
 * open (the descriptor and the other names keep working; a file with no
 * name left cannot get one back). One transcript line per step (see
 * errno_battery.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "errno_battery.h"

static const char *prog = "errno_battery";

#include "tclient.h"

/* "name: nlink=N size=S" of an open descriptor, or the errno. */
static void show_fd(const char *name, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	printf("%s: type=%s mode=%04o nlink=%lu size=%lld\n", name,
	       type_name(st.st_mode), (unsigned)(st.st_mode & 07777),
	       (unsigned long)st.st_nlink, (long long)st.st_size);
}

/* "name: same" when a and b (lstat) are one inode, else "different". */
static void same_file(const char *name, const char *a, const char *b)
{
	struct stat sa, sb;

	if (lstat(a, &sa) < 0 || lstat(b, &sb) < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	printf("%s: %s\n", name,
	       sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev ? "same"
								: "different");
}

void sec_link(void)
{
	struct timespec lo, hi;
	char buf[64];
	ssize_t n;

	must(mkdir("lk", 0755), "lk");
	must(chdir("lk"), "chdir lk");
	must(mkfile("la", 100, 60), "la");
	must(mkdir("ld", 0755), "ld");
	lo = now_coarse();
	T("link.new", link("la", "lb"));
	hi = now_fine();
	in_window("link.new-ctime", "la", 'c', lo, hi);
	in_window("link.new-parent-mtime", ".", 'm', lo, hi);
	show_stat("link.new-a", "la", 0);
	show_stat("link.new-b", "lb", 0);
	same_file("link.new-same", "la", "lb");
	T("link.exists", link("la", "lb"));
	T("link.onto-self", link("la", "la"));
	T("link.onto-dir", link("la", "ld"));
	T("link.missing-src", link("nope", "lc"));
	T("link.missing-dst-dir", link("la", "nope/lc"));
	T("link.src-under-file", link("la/x", "lc"));
	T("link.dst-under-file", link("la", "lb/x"));
	T("link.src-trailing-slash", link("la/", "lc"));
	T("link.dst-trailing-slash", link("la", "lc/"));
	T("link.of-dir", link("ld", "ld2"));
	T("link.of-dot", link(".", "dot2"));
	T("link.empty-name", link("la", ""));
	lo = now_coarse();
	T("link.into-subdir", link("la", "ld/lc"));
	hi = now_fine();
	in_window("link.into-subdir-parent-mtime", "ld", 'm', lo, hi);
	show_stat("link.into-subdir-nlink", "ld/lc", 0);
	show_stat("link.into-subdir-dir-nlink", "ld", 0);

	/* Bytes, mode, owner, xattrs and size are the inode's. */
	must(mkfile("lb", 300, 61), "rewrite lb");
	show_content("link.write-via-b-read-a", "la");
	show_content("link.write-via-b-read-c", "ld/lc");
	T("link.chmod-via-c", chmod("ld/lc", 0640));
	show_stat("link.chmod-seen-via-a", "la", 0);
	T("link.chown-via-a", chown("la", 321, 654));
	show_stat("link.chown-seen-via-b", "lb", 0);
	T("link.setxattr-via-a", setxattr("la", "user.l", "linked", 6, 0));
	n = getxattr("lb", "user.l", buf, sizeof(buf));
	if (n < 0)
		printf("link.getxattr-via-b: %s\n", ename(errno));
	else
		printf("link.getxattr-via-b: %.*s\n", (int)n, buf);
	T("link.truncate-via-c", truncate("ld/lc", 7));
	show_stat("link.truncate-seen-via-a", "la", 0);

	/* Unlinking names one by one. */
	T("link.unlink-a", unlink("la"));
	show_stat("link.unlink-a-b", "lb", 0);
	show_stat("link.unlink-a-c", "ld/lc", 0);
	T("link.unlink-a-again", unlink("la"));
	T("link.relink-a", link("ld/lc", "la"));
	show_stat("link.relink-a-nlink", "lb", 0);
	T("link.unlink-c", unlink("ld/lc"));
	T("link.unlink-b", unlink("lb"));
	show_stat("link.last-name", "la", 0);
	show_content("link.last-name-content", "la");

	/* Links to a symlink: link(2) does not follow it, AT_SYMLINK_FOLLOW
	 * does. */
	must(symlink("la", "lsl"), "lsl");
	T("link.of-symlink", link("lsl", "lsl2"));
	show_stat("link.of-symlink-lstat", "lsl2", 0);
	show_stat("link.of-symlink-orig-lstat", "lsl", 0);
	n = readlink("lsl2", buf, sizeof(buf));
	printf("link.of-symlink-readlink: %.*s\n", n < 0 ? 0 : (int)n, buf);
	same_file("link.of-symlink-same", "lsl", "lsl2");
	T("link.follow-symlink",
	  linkat(AT_FDCWD, "lsl", AT_FDCWD, "lsl3", AT_SYMLINK_FOLLOW));
	show_stat("link.follow-symlink-lstat", "lsl3", 0);
	same_file("link.follow-symlink-same", "la", "lsl3");
	must(symlink("nope", "ldang"), "ldang");
	T("link.of-dangling-symlink", link("ldang", "ldang2"));
	T("link.follow-dangling-symlink",
	  linkat(AT_FDCWD, "ldang", AT_FDCWD, "ldang3", AT_SYMLINK_FOLLOW));
	T("link.unlink-symlink-name", unlink("lsl"));
	show_stat("link.symlink-other-name", "lsl2", 0);
	T("link.unlink-lsl3", unlink("lsl3"));
	show_stat("link.after-unlink-lsl3", "la", 0);
}

void sec_link_rename(void)
{
	unsigned char a[100], c[500];
	struct stat st;

	pattern(c, sizeof(c), 62);
	must(mkfile("ra", 100, 63), "ra");
	pattern(a, sizeof(a), 63);
	must(link("ra", "rb"), "rb");
	must(mkfile("rc", sizeof(c), 62), "rc");
	/* rename over one name of a linked file: the other keeps it. */
	T("linkren.over-link", rename("rc", "rb"));
	show_stat("linkren.over-link-a", "ra", 0);
	show_stat("linkren.over-link-b", "rb", 0);
	expect_content("linkren.over-link-a-content", "ra", a, sizeof(a));
	expect_content("linkren.over-link-b-content", "rb", c, sizeof(c));
	same_file("linkren.over-link-same", "ra", "rb");
	/* rename of a name onto another name of the same inode: nothing. */
	must(link("ra", "rd"), "rd");
	T("linkren.same-inode", rename("ra", "rd"));
	show_stat("linkren.same-inode-src-kept", "ra", 0);
	show_stat("linkren.same-inode-dst", "rd", 0);
	T("linkren.same-inode-noreplace",
	  renameat2(AT_FDCWD, "ra", AT_FDCWD, "rd", RENAME_NOREPLACE));
	T("linkren.same-inode-exchange",
	  renameat2(AT_FDCWD, "ra", AT_FDCWD, "rd", RENAME_EXCHANGE));
	show_stat("linkren.same-inode-exchange-a", "ra", 0);
	show_stat("linkren.same-inode-exchange-d", "rd", 0);
	/* A name moved to another directory keeps the count. */
	T("linkren.to-subdir", rename("rd", "ld/rd"));
	show_stat("linkren.to-subdir-nlink", "ra", 0);
	same_file("linkren.to-subdir-same", "ra", "ld/rd");
	/* rename a linked file over a plain one. */
	T("linkren.linked-over-other", rename("ld/rd", "rb"));
	show_stat("linkren.linked-over-other-nlink", "ra", 0);
	T("linkren.linked-over-other-src-gone", stat("ld/rd", &st));
	/* Exchange a linked name with another file. */
	must(mkfile("re", 10, 64), "re");
	T("linkren.exchange-linked",
	  renameat2(AT_FDCWD, "rb", AT_FDCWD, "re", RENAME_EXCHANGE));
	same_file("linkren.exchange-linked-same", "ra", "re");
	show_stat("linkren.exchange-linked-rb", "rb", 0);
	show_stat("linkren.exchange-linked-ra", "ra", 0);
	T("linkren.cleanup-a", unlink("ra"));
	show_stat("linkren.cleanup-re-nlink", "re", 0);
}

/* Names unlinked while a descriptor is open. */
void sec_link_open(void)
{
	unsigned char want[200];
	char buf[16];
	int fd, fd2;

	pattern(want, 100, 65);
	must(mkfile("oa", 100, 65), "oa");
	must(link("oa", "ob"), "ob");
	must(link("oa", "ld/oc"), "oc");
	fd = open("oa", O_RDWR);
	T("linkopen.open", fd);
	if (fd < 0)
		fail_setup("open oa");
	T("linkopen.unlink-opened-name", unlink("oa"));
	show_fd("linkopen.fstat-after-unlink", fd);
	show_stat("linkopen.other-name", "ob", 0);
	TN("linkopen.write-fd", pwrite(fd, "WXYZ", 4, 98));
	memcpy(want + 98, "WXYZ", 4);
	expect_content("linkopen.read-other-name", "ob", want, 102);
	expect_content("linkopen.read-third-name", "ld/oc", want, 102);
	must(mkfile("tmpw", 0, 1), "tmpw");
	fd2 = open("ob", O_WRONLY | O_APPEND);
	TN("linkopen.append-other-name", write(fd2, "tail", 4));
	close(fd2);
	memcpy(want + 102, "tail", 4);
	TN("linkopen.read-fd", pread(fd, buf, 8, 100));
	printf("linkopen.read-fd-bytes: %s\n",
	       !memcmp(buf, want + 100, 6) ? "match" : "MISMATCH");
	show_fd("linkopen.fstat-after-append", fd);
	T("linkopen.relink-via-fd",
	  linkat(fd, "", AT_FDCWD, "oa2", AT_EMPTY_PATH));
	show_fd("linkopen.relink-via-fd-nlink", fd);
	T("linkopen.unlink-b", unlink("ob"));
	T("linkopen.unlink-c", unlink("ld/oc"));
	T("linkopen.unlink-a2", unlink("oa2"));
	show_fd("linkopen.fstat-no-name", fd);
	TN("linkopen.write-no-name", pwrite(fd, "!", 1, 0));
	TN("linkopen.read-no-name", pread(fd, buf, 4, 0));
	printf("linkopen.read-no-name-bytes: %s\n",
	       buf[0] == '!' && !memcmp(buf + 1, want + 1, 3) ? "match"
							      : "MISMATCH");
	/* A file with no name left cannot be given one again. */
	T("linkopen.relink-nameless",
	  linkat(fd, "", AT_FDCWD, "back", AT_EMPTY_PATH));
	{
		char p[64];
		struct stat st;

		xsnprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		T("linkopen.relink-nameless-proc",
		  linkat(AT_FDCWD, p, AT_FDCWD, "back2", AT_SYMLINK_FOLLOW));
		T("linkopen.relink-nameless-gone", lstat("back", &st));
	}
	close(fd);
	T("linkopen.cleanup", unlink("tmpw"));
	must(chdir(".."), "chdir ..");
}
