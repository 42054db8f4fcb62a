/* lce_production.h — production-shape conformance: GPU subjects at the shapes real
 * LM heads run, (N, H, V) in {(4096, 4096, 32000), (8192, 4096, 128256), (4096, 4096, 152064),
 * (4096, 4096, 262144)}, bf16, tied and untied, tp 1 and 8, judged against the fp64 GPU reference
 * (reference/gpu/lce_ref64.h) with the metrics reduced on the device: at these shapes nothing per
 * element may come to the host (d_weight alone is 1e9 elements).
 *
 * The plan (defaults, shape sets, the cases) and the outcome need no GPU, so CI tests them. The run is
 * the engine's loop (lce_engine.h) with the fp64 tier kept on the device (lce_ref64_compare), judged
 * by the one judge (lce_judge.h: the same metrics from the same lce_comparison, the same bounds)
 * against golden/<arch>/<class>.golden (check's goldens) with each subject's own K; ulpfrac needs
 * per-element ulps and is undefined there. Production judges the loss and the gradients (loss,
 * d_hidden, d_weight, and d_embedding's exactness when untied). The CLI (cli/cli_production.c)
 * reads the options' values onto lce_prod_config_default's plan and renders the table and JSON. */
#ifndef LCE_PRODUCTION_H
#define LCE_PRODUCTION_H

#include "lce_device.h"
#include "lce_engine.h"

#define LCE_PROD_MAX_SHAPES 16
#define LCE_PROD_MAX_SUBJECTS 8
#define LCE_PROD_MAX_TPS 4
/* The bf16-accumulation mutant must fail at V >= 128k (and may survive below). */
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

/* A --shapes value: "small", "all", or a comma list of NxHxV (each >= 1, at most LCE_MAX_DIM). */
lce_code lce_prod_parse_shapes(const char *s, lce_prod_config *cfg, lce_status *st);
/* A comma list of NxHxV, the value of option (named in the messages), into at most max shapes. */
lce_code lce_prod_parse_shape_list(const char *option, const char *s, lce_prod_shape *shapes, int max, int *count,
                                   lce_status *st);

/* Cases of the plan: shapes (outer) x embeddings x tp (inner), each bf16, reduction mean,
 * LCE_PROD_DEFAULT_IGNORE_PCT% ignored tokens, normal logits, fresh gradients, vp = v rounded up to
 * a multiple of 128 * tp, the configured vocab chunk and seed. */
size_t lce_prod_case_count(const lce_prod_config *cfg);
lce_code lce_prod_case_at(const lce_prod_config *cfg, size_t i, lce_case *c, lce_status *st);

/* The outputs production judges for case c, in table order: loss, d_hidden, d_weight, and
 * d_embedding when untied. Returns the count (<= 4). */
int lce_prod_outputs(const lce_case *c, lce_output_id out[4]);

/* ---- results and the outcome (rendered by conformance/cli/cli_production.c) */

/* A case's results are the engine's (lce_engine.h): one lce_case_result per subject, its verdict
 * covering the outputs lce_prod_outputs names. */
typedef struct lce_prod_case_result {
  lce_case c;
  char id[192];
  double gen_seconds, ref_seconds;
  int ref_has_mags;
  lce_case_result subj[LCE_PROD_MAX_SUBJECTS];
} lce_prod_case_result;


typedef struct lce_prod_report {
  const lce_prod_config *cfg;
  lce_device_info dev;
  const char *golden_class[LCE_PROD_MAX_SUBJECTS];
  char golden_path[LCE_PROD_MAX_SUBJECTS][512];
  int mutant[LCE_PROD_MAX_SUBJECTS];       /* the subject is a catalogued mutant */
  lce_prod_case_result *cases;
  size_t ncases;
  double seconds;
} lce_prod_report;

/* The outcome of a whole run: exit status 0 when every production subject passed (with
 * --measure-only: every class check passed) and every mutant failed wherever V >= 128k; 1 otherwise.
 * why receives the first reason for 1. */
int lce_prod_exit_status(const lce_prod_report *rep, char *why, size_t size);
/* For mutant subject j on case i: 1 killed (some output failed), 0 survived, -1 no verdict (measure
 * only, an error, a skip, or a pass with bounds left out for want of the reference's magnitudes). */
int lce_prod_mutant_killed(const lce_prod_report *rep, size_t i, int j);

/* Runs every case of rep->cfg for every subject through the engine (lce_engine.h) against the fp64
 * GPU reference kept on the device, judging subject j against goldens[j] (NULL: measure only) and
 * filling rep->cases (rep->ncases of them, allocated by the caller). Progress lines go to stderr
 * unless cfg->quiet. Returns LCE_OK when every case was attempted: per-case failures are in the
 * results. */
lce_code lce_prod_run(lce_prod_report *rep, const lce_subject *const *subjects, const lce_golden *const *goldens,
                      lce_status *st);

#endif
