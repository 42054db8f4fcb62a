/* lce_golden.c — strict parser, atomic writer and lookup for golden bound files (format in
 * lce_golden.h).
 *
 * A golden file decides pass or fail for every subject, so the parser accepts exactly the format
 * and nothing near it: every deviation is an LCE_EPARSE naming "file:line: what is wrong", and a
 * file that parses always means what it says. The writer validates with the same rules before it
 * writes, so it can never produce a file the parser rejects, and it replaces the file atomically
 * (lce_file_replace) so that a crash or a full disk during golden regeneration never leaves a
 * half-written bound file behind. */
#define _POSIX_C_SOURCE 200809L /* open_memstream, strdup */

#include "lce_golden.h"
#include "lce_file.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_MAGIC "lcecheck-golden"
#define GOLDEN_VERSION "1"
#define MAX_LINE 4096
#define MAX_FIELDS (5 + LCE_TERM_COUNT) /* the model form naming every term */

static const char *const FORM_NAMES[] = {"const", "sqrtk", "lineark", "cond", "condk", "model"};
enum { FORM_COUNT = 6 };
static const char *const TERM_NAMES[LCE_TERM_COUNT] = {"1",     "cond",          "cond/sqrtn", "cond*sqrtv", "cond*sqrth",
                                                       "sqrtv", "sqrth",         "sqrtk",      "k",          "coh",
                                                       "ms*cond/sqrtn", "cond*v", "h",          "cond*h",     "rnd",
                                                       "pertok", "flip", "outr", "acc", "accn", "gsc", "flipn",
                                                       "rsum", "uo", "rndu", "pertokn", "rndn", "rnds", "outv"};

