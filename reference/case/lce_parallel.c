/* lce_parallel.c — see lce_parallel.h: thread numbers, and OpenMP's wait policy for whole programs. */
#define _POSIX_C_SOURCE 200809L
#include "lce_parallel.h"

#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int lce_thread_index(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int lce_thread_limit(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void lce_thread_limit_set(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n > 0 ? n : 1); /* nthreads-var is per task: this thread's alone */
#else
  (void)n;
#endif
}

void lce_parallel_prefer_passive(char **argv) {
#ifdef _OPENMP
  if (getenv("OMP_WAIT_POLICY") != NULL) return; /* the user's choice, or this re-execution */
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv); /* returns only on failure: the program then runs as it is */
#else
  (void)argv;
#endif
}
