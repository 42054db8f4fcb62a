/* lce_ref64_compare.cu — a subject's host output against tier 2's device reference (lce_ref64.h),
 * reduced on the device: the subject's buffer goes up in slices, each block folds its elements into
 * fp64 partial sums (fixed order), the host adds the partials in block order. The reference never
 * comes back. It leaves out the elements the host comparison leaves out (r64_judgeable). The derived
 * terms' sums need tier 1's rnd (computed on the device, lce_ref64.h); flip has no device counterpart,
 * so its sums stay 0 as where a tier lacks it (and outv's D_i lacks it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_ref64_internal.cuh"

#define R64_CMP_SLICE ((int64_t)1 << 24)
#define R64_CMP_BLOCKS 1024
#define R64_CMP_THREADS 256

typedef struct r64_partial {
  double d2, r2, dr, r4, emag2, maxscaled;
  double rnd_r, rnd2, outr_r, acc_r, acc_m2, mag_r; /* the derived terms' sums (lce_metrics.c), where rnd exists */
  double outs_r, outs_rnd, outv;                    /* the signed output roundings and outv's sum (rnds, outv) */
  long long compared, inconclusive, mismatch, first;
} r64_partial;

#define R64_PARTIAL_ZERO {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1}

/* b folded into a, on the device (the block's tree) and on the host (the blocks in order): sums and
 * counts added, the largest scaled error and the first mismatch kept. */
__host__ __device__ static void r64_partial_add(r64_partial *a, const r64_partial *b) {
  a->d2 += b->d2, a->r2 += b->r2, a->dr += b->dr, a->r4 += b->r4, a->emag2 += b->emag2;
  a->rnd_r += b->rnd_r, a->rnd2 += b->rnd2, a->outr_r += b->outr_r, a->acc_r += b->acc_r, a->acc_m2 += b->acc_m2, a->mag_r += b->mag_r;
  a->outs_r += b->outs_r, a->outs_rnd += b->outs_rnd, a->outv += b->outv;
  a->compared += b->compared, a->inconclusive += b->inconclusive, a->mismatch += b->mismatch;
  a->maxscaled = fmax(a->maxscaled, b->maxscaled);
  if (b->first >= 0 && (a->first < 0 || b->first < a->first)) a->first = b->first;
}

__device__ static int r64_class(double x) { return isnan(x) ? 1 : (isinf(x) ? (x > 0 ? 2 : 3) : 0); }

/* One place of a format of p bits at |a| (its binade's, not below emin's): lce_ulp on the device. */
__device__ static double r64_place(double a, int p, int emin) {
  int e = a == 0.0 ? emin : ilogb(a);
  return ldexp(1.0, (e > emin ? e : emin) - (p - 1));
}

/* Whether the metrics may take a reference element of value x and bound err: its rounding certain (the
 * host oracle's decisive flag, lce_ref64_host.c: lce_round_certain, an exact or non-finite value) or
 * lce_value_judgeable (lce_dtype.c), on the device, so that both comparisons leave the same elements out
 * as inconclusive. */
__device__ static int r64_judgeable(double x, double err, int p, int emin, int emax) {
  if (err == 0.0 || !isfinite(x)) return 1;
  int e = x == 0.0 ? emin : ilogb(x);
  e = e < emin ? emin : (e > emax ? emax : e);
  const double ulp = ldexp(1.0, e - (p - 1));
  if (fabs(x) >= fmax(LCE_JUDGEABLE_MIN, ldexp(1.0, emin)) && err <= ulp * 0x1p-6) return 1;
  return err <= ulp * 0x1p-12 && r64_round_format(nextafter(x - err, -(double)INFINITY), p, emin, emax) ==
                                     r64_round_format(nextafter(x + err, (double)INFINITY), p, emin, emax);
}

/* Whether x, which rounds to xr, sits within dd of a rounding boundary (the nearer midpoint between xr and
 * its neighbours, whose spacing halves below a power of two), and the larger spacing there: lce_metrics.c's
 * boundary_at. */
__device__ static int r64_near_boundary(double x, double xr, double dd, int p, int emin, double *place) {
  const double a = fabs(xr), e = fabs(x) - a;
  const double above = r64_place(a, p, emin), below = a > 0.0 ? r64_place(a * (1.0 - 0x1p-40), p, emin) : above;
  *place = fmax(above, below);
  return fmin(above / 2 - e, below / 2 + e) <= dd;
}

