/* lce_production.c — lce_production.h's plan (defaults, shape sets, cases, outputs judged), run (a sink
 * of the engine) and outcome. A mutant failing is the suite working, so mutants count the other way
 * round: they must fail wherever V >= LCE_PROD_MUTANT_MIN_V and may survive below it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_production.h"

/* The production shapes: Llama-2 32k, Llama-3 128k (N = 8192), Qwen2 152k, Gemma 256k. */
static const lce_prod_shape SHAPES_ALL[] = {
    {4096, 4096, 32000}, {8192, 4096, 128256}, {4096, 4096, 152064}, {4096, 4096, 262144}};
/* The smoke set: the same code paths in seconds (1.7e7 and 6.7e7 weight elements), several vocab chunks
 * per shard at tp 1 and at tp 8, padding at tp 8 (16000 is not a multiple of 1024). */
static const lce_prod_shape SHAPES_SMALL[] = {{1024, 1024, 16000}, {1024, 1024, 65536}};

static const char *const DEFAULT_SUBJECTS[] = {"fused-cuda", "mutant-cuda/bf16-dhidden-accum", "unfused-cuda"};

void lce_prod_config_default(lce_prod_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  lce_status ignored;
  lce_prod_parse_shapes("all", cfg, &ignored);
  for (size_t i = 0; i < sizeof DEFAULT_SUBJECTS / sizeof DEFAULT_SUBJECTS[0]; i++)
    cfg->subjects[cfg->nsubjects++] = DEFAULT_SUBJECTS[i];
  cfg->tps[0] = 1, cfg->tps[1] = 8, cfg->ntps = 2;
  cfg->tied[0] = 1, cfg->tied[1] = 0, cfg->ntied = 2;
  cfg->vocab_chunk = LCE_PROD_DEFAULT_VOCAB_CHUNK;
  cfg->seed = LCE_PROD_DEFAULT_SEED;
  cfg->jobs = LCE_PROD_DEFAULT_JOBS;
}

lce_code lce_prod_parse_shape_list(const char *option, const char *s, lce_prod_shape *shapes, int max, int *count,
                                   lce_status *st) {
  int n = 0;
  for (const char *p = s; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char item[64], tail;
    lce_prod_shape sh;
    LCE_CHECK(st, len > 0 && len < sizeof item, LCE_EINVAL, "%s: empty or overlong item in '%.80s'", option, s);
    memcpy(item, p, len);
    item[len] = '\0';
    LCE_CHECK(st, sscanf(item, "%" SCNd64 "x%" SCNd64 "x%" SCNd64 "%c", &sh.n, &sh.h, &sh.v, &tail) == 3,
              LCE_EINVAL, "%s: '%s' is not NxHxV", option, item);
    LCE_CHECK(st, sh.n >= 1 && sh.h >= 1 && sh.v >= 1 && sh.n <= LCE_MAX_DIM && sh.h <= LCE_MAX_DIM &&
                      sh.v <= LCE_MAX_DIM, LCE_EINVAL, "%s: '%s' has a size outside [1, %lld]", option, item,
              (long long)LCE_MAX_DIM);
    LCE_CHECK(st, n < max, LCE_EINVAL, "%s: more than %d shapes", option, max);
    shapes[n++] = sh;
    p += len;
    if (*p == ',') {
      p++;
      LCE_CHECK(st, *p != '\0', LCE_EINVAL, "%s: trailing comma in '%.80s'", option, s);
    }
  }
  *count = n;
  return LCE_OK;
}

