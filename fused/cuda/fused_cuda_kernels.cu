/* fused_cuda_kernels.cu — the softmax epilogue of fused-cuda: the CUDA kernels that run between the
 * cuBLAS GEMMs of the driver (fused_cuda.cu). Same math and the same fp32 operation order per element
 * as fused-host (fused_host.c's header), except where a parallel reduction has to reassociate: the
 * online statistics of one tile are folded per thread and merged across the block.
 *
 *   chunk_stats    one block per token: online max / rescaled sum (and the smoothing sums) over the
 *                  tile's logits, merged into the shard's running statistics; the label's logit
 *   merge          one thread per token: shards merged in rank order as vocab-parallel ranks
 *                  all-reduce them; lse, the smoothing factor A and loss_token
 *   chunk_dlogits  one thread per tile element: d_logits in the input dtype (then tf32 with tf32 GEMMs),
 *                  with only the exact part dl of g folded in (lce_fused_grad_split)
 *   scale_rows     a token chunk's hidden rows scaled by rho and rounded to the dtype (then tf32): the
 *                  weight gradient's operand under reduction none
 *   finish_dhidden the fp32 d_hidden buffer scaled by rho in fp32 and converted to the dtype, ignored
 *                  rows exactly 0
 *   helpers        stats init, zero ignored hidden rows, tf32 rounding, bench input fills
 * Built with nvcc's defaults (no --use_fast_math): expf, logf, tanhf are the accurate library
 * functions, division and sqrt are IEEE.
 *
 * Build: part of lce_fused_cuda (fused/cuda.cmake); run through the fused-cuda subject. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include <stdio.h>

#include "fused_cuda_kernels.cuh"

extern "C" {
#include "fused_cuda.h"
}

#define FC_BLOCK 256

/* ---- device helpers ------------------------------------------------------------------------ */

/* The logit of a GEMM result s: a non-finite s (a NaN or Inf among the token's hidden values or in
 * the W row) is a NaN logit, as lce_case.h defines and fused-host does, softcap or not (c*tanh(Inf)
 * would otherwise be a finite c, and a -Inf logit would silently drop out of the softmax). */
__device__ __forceinline__ float fc_softcap(float s, float cap) {
  if (!isfinite(s)) return __int_as_float(0x7fc00000);
  return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

__device__ __forceinline__ float fc_class_w(const fc_tokens &tk, int64_t row) {
  return tk.class_weight ? tk.class_weight[row] : 1.0f;
}

__device__ __forceinline__ int fc_valid(const fc_tokens &tk, int64_t i) { return tk.labels[i] != tk.ignore_index; }

/* One partial online-softmax state. */
struct fc_state {
  float m, s, sw, d;
};

/* s_k rescaled to the max M; an empty part (s_k == 0) adds exactly 0 even when m_k = M = -inf, a
 * NaN part keeps its NaN (as fused-host's merge does). */
__device__ __forceinline__ float fc_rescale(float s_k, float m_k, float M) { return s_k == 0.0f ? 0.0f : s_k * expf(m_k - M); }
__device__ __forceinline__ float fc_shift(float sw_k, float m_k, float M) { return sw_k == 0.0f ? 0.0f : sw_k * (M - m_k); }

__device__ __forceinline__ fc_state fc_combine(fc_state a, fc_state b) {
  fc_state r;
  r.m = fmaxf(a.m, b.m);
  r.s = fc_rescale(a.s, a.m, r.m) + fc_rescale(b.s, b.m, r.m);
  r.sw = a.sw + b.sw;
  r.d = a.d + fc_shift(a.sw, a.m, r.m) + b.d + fc_shift(b.sw, b.m, r.m);
  return r;
}

/* Folds one logit z (class weight w) into a state: the running sum is rescaled only when the max
 * grows; fmax semantics ignore a NaN logit for the max but its exp reaches the sum; -inf adds 0. */
__device__ __forceinline__ void fc_fold(fc_state &t, float z, float w, int smoothing) {
  if (z > t.m) {
    t.s = t.s == 0.0f ? 0.0f : t.s * expf(t.m - z);
    if (smoothing && t.sw != 0.0f) t.d += t.sw * (z - t.m);
    t.m = z;
  }
  if (z != -INFINITY) t.s += expf(z - t.m);
  if (smoothing) {
    t.d += w * (t.m - z);
    t.sw += w;
  }
}

__device__ __forceinline__ fc_state fc_shfl_down(fc_state t, int delta) {
  fc_state r;
  r.m = __shfl_down_sync(0xffffffffu, t.m, delta);
  r.s = __shfl_down_sync(0xffffffffu, t.s, delta);
  r.sw = __shfl_down_sync(0xffffffffu, t.sw, delta);
  r.d = __shfl_down_sync(0xffffffffu, t.d, delta);
  return r;
}

/* Combines the states of all threads of the block; thread 0 gets the result. */
__device__ fc_state fc_block_combine(fc_state t) {
  __shared__ fc_state warp_part[FC_BLOCK / 32];
  for (int delta = 16; delta > 0; delta /= 2) t = fc_combine(t, fc_shfl_down(t, delta));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_part[warp] = t;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 1; k < FC_BLOCK / 32; k++) t = fc_combine(t, warp_part[k]);
  return t;
}

