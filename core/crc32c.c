/* SPDX-License-Identifier: MIT */
/*
 * CRC32C: the SSE4.2 crc32 instruction on x86-64 CPUs that have it, over
 * three interleaved streams (the instruction takes three cycles and can
 * start one each cycle), else a slicing-by-8 table built once; see
 * crc32c.h. Not here: what is summed.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

/* Reflected Castagnoli polynomial. */
#define CRC32C_POLY 0x82f63b78u

/*
 * Bytes per stream of the three-way loop, and the tables that shift a
 * (raw, not inverted) CRC state over that many zero bytes: a CRC is linear
 * in its state, so crc(A || B) = shift(crc(A), |B|) ^ crc_from_0(B).
 */
#define CRC32C_LANE 4096u
static uint32_t crc32c_table[8][256];
static uint32_t crc32c_shift_table[4][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static int crc32c_have_sse42;

static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t len);

/* The shift of state bit i over CRC32C_LANE zero bytes, for each i. */
static void crc32c_shift_init(void)
{
	static const unsigned char zeros[CRC32C_LANE];
	uint32_t bit[32];

	for (int i = 0; i < 32; i++)
		bit[i] = crc32c_sw(1u << i, zeros, sizeof(zeros));
	for (int t = 0; t < 4; t++)
		for (uint32_t b = 0; b < 256; b++) {
			uint32_t v = 0;

			for (int k = 0; k < 8; k++)
				if (b & (1u << k))
					v ^= bit[8 * t + k];
			crc32c_shift_table[t][b] = v;
		}
}

static uint32_t crc32c_shift(uint32_t c)
{
	return crc32c_shift_table[0][c & 0xff] ^
	       crc32c_shift_table[1][(c >> 8) & 0xff] ^
	       crc32c_shift_table[2][(c >> 16) & 0xff] ^
	       crc32c_shift_table[3][c >> 24];
}

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
		crc32c_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][i] =
				(crc32c_table[t - 1][i] >> 8) ^
				crc32c_table[0][crc32c_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
	crc32c_shift_init();
}

/* Slicing-by-8 table walk: about 1 byte per cycle, used without SSE4.2. */
static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc32c_table[7][v & 0xff] ^
		      crc32c_table[6][(v >> 8) & 0xff] ^
		      crc32c_table[5][(v >> 16) & 0xff] ^
		      crc32c_table[4][(v >> 24) & 0xff] ^
		      crc32c_table[3][(v >> 32) & 0xff] ^
		      crc32c_table[2][(v >> 40) & 0xff] ^
		      crc32c_table[1][(v >> 48) & 0xff] ^
		      crc32c_table[0][(v >> 56) & 0xff];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	/* Three lanes of CRC32C_LANE bytes at once, joined by shifts. */
	while (len >= 3 * CRC32C_LANE) {
		uint64_t c1 = 0, c2 = 0;

		for (size_t i = 0; i < CRC32C_LANE; i += 8) {
			uint64_t v0, v1, v2;

			memcpy(&v0, p + i, 8);
			memcpy(&v1, p + CRC32C_LANE + i, 8);
			memcpy(&v2, p + 2 * CRC32C_LANE + i, 8);
			c = __builtin_ia32_crc32di(c, v0);
			c1 = __builtin_ia32_crc32di(c1, v1);
			c2 = __builtin_ia32_crc32di(c2, v2);
		}
		c = crc32c_shift((uint32_t)c) ^ (uint32_t)c1;
		c = crc32c_shift((uint32_t)c) ^ (uint32_t)c2;
		p += 3 * CRC32C_LANE;
		len -= 3 * CRC32C_LANE;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (crc32c_have_sse42)
		return ~crc32c_hw(crc, buf, len);
#endif
	return ~crc32c_sw(crc, buf, len);
}
