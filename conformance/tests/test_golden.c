/* test_golden.c — the golden file parser, writer and lookup.
 *
 * Usage: test_golden <data dir>. The data dir holds good.golden and one bad_<kind>.golden per kind
 * of malformed line; every bad file must be rejected with LCE_EPARSE naming "path:line:" and a
 * fragment that says what is wrong (and every bad file in the dir must be listed here, so a new
 * one cannot sit there untested). The writer must round-trip bit for bit (hex floats), write in a
 * stable order, and leave the old file and no temp file behind when it fails. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, opendir */

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lce_golden.h"

#include "lce_test.h"

static const char *data_dir;

static void data_path(const char *file, char *buf, size_t size) { snprintf(buf, size, "%s/%s", data_dir, file); }

static int same_double_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int same_entry(const lce_golden_entry *x, const lce_golden_entry *y) {
  int same = strcmp(x->subject_class, y->subject_class) == 0 && x->dtype == y->dtype && x->output == y->output &&
             x->metric == y->metric && x->form == y->form && same_double_bits(x->a, y->a) &&
             same_double_bits(x->b, y->b) && same_double_bits(x->c, y->c) && x->terms == y->terms;
  for (int t = 0; t < LCE_TERM_COUNT; t++) same = same && same_double_bits(x->coef[t], y->coef[t]);
  return same;
}

/* The bound of e on an output with inner size k and condition cond (the other scales neutral). */
static double bound_at(const lce_golden_entry *e, int64_t k, double cond) {
  lce_bound_scales s = {.cond = cond, .neff = 1.0, .vs = 1.0, .h = 1.0, .k = (double)k, .coh = 0.0};
  return lce_golden_bound(e, &s);
}

/* ---- malformed files -------------------------------------------------------------------------- */

typedef struct bad_case {
  const char *kind; /* data/bad_<kind>.golden */
  int line;
  const char *fragment;
} bad_case;

static const bad_case BAD[] = {
    {"magic", 1, "bad magic: expected 'lcecheck-golden 1'"},
    {"version", 1, "unsupported version '2'"},
    {"empty", 1, "empty file"},
    {"class_char", 3, "invalid character '$'"},
    {"class_long", 4, "longer than 63 characters"},
    {"dtype", 3, "unknown dtype 'bf17'"},
    {"output", 3, "unknown output 'd_hiden'"},
    {"metric", 3, "unknown metric 'relerrr'"},
    {"form", 3, "unknown bound form 'quadk'"},
    {"model_term", 3, "unknown model term 'cond*sqrtq'"},
    {"model_order", 3, "model term 'cond' out of order"},
    {"model_repeat", 3, "model term 'coh' repeated"},
    {"model_empty", 3, "form model names no term"},
    {"model_no_eq", 3, "model term 'cond' is not <term>=<coef>"},
    {"model_negative", 3, "constant cond/sqrtn: negative value '-1e-7'"},
    {"few_fields", 3, "got 4 fields"},
    {"const_extra", 3, "wrong field count: form const takes 6 fields, got 7"},
    {"sqrtk_short", 3, "wrong field count: form sqrtk takes 7 fields, got 6"},
    {"too_many", 3, "form lineark takes 7 fields, got 9"},
    {"inf", 3, "constant a: non-finite value 'inf'"},
    {"nan", 3, "constant b: non-finite value 'nan'"},
    {"overflow", 3, "constant a: non-finite value '1e999'"},
    {"negative", 3, "constant a: negative value '-0x1p-13'"},
    {"negzero", 3, "constant a: negative value '-0'"},
    {"garbage", 3, "constant a: trailing garbage 'abc' after number"},
    {"not_number", 3, "constant b: 'abc' is not a number"},
    {"duplicate", 6, "duplicate entry for fused-host bf16 d_hidden relerr (first on line 3)"},
    {"indent_comment", 3, "comment must start in column 1"},
    {"crlf", 3, "carriage return"},
};
enum { BAD_COUNT = sizeof BAD / sizeof BAD[0] };

