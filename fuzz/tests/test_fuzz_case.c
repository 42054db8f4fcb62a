/* test_fuzz_case.c — properties of the fuzz input mapping (lce_fuzz_case.h):
 *   every byte string maps to a valid case inside the small-shape ranges and the oracle budget;
 *   every option and every value distribution is reached, and every case id parses back to itself;
 *   the mapping is deterministic; cutting bytes off the front keeps every field whose bytes
 *   survive; an input of the core fields only (the layout before the options) decodes with every
 *   option off; front bytes change the seed only; encode is the exact inverse of decode. */
#include <stdio.h>
#include <string.h>

#include "lce_fuzz_case.h"
#include "lce_prng.h"

#include "lce_test.h"

static void random_bytes(uint64_t stream, uint8_t *buf, size_t len) {
  for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)lce_rand_u64(lce_test_seed(), stream, i);
}

static void test_empty_input_gives_minima(void) {
  lce_case c;
  lce_status st;
  lce_status_clear(&st);
  EXPECT(lce_fuzz_case_from_bytes(NULL, 0, &c, &st) == LCE_OK, "%s", st.msg);
  EXPECT(c.n == 1 && c.h == 1 && c.v == 1 && c.vp == 1 && c.tp == 1 && c.vocab_chunk == 1,
         "n%lld h%lld v%lld vp%lld", (long long)c.n, (long long)c.h, (long long)c.v, (long long)c.vp);
  EXPECT(c.dtype == LCE_BF16 && c.reduction == LCE_RED_NONE && c.seed == 0 && c.ignore_pct == 0,
         "dtype %d reduction %d", (int)c.dtype, (int)c.reduction);
  EXPECT(c.token_chunk == 0 && c.smoothing == LCE_SMOOTH_NONE && c.smoothing_permille == 0 && c.z_loss_e5 == 0 &&
             c.softcap == 0 && !c.class_weights && c.gemm == LCE_GEMM_IEEE,
         "an exhausted tail must leave every option off");
}

static void check_case_in_ranges(const lce_case *c, const char *id) {
  EXPECT(c->n >= 1 && c->n <= 24 && c->h >= 1 && c->h <= 48 && c->v >= 1 && c->v <= 400, "%s", id);
  EXPECT(c->vp >= c->v && c->vp - c->v <= 130 + 3 && c->vp % c->tp == 0, "%s", id);
  EXPECT(c->tp >= 1 && c->tp <= 4 && c->vocab_chunk >= 1 && c->vocab_chunk <= c->v, "%s", id);
  EXPECT(3 * c->n * c->h * c->v <= LCE_FUZZ_MAX_MACS, "%s over the oracle budget", id);
  int pct = c->ignore_pct;
  EXPECT(pct == 0 || pct == 10 || pct == 25 || pct == 50 || pct == 100, "%s", id);
  EXPECT(c->token_chunk >= 0 && c->token_chunk <= c->n, "%s", id);
  EXPECT(c->smoothing_permille >= 0 && c->smoothing_permille <= 300, "%s", id);
  EXPECT(c->smoothing != LCE_SMOOTH_NONE || c->smoothing_permille == 0, "%s: permille without smoothing", id);
  EXPECT(c->z_loss_e5 >= 0 && c->z_loss_e5 <= 1000, "%s", id);
  EXPECT(c->softcap == 0 || (c->softcap >= 5 && c->softcap <= 50), "%s", id);
  EXPECT(c->gemm == LCE_GEMM_IEEE || c->dtype == LCE_FP32, "%s: tf32 on non-fp32 inputs", id);
}

/* What the random inputs reached: every option value class and every distribution. */
typedef struct coverage {
  int tp[5], dist[LCE_DIST_COUNT], smoothing[3];
  int token_chunk, z_loss, softcap, class_weights, tf32, shrink;
} coverage;

