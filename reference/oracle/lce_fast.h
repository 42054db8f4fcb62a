/* lce_fast.h — tier 1, "fast": the FLCE reference in double on the CPU, with a rigorous error bound
 * per element, and tier 0 (MPFR) only for the elements that bound cannot decide.
 *
 * Logits are exact where plain double is provably exact (bf16 and fp16 inputs nearly always) and
 * compensated (Sum2 of exact products) elsewhere; exp, log, log1p, tanh and cosh come from libm with
 * a stated accuracy; every sum over the vocab or the tokens is compensated, and the gradient GEMMs
 * are Dot2 (FMA TwoProduct, TwoSum). The derivation of every bound is in lce_fast_row.c (row math)
 * and lce_fast.c (gradients, reduction). Each element is then certified exactly as tier 0 does
 * (lce_round_certain): an element whose bound cannot make its rounded value certain is recomputed
 * in double-double where the case allows (d_hidden and d_weight, lce_fast_refine.c), and what that
 * cannot decide by tier 0 (lce_oracle_run_subset) and takes tier 0's value, bound and flags, so the result is as
 * decisive as tier 0's. mag and emag are tier 0's definitions, equal to them to rounding. The
 * non-finite semantics are tier 0's (lce_oracle.c). Token rows run in blocks: each block's logits
 * together in tiles of W (fast_dot_block), its rows in parallel, then its d_hidden and d_weight
 * contributions in tiles (lce_fast_grad.c), all OpenMP, with the same bits for any thread count and
 * block size. Memory: the inputs and the result in doubles, and the logits and dz of the rows in
 * flight (block_rows * V), never N * V. */
#ifndef LCE_FAST_H
#define LCE_FAST_H

#include "lce_reference_result.h"

typedef struct lce_fast_stats {
  int64_t escalated;   /* elements tier 1 could not decide, recomputed by tier 0 */
  int64_t refined;     /* elements its double-double step decided (lce_fast_refine.c), not escalated */
  double refine_seconds; /* wall time of that step */
  int64_t recomputed_rows; /* token forwards tier 0 ran for them (all N when a d_weight or the loss escalated) */
  int64_t inexact_logits;  /* logits not proven exact in plain double (compensated instead) */
  int64_t logits;
  int64_t unescalated;     /* undecided elements left so: tier 0 would not fit in memory */
  int all_rows;            /* an escalated d_weight element or loss made tier 0 run every token */
  double escalation_seconds; /* wall time of the escalation (tier 0 and the masks) */
  double pass_seconds[4];    /* wall time of the token blocks' passes: logits (fast_dot_block), rows, d_hidden, d_weight */
} lce_fast_stats;

typedef struct lce_fast_options {
  int escalate;       /* 0: skip the escalation (for tests: the elements tier 1 cannot decide stay
                       * non-decisive, with their tier-1 value and bound) */
  int64_t block_rows; /* token rows in flight (their logits and dz kept for the gradients); 0: about 1 GiB of them.
                       * The results are the same bits for any value. */
  int refine_all;     /* for tests: every d_hidden and d_weight element not exact goes through the
                       * double-double step (lce_fast_refine.c), decided by double or not */
} lce_fast_options;

/* What a case costs tier 1, estimated from its shape before anything is allocated. */
typedef struct lce_fast_cost {
  double bytes;            /* peak memory of tier 1 itself: inputs in double, the result, the rows in flight */
  double escalation_bytes; /* what tier 0 allocates for the case when some element escalates to it */
  double macs;             /* 3 N H V multiply-adds (logits, d_hidden, d_weight) */
  int64_t block_rows;      /* token rows in flight */
} lce_fast_cost;

void lce_fast_estimate(const lce_case *c, const lce_fast_options *opt, lce_fast_cost *cost);

/* Bytes of memory this process may still take: $LCE_MEMORY_LIMIT when set (bytes, for tests and
 * shared machines), else the kernel's MemAvailable; +Inf when neither is known. */
double lce_available_memory(void);

/* Runs forward and backward; rejects invalid cases or tensors with LCE_EINVAL before computing, and
 * a case whose estimate (lce_fast_estimate) exceeds lce_available_memory with LCE_ENOMEM and the
 * estimate. Elements that would escalate when tier 0's estimate for the case exceeds the memory
 * left stay undecided (inconclusive, counted in stats). stats may be NULL. */
lce_code lce_fast_run_opts(const lce_case *c, const lce_tensors *in, const lce_fast_options *opt,
                           lce_oracle_result *res, lce_fast_stats *stats, lce_status *st);
/* The same with escalation and the automatic block. */
lce_code lce_fast_run(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_fast_stats *stats,
                      lce_status *st);

#endif
