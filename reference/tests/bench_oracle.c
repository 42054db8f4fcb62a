/* bench_oracle.c — throughput of the tier-0 oracle beside the two plain MPFR ways of doing its
 * multiply-adds, measured in the same process:
 *   oracle        lce_oracle_run on a medium case (default N=64, H=256, V=2048, bf16), counting
 *                 3·N·H·V multiply-adds (logits, d_hidden, d_weight), plus the small case
 *                 N=16, H=64, V=512 in milliseconds
 *   fma chain     acc = mpfr_fma(a, b, acc) at 128 bits, inputs bf16 values
 *   exact + sum   exact double products set into MPFR, one mpfr_sum per 256 of them
 *   tier 1        lce_fast_run on the same case (escalations to tier 0 included, and counted), and
 *                 the same without escalating (tier 1's own arithmetic)
 *   plain double  a double dot product of bf16 values, 256 terms (the speed of light)
 * Usage: bench_oracle [--json] [--n N] [--h H] [--v V]. Progress goes to stderr; the table (or one
 * JSON object with --json) to stdout. Timings are printed, never asserted: not a ctest. */
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_fast.h"
#include "lce_oracle.h"
#include "lce_prng.h"
#include "lce_time.h"

static double bf16_sample(uint64_t stream, uint64_t i) {
  return lce_round_to(LCE_BF16, lce_rand_normal(1, stream, i));
}