static void note_coverage(coverage *cov, const lce_case *c) {
  cov->tp[c->tp] = 1;
  cov->dist[c->dist] = 1;
  cov->smoothing[c->smoothing] = 1;
  cov->token_chunk |= c->token_chunk > 0;
  cov->z_loss |= c->z_loss_e5 > 0;
  cov->softcap |= c->softcap > 0;
  cov->class_weights |= c->class_weights;
  cov->tf32 |= c->gemm == LCE_GEMM_TF32;
  /* h is only ever reduced by the budget; n*48*v above budget means h was cut */
  cov->shrink |= c->n * 48 * c->v * 3 > LCE_FUZZ_MAX_MACS && c->h < 48;
}

static void expect_full_coverage(const coverage *cov) {
  EXPECT(cov->shrink, "no input exercised the oracle-budget shrink");
  for (int t = 1; t <= 4; t++) EXPECT(cov->tp[t], "tp %d never reached", t);
  for (int d = 0; d < LCE_DIST_COUNT; d++) EXPECT(cov->dist[d], "dist %s never reached", lce_dist_name((lce_dist)d));
  for (int m = 0; m < 3; m++) EXPECT(cov->smoothing[m], "smoothing mode %d never reached", m);
  EXPECT(cov->token_chunk && cov->z_loss && cov->softcap && cov->class_weights && cov->tf32,
         "an option was never switched on: tc %d zl %d sc %d cw %d tf32 %d", cov->token_chunk, cov->z_loss,
         cov->softcap, cov->class_weights, cov->tf32);
}

/* The harness prints case ids as repro lines: each must parse back to the same case. */
static void expect_id_round_trips(const char *id) {
  lce_case back;
  lce_status st;
  lce_status_clear(&st);
  char again[192];
  EXPECT(lce_case_parse(id, &back, &st) == LCE_OK, "%s does not parse: %s", id, st.msg);
  EXPECT(strcmp(lce_case_format(&back, again, sizeof again), id) == 0, "%s parses to %s", id, again);
}

static void test_random_inputs_map_to_valid_cases(void) {
  coverage cov;
  memset(&cov, 0, sizeof cov);
  for (uint64_t k = 0; k < 20000; k++) {
    uint8_t buf[48];
    size_t len = (size_t)lce_rand_below(lce_test_seed(), 1000, k, sizeof buf + 1);
    random_bytes(k, buf, len);
    lce_case a, b;
    lce_status st;
    lce_status_clear(&st);
    EXPECT(lce_fuzz_case_from_bytes(buf, len, &a, &st) == LCE_OK, "input %llu: %s", (unsigned long long)k,
           st.msg);
    EXPECT(lce_fuzz_case_from_bytes(buf, len, &b, &st) == LCE_OK, "input %llu", (unsigned long long)k);
    char ida[192], idb[192];
    lce_case_format(&a, ida, sizeof ida);
    lce_case_format(&b, idb, sizeof idb);
    EXPECT(strcmp(ida, idb) == 0, "same bytes, different cases: %s vs %s", ida, idb);
    check_case_in_ranges(&a, ida);
    expect_id_round_trips(ida);
    note_coverage(&cov, &a);
  }
  expect_full_coverage(&cov);
}

/* Inputs written before the option fields existed are core-only tails: with the options in front
 * of the core, they must decode exactly as an input whose option bytes are all zero (all off). */
static void test_core_only_input_has_options_off(void) {
  const size_t core = lce_fuzz_core_bytes(), tail = lce_fuzz_tail_bytes();
  EXPECT(core < tail, "core %zu, tail %zu", core, tail);
  for (uint64_t k = 0; k < 500; k++) {
    uint8_t full[64] = {0};
    random_bytes(12000 + k, full + (tail - core), core);
    lce_case old_layout, zero_options;
    lce_status st;
    lce_status_clear(&st);
    EXPECT(lce_fuzz_case_from_bytes(full + (tail - core), core, &old_layout, &st) == LCE_OK, "%s", st.msg);
    EXPECT(lce_fuzz_case_from_bytes(full, tail, &zero_options, &st) == LCE_OK, "%s", st.msg);
    char ida[192], idb[192];
    lce_case_format(&old_layout, ida, sizeof ida);
    lce_case_format(&zero_options, idb, sizeof idb);
    EXPECT(strcmp(ida, idb) == 0, "core-only %s vs zero options %s", ida, idb);
    EXPECT(old_layout.token_chunk == 0 && old_layout.smoothing == LCE_SMOOTH_NONE && old_layout.z_loss_e5 == 0 &&
               old_layout.softcap == 0 && !old_layout.class_weights && old_layout.gemm == LCE_GEMM_IEEE,
           "core-only input %s has an option on", ida);
  }
}

