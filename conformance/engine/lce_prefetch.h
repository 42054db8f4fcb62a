/* lce_prefetch.h — tensors of the next cases generated on host threads while the engine runs the
 * current one. Generation (lce_case_generate, ~60 ns per element on one core) takes far longer than a
 * production case's GPU work, so at those shapes it must overlap. At most `jobs` cases wait
 * generated, bounding host memory at (jobs + 1) cases (an untied (4096, 4096, 262144) case holds
 * 13 GB of tensors). The generator is counter-based: threads produce the same bits as a serial run. */
#ifndef LCE_PREFETCH_H
#define LCE_PREFETCH_H

#include "lce_case.h"

typedef struct lce_prefetch lce_prefetch;

/* Starts jobs (>= 1) threads over cases[0..ncases). */
lce_code lce_prefetch_start(lce_prefetch **pf, const lce_case *cases, size_t ncases, int jobs, lce_status *st);
/* Waits for case i (taken in order) and returns its generation status; *in and *seconds are set
 * when LCE_OK (the tensors stay owned by the prefetcher until lce_prefetch_release). */
lce_code lce_prefetch_take(lce_prefetch *pf, size_t i, const lce_tensors **in, double *seconds, lce_status *st);
/* Frees case i's tensors and lets the threads generate further. */
void lce_prefetch_release(lce_prefetch *pf, size_t i);
/* Joins the threads (also after an early stop) and frees everything left. */
void lce_prefetch_stop(lce_prefetch *pf);

#endif
