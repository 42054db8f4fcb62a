/* lce_ref64_device.cu — tier 2's driver (lce_ref64.h): uploads the case's host tensors, runs the
 * cuBLAS DGEMMs and the fp64 kernels (lce_ref64_kernels.cu) in order, and leaves every output's
 * reference in device memory. Order: inputs (converted, tf32-rounded, non-finite values zeroed and
 * flagged) → logits S = h W^T and their terms |h| |W|^T → row statistics, lse, token loss → dz in
 * place of the logits (dz terms in place of the logit terms) → d_hidden = dz W and M1 = dzterm |W| →
 * d_weight = prior + dz^T h, M2 = dzterm^T |h|, EM2 = dzterm^T (cond |h|) → the reduced loss (host,
 * from the n token losses) → tier 0's classes for non-finite inputs and exact elements.
 * cuBLAS is column-major: a row-major [r x c] matrix is its column-major [c x r] transpose. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_ref64_internal.cuh"
#include "lce_time.h"

extern "C" {

size_t lce_ref64_device_bytes(const lce_case *c, const lce_ref64_options *opt) {
  const int mags = !(opt && opt->skip_mags);
  const size_t d = sizeof(double), nh = (size_t)(c->n * c->h), vh = (size_t)(c->v * c->h),
               nv = (size_t)(c->n * c->v), vph = (size_t)(c->vp * c->h), per = mags ? 4 : 1;
  size_t b = d * (vh * (mags ? 2 : 1) + nh * (mags ? 3 : 1) + nv * (mags ? 2 : 1));
  b += d * (per * nh + per * vph + (mags ? 2 * nh + vph : 0)); /* d_hidden, d_weight; M1 scratch; rnd */
  b += sizeof(float) * vph + (vh > nh ? vh : nh) * lce_dtype_size(c->dtype);
  b += (size_t)(c->n + c->v) * 64 + (size_t)c->h * 3 * d + (size_t)(3 * c->n + c->v) * d;
  return b;
}

}  // extern "C"

#define R64_ALLOC(ref, ptr, count, what) \
  LCE_TRY(lce_cuda_alloc((void **)&(ptr), (size_t)(count) * sizeof *(ptr), (what), &(ref)->device_bytes, "ref64", st))

/* C = alpha op(A) op(B) + beta C, column-major, fp64. */
static lce_code dgemm(r64_state *x, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                      const double *a, int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc,
                      lce_status *st) {
  const double one = 1.0;
  R64_CUBLAS_CHECK(st, cublasDgemm(x->blas, ta, tb, (int)m, (int)n, (int)k, &one, a, (int)lda, b, (int)ldb, &beta, c,
                                   (int)ldc));
  return LCE_OK;
}

/* y = A^T x for a row-major [rows x cols] matrix A: column-major [cols x rows], so y = A_cm x. */
static lce_code row_sums(r64_state *x, const double *a, int64_t rows, int64_t cols, const double *v, double *y,
                         lce_status *st) {
  const double one = 1.0, zero = 0.0;
  R64_CUBLAS_CHECK(st, cublasDgemv(x->blas, CUBLAS_OP_N, (int)cols, (int)rows, &one, a, (int)cols, v, 1, &zero, y, 1));
  return LCE_OK;
}

