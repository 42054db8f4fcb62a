/* test_fused_sm90_layout.cu — the assumptions of fused-sm90's GEMM epilogue (fused/cuda/fused_sm90_gemm.cu),
 * checked on the CPU with the kernel's own CUTLASS types (fused_sm90_gemm_config.cuh), label unit, so
 * that CI catches a CUTLASS or tile change that breaks them before a GPU does:
 *   - the tiled MMA has 256 threads (two consumer warp groups) and the CTA 384 with the producer's;
 *   - fs_rowcol's view of a thread's accumulators: every slot r holds one tile row (all its columns
 *     share it), the four lanes of a quad (lane ^ 1, lane ^ 2) hold the same rows in the same slots
 *     (the epilogue's shuffle merge), and the 256 threads together cover the 128 x 256 tile once each;
 *   - a thread's columns come in pairs: slot c even holds an even column and c + 1 the next one (the
 *     FS_DLOGITS epilogue stores the two as one 4- or 8-byte store);
 *   - the accumulator fragment has the coordinate tensor's shape (the view applies to both alike);
 *   - the shared storage fits the sm_90 opt-in limit of 227 KiB;
 * for each input type of the GEMM (bf16, fp16, tf32);
 *   - fs_raster maps the one-dimensional grid onto every (token tile, vocab range) pair once.
 * The GPU raises the same checks at run time (layout_error); this test makes them visible without one. */
#include <stdio.h>

#include <set>
#include <utility>

#include "fused_sm90_gemm_config.cuh"

extern "C" {
#include "lce_test.h"
}

using namespace lce_fs;

template <class G> static void check_layout(const char *what) {
  typename G::TiledMma mma;
  EXPECT((int)size(mma) == 256, "%s: %d MMA threads, the kernel has 256 consumers", what, (int)size(mma));
  EXPECT(FS_THREADS == 128 + (int)size(mma), "%s: FS_THREADS %d is not a producer warp group + the MMA threads", what,
         FS_THREADS);
  const size_t smem = sizeof(typename G::SharedStorage);
  EXPECT(smem <= 232448, "%s: %zu bytes of shared storage beyond sm_90's 227 KiB", what, smem);
  std::set<std::pair<int, int>> seen;
  int rows_of[256][8] = {{0}};
  int bad_rows = 0, duplicates = 0, shape_mismatch = 0, slots = 0, bad_pairs = 0;
  for (int t = 0; t < 256; t++) {
    auto thr = mma.get_thread_slice(t);
    Tensor cD = make_identity_tensor(make_shape(Int<FS_TILE_M>{}, Int<FS_TILE_N>{}));
    Tensor tc = thr.partition_C(cD);
    Tensor acc = partition_fragment_C(mma, take<0, 2>(typename G::TileShape{}));
    if (!(shape(acc.layout()) == shape(tc.layout()))) shape_mismatch++;
    Tensor crd = make_tensor(tc.data(), fs_rowcol(tc.layout()));
    constexpr int R = decltype(size<0>(crd))::value, C = decltype(size<1>(crd))::value;
    static_assert(R <= 8, "more row slots than this test holds");
    slots = R;
    for (int r = 0; r < R; r++) {
      rows_of[t][r] = get<0>(crd(r, 0));
      for (int c = 0; c < C; c++) {
        bad_rows += get<0>(crd(r, c)) != rows_of[t][r];
        duplicates += !seen.insert(std::make_pair((int)get<0>(crd(r, c)), (int)get<1>(crd(r, c)))).second;
        if (c % 2 == 0) bad_pairs += get<1>(crd(r, c)) % 2 != 0 || c + 1 >= C || get<1>(crd(r, c + 1)) != get<1>(crd(r, c)) + 1;
      }
    }
  }
  int quad = 0;
  for (int t = 0; t < 256; t++)
    for (int r = 0; r < slots; r++) quad += rows_of[t][r] != rows_of[t ^ 1][r] || rows_of[t][r] != rows_of[t ^ 2][r];
  printf("%s: %d row slots per thread, %zu of %d tile elements covered, shared storage %zu bytes\n", what, slots,
         seen.size(), FS_TILE_M * FS_TILE_N, smem);
  EXPECT(bad_rows == 0, "%s: %d accumulators outside their slot's row", what, bad_rows);
  EXPECT(bad_pairs == 0, "%s: %d column slots not an (even, next) pair", what, bad_pairs);
  EXPECT(quad == 0, "%s: %d slots whose row differs within a quad", what, quad);
  EXPECT(duplicates == 0 && seen.size() == (size_t)FS_TILE_M * FS_TILE_N, "%s: %zu tile elements covered, %d twice",
         what, seen.size(), duplicates);
  EXPECT(shape_mismatch == 0, "%s: the accumulator fragment's shape differs from the coordinates' (%d threads)", what,
         shape_mismatch);
}

static void check_raster(void) {
  static const int shapes[][2] = {{1, 1}, {3, 9}, {64, 32}, {17, 5}, {9, 22}, {8, 1}, {1, 40}, {130, 3}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const int m_tiles = shapes[k][0], ranges = shapes[k][1];
    std::set<std::pair<int, int>> seen;
    int out_of_range = 0;
    for (int b = 0; b < m_tiles * ranges; b++) {
      const FsTileIndex t = fs_raster(b, m_tiles, ranges);
      out_of_range += t.m_tile < 0 || t.m_tile >= m_tiles || t.range < 0 || t.range >= ranges;
      seen.insert(std::make_pair(t.m_tile, t.range));
    }
    EXPECT(out_of_range == 0 && seen.size() == (size_t)m_tiles * ranges,
           "fs_raster %d x %d: %d out of range, %zu distinct of %d", m_tiles, ranges, out_of_range, seen.size(),
           m_tiles * ranges);
  }
}

int main(void) {
  check_raster();
  check_layout<FsGemm<cutlass::bfloat16_t, __nv_bfloat16>>("bf16");
  check_layout<FsGemm<cutlass::half_t, __half>>("fp16");
  check_layout<FsGemm<cutlass::tfloat32_t, float>>("tf32");
  return lce_test_finish("test_fused_sm90_layout");
}
