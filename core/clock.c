/* SPDX-License-Identifier: MIT */
/*
 * The real clocks and clock sources; see clock.h. Not here: the fake used by
 * tests (tests/fakes/fake_clock.h).
 */
#include "clock.h"

#include <stddef.h>

uint64_t clock_ns(const struct timespec *ts)
{
	if (ts->tv_sec < 0)
		return 0;
	return (uint64_t)ts->tv_sec * CLOCK_NS_PER_SEC + (uint64_t)ts->tv_nsec;
}

struct timespec clock_ts(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / CLOCK_NS_PER_SEC),
				 .tv_nsec = (long)(ns % CLOCK_NS_PER_SEC)};
}

uint64_t clock_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return clock_ns(&ts);
}

uint64_t clock_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return clock_ns(&ts);
}

static uint64_t clock_monotonic_now(void *arg)
{
	(void)arg;
	return clock_monotonic_ns();
}

static uint64_t clock_realtime_now(void *arg)
{
	(void)arg;
	return clock_realtime_ns();
}

const struct clock_src clock_monotonic = {.now_ns = clock_monotonic_now};
const struct clock_src clock_realtime = {.now_ns = clock_realtime_now};

uint64_t clock_now(const struct clock_src *src)
{
	if (!src || !src->now_ns)
		return clock_monotonic_ns();
	return src->now_ns(src->arg);
}