static lce_code upload(void *dst, const void *src, size_t bytes, cudaStream_t s, lce_status *st) {
  R64_CUDA_CHECK(st, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  return LCE_OK;
}

/* The case's constants and every token's g (lce_case.h), on the host. */
static void host_constants(const lce_case *c, const lce_tensors *in, int mags, r64_consts *k, double *g) {
  const double e = lce_case_smoothing(c);
  memset(k, 0, sizeof *k);
  k->n = c->n, k->h = c->h, k->v = c->v, k->vp = c->vp, k->ignore_index = c->ignore_index;
  k->softcap = c->softcap, k->lambda = lce_case_z_loss(c), k->one_minus_e = 1.0 - e, k->ev = e / (double)c->v;
  k->smoothing = e > 0.0, k->want_mags = mags;
  double sw = 0.0;
  for (int64_t v = 0; v < c->v; v++) sw += c->class_weights ? (double)in->class_weight[v] : 1.0;
  k->sw = sw, k->sw_rel = r64_gamma((double)c->v);
  k->az = 1.01 * r64_gamma((double)c->h) + 7.0 * R64_U;
  k->dz_floor_unit = ldexp(1.0, lce_dtype_emin(c->dtype));
  double wsum = 0.0; /* the mean's divisor: sum of w_label over valid tokens */
  for (int64_t n = 0; n < c->n; n++)
    if (in->labels[n] != c->ignore_index) wsum += c->class_weights ? (double)in->class_weight[in->labels[n]] : 1.0;
  k->g_rel = c->reduction == LCE_RED_MEAN ? 1.01 * (r64_gamma((double)c->n) + R64_U) : 0.0;
  for (int64_t n = 0; n < c->n; n++) {
    const int ignored = in->labels[n] == c->ignore_index;
    const double go = in->grad_output[c->reduction == LCE_RED_NONE ? n : 0];
    g[n] = ignored || (c->reduction == LCE_RED_MEAN && wsum == 0.0) ? 0.0
                                                                    : (c->reduction == LCE_RED_MEAN ? go / wsum : go);
  }
}

static lce_code alloc_state(const lce_case *c, int mags, lce_ref64_device *ref, r64_state *x, lce_status *st) {
  const int64_t nh = c->n * c->h, vh = c->v * c->h, nv = c->n * c->v, vph = c->vp * c->h;
  R64_ALLOC(ref, x->hid, nh, "hidden");
  R64_ALLOC(ref, x->w, vh, "W");
  R64_ALLOC(ref, x->z, nv, "the logits");
  R64_ALLOC(ref, x->labels, c->n, "labels");
  R64_ALLOC(ref, x->g, c->n, "g");
  R64_ALLOC(ref, x->rows, c->n, "row statistics");
  R64_ALLOC(ref, x->bad_h, c->n, "row flags");
  R64_ALLOC(ref, x->bad_w, 1, "the W flag");
  R64_ALLOC(ref, ref->valid, c->n, "valid flags");
  R64_ALLOC(ref, x->prior_w, vph, "the weight prior");
  LCE_TRY(lce_cuda_alloc(&x->raw, (size_t)(vh > nh ? vh : nh) * lce_dtype_size(c->dtype), "raw inputs",
                         &ref->device_bytes, "ref64", st));
  if (c->class_weights) R64_ALLOC(ref, x->class_weight, c->v, "class weights");
  if (mags) {
    R64_ALLOC(ref, x->hid_abs, nh, "|hidden|");
    R64_ALLOC(ref, x->hid_cond, nh, "cond |hidden|");
    R64_ALLOC(ref, x->w_abs, vh, "|W|");
    R64_ALLOC(ref, x->term, nv, "the terms");
    R64_ALLOC(ref, x->scratch, nh, "M1");
    R64_ALLOC(ref, x->vec_w_abs, c->h, "column sums");
    R64_ALLOC(ref, x->vec_h_floor, c->h, "column sums");
    R64_ALLOC(ref, x->vec_h_b, c->h, "column sums");
    R64_ALLOC(ref, x->row_vec, 3 * c->n + c->v, "row vectors");
  }
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    lce_ref64_dev_output *d = &ref->out[o];
    d->count = lce_output_reference_count(c, (lce_output_id)o);
    if (d->count == 0) continue;
    R64_ALLOC(ref, d->value, d->count, lce_output_name((lce_output_id)o));
    if (!mags) continue;
    R64_ALLOC(ref, d->err, d->count, "err");
    R64_ALLOC(ref, d->mag, d->count, "mag");
    R64_ALLOC(ref, d->emag, d->count, "emag");
    if (o == LCE_OUT_D_HIDDEN || o == LCE_OUT_D_WEIGHT) R64_ALLOC(ref, d->rnd, d->count, "rnd");
  }
  return LCE_OK;
}

