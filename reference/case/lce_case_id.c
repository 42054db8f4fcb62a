/* lce_case_id.c — the stable, human-readable case id (format and strict parse; see lce_case.h).
 *
 * Tokens appear in one fixed order so that every case has exactly one id: a parsed id formats back
 * to the same string, and ids can be compared as strings. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_case.h"

char *lce_case_format(const lce_case *c, char *buf, size_t size) {
  char opt[160] = ""; /* the optional tokens, each only when not at its default, in fixed order */
  size_t o = 0;
#define OPT(...) (o += (size_t)snprintf(opt + o, sizeof opt - o, __VA_ARGS__))
  if (c->ignore_index != LCE_DEFAULT_IGNORE_INDEX) OPT(".ii%lld", (long long)c->ignore_index);
  if (c->token_chunk > 0) OPT(".tc%lld", (long long)c->token_chunk);
  if (c->smoothing != LCE_SMOOTH_NONE)
    OPT(".%s%d", c->smoothing == LCE_SMOOTH_MEGATRON ? "lsm" : "ls", c->smoothing_permille);
  if (c->z_loss_e5 > 0) OPT(".zl%d", c->z_loss_e5);
  if (c->softcap > 0) OPT(".sc%d", c->softcap);
  if (c->class_weights) OPT(".cw");
  if (c->gemm == LCE_GEMM_TF32) OPT(".tf32");
#undef OPT
  snprintf(buf, size, "%s.%s.tp%d.n%lld.h%lld.v%lld.vp%lld.vc%lld.%s.ign%d%s.%s.%s.s%" PRIu64,
           lce_dtype_name(c->dtype), c->tied ? "tied" : "untied", c->tp, (long long)c->n, (long long)c->h,
           (long long)c->v, (long long)c->vp, (long long)c->vocab_chunk, lce_reduction_name(c->reduction),
           c->ignore_pct, opt, c->prior_grad ? "prior" : "fresh", lce_dist_name(c->dist), c->seed);
  return buf;
}

/* The decimal digits after prefix in token tok (a '-' first where is_signed) as the bits of an int64_t
 * (is_signed) or a uint64_t; 0 on any malformation or overflow. */
static int parse_number_token(const char *tok, const char *prefix, int is_signed, uint64_t *bits) {
  size_t lp = strlen(prefix);
  if (strncmp(tok, prefix, lp) != 0) return 0;
  const char *p = tok + lp, *q = is_signed && *p == '-' ? p + 1 : p;
  if (*q == '\0') return 0;
  for (; *q; q++)
    if (*q < '0' || *q > '9') return 0;
  errno = 0;
  *bits = is_signed ? (uint64_t)strtoll(p, NULL, 10) : strtoull(p, NULL, 10);
  return errno != ERANGE;
}

static int parse_int_token(const char *tok, const char *prefix, int64_t *out) {
  uint64_t bits;
  if (!parse_number_token(tok, prefix, 1, &bits)) return 0;
  *out = (int64_t)bits;
  return 1;
}

