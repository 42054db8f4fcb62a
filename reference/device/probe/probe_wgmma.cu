/* probe_wgmma.cu — the MMA probe through the warp-group instruction fused-sm90 issues (probe_gpu.h,
 * probe_wgmma.cuh): wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 (and .f16.f16), both operands
 * from shared memory, K-major, one instruction per probe tile with the tile's C as the initial
 * accumulator (scale-d = 1). The operands reach shared memory as their storage bits; CuTe builds the
 * shared-memory descriptors and issues the instruction (cute::gemm on one k-block), as CUTLASS's
 * mainloop does in fused_sm90_gemm.cu. Results are compared with the model by the same probe_check as
 * mma.sync's (lcecheck probe --wgmma).
 *
 * Build: reference/device/CMakeLists.txt, only with CUTLASS's headers, for sm_90a (lce_probe_sm90). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cutlass/arch/barrier.h>
#include <cutlass/bfloat16.h>
#include <cutlass/half.h>

#include "probe_cuda.cuh"
#include "probe_wgmma.cuh"

extern "C" {
#include "probe_gpu.h"
}

using namespace probe_wgmma;

/* One probe tile per CTA of one warp group: A [16][16], B [16][8] storage bits, C and D [16][8]. */
template <typename Element>
__global__ void __launch_bounds__(PROBE_WGMMA_THREADS, 1)
    probe_wgmma_kernel(const uint16_t *A, const uint16_t *B, const float *C, float *D, int tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = Config<Element>;
  __shared__ alignas(128) Element smem_a[PROBE_WGMMA_M * 16];
  __shared__ alignas(128) Element smem_b[PROBE_WGMMA_N * 16];
  const long tile = blockIdx.x;
  if (tile >= tiles) return;
  const uint16_t *a = A + tile * 256, *b = B + tile * 128;
  const float *c = C + tile * 128;
  float *d = D + tile * 128;
  Tensor sA = make_tensor(make_smem_ptr(smem_a), typename Cfg::LayoutA{}); /* (64, 16): (m, k) */
  Tensor sB = make_tensor(make_smem_ptr(smem_b), typename Cfg::LayoutB{}); /* (256, 16): (n, k) */
  for (int e = threadIdx.x; e < PROBE_WGMMA_M * 16; e += PROBE_WGMMA_THREADS) {
    const int m = e / 16, k = e % 16;
    sA(m, k) = Element::bitcast(a[(m % 16) * 16 + k]);
  }
  for (int e = threadIdx.x; e < PROBE_WGMMA_N * 16; e += PROBE_WGMMA_THREADS) {
    const int n = e / 16, k = e % 16;
    sB(n, k) = Element::bitcast(b[k * 8 + n % 8]);
  }
  cutlass::arch::fence_view_async_shared(); /* the generic-proxy stores, visible to wgmma's async proxy */
  __syncthreads();

  typename Cfg::TiledMma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA)); /* shared-memory descriptors */
  Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
  Tensor acc = partition_fragment_C(mma, Shape<Int<PROBE_WGMMA_M>, Int<PROBE_WGMMA_N>>{});
  Tensor crd = thr.partition_C(make_identity_tensor(Shape<Int<PROBE_WGMMA_M>, Int<PROBE_WGMMA_N>>{}));
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i++) {
    const int m = get<0>(crd(i)), n = get<1>(crd(i));
    acc(i) = c[(m % 16) * 8 + n % 8];
  }
  mma.accumulate_ = GMMA::ScaleOut::One; /* D = C + A·B: the probe's c is the accumulator */
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  cute::gemm(mma, tCrA(_, _, 0), tCrB(_, _, 0), acc);
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
  const int rm = replica_m(tile), rn = replica_n(tile);
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i++) {
    const int m = get<0>(crd(i)), n = get<1>(crd(i));
    if (m / 16 == rm && n / 8 == rn) d[(m % 16) * 8 + n % 8] = acc(i);
  }
#endif
}

extern "C" lce_code probe_gpu_wgmma(probe_tileset *ts, lce_status *st) {
  lce_code rc = LCE_OK;
  const size_t na = ts->tiles * PROBE_M * (size_t)ts->k, nb = ts->tiles * PROBE_N * (size_t)ts->k;
  const size_t nc = ts->tiles * PROBE_TILE_OUT;
  uint16_t *ha = NULL, *hb = NULL;
  void *da = NULL, *db = NULL;
  float *dc = NULL, *dd = NULL;
  LCE_TRY(probe_require_device(st));
  LCE_CHECK(st, ts->format == LCE_MMA_BF16 || ts->format == LCE_MMA_FP16, LCE_EINVAL,
            "probe: no %s wgmma here (fused-sm90 issues bf16 and fp16 only)", probe_format_name(ts->format));
  LCE_CHECK(st, ts->k == 16 && ts->tiles <= (size_t)INT32_MAX, LCE_EINVAL, "probe: %zu tiles of k %d for wgmma k16",
            ts->tiles, ts->k);
  ha = (uint16_t *)malloc(na * 2);
  hb = (uint16_t *)malloc(nb * 2);
  if (ha == NULL || hb == NULL) {
    rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "probe: out of memory staging %zu tiles", ts->tiles);
    goto done;
  }
  for (size_t i = 0; i < na; i++) ha[i] = (uint16_t)probe_bits(ts->format, ts->a[i]);
  for (size_t i = 0; i < nb; i++) hb[i] = (uint16_t)probe_bits(ts->format, ts->b[i]);
  PROBE_CUDA_CHECK(st, cudaMalloc(&da, na * 2));
  PROBE_CUDA_CHECK(st, cudaMalloc(&db, nb * 2));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&dc, nc * sizeof(float)));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&dd, nc * sizeof(float)));
  PROBE_CUDA_CHECK(st, cudaMemcpy(da, ha, na * 2, cudaMemcpyHostToDevice));
  PROBE_CUDA_CHECK(st, cudaMemcpy(db, hb, nb * 2, cudaMemcpyHostToDevice));
  PROBE_CUDA_CHECK(st, cudaMemcpy(dc, ts->c, nc * sizeof(float), cudaMemcpyHostToDevice));
  /* The poison of probe_generate: a result the kernel fails to write stays visible. */
  PROBE_CUDA_CHECK(st, cudaMemcpy(dd, ts->d, nc * sizeof(float), cudaMemcpyHostToDevice));
  if (ts->format == LCE_MMA_BF16)
    probe_wgmma_kernel<cute::bfloat16_t><<<(unsigned)ts->tiles, PROBE_WGMMA_THREADS>>>(
        (const uint16_t *)da, (const uint16_t *)db, dc, dd, (int)ts->tiles);
  else
    probe_wgmma_kernel<cute::half_t><<<(unsigned)ts->tiles, PROBE_WGMMA_THREADS>>>(
        (const uint16_t *)da, (const uint16_t *)db, dc, dd, (int)ts->tiles);
  PROBE_LAUNCH_CHECK(st, "probe_wgmma_kernel");
  PROBE_CUDA_CHECK(st, cudaMemcpy(ts->d, dd, nc * sizeof(float), cudaMemcpyDeviceToHost));
done:
  free(ha);
  free(hb);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dd);
  return rc;
}