static lce_code upload_inputs(const lce_case *c, const lce_tensors *in, const double *g, r64_state *x,
                              lce_ref64_device *ref, lce_status *st) {
  cudaStream_t s = x->stream;
  const int tf32 = c->gemm == LCE_GEMM_TF32;
  const size_t es = lce_dtype_size(c->dtype), vph = (size_t)(c->vp * c->h);
  const int mags = x->k.want_mags;
  R64_CUDA_CHECK(st, cudaMemsetAsync(x->bad_h, 0, (size_t)c->n * sizeof(int), s));
  R64_CUDA_CHECK(st, cudaMemsetAsync(x->bad_w, 0, sizeof(int), s));
  LCE_TRY(upload(x->raw, in->hidden, (size_t)(c->n * c->h) * es, s, st));
  LCE_TRY(r64_launch_convert(x->raw, c->dtype, tf32, c->n * c->h, c->h, x->hid, mags ? x->hid_abs : NULL, x->bad_h, 0,
                             s, st));
  R64_CUDA_CHECK(st, cudaStreamSynchronize(s)); /* the staging buffer is reused */
  LCE_TRY(upload(x->raw, lce_output_weight(c, in), (size_t)(c->v * c->h) * es, s, st));
  LCE_TRY(r64_launch_convert(x->raw, c->dtype, tf32, c->v * c->h, c->h, x->w, mags ? x->w_abs : NULL, x->bad_w, 1, s,
                             st));
  LCE_TRY(upload(x->labels, in->labels, (size_t)c->n * sizeof(int64_t), s, st));
  LCE_TRY(upload(x->g, g, (size_t)c->n * sizeof(double), s, st));
  if (c->class_weights) LCE_TRY(upload(x->class_weight, in->class_weight, (size_t)c->v * sizeof(float), s, st));
  LCE_TRY(upload(x->prior_w, lce_output_weight_prior(c, in), vph * sizeof(float), s, st));
  R64_CUDA_CHECK(st, cudaStreamSynchronize(s));
  return LCE_OK;
}

/* The reduced loss from the token losses (lce_case.h), with tier 0's magnitude; written to the device. */
static lce_code reduced_loss(const lce_case *c, const lce_tensors *in, r64_state *x, lce_ref64_device *ref,
                             int poisoned_grad, lce_status *st) {
  const lce_ref64_dev_output *lt = &ref->out[LCE_OUT_LOSS_TOKEN];
  const int mags = x->k.want_mags;
  double *h = (double *)malloc((size_t)c->n * 3 * sizeof(double));
  LCE_ALLOC_CHECK(st, h);
  cudaError_t rc = cudaMemcpy(h, lt->value, (size_t)c->n * sizeof(double), cudaMemcpyDeviceToHost);
  if (rc == cudaSuccess && mags) rc = cudaMemcpy(h + c->n, lt->err, (size_t)c->n * sizeof(double), cudaMemcpyDeviceToHost);
  if (rc == cudaSuccess && mags) rc = cudaMemcpy(h + 2 * c->n, lt->mag, (size_t)c->n * sizeof(double), cudaMemcpyDeviceToHost);
  double sum = 0.0, abs = 0.0, err = 0.0, mag = 0.0, wsum = 0.0;
  for (int64_t n = 0; n < c->n && rc == cudaSuccess; n++) {
    sum += h[n], abs += fabs(h[n]);
    if (mags) err += h[c->n + n], mag += h[2 * c->n + n];
    if (in->labels[n] != c->ignore_index) wsum += c->class_weights ? (double)in->class_weight[in->labels[n]] : 1.0;
  }
  free(h);
  if (rc != cudaSuccess) return lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "ref64: loss download: %s", cudaGetErrorString(rc));
  err = (err + r64_gamma((double)c->n) * abs) * R64_SLACK;
  if (poisoned_grad) {
    sum = NAN, err = 0.0, mag = 0.0;
  } else if (c->reduction == LCE_RED_MEAN && wsum == 0.0) {
    sum = 0.0, err = 0.0, mag = 0.0;
  } else if (c->reduction == LCE_RED_MEAN) {
    const double rel = r64_gamma((double)c->n);
    sum /= wsum;
    err = R64_SLACK * ((err + (abs + err) * rel) / wsum * (1.0 + R64_U) + R64_U * fabs(sum));
    mag /= wsum;
  }
  const double vals[4] = {sum, err, mag, mag};
  const lce_ref64_dev_output *lo = &ref->out[LCE_OUT_LOSS];
  double *dst[4] = {lo->value, lo->err, lo->mag, lo->emag};
  for (int i = 0; i < (mags ? 4 : 1); i++) R64_CUDA_CHECK(st, cudaMemcpy(dst[i], &vals[i], sizeof(double), cudaMemcpyHostToDevice));
  return LCE_OK;
}

