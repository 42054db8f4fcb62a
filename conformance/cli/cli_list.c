/* cli_list.c — `lcecheck list`: the subjects (production first, then mutants), the matrices and the
 * reference tiers (with whether each can run here). */
#include <mpfr.h>
#include <string.h>

#include "cli_common.h"
#include "lce_matrix.h"

static const struct { unsigned bit; const char *name; } CAPS[] = {
    {LCE_CAP_BF16, "bf16"}, {LCE_CAP_FP16, "fp16"}, {LCE_CAP_FP32, "fp32"}, {LCE_CAP_UNTIED, "untied"},
    {LCE_CAP_TP, "tp"}, {LCE_CAP_PADDING, "padding"}, {LCE_CAP_RED_NONE, "reduction-none"},
    {LCE_CAP_PRIOR_GRAD, "prior-grad"}, {LCE_CAP_MUTANT, "mutant"}, {LCE_CAP_NEEDS_GPU, "gpu"},
};

int cli_list(void) {
  cli_args a;
  int rc = cli_parse_args(&a);
  if (rc != CLI_PASS) return rc;
  size_t ns = lce_subject_count(), nm = lce_matrix_count(), ncaps = sizeof CAPS / sizeof CAPS[0];
  if (a.json) {
    cli_json_begin();
    printf(",\"mpfr_version\":\"%s\",\"subjects\":[", mpfr_get_version());
    for (size_t i = 0; i < ns; i++) {
      const lce_subject *s = lce_subject_at(i);
      printf("%s{\"name\":", i ? "," : "");
      cli_json_string(stdout, s->name);
      cli_json_member(stdout, "golden_class", s->golden_class);
      cli_json_member(stdout, "description", s->description);
      printf(",\"caps\":[");
      for (size_t c = 0, first = 1; c < ncaps; c++)
        if (s->caps & CAPS[c].bit) printf("%s\"%s\"", first ? "" : ",", CAPS[c].name), first = 0;
      printf("]}");
    }
    printf("],\"matrices\":[");
    for (size_t i = 0; i < nm; i++) {
      printf("%s{\"name\":", i ? "," : "");
      cli_json_string(stdout, lce_matrix_at(i)->name);
      cli_json_member(stdout, "description", lce_matrix_at(i)->description);
      printf("}");
    }
    printf("],\"tiers\":[");
    for (size_t i = 0; i < lce_reference_tier_count(); i++) {
      const lce_reference_tier *t = lce_reference_tier_at(i);
      char why[256];
      const int here = t->available(why, sizeof why);
      printf("%s{\"name\":", i ? "," : "");
      cli_json_string(stdout, t->name);
      printf(",\"tier\":%d,\"available\":%s", t->level, here ? "true" : "false");
      cli_json_member(stdout, "description", t->what);
      cli_json_member(stdout, "why", why);
      printf("}");
    }
    printf("]}\n");
    return CLI_PASS;
  }
  printf("subjects (%zu; name, golden class, what it lacks of the full semantics, GPU: needs one):\n", ns);
  for (size_t i = 0; i < ns; i++) {
    const lce_subject *s = lce_subject_at(i);
    char what[256];
    snprintf(what, sizeof what, "%s", s->golden_class);
    for (size_t c = 0; c < ncaps; c++)
      if ((CAPS[c].bit & LCE_CAP_ALL_SEMANTICS) && !(s->caps & CAPS[c].bit))
        snprintf(what + strlen(what), sizeof what - strlen(what), " no-%s", CAPS[c].name);
    if (s->caps & LCE_CAP_NEEDS_GPU) snprintf(what + strlen(what), sizeof what - strlen(what), " GPU");
    printf("  %-34s %-20s %s\n", s->name, what, s->description);
  }
  printf("matrices (%zu):\n", nm);
  for (size_t i = 0; i < nm; i++) printf("  %-34s %s\n", lce_matrix_at(i)->name, lce_matrix_at(i)->description);
  printf("reference tiers (--oracle; MPFR %s):\n", mpfr_get_version());
  for (size_t i = 0; i < lce_reference_tier_count(); i++) {
    const lce_reference_tier *t = lce_reference_tier_at(i);
    char why[256];
    const int here = t->available(why, sizeof why);
    printf("  %-34s tier %d%s: %s%s%s\n", t->name, t->level, t == lce_reference_tier_default() ? " (the default)" : "",
           t->what, here ? "" : " — not here: ", here ? "" : why);
  }
  return CLI_PASS;
}
