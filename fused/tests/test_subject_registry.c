/* test_subject_registry.c — the subject registry and lce_subject_supports():
 *   fused-host is registered first and fused-host-sm90 second, each with its golden class and every
 *   semantic capability;
 *   names are unique and lookups of unknown names fail; mutants appear exactly when the build has
 *   them (LCE_TEST_MUTANT_COUNT, from mutants.cmake), each "mutant/..." with LCE_CAP_MUTANT and
 *   golden class "fused-host";
 *   supports() refuses a case for each missing capability and says which. */
#include <stdio.h>
#include <string.h>

#include "fused_test_util.h"

#ifndef LCE_TEST_MUTANT_COUNT
#error "LCE_TEST_MUTANT_COUNT must be defined by the build (0 without mutants)"
#endif

static void test_lookup(void) {
  size_t count = lce_subject_count(), host_count = 0;
  for (size_t i = 0; i < count; i++) host_count += !(lce_subject_at(i)->caps & LCE_CAP_NEEDS_GPU);
  /* GPU subjects (fused-cuda and its mutants, in CUDA builds) are tested by the gpu label. */
  EXPECT(host_count == 2 + (size_t)LCE_TEST_MUTANT_COUNT, "%zu host subjects, want 2 + %d mutants", host_count,
         LCE_TEST_MUTANT_COUNT);
  const lce_subject *host = lce_subject_find("fused-host");
  EXPECT(host != NULL && host == lce_subject_at(0), "fused-host is not the first subject");
  if (host) {
    EXPECT(strcmp(host->golden_class, "fused-host") == 0, "fused-host golden class %s", host->golden_class);
    EXPECT(host->caps == LCE_CAP_ALL_SEMANTICS, "fused-host caps %#x", host->caps);
  }
  const lce_subject *sm90 = lce_subject_find("fused-host-sm90");
  EXPECT(sm90 != NULL && sm90 == lce_subject_at(1), "fused-host-sm90 is not the second subject");
  if (sm90) {
    EXPECT(strcmp(sm90->golden_class, "fused-host-sm90") == 0, "fused-host-sm90 golden class %s", sm90->golden_class);
    EXPECT(sm90->caps == LCE_CAP_ALL_SEMANTICS, "fused-host-sm90 caps %#x", sm90->caps);
  }
  EXPECT(lce_subject_at(count) == NULL, "lce_subject_at(count) is not NULL");
  EXPECT(lce_subject_find("no-such-subject") == NULL, "unknown name found");
  EXPECT(lce_subject_find("mutant/") == NULL, "a name prefix was found");
  EXPECT(lce_subject_find(NULL) == NULL, "NULL name found");
  size_t mutants = 0;
  for (size_t i = 0; i < count; i++) {
    const lce_subject *s = lce_subject_at(i);
    EXPECT(s && s->name && s->golden_class && s->description && s->description[0] && s->run,
           "subject %zu is incomplete", i);
    if (!s) continue;
    EXPECT(lce_subject_find(s->name) == s, "%s: lookup finds another subject (duplicate name?)", s->name);
    if (s->caps & LCE_CAP_NEEDS_GPU) continue;
    int named_mutant = strncmp(s->name, "mutant/", 7) == 0;
    EXPECT(named_mutant == !!(s->caps & LCE_CAP_MUTANT), "%s: name and LCE_CAP_MUTANT disagree", s->name);
    if (named_mutant) {
      mutants++;
      EXPECT(i > 1, "a mutant precedes the production subjects");
      EXPECT(strcmp(s->golden_class, "fused-host") == 0, "%s: golden class %s", s->name, s->golden_class);
      EXPECT((s->caps & LCE_CAP_ALL_SEMANTICS) == LCE_CAP_ALL_SEMANTICS, "%s: caps %#x", s->name, s->caps);
    }
    printf("  %-34s %-11s caps %#07x  %.60s\n", s->name, s->golden_class, s->caps, s->description);
  }
  EXPECT(mutants == (size_t)LCE_TEST_MUTANT_COUNT, "%zu mutants registered, want %d", mutants, LCE_TEST_MUTANT_COUNT);
#if LCE_TEST_MUTANT_COUNT > 0
  EXPECT(lce_subject_find("mutant/bf16-dhidden-accum") != NULL, "mutant/bf16-dhidden-accum missing");
  EXPECT(lce_subject_find("mutant/tied-weight-when-untied") != NULL, "mutant/tied-weight-when-untied missing");
#endif
}

/* One case that needs a capability, and the word the refusal must contain. */
typedef struct needs {
  unsigned cap;
  const char *word;
  lce_case c;
} needs;

