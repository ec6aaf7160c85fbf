/* SPDX-License-Identifier: MIT */
/*
 * Client side of the write-behind mount tests (writebehind.sh, crash_wb.sh):
 * files written and held open, single writes whose errno matters, reads
 * checked byte by byte, fallocate(2) and fsync(2), and stores of numbered
 * blocks whose contents derive from their names. Prints one line per
 * outcome (errno names, "OK" for success); exits 0 unless the program
 * itself could not run (2), or a check command found a mismatch (1).
 *
 *   wb_client hold PATH SIZE SEED
 *       open(O_CREAT|O_TRUNC|O_WRONLY), write SIZE bytes of the stream SEED
 *       in 1 MiB write(2)s, print "hold: wrote N" (or "hold: write ERR at
 *       OFF") and keep the file open until SIGTERM or SIGUSR1; then close
 *       and print "hold: close ERR"
 *   wb_client write PATH SIZE SEED
 *       open(O_CREAT|O_TRUNC|O_WRONLY), one write(2) of SIZE bytes, close;
 *       "write: OK" or "write: STEP ERR" (STEP open, write, close)
 *   wb_client check PATH SIZE SEED
 *       reads PATH whole: "check: match", "check: open ERR", "check: size
 *       N (want SIZE)" or "check: differs at OFF"
 *   wb_client fsync PATH
 *       open(O_RDONLY), fsync, close: "fsync: ERR"
 *   wb_client falloc PATH MODE OFF LEN
 *       open(O_CREAT|O_WRONLY) without truncating, then MODE: "posix"
 *       (posix_fallocate), "0" (fallocate mode 0), "keep"
 *       (FALLOC_FL_KEEP_SIZE) or "punch" (FALLOC_FL_PUNCH_HOLE |
 *       FALLOC_FL_KEEP_SIZE); "falloc: ERR size N close ERR"
 *   wb_client setxattr PATH NAME VALUE
 *       "setxattr: ERR"
 *   wb_client store DIR FIRST COUNT SIZE
 *       stores DIR/bNNNNNN.bin for NNNNNN = FIRST .. FIRST+COUNT-1 with the
 *       engine's store sequence (O_DIRECT temp, one write, close, rename;
 *       tests/common/engine.c), contents from the name; prints "stored
 *       NAME" once the rename returned (line-buffered), or "FAIL NAME: STEP
 *       ERR" and exits 1
 *   wb_client verify DIR FIRST COUNT SIZE
 *       for every such name: absent, or whole and byte-exact; prints
 *       "absent NAME" per absent one, "BAD NAME: WHY" per other one, then
 *       "verify: P present, A absent, B bad"; exits 1 when B > 0
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *prog = "wb_client";

#define TC_DIE_STATUS 2
#include "engine.h"
#include "tclient.h"

#define MiB (1024ul * 1024ul)

static uint64_t num(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *s == '\0' || *end != '\0')
		die("not a number: %s", s);
	return v;
}

/* size bytes of the stream seed (page-aligned, for O_DIRECT too). */
static unsigned char *stream(uint64_t size, uint64_t seed)
{
	unsigned char *b = abuf(size);
	uint64_t s = seed;

	tc_fill_stream(b, size, &s);
	return b;
}

