/* fused_sm90_gemm.cu — fused-sm90's logits GEMM on Hopper (sm_90a) with the softmax fused into its
 * epilogue, so that no logits tile is written to global memory.
 *
 * What is fused: logits = hidden · W_range^T (bf16/fp16 in, fp32 accumulate) and, in the same kernel,
 *   FS_STATS    the online softmax of each token over the CTA's vocab range: per tile the row max of
 *               the softcapped logits, the running sum rescaled once to it, sum exp(z - max), and with
 *               label smoothing sum w_v and sum w_v (max - z_v); the label's logit stored by the thread
 *               that holds it. The quad of threads sharing a row merges at the end, and one lane writes
 *               the (token, range) partial. fs_launch_combine_splits folds the ranges in order; the
 *               driver's merge kernel (fused-cuda's) gives lse and loss_token.
 *   FS_DLOGITS  d_logits = g_dl · (p·k - w_y·[v = y] - e/V·w_v) · (1 - (z/c)^2) in fp32 from lse
 *               (fc_dlogit, the same function fused-cuda's kernel applies to its fp32 tile), rounded
 *               to the dtype and stored straight from the accumulators.
 * The math is lce_case.h's; the per-element arithmetic is fused_cuda_device.cuh's.
 *
 * Structure (learned from CUTLASS's sm90 TMA warp-specialized cooperative and pingpong kernels, not
 * copied): the mainloop is CUTLASS's collective (CollectiveBuilder: TMA loads into a multi-stage smem
 * pipeline, wgmma 64x256x16 from shared memory), one producer warp group (one warp issues TMA) and two
 * consumer warp groups, each on 64 token rows, in one of two schedules (fused_sm90_gemm_config.cuh;
 * $LCE_FUSED_SM90_SCHEDULE, fused_sm90.cu): cooperative, both groups on one 128 x 256 tile, or pingpong,
 * one 64 x 256 tile per group with their mainloops in turn; the kernel around it is ours: a CTA owns one token
 * tile and a contiguous range of vocab tiles (FS_STATS: up to 32 ranges per token tile, so that the
 * partials stay at 32·N·16 bytes; FS_DLOGITS: one vocab tile), in fs_raster's grouped order (L2 reuse),
 * loops the mainloop over them, and runs
 * the epilogue on the register accumulators. The epilogue relies on the wgmma accumulator layout
 * (a thread's values of one row are a fixed slot; the four lanes of a quad share rows): the first
 * tile checks both with CuTe's identity-tensor coordinates and raises layout_error otherwise, which
 * the driver turns into an error — never a silent wrong answer.
 *
 * Build: fused/cuda/cuda.cmake, only when CUTLASS's headers are found (cmake/FindCUTLASS.cmake), for
 * sm_90a. Run: through the fused-sm90 subject (fused_sm90.cu).
 * Versions: 1 (this): cooperative 128x256x64 or pingpong 64x256x64 tiles, cluster 1x1, non-persistent
 * grid, epilogues compiled per option variant (fs_with_options); and the GEMM of
 * mutant-sm90/running-max-zero-init (LCE_MUTANT_SM90_RUNNING_MAX_ZERO_INIT, in its own namespace: fused_sm90.cu). */
#define LCE_CUDA_WHO "fused-sm90" /* its failures name it (fused_cuda_kernels.cuh) */

#include <stdio.h>

#include <type_traits>

#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "fused_cuda_device.cuh"
#include "fused_sm90_gemm.cuh"
#include "fused_sm90_gemm_config.cuh"

#define FS_MAX_SPLITS 32

/* A mutant whose bug lives in the FS_STATS epilogue compiles only that epilogue's kernels and launches
 * d_logits through production's (the same code, half the kernels: this is the slowest file to compile). */
#if defined(LCE_MUTANT_SM90_RUNNING_MAX_ZERO_INIT)
#define FS_WITH_DLOGITS 0
#else
#define FS_WITH_DLOGITS 1
#endif

