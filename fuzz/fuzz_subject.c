/* fuzz_subject.c — libFuzzer target: fuzz bytes → small FLCE case → subject vs MPFR oracle →
 * judge against the subject class's golden bounds, plus a determinism check; traps on a violation
 * after writing the case id, verdict and repro line (lce_fuzz_session.c does the work).
 *
 * The subject is chosen at build time (CMake LCE_FUZZ_DEFAULT_SUBJECT: fused-host, or fused-cuda in a
 * LCE_FUZZ_WITH_CUDA build); LCE_FUZZ_SUBJECT selects another one at run time, including mutants
 * (e.g. LCE_FUZZ_SUBJECT=mutant/bf16-dhidden-accum), which this target must then find.
 * Build: CC=clang cmake -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF; run: scripts/fuzz_campaign.py.
 * The same object links into fuzz_replay_subject (replay_main.c) for ctest.
 * A GPU subject (fused-cuda, mutant-cuda/...) on a machine without a GPU exits 77 at start-up. */
#include <stdio.h>
#include <stdlib.h>

#include "lce_fuzz_session.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef LCE_WITH_CUDA
/* A fuzzer build with fused-cuda (LCE_FUZZ_WITH_CUDA): ASan's protected shadow gap collides with the
 * CUDA driver's address reservation (every cudaMalloc fails), its memset/memcpy interceptors reject
 * device-mapped addresses inside that gap, and the driver's start-up allocations are never freed
 * (google/sanitizers#629). ASAN_OPTIONS in the environment still overrides these. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "protect_shadow_gap=0:replace_intrin=0:detect_leaks=0"; }
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_fuzz_session_open(&st);
  if (rc == LCE_ENODEV) { /* nothing to fuzz here, and nothing found: the skip code, not a crash */
    const char *name = getenv("LCE_FUZZ_SUBJECT");
    fprintf(stderr, "fuzz_subject: subject %s needs a GPU: %s; skipped (exit 77)\n", name ? name : "?",
            st.msg);
    exit(77);
  }
  if (rc != LCE_OK) {
    fprintf(stderr, "fuzz_subject: %s (%s:%d)\n", st.msg, st.file ? st.file : "?", st.line);
    abort();
  }
  const lce_fuzz_session *s = lce_fuzz_session_get();
  fprintf(stderr, "fuzz_subject: subject %s, golden %s, findings in %s/\n", s->subject->name,
          s->golden.path, s->findings_dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lce_fuzz_session *s = lce_fuzz_session_get();
  if (lce_fuzz_session_check(s, data, size) == LCE_FUZZ_VIOLATION && s->trap_on_violation)
    __builtin_trap();
  return 0;
}
