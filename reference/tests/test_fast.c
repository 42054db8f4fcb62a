/* test_fast.c — tier 1 (lce_fast.h) against tier 0 (lce_oracle.h), element by element, over every
 * dtype, reduction, loss option and input distribution (poisoned inputs and priors included):
 *   - every element decisive in both tiers has the same rounded value (a zero's sign is that of each
 *     tier's approximation of a value below the format's range, so +0 and -0 count as equal);
 *   - |value_fast - value_mpfr| <= err_fast + err_mpfr (tier 1's bound holds: tier 0 is ~1e-45);
 *   - non-finite elements identical (class, err 0, decisive), and so are the exact zeros (value 0 with
 *     err 0: the judge requires those bit for bit);
 *   - mag and emag equal to tier 0's within 1e-12 relative (the same sums, regrouped);
 *   - tier 1 is as decisive as tier 0 (escalation), and without escalation its own bound already
 *     decides most elements;
 *   - the same bits with 1 and 4 threads, and with 5 token rows in flight instead of all, also where
 *     every tile of tier 1's passes is cut short (tokens, vocab rows and columns);
 *   - the softmax-sum replay tier 1 hands the judge (rsum_rel) is the judge's own, from the plain
 *     logits, bit for bit (and non-zero somewhere);
 *   - with memory for tier 1 but not for tier 0 ($LCE_MEMORY_LIMIT), undecided elements stay so;
 *   - tier 0 handed tier 1's exact logits computes the same bits, also in vocab blocks;
 *   - the memory estimate of a large N V case does not grow with N V;
 *   - the tensor cores' alignment excess (tcex) where a GEMM operand is subnormal: lse's recomputed
 *     from the tensors bit for bit, loss_token's from it, the gradients' only in columns with one;
 *   - the double-double exp of the refinement step (lce_fast_refine.c) within FAST_DD_EXP of MPFR's
 *     on random arguments over its range; the step decides some elements of these cases, and with
 *     refine_all every gradient element of the cases it covers passes the checks above;
 * and a negative control: the tier-1 values pushed by 3x their bound must fail the bound check.
 * Prints the elements compared, the worst |fast - mpfr| / (err_fast + err_mpfr) and escalations.
 * Seed: $LCE_TEST_SEED (default 1); failures print the case id. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "lce_fast_internal.h"
#include "lce_oracle.h"
#include "lce_prng.h"
#include "lce_test.h"

static int64_t rsum_nonzero, unescalated_checked, compared, escalated, refined, refined_all, undecided_alone, total_alone, undecided_by[LCE_OUT_COUNT];
static double worst_ratio;

static void gen(const lce_case *c, lce_tensors *t) {
  lce_status st = {0};
  if (lce_case_generate(c, t, &st) != LCE_OK) {
    fprintf(stderr, "generate: %s\n", st.msg);
    exit(2);
  }
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Compares fast against mpfr; returns how many elements violate |fast - mpfr| <= err sum. report:
 * 0 count only, 1 check everything, 2 everything but "as decisive as tier 0" (no escalation). */
static int64_t compare(const lce_case *c, const lce_oracle_result *f, const lce_oracle_result *m, int report) {
  int64_t bad = 0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *a = &f->out[o], *b = &m->out[o];
    if (report) EXPECT(a->count == b->count, "%s count %lld vs %lld", lce_output_name(o), (long long)a->count, (long long)b->count);
    for (int64_t i = 0; i < a->count && i < b->count; i++) {
      const double va = a->value[i], vb = b->value[i];
      if (!isfinite(vb) || !isfinite(va)) {
        if (report)
          EXPECT(same_bits(va, vb) || (isnan(va) && isnan(vb)), "%s[%lld] class %g vs tier 0 %g", lce_output_name(o),
                 (long long)i, va, vb);
        continue;
      }
      /* value 0 with err 0 is the judge's exact zero (a subject must reproduce it bit for bit). */
      if (report)
        EXPECT((va == 0 && a->err[i] == 0) == (vb == 0 && b->err[i] == 0), "%s[%lld] exact zero in one tier only: "
               "fast %a err %.3g, tier 0 %a err %.3g", lce_output_name(o), (long long)i, va, a->err[i], vb, b->err[i]);
      const double lim = a->err[i] + b->err[i], d = fabs(va - vb);
      if (d > lim * (1 + 0x1p-50)) bad++;
      if (!report) continue;
      compared++;
      if (lim > 0 && d / lim > worst_ratio) worst_ratio = d / lim;
      EXPECT(d <= lim * (1 + 0x1p-50), "%s[%lld] fast %a vs mpfr %a: |diff| %.3g > err %.3g + %.3g", lce_output_name(o),
             (long long)i, va, vb, d, a->err[i], b->err[i]);
      if (a->decisive[i] && b->decisive[i])
        EXPECT(a->rounded[i] == b->rounded[i], "%s[%lld] rounded %a vs tier 0 %a", lce_output_name(o),
               (long long)i, a->rounded[i], b->rounded[i]);
      if (report == 1)
        EXPECT(a->decisive[i] >= b->decisive[i], "%s[%lld] decisive in tier 0 only (err %.3g)", lce_output_name(o),
               (long long)i, a->err[i]);
      EXPECT(fabs(a->mag[i] - b->mag[i]) <= 1e-12 * b->mag[i] && fabs(a->emag[i] - b->emag[i]) <= 1e-12 * b->emag[i],
             "%s[%lld] mag %.17g emag %.17g vs tier 0 %.17g %.17g", lce_output_name(o), (long long)i, a->mag[i],
             a->emag[i], b->mag[i], b->emag[i]);
    }
  }
  return bad;
}

