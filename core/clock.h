/* SPDX-License-Identifier: MIT */
/*
 * The clock: nanosecond readings of CLOCK_REALTIME (wall time, for what is
 * shown or stored) and CLOCK_MONOTONIC (for intervals and deadlines), and a
 * clock source (a function and its argument) that a module takes instead of
 * calling clock_gettime(2) itself, so a test can pass a hand-advanced fake
 * (tests/fakes/fake_clock.h). Not here: timers, sleeping.
 *
 * Every function may be called from any thread; a clock source's function
 * must be too. Nothing here fails: clock_gettime(2) cannot fail for these
 * clocks.
 */
#ifndef KVFS_CLOCK_H
#define KVFS_CLOCK_H

#include <stdint.h>
#include <time.h>

#define CLOCK_NS_PER_SEC 1000000000ull

/* Returns the time in ns; arg is the source's own (may be NULL). */
typedef uint64_t (*clock_now_fn)(void *arg);

/* A clock source: now_ns(arg). A NULL source, or NULL now_ns, is monotonic. */
struct clock_src {
	clock_now_fn now_ns;
	void *arg;
};

/* CLOCK_REALTIME in ns since the epoch. */
uint64_t clock_realtime_ns(void);
/* CLOCK_MONOTONIC in ns. */
uint64_t clock_monotonic_ns(void);

/* Sources reading the real clocks. */
extern const struct clock_src clock_monotonic;
extern const struct clock_src clock_realtime;

/* The time of src (NULL or an unset source: clock_monotonic_ns()). */
uint64_t clock_now(const struct clock_src *src);

/* ns as a struct timespec (for pthread_cond_timedwait and friends). */
struct timespec clock_ts(uint64_t ns);
/* A struct timespec as ns (negative times clamp to 0). */
uint64_t clock_ns(const struct timespec *ts);

#endif
