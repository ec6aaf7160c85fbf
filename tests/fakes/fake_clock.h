/* SPDX-License-Identifier: MIT */
/*
 * Hand-advanced clock for unit tests: fake_clock_src() gives a clock source
 * (core/clock.h) reading a struct fake_clock; fake_clock_now also serves
 * directly as a now_ns op with the struct fake_clock as its ctx. Time moves
 * only when the test calls fake_clock_advance() or fake_clock_set(). Safe
 * to read from any thread.
 */
#ifndef KVFS_FAKE_CLOCK_H
#define KVFS_FAKE_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"

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

static inline void fake_clock_set(struct fake_clock *c, uint64_t ns)
{
	atomic_store(&c->ns, ns);
}

static inline struct clock_src fake_clock_src(struct fake_clock *c)
{
	return (struct clock_src){.now_ns = fake_clock_now, .arg = c};
}

#endif
