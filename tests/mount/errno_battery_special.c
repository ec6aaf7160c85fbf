/* SPDX-License-Identifier: MIT */
/*
 * errno_battery's special file sections: FIFOs (mkfifo and mknod), unix
 * sockets (mknod and bind), character and block device nodes (st_rdev),
 * what mknod refuses, stat/lstat, chmod, chown, utimensat, user.* xattrs,
 * rename, link and unlink of them, readdir's d_type, I/O through a FIFO and
 * a bound socket; mkdir and rmdir cases (modes, set-gid directories, dots,
 * trailing slashes); symlink cases; truncate and ftruncate edges (negative
 * sizes, directories, FIFOs, read-only and O_PATH descriptors, growing).
 * One transcript line per step (see errno_battery.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "errno_battery.h"

static const char *prog = "errno_battery";

#include "tclient.h"

/* show_stat plus "rdev=MAJ:MIN" (lstat). */
static void show_node(const char *name, const char *p)
{
	struct stat st;

	if (lstat(p, &st) < 0) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	printf("%s: type=%s mode=%04o nlink=%lu uid=%u gid=%u size=%lld "
	       "rdev=%u:%u\n",
	       name, type_name(st.st_mode), (unsigned)(st.st_mode & 07777),
	       (unsigned long)st.st_nlink, (unsigned)st.st_uid,
	       (unsigned)st.st_gid, (long long)st.st_size, major(st.st_rdev),
	       minor(st.st_rdev));
}

static const char *dtype_name(unsigned char t)
{
	switch (t) {
	case DT_REG:
		return "reg";
	case DT_DIR:
		return "dir";
	case DT_LNK:
		return "lnk";
	case DT_FIFO:
		return "fifo";
	case DT_CHR:
		return "chr";
	case DT_BLK:
		return "blk";
	case DT_SOCK:
		return "sock";
	case DT_UNKNOWN:
		return "unknown";
	default:
		return "other";
	}
}

/* "name: entry=type ..." of dir's entries other than . and .., sorted. */
static void show_dtypes(const char *name, const char *dir)
{
	char *lines[64];
	struct dirent *de;
	int n = 0, i;
	DIR *dh = opendir(dir);

	if (!dh) {
		printf("%s: %s\n", name, ename(errno));
		return;
	}
	while ((de = readdir(dh)) && n < 64) {
		char l[300];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		xsnprintf(l, sizeof(l), "%s=%s", de->d_name,
			  dtype_name(de->d_type));
		lines[n++] = strdup(l);
	}
	closedir(dh);
	qsort(lines, (size_t)n, sizeof(*lines), cmp_str);
	printf("%s:", name);
	for (i = 0; i < n; i++) {
		printf(" %s", lines[i]);
		free(lines[i]);
	}
	printf("\n");
}