__device__ __forceinline__ float fc_tf32(float x) {
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
}

template <typename T> __device__ __forceinline__ T fc_from_float(float x);
template <> __device__ __forceinline__ float fc_from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 fc_from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half fc_from_float<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float fc_to_float(float x) { return x; }
__device__ __forceinline__ float fc_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float fc_to_float(__half x) { return __half2float(x); }

/* ---- kernels ------------------------------------------------------------------------------- */

__global__ void __launch_bounds__(FC_BLOCK) fc_stats_init_kernel(fc_stats b, int64_t count, float *z_target, int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
    b.m[e] = -INFINITY, b.s[e] = 0.0f, b.sw[e] = 0.0f, b.d[e] = 0.0f;
    if (e < n) z_target[e] = 0.0f;
  }
}

__global__ void __launch_bounds__(FC_BLOCK) fc_chunk_stats_kernel(const float *tile, int64_t rows, int64_t t0, int64_t row0,
                                                      fc_tokens tk, fc_options o, fc_stats shard, float *z_target) {
  const int64_t local = blockIdx.x, i = t0 + local;
  const float *zi = tile + local * rows;
  const int smoothing = o.ev != 0.0f;
  fc_state t = {-INFINITY, 0.0f, 0.0f, 0.0f};
  for (int64_t j = threadIdx.x; j < rows; j += FC_BLOCK)
    fc_fold(t, fc_softcap(zi[j], o.cap), smoothing ? fc_class_w(tk, row0 + j) : 1.0f, smoothing);
  t = fc_block_combine(t);
  if (threadIdx.x != 0) return;
  fc_state run = {shard.m[i], shard.s[i], shard.sw[i], shard.d[i]};
  run = fc_combine(run, t);
  shard.m[i] = run.m, shard.s[i] = run.s;
  if (smoothing) shard.sw[i] = run.sw, shard.d[i] = run.d;
  const int64_t y = tk.labels[i];
  if (y != tk.ignore_index && y >= row0 && y < row0 + rows) z_target[i] = fc_softcap(zi[y - row0], o.cap);
}

__global__ void __launch_bounds__(FC_BLOCK) fc_merge_kernel(fc_stats all, int tp, const float *z_target, fc_tokens tk,
                                                fc_options o, float *lse, float *smooth_a, float *loss_token) {
  const int64_t n = tk.n;
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float M = -INFINITY, S = 0.0f, A = 0.0f, B = 0.0f;
  for (int r = 0; r < tp; r++) M = fmaxf(M, all.m[(int64_t)r * n + i]);
  for (int r = 0; r < tp; r++) {
    const int64_t at = (int64_t)r * n + i;
    const float m_r = all.m[at], s_r = all.s[at];
    if (s_r == 0.0f) continue;
    S += s_r * expf(m_r - M);
    if (o.ev != 0.0f) {
      A += o.ev * all.sw[at];
      B += o.ev * (all.d[at] + all.sw[at] * (M - m_r));
    }
  }
  const float l = M + logf(S);
  lse[i] = l;
  smooth_a[i] = A;
  float loss_i = 0.0f;
  if (fc_valid(tk, i)) {
    loss_i = o.one_minus_e * fc_class_w(tk, tk.labels[i]) * (l - z_target[i]);
    if (o.ev != 0.0f) loss_i += B + A * logf(S);
    if (o.lambda != 0.0f) loss_i += o.lambda * l * l;
  }
  loss_token[i] = loss_i;
}

