/* oracle_reference.c — committed reference outputs, re-derived by every build (as MPFR's own tests
 * keep tabulated values): data/oracle_reference.txt holds, for a fixed set of small cases, every
 * element of every output as tier 0 computed it, in hex floats.
 *
 *   oracle_reference FILE           the test: both tiers recompute each case and must give, element
 *                                   by element, the same decisive flag, bit for bit the same value
 *                                   rounded to the output format where decisive (the tier claims it
 *                                   is the correct rounding) and |value - file value| <= the tier's
 *                                   bound + the file's (bit for bit where both bounds are 0: exact)
 *   oracle_reference --write FILE   writes the file from tier 0 over the cases of the table below
 *
 * File format (strict; any malformed line is an error with file and line):
 *   lcecheck-oracle-reference 1
 *   # comments (provenance)
 *   case <case id>
 *   <output> <index> <decisive 0|1> <rounded %a> <value %a> <err %a>     every element, in order
 *   end
 * A negative control perturbs one file value by 4x both bounds and requires the check to catch it. */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_fast.h"
#include "lce_oracle.h"
#include "lce_test.h"

#define MAGIC "lcecheck-oracle-reference 1"

/* The cases: every dtype (and tf32 GEMMs), tied and untied, tp 1 and 2 with padding, each
 * reduction, ignored labels, every loss option, and the distributions that stress certification
 * (peaked and confident rows, ties, a poisoned input, subnormal hidden values, very negative rows). */
static const char *const CASES[] = {
    "bf16.tied.tp1.n4.h8.v24.vp24.vc8.mean.ign25.prior.hard.s11",
    "bf16.untied.tp2.n3.h6.v20.vp24.vc5.none.ign0.lsm100.cw.prior.confident.s12",
    "fp16.tied.tp1.n4.h8.v16.vp16.vc16.sum.ign25.zl100.fresh.negative.s13",
    "fp16.untied.tp1.n3.h5.v18.vp18.vc6.mean.ign0.sc30.prior.ties.s14",
    "fp32.tied.tp2.n4.h6.v16.vp20.vc4.mean.ign25.lsm200.zl10.sc15.cw.prior.peaked.s15",
    "fp32.untied.tp1.n3.h8.v12.vp12.vc3.sum.ign0.tf32.prior.subnormal.s16",
    "bf16.tied.tp1.n3.h4.v10.vp10.vc10.mean.ign0.prior.poison.s17",
    "fp32.tied.tp1.n2.h4.v8.vp8.vc8.none.ign0.fresh.tmin.s18",
};

typedef struct ref_element {
  int output, decisive;
  int64_t index;
  double rounded, value, err;
} ref_element;

typedef struct ref_case {
  char id[256];
  ref_element *e;
  int64_t count, cap;
} ref_case;

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

static int write_file(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return fprintf(stderr, "%s: cannot write\n", path), 1;
  fprintf(f, "%s\n# Every element of every output of the cases below as tier 0 (MPFR %s, %d bits) computes\n"
             "# it: output index decisive rounded value err (hex floats). Written by\n"
             "#   build/tests/oracle_reference --write reference/tests/data/oracle_reference.txt\n"
             "# and re-derived by both tiers in every build (ctest oracle_reference).\n",
          MAGIC, mpfr_get_version(), LCE_ORACLE_PREC);
  for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
    lce_case c;
    lce_tensors t;
    lce_oracle_result r;
    lce_status st = {0};
    if (lce_case_parse(CASES[k], &c, &st) != LCE_OK || lce_case_generate(&c, &t, &st) != LCE_OK ||
        lce_oracle_run(&c, &t, &r, &st) != LCE_OK)
      return fprintf(stderr, "%s: %s\n", CASES[k], st.msg), fclose(f), 1;
    fprintf(f, "case %s\n", CASES[k]);
    for (int o = 0; o < LCE_OUT_COUNT; o++)
      for (int64_t i = 0; i < r.out[o].count; i++)
        fprintf(f, "%s %lld %d %a %a %a\n", lce_output_name((lce_output_id)o), (long long)i, r.out[o].decisive[i],
                r.out[o].rounded[i], r.out[o].value[i], r.out[o].err[i]);
    fprintf(f, "end\n");
    lce_oracle_free(&r);
    lce_tensors_free(&t);
  }
  return fclose(f) != 0;
}

