/* lce_gemm_model.h — how a GEMM's fp32 accumulation is evaluated: the arithmetic models the host
 * twin (fused-host) can run under, and the MMA probe compares the GPU with bit for bit.
 *
 *   ieee    sequential fp32 with round-to-nearest: one fmaf per product, k in order (CUDA cores,
 *           and fused-host's default)
 *   sm90    Hopper tensor cores: each MMA step sums `products` exact products (16 for bf16/fp16,
 *           8 for tf32) together with the accumulator, every term aligned to the largest exponent
 *           and truncated to `extra_bits` bits below fp32's 24-bit significand, then the sum is
 *           truncated (round toward zero) to fp32. DESIGN.md "Device arithmetic is not IEEE".
 *   sm80    Ampere (A100): 8 products per step (4 for tf32: a k16/k8 MMA is two half steps), 1 extra
 *           bit (the public models' parameters)
 *   sm100   Blackwell (B200): the public models' parameters
 * The table is data: an architecture is one row (lce_gemm_model.c), so adding one is one line.
 * Models are deterministic functions of their inputs, so a tensor-core GPU result can be compared
 * with them bit for bit (lcecheck probe). */
#ifndef LCE_GEMM_MODEL_H
#define LCE_GEMM_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* The format the GEMM's operands are in (the products are exact in every one). */
typedef enum lce_mma_format { LCE_MMA_BF16 = 0, LCE_MMA_FP16 = 1, LCE_MMA_TF32 = 2, LCE_MMA_FORMATS = 3 } lce_mma_format;

/* Rounding of the aligned sum to fp32. */
typedef enum lce_mma_round { LCE_MMA_RZ = 0, LCE_MMA_RNE = 1 } lce_mma_round;
/* Sign of a zero result: every zero +0; exact zero +0 but an underflow keeps its sign; IEEE (exact
 * zero -0 only when every term is a -0, an underflow keeps its sign). */
typedef enum lce_mma_zero { LCE_MMA_ZERO_PLUS = 0, LCE_MMA_ZERO_UNDERFLOW_SIGNED = 1, LCE_MMA_ZERO_IEEE = 2 } lce_mma_zero;

typedef struct lce_gemm_arch {
  const char *name;                  /* "ieee", "sm80", "sm90", "sm100" */
  const char *source;                /* where its parameters come from (paper, measurement) */
  int ieee;                          /* 1: sequential fmaf, the fields below unused */
  int products[LCE_MMA_FORMATS];     /* exact products summed per MMA step, per operand format */
  int extra_bits;                    /* alignment bits kept below the fp32 significand */
  /* The details the public models spell out (or disagree on), each a field so that the row can be
   * tuned to a bit-exact probe by data: lce_gemm_model.c's header says what each public model does. */
  int align_normalized;   /* 0: a product aligns by ea + eb (significand in [1,4)); 1: by its exact exponent */
  int zeros_align;        /* 1: zero operands and a zero c take part in the max exponent, as 2^-126 */
  int term_floor;         /* 0: aligned terms truncated toward zero; 1: toward -inf (two's complement) */
  lce_mma_round final_round; /* how the aligned sum becomes fp32 */
  int ftz_inputs;         /* 1: subnormal operands of the format are read as zeros (sign kept) */
  int ftz_output;         /* 1: a result below 2^-126 becomes a zero */
  int overflow_saturates; /* 0: beyond FLT_MAX gives +-Inf; 1: +-FLT_MAX */
  lce_mma_zero zero_sign; /* the sign of a zero result */
  uint32_t nan_bits;      /* the result's bits when it is NaN */
} lce_gemm_arch;

size_t lce_gemm_arch_count(void);
const lce_gemm_arch *lce_gemm_arch_at(size_t i);
const lce_gemm_arch *lce_gemm_arch_find(const char *name); /* NULL when unknown */

/* One MMA step: d = c + sum_{i<k} a[i]·b[i], with a[i], b[i] values of format fmt (given as
 * floats, exactly representable) and k <= arch->products[fmt] (ieee: any k, sequential fmaf).
 * Non-finite, subnormal and signed-zero inputs are handled as the architecture does. */
float lce_mma_step(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, const float *b, int k);
/* The same step evaluated by the rule term by term, as lce_gemm_model.c's header writes it (the
 * slow definition; lce_mma_step's faster evaluation gives the same bits, test_gemm_model checks). */
float lce_mma_step_rule(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, const float *b, int k);

/* A whole inner product as a GEMM evaluates it: acc = c, then consecutive MMA steps over k in
 * order (k = 0..K-1 in blocks of arch->products[fmt]; the last block may be short). Strides in
 * elements. */
float lce_gemm_dot(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, ptrdiff_t stride_a,
                   const float *b, ptrdiff_t stride_b, int64_t k);

/* The epilogue of a GEMM that adds its result acc to an fp32 buffer c (cuBLAS beta = 1), d = alpha·acc
 * + c, evaluated one of the two ways a device could: */
typedef enum lce_epilogue_rounding {
  LCE_EPILOGUE_FMA = 0,           /* fmaf(alpha, acc, c): one rounding (CUTLASS's LinearCombination) */
  LCE_EPILOGUE_TWO_ROUNDINGS = 1  /* alpha·acc rounded to fp32, then + c rounded again */
} lce_epilogue_rounding;
float lce_gemm_epilogue_as(lce_epilogue_rounding r, float alpha, float acc, float c);
const char *lce_epilogue_rounding_name(lce_epilogue_rounding r);

/* The rounding the host twin (fused-host, fused-host-sm90) gives cuBLAS's epilogue, and the epilogue
 * it evaluates with it; with alpha = 1 both candidates are the one addition acc + c. cuBLAS on sm_90
 * rounds alpha·acc to fp32 before adding C (every tile of every GEMM shape measured), not one fma;
 * fused/tests/test_fused_cuda_epilogue.cu fails on the GPU when cuBLAS rounds otherwise. */
#define LCE_GEMM_EPILOGUE LCE_EPILOGUE_TWO_ROUNDINGS
float lce_gemm_epilogue(float alpha, float acc, float c);

/* out[j] = lce_gemm_dot(arch, fmt, c, a, stride_a, b + j * step_b, stride_b, k) for j < count, the
 * same bits, several at once where the model allows (the ieee model's fmaf chains interleaved). */
void lce_gemm_dots(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, ptrdiff_t stride_a,
                   const float *b, ptrdiff_t stride_b, ptrdiff_t step_b, int64_t k, int64_t count, float *out);

#endif
