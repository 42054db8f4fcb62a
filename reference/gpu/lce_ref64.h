/* lce_ref64.h — tier 2 of the oracle: FLCE forward and backward in fp64 on the GPU (cuBLAS DGEMM for
 * the GEMMs, fp64 kernels for the softmax statistics and the gradients), for shapes the MPFR oracle
 * (tier 0, lce_oracle.h) cannot reach. Certified against tier 0 at medium shapes by
 * reference/tests/test_ref64_certify.c (label gpu). Built only where CUDA is enabled
 * (reference/gpu/CMakeLists.txt); every entry point returns LCE_ENODEV where no GPU exists.
 *
 * Two levels:
 *   device  lce_ref64_device_run leaves the reference (value, and unless skipped err, mag, emag) of
 *           every output in device memory; lce_ref64_compare reduces a subject's host output against
 *           it on the device (sum (x-r)^2, sum r^2, sum (x-r) r, classes) without copying the
 *           reference back: production shapes, where nothing per element can come to the host.
 *   host    lce_ref64_oracle fills the same lce_oracle_result tier 0 fills (value, err, mag, emag,
 *           rounded, decisive), so the judge runs unchanged on it (lce_reference.h, lcecheck
 *           --oracle fp64-gpu).
 *
 * The math is lce_case.h's; the semantics of non-finite inputs, ignored tokens, padded rows and the
 * untied embedding's gradient are tier 0's (lce_oracle.c's header); mag and emag follow tier 0's
 * definitions exactly (label term split, softmax condition 1 + the row's largest logit terms, the
 * dz and GEMM floors, softcap's factor 2 - f), so they agree with tier 0 to rounding (~1e-13).
 *
 * Error bound (derived in lce_ref64_kernels.cu's header, stated here). u = 2^-53, gamma(k) = k u / (1 - k u).
 * Assumptions: cuBLAS DGEMM forms each element as a sum of exact-operand products with IEEE fp64
 * operations (any order, with or without FMA: error <= gamma(K) sum |terms|); CUDA's fp64 exp, log,
 * log1p, tanh, cosh are within 2 ulp (4u relative; the CUDA Programming Guide states 1-2 ulp).
 * Per token row n with largest logit terms T (cond = 1 + T), logit terms t_v, row sum depth D (the
 * longest chain of additions in the kernels' sums over the vocab, ceil(V / 256) + 9):
 *   logits     |z_v - Z_v| <= az t_v,                 az = 1.01 gamma(H) + 7u
 *   exp        t_v = exp(Z_v - m)(1 + rho_v),         |rho_v| <= R = 1.01 ((az + 2u) T + 5u)
 *   lse        err = 1.02 (R + gamma(D) + u + 4u |log S| + u |lse|)
 *   ce         err = 1.02 (2R + gamma(D) + 8u) (|ce| + u)          (log1p(S_rest / t_y) form)
 *   loss_token err = the running-bound sum of its terms (cy ce, ev SM, lambda lse^2), each term's
 *              relative bound times its magnitude, plus u per operation
 *   p_v, 1-p_y relative rp = 1.03 (2R + gamma(D) + 2u)
 *   dz_v       |dz - DZ| <= A_n dzterm_v + B_n,  A_n = rp + 8u + g_rel + (z-loss: 2 lambda err_lse / kmag),
 *              B_n = |g| kmag 2^-1070 (exp underflow); dzterm_v = tier 0's mag of dz_v
 *   d_hidden   err = (A_n + gamma(V + 1)) M1 + B_n sum_v |W_vk|          (M1 = sum_v dzterm |W_vk|)
 *   d_weight   err = alpha EM2 + gamma(N + 2) (|prior| + M2) + B sum_n |h_nk|  (alpha = max_n A_n / cond_n,
 *              EM2 = sum_n cond_n dzterm |h_nk|, M2 = sum_n dzterm |h_nk|, B = max_n B_n)
 *   loss       err = sum_n err(loss_n) + gamma(N) sum_n |loss_n| (mean: / sw, + gamma(N + 2) |loss|)
 * Every bound is evaluated in double and multiplied by (1 + 2^-40) so its own rounding cannot make it
 * undershoot. All the relative quantities are ~1e-15 to 1e-13 at production shapes: far below bf16's
 * 4e-3, and below the 2^-36 relative margin that tier 0's decisiveness test needs for fp32 outputs
 * except on rows whose logits reach ~10^3 terms.
 *
 * rnd (with the magnitudes): the coherent d_logit rounding's reference, as tier 1 computes it
 * (lce_fast_rnd.c, lce_ref_output.rnd): dz / g rounded to the input dtype (then tf32), times g, through the
 * same DGEMMs; a plain fp64 reference, not certified (its use is the judge's rnd term, not a bound).
 *
 * Device memory (8-byte elements): W and |W| (2 V H), hidden and |hidden| (2 N H), logits, dz and
 * dz terms (3 N V), d_hidden value/err/mag/emag/rnd (5 N H), d_weight value/err/mag/emag/rnd (5 Vp H), plus
 * O(N + V) — with skip_mags: 1 V H + 1 N H + 2 N V + 1 N H + 1 Vp H. No d_embedding (its prior, judged
 * against the inputs: lce_output_reference_count). lce_ref64_device_bytes says how much: (8192, 4096,
 * 128256) ~52 GB, (4096, 4096, 262144) ~85 GB, (16384, 8192, 152064) ~127 GB (without magnitudes 21, 33
 * and 50 GB); the untied embedding's arrays, kept before, made them 71, 124 and 172 GB. */
