/* lce_subject.h — the one interface every FLCE implementation under test presents: a name,
 * capability flags and a run function. The judge, the fuzzers and the CLI treat all subjects
 * alike through it.
 *
 * Contract of run(): validate the case and tensors first (lce_case_validate,
 * lce_tensors_validate) and return LCE_EINVAL without touching any output buffer when they are
 * bad; otherwise write loss, loss_token, lse and d_hidden in full and add the weight gradient into
 * the right fp32 buffer (see lce_case.h for the math). */
#ifndef LCE_SUBJECT_H
#define LCE_SUBJECT_H

#include "lce_case.h"

enum {
  LCE_CAP_BF16 = 1u << 0,
  LCE_CAP_FP16 = 1u << 1,
  LCE_CAP_FP32 = 1u << 2,
  LCE_CAP_UNTIED = 1u << 3,     /* separate output weight */
  LCE_CAP_TP = 1u << 4,         /* more than one vocab shard */
  LCE_CAP_PADDING = 1u << 5,    /* vp > v */
  LCE_CAP_RED_NONE = 1u << 6,   /* reduction none with per-token grad_output */
  LCE_CAP_PRIOR_GRAD = 1u << 7, /* accumulates into gradient buffers that hold a prior */
  LCE_CAP_MUTANT = 1u << 16,    /* a deliberately broken variant the suite must kill */
  LCE_CAP_NEEDS_GPU = 1u << 17  /* run() returns LCE_ENODEV where no GPU exists */
};
#define LCE_CAP_ALL_SEMANTICS                                                                 \
  (LCE_CAP_BF16 | LCE_CAP_FP16 | LCE_CAP_FP32 | LCE_CAP_UNTIED | LCE_CAP_TP | LCE_CAP_PADDING | \
   LCE_CAP_RED_NONE | LCE_CAP_PRIOR_GRAD)

typedef lce_code (*lce_subject_run_fn)(const lce_case *c, const lce_tensors *in, lce_outputs *out,
                                       lce_status *st);

typedef struct lce_subject {
  const char *name;         /* "fused-host", "mutant/bf16-dhidden-accum", ... */
  const char *golden_class; /* goldens it is judged against ("fused-host" for its mutants) */
  const char *description;  /* one line; for mutants, the upstream bug it mirrors */
  unsigned caps;
  lce_subject_run_fn run;
} lce_subject;

/* Registry: production subjects first, then mutants (present only in builds that link them). */
size_t lce_subject_count(void);
const lce_subject *lce_subject_at(size_t i);
const lce_subject *lce_subject_find(const char *name); /* NULL when unknown */
/* 1 when the subject can run case c; otherwise 0 and why (e.g. "no fp32 support"). */
int lce_subject_supports(const lce_subject *s, const lce_case *c, char *why, size_t size);

#endif
