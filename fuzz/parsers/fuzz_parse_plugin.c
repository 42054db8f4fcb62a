/* fuzz_parse_plugin.c — the plugin door (lce_plugin_open and its run trampoline, fused/subject/
 * lce_plugin.c) on plugins whose every answer is fuzzed: the scripted plugin (fuzz_plugin_script.h),
 * a shared library beside this binary (or $LCE_FUZZ_PLUGIN), takes its subject table, run()'s return
 * code and message, and what run() writes from the input. Each input loads the plugin through
 * lce_plugin_open (PATH or PATH#NAME as the script says) and, when it opens, has the engine judge it
 * twice (each with a repeat run) on one of a few small cases against the fused-host golden.
 * Properties: no crash, leak or UB; a plugin is refused exactly when its table is malformed, with a
 * message naming its path; a skip only for a capability the case needs, a GPU, or run()'s
 * LCECHECK_NO_DEVICE, an error only for run()'s other codes, both naming the plugin; fused-host's
 * answer copied exactly passes; an answer with a visible defect (poison left, a non-finite element
 * where the exact one is finite, a guard element written, the untied embedding gradient touched, other
 * bits on the repeat run) fails; the two judgements are identical. */
#include "fuzz_parse.h"
#include "fuzz_plugin_script.h"
#include "lce_engine.h"
#include "lce_fuzz_session.h"
#include "lce_plugin.h"

#include <dlfcn.h>

#include "lcecheck/lcecheck_subject.h"

