/* cli_common.h — what every lcecheck verb shares: argument parsing, subject and golden lookup,
 * and the JSON / text rendering of one case result. */
#ifndef LCE_CLI_COMMON_H
#define LCE_CLI_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "lce_engine.h"

/* Exit statuses of every verb, the same in the README. */
enum {
  CLI_PASS = 0,  /* every case passed (or the verb did what it was asked) */
  CLI_FAIL = 1,  /* a case failed or errored */
  CLI_USAGE = 2, /* bad usage or input: an unknown or repeated option, subject, malformed id or golden */
  CLI_SKIP = 77, /* skipped: no GPU (or a build without CUDA); ctest's SKIP_RETURN_CODE */
};

/* ---- verbs and their options ----------------------------------------------------------------- */

/* One option of a verb: its name, the name of its value (NULL for a flag) and one line of help. */
typedef struct cli_option {
  const char *name, *value, *help;
} cli_option;

/* A verb: what `lcecheck --help` lists, what `lcecheck <verb> --help` prints and the only options
 * the argument check lets through (each at most once). The table is lcecheck_main.c's. */
typedef struct cli_verb {
  const char *name;
  int (*run)(void);             /* reads its options with cli_opt / cli_parse_args */
  const char *summary;          /* one line for `lcecheck --help` */
  const char *positional;       /* the name of a positional argument (repro's "ID"), or NULL: none */
  const char *details;          /* a paragraph for `lcecheck <verb> --help`: defaults, exclusions */
  const cli_option *options;    /* terminated by an entry whose name is NULL */
} cli_verb;

/* Records the verb's name and whether argv[2..] holds --json, for cli_fail (cli_begin does this
 * first; main alone calls it, for a verb that does not exist). */
void cli_start(const char *verb, int argc, char **argv);
/* Starts verb v of the table verbs (terminated by a NULL name) on argv[2..]: records the verb and
 * --json for cli_fail, then checks the arguments and keeps them for cli_opt: every option is one of
 * v's, given once, with its value; a positional argument only where v has one, once. CLI_PASS, or
 * CLI_USAGE after cli_fail. After it, no verb reads argv. */
int cli_begin(const cli_verb *verbs, const cli_verb *v, int argc, char **argv);

/* ---- the values of the options cli_begin accepted ---------------------------------------------- */

/* The value of option name (a flag's value is its name), or NULL when it was not given. */
const char *cli_opt(const char *name);
/* The positional argument (repro's ID), or NULL. */
const char *cli_positional(void);
/* text, the value of option, as an integer in [lo, hi] (digits only, decimal or 0x hexadecimal) into
 * *out; else CLI_USAGE after cli_fail("--tiles: '0' is not an integer in [1, 1048576]"). */
int cli_uint(const char *option, const char *text, uint64_t lo, uint64_t hi, uint64_t *out);
/* The same for option's value; *out is left as it is when the option was not given. */
int cli_opt_uint(const char *option, uint64_t lo, uint64_t hi, uint64_t *out);
/* option's comma list, copied into buf (size bytes), as at most max non-empty items (pointing into
 * buf); *count receives how many. CLI_USAGE after cli_fail on an empty item, too many or too long. */
int cli_split(const char *option, const char *list, char *buf, size_t size, char **items, int max, int *count);
/* option's comma list of names as a bit mask: index(name) gives a name's bit, negative for one that
 * does not exist ("--outputs: unknown output 'lossy'", what naming the kind). */
int cli_name_mask(const char *option, const char *list, const char *what, int (*index)(const char *name),
                  unsigned *mask);
/* A list of lce_output names (--outputs, compare's --predict-outputs) as a bit per lce_output_id. */
int cli_outputs(const char *option, const char *list, unsigned *mask);
/* --embeddings: tied, untied or both (either order), as a mask of CLI_UNTIED | CLI_TIED; else
 * CLI_USAGE after cli_fail("--embeddings wants tied, untied or tied,untied, got 'both'"). */
enum { CLI_UNTIED = 1, CLI_TIED = 2 };
int cli_embeddings(const char *text, unsigned *mask);
/* option's value as a finite number greater than lo (greater or equal with inclusive), into *out;
 * *out is left as it is when the option was not given; else CLI_USAGE after cli_fail naming it. */
int cli_opt_real(const char *option, double lo, int inclusive, double *out);

/* Every error, skip and usage exit of a verb goes through here: prints "lcecheck <verb>: <message>"
 * on stderr and, under --json, unless the verb's object is already out, one object on stdout:
 *   {"verb":"check","status":"usage"|"skipped"|"error","exit":N,"message":"..."}
 * (status from code: CLI_USAGE, CLI_SKIP, anything else). Returns code, so that a verb writes
 * `return cli_fail(CLI_SKIP, "no CUDA device (%s)", why);`. */
int cli_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Opens the verb's one JSON object on stdout, `{"verb":"<verb>"`, for the verb to continue with
 * `,"key":value` and close with `}\n`; afterwards cli_fail prints its message on stderr only. */
void cli_json_begin(void);
/* Called by main with the verb's exit status: a usage error (CLI_USAGE) under --json that printed no
 * object gets cli_fail's object, with the message pointing at stderr. Returns rc. */
