/* probe_mma.cu — single tensor-core MMA instructions on test-vector tiles (probe_gpu.h).
 *
 * One warp issues exactly one mma.sync per tile, through inline PTX so that no library or
 * compiler transformation stands between the test vector and the instruction:
 *   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   (and .f16.f16)
 *   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
 * Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16" / "mma.m16n8k8"), with
 * g = lane >> 2 and t = lane % 4:
 *   m16n8k16 A (4 x .b32, two 16-bit elements each, lower column in the low half):
 *            {A[g][2t..2t+1], A[g+8][2t..2t+1], A[g][2t+8..2t+9], A[g+8][2t+8..2t+9]}
 *   m16n8k16 B (2 x .b32, lower k in the low half): {B[2t..2t+1][g], B[2t+8..2t+9][g]}
 *   m16n8k8  A (4 x .b32, one tf32 each): {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]}
 *   m16n8k8  B (2 x .b32): {B[t][g], B[t+4][g]}
 *   C and D (both shapes, 4 x .f32): {X[g][2t], X[g][2t+1], X[g+8][2t], X[g+8][2t+1]}
 * A wrong layout shows at once in the probe's "exact" class (small integers, exact in every model),
 * which the probe reports separately as a harness error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_cuda.cuh"

extern "C" {
#include "probe_gpu.h"
}

lce_code probe_require_device(lce_status *st) {
  char why[200];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "probe: %s", why);
  return LCE_OK;
}

__device__ __forceinline__ uint32_t pack16(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

/* One tile per warp: A [16][16], B [16][8] 16-bit storage bits, C and D [16][8] fp32. */
template <bool BF16>
__global__ void probe_mma_k16(const uint16_t *A, const uint16_t *B, const float *C, float *D, int tiles) {
  const int tile = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  if (tile >= tiles) return; /* whole warps only: blockDim is a multiple of 32 */
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint16_t *a = A + (size_t)tile * 256;
  const uint16_t *b = B + (size_t)tile * 128;
  const float *c = C + (size_t)tile * 128;
  float *d = D + (size_t)tile * 128;
  const uint32_t a0 = pack16(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]);
  const uint32_t a1 = pack16(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]);
  const uint32_t a2 = pack16(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]);
  const uint32_t a3 = pack16(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9]);
  const uint32_t b0 = pack16(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]);
  const uint32_t b1 = pack16(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g]);
  const float c0 = c[g * 8 + 2 * t], c1 = c[g * 8 + 2 * t + 1], c2 = c[(g + 8) * 8 + 2 * t], c3 = c[(g + 8) * 8 + 2 * t + 1];
  float d0, d1, d2, d3;
  if (BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
  d[g * 8 + 2 * t] = d0;
  d[g * 8 + 2 * t + 1] = d1;
  d[(g + 8) * 8 + 2 * t] = d2;
  d[(g + 8) * 8 + 2 * t + 1] = d3;
}

/* One tile per warp: A [16][8], B [8][8] tf32 as fp32 bits, C and D [16][8] fp32. */
__global__ void probe_mma_tf32(const uint32_t *A, const uint32_t *B, const float *C, float *D, int tiles) {
  const int tile = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  if (tile >= tiles) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint32_t *a = A + (size_t)tile * 128;
  const uint32_t *b = B + (size_t)tile * 64;
  const float *c = C + (size_t)tile * 128;
  float *d = D + (size_t)tile * 128;
  const uint32_t a0 = a[g * 8 + t], a1 = a[(g + 8) * 8 + t], a2 = a[g * 8 + t + 4], a3 = a[(g + 8) * 8 + t + 4];
  const uint32_t b0 = b[t * 8 + g], b1 = b[(t + 4) * 8 + g];
  const float c0 = c[g * 8 + 2 * t], c1 = c[g * 8 + 2 * t + 1], c2 = c[(g + 8) * 8 + 2 * t], c3 = c[(g + 8) * 8 + 2 * t + 1];
  float d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};\n"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
  d[g * 8 + 2 * t] = d0;
  d[g * 8 + 2 * t + 1] = d1;
  d[(g + 8) * 8 + 2 * t] = d2;
  d[(g + 8) * 8 + 2 * t + 1] = d3;
}

/* The operands in their storage format (4 bytes for tf32, else 2): the instruction reads bits, not floats. */
static void stage_operands(lce_mma_format f, const float *x, size_t n, unsigned char *out) {
  for (size_t i = 0; i < n; i++) {
    const uint32_t v = probe_bits(f, x[i]);
    const uint16_t h = (uint16_t)v;
    if (f == LCE_MMA_TF32) memcpy(out + 4 * i, &v, 4);
    else memcpy(out + 2 * i, &h, 2);
  }
}

extern "C" lce_code probe_gpu_mma(probe_tileset *ts, lce_status *st) {
  lce_code rc = LCE_OK;
  const size_t na = ts->tiles * PROBE_M * (size_t)ts->k, nb = ts->tiles * PROBE_N * (size_t)ts->k;
  const size_t nc = ts->tiles * PROBE_TILE_OUT;
  const int wide = ts->format == LCE_MMA_TF32;
  const size_t elem = wide ? 4 : 2;
  const int threads = 128, blocks = (int)((ts->tiles * 32 + threads - 1) / threads);
  unsigned char *ha = NULL, *hb = NULL;
  void *da = NULL, *db = NULL;
  float *dc = NULL, *dd = NULL;
  LCE_TRY(probe_require_device(st));
  ha = (unsigned char *)malloc(na * elem);
  hb = (unsigned char *)malloc(nb * elem);
  if (ha == NULL || hb == NULL) {
    rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "probe: out of memory staging %zu tiles", ts->tiles);
    goto done;
  }
  stage_operands(ts->format, ts->a, na, ha);
  stage_operands(ts->format, ts->b, nb, hb);
  PROBE_CUDA_CHECK(st, cudaMalloc(&da, na * elem));
  PROBE_CUDA_CHECK(st, cudaMalloc(&db, nb * elem));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&dc, nc * sizeof(float)));
  PROBE_CUDA_CHECK(st, cudaMalloc((void **)&dd, nc * sizeof(float)));
  PROBE_CUDA_CHECK(st, cudaMemcpy(da, ha, na * elem, cudaMemcpyHostToDevice));
  PROBE_CUDA_CHECK(st, cudaMemcpy(db, hb, nb * elem, cudaMemcpyHostToDevice));
  PROBE_CUDA_CHECK(st, cudaMemcpy(dc, ts->c, nc * sizeof(float), cudaMemcpyHostToDevice));
  /* The poison of probe_generate: a result the kernel fails to write stays visible. */
  PROBE_CUDA_CHECK(st, cudaMemcpy(dd, ts->d, nc * sizeof(float), cudaMemcpyHostToDevice));
  if (ts->format == LCE_MMA_BF16)
    probe_mma_k16<true><<<blocks, threads>>>((const uint16_t *)da, (const uint16_t *)db, dc, dd, (int)ts->tiles);
  else if (ts->format == LCE_MMA_FP16)
    probe_mma_k16<false><<<blocks, threads>>>((const uint16_t *)da, (const uint16_t *)db, dc, dd, (int)ts->tiles);
  else
    probe_mma_tf32<<<blocks, threads>>>((const uint32_t *)da, (const uint32_t *)db, dc, dd, (int)ts->tiles);
  PROBE_LAUNCH_CHECK(st, "probe_mma");
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
