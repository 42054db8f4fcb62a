/* cli_probe.c — `lcecheck probe`: what this GPU's tensor cores and cuBLAS actually compute (the
 * options, their defaults and the exit statuses: lcecheck_main.c's table, `lcecheck probe --help`).
 * 1. MMA conformance (reference/device/probe/): test vectors in eleven classes, each tile through one
 *    mma.sync instruction (with --wgmma: one wgmma.mma_async m64n256k16, the instruction fused-sm90's
 *    logits GEMM issues; CUTLASS builds), every result compared bit for bit with the model (lce_gemm_model.h),
 *    mismatches counted per class and the first ones printed as one-line repros; a --dump is
 *    re-checked by --replay on any CPU, under any model.
 * 2. The error-vs-K curve (probe_curve.h): cuBLAS bf16 GEMMs against fp64 DGEMMs of the same data
 *    beside the model's and IEEE's prediction. It fails only where the host's re-drawn operands
 *    differ from the device's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "lce_device.h"
#include "probe_check.h"
#include "probe_curve.h"
#include "probe_dump.h"

#define PROBE_DEFAULT_SEED 0x9e0be5eedull
#define PROBE_MAX_CURVE 16

typedef struct probe_args {
  unsigned formats; /* a bit per lce_mma_format */
  long tiles;
  uint64_t seed;
  const char *arch, *dump, *replay;
  int mma, curve, json, show;
  int wgmma; /* the MMA part through wgmma m64n256k16 instead of mma.sync */
  int64_t curve_k[PROBE_MAX_CURVE];
  int ncurve;
  long curve_mn, curve_sample;
} probe_args;

/* What a run or a replay found: per format counts, the first mismatches, the curve. */
typedef struct probe_report {
  char device[PROBE_DUMP_NAME_LEN + 1];
  const lce_gemm_arch *arch;
  const char *instr; /* the instruction the MMA part ran through; NULL for a replay (a dump does not say) */
  uint64_t seed;
  int present[LCE_MMA_FORMATS];
  probe_counts counts[LCE_MMA_FORMATS];
  probe_mismatch *first;
  int kept;
  probe_curve_point curve[PROBE_MAX_CURVE];
  int ncurve;
} probe_report;

static int format_index(const char *name) {
  lce_mma_format f;
  return probe_format_parse(name, &f) ? (int)f : -1;
}