int cli_finish(int rc);

typedef struct cli_args {
  const char *subject;  /* --subject S */
  const char *matrix;   /* --matrix NAME */
  const char *case_id;  /* --case ID, or repro's positional ID */
  const char *golden;   /* --golden PATH */
  int json;             /* --json */
  int quiet;            /* --quiet: no per-case progress lines */
  int on_device;        /* --on-device: the reference stays on the GPU and outputs are compared there */
  unsigned outputs;     /* --outputs O,...: a bit per lce_output_id to judge; 0: every output */
  const char *oracle;   /* --oracle fast|mpfr|fp64-gpu (lce_reference_tier_find); NULL: fast */
  const char *dir;           /* --dir D: an exchange directory (export, judge, repro) */
  const char *subject_name;  /* judge, repro --subject-name NAME */
  const char *golden_class;  /* judge, repro --golden-class C */
  /* --shard I/N: only the matrix cases whose index i has i % N == I, so that N processes (one per
   * core: the MPFR oracle is single-threaded) share a matrix. shard_count 0: none. */
  unsigned long shard_index, shard_count;
} cli_args;

/* The options of the table above that the verb was given, into a (a positional argument is the case
 * id: repro's); CLI_USAGE, after cli_fail, on a bad value or a bad combination. */
int cli_parse_args(cli_args *a);

/* Finds subject a->subject (default "fused-host"), or with --dir D --subject-name N --golden-class C
 * (judge, repro) the exchange door's subject over D; when unknown or malformed, cli_fail(CLI_USAGE)
 * naming the problem and NULL (the subjects are the resolver's: lce_subject_resolve). */
const lce_subject *cli_subject(const cli_args *a);
/* The exchange door's three options, all required together (judge, and repro with --dir). */
#define CLI_EXCHANGE_REQUIRED "--dir D, --subject-name NAME and --golden-class C are required"

/* Loads a->golden or the default golden of the subject's class into g; path_used receives the path.
 * On failure cli_fail(CLI_USAGE) with the parse error (file:line). */
int cli_load_golden(const cli_args *a, const lce_subject *s, lce_golden *g, char *path_used, size_t size);

/* Cases selected by --case or --matrix (default "default"), only shard --shard's among them; free()
 * *cases. cli_fail(CLI_USAGE) on a bad id or matrix. */
int cli_cases(const cli_args *a, lce_case **cases, size_t *count);

/* How a verb counts its case results: an error, a skip (skip_nodev too: for want of a device), or
 * a pass or fail by the verdict. */
typedef struct cli_counts {
  size_t pass, fail, skip, error, skip_nodev;
} cli_counts;
void cli_counts_add(cli_counts *c, const lce_case_result *r);

/* A table cell: x in fmt, or "-" where x is NaN or infinite (not computed, not applicable). */
void cli_cell(char *buf, size_t size, double x, const char *fmt);

void cli_json_string(FILE *f, const char *s);
/* `,"key":` and s as a JSON string: a member after an object's first. */
void cli_json_member(FILE *f, const char *key, const char *s);
/* A number as JSON: %.9g, or null for NaN and Inf (JSON has neither). */
void cli_json_number(FILE *f, double x);
/* `,"device":{name, arch, driver, runtime, total_bytes}`: the GPU a measurement ran on, which golden
 * regeneration from a measurement file (scripts/lcecheck_golden.py --from-json) checks against --arch. */
struct lce_device_info;
void cli_json_device(FILE *f, const struct lce_device_info *dev);
/* One case result as a JSON object (with bounds and budgets when with_bounds). */
void cli_json_case(FILE *f, const lce_case_result *r, int with_bounds);
/* The reference tier --oracle names (default: tier 1, fast). */
const lce_reference_tier *cli_tier(const cli_args *a);

/* check's run and report for subject s over cases [0, n): the engine with the check sink, progress on
 * stderr, the budget table (or, with g NULL, measure's metric table) and failures on stdout, or one
 * JSON object; scope_key/scope say what the cases are ("matrix" "smoke", "dir" D). Returns the exit
 * status. cli_check.c; check, measure and judge share it. */
int cli_check_report(const cli_args *a, const char *verb, const lce_subject *s, const lce_golden *g,
                     const char *golden_path, const char *scope_key, const char *scope, const lce_case *cases,
                     size_t n);

int cli_list(void);
int cli_check(int measure_only);
int cli_repro(void);
int cli_bench(void);      /* cli_bench.c: CLI_SKIP where no GPU exists */
int cli_probe(void);      /* cli_probe.c: tensor-core MMA probe (CLI_SKIP without GPU, except --replay) */
int cli_compare(void);    /* cli_compare.c: several subjects on the same case, one oracle */
int cli_production(void); /* cli_production.c: production shapes vs the fp64 GPU tier (CLI_SKIP without GPU) */
int cli_export(void);     /* cli_export.c: cases written for a runner in any language */
int cli_judge(void);      /* cli_judge.c: a runner's answers judged as check judges */
int cli_converge(void);   /* cli_converge.c: training with the subject's gradients vs the reference's */

#endif
