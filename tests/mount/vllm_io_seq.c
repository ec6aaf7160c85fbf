/* SPDX-License-Identifier: MIT */
/*
 * vllm_io's seq mode: the engine's start-up, store, load and lookup
 * sequences for 512 KiB, 2 MiB, 5 MiB and 3 MiB + 123 byte blocks,
 * including the access() short-cut, EEXIST from a leftover temp, mkdir -p
 * races of 8 threads, absent names, a longer file and a provably short one,
 * then a listing of the namespace. One transcript line per step (see
 * vllm_io.c). Not here: the block format, the sequences themselves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "vllm_io.h"

static const char *prog = "vllm_io";

#include "tclient.h"

/* Reads a whole file into a malloc'd buffer; returns its length or -errno. */
static ssize_t slurp(const char *path, unsigned char **out)
{
	size_t cap = 1 << 16, len = 0;
	unsigned char *b = malloc(cap);
	int fd = open(path, O_RDONLY);

	if (!b)
		die("out of memory");
	if (fd < 0) {
		int e = errno;

		free(b);
		return -e;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			cap *= 2;
			b = realloc(b, cap);
			if (!b)
				die("out of memory");
		}
		n = read(fd, b + len, cap - len);
		if (n < 0) {
			int e = errno;

			close(fd);
			free(b);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	*out = b;
	return (ssize_t)len;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Prints every entry under dir (relative path, type, size of regular files),
 * sorted, one per line, prefixed by tag.
 */
static void list_tree(const char *tag, const char *dir)
{
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	char *stack[4096];
	int sp = 0;
	size_t dlen = strlen(dir);

	stack[sp++] = strdup(dir);
	while (sp > 0) {
		char *d = stack[--sp];
		DIR *dh = opendir(d);
		struct dirent *de;

		if (!dh) {
			printf("%s: opendir %s: %s\n", tag, d + dlen,
			       ename(errno));
			free(d);
			continue;
		}
		while ((de = readdir(dh))) {
			char p[PATH_MAX], line[PATH_MAX + 64];
			struct stat st;

			if (!strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			xsnprintf(p, sizeof(p), "%s/%s", d, de->d_name);
			if (lstat(p, &st) < 0) {
				xsnprintf(line, sizeof(line), "%s lstat=%s",
					  p + dlen, ename(errno));
			} else if (S_ISDIR(st.st_mode)) {
				xsnprintf(line, sizeof(line), "%s/ dir",
					  p + dlen);
				if (sp < 4096)
					stack[sp++] = strdup(p);
			} else {
				xsnprintf(line, sizeof(line), "%s %s size=%lld",
					  p + dlen,
					  S_ISREG(st.st_mode) ? "reg" : "other",
					  (long long)st.st_size);
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				names = realloc(names, cap * sizeof(*names));
				if (!names)
					die("out of memory");
			}
			names[n++] = strdup(line);
		}
		closedir(dh);
		free(d);
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		printf("%s: %s\n", tag, names[i]);
		free(names[i]);
	}
	free(names);
}

/* One block of the seq scenario. */
struct blk {
	const char *name; /* transcript label */
	uint32_t key;
	unsigned hex_len;
	unsigned group;
	size_t size;
	const char *hex; /* fixed hex (shares dirs on purpose) or NULL */
};

static void blk_path(const struct blk *b, const char *root, char *out, size_t n)
{
	char hex[65];

	if (b->hex)
		xsnprintf(hex, sizeof(hex), "%s", b->hex);
	else
		key_hex(b->key, b->hex_len, hex);
	block_path(out, n, root, hex, b->group);
}

/* Thread argument of the mkdir -p race. */
struct race_arg {
	pthread_barrier_t *bar;
	const char *root;
	const struct blk *b;
	int direct;
	int rc;
	char log[256];
};

static void *race_thread(void *arg)
{
	struct race_arg *a = arg;
	char p[PATH_MAX];
	unsigned char *buf = abuf(a->b->size);

	blk_path(a->b, a->root, p, sizeof(p));
	fill_block(buf, a->b->size, a->b->key, 0, 1);
	pthread_barrier_wait(a->bar);
	a->rc = vstore(p, buf, a->b->size, a->direct,
		       1000ull + (unsigned long long)a->b->key, 1, a->log,
		       sizeof(a->log));
	afree(buf, a->b->size);
	return NULL;
}

/* Stores nb blocks from nb threads released together. */
static void seq_race(const char *tag, const char *root, const struct blk *bs,
		     int nb, int direct)
{
	pthread_barrier_t bar;
	pthread_t th[16];
	struct race_arg a[16];
	int i, ok = 0;

	pthread_barrier_init(&bar, NULL, (unsigned)nb);
	for (i = 0; i < nb; i++) {
		a[i] = (struct race_arg){.bar = &bar,
					 .root = root,
					 .b = &bs[i],
					 .direct = direct};
		if (pthread_create(&th[i], NULL, race_thread, &a[i]))
			die("pthread_create");
	}
	for (i = 0; i < nb; i++) {
		pthread_join(th[i], NULL);
		if (a[i].rc == STORED)
			ok++;
		else
			printf("%s: %s: %s\n", tag, bs[i].name, a[i].log);
	}
	pthread_barrier_destroy(&bar);
	printf("%s: %d/%d stored\n", tag, ok, nb);
}

/* Shares first-level and leaf directories between keys on purpose. */
static const char hex_a[] = "abc12f0e9d8c7b6a";
static const char hex_b[] = "abc12000111122223333444455556666";
static const char hex_c[] = "abc34f0e9d8c7b6a5948372615fedcba"
			    "0123456789abcdef0123456789abcdef";

/* The blocks of the seq scenario, in transcript order. */
static const struct blk blocks[] = {
	{"512k-a", 1, 16, 0, 512 * KiB, hex_a},
	{"512k-b", 2, 32, 0, 512 * KiB, hex_b},
	{"512k-c", 3, 64, 1, 512 * KiB, hex_c},
	{"2m-a", 4, 16, 0, 2 * MiB, NULL},
	{"2m-b", 5, 64, 0, 2 * MiB, NULL},
	{"5m-a", 6, 32, 0, 5 * MiB, NULL},
	{"5m-b", 7, 64, 1, 5 * MiB, NULL},
	{"3m123-a", 8, 16, 0, 3 * MiB + 123, NULL},
	{"3m123-b", 9, 64, 0, 3 * MiB + 123, NULL},
};
#define NBLOCKS ((int)(sizeof(blocks) / sizeof(blocks[0])))

/* 1. Startup twice: the second sees config.json and keeps it. Returns
 * whether the O_DIRECT probe passed. */
static int seq_startup(const char *root)
{
	char p[PATH_MAX];
	unsigned char *cfg = NULL;
	size_t want = strlen(config_json);
	int odirect;
	ssize_t n;

	odirect = startup(root, "startup1");
	xsnprintf(p, sizeof(p), "%s/%s/config.json", root, MODEL_DIR);
	n = slurp(p, &cfg);
	if (n >= 0) {
		printf("config.content: size=%zd %s\n", n,
		       (size_t)n == want && !memcmp(cfg, config_json, want)
			       ? "match"
			       : "MISMATCH");
		free(cfg);
	} else {
		printf("config.content: %s\n", ename((int)-n));
	}
	if (startup(root, "startup2") != odirect)
		printf("startup2: probe result changed\n");
	return odirect;
}

/* 3. Store each block (O_DIRECT iff probed and a 4 KiB multiple). */
static void seq_store_all(const char *root, int odirect)
{
	char p[PATH_MAX], log[256], tag[128];

	for (int i = 0; i < NBLOCKS; i++) {
		const struct blk *b = &blocks[i];
		int direct = odirect && b->size % PAGE == 0;
		unsigned char *buf = abuf(b->size);
		int rc;

		fill_block(buf, b->size, b->key, 0, 1);
		blk_path(b, root, p, sizeof(p));
		rc = vstore(p, buf, b->size, direct, 77ull + (unsigned)i, 1,
			    log, sizeof(log));
		printf("store.%s: direct=%d %s -> %s\n", b->name, direct, log,
		       rc == STORED ? "stored" : ename(-rc));
		xsnprintf(tag, sizeof(tag), "store.%s.stat", b->name);
		print_stat(tag, p);
		afree(buf, b->size);
	}
}

/* 4. Re-store of an existing key: access() short-cut, bytes kept. */
static void seq_restore(const char *root, int odirect)
{
	const struct blk *b = &blocks[3];
	unsigned char *buf = abuf(b->size);
	char p[PATH_MAX], log[256];
	int rc;

	fill_block(buf, b->size, b->key, 0, 2);
	blk_path(b, root, p, sizeof(p));
	rc = vstore(p, buf, b->size, odirect, 99, 1, log, sizeof(log));
	printf("restore.%s: %s -> %s\n", b->name, log,
	       rc == SKIPPED ? "skipped" : ename(-rc));
	seq_load("restore.load", p, b->size, odirect, b->key, 0, 1);
	afree(buf, b->size);
}

/* 5. An existing temp of the same name fails the store with EEXIST. */
static void seq_excl(const char *root, int odirect)
{
	const struct blk b = {"excl", 20, 16, 0, 512 * KiB, NULL};
	unsigned char *buf = abuf(b.size);
	char p[PATH_MAX], tmp[PATH_MAX + 32], log[256];
	int rc, fd;

	fill_block(buf, b.size, b.key, 0, 1);
	blk_path(&b, root, p, sizeof(p));
	eng_parent(p, tmp, sizeof(tmp));
	printf("excl.mkdir: %s\n", ename(-eng_mkdir_p(AT_FDCWD, tmp)));
	xsnprintf(tmp, sizeof(tmp), "%s_%llu.tmp", p, 4242ull);
	fd = open(tmp, O_CREAT | O_WRONLY, 0644);
	printf("excl.plant: %s\n", ename(fd < 0 ? errno : 0));
	if (fd >= 0)
		close(fd);
	rc = vstore(p, buf, b.size, odirect, 4242ull, 1, log, sizeof(log));
	printf("excl.store: %s -> %s\n", log,
	       rc == STORED ? "stored" : ename(-rc));
	printf("excl.lookup: access=%s\n",
	       ename(access(p, F_OK) < 0 ? errno : 0));
	printf("excl.cleanup: %s\n", ename(unlink(tmp) < 0 ? errno : 0));
	afree(buf, b.size);
}

/* 6. mkdir -p races: 8 writers, one new leaf dir / one new top dir. */
static void seq_races(const char *root, int odirect)
{
	/* Same new leaf dir for all: concurrent mkdir -p of one path. */
	struct blk race1[8], race2[8];
	char hexes1[8][17], hexes2[8][17];
	char p[PATH_MAX], tag[128];
	int i;

	for (i = 0; i < 8; i++) {
		xsnprintf(hexes1[i], sizeof(hexes1[i]), "fee77%011x",
			  (unsigned)i * 0x1111u);
		race1[i] = (struct blk){"race1", 100u + (unsigned)i, 16,
					0,	 512 * KiB,	     hexes1[i]};
		xsnprintf(hexes2[i], sizeof(hexes2[i]), "dad%02x%011x",
			  (unsigned)i * 17u, (unsigned)i);
		race2[i] = (struct blk){"race2", 200u + (unsigned)i, 16,
					3,	 512 * KiB,	     hexes2[i]};
	}
	seq_race("race.same-leaf", root, race1, 8, odirect);
	seq_race("race.same-top", root, race2, 8, odirect);
	for (i = 0; i < 8; i++) {
		xsnprintf(tag, sizeof(tag), "race.same-leaf.load.%d", i);
		blk_path(&race1[i], root, p, sizeof(p));
		seq_load(tag, p, race1[i].size, odirect, race1[i].key, 0, 1);
		xsnprintf(tag, sizeof(tag), "race.same-top.load.%d", i);
		blk_path(&race2[i], root, p, sizeof(p));
		seq_load(tag, p, race2[i].size, odirect, race2[i].key, 0, 1);
	}
}

/* 7. Loads: O_DIRECT when the size allows, one read, byte compare. */
static void seq_load_all(const char *root, int odirect)
{
	char p[PATH_MAX], tag[128];

	for (int i = 0; i < NBLOCKS; i++) {
		const struct blk *b = &blocks[i];

		xsnprintf(tag, sizeof(tag), "load.%s", b->name);
		blk_path(b, root, p, sizeof(p));
		seq_load(tag, p, b->size, odirect && b->size % PAGE == 0,
			 b->key, 0, 1);
		/* The buffered path too (the Python fallback, old builds). */
		xsnprintf(tag, sizeof(tag), "load-buffered.%s", b->name);
		seq_load(tag, p, b->size, 0, b->key, 0, 1);
	}
}

/* 8. Lookups: present and absent names. */
static void seq_lookups(const char *root)
{
	static const char *const absent[] = {
		/* same leaf dir, other name */
		"abc12f0e9d8c7b6b",
		/* existing top dir, missing leaf */
		"abc99f0e9d8c7b6a",
		/* missing top dir */
		"0000000000000000",
		/* a prefix of a stored name */
		"abc12f0e9d8c7b6",
	};
	char p[PATH_MAX];
	int i;

	for (i = 0; i < NBLOCKS; i++) {
		struct stat st;

		blk_path(&blocks[i], root, p, sizeof(p));
		printf("lookup.%s: access=%s", blocks[i].name,
		       ename(access(p, F_OK) < 0 ? errno : 0));
		if (stat(p, &st) < 0)
			printf(" stat=%s\n", ename(errno));
		else
			printf(" stat=OK size=%lld\n", (long long)st.st_size);
	}
	for (i = 0; i < 4; i++) {
		block_path(p, sizeof(p), root, absent[i], 0);
		printf("lookup-absent.%d: access=%s", i,
		       ename(access(p, F_OK) < 0 ? errno : 0));
		printf(" stat=%s\n",
		       ename(stat(p, &(struct stat){0}) < 0 ? errno : 0));
	}
	block_path(p, sizeof(p), root, hex_a, 1);
	printf("lookup-absent.other-group: access=%s\n",
	       ename(access(p, F_OK) < 0 ? errno : 0));
}

/* 10. A longer file loads its first block_size bytes. */
static void seq_long(const char *root, int odirect)
{
	const struct blk b = {"long", 30, 16, 0, 512 * KiB, NULL};
	size_t big = b.size + PAGE;
	unsigned char *buf = abuf(big);
	char p[PATH_MAX], log[256];

	fill_block(buf, b.size, b.key, 0, 1);
	memset(buf + b.size, 0xee, PAGE);
	blk_path(&b, root, p, sizeof(p));
	vstore(p, buf, big, odirect, 5, 1, log, sizeof(log));
	printf("long.store: %s\n", log);
	seq_load("long.load", p, b.size, odirect, b.key, 0, 1);
	printf("long.lookup: access=%s\n",
	       ename(access(p, F_OK) < 0 ? errno : 0));
	afree(buf, big);
}

/* 11. A provably short block: the load unlinks it, lookup misses. */
static void seq_short(const char *root, int odirect)
{
	const struct blk b = {"short", 31, 16, 0, 512 * KiB, NULL};
	unsigned char buf[10];
	char p[PATH_MAX], log[256];

	memset(buf, 'x', sizeof(buf));
	blk_path(&b, root, p, sizeof(p));
	vstore(p, buf, sizeof(buf), 0, 6, 1, log, sizeof(log));
	printf("short.store: %s\n", log);
	print_stat("short.stat", p);
	seq_load("short.load", p, b.size, odirect, b.key, 0, 1);
	printf("short.lookup: access=%s\n",
	       ename(access(p, F_OK) < 0 ? errno : 0));
}

int do_seq(const char *root)
{
	char p[PATH_MAX], base[PATH_MAX];
	int odirect, i;

	xsnprintf(base, sizeof(base), "%s/%s", root, MODEL_DIR);
	odirect = seq_startup(root);
	/* 2. Lookup before anything is stored. */
	for (i = 0; i < 2; i++) {
		blk_path(&blocks[i], root, p, sizeof(p));
		printf("lookup-empty.%s: access=%s\n", blocks[i].name,
		       ename(access(p, F_OK) < 0 ? errno : 0));
	}
	seq_store_all(root, odirect);
	seq_restore(root, odirect);
	seq_excl(root, odirect);
	seq_races(root, odirect);
	seq_load_all(root, odirect);
	seq_lookups(root);
	/* 9. A load of a missing block fails at open and touches nothing. */
	block_path(p, sizeof(p), root, "abc12f0e9d8c7b6b", 0);
	seq_load("load-absent", p, 512 * KiB, odirect, 1, 0, 1);
	seq_long(root, odirect);
	seq_short(root, odirect);
	/* 12. The namespace holds exactly what was stored: no temps. */
	list_tree("tree.base", base);
	xsnprintf(p, sizeof(p), "%s_r0", base);
	list_tree("tree.blocks", p);
	return 0;
}
