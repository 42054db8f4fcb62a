/* lce_production_run.c — the production run (lce_production_gpu.h): for each case, the fp64 reference
 * in device memory, then every subject run on the host tensors and compared on the device, each
 * output judged against the per-architecture golden. Nothing per element comes to the host except
 * the subjects' own outputs, which their run() interface returns there.
 *
 * Generating a case's tensors (lce_case_generate, ~60 ns per element on one core of the CI
 * machine: ~65 s per 1e9-element weight matrix; its row loops use OpenMP threads where the build
 * has it) takes far longer than the GPU work of the case (seconds), so cfg->jobs host threads
 * generate the next cases while the GPU runs the current one;
 * at most jobs cases wait generated, bounding host memory at (jobs + 1) cases (an untied
 * (4096, 4096, 262144) case holds 13 GB of tensors). The generator is counter-based: threads
 * produce the same bits as a serial run. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lce_production_gpu.h"
#include "lce_ref64.h"
#include "lce_subject.h"

/* Device memory a subject needs beside the reference (unfused-cuda, the largest: a shard's fp32 logits
 * and dtype d_logits, W and its fp32 gradient, hidden, d_hidden and its fp32 buffer), plus headroom
 * for cuBLAS and the comparison's staging. */
static size_t subject_device_bytes(const lce_case *c) {
  const size_t es = lce_dtype_size(c->dtype), rows = (size_t)(c->vp / c->tp), nh = (size_t)(c->n * c->h);
  return (size_t)c->n * rows * (4 + es) + (size_t)(c->vp * c->h) * (es + 4) + nh * (2 * es + 4) + ((size_t)1 << 30);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- tensors generated ahead, on host threads ------------------------------------------------- */
typedef struct gen_slot {
  int ready, freed;
  lce_code rc;
  lce_status st;
  lce_case c;
  lce_tensors t;
  double seconds;
} gen_slot;

typedef struct generator {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const lce_prod_config *cfg;
  gen_slot *slots;
  size_t ncases, next, consumed;
  pthread_t threads[16];
  int nthreads;
} generator;

static void *generator_thread(void *arg) {
  generator *g = (generator *)arg;
  pthread_mutex_lock(&g->mu);
  for (;;) {
    while (g->next < g->ncases && g->next > g->consumed + (size_t)g->cfg->jobs) pthread_cond_wait(&g->cv, &g->mu);
    if (g->next >= g->ncases) break;
    gen_slot *s = &g->slots[g->next++];
    const size_t i = (size_t)(s - g->slots);
    pthread_mutex_unlock(&g->mu);
    const double t0 = now_seconds();
    s->rc = lce_prod_case_at(g->cfg, i, &s->c, &s->st);
    if (s->rc == LCE_OK) s->rc = lce_case_generate(&s->c, &s->t, &s->st);
    s->seconds = now_seconds() - t0;
    pthread_mutex_lock(&g->mu);
    s->ready = 1;
    pthread_cond_broadcast(&g->cv);
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

static lce_code generator_start(generator *g, const lce_prod_config *cfg, size_t ncases, lce_status *st) {
  memset(g, 0, sizeof *g);
  g->cfg = cfg, g->ncases = ncases;
  g->slots = calloc(ncases ? ncases : 1, sizeof *g->slots);
  LCE_ALLOC_CHECK(st, g->slots);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  for (int k = 0; k < cfg->jobs && k < 16; k++) { /* fewer threads than asked is slower, not wrong */
    if (pthread_create(&g->threads[k], NULL, generator_thread, g) != 0) break;
    g->nthreads++;
  }
  if (g->nthreads == 0) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->slots);
    return lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "production: cannot start a generator thread");
  }
  return LCE_OK;
}

static gen_slot *generator_take(generator *g, size_t i) {
  pthread_mutex_lock(&g->mu);
  while (!g->slots[i].ready) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  return &g->slots[i];
}

static void generator_release(generator *g, size_t i) {
  if (g->slots[i].rc == LCE_OK && !g->slots[i].freed) lce_tensors_free(&g->slots[i].t);
  g->slots[i].freed = 1;
  pthread_mutex_lock(&g->mu);
  g->consumed = i + 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* Joins the threads after every case was released (or after an early stop: the threads then finish
 * the cases they hold, whose tensors are freed here). */
static void generator_stop(generator *g) {
  pthread_mutex_lock(&g->mu);
  g->next = g->ncases; /* no thread starts another case */
  g->consumed = g->ncases;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  for (int k = 0; k < g->nthreads; k++) pthread_join(g->threads[k], NULL);
  for (size_t i = 0; i < g->ncases; i++)
    if (g->slots[i].ready && g->slots[i].rc == LCE_OK && !g->slots[i].freed) lce_tensors_free(&g->slots[i].t);
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g->slots);
}

/* ---- one case ---------------------------------------------------------------------------------- */
typedef struct ref_moments {
  double r4[LCE_OUT_COUNT], emag2[LCE_OUT_COUNT];
} ref_moments;

