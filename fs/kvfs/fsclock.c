/* SPDX-License-Identifier: MIT */
/* The daemon's wall clock (see fsclock.h). */
#include <time.h>

#include "fsclock.h"

int64_t fs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
