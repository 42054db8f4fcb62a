/* lce_engine.c — the one loop of the data path (lce_engine.h). */
#include "lce_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_device.h"
#include "lce_prefetch.h"
#include "lce_time.h"

const char *lce_case_result_status(const lce_case_result *r) {
  if (r->error) return "error";
  if (r->skipped) return "skip";
  return r->verdict.pass && !r->nondeterministic ? "pass" : "fail";
}

static void result_skip(lce_case_result *r, const lce_status *why) {
  r->skipped = 1;
  r->status = *why;
}

static void result_error(lce_case_result *r, const lce_status *why) {
  r->error = 1;
  r->status = *why;
}

typedef struct engine_state {
  const lce_engine_config *cfg;
  const lce_reference_tier *tier;
  int device_missing, tier_missing;
  char nodev[256], notier[256];
  lce_outputs *out;  /* [nsubjects] */
  int *ran;          /* [nsubjects]: can run (before the runs), then ran */
  lce_case_result *res;
} engine_state;

/* ---- one subject on one case ----------------------------------------------------------------- */

/* Whether subject s can run case c here, decided before any tensor exists: its capabilities, the GPU
 * it needs, the reference that would judge it. Otherwise r says why it is skipped. */
static int can_run(const engine_state *es, const lce_subject *s, const lce_case *c, lce_case_result *r) {
  lce_status st;
  lce_status_clear(&st);
  char why[160];
  if (!lce_subject_supports(s, c, why, sizeof why)) {
    snprintf(st.msg, sizeof st.msg, "%s", why);
    result_skip(r, &st);
    return 0;
  }
  if ((s->caps & LCE_CAP_NEEDS_GPU) && es->device_missing) {
    lce_fail(&st, LCE_ENODEV, __FILE__, __LINE__, "%s: %s", s->name, es->nodev);
    result_skip(r, &st);
    return 0;
  }
  if (es->tier_missing) { /* no reference could judge it */
    lce_fail(&st, LCE_ENODEV, __FILE__, __LINE__, "%s", es->notier);
    result_skip(r, &st);
    return 0;
  }
  return 1;
}

/* Runs subject s on (c, in) into out (allocated here): 1 when it produced outputs to judge. */
static int run_subject(const lce_engine_config *cfg, const lce_subject *s, const lce_case *c, const lce_tensors *in,
                       lce_outputs *out, lce_case_result *r) {
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_outputs_alloc(c, in, out, &st);
  if (rc == LCE_OK) {
    const double t0 = lce_now_seconds();
    rc = lce_subject_run(s, c, in, out, &st);
    r->subject_seconds = lce_now_seconds() - t0;
  }
  if (rc == LCE_OK && cfg->repeat) {
    lce_outputs again;
    memset(&again, 0, sizeof again);
    rc = lce_outputs_alloc(c, in, &again, &st);
    if (rc == LCE_OK) rc = lce_subject_run(s, c, in, &again, &st);
    if (rc == LCE_OK)
      r->nondeterministic = !lce_outputs_identical(c, out, &again, r->nondeterminism, sizeof r->nondeterminism);
    lce_outputs_free(&again);
  }
  if (rc == LCE_OK) return 1;
  if (rc == LCE_ENODEV || rc == LCE_ESKIP) result_skip(r, &st); /* no GPU here; a case the subject declines */
  else result_error(r, &st);
  lce_outputs_free(out);
  return 0;
}

/* ---- one case --------------------------------------------------------------------------------- */

/* Fills every subject's result header and decides who can run case i; 1 when anyone can. */
static int plan_case(engine_state *es, size_t i, char *id, size_t size) {
  const lce_engine_config *cfg = es->cfg;
  const lce_case *c = &cfg->cases[i];
  lce_case_format(c, id, size);
  memset(es->res, 0, cfg->nsubjects * sizeof *es->res);
  memset(es->out, 0, cfg->nsubjects * sizeof *es->out);
  memset(es->ran, 0, cfg->nsubjects * sizeof *es->ran);
  lce_status st;
  lce_status_clear(&st);
  const int valid = lce_case_validate(c, &st) == LCE_OK;
  int any = 0;
  for (size_t k = 0; k < cfg->nsubjects; k++) {
    lce_case_result *r = &es->res[k];
    r->c = *c;
    snprintf(r->id, sizeof r->id, "%s", id);
    if (!valid) result_error(r, &st);
    else any |= es->ran[k] = can_run(es, cfg->subjects[k], c, r);
  }
  return any;
}