lce_code lce_case_parse(const char *id, lce_case *out, lce_status *st) {
  LCE_CHECK(st, id != NULL, LCE_EPARSE, "case id is NULL");
  char buf[256];
  LCE_CHECK(st, strlen(id) < sizeof buf, LCE_EPARSE, "case id too long (%zu characters)", strlen(id));
  strcpy(buf, id);
  char *tok[24];
  int nt = 0;
  for (char *p = buf;;) { /* split on '.', rejecting empty tokens */
    LCE_CHECK(st, nt < 24, LCE_EPARSE, "case id '%s' has too many tokens", id);
    tok[nt++] = p;
    char *dot = strchr(p, '.');
    LCE_CHECK(st, dot != p && *p != '\0', LCE_EPARSE, "case id '%s' has an empty token", id);
    if (dot == NULL) break;
    *dot = '\0';
    p = dot + 1;
  }
  LCE_CHECK(st, nt >= 13 && nt <= 20, LCE_EPARSE,
            "case id '%s' has %d dot-separated tokens; expected 13 to 20, e.g. "
            "bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1", id, nt);
  lce_case c = lce_case_default();
  int64_t x;
  int t = 0;
  LCE_CHECK(st, lce_dtype_parse(tok[t], &c.dtype), LCE_EPARSE, "case id '%s': unknown dtype '%s' (bf16|fp16|fp32)", id, tok[t]);
  t++;
  LCE_CHECK(st, strcmp(tok[t], "tied") == 0 || strcmp(tok[t], "untied") == 0, LCE_EPARSE,
            "case id '%s': expected tied|untied, got '%s'", id, tok[t]);
  c.tied = strcmp(tok[t++], "tied") == 0;
  static const char *const prefixes[] = {"tp", "n", "h", "v", "vp", "vc"};
  int64_t vals[6];
  for (int k = 0; k < 6; k++, t++) {
    /* "v" must not accept "vp…"/"vc…": the digit check after the prefix rejects them. */
    LCE_CHECK(st, parse_int_token(tok[t], prefixes[k], &vals[k]), LCE_EPARSE,
              "case id '%s': expected %s<integer>, got '%s'", id, prefixes[k], tok[t]);
  }
  LCE_CHECK(st, vals[0] >= 1 && vals[0] <= 1024, LCE_EPARSE, "case id '%s': tp %lld outside [1, 1024]", id,
            (long long)vals[0]);
  c.tp = (int32_t)vals[0];
  c.n = vals[1]; c.h = vals[2]; c.v = vals[3]; c.vp = vals[4]; c.vocab_chunk = vals[5];
  LCE_CHECK(st, lce_reduction_parse(tok[t], &c.reduction), LCE_EPARSE,
            "case id '%s': unknown reduction '%s' (none|sum|mean)", id, tok[t]);
  t++;
  LCE_CHECK(st, parse_int_token(tok[t], "ign", &x) && x >= 0 && x <= 100, LCE_EPARSE,
            "case id '%s': expected ign<percent 0..100>, got '%s'", id, tok[t]);
  c.ignore_pct = (int32_t)x;
  t++;
  /* Optional tokens, in their fixed order, up to the three closing ones. */
  int stage = 0;
  while (t < nt - 3) {
    const char *k = tok[t];
    int64_t val;
    if (stage < 1 && parse_int_token(k, "ii", &val)) c.ignore_index = val, stage = 1;
    else if (stage < 2 && parse_int_token(k, "tc", &val) && val >= 1) c.token_chunk = val, stage = 2;
    else if (stage < 3 && parse_int_token(k, "lsm", &val) && val >= 0 && val < 1000)
      c.smoothing = LCE_SMOOTH_MEGATRON, c.smoothing_permille = (int32_t)val, stage = 3;
    else if (stage < 3 && parse_int_token(k, "ls", &val) && val >= 0 && val < 1000)
      c.smoothing = LCE_SMOOTH_PYTORCH, c.smoothing_permille = (int32_t)val, stage = 3;
    else if (stage < 4 && parse_int_token(k, "zl", &val) && val >= 1 && val <= 1000000) c.z_loss_e5 = (int32_t)val, stage = 4;
    else if (stage < 5 && parse_int_token(k, "sc", &val) && val >= 1 && val <= 1000000) c.softcap = (int32_t)val, stage = 5;
    else if (stage < 6 && strcmp(k, "cw") == 0) c.class_weights = 1, stage = 6;
    else if (stage < 7 && strcmp(k, "tf32") == 0) c.gemm = LCE_GEMM_TF32, stage = 7;
    else if ((strcmp(k, "prior") == 0 || strcmp(k, "fresh") == 0) &&
             parse_number_token(tok[t + 2], "s", 0, &c.seed)) /* the closing three, then more (t < nt - 3) */
      return lce_fail(st, LCE_EPARSE, __FILE__, __LINE__,
                      "case id '%s': unexpected token '%s' after the seed '%s' (an id ends with prior|fresh, the "
                      "value distribution and s<seed>)", id, tok[t + 3], tok[t + 2]);
    else
      return lce_fail(st, LCE_EPARSE, __FILE__, __LINE__,
                      "case id '%s': unexpected token '%s' (optional tokens, in this order: ii<index> tc<tokens> "
                      "ls<permille>|lsm<permille> zl<lambda/1e-5> sc<cap> cw tf32)", id, k);
    t++;
  }
  LCE_CHECK(st, strcmp(tok[t], "prior") == 0 || strcmp(tok[t], "fresh") == 0, LCE_EPARSE,
            "case id '%s': expected prior|fresh, got '%s'", id, tok[t]);
  c.prior_grad = strcmp(tok[t++], "prior") == 0;
  if (!lce_dist_parse(tok[t], &c.dist)) {
    char names[256] = "";
    for (int d = 0; d < LCE_DIST_COUNT; d++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", d ? "|" : "", lce_dist_name((lce_dist)d));
    return lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "case id '%s': unknown value distribution '%s' (%s)", id,
                    tok[t], names);
  }
  t++;
  LCE_CHECK(st, parse_number_token(tok[t], "s", 0, &c.seed), LCE_EPARSE,
            "case id '%s': expected s<seed> (unsigned 64-bit), got '%s'", id, tok[t]);
  LCE_TRY(lce_case_validate(&c, st));
  *out = c;
  return LCE_OK;
}
