/* lce_engine.c — the one loop of the data path (lce_engine.h). */
#include "lce_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpfr.h>

#include "lce_device.h"
#include "lce_parallel.h"
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
  lce_status *unprepared; /* [nsubjects]: why subject k's prepare() failed (code LCE_OK: it did not) */
} engine_state;

/* One case in flight: the subjects' results and outputs, and who ran. The loop keeps one per thread
 * (cases side by side, below). */
typedef struct case_slot {
  lce_outputs *out;   /* [nsubjects] */
  int *ran;           /* [nsubjects]: can run (before the runs), then ran */
  lce_case_result *res;
  lce_reference ref;
  int have_ref;
} case_slot;

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
static int plan_case(const engine_state *es, case_slot *sl, size_t i, char *id, size_t size) {
  const lce_engine_config *cfg = es->cfg;
  const lce_case *c = &cfg->cases[i];
  lce_case_format(c, id, size);
  memset(sl->res, 0, cfg->nsubjects * sizeof *sl->res);
  memset(sl->out, 0, cfg->nsubjects * sizeof *sl->out);
  memset(sl->ran, 0, cfg->nsubjects * sizeof *sl->ran);
  lce_status st;
  lce_status_clear(&st);
  const int valid = lce_case_validate(c, &st) == LCE_OK;
  int any = 0;
  for (size_t k = 0; k < cfg->nsubjects; k++) {
    lce_case_result *r = &sl->res[k];
    r->c = *c;
    snprintf(r->id, sizeof r->id, "%s", id);
    lce_subject_repro_line(cfg->subjects[k], cfg->repro_options, id, r->repro, sizeof r->repro);
    if (!valid) result_error(r, &st);
    else if (can_run(es, cfg->subjects[k], c, r)) { /* a case it skips stays a skip */
      if (es->unprepared[k].code != LCE_OK) result_error(r, &es->unprepared[k]); /* its runner never ran */
      else any |= sl->ran[k] = 1;
    }
  }
  return any;
}

/* Case i up to its sink: every subject that can run it, the reference once, the judge per subject
 * (in = NULL: generation failed with gen_st, which every subject's result then carries). */
static void judge_case(const engine_state *es, case_slot *sl, size_t i, const lce_tensors *in,
                       const lce_status *gen_st) {
  const lce_engine_config *cfg = es->cfg;
  const lce_case *c = &cfg->cases[i];
  lce_status st;
  lce_status_clear(&st);
  int any = 0;
  for (size_t k = 0; k < cfg->nsubjects; k++) {
    if (!sl->ran[k]) continue;
    if (in == NULL) {
      result_error(&sl->res[k], gen_st);
      sl->ran[k] = 0;
      continue;
    }
    any |= sl->ran[k] = run_subject(cfg, cfg->subjects[k], c, in, &sl->out[k], &sl->res[k]);
  }
  memset(&sl->ref, 0, sizeof sl->ref);
  sl->have_ref = 0;
  if (!any) return;
  lce_code rc = lce_reference_prepare(es->tier, c, in, cfg->device_compare ? LCE_REF_DEVICE : LCE_REF_HOST, &sl->ref, &st);
  sl->have_ref = rc == LCE_OK;
  for (size_t k = 0; k < cfg->nsubjects; k++) {
    lce_case_result *r = &sl->res[k];
    if (!sl->ran[k]) continue;
    if (!sl->have_ref) {
      rc == LCE_ENODEV ? result_skip(r, &st) : result_error(r, &st);
      continue;
    }
    const lce_subject *s = cfg->subjects[k];
    const lce_golden *g = cfg->goldens ? cfg->goldens[k] : NULL;
    int64_t inner[LCE_OUT_COUNT];
    for (int o = 0; o < LCE_OUT_COUNT; o++) inner[o] = lce_subject_inner(s, c, (lce_output_id)o);
    r->oracle_seconds = sl->ref.seconds;
    r->n_valid = sl->ref.n_valid;
    r->oracle_decisive = sl->ref.decisive, r->oracle_total = sl->ref.total;
    r->oracle_worst_rel_err = sl->ref.worst_rel_err;
    lce_status jst;
    lce_status_clear(&jst);
    const double t0 = lce_now_seconds();
    if (lce_judge(c, in, &sl->ref, &sl->out[k], g, s->golden_class, inner, cfg->outputs, &r->verdict, &jst) != LCE_OK)
      result_error(r, &jst);
    r->judge_seconds = lce_now_seconds() - t0;
  }
}