/* Every field of every element bit for bit. */
static void expect_same_result(const lce_oracle_result *f, const lce_oracle_result *g, const char *how) {
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    for (int64_t i = 0; i < f->out[o].count; i++) {
      const lce_ref_output *a = &f->out[o], *b = &g->out[o];
      EXPECT(same_bits(a->value[i], b->value[i]) && same_bits(a->err[i], b->err[i]) && same_bits(a->mag[i], b->mag[i]) &&
                 same_bits(a->emag[i], b->emag[i]) && same_bits(a->rounded[i], b->rounded[i]) &&
                 a->decisive[i] == b->decisive[i],
             "%s[%lld] differs %s", lce_output_name(o), (long long)i, how);
      EXPECT(!a->tcex == !b->tcex && (!a->tcex || same_bits(a->tcex[i], b->tcex[i])), "%s tcex[%lld] differs %s",
             lce_output_name(o), (long long)i, how);
    }
}

static int64_t align_cases, align_grad_cells;

/* The tensor cores' alignment excess (lce_ref_output.tcex, lce_fast_align.c): NULL without tensor-core
 * GEMMs (fp32 IEEE) or without a subnormal input operand; else lse's is, bit for bit, the largest over
 * v of sum_k a(h_nk) a(W_vk) - |h_nk W_vk| (a(x) = max(|x|, 2^emin), x != 0) summed in k order as
 * d(h) a(W) + |h| d(W), loss_token's 2 kmag times it (kmag 1 without smoothing, z-loss and class
 * weights; 0 for an ignored token; 0 on a poisoned row), and a gradient element's is non-zero only where its column has
 * a subnormal operand (hidden's for d_weight, W's for d_hidden), and somewhere non-zero where one does. */