static int probe_parse(probe_args *a) {
  static const int64_t default_k[] = {256, 1024, 4096, 16384, 65536, 131072, 262144};
  memset(a, 0, sizeof *a);
  a->formats = (1u << LCE_MMA_FORMATS) - 1;
  a->ncurve = (int)(sizeof default_k / sizeof default_k[0]);
  memcpy(a->curve_k, default_k, sizeof default_k);
  const char *env = getenv("LCE_SEED");
  a->seed = env ? strtoull(env, NULL, 0) : PROBE_DEFAULT_SEED;
  a->arch = cli_opt("--arch"), a->dump = cli_opt("--dump"), a->replay = cli_opt("--replay");
  a->json = cli_opt("--json") != NULL;
  if (cli_opt("--curve") && cli_opt("--no-curve")) return cli_fail(CLI_USAGE, "give --curve or --no-curve, not both");
  a->mma = cli_opt("--curve") == NULL, a->curve = cli_opt("--no-curve") == NULL;
  /* M = N = 2048: 256 output tiles of 128x128 fill an H200's 132 SMs, which makes it less likely that
   * cuBLAS splits K (a split-K GEMM sums shorter chains: measured/predicted well below 1 says so). */
  uint64_t tiles = 800, mn = 2048, sample = 512, show = 8;
  const char *formats = cli_opt("--formats"), *curve_k = cli_opt("--curve-k");
  /* Each returns CLI_PASS (0) or, having said why, CLI_USAGE. */
  if (cli_opt_uint("--tiles", 1, 1u << 20, &tiles) || cli_opt_uint("--seed", 0, UINT64_MAX, &a->seed) ||
      cli_opt_uint("--curve-mn", 16, 16384, &mn) || cli_opt_uint("--curve-sample", 16, 1u << 16, &sample) ||
      cli_opt_uint("--show", 0, 1000, &show) ||
      (formats && cli_name_mask("--formats", formats, "format", format_index, &a->formats)))
    return CLI_USAGE;
  a->tiles = (long)tiles, a->curve_mn = (long)mn, a->curve_sample = (long)sample, a->show = (int)show;
  if (curve_k) {
    char buf[256], *items[PROBE_MAX_CURVE];
    if (cli_split("--curve-k", curve_k, buf, sizeof buf, items, PROBE_MAX_CURVE, &a->ncurve) != CLI_PASS)
      return CLI_USAGE;
    for (int c = 0; c < a->ncurve; c++) {
      uint64_t k;
      if (cli_uint("--curve-k", items[c], 1, 1u << 22, &k) != CLI_PASS) return CLI_USAGE;
      a->curve_k[c] = (int64_t)k;
    }
  }
  a->wgmma = cli_opt("--wgmma") != NULL;
  if (a->replay && (a->dump || !a->mma || a->wgmma))
    return cli_fail(CLI_USAGE, "--replay re-checks a dump: no --dump, --curve or --wgmma with it");
  if (a->wgmma) { /* the instruction only, in the formats fused-sm90 issues it for */
    if (!a->mma) return cli_fail(CLI_USAGE, "--wgmma probes the instruction: no --curve with it");
    if (formats == NULL) a->formats = 1u << LCE_MMA_BF16 | 1u << LCE_MMA_FP16;
    if (a->formats >> LCE_MMA_TF32 & 1u) return cli_fail(CLI_USAGE, "--wgmma: bf16 and fp16 only (fused-sm90 has no tf32 GEMM)");
    a->curve = 0;
  }
  return CLI_PASS;
}

static const lce_gemm_arch *find_arch(const char *name) {
  const lce_gemm_arch *arch = lce_gemm_arch_find(name);
  if (arch == NULL) {
    char known[512] = "";
    for (size_t i = 0; i < lce_gemm_arch_count(); i++)
      snprintf(known + strlen(known), sizeof known - strlen(known), " %s", lce_gemm_arch_at(i)->name);
    cli_fail(CLI_USAGE, "unknown model '%s'; known models:%s", name, known);
  }
  return arch;
}

/* ---- output --------------------------------------------------------------------------------- */

static int64_t report_failures(const probe_report *r) {
  int64_t bad = 0;
  for (int f = 0; f < LCE_MMA_FORMATS; f++)
    if (r->present[f]) bad += probe_counts_total(&r->counts[f], 1) + r->counts[f].exact_wrong;
  for (int c = 0; c < r->ncurve; c++) bad += r->curve[c].twin_mismatch;
  return bad;
}