static void test_supports(void) {
  lce_case plain = lce_case_default(); /* bf16, tied, tp 1, vp == v, mean, fresh: needs only BF16 */
  plain.tied = 1, plain.tp = 1, plain.vp = plain.v, plain.reduction = LCE_RED_MEAN, plain.prior_grad = 0;
  needs list[] = {{LCE_CAP_FP16, "fp16", plain}, {LCE_CAP_FP32, "fp32", plain}, {LCE_CAP_UNTIED, "untied", plain},
                  {LCE_CAP_TP, "tp", plain},     {LCE_CAP_PADDING, "padded", plain},
                  {LCE_CAP_RED_NONE, "none", plain}, {LCE_CAP_PRIOR_GRAD, "prior", plain}};
  list[0].c.dtype = LCE_FP16, list[1].c.dtype = LCE_FP32, list[2].c.tied = 0, list[3].c.tp = 2;
  list[3].c.vp = 128, list[3].c.v = 128, list[4].c.vp = plain.v + 64;
  list[5].c.reduction = LCE_RED_NONE, list[6].c.prior_grad = 1;

  char why[128];
  lce_subject bf16_only = {"test/bf16-only", "fused-host", "bf16 only", LCE_CAP_BF16, NULL, NULL, NULL, NULL, NULL, NULL};
  EXPECT(lce_subject_supports(&bf16_only, &plain, why, sizeof why) == 1, "plain bf16 case refused: %s", why);
  EXPECT(why[0] == '\0', "a supported case has a reason: %s", why);
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
    lce_status st = {0};
    EXPECT(lce_case_validate(&list[i].c, &st) == LCE_OK, "case %zu invalid: %s", i, st.msg);
    EXPECT(lce_subject_supports(&bf16_only, &list[i].c, why, sizeof why) == 0, "case needing %s accepted",
           list[i].word);
    EXPECT(strstr(why, list[i].word) != NULL, "refusal \"%s\" does not mention %s", why, list[i].word);
    lce_subject with = bf16_only; /* the one missing capability added: accepted */
    with.caps |= list[i].cap;
    EXPECT(lce_subject_supports(&with, &list[i].c, why, sizeof why) == 1, "case needing %s refused: %s",
           list[i].word, why);
    lce_subject all_but = {"test/all-but", "fused-host", "all but one", LCE_CAP_ALL_SEMANTICS & ~list[i].cap, NULL, NULL, NULL, NULL, NULL, NULL};
    EXPECT(lce_subject_supports(&all_but, &list[i].c, why, sizeof why) == 0,
           "subject without the capability for %s accepted", list[i].word);
  }
  const lce_subject *host = lce_subject_find("fused-host");
  for (size_t i = 0; host && i < sizeof list / sizeof list[0]; i++)
    EXPECT(lce_subject_supports(host, &list[i].c, why, sizeof why) == 1, "fused-host refuses %s: %s", list[i].word,
           why);
  EXPECT(lce_subject_supports(NULL, &plain, why, sizeof why) == 0, "NULL subject supports a case");
  EXPECT(lce_subject_supports(host, &plain, NULL, 0) == 1, "why may be NULL");
}

/* The repro line pastes as printed: a name with spaces or quotes becomes one shell word, a plain one
 * stays as it is, and a subject's own repro options (the exchange door's) replace --subject NAME. */
static void test_repro_line(void) {
  static const char *const cases[][2] = {
      {"fused-host", "fused-host"},
      {"mutant/bf16-dhidden-accum", "mutant/bf16-dhidden-accum"},
      {"plugin:build/examples/libexample.so#seed-bug", "plugin:build/examples/libexample.so#seed-bug"},
      {"exec:python3 run.py --bug x", "'exec:python3 run.py --bug x'"},
      {"it's", "'it'\\''s'"},
      {"", "''"},
      {"#x", "'#x'"},
      {"a$b", "'a$b'"},
      {"=x", "'=x'"},
      {"a=b", "a=b"},
  };
  char buf[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const size_t n = lce_shell_quote(cases[i][0], buf, sizeof buf);
    EXPECT(strcmp(buf, cases[i][1]) == 0, "quote(%s) = %s, expected %s", cases[i][0], buf, cases[i][1]);
    EXPECT(n == strlen(cases[i][1]) && lce_shell_quote(cases[i][0], NULL, 0) == n, "quote(%s) says %zu", cases[i][0], n);
  }
  EXPECT(lce_shell_quote("a b", buf, 3) == 5 && strlen(buf) == 2, "quote into 3 bytes: %s", buf); /* 5: cut */
  lce_subject s = {"exec:runner --bug x", "fused-host", "", LCE_CAP_BF16, NULL, NULL, NULL, NULL, NULL, NULL};
  lce_subject_repro_line(&s, NULL, "ID", buf, sizeof buf);
  EXPECT(strcmp(buf, "build/lcecheck repro --subject 'exec:runner --bug x' ID") == 0, "exec repro: %s", buf);
  lce_subject_repro_line(&s, "--oracle mpfr", "ID", buf, sizeof buf);
  EXPECT(strcmp(buf, "build/lcecheck repro --subject 'exec:runner --bug x' --oracle mpfr ID") == 0, "options: %s", buf);
  s.repro_args = "--dir 'a b' --subject-name k --golden-class fused-host";
  lce_subject_repro_line(&s, NULL, "ID", buf, sizeof buf);
  EXPECT(strcmp(buf, "build/lcecheck repro --dir 'a b' --subject-name k --golden-class fused-host ID") == 0,
         "exchange repro: %s", buf);
  lce_subject_repro_line(&s, NULL, "ID", buf, 40); /* too long: said, never cut */
  EXPECT(strncmp(buf, "(the repro command is longer", 28) == 0, "a repro line cut: %s", buf);
}

int main(void) {
  test_lookup();
  test_supports();
  test_repro_line();
  return lce_test_finish("test_subject_registry");
}