void sec_special(void)
{
	struct timespec ts[2] = {{1000000000, 1}, {1100000000, 2}};
	char buf[16];

	must(mkdir("sp", 0755), "sp");
	must(chdir("sp"), "chdir sp");
	T("special.mkfifo", mkfifo("ff", 0644));
	show_node("special.mkfifo-lstat", "ff");
	T("special.mkfifo-exists", mkfifo("ff", 0644));
	must(mkfile("sf", 10, 80), "sf");
	T("special.mkfifo-over-file", mkfifo("sf", 0644));
	T("special.mkfifo-missing-dir", mkfifo("nope/ff", 0644));
	T("special.mknod-fifo", mknod("fi2", S_IFIFO | 0666, 0));
	show_node("special.mknod-fifo-lstat", "fi2");
	T("special.mknod-chr", mknod("cdev", S_IFCHR | 0640, makedev(1, 3)));
	show_node("special.mknod-chr-lstat", "cdev");
	T("special.mknod-blk", mknod("bdev", S_IFBLK | 0600, makedev(7, 200)));
	show_node("special.mknod-blk-lstat", "bdev");
	T("special.mknod-blk-big-rdev",
	  mknod("bdev2", S_IFBLK | 0600, makedev(259, 70000)));
	show_node("special.mknod-blk-big-rdev-lstat", "bdev2");
	T("special.mknod-sock", mknod("sk", S_IFSOCK | 0755, 0));
	show_node("special.mknod-sock-lstat", "sk");
	T("special.mknod-reg", mknod("regnod", S_IFREG | 0604, 0));
	show_node("special.mknod-reg-lstat", "regnod");
	T("special.mknod-no-type", mknod("notype", 0640, 0));
	show_node("special.mknod-no-type-lstat", "notype");
	T("special.mknod-dir", mknod("dirnod", S_IFDIR | 0755, 0));
	T("special.mknod-bad-type", mknod("badnod", 0170000 | 0644, 0));
	T("special.mknod-exists", mknod("cdev", S_IFCHR | 0640, 0));
	show_stat("special.stat-follows-nothing", "cdev", 1);

	T("special.chmod-fifo", chmod("ff", 0600));
	show_node("special.chmod-fifo-lstat", "ff");
	T("special.chmod-chr", chmod("cdev", 0604));
	show_node("special.chmod-chr-lstat", "cdev");
	T("special.chmod-sock", chmod("sk", 0700));
	show_node("special.chmod-sock-lstat", "sk");
	T("special.chown-fifo", chown("ff", 1234, 5678));
	show_node("special.chown-fifo-lstat", "ff");
	T("special.chown-blk", chown("bdev", 11, 12));
	show_node("special.chown-blk-lstat", "bdev");
	T("special.utimens-fifo", utimensat(AT_FDCWD, "ff", ts, 0));
	show_times("special.utimens-fifo-read", "ff", 0);
	T("special.utimens-chr", utimensat(AT_FDCWD, "cdev", ts, 0));
	show_times("special.utimens-chr-read", "cdev", 0);
	T("special.setxattr-fifo", setxattr("ff", "user.a", "v", 1, 0));
	T("special.getxattr-fifo", getxattr("ff", "user.a", buf, 16));
	T("special.setxattr-chr", setxattr("cdev", "user.a", "v", 1, 0));
	T("special.truncate-fifo", truncate("ff", 0));
	T("special.truncate-chr", truncate("cdev", 0));
	T("special.truncate-sock", truncate("sk", 0));
	T("special.rmdir-fifo", rmdir("ff"));
	T("special.readlink-fifo", readlink("ff", buf, sizeof(buf)));
	T("special.open-sock", topen("sk", O_RDONLY, 0));
	T("special.open-fifo-dir", topen("ff", O_RDONLY | O_DIRECTORY, 0));

	must(mkdir("types", 0755), "types");
	T("special.rename-fifo", rename("fi2", "types/fifo"));
	T("special.rename-chr", rename("cdev", "types/chr"));
	T("special.rename-blk", rename("bdev", "types/blk"));
	T("special.rename-sock", rename("sk", "types/sock"));
	show_node("special.renamed-chr", "types/chr");
	show_node("special.renamed-blk", "types/blk");
	T("special.rename-old-gone", access("cdev", F_OK));
	must(mkfile("types/reg", 1, 81), "types/reg");
	must(mkdir("types/dir", 0755), "types/dir");
	must(symlink("reg", "types/lnk"), "types/lnk");
	show_dtypes("special.readdir-dtype", "types");
	T("special.rename-fifo-over-file", rename("ff", "sf"));
	show_node("special.rename-fifo-over-file-lstat", "sf");
	T("special.rename-chr-over-dir", rename("types/chr", "types/dir"));
	T("special.rename-dir-over-blk", rename("types/dir", "types/blk"));
	T("special.exchange-chr-reg", renameat2(AT_FDCWD, "types/chr", AT_FDCWD,
						"types/reg", RENAME_EXCHANGE));
	show_node("special.exchange-chr-reg-lstat", "types/reg");
	show_dtypes("special.readdir-dtype-after", "types");
	T("special.link-fifo", link("sf", "sf2"));
	show_node("special.link-fifo-nlink", "sf");
	T("special.link-blk", link("types/blk", "blk2"));
	show_node("special.link-blk-nlink", "blk2");
	T("special.unlink-fifo-name", unlink("sf"));
	show_node("special.unlink-fifo-other", "sf2");
	T("special.unlink-blk", unlink("types/blk"));
	T("special.unlink-blk2", unlink("blk2"));
	T("special.unlink-blk-gone", access("blk2", F_OK));
	T("special.unlink-sock", unlink("types/sock"));
	T("special.unlink-big", unlink("bdev2"));
	must(chdir(".."), "chdir ..");
}

