/* lce_progress.c — lce_progress.h. */
#include "lce_progress.h"

#include <stddef.h>
#include <stdlib.h>

#include "lce_time.h"

static lce_progress_fn hook;
static void *hook_ctx;
static double interval = LCE_PROGRESS_AFTER_S;

void lce_progress_set(lce_progress_fn fn, void *ctx) {
  hook = fn;
  hook_ctx = ctx;
  const char *env = getenv("LCE_PROGRESS_SECONDS");
  if (env && *env) interval = atof(env);
}

void lce_progress_start(lce_progress *p, const char *what, double total) {
  p->what = what;
  p->total = total;
  p->t0 = p->last = lce_now_seconds();
}

void lce_progress_step(lce_progress *p, double done) {
  if (hook == NULL) return;
  const double now = lce_now_seconds();
  if (now - p->t0 < interval || (now - p->last < interval && p->last > p->t0)) return;
  p->last = now;
  hook(hook_ctx, p->what, done, p->total, now - p->t0);
}