#ifndef LCE_REF64_H
#define LCE_REF64_H

#include "lce_device.h"
#include "lce_oracle.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lce_ref64_options {
  int skip_mags; /* 1: values only (err, mag and emag NULL): half the memory, a third of the GEMMs */
} lce_ref64_options;

/* One output in device memory; all arrays [count] doubles, NULL when skipped or not applicable. */
typedef struct lce_ref64_dev_output {
  int64_t count; /* 0: the output does not apply to the case */
  double *value;
  double *err;
  double *mag;
  double *emag;
  double *rnd;   /* d_hidden and d_weight with the magnitudes: lce_ref_output.rnd, NULL otherwise */
} lce_ref64_dev_output;

typedef struct lce_ref64_device {
  lce_case c;
  lce_ref64_dev_output out[LCE_OUT_COUNT];
  unsigned char *valid; /* device [n]: 1 where the label is not ignore_index (lse is judged there only) */
  int64_t n_valid;
  int has_mags;         /* 0 with skip_mags */
  int has_rsum;         /* rsum_rel computed: every case but tf32 ones, whose replay the judge defines on the */
  double rsum_rel;      /* unrounded fp32 inputs (lce_plain_logit) where the DGEMM reads them tf32-rounded; the
                         * judge's term rsum, the largest softmax-sum replay over the valid tokens and shards
                         * (lce_softmax_sum_replay, over the DGEMM's logits) */
  size_t device_bytes;  /* device memory this reference holds (the run's peak is about the same) */
  double seconds;       /* wall time of lce_ref64_device_run */
  void *priv_;          /* owner of every device allocation (private) */
} lce_ref64_device;

/* Device bytes lce_ref64_device_run will allocate for case c (before running it). */
size_t lce_ref64_device_bytes(const lce_case *c, const lce_ref64_options *opt);

/* Computes the fp64 reference of every output of case c from its host tensors into device memory.
 * opt may be NULL (everything). LCE_EINVAL for invalid cases or tensors, LCE_ENODEV without a GPU,
 * LCE_ENOMEM when the device memory does not suffice. Free with lce_ref64_device_free (also after
 * a failure). */
lce_code lce_ref64_device_run(const lce_case *c, const lce_tensors *in, const lce_ref64_options *opt,
                              lce_ref64_device *ref, lce_status *st);
void lce_ref64_device_free(lce_ref64_device *ref);

/* A subject's output against the device reference, reduced on the device into cmp, the comparison the
 * judge turns into its metrics: elements whose err is too wide for the metrics are inconclusive, by the
 * host comparison's rule (decisive or lce_value_judgeable; none without err); of the others, those where both are finite
 * enter the sums and the rest are class-checked (NaN, +Inf, -Inf must match). lse: valid tokens only; d_weight: the real vocab rows.
 * No per-element ulps (has_ulps 0); has_emag where the reference has its magnitudes.
 * subject: the outputs as lce_outputs holds them on the host (d_hidden in the case dtype, the rest
 * fp32). They are uploaded in slices, so the device needs only a small staging buffer. */
lce_code lce_ref64_compare(const lce_ref64_device *ref, lce_output_id o, const lce_outputs *subject,
                           lce_comparison *cmp, lce_status *st);

/* Host level: the fp64 reference as an lce_oracle_result (lce_oracle.h), every field tier 0 fills:
 * value (the fp64 result), err (the a-priori bound above), mag, emag, rounded (value rounded to the
 * output format; exact from double since value is the number whose bound is err), decisive (rounded
 * is certain given err, with tier 0's 2^-12 ulp margin); precision_bits = 53. Free with
 * lce_oracle_free. */
lce_code lce_ref64_oracle(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st);
/* The values alone (lce_reference.h's LCE_REF_VALUES): the device run with skip_mags (a third of the
 * GEMMs, half the memory) and only value copied back; err, mag, emag, rounded, decisive stay NULL,
 * n_valid is set. At H 4096 x V 128256 this copies 2 x 4.2 GB instead of 4 x that and skips the
 * per-element rounding pass over the weight gradient. */
lce_code lce_ref64_values(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st);

#ifdef __cplusplus
}
#endif

#endif
