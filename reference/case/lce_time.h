/* lce_time.h — the one monotonic clock every timing in lcecheck reads. */
#ifndef LCE_TIME_H
#define LCE_TIME_H

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds of CLOCK_MONOTONIC (only differences mean anything). */
double lce_now_seconds(void);
/* CPU seconds of the whole process, every thread (CLOCK_PROCESS_CPUTIME_ID): on a shared machine
 * the work done, where wall time also counts the other processes' share of the cores. */
double lce_cpu_seconds(void);

#ifdef __cplusplus
}
#endif

#endif