/* Elements the reference's bound leaves too uncertain (with err: r64_judgeable) are counted inconclusive
 * and enter neither the class check nor a sum, as on the host (lce_judge.c's class scan, lce_compare_block). With rnd (and so mag): the
 * sums lce_compare_block adds for the terms rnd, rndn, outr, acc, accn, pertok, rnds and outv, in the same
 * definitions (R the rounding to the output's format; outv's D_i = d_pertok mag_i + d_acc m_i, no flip here). */
__global__ static void r64_compare_kernel(const void *raw, lce_dtype fmt, int64_t base, int64_t count, const double *ref,
                                          const double *err, const double *emag, const double *mag, const double *rnd,
                                          const unsigned char *mask, int prec, int emin, int emax, double d_pertok,
                                          double d_acc, r64_partial *out) {
  __shared__ r64_partial sh[R64_CMP_THREADS];
  r64_partial p = R64_PARTIAL_ZERO;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t g = base + i;
    if (mask && !mask[g]) continue;
    double x;
    if (fmt == LCE_FP32) x = ((const float *)raw)[i];
    else if (fmt == LCE_BF16) x = __uint_as_float((unsigned)((const unsigned short *)raw)[i] << 16);
    else x = __half2float(__ushort_as_half(((const unsigned short *)raw)[i]));
    /* Classes against the reference rounded to the output's format, as the host's class check does: a
     * finite r that rounds to infinity (fp16 d_hidden beyond 65504) expects infinity and enters no sum. */
    const double r = ref[g], r_rounded = r64_round_format(r, prec, emin, emax);
    if (err && !r64_judgeable(r, err[g], prec, emin, emax)) {
      p.inconclusive++;
      continue;
    }
    if (r64_class(x) != r64_class(r_rounded)) {
      p.mismatch++;
      if (p.first < 0 || g < p.first) p.first = g;
      continue;
    }
    if (r64_class(r_rounded) != 0) continue;
    const double d = x - r;
    p.d2 += d * d, p.r2 += r * r, p.dr += d * r, p.r4 += (r * r) * (r * r), p.compared++;
    if (emag) p.emag2 += emag[g] * emag[g];
    if (emag && d != 0.0) p.maxscaled = fmax(p.maxscaled, emag[g] > 0.0 ? fabs(d) / emag[g] : INFINITY);
    if (rnd) {
      const double m = fmax(mag[g], 0x1p-126);
      p.rnd_r += (rnd[g] - r) * r, p.rnd2 += (rnd[g] - r) * (rnd[g] - r);
      const double rnd_rounded = r64_round_format(rnd[g], prec, emin, emax);
      const double at_r = fabs(r_rounded - r);
      const double at_rnd = fabs(rnd_rounded - rnd[g]); /* beyond: a class check's */
      p.outr_r += (isfinite(at_rnd) && at_rnd > at_r ? at_rnd : at_r) * fabs(r);
      p.acc_r += m * m * r * r, p.acc_m2 += m * m, p.mag_r += mag[g] * fabs(r);
      p.outs_r += (r_rounded - r) * r;
      if (isfinite(at_rnd)) p.outs_rnd += (rnd_rounded - rnd[g]) * r;
      const double dd = d_pertok * mag[g] + d_acc * m;
      double place_r, place_rnd = 0.0;
      const int near_r = r64_near_boundary(r, r_rounded, dd, prec, emin, &place_r);
      const int near_rnd = isfinite(at_rnd) && r64_near_boundary(rnd[g], rnd_rounded, dd, prec, emin, &place_rnd);
      if (near_r || near_rnd) {
        const double place = fmax(place_r, place_rnd);
        p.outv += place * place * r * r;
      }
    }
  }
  sh[threadIdx.x] = p;
  __syncthreads();
  for (int w = R64_CMP_THREADS / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) r64_partial_add(&sh[threadIdx.x], &sh[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}

static lce_code compare_slices(const lce_ref64_device *ref, lce_output_id o, const void *host, void *raw,
                               r64_partial *dev_part, r64_partial *part, r64_partial *total, lce_status *st) {
  /* d_weight: the real vocab rows (the padded rows are the prior, a class check of the judge's). */
  const lce_ref64_dev_output *d = &ref->out[o];
  const lce_dtype fmt = lce_output_format(&ref->c, o);
  const size_t es = lce_dtype_size(fmt);
  const unsigned char *mask = o == LCE_OUT_LSE ? ref->valid : NULL;
  const int64_t count = o == LCE_OUT_D_WEIGHT ? ref->c.v * ref->c.h : d->count;
  double d_pertok, d_acc; /* outv's D_i without flip (lce_kernel_reach) */
  lce_kernel_reach(&ref->c, o, &d_pertok, &d_acc);
  for (int64_t base = 0; base < count; base += R64_CMP_SLICE) {
    const int64_t len = count - base < R64_CMP_SLICE ? count - base : R64_CMP_SLICE;
    R64_CUDA_CHECK(st, cudaMemcpy(raw, (const char *)host + (size_t)base * es, (size_t)len * es, cudaMemcpyHostToDevice));
    r64_compare_kernel<<<R64_CMP_BLOCKS, R64_CMP_THREADS>>>(raw, fmt, base, len, d->value, d->err, d->emag, d->mag, d->rnd, mask,
                                                            lce_dtype_precision(fmt), lce_dtype_emin(fmt),
                                                            lce_dtype_emax(fmt), d_pertok, d_acc, dev_part);
    R64_LAUNCH_CHECK(st, "r64_compare_kernel");
    R64_CUDA_CHECK(st, cudaMemcpy(part, dev_part, R64_CMP_BLOCKS * sizeof *part, cudaMemcpyDeviceToHost));
    for (int b = 0; b < R64_CMP_BLOCKS; b++) r64_partial_add(total, &part[b]);
  }
  return LCE_OK;
}

extern "C" lce_code lce_ref64_compare(const lce_ref64_device *ref, lce_output_id o, const lce_outputs *subject,
                                      lce_comparison *cmp, lce_status *st) {
  LCE_CHECK(st, ref != NULL && subject != NULL && cmp != NULL, LCE_EINVAL, "ref64 compare: NULL argument");
  LCE_CHECK(st, (int)o >= 0 && o < LCE_OUT_COUNT, LCE_EINVAL, "ref64 compare: output %d unknown", (int)o);
  memset(cmp, 0, sizeof *cmp);
  cmp->has_emag = (unsigned char)ref->has_mags;
  cmp->class_ok = 1;
  const lce_ref64_dev_output *d = &ref->out[o];
  if (d->count == 0) return LCE_OK;
  const void *host = lce_output_buffer(&ref->c, subject, o);
  LCE_CHECK(st, host != NULL && d->value != NULL, LCE_EINVAL, "ref64 compare: %s missing", lce_output_name(o));
  const int64_t slice = d->count < R64_CMP_SLICE ? d->count : R64_CMP_SLICE;
  void *raw = NULL;
  r64_partial *dev_part = NULL, *part = (r64_partial *)malloc(R64_CMP_BLOCKS * sizeof *part);
  LCE_ALLOC_CHECK(st, part);
  cudaError_t rc = cudaMalloc(&raw, (size_t)slice * sizeof(float));
  if (rc == cudaSuccess) rc = cudaMalloc((void **)&dev_part, R64_CMP_BLOCKS * sizeof *dev_part);
  r64_partial t = R64_PARTIAL_ZERO;
  lce_code code = rc == cudaSuccess ? compare_slices(ref, o, host, raw, dev_part, part, &t, st)
                                    : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "ref64 compare: cudaMalloc: %s",
                                               cudaGetErrorString(rc));
  if (raw) cudaFree(raw);
  if (dev_part) cudaFree(dev_part);
  free(part);
  cmp->sum_d2 = t.d2, cmp->sum_r2 = t.r2, cmp->sum_dr = t.dr, cmp->sum_r4 = t.r4, cmp->sum_emag2 = t.emag2;
  cmp->judged = t.compared, cmp->inconclusive = t.inconclusive, cmp->max_scaled = t.maxscaled, cmp->class_ok = t.mismatch == 0;
  cmp->has_rnd = d->rnd != NULL;
  cmp->sum_rnd_r = t.rnd_r, cmp->sum_outr_r = t.outr_r, cmp->sum_acc_r = t.acc_r, cmp->sum_acc_m2 = t.acc_m2;
  cmp->sum_mag_r = t.mag_r, cmp->sum_rnd2 = t.rnd2;
  cmp->sum_outs_r = t.outs_r, cmp->sum_outs_rnd = t.outs_rnd, cmp->sum_outv = t.outv;
  if (!cmp->class_ok)
    snprintf(cmp->class_msg, sizeof cmp->class_msg, "%lld elements with the wrong class (NaN/Inf), first at %lld",
             t.mismatch, t.first);
  return code;
}
