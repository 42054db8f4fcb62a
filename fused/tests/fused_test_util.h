/* fused_test_util.h — what the fused/ unit tests share besides lce_test.h (EXPECT, the seed):
 * one-call subject runs, and a straightforward double-precision unfused computation (materialized
 * logits) that the fused subjects are compared against.
 *
 * The unfused double computation is not the oracle (reference/ owns that): it is the independent,
 * obviously-correct check that the fused algorithm's chunking, online softmax, shard merge and
 * gradient routing compute the function of lce_case.h. Products of dtype values are exact in
 * double and every sum has at most a few thousand terms, so its error (~1e-13 relative) is far below
 * any bound the tests use. */
#ifndef FUSED_TEST_UTIL_H
#define FUSED_TEST_UTIL_H

#include <stdint.h>

#include "lce_subject.h"
#include "lce_test.h"

/* ---- runs ---------------------------------------------------------------------------------- */
/* A generated case with its outputs, run through one subject. */
typedef struct fused_run {
  lce_case c;
  lce_tensors in;
  lce_outputs out;
} fused_run;

/* Generates c's tensors, allocates poisoned outputs and runs subject s; EXPECTs success and intact
 * guards. Returns 1 when the outputs are usable. */
int fused_run_case(const lce_subject *s, const lce_case *c, fused_run *r);
/* Runs s on case c with tensors in (possibly generated for another case of the same shapes) into
 * freshly allocated outputs; EXPECTs success and intact guards. Returns 1 when out is usable. */
int fused_run_on(const lce_subject *s, const lce_case *c, const lce_tensors *in, lce_outputs *out);
void fused_run_free(fused_run *r);


/* The subject registered under name; EXPECTs that it exists. */
const lce_subject *fused_test_subject(const char *name);

/* ---- the unfused double-precision computation ------------------------------------------------ */
typedef struct unfused_ref {
  double loss;
  double weight_sum;  /* sum_n W_n: the mean's divisor */
  double *loss_token; /* [n] */
  double *lse;        /* [n] */
  double *d_hidden;   /* [n*h] */
  double *d_weight;   /* [vp*h] the increment to the output weight's gradient (0 in padded rows) */
  /* Condition scales of the gradients: d_hidden and d_weight computed with every d_logit replaced by
   * |g|·p·|K|·(1 + A_ij + max_j A_ij), where A_ij = sum_k |h_ik·w_jk| bounds what a logit's fp32
   * rounding can be and K is the factor p is multiplied by (1 without options). An fp32 logit error
   * of u32·A moves p by p·u32·A (and exp itself rounds: the 1), so these scales times ~u32 bound the
   * gradient error that no fp32 algorithm avoids (confident rows: p_y - 1 cancels). With smoothing or
   * class weights the constant terms of dz (rounded fp32 constants) are added, with softcap 4|dz|
   * (the derivative 1 - (z/c)^2 cancels where |z| approaches c). */
  double *d_hidden_cond; /* [n*h] */
  double *d_weight_cond; /* [vp*h] */
} unfused_ref;

/* Every option of lce_case.h (smoothing, z-loss, softcap, class weights, tf32-rounded GEMM inputs)
 * is applied; token chunking does not change the function. Non-finite inputs give NaN here too,
 * but normwise comparisons need finite values: compare those separately. Returns 1 on success, 0
 * when out of memory. */
int unfused_reference(const lce_case *c, const lce_tensors *in, unfused_ref *r);
void unfused_ref_free(unfused_ref *r);
/* w_v (1 without class weights), and sum_n W_n over the valid tokens, in double. */
double unfused_class_weight(const lce_case *c, const lce_tensors *in, int64_t v);
double unfused_weight_sum(const lce_case *c, const lce_tensors *in);

/* ---- comparisons --------------------------------------------------------------------------- */
/* ||x - ref||_2 / ||ref||_2 over count elements; EXPECTs ||ref|| > 0 so that no comparison passes
 * vacuously. */
double normwise_rel_err(const double *x, const double *ref, int64_t count, const char *what);

double norm2(const double *x, int64_t count);

/* Subject outputs as double arrays (caller frees): d_hidden [n*h], and the increment of the output
 * weight's gradient (buffer minus prior) [vp*h]. */
double *outputs_d_hidden(const lce_case *c, const lce_outputs *out);
double *outputs_d_weight_increment(const lce_case *c, const lce_tensors *in, const lce_outputs *out);
double *floats_to_doubles(const float *x, int64_t count);
/* Normwise relative error of a subject's d_hidden against the unfused reference (1 when out of memory). */
double d_hidden_err(const lce_case *c, const lce_outputs *out, const unfused_ref *ref);

#endif