static void run_case(engine_state *es, size_t i, const char *id, const lce_tensors *in, const lce_status *gen_st,
                     double gen_seconds, lce_engine_sink sink, void *ctx) {
  const lce_engine_config *cfg = es->cfg;
  const lce_case *c = &cfg->cases[i];
  lce_status st;
  lce_status_clear(&st);
  int any = 0;
  for (size_t k = 0; k < cfg->nsubjects; k++) {
    if (!es->ran[k]) continue;
    if (in == NULL) {
      result_error(&es->res[k], gen_st);
      es->ran[k] = 0;
      continue;
    }
    any |= es->ran[k] = run_subject(cfg, cfg->subjects[k], c, in, &es->out[k], &es->res[k]);
  }
  lce_reference ref;
  memset(&ref, 0, sizeof ref);
  int have_ref = 0;
  if (any) {
    lce_code rc = lce_reference_prepare(es->tier, c, in, cfg->device_compare ? LCE_REF_DEVICE : LCE_REF_HOST, &ref, &st);
    have_ref = rc == LCE_OK;
    for (size_t k = 0; k < cfg->nsubjects; k++) {
      lce_case_result *r = &es->res[k];
      if (!es->ran[k]) continue;
      if (!have_ref) {
        rc == LCE_ENODEV ? result_skip(r, &st) : result_error(r, &st);
        continue;
      }
      const lce_subject *s = cfg->subjects[k];
      const lce_golden *g = cfg->goldens ? cfg->goldens[k] : NULL;
      int64_t inner[LCE_OUT_COUNT];
      for (int o = 0; o < LCE_OUT_COUNT; o++) inner[o] = lce_subject_inner(s, c, (lce_output_id)o);
      r->oracle_seconds = ref.seconds;
      r->n_valid = ref.n_valid;
      r->oracle_decisive = ref.decisive, r->oracle_total = ref.total;
      r->oracle_worst_rel_err = ref.worst_rel_err;
      lce_status jst;
      lce_status_clear(&jst);
      if (lce_judge(c, in, &ref, &es->out[k], g, s->name, s->golden_class, inner, cfg->outputs, &r->verdict, &jst) != LCE_OK)
        result_error(r, &jst);
    }
  }
  const lce_engine_case ec = {i, cfg->ncases, c, id, in, have_ref ? &ref : NULL, gen_seconds, es->res,
                              cfg->keep_outputs ? es->out : NULL};
  sink(ctx, &ec);
  for (size_t k = 0; k < cfg->nsubjects; k++)
    if (es->ran[k]) lce_outputs_free(&es->out[k]);
  if (have_ref) lce_reference_release(&ref);
}

/* A subject with prepare() is told, once, every case it will run: the ones it supports, when the
 * device and the reference it needs exist. */
static lce_code prepare_subject(engine_state *es, size_t k, lce_status *st) {
  const lce_engine_config *cfg = es->cfg;
  const lce_subject *s = cfg->subjects[k];
  if (s->prepare == NULL) return LCE_OK;
  lce_case *mine = calloc(cfg->ncases ? cfg->ncases : 1, sizeof *mine);
  LCE_ALLOC_CHECK(st, mine);
  size_t n = 0;
  lce_status ignored;
  for (size_t i = 0; i < cfg->ncases; i++) {
    lce_case_result r;
    memset(&r, 0, sizeof r);
    if (lce_case_validate(&cfg->cases[i], &ignored) == LCE_OK && can_run(es, s, &cfg->cases[i], &r))
      mine[n++] = cfg->cases[i];
  }
  lce_code rc = n ? s->prepare(s->ctx, mine, n, st) : LCE_OK;
  free(mine);
  return rc;
}

/* ---- the loop --------------------------------------------------------------------------------- */

lce_code lce_engine_run(const lce_engine_config *cfg, lce_engine_sink sink, void *ctx, lce_status *st) {
  LCE_CHECK(st, cfg != NULL && sink != NULL && (cfg->ncases == 0 || cfg->cases != NULL) &&
                    (cfg->nsubjects == 0 || cfg->subjects != NULL),
            LCE_EINVAL, "lce_engine_run: NULL argument");
  for (size_t k = 0; k < cfg->nsubjects; k++)
    LCE_CHECK(st, cfg->subjects[k] != NULL && (cfg->subjects[k]->run != NULL || cfg->subjects[k]->run_ctx != NULL),
              LCE_EINVAL, "lce_engine_run: subject %zu has no run function", k);
  engine_state es = {cfg, cfg->tier ? cfg->tier : lce_reference_tier_default(), 0, 0, "", "", NULL, NULL, NULL};
  es.device_missing = !lce_device_query(NULL, es.nodev, sizeof es.nodev);
  es.tier_missing = !es.tier->available(es.notier, sizeof es.notier);
  const size_t ns = cfg->nsubjects ? cfg->nsubjects : 1;
  es.out = calloc(ns, sizeof *es.out);
  es.ran = calloc(ns, sizeof *es.ran);
  es.res = calloc(ns, sizeof *es.res);
  lce_prefetch *pf = NULL;
  lce_code rc = es.out && es.ran && es.res ? LCE_OK : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "engine: out of memory");
  for (size_t k = 0; rc == LCE_OK && k < cfg->nsubjects; k++) rc = prepare_subject(&es, k, st);
  if (rc == LCE_OK && cfg->prefetch > 0 && cfg->generate)
    rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "lce_engine_run: prefetch generates with lce_case_generate only");
  if (rc == LCE_OK && cfg->prefetch > 0) rc = lce_prefetch_start(&pf, cfg->cases, cfg->ncases, cfg->prefetch, st);
  for (size_t i = 0; rc == LCE_OK && i < cfg->ncases; i++) {
    char id[192];
    const int any = plan_case(&es, i, id, sizeof id);
    lce_status gst;
    lce_status_clear(&gst);
    const lce_tensors *in = NULL;
    lce_tensors local;
    double seconds = 0;
    lce_code grc = LCE_EINVAL;
    if (pf) { /* generated ahead whether or not anyone runs it: the threads keep the order */
      grc = lce_prefetch_take(pf, i, &in, &seconds, &gst);
    } else if (any) { /* no tensors for a case nobody runs (a GPU subject without a GPU) */
      const double t0 = lce_now_seconds();
      grc = cfg->generate ? cfg->generate(cfg->generate_ctx, &cfg->cases[i], &local, &gst)
                          : lce_case_generate(&cfg->cases[i], &local, &gst);
      seconds = lce_now_seconds() - t0;
      if (grc == LCE_OK) in = &local;
    }
    if (grc != LCE_OK) in = NULL;
    run_case(&es, i, id, in, &gst, seconds, sink, ctx);
    if (pf) lce_prefetch_release(pf, i);
    else if (grc == LCE_OK) lce_tensors_free(&local);
  }
  lce_prefetch_stop(pf);
  free(es.out);
  free(es.ran);
  free(es.res);
  return rc;
}
