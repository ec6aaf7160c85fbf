/* SPDX-License-Identifier: MIT */
/*
 * Client side of the lookup-manager mount test (lookup.sh): the engine's
 * lookup (access F_OK), store and load sequences, a lookup storm, a lookup
 * cut short by a signal, and the fault-injection hooks. Prints one line per
 * outcome; exits 0 unless the program itself could not run.
 *
 *   lookup_probe storm PATH NTHREADS      NTHREADS access(F_OK) at once
 *   lookup_probe store PATH SIZE SEED     tmp O_EXCL|O_DIRECT, write, rename
 *   lookup_probe load PATH SIZE SEED      O_DIRECT open, one read, compare
 *   lookup_probe access PATH              access(F_OK)
 *   lookup_probe interrupt PATH MS        stat, SIGALRM after MS ms
 *   lookup_probe setxattr PATH NAME VALUE
 *   lookup_probe bind PATH                a unix socket bound to PATH (then
 *                                         closed: the socket file stays)
 *   lookup_probe holdstore DIR SIZE N HELD...
 *       opens every HELD file, then stores DIR/extra1.bin .. extraN.bin,
 *       holding each one open once stored (prints each store line), then
 *       reads every held file whole through its open descriptor and
 *       prints "held: N readable, M not"
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *prog = "lookup_probe";

#define TC_DIE_STATUS 2
#include "engine.h"
#include "tclient.h"

static const char *lp_err(int e)
{
	switch (e) {
	case 0:
		return "OK";
	case ENOENT:
		return "ENOENT";
	case EIO:
		return "EIO";
	case EINTR:
		return "EINTR";
	case EEXIST:
		return "EEXIST";
	case ENOSPC:
		return "ENOSPC";
	default:
		return strerror(e);
	}
}

/* Deterministic block contents: a xorshift stream seeded per block. */
static void lp_fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
}

struct lp_storm {
	const char *path;
	pthread_barrier_t *bar;
	int err;
};

static void *lp_storm_thread(void *arg)
{
	struct lp_storm *s = arg;

	pthread_barrier_wait(s->bar);
	s->err = access(s->path, F_OK) == 0 ? 0 : errno;
	return NULL;
}

static int lp_storm(const char *path, int n)
{
	struct lp_storm *s = calloc((size_t)n, sizeof(*s));
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	int counts[2] = {0, 0}, other = 0;
	pthread_barrier_t bar;

	if (!s || !t)
		return 2;
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		s[i] = (struct lp_storm){.path = path, .bar = &bar};
		if (pthread_create(&t[i], NULL, lp_storm_thread, &s[i]) != 0)
			return 2;
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		if (s[i].err == 0)
			counts[1]++;
		else if (s[i].err == ENOENT)
			counts[0]++;
		else
			other++;
	}
	printf("storm: present=%d absent=%d other=%d\n", counts[1], counts[0],
	       other);
	free(s);
	free(t);
	return 0;
}

/* What lp_store's fill hook needs. */
struct lp_block {
	unsigned char *buf;
	size_t size;
	uint64_t seed;
};

static void lp_store_fill(void *arg)
{
	struct lp_block *b = arg;

	lp_fill(b->buf, b->size, b->seed);
}

/* The engine's store (tests/common/engine.c) into an existing directory. */
static int lp_store(const char *path, size_t size, uint64_t seed)
{
	struct lp_block b = {.buf = abuf(size), .size = size, .seed = seed};
	struct eng_store s = {
		.dirfd = AT_FDCWD,
		.path = path,
		.buf = b.buf,
		.size = size,
		.flags = ENG_DIRECT | ENG_ACCESS | ENG_NO_MKDIR,
		.suffix = (unsigned long long)getpid(),
		.fill = lp_store_fill,
		.arg = &b,
	};
	int rc = eng_store(&s);

	if (rc == ENG_SKIPPED)
		printf("store: exists\n");
	else if (rc == ENG_STORED)
		printf("store: stored\n");
	else if (strcmp(s.step, "write") == 0 && s.written >= 0)
		printf("store: write short\n");
	else
		printf("store: %s %s\n", s.step, lp_err(-rc));
	return 0;
}

/* The engine's load (tests/common/engine.c), compared; a short read is
 * reported, not unlinked. */
