/* lce_ref64_tier.c — tier 2 (fp64 on the GPU, lce_ref64.h) behind the reference interface
 * (lce_reference.h). Host mode brings every output's values to the host (lce_ref64_oracle: medium
 * shapes, full class checks); values mode only the values (lce_ref64_values: converge); device mode
 * keeps the reference in device memory and compares each subject output there (production shapes,
 * where d_weight alone is 1e9 elements). In device mode
 * the error magnitudes (cond, maxscaled) double the reference's memory: they are dropped only when
 * the reference with them would not fit the free device memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_device.h"
#include "lce_ref64.h"
#include "lce_reference.h"

/* Device memory the comparison needs beside the reference (its staging slice and partials), and
 * headroom for cuBLAS. */
#define REF64_TIER_HEADROOM ((size_t)1 << 30)

static int ref64_available(char *why, size_t size) { return lce_device_query(NULL, why, size); }

static lce_code ref64_prepare(const lce_case *c, const lce_tensors *in, lce_ref_mode mode, lce_reference *ref,
                              lce_status *st) {
  if (mode == LCE_REF_HOST) {
    LCE_TRY(lce_ref64_oracle(c, in, &ref->host, st));
    lce_reference_adopt_host(ref);
    return LCE_OK;
  }
  if (mode == LCE_REF_VALUES) {
    LCE_TRY(lce_ref64_values(c, in, &ref->host, st));
    ref->mode = LCE_REF_VALUES;
    ref->n_valid = ref->host.n_valid;
    return LCE_OK;
  }
  size_t free_bytes = 0;
  LCE_TRY(lce_device_free_bytes(&free_bytes, st));
  lce_ref64_options opt = {0};
  opt.skip_mags = lce_ref64_device_bytes(c, &opt) + REF64_TIER_HEADROOM > free_bytes;
  lce_ref64_device *dev = calloc(1, sizeof *dev);
  LCE_ALLOC_CHECK(st, dev);
  ref->priv = dev;
  LCE_TRY(lce_ref64_device_run(c, in, &opt, dev, st));
  ref->mode = LCE_REF_DEVICE;
  ref->n_valid = dev->n_valid;
  ref->has_mags = dev->has_mags;
  ref->has_rsum = dev->has_rsum, ref->rsum_rel = dev->rsum_rel;
  return LCE_OK;
}

static lce_code ref64_compare(const lce_reference *ref, lce_output_id o, const lce_outputs *subject,
                              lce_comparison *cmp, lce_status *st) {
  return lce_ref64_compare((const lce_ref64_device *)ref->priv, o, subject, cmp, st);
}

static void ref64_release(lce_reference *ref) {
  if (ref->priv) {
    lce_ref64_device_free((lce_ref64_device *)ref->priv);
    free(ref->priv);
    ref->priv = NULL;
  }
  lce_oracle_free(&ref->host);
}

const lce_reference_tier lce_tier_fp64_gpu = {
    "fp64-gpu", 2, "fp64 on the GPU with a stated a-priori bound, certified against tier 0 (production shapes)",
    ref64_available, ref64_prepare, ref64_compare, ref64_release};
