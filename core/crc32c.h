/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (Castagnoli), as used by iSCSI and ext4: crc32c(0, "123456789", 9)
 * is 0xe3069283. Uses the SSE4.2 instruction when the CPU has it, a table
 * otherwise. Pure function, any thread.
 */
#ifndef KVFS_CRC32C_H
#define KVFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over len bytes of buf. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
