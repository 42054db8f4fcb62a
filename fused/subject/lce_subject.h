/* lce_subject.h — the one interface every FLCE implementation under test presents: a name,
 * capability flags and a run function. The judge, the fuzzers and the CLI treat all subjects
 * alike through it.
 *
 * Contract of run(): validate the case and tensors first (lce_case_validate,
 * lce_tensors_validate) and return LCE_EINVAL without touching any output buffer when they are
 * bad; otherwise write loss, loss_token, lse and d_hidden in full and add the weight gradient into
 * the right fp32 buffer (see lce_case.h for the math). A subject that cannot express a case (an
 * outside kernel without that option) returns LCE_ESKIP with the reason: a visible skip. */
#ifndef LCE_SUBJECT_H
#define LCE_SUBJECT_H

#include "lce_case.h"
#include "lce_output.h"

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

/* The inner size K of the reduction a subject's GEMMs perform to produce output o of case c: what the
 * K term of the golden forms (lineark, sqrtk, condk) scales with, so that K means one thing in every
 * golden. loss: N (a sum over tokens); loss_token and lse: V (the sum over the vocab); d_hidden and
 * d_weight: the GEMM's inner size, as the subject's algorithm chunks it. */
typedef int64_t (*lce_subject_inner_fn)(const lce_case *c, lce_output_id o);
/* The fused algorithm: d_hidden over one vocab chunk of a shard (min(vocab_chunk, the shard's real
 * rows)), d_weight over one token chunk. */
int64_t lce_inner_chunked(const lce_case *c, lce_output_id o);
/* One GEMM per gradient: d_hidden over a whole shard's real rows, d_weight over all N tokens. */
int64_t lce_inner_unchunked(const lce_case *c, lce_output_id o);

typedef struct lce_subject {
  const char *name;         /* "fused-host", "mutant/bf16-dhidden-accum", ... */
  const char *golden_class; /* goldens it is judged against ("fused-host" for its mutants) */
  const char *description;  /* one line; for mutants, the upstream bug it mirrors */
  unsigned caps;
  lce_subject_run_fn run;     /* built-in subjects; NULL for subjects made at run time (run_ctx) */
  lce_subject_inner_fn inner; /* NULL: lce_inner_unchunked (the largest K, the loosest K term) */
  /* Subjects made at run time (a plugin loaded with dlopen, a command run over exported cases) carry
   * their own state: run_ctx is called with ctx instead of run. prepare, when set, is called once
   * before the engine's loop with every case the subject will be asked to run (a command can then
   * run once over all of them). */
  void *ctx;
  lce_code (*run_ctx)(void *ctx, const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);
  lce_code (*prepare)(void *ctx, const lce_case *cases, size_t ncases, lce_status *st);
  /* The options of `lcecheck repro` that make this subject again, shell-quoted; NULL: --subject NAME
   * (the exchange door's subject: --dir D --subject-name N --golden-class C). */
  const char *repro_args;
} lce_subject;

/* Runs subject s on case c (run, or run_ctx with its ctx). */
lce_code lce_subject_run(const lce_subject *s, const lce_case *c, const lce_tensors *in, lce_outputs *out,
                         lce_status *st);

/* Registry: production subjects first, then mutants (present only in builds that link them). */
size_t lce_subject_count(void);
const lce_subject *lce_subject_at(size_t i);
const lce_subject *lce_subject_find(const char *name); /* NULL when unknown */
/* A --subject spec: a registry name, plugin:PATH[#NAME] (a shared library implementing
 * include/lcecheck/lcecheck_subject.h, lce_plugin.h) or exec:CMD (a runner of the exchange format,
 * lce_exec_subject.h). Subjects made at run time are owned by the
 * resolver and released at exit. NULL with st naming the problem (an unknown name lists the known). */
const lce_subject *lce_subject_resolve(const char *spec, lce_status *st);
/* The exchange door's subject (lce_exec_subject.h) over a directory a runner has answered, owned like
 * the subjects above; NULL with st naming the problem (a malformed manifest.json or case.json). */
const lce_subject *lce_subject_resolve_exchange(const char *dir, const char *name, const char *golden_class,
                                                lce_status *st);
/* The one-line command that reruns case case_id for subject s: build/lcecheck repro, s's options
 * (repro_args, else --subject NAME), the verb's own options that change the verdict (options: e.g.
 * "--oracle fp64-gpu", already quoted; NULL for none), the id; shell-quoted, so that it can be pasted
 * as printed (an exec: command has spaces). A line that does not fit size says so instead of being cut. */
void lce_subject_repro_line(const lce_subject *s, const char *options, const char *case_id, char *buf, size_t size);
/* s as one POSIX shell word: unchanged when every character is safe unquoted, else in single quotes
 * (a quote inside written '\''). Returns the length of the whole word, as snprintf does: buf holds it
 * when that is below size. */
size_t lce_shell_quote(const char *s, char *buf, size_t size);
/* K of subject s for output o of case c (s->inner, or lce_inner_unchunked). */
int64_t lce_subject_inner(const lce_subject *s, const lce_case *c, lce_output_id o);
/* 1 when the subject can run case c; otherwise 0 and why (e.g. "no fp32 support"). */
int lce_subject_supports(const lce_subject *s, const lce_case *c, char *why, size_t size);

#endif
