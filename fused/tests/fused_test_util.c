/* fused_test_util.c — shared helpers of the fused/ unit tests (see fused_test_util.h). */
#include "fused_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fused_run_on(const lce_subject *s, const lce_case *c, const lce_tensors *in, lce_outputs *out) {
  lce_status st = {0};
  if (lce_outputs_alloc(c, in, out, &st) != LCE_OK) {
    EXPECT(0, "lce_outputs_alloc: %s", st.msg);
    return 0;
  }
  lce_code rc = lce_subject_run(s, c, in, out, &st);
  EXPECT(rc == LCE_OK, "%s run returned %s: %s", s->name, lce_code_name(rc), st.msg);
  char which[128] = "";
  int guards = lce_outputs_guards_intact(c, out, which, sizeof which);
  EXPECT(guards, "%s wrote outside an output buffer: %s", s->name, which);
  return rc == LCE_OK && guards;
}

int fused_run_case(const lce_subject *s, const lce_case *c, fused_run *r) {
  memset(r, 0, sizeof *r);
  r->c = *c;
  lce_test_set_case(&r->c);
  lce_status st = {0};
  if (lce_case_generate(&r->c, &r->in, &st) != LCE_OK) {
    EXPECT(0, "lce_case_generate: %s", st.msg);
    return 0;
  }
  return fused_run_on(s, &r->c, &r->in, &r->out);
}

void fused_run_free(fused_run *r) {
  lce_outputs_free(&r->out);
  lce_tensors_free(&r->in);
  lce_test_set_case(NULL);
}

const lce_subject *fused_test_subject(const char *name) {
  const lce_subject *s = lce_subject_find(name);
  EXPECT(s != NULL, "subject %s is not registered", name);
  return s;
}

/* ---- the unfused double-precision computation ------------------------------------------------ */

/* What the GEMMs of a case read: a dtype value, rounded to tf32 with tf32 GEMMs. */
static double gemm_input(const lce_case *c, const void *buf, size_t i) {
  double x = lce_load(c->dtype, buf, i);
  return c->gemm == LCE_GEMM_TF32 ? lce_round_tf32(x) : x;
}

double unfused_class_weight(const lce_case *c, const lce_tensors *in, int64_t v) {
  return c->class_weights ? (double)in->class_weight[v] : 1.0;
}

double unfused_weight_sum(const lce_case *c, const lce_tensors *in) {
  double sum = 0.0;
  for (int64_t i = 0; i < c->n; i++)
    if (in->labels[i] != c->ignore_index) sum += unfused_class_weight(c, in, in->labels[i]);
  return sum;
}

/* Token i's loss gradient g (lce_case.h): 0 when ignored or when no token carries weight. */
static double token_g(const lce_case *c, const lce_tensors *in, int64_t i, double weight_sum) {
  if (in->labels[i] == c->ignore_index) return 0.0;
  if (c->reduction == LCE_RED_NONE) return in->grad_output[i];
  if (c->reduction == LCE_RED_SUM) return in->grad_output[0];
  return weight_sum > 0.0 ? (double)in->grad_output[0] / weight_sum : 0.0;
}

