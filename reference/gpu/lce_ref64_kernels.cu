/* lce_ref64_kernels.cu — the fp64 kernels of tier 2 (lce_ref64.h): input conversion, per-row softmax
 * statistics and token loss, dz, the error bounds of the gradients, and tier 0's classes for
 * non-finite inputs and exact elements. The cuBLAS DGEMMs and the order of the passes are the
 * driver's (lce_ref64_device.cu).
 *
 * Error analysis (the header lce_ref64.h states the result). u = 2^-53, gamma(k) = k u / (1 - k u);
 * capital letters are exact quantities; CUDA's fp64 exp, log, log1p, tanh and cosh are taken within
 * 2 ulp (4u relative), + - * / within u (IEEE), cuBLAS DGEMM within gamma(K) sum |terms|.
 *   Logits. s_v = DGEMM, |s_v - S_v| <= gamma(H) traw_v (traw_v = sum_k |h_k W_vk|). Softcap:
 *   z = c tanh(q), q = s / c; tanh is 1-Lipschitz with slope sech^2, and c sech^2(q) |q| <= c |tanh q|,
 *   so |z - Z| <= 1.01 f gamma(H) traw_v + 6u |z| <= az term_v with term_v = max(|z|, f traw_v)
 *   (tier 0's logit terms) and az = 1.01 gamma(H) + 7u; without softcap term_v = traw_v.
 *   Exponentials. m = the row's computed max (any m: p and lse do not depend on it). d_v = z_v - m
 *   rounds within u |d_v| <= 2u T (T = max term_v >= |z_v|), exp adds 4u, so against exp(Z_v - m)
 *   t_v has relative error <= R = 1.01 ((az + 2u) T + 5u) (linearization valid for R <= 0.001; an
 *   exp below 2^-1022 loses relative accuracy and is covered absolutely by b below).
 *   Sums. Every row sum here is a strided sequential sum per thread then a 256-way tree: at most
 *   D = ceil(V / 256) + 9 chained additions, relative error gamma(D) for non-negative terms.
 *   lse = m + log S: S within 1.01 (R + gamma(D)) relative, log adds 4u |L|, the add u |lse|:
 *     err_lse = 1.02 (R + gamma(D) + u) + 4u |L| + u |lse|.
 *   ce (t_y >= 2^-64): log1p(S_rest / t_y) = log1p(Q (1 + delta)), |delta| <= DL = 1.02 (2R +
 *   gamma(D) + u), and |log1p(Q(1 + delta)) - log1p(Q)| <= 1.01 DL log1p(Q):
 *     err_ce = 1.02 DL |ce| + 4u |ce| + 2^-980 (underflowed terms against t_y >= 2^-64);
 *   otherwise ce = lse - z_y with err_lse + az term_y + u |ce|.
 *   Loss terms: cy = (1 - e) w_y within 2.01u; SM = sum w_v (lse - z_v) (non-negative terms) within
 *   sw err_lse + az sum w_v term_v + (2u + gamma(D)) SM; lambda lse^2 within lambda (2|lse| err_lse +
 *   err_lse^2) + 3u lambda lse^2; each product adds u of itself, the two additions u of the sum of
 *   |terms|.
 *   dz. p_v = t_v / S and 1 - p_y = S_rest / S carry R twice, gamma(D) and a division:
 *   rp = 1.03 (2R + gamma(D) + 2u). inner = cy p_v (or -cy (1 - p_y)) + p_v K - ev w_v, dz = g inner,
 *   with K = ev sw + 2 lambda lse: every term within (rp + 10u + sw_rel) of itself plus 2 lambda
 *   err_lse p_v; g within g_rel; softcap's f = 1 / cosh(q)^2 within rel_f = 2.02 (u + gamma(H)) traw / c
 *   + 6u (d log sech^2 / dq = -2 tanh). Against dzterm_v = |g| fac (p_v kmag + cy [v = y] + ev w_v)
 *   (fac = 2 - f or 1, >= f), |dz - DZ| <= a dzterm_v + b with
 *     a = 1.02 (rp + 10u + sw_rel + g_rel + rel_f) + 2 lambda err_lse / kmag,
 *     b = |g| (kmag + 4) 2^-1070 (values below 2^-1022 are exact only to 2^-1074).
 *   d_hidden = DGEMM(dz, W): |dh - DH| <= sum_v (a dzterm_v + b) |W_vk| + gamma(V) sum |dz| |W|, and
 *   |dz| <= (1 + a) dzterm + b; M1 = sum dzterm |W| is itself a DGEMM of non-negative terms (1 +
 *   gamma(V)). d_weight likewise with alpha = max_n a_n / cond_n (so a_n dzterm <= alpha cond_n
 *   dzterm: the emag GEMM), requiring max a <= 1. */
