/* oracle_check.c — helpers shared by the oracle's test files (oracle_check.h). */
#include "oracle_check.h"

#include <stdlib.h>
#include <string.h>

#include "lce_mpfr_dtype.h"
#include "lce_prng.h"

const char *id_of(const lce_case *c) {
  static char buf[200];
  return lce_case_format(c, buf, sizeof buf);
}

int same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

lce_case make_case(lce_dtype t, int64_t n, int64_t h, int64_t v, lce_dist d, lce_reduction r, int tied) {
  lce_case c = lce_case_default();
  c.dtype = t, c.n = n, c.h = h, c.v = v, c.vp = v, c.dist = d, c.reduction = r, c.tied = tied;
  c.seed = lce_test_seed();
  return c;
}

void gen(const lce_case *c, lce_tensors *t) {
  lce_status st = {0};
  if (lce_case_generate(c, t, &st) != LCE_OK) {
    fprintf(stderr, "generate %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
}

void run(const lce_case *c, const lce_tensors *t, lce_oracle_result *r) {
  lce_status st = {0};
  if (lce_oracle_run(c, t, r, &st) != LCE_OK) {
    fprintf(stderr, "oracle %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
}

int within(double value, double err, mpfr_srcptr x, double slack) {
  mpfr_t d;
  mpfr_init2(d, 600);
  mpfr_sub_d(d, x, value, MPFR_RNDN);
  int ok = fabs(mpfr_get_d(d, MPFR_RNDA)) <= err + slack;
  mpfr_clear(d);
  return ok;
}

void expect_output_identical(const lce_oracle_result *a, const lce_oracle_result *b, lce_output_id o,
                                    int exact_err, const char *what) {
  const lce_ref_output *x = &a->out[o], *y = &b->out[o];
  EXPECT(x->count == y->count, "%s %s: counts differ", what, lce_output_name(o));
  if (x->count != y->count) return;
  for (int64_t i = 0; i < x->count; i++) {
    int err_ok = exact_err ? same(x->err[i], y->err[i]) : fabs(x->err[i] - y->err[i]) <= 1e-12 * x->err[i];
    int ok = same(x->value[i], y->value[i]) && err_ok && same(x->rounded[i], y->rounded[i]) &&
             x->decisive[i] == y->decisive[i];
    EXPECT(ok, "%s %s[%lld]: %.17g vs %.17g", what, lce_output_name(o), (long long)i, x->value[i], y->value[i]);
    if (!ok) return;
  }
}

static void objective(const lce_case *c, const lce_tensors *t, lce_mp_array *hm, lce_mp_array *wm, mpfr_t out) {
  lce_status st = {0};
  if (lce_oracle_objective(c, t, hm->x, wm->x, 400, out, &st) != LCE_OK) {
    fprintf(stderr, "objective %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
}

/* dJ/dx by central differences at step 2^-40 (truncation ~1e-24 relative), x one element. */
static double central_difference(const lce_case *c, const lce_tensors *t, lce_mp_array *hm, lce_mp_array *wm,
                                 mpfr_ptr x) {
  mpfr_t jp, jm, x0;
  mpfr_inits2(400, jp, jm, x0, (mpfr_ptr)0);
  mpfr_set(x0, x, MPFR_RNDN);
  mpfr_add_d(x, x0, 0x1p-40, MPFR_RNDN);
  objective(c, t, hm, wm, jp);
  mpfr_sub_d(x, x0, 0x1p-40, MPFR_RNDN);
  objective(c, t, hm, wm, jm);
  mpfr_set(x, x0, MPFR_RNDN);
  mpfr_sub(jp, jp, jm, MPFR_RNDN);
  mpfr_mul_2si(jp, jp, 39, MPFR_RNDN);
  double d = mpfr_get_d(jp, MPFR_RNDN);
  mpfr_clears(jp, jm, x0, (mpfr_ptr)0);
  return d;
}

/* An input element as the math reads it (tf32-rounded with tf32 GEMMs). */
static double input_value(const lce_case *c, const void *buf, int64_t i) {
  double x = lce_load(c->dtype, buf, (size_t)i);
  return c->gemm == LCE_GEMM_TF32 ? lce_round_tf32(x) : x;
}

void check_gradients_fd(const lce_case *c, const lce_tensors *t, const lce_oracle_result *r, int samples,
                        uint64_t stream, mpfr_srcptr naive) {
  lce_mp_array hm, wm;
  lce_status st = {0};
  if (lce_mp_array_init(&hm, c->n * c->h, 256, &st) || lce_mp_array_init(&wm, c->v * c->h, 256, &st)) exit(2);
  const void *w = lce_output_weight(c, t);
  for (int64_t j = 0; j < c->n * c->h; j++) mpfr_set_d(hm.x[j], input_value(c, t->hidden, j), MPFR_RNDN);
  for (int64_t j = 0; j < c->v * c->h; j++) mpfr_set_d(wm.x[j], input_value(c, w, j), MPFR_RNDN);
  if (naive != NULL) {
    mpfr_t j0;
    mpfr_init2(j0, 400);
    objective(c, t, &hm, &wm, j0);
    mpfr_sub(j0, j0, naive, MPFR_RNDN);
    EXPECT(fabs(mpfr_get_d(j0, MPFR_RNDA)) <= 1e-90 * (1.0 + fabs(mpfr_get_d(naive, MPFR_RNDN))),
           "%s objective off the direct sum of g * loss by %g", id_of(c), mpfr_get_d(j0, MPFR_RNDN));
    mpfr_clear(j0);
  }
  const float *prior = lce_output_weight_prior(c, t);
  for (int s = 0; s < samples; s++) {
    int64_t e = (int64_t)lce_rand_below(lce_test_seed(), stream, (uint64_t)s, (uint64_t)(c->n * c->h));
    double fd = central_difference(c, t, &hm, &wm, hm.x[e]);
    double v = r->out[LCE_OUT_D_HIDDEN].value[e], err = r->out[LCE_OUT_D_HIDDEN].err[e];
    EXPECT(fabs(fd - v) <= err + 1e-18 * (r->out[LCE_OUT_D_HIDDEN].mag[e] + 1e-30),
           "%s d_hidden[%lld] %.17g vs fd %.17g", id_of(c), (long long)e, v, fd);
    e = (int64_t)lce_rand_below(lce_test_seed(), stream + 1000, (uint64_t)s, (uint64_t)(c->v * c->h));
    fd = central_difference(c, t, &hm, &wm, wm.x[e]);
    v = r->out[LCE_OUT_D_WEIGHT].value[e] - prior[e]; /* exact for a fresh (zero) prior */
    EXPECT(fabs(fd - v) <= r->out[LCE_OUT_D_WEIGHT].err[e] + 1e-18 * (r->out[LCE_OUT_D_WEIGHT].mag[e] + 1e-30),
           "%s d_weight[%lld] %.17g vs fd %.17g", id_of(c), (long long)e, v, fd);
  }
  lce_mp_array_free(&hm);
  lce_mp_array_free(&wm);
}

void self_proof(const lce_case *c) {
  lce_tensors t;
  gen(c, &t);
  lce_oracle_result lo, hi;
  lce_oracle_mp mlo, mhi;
  lce_status st = {0};
  if (lce_oracle_run_prec(c, &t, 160, &lo, &mlo, &st) || lce_oracle_run_prec(c, &t, 320, &hi, &mhi, &st)) {
    fprintf(stderr, "self-proof %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
  mpfr_t d;
  mpfr_init2(d, 700);
  double tight = 0.0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *r = &lo.out[o];
    double norm = 0.0;
    int non_finite = 0;
    for (int64_t i = 0; i < r->count; i++) {
      mpfr_srcptr vl = mlo.value[o].x[i], vh = mhi.value[o].x[i];
      double el = mlo.err_mp[o][i], eh = mhi.err_mp[o][i];
      if (!mpfr_number_p(vl)) { /* poisoned (NaN) or a non-finite prior: exact, and the same at 320 bits */
        EXPECT(el == 0.0 && r->err[i] == 0.0 && r->decisive[i] && (mpfr_nan_p(vl) ? mpfr_nan_p(vh) : mpfr_equal_p(vl, vh)) && same(r->rounded[i], hi.out[o].rounded[i]),
               "%s %s[%lld] non-finite", id_of(c), lce_output_name((lce_output_id)o), (long long)i);
        non_finite = 1;
        continue;
      }
      mpfr_sub(d, vl, vh, MPFR_RNDN);
      double diff = fabs(mpfr_get_d(d, MPFR_RNDA));
      EXPECT(diff <= el + eh, "%s %s[%lld]: |v160 - v320| = %g > err %g + %g", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i, diff, el, eh);
      /* A proven zero (lce_zero_d_hidden_columns) carries the same 2^-1074 at any precision. */
      const int proven_zero = mpfr_zero_p(vl) && mpfr_zero_p(vh) && el == LCE_EXACT_ZERO_ERR && eh == el;
      EXPECT(eh <= el * 0x1p-100 || el == 0.0 || !isfinite(el) || proven_zero, "%s %s[%lld]: err320 %g not << err160 %g", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i, eh, el);
      if (el > 0.0 && diff / el > tight) tight = diff / el;
      mpfr_sub_d(d, vh, r->value[i], MPFR_RNDN); /* the public double against the better value */
      EXPECT(fabs(mpfr_get_d(d, MPFR_RNDA)) <= r->err[i] + eh, "%s %s[%lld]: value off by more than err", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i);
      lce_dtype fmt = lce_output_format(c, (lce_output_id)o);
      EXPECT(same(r->rounded[i], lce_mpfr_round_to(fmt, vl)), "%s %s[%lld]: rounded", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i);
      if (r->decisive[i]) {
        /* Numerically: a certified zero may carry either sign (see certify in lce_oracle.c). */
        EXPECT(r->rounded[i] == hi.out[o].rounded[i], "%s %s[%lld]: decisive but rounds differently at 320 bits",
               id_of(c), lce_output_name((lce_output_id)o), (long long)i);
        EXPECT(r->err[i] <= ldexp(lce_ulp(fmt, r->value[i]), -12), "%s %s[%lld]: decisive with err %g", id_of(c),
               lce_output_name((lce_output_id)o), (long long)i, r->err[i]);
      }
      /* A sum of |terms| bounds the sum; the error scale weights those terms by a condition >= 1. */
      EXPECT(r->mag[i] >= fabs(r->value[i]) * (1.0 - 1e-12) && r->emag[i] >= r->mag[i] * (1.0 - 1e-12),
             "%s %s[%lld]: value %g, mag %g, emag %g", id_of(c), lce_output_name((lce_output_id)o), (long long)i,
             r->value[i], r->mag[i], r->emag[i]);
      norm += r->value[i] * r->value[i];
    }
    if (o != LCE_OUT_LOSS && r->count > 0 && lo.n_valid > 0 && !non_finite)
      EXPECT(norm > 0.0, "%s %s: zero norm", id_of(c), lce_output_name((lce_output_id)o));
  }
  /* Inconclusive elements are the rare exactly-cancelling ones (W's constant column 0 makes
   * d_hidden[n, 0] = g (sum_v p_v - 1) = 0): at most 2% here. */
  EXPECT(lo.decisive > 0 && lo.decisive >= lo.total - lo.total / 50, "%s: decisive %lld of %lld", id_of(c),
         (long long)lo.decisive, (long long)lo.total);
  /* Not absurdly loose: somewhere the bound is within 2^40 of the actual difference. */
  EXPECT(tight > 0x1p-40, "%s: bounds loose, max |v160 - v320|/err = %g", id_of(c), tight);
  printf("  %-58s decisive %6lld/%-6lld worst rel err %.2e (mpfr %.2e) tightness %.2e\n", id_of(c),
         (long long)lo.decisive, (long long)lo.total, lo.worst_rel_err, mlo.worst_rel_err_mp, tight);
  mpfr_clear(d);
  lce_oracle_free(&lo);
  lce_oracle_free(&hi);
  lce_oracle_mp_free(&mlo);
  lce_oracle_mp_free(&mhi);
  lce_tensors_free(&t);
}