int unfused_reference(const lce_case *c, const lce_tensors *in, unfused_ref *r) {
  const int64_t n = c->n, h = c->h, v = c->v;
  const void *w = lce_output_weight(c, in);
  memset(r, 0, sizeof *r);
  r->loss_token = calloc((size_t)n, sizeof(double));
  r->lse = calloc((size_t)n, sizeof(double));
  r->d_hidden = calloc((size_t)(n * h), sizeof(double));
  r->d_weight = calloc((size_t)(c->vp * h), sizeof(double));
  r->d_hidden_cond = calloc((size_t)(n * h), sizeof(double));
  r->d_weight_cond = calloc((size_t)(c->vp * h), sizeof(double));
  double *z = calloc((size_t)v, sizeof(double)), *a = calloc((size_t)v, sizeof(double));
  if (!r->loss_token || !r->lse || !r->d_hidden || !r->d_weight || !r->d_hidden_cond || !r->d_weight_cond || !z ||
      !a) {
    free(z), free(a);
    unfused_ref_free(r);
    return 0;
  }
  const double e = lce_case_smoothing(c), ev = e / (double)v, lambda = lce_case_z_loss(c), cap = c->softcap;
  const int weighted = e > 0.0 || c->class_weights; /* the constant terms of dz are not exactly 1 */
  double sw = 0.0;
  for (int64_t j = 0; j < v; j++) sw += unfused_class_weight(c, in, j);
  r->weight_sum = unfused_weight_sum(c, in);
  double loss_sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double zmax = -INFINITY, s = 0.0, amax = 0.0;
    for (int64_t j = 0; j < v; j++) {
      double acc = 0.0, abs_acc = 0.0;
      for (int64_t k = 0; k < h; k++) {
        double t = gemm_input(c, in->hidden, (size_t)(i * h + k)) * gemm_input(c, w, (size_t)(j * h + k));
        acc += t, abs_acc += fabs(t);
      }
      z[j] = cap > 0.0 ? cap * tanh(acc / cap) : acc, a[j] = abs_acc;
      if (z[j] > zmax) zmax = z[j];
      if (abs_acc > amax) amax = abs_acc;
    }
    for (int64_t j = 0; j < v; j++) s += exp(z[j] - zmax);
    const double lse = r->lse[i] = zmax + log(s);
    const int64_t y = in->labels[i];
    const int valid = y != c->ignore_index;
    const double wy = valid ? (1.0 - e) * unfused_class_weight(c, in, y) : 0.0;
    if (valid) {
      double smooth = 0.0;
      for (int64_t j = 0; j < v && e > 0.0; j++) smooth += unfused_class_weight(c, in, j) * (lse - z[j]);
      r->loss_token[i] = wy * (lse - z[y]) + ev * smooth + lambda * lse * lse;
    }
    loss_sum += r->loss_token[i];
    const double g = token_g(c, in, i, r->weight_sum), kf = wy + ev * sw + 2.0 * lambda * lse;
    for (int64_t j = 0; j < v && g != 0.0; j++) {
      double p = exp(z[j] - lse), wj = unfused_class_weight(c, in, j);
      double konst = (j == y ? wy : 0.0) + ev * wj;
      double dz = g * (p * kf - konst);
      double ds = cap > 0.0 ? dz * (1.0 - (z[j] / cap) * (z[j] / cap)) : dz;
      double cond = fabs(g) * (p * fabs(kf) * (1.0 + a[j] + amax) + (weighted ? konst : 0.0)) +
                    (cap > 0.0 ? 4.0 * fabs(dz) : 0.0);
      for (int64_t k = 0; k < h; k++) {
        double wk = gemm_input(c, w, (size_t)(j * h + k));
        double hk = gemm_input(c, in->hidden, (size_t)(i * h + k));
        r->d_hidden[i * h + k] += ds * wk;
        r->d_weight[j * h + k] += ds * hk;
        r->d_hidden_cond[i * h + k] += cond * fabs(wk);
        r->d_weight_cond[j * h + k] += cond * fabs(hk);
      }
    }
  }
  r->loss = c->reduction == LCE_RED_MEAN ? (r->weight_sum > 0.0 ? loss_sum / r->weight_sum : 0.0) : loss_sum;
  free(z), free(a);
  return 1;
}

void unfused_ref_free(unfused_ref *r) {
  free(r->loss_token);
  free(r->lse);
  free(r->d_hidden);
  free(r->d_weight);
  free(r->d_hidden_cond);
  free(r->d_weight_cond);
  memset(r, 0, sizeof *r);
}

/* ---- comparisons --------------------------------------------------------------------------- */

double normwise_rel_err(const double *x, const double *ref, int64_t count, const char *what) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < count; i++) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  EXPECT(den > 0.0, "%s: reference is all zero, the comparison would be vacuous", what);
  return den > 0.0 ? sqrt(num / den) : INFINITY;
}

double norm2(const double *x, int64_t count) {
  double s = 0.0;
  for (int64_t i = 0; i < count; i++) s += x[i] * x[i];
  return sqrt(s);
}

double *outputs_d_hidden(const lce_case *c, const lce_outputs *out) {
  double *x = malloc((size_t)(c->n * c->h) * sizeof *x);
  EXPECT(x != NULL, "out of memory");
  for (int64_t e = 0; x && e < c->n * c->h; e++) x[e] = lce_load(c->dtype, out->d_hidden, (size_t)e);
  return x;
}

double d_hidden_err(const lce_case *c, const lce_outputs *out, const unfused_ref *ref) {
  double *dh = outputs_d_hidden(c, out);
  double e = dh ? normwise_rel_err(dh, ref->d_hidden, c->n * c->h, "d_hidden") : 1.0;
  free(dh);
  return e;
}

double *outputs_d_weight_increment(const lce_case *c, const lce_tensors *in, const lce_outputs *out) {
  const float *buf = lce_output_weight_grad(c, out);
  const float *prior = lce_output_weight_prior(c, in);
  double *x = malloc((size_t)(c->vp * c->h) * sizeof *x);
  EXPECT(x != NULL, "out of memory");
  for (int64_t e = 0; x && e < c->vp * c->h; e++) x[e] = (double)buf[e] - (double)prior[e];
  return x;
}

double *floats_to_doubles(const float *x, int64_t count) {
  double *d = malloc((size_t)count * sizeof *d);
  EXPECT(d != NULL, "out of memory");
  for (int64_t i = 0; d && i < count; i++) d[i] = x[i];
  return d;
}