/* Every term's name in file order, space-separated (parse errors list them). */
static const char *term_list(void) {
  static char list[LCE_TERM_COUNT * 16];
  if (list[0] == '\0')
    for (int t = 0; t < LCE_TERM_COUNT; t++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", t ? " " : "", TERM_NAMES[t]);
  return list;
}

const char *lce_bound_form_name(lce_bound_form f) { return (unsigned)f < FORM_COUNT ? FORM_NAMES[f] : "?"; }
const char *lce_bound_term_name(lce_bound_term t) { return (unsigned)t < LCE_TERM_COUNT ? TERM_NAMES[t] : "?"; }

static int form_parse(const char *s, lce_bound_form *out) {
  for (int f = 0; f < FORM_COUNT; f++)
    if (strcmp(s, FORM_NAMES[f]) == 0) return *out = (lce_bound_form)f, 1;
  return 0;
}

/* Number of constants each fixed form takes (a; a and b; a, b and c). */
static int form_constants(lce_bound_form f) { return f == LCE_FORM_CONST ? 1 : f == LCE_FORM_CONDK ? 3 : 2; }

static int term_parse(const char *s, size_t len, lce_bound_term *out) {
  for (int t = 0; t < LCE_TERM_COUNT; t++)
    if (strlen(TERM_NAMES[t]) == len && strncmp(s, TERM_NAMES[t], len) == 0) return *out = (lce_bound_term)t, 1;
  return 0;
}

/* Subject class names are identifiers that also appear in file names and CLI arguments. */
static int class_char_ok(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
         ch == '-' || ch == '.' || ch == '/';
}

/* Checks a class name; on failure writes why into why and returns 0. */
static int class_name_ok(const char *s, char *why, size_t size) {
  size_t len = strlen(s);
  if (len == 0) return snprintf(why, size, "empty subject class"), 0;
  if (len >= sizeof(((lce_golden_entry *)0)->subject_class))
    return snprintf(why, size, "subject class '%.80s' longer than %zu characters", s,
                    sizeof(((lce_golden_entry *)0)->subject_class) - 1), 0;
  for (size_t i = 0; i < len; i++)
    if (!class_char_ok(s[i]))
      return snprintf(why, size, "invalid character '%c' (0x%02x) in subject class '%.80s' (allowed: A-Z a-z 0-9 _ - . /)",
                      s[i], (unsigned char)s[i], s), 0;
  return 1;
}

static int same_key(const lce_golden_entry *x, const lce_golden_entry *y) {
  return strcmp(x->subject_class, y->subject_class) == 0 && x->dtype == y->dtype && x->output == y->output &&
         x->metric == y->metric;
}

void lce_golden_free(lce_golden *g) {
  if (g == NULL) return;
  for (size_t i = 0; i < g->ncomments; i++) free(g->comments[i]);
  free(g->comments);
  free(g->entries);
  memset(g, 0, sizeof *g);
}

/* ---- parser --------------------------------------------------------------------------------- */

typedef struct parser {
  const char *name;
  int line;
  lce_golden *g;
  int *entry_lines; /* line of each entry, for duplicate messages */
  size_t cap_entries, cap_comments;
  lce_status *st;
} parser;

static lce_code parse_error(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static lce_code parse_error(parser *p, const char *fmt, ...) {
  char what[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return lce_fail(p->st, LCE_EPARSE, __FILE__, __LINE__, "%.300s:%d: %.420s", p->name, p->line, what);
}

static lce_code add_comment(parser *p, const char *text, size_t len) {
  lce_golden *g = p->g;
  if (g->ncomments == p->cap_comments) {
    size_t cap = p->cap_comments ? 2 * p->cap_comments : 8;
    char **grown = realloc(g->comments, cap * sizeof *grown);
    LCE_ALLOC_CHECK(p->st, grown);
    g->comments = grown;
    p->cap_comments = cap;
  }
  char *copy = malloc(len + 1);
  LCE_ALLOC_CHECK(p->st, copy);
  memcpy(copy, text, len);
  copy[len] = '\0';
  g->comments[g->ncomments++] = copy;
  return LCE_OK;
}

static lce_code add_entry(parser *p, const lce_golden_entry *e) {
  lce_golden *g = p->g;
  for (size_t i = 0; i < g->count; i++)
    if (same_key(&g->entries[i], e))
      return parse_error(p, "duplicate entry for %s %s %s %s (first on line %d)", e->subject_class,
                         lce_precision_name(e->dtype), lce_output_name(e->output), lce_metric_name(e->metric),
                         p->entry_lines[i]);
  if (g->count == p->cap_entries) {
    size_t cap = p->cap_entries ? 2 * p->cap_entries : 16;
    lce_golden_entry *grown = realloc(g->entries, cap * sizeof *grown);
    LCE_ALLOC_CHECK(p->st, grown);
    g->entries = grown;
    int *lines = realloc(p->entry_lines, cap * sizeof *lines);
    LCE_ALLOC_CHECK(p->st, lines);
    p->entry_lines = lines;
    p->cap_entries = cap;
  }
  p->entry_lines[g->count] = p->line;
  g->entries[g->count++] = *e;
  return LCE_OK;
}

/* One bound constant: a finite, non-negative number, the whole token (hex float or decimal). */
static lce_code parse_constant(parser *p, const char *which, const char *tok, double *out) {
  char *end = NULL;
  double x = strtod(tok, &end);
  if (end == tok) return parse_error(p, "constant %s: '%.80s' is not a number", which, tok);
  if (*end != '\0') return parse_error(p, "constant %s: trailing garbage '%.80s' after number", which, end);
  if (!isfinite(x)) return parse_error(p, "constant %s: non-finite value '%.80s'", which, tok);
  if (signbit(x)) return parse_error(p, "constant %s: negative value '%.80s' (bounds are >= 0)", which, tok);
  *out = x;
  return LCE_OK;
}

/* Splits buf in place on spaces and tabs; returns the number of fields (up to MAX_FIELDS + 1, so
 * that one too many is still seen). */
static int split_fields(char *buf, char **fields) {
  int n = 0;
  char *s = buf;
  while (*s != '\0' && n <= MAX_FIELDS) {
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '\0') break;
    fields[n++] = s;
    while (*s != '\0' && *s != ' ' && *s != '\t') s++;
    if (*s != '\0') *s++ = '\0';
  }
  return n;
}

/* The model form's <term>=<coef> fields: known terms, in lce_bound_term order, none twice. */
static lce_code parse_model_terms(parser *p, char **f, int n, lce_golden_entry *e) {
  if (n < 1) return parse_error(p, "form model names no term (expected <term>=<coef> ...)");
  if (n > LCE_TERM_COUNT) return parse_error(p, "form model takes at most %d terms", LCE_TERM_COUNT);
  int last = -1;
  for (int i = 0; i < n; i++) {
    const char *eq = strchr(f[i], '=');
    if (eq == NULL) return parse_error(p, "model term '%.80s' is not <term>=<coef>", f[i]);
    lce_bound_term t;
    if (!term_parse(f[i], (size_t)(eq - f[i]), &t))
      return parse_error(p, "unknown model term '%.*s' (expected one of: %s)", (int)(eq - f[i] > 40 ? 40 : eq - f[i]),
                         f[i], term_list());
    if ((int)t <= last)
      return parse_error(p, "model term '%s' %s (terms go once each, in the order %s)", TERM_NAMES[t],
                         (int)t == last ? "repeated" : "out of order", term_list());
    LCE_TRY(parse_constant(p, TERM_NAMES[t], eq + 1, &e->coef[t]));
    e->terms |= 1u << t;
    last = (int)t;
  }
  return LCE_OK;
}

static lce_code parse_entry(parser *p, char *buf) {
  char *f[MAX_FIELDS + 1];
  int n = split_fields(buf, f);
  if (n < 5)
    return parse_error(p, "expected '<class> <dtype> <output> <metric> <form> <constants>', got %d field%s", n,
                       n == 1 ? "" : "s");
  lce_golden_entry e;
  memset(&e, 0, sizeof e);
  char why[256];
  if (!class_name_ok(f[0], why, sizeof why)) return parse_error(p, "%s", why);
  snprintf(e.subject_class, sizeof e.subject_class, "%s", f[0]);
  if (!lce_precision_parse(f[1], &e.dtype))
    return parse_error(p, "unknown dtype '%.40s' (expected bf16, fp16, fp32 or tf32)", f[1]);
  if (!lce_output_parse(f[2], &e.output))
    return parse_error(p, "unknown output '%.40s' (expected loss, loss_token, lse, d_hidden, d_weight or d_embedding)",
                       f[2]);
  if (!lce_metric_parse(f[3], &e.metric))
    return parse_error(p, "unknown metric '%.40s' (expected relerr, bias, ulpfrac or maxscaled)", f[3]);
  if (!form_parse(f[4], &e.form))
    return parse_error(p, "unknown bound form '%.40s' (expected const, sqrtk, lineark, cond, condk or model)", f[4]);
  if (e.form == LCE_FORM_MODEL) {
    LCE_TRY(parse_model_terms(p, f + 5, n - 5, &e));
    return add_entry(p, &e);
  }
  int want = 5 + form_constants(e.form);
  if (n != want)
    return parse_error(p, "wrong field count: form %s takes %d fields, got %s%d", f[4], want,
                       n > MAX_FIELDS ? "more than " : "", n > MAX_FIELDS ? MAX_FIELDS : n);
  LCE_TRY(parse_constant(p, "a", f[5], &e.a));
  if (e.form != LCE_FORM_CONST) LCE_TRY(parse_constant(p, "b", f[6], &e.b));
  if (e.form == LCE_FORM_CONDK) LCE_TRY(parse_constant(p, "c", f[7], &e.c));
  return add_entry(p, &e);
}

static int is_blank(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (s[i] != ' ' && s[i] != '\t') return 0;
  return 1;
}

static lce_code parse_line(parser *p, const char *s, size_t len) {
  if (memchr(s, '\0', len)) return parse_error(p, "NUL byte in line");
  if (memchr(s, '\r', len)) return parse_error(p, "carriage return in line (golden files use \\n line endings)");
  if (len > MAX_LINE) return parse_error(p, "line longer than %d characters", MAX_LINE);
  char buf[MAX_LINE + 1];
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (p->line == 1) {
    if (strcmp(buf, GOLDEN_MAGIC " " GOLDEN_VERSION) == 0) return LCE_OK;
    if (strncmp(buf, GOLDEN_MAGIC " ", strlen(GOLDEN_MAGIC) + 1) == 0)
      return parse_error(p, "unsupported version '%.40s' (expected " GOLDEN_VERSION ")", buf + strlen(GOLDEN_MAGIC) + 1);
    return parse_error(p, "bad magic: expected '" GOLDEN_MAGIC " " GOLDEN_VERSION "', got '%.40s'", buf);
  }
  if (buf[0] == '#') return add_comment(p, buf, len);
  if (is_blank(buf, len)) return LCE_OK;
  if (buf[strspn(buf, " \t")] == '#') return parse_error(p, "comment must start in column 1");
  return parse_entry(p, buf);
}

lce_code lce_golden_parse(const char *text, size_t len, const char *name, lce_golden *g, lce_status *st) {
  LCE_CHECK(st, g != NULL && name != NULL && (text != NULL || len == 0), LCE_EINVAL, "lce_golden_parse: NULL argument");
  memset(g, 0, sizeof *g);
  snprintf(g->path, sizeof g->path, "%s", name);
  parser p = {.name = name, .line = 0, .g = g, .st = st};
  if (len == 0) {
    p.line = 1;
    return parse_error(&p, "empty file, expected '" GOLDEN_MAGIC " " GOLDEN_VERSION "'");
  }
  lce_code rc = LCE_OK;
  size_t pos = 0;
  while (pos < len && rc == LCE_OK) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - text) : len;
    p.line++;
    rc = parse_line(&p, text + pos, end - pos);
    pos = end + 1;
  }
  free(p.entry_lines);
  if (rc != LCE_OK) {
    lce_golden_free(g);
    snprintf(g->path, sizeof g->path, "%s", name);
  }
  return rc;
}

