/* lce_fast_rnd.c — tier 1's reference of the coherent d_logit rounding (lce_ref_output.rnd).
 *
 * A kernel whose backward GEMMs read low-precision d_logits rounds every d_logit once; on flat rows
 * those roundings share their sign (p_y - 1 rounds to -1 in every token, every p_v alike), so the
 * gradients carry a bias up to u/2 of that format which no cond measures. rnd is the gradient such a
 * kernel computes with everything else exact: t = dz / g (the d_logit before the loss gradient g, as
 * lce_fused_grad_split leaves only a power of two of g in the stored d_logits), rounded to the input
 * dtype and, with tf32 GEMMs, then to tf32, times g, summed in plain double. Its bias against the
 * exact gradient is the coherent part a correct kernel shows; a kernel that folds g into the stored
 * d_logits moves away from it by g's rounding (golden/policy.txt, term rnd). Not certified: double
 * sums err by ~1e-16 of the terms, far below any rounding it stands for. */
#include "lce_fast_internal.h"

void fast_rnd_row(const lce_case *c, double g, const double *ds, int64_t v, double *dzr) {
  const int tf32 = lce_case_precision(c) == LCE_PREC_TF32;
  for (int64_t j = 0; j < v; j++) {
    double t = lce_round_to(c->dtype, ds[j] / g);
    if (tf32) t = lce_round_tf32(t);
    dzr[j] = t * g;
  }
}

void fast_rnd_hidden(const double *dzr, const double *w, int64_t v, int64_t h, double *out) {
  for (int64_t k = 0; k < h; k++) out[k] = 0.0;
  for (int64_t j = 0; j < v; j++)
    for (int64_t k = 0; k < h; k++) out[k] += dzr[j] * w[j * h + k];
}

void fast_rnd_weight(const double *dzr, int64_t stride, int64_t col, const unsigned char *active, int64_t n0,
                     int64_t n1, const double *hidden, int64_t h, double *out) {
  for (int64_t n = n0; n < n1; n++) {
    if (!active[n]) continue;
    const double d = dzr[(n - n0) * stride + col];
    for (int64_t k = 0; k < h; k++) out[k] += d * hidden[n * h + k];
  }
}
