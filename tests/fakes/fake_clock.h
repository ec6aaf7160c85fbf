/* SPDX-License-Identifier: MIT */
/*
 * Hand-advanced clock for unit tests: pass fake_clock_now as a now_ns op
 * with a struct fake_clock as its ctx. Time moves only when the test calls
 * fake_clock_advance(). Safe to read from any thread.
 */
#ifndef KVFS_FAKE_CLOCK_H
#define KVFS_FAKE_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct fake_clock {
	_Atomic uint64_t ns;
};

static inline uint64_t fake_clock_now(void *ctx)
{
	struct fake_clock *c = ctx;

	return atomic_load(&c->ns);
}

static inline void fake_clock_advance(struct fake_clock *c, uint64_t ns)
{
	atomic_fetch_add(&c->ns, ns);
}

#endif
