/* lce_production_device.cu — the CUDA pieces of `lcecheck production` (lce_production_gpu.h): the
 * device's identity for the per-architecture golden and its provenance, free memory (to decide whether
 * the fp64 reference can keep its error magnitudes beside the subjects), and one reduction kernel for
 * the two reference moments lce_ref64_compare does not return: sum r^4 (bias's effective element
 * count) and sum emag^2 (the output's condition for the cond/condk golden forms).
 *
 * Build: conformance/production/CMakeLists.txt (sm_90, with lce_ref64). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_cuda_status.cuh"
extern "C" {
#include "lce_production_gpu.h"
}
#define PROD_CUDA(st, call) LCE_CUDA_ON_ERROR(st, "production", call, return lce_rc_)

#define MOMENT_BLOCK 256
#define MOMENT_GRID 1024

/* Per-block partial sums of value^4 and emag^2 over finite values, grid-stride; block b writes
 * partial[2b], partial[2b+1]. */
__global__ void __launch_bounds__(MOMENT_BLOCK) moments_kernel(const double *value, const double *emag, int64_t count,
                                                               double *partial) {
  __shared__ double s4[MOMENT_BLOCK], se[MOMENT_BLOCK];
  double a = 0.0, b = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)MOMENT_BLOCK + threadIdx.x; i < count; i += (int64_t)gridDim.x * MOMENT_BLOCK) {
    const double r = value[i];
    if (!isfinite(r)) continue;
    a += (r * r) * (r * r);
    if (emag) b += emag[i] * emag[i];
  }
  s4[threadIdx.x] = a, se[threadIdx.x] = b;
  __syncthreads();
  for (int half = MOMENT_BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s4[threadIdx.x] += s4[threadIdx.x + half], se[threadIdx.x] += se[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = s4[0], partial[2 * blockIdx.x + 1] = se[0];
}

lce_code lce_prod_ref_moments(const double *value, const double *emag, int64_t count, double *sum_r4,
                              double *sum_emag2, lce_status *st) {
  *sum_r4 = 0.0, *sum_emag2 = emag ? 0.0 : -1.0;
  if (count <= 0) return LCE_OK;
  double *partial = NULL, host[2 * MOMENT_GRID];
  PROD_CUDA(st, cudaMalloc((void **)&partial, sizeof host));
  moments_kernel<<<MOMENT_GRID, MOMENT_BLOCK>>>(value, emag, count, partial);
  cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) rc = cudaMemcpy(host, partial, sizeof host, cudaMemcpyDeviceToHost);
  cudaFree(partial);
  PROD_CUDA(st, rc);
  for (int b = 0; b < MOMENT_GRID; b++) {
    *sum_r4 += host[2 * b];
    if (emag) *sum_emag2 += host[2 * b + 1];
  }
  return LCE_OK;
}