/* Small cases with finite exact outputs between them covering every capability bit. */
static const char *const CASES[] = {
    "bf16.untied.tp1.n4.h8.v40.vp48.vc16.mean.ign5.fresh.normal.s1",
    "fp32.tied.tp2.n3.h8.v60.vp64.vc16.none.ign0.prior.normal.s2",
    "fp16.untied.tp1.n4.h8.v40.vp40.vc8.sum.ign25.ls100.zl50.sc30.cw.prior.normal.s3",
    "fp32.untied.tp1.n2.h8.v32.vp32.vc8.mean.ign0.tf32.fresh.normal.s4",
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static struct {
  char path[1024];
  void *handle;
  fuzz_plugin_load_fn load;
  lce_golden golden;
  lce_case c[NCASES];
  lce_tensors in[NCASES];
  lce_outputs tmpl[NCASES]; /* fused-host's outputs */
} g;

static void setup_fail(const char *what, const lce_status *st) {
  fprintf(stderr, "fuzz_parse_plugin: %s: %s\n", what, st ? st->msg : dlerror());
  abort();
}

static void keep_result(void *ctx, const lce_engine_case *ec) { *(lce_case_result *)ctx = ec->res[0]; }

/* One engine run of subject s on case c (a repeat run included); an engine failure becomes an error. */
static lce_case_result judge(const lce_subject *s, const lce_case *c) {
  lce_case_result r;
  memset(&r, 0, sizeof r);
  lce_status st;
  lce_status_clear(&st);
  const lce_golden *golden = &g.golden;
  const lce_engine_config cfg = {.cases = c, .ncases = 1, .subjects = &s, .goldens = &golden, .nsubjects = 1,
                                 .repeat = 1};
  if (lce_engine_run(&cfg, keep_result, &r, &st) != LCE_OK) r.error = 1, r.status = st;
  return r;
}

static void teardown(void) {
  for (size_t i = 0; i < NCASES; i++) lce_outputs_free(&g.tmpl[i]), lce_tensors_free(&g.in[i]);
  lce_golden_free(&g.golden);
  if (g.handle) dlclose(g.handle);
}

/* The plugin, kept loaded so that lce_plugin_open shares its state; the cases, fused-host's outputs
 * of each (which must pass, or an exact copy could not be required to) and the golden. */
static void setup(void) {
  const char *env = getenv("LCE_FUZZ_PLUGIN");
  if (env && env[0]) {
    snprintf(g.path, sizeof g.path, "%s", env);
  } else if (!lce_fuzz_beside_binary(FUZZ_PLUGIN_FILE, g.path, sizeof g.path)) {
    setup_fail("cannot find the binary's directory in /proc/self/exe (set LCE_FUZZ_PLUGIN)", NULL);
  }
  if (strchr(g.path, '#')) setup_fail("the plugin's path holds a '#', which a plugin spec cannot", NULL);
  g.handle = dlopen(g.path, RTLD_NOW | RTLD_LOCAL);
  if (g.handle == NULL) setup_fail(g.path, NULL);
  void *sym = dlsym(g.handle, FUZZ_PLUGIN_LOAD);
  if (sym == NULL) setup_fail(FUZZ_PLUGIN_LOAD, NULL);
  memcpy(&g.load, &sym, sizeof g.load);
  atexit(teardown);
  lce_status st;
  lce_status_clear(&st);
  lce_fuzz_use_bundled_goldens();
  char golden_path[512];
  lce_default_golden_path("fused-host", golden_path, sizeof golden_path);
  if (lce_golden_load(golden_path, &g.golden, &st) != LCE_OK) setup_fail(golden_path, &st);
  const lce_subject *host = lce_subject_find("fused-host");
  for (size_t i = 0; i < NCASES; i++) {
    if (lce_case_parse(CASES[i], &g.c[i], &st) != LCE_OK || lce_case_generate(&g.c[i], &g.in[i], &st) != LCE_OK ||
        lce_outputs_alloc(&g.c[i], &g.in[i], &g.tmpl[i], &st) != LCE_OK ||
        lce_subject_run(host, &g.c[i], &g.in[i], &g.tmpl[i], &st) != LCE_OK)
      setup_fail(CASES[i], &st);
    const lce_case_result r = judge(host, &g.c[i]);
    if (strcmp(lce_case_result_status(&r), "pass") != 0) {
      fprintf(stderr, "fuzz_parse_plugin: fused-host does not pass %s: %s%s\n", CASES[i], r.status.msg, r.verdict.summary);
      abort();
    }
  }
}

/* ---- what the plugin's answer must give ------------------------------------------------------- */

/* Whether lce_plugin_open must accept the plan's table; *pick the subject it takes. */
static int table_well_formed(const fuzz_plugin_plan *p, size_t *pick) {
  if (p->entry_null || p->nsubjects == 0 || (p->has_want && strchr(p->want, '#'))) return 0;
  for (size_t i = 0; i < p->nsubjects; i++) {
    const fuzz_plugin_subject_plan *s = &p->subject[i];
    if (s->abi_version != LCECHECK_SUBJECT_ABI_VERSION) return 0;
    if (!p->has_want || strcmp(s->name, p->want) == 0) {
      *pick = i;
      return !s->run_missing && s->inner <= LCECHECK_INNER_CHUNKED;
    }
  }
  return 0;
}

/* The public capability bits case c needs. */
static uint32_t case_needs(const lce_case *c) {
  static const uint32_t dtype_cap[LCE_DTYPE_COUNT] = {LCECHECK_CAP_BF16, LCECHECK_CAP_FP16, LCECHECK_CAP_FP32};
  return dtype_cap[c->dtype] | (c->tied ? 0 : LCECHECK_CAP_UNTIED) | (c->tp > 1 ? LCECHECK_CAP_TP : 0) |
         (c->vp > c->v ? LCECHECK_CAP_PADDING : 0) | (c->reduction == LCE_RED_NONE ? LCECHECK_CAP_RED_NONE : 0) |
         (c->prior_grad ? LCECHECK_CAP_PRIOR_GRAD : 0) |
         (c->smoothing != LCE_SMOOTH_NONE && c->smoothing_permille > 0 ? LCECHECK_CAP_SMOOTHING : 0) |
         (c->z_loss_e5 > 0 ? LCECHECK_CAP_Z_LOSS : 0) | (c->softcap > 0 ? LCECHECK_CAP_SOFTCAP : 0) |
         (c->class_weights ? LCECHECK_CAP_CLASS_WEIGHTS : 0) | (c->gemm == LCE_GEMM_TF32 ? LCECHECK_CAP_TF32 : 0);
}

/* Whether the outputs run() wrote carry a defect the judge's class checks must see. */
static int visible_defect(const fuzz_plugin_plan *p, const lce_case *c, const lce_tensors *in) {
  int64_t valid = 0;
  for (int64_t i = 0; i < c->n; i++) valid += in->labels[i] != c->ignore_index;
  for (int b = 0; b < FUZZ_BUFS; b++) {
    if (b == FUZZ_BUF_GRAD_WEIGHT && c->tied) continue;
    const int64_t bad = p->did[b].nonfinite;
    const int unwritten = p->out[b].mode == FUZZ_OUT_UNWRITTEN;
    int defect = p->did[b].guard_changed;
    switch (b) {
      case FUZZ_BUF_LOSS: case FUZZ_BUF_LOSS_TOKEN: case FUZZ_BUF_D_HIDDEN: /* poison left is a defect */
        defect |= unwritten || bad >= 0;
        break;
      case FUZZ_BUF_LSE: /* an ignored token's lse is not judged */
        defect |= (unwritten && valid > 0) || (bad >= 0 && in->labels[bad] != c->ignore_index);
        break;
      case FUZZ_BUF_GRAD_EMBEDDING:
        defect |= c->tied ? bad >= 0 : p->did[b].differs; /* untied: must stay as it was */
        break;
      default: /* the untied output weight's gradient */
        defect |= bad >= 0;
    }
    if (defect) return 1;
  }
  return 0;
}

static int answer_exact(const fuzz_plugin_plan *p, const lce_case *c) {
  for (int b = 0; b < FUZZ_BUFS; b++)
    if (!(b == FUZZ_BUF_GRAD_WEIGHT && c->tied) && (p->did[b].differs || p->did[b].guard_changed)) return 0;
  return 1;
}

static void check_names_plugin(const char *what, const lce_status *st) {
  if (st->msg[0] == '\0') FUZZ_VIOLATION("%s without a message", what);
  if (strstr(st->msg, g.path) == NULL) FUZZ_VIOLATION("%s that does not name the plugin: %s", what, st->msg);
}

static void check_same_judgement(const lce_case_result *a, const lce_case_result *b) {
  int same = a->skipped == b->skipped && a->error == b->error && a->nondeterministic == b->nondeterministic &&
             strcmp(a->status.msg, b->status.msg) == 0 && a->verdict.pass == b->verdict.pass &&
             strcmp(a->verdict.summary, b->verdict.summary) == 0;
  for (int o = 0; same && o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *x = &a->verdict.out[o], *y = &b->verdict.out[o];
    same = x->judged == y->judged && x->class_ok == y->class_ok && strcmp(x->class_msg, y->class_msg) == 0 &&
           memcmp(&x->metrics, &y->metrics, sizeof x->metrics) == 0 &&
           memcmp(x->budget_pct, y->budget_pct, sizeof x->budget_pct) == 0;
  }
  if (!same) FUZZ_VIOLATION("the same plugin answer judged twice differs: '%s' then '%s'", a->verdict.summary, b->verdict.summary);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g.handle == NULL) setup();
  fuzz_plugin_plan *p = g.load(data, size);
  const size_t ci = p->case_index % NCASES;
  const lce_case *c = &g.c[ci];
  const lce_outputs *t = &g.tmpl[ci];
  const void *const tmpl[FUZZ_BUFS] = {t->loss, t->loss_token, t->lse, t->d_hidden, t->grad_embedding,
                                       c->tied ? NULL : t->grad_weight};
  memcpy(p->tmpl, tmpl, sizeof tmpl);
  char spec[sizeof g.path + FUZZ_PLUGIN_NAME_MAX + 1];
  snprintf(spec, sizeof spec, "%s%s%s", g.path, p->has_want ? "#" : "", p->has_want ? p->want : "");
  size_t pick = 0;
  const int well_formed = table_well_formed(p, &pick);
  lce_status st;
  lce_status_clear(&st);
  lce_subject *s = lce_plugin_open(spec, &st);
  if (s == NULL) {
    if (well_formed) FUZZ_VIOLATION("a well-formed plugin refused: %s", st.msg);
    check_names_plugin("a refusal", &st);
    return 0;
  }
  if (!well_formed) FUZZ_VIOLATION("a malformed plugin table accepted as %s", s->name);
  if (strncmp(s->name, LCE_PLUGIN_PREFIX, strlen(LCE_PLUGIN_PREFIX)) != 0 || strcmp(s->name + strlen(LCE_PLUGIN_PREFIX), spec) != 0 ||
      strcmp(s->golden_class, "fused-host") != 0)
    FUZZ_VIOLATION("opened as %s (golden class %s), not as plugin:%s", s->name, s->golden_class, spec);
  const lce_case_result r = judge(s, c), again = judge(s, c);
  lce_plugin_close(s);
  check_same_judgement(&r, &again);

  const uint32_t caps = p->subject[pick].caps;
  const int declines = (case_needs(c) & ~caps) != 0, gpu = (caps & LCECHECK_CAP_NEEDS_GPU) != 0;
  const char *status = lce_case_result_status(&r);
  if (r.skipped) {
    if (!declines && !gpu && p->rc != LCECHECK_NO_DEVICE) FUZZ_VIOLATION("skipped for no reason: %s", r.status.msg);
    check_names_plugin("a skip", &r.status);
    return 0;
  }
  if (declines) FUZZ_VIOLATION("ran a case it lacks a capability for (%s)", status);
  if (p->rc == LCECHECK_NO_DEVICE) FUZZ_VIOLATION("LCECHECK_NO_DEVICE gave %s, not a skip", status);
  if (p->rc != LCECHECK_OK) {
    char code[48];
    snprintf(code, sizeof code, "returned %d", (int)p->rc);
    if (!r.error || strstr(r.status.msg, code) == NULL) FUZZ_VIOLATION("run() %s gave %s: %s", code, status, r.status.msg);
    check_names_plugin("an error", &r.status);
    return 0;
  }
  if (r.error) FUZZ_VIOLATION("an answer of run() that returned OK gave an error: %s", r.status.msg);
  if (p->flaky && !r.nondeterministic) FUZZ_VIOLATION("other bits on the repeat run not seen (%s)", status);
  if ((p->flaky || visible_defect(p, c, &g.in[ci])) && strcmp(status, "fail") != 0)
    FUZZ_VIOLATION("a visibly defective answer gave %s: %s", status, r.verdict.summary);
  if (!p->flaky && answer_exact(p, c) && strcmp(status, "pass") != 0)
    FUZZ_VIOLATION("fused-host's own answer, copied exactly, gave %s: %s", status, r.verdict.summary);
  return 0;
}