#include <math.h>

#include "lce_ref64_internal.cuh"

#define R64_GRID_CAP 65535

static int r64_blocks(int64_t count, int threads) {
  int64_t b = (count + threads - 1) / threads;
  return (int)(b < 1 ? 1 : (b > R64_GRID_CAP * 16 ? R64_GRID_CAP * 16 : b));
}

/* ---- logits as the math reads them ------------------------------------------------------------- */

__device__ static inline double r64_z(double s, double c) { return c > 0.0 ? c * tanh(s / c) : s; }
/* sech^2(s / c) without the cancellation of 1 - tanh^2; 0 where cosh overflows (f < 2^-2046). */
__device__ static inline double r64_f(double s, double c) {
  const double ch = cosh(s / c);
  return 1.0 / (ch * ch);
}

/* ---- conversion -------------------------------------------------------------------------------- */

__device__ static inline double r64_load(const void *raw, lce_dtype t, int tf32, int64_t i) {
  if (t == LCE_BF16) return (double)__uint_as_float((unsigned)((const unsigned short *)raw)[i] << 16);
  if (t == LCE_FP16) return (double)__half2float(__ushort_as_half(((const unsigned short *)raw)[i]));
  const float x = ((const float *)raw)[i];
  return (double)(tf32 ? r64_round_tf32(x) : x);
}

__global__ static void r64_convert_kernel(const void *raw, lce_dtype t, int tf32, int64_t count, int64_t row_len,
                                          double *dst, double *dst_abs, int *bad, int bad_all) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    double x = r64_load(raw, t, tf32, i);
    if (!isfinite(x)) {
      bad[bad_all ? 0 : i / row_len] = 1;
      x = 0.0;
    }
    dst[i] = x;
    if (dst_abs) dst_abs[i] = fabs(x);
  }
}

lce_code r64_launch_convert(const void *raw, lce_dtype t, int tf32, int64_t count, int64_t row_len, double *dst,
                            double *dst_abs, int *bad, int bad_all, cudaStream_t s, lce_status *st) {
  r64_convert_kernel<<<r64_blocks(count, 256), 256, 0, s>>>(raw, t, tf32, count, row_len, dst, dst_abs, bad, bad_all);
  R64_LAUNCH_CHECK(st, "r64_convert_kernel");
  return LCE_OK;
}

__global__ static void r64_widen_kernel(const float *src, int64_t count, double *dst) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = (double)src[i];
}

lce_code r64_launch_widen(const float *src, int64_t count, double *dst, cudaStream_t s, lce_status *st) {
  r64_widen_kernel<<<r64_blocks(count, 256), 256, 0, s>>>(src, count, dst);
  R64_LAUNCH_CHECK(st, "r64_widen_kernel");
  return LCE_OK;
}

__global__ static void r64_scale_rows_kernel(const double *src, const double *scale, int64_t n, int64_t h, double *dst) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * h; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = scale[i / h] * src[i];
}

lce_code r64_launch_scale_rows(const double *src, const double *scale, int64_t n, int64_t h, double *dst,
                               cudaStream_t s, lce_status *st) {
  r64_scale_rows_kernel<<<r64_blocks(n * h, 256), 256, 0, s>>>(src, scale, n, h, dst);
  R64_LAUNCH_CHECK(st, "r64_scale_rows_kernel");
  return LCE_OK;
}

__global__ static void r64_fill_kernel(double *x, int64_t count, double value) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
    x[i] = value;
}