/* Bytes through a FIFO and a unix socket bound on the filesystem. */
void sec_special_io(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[16];
	int r, w, s, c, a;

	must(chdir("sp"), "chdir sp");
	T("fifo.open-writer-no-reader", topen("sf2", O_WRONLY | O_NONBLOCK, 0));
	r = open("sf2", O_RDONLY | O_NONBLOCK);
	T("fifo.open-reader", r);
	w = open("sf2", O_WRONLY | O_NONBLOCK | O_TRUNC);
	T("fifo.open-writer-trunc", w);
	if (r >= 0 && w >= 0) {
		TN("fifo.write", write(w, "hello", 5));
		TN("fifo.read", read(r, buf, sizeof(buf)));
		T("fifo.lseek", lseek(r, 0, SEEK_SET));
		T("fifo.ftruncate", ftruncate(w, 0));
		show_node("fifo.lstat-after-io", "sf2");
	}
	if (r >= 0)
		close(r);
	if (w >= 0)
		close(w);

	memcpy(sa.sun_path, "bsock", 6);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0)
		fail_setup("socket");
	T("sock.bind", bind(s, (struct sockaddr *)&sa, sizeof(sa)));
	show_node("sock.bind-lstat", "bsock");
	T("sock.listen", listen(s, 4));
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	T("sock.connect", connect(c, (struct sockaddr *)&sa, sizeof(sa)));
	a = accept(s, NULL, NULL);
	T("sock.accept", a);
	TN("sock.send", write(c, "ping", 4));
	if (a >= 0) {
		TN("sock.recv", read(a, buf, sizeof(buf)));
		close(a);
	}
	close(c);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	T("sock.bind-exists", bind(c, (struct sockaddr *)&sa, sizeof(sa)));
	close(c);
	T("sock.open", topen("bsock", O_RDWR, 0));
	T("sock.rename", rename("bsock", "bsock2"));
	memcpy(sa.sun_path, "bsock2", 7);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	T("sock.connect-renamed",
	  connect(c, (struct sockaddr *)&sa, sizeof(sa)));
	close(c);
	close(s);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	T("sock.connect-closed",
	  connect(c, (struct sockaddr *)&sa, sizeof(sa)));
	close(c);
	T("sock.unlink", unlink("bsock2"));
	must(chdir(".."), "chdir ..");
}

void sec_mkdir_symlink(void)
{
	char target[4097], buf[8];
	struct stat st;

	must(mkdir("mk", 0755), "mk");
	must(chdir("mk"), "chdir mk");
	T("mkdir.mode-7777", mkdir("m7777", 07777));
	show_stat("mkdir.mode-7777-stat", "m7777", 0);
	T("mkdir.mode-000", mkdir("m000", 0));
	show_stat("mkdir.mode-000-stat", "m000", 0);
	T("mkdir.trailing-slash", mkdir("mslash/", 0755));
	show_stat("mkdir.trailing-slash-stat", "mslash", 0);
	T("mkdir.trailing-slash-exists", mkdir("mslash/", 0755));
	T("mkdir.dot", mkdir(".", 0755));
	T("mkdir.dotdot", mkdir("..", 0755));
	T("mkdir.empty", mkdir("", 0755));
	show_stat("mkdir.parent-nlink", ".", 0);
	T("rmdir.trailing-slash", rmdir("mslash/"));
	T("rmdir.dotdot", rmdir(".."));
	T("rmdir.via-dot-suffix", rmdir("m000/."));
	T("rmdir.mode-000", rmdir("m000"));
	show_stat("rmdir.parent-nlink", ".", 0);
	T("rmdir.empty", rmdir(""));
	/* A set-gid directory: new entries take its group, subdirectories
	 * its set-gid bit. */
	must(mkdir("sg", 0755), "sg");
	T("mkdir.sgid-chown", chown("sg", 0, 4242));
	T("mkdir.sgid-chmod", chmod("sg", 02775));
	show_stat("mkdir.sgid-dir", "sg", 0);
	must(mkfile("sg/f", 1, 82), "sg/f");
	show_stat("mkdir.sgid-file", "sg/f", 0);
	T("mkdir.sgid-subdir", mkdir("sg/d", 0755));
	show_stat("mkdir.sgid-subdir-stat", "sg/d", 0);
	T("mkdir.sgid-fifo", mkfifo("sg/p", 0644));
	show_stat("mkdir.sgid-fifo-stat", "sg/p", 0);
	T("mkdir.sgid-symlink", symlink("f", "sg/l"));
	show_stat("mkdir.sgid-symlink-stat", "sg/l", 0);

	memset(target, 't', 4096);
	target[4095] = '\0';
	T("symlink.target-4095", symlink(target, "s4095"));
	show_stat("symlink.target-4095-lstat", "s4095", 0);
	target[4095] = 't';
	target[4096] = '\0';
	T("symlink.target-4096", symlink(target, "s4096"));
	T("symlink.in-missing-dir", symlink("x", "nope/s"));
	T("symlink.trailing-slash-name", symlink("x", "sslash/"));
	T("symlink.onto-dangling", symlink("x", "s4095"));
	T("symlink.chmod-nofollow",
	  fchmodat(AT_FDCWD, "s4095", 0700, AT_SYMLINK_NOFOLLOW));
	T("symlink.lchown", lchown("s4095", 5, 6));
	show_stat("symlink.lchown-stat", "s4095", 0);
	T("symlink.readlink-zero-buf", readlink("s4095", buf, 0));
	must(symlink("sg", "sdir"), "sdir");
	T("symlink.rmdir-through", rmdir("sdir/"));
	T("symlink.unlink-trailing-slash", unlink("sdir/"));
	T("symlink.rmdir-on-link", rmdir("sdir"));
	T("symlink.mkdir-over", mkdir("sdir", 0755));
	T("symlink.unlink", unlink("sdir"));
	T("symlink.unlink-gone", lstat("sdir", &st));
	must(chdir(".."), "chdir ..");
}

