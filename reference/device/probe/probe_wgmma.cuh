/* probe_wgmma.cuh — the wgmma probe's instruction, operand layouts and replica choice, shared by the
 * kernel (probe_wgmma.cu) and its CPU test (reference/device/tests/test_probe_wgmma_layout.cu).
 * Includes CuTe: only sm_90a translation units built with CUTLASS's headers include it.
 *
 * The instruction is the one fused-sm90's logits GEMM issues (fused/cuda/fused_sm90_gemm.cu, CUTLASS's
 * sm90 collective with 128x256x64 tiles): wgmma.mma_async m64n256k16, fp32 accumulation, bf16 or fp16
 * operands both from shared memory (SS), K-major (row.col). A probe tile (probe_vectors.h: A 16 x 16,
 * B 16 x 8, C 16 x 8) fills the instruction as 4 x 32 replicas: A's 64 rows are the tile's 16 rows four
 * times, B's 256 columns its 8 columns 32 times, C likewise. Tile t's results are read from replica
 * (t % 4, (t / 4) % 32), so that over the tiles every warp of the warp group and every 8-column block of
 * the accumulator reports results; a thread that held another element than CuTe's coordinates say
 * would show in the probe's "exact" class as a harness error. */
#ifndef PROBE_WGMMA_CUH
#define PROBE_WGMMA_CUH

#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>
#include <type_traits>

namespace probe_wgmma {

using namespace cute;

#define PROBE_WGMMA_M 64
#define PROBE_WGMMA_N 256
#define PROBE_WGMMA_THREADS 128 /* one warp group */

/* Element: CuTe's bfloat16_t or half_t. */
template <typename Element> struct Config {
  using Atom = typename std::conditional<
      std::is_same<Element, cute::bfloat16_t>::value,
      SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>,
      SM90_64x256x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>>::type;
  using TiledMma = decltype(make_tiled_mma(Atom{}));
  /* K-major without swizzle (the swizzle changes addresses only, not the arithmetic). */
  using LayoutA = decltype(tile_to_shape(GMMA::Layout_K_INTER_Atom<Element>{}, Shape<_64, _16>{}));
  using LayoutB = decltype(tile_to_shape(GMMA::Layout_K_INTER_Atom<Element>{}, Shape<_256, _16>{}));
};

/* The replica of the 16 x 8 probe tile whose results tile t reports: rows 16·rm.., columns 8·rn... */
CUTE_HOST_DEVICE int replica_m(long tile) { return (int)(tile % 4); }
CUTE_HOST_DEVICE int replica_n(long tile) { return (int)((tile / 4) % 32); }

} // namespace probe_wgmma

#endif