lce_code r64_launch_fill(double *x, int64_t count, double value, cudaStream_t s, lce_status *st) {
  r64_fill_kernel<<<r64_blocks(count, 256), 256, 0, s>>>(x, count, value);
  R64_LAUNCH_CHECK(st, "r64_fill_kernel");
  return LCE_OK;
}

/* ---- per-row statistics and the token loss ------------------------------------------------------ */

/* Block reductions (a sum, or with MAX the maximum) in a fixed order (deterministic): a 256-way tree
 * over shared memory. */
template <bool MAX>
__device__ static double r64_block_reduce(double x, double *sh) {
  sh[threadIdx.x] = x;
  __syncthreads();
  for (int w = R64_ROW_THREADS / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) {
      const double other = sh[threadIdx.x + w];
      sh[threadIdx.x] = MAX ? fmax(sh[threadIdx.x], other) : sh[threadIdx.x] + other;
    }
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

typedef struct r64_out_ptrs {
  lce_ref64_dev_output lse, loss_token;
} r64_out_ptrs;

/* The bounds and magnitudes of one row's lse and loss (thread 0; see the analysis above). */
__device__ static void r64_row_finish(const r64_consts k, r64_row *row, int64_t n, int64_t y, double zy, double termy,
                                      double sm, double sum_wterm, double sum_wabsz, const r64_out_ptrs o) {
  const double u = R64_U, T = row->tmax, gd = r64_gamma(r64_row_depth(k.v));
  const double L = log(row->s), lse = row->m + L;
  row->lse = lse;
  const double R = 1.01 * ((k.az + 2.0 * u) * T + 5.0 * u);
  const int ok = R <= 1e-3;
  const double err_lse = ok ? R64_SLACK * (1.02 * (R + gd + u) + 4.0 * u * fabs(L) + u * fabs(lse)) : INFINITY;
  const double mag_lse = fabs(row->m) + fabs(L) + T;
  o.lse.value[n] = lse;
  if (k.want_mags) o.lse.err[n] = err_lse, o.lse.mag[n] = mag_lse, o.lse.emag[n] = mag_lse;
  const int valid = y != k.ignore_index;
  row->cy = valid ? k.one_minus_e * row->cy : 0.0; /* row->cy held w_y */
  row->k = k.ev * k.sw + 2.0 * k.lambda * lse;
  row->kmag = row->cy + k.ev * k.sw + 2.0 * k.lambda * fabs(lse);
  if (!valid) {
    o.loss_token.value[n] = 0.0;
    if (k.want_mags) o.loss_token.err[n] = 0.0, o.loss_token.mag[n] = 0.0, o.loss_token.emag[n] = 0.0;
  } else {
    const double ty = exp(zy - row->m);
    double ce, err_ce;
    if (ty >= 0x1p-64) {
      ce = log1p(row->s_rest / ty);
      const double dl = 1.02 * (2.0 * R + gd + u);
      err_ce = ok ? 1.02 * dl * fabs(ce) + 4.0 * u * fabs(ce) + 0x1p-980 : INFINITY;
    } else {
      ce = lse - zy;
      err_ce = err_lse + k.az * termy + u * fabs(ce);
    }
    const double cy = row->cy, t1 = cy * ce;
    double e = cy * err_ce + fabs(ce) * cy * 2.01 * u + u * fabs(t1), loss = t1, mags = fabs(t1);
    double mag = cy * (fabs(lse) + fabs(zy) + T + termy);
    if (k.smoothing) {
      const double err_sm = k.sw * (1.0 + k.sw_rel) * err_lse + k.az * sum_wterm + (2.0 * u + gd) * sm;
      const double t2 = k.ev * sm;
      e += k.ev * err_sm + 2.0 * u * fabs(t2);
      loss += t2;
      mags += fabs(t2);
      mag += k.ev * (k.sw * (fabs(lse) + T) + sum_wabsz + sum_wterm);
    }
    if (k.lambda > 0.0) {
      const double t3 = k.lambda * lse * lse;
      e += k.lambda * (2.0 * fabs(lse) * err_lse + err_lse * err_lse) + 3.0 * u * t3;
      loss += t3;
      mags += t3;
      mag += k.lambda * (lse * lse + 2.0 * fabs(lse) * mag_lse);
    }
    o.loss_token.value[n] = loss;
    if (k.want_mags)
      o.loss_token.err[n] = R64_SLACK * (e + 2.0 * u * mags), o.loss_token.mag[n] = mag, o.loss_token.emag[n] = mag;
  }
  /* dz's bound coefficients (a, b). */
  const double rp = 1.03 * (2.0 * R + gd + 2.0 * u);
  const double rel_f = k.softcap > 0.0 ? 2.02 * (u + r64_gamma((double)k.h)) * row->traw / k.softcap + 6.0 * u : 0.0;
  double a = 1.02 * (rp + 10.0 * u + k.sw_rel + k.g_rel + rel_f);
  if (k.lambda > 0.0) a += row->kmag > 0.0 ? 2.0 * k.lambda * err_lse / row->kmag : INFINITY;
  row->a = ok ? R64_SLACK * a : INFINITY;
  row->b = fabs(row->g) * (row->kmag + 4.0) * 0x1p-1070;
}

__global__ static void r64_rows_kernel(const r64_consts k, const double *zs, double *term, const int64_t *labels,
                                       const float *cw, const double *g, const int *bad_h, const int *bad_w,
                                       r64_row *rows, const r64_out_ptrs o) {
  __shared__ double sh[R64_ROW_THREADS];
  const int64_t n = blockIdx.x, V = k.v, y = labels[n];
  const double *zr = zs + n * V;
  double *tr = term ? term + n * V : NULL;
  r64_row row;
  memset(&row, 0, sizeof row);
  row.g = g[n];
  row.poisoned = bad_h[n] || bad_w[0];
  if (row.poisoned) {
    if (threadIdx.x == 0) rows[n] = row;
    return;
  }
  /* Pass 1: softcap, terms, maxima. */
  double m = -INFINITY, tmax = 0.0, traw = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += R64_ROW_THREADS) {
    const double s = zr[v], z = r64_z(s, k.softcap);
    m = fmax(m, z);
    if (tr) {
      const double t0 = tr[v] * (1.0 + 0x1p-50); /* tier 0's logit terms */
      const double t = k.softcap > 0.0 ? fmax(fabs(z), r64_f(s, k.softcap) * t0) : t0;
      tr[v] = t;
      tmax = fmax(tmax, t);
      traw = fmax(traw, t0);
    }
  }
  row.m = r64_block_reduce<true>(m, sh);
  row.tmax = r64_block_reduce<true>(tmax, sh);
  row.traw = r64_block_reduce<true>(traw, sh);
  /* Pass 2: the sums. */
  double s = 0.0, s_rest = 0.0, wterm = 0.0, wabsz = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += R64_ROW_THREADS) {
    const double z = r64_z(zr[v], k.softcap), t = exp(z - row.m);
    s += t;
    if (v != y) s_rest += t;
    if (tr && k.smoothing) {
      const double w = cw ? (double)cw[v] : 1.0;
      wterm += w * tr[v];
      wabsz += w * fabs(z);
    }
  }
  row.s = r64_block_reduce<false>(s, sh);
  row.s_rest = r64_block_reduce<false>(s_rest, sh);
  const double sum_wterm = r64_block_reduce<false>(wterm, sh), sum_wabsz = r64_block_reduce<false>(wabsz, sh);
  /* Pass 3 (smoothing): sum_v w_v (lse - z_v), every term >= 0. */
  double sm = 0.0;
  if (k.smoothing) {
    const double lse = row.m + log(row.s);
    double acc = 0.0;
    for (int64_t v = threadIdx.x; v < V; v += R64_ROW_THREADS)
      acc += (cw ? (double)cw[v] : 1.0) * (lse - r64_z(zr[v], k.softcap));
    sm = r64_block_reduce<false>(acc, sh);
  }
  if (threadIdx.x != 0) return;
  const int valid = y != k.ignore_index;
  row.cy = valid ? (cw ? (double)cw[y] : 1.0) : 0.0;
  const double zy = valid ? r64_z(zr[y], k.softcap) : 0.0, termy = valid && tr ? tr[y] : 0.0;
  r64_row_finish(k, &row, n, y, zy, termy, sm, sum_wterm, sum_wabsz, o);
  rows[n] = row;
}