static void print_text(const probe_report *r, const char *replayed) {
  printf("lcecheck probe: device %s, model %s, seed 0x%" PRIx64 "%s%s%s%s\n", r->device[0] ? r->device : "?",
         r->arch->name, r->seed, replayed ? ", replayed from " : "", replayed ? replayed : "",
         r->instr ? ", instruction " : "", r->instr ? r->instr : "");
  int any = 0;
  for (int f = 0; f < LCE_MMA_FORMATS; f++) any |= r->present[f];
  if (any) {
    printf("%-5s %-14s %9s %9s %9s\n", "fmt", "class", "vectors", "mismatch", "nan-only");
    for (int f = 0; f < LCE_MMA_FORMATS; f++) {
      if (!r->present[f]) continue;
      const probe_counts *c = &r->counts[f];
      int64_t nan_only = 0;
      for (int k = 0; k < PROBE_CLASSES; k++) {
        nan_only += c->nan_only[k];
        printf("%-5s %-14s %9" PRId64 " %9" PRId64 " %9" PRId64 "\n", probe_format_name((lce_mma_format)f),
               probe_class_name((probe_class)k), c->vectors[k], c->mismatches[k], c->nan_only[k]);
      }
      printf("%-5s %-14s %9" PRId64 " %9" PRId64 " %9" PRId64 "  %s\n", probe_format_name((lce_mma_format)f), "ALL",
             probe_counts_total(c, 0), probe_counts_total(c, 1), nan_only,
             probe_counts_total(c, 1) == 0 ? "bit-exact" : "MISMATCH");
      if (c->exact_wrong)
        printf("  HARNESS ERROR: %" PRId64 " exact-class results differ from the exact sum (fragment layout or "
               "operand conversion is wrong; the model comparison means nothing)\n",
               c->exact_wrong);
    }
    for (int m = 0; m < r->kept; m++) {
      char line[1024];
      probe_mismatch_line(&r->first[m], line, sizeof line);
      printf("%s\n", line);
    }
  }
  if (r->ncurve) {
    printf("curve: cuBLAS bf16 GEMM (CUBLAS_COMPUTE_32F) vs cuBLAS DGEMM of the same values (reference error <= "
           "K*2^-53*sum|terms|, the 'ref bound' column), M = N = %" PRId64 "; prediction (model %s, and ieee) on a "
           "sample of %d elements; m/p = measured/predicted on the sample\n",
           r->curve[0].m, r->arch->name, r->curve[0].sample);
    printf("%7s | %10s %11s | %10s %11s | %10s %11s | %10s %11s | %6s %6s | %9s\n", "K", "relerr", "bias",
           "samp relerr", "samp bias", "model rel", "model bias", "ieee rel", "ieee bias", "m/p re", "m/p bi",
           "ref bound");
    for (int c = 0; c < r->ncurve; c++) {
      const probe_curve_point *p = &r->curve[c];
      printf("%7" PRId64 " | %10.3e %11.3e | %10.3e %11.3e | %10.3e %11.3e | %10.3e %11.3e | %6.3f %6.3f | %9.2e%s\n",
             p->k, p->relerr, p->bias, p->relerr_s, p->bias_s, p->pred_relerr, p->pred_bias, p->ieee_relerr,
             p->ieee_bias, p->relerr_s / p->pred_relerr, p->bias_s / p->pred_bias, p->ref_bound,
             p->twin_mismatch ? "  PRNG TWIN MISMATCH" : "");
    }
    printf("per K: relerr/K and bias/K (DESIGN.md: ~1.16e-9 and ~-1.0e-9 on the H200)\n");
    for (int c = 0; c < r->ncurve; c++)
      printf("  K=%-7" PRId64 " relerr/K %.3e  bias/K %.3e  (model %.3e %.3e)\n", r->curve[c].k,
             r->curve[c].relerr / (double)r->curve[c].k, r->curve[c].bias / (double)r->curve[c].k,
             r->curve[c].pred_relerr / (double)r->curve[c].k, r->curve[c].pred_bias / (double)r->curve[c].k);
  }
  printf("probe: %s\n", report_failures(r) ? "FAIL" : "pass");
}