template <typename T>
__global__ void __launch_bounds__(FC_BLOCK) fc_chunk_dlogits_kernel(const float *tile, T *ds, int64_t rows, int64_t t0, int64_t row0,
                                                        fc_tokens tk, fc_options o, const float *dl, const float *lse,
                                                        const float *smooth_a) {
  const int64_t local = blockIdx.x, i = t0 + local;
  const float *zi = tile + local * rows;
  T *di = ds + local * rows;
  const int64_t y = tk.labels[i];
  const int valid = y != tk.ignore_index;
  float wy = 0.0f, gi = 0.0f, l = 0.0f, k = 0.0f;
  if (valid) {
    wy = o.one_minus_e * fc_class_w(tk, y), gi = dl[i], l = lse[i];
    k = wy;
    if (o.ev != 0.0f) k += smooth_a[i];
    if (o.lambda != 0.0f) k += 2.0f * o.lambda * l;
  }
  for (int64_t j = blockIdx.y * (int64_t)FC_BLOCK + threadIdx.x; j < rows; j += (int64_t)gridDim.y * FC_BLOCK) {
    float out = 0.0f; /* ignored tokens are masked, whatever their logits */
    if (valid) {
      const float z = fc_softcap(zi[j], o.cap);
      float t = expf(z - l) * k;
      if (row0 + j == y) t -= wy;
      if (o.ev != 0.0f) t -= o.ev * fc_class_w(tk, row0 + j);
      out = gi * t;
      if (o.cap > 0.0f) {
        const float q = z / o.cap;
        out *= 1.0f - q * q;
      }
    }
    T rounded = fc_from_float<T>(out);
    if (o.tf32) rounded = fc_from_float<T>(fc_tf32(fc_to_float(rounded)));
    di[j] = rounded;
  }
}

__global__ void __launch_bounds__(FC_BLOCK) fc_zero_ignored_rows_kernel(uint16_t *x, int64_t row_units, fc_tokens tk) {
  const int64_t i = blockIdx.x;
  if (fc_valid(tk, i)) return;
  for (int64_t e = blockIdx.y * (int64_t)FC_BLOCK + threadIdx.x; e < row_units; e += (int64_t)gridDim.y * FC_BLOCK)
    x[i * row_units + e] = 0;
}

__global__ void __launch_bounds__(FC_BLOCK) fc_round_tf32_kernel(float *x, int64_t count) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x)
    x[e] = fc_tf32(x[e]);
}

template <typename T>
__global__ void __launch_bounds__(FC_BLOCK) fc_scale_rows_kernel(const T *x, T *out, int64_t h, const float *rho, int tf32) {
  const int64_t i = blockIdx.x;
  const float r = rho[i];
  for (int64_t e = blockIdx.y * (int64_t)FC_BLOCK + threadIdx.x; e < h; e += (int64_t)gridDim.y * FC_BLOCK) {
    T v = x[i * h + e];
    if (r != 1.0f) {
      v = fc_from_float<T>(r * fc_to_float(v));
      if (tf32) v = fc_from_float<T>(fc_tf32(fc_to_float(v)));
    }
    out[i * h + e] = v;
  }
}

template <typename A, typename T>
__global__ void __launch_bounds__(FC_BLOCK) fc_finish_dhidden_kernel(const A *acc, T *out, int64_t h, fc_tokens tk,
                                                                     const float *rho) {
  const int64_t i = blockIdx.x;
  const int valid = fc_valid(tk, i);
  const float r = valid ? rho[i] : 0.0f;
  for (int64_t e = blockIdx.y * (int64_t)FC_BLOCK + threadIdx.x; e < h; e += (int64_t)gridDim.y * FC_BLOCK)
    out[i * h + e] = fc_from_float<T>(valid ? r * fc_to_float(acc[i * h + e]) : 0.0f);
}

/* splitmix64 of (seed, index): a counter-based generator, any element regenerable. */
__device__ __forceinline__ uint64_t fc_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void __launch_bounds__(FC_BLOCK) fc_fill_uniform_kernel(T *x, int64_t count, float scale, uint64_t seed) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
    const float u = (float)(fc_hash(seed, (uint64_t)e) >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
    x[e] = fc_from_float<T>((2.0f * u - 1.0f) * scale);
  }
}

__global__ void __launch_bounds__(FC_BLOCK) fc_fill_labels_kernel(int64_t *labels, int64_t n, int64_t v, uint64_t seed) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
    labels[e] = (int64_t)(fc_hash(seed, (uint64_t)e) % (uint64_t)v);
}

/* ---- launchers ----------------------------------------------------------------------------- */

