/* The two clocks: monotonic for timeouts and rate limits, wall for what
 * the broker stamps. Milliseconds. */
#ifndef COTAL_CLOCK_H
#define COTAL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Elapsed time that goes on while the host is suspended (the watchdog's
 * backstop). */
static inline int64_t
boot_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* clock's now plus ms, for pthread_cond_timedwait: CLOCK_REALTIME unless
 * the condition variable was made to wait on CLOCK_MONOTONIC. */
static inline struct timespec
deadline_in_ms(clockid_t clock, int64_t ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