static void check_align(const lce_case *c, const lce_tensors *t, const lce_oracle_result *f) {
  const int64_t N = c->n, H = c->h, V = c->v;
  const double amin = ldexp(1.0, lce_dtype_emin(c->dtype));
  double *h = malloc((size_t)(N * H) * sizeof *h), *w = malloc((size_t)(V * H) * sizeof *w);
  unsigned char *sub_h = calloc((size_t)H, 1), *sub_w = calloc((size_t)H, 1);
  const void *wt = lce_output_weight(c, t);
  int any = 0;
  for (int64_t i = 0; i < N * H; i++) {
    h[i] = lce_load(c->dtype, t->hidden, (size_t)i);
    if (c->gemm == LCE_GEMM_TF32) h[i] = lce_round_tf32(h[i]);
    if (h[i] != 0.0 && fabs(h[i]) < amin) sub_h[i % H] = 1, any = 1;
  }
  for (int64_t i = 0; i < V * H; i++) {
    w[i] = lce_load(c->dtype, wt, (size_t)i);
    if (c->gemm == LCE_GEMM_TF32) w[i] = lce_round_tf32(w[i]);
    if (w[i] != 0.0 && fabs(w[i]) < amin) sub_w[i % H] = 1, any = 1;
  }
  const int tensor_cores = lce_case_precision(c) != LCE_PREC_FP32;
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    EXPECT(!f->out[o].tcex == !(tensor_cores && any && f->out[o].count > 0 && o != LCE_OUT_LOSS),
           "%s tcex %s (tensor cores %d, a subnormal operand %d)", lce_output_name(o),
           f->out[o].tcex ? "kept" : "absent", tensor_cores, any);
  if (f->out[LCE_OUT_LSE].tcex != NULL) {
    align_cases++;
    const int plain = c->smoothing == LCE_SMOOTH_NONE && c->z_loss_e5 == 0 && !c->class_weights;
    int bad_w = 0;
    for (int64_t i = 0; i < V * H; i++) bad_w |= !isfinite(w[i]);
    for (int64_t n = 0; n < N; n++) {
      double x = 0.0;
      int bad = bad_w;
      for (int64_t k = 0; k < H; k++) bad |= !isfinite(h[n * H + k]);
      for (int64_t v = 0; v < V && !bad; v++) { /* a poisoned row keeps none (its outputs are exact NaN) */
        double e = 0.0;
        for (int64_t k = 0; k < H; k++) { /* the row's subnormal hidden entries first, then W_v's (lce_fast_align.c) */
          const double a = fabs(h[n * H + k]), b = fabs(w[v * H + k]);
          if (a != 0.0 && a < amin) e += (amin - a) * (b != 0.0 && b < amin ? amin : b);
        }
        for (int64_t k = 0; k < H; k++) {
          const double b = fabs(w[v * H + k]);
          if (b != 0.0 && b < amin) e += fabs(h[n * H + k]) * (amin - b);
        }
        x = fmax(x, e);
      }
      EXPECT(same_bits(f->out[LCE_OUT_LSE].tcex[n], x), "lse tcex[%lld] %a, recomputed %a", (long long)n,
             f->out[LCE_OUT_LSE].tcex[n], x);
      const int valid = t->labels[n] != c->ignore_index;
      if (plain || !valid)
        EXPECT(same_bits(f->out[LCE_OUT_LOSS_TOKEN].tcex[n], valid ? 2.0 * x : 0.0), "loss_token tcex[%lld] %a, lse's %a",
               (long long)n, f->out[LCE_OUT_LOSS_TOKEN].tcex[n], x);
    }
    const struct { lce_output_id o; int64_t rows; const unsigned char *sub; } grads[] = {
        {LCE_OUT_D_HIDDEN, N, sub_w}, {LCE_OUT_D_WEIGHT, V, sub_h}};
    for (int g = 0; g < 2; g++) {
      const double *x = f->out[grads[g].o].tcex;
      int64_t nonzero = 0, possible = 0;
      for (int64_t r = 0; r < grads[g].rows; r++)
        for (int64_t k = 0; k < H; k++) {
          EXPECT(x[r * H + k] >= 0.0 && (grads[g].sub[k] || x[r * H + k] == 0.0), "%s tcex[%lld] %a in a column without a subnormal operand",
                 lce_output_name(grads[g].o), (long long)(r * H + k), x[r * H + k]);
          nonzero += x[r * H + k] > 0.0, possible += grads[g].sub[k];
        }
      EXPECT(possible == 0 || nonzero > 0, "%s: %lld elements in columns with a subnormal operand, none with tcex",
             lce_output_name(grads[g].o), (long long)possible);
      align_grad_cells += nonzero;
    }
  }
  free(h), free(w), free(sub_h), free(sub_w);
}