/* A 1-D grid striding over count elements: enough blocks to fill the chip, never zero. */
static unsigned fc_grid(int64_t count) {
  int64_t blocks = (count + FC_BLOCK - 1) / FC_BLOCK;
  return (unsigned)(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

/* Blocks along y for per-token rows of `len` elements (grid.x is the token). */
static unsigned fc_row_blocks(int64_t len) {
  int64_t blocks = (len + 4 * FC_BLOCK - 1) / (4 * FC_BLOCK);
  return (unsigned)(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
}

/* One block (grid.x) per token: tok must fit a grid dimension. */
static lce_code fc_check_tokens(int64_t tok, lce_status *st) {
  LCE_CHECK(st, tok >= 1 && tok <= INT32_MAX, LCE_EINVAL, "fused-cuda: %lld tokens in one launch", (long long)tok);
  return LCE_OK;
}

lce_code fc_launch_stats_init(fc_stats b, int64_t count, float *z_target, int64_t n, cudaStream_t stream,
                              lce_status *st) {
  fc_stats_init_kernel<<<fc_grid(count), FC_BLOCK, 0, stream>>>(b, count, z_target, n);
  LCE_CUDA_LAUNCH_CHECK(st, "fc_stats_init_kernel");
  return LCE_OK;
}

lce_code fc_launch_chunk_stats(const float *tile, int64_t tok, int64_t rows, int64_t t0, int64_t row0,
                               fc_tokens tk, fc_options o, fc_stats shard, float *z_target, cudaStream_t stream,
                               lce_status *st) {
  LCE_TRY(fc_check_tokens(tok, st));
  fc_chunk_stats_kernel<<<(unsigned)tok, FC_BLOCK, 0, stream>>>(tile, rows, t0, row0, tk, o, shard, z_target);
  LCE_CUDA_LAUNCH_CHECK(st, "fc_chunk_stats_kernel");
  return LCE_OK;
}

lce_code fc_launch_merge(fc_stats all, int tp, const float *z_target, fc_tokens tk, fc_options o, float *lse,
                         float *smooth_a, float *loss_token, cudaStream_t stream, lce_status *st) {
  const int64_t blocks = (tk.n + FC_BLOCK - 1) / FC_BLOCK;
  fc_merge_kernel<<<(unsigned)blocks, FC_BLOCK, 0, stream>>>(all, tp, z_target, tk, o, lse, smooth_a, loss_token);
  LCE_CUDA_LAUNCH_CHECK(st, "fc_merge_kernel");
  return LCE_OK;
}

lce_code fc_launch_chunk_dlogits(const float *tile, void *ds, int64_t tok, int64_t rows, int64_t t0, int64_t row0,
                                 fc_tokens tk, fc_options o, const float *dl, const float *lse,
                                 const float *smooth_a, cudaStream_t stream, lce_status *st) {
  LCE_TRY(fc_check_tokens(tok, st));
  const dim3 grid((unsigned)tok, fc_row_blocks(rows));
  switch (o.dtype) {
    case LCE_BF16:
      fc_chunk_dlogits_kernel<<<grid, FC_BLOCK, 0, stream>>>(tile, (__nv_bfloat16 *)ds, rows, t0, row0, tk, o, dl, lse, smooth_a);
      break;
    case LCE_FP16:
      fc_chunk_dlogits_kernel<<<grid, FC_BLOCK, 0, stream>>>(tile, (__half *)ds, rows, t0, row0, tk, o, dl, lse, smooth_a);
      break;
    default:
      fc_chunk_dlogits_kernel<<<grid, FC_BLOCK, 0, stream>>>(tile, (float *)ds, rows, t0, row0, tk, o, dl, lse, smooth_a);
      break;
  }
  LCE_CUDA_LAUNCH_CHECK(st, "fc_chunk_dlogits_kernel");
  return LCE_OK;
}

lce_code fc_launch_zero_ignored_rows(void *x, lce_dtype dtype, int64_t h, fc_tokens tk, cudaStream_t stream,
                                     lce_status *st) {
  LCE_TRY(fc_check_tokens(tk.n, st));
  const int64_t row_units = h * (int64_t)lce_dtype_size(dtype) / 2; /* 2-byte units per row */
  fc_zero_ignored_rows_kernel<<<dim3((unsigned)tk.n, fc_row_blocks(row_units)), FC_BLOCK, 0, stream>>>(
      (uint16_t *)x, row_units, tk);
  LCE_CUDA_LAUNCH_CHECK(st, "fc_zero_ignored_rows_kernel");
  return LCE_OK;
}

lce_code fc_launch_round_tf32(float *x, int64_t count, cudaStream_t stream, lce_status *st) {
  fc_round_tf32_kernel<<<fc_grid(count), FC_BLOCK, 0, stream>>>(x, count);
  LCE_CUDA_LAUNCH_CHECK(st, "fc_round_tf32_kernel");
  return LCE_OK;
}

lce_code fc_launch_scale_rows(const void *x, void *out, lce_dtype dtype, int64_t tok, int64_t h, const float *rho,
                              int tf32, cudaStream_t stream, lce_status *st) {
  LCE_TRY(fc_check_tokens(tok, st));
  const dim3 grid((unsigned)tok, fc_row_blocks(h));
  switch (dtype) {
    case LCE_BF16:
      fc_scale_rows_kernel<<<grid, FC_BLOCK, 0, stream>>>((const __nv_bfloat16 *)x, (__nv_bfloat16 *)out, h, rho, tf32);
      break;
    case LCE_FP16: fc_scale_rows_kernel<<<grid, FC_BLOCK, 0, stream>>>((const __half *)x, (__half *)out, h, rho, tf32); break;
    default: fc_scale_rows_kernel<<<grid, FC_BLOCK, 0, stream>>>((const float *)x, (float *)out, h, rho, tf32); break;
  }
  LCE_CUDA_LAUNCH_CHECK(st, "fc_scale_rows_kernel");
  return LCE_OK;
}

template <typename A>
static void fc_finish_typed(const A *acc, void *out, lce_dtype dtype, int64_t h, fc_tokens tk, const float *rho,
                            dim3 grid, cudaStream_t stream) {
  switch (dtype) {
    case LCE_BF16: fc_finish_dhidden_kernel<<<grid, FC_BLOCK, 0, stream>>>(acc, (__nv_bfloat16 *)out, h, tk, rho); break;
    case LCE_FP16: fc_finish_dhidden_kernel<<<grid, FC_BLOCK, 0, stream>>>(acc, (__half *)out, h, tk, rho); break;
    default: fc_finish_dhidden_kernel<<<grid, FC_BLOCK, 0, stream>>>(acc, (float *)out, h, tk, rho); break;
  }
}

lce_code fc_launch_finish_dhidden(const void *acc, lce_dtype acc_dtype, const float *rho, void *d_hidden,
                                  lce_dtype dtype, int64_t h, fc_tokens tk, cudaStream_t stream, lce_status *st) {
  LCE_TRY(fc_check_tokens(tk.n, st));
  const dim3 grid((unsigned)tk.n, fc_row_blocks(h));
  switch (acc_dtype) {
    case LCE_BF16: fc_finish_typed((const __nv_bfloat16 *)acc, d_hidden, dtype, h, tk, rho, grid, stream); break;
    case LCE_FP16: fc_finish_typed((const __half *)acc, d_hidden, dtype, h, tk, rho, grid, stream); break;
    default: fc_finish_typed((const float *)acc, d_hidden, dtype, h, tk, rho, grid, stream); break;
  }
  LCE_CUDA_LAUNCH_CHECK(st, "fc_finish_dhidden_kernel");
  return LCE_OK;
}

lce_code fc_launch_fill_uniform(void *x, lce_dtype dtype, int64_t count, float scale, uint64_t seed,
                                cudaStream_t stream, lce_status *st) {
  switch (dtype) {
    case LCE_BF16: fc_fill_uniform_kernel<<<fc_grid(count), FC_BLOCK, 0, stream>>>((__nv_bfloat16 *)x, count, scale, seed); break;
    case LCE_FP16: fc_fill_uniform_kernel<<<fc_grid(count), FC_BLOCK, 0, stream>>>((__half *)x, count, scale, seed); break;
    default: fc_fill_uniform_kernel<<<fc_grid(count), FC_BLOCK, 0, stream>>>((float *)x, count, scale, seed); break;
  }
  LCE_CUDA_LAUNCH_CHECK(st, "fc_fill_uniform_kernel");
  return LCE_OK;
}

lce_code fc_launch_fill_labels(int64_t *labels, int64_t n, int64_t v, uint64_t seed, cudaStream_t stream,
                               lce_status *st) {
  fc_fill_labels_kernel<<<fc_grid(n), FC_BLOCK, 0, stream>>>(labels, n, v, seed);
  LCE_CUDA_LAUNCH_CHECK(st, "fc_fill_labels_kernel");
  return LCE_OK;
}