lce_code lce_prod_parse_shapes(const char *s, lce_prod_config *cfg, lce_status *st) {
  LCE_CHECK(st, s != NULL && *s, LCE_EINVAL, "--shapes needs small, all or NxHxV[,NxHxV...]");
  const lce_prod_shape *set = NULL;
  size_t count = 0;
  if (strcmp(s, "all") == 0) set = SHAPES_ALL, count = sizeof SHAPES_ALL / sizeof SHAPES_ALL[0];
  if (strcmp(s, "small") == 0) set = SHAPES_SMALL, count = sizeof SHAPES_SMALL / sizeof SHAPES_SMALL[0];
  if (set) {
    memcpy(cfg->shapes, set, count * sizeof *set);
    cfg->nshapes = (int)count;
    snprintf(cfg->shape_set, sizeof cfg->shape_set, "%s", s);
    return LCE_OK;
  }
  LCE_TRY(lce_prod_parse_shape_list("--shapes", s, cfg->shapes, LCE_PROD_MAX_SHAPES, &cfg->nshapes, st));
  snprintf(cfg->shape_set, sizeof cfg->shape_set, "custom");
  return LCE_OK;
}

size_t lce_prod_case_count(const lce_prod_config *cfg) {
  return (size_t)cfg->nshapes * (size_t)cfg->ntied * (size_t)cfg->ntps;
}

lce_code lce_prod_case_at(const lce_prod_config *cfg, size_t i, lce_case *c, lce_status *st) {
  LCE_CHECK(st, i < lce_prod_case_count(cfg), LCE_EINVAL, "production case %zu of %zu", i, lce_prod_case_count(cfg));
  const size_t per_shape = (size_t)cfg->ntied * (size_t)cfg->ntps;
  const lce_prod_shape *sh = &cfg->shapes[i / per_shape];
  const int tied = cfg->tied[(i % per_shape) / (size_t)cfg->ntps], tp = cfg->tps[i % (size_t)cfg->ntps];
  *c = lce_case_default(); /* fresh gradients, one token chunk */
  c->n = sh->n, c->h = sh->h, c->v = sh->v, c->tp = tp, c->tied = tied;
  const int64_t pad = (int64_t)LCE_PROD_PAD_MULTIPLE * tp;
  c->vp = (sh->v + pad - 1) / pad * pad;
  c->vocab_chunk = cfg->vocab_chunk, c->seed = cfg->seed;
  c->dtype = LCE_BF16, c->reduction = LCE_RED_MEAN, c->dist = LCE_DIST_NORMAL;
  c->ignore_pct = LCE_PROD_DEFAULT_IGNORE_PCT;
  return lce_case_validate(c, st);
}


int lce_prod_outputs(const lce_case *c, lce_output_id out[4]) {
  int k = 0;
  out[k++] = LCE_OUT_LOSS, out[k++] = LCE_OUT_D_HIDDEN, out[k++] = LCE_OUT_D_WEIGHT;
  if (!c->tied) out[k++] = LCE_OUT_D_EMBEDDING;
  return k;
}

/* ---- the outcome ---------------------------------------------------------------------------------- */

/* A class failure in any judged output (with --measure-only the only way to fail). */
static int class_failed(const lce_case_result *r) {
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    if (r->verdict.out[o].judged && !r->verdict.out[o].class_ok) return 1;
  return 0;
}

int lce_prod_mutant_killed(const lce_prod_report *rep, size_t i, int j) {
  const lce_case_result *r = &rep->cases[i].subj[j];
  if (r->error || r->skipped) return -1;
  if (class_failed(r)) return 1;
  if (rep->cfg->measure_only) return -1;
  /* A pass with bounds left out for want of the reference's magnitudes says nothing about the mutant. */
  if (r->verdict.pass && r->verdict.unbounded > 0) return -1;
  return !r->verdict.pass;
}