static void expect_parse_error(const char *path, int line, const char *fragment) {
  lce_golden g;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_golden_load(path, &g, &st);
  char where[1100];
  snprintf(where, sizeof where, "%s:%d: ", path, line);
  EXPECT(rc == LCE_EPARSE, "%s: expected a parse error, got %s (%s)", path, lce_code_name(rc), st.msg);
  EXPECT(strstr(st.msg, where) == st.msg, "%s: message should start with '%s': %s", path, where, st.msg);
  EXPECT(strstr(st.msg, fragment) != NULL, "%s: message should contain '%s': %s", path, fragment, st.msg);
  EXPECT(g.count == 0 && g.entries == NULL && g.ncomments == 0, "%s: a failed parse must leave g empty", path);
  lce_golden_free(&g);
}

static void test_bad_files(void) {
  char path[1024];
  for (int i = 0; i < BAD_COUNT; i++) {
    char file[128];
    snprintf(file, sizeof file, "bad_%s.golden", BAD[i].kind);
    data_path(file, path, sizeof path);
    expect_parse_error(path, BAD[i].line, BAD[i].fragment);
  }
  /* Every bad_*.golden in the data dir must be one of the cases above. */
  DIR *d = opendir(data_dir);
  EXPECT(d != NULL, "cannot open data dir %s", data_dir);
  if (d == NULL) return;
  int seen = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "bad_", 4) != 0) continue;
    seen++;
    int listed = 0;
    for (int i = 0; i < BAD_COUNT; i++) {
      char file[128];
      snprintf(file, sizeof file, "bad_%s.golden", BAD[i].kind);
      listed |= strcmp(file, e->d_name) == 0;
    }
    EXPECT(listed, "data file %s is not checked by test_bad_files", e->d_name);
  }
  closedir(d);
  EXPECT(seen == BAD_COUNT, "%d bad_* files in %s, %d cases listed", seen, data_dir, BAD_COUNT);
}

