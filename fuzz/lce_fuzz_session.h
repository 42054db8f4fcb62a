/* lce_fuzz_session.h — what every subject-vs-oracle fuzz harness does with one input, and the
 * process-wide state it needs (subject, golden, findings directory, counters).
 *
 * One input: bytes → case and, where the input carries them, tensor values (lce_fuzz_case.h) → the engine (lce_engine.h) against the golden of the
 * subject's class, the subject run twice on fresh buffers (bit-identical outputs: determinism).
 * A violation is a failed verdict (class or bound), an unexpected error, or nondeterminism; it is
 * written to stderr and to <findings>/<case id>.finding (with the input beside it as .input); the
 * .finding file also gets every output's metrics, derived scales and bound terms as "detail:" lines
 * (lce_verdict_explain), which triage reads without measuring the case again.
 * Skipped cases (capability) and verdicts that pass with inconclusive oracle elements are not
 * violations.
 *
 * Environment: LCE_FUZZ_SUBJECT (default "fused-host"), LCE_FUZZ_FINDINGS (default
 * ./fuzz-findings), LCE_GOLDEN_DIR (through lce_default_golden_path). */
#ifndef LCE_FUZZ_SESSION_H
#define LCE_FUZZ_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "lce_engine.h"

/* fuzz_subject's subject when LCE_FUZZ_SUBJECT is unset: chosen at build time (CMake
 * LCE_FUZZ_DEFAULT_SUBJECT; a LCE_FUZZ_WITH_CUDA build defaults to fused-cuda), so that an engine that runs
 * the binary as it is (ClusterFuzzLite, OSS-Fuzz) fuzzes the subject the build was made for. */
#ifndef LCE_FUZZ_DEFAULT_SUBJECT
#define LCE_FUZZ_DEFAULT_SUBJECT "fused-host"
#endif
#define LCE_FUZZ_DEFAULT_FINDINGS "fuzz-findings"

typedef enum lce_fuzz_outcome {
  LCE_FUZZ_PASS = 0,
  LCE_FUZZ_SKIPPED = 1,
  LCE_FUZZ_VIOLATION = 2
} lce_fuzz_outcome;

typedef struct lce_fuzz_stats {
  int64_t inputs;     /* inputs seen */
  int64_t passed;     /* cases judged and deterministic */
  int64_t skipped;    /* cases the subject cannot run */
  int64_t violations;
  int64_t inconclusive; /* oracle elements that could not be judged, summed over cases */
} lce_fuzz_stats;

typedef struct lce_fuzz_session {
  const lce_subject *subject;
  lce_golden golden;
  char findings_dir[512];
  int trap_on_violation;   /* 1 (libFuzzer): the harness traps; the replay driver sets 0 to count */
  lce_fuzz_stats stats;
  lce_fuzz_outcome last_outcome;
  char last_id[192];       /* case id of the last input, for progress lines */
  size_t input_values;     /* elements of the last case taken from its input (lce_fuzz_values_apply) */
} lce_fuzz_session;

/* Opens the process-wide session from the environment (idempotent). On failure (unknown subject,
 * missing or malformed golden) returns the code with the message in st; LCE_ENODEV when the
 * subject needs a GPU and the machine has none (probed once: harnesses then exit 77, not fuzz). */
lce_code lce_fuzz_session_open(lce_status *st);
/* The open session; NULL before lce_fuzz_session_open succeeded. */
lce_fuzz_session *lce_fuzz_session_get(void);

/* path of the file or directory `name` beside the running binary (from /proc/self/exe); 0 when
 * that cannot be read or the result does not fit. */
int lce_fuzz_beside_binary(const char *name, char *path, size_t size);
/* An OSS-Fuzz or ClusterFuzzLite runner has the build's $OUT but no source tree, where the goldens'
 * compiled-in path points: .clusterfuzzlite/build.sh puts golden/ beside the binaries as
 * LCE_FUZZ_BUNDLED_GOLDEN, and this points LCE_GOLDEN_DIR at it when that is unset and the directory
 * exists. lce_fuzz_session_open calls it; a harness that loads goldens itself calls it first. */
#define LCE_FUZZ_BUNDLED_GOLDEN "lcecheck-golden"
void lce_fuzz_use_bundled_goldens(void);

/* Runs one input through the checks above and updates the counters. */
lce_fuzz_outcome lce_fuzz_session_check(lce_fuzz_session *s, const uint8_t *data, size_t size);

#endif