static void check_case(const lce_case *c) {
  lce_test_set_case(c);
  lce_tensors t;
  gen(c, &t);
  lce_oracle_result f, f0, m;
  lce_fast_stats stats, stats0;
  lce_status st = {0};
  EXPECT(lce_oracle_run(c, &t, &m, &st) == LCE_OK, "tier 0: %s", st.msg);
  EXPECT(lce_fast_run(c, &t, &f, &stats, &st) == LCE_OK, "tier 1: %s", st.msg);
  const lce_fast_options alone = {0, 0, 0};
  EXPECT(lce_fast_run_opts(c, &t, &alone, &f0, &stats0, &st) == LCE_OK, "tier 1 alone: %s", st.msg);
  compare(c, &f, &m, 1);
  check_align(c, &t, &f);
  const double replay = lce_softmax_sum_replay_case(c, &t); /* the judge's, for tiers without their own */
  EXPECT(f.has_rsum && same_bits(f.rsum_rel, replay), "tier 1's softmax-sum replay %a, the judge's %a", f.rsum_rel, replay);
  rsum_nonzero += replay > 0.0;
  /* Every d_hidden and d_weight element through the double-double step, decided by double or not:
   * the same checks (its bounds hold wherever the case is covered; elsewhere nothing changes). */
  const lce_fast_options all = {0, 0, 1};
  lce_oracle_result fa;
  lce_fast_stats stats_all;
  EXPECT(lce_fast_run_opts(c, &t, &all, &fa, &stats_all, &st) == LCE_OK, "tier 1 refining all: %s", st.msg);
  compare(c, &fa, &m, 2);
  refined_all += stats_all.refined;
  lce_oracle_free(&fa);
  EXPECT(f.decisive >= m.decisive, "decisive %lld < tier 0's %lld", (long long)f.decisive, (long long)m.decisive);
  escalated += stats.escalated;
  refined += stats.refined;
  undecided_alone += f0.total - f0.decisive;
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    for (int64_t i = 0; i < f0.out[o].count; i++) undecided_by[o] += !f0.out[o].decisive[i];
  total_alone += f0.total;
  /* Negative control: a value moved by 3x its bound (where the other tier's bound is smaller) must
   * be caught by the same check. */
  lce_ref_output *dh = &f0.out[LCE_OUT_D_HIDDEN];
  int64_t moved = 0;
  for (int64_t i = 0; i < dh->count; i++)
    if (isfinite(dh->value[i]) && dh->err[i] > m.out[LCE_OUT_D_HIDDEN].err[i] && dh->err[i] > 0)
      dh->value[i] += 3.0 * dh->err[i], moved++;
  if (moved) EXPECT(compare(c, &f0, &m, 0) == moved, "negative control: %lld moved values, not all caught", (long long)moved);
  /* With memory for tier 1 but not for tier 0, the undecided elements stay undecided (counted). */
  lce_fast_cost cost;
  lce_fast_estimate(c, NULL, &cost);
  if (stats.escalated > 0 && cost.bytes < cost.escalation_bytes) {
    char limit[64];
    snprintf(limit, sizeof limit, "%.0f", cost.bytes);
    setenv("LCE_MEMORY_LIMIT", limit, 1);
    lce_oracle_result u;
    lce_fast_stats su;
    EXPECT(lce_fast_run(c, &t, &u, &su, &st) == LCE_OK, "tier 1 without room for tier 0: %s", st.msg);
    EXPECT(su.unescalated == stats.escalated && su.escalated == 0 && u.decisive == f0.decisive,
           "without room for tier 0: %lld left undecided, %lld escalated, decisive %lld (tier 1 alone %lld)",
           (long long)su.unescalated, (long long)su.escalated, (long long)u.decisive, (long long)f0.decisive);
    unsetenv("LCE_MEMORY_LIMIT");
    lce_oracle_free(&u);
    unescalated_checked++;
  }
  /* The same bits in rows of 5 at a time (several blocks, the last one short). */
  const lce_fast_options blocks = {1, 5, 0};
  lce_oracle_result g;
  EXPECT(lce_fast_run_opts(c, &t, &blocks, &g, NULL, &st) == LCE_OK, "tier 1 in blocks: %s", st.msg);
  expect_same_result(&f, &g, "in blocks of 5 rows");
  lce_oracle_free(&g);
#ifdef _OPENMP
  /* The same bits with any thread count. */
  int saved = omp_get_max_threads();
  omp_set_num_threads(saved > 1 ? 1 : 4);
  EXPECT(lce_fast_run(c, &t, &g, NULL, &st) == LCE_OK, "tier 1: %s", st.msg);
  expect_same_result(&f, &g, "with another thread count");
  lce_oracle_free(&g);
  omp_set_num_threads(saved);
#endif
  lce_oracle_free(&f);
  lce_oracle_free(&f0);
  lce_oracle_free(&m);
  lce_tensors_free(&t);
}

/* W's subnormal operands too (the generator's W is N(0, 1): fp16 subnormals are rare): an fp16 case
 * with subnormals planted in two columns of W and one of hidden, in every tier-1 layout. */
