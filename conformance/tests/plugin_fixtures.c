/* plugin_fixtures.c — broken plugins the plugin door must refuse or fail, never pass; written, like
 * any plugin, against <lcecheck/lcecheck_subject.h> only. Compiled three times (CMakeLists.txt):
 *   lce_plugin_fixtures            subjects "non-finite" (Inf and NaN where the values are finite), "unwritten" (returns
 *                                  success without writing anything), "error" (returns an error with
 *                                  a message), "no-run" (a NULL run function) and "plain" (no
 *                                  case options: cases with one are skipped)
 *   lce_plugin_fixture_wrong_abi   -DWRONG_ABI: one subject whose table says ABI version 1 + ours
 *   lce_plugin_fixture_no_entry    -DNO_ENTRY: exports no lcecheck_subject_entry at all */
#include <lcecheck/lcecheck_subject.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Non-finite where the exact values are finite: +Inf in loss, loss_token and lse (the poison the
 * outputs arrive with is NaN, so this is written garbage, not unwritten output), NaN in d_hidden and
 * in the weight gradient's real rows. */
static int run_nonfinite(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in, const lcecheck_outputs_v1 *out,
                   char *msg, size_t msg_size) {
  (void)state, (void)in, (void)msg, (void)msg_size;
  out->loss[0] = INFINITY;
  for (int64_t t = 0; t < c->n; t++) out->loss_token[t] = out->lse[t] = INFINITY;
  for (int64_t i = 0; i < c->n * c->h; i++) {
    if (c->dtype == LCECHECK_DTYPE_FP32) ((float *)out->d_hidden)[i] = NAN;
    else ((uint16_t *)out->d_hidden)[i] = c->dtype == LCECHECK_DTYPE_BF16 ? 0x7fc0 : 0x7e00;
  }
  float *grad_w = c->tied ? out->grad_embedding : out->grad_weight;
  for (int64_t i = 0; i < c->v * c->h; i++) grad_w[i] = NAN;
  return LCECHECK_OK;
}

#if !defined(WRONG_ABI)
static int run_unwritten(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in,
                         const lcecheck_outputs_v1 *out, char *msg, size_t msg_size) {
  (void)state, (void)c, (void)in, (void)out, (void)msg, (void)msg_size;
  return LCECHECK_OK;
}

static int run_error(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in, const lcecheck_outputs_v1 *out,
                     char *msg, size_t msg_size) {
  (void)state, (void)in, (void)out;
  snprintf(msg, msg_size, "cannot allocate the workspace for n %lld", (long long)c->n);
  return LCECHECK_ERROR;
}
#endif

#define FIXTURE(NAME, RUN) \
  {LCECHECK_SUBJECT_ABI_VERSION, NAME, NULL, "a broken plugin fixture", LCECHECK_CAP_ALL_SEMANTICS, 0, RUN, NULL}

#if defined(WRONG_ABI)
static const lcecheck_subject_v1 subjects[] = {
    {LCECHECK_SUBJECT_ABI_VERSION + 1, "from-the-future", NULL, "built against another ABI", 0, 0, run_nonfinite, NULL},
    {.name = NULL}};
#else
/* "plain" declares no case option (smoothing, z-loss, softcap, class weights, tf32): lcecheck
 * skips the cases that have one, naming it, before run() is called. */
static const lcecheck_subject_v1 subjects[] = {
    FIXTURE("non-finite", run_nonfinite), FIXTURE("unwritten", run_unwritten), FIXTURE("error", run_error),
    FIXTURE("no-run", NULL),
    {LCECHECK_SUBJECT_ABI_VERSION, "plain", NULL, "declares no case option", LCECHECK_CAP_SMOOTHING - 1u, 0, run_error, NULL},
    {.name = NULL}};
#endif

#if defined(NO_ENTRY)
LCECHECK_EXPORT const lcecheck_subject_v1 *not_the_entry(uint32_t abi_version) {
  (void)abi_version;
  return subjects;
}
#else
LCECHECK_EXPORT const lcecheck_subject_v1 *lcecheck_subject_entry(uint32_t abi_version) {
  (void)abi_version;
  return subjects;
}
#endif
