/* test_fused_sm90_layout.cu — the assumptions of fused-sm90's GEMM epilogue (fused/cuda/fused_sm90_gemm.cu),
 * checked on the CPU with the kernel's own CUTLASS types (fused_sm90_gemm_config.cuh), label unit, so
 * that CI catches a CUTLASS or tile change that breaks them before a GPU does:
 *   - the tiled MMA has 256 threads (cooperative: two consumer warp groups on one tile) or 128
 *     (pingpong: one group per tile), and the CTA 384 with the producer's;
 *   - fs_rowcol's view of a thread's accumulators: every slot r holds one tile row (all its columns
 *     share it), the four lanes of a quad (lane ^ 1, lane ^ 2) hold the same rows in the same slots
 *     (the epilogue's shuffle merge), and the MMA threads together cover their 128 x 256 or 64 x 256
 *     tile once each;
 *   - a thread's columns come in pairs: slot c even holds an even column and c + 1 the next one (the
 *     FS_DLOGITS epilogue stores the two as one 4- or 8-byte store);
 *   - the accumulator fragment has the coordinate tensor's shape (the view applies to both alike);
 *   - the shared storage fits the sm_90 opt-in limit of 227 KiB;
 * for each input type of the GEMM (bf16, fp16, tf32) and both schedules;
 *   - a cooperative thread's slots hold the elements a pingpong thread's hold (the two schedules fold
 *     each row over the same columns in the same order: the same outputs);
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

/* The tile coordinates (row, column) of MMA thread t's accumulator slots (r, c) through fs_rowcol. */
template <class G> struct SlotCoords {
  static constexpr int kThreads = G::kConsumers;
  int row[kThreads][2][128], col[kThreads][2][128];
  int R = 0, C = 0, shape_mismatch = 0;
  SlotCoords() {
    typename G::TiledMma mma;
    for (int t = 0; t < kThreads; t++) {
      auto thr = mma.get_thread_slice(t);
      Tensor cD = make_identity_tensor(make_shape(Int<G::kMmaM>{}, Int<FS_TILE_N>{}));
      Tensor tc = thr.partition_C(cD);
      Tensor acc = partition_fragment_C(mma, take<0, 2>(typename G::TileShape{}));
      if (!(shape(acc.layout()) == shape(tc.layout()))) shape_mismatch++;
      Tensor crd = make_tensor(tc.data(), fs_rowcol(tc.layout()));
      constexpr int Rc = decltype(size<0>(crd))::value, Cc = decltype(size<1>(crd))::value;
      static_assert(Rc <= 2 && Cc <= 128, "more slots than this test holds");
      R = Rc, C = Cc;
      for (int r = 0; r < Rc; r++)
        for (int c = 0; c < Cc; c++) row[t][r][c] = get<0>(crd(r, c)), col[t][r][c] = get<1>(crd(r, c));
    }
  }
};

template <class G> static void check_layout(const char *what) {
  typename G::TiledMma mma;
  EXPECT((int)size(mma) == G::kConsumers, "%s: %d MMA threads, the schedule has %d per tile", what, (int)size(mma),
         G::kConsumers);
  EXPECT(FS_THREADS == 128 + 256, "%s: FS_THREADS %d is not a producer and two consumer warp groups", what, FS_THREADS);
  const size_t smem = sizeof(typename G::SharedStorage);
  EXPECT(smem <= 232448, "%s: %zu bytes of shared storage beyond sm_90's 227 KiB", what, smem);
  static SlotCoords<G> s;
  std::set<std::pair<int, int>> seen;
  int bad_rows = 0, duplicates = 0, bad_pairs = 0, quad = 0;
  for (int t = 0; t < G::kConsumers; t++)
    for (int r = 0; r < s.R; r++)
      for (int c = 0; c < s.C; c++) {
        bad_rows += s.row[t][r][c] != s.row[t][r][0];
        duplicates += !seen.insert(std::make_pair(s.row[t][r][c], s.col[t][r][c])).second;
        if (c % 2 == 0) bad_pairs += s.col[t][r][c] % 2 != 0 || c + 1 >= s.C || s.col[t][r][c + 1] != s.col[t][r][c] + 1;
        quad += c == 0 && (s.row[t][r][0] != s.row[t ^ 1][r][0] || s.row[t][r][0] != s.row[t ^ 2][r][0]);
      }
  printf("%s: %d MMA threads, %d row slots per thread, %zu of %d tile elements covered, shared storage %zu bytes\n",
         what, G::kConsumers, s.R, seen.size(), G::kMmaM * FS_TILE_N, smem);
  EXPECT(bad_rows == 0, "%s: %d accumulators outside their slot's row", what, bad_rows);
  EXPECT(bad_pairs == 0, "%s: %d column slots not an (even, next) pair", what, bad_pairs);
  EXPECT(quad == 0, "%s: %d slots whose row differs within a quad", what, quad);
  EXPECT(duplicates == 0 && seen.size() == (size_t)G::kMmaM * FS_TILE_N, "%s: %zu tile elements covered, %d twice",
         what, seen.size(), duplicates);
  EXPECT(s.shape_mismatch == 0, "%s: the accumulator fragment's shape differs from the coordinates' (%d threads)", what,
         s.shape_mismatch);
}

/* The two schedules fold a row alike: cooperative thread t (0..255) holds in slot (r, c) what pingpong
 * thread t % 128 of the half t / 128 holds there (its row 64 lower in the second half). */
template <class Coop, class Ping> static void check_same_slots(const char *what) {
  static SlotCoords<Coop> a;
  static SlotCoords<Ping> b;
  int differ = 0;
  EXPECT(a.R == b.R && a.C == b.C, "%s: %d x %d slots cooperative, %d x %d pingpong", what, a.R, a.C, b.R, b.C);
  for (int t = 0; t < 256; t++)
    for (int r = 0; r < a.R && r < b.R; r++)
      for (int c = 0; c < a.C && c < b.C; c++)
        differ += a.row[t][r][c] != b.row[t % 128][r][c] + (t / 128) * Ping::kMmaM || a.col[t][r][c] != b.col[t % 128][r][c];
  EXPECT(differ == 0, "%s: %d accumulator slots hold other elements under the two schedules", what, differ);
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
  check_layout<FsGemm<cutlass::bfloat16_t, __nv_bfloat16, false>>("bf16 cooperative");
  check_layout<FsGemm<cutlass::half_t, __half, false>>("fp16 cooperative");
  check_layout<FsGemm<cutlass::tfloat32_t, float, false>>("tf32 cooperative");
  check_layout<FsGemm<cutlass::bfloat16_t, __nv_bfloat16, true>>("bf16 pingpong");
  check_layout<FsGemm<cutlass::half_t, __half, true>>("fp16 pingpong");
  check_layout<FsGemm<cutlass::tfloat32_t, float, true>>("tf32 pingpong");
  check_same_slots<FsGemm<cutlass::bfloat16_t, __nv_bfloat16, false>, FsGemm<cutlass::bfloat16_t, __nv_bfloat16, true>>(
      "bf16");
  check_same_slots<FsGemm<cutlass::tfloat32_t, float, false>, FsGemm<cutlass::tfloat32_t, float, true>>("tf32");
  return lce_test_finish("test_fused_sm90_layout");
}