lce_code r64_launch_rows(const r64_state *x, lce_ref64_device *ref, cudaStream_t s, lce_status *st) {
  r64_out_ptrs o = {ref->out[LCE_OUT_LSE], ref->out[LCE_OUT_LOSS_TOKEN]};
  r64_rows_kernel<<<(unsigned)x->k.n, R64_ROW_THREADS, 0, s>>>(x->k, x->z, x->k.want_mags ? x->term : NULL, x->labels,
                                                               x->class_weight, x->g, x->bad_h, x->bad_w, x->rows, o);
  R64_LAUNCH_CHECK(st, "r64_rows_kernel");
  return LCE_OK;
}

/* ---- the judge's softmax-sum replay (term rsum) --------------------------------------------------- */

/* lce_softmax_sum_replay (lce_output.c) on the device, one thread per valid token and shard, over the
 * DGEMM's logits (softcap applied): the shard's terms exp(z_v - m) each rounded to fp32 and added in
 * vocab order in fp32, against their sum in double-double (the host's is a long double sum: both far
 * below the fp32 sum's error), rel[n tp + r] = |s32 - exact| / exact; 0 for ignored or poisoned tokens
 * (the host's non-finite rows give no finite relative error either), empty shards and non-finite ones.
 * Equal to the host's replay but where a term sits so near an fp32 rounding boundary that the two
 * doubles (DGEMM and CUDA exp against a sequential sum and libm) round it to different floats. */
