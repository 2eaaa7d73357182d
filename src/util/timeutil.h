/* timeutil.h - monotonic clock helpers for bounded waits. */
#ifndef MPP_UTIL_TIMEUTIL_H_
#define MPP_UTIL_TIMEUTIL_H_

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds. */
static inline uint64_t time_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left until deadline_ns (0 when passed). */
static inline int64_t time_left_ms(uint64_t deadline_ns) {
  uint64_t now = time_now_ns();
  return now >= deadline_ns ? 0 : (int64_t)((deadline_ns - now + 999999) / 1000000);
}

/* A deadline timeout_ms from now. */
static inline uint64_t time_deadline_ms(int64_t timeout_ms) {
  return time_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
}

#endif /* MPP_UTIL_TIMEUTIL_H_ */
