/* lce_engine.h — the one loop of the data path: cases × subjects × one reference, with a sink per
 * verb. For every case, in order:
 *   tensors (generated ahead on host threads with cfg->prefetch)
 *   → each subject that can run it, on fresh poisoned outputs (twice with cfg->repeat, same bits
 *     required)
 *   → the reference, once, from the tier asked for (only when some subject ran)
 *   → the judge, once per subject, against that subject's golden with that subject's K per output
 *   → the sink, which sees everything of the case (results, and outputs with cfg->keep_outputs)
 * check, measure, repro, compare, production, the fuzz session and the mutant kill table are sinks.
 * A subject that needs a GPU the machine lacks, or a tier that cannot run here, skips visibly
 * (status LCE_ENODEV) without spending the other stages' time. */
#ifndef LCE_ENGINE_H
#define LCE_ENGINE_H

#include "lce_judge.h"
#include "lce_reference.h"
#include "lce_subject.h"

/* One subject on one case. */
typedef struct lce_case_result {
  lce_case c;
  char id[192];
  char repro[1280];       /* the command that reruns this case for this subject (lce_subject_repro_line) */
  int skipped;            /* the subject cannot run this case, or a device is missing; status says why */
  int error;              /* the subject, the reference or the judge returned an error; status says which */
  lce_status status;
  lce_verdict verdict;    /* valid when !skipped && !error */
  double subject_seconds, oracle_seconds, judge_seconds; /* oracle_seconds: the case's reference, shared by its subjects */
  int64_t n_valid;                   /* tokens not labelled ignore_index */
  int64_t oracle_decisive, oracle_total;
  double oracle_worst_rel_err;       /* the reference's certified accuracy on this case */
  int nondeterministic;              /* cfg->repeat: the second run gave other bits */
  char nondeterminism[160];          /* which output and element differed */
} lce_case_result;

typedef struct lce_engine_config {
  const lce_case *cases;
  size_t ncases;
  const lce_subject *const *subjects;
  const lce_golden *const *goldens; /* [nsubjects]; NULL (or a NULL entry): metrics only, no bounds */
  size_t nsubjects;
  const lce_reference_tier *tier;   /* NULL: the default tier (lce_reference_tier_default: fast) */
  int device_compare; /* keep the reference on the device and compare there (production shapes) */
  int keep_outputs;   /* hand the subjects' outputs to the sink (compare) */
  int repeat;         /* run each subject a second time and require identical bits (fuzz) */
  int prefetch;       /* host threads generating the next cases' tensors while this one runs (0: none) */
  int serial_cases;   /* 1: one case at a time even where small cases could run side by side on the
                       * threads (lce_engine.c; the same results either way) */
  unsigned outputs;   /* a bit per lce_output_id to judge (0: every output that applies) */
  /* The verb's options that change a verdict, as `lcecheck repro` takes them, shell-quoted (e.g.
   * "--oracle fp64-gpu --golden 'my golden'"): each result's repro line carries them. NULL: none. */
  const char *repro_options;
  /* The tensors of a case: NULL, lce_case_generate (the case id alone determines them); otherwise
   * this, called with generate_ctx (a fuzz harness drawing values from its input). Not with prefetch. */
  lce_code (*generate)(void *ctx, const lce_case *c, lce_tensors *out, lce_status *st);
  void *generate_ctx;
} lce_engine_config;

/* Everything the loop knows about one case when it hands it to the sink. */
typedef struct lce_engine_case {
  size_t index, ncases;
  const lce_case *c;
  const char *id;
  const lce_tensors *in;    /* NULL when generation failed (every result then carries the error) */
  const lce_reference *ref; /* NULL when no subject ran */
  double gen_seconds;
  lce_case_result *res;     /* [nsubjects] */
  const lce_outputs *out;   /* [nsubjects] with keep_outputs, else NULL; valid where res[k] was judged */
} lce_engine_case;

typedef void (*lce_engine_sink)(void *ctx, const lce_engine_case *ec);

/* Runs the loop. Returns LCE_OK when every case was attempted (per-case errors are in the results);
 * an error only for a bad configuration or a failure of the loop itself (threads, memory). */
lce_code lce_engine_run(const lce_engine_config *cfg, lce_engine_sink sink, void *ctx, lce_status *st);

/* "pass" | "fail" | "skip" | "error" of one result. */
const char *lce_case_result_status(const lce_case_result *r);

/* Default golden file for a golden class: $LCE_GOLDEN_DIR/<class>.golden, else the source tree's
 * golden/<class>.golden (path compiled in). lce_golden_path.c. */
void lce_default_golden_path(const char *golden_class, char *buf, size_t size);
/* The bounds of `lcecheck converge`: <golden dir>/converge.bounds (lce_converge_golden.h's format, not a
 * golden file's: it bounds training runs, not outputs). */
void lce_converge_bounds_path(char *buf, size_t size);
/* The golden file that judges subject s by default: lce_default_golden_path of its class for CPU
 * subjects; <golden dir>/<arch>/<class>.golden for GPU subjects (LCE_CAP_NEEDS_GPU), arch from
 * lce_device_arch. */
void lce_subject_golden_path(const lce_subject *s, char *buf, size_t size);

#endif