static void print_json(const probe_report *r, const char *replayed) {
  cli_json_begin();
  cli_json_member(stdout, "device", r->device);
  cli_json_member(stdout, "model", r->arch->name);
  printf(",\"instruction\":");
  if (r->instr) cli_json_string(stdout, r->instr);
  else printf("null");
  printf(",\"seed\":%" PRIu64 ",\"replayed\":", r->seed);
  if (replayed) cli_json_string(stdout, replayed);
  else printf("null");
  printf(",\"formats\":[");
  int first = 1;
  for (int f = 0; f < LCE_MMA_FORMATS; f++) {
    if (!r->present[f]) continue;
    const probe_counts *c = &r->counts[f];
    printf("%s{\"format\":\"%s\",\"vectors\":%" PRId64 ",\"mismatches\":%" PRId64 ",\"exact_wrong\":%" PRId64
           ",\"classes\":[",
           first ? "" : ",", probe_format_name((lce_mma_format)f), probe_counts_total(c, 0), probe_counts_total(c, 1),
           c->exact_wrong);
    for (int k = 0; k < PROBE_CLASSES; k++)
      printf("%s{\"class\":\"%s\",\"vectors\":%" PRId64 ",\"mismatches\":%" PRId64 ",\"nan_only\":%" PRId64 "}",
             k ? "," : "", probe_class_name((probe_class)k), c->vectors[k], c->mismatches[k], c->nan_only[k]);
    printf("]}");
    first = 0;
  }
  printf("],\"first_mismatches\":[");
  for (int m = 0; m < r->kept; m++) {
    char line[1024];
    probe_mismatch_line(&r->first[m], line, sizeof line);
    printf("%s", m ? "," : "");
    cli_json_string(stdout, line);
  }
  printf("],\"curve\":[");
  for (int c = 0; c < r->ncurve; c++) {
    const probe_curve_point *p = &r->curve[c];
    printf("%s{\"k\":%" PRId64 ",\"m\":%" PRId64 ",\"n\":%" PRId64 ",\"sample\":%d,\"relerr\":%.6e,\"bias\":%.6e,"
           "\"sample_relerr\":%.6e,\"sample_bias\":%.6e,\"model_relerr\":%.6e,\"model_bias\":%.6e,\"ieee_relerr\":%.6e,"
           "\"ieee_bias\":%.6e,\"ref_bound\":%.3e,\"twin_checked\":%" PRId64 ",\"twin_mismatch\":%" PRId64
           ",\"gemm_ms\":%.4f,\"dgemm_ms\":%.4f}",
           c ? "," : "", p->k, p->m, p->n, p->sample, p->relerr, p->bias, p->relerr_s, p->bias_s, p->pred_relerr,
           p->pred_bias, p->ieee_relerr, p->ieee_bias, p->ref_bound, p->twin_checked, p->twin_mismatch, p->gemm_ms,
           p->dgemm_ms);
  }
  printf("],\"pass\":%s}\n", report_failures(r) ? "false" : "true");
}

static int finish(const probe_args *a, const probe_report *r, const char *replayed) {
  if (a->json) print_json(r, replayed);
  else print_text(r, replayed);
  return report_failures(r) ? CLI_FAIL : CLI_PASS;
}

/* ---- replay --------------------------------------------------------------------------------- */

static int probe_replay(const probe_args *a, probe_report *r) {
  probe_dump d;
  lce_status st;
  lce_status_clear(&st);
  if (probe_dump_read(a->replay, &d, &st) != LCE_OK) return cli_fail(CLI_USAGE, "cannot replay: %s", st.msg);
  r->arch = find_arch(a->arch ? a->arch : d.model);
  if (r->arch == NULL) {
    probe_dump_free(&d);
    return CLI_USAGE;
  }
  snprintf(r->device, sizeof r->device, "%s", d.device);
  r->seed = d.seed;
  for (int s = 0; s < d.sections; s++) {
    const probe_tileset *ts = &d.set[s];
    r->present[ts->format] = 1;
    probe_check(r->arch, ts, &r->counts[ts->format], r->first, a->show, &r->kept);
  }
  probe_dump_free(&d);
  return finish(a, r, a->replay);
}

/* ---- a GPU run ------------------------------------------------------------------------------ */

#ifdef LCE_PROBE_WITH_CUDA
static int fail_run(const char *what, const lce_status *st) {
  const int code = st->code == LCE_ENODEV ? CLI_SKIP : st->code == LCE_EIO || st->code == LCE_EINVAL ? CLI_USAGE : CLI_FAIL;
  return cli_fail(code, "%s: %s (%s:%d)%s", what, st->msg, st->file ? st->file : "?", st->line,
                  code == CLI_SKIP ? ": skipped (exit 77); --replay FILE needs no GPU" : "");
}

/* One format's tiles through the instruction a names. */
static lce_code probe_instruction(const probe_args *a, probe_tileset *ts, lce_status *st) {
  if (!a->wgmma) return probe_gpu_mma(ts, st);
#ifdef LCE_PROBE_WITH_WGMMA
  return probe_gpu_wgmma(ts, st);
#else
  return lce_fail(st, LCE_ENODEV, __FILE__, __LINE__,
                  "probe: this build has no wgmma probe (CUTLASS's headers were not found: scripts/setup.sh)");
#endif
}