static int cmd_hold(const char *path, uint64_t size, uint64_t seed)
{
	unsigned char *b = stream(size, seed);
	uint64_t off = 0;
	sigset_t set;
	int fd, sig;

	/* The signals wait for sigwait, set up before anyone can send one. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0) {
		printf("hold: open %s\n", ename(errno));
		return 0;
	}
	while (off < size) {
		size_t len = size - off < MiB ? (size_t)(size - off) : MiB;
		ssize_t n = write(fd, b + off, len);

		if (n <= 0) {
			printf("hold: write %s at %llu\n",
			       ename(n < 0 ? errno : EIO),
			       (unsigned long long)off);
			break;
		}
		off += (uint64_t)n;
	}
	if (off == size)
		printf("hold: wrote %llu\n", (unsigned long long)off);
	fflush(stdout);
	sigwait(&set, &sig);
	printf("hold: close %s\n", ename(close(fd) == 0 ? 0 : errno));
	afree(b, size);
	return 0;
}

static int cmd_write(const char *path, uint64_t size, uint64_t seed)
{
	unsigned char *b = stream(size, seed);
	const char *step = "open";
	ssize_t n;
	int fd, e = 0;

	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0) {
		e = errno;
		goto out;
	}
	step = "write";
	n = write(fd, b, size);
	if (n < 0)
		e = errno;
	else if ((uint64_t)n != size)
		e = EIO;
	if (e) {
		close(fd);
		goto out;
	}
	step = "close";
	if (close(fd) < 0)
		e = errno;
out:
	if (e)
		printf("write: %s %s\n", step, ename(e));
	else
		printf("write: OK\n");
	afree(b, size);
	return 0;
}

static int cmd_check(const char *path, uint64_t size, uint64_t seed)
{
	unsigned char *want = stream(size, seed), *got = abuf(size + 1);
	uint64_t off = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		printf("check: open %s\n", ename(errno));
		return 1;
	}
	for (;;) {
		ssize_t n = read(fd, got + off, size + 1 - off);

		if (n < 0) {
			printf("check: read %s at %llu\n", ename(errno),
			       (unsigned long long)off);
			close(fd);
			return 1;
		}
		if (n == 0 || (off += (uint64_t)n) == size + 1)
			break;
	}
	close(fd);
	if (off != size) {
		printf("check: size %llu (want %llu)\n",
		       (unsigned long long)off, (unsigned long long)size);
		return 1;
	}
	for (off = 0; off < size; off++)
		if (got[off] != want[off]) {
			printf("check: differs at %llu\n",
			       (unsigned long long)off);
			return 1;
		}
	printf("check: match\n");
	afree(want, size);
	afree(got, size + 1);
	return 0;
}

static int cmd_fsync(const char *path)
{
	int fd = open(path, O_RDONLY), e;

	if (fd < 0) {
		printf("fsync: open %s\n", ename(errno));
		return 0;
	}
	e = fsync(fd) == 0 ? 0 : errno;
	close(fd);
	printf("fsync: %s\n", ename(e));
	return 0;
}

static int cmd_falloc(const char *path, const char *mode, uint64_t off,
		      uint64_t len)
{
	struct stat st;
	int fd = open(path, O_CREAT | O_WRONLY, 0644), e, ce;

	if (fd < 0) {
		printf("falloc: open %s\n", ename(errno));
		return 0;
	}
	if (strcmp(mode, "posix") == 0)
		e = posix_fallocate(fd, (off_t)off, (off_t)len);
	else if (strcmp(mode, "0") == 0)
		e = fallocate(fd, 0, (off_t)off, (off_t)len) ? errno : 0;
	else if (strcmp(mode, "keep") == 0)
		e = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len)
			    ? errno
			    : 0;
	else if (strcmp(mode, "punch") == 0)
		e = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)off, (off_t)len)
			    ? errno
			    : 0;
	else
		die("unknown fallocate mode %s", mode);
	if (fstat(fd, &st) < 0)
		st.st_size = -1;
	ce = close(fd) == 0 ? 0 : errno;
	printf("falloc: %s size %lld close %s\n", ename(e),
	       (long long)st.st_size, ename(ce));
	return 0;
}

/* Block NNNNNN's path, and its contents: the stream seeded by its number
 * and size, so a block read under its name proves it is whole and its own. */
static void blk_name(char *out, size_t n, const char *dir, uint64_t i)
{
	if ((size_t)snprintf(out, n, "%s/b%06llu.bin", dir,
			     (unsigned long long)i) >= n)
		die("path too long");
}

static uint64_t blk_seed(uint64_t i, uint64_t size)
{
	return (i << 32) ^ size ^ 0x6b7666735f776275ull;
}

static int cmd_store(const char *dir, uint64_t first, uint64_t count,
		     uint64_t size)
{
	unsigned char *b = abuf(size);
	char path[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (uint64_t i = first; i < first + count; i++) {
		uint64_t s = blk_seed(i, size);
		struct eng_store st = {.dirfd = AT_FDCWD,
				       .path = path,
				       .buf = b,
				       .size = size,
				       .flags = ENG_DIRECT | ENG_NO_MKDIR,
				       .suffix = (unsigned long long)getpid()};
		int rc;

		blk_name(path, sizeof(path), dir, i);
		tc_fill_stream(b, size, &s);
		rc = eng_store(&st);
		if (rc != ENG_STORED) {
			printf("FAIL %s: %s %s\n", path, st.step,
			       rc < 0 ? ename(-rc) : "skipped");
			return 1;
		}
		printf("stored %s\n", path);
	}
	afree(b, size);
	return 0;
}

static int cmd_verify(const char *dir, uint64_t first, uint64_t count,
		      uint64_t size)
{
	unsigned char *want = abuf(size), *got = abuf(size + 1);
	unsigned long present = 0, absent = 0, bad = 0;
	char path[4096];

	for (uint64_t i = first; i < first + count; i++) {
		uint64_t s = blk_seed(i, size), off = 0;
		int fd;

		blk_name(path, sizeof(path), dir, i);
		fd = open(path, O_RDONLY);
		if (fd < 0 && errno == ENOENT) {
			printf("absent %s\n", path);
			absent++;
			continue;
		}
		if (fd < 0) {
			printf("BAD %s: open %s\n", path, ename(errno));
			bad++;
			continue;
		}
		for (;;) {
			ssize_t n = read(fd, got + off, size + 1 - off);

			if (n <= 0 || (off += (uint64_t)n) == size + 1) {
				if (n < 0)
					off = UINT64_MAX;
				break;
			}
		}
		close(fd);
		tc_fill_stream(want, size, &s);
		if (off == UINT64_MAX) {
			printf("BAD %s: read %s\n", path, ename(errno));
			bad++;
		} else if (off != size) {
			printf("BAD %s: size %llu (want %llu)\n", path,
			       (unsigned long long)off,
			       (unsigned long long)size);
			bad++;
		} else if (memcmp(want, got, size) != 0) {
			printf("BAD %s: bytes differ\n", path);
			bad++;
		} else {
			present++;
		}
	}
	printf("verify: %lu present, %lu absent, %lu bad\n", present, absent,
	       bad);
	afree(want, size);
	afree(got, size + 1);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";

	if (argc == 5 && strcmp(c, "hold") == 0)
		return cmd_hold(argv[2], num(argv[3]), num(argv[4]));
	if (argc == 5 && strcmp(c, "write") == 0)
		return cmd_write(argv[2], num(argv[3]), num(argv[4]));
	if (argc == 5 && strcmp(c, "check") == 0)
		return cmd_check(argv[2], num(argv[3]), num(argv[4]));
	if (argc == 3 && strcmp(c, "fsync") == 0)
		return cmd_fsync(argv[2]);
	if (argc == 6 && strcmp(c, "falloc") == 0)
		return cmd_falloc(argv[2], argv[3], num(argv[4]), num(argv[5]));
	if (argc == 5 && strcmp(c, "setxattr") == 0) {
		int e = setxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0);

		printf("setxattr: %s\n", ename(e == 0 ? 0 : errno));
		return 0;
	}
	if (argc == 6 && strcmp(c, "store") == 0)
		return cmd_store(argv[2], num(argv[3]), num(argv[4]),
				 num(argv[5]));
	if (argc == 6 && strcmp(c, "verify") == 0)
		return cmd_verify(argv[2], num(argv[3]), num(argv[4]),
				  num(argv[5]));
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
