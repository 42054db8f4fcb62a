/* test_probe_wgmma_layout.cu — the wgmma probe's harness checked on the CPU with its own CuTe types
 * (probe_wgmma.cuh), label unit, so that a CUTLASS change that breaks it shows without a GPU:
 *   - the tiled MMA is one warp group (128 threads);
 *   - the accumulator fragment has the shape of the coordinate tensor the kernel reads (m, n) from,
 *     and the 128 threads cover the 64 x 256 accumulator once each;
 *   - for every replica choice (tile t: rows 16·(t % 4).., columns 8·((t / 4) % 32)..) the elements
 *     the kernel writes are the probe tile's 16 x 8 results once each;
 *   - the shared-memory layouts of A (64 x 16) and B (256 x 16) are bijections onto their buffers.
 * The GPU half (the instruction's results against the model, bit for bit) is `lcecheck probe --wgmma`. */
#include <stdio.h>

#include <set>
#include <utility>

#include "probe_wgmma.cuh"

extern "C" {
#include "lce_test.h"
}

using namespace probe_wgmma;

template <class Layout> static int bijective(Layout l, int count) {
  std::set<int> offsets;
  for (int i = 0; i < count; i++) offsets.insert((int)l(i));
  return (int)size(l) == count && (int)offsets.size() == count && *offsets.begin() == 0 && *offsets.rbegin() == count - 1;
}

template <typename Element> static void check(const char *what) {
  using Cfg = Config<Element>;
  typename Cfg::TiledMma mma;
  EXPECT((int)size(mma) == PROBE_WGMMA_THREADS, "%s: %d MMA threads, the kernel has one warp group", what, (int)size(mma));
  std::set<std::pair<int, int>> seen;
  int shape_mismatch = 0, written_twice = 0, written = 0, out_of_tile = 0;
  for (int rep = 0; rep < 4 * 32; rep++) {
    std::set<std::pair<int, int>> tile_seen;
    const long tile = rep; /* tiles 0 .. 127 take every (replica_m, replica_n) once */
    for (int t = 0; t < PROBE_WGMMA_THREADS; t++) {
      auto thr = mma.get_thread_slice(t);
      Tensor crd = thr.partition_C(make_identity_tensor(Shape<Int<PROBE_WGMMA_M>, Int<PROBE_WGMMA_N>>{}));
      Tensor acc = partition_fragment_C(mma, Shape<Int<PROBE_WGMMA_M>, Int<PROBE_WGMMA_N>>{});
      if (rep == 0 && !(shape(acc.layout()) == shape(crd.layout()))) shape_mismatch++;
      for (int i = 0; i < (int)size(crd); i++) {
        const int m = get<0>(crd(i)), n = get<1>(crd(i));
        if (rep == 0) seen.insert(std::make_pair(m, n));
        if (m / 16 != replica_m(tile) || n / 8 != replica_n(tile)) continue;
        written++;
        out_of_tile += m % 16 >= 16 || n % 8 >= 8;
        written_twice += !tile_seen.insert(std::make_pair(m % 16, n % 8)).second;
      }
    }
    EXPECT(tile_seen.size() == 128, "%s: tile %ld writes %zu of the 128 results", what, tile, tile_seen.size());
  }
  printf("%s: %zu of %d accumulator elements covered by %d threads; %d results written over 128 replica choices\n",
         what, seen.size(), PROBE_WGMMA_M * PROBE_WGMMA_N, PROBE_WGMMA_THREADS, written);
  EXPECT(shape_mismatch == 0, "%s: the accumulator fragment and the coordinate tensor differ in shape", what);
  EXPECT(seen.size() == (size_t)PROBE_WGMMA_M * PROBE_WGMMA_N, "%s: %zu accumulator elements covered", what, seen.size());
  EXPECT(written == 128 * 128 && written_twice == 0 && out_of_tile == 0, "%s: %d results written, %d twice", what,
         written, written_twice);
  EXPECT(bijective(typename Cfg::LayoutA{}, PROBE_WGMMA_M * 16), "%s: A's shared-memory layout is not a bijection", what);
  EXPECT(bijective(typename Cfg::LayoutB{}, PROBE_WGMMA_N * 16), "%s: B's shared-memory layout is not a bijection", what);
}

int main(void) {
  check<cute::bfloat16_t>("bf16 m64n256k16");
  check<cute::half_t>("fp16 m64n256k16");
  return lce_test_finish("test_probe_wgmma_layout");
}
