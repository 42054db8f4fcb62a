/* unfused_cuda.cu — unfused-cuda: the LM head as an unfused PyTorch / Megatron-LM model computes it,
 * the baseline fused kernels are compared with. Per vocab shard r (tp ranks simulated in rank order):
 *   logits_r [N x Vp/tp] = hidden · W_r^T       ONE cuBLAS GEMM (K = H), materialized whole, fp32
 *   softmax cross-entropy over logits_r         fp32 kernels (row max / sum of exp per shard, then the
 *                                               vocab-parallel merge of max and sum across shards)
 *   d_logits_r                                  fp32 kernel, the whole loss gradient g folded in (PyTorch's
 *                                               cross-entropy backward scales by grad_output / n_valid),
 *                                               rounded to the input dtype
 *   d_hidden += d_logits_r · W_r                ONE GEMM per shard, K = the shard's rows (V at tp 1);
 *                                               shards summed in fp32 (beta = 1), as the all-reduce
 *   grad_W_r += d_logits_r^T · hidden           ONE GEMM per shard, K = N
 * GEMMs: bf16/fp16 in, fp32 compute (fp32 inputs: IEEE or tf32 as fused-cuda), reduced-precision
 * split-K reductions disallowed.
 *
 * Logits stay in fp32 (the cuBLAS output type), not rounded to the input dtype as a bf16 nn.Linear
 * output is before Megatron's .float(): that rounding would move every logit by up to 2^-9 relative
 * (|z| ~ 10: 0.02 absolute, a 2% change of p) and swamp the error this baseline exists to show, the
 * K-dependent tensor-core truncation of one long GEMM per gradient (DESIGN.md "Device arithmetic is
 * not IEEE": about -1e-9·K bias). A bf16-logits variant would be its own subject.
 *
 * How: this IS fused-cuda's driver (fused_cuda.cu, the same kernels and GEMM calls) run with one
 * vocab chunk per shard and one token chunk, so a shard's tile is its whole logits matrix and every
 * gradient GEMM spans the full reduction, and with g folded into d_logits as PyTorch does (fused-cuda
 * keeps its non-power-of-two part out of them). Any difference between fused-cuda and unfused-cuda
 * in the production table is therefore the GEMM inner size K and the 1/n_valid bias. The one departure from PyTorch is time,
 * not bits: the backward recomputes each shard's logits with the identical GEMM (same handle, shapes
 * and operands: the same bits) instead of keeping them; device memory holds one shard's logits
 * [N x Vp/tp] fp32 and d_logits at a time, as one tensor-parallel rank does. The case's vocab_chunk and
 * token_chunk are algorithm parameters of fused kernels and are ignored here; every semantic option of
 * lce_case.h is supported (fused-cuda's capabilities).
 *
 * Build: fused/cuda.cmake (part of lce_fused_cuda). Run: build/lcecheck production --subjects unfused-cuda. */
extern "C" {
#include "fused_cuda.h"
#include "unfused_cuda.h"
}

lce_case lce_unfused_cuda_case(const lce_case *c) {
  lce_case u = *c;
  u.vocab_chunk = c->tp > 0 && c->vp / c->tp > 0 ? c->vp / c->tp : 1; /* the whole shard (validate rejects bad tp) */
  u.token_chunk = 0;                                                  /* all tokens: K = N for d_weight */
  return u;
}

static lce_code unfused_cuda_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  LCE_TRY(lce_case_validate(c, st));
  const lce_case u = lce_unfused_cuda_case(c);
  return lce_fused_cuda_run_folded(&u, in, out, st);
}

extern "C" const lce_subject lce_unfused_cuda_subject = {
    "unfused-cuda", "unfused-cuda",
    "unfused LM head on the GPU: logits materialized per vocab shard by one cuBLAS GEMM (fp32), softmax "
    "cross-entropy in fp32 kernels, one GEMM per gradient (d_hidden K = Vp/tp, shards summed in fp32; "
    "d_weight K = N)",
    LCE_CAP_ALL_SEMANTICS | LCE_CAP_NEEDS_GPU, unfused_cuda_run, lce_inner_unchunked, NULL, NULL, NULL, NULL};