__global__ static void r64_rsum_kernel(const r64_consts k, const double *zs, const int64_t *labels, const int *bad_h,
                                       const int *bad_w, int tp, int64_t per, double *rel) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= k.n * tp) return;
  const int64_t n = i / tp, lo = (i % tp) * per, hi = lo + per < k.v ? lo + per : k.v;
  rel[i] = 0.0;
  if (labels[n] == k.ignore_index || bad_h[n] || bad_w[0] || !(hi > lo)) return;
  const double *zr = zs + n * k.v;
  double m = -INFINITY;
  for (int64_t v = lo; v < hi; v++) m = fmax(m, r64_z(zr[v], k.softcap));
  if (!isfinite(m)) return;
  float s32 = 0.0f;
  double sh = 0.0, sl = 0.0; /* the exact sum as sh + sl (TwoSum) */
  for (int64_t v = lo; v < hi; v++) {
    const double t = exp(r64_z(zr[v], k.softcap) - m);
    s32 = __fadd_rn(s32, __double2float_rn(t));
    const double a = sh + t, bb = a - sh;
    sl += (sh - (a - bb)) + (t - bb);
    sh = a;
  }
  const double exact = sh + sl, r = fabs(((double)s32 - sh) - sl) / exact;
  if (isfinite(r)) rel[i] = r;
}

lce_code r64_launch_rsum(const r64_state *x, int tp, int64_t per, double *rel, cudaStream_t s, lce_status *st) {
  const int threads = 64; /* a thread per row and shard: small blocks spread the few rows over the SMs */
  r64_rsum_kernel<<<r64_blocks(x->k.n * tp, threads), threads, 0, s>>>(x->k, x->z, x->labels, x->bad_h, x->bad_w, tp,
                                                                        per, rel);
  R64_LAUNCH_CHECK(st, "r64_rsum_kernel");
  return LCE_OK;
}

/* ---- dz ------------------------------------------------------------------------------------------ */

__global__ static void r64_dz_kernel(const r64_consts k, double *z, double *term, const int64_t *labels,
                                     const float *cw, const r64_row *rows) {
  const int64_t count = k.n * k.v;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / k.v, v = i % k.v;
    const r64_row *row = &rows[n];
    if (row->poisoned || row->g == 0.0) {
      z[i] = 0.0;
      if (term) term[i] = 0.0;
      continue;
    }
    const double s = z[i], zv = r64_z(s, k.softcap), p = exp(zv - row->m) / row->s;
    const double w = cw ? (double)cw[v] : 1.0;
    const int is_y = v == labels[n];
    double inner = is_y ? -(row->cy * (row->s_rest / row->s)) : row->cy * p;
    if (k.smoothing || k.lambda > 0.0) inner += p * row->k;
    if (k.smoothing) inner -= k.ev * w;
    double dz = row->g * inner, fac = 1.0;
    if (k.softcap > 0.0) {
      const double f = r64_f(s, k.softcap);
      dz *= f;
      fac = 2.0 - f;
    }
    z[i] = dz;
    if (term) term[i] = fabs(row->g) * fac * (p * row->kmag + (is_y ? row->cy : 0.0) + k.ev * w);
  }
}