/* Per-row vectors for the d_weight bounds (active rows only: g != 0, not poisoned): cond_n, the dz
 * floor |g| 2^emin and b_n; alpha = max a_n / cond_n. Returns the number of active rows. */
static int64_t row_vectors(const lce_case *c, const r64_row *rows, const r64_consts *k, double *cond, double *floor,
                           double *b, double *alpha, int *poisoned_grad) {
  int64_t na = 0;
  double amax = 0.0;
  *alpha = 0.0;
  *poisoned_grad = 0;
  for (int64_t n = 0; n < c->n; n++) {
    const r64_row *r = &rows[n];
    const int active = !r->poisoned && r->g != 0.0;
    if (r->poisoned && r->g != 0.0) *poisoned_grad = 1; /* a valid poisoned token (ignored ones have g = 0) */
    cond[n] = active ? 1.0 + r->tmax : 0.0;
    floor[n] = active ? lce_dz_floor_of(fabs(r->g), r->kmag, k->dz_floor_unit) : 0.0;
    b[n] = active ? r->b : 0.0;
    if (!active) continue;
    na++;
    *alpha = fmax(*alpha, r->a / cond[n]);
    amax = fmax(amax, r->a);
  }
  if (!(amax <= 1.0)) *alpha = INFINITY; /* the bound's |dz| <= (1 + a) dzterm + b needs a <= 1 */
  return na;
}

/* ref->rsum_rel from the logits in x->z (before dz replaces them): the largest replay over tokens and shards. */
static lce_code softmax_sum_replay(const lce_case *c, r64_state *x, lce_ref64_device *ref, lce_status *st) {
  ref->has_rsum = c->gemm != LCE_GEMM_TF32;
  if (!ref->has_rsum) return LCE_OK;
  const int64_t count = c->n * c->tp;
  double *dev = NULL, *rel = (double *)malloc((size_t)count * sizeof *rel);
  LCE_ALLOC_CHECK(st, rel);
  cudaError_t rc = cudaMalloc((void **)&dev, (size_t)count * sizeof *dev);
  lce_code code = rc == cudaSuccess ? r64_launch_rsum(x, c->tp, c->vp / c->tp, dev, x->stream, st)
                                    : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "ref64: cudaMalloc for the replay: %s",
                                               cudaGetErrorString(rc));
  if (code == LCE_OK) rc = cudaMemcpyAsync(rel, dev, (size_t)count * sizeof *rel, cudaMemcpyDeviceToHost, x->stream);
  if (code == LCE_OK && rc == cudaSuccess) rc = cudaStreamSynchronize(x->stream);
  if (code == LCE_OK && rc != cudaSuccess)
    code = lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "ref64: softmax-sum replay: %s", cudaGetErrorString(rc));
  ref->rsum_rel = 0.0;
  for (int64_t i = 0; code == LCE_OK && i < count; i++) ref->rsum_rel = fmax(ref->rsum_rel, rel[i]);
  if (dev) cudaFree(dev);
  free(rel);
  return code;
}

