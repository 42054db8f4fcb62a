/* lce_time.c — see lce_time.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "lce_time.h"

#include <time.h>

static double seconds_of(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double lce_now_seconds(void) { return seconds_of(CLOCK_MONOTONIC); }

double lce_cpu_seconds(void) { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }
