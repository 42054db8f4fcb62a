/* lcecheck — command-line front end of the conformance suite.
 *
 * VERBS below is the one list of the verbs and of every option each accepts: `lcecheck --help`,
 * `lcecheck <verb> --help` and the argument check (cli_begin: an option the verb does not list, or
 * one given twice, is a usage error) all read it, so an option exists only where it is documented.
 * A new verb is one options array, one entry and its run function. */
#include <mpfr.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "lce_parallel.h"

#ifndef LCE_VERSION
#define LCE_VERSION "unknown" /* the build passes the CMake project version */
#endif

/* Options several verbs share, with the same meaning everywhere. */
#define OPT_JSON {"--json", NULL, "one JSON object on stdout (also on errors and skips)"}
#define OPT_QUIET {"--quiet", NULL, "no per-case progress lines on stderr"}
#define OPT_SUBJECT {"--subject", "S", "the subject under test (lcecheck list names them); default fused-host"}
#define OPT_MATRIX {"--matrix", "NAME", "the cases of a matrix (lcecheck list); default `default`"}
#define OPT_CASE {"--case", "ID", "one case by its id instead of a matrix"}
#define OPT_SHARD                                                                                     \
  {"--shard", "I/N", "with a matrix: only the cases whose index is I modulo N (0 <= I < N), so that N " \
                     "processes share it"}
#define OPT_GOLDEN                                                                                      \
  {"--golden", "PATH", "the golden file (default golden/<class>.golden, $LCE_GOLDEN_DIR/<class>.golden, " \
                       "golden/<arch>/ for GPU subjects)"}
#define OPT_ORACLE                                                                              \
  {"--oracle", "O", "the reference: fast (tier 1, the default: double on the CPU with a bound per element, " \
                    "undecided elements by mpfr; tier 0's verdicts), mpfr (tier 0: MPFR on the CPU, the slow "    \
                    "truth, for certification) or fp64-gpu (tier 2, fp64 on the GPU, certified against mpfr)"}

#define OPT_ON_DEVICE                                                                                 \
  {"--on-device", NULL, "with --oracle fp64-gpu: keep the reference on the GPU and compare there (production " \
                        "shapes; no ulpfrac, class checks as counts)"}

#define OPT_OUTPUTS \
  {"--outputs", "O,...", "judge only these outputs (e.g. loss,d_hidden,d_weight); the others are not judged"}

static const cli_option LIST_OPTIONS[] = {OPT_JSON, {NULL, NULL, NULL}};

static const cli_option CHECK_OPTIONS[] = {
    OPT_SUBJECT, OPT_MATRIX, OPT_CASE, OPT_SHARD, OPT_GOLDEN, OPT_ORACLE, OPT_ON_DEVICE, OPT_OUTPUTS, OPT_QUIET,
    OPT_JSON, {NULL, NULL, NULL}};