static void check_align_planted(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_FP16, c.n = 9, c.h = 12, c.v = 40, c.vp = 40, c.dist = LCE_DIST_NORMAL, c.reduction = LCE_RED_MEAN;
  c.tied = 0, c.seed = lce_test_seed();
  lce_test_set_case(&c);
  lce_tensors t;
  gen(&c, &t);
  for (int64_t v = 0; v < c.v; v += 3) {
    lce_store(c.dtype, t.weight, (size_t)(v * c.h + 2), ldexp(-1.5, -20 - (int)(v % 4)));
    lce_store(c.dtype, t.weight, (size_t)(v * c.h + 7), ldexp(1.25, -16));
  }
  for (int64_t n = 0; n < c.n; n += 2) lce_store(c.dtype, t.hidden, (size_t)(n * c.h + 7), ldexp(-1.0, -18));
  /* a poisoned row (NaN beside subnormals, more of them than the lists hold slack for) stays out of the lists */
  for (int64_t k = 0; k < c.h; k += 2) lce_store(c.dtype, t.hidden, (size_t)(5 * c.h + k), NAN);
  lce_oracle_result f, g;
  lce_status st = {0};
  const lce_fast_options blocks = {1, 4, 0};
  EXPECT(lce_fast_run(&c, &t, &f, NULL, &st) == LCE_OK && lce_fast_run_opts(&c, &t, &blocks, &g, NULL, &st) == LCE_OK,
         "tier 1 with planted subnormals: %s", st.msg);
  check_align(&c, &t, &f);
  EXPECT(f.out[LCE_OUT_D_HIDDEN].tcex != NULL && f.out[LCE_OUT_D_HIDDEN].tcex[2] > 0.0 &&
             f.out[LCE_OUT_D_HIDDEN].tcex[7] > 0.0 && f.out[LCE_OUT_D_HIDDEN].tcex[0] == 0.0,
         "d_hidden's excess in W's planted columns 2 and 7 only");
  expect_same_result(&f, &g, "with planted subnormals, in blocks of 4 rows");
  lce_oracle_free(&f), lce_oracle_free(&g);
  lce_tensors_free(&t);
}

/* Every real element of two tier-0 subset runs with everything asked, bit for bit. */
static void expect_same_real(const lce_case *c, const lce_oracle_result *a, const lce_oracle_result *b, const char *how) {
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    for (int64_t i = 0; i < a->out[o].count && (o != LCE_OUT_D_WEIGHT || i < c->v * c->h); i++)
      EXPECT(same_bits(a->out[o].value[i], b->out[o].value[i]) && same_bits(a->out[o].err[i], b->out[o].err[i]) &&
             same_bits(a->out[o].mag[i], b->out[o].mag[i]) && same_bits(a->out[o].emag[i], b->out[o].emag[i]) &&
             same_bits(a->out[o].rounded[i], b->out[o].rounded[i]) && a->out[o].decisive[i] == b->out[o].decisive[i],
             "%s[%lld] differs %s", lce_output_name(o), (long long)i, how);
}

/* The test's exact logits handed to tier 0 (lce_oracle_subset.exact_logits): rows with exact[n]. */
typedef struct given_logits {
  const double *s;
  const unsigned char *exact;
  int64_t v;
} given_logits;

static int64_t hand_logits(void *ctx, int64_t n, int64_t v0, int64_t v1, double *s) {
  const given_logits *g = ctx;
  int64_t known = 0;
  for (int64_t v = v0; v < v1; v++) {
    s[v - v0] = g->exact[n] ? g->s[n * g->v + v] : NAN;
    known += !isnan(s[v - v0]);
  }
  return known;
}

/* Tier 0 given exact logits (lce_oracle_subset.exact_logits, tier 1's escalations) computes the same
 * bits as tier 0 computing them: every element of every output asked, rows whose logits are exact
 * in double (checked in MPFR) given but for one logit (NaN: not known), and one row left to compute
 * its own. */