static int probe_mma_part(const probe_args *a, probe_report *r, lce_status *st) {
  probe_dump d;
  memset(&d, 0, sizeof d);
  d.seed = r->seed;
  snprintf(d.device, sizeof d.device, "%s", r->device);
  snprintf(d.model, sizeof d.model, "%s", r->arch->name);
  int rc = CLI_PASS;
  for (int f = 0; f < LCE_MMA_FORMATS && rc == CLI_PASS; f++) {
    if (!(a->formats >> f & 1u)) continue;
    probe_tileset *ts = &d.set[d.sections];
    if (probe_tileset_alloc(ts, (lce_mma_format)f, (size_t)a->tiles, st) != LCE_OK) {
      rc = fail_run("allocation", st);
      break;
    }
    d.sections++;
    fprintf(stderr, "probe: %s: %ld tiles (%ld vectors) through %s\n", probe_format_name((lce_mma_format)f),
            a->tiles, a->tiles * PROBE_TILE_OUT, r->instr);
    probe_generate(ts, r->seed);
    if (probe_instruction(a, ts, st) != LCE_OK) {
      rc = fail_run(a->wgmma ? "wgmma" : "mma", st);
      break;
    }
    r->present[f] = 1;
    probe_check(r->arch, ts, &r->counts[f], r->first, a->show, &r->kept);
  }
  if (rc == CLI_PASS && a->dump) {
    if (probe_dump_write(a->dump, &d, st) != LCE_OK) rc = fail_run("dump", st);
    else fprintf(stderr, "probe: wrote %s (replay: lcecheck probe --replay %s [--arch NAME])\n", a->dump, a->dump);
  }
  probe_dump_free(&d);
  return rc;
}

static int probe_run(const probe_args *a, probe_report *r) {
  lce_status st;
  lce_status_clear(&st);
  r->arch = find_arch(a->arch ? a->arch : "sm90");
  if (r->arch == NULL) return CLI_USAGE;
  r->seed = a->seed;
  r->instr = a->wgmma ? "wgmma.mma_async m64n256k16 (fused-sm90's)" : "mma.sync m16n8k16/m16n8k8";
  lce_device_info dev;
  char why[200];
  if (!lce_device_query(&dev, why, sizeof why)) {
    lce_fail(&st, LCE_ENODEV, __FILE__, __LINE__, "probe: %s", why);
    return fail_run("device", &st);
  }
  snprintf(r->device, sizeof r->device, "%.*s", PROBE_DUMP_NAME_LEN, dev.name);
  fprintf(stderr, "probe: %s (compute capability %d.%d), model %s, seed 0x%" PRIx64 "\n", r->device, dev.cc_major,
          dev.cc_minor, r->arch->name, r->seed);
  if (a->mma) {
    const int rc = probe_mma_part(a, r, &st);
    if (rc != CLI_PASS) return rc;
  }
  for (int c = 0; a->curve && c < a->ncurve; c++) {
    fprintf(stderr, "probe: curve K = %" PRId64 " (%d/%d), M = N = %ld\n", a->curve_k[c], c + 1, a->ncurve, a->curve_mn);
    if (probe_curve_run(r->arch, a->curve_k[c], a->curve_mn, r->seed, (int)a->curve_sample, &r->curve[c], &st) != LCE_OK)
      return fail_run("curve", &st);
    r->ncurve = c + 1;
  }
  return finish(a, r, NULL);
}
#endif

int cli_probe(void) {
  probe_args a;
  int rc = probe_parse(&a);
  if (rc != CLI_PASS) return rc;
  probe_report r;
  memset(&r, 0, sizeof r);
  r.first = calloc((size_t)a.show + 1, sizeof *r.first);
  if (r.first == NULL) return cli_fail(CLI_FAIL, "out of memory");
  if (a.replay) rc = probe_replay(&a, &r);
  else {
#ifdef LCE_PROBE_WITH_CUDA
    rc = probe_run(&a, &r);
#else
    rc = cli_fail(CLI_SKIP, "this build has no CUDA (configured without a CUDA compiler): skipped; "
                            "--replay FILE works without one");
#endif
  }
  free(r.first);
  return rc;
}
