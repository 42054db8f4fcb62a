/* lce_matrix.h — named conformance matrices: deterministic lists of cases.
 *   default: tied/untied × tp {1,2,4} × bf16/fp16/fp32 × none/sum/mean × vocab-chunk counts from
 *            1 to 150, with ignored labels, labels on every shard, padding, prior gradients and the
 *            basic value distributions; edge batches (no valid token, one); many tokens; every
 *            option (label smoothing pytorch/megatron, z-loss, softcap, class weights, token
 *            chunks, tf32) alone and combined with the hard distributions; non-finite inputs;
 *            72 odd shapes drawn from the fuzz harness's space. Small shapes (runs in seconds).
 *   smoke:   a handful of default's cases, for quick checks.
 *   medium:  16 LM-head shapes (N up to 512, H up to 1024, V up to 32k) over dtype, tied, tp 1/2/8 and
 *            the options; for GPU subjects judged by the fp64 GPU oracle (--oracle fp64-gpu).
 *   wide:    8 cases with 2 tokens at medium's V and H: the MPFR oracle judges them in seconds. */
#ifndef LCE_MATRIX_H
#define LCE_MATRIX_H

#include "lce_case.h"

typedef struct lce_matrix {
  const char *name;
  const char *description;
} lce_matrix;

size_t lce_matrix_count(void);
const lce_matrix *lce_matrix_at(size_t i);
/* Allocates *cases (free() it) with every case of the named matrix. */
lce_code lce_matrix_cases(const char *name, lce_case **cases, size_t *count, lce_status *st);

#endif
