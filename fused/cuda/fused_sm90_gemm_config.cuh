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
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <type_traits>

#include "fused_sm90_gemm.cuh"

#define FS_THREADS 384 /* one producer and two consumer warp groups */

namespace lce_fs { /* named: an anonymous namespace beside CuTe's confuses nvcc's host stubs */

using namespace cute;

using FsClusterShape = Shape<_1, _1, _1>;

/* The mainloop and the shared storage for one input type (Element: CUTLASS's; DsT: the CUDA type of
 * d_logits) and one schedule of the two consumer warp groups over the CTA's 128-token tile (fs_gemm's
 * pingpong):
 *   cooperative (kPingpong false): both on one 128 x 256 MMA tile, 64 rows each; every tile's epilogue
 *     follows its mainloop in both groups at once, the tensor cores idle meanwhile;
 *   pingpong: each group on its own 64-token half, over the same vocab tiles in the same order, their
 *     mainloops taking turns (an ordered barrier), so that one group's epilogue runs under the other's
 *     wgmma; W's tile is loaded once per half.
 * A thread holds the same accumulators of a 64-row half in both (the cooperative tile's MMA atoms are
 * the pingpong one's, stacked), so both fold each row over the same columns in the same order.
 * A k-tile of 128 bytes of each row: 64 bf16/fp16 elements, 32 tf32 ones (wgmma's k8 step);
 * StageCountAuto fills shared memory with stages (4 of 48 KiB cooperative, 5 of 40 KiB pingpong); TMA
 * loads 16-byte vectors (8 or 4 elements). tf32 reads fp32 operands whose values are already tf32
 * (rounded by the driver), so the tensor cores' dropping of the low 13 bits is exact. */
template <typename Element, typename DsT, bool kPingpong_> struct FsGemm {
  static constexpr bool kPingpong = kPingpong_;
  static constexpr int kTileK = 128 / (int)sizeof(Element);
  static constexpr int kAlign = 16 / (int)sizeof(Element);
  static constexpr int kMmaM = kPingpong ? FS_TILE_M / 2 : FS_TILE_M; /* rows of one MMA tile */
  static constexpr int kHalves = FS_TILE_M / kMmaM;                  /* MMA tiles per token tile */
  static constexpr int kConsumers = kPingpong ? 128 : 256;           /* threads consuming each stage */
  using Schedule = typename std::conditional<kPingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                             cutlass::gemm::KernelTmaWarpSpecializedCooperative>::type;
  using TileShape = Shape<Int<kMmaM>, Int<FS_TILE_N>, Int<kTileK>>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlign, Element,
      cutlass::layout::ColumnMajor, kAlign, float, TileShape, FsClusterShape, cutlass::gemm::collective::StageCountAuto,
      Schedule>::CollectiveOp;
  using TiledMma = typename Mainloop::TiledMma;
  using Pipeline = typename Mainloop::MainloopPipeline;
  using OrderBarrier = cutlass::OrderedSequenceBarrier<1, 2>; /* pingpong: the groups' mainloops in turn */
  using DsT_ = DsT;
  struct SharedStorage {
    typename Mainloop::TensorStorage tensors;
    alignas(16) typename Mainloop::PipelineStorage pipeline;
    alignas(16) typename OrderBarrier::SharedStorage order;
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