static lce_code run_passes(const lce_case *c, const lce_tensors *in, r64_state *x, lce_ref64_device *ref, lce_status *st) {
  const int64_t N = c->n, H = c->h, V = c->v;
  const int mags = x->k.want_mags;
  cudaStream_t s = x->stream;
  /* Logits, row-major [N x V]: column-major [V x N] = W_cm^T h_cm. */
  LCE_TRY(dgemm(x, CUBLAS_OP_T, CUBLAS_OP_N, V, N, H, x->w, H, x->hid, H, 0.0, x->z, V, st));
  if (mags) LCE_TRY(dgemm(x, CUBLAS_OP_T, CUBLAS_OP_N, V, N, H, x->w_abs, H, x->hid_abs, H, 0.0, x->term, V, st));
  LCE_TRY(r64_launch_rows(x, ref, s, st));
  LCE_TRY(softmax_sum_replay(c, x, ref, st));
  LCE_TRY(r64_launch_dz(x, s, st));
  /* d_hidden [N x H] = dz [N x V] W [V x H]: column-major [H x N] = W_cm dz_cm. */
  LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_N, H, N, V, x->w, H, x->z, V, 0.0, ref->out[LCE_OUT_D_HIDDEN].value, H, st));
  /* d_weight [V x H] = prior + dz^T [V x N] h [N x H]: column-major [H x V] = h_cm dz_cm^T. */
  lce_ref64_dev_output *dw = &ref->out[LCE_OUT_D_WEIGHT];
  LCE_TRY(r64_launch_widen(x->prior_w, c->vp * H, dw->value, s, st));
  LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_T, H, V, N, x->hid, H, x->z, V, 1.0, dw->value, H, st));
  if (mags) { /* rnd: the same two GEMMs over the rounded d_logits, which replace dz in z (not read again) */
    LCE_TRY(r64_launch_dzr(x, c->dtype, lce_case_precision(c) == LCE_PREC_TF32, s, st));
    LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_N, H, N, V, x->w, H, x->z, V, 0.0, ref->out[LCE_OUT_D_HIDDEN].rnd, H, st));
    LCE_TRY(r64_launch_widen(x->prior_w, c->vp * H, dw->rnd, s, st));
    LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_T, H, V, N, x->hid, H, x->z, V, 1.0, dw->rnd, H, st));
  }

  r64_row *rows = (r64_row *)malloc((size_t)N * sizeof *rows);
  double *vecs = (double *)malloc((size_t)N * 3 * sizeof(double));
  if (rows == NULL || vecs == NULL) {
    free(rows), free(vecs);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "ref64: out of memory for %lld row statistics", (long long)N);
  }
  cudaError_t rc = cudaMemcpyAsync(rows, x->rows, (size_t)N * sizeof *rows, cudaMemcpyDeviceToHost, s);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(s);
  double alpha = 0.0;
  int poisoned_grad = 0;
  const int64_t na = row_vectors(c, rows, &x->k, vecs, vecs + N, vecs + 2 * N, &alpha, &poisoned_grad);
  if (rc == cudaSuccess && mags) rc = cudaMemcpyAsync(x->row_vec, vecs, (size_t)N * 3 * sizeof(double), cudaMemcpyHostToDevice, s);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(s);
  free(rows), free(vecs);
  if (rc != cudaSuccess) return lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "ref64: row statistics: %s", cudaGetErrorString(rc));

  if (mags) {
    double *ones = x->row_vec + 3 * N;
    LCE_TRY(r64_launch_fill(ones, V, 1.0, s, st));
    LCE_TRY(row_sums(x, x->w_abs, V, H, ones, x->vec_w_abs, st));
    LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_N, H, N, V, x->w_abs, H, x->term, V, 0.0, x->scratch, H, st));
    LCE_TRY(r64_launch_dh_bounds(x, ref, s, st));
    LCE_TRY(row_sums(x, x->hid_abs, N, H, x->row_vec + N, x->vec_h_floor, st));
    LCE_TRY(row_sums(x, x->hid_abs, N, H, x->row_vec + 2 * N, x->vec_h_b, st));
    LCE_TRY(r64_launch_scale_rows(x->hid_abs, x->row_vec, N, H, x->hid_cond, s, st));
    LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_T, H, V, N, x->hid_abs, H, x->term, V, 0.0, dw->mag, H, st));
    LCE_TRY(dgemm(x, CUBLAS_OP_N, CUBLAS_OP_T, H, V, N, x->hid_cond, H, x->term, V, 0.0, dw->emag, H, st));
    LCE_TRY(r64_launch_dw_bounds(x, ref, alpha, na, s, st));
  }
  LCE_TRY(reduced_loss(c, in, x, ref, poisoned_grad, st));
  LCE_TRY(r64_launch_fixups(x, ref, poisoned_grad, s, st));
  R64_CUDA_CHECK(st, cudaStreamSynchronize(s));
  return LCE_OK;
}

