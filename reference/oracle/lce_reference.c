/* lce_reference.c — the tier registry (lce_reference.h), the bookkeeping every tier shares, and tier 0
 * (MPFR on the CPU, lce_oracle.h) as an implementation of the interface. Tier 2 lives in
 * reference/gpu/lce_ref64_tier.c where the build has CUDA; elsewhere a stand-in says why it cannot
 * run, so that `--oracle fp64-gpu` names the problem instead of being an unknown tier. */
#include "lce_reference.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lce_fast.h"
#include "lce_oracle.h"
#include "lce_oracle_internal.h"
#include "lce_parallel.h"
#include "lce_time.h"

/* ---- tier 0 ---------------------------------------------------------------------------------- */

static int mpfr_available(char *why, size_t size) {
  if (why && size) why[0] = '\0';
  return 1;
}

/* A case beyond the memory left is refused before anything is allocated, with tier 0's estimate. */
static lce_code mpfr_prepare(const lce_case *c, const lce_tensors *in, lce_ref_mode mode, lce_reference *ref,
                             lce_status *st) {
  (void)mode; /* host values only: the comparison runs on the host */
  const double bytes = lce_oracle_bytes(c, lce_thread_limit()), avail = lce_available_memory();
  LCE_CHECK(st, bytes <= avail, LCE_ENOMEM,
            "tier 0 needs ~%.1f MiB for this case (inputs as doubles and MPFR numbers, the result, each thread's "
            "rows, d_weight's dz in vocab blocks) and %.1f MiB are available: judge it with the default oracle (fast) "
            "or on a machine with more memory", bytes / 0x1p20, avail / 0x1p20);
  LCE_TRY(lce_oracle_run(c, in, &ref->host, st));
  /* The coherent d_logit rounding (lce_ref_output.rnd) is a plain-double reference, not a certified
   * value, and so is the tensor cores' alignment excess (tcex): tier 0 takes tier 1's, so that both
   * tiers judge alike. Where tier 1 cannot run the case, they stay NULL and the judge uses rnd's bound
   * and no excess. */
  lce_oracle_result fast;
  lce_status fast_st;
  if (lce_fast_run(c, in, &fast, NULL, &fast_st) == LCE_OK)
    for (int o = 0; o < LCE_OUT_COUNT; o++)
      ref->host.out[o].rnd = fast.out[o].rnd, fast.out[o].rnd = NULL,
      ref->host.out[o].flip = fast.out[o].flip, fast.out[o].flip = NULL,
      ref->host.out[o].tcex = fast.out[o].tcex, fast.out[o].tcex = NULL;
  lce_oracle_free(&fast);
  lce_reference_adopt_host(ref);
  return LCE_OK;
}

static void host_release(lce_reference *ref) { lce_oracle_free(&ref->host); }

const lce_reference_tier lce_tier_mpfr = {
    "mpfr", 0, "MPFR on the CPU: correctly rounded logits, 160-bit math, a certified bound per element (the truth)",
    mpfr_available, mpfr_prepare, NULL, host_release};

/* ---- tier 1 ---------------------------------------------------------------------------------- */

static lce_code fast_prepare(const lce_case *c, const lce_tensors *in, lce_ref_mode mode, lce_reference *ref,
                             lce_status *st) {
  (void)mode; /* host values only */
  LCE_TRY(lce_fast_run(c, in, &ref->host, NULL, st));
  lce_reference_adopt_host(ref);
  return LCE_OK;
}

static const lce_reference_tier lce_tier_fast = {
    "fast", 1, "double on the CPU with compensated sums and a certified bound per element; MPFR for what it cannot decide",
    mpfr_available, fast_prepare, NULL, host_release};

/* ---- tier 2 where the build has no CUDA ------------------------------------------------------- */
#ifndef LCE_WITH_REF64
static int none_available(char *why, size_t size) {
  if (why && size) snprintf(why, size, "oracle fp64-gpu: this build has no CUDA (sanitizer, fuzzer or CPU-only build)");
  return 0;
}
const lce_reference_tier lce_tier_fp64_gpu = {"fp64-gpu", 2, "fp64 on the GPU (not in this build)", none_available,
                                              NULL, NULL, NULL};