namespace lce_fs {

__device__ __forceinline__ fc_state fs_shfl_xor(fc_state t, int mask) {
  fc_state r;
  r.m = __shfl_xor_sync(0xffffffffu, t.m, mask);
  r.s = __shfl_xor_sync(0xffffffffu, t.s, mask);
  r.sw = __shfl_xor_sync(0xffffffffu, t.sw, mask);
  r.d = __shfl_xor_sync(0xffffffffu, t.d, mask);
  return r;
}

/* The epilogues are compiled once per (softcap, smoothing) pair that a launch can have, chosen per tile
 * by a branch every thread takes alike (fs_with_options): each variant holds only the code it runs, with
 * no per-element branch on a case option. Why: the epilogue is unrolled over a thread's 128
 * accumulators (a register index must be known at compile time), and one body with every option
 * inline — a softcap's division and tanhf, the smoothing sums, each behind its own branch — is ~100
 * instructions per accumulator, ~197 KB of SASS per kernel, more than the SM's instruction cache holds
 * (instruction fetch stalls the warps every tile); the plain variant is ~26 per accumulator. Which
 * variant runs changes no arithmetic: kCap false is fc_softcap with cap 0 and kSmooth false fc_dlogit
 * with ev 0, as the case's options are. */
template <class F> __device__ __forceinline__ void fs_with_options(const fc_options &o, F &&f) {
  if (o.cap > 0.0f) {
    if (o.ev != 0.0f) f(cute::true_type{}, cute::true_type{});
    else f(cute::true_type{}, cute::false_type{});
  } else {
    if (o.ev != 0.0f) f(cute::false_type{}, cute::true_type{});
    else f(cute::false_type{}, cute::false_type{});
  }
}

/* The case's options with softcap and smoothing fixed at compile time where the variant has none. */
template <bool kCap, bool kSmooth> __device__ __forceinline__ fc_options fs_options(fc_options o) {
  if (!kCap) o.cap = 0.0f;
  if (!kSmooth) o.ev = 0.0f;
  return o;
}

/* FS_STATS: folds one tile's accumulators (a, rows x columns per thread, crd their tile coordinates)
 * into the thread's running states: per row the max of the softcapped logits, the running sum
 * rescaled once to it, then sum exp(z - max) (and the smoothing sums); the label's logit stored by
 * the thread that holds it. A column at or beyond ncols (the tile's part past the range) becomes -inf,
 * which neither the max nor the sum counts (no logit is -inf: a non-finite result is a NaN logit), and
 * the smoothing sums skip. */
template <bool kCap, bool kSmooth, class Acc, class Crd, int R>
__device__ __forceinline__ void fs_fold_tile(const fs_gemm &g, Acc &a, const Crd &crd, fc_state (&run)[R],
                                             const int64_t (&row)[R], const int (&y_col)[R], int col0, int ncols) {
  constexpr int C = decltype(size<1>(crd))::value;
  const fc_options o = fs_options<kCap, kSmooth>(g.o);
  CUTE_UNROLL
  for (int r = 0; r < R; r++) {
    float tmax = -INFINITY, zy = 0.0f;
    bool label_here = false;
    CUTE_UNROLL
    for (int c = 0; c < C; c++) {
      const int col = col0 + get<1>(crd(r, c));
      const float z = col < ncols ? fc_softcap(a(r, c), o.cap) : -INFINITY;
      a(r, c) = z;
      tmax = fmaxf(tmax, z);
      label_here |= col == y_col[r];
      zy = col == y_col[r] ? z : zy;
    }
    if (label_here) g.z_target[g.token0 + row[r]] = zy;
    fc_state &t = run[r];
    const float M = fmaxf(t.m, tmax);
    t.s = fc_rescale(t.s, t.m, M);
    if (kSmooth) t.d += fc_shift(t.sw, t.m, M);
    t.m = M;
    /* M is finite or -inf (fmaxf drops NaNs). Finite: a -inf column adds expf(-inf) = +0, which leaves
     * the sum (never -0) as it is, so no column needs a test; -inf: only NaN logits or none, and a
     * -inf column must not add expf(-inf - -inf) = NaN. */
    if (M != -INFINITY) {
      CUTE_UNROLL
      for (int c = 0; c < C; c++) t.s += expf(a(r, c) - M);
    } else {
      CUTE_UNROLL
      for (int c = 0; c < C; c++)
        if (a(r, c) != -INFINITY) t.s += expf(a(r, c) - M);
    }
    if (kSmooth) {
      CUTE_UNROLL
      for (int c = 0; c < C; c++) {
        const int col = col0 + get<1>(crd(r, c));
        if (col < ncols) {
          const float w = fc_class_w(g.tk, g.vocab0 + col);
          t.d += w * (M - a(r, c));
          t.sw += w;
        }
      }
    }
  }
}

/* Two adjacent d_logits of one row as one store (pairs: the row stride is even, so an even column's
 * element is aligned for the pair; fs_consume checks that a thread's columns come in such pairs). */
template <class T> struct fs_pair;
template <> struct fs_pair<__nv_bfloat16> { using type = __nv_bfloat162; };
template <> struct fs_pair<__half> { using type = __half2; };
template <> struct fs_pair<float> { using type = float2; };

/* Stores the pair (d0, d1) of columns col, col + 1 of a d_logits row (out: the tile's first column),
 * left of them still in the range: one store where pairs allow it, else one per column in range. */
template <class DsT>
__device__ __forceinline__ void fs_store_pair(DsT *out, int col, DsT d0, DsT d1, int left, bool pairs) {
  if (pairs && left >= 2) {
    typename fs_pair<DsT>::type two;
    two.x = d0, two.y = d1;
    *reinterpret_cast<typename fs_pair<DsT>::type *>(out + col) = two;
  } else {
    if (left >= 1) out[col] = d0;
    if (left >= 2) out[col + 1] = d1;
  }
}

/* FS_DLOGITS: d_logits of one tile from its accumulators, rounded to the dtype and stored into ds; an
 * ignored token's row is 0 (fc_dlogit's value for it), columns at or beyond ncols are not stored. */
template <bool kCap, bool kSmooth, class DsT, class Acc, class Crd, int R>
__device__ __forceinline__ void fs_store_dlogits(const fs_gemm &g, Acc &a, const Crd &crd, const int64_t (&row)[R],
                                                 const bool (&row_ok)[R], const fc_row_grad (&rg)[R], int col0,
                                                 int ncols, bool pairs) {
  constexpr int C = decltype(size<1>(crd))::value;
  static_assert(C % 2 == 0, "a thread's columns come in pairs");
  /* d_logits are rounded to tf32 exactly when they are fp32 (fs_launch_gemm checks o.tf32 agrees) */
  constexpr bool kTf32 = std::is_same<DsT, float>::value;
  const fc_options o = fs_options<kCap, kSmooth>(g.o);
  DsT *ds = (DsT *)g.ds;
  CUTE_UNROLL
  for (int r = 0; r < R; r++) {
    if (!row_ok[r]) continue;
    DsT *out = ds + row[r] * g.ld_ds + col0;
    const bool valid = rg[r].valid; /* tested once per row, not by fc_dlogit per element */
    fc_row_grad rt = rg[r];
    rt.valid = 1;
    CUTE_UNROLL
    for (int c = 0; c < C; c += 2) {
      const int col = get<1>(crd(r, c)); /* even; col + 1 is crd(r, c + 1)'s */
      const int64_t v = g.vocab0 + col0 + col;
      const int left = ncols - col0 - col; /* columns of the range from col on */
      DsT d0 = fc_from_float<DsT>(0.0f), d1 = d0; /* fc_dlogit's 0 for an ignored token */
      if (valid && left >= 1) { /* only columns in range: smoothing reads their class weights */
        d0 = fc_round_dlogit<DsT>(fc_dlogit(rt, a(r, c), v, g.tk, o), kTf32);
        if (left >= 2) d1 = fc_round_dlogit<DsT>(fc_dlogit(rt, a(r, c + 1), v + 1, g.tk, o), kTf32);
      }
      fs_store_pair(out, col, d0, d1, left, pairs);
    }
  }
}

/* The consumer warp groups: the mainloop per vocab tile of the CTA's range, then the epilogue. */
template <class G, int Mode>
__device__ __forceinline__ void fs_consume(typename G::Params const &p, typename G::Mainloop &mainloop,
                                           typename G::Pipeline &pipeline, typename G::OrderBarrier &order,
                                           typename G::SharedStorage &ss, int mt, int half, int nt0, int nt1,
                                           int k_tiles, int mma_thread) {
  using DsT = typename G::DsT_;
  const fs_gemm &g = p.g;
  typename G::TiledMma tiled_mma;
  typename G::Mainloop::PipelineState state; /* consumer start: stage 0, phase 0 */
  auto thr = tiled_mma.get_thread_slice(mma_thread);
  Tensor cD = make_identity_tensor(make_shape(Int<G::kMmaM>{}, Int<FS_TILE_N>{}));
  Tensor tCcD = thr.partition_C(cD);
  Tensor crd = make_tensor(tCcD.data(), fs_rowcol(tCcD.layout()));
  constexpr int R = decltype(size<0>(crd))::value;
  constexpr int C = decltype(size<1>(crd))::value;
  const int lane = mma_thread % 32;

  int64_t row[R];
  bool row_ok[R];
  int y_col[R]; /* the label's column in this launch's range, or -1: a 32-bit compare per element */
  fc_state run[R];
  fc_row_grad rg[R];
  int bad_pairs = 0;
  CUTE_UNROLL
  for (int r = 0; r < R; r++) {
    row[r] = (int64_t)mt * FS_TILE_M + half * G::kMmaM + get<0>(crd(r, 0));
    row_ok[r] = row[r] < g.m;
    const int64_t i = g.token0 + (row_ok[r] ? row[r] : 0);
    const int64_t y = row_ok[r] ? g.tk.labels[i] : g.tk.ignore_index, yl = y - g.vocab0;
    y_col[r] = row_ok[r] && y != g.tk.ignore_index && yl >= 0 && yl < g.n ? (int)yl : -1;
#if defined(LCE_MUTANT_SM90_RUNNING_MAX_ZERO_INIT)
    /* mutant-sm90/running-max-zero-init (fused_sm90.cu): the running max from 0, as several Triton
     * cross-entropy kernels shipped it: a row whose logits are all below -87 sums only underflowed exps. */
    run[r] = fc_state{0.0f, 0.0f, 0.0f, 0.0f};
#else
    run[r] = fc_state{-INFINITY, 0.0f, 0.0f, 0.0f};
#endif
    if constexpr (Mode == FS_DLOGITS) {
      if (row_ok[r]) rg[r] = fc_row_grad_make(g.tk, g.o, g.dl, g.lse, g.smooth_a, i);
      else rg[r] = fc_row_grad{0, 0, 0.0f, 0.0f, 0.0f, 0.0f};
    }
    /* The layout the epilogue assumes: one row per slot, shared by the lanes of a quad; columns in
     * pairs (c even: an even column, and c + 1 the next one). */
    int bad = 0;
    CUTE_UNROLL
    for (int c = 0; c < C; c++) bad |= get<0>(crd(r, c)) != get<0>(crd(r, 0));
    CUTE_UNROLL
    for (int c = 0; c < C; c += 2) {
      const int col = get<1>(crd(r, c));
      bad_pairs |= col % 2 != 0 || get<1>(crd(r, c + 1)) != col + 1;
    }
    const int r0 = get<0>(crd(r, 0));
    bad |= __shfl_xor_sync(0xffffffffu, r0, 1) != r0 || __shfl_xor_sync(0xffffffffu, r0, 2) != r0;
    if ((bad || bad_pairs) && g.layout_error) atomicExch(g.layout_error, 1);
  }
  /* Pair stores need an even row stride and a pair-aligned ds too; without them, one element per store. */
  const bool pairs = !bad_pairs && g.ld_ds % 2 == 0 && (uintptr_t)g.ds % (2 * sizeof(DsT)) == 0;

  /* Pingpong: the producer loads the halves' tiles in turn, so the second group's first stage follows
   * the first group's first tile, and each group steps over the other's tiles. */
  if (half == 1) state.advance(k_tiles);
  for (int nt = nt0; nt < nt1; nt++) {
    Tensor acc = partition_fragment_C(tiled_mma, take<0, 2>(typename G::TileShape{}));
    if (G::kPingpong) order.wait();
    mainloop.mma(pipeline, state, acc, k_tiles, mma_thread, ss.tensors, p.mainloop);
    if (G::kPingpong) order.arrive(); /* the other group's mainloop may start */
    mainloop.mma_tail(pipeline, state, k_tiles);
    state.advance(k_tiles * G::kHalves);
    Tensor a = make_tensor(acc.data(), fs_rowcol(acc.layout()));
    const int col0 = nt * FS_TILE_N, ncols = (int)g.n; /* int: n <= INT32_MAX (fs_launch_gemm) */
    fs_with_options(g.o, [&](auto cap, auto smooth) {
      if constexpr (Mode == FS_DLOGITS)
        fs_store_dlogits<decltype(cap)::value, decltype(smooth)::value, DsT>(g, a, crd, row, row_ok, rg, col0, ncols,
                                                                             pairs);
      else
        fs_fold_tile<decltype(cap)::value, decltype(smooth)::value>(g, a, crd, run, row, y_col, col0, ncols);
    });
  }
  if constexpr (Mode == FS_STATS) {
    /* The range again from the grid (not kept live across the loop: it cost ptxas 28 bytes of spills). */
    const int range = fs_raster((int)blockIdx.x, p.m_tiles, p.ranges).range;
    CUTE_UNROLL
    for (int r = 0; r < R; r++) {
      fc_state t = run[r];
      t = fc_combine(t, fs_shfl_xor(t, 1));
      t = fc_combine(t, fs_shfl_xor(t, 2));
      if ((lane & 3) == 0 && row_ok[r]) {
        float *out = g.partial + ((int64_t)range * g.m + row[r]) * 4;
        out[0] = t.m, out[1] = t.s, out[2] = t.sw, out[3] = t.d;
      }
    }
  }
}

template <class G, int Mode> __global__ void __launch_bounds__(FS_THREADS, 1) fs_gemm_kernel(const __grid_constant__ typename G::Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Pipeline = typename G::Pipeline;
  extern __shared__ __align__(1024) char fs_smem[];
  auto &ss = *reinterpret_cast<typename G::SharedStorage *>(fs_smem);
  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const int wg = cutlass::canonical_warp_group_idx();
  const int lane = cutlass::canonical_lane_idx();
  if (warp_idx == 0 && cute::elect_one_sync()) G::Mainloop::prefetch_tma_descriptors(p.mainloop);

  typename Pipeline::Params pp;
  pp.role = wg == 0 ? (warp_idx == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::NonParticipant)
                    : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x % 128 == 0;
  pp.num_consumers = G::kConsumers;
  pp.num_producers = 1;
  pp.transaction_bytes = p.mainloop.tma_transaction_bytes;
  Pipeline pipeline(ss.pipeline, pp, FsClusterShape{});
  typename G::OrderBarrier::Params op;
  op.group_id = wg == 2 ? 1 : 0; /* consumer warp group 1 starts, 2 follows (pingpong only) */
  op.group_size = 128;
  typename G::OrderBarrier order(ss.order, op);
  __syncthreads(); /* the barriers' initialization is visible to every warp */

  typename G::Mainloop mainloop;
  auto problem = make_shape((int)p.g.m, (int)p.g.n, (int)p.g.k, 1);
  auto load_inputs = mainloop.load_init(problem, p.mainloop);
  const int k_tiles = (int)size<3>(get<0>(load_inputs));
  const int n_tiles = (int)((p.g.n + FS_TILE_N - 1) / FS_TILE_N);
  const FsTileIndex tile = fs_raster((int)blockIdx.x, p.m_tiles, p.ranges);
  const int nt0 = tile.range * p.tiles_per_cta;
  const int nt1 = min(nt0 + p.tiles_per_cta, n_tiles);
  const int mt = tile.m_tile;
  if (wg == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (warp_idx == 0) {
      auto state = cutlass::make_producer_start_state<Pipeline>();
      /* Pingpong: the first group's half, then the second's. A half wholly past the tokens (m % 128 in
       * 1..64) loads the last real block instead of a box wholly out of bounds: its rows are discarded. */
      const int m_blocks = (int)((p.g.m + G::kMmaM - 1) / G::kMmaM);
      for (int nt = nt0; nt < nt1; nt++)
        for (int h = 0; h < G::kHalves; h++) {
          const int mb = min(mt * G::kHalves + h, m_blocks - 1);
          auto k_iter = cute::make_coord_iterator(shape<3>(get<0>(load_inputs)));
          mainloop.load(p.mainloop, pipeline, state, load_inputs, make_coord(mb, nt, _, 0), k_iter, k_tiles, lane, 0u,
                        ss.tensors);
          state.advance(k_tiles);
        }
      mainloop.load_tail(pipeline, state);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int t = (int)threadIdx.x - 128; /* 0..255 over the two consumer groups */
    if (G::kPingpong) fs_consume<G, Mode>(p, mainloop, pipeline, order, ss, mt, t / 128, nt0, nt1, k_tiles, t % 128);
    else fs_consume<G, Mode>(p, mainloop, pipeline, order, ss, mt, 0, nt0, nt1, k_tiles, t);
  }
#endif
}

__global__ void fs_combine_splits_kernel(const float *partial, int64_t splits, int64_t m, int64_t token0, fc_stats shard) {
  const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (row >= m) return;
  const int64_t i = token0 + row;
  fc_state t = {shard.m[i], shard.s[i], shard.sw[i], shard.d[i]};
  for (int64_t s = 0; s < splits; s++) {
    const float *q = partial + (s * m + row) * 4;
    t = fc_combine(t, fc_state{q[0], q[1], q[2], q[3]});
  }
  shard.m[i] = t.m, shard.s[i] = t.s, shard.sw[i] = t.sw, shard.d[i] = t.d;
}

template <typename T> __global__ void fs_pad_rows_kernel(const T *x, T *out, int64_t rows, int64_t k, int64_t ld) {
  const int64_t count = rows * ld;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e / ld, j = e % ld;
    out[e] = j < k ? x[r * k + j] : (T)0;
  }
}

template <class G> lce_code fs_launch_typed(const fs_gemm *g, fs_epilogue e, cudaStream_t stream, lce_status *st) {
  using Mainloop = typename G::Mainloop;
  using ElementA = typename Mainloop::ElementA;
  typename Mainloop::Arguments args{};
  args.ptr_A = (const ElementA *)g->a;
  args.ptr_B = (const ElementA *)g->b;
  get<0>(args.dA) = g->k;
  get<2>(args.dA) = g->m * g->k;
  get<0>(args.dB) = g->k;
  get<2>(args.dB) = g->n * g->k;
  auto problem = make_shape((int)g->m, (int)g->n, (int)g->k, 1);
  LCE_CHECK(st, Mainloop::can_implement(problem, args), LCE_EINVAL,
            "fused-sm90: CUTLASS cannot implement the %lld x %lld x %lld logits GEMM (TMA alignment)", (long long)g->m,
            (long long)g->n, (long long)g->k);
  typename G::Params p;
  p.mainloop = Mainloop::to_underlying_arguments(problem, args, nullptr);
  p.g = *g;
  const int64_t n_tiles = (g->n + FS_TILE_N - 1) / FS_TILE_N, m_tiles = (g->m + FS_TILE_M - 1) / FS_TILE_M;
  const int64_t splits = e == FS_STATS ? fs_stats_splits(g->n) : n_tiles;
  p.tiles_per_cta = (int)((n_tiles + splits - 1) / splits);
  p.m_tiles = (int)m_tiles, p.ranges = (int)splits;
  const size_t smem = sizeof(typename G::SharedStorage);
  const dim3 grid((unsigned)(m_tiles * splits)); /* fs_raster's order */
  if (e == FS_STATS) {
    LCE_CUDA_CHECK(st, cudaFuncSetAttribute(fs_gemm_kernel<G, FS_STATS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    fs_gemm_kernel<G, FS_STATS><<<grid, FS_THREADS, smem, stream>>>(p);
  } else {
#if FS_WITH_DLOGITS
    LCE_CUDA_CHECK(st, cudaFuncSetAttribute(fs_gemm_kernel<G, FS_DLOGITS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    fs_gemm_kernel<G, FS_DLOGITS><<<grid, FS_THREADS, smem, stream>>>(p);
#else
    return lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "fused-sm90: this build's d_logits GEMM is production's");
#endif
  }
  LCE_CUDA_LAUNCH_CHECK(st, "fs_gemm_kernel");
  return LCE_OK;
}

int64_t fs_stats_splits(int64_t n) {
  const int64_t n_tiles = (n + FS_TILE_N - 1) / FS_TILE_N;
  const int64_t want = n_tiles < FS_MAX_SPLITS ? n_tiles : FS_MAX_SPLITS;
  const int64_t per = (n_tiles + want - 1) / want;
  return (n_tiles + per - 1) / per; /* every range non-empty */
}

/* The launch of one schedule (fs_gemm.pingpong) for the GEMM's input type. */
template <bool kPingpong> static lce_code fs_launch_schedule(const fs_gemm *g, fs_epilogue e, cudaStream_t stream,
                                                             lce_status *st) {
  switch (g->dtype) {
    case LCE_BF16: return fs_launch_typed<FsGemm<cutlass::bfloat16_t, __nv_bfloat16, kPingpong>>(g, e, stream, st);
    case LCE_FP16: return fs_launch_typed<FsGemm<cutlass::half_t, __half, kPingpong>>(g, e, stream, st);
    case LCE_FP32:
      if (g->o.tf32) return fs_launch_typed<FsGemm<cutlass::tfloat32_t, float, kPingpong>>(g, e, stream, st);
      break;
    default: break;
  }
  return lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "fused-sm90: no %s%s logits GEMM", lce_dtype_name(g->dtype),
                  g->dtype == LCE_FP32 ? " (IEEE)" : "");
}

lce_code fs_launch_gemm(const fs_gemm *g, fs_epilogue e, cudaStream_t stream, lce_status *st) {
#if !FS_WITH_DLOGITS
  if (e == FS_DLOGITS) return lce_fs_production::fs_launch_gemm(g, e, stream, st); /* its checks are production's */
#endif
  LCE_CHECK(st, g->m >= 1 && g->n >= 1 && g->k >= 1 && g->m <= INT32_MAX && g->n <= INT32_MAX && g->k % 8 == 0 &&
                    ((g->m + FS_TILE_M - 1) / FS_TILE_M) * ((g->n + FS_TILE_N - 1) / FS_TILE_N) <= INT32_MAX,
            LCE_EINVAL, "fused-sm90: logits GEMM shape %lld x %lld x %lld out of range", (long long)g->m, (long long)g->n,
            (long long)g->k);
  LCE_CHECK(st, !g->o.tf32 || g->dtype == LCE_FP32, LCE_EINTERNAL,
            "fused-sm90: tf32 d_logits (%d) for a %s logits GEMM: the epilogue rounds to tf32 exactly the fp32 ones",
            g->o.tf32, lce_dtype_name(g->dtype));
  if (g->pingpong) return fs_launch_schedule<true>(g, e, stream, st);
  return fs_launch_schedule<false>(g, e, stream, st);
}

lce_code fs_launch_combine_splits(const float *partial, int64_t splits, int64_t m, int64_t token0, fc_stats shard,
                                  cudaStream_t stream, lce_status *st) {
  fs_combine_splits_kernel<<<(unsigned)((m + 255) / 256), 256, 0, stream>>>(partial, splits, m, token0, shard);
  LCE_CUDA_LAUNCH_CHECK(st, "fs_combine_splits_kernel");
  return LCE_OK;
}

lce_code fs_launch_pad_rows(const void *x, void *out, size_t es, int64_t rows, int64_t k, int64_t ld,
                            cudaStream_t stream, lce_status *st) {
  const int64_t count = rows * ld, blocks = (count + 255) / 256;
  const unsigned grid = (unsigned)(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
  if (es == 4) fs_pad_rows_kernel<<<grid, 256, 0, stream>>>((const uint32_t *)x, (uint32_t *)out, rows, k, ld);
  else fs_pad_rows_kernel<<<grid, 256, 0, stream>>>((const uint16_t *)x, (uint16_t *)out, rows, k, ld);
  LCE_CUDA_LAUNCH_CHECK(st, "fs_pad_rows_kernel");
  return LCE_OK;
}

} // namespace lce_fs
