/* lce_fuzz_session.c — see lce_fuzz_session.h. Shared by every subject-vs-oracle harness and by
 * the replay driver, so that libFuzzer and ctest check exactly the same properties. */
#define _POSIX_C_SOURCE 200809L
#include "lce_fuzz_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lce_fuzz_case.h"

static lce_fuzz_session g_session;
static int g_open;

static const char *env_or(const char *name, const char *fallback) {
  const char *v = getenv(name);
  return v && *v ? v : fallback;
}

/* Runs subject once on the smallest case. A GPU subject on a machine without a GPU would skip every
 * input, and a campaign that judged nothing must not read as "no finding": it answers LCE_ENODEV
 * here, once, with the subject's own message. Any other outcome is left to the inputs to judge. */
static lce_code probe_device(const lce_subject *subj, lce_status *st) {
  lce_case c = lce_case_default();
  lce_tensors in;
  lce_outputs out;
  memset(&out, 0, sizeof out);
  lce_status local;
  lce_status_clear(&local);
  lce_code rc = lce_case_generate(&c, &in, &local);
  if (rc != LCE_OK) return LCE_OK;
  if (lce_outputs_alloc(&c, &in, &out, &local) == LCE_OK) rc = subj->run(&c, &in, &out, &local);
  lce_outputs_free(&out);
  lce_tensors_free(&in);
  if (rc != LCE_ENODEV) return LCE_OK;
  *st = local;
  return LCE_ENODEV;
}

lce_code lce_fuzz_session_open(lce_status *st) {
  if (g_open) return LCE_OK;
  lce_fuzz_session *s = &g_session;
  memset(s, 0, sizeof *s);
  const char *name = env_or("LCE_FUZZ_SUBJECT", LCE_FUZZ_DEFAULT_SUBJECT);
  s->subject = lce_subject_find(name);
  LCE_CHECK(st, s->subject != NULL, LCE_EINVAL,
            "unknown subject '%s' in LCE_FUZZ_SUBJECT (see `lcecheck list`)", name);
  char path[512];
  lce_subject_golden_path(s->subject, path, sizeof path);
  /* A missing golden is an error, not a reason to fuzz without bounds (STYLE.md rule 5). */
  LCE_TRY(lce_golden_load(path, &s->golden, st));
  if (s->subject->caps & LCE_CAP_NEEDS_GPU) {
    lce_code rc = probe_device(s->subject, st);
    if (rc != LCE_OK) {
      lce_golden_free(&s->golden);
      return rc;
    }
  }
  snprintf(s->findings_dir, sizeof s->findings_dir, "%s",
           env_or("LCE_FUZZ_FINDINGS", LCE_FUZZ_DEFAULT_FINDINGS));
  s->trap_on_violation = 1;
  g_open = 1;
  return LCE_OK;
}

lce_fuzz_session *lce_fuzz_session_get(void) { return g_open ? &g_session : NULL; }

/* ---- determinism ----------------------------------------------------------------------------- */

/* Compares one output buffer bit for bit; names the first differing element in why. */
static int same_bits(const char *name, const void *a, const void *b, size_t elems, size_t elem_size,
                     char *why, size_t why_size) {
  if (a == NULL || b == NULL) return a == b;
  const unsigned char *pa = a, *pb = b;
  for (size_t i = 0; i < elems; i++) {
    if (memcmp(pa + i * elem_size, pb + i * elem_size, elem_size) != 0) {
      snprintf(why, why_size, "%s element %zu differs between two runs", name, i);
      return 0;
    }
  }
  return 1;
}

static int outputs_identical(const lce_case *c, const lce_outputs *a, const lce_outputs *b, char *why,
                             size_t why_size) {
  const size_t n = (size_t)c->n, nh = (size_t)(c->n * c->h), vph = (size_t)(c->vp * c->h);
  return same_bits("loss", a->loss, b->loss, 1, sizeof(float), why, why_size) &&
         same_bits("loss_token", a->loss_token, b->loss_token, n, sizeof(float), why, why_size) &&
         same_bits("lse", a->lse, b->lse, n, sizeof(float), why, why_size) &&
         same_bits("d_hidden", a->d_hidden, b->d_hidden, nh, lce_dtype_size(c->dtype), why, why_size) &&
         same_bits("grad_embedding", a->grad_embedding, b->grad_embedding, vph, sizeof(float), why,
                   why_size) &&
         same_bits("grad_weight", a->grad_weight, b->grad_weight, vph, sizeof(float), why, why_size);
}

/* Runs the subject twice on freshly allocated (poisoned) buffers. Returns LCE_OK with *same set,
 * or the error of either run. */
static lce_code check_determinism(const lce_subject *subj, const lce_case *c, int *same, char *why,
                                  size_t why_size, lce_status *st) {
  lce_tensors in;
  lce_outputs out[2];
  memset(out, 0, sizeof out);
  lce_code rc = lce_case_generate(c, &in, st);
  if (rc != LCE_OK) return rc;
  for (int k = 0; k < 2 && rc == LCE_OK; k++) {
    rc = lce_outputs_alloc(c, &in, &out[k], st);
    if (rc == LCE_OK) rc = subj->run(c, &in, &out[k], st);
  }
  if (rc == LCE_OK) *same = outputs_identical(c, &out[0], &out[1], why, why_size);
  lce_outputs_free(&out[0]);
  lce_outputs_free(&out[1]);
  lce_tensors_free(&in);
  return rc;
}

