/* lce_parallel.h — loops over independent rows run in parallel where the build has OpenMP.
 *
 * Used only where every iteration writes its own elements and reads nothing another iteration
 * writes, and where each element's arithmetic (its reduction order included) does not depend on the
 * iteration order: the results are the same bits with any thread count, and without OpenMP. The
 * tier-0 oracle and the fused-host twin are single-threaded per element by design; what runs in
 * parallel is which rows run at once (case generation, fused-host's tiles at medium shapes).
 *
 *   LCE_PARALLEL_FOR                 the next for loop, static schedule
 *   LCE_PARALLEL_FOR_IF(condition)   the same, but only when condition holds (a work estimate: a
 *                                    parallel region costs microseconds, too much for fuzz-size tiles)
 * and, for work whose threads need their own setup (MPFR's exponent range, flags and caches are per
 * thread), a region whose threads share the loops inside it:
 *   LCE_PARALLEL_REGION(threads)     the next block, on that many threads (1: the calling thread)
 *   LCE_FOR_DYNAMIC                  inside it: the next for loop, iterations handed out one at a time
 *                                    (rows of uneven cost); a barrier follows it
 *   LCE_FOR_DYNAMIC_ORDERED          the same, for a body with an LCE_ORDERED block: those blocks run
 *                                    one at a time, in iteration order (the engine's sink)
 *   lce_thread_index()               this thread's number in the region, 0 outside one
 *   lce_thread_limit()               how many threads a region may have (OMP_NUM_THREADS), 1 without OpenMP
 *   lce_thread_limit_set(n)          the regions this thread opens from now on get at most n threads
 *                                    (1 in a thread that runs whole cases side by side with others) */
#ifndef LCE_PARALLEL_H
#define LCE_PARALLEL_H

#ifdef _OPENMP
#define LCE_PRAGMA(x) _Pragma(#x)
#define LCE_PARALLEL_FOR LCE_PRAGMA(omp parallel for schedule(static))
#define LCE_PARALLEL_FOR_IF(condition) LCE_PRAGMA(omp parallel for schedule(static) if (condition))
#define LCE_PARALLEL_REGION(threads) LCE_PRAGMA(omp parallel num_threads(threads))
#define LCE_FOR_DYNAMIC LCE_PRAGMA(omp for schedule(dynamic, 1))
#define LCE_FOR_DYNAMIC_ORDERED LCE_PRAGMA(omp for ordered schedule(dynamic, 1))
#define LCE_ORDERED LCE_PRAGMA(omp ordered)
#else
#define LCE_PARALLEL_FOR
#define LCE_PARALLEL_FOR_IF(condition)
#define LCE_PARALLEL_REGION(threads)
#define LCE_FOR_DYNAMIC
#define LCE_FOR_DYNAMIC_ORDERED
#define LCE_ORDERED
#endif

int lce_thread_index(void);
int lce_thread_limit(void);
void lce_thread_limit_set(int n);

/* OpenMP's default wait policy lets idle threads spin between parallel regions; where the cores
 * are few or shared, the spinning takes the CPU the work needs (the default matrix judged with
 * fused-host and tier 1 on the 2-core machine: 18.8 s with 2 threads, 4.0 s with passive waiting or
 * one thread). libgomp reads OMP_WAIT_POLICY once, when it loads, so a program calls this first
 * thing in main: without OMP_WAIT_POLICY in the environment it re-executes itself
 * (/proc/self/exe) with OMP_WAIT_POLICY=passive; otherwise, and where that fails, it returns. */
void lce_parallel_prefer_passive(char **argv);

/* Multiply-adds below which a tile loop stays serial (about 50 microseconds of work). */
#define LCE_PARALLEL_MIN_MACS ((int64_t)1 << 16)

#endif
