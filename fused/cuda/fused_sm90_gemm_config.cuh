/* fused_sm90_gemm_config.cuh — the CUTLASS configuration of fused-sm90's logits GEMM
 * (fused_sm90_gemm.cu) and the accumulator view its epilogue relies on, shared with the CPU test of
 * that view (fused/tests/test_fused_sm90_layout.cu). Includes CUTLASS: only CUTLASS translation units
 * include it. */
#ifndef FUSED_SM90_GEMM_CONFIG_CUH
#define FUSED_SM90_GEMM_CONFIG_CUH

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/collective_builder_decl.hpp>
#include <cutlass/gemm/collective/collective_mma.hpp>
#include <cutlass/gemm/collective/builders/sm90_gmma_builder.inl>
#include <cutlass/gemm/dispatch_policy.hpp>

#include "fused_sm90_gemm.cuh"

#define FS_THREADS 384 /* one producer and two consumer warp groups */

namespace lce_fs { /* named: an anonymous namespace beside CuTe's confuses nvcc's host stubs */

using namespace cute;

using FsClusterShape = Shape<_1, _1, _1>;

/* The mainloop and the shared storage for one input type (Element: CUTLASS's; DsT: the CUDA type of
 * d_logits). A k-tile of 128 bytes of each row: 64 bf16/fp16 elements, 32 tf32 ones (wgmma's k8 step),
 * so that a pipeline stage holds 48 KiB for either (four stages in shared memory); TMA loads 16-byte
 * vectors (8 or 4 elements). tf32 reads fp32 operands whose values are already tf32 (rounded by the
 * driver), so the tensor cores' dropping of the low 13 bits is exact. */
template <typename Element, typename DsT> struct FsGemm {
  static constexpr int kTileK = 128 / (int)sizeof(Element);
  static constexpr int kAlign = 16 / (int)sizeof(Element);
  using TileShape = Shape<Int<FS_TILE_M>, Int<FS_TILE_N>, Int<kTileK>>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlign, Element,
      cutlass::layout::ColumnMajor, kAlign, float, TileShape, FsClusterShape, cutlass::gemm::collective::StageCountAuto,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using TiledMma = typename Mainloop::TiledMma;
  using Pipeline = typename Mainloop::MainloopPipeline;
  using DsT_ = DsT;
  struct SharedStorage {
    typename Mainloop::TensorStorage tensors;
    alignas(16) typename Mainloop::PipelineStorage pipeline;
  };
  struct Params {
    typename Mainloop::Params mainloop;
    fs_gemm g;
    int tiles_per_cta; /* vocab tiles per CTA range */
    int m_tiles, ranges; /* the grid: m_tiles · ranges CTAs in fs_raster's order */
  };
};

/* The CTA order. The grid is one-dimensional over m_tiles token tiles times `ranges` vocab ranges;
 * consecutive CTAs take FS_RASTER_GROUP token tiles of one range before the next range, so that the
 * ~132 resident CTAs share a few hidden tiles and a few W ranges in L2 rather than all of hidden
 * (67 MB at 8192 x 4096 bf16, more than the 50 MB of L2) once per vocab tile. A bijection of
 * [0, m_tiles·ranges) onto (token tile, range) pairs (test_fused_sm90_layout checks it). */
#define FS_RASTER_GROUP 8
struct FsTileIndex {
  int m_tile, range;
};
CUTE_HOST_DEVICE FsTileIndex fs_raster(int linear, int m_tiles, int ranges) { /* 32-bit: the grid's size is an int */
  const int group_size = FS_RASTER_GROUP * ranges;
  const int first = linear / group_size * FS_RASTER_GROUP, in_group = linear % group_size;
  const int rows = m_tiles - first < FS_RASTER_GROUP ? m_tiles - first : FS_RASTER_GROUP;
  FsTileIndex t;
  t.m_tile = first + in_group % rows;
  t.range = in_group / rows;
  return t;
}

/* A wgmma accumulator layout ((2, 2, V), MMA_M, MMA_N) viewed as (rows, columns): ((2, MMA_M),
 * (2, V, MMA_N)) — mode 0,1 of an atom steps 8 rows, modes 0,0 and 0,2 step columns. */
template <class Layout> CUTE_HOST_DEVICE auto fs_rowcol(Layout l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}

} // namespace lce_fs

#endif
