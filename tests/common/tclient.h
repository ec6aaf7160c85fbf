/* SPDX-License-Identifier: MIT */
/*
 * Helpers the test clients share (vllm_io, crash_client, errno_battery,
 * torn_client, the engine sequences in engine.c): die(), errno names, the
 * splitmix64 stream block contents are made of, page-aligned buffers.
 * Include after defining
 *   static const char *prog = "NAME";   (the prefix of die()'s message)
 * and, for another exit status than 1 from die(), TC_DIE_STATUS.
 * Everything is static inline: a client uses what it needs.
 */
#ifndef KVFS_TESTS_TCLIENT_H
#define KVFS_TESTS_TCLIENT_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef TC_DIE_STATUS
#define TC_DIE_STATUS 1
#endif

/* "PROG: message" on stderr, then exit(TC_DIE_STATUS). */
__attribute__((format(printf, 1, 2), noreturn)) static inline void
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(TC_DIE_STATUS);
}

/* The errno's name ("ENOENT"), "OK" for 0. */
static inline const char *ename(int e)
{
	const char *n;

	if (e == 0)
		return "OK";
	n = strerrorname_np(e);
	return n ? n : "E?";
}

/* The next value of a splitmix64 stream (the block contents). */
static inline uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Fills b[0..len) with the splitmix64 stream s, 8 bytes a step (little
 * endian; the last step may be cut short). */
static inline void tc_fill_stream(unsigned char *b, size_t len, uint64_t *s)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = splitmix(s);

		memcpy(b + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* Page-aligned anonymous buffer (O_DIRECT; vLLM's /dev/shm rows). */
static inline void *abuf(size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap %zu: %s", n, strerror(errno));
	return p;
}

static inline void afree(void *p, size_t n)
{
	munmap(p, n ? n : 1);
}

#endif
