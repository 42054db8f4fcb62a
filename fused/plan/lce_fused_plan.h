/* lce_fused_plan.h — what every subject running the fused algorithm (fused-host, fused-cuda) decides
 * before its first tile, written once: the tile sizes, the option constants as fp32 kernel
 * arguments, each shard's real rows, the token weights' sum (the mean's divisor), the per-token
 * loss gradient g and the reduced loss. The math is lce_case.h's; fused_host.c's header has the
 * evaluation order these values enter.
 *
 * Which tensor is the output weight, and which gradient buffer receives its gradient, is not here:
 * each subject selects its own (that choice is where the untied-embedding bug lived, and the
 * mutants flip it per subject). Plain C, callable from CUDA sources. */
#ifndef LCE_FUSED_PLAN_H
#define LCE_FUSED_PLAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "lce_case.h"
#include "lce_status.h"

typedef struct lce_fused_plan {
  int64_t rows_max;  /* most vocab rows one chunk holds: min(vocab_chunk, vp / tp) */
  int64_t tok_max;   /* tokens per token chunk: token_chunk, or n when 0 or larger */
  /* The option constants, rounded to fp32 once from double, as a host passes them to a kernel. */
  float one_minus_e; /* 1 - e (label smoothing) */
  float ev;          /* e / V of the GLOBAL vocab, the smoothing sum spanning all shards (0: none) */
  float lambda;      /* z-loss weight (0: none) */
  float cap;         /* softcap c (0: none) */
  int tf32;          /* GEMM operands rounded to tf32 */
} lce_fused_plan;

/* Tile sizes and option constants of case c. */
void lce_fused_plan_make(lce_fused_plan *p, const lce_case *c);

/* The rows of shard r that enter the softmax: its real vocabulary rows [lo, hi), possibly empty
 * (padded rows never do). */
void lce_fused_shard_rows(const lce_case *c, int r, int64_t *lo, int64_t *hi);

/* Class weight w_v of vocab row v: 1 without class weights, and for padded rows (v >= V). Inline:
 * kernels' inner loops call it. */
static inline float lce_fused_class_weight(const lce_case *c, const lce_tensors *in, int64_t v) {
  return c->class_weights && in->class_weight && v < c->v ? in->class_weight[v] : 1.0f;
}

/* sum_n W_n in fp32, token order: the class weight of each valid token's label (1 each without
 * class weights). */
float lce_fused_weight_sum(const lce_case *c, const lce_tensors *in);

/* The mean's division x / weight_sum; 0 when no token carries weight (the all-ignored batch). */
float lce_fused_mean_divide(float x, float weight_sum);

/* g [n] = d loss / d loss_token in fp32, as the kernel receives it: grad_output[i] (reduction
 * none), grad_output[0] (sum) or grad_output[0] / weight_sum (mean); 0 for ignored tokens. */
void lce_fused_loss_gradient(const lce_case *c, const lce_tensors *in, float weight_sum, float *g);

/* sum_i loss_token[i] in fp32, token order. */
float lce_fused_loss_total(const lce_case *c, const float *loss_token);

/* The reduced loss: the token-order total, divided by weight_sum for the mean. */
float lce_fused_loss(const lce_case *c, const float *loss_token, float weight_sum);

/* EINVAL unless out holds every buffer a run of case c writes (grad_weight when untied); subject
 * names the run in the message. */
lce_code lce_fused_check_outputs(const lce_case *c, const lce_outputs *out, const char *subject, lce_status *st);

#ifdef __cplusplus
}
#endif

#endif
