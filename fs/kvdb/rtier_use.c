/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's last-use index (rtier.h): the use shards "u:" N.
 */
#include "rtier.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rados/librados.h>

#include "crc32c.h"
#include "rtier_int.h"

unsigned rtier_use_oid(const char *path, char *oid)
{
	unsigned shard = crc32c(0, path, strlen(path)) % RTIER_USE_SHARDS;

	snprintf(oid, RTIER_OID_MAX, "u:%u", shard);
	return shard;
}

void rtier_use_val(char *out, int64_t time_ns, uint64_t size)
{
	rtier_le64(out, (uint64_t)time_ns);
	rtier_le64(out + 8, size);
}
