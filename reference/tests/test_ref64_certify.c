/* test_ref64_certify.c — certifies tier 2 (fp64 on the GPU, reference/gpu/lce_ref64.h) against tier 0
 * (MPFR, lce_oracle.h) at shapes tier 0 does in seconds: for every case of CASES (every dtype, tied
 * and untied, tp 1/2/8, every option, the hard distributions, non-finite inputs, an all-ignored
 * batch, V up to 32k with small N) and every element of every output:
 *   - classes equal (NaN, +Inf, -Inf, finite);
 *   - |v64 - v_mpfr| <= err64 + err_mpfr (tier 2's stated bound holds);
 *   - where both are decisive, the format values are identical;
 *   - mag and emag equal tier 0's to 1e-9 relative (the same definitions, evaluated in another order);
 *   - rnd (the gradients' coherent d_logit rounding, lce_ref_output.rnd; tier 0 takes tier 1's): every
 *     element within 1e-9 mag of tier 0's, but where a d_logit sits so near a rounding boundary of
 *     its format that dz's fp64 error flips it (within u_format mag; at most 1% of the elements), and
 *     the bias it gives, sum (rnd - r) r / sum r r, within 1e-6 relative (+1e-15) of tier 0's;
 *   - the judge's softmax-sum replay (term rsum), which tier 2 computes on the GPU from its DGEMM's logits,
 *     equal to tier 1's (the host replay) within 1e-6 relative (a term whose fp32 rounding the two doubles
 *     flip would part them; none does on these cases); tf32 cases have none from tier 2 (lce_ref64.h);
 *   - tier 2 decisive on at least half of the elements tier 0 is decisive on (printed per output:
 *     fp32 outputs need err below 2^-36 of the value, which the a-priori gamma(H) logit bound reaches
 *     only where an element does not cancel much; bf16/fp16 d_hidden should be ~100%).
 * A table per case: outputs, max |v64 - v_mpfr| / err64, % decisive, worst mag/emag mismatch.
 * A negative control runs first: one element of a tier-2 result is moved by 4 (err64 + err_mpfr)
 * and the same checks must flag it (so a wrong kernel cannot pass through a blind comparator).
 * Label gpu; exits 77 without a GPU. Run: ctest --test-dir build -R test_ref64_certify -V */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_fast.h"
#include "lce_oracle.h"
#include "lce_ref64.h"
#include "lce_test.h"

