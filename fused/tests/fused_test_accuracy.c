/* fused_test_accuracy.c — a subject run against the unfused double computation (see
 * fused_test_accuracy.h for the bounds and why they hold). */
#include "fused_test_accuracy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double U32 = 0x1p-24; /* unit roundoff of fp32 */

/* Rows >= v of the output weight's gradient are padding: they must hold their prior bit for bit. */
static void check_padding_untouched(const fused_run *r) {
  const lce_case *c = &r->c;
  const float *buf = lce_output_weight_grad(c, &r->out);
  const float *prior = lce_output_weight_prior(c, &r->in);
  size_t off = (size_t)(c->v * c->h), count = (size_t)((c->vp - c->v) * c->h);
  EXPECT(memcmp(buf + off, prior + off, count * sizeof(float)) == 0, "padded gradient rows were written");
}

/* Forward outputs are fp32 computations from exact inputs: each logit is off by at most ~h·u32 of
 * sum_k |h_k w_k|, and lse, loss_token = lse - z_y and the loss inherit that absolute error. A
 * confident token's loss is a cancellation (lse and z_y both ~30, the loss ~1e-6), so forward
 * errors are measured against the logit scale: max(||loss||, ||lse||) over the same tokens. */
static double forward_bound(const lce_case *c) { return 8.0 * U32 * sqrt((double)c->h); }

/* Gradients carry the rounding of d_logits and of d_hidden to the dtype (u each), plus the fp32
 * logit error carried through exp, which the reference's condition scale measures (it is what
 * makes p_y - 1 of a confident row inexact in any fp32 algorithm), times sqrt(h) for the
 * random-walk growth of an h-term fp32 dot product. Relative to ||ref||. */
static double gradient_bound(const lce_case *c, const double *ref, const double *cond, int64_t count) {
  double u = c->gemm == LCE_GEMM_TF32 ? 0x1p-11 : lce_dtype_unit_roundoff(c->dtype); /* d_logits format */
  double ref_norm = norm2(ref, count);
  return ref_norm > 0.0 ? 3.0 * u + sqrt((double)c->h) * U32 * norm2(cond, count) / ref_norm : 0.0;
}

/* A gradient's normwise error, or -- when the exact gradient is all zero (hidden rows of zeros give
 * d_weight = 0) -- 0 if the output is exactly zero too and +Inf otherwise. */
static double gradient_err(const double *x, const double *ref, int64_t count, const char *what) {
  if (norm2(ref, count) == 0.0) return norm2(x, count) == 0.0 ? 0.0 : INFINITY;
  return normwise_rel_err(x, ref, count, what);
}

/* ||x - ref|| / max(||ref||, ||scale||) over count elements. */
static double scaled_err(const double *x, const double *ref, const double *scale, int64_t count) {
  double num = 0.0, den = 0.0, den_scale = 0.0;
  for (int64_t i = 0; i < count; i++) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
    den_scale += scale[i] * scale[i];
  }
  if (den_scale > den) den = den_scale;
  EXPECT(den > 0.0, "all-zero forward outputs: the comparison would be vacuous");
  return sqrt(num / den);
}

/* The reduced loss's scale: the same reduction applied to W_n·|lse| of the valid tokens. */
static double loss_scale(const lce_case *c, const lce_tensors *in, const unfused_ref *ref) {
  double s = 0.0;
  for (int64_t i = 0; i < c->n; i++)
    if (in->labels[i] != c->ignore_index) s += unfused_class_weight(c, in, in->labels[i]) * fabs(ref->lse[i]);
  return c->reduction == LCE_RED_MEAN && ref->weight_sum > 0.0 ? s / ref->weight_sum : s;
}

void check_accuracy(const char *name, const lce_case *c) {
  const lce_subject *s = fused_test_subject(name);
  fused_run r = {0};
  unfused_ref ref;
  if (!s || !fused_run_case(s, c, &r)) {
    fused_run_free(&r);
    return;
  }
  if (!unfused_reference(&r.c, &r.in, &ref)) {
    EXPECT(0, "out of memory in the unfused reference");
    fused_run_free(&r);
    return;
  }
  const int64_t n = c->n;
  double *loss_token = floats_to_doubles(r.out.loss_token, n);
  double *lse = floats_to_doubles(r.out.lse, n);
  double *dh = outputs_d_hidden(c, &r.out);
  double *dw = outputs_d_weight_increment(c, &r.in, &r.out);
  if (loss_token && lse && dh && dw) {
    /* An all-ignored batch has loss 0 and no scale: its error is then the absolute one. */
    double loss_den = fmax(fabs(ref.loss), loss_scale(c, &r.in, &ref));
    double e_loss = fabs(r.out.loss[0] - ref.loss);
    if (loss_den > 0) e_loss /= loss_den;
    double e_tok = scaled_err(loss_token, ref.loss_token, ref.lse, n);
    double e_lse = normwise_rel_err(lse, ref.lse, n, "lse");
    double e_dh = gradient_err(dh, ref.d_hidden, n * c->h, "d_hidden");
    double e_dw = gradient_err(dw, ref.d_weight, c->vp * c->h, "d_weight");
    char id[192];
    printf("  %-62s loss %.1e tok %.1e lse %.1e dh %.1e dw %.1e\n", lce_case_format(c, id, sizeof id), e_loss,
           e_tok, e_lse, e_dh, e_dw);
    double fb = forward_bound(c);
    double gb_dh = gradient_bound(c, ref.d_hidden, ref.d_hidden_cond, n * c->h);
    double gb_dw = gradient_bound(c, ref.d_weight, ref.d_weight_cond, c->vp * c->h);
    printf("  %62s bound dh %.1e (%3.0f%%) dw %.1e (%3.0f%%)\n", "", gb_dh, 100 * e_dh / gb_dh, gb_dw,
           100 * e_dw / gb_dw);
    EXPECT(e_loss <= fb, "loss relative error %.3e > %.3e", e_loss, fb);
    EXPECT(e_tok <= fb, "loss_token normwise error %.3e > %.3e", e_tok, fb);
    EXPECT(e_lse <= fb, "lse normwise error %.3e > %.3e", e_lse, fb);
    EXPECT(e_dh <= gb_dh, "d_hidden normwise error %.3e > %.3e", e_dh, gb_dh);
    EXPECT(e_dw <= gb_dw, "d_weight normwise error %.3e > %.3e", e_dw, gb_dw);
    check_padding_untouched(&r);
  }
  free(loss_token), free(lse), free(dh), free(dw);
  unfused_ref_free(&ref);
  fused_run_free(&r);
}

double float_rel_diff(const float *a, const float *b, int64_t count) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < count; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)a[i] * a[i];
  }
  EXPECT(den > 0.0, "all-zero output: the comparison would be vacuous");
  return sqrt(num / den);
}