void sec_trunc_edges(void)
{
	unsigned char *b;
	ssize_t n;
	int fd;

	must(mkfile("te", 1000, 83), "te");
	T("trunc.negative", truncate("te", -5));
	T("trunc.huge-negative", truncate("te", INT64_MIN));
	T("trunc.dir", truncate("mk", 0));
	T("trunc.trailing-slash", truncate("te/", 0));
	T("trunc.missing", truncate("nope", 0));
	T("trunc.empty-path", truncate("", 0));
	must(symlink("te", "tel"), "tel");
	T("trunc.through-symlink", truncate("tel", 10));
	show_stat("trunc.through-symlink-target", "te", 0);
	T("trunc.grow", truncate("te", 5 * MiB + 1));
	n = slurp("te", &b);
	if (n >= 0) {
		printf("trunc.grow-content: size=%zd tail=%s\n", n,
		       all_zero(b + 10, (size_t)n - 10) ? "zeros" : "NONZERO");
		free(b);
	}
	T("trunc.same-size", truncate("te", 5 * MiB + 1));
	show_stat("trunc.same-size-stat", "te", 0);
	fd = open("te", O_RDONLY);
	T("ftrunc.rdonly", ftruncate(fd, 0));
	close(fd);
	fd = open("te", O_PATH);
	T("ftrunc.opath", ftruncate(fd, 0));
	close(fd);
	fd = open("mk", O_RDONLY | O_DIRECTORY);
	T("ftrunc.dir", ftruncate(fd, 0));
	close(fd);
	T("ftrunc.closed-fd", ftruncate(fd, 0));
	fd = open("te", O_WRONLY | O_APPEND);
	T("ftrunc.negative", ftruncate(fd, -1));
	T("ftrunc.append-fd", ftruncate(fd, 3));
	TN("ftrunc.append-write", write(fd, "abc", 3));
	close(fd);
	show_stat("ftrunc.append-stat", "te", 0);
	fd = open("te", O_WRONLY);
	T("ftrunc.wronly-grow", ftruncate(fd, 4096 * 3 + 5));
	show_stat("ftrunc.wronly-grow-stat", "te", 0);
	T("ftrunc.wronly-zero", ftruncate(fd, 0));
	close(fd);
	show_stat("ftrunc.wronly-zero-stat", "te", 0);
	T("trunc.cleanup", unlink("te"));
	T("trunc.cleanup-link", unlink("tel"));
}
