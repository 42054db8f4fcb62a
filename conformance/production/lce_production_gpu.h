/* lce_production_gpu.h — the GPU side of `lcecheck production` (built only where CUDA and the fp64 GPU
 * reference exist: LCE_WITH_PRODUCTION):
 *   lce_production_device.cu  the device's identity (name, sm_XX, driver and runtime versions), free
 *                             memory, and the reference moments the comparison sums lack
 *   lce_production_run.c      the run: tensors generated on host threads ahead of the GPU, the fp64
 *                             reference per case in device memory, every subject run and compared on
 *                             the device, each output judged (lce_production.h) */
#ifndef LCE_PRODUCTION_GPU_H
#define LCE_PRODUCTION_GPU_H

#include <stddef.h>

#include "lce_production.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lce_subject; /* lce_subject.h (fused/): the run only passes them through */

/* Over the count device doubles of value (and emag, when not NULL) where value is finite:
 * *sum_r4 = sum value^4, *sum_emag2 = sum emag^2 (-1 when emag is NULL). Deterministic: fixed grid,
 * per-block partials summed on the host in block order. */
lce_code lce_prod_ref_moments(const double *value, const double *emag, int64_t count, double *sum_r4,
                              double *sum_emag2, lce_status *st);

/* Runs every case of rep->cfg for every subject (subjects[j] for rep->cfg->subjects[j]; NULL entries
 * are reported as errors by the caller before this), judging subject j against goldens[j] (NULL:
 * measure only; an empty golden: "no bound"). Fills rep->cases (rep->ncases of them, allocated by the
 * caller). Progress lines go to stderr unless cfg->quiet. Returns LCE_OK when every case was attempted:
 * per-case failures are in the results. */
lce_code lce_prod_run(lce_prod_report *rep, const struct lce_subject *const *subjects, const lce_golden *const *goldens,
                      lce_status *st);

#ifdef __cplusplus
}
#endif

#endif