static void run_subject(const lce_case *c, const lce_tensors *in, const lce_ref64_device *ref, const ref_moments *mom,
                        const lce_subject *s, const lce_golden *g, lce_prod_subject_result *sr) {
  lce_status st;
  lce_status_clear(&st);
  char why[160];
  if (!lce_subject_supports(s, c, why, sizeof why)) {
    sr->skipped = 1;
    snprintf(sr->msg, sizeof sr->msg, "%s", why);
    return;
  }
  lce_outputs out;
  memset(&out, 0, sizeof out);
  lce_code rc = lce_outputs_alloc(c, in, &out, &st);
  if (rc == LCE_OK) {
    const double t0 = now_seconds();
    rc = s->run(c, in, &out, &st);
    sr->seconds = now_seconds() - t0;
  }
  if (rc != LCE_OK) {
    sr->error = 1;
    snprintf(sr->msg, sizeof sr->msg, "%s", st.msg);
    lce_outputs_free(&out);
    return;
  }
  char which[64] = "";
  const int guards_ok = lce_outputs_guards_intact(c, &out, which, sizeof which);
  lce_output_id outs[LCE_PROD_MAX_OUTPUTS];
  sr->nout = lce_prod_outputs(c, outs);
  for (int k = 0; k < sr->nout && !sr->error; k++) {
    lce_ref64_sums sums;
    if (lce_ref64_compare(ref, outs[k], &out, &sums, &st) != LCE_OK) {
      sr->error = 1;
      snprintf(sr->msg, sizeof sr->msg, "comparing %s: %.700s", lce_output_name(outs[k]), st.msg);
      break;
    }
    const lce_prod_raw raw = {sums.sum_d2,     sums.sum_r2,         sums.sum_dr,         mom->r4[outs[k]],
                              mom->emag2[outs[k]], sums.max_scaled, sums.compared,       sums.class_mismatch,
                              sums.first_mismatch, guards_ok};
    lce_prod_judge_output(c, s->golden_class, outs[k], &raw, g, &sr->out[k]);
    if (!guards_ok) snprintf(sr->out[k].class_msg, sizeof sr->out[k].class_msg, "guard of %s overwritten", which);
  }
  lce_outputs_free(&out);
}

static void run_case(lce_prod_report *rep, size_t i, const lce_tensors *in, const lce_subject *const *subjects,
                     const lce_golden *const *goldens) {
  lce_prod_case_result *cr = &rep->cases[i];
  const lce_case *c = &cr->c;
  lce_status st;
  lce_status_clear(&st);
  lce_ref64_options opt = {0};
  size_t free_bytes = 0;
  if (lce_device_free_bytes(&free_bytes, &st) != LCE_OK) {
    cr->error = 1;
    snprintf(cr->msg, sizeof cr->msg, "%s", st.msg);
    return;
  }
  /* The error magnitudes (cond, maxscaled) double the reference's memory; drop them only when the
   * reference and the largest subject would not fit together. */
  opt.skip_mags = lce_ref64_device_bytes(c, &opt) + subject_device_bytes(c) > free_bytes;
  lce_ref64_device ref;
  memset(&ref, 0, sizeof ref);
  if (lce_ref64_device_run(c, in, &opt, &ref, &st) != LCE_OK) {
    cr->error = 1;
    snprintf(cr->msg, sizeof cr->msg, "fp64 reference: %.700s", st.msg);
    lce_ref64_device_free(&ref);
    return;
  }
  cr->ref_seconds = ref.seconds;
  cr->ref_has_mags = ref.has_mags;
  ref_moments mom;
  memset(&mom, 0, sizeof mom);
  for (int o = 0; o < LCE_OUT_COUNT && !cr->error; o++) {
    const lce_ref64_dev_output *ro = &ref.out[o];
    if (ro->count == 0) continue;
    if (lce_prod_ref_moments(ro->value, ref.has_mags ? ro->emag : NULL, ro->count, &mom.r4[o], &mom.emag2[o], &st) !=
        LCE_OK) {
      cr->error = 1;
      snprintf(cr->msg, sizeof cr->msg, "reference moments of %s: %.700s", lce_output_name((lce_output_id)o), st.msg);
    }
  }
  for (int j = 0; j < rep->cfg->nsubjects && !cr->error; j++) {
    lce_prod_subject_result *sr = &cr->subj[j];
    sr->subject = subjects[j]->name, sr->golden_class = subjects[j]->golden_class;
    run_subject(c, in, &ref, &mom, subjects[j], goldens[j], sr);
  }
  lce_ref64_device_free(&ref);
}

static void progress(const lce_prod_report *rep, size_t i) {
  const lce_prod_case_result *cr = &rep->cases[i];
  fprintf(stderr, "[%zu/%zu] %s  gen %.1f s", i + 1, rep->ncases, cr->id, cr->gen_seconds);
  if (cr->error) {
    fprintf(stderr, "  ERROR %s\n", cr->msg);
    return;
  }
  fprintf(stderr, "  fp64 %.1f s%s", cr->ref_seconds, cr->ref_has_mags ? "" : " (no mags)");
  for (int j = 0; j < rep->cfg->nsubjects; j++)
    fprintf(stderr, "  %s %s %.1f s", cr->subj[j].subject, lce_prod_subject_status(&cr->subj[j]), cr->subj[j].seconds);
  fputc('\n', stderr);
}

lce_code lce_prod_run(lce_prod_report *rep, const lce_subject *const *subjects, const lce_golden *const *goldens,
                      lce_status *st) {
  char why[256];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "the fp64 reference: %s", why);
  const double t0 = now_seconds();
  generator g;
  LCE_TRY(generator_start(&g, rep->cfg, rep->ncases, st));
  for (size_t i = 0; i < rep->ncases; i++) {
    gen_slot *s = generator_take(&g, i);
    lce_prod_case_result *cr = &rep->cases[i];
    cr->c = s->c;
    lce_case_format(&s->c, cr->id, sizeof cr->id);
    cr->gen_seconds = s->seconds;
    if (s->rc != LCE_OK) {
      cr->error = 1;
      snprintf(cr->msg, sizeof cr->msg, "generating the tensors: %.700s", s->st.msg);
    } else {
      run_case(rep, i, &s->t, subjects, goldens);
    }
    generator_release(&g, i);
    if (!rep->cfg->quiet) progress(rep, i);
  }
  generator_stop(&g);
  rep->seconds = now_seconds() - t0;
  return LCE_OK;
}
