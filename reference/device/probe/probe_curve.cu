/* probe_curve.cu — the GPU half of the error-vs-K curve (probe_gpu.h): randn bf16 operands drawn
 * on the device, one cuBLAS bf16 GEMM (fp32 accumulate) and one cuBLAS DGEMM of the same values.
 *
 * The operands come from a device twin of lce_rand_normal (reference/case/lce_prng.c: SplitMix64
 * mixing, an Irwin–Hall sum of four uniforms, only +, - and * in double, here with explicit
 * round-to-nearest intrinsics so nvcc cannot contract them into fmas), rounded to bf16 with
 * round-to-nearest-even straight from double as lce_bf16_from_double does. The host re-draws the
 * rows and columns it samples with lce_prng and compares them with the copies this file returns,
 * so the twin is checked on every run. Drawing on the device keeps the default shape (2048^2 x
 * 262144, 8.6 GB of operands in fp64) out of host memory and PCIe time.
 *
 * The fp64 GEMM is the reference: every bf16 product is exact in fp64, so its error is the
 * summation's alone, |r - exact| <= K·2^-53·sum_k |a_k b_k| (first order), which the host reports
 * relative to |r| on its sample. */
#include <stdio.h>
#include <stdlib.h>

#include "probe_cuda.cuh"

extern "C" {
#include "probe_gpu.h"
}

__device__ __forceinline__ uint64_t twin_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ uint64_t twin_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = twin_mix64(seed + 0x9e3779b97f4a7c15ull);
  h = twin_mix64(h ^ (stream * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
  return twin_mix64(h ^ (index * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull));
}

__device__ __forceinline__ double twin_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  double s = 0.0;
  for (uint64_t j = 0; j < 4; j++) {
    const double u = __dmul_rn(__dadd_rn((double)(twin_u64(seed, stream, 4 * index + j) >> 11), 0.5), 0x1p-53);
    s = __dadd_rn(s, u);
  }
  return __dmul_rn(__dadd_rn(s, -2.0), 1.7320508075688772);
}

/* bf16 bits of x, round to nearest even from double. |x| < 3.47 and x is either 0 or far above
 * bf16's subnormals, so only the normal path is needed. */
__device__ __forceinline__ uint16_t twin_bf16(double x) {
  const uint64_t u = (uint64_t)__double_as_longlong(x);
  const uint16_t sign = (uint16_t)((u >> 63) << 15);
  if ((u << 1) == 0) return sign;
  const uint64_t r = u + ((1ull << 44) - 1) + ((u >> 45) & 1); /* RNE at the 45 dropped bits */
  const int exp = (int)((r >> 52) & 0x7ff) - 1023 + 127;
  return (uint16_t)(sign | ((uint32_t)exp << 7) | (uint32_t)((r >> 45) & 0x7f));
}

__device__ __forceinline__ double bf16_value(uint16_t h) { return (double)__uint_as_float((uint32_t)h << 16); }

/* rows x k matrix, element (i, kk) at i*k + kk with that index: both bf16 bits and the fp64 value. */
__global__ void curve_draw(uint16_t *x16, double *x64, int64_t count, uint64_t seed, uint64_t stream) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
    const uint16_t h = twin_bf16(twin_normal(seed, stream, (uint64_t)e));
    x16[e] = h;
    x64[e] = bf16_value(h);
  }
}

extern "C" lce_code probe_gpu_curve(probe_curve_gpu *io, lce_status *st) {
  lce_code rc = LCE_OK;
  const int64_t m = io->m, n = io->n, k = io->k;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  uint16_t *a16 = NULL, *b16 = NULL;
  double *a64 = NULL, *b64 = NULL, *r = NULL;
  float *x = NULL, ms = 0.0f;
  cublasHandle_t handle = NULL;
  cudaEvent_t ev[3] = {NULL, NULL, NULL};
  LCE_TRY(probe_require_device(st));
  LCE_CHECK(st, m > 0 && n > 0 && k > 0 && m <= 65536 && n <= 65536 && k <= (1ll << 24), LCE_EINVAL,
            "probe curve: shape %lld x %lld x %lld out of range", (long long)m, (long long)n, (long long)k);
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&a16, (size_t)(m * k) * sizeof *a16));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&b16, (size_t)(n * k) * sizeof *b16));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&a64, (size_t)(m * k) * sizeof *a64));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&b64, (size_t)(n * k) * sizeof *b64));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&x, (size_t)(m * n) * sizeof *x));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&r, (size_t)(m * n) * sizeof *r));
  for (int e = 0; e < 3; e++) PROBE_CUDA_CHECK(st, cudaEventCreate(&ev[e]));
  curve_draw<<<1024, 256>>>(a16, a64, m * k, io->seed, PROBE_CURVE_STREAM(k, 0));
  PROBE_LAUNCH_CHECK(st, "curve_draw A");
  curve_draw<<<1024, 256>>>(b16, b64, n * k, io->seed, PROBE_CURVE_STREAM(k, 1));
  PROBE_LAUNCH_CHECK(st, "curve_draw B");
  PROBE_CUBLAS_CHECK(st, cublasCreate(&handle));
  /* Column-major: A is stored k x m (column i = row i of the math A), B k x n, so X = A^T B. */
  PROBE_CUDA_CHECK(st, cudaEventRecord(ev[0]));
  PROBE_CUBLAS_CHECK(st, cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one_f, a16, CUDA_R_16BF,
                                      (int)k, b16, CUDA_R_16BF, (int)k, &zero_f, x, CUDA_R_32F, (int)m,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  PROBE_CUDA_CHECK(st, cudaEventRecord(ev[1]));
  PROBE_CUBLAS_CHECK(st, cublasDgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one_d, a64, (int)k, b64,
                                     (int)k, &zero_d, r, (int)m));
  PROBE_CUDA_CHECK(st, cudaEventRecord(ev[2]));
  PROBE_CUDA_CHECK(st, cudaEventSynchronize(ev[2]));
  PROBE_CUDA_CHECK(st, cudaEventElapsedTime(&ms, ev[0], ev[1]));
  io->gemm_ms = ms;
  PROBE_CUDA_CHECK(st, cudaEventElapsedTime(&ms, ev[1], ev[2]));
  io->dgemm_ms = ms;
  PROBE_CUDA_CHECK(st, cudaMemcpy(io->x, x, (size_t)(m * n) * sizeof *x, cudaMemcpyDeviceToHost));
  PROBE_CUDA_CHECK(st, cudaMemcpy(io->r, r, (size_t)(m * n) * sizeof *r, cudaMemcpyDeviceToHost));
  for (int i = 0; i < io->nrows; i++)
    PROBE_CUDA_CHECK(st, cudaMemcpy(io->a_rows + (size_t)i * k, a16 + (size_t)io->rows[i] * k, (size_t)k * sizeof *a16,
                                    cudaMemcpyDeviceToHost));
  for (int j = 0; j < io->ncols; j++)
    PROBE_CUDA_CHECK(st, cudaMemcpy(io->b_cols + (size_t)j * k, b16 + (size_t)io->cols[j] * k, (size_t)k * sizeof *b16,
                                    cudaMemcpyDeviceToHost));
done:
  if (handle) cublasDestroy(handle);
  for (int e = 0; e < 3; e++)
    if (ev[e]) cudaEventDestroy(ev[e]);
  cudaFree(a16);
  cudaFree(b16);
  cudaFree(a64);
  cudaFree(b64);
  cudaFree(x);
  cudaFree(r);
  return rc;
}