static void check_given_logits(const lce_case *c) {
  lce_test_set_case(c);
  lce_tensors t;
  gen(c, &t);
  const int64_t N = c->n, H = c->h, V = c->v;
  const void *wt = lce_output_weight(c, &t);
  double *s = calloc((size_t)(N * V), sizeof *s);
  unsigned char *exact = calloc((size_t)N, 1), *row = malloc((size_t)N), *dh = malloc((size_t)(N * H)),
                *dw = malloc((size_t)(V * H));
  memset(row, 1, (size_t)N), memset(dh, 1, (size_t)(N * H)), memset(dw, 1, (size_t)(V * H));
  mpfr_t acc, p;
  mpfr_inits2(4096, acc, p, (mpfr_ptr)0);
  int64_t given = 0;
  for (int64_t n = 1; n < N; n++) {
    int ok = 1;
    for (int64_t v = 0; v < V && ok; v++) {
      double d = 0.0;
      mpfr_set_zero(acc, 1);
      for (int64_t k = 0; k < H; k++) {
        double x = lce_load(c->dtype, t.hidden, (size_t)(n * H + k)), y = lce_load(c->dtype, wt, (size_t)(v * H + k));
        if (c->gemm == LCE_GEMM_TF32) x = lce_round_tf32(x), y = lce_round_tf32(y);
        d += x * y;
        mpfr_set_d(p, x, MPFR_RNDN);
        mpfr_mul_d(p, p, y, MPFR_RNDN);
        mpfr_add(acc, acc, p, MPFR_RNDN);
      }
      ok = isfinite(d) && mpfr_cmp_d(acc, d) == 0;
      s[n * V + v] = d;
    }
    exact[n] = (unsigned char)ok;
    given += ok;
  }
  mpfr_clears(acc, p, (mpfr_ptr)0);
  /* One logit of a given row not known (NaN): tier 0 computes that one itself. */
  for (int64_t n = 1; n < N; n++)
    if (exact[n]) {
      s[n * V + V / 2] = NAN;
      break;
    }
  given_logits handed = {s, exact, V};
  lce_oracle_subset plain = {row, dh, dw, 1, NULL, NULL, 0}, with = {row, dh, dw, 1, hand_logits, &handed, 0};
  lce_oracle_subset blocks = with;
  blocks.block_cols = 7; /* and from the second vocab block on, recomputed with the handed-over logits */
  lce_oracle_result a, b, b7;
  lce_status st = {0};
  EXPECT(lce_oracle_run_subset(c, &t, &plain, &a, &st) == LCE_OK, "tier 0 subset: %s", st.msg);
  EXPECT(lce_oracle_run_subset(c, &t, &with, &b, &st) == LCE_OK, "tier 0 given logits: %s", st.msg);
  EXPECT(lce_oracle_run_subset(c, &t, &blocks, &b7, &st) == LCE_OK, "tier 0 given logits, blocks: %s", st.msg);
  EXPECT(given > 0, "no row with exact double logits: the check is vacuous");
  expect_same_real(c, &a, &b, "with given logits");
  expect_same_real(c, &a, &b7, "with given logits in vocab blocks of 7");
  lce_oracle_free(&a), lce_oracle_free(&b), lce_oracle_free(&b7);
  free(s), free(exact), free(row), free(dh), free(dw);
  lce_tensors_free(&t);
}

static lce_case make(lce_dtype dt, int64_t n, int64_t h, int64_t v, lce_dist d, lce_reduction r, int tied) {
  lce_case c = lce_case_default();
  c.dtype = dt, c.n = n, c.h = h, c.v = v, c.vp = v, c.dist = d, c.reduction = r, c.tied = tied;
  c.seed = lce_test_seed();
  return c;
}

/* The memory estimate of a case with a large N V (8192 tokens, 131072 vocab rows, H 64: 1.07e9
 * logits) grows with (N + V) H, not N V: tier 1 and tier 0 together (an escalation asking for
 * everything) below one double per logit, while tier 0's earlier whole-dz layout (~88 bytes per
 * logit) needed 94 GB for it. The same case with 4x the vocab grows the estimate about 4x at most
 * (the inputs and the result), not 16x. Nothing is allocated. */
