/* lce_fuzz_session.c — see lce_fuzz_session.h. Shared by every subject-vs-oracle harness and by
 * the replay driver, so that libFuzzer and ctest check exactly the same properties. */
#define _POSIX_C_SOURCE 200809L
#include "lce_fuzz_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lce_device.h"
#include "lce_file.h"
#include "lce_fuzz_case.h"

static lce_fuzz_session g_session;
static int g_open;

static const char *env_or(const char *name, const char *fallback) {
  const char *v = getenv(name);
  return v && *v ? v : fallback;
}

int lce_fuzz_beside_binary(const char *name, char *path, size_t size) {
  const ssize_t n = size > 1 ? readlink("/proc/self/exe", path, size - 1) : -1;
  if (n <= 0) return 0;
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (slash == NULL) return 0;
  const size_t room = size - (size_t)(slash + 1 - path);
  return (size_t)snprintf(slash + 1, room, "%s", name) < room;
}

void lce_fuzz_use_bundled_goldens(void) {
  char dir[4096];
  struct stat sb;
  if (getenv("LCE_GOLDEN_DIR") == NULL && lce_fuzz_beside_binary(LCE_FUZZ_BUNDLED_GOLDEN, dir, sizeof dir) &&
      stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
    setenv("LCE_GOLDEN_DIR", dir, 0);
}

lce_code lce_fuzz_session_open(lce_status *st) {
  if (g_open) return LCE_OK;
  lce_fuzz_use_bundled_goldens();
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
  /* A GPU subject on a machine without a GPU would skip every input, and a campaign that judged
   * nothing must not read as "no finding": LCE_ENODEV here, once, with the reason. */
  char why[256];
  if ((s->subject->caps & LCE_CAP_NEEDS_GPU) && !lce_device_query(NULL, why, sizeof why)) {
    lce_golden_free(&s->golden);
    return lce_fail(st, LCE_ENODEV, __FILE__, __LINE__, "%s: %s", s->subject->name, why);
  }
  snprintf(s->findings_dir, sizeof s->findings_dir, "%s",
           env_or("LCE_FUZZ_FINDINGS", LCE_FUZZ_DEFAULT_FINDINGS));
  s->trap_on_violation = 1;
  g_open = 1;
  return LCE_OK;
}

lce_fuzz_session *lce_fuzz_session_get(void) { return g_open ? &g_session : NULL; }

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
                         const char *detail) {
  fprintf(f, "lce-fuzz violation: %s\n", kind);
  fprintf(f, "case: %s\n", r->id);
  fprintf(f, "subject: %s (golden %s)\n", s->subject->name, s->golden.path);
  fprintf(f, "summary: %s\n", detail);
  if (!r->error && !r->skipped && !r->verdict.pass) print_failing_outputs(f, &r->verdict);
  if (r->repro[0]) fprintf(f, "repro: %s\n", r->repro);
  else fprintf(f, "repro: none (the input maps to no case: replay the .input with the harness)\n");
  if (s->input_values)
    fprintf(f, "values: %zu tensor elements come from the input, not from the case id: replay the .input with "
               "fuzz_replay_subject\n", s->input_values);
}

/* stderr, <dir>/<id>.finding and <dir>/<id>.input (the bytes, to replay or add to the corpus). */
static void report_violation(const lce_fuzz_session *s, const lce_case_result *r, const char *kind,
                             const char *detail, const uint8_t *data, size_t size) {
  char path[768];
  write_report(stderr, s, r, kind, detail);
  ensure_dir(s->findings_dir);
  snprintf(path, sizeof path, "%s/%s.finding", s->findings_dir, r->id);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "lce-fuzz: cannot write %s: %s\n", path, strerror(errno));
    return;
  }
  write_report(f, s, r, kind, detail);
  /* The file also gets every output's metrics, scales and bound terms: a case whose values came from
   * the input cannot be measured again from its id (lcecheck measure), and this is what triage needs. */
  if (!r->error && !r->skipped) lce_verdict_explain(f, "detail: ", &s->golden, s->subject->golden_class, &r->c, &r->verdict);
  fclose(f);
  snprintf(path, sizeof path, "%s/%s.input", s->findings_dir, r->id);
  lce_status st;
  if (lce_file_replace(path, data, size, &st) != LCE_OK) fprintf(stderr, "lce-fuzz: %s\n", st.msg);
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

/* The front of an input, whose values (if it carries any) replace generated ones. */
typedef struct input_front {
  const uint8_t *data;
  size_t size;
  size_t applied;
} input_front;

static lce_code generate_from_input(void *ctx, const lce_case *c, lce_tensors *t, lce_status *st) {
  input_front *f = ctx;
  LCE_TRY(lce_case_generate(c, t, st));
  f->applied = lce_fuzz_values_apply(f->data, f->size, c, t);
  return LCE_OK;
}

/* The engine's sink: the one result. */
static void keep_result(void *ctx, const lce_engine_case *ec) { *(lce_case_result *)ctx = ec->res[0]; }

lce_fuzz_outcome lce_fuzz_session_check(lce_fuzz_session *s, const uint8_t *data, size_t size) {
  s->stats.inputs++;
  s->input_values = 0;
  lce_case_result r;
  memset(&r, 0, sizeof r);
  lce_status st;
  lce_status_clear(&st);
  lce_case c;
  if (lce_fuzz_case_from_bytes(data, size, &c, &st) != LCE_OK) {
    r.c = c;
    snprintf(r.id, sizeof r.id, "unmappable-input-%zu-bytes", size);
    return violation(s, &r, "harness produced an invalid case", st.msg, data, size);
  }
  lce_fuzz_params p;
  input_front front = {data, 0, 0};
  lce_fuzz_params_decode(data, size, &p, &front.size);
  /* One case through the engine, the subject run twice: the verdict and determinism in one pass. */
  const lce_golden *g = &s->golden;
  const lce_engine_config cfg = {.cases = &c, .ncases = 1, .subjects = &s->subject, .goldens = &g, .nsubjects = 1,
                                 .repeat = 1, .generate = generate_from_input, .generate_ctx = &front};
  if (lce_engine_run(&cfg, keep_result, &r, &st) != LCE_OK) r.error = 1, r.status = st;
  s->input_values = front.applied;
  /* A subject that needs a device the machine lacks has nothing to say about this input. */
  if (r.skipped) return finish(s, &r, LCE_FUZZ_SKIPPED);
  if (r.error) {
    char detail[1024];
    snprintf(detail, sizeof detail, "%s: %s (%s:%d)", lce_code_name(r.status.code), r.status.msg,
             r.status.file ? r.status.file : "?", r.status.line);
    return violation(s, &r, "unexpected error", detail, data, size);
  }
  s->stats.inconclusive += r.verdict.inconclusive;
  if (!r.verdict.pass) return violation(s, &r, "verdict fail", r.verdict.summary, data, size);
  if (r.nondeterministic) return violation(s, &r, "nondeterminism", r.nondeterminism, data, size);
  return finish(s, &r, LCE_FUZZ_PASS);
}