/* Parses path into cases (at most max); returns the count, or -1 after printing file:line. */
static int read_file(const char *path, ref_case *cases, int max) {
  FILE *f = fopen(path, "r");
  if (!f) return fprintf(stderr, "%s: cannot open\n", path), -1;
  char line[512];
  int ln = 0, n = 0, in_case = 0, ok = 1;
  while (ok && fgets(line, sizeof line, f)) {
    ln++;
    line[strcspn(line, "\n")] = '\0';
    if (ln == 1) {
      ok = strcmp(line, MAGIC) == 0;
      continue;
    }
    if (line[0] == '#' || (line[0] == '\0' && !in_case)) continue;
    if (!in_case) {
      ok = strncmp(line, "case ", 5) == 0 && n < max && strlen(line + 5) < sizeof cases[n].id;
      if (ok) memset(&cases[n], 0, sizeof cases[n]), snprintf(cases[n].id, sizeof cases[n].id, "%s", line + 5), in_case = 1;
      continue;
    }
    if (strcmp(line, "end") == 0) {
      in_case = 0, n++;
      continue;
    }
    ref_case *rc = &cases[n];
    if (rc->count == rc->cap) {
      rc->cap = rc->cap ? 2 * rc->cap : 256;
      ref_element *e = realloc(rc->e, (size_t)rc->cap * sizeof *e);
      if (!e) return fprintf(stderr, "out of memory\n"), fclose(f), -1;
      rc->e = e;
    }
    ref_element *e = &rc->e[rc->count];
    char name[32], rounded[64], value[64], err[64], *end;
    long long index;
    lce_output_id o;
    ok = sscanf(line, "%31s %lld %d %63s %63s %63s", name, &index, &e->decisive, rounded, value, err) == 6 &&
         lce_output_parse(name, &o) && (e->decisive == 0 || e->decisive == 1) && index >= 0;
    e->output = (int)o, e->index = index;
    e->rounded = strtod(rounded, &end), ok = ok && *end == '\0';
    e->value = strtod(value, &end), ok = ok && *end == '\0';
    e->err = strtod(err, &end), ok = ok && *end == '\0' && e->err >= 0;
    rc->count++;
  }
  fclose(f);
  if (!ok) return fprintf(stderr, "%s:%d: malformed line (expected %s)\n", path, ln,
                          ln == 1 ? MAGIC : "'case ID', 'end' or 'output index decisive rounded value err'"), -1;
  if (in_case) return fprintf(stderr, "%s:%d: case without 'end'\n", path, ln), -1;
  return n;
}

