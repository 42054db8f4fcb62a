/* fused_cuda_device.cuh — the per-element and per-state device arithmetic of the fused algorithm on the
 * GPU, written once for every kernel that applies it: fused-cuda's epilogue kernels
 * (fused_cuda_kernels.cu) and the GEMM epilogues of fused-sm90 (fused_sm90_gemm.cu). Same math and
 * the same fp32 operation order as fused-host (fused_host.c's header); accurate expf/logf/tanhf
 * (no --use_fast_math anywhere). */
#ifndef FUSED_CUDA_DEVICE_CUH
#define FUSED_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "fused_cuda_kernels.cuh"

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

/* One partial online-softmax state: max, sum of exp(z - m), and for smoothing sum_v w_v and
 * sum_v w_v (m - z_v) relative to the same max. */
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

/* What d_logits of one token need besides the logit: its label, the label's weight (1 - e)·w_y,
 * the folded part dl of g, lse, and the factor k of p (w_y, + A with smoothing, + 2·lambda·lse). */
struct fc_row_grad {
  int valid;
  int64_t y;
  float wy, gi, l, k;
};

__device__ __forceinline__ fc_row_grad fc_row_grad_make(const fc_tokens &tk, const fc_options &o, const float *dl,
                                                        const float *lse, const float *smooth_a, int64_t i) {
  fc_row_grad r;
  r.y = tk.labels[i];
  r.valid = r.y != tk.ignore_index;
  r.wy = 0.0f, r.gi = 0.0f, r.l = 0.0f, r.k = 0.0f;
  if (r.valid) {
    r.wy = o.one_minus_e * fc_class_w(tk, r.y), r.gi = dl[i], r.l = lse[i];
    r.k = r.wy;
    if (o.ev != 0.0f) r.k += smooth_a[i];
    if (o.lambda != 0.0f) r.k += 2.0f * o.lambda * r.l;
  }
  return r;
}

/* d loss / d s of one element in fp32 (before the rounding to the dtype): s the GEMM result, v its
 * global vocab row; 0 for an ignored token, whatever its logits. */
__device__ __forceinline__ float fc_dlogit(const fc_row_grad &r, float s, int64_t v, const fc_tokens &tk,
                                           const fc_options &o) {
  if (!r.valid) return 0.0f;
  const float z = fc_softcap(s, o.cap);
  float t = expf(z - r.l) * r.k;
  if (v == r.y) t -= r.wy;
  if (o.ev != 0.0f) t -= o.ev * fc_class_w(tk, v);
  float out = r.gi * t;
  if (o.cap > 0.0f) {
    const float q = z / o.cap;
    out *= 1.0f - q * q;
  }
  return out;
}

/* The dtype rounding of a d_logit (then tf32 with tf32 GEMMs). */
template <typename T> __device__ __forceinline__ T fc_round_dlogit(float out, int tf32) {
  T rounded = fc_from_float<T>(out);
  if (tf32) rounded = fc_from_float<T>(fc_tf32(fc_to_float(rounded)));
  return rounded;
}

#endif
