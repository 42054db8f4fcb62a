/* lce_ref64_host.c — tier 2 at the host level (lce_ref64_oracle, lce_ref64.h): runs the device
 * reference, copies every output back and turns it into the lce_oracle_result tier 0 fills, so the
 * judge and the CLI use it unchanged. The value is the fp64 result itself, so rounding it to the
 * output format with lce_round_to is the format value of that double; decisive says the exact value's
 * format value is certain given err, by the rule tier 0 uses (lce_round_certain, lce_dtype.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "lce_ref64.h"

static lce_code download(double **dst, const double *src, int64_t count, lce_status *st) {
  *dst = malloc((size_t)count * sizeof **dst);
  LCE_CHECK(st, *dst != NULL, LCE_ENOMEM, "ref64: out of memory for %lld doubles", (long long)count);
  cudaError_t rc = cudaMemcpy(*dst, src, (size_t)count * sizeof **dst, cudaMemcpyDeviceToHost);
  LCE_CHECK(st, rc == cudaSuccess, LCE_EINTERNAL, "ref64: download failed: %s", cudaGetErrorString(rc));
  return LCE_OK;
}

static lce_code fill_output(const lce_case *c, const lce_ref64_device *dev, lce_output_id o, int values_only,
                            lce_oracle_result *res, lce_status *st) {
  const lce_ref64_dev_output *d = &dev->out[o];
  lce_ref_output *r = &res->out[o];
  if (d->count == 0) return LCE_OK;
  r->count = d->count;
  LCE_TRY(download(&r->value, d->value, d->count, st));
  if (values_only) return LCE_OK;
  LCE_TRY(download(&r->err, d->err, d->count, st));
  LCE_TRY(download(&r->mag, d->mag, d->count, st));
  LCE_TRY(download(&r->emag, d->emag, d->count, st));
  if (d->rnd) LCE_TRY(download(&r->rnd, d->rnd, d->count, st)); /* tier 1's rnd, computed on the device */
  r->rounded = malloc((size_t)d->count * sizeof *r->rounded);
  r->decisive = malloc((size_t)d->count);
  LCE_CHECK(st, r->rounded && r->decisive, LCE_ENOMEM, "ref64: out of memory for %s", lce_output_name(o));
  const lce_dtype fmt = lce_output_format(c, o);
  for (int64_t i = 0; i < d->count; i++) {
    const double value = r->value[i], err = r->err[i];
    int decisive = 1;
    if (err == 0.0 || !isfinite(value)) r->rounded[i] = lce_round_to(fmt, value);
    else if (!(decisive = lce_round_certain(fmt, value, err, &r->rounded[i]))) r->rounded[i] = lce_round_to(fmt, value);
    r->decisive[i] = (unsigned char)decisive;
    res->decisive += decisive;
    res->total++;
    const double scale = fmax(fabs(value), r->mag[i]);
    if (isfinite(err) && scale > 0.0 && err / scale > res->worst_rel_err) res->worst_rel_err = err / scale;
  }
  return LCE_OK;
}

static lce_code host_result(const lce_case *c, const lce_tensors *in, int values_only, lce_oracle_result *res,
                            lce_status *st) {
  LCE_CHECK(st, res != NULL, LCE_EINVAL, "ref64: result is NULL");
  memset(res, 0, sizeof *res);
  lce_ref64_device dev;
  const lce_ref64_options opt = {.skip_mags = values_only};
  lce_code rc = lce_ref64_device_run(c, in, &opt, &dev, st);
  for (int o = 0; o < LCE_OUT_COUNT && rc == LCE_OK; o++)
    rc = fill_output(c, &dev, (lce_output_id)o, values_only, res, st);
  if (rc == LCE_OK) {
    res->n_valid = dev.n_valid;
    res->precision_bits = 53;
    res->has_rsum = dev.has_rsum, res->rsum_rel = dev.rsum_rel;
  }
  lce_ref64_device_free(&dev);
  if (rc != LCE_OK) lce_oracle_free(res);
  return rc;
}

lce_code lce_ref64_oracle(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st) {
  return host_result(c, in, 0, res, st);
}

lce_code lce_ref64_values(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st) {
  return host_result(c, in, 1, res, st);
}