static void test_bad_in_memory(void) {
  lce_golden g;
  lce_status st;
  static const char nul_text[] = "lcecheck-golden 1\nfused-host\0 bf16 lse relerr const 0\n";
  lce_code rc = lce_golden_parse(nul_text, sizeof nul_text - 1, "mem", &g, &st);
  EXPECT(rc == LCE_EPARSE && strstr(st.msg, "mem:2: NUL byte") != NULL, "NUL byte: %s", st.msg);
  lce_golden_free(&g);

  char path[1024];
  data_path("does-not-exist.golden", path, sizeof path);
  rc = lce_golden_load(path, &g, &st);
  EXPECT(rc == LCE_EIO, "missing file: expected i/o error, got %s", lce_code_name(rc));
  EXPECT(strstr(st.msg, path) != NULL, "missing file: message should name %s: %s", path, st.msg);
  lce_golden_free(&g);

  /* The last line needs no newline; blank lines anywhere are fine. */
  static const char no_newline[] = "lcecheck-golden 1\n\n  \nx fp16 lse bias lineark 0x1p-3 0";
  rc = lce_golden_parse(no_newline, sizeof no_newline - 1, "mem", &g, &st);
  EXPECT(rc == LCE_OK && g.count == 1 && g.entries[0].form == LCE_FORM_LINEARK && g.entries[0].a == 0.125,
         "entry without final newline: %s", st.msg);
  lce_golden_free(&g);

  /* tf32 is a precision key of its own, apart from fp32. */
  static const char tf32_text[] = "lcecheck-golden 1\nfused-host tf32 lse relerr const 0x1p-12\n";
  rc = lce_golden_parse(tf32_text, sizeof tf32_text - 1, "mem", &g, &st);
  EXPECT(rc == LCE_OK && g.count == 1 && g.entries[0].dtype == LCE_PREC_TF32, "tf32 entry: %s", st.msg);
  EXPECT(lce_golden_find(&g, "fused-host", LCE_PREC_FP32, LCE_OUT_LSE, LCE_METRIC_RELERR) == NULL,
         "an fp32 lookup must not find the tf32 bound");
  lce_golden_free(&g);

  /* The cond form scales with the case's output condition: a + b*cond. */
  static const char cond_text[] = "lcecheck-golden 1\nfused-host bf16 d_hidden relerr cond 0x1p-20 0x1p-8\n";
  rc = lce_golden_parse(cond_text, sizeof cond_text - 1, "mem", &g, &st);
  EXPECT(rc == LCE_OK && g.count == 1 && g.entries[0].form == LCE_FORM_COND, "cond entry: %s", st.msg);
  if (rc == LCE_OK && g.count == 1)
    EXPECT(bound_at(&g.entries[0], 300, 3.0) == 0x1p-20 + 3 * 0x1p-8, "cond bound at cond=3: %a",
           bound_at(&g.entries[0], 300, 3.0));
  lce_golden_free(&g);

  /* The condk form adds the tensor-core term, linear in K: a + b*cond + c*K. It takes exactly three
   * constants. */
  static const char condk_text[] = "lcecheck-golden 1\nfused-cuda bf16 d_weight bias condk 0x1p-20 0x1p-8 0x1p-30\n";
  rc = lce_golden_parse(condk_text, sizeof condk_text - 1, "mem", &g, &st);
  EXPECT(rc == LCE_OK && g.count == 1 && g.entries[0].form == LCE_FORM_CONDK && g.entries[0].c == 0x1p-30,
         "condk entry: %s", st.msg);
  if (rc == LCE_OK && g.count == 1)
    EXPECT(bound_at(&g.entries[0], 1024, 3.0) == 0x1p-20 + 3 * 0x1p-8 + 1024 * 0x1p-30,
           "condk bound at cond=3, K=1024: %a", bound_at(&g.entries[0], 1024, 3.0));
  lce_golden_free(&g);
  /* The model form: named terms, each scaled by what lce_bound_scales says about the output. */
  static const char model_text[] = "lcecheck-golden 1\nfused-host bf16 d_hidden bias model 1=0x1p-20 cond=0x1p-8 "
                                   "cond/sqrtn=0x1p-9 cond*sqrtv=0x1p-12 cond*sqrth=0x1p-11 sqrtv=0x1p-14 sqrth=0x1p-13 "
                                   "sqrtk=0x1p-16 k=0x1p-30 coh=0.5\n";
  rc = lce_golden_parse(model_text, sizeof model_text - 1, "mem", &g, &st);
  EXPECT(rc == LCE_OK && g.count == 1 && g.entries[0].form == LCE_FORM_MODEL && g.entries[0].terms == 0x3ffu &&
             g.entries[0].coef[LCE_TERM_COH] == 0.5 && g.entries[0].a == 0,
         "model entry: %s", st.msg);
  if (rc == LCE_OK && g.count == 1) {
    lce_bound_scales sc = {.cond = 3.0, .neff = 16.0, .vs = 256.0, .h = 64.0, .k = 1024.0, .coh = 0x1p-8};
    double want = 0x1p-20 + 3 * 0x1p-8 + 3.0 / 4 * 0x1p-9 + 3.0 * 16 * 0x1p-12 + 3.0 * 8 * 0x1p-11 + 16 * 0x1p-14 +
                  8 * 0x1p-13 + 32 * 0x1p-16 + 1024 * 0x1p-30 + 0.5 * 0x1p-8;
    EXPECT(lce_golden_bound(&g.entries[0], &sc) == want, "model bound: %a, expected %a",
           lce_golden_bound(&g.entries[0], &sc), want);
    sc.neff = 0.25; /* fewer than one effective element counts as one */
    EXPECT(lce_bound_term_scale(LCE_TERM_COND_RSQRTN, &sc) == 3.0, "cond/sqrtn at neff < 1: %a",
           lce_bound_term_scale(LCE_TERM_COND_RSQRTN, &sc));
  }
  lce_golden_free(&g);
  /* A term fitted to 0 adds nothing where its scale is infinite (an exact value below its output format's
   * range: cond inf): the bound is the other terms', not 0 * inf = NaN. */
  static const char zero_text[] = "lcecheck-golden 1\nfused-host bf16 loss_token relerr model 1=0x1p-20 cond=0x0p+0\n";
  rc = lce_golden_parse(zero_text, sizeof zero_text - 1, "mem", &g, &st);
  if (rc == LCE_OK && g.count == 1) {
    lce_bound_scales sc = {.cond = INFINITY, .neff = 1.0, .vs = 2.0, .h = 1.0, .k = 2.0};
    EXPECT(lce_golden_bound(&g.entries[0], &sc) == 0x1p-20, "zero coefficient, infinite cond: %a",
           lce_golden_bound(&g.entries[0], &sc));
  } else EXPECT(0, "zero-coefficient entry: %s", st.msg);
  lce_golden_free(&g);
  /* The terms that scale with the case beyond its shape: the maxscaled bound at the case (set by
   * lce_bounds_apply), the rounded-d_logit reference's bias, and the lengths cond*v, h, cond*h. */
  static const char model2_text[] = "lcecheck-golden 1\nfused-host bf16 d_hidden relerr model cond=0x1p-8 "
                                    "ms*cond/sqrtn=1 cond*v=0x1p-30 h=0x1p-20 cond*h=0x1p-24 rnd=1 pertok=0.5 "
                                    "flip=1 outr=1 acc=4 accn=2 gsc=1 flipn=1\n";
  rc = lce_golden_parse(model2_text, sizeof model2_text - 1, "mem", &g, &st);
  EXPECT(rc == LCE_OK && g.count == 1 && g.entries[0].terms == (1u << LCE_TERM_COND | 0xfffu << LCE_TERM_MS_COND_RSQRTN),
         "model entry with the later terms: %s", st.msg);
  if (rc == LCE_OK && g.count == 1) {
    lce_bound_scales sc = {.cond = 3.0, .neff = 16.0, .vs = 256.0, .h = 64.0, .k = 1024.0, .ms = 0x1p-6, .rnd = 0x1p-9,
                           .pertok = 0x1p-11, .flip = 0x1p-12, .outr = 0x1p-13, .acc = 0x1p-14, .accn = 0x1p-15,
                           .gsc = 0x1p-16, .flipn = 0x1p-17};
    double want = 3 * 0x1p-8 + 0x1p-6 * 3.0 / 4 + 3.0 * 256 * 0x1p-30 + 64 * 0x1p-20 + 3.0 * 64 * 0x1p-24 + 0x1p-9 +
                  0.5 * 0x1p-11 + 0x1p-12 + 0x1p-13 + 4 * 0x1p-14 + 2 * 0x1p-15 + 0x1p-16 + 0x1p-17;
    EXPECT(lce_golden_bound(&g.entries[0], &sc) == want, "model bound with ms and rnd: %a, expected %a",
           lce_golden_bound(&g.entries[0], &sc), want);
    /* The tensor-core terms (h, cond*h; k alike) grow with the alignment ratio tcx, nothing else does;
     * a ratio below 1 (a zeroed struct's 0, NaN) counts as 1. */
    sc.tcx = 4.0;
    const double want4 = want + 3 * 64 * 0x1p-20 + 3 * 3.0 * 64 * 0x1p-24;
    EXPECT(lce_golden_bound(&g.entries[0], &sc) == want4 && lce_bound_term_scale(LCE_TERM_K, &sc) == 4096.0,
           "model bound at tcx 4: %a, expected %a; k's scale %g", lce_golden_bound(&g.entries[0], &sc), want4,
           lce_bound_term_scale(LCE_TERM_K, &sc));
    sc.tcx = 0.5;
    EXPECT(lce_golden_bound(&g.entries[0], &sc) == want, "tcx 0.5 counts as 1: %a", lce_golden_bound(&g.entries[0], &sc));
    sc.tcx = NAN;
    EXPECT(lce_golden_bound(&g.entries[0], &sc) == want, "tcx NaN counts as 1: %a", lce_golden_bound(&g.entries[0], &sc));
  }
  lce_golden_free(&g);
  static const char condk_short[] = "lcecheck-golden 1\nfused-cuda bf16 d_weight bias condk 0x1p-20 0x1p-8\n";
  rc = lce_golden_parse(condk_short, sizeof condk_short - 1, "mem", &g, &st);
  EXPECT(rc == LCE_EPARSE && strstr(st.msg, "form condk takes 8 fields") != NULL, "condk with two constants: %s",
         st.msg);
  if (rc == LCE_OK) lce_golden_free(&g);
}

