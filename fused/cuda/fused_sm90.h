/* fused_sm90.h — the fused-sm90 subject (fused_sm90.cu, built by fused/cuda/cuda.cmake only when
 * CUTLASS's headers are found: LCE_WITH_SM90): the fused algorithm with a Hopper logits GEMM whose
 * epilogue consumes the logits in registers (fused_sm90_gemm.cu). Its run() returns LCE_ENODEV where
 * no GPU is present and LCE_ESKIP for fp32 inputs (no IEEE fp32 or tf32 logits GEMM yet). */
#ifndef FUSED_SM90_H
#define FUSED_SM90_H

#include "fused_cuda.h"
#include "lce_device.h"
#include "lce_subject.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const lce_subject lce_fused_sm90_subject; /* "fused-sm90" */

#ifdef LCE_WITH_MUTANTS /* fused_sm90.cu compiled again with one LCE_MUTANT_SM90_* switch (lce_fused_sm90_mutants) */
extern const lce_subject lce_mutant_sm90_bf16_dhidden_accum_subject;     /* "mutant-sm90/bf16-dhidden-accum" */
extern const lce_subject lce_mutant_sm90_running_max_zero_init_subject;  /* "mutant-sm90/running-max-zero-init" */
extern const lce_subject lce_mutant_sm90_mean_factor_in_dlogits_subject; /* "mutant-sm90/mean-factor-in-dlogits" */
#endif

/* The tokens per backward token chunk when the case sets none (token_chunk 0 or >= n): the d_logits
 * tile and the fp32 d_hidden accumulator hold one chunk, not all N tokens. */
#define LCE_FUSED_SM90_TOKEN_CHUNK 2048

/* K of fused-sm90's reductions (lce_subject_inner_fn): d_weight over its backward token chunk. */
int64_t lce_fused_sm90_inner(const lce_case *c, lce_output_id o);

/* fused-sm90's passes for `lcecheck bench` (lce_cuda_bench_config.engine). */
extern const lce_cuda_bench_engine lce_fused_sm90_bench_engine;

#ifdef __cplusplus
}
#endif

#endif
