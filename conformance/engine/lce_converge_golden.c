/* lce_converge_golden.c — golden/converge.bounds (format in lce_converge_golden.h). */
#define _POSIX_C_SOURCE 200809L /* strtok_r: undeclared in strict C11, an implicit int would truncate its pointer */
#include "lce_converge_golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_file.h"

static const char *const METRIC_NAMES[LCE_CONV_METRICS] = {"gap", "drift", "relerr", "relerr_hidden",
                                                                  "relerr_head"};

const char *lce_converge_metric_name(lce_converge_metric m) {
  return (unsigned)m < LCE_CONV_METRICS ? METRIC_NAMES[m] : "?";
}

double lce_converge_metric_value(const lce_converge_result *r, lce_converge_metric m) {
  const lce_converge_step *last = &r->eval[r->nevals - 1];
  switch (m) {
    case LCE_CONV_GAP: return fabs(last->gap);
    case LCE_CONV_DRIFT: return last->drift;
    case LCE_CONV_RELERR: return r->max_relerr;
    case LCE_CONV_RELERR_HIDDEN: return r->max_relerr_hidden;
    case LCE_CONV_RELERR_HEAD: return r->max_relerr_head;
    default: return NAN;
  }
}

static int parse_number(const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  return *s != '\0' && *end == '\0' && isfinite(*out);
}

/* "config <dtype> n N h H v V chunk C steps T every E lr LR seed S" */
static int parse_config(char *line, lce_converge_config *c) {
  char dtype[16];
  long long n, h, v, chunk, seed;
  int steps, every, used = 0;
  double lr;
  if (sscanf(line, "config %15s n %lld h %lld v %lld chunk %lld steps %d every %d lr %lf seed %lld%n", dtype, &n, &h,
             &v, &chunk, &steps, &every, &lr, &seed, &used) != 9 ||
      line[used] != '\0' || !lce_dtype_parse(dtype, &c->dtype))
    return 0;
  c->n = n, c->h = h, c->v = v, c->vocab_chunk = chunk, c->steps = steps, c->eval_every = every, c->lr = lr;
  c->seed = (uint64_t)seed;
  return n > 0 && h > 0 && v > 0 && chunk > 0 && steps > 0 && every > 0 && isfinite(lr) && lr > 0;
}

lce_code lce_converge_golden_parse(const char *text, size_t len, const char *name, lce_converge_golden *g,
                                   lce_status *st) {
  memset(g, 0, sizeof *g);
  snprintf(g->path, sizeof g->path, "%s", name);
  char *copy = malloc(len + 1);
  LCE_ALLOC_CHECK(st, copy);
  memcpy(copy, text, len);
  copy[len] = '\0';
  lce_code rc = LCE_OK;
  int have_config = 0, lineno = 0;
  char *save = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line && rc == LCE_OK; line = strtok_r(NULL, "\n", &save)) {
    lineno++;
    size_t l = strlen(line);
    if (l && line[l - 1] == '\r') line[--l] = '\0';
    if (lineno == 1) {
      if (strcmp(line, "lcecheck-converge 1") != 0)
        rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s:1: expected 'lcecheck-converge 1', got '%.60s'", name,
                      line);
      continue;
    }
    if (l == 0 || line[0] == '#') continue;
    if (strncmp(line, "config ", 7) == 0) {
      if (have_config || !parse_config(line, &g->config))
        rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s:%d: %s", name, lineno,
                      have_config ? "a second config line"
                                  : "expected 'config <dtype> n N h H v V chunk C steps T every E lr LR seed S'");
      have_config = 1;
      continue;
    }
    char cls[64], dtype[16], emb[16], metric[24], num[64], extra[2];
    lce_converge_bound b;
    memset(&b, 0, sizeof b);
    int m = -1;
    int fields = sscanf(line, "%63s %15s %15s %23s %63s %1s", cls, dtype, emb, metric, num, extra);
    for (int k = 0; k < LCE_CONV_METRICS; k++)
      if (fields >= 4 && strcmp(metric, METRIC_NAMES[k]) == 0) m = k;
    if (fields != 5 || !lce_dtype_parse(dtype, &b.dtype) || (strcmp(emb, "tied") && strcmp(emb, "untied")) || m < 0 ||
        !parse_number(num, &b.bound) || b.bound < 0) {
      rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__,
                    "%s:%d: expected '<class> <dtype> <tied|untied> <gap|drift|relerr|relerr_hidden|relerr_head> "
                    "<bound >= 0>', got '%.80s'",
                    name, lineno, line);
      break;
    }
    snprintf(b.subject_class, sizeof b.subject_class, "%s", cls);
    b.tied = strcmp(emb, "tied") == 0;
    b.metric = (lce_converge_metric)m;
    if (lce_converge_golden_find(g, b.subject_class, b.dtype, b.tied, b.metric)) {
      rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s:%d: duplicate bound %s %s %s %s", name, lineno, cls, dtype,
                    emb, metric);
      break;
    }
    lce_converge_bound *grown = realloc(g->bounds, (g->count + 1) * sizeof *grown);
    if (grown == NULL) {
      rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory reading %s", name);
      break;
    }
    g->bounds = grown;
    g->bounds[g->count++] = b;
  }
  if (rc == LCE_OK && lineno == 0) rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: empty file", name);
  if (rc == LCE_OK && !have_config)
    rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: no 'config' line (which run the bounds are for)", name);
  free(copy);
  if (rc != LCE_OK) lce_converge_golden_free(g);
  return rc;
}

lce_code lce_converge_golden_load(const char *path, lce_converge_golden *g, lce_status *st) {
  char *data;
  size_t size;
  memset(g, 0, sizeof *g);
  LCE_TRY(lce_file_read(path, &data, &size, st));
  lce_code rc = lce_converge_golden_parse(data, size, path, g, st);
  free(data);
  return rc;
}

void lce_converge_golden_free(lce_converge_golden *g) {
  free(g->bounds);
  g->bounds = NULL;
  g->count = 0;
}

int lce_converge_golden_applies(const lce_converge_golden *g, const lce_converge_config *cfg) {
  const lce_converge_config *c = &g->config;
  return c->dtype == cfg->dtype && c->n == cfg->n && c->h == cfg->h && c->v == cfg->v &&
         c->vocab_chunk == cfg->vocab_chunk && c->steps == cfg->steps && c->eval_every == cfg->eval_every &&
         c->lr == cfg->lr;
}

const lce_converge_bound *lce_converge_golden_find(const lce_converge_golden *g, const char *subject_class,
                                                   lce_dtype dtype, int tied, lce_converge_metric m) {
  for (size_t i = 0; i < g->count; i++) {
    const lce_converge_bound *b = &g->bounds[i];
    if (b->dtype == dtype && b->tied == tied && b->metric == m && strcmp(b->subject_class, subject_class) == 0)
      return b;
  }
  return NULL;
}