lce_code lce_golden_load(const char *path, lce_golden *g, lce_status *st) {
  LCE_CHECK(st, path != NULL && g != NULL, LCE_EINVAL, "lce_golden_load: NULL argument");
  memset(g, 0, sizeof *g);
  char *text;
  size_t len;
  LCE_TRY(lce_file_read(path, &text, &len, st));
  lce_code rc = lce_golden_parse(text, len, path, g, st);
  free(text);
  return rc;
}

/* ---- lookup --------------------------------------------------------------------------------- */

const lce_golden_entry *lce_golden_find(const lce_golden *g, const char *subject_class, lce_precision t,
                                        lce_output_id o, lce_metric m) {
  if (g == NULL || subject_class == NULL) return NULL;
  for (size_t i = 0; i < g->count; i++) {
    const lce_golden_entry *e = &g->entries[i];
    if (e->dtype == t && e->output == o && e->metric == m && strcmp(e->subject_class, subject_class) == 0) return e;
  }
  return NULL;
}

double lce_bound_term_scale(lce_bound_term t, const lce_bound_scales *s) {
  const double tcx = s->tcx > 1.0 ? s->tcx : 1.0; /* NaN too counts as 1 */
  switch (t) {
    case LCE_TERM_ONE: return 1.0;
    case LCE_TERM_COND: return s->cond;
    case LCE_TERM_COND_RSQRTN: return s->cond / sqrt(s->neff > 1.0 ? s->neff : 1.0);
    case LCE_TERM_COND_SQRTV: return s->cond * sqrt(s->vs);
    case LCE_TERM_COND_SQRTH: return s->cond * sqrt(s->h);
    case LCE_TERM_SQRTV: return sqrt(s->vs);
    case LCE_TERM_SQRTH: return sqrt(s->h);
    case LCE_TERM_SQRTK: return sqrt(s->k);
    case LCE_TERM_K: return s->k * tcx;
    case LCE_TERM_COH: return s->coh;
    case LCE_TERM_MS_COND_RSQRTN: return s->ms * s->cond / sqrt(s->neff > 1.0 ? s->neff : 1.0);
    case LCE_TERM_COND_V: return s->cond * s->vs;
    case LCE_TERM_H: return s->h * tcx;
    case LCE_TERM_COND_H: return s->cond * s->h * tcx;
    case LCE_TERM_RND: return s->rnd;
    case LCE_TERM_PERTOK: return s->pertok;
    case LCE_TERM_FLIP: return s->flip;
    case LCE_TERM_OUTR: return s->outr;
    case LCE_TERM_ACC: return s->acc;
    case LCE_TERM_ACCN: return s->accn;
    case LCE_TERM_GSC: return s->gsc;
    case LCE_TERM_FLIPN: return s->flipn;
    case LCE_TERM_RSUM: return s->rsum;
    case LCE_TERM_UO: return s->uo;
    case LCE_TERM_RNDU: return s->rndu;
    case LCE_TERM_PERTOKN: return s->pertokn;
    case LCE_TERM_RNDN: return s->rndn;
    case LCE_TERM_RNDS: return s->rnds;
    case LCE_TERM_OUTV: return s->outv;
    case LCE_TERM_COUNT: break;
  }
  return NAN;
}