/* Decoding the last k bytes of an input keeps every field whose bytes lie in them. */
static void test_front_truncation_keeps_surviving_fields(void) {
  const size_t tail = lce_fuzz_tail_bytes();
  for (uint64_t k = 0; k < 200; k++) {
    uint8_t buf[40];
    random_bytes(5000 + k, buf, sizeof buf);
    lce_fuzz_params full, cut;
    size_t front_full, front_cut;
    lce_fuzz_params_decode(buf, sizeof buf, &full, &front_full);
    EXPECT(front_full == sizeof buf - tail, "front %zu", front_full);
    size_t keep = (size_t)lce_rand_below(lce_test_seed(), 2000, k, tail + 1);
    lce_fuzz_params_decode(buf + sizeof buf - keep, keep, &cut, &front_cut);
    size_t used = 0;
    for (int f = 0; f < LCE_FUZZ_FIELD_COUNT; f++) {
      used += lce_fuzz_field_width((lce_fuzz_field)f);
      if (used <= keep)
        EXPECT(cut.field[f] == full.field[f], "field %s changed after cutting to %zu bytes",
               lce_fuzz_field_name((lce_fuzz_field)f), keep);
    }
    EXPECT(front_cut == 0, "front %zu", front_cut);
  }
}

static void test_front_bytes_change_only_the_seed(void) {
  uint8_t a[64], b[64];
  lce_fuzz_params p;
  for (int f = 0; f < LCE_FUZZ_FIELD_COUNT; f++) p.field[f] = (uint32_t)lce_rand_u64(lce_test_seed(), 3000, (uint64_t)f);
  const uint8_t front[] = "front";
  size_t la = lce_fuzz_params_encode(&p, NULL, 0, a, sizeof a);
  size_t lb = lce_fuzz_params_encode(&p, front, 5, b, sizeof b);
  /* Without a front the encoder may leave out trailing zero fields; with one it writes them all. */
  EXPECT(la >= lce_fuzz_core_bytes() && la <= lce_fuzz_tail_bytes() && lb == lce_fuzz_tail_bytes() + 5,
         "la %zu lb %zu", la, lb);
  lce_case ca, cb;
  lce_status st;
  lce_status_clear(&st);
  EXPECT(lce_fuzz_case_from_bytes(a, la, &ca, &st) == LCE_OK, "%s", st.msg);
  EXPECT(lce_fuzz_case_from_bytes(b, lb, &cb, &st) == LCE_OK, "%s", st.msg);
  EXPECT(ca.seed != cb.seed, "front bytes did not reach the seed");
  cb.seed = ca.seed;
  char ida[192], idb[192];
  EXPECT(strcmp(lce_case_format(&ca, ida, sizeof ida), lce_case_format(&cb, idb, sizeof idb)) == 0,
         "%s vs %s", ida, idb);
}

static void test_encode_inverts_decode(void) {
  for (uint64_t k = 0; k < 2000; k++) {
    uint8_t tail[64];
    random_bytes(9000 + k, tail, lce_fuzz_tail_bytes());
    lce_fuzz_params p, q;
    size_t front;
    lce_fuzz_params_decode(tail, lce_fuzz_tail_bytes(), &p, &front);
    uint8_t buf[64];
    size_t len = lce_fuzz_params_encode(&p, NULL, 0, buf, sizeof buf);
    lce_fuzz_params_decode(buf, len, &q, &front);
    EXPECT(memcmp(&p, &q, sizeof p) == 0 && front == 0, "round trip %llu", (unsigned long long)k);
  }
}

int main(void) {
  test_empty_input_gives_minima();
  test_random_inputs_map_to_valid_cases();
  test_front_truncation_keeps_surviving_fields();
  test_core_only_input_has_options_off();
  test_front_bytes_change_only_the_seed();
  test_encode_inverts_decode();
  return lce_test_finish("test_fuzz_case");
}
