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

/* How g reaches the gradients without the 1/n_valid bias. Folding g into d_logits before they are
 * rounded to the input dtype gives every token's label term -g(1 - p_y) ~ -g the same relative
 * rounding error of g, which scales d_hidden and the weight gradient coherently (DESIGN.md "The
 * 1/n_valid bias": up to 2^-8 in bf16). So g is split, g_i = dl_i·rho_i·alpha, into a factor dl_i
 * folded into d_logits exactly and a remainder applied in fp32 after the GEMM reductions: rho_i per
 * token, or alpha, one for all tokens:
 *   mean, sum  dl = 1 (d_logits unscaled: no underflow of small p·g in fp16 either), rho = 1,
 *              alpha = g: the one scalar g is the alpha of both backward GEMMs (the epilogue
 *              alpha·acc + C into the fp32 d_hidden buffer and the fp32 weight gradient, one
 *              rounding as without it), so both gradients are multiples of the exact fp32 g up to
 *              unbiased fp32 roundings;
 *   none       g_i = rho_i 2^e_i, |rho_i| in [1, 2): dl_i = 2^e_i, alpha = 1 (a GEMM has one
 *              alpha, not one per token).
 *              2^e_i·t is exact unless it falls below the dtype's normal range (2^-126 for bf16
 *              and fp32, 2^-14 for fp16): there it is rounded to the subnormal grid or flushed to
 *              0, as g_i·t was before, at most one binade earlier (2^e_i <= |g_i|). d_hidden's row
 *              is scaled by rho_i in fp32 after the all-reduce, before the dtype rounding. In the
 *              weight gradient sum_n ds_n h_n rho_n, rho_n cannot be factored out of the sum over
 *              tokens, so the token's hidden row is scaled
 *              and rounded to the dtype, h'_nk = rho_n h_nk (1 + d_nk), |d_nk| <= u (2^-8 bf16,
 *              2^-11 fp16, 2^-24 fp32). That adds sum_n ds_nj rho_n h_nk d_nk to element (j, k):
 *              d_nk is the rounding error of one product, its sign independent of the sign of
 *              ds_nj h_nk (round to nearest even is symmetric), so it averages out in the bias
 *              <x - r, r>/<r, r> and only adds a random error of the size d_logits' own rounding
 *              already has (u per term). It is 0 where rho_n = 1 (power-of-two g_n). Where
 *              rho_n·h_nk would leave the dtype's normal range for some k (subnormal hidden values,
 *              whose rounding is absolute, not relative; an fp16 |h| near 65504 that would
 *              overflow), the token keeps the old arithmetic instead: dl = g_n, rho_n = 1, its
 *              rounding of g_n its own (under none the g_n differ, so it is not shared);
 *   dl = g, rho = 1 where g is 0 or not finite (ignored tokens, a zero grad_output): the old
 *              arithmetic, whose zeros and NaNs the kernels keep.
 * rho [n] serves both uses: the scale of d_hidden's row and of the hidden row the weight gradient
 * reads are the same remainder. in's hidden is read under reduction none only (NULL is fine
 * otherwise). Returns 1 when some rho is not 1: the hidden rows must then be scaled for the weight
 * gradient (never under mean and sum). */
int lce_fused_grad_split(const lce_case *c, const lce_tensors *in, const float *g, float *dl, float *rho,
                         float *alpha);

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