int lce_golden_needs_mags(const lce_golden_entry *e) {
  if (e->form == LCE_FORM_COND || e->form == LCE_FORM_CONDK) return e->b != 0.0;
  if (e->form != LCE_FORM_MODEL) return 0;
  static const lce_bound_term mags[] = {
      LCE_TERM_COND, LCE_TERM_COND_RSQRTN, LCE_TERM_COND_SQRTV, LCE_TERM_COND_SQRTH, LCE_TERM_MS_COND_RSQRTN,
      LCE_TERM_COND_V, LCE_TERM_COND_H, LCE_TERM_RND, LCE_TERM_RNDN, LCE_TERM_RNDS, LCE_TERM_FLIP, LCE_TERM_FLIPN,
      LCE_TERM_OUTR, LCE_TERM_OUTV, LCE_TERM_ACC, LCE_TERM_ACCN, LCE_TERM_PERTOK, LCE_TERM_PERTOKN};
  for (size_t i = 0; i < sizeof mags / sizeof mags[0]; i++)
    if ((e->terms >> mags[i] & 1u) && e->coef[mags[i]] != 0.0) return 1;
  return 0;
}

double lce_golden_bound(const lce_golden_entry *e, const lce_bound_scales *s) {
  switch (e->form) {
    case LCE_FORM_CONST: return e->a;
    case LCE_FORM_SQRTK: return e->a + e->b * sqrt(s->k);
    case LCE_FORM_LINEARK: return e->a + e->b * s->k;
    case LCE_FORM_COND: return e->a + e->b * s->cond;
    case LCE_FORM_CONDK: return e->a + e->b * s->cond + e->c * s->k;
    case LCE_FORM_MODEL: {
      double sum = 0.0;
      /* A term the fit set to 0 adds nothing, also where its scale is infinite (cond of an output whose
       * exact value underflows its error scale): 0 * inf would make the bound NaN, which fails. */
      for (int t = 0; t < LCE_TERM_COUNT; t++)
        if ((e->terms >> t & 1u) && e->coef[t] != 0.0) sum += e->coef[t] * lce_bound_term_scale((lce_bound_term)t, s);
      return sum;
    }
  }
  return NAN; /* unreachable for entries that parsed; NaN fails every comparison */
}