/* Elements of res that disagree with the file's case; prints the first few when report is set. */
static int64_t check_tier(const char *tier, const ref_case *rc, const lce_oracle_result *res, int report) {
  int64_t bad = 0, seen[LCE_OUT_COUNT] = {0};
  for (int64_t j = 0; j < rc->count; j++) {
    const ref_element *e = &rc->e[j];
    const lce_ref_output *r = &res->out[e->output];
    int ok = e->index < r->count && e->index == seen[e->output]++;
    if (ok) {
      const int64_t i = e->index;
      const double v = r->value[i], lim = r->err[i] + e->err;
      ok = r->decisive[i] == e->decisive && (!e->decisive || same_bits(r->rounded[i], e->rounded) ||
                                             (r->rounded[i] == 0 && e->rounded == 0)) && /* a zero's sign: lce_fast.c */
           (isfinite(v) || isfinite(e->value) ? fabs(v - e->value) <= lim * (1 + 0x1p-50) : same_bits(v, e->value));
      if (!ok && report && bad < 5)
        fprintf(stderr, "FAIL %s: %s %s[%lld]: decisive %d rounded %a value %a err %.3g; file: %d %a %a %.3g\n", tier,
                rc->id, lce_output_name((lce_output_id)e->output), (long long)i, r->decisive[i], r->rounded[i], v,
                r->err[i], e->decisive, e->rounded, e->value, e->err);
    } else if (report && bad < 5) {
      fprintf(stderr, "FAIL %s: %s: element %lld of %s out of order or beyond %lld elements\n", tier, rc->id,
              (long long)e->index, lce_output_name((lce_output_id)e->output), (long long)r->count);
    }
    bad += !ok;
  }
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    if (seen[o] != res->out[o].count) {
      if (report) fprintf(stderr, "FAIL %s: %s: the file has %lld %s elements, the tier %lld\n", tier, rc->id,
                          (long long)seen[o], lce_output_name((lce_output_id)o), (long long)res->out[o].count);
      bad++;
    }
  return bad;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_file(argv[2]);
  if (argc != 2) return fprintf(stderr, "usage: oracle_reference FILE | --write FILE\n"), 2;
  enum { MAX_CASES = 64 };
  static ref_case cases[MAX_CASES];
  const int n = read_file(argv[1], cases, MAX_CASES);
  if (n < 0) return 1;
  EXPECT(n == (int)(sizeof CASES / sizeof CASES[0]), "the file has %d cases, the table %zu: rewrite it", n,
         sizeof CASES / sizeof CASES[0]);
  int64_t elements = 0, decisive = 0, control = 0;
  for (int k = 0; k < n; k++) {
    ref_case *rc = &cases[k];
    lce_case c;
    lce_tensors t;
    lce_status st = {0};
    if (lce_case_parse(rc->id, &c, &st) != LCE_OK || lce_case_generate(&c, &t, &st) != LCE_OK) {
      EXPECT(0, "%s: %s", rc->id, st.msg);
      continue;
    }
    lce_oracle_result r0, r1;
    EXPECT(lce_oracle_run(&c, &t, &r0, &st) == LCE_OK, "%s: tier 0: %s", rc->id, st.msg);
    EXPECT(lce_fast_run(&c, &t, &r1, NULL, &st) == LCE_OK, "%s: tier 1: %s", rc->id, st.msg);
    EXPECT(check_tier("tier 0", rc, &r0, 1) == 0, "%s: tier 0 does not reproduce the committed outputs", rc->id);
    EXPECT(check_tier("tier 1", rc, &r1, 1) == 0, "%s: tier 1 does not reproduce the committed outputs", rc->id);
    elements += rc->count;
    for (int64_t j = 0; j < rc->count; j++) decisive += rc->e[j].decisive;
    /* Negative control: a finite file value moved by 4x both bounds (and 2^-40 of itself) is caught. */
    for (int64_t j = 0; j < rc->count && !control; j++) {
      ref_element *e = &rc->e[j];
      if (!isfinite(e->value) || e->value == 0) continue;
      const double saved = e->value;
      e->value += fmax(4.0 * (e->err + r1.out[e->output].err[e->index]), 0x1p-40 * fabs(saved));
      control = 1;
      EXPECT(check_tier("control", rc, &r1, 0) == 1, "negative control: %s element %lld moved, not caught", rc->id,
             (long long)j);
      e->value = saved;
    }
    lce_oracle_free(&r0), lce_oracle_free(&r1);
    lce_tensors_free(&t);
    free(rc->e);
  }
  EXPECT(control, "no finite non-zero element for the negative control");
  printf("oracle_reference: %d cases, %lld elements (%lld decisive) reproduced by tier 0 and tier 1\n", n,
         (long long)elements, (long long)decisive);
  return lce_test_finish("oracle_reference");
}