static const cli_option MEASURE_OPTIONS[] = {
    OPT_SUBJECT, OPT_MATRIX, OPT_CASE, OPT_SHARD, OPT_ORACLE, OPT_ON_DEVICE, OPT_OUTPUTS, OPT_QUIET, OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option REPRO_OPTIONS[] = {
    OPT_SUBJECT,
    {"--dir", "D", "instead of --subject: the case answered by a runner in this exported directory, as judge reads it"},
    {"--subject-name", "NAME", "with --dir: the name the report gives the runner's kernel"},
    {"--golden-class", "C", "with --dir: the golden class whose bounds judge it"},
    OPT_GOLDEN,
    OPT_ORACLE,
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option COMPARE_OPTIONS[] = {
    {"--subjects", "A,B[,...]", "the subjects, at least two, run on the same inputs (required)"},
    OPT_MATRIX,
    OPT_CASE,
    OPT_ORACLE,
    {"--predict-factor", "F", "require the first subject's relerr and bias within a factor F (>= 1) of the second's"},
    {"--predict-outputs", "O,...", "restrict the --predict-factor check to these outputs (default all)"},
    {"--predict-precisions", "P,...", "restrict the --predict-factor check to these dtypes (default all)"},
    OPT_QUIET,
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option PRODUCTION_OPTIONS[] = {
    {"--shapes", "SET", "small, all (the default) or NxHxV[,NxHxV...]"},
    {"--subjects", "A,...", "default fused-cuda, mutant-cuda/bf16-dhidden-accum, unfused-cuda"},
    {"--tp", "T,...", "tensor-parallel shard counts (default 1,8)"},
    {"--embeddings", "E", "tied, untied or tied,untied (the default)"},
    {"--vocab-chunk", "C", "vocab chunk of the subjects (default 4096)"},
    {"--seed", "S", "seed of the generated inputs (default 1)"},
    {"--jobs", "J", "host threads generating the next cases' inputs, 1..16 (default 3)"},
    {"--golden-dir", "DIR", "holds <arch>/<class>.golden (default golden: check's goldens)"},
    {"--measure-only", NULL, "metrics without bounds (exit 0 unless a class check fails)"},
    OPT_QUIET,
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option PROBE_OPTIONS[] = {
    {"--formats", "F,...", "bf16, fp16, tf32 (default all three)"},
    {"--tiles", "N", "mma.sync tiles per format, 1..2^20 (default 800: 102400 vectors)"},
    {"--seed", "S", "seed of the test vectors (default $LCE_SEED, else a fixed one)"},
    {"--arch", "NAME", "the tensor-core model to compare with (default sm90, or the dump's with --replay)"},
    {"--dump", "FILE", "write the vectors and the device's results for --replay"},
    {"--replay", "FILE", "re-check a dump against the model on the CPU (no GPU needed; no --dump, --curve)"},
    {"--curve", NULL, "only the cuBLAS error-vs-K curve"},
    {"--no-curve", NULL, "only the mma.sync comparison"},
    {"--wgmma", NULL, "the comparison through wgmma m64n256k16, fused-sm90's instruction (bf16, fp16; no curve; "
                      "CUTLASS builds, else exit 77)"},
    {"--curve-k", "K,...", "the curve's GEMM inner sizes, 1..2^22 (default 256 ... 262144)"},
    {"--curve-mn", "N", "the curve's M = N, 16..16384 (default 2048)"},
    {"--curve-sample", "S", "elements predicted by the model per K, 16..65536 (default 512)"},
    {"--show", "N", "mismatches printed as one-line repros, 0..1000 (default 8)"},
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option BENCH_OPTIONS[] = {
    {"--shapes", "NxHxV[,...]", "the shapes (default 8192x4096x128256,4096x4096x262144,16384x8192x152064; at most 8)"},
    {"--peers", "LIST", "also the external kernels in a Python process: torch-eager, torch-compile, liger, cce, "
                        "megatron-fused-lce, te-parallel-ce (from .subjects/transformer-engine), or all"},
    {"--reps", "N", "timed repetitions, median reported, 10..200 (default 20)"},
    {"--warmup", "N", "untimed repetitions first, 1..100 (default 3)"},
    {"--vocab-chunk", "C", "fused-cuda's vocab chunk (default 8192)"},
    {"--seed", "S", "shape i, repetition r draws inputs from S + 1000 (i + 1) + r (default 0)"},
    {"--python", "EXE", "the peers' interpreter (default python3)"},
    {"--megatron", "PATH", "Megatron-LM tree for megatron-fused-lce (default .subjects/megatron-fusions, else "
                           ".subjects/megatron)"},
    {"--render", "FILE", "print the table of a saved `bench --json` run (no GPU needed)"},
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option EXPORT_OPTIONS[] = {
    OPT_MATRIX,
    OPT_CASE,
    {"--dir", "D", "where the cases are written (required): new, empty, or an earlier export, which is replaced"},
    OPT_QUIET,
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option JUDGE_OPTIONS[] = {
    {"--dir", "D", "an exported directory whose cases a runner has answered in <case>/out/ (required)"},
    {"--subject-name", "NAME", "the name the report gives the runner's kernel (required)"},
    {"--golden-class", "C", "the golden class whose bounds judge it, e.g. fused-host (required)"},
    {"--golden", "PATH", "the golden file (default golden/<C>.golden, $LCE_GOLDEN_DIR/<C>.golden)"},
    OPT_ORACLE,
    OPT_ON_DEVICE,
    OPT_OUTPUTS,
    OPT_QUIET,
    OPT_JSON,
    {NULL, NULL, NULL}};

static const cli_option CONVERGE_OPTIONS[] = {
    OPT_SUBJECT,
    {"--embeddings", "E", "untied, tied or untied,tied (the default)"},
    {"--steps", "T", "SGD steps, 1..100000 (default 60; the golden judges its recorded run only)"},
    {"--every", "E", "evaluate every E steps, 1 for every step (default 10; the golden judges its recorded E)"},
    {"--lr", "LR", "learning rate (default 2N/H: 4 at the default N 64, H 32)"},
    {"--shape", "NxHxV", "tokens per step, hidden size, vocab (default 64x32x256; the golden judges its recorded shape)"},
    {"--vocab-chunk", "C", "vocab rows per chunk, 1..V (default 4)"},
    {"--seed", "S", "seed of the token stream and the start (default 1; any seed is judged)"},
    {"--oracle", "O", "the reference run's gradients: fast (tier 1, the default), mpfr (tier 0) or fp64-gpu"},
    {"--golden", "PATH", "the bounds (default golden/converge.bounds)"},
    {"--measure-only", NULL, "the curves without a verdict"},
    OPT_QUIET,
    OPT_JSON,
    {NULL, NULL, NULL}};

static int run_check(void) { return cli_check(0); }
static int run_measure(void) { return cli_check(1); }

static const cli_verb VERBS[] = {
    {"list", cli_list, "subjects (with the mutants), matrices, oracles, MPFR version", NULL, NULL, LIST_OPTIONS},
    {"check", run_check, "run a matrix or one case and judge every case against the goldens", NULL,
     "Give --matrix or --case, not both; --shard only with a matrix. Progress on stderr, one line per case; "
     "the report (or the JSON object) on stdout.",
     CHECK_OPTIONS},
    {"measure", run_measure, "the same run with class checks and metrics but no bounds (golden regeneration)",
     NULL, "Give --matrix or --case, not both; --shard only with a matrix.", MEASURE_OPTIONS},
    {"repro", cli_repro, "one case in full detail: the case, the oracle's certification, every metric and budget",
     "ID", "ID is a case id as check prints it (format: reference/case/lce_case.h). A failing case of check, judge or "
     "a fuzz finding prints the repro command that reruns it, quoted for the shell.", REPRO_OPTIONS},
    {"compare", cli_compare, "several subjects on the same inputs and one oracle: goldens, pairwise distances",
     NULL, "Give --matrix or --case, not both (default: the default matrix).", COMPARE_OPTIONS},
    {"production", cli_production, "GPU: fused-cuda, its mutant and the baseline at production shapes vs fp64",
     NULL, "Needs a GPU (exit 77 without one). Goldens: golden/<arch>/, as check's.", PRODUCTION_OPTIONS},
    {"probe", cli_probe, "GPU: single mma.sync (or wgmma) results bit for bit vs the tensor-core model; cuBLAS error vs K",
     NULL, "Needs a GPU (exit 77 without one), except --replay. Give --curve or --no-curve, not both.",
     PROBE_OPTIONS},
    {"bench", cli_bench, "GPU: fused-cuda (and fused-sm90) and the external kernels side by side, each beside its "
     "three-GEMM floor",
     NULL,
     "Needs a GPU (exit 77 without one), except --render. Rows: time (forward, backward, total), TFLOP/s (6NHV), "
     "the ratio to the three-GEMM floor measured in the same process, extra memory; a peer that cannot run is a "
     "row saying why. fused-sm90 (CUTLASS builds) runs on the same inputs after fused-cuda; its note gives its "
     "differences to fused-cuda's lse, d_hidden and d_weight. Exit 1 when fused-cuda, fused-sm90 or the floor "
     "failed at a shape, or the peers' process failed.",
     BENCH_OPTIONS},
    {"export", cli_export, "write cases as .npy + JSON for a runner in any language (scripts/subjects/EXCHANGE.md)",
     NULL,
     "Give --matrix or --case, not both, and --dir. bf16 tensors are stored as their 16-bit patterns (<u2); "
     "case.json names every dtype and the full semantics. A non-empty --dir is refused unless it holds an "
     "earlier export.",
     EXPORT_OPTIONS},
    {"judge", cli_judge, "judge a runner's outputs in an exported directory as check judges a subject", NULL,
     "Inputs are regenerated from each case id and must be bit-identical to the exported files. out/skip.txt "
     "skips a case with the runner's reason; meta.json's \"missing\" outputs are not judged and are named; an "
     "absent, truncated, wrongly shaped or typed output file is a class failure naming it. "
     "A malformed manifest.json or case.json exits 2. `check --subject exec:CMD` runs CMD over a fresh export "
     "itself (golden class $LCE_EXEC_GOLDEN_CLASS, default fused-host; LCE_KEEP_EXCHANGE=1 keeps the directory).",
     JUDGE_OPTIONS},
    {"converge", cli_converge, "train a small LM with the subject's gradients and with the oracle's: the gap",
     NULL,
     "A bigram model (bf16, N 64, H 32, V 256 in 64 vocab chunks) whose head is the subject's FLCE, trained "
     "twice from one start; every 10 steps (--every) the held-out loss of both runs, their parameter drift and the "
     "gradients' agreement. golden/converge.bounds bounds |gap|, drift and the largest gradient relerr of "
     "its recorded run (conformance/engine/lce_converge.h).",
     CONVERGE_OPTIONS},
    {NULL, NULL, NULL, NULL, NULL, NULL}};

static const char EXIT_STATUSES[] =
    "exit status: 0 pass, 1 a case failed or errored, 2 bad usage or input, 77 skipped (no GPU)\n";

static void usage(FILE *f) {
  fprintf(f, "usage: lcecheck <verb> [options]    lcecheck <verb> --help    lcecheck --version\n\nverbs:\n");
  for (const cli_verb *v = VERBS; v->name; v++) fprintf(f, "  %-11s %s\n", v->name, v->summary);
  fprintf(f, "\nevery verb takes --json (one object on stdout); `lcecheck help <verb>` lists a verb's options\n%s",
          EXIT_STATUSES);
}

static void verb_help(const cli_verb *v) {
  printf("usage: lcecheck %s", v->name);
  for (const cli_option *o = v->options; o->name; o++) printf(o->value ? " [%s %s]" : " [%s]", o->name, o->value);
  if (v->positional) printf(" %s", v->positional);
  printf("\n\n%s.\n", v->summary);
  if (v->details) printf("%s\n", v->details);
  printf("\noptions:\n");
  for (const cli_option *o = v->options; o->name; o++) {
    char head[64];
    snprintf(head, sizeof head, o->value ? "%s %s" : "%s", o->name, o->value);
    printf("  %-26s %s\n", head, o->help);
  }
  printf("\n%s", EXIT_STATUSES);
}

static const cli_verb *find_verb(const char *name) {
  for (const cli_verb *v = VERBS; v->name; v++)
    if (strcmp(v->name, name) == 0) return v;
  return NULL;
}

static int is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int main(int argc, char **argv) {
  lce_parallel_prefer_passive(argv); /* no spinning OpenMP threads (lce_parallel.h) */
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("lcecheck %s (MPFR %s, GMP %s)\n", LCE_VERSION, mpfr_get_version(), gmp_version);
    return CLI_PASS;
  }
  if (is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
    if (argc == 2) {
      usage(stdout);
      return CLI_PASS;
    }
    const cli_verb *v = find_verb(argv[2]);
    if (v == NULL || argc > 3) {
      fprintf(stderr, "lcecheck help: %s '%s'\n", v ? "one verb only, not" : "unknown verb", argv[v ? 3 : 2]);
      return CLI_USAGE;
    }
    verb_help(v);
    return CLI_PASS;
  }
  const cli_verb *v = find_verb(argv[1]);
  if (v == NULL) {
    cli_start(argv[1], argc, argv);
    return cli_finish(cli_fail(CLI_USAGE, "unknown verb (lcecheck --help lists them)"));
  }
  for (int i = 2; i < argc; i++)
    if (is_help(argv[i])) {
      verb_help(v);
      return CLI_PASS;
    }
  int rc = cli_begin(VERBS, v, argc, argv);
  if (rc == CLI_PASS) rc = v->run();
  return cli_finish(rc);
}
