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
 *   ratios        tier 1 / plain double and tier 1 / tier 0, side by side, from the rates above
 *   per matrix    tier 1 over every case of each named matrix (default: default and wide): the
 *                 fraction of elements it escalated to tier 0, the cases that escalated (and those
 *                 where tier 0 ran every token), its seconds and the part spent escalating, and the
 *                 elements its double-double step decided instead
 *   judged        fused-host judged over the first matrix as `lcecheck check` does, with tier 1 and
 *                 with tier 0: wall seconds and their ratio, the same in CPU seconds of the process
 *                 (steadier than wall time on a shared machine), and where each run's time went (tensors,
 *                 the subject, the reference tier, the judge, summed over the cases): the parts common
 *                 to both runs cap the ratio; on several threads also with one case at a time (the
 *                 engine otherwise runs small cases side by side, lce_engine.c)
 *   fuzz          executions per second of the small class with each tier
 *   --threads     tier 1 and tier 0 at each thread count listed: seconds, speedup, and the same bits
 *                 or not; the first matrix judged with each tier at that count (exit 1 when any
 *                 result or verdict changes with the threads)
 *   --tier1 ID    tier 1 alone on one case (any shape) at each --threads count: seconds per token, hash,
 *                 the token blocks' passes and the rest (loading, the result's arrays, d_weight's last
 *                 step, refine, escalation), tier 1's memory estimate beside the peak; --block-rows R sets its token rows in flight (default:
 *                 about 1 GiB of them), which moves d_weight's running sums R times less often
 * Usage: bench_oracle [--json] [--n N] [--h H] [--v V] [--matrices M,M | --matrices none]. Progress
 * goes to stderr; the table (or one JSON object with --json) to stdout. Timings are printed, never
 * asserted: not a ctest. */
#include <math.h>
#include <mpfr.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lce_engine.h"
#include "lce_fast.h"
#include "lce_fuzz_case.h"
#include "lce_matrix.h"
#include "lce_parallel.h"
#include "lce_oracle.h"
#include "lce_prng.h"
#include "lce_time.h"

static double bf16_sample(uint64_t stream, uint64_t i) {
  return lce_round_to(LCE_BF16, lce_rand_normal(1, stream, i));
}

static uint64_t result_hash(const lce_oracle_result *r);

/* Seconds for one oracle run of c (generation excluded), its counts and its result's hash (hash may
 * be NULL); exits on error. */
static double time_oracle(const lce_case *c, int64_t *decisive, int64_t *total, uint64_t *hash) {
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
  if (hash) *hash = result_hash(&r);
  lce_oracle_free(&r);
  lce_tensors_free(&t);
  return dt;
}

/* FNV-1a over every field of every element of r (the rnd and flip references and the softmax-sum
 * replay included where the tier has them): equal hashes, same bits. */
static uint64_t result_hash(const lce_oracle_result *r) {
  uint64_t h = 1469598103934665603ull; /* a fixed start: hashes compare across runs and builds */
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *x = &r->out[o];
    const size_t n = (size_t)x->count * sizeof(double);
    const unsigned char *fields[8] = {(const void *)x->value, (const void *)x->err, (const void *)x->mag,
                                      (const void *)x->emag, (const void *)x->rounded, x->decisive,
                                      (const void *)x->rnd, (const void *)x->flip};
    for (int f = 0; f < 8 && x->count > 0; f++) {
      const size_t bytes = fields[f] ? (f == 5 ? (size_t)x->count : n) : 0, words = bytes / 8;
      for (size_t i = 0; i < words; i++) { /* a word at a time (the arrays are GiBs at production) */
        uint64_t w;
        memcpy(&w, fields[f] + 8 * i, 8);
        h = (h ^ w) * 1099511628211ull;
      }
      h = lce_fnv1a(h, fields[f] + 8 * words, bytes - 8 * words);
    }
  }
  if (r->has_rsum) h = lce_fnv1a(h, &r->rsum_rel, sizeof r->rsum_rel);
  return h;
}

/* Seconds for a tier-1 run of c (best of three: the machine may be shared), and its result's hash;
 * exits on error. */