/* Seconds for one oracle run of c (generation excluded); exits on error. */
static double time_oracle(const lce_case *c, int64_t *decisive, int64_t *total) {
  lce_tensors t;
  lce_oracle_result r;
  lce_status st = {0};
  if (lce_case_generate(c, &t, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    exit(1);
  }
  double t0 = lce_now_seconds();
  if (lce_oracle_run(c, &t, &r, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    exit(1);
  }
  double dt = lce_now_seconds() - t0;
  *decisive = r.decisive;
  *total = r.total;
  lce_oracle_free(&r);
  lce_tensors_free(&t);
  return dt;
}

/* Seconds for one tier-1 run of c; exits on error. */
static double time_fast(const lce_case *c, int escalate, lce_fast_stats *stats) {
  lce_tensors t;
  lce_oracle_result r;
  lce_status st = {0};
  if (lce_case_generate(c, &t, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    exit(1);
  }
  double t0 = lce_now_seconds();
  if (lce_fast_run_opts(c, &t, escalate, &r, stats, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    exit(1);
  }
  double dt = lce_now_seconds() - t0;
  lce_oracle_free(&r);
  lce_tensors_free(&t);
  return dt;
}

/* Multiply-adds per second of a plain double dot product over 256 bf16 values. */
static double rate_plain_dot(long macs) {
  enum { K = 256 };
  double a[K], b[K];
  for (int i = 0; i < K; i++) a[i] = bf16_sample(5, (uint64_t)i), b[i] = bf16_sample(6, (uint64_t)i);
  volatile double sink = 0.0;
  long rounds = macs / K;
  double t0 = lce_now_seconds();
  for (long r = 0; r < rounds; r++) {
    double s = 0.0, shift = (double)(r & 7);
    for (int i = 0; i < K; i++) s += a[i] * (b[i] + shift);
    sink += s;
  }
  double dt = lce_now_seconds() - t0;
  (void)sink;
  return (double)(rounds * K) / dt;
}

/* Multiply-adds per second of an mpfr_fma chain at 128 bits. */
static double rate_fma_chain(long macs) {
  enum { K = 1024 };
  mpfr_t a[K], b[K], acc;
  for (int i = 0; i < K; i++) {
    mpfr_init2(a[i], 128);
    mpfr_init2(b[i], 128);
    mpfr_set_d(a[i], bf16_sample(1, (uint64_t)i), MPFR_RNDN);
    mpfr_set_d(b[i], bf16_sample(2, (uint64_t)i), MPFR_RNDN);
  }
  mpfr_init2(acc, 128);
  mpfr_set_zero(acc, 1);
  double t0 = lce_now_seconds();
  for (long i = 0; i < macs; i++) mpfr_fma(acc, a[i % K], b[i % K], acc, MPFR_RNDN);
  double dt = lce_now_seconds() - t0;
  for (int i = 0; i < K; i++) mpfr_clears(a[i], b[i], (mpfr_ptr)0);
  mpfr_clear(acc);
  return (double)macs / dt;
}

/* Multiply-adds per second of exact double products + mpfr_sum over 256 terms. */
static double rate_exact_sum(long macs) {
  enum { K = 256 };
  double a[K], b[K];
  mpfr_t p[K], s;
  mpfr_ptr ptr[K];
  for (int i = 0; i < K; i++) {
    a[i] = bf16_sample(3, (uint64_t)i);
    b[i] = bf16_sample(4, (uint64_t)i);
    mpfr_init2(p[i], 53);
    ptr[i] = p[i];
  }
  mpfr_init2(s, 128);
  long rounds = macs / K;
  double t0 = lce_now_seconds();
  for (long r = 0; r < rounds; r++) {
    double shift = (double)(r & 7);
    for (int i = 0; i < K; i++) mpfr_set_d(p[i], a[i] * (b[i] + shift), MPFR_RNDN);
    mpfr_sum(s, ptr, K, MPFR_RNDN);
  }
  double dt = lce_now_seconds() - t0;
  for (int i = 0; i < K; i++) mpfr_clear(p[i]);
  mpfr_clear(s);
  return (double)(rounds * K) / dt;
}

int main(int argc, char **argv) {
  int json = 0;
  lce_case c = lce_case_default();
  c.n = 64, c.h = 256, c.v = 2048, c.vp = 2048, c.vocab_chunk = 256, c.dtype = LCE_BF16, c.prior_grad = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (i + 1 < argc && strcmp(argv[i], "--n") == 0) c.n = atoll(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--h") == 0) c.h = atoll(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--v") == 0) c.vp = c.v = atoll(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_oracle [--json] [--n N] [--h H] [--v V]\n");
      return 2;
    }
  }
  char id[200];
  lce_case_format(&c, id, sizeof id);
  double macs = 3.0 * (double)c.n * (double)c.h * (double)c.v;

  lce_case small = lce_case_default();
  small.n = 16, small.h = 64, small.v = 512, small.vp = 512, small.prior_grad = 1;
  int64_t sd, stot, d, tot;
  fprintf(stderr, "bench_oracle: small case n16 h64 v512 ...\n");
  double small_s = time_oracle(&small, &sd, &stot);
  for (int rep = 0; rep < 2; rep++) { /* best of three: the machine may be shared */
    double s = time_oracle(&small, &sd, &stot);
    if (s < small_s) small_s = s;
  }
  fprintf(stderr, "bench_oracle: oracle on %s (%.3g multiply-adds) ...\n", id, macs);
  double oracle_s = time_oracle(&c, &d, &tot);
  fprintf(stderr, "bench_oracle: mpfr_fma chain ...\n");
  double fma_rate = rate_fma_chain(4000000);
  fprintf(stderr, "bench_oracle: exact products + mpfr_sum ...\n");
  double sum_rate = rate_exact_sum(8000000);
  double oracle_rate = macs / oracle_s;
  fprintf(stderr, "bench_oracle: tier 1 on %s ...\n", id);
  lce_fast_stats fs;
  double fast_s = time_fast(&c, 1, &fs);
  double fast_rate = macs / fast_s;
  lce_fast_stats fs_alone;
  double alone_rate = macs / time_fast(&c, 0, &fs_alone);
  fprintf(stderr, "bench_oracle: plain double dot ...\n");
  double plain_rate = rate_plain_dot(200000000);

  if (json) {
    printf("{\"case\": \"%s\", \"precision_bits\": %d, \"oracle_seconds\": %.6f, \"oracle_macs_per_s\": %.6g, "
           "\"fma_chain_macs_per_s\": %.6g, \"exact_sum_macs_per_s\": %.6g, \"oracle_over_fma\": %.4f, "
           "\"oracle_over_exact_sum\": %.4f, \"decisive\": %lld, \"total\": %lld, "
           "\"small_case_ms\": %.3f, \"small_decisive\": %lld, \"small_total\": %lld, "
           "\"fast_seconds\": %.6f, \"fast_macs_per_s\": %.6g, \"fast_escalated\": %lld, \"fast_alone_macs_per_s\": %.6g, "
           "\"plain_dot_macs_per_s\": %.6g}\n",
           id, LCE_ORACLE_PREC, oracle_s, oracle_rate, fma_rate, sum_rate, oracle_rate / fma_rate,
           oracle_rate / sum_rate, (long long)d, (long long)tot, small_s * 1e3, (long long)sd, (long long)stot, fast_s, fast_rate,
           (long long)fs.escalated, alone_rate, plain_rate);
    return 0;
  }
  printf("tier-0 oracle throughput (%d-bit MPFR %s)\n", LCE_ORACLE_PREC, mpfr_get_version());
  printf("  %-34s %14s %10s\n", "method", "MAC/s", "vs oracle");
  printf("  %-34s %14.3e %10s\n", "oracle fwd+bwd (3·N·H·V MACs)", oracle_rate, "1.00");
  printf("  %-34s %14.3e %10.2f\n", "mpfr_fma chain, 128 bits", fma_rate, fma_rate / oracle_rate);
  printf("  %-34s %14.3e %10.2f\n", "exact products + mpfr_sum", sum_rate, sum_rate / oracle_rate);
  printf("  %-34s %14.3e %10.2f\n", "tier 1 fwd+bwd (fast)", fast_rate, fast_rate / oracle_rate);
  printf("  %-34s %14.3e %10.2f\n", "tier 1 without its escalations", alone_rate, alone_rate / oracle_rate);
  printf("  %-34s %14.3e %10.2f\n", "plain double dot, 256 terms", plain_rate, plain_rate / oracle_rate);
  printf("  tier 1: %.3f s, %lld elements escalated to tier 0 (%lld token forwards), %lld of %lld logits not "
         "proven exact\n", fast_s, (long long)fs.escalated, (long long)fs.recomputed_rows,
         (long long)fs.inexact_logits, (long long)fs.logits);
  printf("  case %s: %.3f s, decisive %lld/%lld\n", id, oracle_s, (long long)d, (long long)tot);
  printf("  small case n16 h64 v512: %.1f ms (best of 3), decisive %lld/%lld\n", small_s * 1e3, (long long)sd,
         (long long)stot);
  return 0;
}