static int lp_load(const char *path, size_t size, uint64_t seed)
{
	unsigned char *buf = abuf(size), *want = abuf(size);
	struct eng_load l = {.dirfd = AT_FDCWD,
			     .path = path,
			     .buf = buf,
			     .size = size,
			     .flags = ENG_DIRECT};
	ssize_t n;

	lp_fill(want, size, seed);
	n = eng_load(&l);
	if (n < 0)
		printf("load: %s %s\n", l.step, lp_err((int)-n));
	else if (l.short_read)
		printf("load: short %zd\n", n);
	else
		printf("load: %s\n",
		       memcmp(buf, want, size) == 0 ? "match" : "MISMATCH");
	return 0;
}

/*
 * bind(2) of a unix socket at path, from its directory (a sun_path holds
 * 108 bytes, a test's scratch path may not fit).
 */
static int lp_bind(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *base = strrchr(path, '/');
	char dir[4096];
	int fd, rc = 0;

	if (base && (size_t)(base - path) < sizeof(dir)) {
		memcpy(dir, path, (size_t)(base - path));
		dir[base - path] = '\0';
		if (chdir(base == path ? "/" : dir) < 0)
			rc = errno;
		base++;
	} else {
		base = path;
	}
	if (!rc && strlen(base) >= sizeof(sa.sun_path))
		rc = ENAMETOOLONG;
	fd = rc ? -1 : socket(AF_UNIX, SOCK_STREAM, 0);
	if (!rc && fd < 0)
		rc = errno;
	if (!rc) {
		strcpy(sa.sun_path, base);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			rc = errno;
	}
	if (fd >= 0)
		close(fd);
	printf("bind: %s\n", lp_err(rc));
	return 0;
}

static void lp_alarm(int sig)
{
	(void)sig;
}

static int lp_interrupt(const char *path, long ms)
{
	struct sigaction sa = {.sa_handler = lp_alarm};
	struct itimerval it = {.it_value = {.tv_sec = ms / 1000,
					    .tv_usec = (ms % 1000) * 1000}};
	struct stat st;
	int rc;

	/* No SA_RESTART: an interrupted stat returns EINTR to us. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	rc = stat(path, &st) == 0 ? 0 : errno;
	printf("interrupt: %s\n", rc == ENOENT ? "ENOENT" : lp_err(rc));
	return 0;
}

static int lp_holdstore(const char *dir, size_t size, int nextra, int nheld,
			char **held)
{
	int *fds = calloc((size_t)(nheld + nextra), sizeof(*fds));
	int nfds = 0, ok = 0, bad = 0;
	char path[4096];
	char *buf;

	if (!fds)
		return 2;
	for (int i = 0; i < nheld; i++)
		fds[nfds++] = open(held[i], O_RDONLY);
	for (int i = 1; i <= nextra; i++) {
		snprintf(path, sizeof(path), "%.4000s/extra%d.bin", dir, i);
		lp_store(path, size, (uint64_t)(1000 + i));
		fflush(stdout);
		if (access(path, F_OK) == 0)
			fds[nfds++] = open(path, O_RDONLY);
	}
	for (int i = 0; i < nfds; i++) {
		struct stat st;
		ssize_t n;

		if (fds[i] < 0 || fstat(fds[i], &st) < 0) {
			bad++;
			continue;
		}
		buf = malloc((size_t)st.st_size + 1);
		n = buf ? pread(fds[i], buf, (size_t)st.st_size + 1, 0) : -1;
		if (n == st.st_size)
			ok++;
		else
			bad++;
		free(buf);
		close(fds[i]);
	}
	printf("held: %d readable, %d not\n", ok, bad);
	free(fds);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "storm") == 0)
		return lp_storm(argv[2], atoi(argv[3]));
	if (argc == 5 && strcmp(argv[1], "store") == 0)
		return lp_store(argv[2], strtoull(argv[3], NULL, 0),
				strtoull(argv[4], NULL, 0));
	if (argc == 5 && strcmp(argv[1], "load") == 0)
		return lp_load(argv[2], strtoull(argv[3], NULL, 0),
			       strtoull(argv[4], NULL, 0));
	if (argc == 3 && strcmp(argv[1], "access") == 0) {
		printf("access: %s\n",
		       lp_err(access(argv[2], F_OK) == 0 ? 0 : errno));
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "interrupt") == 0)
		return lp_interrupt(argv[2], atol(argv[3]));
	if (argc == 5 && strcmp(argv[1], "setxattr") == 0) {
		int rc =
			setxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0);

		printf("setxattr: %s\n", lp_err(rc == 0 ? 0 : errno));
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "bind") == 0)
		return lp_bind(argv[2]);
	if (argc >= 5 && strcmp(argv[1], "holdstore") == 0)
		return lp_holdstore(argv[2], strtoull(argv[3], NULL, 0),
				    atoi(argv[4]), argc - 5, argv + 5);
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