int lce_prod_exit_status(const lce_prod_report *rep, char *why, size_t size) {
  const lce_prod_config *cfg = rep->cfg;
  for (size_t i = 0; i < rep->ncases; i++) {
    const lce_prod_case_result *cr = &rep->cases[i];
    for (int j = 0; j < cfg->nsubjects; j++) {
      const lce_case_result *r = &cr->subj[j];
      if (r->error) {
        snprintf(why, size, "%s on %s: error: %s", cfg->subjects[j], cr->id, r->status.msg);
        return 1;
      }
      if (r->skipped) continue;
      if (rep->mutant[j]) {
        const int killed = cr->c.v >= LCE_PROD_MUTANT_MIN_V ? lce_prod_mutant_killed(rep, i, j) : 1;
        if (killed < 0 && !cfg->measure_only && r->verdict.unbounded > 0) {
          snprintf(why, size, "mutant %s on %s: no verdict: the reference kept no error magnitudes on this device, "
                   "so %d metrics were left unbounded (a device with more memory gives them)", cfg->subjects[j], cr->id,
                   r->verdict.unbounded);
          return 1;
        }
        if (killed == 0) {
          snprintf(why, size, "mutant %s survived %s (V >= %d): the bounds are too loose", cfg->subjects[j], cr->id,
                   LCE_PROD_MUTANT_MIN_V);
          return 1;
        }
        continue;
      }
      if (class_failed(r) || (!cfg->measure_only && !r->verdict.pass)) {
        snprintf(why, size, "%s on %s: %s", cfg->subjects[j], cr->id, r->verdict.summary);
        return 1;
      }
    }
  }
  if (why && size) why[0] = '\0';
  return 0;
}

/* ---- the run -------------------------------------------------------------------------------------- */

static void progress(const lce_prod_report *rep, size_t i) {
  const lce_prod_case_result *cr = &rep->cases[i];
  fprintf(stderr, "[%zu/%zu] %s  gen %.1f s  fp64 %.1f s%s", i + 1, rep->ncases, cr->id, cr->gen_seconds,
          cr->ref_seconds, cr->ref_has_mags ? "" : " (no mags)");
  for (int j = 0; j < rep->cfg->nsubjects; j++)
    fprintf(stderr, "  %s %s %.1f s", rep->cfg->subjects[j], lce_case_result_status(&cr->subj[j]),
            cr->subj[j].subject_seconds);
  fputc('\n', stderr);
}

static void prod_case_done(void *ctx, const lce_engine_case *ec) {
  lce_prod_report *rep = (lce_prod_report *)ctx;
  lce_prod_case_result *cr = &rep->cases[ec->index];
  cr->c = *ec->c;
  snprintf(cr->id, sizeof cr->id, "%s", ec->id);
  cr->gen_seconds = ec->gen_seconds;
  cr->ref_seconds = ec->ref ? ec->ref->seconds : 0.0;
  cr->ref_has_mags = ec->ref ? ec->ref->has_mags : 0;
  for (int j = 0; j < rep->cfg->nsubjects; j++) cr->subj[j] = ec->res[j];
  if (!rep->cfg->quiet) progress(rep, ec->index);
}

lce_code lce_prod_run(lce_prod_report *rep, const lce_subject *const *subjects, const lce_golden *const *goldens,
                      lce_status *st) {
  const lce_prod_config *cfg = rep->cfg;
  lce_case *cases = calloc(rep->ncases ? rep->ncases : 1, sizeof *cases);
  LCE_ALLOC_CHECK(st, cases);
  lce_code rc = LCE_OK;
  for (size_t i = 0; i < rep->ncases && rc == LCE_OK; i++) rc = lce_prod_case_at(cfg, i, &cases[i], st);
  unsigned outputs = 0;
  const lce_output_id judged[] = {LCE_OUT_LOSS, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT, LCE_OUT_D_EMBEDDING};
  for (size_t k = 0; k < sizeof judged / sizeof judged[0]; k++) outputs |= 1u << judged[k];
  const lce_engine_config ecfg = {.cases = cases, .ncases = rep->ncases, .subjects = subjects, .goldens = goldens,
                                  .nsubjects = (size_t)cfg->nsubjects, .tier = &lce_tier_fp64_gpu,
                                  .device_compare = 1, .prefetch = cfg->jobs, .outputs = outputs};
  if (rc == LCE_OK) rc = lce_engine_run(&ecfg, prod_case_done, rep, st);
  free(cases);
  return rc;
}
