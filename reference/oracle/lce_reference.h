/* lce_reference.h — the one face every reference tier presents to the engine, so that a new tier is
 * one new implementation of lce_reference_tier:
 *   available  can it run here (tier 2 needs a GPU);
 *   prepare    compute the reference of one case from its tensors, either with per-element values on
 *              the host (ref->host) or kept where it was computed (LCE_REF_DEVICE, tiers with compare),
 *              or only the values on the host (LCE_REF_VALUES);
 *   compare    one subject output against a reference kept on the device, into an lce_comparison;
 *   release    free what prepare made.
 * Tiers, numbered as what they are:
 *   0  mpfr      MPFR on the CPU: correctly rounded logits, 160-bit math, a rigorous bound per
 *                element; the truth (reference/oracle/lce_oracle.h)
 *   1  fast      double on the CPU with error-free transformations and a rigorous bound per element;
 *                what it cannot decide is recomputed by tier 0 (reference/oracle/lce_fast.h)
 *   2  fp64-gpu  fp64 on the GPU with a stated a-priori bound, certified against tier 0; for shapes
 *                tier 0 cannot reach (reference/gpu/lce_ref64.h); CUDA builds only */
#ifndef LCE_REFERENCE_H
#define LCE_REFERENCE_H

#include "lce_reference_result.h"

typedef enum lce_ref_mode {
  LCE_REF_HOST = 0,   /* per-element values on the host: full class checks, every metric */
  LCE_REF_DEVICE = 1, /* the reference stays on the device and compare() reduces each output there */
  LCE_REF_VALUES = 2  /* each output's values on the host and nothing else (err, mag, emag, rounded,
                       * decisive NULL; n_valid set): an exact gradient for a training loop (converge),
                       * not for the judge. A tier without compare answers it with LCE_REF_HOST, a
                       * superset; tier 2 skips its bounds and magnitudes and copies only the values */
} lce_ref_mode;

struct lce_reference_tier;

typedef struct lce_reference {
  const struct lce_reference_tier *tier;
  lce_case c;
  lce_ref_mode mode;      /* what prepare produced (a tier without compare always produces HOST) */
  lce_oracle_result host; /* LCE_REF_HOST: every output's values and bounds; LCE_REF_VALUES: the values */
  int64_t n_valid;        /* tokens not labelled ignore_index */
  int64_t decisive, total;/* certified elements (host mode; device mode: 0, 0) */
  double worst_rel_err;   /* the reference's own accuracy (host mode) */
  int has_mags;           /* device mode: 0 when the error magnitudes were dropped for memory */
  int has_rsum;           /* the tier computed the softmax-sum replay (lce_oracle_result.rsum_rel), any mode; */
  double rsum_rel;        /* else the judge replays the rows itself where the values are on the host */
  double seconds;         /* wall time of prepare */
  void *priv;             /* the tier's own state (device memory) */
} lce_reference;

typedef struct lce_reference_tier {
  const char *name; /* "mpfr", "fast", "fp64-gpu" */
  int level;        /* 0, 1, 2 */
  const char *what; /* one line for `lcecheck list` */
  int (*available)(char *why, size_t size);
  lce_code (*prepare)(const lce_case *c, const lce_tensors *in, lce_ref_mode mode, lce_reference *ref,
                      lce_status *st);
  lce_code (*compare)(const lce_reference *ref, lce_output_id o, const lce_outputs *subject, lce_comparison *cmp,
                      lce_status *st); /* NULL: host values only */
  void (*release)(lce_reference *ref);
} lce_reference_tier;

size_t lce_reference_tier_count(void);
const lce_reference_tier *lce_reference_tier_at(size_t i);
/* The tier called name ("mpfr", "fp64-gpu"), also in builds that lack it (its available() then
 * says why); NULL when no tier has that name. */
const lce_reference_tier *lce_reference_tier_find(const char *name);
const lce_reference_tier *lce_reference_tier_default(void); /* tier 1, fast */

/* tier->prepare with the bookkeeping every tier shares (zeroed ref, the tier, the case, timing). A
 * tier that is not available answers LCE_ENODEV with its reason. */
lce_code lce_reference_prepare(const lce_reference_tier *tier, const lce_case *c, const lce_tensors *in,
                               lce_ref_mode mode, lce_reference *ref, lce_status *st);
void lce_reference_release(lce_reference *ref);
/* For a tier's prepare that filled ref->host: host mode, and the counts and accuracy taken from it. */
void lce_reference_adopt_host(lce_reference *ref);

/* Two tiers' host results of one case compared element by element (test_tiers, fuzz_tiers): the
 * counts match; finite values lie within the sum of both bounds, |a - b| <= (err_a + err_b)(1 +
 * 2^-50); non-finite ones are of the same class; where both are decisive the rounded values are
 * equal (+0 == -0: a zero's sign is that of each tier's approximation); with same_decisive the
 * decisive flags are equal too. Returns the elements that disagree; d (may be NULL) gets the first
 * one and the worst |a - b| / (err_a + err_b) over finite elements. */
typedef struct lce_tier_diff {
  int64_t count;
  int output;       /* the first disagreeing element, when count > 0 */
  int64_t index;
  double worst;     /* largest |a - b| / (err_a + err_b) */
  int worst_output;
  int64_t worst_index;
} lce_tier_diff;

int64_t lce_tiers_differ(const lce_oracle_result *a, const lce_oracle_result *b, int same_decisive, lce_tier_diff *d);

/* The tiers' implementations (lce_reference.c registers them). */
extern const lce_reference_tier lce_tier_mpfr;
extern const lce_reference_tier lce_tier_fp64_gpu;

#endif