static void free_state(r64_state *x) {
  void *bufs[] = {x->hid, x->hid_abs, x->hid_cond, x->w, x->w_abs, x->z, x->term, x->labels, x->class_weight, x->g,
                  x->rows, x->bad_h, x->bad_w, x->vec_w_abs, x->vec_h_floor, x->vec_h_b, x->row_vec, x->scratch,
                  x->prior_w, x->raw};
  if (x->stream) cudaStreamSynchronize(x->stream);
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  if (x->blas) cublasDestroy(x->blas);
  if (x->stream) cudaStreamDestroy(x->stream);
  memset(x, 0, sizeof *x);
}

extern "C" {

void lce_ref64_device_free(lce_ref64_device *ref) {
  if (ref == NULL) return;
  if (ref->priv_) {
    free_state((r64_state *)ref->priv_);
    free(ref->priv_);
  }
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    lce_ref64_dev_output *d = &ref->out[o];
    void *bufs[] = {d->value, d->err, d->mag, d->emag, d->rnd};
    for (int i = 0; i < 5; i++)
      if (bufs[i]) cudaFree(bufs[i]);
  }
  if (ref->valid) cudaFree(ref->valid);
  memset(ref, 0, sizeof *ref);
}

static lce_code device_run(const lce_case *c, const lce_tensors *in, r64_state *x, double *g, lce_ref64_device *ref,
                           lce_status *st) {
  R64_CUDA_CHECK(st, cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
  R64_CUBLAS_CHECK(st, cublasCreate(&x->blas));
  R64_CUBLAS_CHECK(st, cublasSetStream(x->blas, x->stream));
  /* Pedantic: no emulation, no reduced precision anywhere (the bound assumes IEEE fp64 GEMMs). */
  R64_CUBLAS_CHECK(st, cublasSetMathMode(x->blas, CUBLAS_PEDANTIC_MATH));
  LCE_TRY(alloc_state(c, x->k.want_mags, ref, x, st));
  LCE_TRY(upload_inputs(c, in, g, x, ref, st));
  unsigned char *valid = (unsigned char *)malloc((size_t)c->n);
  LCE_ALLOC_CHECK(st, valid);
  for (int64_t n = 0; n < c->n; n++) valid[n] = in->labels[n] != c->ignore_index;
  cudaError_t rc = cudaMemcpy(ref->valid, valid, (size_t)c->n, cudaMemcpyHostToDevice);
  free(valid);
  R64_CUDA_CHECK(st, rc);
  return run_passes(c, in, x, ref, st);
}

lce_code lce_ref64_device_run(const lce_case *c, const lce_tensors *in, const lce_ref64_options *opt,
                              lce_ref64_device *ref, lce_status *st) {
  LCE_CHECK(st, ref != NULL, LCE_EINVAL, "ref64: result is NULL");
  memset(ref, 0, sizeof *ref);
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_CHECK(st, c->n <= INT32_MAX && c->h <= INT32_MAX && c->v <= INT32_MAX, LCE_EINVAL, "ref64: dimension beyond int");
  char why[160];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "ref64 (fp64-gpu oracle): %s", why);
  const double t0 = lce_now_seconds();
  ref->c = *c;
  ref->n_valid = lce_count_valid(c, in);
  ref->has_mags = !(opt && opt->skip_mags);
  r64_state *x = (r64_state *)calloc(1, sizeof *x);
  double *g = (double *)malloc((size_t)c->n * sizeof(double));
  if (x == NULL || g == NULL) {
    free(x), free(g);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "ref64: out of host memory");
  }
  ref->priv_ = x;
  host_constants(c, in, ref->has_mags, &x->k, g);
  lce_code rc = device_run(c, in, x, g, ref, st);
  free(g);
  ref->seconds = lce_now_seconds() - t0;
  return rc;
}

}  // extern "C"