lce_code r64_launch_dz(const r64_state *x, cudaStream_t s, lce_status *st) {
  r64_dz_kernel<<<r64_blocks(x->k.n * x->k.v, 256), 256, 0, s>>>(x->k, x->z, x->k.want_mags ? x->term : NULL,
                                                                  x->labels, x->class_weight, x->rows);
  R64_LAUNCH_CHECK(st, "r64_dz_kernel");
  return LCE_OK;
}

/* ---- the coherent d_logit rounding (lce_ref_output.rnd) ------------------------------------------ */

/* dz -> rnd's d_logits in place (lce_fast_rnd.c's fast_rnd_row): t = dz / g rounded to the input
 * dtype, then to tf32 with tf32 GEMMs, times g; rows with g = 0 (ignored, all-ignored mean) stay 0. */
__global__ static void r64_dzr_kernel(const r64_consts k, double *z, const r64_row *rows, int p, int emin, int emax,
                                      int tf32) {
  const int64_t count = k.n * k.v;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const double g = rows[i / k.v].g;
    if (g == 0.0 || !isfinite(z[i])) continue;
    double t = r64_round_format(z[i] / g, p, emin, emax);
    if (tf32) t = r64_round_tf32((float)t); /* t is an fp32 value: tf32 GEMMs have fp32 inputs */
    z[i] = t * g;
  }
}

lce_code r64_launch_dzr(const r64_state *x, lce_dtype dtype, int tf32, cudaStream_t s, lce_status *st) {
  r64_dzr_kernel<<<r64_blocks(x->k.n * x->k.v, 256), 256, 0, s>>>(x->k, x->z, x->rows, lce_dtype_precision(dtype),
                                                                   lce_dtype_emin(dtype), lce_dtype_emax(dtype), tf32);
  R64_LAUNCH_CHECK(st, "r64_dzr_kernel");
  return LCE_OK;
}

/* ---- gradient bounds ---------------------------------------------------------------------------- */

__global__ static void r64_dh_bounds_kernel(const r64_consts k, const double *m1, const double *w_abs,
                                            const r64_row *rows, double gemm_floor, lce_ref64_dev_output o) {
  const int64_t count = k.n * k.h;
  const double gv = r64_gamma((double)k.v + 2.0);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const r64_row *row = &rows[i / k.h];
    if (row->poisoned || row->g == 0.0) {
      o.err[i] = 0.0, o.mag[i] = 0.0, o.emag[i] = 0.0;
      continue;
    }
    const double M1 = m1[i], wa = w_abs[i % k.h], fl = lce_dz_floor_of(fabs(row->g), row->kmag, k.dz_floor_unit) * wa;
    o.mag[i] = M1 + fl;
    o.emag[i] = (1.0 + row->tmax) * M1 + fl + gemm_floor;
    o.err[i] = R64_SLACK * (1.0 + gv) * (1.0 + gv) * ((row->a + gv * (1.0 + row->a)) * M1 + (1.0 + gv) * row->b * wa);
  }
}

lce_code r64_launch_dh_bounds(const r64_state *x, lce_ref64_device *ref, cudaStream_t s, lce_status *st) {
  const double floor = r64_gemm_floor(ref->c.dtype, (double)x->k.v);
  r64_dh_bounds_kernel<<<r64_blocks(x->k.n * x->k.h, 256), 256, 0, s>>>(x->k, x->scratch, x->vec_w_abs, x->rows,
                                                                         floor, ref->out[LCE_OUT_D_HIDDEN]);
  R64_LAUNCH_CHECK(st, "r64_dh_bounds_kernel");
  return LCE_OK;
}