/* Hands case i to the sink, then frees what judge_case left in the slot. */
static void sink_case(const engine_state *es, case_slot *sl, size_t i, const char *id, const lce_tensors *in,
                      double gen_seconds, lce_engine_sink sink, void *ctx) {
  const lce_engine_config *cfg = es->cfg;
  const lce_engine_case ec = {i, cfg->ncases, &cfg->cases[i], id, in, sl->have_ref ? &sl->ref : NULL, gen_seconds,
                              sl->res, cfg->keep_outputs ? sl->out : NULL};
  sink(ctx, &ec);
}

static void release_case(const engine_state *es, case_slot *sl) {
  for (size_t k = 0; k < es->cfg->nsubjects; k++)
    if (sl->ran[k]) lce_outputs_free(&sl->out[k]);
  if (sl->have_ref) lce_reference_release(&sl->ref);
  sl->have_ref = 0;
}

/* A subject with prepare() is told, once, every case it will run: the ones it supports, when the
 * device and the reference it needs exist. When prepare fails (an exec: runner that exits non-zero),
 * every case of that subject is an error carrying its status (plan_case), and the others run on. */
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

/* Cases side by side. A small case gives a thread too little work per parallel region (fused-host's
 * tiles, a tier's rows: microseconds each), so over a matrix of them the serial parts (the judge,
 * the loop) and the regions' start-up bound the speedup, and on a busy machine every region waits
 * for its slowest thread. Runs of consecutive small cases therefore go to the threads whole, one
 * case per thread at a time, each case's own regions on that one thread: the same bits (every stage
 * gives the same bits for any thread count), handed to the sink in case order. Only where every
 * stage is the host's own code (built-in subjects without a GPU, a host tier, generation by the
 * case id) and nothing is generated ahead. */
#define SIDE_BY_SIDE_MAX_MACS ((double)(1 << 27))  /* 3 N H V: ~0.1 s of tier 1, a few s of tier 0 */
#define SIDE_BY_SIDE_MAX_ELEMS ((double)(1 << 22)) /* N V + Vp H + N H: the tensors and results */

static int side_by_side_allowed(const engine_state *es) {
  const lce_engine_config *cfg = es->cfg;
  if (cfg->serial_cases || cfg->prefetch > 0 || cfg->generate != NULL || cfg->device_compare || es->tier->level > 1)
    return 0;
  for (size_t k = 0; k < cfg->nsubjects; k++) {
    const lce_subject *s = cfg->subjects[k];
    if (s->run == NULL || s->run_ctx != NULL || s->prepare != NULL || (s->caps & LCE_CAP_NEEDS_GPU)) return 0;
  }
  return lce_thread_limit() > 1;
}

static int case_small(const lce_case *c) {
  const double n = (double)c->n, h = (double)c->h, v = (double)c->v, vp = (double)c->vp;
  return 3.0 * n * h * v <= SIDE_BY_SIDE_MAX_MACS && n * v + vp * h + n * h <= SIDE_BY_SIDE_MAX_ELEMS;
}

/* Case i generated here (no prefetch), judged and sunk. */
static void one_case(const engine_state *es, case_slot *sl, size_t i, int ordered, lce_engine_sink sink, void *ctx) {
  const lce_engine_config *cfg = es->cfg;
  char id[192];
  const int any = plan_case(es, sl, i, id, sizeof id);
  lce_status gst;
  lce_status_clear(&gst);
  lce_tensors local;
  double seconds = 0;
  lce_code grc = LCE_EINVAL;
  if (any) { /* no tensors for a case nobody runs (a GPU subject without a GPU) */
    const double t0 = lce_now_seconds();
    grc = cfg->generate ? cfg->generate(cfg->generate_ctx, &cfg->cases[i], &local, &gst)
                        : lce_case_generate(&cfg->cases[i], &local, &gst);
    seconds = lce_now_seconds() - t0;
  }
  const lce_tensors *in = grc == LCE_OK ? &local : NULL;
  judge_case(es, sl, i, in, &gst);
  if (ordered) {
    LCE_ORDERED
    sink_case(es, sl, i, id, in, seconds, sink, ctx);
  } else {
    sink_case(es, sl, i, id, in, seconds, sink, ctx);
  }
  release_case(es, sl);
  if (grc == LCE_OK) lce_tensors_free(&local);
}

