/* lce_production.h — production-shape conformance (issue 5, item 4): GPU subjects at the shapes real
 * LM heads run, (N, H, V) in {(4096, 4096, 32000), (8192, 4096, 128256), (4096, 4096, 152064),
 * (4096, 4096, 262144)}, bf16, tied and untied, tp 1 and 8, judged against the fp64 GPU reference
 * (reference/gpu/lce_ref64.h) with the metrics reduced on the device: at these shapes nothing per
 * element may come to the host (d_weight alone is 1e9 elements).
 *
 * This header is the part that needs no GPU, so CI tests it: the plan (options, shape sets, the
 * cases), the GEMM inner size K each subject class reduces over per output, and the verdict of one
 * (subject, output) from its device sums and the per-architecture golden (golden/sm_XX/<class>.golden).
 * The GPU driver (lce_production_run.h) and the CLI (cli/cli_production.c: table, JSON) build on it.
 *
 * Metrics (lce_metrics.h definitions, over the elements where subject and reference are finite):
 *   relerr = sqrt(sum (x-r)^2 / sum r^2)   (sqrt(sum x^2) when r == 0 everywhere)
 *   bias   = sum (x-r) r / sum r^2         undefined below LCE_STAT_MIN_ELEMS effective elements
 *                                          (neff = (sum r^2)^2 / sum r^4): the loss has one element
 *   maxscaled = max |x-r| / emag           only when the reference carries mags
 *   cond   = max(1, ||emag|| / ||r||)      for the cond/condk golden forms (1 without mags)
 *   ulpfrac is not computed (it needs per-element ulps of the rounded reference): never judged here.
 * relerr and bias (when defined) must have a golden entry, otherwise the verdict is "no bound";
 * maxscaled is judged when the golden has an entry for it. d_embedding (untied only) must equal its
 * prior exactly: a class check, no metric. */
#ifndef LCE_PRODUCTION_H
#define LCE_PRODUCTION_H

#include "lce_device.h"
#include "lce_golden.h"

#define LCE_PROD_MAX_SHAPES 16
#define LCE_PROD_MAX_SUBJECTS 8
#define LCE_PROD_MAX_TPS 4
/* Issue 5: the bf16-accumulation mutant must fail at V >= 128k (and may survive below). */
#define LCE_PROD_MUTANT_MIN_V 128000
/* The seed bug's founding measurement (DESIGN.md) used vocab chunks of 4096 at V = 128256. */
#define LCE_PROD_DEFAULT_VOCAB_CHUNK 4096
#define LCE_PROD_DEFAULT_SEED 1
#define LCE_PROD_DEFAULT_JOBS 3
#define LCE_PROD_DEFAULT_IGNORE_PCT 5
/* Megatron pads the vocab to a multiple of 128 * tp. */
#define LCE_PROD_PAD_MULTIPLE 128

typedef struct lce_prod_shape {
  int64_t n, h, v;
} lce_prod_shape;

typedef struct lce_prod_config {
  lce_prod_shape shapes[LCE_PROD_MAX_SHAPES];
  int nshapes;
  char shape_set[16];                        /* "all", "small" or "custom" */
  const char *subjects[LCE_PROD_MAX_SUBJECTS]; /* point into names_ or string literals */
  int nsubjects;
  int tps[LCE_PROD_MAX_TPS];
  int ntps;
  int tied[2]; /* embedding variants in run order: 1 tied, 0 untied */
  int ntied;
  int64_t vocab_chunk;
  uint64_t seed;
  int jobs;           /* host threads generating the next cases' tensors while the GPU runs one */
  int json;           /* --json: the report on stdout as JSON (progress stays on stderr) */
  int measure_only;   /* --measure-only: metrics without bounds; exit 0 unless a class check fails */
  int quiet;          /* --quiet: no progress lines */
  const char *golden_dir; /* --golden-dir: holds sm_XX/<class>.golden; NULL: the default golden dir */
  char names_[512];   /* storage of a --subjects list */
} lce_prod_config;

/* The defaults: shape set "all", subjects fused-cuda, mutant-cuda/bf16-dhidden-accum, unfused-cuda,
 * tp 1 and 8, tied then untied, vocab chunk 4096, seed 1, 3 generator jobs. */
void lce_prod_config_default(lce_prod_config *cfg);

/* Parses `lcecheck production` options from argv[first..]:
 *   --shapes small|all|NxHxV[,NxHxV...]  --subjects a[,b...]  --tp 1[,8...]  --embeddings tied,untied
 *   --vocab-chunk C  --seed S  --jobs J  --golden-dir DIR  --json  --measure-only  --quiet
 * LCE_EINVAL with a message naming the option on anything else; subject names are not looked up
 * here (the registry of the build decides). */
lce_code lce_prod_parse_args(int argc, char **argv, int first, lce_prod_config *cfg, lce_status *st);
/* A --shapes value: "small", "all", or a comma list of NxHxV (each >= 1, at most LCE_MAX_DIM). */
lce_code lce_prod_parse_shapes(const char *s, lce_prod_config *cfg, lce_status *st);

/* Cases of the plan: shapes (outer) x embeddings x tp (inner), each bf16, reduction mean,
 * LCE_PROD_DEFAULT_IGNORE_PCT% ignored tokens, normal logits, fresh gradients, vp = v rounded up to
 * a multiple of 128 * tp, the configured vocab chunk and seed. */
size_t lce_prod_case_count(const lce_prod_config *cfg);
lce_code lce_prod_case_at(const lce_prod_config *cfg, size_t i, lce_case *c, lce_status *st);