#endif

/* ---- registry -------------------------------------------------------------------------------- */

static const lce_reference_tier *const TIERS[] = {&lce_tier_mpfr, &lce_tier_fast, &lce_tier_fp64_gpu};

size_t lce_reference_tier_count(void) { return sizeof TIERS / sizeof TIERS[0]; }

const lce_reference_tier *lce_reference_tier_at(size_t i) {
  return i < lce_reference_tier_count() ? TIERS[i] : NULL;
}

const lce_reference_tier *lce_reference_tier_find(const char *name) {
  for (size_t i = 0; name && i < lce_reference_tier_count(); i++)
    if (strcmp(TIERS[i]->name, name) == 0) return TIERS[i];
  return NULL;
}

/* Tier 1: tier 0's verdicts (test_tiers holds it to them over the default and wide matrices) at a
 * fraction of its time; --oracle mpfr stays for certification and the slow truth. */
const lce_reference_tier *lce_reference_tier_default(void) { return &lce_tier_fast; }

lce_code lce_reference_prepare(const lce_reference_tier *tier, const lce_case *c, const lce_tensors *in,
                               lce_ref_mode mode, lce_reference *ref, lce_status *st) {
  memset(ref, 0, sizeof *ref);
  ref->tier = tier, ref->c = *c;
  char why[256];
  LCE_CHECK(st, tier->available(why, sizeof why), LCE_ENODEV, "%s", why);
  const double t0 = lce_now_seconds();
  lce_code rc = tier->prepare(c, in, tier->compare ? mode : LCE_REF_HOST, ref, st);
  ref->seconds = lce_now_seconds() - t0;
  if (rc != LCE_OK) lce_reference_release(ref);
  return rc;
}

void lce_reference_release(lce_reference *ref) {
  if (ref->tier && ref->tier->release) ref->tier->release(ref);
  const lce_reference_tier *tier = ref->tier;
  memset(ref, 0, sizeof *ref);
  ref->tier = tier;
}

void lce_reference_adopt_host(lce_reference *ref) {
  ref->mode = LCE_REF_HOST;
  ref->n_valid = ref->host.n_valid;
  ref->decisive = ref->host.decisive, ref->total = ref->host.total;
  ref->worst_rel_err = ref->host.worst_rel_err;
  ref->has_mags = 1;
  ref->has_rsum = ref->host.has_rsum, ref->rsum_rel = ref->host.rsum_rel;
}

/* ---- two tiers compared ------------------------------------------------------------------------ */

static int same_class(double a, double b) {
  return (isnan(a) && isnan(b)) || (!isnan(a) && !isnan(b) && (isfinite(a) || a == b) && (isfinite(a) == isfinite(b)));
}

int64_t lce_tiers_differ(const lce_oracle_result *a, const lce_oracle_result *b, int same_decisive, lce_tier_diff *d) {
  lce_tier_diff local = {0};
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *x = &a->out[o], *y = &b->out[o];
    const int64_t n = x->count < y->count ? x->count : y->count;
    if (x->count != y->count && local.count++ == 0) local.output = o, local.index = n;
    for (int64_t i = 0; i < n; i++) {
      const double va = x->value[i], vb = y->value[i], lim = x->err[i] + y->err[i], diff = fabs(va - vb);
      const int finite = isfinite(va) && isfinite(vb);
      if (finite && lim > 0 && diff / lim > local.worst) local.worst = diff / lim, local.worst_output = o, local.worst_index = i;
      const int both = x->decisive[i] && y->decisive[i];
      const int ok = (finite ? diff <= lim * (1 + 0x1p-50) : same_class(va, vb)) &&
                     (!same_decisive || x->decisive[i] == y->decisive[i]) &&
                     (!both || x->rounded[i] == y->rounded[i] || (isnan(x->rounded[i]) && isnan(y->rounded[i])));
      if (!ok && local.count++ == 0) local.output = o, local.index = i;
    }
  }
  if (d) *d = local;
  return local.count;
}