/* Cases [i0, i1), all small, on the threads side by side (above). */
static void side_by_side(const engine_state *es, case_slot *slots, size_t i0, size_t i1, lce_engine_sink sink,
                         void *ctx) {
  LCE_PARALLEL_REGION(lce_thread_limit()) {
    case_slot *sl = &slots[lce_thread_index()];
    lce_thread_limit_set(1);
    LCE_FOR_DYNAMIC_ORDERED
    for (size_t i = i0; i < i1; i++) one_case(es, sl, i, 1, sink, ctx);
    if (lce_thread_index() != 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* tier 0's constants in a pool thread */
  }
}

static lce_code slots_alloc(case_slot *slots, int count, size_t ns) {
  for (int t = 0; t < count; t++) {
    slots[t].out = calloc(ns, sizeof *slots[t].out);
    slots[t].ran = calloc(ns, sizeof *slots[t].ran);
    slots[t].res = calloc(ns, sizeof *slots[t].res);
    if (!slots[t].out || !slots[t].ran || !slots[t].res) return LCE_ENOMEM;
  }
  return LCE_OK;
}

lce_code lce_engine_run(const lce_engine_config *cfg, lce_engine_sink sink, void *ctx, lce_status *st) {
  LCE_CHECK(st, cfg != NULL && sink != NULL && (cfg->ncases == 0 || cfg->cases != NULL) &&
                    (cfg->nsubjects == 0 || cfg->subjects != NULL),
            LCE_EINVAL, "lce_engine_run: NULL argument");
  for (size_t k = 0; k < cfg->nsubjects; k++)
    LCE_CHECK(st, cfg->subjects[k] != NULL && (cfg->subjects[k]->run != NULL || cfg->subjects[k]->run_ctx != NULL),
              LCE_EINVAL, "lce_engine_run: subject %zu has no run function", k);
  engine_state es = {cfg, cfg->tier ? cfg->tier : lce_reference_tier_default(), 0, 0, "", "", NULL};
  es.device_missing = !lce_device_query(NULL, es.nodev, sizeof es.nodev);
  es.tier_missing = !es.tier->available(es.notier, sizeof es.notier);
  const size_t ns = cfg->nsubjects ? cfg->nsubjects : 1;
  const int side = side_by_side_allowed(&es), nslots = side ? lce_thread_limit() : 1;
  case_slot *slots = calloc((size_t)nslots, sizeof *slots);
  lce_prefetch *pf = NULL;
  lce_code rc = slots && slots_alloc(slots, nslots, ns) == LCE_OK
                    ? LCE_OK
                    : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "engine: out of memory");
  es.unprepared = calloc(ns, sizeof *es.unprepared); /* all LCE_OK (0) */
  if (rc == LCE_OK && es.unprepared == NULL) rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "engine: out of memory");
  for (size_t k = 0; rc == LCE_OK && k < cfg->nsubjects; k++) {
    const lce_code prc = prepare_subject(&es, k, &es.unprepared[k]);
    if (prc == LCE_ENOMEM) rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "%s", es.unprepared[k].msg);
    else if (prc != LCE_OK && es.unprepared[k].code == LCE_OK) /* a failure that set no status is one still */
      lce_fail(&es.unprepared[k], prc, __FILE__, __LINE__, "%s: prepare failed (%s)", cfg->subjects[k]->name,
               lce_code_name(prc));
  }
  if (rc == LCE_OK && cfg->prefetch > 0 && cfg->generate)
    rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "lce_engine_run: prefetch generates with lce_case_generate only");
  if (rc == LCE_OK && cfg->prefetch > 0) rc = lce_prefetch_start(&pf, cfg->cases, cfg->ncases, cfg->prefetch, st);
  for (size_t i = 0; rc == LCE_OK && i < cfg->ncases;) {
    size_t j = i;
    while (side && j < cfg->ncases && case_small(&cfg->cases[j])) j++;
    if (j - i >= 2) { /* a run of small cases */
      side_by_side(&es, slots, i, j, sink, ctx);
      i = j;
      continue;
    }
    if (!pf) { /* one case, its stages parallel inside */
      one_case(&es, &slots[0], i++, 0, sink, ctx);
      continue;
    }
    /* generated ahead whether or not anyone runs it: the threads keep the order */
    char id[192];
    plan_case(&es, &slots[0], i, id, sizeof id);
    lce_status gst;
    lce_status_clear(&gst);
    const lce_tensors *in = NULL;
    double seconds = 0;
    if (lce_prefetch_take(pf, i, &in, &seconds, &gst) != LCE_OK) in = NULL;
    judge_case(&es, &slots[0], i, in, &gst);
    sink_case(&es, &slots[0], i, id, in, seconds, sink, ctx);
    release_case(&es, &slots[0]);
    lce_prefetch_release(pf, i++);
  }
  lce_prefetch_stop(pf);
  for (int t = 0; slots && t < nslots; t++) free(slots[t].out), free(slots[t].ran), free(slots[t].res);
  free(slots);
  free(es.unprepared);
  return rc;
}
