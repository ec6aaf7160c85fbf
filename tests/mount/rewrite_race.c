/* SPDX-License-Identifier: MIT */
/*
 * In-place rewrites racing readers (tests/mount/rewrite.sh): the pattern
 * of engines that store a key under one fixed name without O_EXCL
 * (LMCache's "<key>.tmp", Mooncake's file per key): writers repeatedly
 * open(O_WRONLY|O_CREAT|O_TRUNC), write(2) the whole block in one call
 * and close, each with its own byte; readers open, read to the end and
 * close. A read may come back short (the file was being rewritten), and
 * a block written by several requests may mix two writers' bytes (ext4
 * does too: readers take no lock), but a read of full length must never
 * hold a byte no writer wrote (zeros from a truncation that landed inside
 * another opener's write, or from a read answered short).
 *
 *   rewrite_race PATH SIZE SECONDS
 *
 * Prints "reads N full F mixed M bad B" (M: full-length reads mixing
 * writers; B: full-length reads holding a byte no writer wrote) and exits
 * 1 when B > 0 or no read came back full.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NWRITERS 2
#define NREADERS 2

static const char *path;
static size_t size;
static atomic_int stop;
static atomic_long nwrites, nreads, nfull, nmixed, nbad;

static void *writer(void *arg)
{
	char *buf = malloc(size);

	if (!buf)
		abort();
	memset(buf, 'A' + (int)(long)arg, size);
	while (!atomic_load(&stop)) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			continue;
		if (write(fd, buf, size) != (ssize_t)size)
			fprintf(stderr, "rewrite_race: short write\n");
		atomic_fetch_add(&nwrites, 1);
		close(fd);
		/* Room between rewrites for whole reads. */
		usleep(2000);
	}
	free(buf);
	return NULL;
}

/*
 * What buf[0..size) is: 0 one writer's block, 1 writers' bytes mixed, -1
 * holding a byte no writer wrote (its offset in *at).
 */
static int judge(const char *buf, size_t *at)
{
	int mixed = 0;

	for (size_t i = 0; i < size; i++) {
		if (buf[i] < 'A' || buf[i] >= 'A' + NWRITERS) {
			*at = i;
			return -1;
		}
		mixed |= buf[i] != buf[0];
	}
	return mixed;
}

static void *reader(void *arg)
{
	char *buf = malloc(size + 4096);

	(void)arg;
	if (!buf)
		abort();
	while (!atomic_load(&stop)) {
		int fd = open(path, O_RDONLY);
		size_t got = 0, at = 0;
		ssize_t r;

		if (fd < 0)
			continue;
		while ((r = read(fd, buf + got, size + 4096 - got)) > 0)
			got += (size_t)r;
		close(fd);
		atomic_fetch_add(&nreads, 1);
		if (got != size)
			continue;
		atomic_fetch_add(&nfull, 1);
		switch (judge(buf, &at)) {
		case 1:
			atomic_fetch_add(&nmixed, 1);
			break;
		case -1:
			if (atomic_fetch_add(&nbad, 1) < 5)
				fprintf(stderr,
					"rewrite_race: a full read holds %d "
					"at byte %zu, which no writer wrote\n",
					buf[at], at);
			break;
		}
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[NWRITERS + NREADERS];

	if (argc != 4) {
		fprintf(stderr, "usage: rewrite_race PATH SIZE SECONDS\n");
		return 2;
	}
	path = argv[1];
	size = strtoul(argv[2], NULL, 10);
	for (long i = 0; i < NWRITERS + NREADERS; i++)
		pthread_create(&t[i], NULL, i < NWRITERS ? writer : reader,
			       (void *)i);
	sleep((unsigned)atoi(argv[3]));
	atomic_store(&stop, 1);
	for (int i = 0; i < NWRITERS + NREADERS; i++)
		pthread_join(t[i], NULL);
	printf("rewrites %ld reads %ld full %ld mixed %ld bad %ld\n",
	       atomic_load(&nwrites), atomic_load(&nreads), atomic_load(&nfull),
	       atomic_load(&nmixed), atomic_load(&nbad));
	return atomic_load(&nbad) > 0 || atomic_load(&nfull) == 0;
}
