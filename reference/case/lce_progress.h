/* lce_progress.h — progress of long work inside a library call (a reference tier over a large case):
 * the work reports through lce_progress_step, and one hook, installed by the front end, shows it (the
 * CLI prints a line on stderr unless --quiet). Short work stays silent: nothing is reported before the
 * work has run LCE_PROGRESS_AFTER_S seconds ($LCE_PROGRESS_SECONDS when set, read by lce_progress_set),
 * then at most once per that interval. */
#ifndef LCE_PROGRESS_H
#define LCE_PROGRESS_H

#define LCE_PROGRESS_AFTER_S 5.0

typedef void (*lce_progress_fn)(void *ctx, const char *what, double done, double total, double seconds);

/* Installs the hook (NULL: silent, the default). */
void lce_progress_set(lce_progress_fn fn, void *ctx);

typedef struct lce_progress {
  const char *what; /* "tier 0 rows": what done and total count */
  double total, t0, last;
} lce_progress;

void lce_progress_start(lce_progress *p, const char *what, double total);
void lce_progress_step(lce_progress *p, double done);

#endif
