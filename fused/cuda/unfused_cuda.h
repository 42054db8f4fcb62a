/* unfused_cuda.h — the unfused-cuda subject (unfused_cuda.cu, built by fused/cuda.cmake where CUDA is
 * enabled): the baseline a plain PyTorch / Megatron-LM user already runs, an LM head that materializes
 * the logits of all tokens over its whole vocab shard and takes ONE cuBLAS GEMM per gradient. Judged
 * at production shapes by `lcecheck production` against the fp64 GPU reference; golden class
 * "unfused-cuda". Its run() returns LCE_ENODEV where no GPU is present. */
#ifndef UNFUSED_CUDA_H
#define UNFUSED_CUDA_H

#include "lce_subject.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const lce_subject lce_unfused_cuda_subject; /* "unfused-cuda" */

/* The case fused-cuda's driver runs for unfused-cuda: c with one vocab chunk per shard (the shard's
 * whole vocab in one logits GEMM, one d_hidden GEMM with K = Vp/tp, one d_weight GEMM per shard) and
 * one token chunk (K = N). Shapes and semantics are c's. */
lce_case lce_unfused_cuda_case(const lce_case *c);

#ifdef __cplusplus
}
#endif

#endif