/* ---- reporting ------------------------------------------------------------------------------- */

static void ensure_dir(const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    fprintf(stderr, "lce-fuzz: cannot create findings directory %s: %s\n", dir, strerror(errno));
}

/* One line per failing output: which class check or metric failed, and by how much. */
static void print_failing_outputs(FILE *f, const lce_verdict *v) {
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &v->out[o];
    if (!ov->judged || ov->pass) continue;
    if (!ov->class_ok) {
      fprintf(f, "  %s: class: %s\n", lce_output_name((lce_output_id)o), ov->class_msg);
      continue;
    }
    for (int m = 0; m < LCE_METRIC_COUNT; m++)
      if (!ov->metric_ok[m])
        fprintf(f, "  %s: %s %.6g, bound %.6g (%.0f%% of budget)\n", lce_output_name((lce_output_id)o),
                lce_metric_name((lce_metric)m), ov->metrics.v[m], ov->bound[m], ov->budget_pct[m]);
  }
}

static void write_report(FILE *f, const lce_fuzz_session *s, const lce_case_result *r, const char *kind,
                         const char *detail, const char *repro) {
  fprintf(f, "lce-fuzz violation: %s\n", kind);
  fprintf(f, "case: %s\n", r->id);
  fprintf(f, "subject: %s (golden %s)\n", s->subject->name, s->golden.path);
  fprintf(f, "summary: %s\n", detail);
  if (!r->error && !r->skipped && !r->verdict.pass) print_failing_outputs(f, &r->verdict);
  fprintf(f, "repro: %s\n", repro);
}

/* stderr, <dir>/<id>.finding and <dir>/<id>.input (the bytes, to replay or add to the corpus). */
static void report_violation(const lce_fuzz_session *s, const lce_case_result *r, const char *kind,
                             const char *detail, const uint8_t *data, size_t size) {
  char repro[512], path[768];
  lce_repro_line(&r->c, s->subject->name, repro, sizeof repro);
  write_report(stderr, s, r, kind, detail, repro);
  ensure_dir(s->findings_dir);
  snprintf(path, sizeof path, "%s/%s.finding", s->findings_dir, r->id);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "lce-fuzz: cannot write %s: %s\n", path, strerror(errno));
    return;
  }
  write_report(f, s, r, kind, detail, repro);
  fclose(f);
  snprintf(path, sizeof path, "%s/%s.input", s->findings_dir, r->id);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, size, f) != size)
    fprintf(stderr, "lce-fuzz: cannot write %s\n", path);
  if (f) fclose(f);
  fprintf(stderr, "lce-fuzz: finding written to %s/%s.{finding,input}\n", s->findings_dir, r->id);
}

/* ---- one input ------------------------------------------------------------------------------- */

static lce_fuzz_outcome finish(lce_fuzz_session *s, const lce_case_result *r, lce_fuzz_outcome o) {
  s->last_outcome = o;
  snprintf(s->last_id, sizeof s->last_id, "%s", r->id);
  if (o == LCE_FUZZ_PASS) s->stats.passed++;
  if (o == LCE_FUZZ_SKIPPED) s->stats.skipped++;
  if (o == LCE_FUZZ_VIOLATION) s->stats.violations++;
  return o;
}

static lce_fuzz_outcome violation(lce_fuzz_session *s, const lce_case_result *r, const char *kind,
                                  const char *detail, const uint8_t *data, size_t size) {
  report_violation(s, r, kind, detail, data, size);
  return finish(s, r, LCE_FUZZ_VIOLATION);
}

lce_fuzz_outcome lce_fuzz_session_check(lce_fuzz_session *s, const uint8_t *data, size_t size) {
  s->stats.inputs++;
  lce_case_result r;
  memset(&r, 0, sizeof r);
  lce_status st;
  lce_status_clear(&st);
  lce_case c; /* not r.c: lce_run_case clears r before it reads the case */
  if (lce_fuzz_case_from_bytes(data, size, &c, &st) != LCE_OK) {
    r.c = c;
    snprintf(r.id, sizeof r.id, "unmappable-input-%zu-bytes", size);
    return violation(s, &r, "harness produced an invalid case", st.msg, data, size);
  }
  lce_code rc = lce_run_case(s->subject, &c, &s->golden, &r, &st);
  /* A subject that needs a device the machine lacks has nothing to say about this input. */
  if (rc == LCE_ENODEV || r.skipped) return finish(s, &r, LCE_FUZZ_SKIPPED);
  if (rc != LCE_OK || r.error) {
    char detail[1024];
    snprintf(detail, sizeof detail, "%s: %s (%s:%d)", lce_code_name(r.status.code), r.status.msg,
             r.status.file ? r.status.file : "?", r.status.line);
    return violation(s, &r, "unexpected error", detail, data, size);
  }
  s->stats.inconclusive += r.verdict.inconclusive;
  if (!r.verdict.pass) return violation(s, &r, "verdict fail", r.verdict.summary, data, size);

  int same = 0;
  char why[256] = "";
  rc = check_determinism(s->subject, &r.c, &same, why, sizeof why, &st);
  if (rc != LCE_OK) {
    char detail[1024];
    snprintf(detail, sizeof detail, "second run failed: %s: %s", lce_code_name(rc), st.msg);
    return violation(s, &r, "unexpected error", detail, data, size);
  }
  if (!same) return violation(s, &r, "nondeterminism", why, data, size);
  return finish(s, &r, LCE_FUZZ_PASS);
}
