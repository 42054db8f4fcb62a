/* lcecheck — command-line front end of the conformance suite.
 *   lcecheck list                              subjects (with mutants) and matrices
 *   lcecheck check   --subject S [--matrix M [--shard I/N] | --case ID] [--golden P]   judge against goldens
 *   lcecheck measure --subject S [--matrix M [--shard I/N] | --case ID]   metrics only (regeneration)
 *   lcecheck repro   [--subject S] ID [--golden P]                      one case in full detail
 *   lcecheck bench                                                       fused-cuda timings (GPU)
 *   lcecheck compare --subjects A,B[,...] [--case ID | --matrix M]       subjects side by side, one oracle
 *   lcecheck production [--shapes S] [--subjects A,B] [--tp 1,8]          production shapes, fp64 GPU reference
 *   lcecheck probe [--arch NAME] [--dump F | --replay F] [--curve]       tensor-core MMAs vs the model (GPU)
 * Every verb takes --json. Exit status: 0 pass, 1 a case failed or errored, 2 bad usage or input. */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: lcecheck <verb> [options]\n"
          "  list                                      subjects, mutants and matrices\n"
          "  check   --subject S [--matrix M [--shard I/N] | --case ID] [--golden PATH] [--quiet]\n"
          "                                            run a conformance matrix, judge against goldens;\n"
          "                                            exit 0 only if every case passes\n"
          "  measure --subject S [--matrix M [--shard I/N] | --case ID] [--quiet]\n"
          "                                            error metrics without bounds (feeds golden regeneration)\n"
          "                                            --shard I/N (check, measure): only the cases whose\n"
          "                                            index in the matrix is I modulo N (0 <= I < N),\n"
          "                                            so that N processes share one matrix\n"
          "  repro   [--subject S] ID [--golden PATH]  one case in full detail\n"
          "  bench   [--reps N] [--warmup N] [--vocab-chunk C] [--shape NxHxV]\n"
          "                                            fused-cuda vs its plain cuBLAS GEMMs on the GPU\n"
          "  compare --subjects A,B[,C...] [--case ID | --matrix M] [--oracle mpfr|fp64-gpu] [--predict-factor F]\n"
          "                                            the subjects on the same cases and oracle: goldens, pairwise\n"
          "                                            distances; with F, A's relerr and bias predict B's\n"
          "  production [--shapes small|all|NxHxV,...] [--subjects A,B,...] [--tp 1,8] [--measure-only]\n"
          "                                            GPU subjects at production shapes vs the fp64 GPU reference\n"
          "  probe   [--arch NAME] [--formats bf16,fp16,tf32] [--tiles N] [--dump FILE] [--curve | --no-curve]\n"
          "          [--curve-k K,...] [--curve-mn N] [--curve-sample S] | --replay FILE [--arch NAME]\n"
          "                                            single mma.sync results bit for bit vs the model, cuBLAS\n"
          "                                            error-vs-K curve; --replay re-checks a dump without a GPU\n"
          "every verb accepts --json; default subject fused-host, default matrix default\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_PASS;
  }
  if (strcmp(argv[1], "list") == 0) return cli_list(argc, argv);
  if (strcmp(argv[1], "check") == 0) return cli_check(argc, argv, 0);
  if (strcmp(argv[1], "measure") == 0) return cli_check(argc, argv, 1);
  if (strcmp(argv[1], "repro") == 0) return cli_repro(argc, argv);
  if (strcmp(argv[1], "bench") == 0) return cli_bench(argc, argv);
  if (strcmp(argv[1], "compare") == 0) return cli_compare(argc, argv);
  if (strcmp(argv[1], "production") == 0) return cli_production(argc, argv);
  if (strcmp(argv[1], "probe") == 0) return cli_probe(argc, argv);
  fprintf(stderr, "lcecheck: unknown verb '%s'\n", argv[1]);
  usage(stderr);
  return CLI_USAGE;
}
