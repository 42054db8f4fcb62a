/* lce_prefetch.c — see lce_prefetch.h. */
#include "lce_prefetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lce_time.h"

#define LCE_PREFETCH_MAX_THREADS 16

typedef struct slot {
  int ready, freed;
  lce_code rc;
  lce_status st;
  lce_tensors t;
  double seconds;
} slot;

struct lce_prefetch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const lce_case *cases;
  int jobs;
  slot *slots;
  size_t ncases, next, consumed;
  pthread_t threads[LCE_PREFETCH_MAX_THREADS];
  int nthreads;
};

static void *worker(void *arg) {
  lce_prefetch *p = (lce_prefetch *)arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->next < p->ncases && p->next > p->consumed + (size_t)p->jobs) pthread_cond_wait(&p->cv, &p->mu);
    if (p->next >= p->ncases) break;
    const size_t i = p->next++;
    slot *s = &p->slots[i];
    pthread_mutex_unlock(&p->mu);
    const double t0 = lce_now_seconds();
    lce_status_clear(&s->st);
    s->rc = lce_case_generate(&p->cases[i], &s->t, &s->st);
    s->seconds = lce_now_seconds() - t0;
    pthread_mutex_lock(&p->mu);
    s->ready = 1;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

lce_code lce_prefetch_start(lce_prefetch **pf, const lce_case *cases, size_t ncases, int jobs, lce_status *st) {
  lce_prefetch *p = calloc(1, sizeof *p);
  LCE_ALLOC_CHECK(st, p);
  p->cases = cases, p->ncases = ncases, p->jobs = jobs < 1 ? 1 : jobs;
  p->slots = calloc(ncases ? ncases : 1, sizeof *p->slots);
  if (p->slots == NULL) {
    free(p);
    LCE_ALLOC_CHECK(st, NULL);
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  for (int k = 0; k < p->jobs && k < LCE_PREFETCH_MAX_THREADS; k++) { /* fewer threads is slower, not wrong */
    if (pthread_create(&p->threads[k], NULL, worker, p) != 0) break;
    p->nthreads++;
  }
  if (p->nthreads == 0) {
    lce_prefetch_stop(p); /* no thread to join, no tensors: releases the rest */
    return lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "cannot start a tensor generator thread");
  }
  *pf = p;
  return LCE_OK;
}

lce_code lce_prefetch_take(lce_prefetch *p, size_t i, const lce_tensors **in, double *seconds, lce_status *st) {
  pthread_mutex_lock(&p->mu);
  while (!p->slots[i].ready) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  slot *s = &p->slots[i];
  *seconds = s->seconds;
  if (s->rc != LCE_OK) {
    if (st) *st = s->st;
    return s->rc;
  }
  *in = &s->t;
  return LCE_OK;
}

void lce_prefetch_release(lce_prefetch *p, size_t i) {
  slot *s = &p->slots[i];
  if (s->rc == LCE_OK && !s->freed) lce_tensors_free(&s->t);
  s->freed = 1;
  pthread_mutex_lock(&p->mu);
  p->consumed = i + 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void lce_prefetch_stop(lce_prefetch *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->next = p->ncases; /* no thread starts another case */
  p->consumed = p->ncases;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int k = 0; k < p->nthreads; k++) pthread_join(p->threads[k], NULL);
  for (size_t i = 0; i < p->ncases; i++)
    if (p->slots[i].ready && p->slots[i].rc == LCE_OK && !p->slots[i].freed) lce_tensors_free(&p->slots[i].t);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p->slots);
  free(p);
}