/* ---- good file and lookup --------------------------------------------------------------------- */

static void test_good_file(void) {
  char path[1024];
  data_path("good.golden", path, sizeof path);
  lce_golden g;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_golden_load(path, &g, &st);
  EXPECT(rc == LCE_OK, "good.golden: %s", st.msg);
  if (rc != LCE_OK) return;
  EXPECT(g.count == 5, "good.golden: %zu entries, expected 5", g.count);
  EXPECT(g.ncomments == 3, "good.golden: %zu comments, expected 3", g.ncomments);
  if (g.ncomments == 3) {
    EXPECT(strcmp(g.comments[1], "# seeds 1..64, MPFR 4.2.1") == 0, "comment kept verbatim: '%s'", g.comments[1]);
    EXPECT(strcmp(g.comments[2], "# a comment between entries is kept, in order") == 0, "comment order: '%s'",
           g.comments[2]);
  }
  EXPECT(strcmp(g.path, path) == 0, "g.path = '%s'", g.path);

  const lce_golden_entry *e = lce_golden_find(&g, "fused-host", LCE_PREC_BF16, LCE_OUT_D_HIDDEN, LCE_METRIC_RELERR);
  EXPECT(e && e->form == LCE_FORM_SQRTK && e->a == 0x1p-10 && e->b == 0x1.8p-14, "sqrtk entry");
  if (e) EXPECT(bound_at(e, 16, 1.0) == 0x1p-10 + 4 * 0x1.8p-14, "sqrtk bound at K=16: %a", bound_at(e, 16, 1.0));
  e = lce_golden_find(&g, "fused-host", LCE_PREC_BF16, LCE_OUT_D_WEIGHT, LCE_METRIC_ULPFRAC);
  EXPECT(e && e->form == LCE_FORM_LINEARK && e->a == 0 && e->b == 1e-3, "lineark entry (decimal, tabs, spaces)");
  if (e) EXPECT(bound_at(e, 1000, 1.0) == 1e-3 * 1000, "lineark bound at K=1000: %a", bound_at(e, 1000, 1.0));
  e = lce_golden_find(&g, "fused-host", LCE_PREC_FP32, LCE_OUT_LOSS, LCE_METRIC_MAXSCALED);
  EXPECT(e && e->form == LCE_FORM_CONST && e->a == 0.25 && e->b == 0, "const entry");
  if (e) EXPECT(bound_at(e, 123456, 1.0) == 0.25, "const bound ignores K");
  e = lce_golden_find(&g, "mutant/bf16-dhidden-accum", LCE_PREC_FP16, LCE_OUT_LSE, LCE_METRIC_RELERR);
  EXPECT(e && e->a == DBL_MAX, "class with '/' and the largest double");
  EXPECT(lce_golden_find(&g, "fused-host", LCE_PREC_FP16, LCE_OUT_D_HIDDEN, LCE_METRIC_RELERR) == NULL,
         "find must match the dtype");
  EXPECT(lce_golden_find(&g, "fused", LCE_PREC_BF16, LCE_OUT_D_HIDDEN, LCE_METRIC_RELERR) == NULL,
         "find must match the whole class name");
  lce_golden_free(&g);
}