/* mag and emag hold M2 and EM2 on entry. */
__global__ static void r64_dw_bounds_kernel(const r64_consts k, const float *prior, const double *h_floor,
                                            const double *h_b, double alpha, double gemm_floor, lce_ref64_dev_output o) {
  const int64_t count = k.v * k.h;
  const double gn = r64_gamma((double)k.n + 2.0);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t col = i % k.h;
    const double pa = fabs((double)prior[i]), M2 = o.mag[i], EM2 = o.emag[i];
    o.mag[i] = pa + M2 + h_floor[col];
    o.emag[i] = pa + EM2 + h_floor[col] + gemm_floor;
    o.err[i] = R64_SLACK * (1.0 + gn) * (1.0 + gn) * (alpha * EM2 + h_b[col] + gn * (pa + 2.0 * M2 + h_b[col]));
  }
}

lce_code r64_launch_dw_bounds(const r64_state *x, lce_ref64_device *ref, double alpha, int64_t na, cudaStream_t s,
                              lce_status *st) {
  const double floor = r64_gemm_floor(LCE_FP32, (double)na);
  r64_dw_bounds_kernel<<<r64_blocks(x->k.v * x->k.h, 256), 256, 0, s>>>(x->k, x->prior_w, x->vec_h_floor, x->vec_h_b,
                                                                         alpha, floor, ref->out[LCE_OUT_D_WEIGHT]);
  R64_LAUNCH_CHECK(st, "r64_dw_bounds_kernel");
  return LCE_OK;
}

/* ---- tier 0's classes ----------------------------------------------------------------------------- */

__device__ static inline void r64_set(const lce_ref64_dev_output o, int64_t i, double value, double mag) {
  o.value[i] = value;
  if (o.err) o.err[i] = 0.0, o.mag[i] = mag, o.emag[i] = mag;
}

/* Poisoned rows: lse NaN; a valid token's loss and d_hidden row NaN, an ignored one's exactly 0. */
__global__ static void r64_fix_rows_kernel(const r64_consts k, const r64_row *rows, const int64_t *labels,
                                           lce_ref64_dev_output lse, lce_ref64_dev_output lt, lce_ref64_dev_output dh) {
  const int64_t n = blockIdx.x;
  if (!rows[n].poisoned) return;
  const double x = labels[n] != k.ignore_index ? (double)NAN : 0.0;
  if (threadIdx.x == 0) {
    r64_set(lse, n, NAN, 0.0);
    r64_set(lt, n, x, 0.0);
  }
  for (int64_t j = threadIdx.x; j < k.h; j += blockDim.x) r64_set(dh, n * k.h + j, x, 0.0);
}

/* The output weight's gradient: padded rows and non-finite priors are their prior; every real row NaN
 * when a valid token is poisoned. */
__global__ static void r64_fix_grads_kernel(const r64_consts k, const float *prior_w, int poisoned_grad,
                                            lce_ref64_dev_output dw) {
  const int64_t count = k.vp * k.h, real = k.v * k.h;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const double p = prior_w[i];
    if (i < real && poisoned_grad) r64_set(dw, i, NAN, 0.0);
    else if (i >= real || !isfinite(p)) r64_set(dw, i, p, isfinite(p) ? fabs(p) : 0.0);
  }
}

lce_code r64_launch_fixups(const r64_state *x, lce_ref64_device *ref, int poisoned_grad, cudaStream_t s,
                           lce_status *st) {
  r64_fix_rows_kernel<<<(unsigned)x->k.n, 256, 0, s>>>(x->k, x->rows, x->labels, ref->out[LCE_OUT_LSE],
                                                       ref->out[LCE_OUT_LOSS_TOKEN], ref->out[LCE_OUT_D_HIDDEN]);
  R64_LAUNCH_CHECK(st, "r64_fix_rows_kernel");
  r64_fix_grads_kernel<<<r64_blocks(x->k.vp * x->k.h, 256), 256, 0, s>>>(
      x->k, x->prior_w, poisoned_grad, ref->out[LCE_OUT_D_WEIGHT]);
  R64_LAUNCH_CHECK(st, "r64_fix_grads_kernel");
  return LCE_OK;
}