static void check_estimate_not_nv(void) {
  lce_case c = make(LCE_BF16, 8192, 64, 131072, LCE_DIST_MIXED, LCE_RED_MEAN, 1);
  lce_fast_cost cost, wide;
  lce_fast_estimate(&c, NULL, &cost);
  const double nv = (double)c.n * (double)c.v;
  EXPECT(cost.bytes + cost.escalation_bytes < 8.0 * nv, "estimate %.3g + %.3g bytes for %.3g logits: it grows with N V",
         cost.bytes, cost.escalation_bytes, nv);
  EXPECT(cost.escalation_bytes > (double)(c.n + c.v) * c.h * 16.0, "tier 0's estimate %.3g is below its inputs' size",
         cost.escalation_bytes);
  c.v *= 4, c.vp *= 4;
  lce_fast_estimate(&c, NULL, &wide);
  EXPECT(wide.escalation_bytes < 4.5 * cost.escalation_bytes, "4x the vocab: tier 0's estimate %.3g -> %.3g",
         cost.escalation_bytes, wide.escalation_bytes);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Resident bytes of this process now (/proc/self/statm), -1 where unknown. */
static double resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = -1;
  if (f && fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  if (f) fclose(f);
  return resident < 0 ? -1.0 : (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* The estimate is what tier 1 takes: the peak resident memory's growth over a run of a case whose
 * d_weight dominates (V H = 2.05e6 elements, ~120 MB) lies within [0.75, 1.1] of lce_fast_estimate's
 * bytes. Run first in main, so that the process's peak so far is far below it (getrusage gives the peak,
 * not the growth; a forked child cannot run OpenMP after its parent has). An array the estimate leaves
 * out fails it (the coherent rounding's rnd and flip, 16 bytes an element of the gradients, are 21% of
 * this case's estimate); so does an estimate far above the need, which would refuse cases that fit. */
static void check_estimate_measured(void) {
  lce_case c = make(LCE_BF16, 2, 128, 16000, LCE_DIST_MIXED, LCE_RED_MEAN, 1);
  lce_tensors t;
  lce_status st = {0};
  EXPECT(lce_case_generate(&c, &t, &st) == LCE_OK, "generate: %s", st.msg);
  lce_fast_cost cost;
  lce_fast_estimate(&c, NULL, &cost);
  const double before = resident_bytes();
  lce_oracle_result r;
  lce_fast_stats fs;
  EXPECT(before > 0 && lce_fast_run(&c, &t, &r, &fs, &st) == LCE_OK, "tier 1 (or /proc/self/statm): %s", st.msg);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double grew = (double)ru.ru_maxrss * 1024.0 - before, ratio = grew / cost.bytes;
  printf("tier 1 memory: estimate %.1f MB, peak grew %.1f MB (%.2f of it), %lld escalated\n", cost.bytes / 1e6,
         grew / 1e6, ratio, (long long)fs.escalated);
  if (fs.escalated > 0) printf("  not compared: an escalation to tier 0 allocates beyond tier 1's own\n");
  else if (UNDER_ASAN) printf("  not compared: AddressSanitizer's shadow memory and redzones grow the peak\n");
  else EXPECT(ratio >= 0.75 && ratio <= 1.1, "tier 1's memory is not its estimate: %.2f of it, outside [0.75, 1.1]", ratio);
  lce_oracle_free(&r);
  lce_tensors_free(&t);
}

/* fast_exp_dd against a 256-bit mpfr_exp of the same double-double argument, over [-600, 2^-30]. */
static void check_exp_dd(void) {
  mpfr_t x, e, r;
  mpfr_inits2(256, x, e, r, (mpfr_ptr)0);
  double worst = 0.0;
  for (uint64_t i = 0; i < 20000; i++) {
    const double u = lce_rand_uniform(lce_test_seed(), 0xE4D, i);
    double hi = i % 4 == 0 ? -600.0 * u : i % 4 == 1 ? -u : i % 4 == 2 ? -0x1p-20 * u : ldexp(u, -30 - (int)(i % 40));
    if (i % 4 == 3 && i % 8 == 7) hi = -hi;
    const double lo = hi * 0x1p-54 * (lce_rand_uniform(lce_test_seed(), 0xE4E, i) - 0.5);
    double l, h = fast_exp_dd(hi, lo, &l);
    mpfr_set_d(x, hi, MPFR_RNDN);
    mpfr_add_d(x, x, lo, MPFR_RNDN);
    mpfr_exp(e, x, MPFR_RNDN);
    mpfr_set_d(r, h, MPFR_RNDN);
    mpfr_add_d(r, r, l, MPFR_RNDN);
    mpfr_sub(r, r, e, MPFR_RNDN);
    mpfr_div(r, r, e, MPFR_RNDN);
    const double rel = fabs(mpfr_get_d(r, MPFR_RNDU));
    worst = fmax(worst, rel);
    EXPECT(rel <= FAST_DD_EXP, "fast_exp_dd(%a + %a): relative error %.3g above FAST_DD_EXP", hi, lo, rel);
  }
  printf("test_fast: fast_exp_dd worst relative error %.3g (2^%.1f), bound 2^-98\n", worst, log2(worst));
  mpfr_clears(x, e, r, (mpfr_ptr)0);
}

int main(void) {
  check_estimate_measured(); /* first: see there */
  check_exp_dd();
  int cases = 0;
  for (int d = 0; d < LCE_DIST_COUNT; d++)
    for (int dt = 0; dt < 4; dt++) { /* bf16, fp16, fp32, fp32 with tf32 GEMMs */
      lce_case c = make(dt == 3 ? LCE_FP32 : (lce_dtype)dt, 12, 16 + 8 * (d % 3), 60 + d, (lce_dist)d,
                        (lce_reduction)((d + dt) % 3), (d + dt) % 2);
      c.gemm = dt == 3 ? LCE_GEMM_TF32 : LCE_GEMM_IEEE;
      c.vp = c.v + 4, c.tp = 1, c.ignore_pct = 15;
      c.prior_grad = (d + dt) % 2 || !c.tied;
      switch ((d + dt) % 5) { /* every loss option, and all together */
        case 1: c.softcap = 30; break;
        case 2: c.smoothing = LCE_SMOOTH_PYTORCH, c.smoothing_permille = 100, c.class_weights = 1; break;
        case 3: c.z_loss_e5 = 100, c.smoothing = LCE_SMOOTH_MEGATRON, c.smoothing_permille = 50; break;
        case 4: c.softcap = 15, c.z_loss_e5 = 10, c.class_weights = 1, c.smoothing = LCE_SMOOTH_PYTORCH,
                c.smoothing_permille = 200; break;
        default: break;
      }
      check_case(&c);
      if (dt != 2 && d < 3) check_given_logits(&c);
      cases++;
    }
  /* A larger case with the default options (the default matrix's shape class). */
  lce_case big = make(LCE_BF16, 32, 64, 512, LCE_DIST_HARD, LCE_RED_MEAN, 1);
  check_case(&big);
  cases++;
  /* Tier 1's tiles (fast_dot_block, lce_fast_grad.c) cut short in every direction: 13 tokens (tiles
   * of 8 and 16, blocks of 5), 67 vocab rows (tiles of 16), 520 columns (tiles of 512), untied; in fp32 most
   * logits are not proven exact, so their Sum2 chains run side by side (fast_sum2_batch). */
  const lce_dtype tile_dtypes[] = {LCE_BF16, LCE_FP32};
  for (size_t d = 0; d < sizeof tile_dtypes / sizeof tile_dtypes[0]; d++) {
    lce_case tiles = make(tile_dtypes[d], 13, 520, 67, LCE_DIST_MIXED, LCE_RED_MEAN, 0);
    check_case(&tiles);
    cases++;
  }
  check_estimate_not_nv();
  check_align_planted();
  printf("test_fast: %d cases, %lld elements compared, worst |fast - mpfr| / (err_fast + err_mpfr) = %.3g, "
         "%lld refined in double-double (%lld with refine_all), %lld escalated; without escalation %lld of %lld elements undecided (%.3f%%)\n",
         cases, (long long)compared, worst_ratio, (long long)refined, (long long)refined_all, (long long)escalated, (long long)undecided_alone,
         (long long)total_alone, 100.0 * (double)undecided_alone / (double)(total_alone ? total_alone : 1));
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    if (undecided_by[o]) printf("  undecided without escalation: %lld %s\n", (long long)undecided_by[o], lce_output_name(o));
  printf("test_fast: tensor-core alignment excess kept in %lld cases, %lld gradient elements with one\n",
         (long long)align_cases, (long long)align_grad_cells);
  EXPECT(align_cases >= 3 && align_grad_cells > 0, "tcex checked on %lld cases (%lld gradient elements): vacuous",
         (long long)align_cases, (long long)align_grad_cells);
  EXPECT(compared > 100000, "only %lld elements compared", (long long)compared);
  EXPECT(refined > 0, "the double-double step decided no element: it went unchecked");
  EXPECT(refined_all > 50000, "only %lld elements through the double-double step with refine_all", (long long)refined_all);
  EXPECT(rsum_nonzero > 0, "every softmax-sum replay was 0: its comparison is vacuous");
  EXPECT(unescalated_checked > 0, "no case escalated: the memory refusal of tier 0 went unchecked");
  EXPECT(worst_ratio > 0.0, "no element differs from tier 0: the comparison is vacuous");
  return lce_test_finish("test_fast");
}