/* ---- writer ----------------------------------------------------------------------------------- */

static char tmp_dir[256];

static void tmp_path(const char *file, char *buf, size_t size) { snprintf(buf, size, "%s/%s", tmp_dir, file); }

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *buf = malloc((1 << 16) + 1);
  *len = buf ? fread(buf, 1, 1 << 16, f) : 0;
  if (buf) buf[*len] = '\0';
  fclose(f);
  return buf;
}

static int files_equal(const char *p, const char *q) {
  size_t lp = 0, lq = 0;
  char *a = read_all(p, &lp), *b = read_all(q, &lq);
  int eq = a && b && lp == lq && memcmp(a, b, lp) == 0;
  free(a);
  free(b);
  return eq;
}

/* Temp files of the writer are "<name>.tmp.XXXXXX" in the same directory. */
static int temp_files_left(void) {
  DIR *d = opendir(tmp_dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += strstr(e->d_name, ".tmp.") != NULL;
  if (d) closedir(d);
  return n;
}

static lce_golden_entry entry(const char *cls, lce_precision t, lce_output_id o, lce_metric m, lce_bound_form f, double a,
                              double b) {
  lce_golden_entry e;
  memset(&e, 0, sizeof e);
  snprintf(e.subject_class, sizeof e.subject_class, "%s", cls);
  e.dtype = t, e.output = o, e.metric = m, e.form = f, e.a = a, e.b = b;
  return e;
}

/* Entries deliberately out of the writer's order, with values that only hex floats carry exactly. */
static lce_golden_entry SAMPLE[8];
static char *SAMPLE_COMMENTS[] = {"# generator: test_golden", "#", "# values: 0.1, 1e-3, subnormal, DBL_MAX"};

static void make_sample(lce_golden *g) {
  SAMPLE[0] = entry("zeta", LCE_PREC_FP32, LCE_OUT_LOSS, LCE_METRIC_RELERR, LCE_FORM_CONST, 0.1, 0);
  SAMPLE[1] = entry("fused-host", LCE_PREC_FP16, LCE_OUT_D_WEIGHT, LCE_METRIC_BIAS, LCE_FORM_LINEARK, 1e-3, 0x1p-1074);
  SAMPLE[2] = entry("fused-host", LCE_PREC_BF16, LCE_OUT_D_HIDDEN, LCE_METRIC_MAXSCALED, LCE_FORM_SQRTK, DBL_MAX, 0);
  SAMPLE[3] = entry("fused-host", LCE_PREC_BF16, LCE_OUT_D_HIDDEN, LCE_METRIC_RELERR, LCE_FORM_SQRTK, 0, 1.0 / 3);
  SAMPLE[4] = entry("fused-host", LCE_PREC_BF16, LCE_OUT_LOSS_TOKEN, LCE_METRIC_ULPFRAC, LCE_FORM_CONST, 0.5, 0);
  SAMPLE[5] = entry("alpha/x", LCE_PREC_FP32, LCE_OUT_LSE, LCE_METRIC_BIAS, LCE_FORM_CONST, 0x1.23456789abcdep-700, 0);
  SAMPLE[6] = entry("fused-cuda", LCE_PREC_BF16, LCE_OUT_D_WEIGHT, LCE_METRIC_RELERR, LCE_FORM_CONDK, 0x1p-12, 0.1);
  SAMPLE[6].c = 0x1.3p-30; /* the third constant must survive the round trip too */
  SAMPLE[7] = entry("fused-host", LCE_PREC_FP16, LCE_OUT_LSE, LCE_METRIC_RELERR, LCE_FORM_MODEL, 0, 0);
  SAMPLE[7].terms = 1u << LCE_TERM_COND | 1u << LCE_TERM_COND_SQRTV | 1u << LCE_TERM_COH;
  SAMPLE[7].coef[LCE_TERM_COND] = 0x1.8p-23, SAMPLE[7].coef[LCE_TERM_COND_SQRTV] = 0; /* a fitted 0 stays named */
  SAMPLE[7].coef[LCE_TERM_COH] = 1.0 / 3;
  memset(g, 0, sizeof *g);
  g->entries = SAMPLE;
  g->count = 8;
  g->comments = SAMPLE_COMMENTS;
  g->ncomments = 3;
}

static void test_round_trip(void) {
  lce_golden g, back;
  lce_status st;
  make_sample(&g);
  char a[512], b[512], c[512];
  tmp_path("a.golden", a, sizeof a);
  tmp_path("b.golden", b, sizeof b);
  tmp_path("c.golden", c, sizeof c);
  EXPECT(lce_golden_write(a, &g, &st) == LCE_OK, "write a: %s", st.msg);
  lce_code rc = lce_golden_load(a, &back, &st);
  EXPECT(rc == LCE_OK, "reload a: %s", st.msg);
  if (rc != LCE_OK) return;
  /* parse(write(g)) == g, bit for bit, as a set of entries and as the comment list. */
  EXPECT(back.count == g.count, "round trip: %zu entries, expected %zu", back.count, g.count);
  for (size_t i = 0; i < g.count; i++) {
    const lce_golden_entry *e = lce_golden_find(&back, g.entries[i].subject_class, g.entries[i].dtype,
                                                g.entries[i].output, g.entries[i].metric);
    EXPECT(e && same_entry(e, &g.entries[i]), "round trip: entry %zu (%s) differs", i, g.entries[i].subject_class);
  }
  EXPECT(back.ncomments == g.ncomments, "round trip: %zu comments", back.ncomments);
  for (size_t i = 0; i < g.ncomments && i < back.ncomments; i++)
    EXPECT(strcmp(back.comments[i], g.comments[i]) == 0, "round trip: comment %zu", i);
  /* Stable order: entries sorted by class, dtype, output, metric whatever order g had. */
  for (size_t i = 1; i < back.count; i++) {
    const lce_golden_entry *p = &back.entries[i - 1], *q = &back.entries[i];
    int cmp = strcmp(p->subject_class, q->subject_class);
    EXPECT(cmp < 0 || (cmp == 0 && (p->dtype < q->dtype || (p->dtype == q->dtype && (p->output < q->output ||
                                   (p->output == q->output && p->metric < q->metric))))),
           "written order not sorted at entry %zu", i);
  }
  /* write(parse(write(g))) is byte-identical, and so is writing g's entries in another order. */
  EXPECT(lce_golden_write(b, &back, &st) == LCE_OK, "write b: %s", st.msg);
  EXPECT(files_equal(a, b), "rewrite of the parsed file differs from the first write");
  lce_golden_entry reversed[8];
  for (int i = 0; i < 8; i++) reversed[i] = SAMPLE[7 - i];
  g.entries = reversed;
  EXPECT(lce_golden_write(c, &g, &st) == LCE_OK, "write c: %s", st.msg);
  EXPECT(files_equal(a, c), "the written file depends on the order of g's entries");
  size_t len = 0;
  char *text = read_all(a, &len);
  EXPECT(text && len > 40 && strncmp(text, "lcecheck-golden 1\n# generator: test_golden\n#\n# values", 53) == 0,
         "magic line, then comments first");
  EXPECT(text && strstr(text, "\nzeta fp32 loss relerr const 0x1.999999999999ap-4\n") != NULL,
         "0.1 written as a hex float, one entry per line");
  EXPECT(text && strstr(text, "\nfused-host fp16 lse relerr model cond=0x1.8p-23 cond*sqrtv=0x0p+0 coh=0x1.5555555555555p-2\n") != NULL,
         "model entry written as <term>=<hex> in term order");
  free(text);
  struct stat sb;
  EXPECT(stat(a, &sb) == 0 && (sb.st_mode & 0777) == 0644, "written golden is world-readable (mode %o)",
         (unsigned)(sb.st_mode & 0777));
  lce_golden_free(&back);
  unlink(a), unlink(b), unlink(c);
}

static void test_write_failures(void) {
  lce_golden g;
  lce_status st;
  make_sample(&g);
  char path[512], before[512];
  tmp_path("keep.golden", path, sizeof path);
  tmp_path("keep.before", before, sizeof before);
  EXPECT(lce_golden_write(path, &g, &st) == LCE_OK, "write keep: %s", st.msg);
  EXPECT(lce_golden_write(before, &g, &st) == LCE_OK, "write copy: %s", st.msg);

  /* Invalid goldens are refused before the disk is touched: old file intact, no temp file. */
  lce_golden_entry bad[2] = {SAMPLE[0], SAMPLE[0]};
  lce_golden b = g;
  b.entries = bad;
  b.count = 1;
  bad[0].a = -0x1p-3;
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL && strstr(st.msg, "finite and >= 0"), "negative a: %s", st.msg);
  bad[0].a = NAN;
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL, "NaN a accepted");
  bad[0] = SAMPLE[0];
  bad[0].b = 1; /* const form with a b */
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL && strstr(st.msg, "form const"), "const with b: %s", st.msg);
  bad[0] = SAMPLE[0];
  snprintf(bad[0].subject_class, sizeof bad[0].subject_class, "two words");
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL && strstr(st.msg, "invalid character ' '"), "class: %s", st.msg);
  bad[0] = SAMPLE[0];
  b.count = 2;
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL && strstr(st.msg, "same key"), "duplicate: %s", st.msg);
  b.count = 1;
  char *no_hash[] = {"provenance without a hash"};
  b.comments = no_hash;
  b.ncomments = 1;
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL && strstr(st.msg, "'#'"), "comment: %s", st.msg);
  char *newline[] = {"# two\n# lines"};
  b.comments = newline;
  EXPECT(lce_golden_write(path, &b, &st) == LCE_EINVAL && strstr(st.msg, "line break"), "comment: %s", st.msg);
  EXPECT(files_equal(path, before), "a refused write changed the old file");
  EXPECT(temp_files_left() == 0, "a refused write left a temp file");

  /* A failure after the temp file exists: the target is a directory, so rename fails. */
  char dir[512];
  tmp_path("is-a-dir.golden", dir, sizeof dir);
  EXPECT(mkdir(dir, 0755) == 0, "mkdir %s", dir);
  lce_code rc = lce_golden_write(dir, &g, &st);
  EXPECT(rc == LCE_EIO && strstr(st.msg, dir) != NULL, "rename onto a directory: %s (%s)", lce_code_name(rc), st.msg);
  EXPECT(temp_files_left() == 0, "a failed rename left its temp file");
  rmdir(dir);

  /* A directory that does not exist: no temp file can be made; the error names the path. */
  char nowhere[512];
  tmp_path("no/such/dir/x.golden", nowhere, sizeof nowhere);
  rc = lce_golden_write(nowhere, &g, &st);
  EXPECT(rc == LCE_EIO && strstr(st.msg, nowhere) != NULL, "missing directory: %s (%s)", lce_code_name(rc), st.msg);
  unlink(path), unlink(before);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <golden test data dir>\n", argv[0]);
    return 2;
  }
  data_dir = argv[1];
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(tmp_dir, sizeof tmp_dir, "%s/test_golden.XXXXXX", base);
  if (mkdtemp(tmp_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_bad_files();
  test_bad_in_memory();
  test_good_file();
  test_round_trip();
  test_write_failures();
  rmdir(tmp_dir);
  return lce_test_finish("test_golden");
}