/* ---- writer --------------------------------------------------------------------------------- */

/* The parser's rules, applied to an in-memory golden before anything touches the disk. */
static lce_code validate_for_write(const lce_golden *g, lce_status *st) {
  char why[256];
  for (size_t i = 0; i < g->ncomments; i++) {
    const char *s = g->comments[i];
    LCE_CHECK(st, s != NULL && s[0] == '#', LCE_EINVAL, "golden comment %zu does not start with '#'", i);
    LCE_CHECK(st, strpbrk(s, "\r\n") == NULL, LCE_EINVAL, "golden comment %zu contains a line break", i);
    LCE_CHECK(st, strlen(s) <= MAX_LINE, LCE_EINVAL, "golden comment %zu longer than %d characters", i, MAX_LINE);
  }
  for (size_t i = 0; i < g->count; i++) {
    const lce_golden_entry *e = &g->entries[i];
    LCE_CHECK(st, memchr(e->subject_class, '\0', sizeof e->subject_class) != NULL, LCE_EINVAL,
              "golden entry %zu: subject class not terminated", i);
    LCE_CHECK(st, class_name_ok(e->subject_class, why, sizeof why), LCE_EINVAL, "golden entry %zu: %s", i, why);
    LCE_CHECK(st, (unsigned)e->dtype < LCE_PREC_COUNT && (unsigned)e->output < LCE_OUT_COUNT &&
                      (unsigned)e->metric < LCE_METRIC_COUNT && (unsigned)e->form < FORM_COUNT,
              LCE_EINVAL, "golden entry %zu (%s): dtype, output, metric or form out of range", i, e->subject_class);
    LCE_CHECK(st, isfinite(e->a) && !signbit(e->a) && isfinite(e->b) && !signbit(e->b) && isfinite(e->c) &&
                      !signbit(e->c),
              LCE_EINVAL, "golden entry %zu (%s %s %s): constants must be finite and >= 0 (a = %g, b = %g, c = %g)", i,
              e->subject_class, lce_output_name(e->output), lce_metric_name(e->metric), e->a, e->b, e->c);
    int model = e->form == LCE_FORM_MODEL;
    LCE_CHECK(st, model ? (e->terms != 0 && e->terms < 1u << LCE_TERM_COUNT && e->a == 0 && e->b == 0 && e->c == 0)
                        : e->terms == 0,
              LCE_EINVAL, "golden entry %zu (%s %s %s): form %s with term mask 0x%x and a = %g, b = %g, c = %g", i,
              e->subject_class, lce_output_name(e->output), lce_metric_name(e->metric), lce_bound_form_name(e->form),
              e->terms, e->a, e->b, e->c);
    for (int t = 0; t < LCE_TERM_COUNT; t++)
      LCE_CHECK(st, isfinite(e->coef[t]) && !signbit(e->coef[t]) && (e->coef[t] == 0 || (e->terms >> t & 1u)),
                LCE_EINVAL, "golden entry %zu (%s %s %s): coefficient of term %s is %g (finite, >= 0, and 0 for a "
                "term the entry does not name)", i, e->subject_class, lce_output_name(e->output),
                lce_metric_name(e->metric), TERM_NAMES[t], e->coef[t]);
    if (model) continue;
    /* A const bound has no b in the file; a non-zero b would not survive the round trip. */
    LCE_CHECK(st, (e->form != LCE_FORM_CONST || e->b == 0) && (e->form == LCE_FORM_CONDK || e->c == 0), LCE_EINVAL,
              "golden entry %zu (%s %s %s): form %s with b = %g, c = %g (constants it does not take)", i,
              e->subject_class, lce_output_name(e->output), lce_metric_name(e->metric), lce_bound_form_name(e->form),
              e->b, e->c);
    for (size_t j = 0; j < i; j++)
      LCE_CHECK(st, !same_key(&g->entries[j], e), LCE_EINVAL, "golden entries %zu and %zu have the same key %s %s %s %s",
                j, i, e->subject_class, lce_precision_name(e->dtype), lce_output_name(e->output),
                lce_metric_name(e->metric));
  }
  return LCE_OK;
}