static double time_fast(const lce_case *c, int escalate, lce_fast_stats *stats, uint64_t *hash) {
  lce_tensors t;
  lce_status st = {0};
  if (lce_case_generate(c, &t, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    exit(1);
  }
  double best = INFINITY;
  for (int rep = 0; rep < 3; rep++) {
    lce_oracle_result r;
    double t0 = lce_now_seconds();
    const lce_fast_options opt = {escalate, 0, 0};
    if (lce_fast_run_opts(c, &t, &opt, &r, stats, &st) != LCE_OK) {
      fprintf(stderr, "bench_oracle: %s\n", st.msg);
      exit(1);
    }
    double dt = lce_now_seconds() - t0;
    if (dt < best) best = dt;
    if (hash) *hash = result_hash(&r);
    lce_oracle_free(&r);
  }
  lce_tensors_free(&t);
  return best;
}

/* Tier 1 over every case of a matrix: elements escalated, elements, seconds, cases. */
typedef struct matrix_stats {
  int64_t escalated, refined, total, cases, refused;
  int64_t escalating_cases, all_rows_cases; /* cases with an escalation; those where tier 0 ran every token */
  double seconds, escalation_seconds;
} matrix_stats;

/* The cases of a named matrix; exits on error. */
static lce_case *matrix_cases(const char *name, size_t *count) {
  lce_case *cases;
  lce_status st = {0};
  if (lce_matrix_cases(name, &cases, count, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    exit(2);
  }
  return cases;
}

static matrix_stats time_matrix(const char *name) {
  matrix_stats ms = {0};
  size_t count;
  lce_case *cases = matrix_cases(name, &count);
  lce_status st = {0};
  for (size_t i = 0; i < count; i++) {
    lce_tensors t;
    lce_oracle_result r;
    lce_fast_stats fs;
    if (lce_case_generate(&cases[i], &t, &st) != LCE_OK) {
      ms.refused++; /* a case the matrix keeps to test rejection */
      continue;
    }
    const double t0 = lce_now_seconds();
    if (lce_fast_run(&cases[i], &t, &r, &fs, &st) == LCE_OK) {
      ms.seconds += lce_now_seconds() - t0;
      ms.escalated += fs.escalated, ms.refined += fs.refined, ms.total += r.total, ms.cases++;
      ms.escalating_cases += fs.escalated > 0, ms.all_rows_cases += fs.all_rows;
      ms.escalation_seconds += fs.escalation_seconds;
      lce_oracle_free(&r);
    } else {
      ms.refused++;
    }
    lce_tensors_free(&t);
  }
  free(cases);
  return ms;
}

/* Fuzz executions per second of the small class: what one fuzz_subject input costs without libFuzzer
 * (bytes -> case, tensors, fused-host, the reference tier, the metrics), over `count` inputs of 16
 * pseudo-random bytes each, run through the engine as the fuzz session runs them. */
/* Where an engine run's time went, summed over its cases: the tensors, the subject, the reference
 * tier, the judge (class checks, metrics); with cases side by side on several threads (lce_engine.c)
 * the parts add up to more than the wall time. */
typedef struct judged_split {
  double seconds, cpu_seconds, generate, subject, reference, judge;
  uint64_t hash; /* of every case's verdict (metric values and the status), in case order */
} judged_split;

static void add_case(void *ctx, const lce_engine_case *ec) {
  judged_split *js = ctx;
  const lce_case_result *r = &ec->res[0];
  js->generate += ec->gen_seconds;
  js->subject += r->subject_seconds;
  js->reference += r->oracle_seconds;
  js->judge += r->judge_seconds;
  const char *status = lce_case_result_status(r);
  js->hash = lce_fnv1a(js->hash, status, strlen(status));
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    js->hash = lce_fnv1a(js->hash, r->verdict.out[o].metrics.v, sizeof r->verdict.out[o].metrics.v);
}

/* The engine judging fused-host over cases with a tier (serial: one case at a time, each case's
 * stages parallel inside); exits on error. */
static judged_split engine_run_as(const lce_case *cases, size_t count, const char *tier_name, int serial) {
  lce_status st = {0};
  judged_split js = {.hash = 1469598103934665603ull};
  const lce_subject *s = lce_subject_find("fused-host");
  const lce_engine_config cfg = {.cases = cases, .ncases = count, .subjects = &s, .nsubjects = 1,
                                 .tier = lce_reference_tier_find(tier_name), .serial_cases = serial};
  const double t0 = lce_now_seconds(), c0 = lce_cpu_seconds();
  if (lce_engine_run(&cfg, add_case, &js, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: engine: %s\n", st.msg);
    exit(2);
  }
  js.seconds = lce_now_seconds() - t0;
  js.cpu_seconds = lce_cpu_seconds() - c0;
  return js;
}

static judged_split engine_run(const lce_case *cases, size_t count, const char *tier_name) {
  return engine_run_as(cases, count, tier_name, 0);
}

static double engine_seconds(const lce_case *cases, size_t count, const char *tier_name) {
  return engine_run(cases, count, tier_name).seconds;
}

static double fuzz_rate(const char *tier_name, int count) {
  lce_case *cases = calloc((size_t)count, sizeof *cases);
  lce_status st = {0};
  for (int i = 0; i < count; i++) {
    uint8_t bytes[16];
    for (int b = 0; b < 16; b++) bytes[b] = (uint8_t)lce_rand_below(0xF022, (uint64_t)i, (uint64_t)b, 256);
    if (lce_fuzz_case_from_bytes(bytes, sizeof bytes, &cases[i], &st) != LCE_OK) {
      fprintf(stderr, "bench_oracle: fuzz case mapping: %s\n", st.msg);
      exit(2);
    }
  }
  const double rate = count / engine_seconds(cases, (size_t)count, tier_name);
  free(cases);
  return rate;
}

/* Wall seconds of judging fused-host over every case of a matrix with a tier, as `lcecheck check
 * --subject fused-host --matrix NAME --oracle TIER` does (tensors, the subject, the tier, the
 * metrics; no golden file: the bounds cost nothing next to the rest). */
static judged_split judge_matrix(const char *name, const char *tier_name, int serial) {
  size_t count;
  lce_case *cases = matrix_cases(name, &count);
  const judged_split js = engine_run_as(cases, count, tier_name, serial);
  free(cases);
  return js;
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

/* Tier 1 (with escalation) and tier 0 at each thread count of a list: seconds and whether the result
 * has the same bits as at the first count. */
enum { MAX_THREAD_COUNTS = 16 };
typedef struct thread_point {
  int threads;
  double fast_seconds, mpfr_seconds;
  int fast_same, mpfr_same;
  judged_split judged_fast, judged_mpfr; /* the first matrix judged on that many threads */
} thread_point;

static int thread_scaling(const lce_case *c, const char *list, thread_point *pts) {
  uint64_t first_fast = 0, first_mpfr = 0;
  int n = 0;
  for (const char *p = list; *p && n < MAX_THREAD_COUNTS; n++) {
    thread_point *t = &pts[n];
    t->threads = atoi(p) > 0 ? atoi(p) : 1;
#ifdef _OPENMP
    omp_set_num_threads(t->threads);
#endif
    uint64_t hf, hm;
    int64_t d, tot;
    fprintf(stderr, "bench_oracle: tier 1 and tier 0 on %d thread(s) ...\n", t->threads);
    t->fast_seconds = time_fast(c, 1, NULL, &hf);
    t->mpfr_seconds = time_oracle(c, &d, &tot, &hm);
    if (n == 0) first_fast = hf, first_mpfr = hm;
    t->fast_same = hf == first_fast, t->mpfr_same = hm == first_mpfr;
    p += strcspn(p, ",");
    p += *p == ',';
  }
  return n;
}

/* --tier1 ID: tier 1 alone on one case at each thread count (default: all), for shapes tier 0 cannot
 * run: seconds, seconds per token, multiply-adds per second, the refine and escalation parts, and the
 * result's hash (the same at every count, or exit 1). */
static int tier1_only(const char *id, const char *list, int64_t block_rows) {
  lce_case c;
  lce_tensors t;
  lce_status st = {0};
  if (lce_case_parse(id, &c, &st) != LCE_OK || lce_case_generate(&c, &t, &st) != LCE_OK) {
    fprintf(stderr, "bench_oracle: %s\n", st.msg);
    return 2;
  }
  char all[16];
  snprintf(all, sizeof all, "%d", lce_thread_limit());
  uint64_t first = 0;
  int same = 1;
  for (const char *p = list ? list : all; *p; p += *p == ',') {
#ifdef _OPENMP
    omp_set_num_threads(atoi(p) > 0 ? atoi(p) : 1);
#endif
    lce_oracle_result r;
    lce_fast_stats fs;
    const double t0 = lce_now_seconds();
    const lce_fast_options opt = {.escalate = 1, .block_rows = block_rows};
    if (lce_fast_run_opts(&c, &t, &opt, &r, &fs, &st) != LCE_OK) {
      fprintf(stderr, "bench_oracle: %s\n", st.msg);
      return 2;
    }
    const double dt = lce_now_seconds() - t0;
    lce_fast_cost cost;
    lce_fast_estimate(&c, &opt, &cost);
    const uint64_t h = result_hash(&r);
    first = first ? first : h, same &= h == first;
    printf("tier 1 %s on %d thread(s): %.2f s, %.4f s a token, %.3g multiply-adds/s, refine %.2f s (%lld decided), "
           "escalation %.2f s (%lld elements), %lld of %lld logits not proven exact, hash %016llx\n", id, atoi(p) > 0 ? atoi(p) : 1, dt, dt / (double)c.n,
           3.0 * (double)c.n * (double)c.h * (double)c.v / dt, fs.refine_seconds, (long long)fs.refined,
           fs.escalation_seconds, (long long)fs.escalated, (long long)fs.inexact_logits, (long long)fs.logits, (unsigned long long)h);
    const double passes = fs.pass_seconds[0] + fs.pass_seconds[1] + fs.pass_seconds[2] + fs.pass_seconds[3];
    printf("  passes over the token blocks (%lld rows each): logits %.2f s, rows %.2f s, d_hidden %.2f s, d_weight %.2f s; "
           "the rest %.2f s\n", (long long)cost.block_rows, fs.pass_seconds[0], fs.pass_seconds[1], fs.pass_seconds[2],
           fs.pass_seconds[3], dt - passes - fs.refine_seconds - fs.escalation_seconds);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("  memory: tier 1's estimate %.0f MiB; the process's peak %.0f MiB (the case's tensors too)\n",
           cost.bytes / 0x1p20, (double)ru.ru_maxrss / 1024.0);
    fflush(stdout);
    lce_oracle_free(&r);
    p += strcspn(p, ",");
  }
  lce_tensors_free(&t);
  if (!same) printf("  OTHER BITS at another thread count\n");
  return same ? 0 : 1;
}

int main(int argc, char **argv) {
  lce_parallel_prefer_passive(argv); /* no spinning OpenMP threads (lce_parallel.h) */
  int json = 0;
  const char *matrices = "default,wide", *threads = NULL, *tier1 = NULL;
  int64_t block_rows = 0;
  lce_case c = lce_case_default();
  c.n = 64, c.h = 256, c.v = 2048, c.vp = 2048, c.vocab_chunk = 256, c.dtype = LCE_BF16, c.prior_grad = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (i + 1 < argc && strcmp(argv[i], "--n") == 0) c.n = atoll(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--h") == 0) c.h = atoll(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--v") == 0) c.vp = c.v = atoll(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--matrices") == 0) matrices = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) threads = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--tier1") == 0) tier1 = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--block-rows") == 0 && atoll(argv[i + 1]) > 0) block_rows = atoll(argv[++i]);
    else { /* --help: the usage on stdout, exit 0; anything else: on stderr, exit 2 */
      const int help = strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
      fprintf(help ? stdout : stderr,
              "usage: bench_oracle [--json] [--n N] [--h H] [--v V] [--matrices M,M | none] [--threads T,T,...]\n"
              "       bench_oracle --tier1 CASE_ID [--threads T,T,...] [--block-rows R]\n");
      return help ? 0 : 2;
    }
  }
  if (tier1) return tier1_only(tier1, threads, block_rows);
  char id[200];
  lce_case_format(&c, id, sizeof id);
  double macs = 3.0 * (double)c.n * (double)c.h * (double)c.v;

  lce_case small = lce_case_default();
  small.n = 16, small.h = 64, small.v = 512, small.vp = 512, small.prior_grad = 1;
  int64_t sd, stot, d, tot;
  fprintf(stderr, "bench_oracle: small case n16 h64 v512 ...\n");
  double small_s = time_oracle(&small, &sd, &stot, NULL);
  for (int rep = 0; rep < 2; rep++) { /* best of three: the machine may be shared */
    double s = time_oracle(&small, &sd, &stot, NULL);
    if (s < small_s) small_s = s;
  }
  fprintf(stderr, "bench_oracle: oracle on %s (%.3g multiply-adds) ...\n", id, macs);
  double oracle_s = time_oracle(&c, &d, &tot, NULL);
  fprintf(stderr, "bench_oracle: mpfr_fma chain ...\n");
  double fma_rate = rate_fma_chain(4000000);
  fprintf(stderr, "bench_oracle: exact products + mpfr_sum ...\n");
  double sum_rate = rate_exact_sum(8000000);
  double oracle_rate = macs / oracle_s;
  fprintf(stderr, "bench_oracle: tier 1 on %s ...\n", id);
  lce_fast_stats fs;
  double fast_s = time_fast(&c, 1, &fs, NULL);
  double fast_rate = macs / fast_s;
  lce_fast_stats fs_alone;
  double alone_rate = macs / time_fast(&c, 0, &fs_alone, NULL);
  fprintf(stderr, "bench_oracle: plain double dot ...\n");
  double plain_rate = rate_plain_dot(200000000);
  fprintf(stderr, "bench_oracle: fuzz executions of the small class, tier 1 and tier 0 ...\n");
  const double fuzz_fast = fuzz_rate("fast", 200), fuzz_mpfr = fuzz_rate("mpfr", 40);
  thread_point pts[MAX_THREAD_COUNTS];
  const int all_threads = lce_thread_limit();
  const int npts = threads ? thread_scaling(&c, threads, pts) : 0;
#ifdef _OPENMP
  omp_set_num_threads(all_threads);
#endif
  enum { MAX_MATRICES = 8 };
  char names[MAX_MATRICES][32];
  matrix_stats per[MAX_MATRICES];
  int nm = 0;
  for (const char *p = matrices; strcmp(matrices, "none") != 0 && *p && nm < MAX_MATRICES;) {
    size_t len = strcspn(p, ",");
    snprintf(names[nm], sizeof names[nm], "%.*s", (int)len, p);
    fprintf(stderr, "bench_oracle: tier 1 over the %s matrix ...\n", names[nm]);
    per[nm] = time_matrix(names[nm]);
    nm++;
    p += len + (p[len] == ',');
  }
  /* The first matrix judged as `lcecheck check` judges it, with each tier: the speedup a user sees. */
  judged_split jf = {0}, jm = {0}, jf1 = {0}, jm1 = {0};
  if (nm > 0) {
    fprintf(stderr, "bench_oracle: fused-host judged over the %s matrix with tier 1, then tier 0 ...\n", names[0]);
    jf = judge_matrix(names[0], "fast", 0);
    jm = judge_matrix(names[0], "mpfr", 0);
    if (all_threads > 1) { /* and with one case at a time, its stages parallel inside */
      fprintf(stderr, "bench_oracle: the same with one case at a time ...\n");
      jf1 = judge_matrix(names[0], "fast", 1);
      jm1 = judge_matrix(names[0], "mpfr", 1);
    }
  }
  for (int i = 0; nm > 0 && i < npts; i++) {
#ifdef _OPENMP
    omp_set_num_threads(pts[i].threads);
#endif
    fprintf(stderr, "bench_oracle: fused-host judged over the %s matrix on %d thread(s) ...\n", names[0], pts[i].threads);
    pts[i].judged_fast = judge_matrix(names[0], "fast", 0);
    pts[i].judged_mpfr = judge_matrix(names[0], "mpfr", 0);
  }
#ifdef _OPENMP
  omp_set_num_threads(all_threads);
#endif
  const double judge_fast = jf.seconds, judge_mpfr = jm.seconds;
  /* Every judged run of a tier gives the same verdicts, to the bit, whatever the threads. */
  int same_bits = 1, judged_same = !(all_threads > 1 && nm > 0) || (jf1.hash == jf.hash && jm1.hash == jm.hash);
  for (int i = 0; i < npts; i++) {
    same_bits &= pts[i].fast_same && pts[i].mpfr_same;
    if (nm > 0) judged_same &= pts[i].judged_fast.hash == jf.hash && pts[i].judged_mpfr.hash == jm.hash;
  }
  same_bits &= judged_same;

  if (json) {
    printf("{\"case\": \"%s\", \"precision_bits\": %d, \"oracle_seconds\": %.6f, \"oracle_macs_per_s\": %.6g, "
           "\"fma_chain_macs_per_s\": %.6g, \"exact_sum_macs_per_s\": %.6g, \"oracle_over_fma\": %.4f, "
           "\"oracle_over_exact_sum\": %.4f, \"decisive\": %lld, \"total\": %lld, "
           "\"small_case_ms\": %.3f, \"small_decisive\": %lld, \"small_total\": %lld, "
           "\"fast_seconds\": %.6f, \"fast_macs_per_s\": %.6g, \"fast_escalated\": %lld, \"fast_alone_macs_per_s\": %.6g, "
           "\"plain_dot_macs_per_s\": %.6g, \"fast_over_plain_dot\": %.4f, \"fast_over_oracle\": %.4f, "
           "\"fuzz_execs_per_s_fast\": %.4g, \"fuzz_execs_per_s_mpfr\": %.4g, \"matrices\": [",
           id, LCE_ORACLE_PREC, oracle_s, oracle_rate, fma_rate, sum_rate, oracle_rate / fma_rate,
           oracle_rate / sum_rate, (long long)d, (long long)tot, small_s * 1e3, (long long)sd, (long long)stot, fast_s, fast_rate,
           (long long)fs.escalated, alone_rate, plain_rate, fast_rate / plain_rate, fast_rate / oracle_rate, fuzz_fast,
           fuzz_mpfr);
    for (int m = 0; m < nm; m++)
      printf("%s{\"name\": \"%s\", \"cases\": %lld, \"escalated\": %lld, \"refined\": %lld, \"elements\": %lld, "
             "\"fast_seconds\": %.3f, \"escalating_cases\": %lld, \"all_rows_cases\": %lld, \"escalation_seconds\": %.3f}",
             m ? ", " : "", names[m], (long long)per[m].cases, (long long)per[m].escalated, (long long)per[m].refined,
             (long long)per[m].total,
             per[m].seconds, (long long)per[m].escalating_cases, (long long)per[m].all_rows_cases,
             per[m].escalation_seconds);
    printf("], \"judged_matrix\": \"%s\", \"judged_seconds_fast\": %.3f, \"judged_seconds_mpfr\": %.3f, "
           "\"judged_mpfr_over_fast\": %.3f, \"judged_split_fast\": [%.3f, %.3f, %.3f], "
           "\"judged_split_mpfr\": [%.3f, %.3f, %.3f], \"judged_judge_seconds\": [%.3f, %.3f], "
           "\"judged_serial_seconds\": [%.3f, %.3f], \"judged_cpu_seconds\": [%.3f, %.3f], \"judged_same_bits\": %s, "
           "\"threads\": [", nm ? names[0] : "", judge_fast, judge_mpfr, judge_fast > 0 ? judge_mpfr / judge_fast : 0.0,
           jf.generate, jf.subject, jf.reference, jm.generate, jm.subject, jm.reference, jf.judge, jm.judge, jf1.seconds,
           jm1.seconds, jf.cpu_seconds, jm.cpu_seconds, judged_same ? "true" : "false");
    for (int i = 0; i < npts; i++)
      printf("%s{\"threads\": %d, \"fast_seconds\": %.6f, \"fast_same_bits\": %s, \"mpfr_seconds\": %.6f, "
             "\"mpfr_same_bits\": %s, \"judged_seconds_fast\": %.3f, \"judged_seconds_mpfr\": %.3f}", i ? ", " : "",
             pts[i].threads, pts[i].fast_seconds, pts[i].fast_same ? "true" : "false", pts[i].mpfr_seconds,
             pts[i].mpfr_same ? "true" : "false", pts[i].judged_fast.seconds, pts[i].judged_mpfr.seconds);
    printf("]}\n");
    return same_bits ? 0 : 1;
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
  printf("  tier 1 / plain double dot = %.3f (%.1fx slower), tier 1 / tier 0 = %.1f\n", fast_rate / plain_rate,
         plain_rate / fast_rate, fast_rate / oracle_rate);
  for (int m = 0; m < nm; m++)
    printf("  matrix %-8s tier 1: %lld cases in %.2f s, %lld of %lld elements escalated to tier 0 (%.4f%%) in %lld "
           "cases (%lld running tier 0 on every token), %.2f s of it escalating; %lld decided by its double-double "
           "step\n", names[m], (long long)per[m].cases, per[m].seconds, (long long)per[m].escalated,
           (long long)per[m].total, 100.0 * (double)per[m].escalated / (double)(per[m].total ? per[m].total : 1),
           (long long)per[m].escalating_cases, (long long)per[m].all_rows_cases, per[m].escalation_seconds,
           (long long)per[m].refined);
  printf("  fuzz executions of the small class (fused-host, no libFuzzer): tier 1 %.1f/s, tier 0 %.1f/s (%.1fx)\n",
         fuzz_fast, fuzz_mpfr, fuzz_fast / fuzz_mpfr);
  if (nm > 0) {
    printf("  matrix %-8s judged (fused-host, as lcecheck check): tier 1 %.2f s, tier 0 %.2f s: %.2fx faster with "
           "tier 1\n", names[0], judge_fast, judge_mpfr, judge_mpfr / judge_fast);
    for (int t = 0; t < 2; t++) {
      const judged_split *js = t ? &jm : &jf;
      printf("    with tier %d: tensors %.2f s, fused-host %.2f s, reference %.2f s, judge %.2f s (summed over the cases, "
             "%d thread(s))\n", t ? 0 : 1, js->generate, js->subject, js->reference, js->judge, all_threads);
    }
    printf("    CPU seconds (every thread; on a shared machine the work, without the others' share): tier 1 %.2f, "
           "tier 0 %.2f: %.2fx\n", jf.cpu_seconds, jm.cpu_seconds, jm.cpu_seconds / jf.cpu_seconds);
    if (all_threads > 1)
      printf("    one case at a time (its stages parallel inside): tier 1 %.2f s, tier 0 %.2f s: %.2fx\n", jf1.seconds,
             jm1.seconds, jm1.seconds / jf1.seconds);
    if (!judged_same) printf("    VERDICTS DIFFER between thread counts or scheduling\n");
  }
  printf("  case %s: %.3f s, decisive %lld/%lld\n", id, oracle_s, (long long)d, (long long)tot);
  for (int i = 0; i < npts; i++)
  {
    printf("  on %2d thread(s): tier 1 %.4f s (speedup %.2f, %s), tier 0 %.3f s (speedup %.2f, %s)\n", pts[i].threads,
           pts[i].fast_seconds, pts[0].fast_seconds / pts[i].fast_seconds, pts[i].fast_same ? "same bits" : "OTHER BITS",
           pts[i].mpfr_seconds, pts[0].mpfr_seconds / pts[i].mpfr_seconds, pts[i].mpfr_same ? "same bits" : "OTHER BITS");
    if (nm > 0)
      printf("      %s matrix judged: tier 1 %.2f s, tier 0 %.2f s: %.2fx faster with tier 1\n", names[0],
             pts[i].judged_fast.seconds, pts[i].judged_mpfr.seconds, pts[i].judged_mpfr.seconds / pts[i].judged_fast.seconds);
  }
  if (!same_bits) return 1;
  printf("  small case n16 h64 v512: %.1f ms (best of 3), decisive %lld/%lld\n", small_s * 1e3, (long long)sd,
         (long long)stot);
  return 0;
}