/* Inner size K of the GEMM reduction that produces output o in subject class golden_class for case
 * c: what the lineark/sqrtk/condk golden forms scale with. Chunked classes (fused-host, fused-cuda and
 * their sm90 twins) reduce d_hidden over one vocab chunk (min(vocab_chunk, rows of a shard)) and
 * d_weight over one token chunk; unfused-cuda over the shard's rows (V at tp 1) and N; other classes
 * and outputs: lce_output_inner. */
int64_t lce_prod_inner(const char *golden_class, const lce_case *c, lce_output_id o);

/* What the device comparison of one output gives (lce_ref64_sums, plus the reference's moments). */
typedef struct lce_prod_raw {
  double sum_d2, sum_r2, sum_dr; /* sum (x-r)^2, sum r^2, sum (x-r) r over compared elements */
  double sum_r4;                 /* sum r^4 (for neff) */
  double sum_emag2;              /* sum emag^2; negative when the reference has no mags */
  double max_scaled;             /* max |x-r| / emag; ignored without mags */
  int64_t compared;              /* elements in the sums */
  int64_t class_mismatch;        /* elements whose class (finite, NaN, +-Inf) differs */
  int64_t first_mismatch;        /* -1 when none */
  int guards_ok;                 /* 0: the subject wrote outside its buffers */
} lce_prod_raw;

typedef enum lce_prod_verdict {
  LCE_PROD_MEASURED = 0, /* --measure-only: metrics, no bounds (class checks passed) */
  LCE_PROD_PASS = 1,
  LCE_PROD_FAIL = 2,     /* a metric above its bound */
  LCE_PROD_CLASS_FAIL = 3, /* class check: non-finite positions, guards, an untouched buffer touched */
  LCE_PROD_NO_BOUND = 4  /* a metric that must be bounded has no golden entry */
} lce_prod_verdict;

const char *lce_prod_verdict_name(lce_prod_verdict v); /* "measured", "pass", "FAIL", "CLASS FAIL", "no bound" */

typedef struct lce_prod_output_result {
  lce_output_id output;
  int64_t inner;             /* K for the bound */
  int exact_only;            /* d_embedding: class check only, no metrics */
  int class_ok;
  char class_msg[160];
  double v[LCE_METRIC_COUNT];
  unsigned char defined[LCE_METRIC_COUNT];
  double cond, neff;
  int64_t compared;
  double bound[LCE_METRIC_COUNT];    /* NaN where no bound applies */
  double budget_pct[LCE_METRIC_COUNT];
  unsigned char bounded[LCE_METRIC_COUNT]; /* a golden entry was found and applied */
  lce_prod_verdict verdict;
} lce_prod_output_result;

/* The verdict of one output from its raw sums: class checks, metrics, then each metric against the
 * entry of g (NULL: measure only) for (golden_class, the case's precision, o). */
void lce_prod_judge_output(const lce_case *c, const char *golden_class, lce_output_id o, const lce_prod_raw *raw,
                           const lce_golden *g, lce_prod_output_result *r);

/* The outputs production judges for case c, in table order: loss, d_hidden, d_weight, and
 * d_embedding when untied. Returns the count (<= 4). */
int lce_prod_outputs(const lce_case *c, lce_output_id out[4]);

/* ---- results and the outcome (lce_production_outcome.c; rendered by conformance/cli/cli_production.c) */
#define LCE_PROD_MAX_OUTPUTS 4

typedef struct lce_prod_subject_result {
  const char *subject, *golden_class;
  int skipped, error;       /* skipped: capability or no bound file needed; error: run or compare failed */
  char msg[768];
  double seconds;           /* the subject's run() */
  int nout;
  lce_prod_output_result out[LCE_PROD_MAX_OUTPUTS];
} lce_prod_subject_result;

typedef struct lce_prod_case_result {
  lce_case c;
  char id[192];
  int error; /* generation or reference failed: no subject ran */
  char msg[768];
  double gen_seconds, ref_seconds;
  int ref_has_mags;
  lce_prod_subject_result subj[LCE_PROD_MAX_SUBJECTS];
} lce_prod_case_result;


typedef struct lce_prod_report {
  const lce_prod_config *cfg;
  lce_device_info dev;
  const char *golden_class[LCE_PROD_MAX_SUBJECTS];
  char golden_path[LCE_PROD_MAX_SUBJECTS][512];
  int golden_found[LCE_PROD_MAX_SUBJECTS]; /* 0: no golden file for the class ("no bound") */
  int mutant[LCE_PROD_MAX_SUBJECTS];       /* the subject is a catalogued mutant */
  lce_prod_case_result *cases;
  size_t ncases;
  double seconds;
} lce_prod_report;

/* The outcome of a whole run: exit status 0 when every production subject passed (with
 * --measure-only: every class check passed) and every mutant failed wherever V >= 128k; 1 otherwise.
 * why receives the first reason for 1. */
int lce_prod_exit_status(const lce_prod_report *rep, char *why, size_t size);
/* "pass", "fail", "skip", "error" for one subject on one case (measure-only: pass = class checks ok). */
const char *lce_prod_subject_status(const lce_prod_subject_result *s);
/* For mutant subject j on case i: 1 killed (some output failed), 0 survived, -1 no verdict (measure
 * only, a missing bound, an error or a skip). */
int lce_prod_mutant_killed(const lce_prod_report *rep, size_t i, int j);

#endif