/* Stable order: class, then dtype, output and metric in enum order. Keys are unique, so the
 * order is total and the written file does not depend on the order of g->entries. */
static int entry_order(const void *pa, const void *pb) {
  const lce_golden_entry *a = *(const lce_golden_entry *const *)pa, *b = *(const lce_golden_entry *const *)pb;
  int c = strcmp(a->subject_class, b->subject_class);
  if (c != 0) return c;
  if (a->dtype != b->dtype) return a->dtype < b->dtype ? -1 : 1;
  if (a->output != b->output) return a->output < b->output ? -1 : 1;
  if (a->metric != b->metric) return a->metric < b->metric ? -1 : 1;
  return 0;
}

static int write_contents(FILE *f, const lce_golden *g, const lce_golden_entry *const *order) {
  if (fprintf(f, "%s %s\n", GOLDEN_MAGIC, GOLDEN_VERSION) < 0) return 0;
  for (size_t i = 0; i < g->ncomments; i++)
    if (fprintf(f, "%s\n", g->comments[i]) < 0) return 0;
  for (size_t i = 0; i < g->count; i++) {
    const lce_golden_entry *e = order[i];
    if (fprintf(f, "%s %s %s %s %s", e->subject_class, lce_precision_name(e->dtype), lce_output_name(e->output),
                lce_metric_name(e->metric), lce_bound_form_name(e->form)) < 0)
      return 0;
    for (int t = 0; t < LCE_TERM_COUNT; t++)
      if ((e->terms >> t & 1u) && fprintf(f, " %s=%a", TERM_NAMES[t], e->coef[t]) < 0) return 0;
    if (e->form != LCE_FORM_MODEL && fprintf(f, " %a", e->a) < 0) return 0;
    if (e->form != LCE_FORM_CONST && e->form != LCE_FORM_MODEL && fprintf(f, " %a", e->b) < 0) return 0;
    if (e->form == LCE_FORM_CONDK && fprintf(f, " %a", e->c) < 0) return 0;
    if (fputc('\n', f) == EOF) return 0;
  }
  return 1;
}

lce_code lce_golden_write(const char *path, const lce_golden *g, lce_status *st) {
  LCE_CHECK(st, path != NULL && g != NULL, LCE_EINVAL, "lce_golden_write: NULL argument");
  LCE_TRY(validate_for_write(g, st));
  const lce_golden_entry **order = malloc((g->count ? g->count : 1) * sizeof *order);
  LCE_ALLOC_CHECK(st, order);
  for (size_t i = 0; i < g->count; i++) order[i] = &g->entries[i];
  qsort(order, g->count, sizeof *order, entry_order);
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  int ok = f != NULL && write_contents(f, g, order);
  if (f != NULL) ok = fclose(f) == 0 && ok;
  free(order);
  lce_code rc = ok ? lce_file_replace(path, text, size, st)
                   : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "golden file '%s': out of memory", path);
  free(text);
  return rc;
}