static const char *const CASES[] = {
    "bf16.untied.tp1.n64.h256.v4096.vp4096.vc512.mean.ign10.prior.mixed.s1",
    "fp16.tied.tp2.n64.h256.v4096.vp4096.vc512.none.ign10.fresh.hard.s2",
    "fp32.untied.tp8.n32.h128.v2000.vp2048.vc64.sum.ign0.prior.mixed.s3",
    "fp32.tied.tp1.n32.h128.v2048.vp2048.vc256.mean.ign10.tf32.fresh.normal.s4",
    "bf16.untied.tp1.n32.h128.v2048.vp2048.vc256.mean.ign10.ls100.fresh.normal.s5",
    "bf16.tied.tp2.n32.h128.v2048.vp2048.vc256.mean.ign10.lsm100.zl10.prior.mixed.s6",
    "bf16.untied.tp1.n32.h128.v2048.vp2048.vc256.mean.ign10.sc30.fresh.big.s7",
    "fp16.untied.tp2.n32.h128.v2048.vp2048.vc256.mean.ign25.cw.prior.normal.s8",
    "bf16.untied.tp2.n32.h64.v1000.vp1024.vc128.mean.ign10.prior.poison.s9",
    "bf16.tied.tp1.n16.h64.v1024.vp1024.vc128.mean.ign100.prior.normal.s10",
    "bf16.untied.tp1.n32.h128.v2048.vp2048.vc256.sum.ign0.fresh.negative.s11",
    "fp16.untied.tp1.n16.h64.v1024.vp1024.vc128.mean.ign0.fresh.subnormal.s12",
    "bf16.untied.tp1.n32.h128.v2048.vp2048.vc256.mean.ign0.fresh.confident.s13",
    "bf16.untied.tp1.n8.h64.v32000.vp32000.vc4096.mean.ign0.fresh.normal.s14",
    "fp32.untied.tp1.n16.h64.v1000.vp1280.vc128.none.ign10.tc4.prior.ties.s15",
    "bf16.untied.tp1.n16.h64.v1024.vp1024.vc128.mean.ign0.ls50.zl100.sc20.cw.prior.hard.s16",
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static int nan_class(double x) { return isnan(x) ? 1 : (isinf(x) ? (x > 0 ? 2 : 3) : 0); }

static double rel_diff(double a, double b) {
  const double s = fmax(fabs(a), fabs(b));
  return s == 0.0 ? 0.0 : fabs(a - b) / s;
}

typedef struct output_stats {
  int64_t count, violations, class_mismatch, rounded_mismatch, dec64, dec0, dec_both;
  double worst_ratio; /* max |v64 - v0| / err64 over finite elements */
  double worst_mag;   /* max relative mag / emag difference */
  int64_t rnd_off;    /* rnd elements beyond 1e-9 mag of tier 0's (boundary flips) */
  int64_t rnd_bad;    /* beyond u_format mag: not a flip */
  double rnd_bias64, rnd_bias0;
  int64_t first_bad;
} output_stats;

/* Compares one output element by element; counts every failed check. */
static void compare_output(const lce_ref_output *a, const lce_ref_output *b, double u_format, output_stats *s) {
  memset(s, 0, sizeof *s);
  s->first_bad = -1;
  s->count = a->count;
  double rr = 0.0, rb64 = 0.0, rb0 = 0.0;
  for (int64_t i = 0; i < a->count; i++) {
    const double v = a->value[i], w = b->value[i];
    int bad = 0;
    if (nan_class(v) != nan_class(w)) {
      s->class_mismatch++;
      bad = 1;
    } else if (nan_class(v) == 0) {
      const double d = fabs(v - w);
      if (!(d <= a->err[i] + b->err[i])) s->violations++, bad = 1;
      if (a->err[i] > 0.0 && isfinite(a->err[i])) s->worst_ratio = fmax(s->worst_ratio, d / a->err[i]);
      else if (d > 0.0 && a->err[i] == 0.0) s->worst_ratio = INFINITY;
    }
    s->dec64 += a->decisive[i];
    s->dec0 += b->decisive[i];
    if (a->decisive[i] && b->decisive[i]) {
      s->dec_both++;
      const double x = a->rounded[i], y = b->rounded[i];
      if (!(x == y || (isnan(x) && isnan(y)))) s->rounded_mismatch++, bad = 1;
    }
    const double m = fmax(rel_diff(a->mag[i], b->mag[i]), rel_diff(a->emag[i], b->emag[i]));
    s->worst_mag = fmax(s->worst_mag, m);
    if (!(m <= 1e-9)) bad = 1;
    if (a->rnd && b->rnd && nan_class(w) == 0 && nan_class(b->rnd[i]) == 0) {
      const double d = fabs(a->rnd[i] - b->rnd[i]);
      s->rnd_off += !(d <= 1e-9 * b->mag[i]);
      if (!(d <= (1e-9 + u_format) * b->mag[i])) s->rnd_bad++, bad = 1;
      rr += w * w, rb64 += (a->rnd[i] - w) * w, rb0 += (b->rnd[i] - w) * w;
    }
    if (bad && s->first_bad < 0) s->first_bad = i;
  }
  s->rnd_bias64 = rr > 0.0 ? rb64 / rr : 0.0, s->rnd_bias0 = rr > 0.0 ? rb0 / rr : 0.0;
  if (a->rnd && b->rnd && (s->rnd_off > s->count / 100 || !(fabs(s->rnd_bias64 - s->rnd_bias0) <=
                                                            1e-6 * fabs(s->rnd_bias0) + 1e-15)))
    s->rnd_bad++;
}

/* Runs both tiers on one case and checks every output; prints one table row per output. Returns the
 * number of failed checks. negative: perturb one element of tier 2 first (the control). */
static int64_t certify_case(const char *id, int negative, int64_t *dec64_total, int64_t *dec0_total) {
  lce_case c;
  lce_tensors in;
  lce_status st;
  lce_status_clear(&st);
  if (lce_case_parse(id, &c, &st) != LCE_OK || lce_case_generate(&c, &in, &st) != LCE_OK) {
    EXPECT(0, "case %s: %s", id, st.msg);
    return 1;
  }
  lce_oracle_result r64, r0;
  lce_code rc64 = lce_ref64_oracle(&c, &in, &r64, &st);
  EXPECT(rc64 == LCE_OK, "case %s: ref64: %s", id, st.msg);
  lce_code rc0 = rc64 == LCE_OK ? lce_oracle_run(&c, &in, &r0, &st) : LCE_EINTERNAL;
  EXPECT(rc64 != LCE_OK || rc0 == LCE_OK, "case %s: mpfr oracle: %s", id, st.msg);
  if (rc0 == LCE_OK) { /* tier 0's rnd is tier 1's, as the tier registry gives it (lce_reference.c) */
    lce_oracle_result r1;
    lce_status st1;
    lce_status_clear(&st1);
    const lce_code rc1 = lce_fast_run(&c, &in, &r1, NULL, &st1);
    EXPECT(rc1 == LCE_OK, "case %s: tier 1: %s", id, st1.msg);
    if (rc1 == LCE_OK && rc64 == LCE_OK) {
      const int tf32 = c.gemm == LCE_GEMM_TF32;
      EXPECT(r64.has_rsum == !tf32 && r1.has_rsum && (tf32 || fabs(r64.rsum_rel - r1.rsum_rel) <= 1e-6 * r1.rsum_rel),
             "case %s: softmax-sum replay on the GPU %.9g (has %d), tier 1's %.9g", id, r64.rsum_rel, r64.has_rsum,
             r1.rsum_rel);
      printf("%-74s %-11s %.9g (tier 1 %.9g)\n", id, "rsum", r64.rsum_rel, r1.rsum_rel);
    }
    for (int o = LCE_OUT_D_HIDDEN; o <= LCE_OUT_D_WEIGHT && rc1 == LCE_OK; o++)
      r0.out[o].rnd = r1.out[o].rnd, r1.out[o].rnd = NULL;
    if (rc1 == LCE_OK) lce_oracle_free(&r1);
  }
  int64_t bad = (rc64 != LCE_OK) + (rc64 == LCE_OK && rc0 != LCE_OK);
  if (rc64 == LCE_OK && rc0 == LCE_OK) {
    if (negative) { /* move the first finite d_hidden element with a bound well outside both bounds */
      lce_ref_output *o = &r64.out[LCE_OUT_D_HIDDEN];
      for (int64_t i = 0; i < o->count; i++)
        if (isfinite(o->value[i]) && r0.out[LCE_OUT_D_HIDDEN].err[i] < INFINITY) {
          o->value[i] += 4.0 * (o->err[i] + r0.out[LCE_OUT_D_HIDDEN].err[i]) + 1e-30;
          break;
        }
    }
    for (int o = 0; o < LCE_OUT_COUNT; o++) {
      if (r64.out[o].count == 0 && r0.out[o].count == 0) continue;
      output_stats s;
      EXPECT(r64.out[o].count == r0.out[o].count, "case %s %s: %lld elements, mpfr %lld", id,
             lce_output_name((lce_output_id)o), (long long)r64.out[o].count, (long long)r0.out[o].count);
      if (r64.out[o].count != r0.out[o].count) {
        bad++;
        continue;
      }
      const int rnd_both = r64.out[o].rnd != NULL && r0.out[o].rnd != NULL;
      if (o == LCE_OUT_D_HIDDEN || o == LCE_OUT_D_WEIGHT)
        EXPECT((r64.out[o].rnd != NULL) == (r0.out[o].rnd != NULL), "case %s %s: rnd in tier 2 %d, tier 0 %d", id,
               lce_output_name((lce_output_id)o), r64.out[o].rnd != NULL, r0.out[o].rnd != NULL);
      compare_output(&r64.out[o], &r0.out[o], ldexp(1.0, -lce_dtype_precision(c.dtype)), &s);
      const int64_t fails = s.violations + s.class_mismatch + s.rounded_mismatch + (s.worst_mag > 1e-9) + s.rnd_bad;
      printf("%-74s %-11s %9lld %10.3g %7.2f%% %7.2f%% %9.2g %s\n", id, lce_output_name((lce_output_id)o),
             (long long)s.count, s.worst_ratio, 100.0 * (double)s.dec64 / (double)s.count,
             100.0 * (double)s.dec0 / (double)s.count, s.worst_mag, fails ? "FAIL" : "ok");
      if (rnd_both)
        printf("%-74s %-11s rnd bias %.9g (tier 0 %.9g), %lld elements beyond 1e-9 mag\n", "", "",
               s.rnd_bias64, s.rnd_bias0, (long long)s.rnd_off);
      if (fails && !negative) {
        const int64_t i = s.first_bad >= 0 ? s.first_bad : 0;
        EXPECT(0, "case %s %s: %lld bound violations, %lld class, %lld rounded mismatches, mag diff %.3g, rnd %lld; first at %lld: "
               "v64 %.17g err64 %.3g, mpfr %.17g err %.3g, mag %.17g/%.17g emag %.17g/%.17g",
               id, lce_output_name((lce_output_id)o), (long long)s.violations, (long long)s.class_mismatch,
               (long long)s.rounded_mismatch, s.worst_mag, (long long)s.rnd_bad, (long long)i, r64.out[o].value[i], r64.out[o].err[i],
               r0.out[o].value[i], r0.out[o].err[i], r64.out[o].mag[i], r0.out[o].mag[i], r64.out[o].emag[i],
               r0.out[o].emag[i]);
      }
      bad += fails;
      *dec64_total += s.dec64;
      *dec0_total += s.dec0;
    }
  }
  if (rc64 == LCE_OK) lce_oracle_free(&r64);
  if (rc0 == LCE_OK) lce_oracle_free(&r0);
  lce_tensors_free(&in);
  return bad;
}

/* The device memory a production case needs (arithmetic: runs without a GPU too). No tier keeps an
 * untied case's d_embedding (lce_output_reference_count), so tied and untied need the same, and
 * 16384 x 8192 x 152064 with its magnitudes fits an H200's 139 GiB. */
static void check_device_bytes(void) {
  lce_case c;
  lce_status st;
  EXPECT(lce_case_parse("bf16.untied.tp1.n16384.h8192.v152064.vp152064.vc4096.mean.ign5.fresh.normal.s1", &c, &st) ==
             LCE_OK, "case: %s", st.msg);
  const lce_ref64_options mags = {0};
  const size_t untied = lce_ref64_device_bytes(&c, &mags);
  EXPECT((double)untied < 139.0 * 0x1p30, "16384 x 8192 x 152064 with magnitudes: %.1f GiB", (double)untied / 0x1p30);
  c.tied = 1;
  EXPECT(lce_ref64_device_bytes(&c, &mags) == untied, "tied %zu bytes, untied %zu: d_embedding kept",
         lce_ref64_device_bytes(&c, &mags), untied);
}

int main(void) {
  check_device_bytes();
  char why[160];
  if (!lce_device_query(NULL, why, sizeof why)) {
    if (lce_test_failures) return lce_test_finish("test_ref64_certify");
    printf("test_ref64_certify: skipped: %s\n", why);
    return 77;
  }
  printf("%-74s %-11s %9s %10s %8s %8s %9s\n", "case", "output", "elements", "max d/e64", "dec64", "dec_mpfr",
         "mag diff");
  int64_t d64 = 0, d0 = 0;
  printf("-- negative control (one d_hidden element moved by 4 (err64 + err_mpfr)): must FAIL\n");
  const int64_t caught = certify_case(CASES[0], 1, &d64, &d0);
  EXPECT(caught > 0, "negative control: a moved element passed the checks");
  d64 = d0 = 0;
  printf("-- certification\n");
  for (size_t i = 0; i < NCASES; i++) certify_case(CASES[i], 0, &d64, &d0);
  const double frac = d0 > 0 ? (double)d64 / (double)d0 : 0.0;
  printf("tier 2 decisive on %lld elements, tier 0 on %lld: %.4f\n", (long long)d64, (long long)d0, frac);
  EXPECT(frac >= 0.5, "tier 2 decisive on only %.2f%% of what tier 0 decides", 100.0 * frac);
  if (!lce_test_failures) printf("tier 2 certified on %zu cases\n", NCASES);
  return lce_test_finish("test_ref64_certify");
}
