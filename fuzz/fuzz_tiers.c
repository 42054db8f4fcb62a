/* fuzz_tiers.c — libFuzzer target: fuzz bytes → small FLCE case (lce_fuzz_case.h) → tier 1 (fast)
 * and tier 0 (mpfr) on the same tensors; traps on a disagreement after printing the case id and the
 * first element (lce_tiers_differ, lce_reference.h):
 *   - tier 1 as the engine runs it (with its escalations) against tier 0: the same decisive flag on
 *     every element, the same rounded value where decisive, values within both bounds;
 *   - tier 1 alone (no escalation: its own arithmetic and bounds) against tier 0: every value within
 *     both bounds, and the same rounded value wherever both are decisive;
 *   - the same with every d_hidden and d_weight element through tier 1's double-double step
 *     (lce_fast_options.refine_all), decided by double or not: that step's bounds.
 * Build: CC=clang cmake -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF; run: build/fuzz/fuzz_tiers
 * [corpus dir]. The same object links into fuzz_replay_tiers (replay_main.c), which ctest runs over
 * the subject seed corpus (the bytes → case mapping is shared). The session (lce_fuzz_session.h)
 * only keeps the counters and the last case id for the replay driver; no subject runs. */
#include <stdio.h>
#include <stdlib.h>

#include "lce_fast.h"
#include "lce_fuzz_case.h"
#include "lce_fuzz_session.h"
#include "lce_oracle.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the replay driver's table names as the thing checked. */
static const lce_subject TIERS = {.name = "tier 1 (fast) vs tier 0 (mpfr)", .golden_class = "-",
                                  .description = "the oracle tiers against each other"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  lce_status st;
  lce_status_clear(&st);
  if (lce_fuzz_session_open(&st) != LCE_OK) { /* the counters only: any subject the machine has */
    fprintf(stderr, "fuzz_tiers: %s\n", st.msg);
    abort();
  }
  lce_fuzz_session_get()->subject = &TIERS;
  return 0;
}

/* Prints one disagreement of the pair (what, a against tier 0). */
static void report(const char *id, const char *what, const lce_oracle_result *a, const lce_oracle_result *b,
                   const lce_tier_diff *d) {
  const lce_ref_output *x = &a->out[d->output], *y = &b->out[d->output];
  const int64_t i = d->index;
  fprintf(stderr, "fuzz_tiers: %s disagrees with tier 0 on %lld elements of %s; first %s[%lld]", what,
          (long long)d->count, id, lce_output_name((lce_output_id)d->output), (long long)i);
  if (i < x->count && i < y->count)
    fprintf(stderr, ": %a (err %.3g, decisive %d, rounded %a) vs %a (err %.3g, decisive %d, rounded %a)", x->value[i],
            x->err[i], x->decisive[i], x->rounded[i], y->value[i], y->err[i], y->decisive[i], y->rounded[i]);
  fprintf(stderr, "\n  repro: build/lcecheck repro --oracle fast %s (and --oracle mpfr)\n", id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lce_fuzz_session *s = lce_fuzz_session_get();
  lce_case c;
  lce_tensors t;
  lce_status st;
  lce_status_clear(&st);
  s->stats.inputs++;
  if (lce_fuzz_case_from_bytes(data, size, &c, &st) != LCE_OK || lce_case_generate(&c, &t, &st) != LCE_OK) {
    fprintf(stderr, "fuzz_tiers: bytes -> case: %s\n", st.msg); /* a bug of the mapping, never of the input */
    abort();
  }
  lce_case_format(&c, s->last_id, sizeof s->last_id);
  lce_oracle_result r0, r1, alone, refined;
  const lce_fast_options no_escalation = {0, 0, 0}, refine_all = {0, 0, 1};
  if (lce_oracle_run(&c, &t, &r0, &st) != LCE_OK || lce_fast_run(&c, &t, &r1, NULL, &st) != LCE_OK ||
      lce_fast_run_opts(&c, &t, &no_escalation, &alone, NULL, &st) != LCE_OK ||
      lce_fast_run_opts(&c, &t, &refine_all, &refined, NULL, &st) != LCE_OK) {
    fprintf(stderr, "fuzz_tiers: %s: %s\n", s->last_id, st.msg);
    abort();
  }
  lce_tier_diff d1, d2, d3;
  const int64_t bad = lce_tiers_differ(&r1, &r0, 1, &d1) + lce_tiers_differ(&alone, &r0, 0, &d2) +
                      lce_tiers_differ(&refined, &r0, 0, &d3);
  if (d1.count) report(s->last_id, "tier 1", &r1, &r0, &d1);
  if (d2.count) report(s->last_id, "tier 1 without escalation", &alone, &r0, &d2);
  if (d3.count) report(s->last_id, "tier 1 with every gradient element in double-double", &refined, &r0, &d3);
  s->stats.inconclusive += r0.total - r0.decisive;
  s->last_outcome = bad ? LCE_FUZZ_VIOLATION : LCE_FUZZ_PASS;
  bad ? s->stats.violations++ : s->stats.passed++;
  lce_oracle_free(&r0), lce_oracle_free(&r1), lce_oracle_free(&alone), lce_oracle_free(&refined);
  lce_tensors_free(&t);
  if (bad && s->trap_on_violation) __builtin_trap();
  return 0;
}
