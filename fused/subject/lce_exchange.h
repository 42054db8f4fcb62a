/* lce_exchange.h — the exchange format v1 (scripts/subjects/EXCHANGE.md, the contract) on the C side:
 * an exported directory D holds manifest.json and, per case, D/<subdir>/case.json and its inputs as
 * .npy in their exact dtype (bf16 as its 16-bit pattern); a runner in any language answers each case
 * in D/<subdir>/out/ (outputs as .npy, meta.json, or skip.txt). lcecheck writes the export
 * (lce_exchange_export), reads it back strictly (lce_exchange_open: every case.json must be exactly
 * what its case id says) and loads a runner's answer into an lce_outputs for the judge
 * (lce_exchange_load_answer, lce_exchange_answer.c). */
#ifndef LCE_EXCHANGE_H
#define LCE_EXCHANGE_H

#include <stdio.h>

#include "lce_case.h"
#include "lce_json.h"
#include "lce_npy.h"
#include "lce_output.h"

#define LCE_EXCHANGE_VERSION 1
#define LCE_EXCHANGE_MAX_PATH 900 /* characters of a case directory's path */

/* One tensor of a case as the format names it: an input, or an output a runner writes. */
typedef struct lce_exchange_tensor {
  const char *name;      /* "hidden", "grad_weight_prior", "d_hidden", ... */
  const char *dtype;     /* "bfloat16" | "float16" | "float32" | "int64" */
  lce_npy_descr descr;
  int ndim;
  int64_t shape[2];
  const void *data;      /* inputs: the regenerated tensor; outputs: NULL */
  lce_output_id output;  /* outputs: the judged output the file carries */
} lce_exchange_tensor;

/* The inputs of case c (data from in, which may be NULL): returns their count (at most 8). */
size_t lce_exchange_inputs(const lce_case *c, const lce_tensors *in, lce_exchange_tensor *t);
/* The outputs a runner writes for case c (their files are out/<name>.npy): at most 6. */
size_t lce_exchange_outputs(const lce_case *c, lce_exchange_tensor *t);

/* The text of case c's case.json (malloc'd, free() it). */
lce_code lce_exchange_case_json(const lce_case *c, char **text, lce_status *st);

/* Writes cases [0, n) into dir: refuses a non-empty dir unless it holds an earlier lcecheck export,
 * which it replaces, saying so on notice (never NULL: nothing is removed silently); progress (may be
 * NULL) gets one line per case. */
lce_code lce_exchange_export(const char *dir, const lce_case *cases, size_t n, FILE *progress, FILE *notice,
                             lce_status *st);

/* One case of an exported directory. */
typedef struct lce_exchange_case {
  char id[192];
  lce_case c;
  char *dir; /* D/<subdir> */
} lce_exchange_case;

typedef struct lce_exchange_dir {
  char *root;
  lce_exchange_case *cases;
  size_t count;
} lce_exchange_dir;

/* Reads dir's manifest.json and every case.json: a case.json that is not exactly what its case id
 * says (a corrupted or edited file, another version) is refused with the file and the field. */
lce_code lce_exchange_open(const char *dir, lce_exchange_dir *d, lce_status *st);
void lce_exchange_close(lce_exchange_dir *d);
const lce_exchange_case *lce_exchange_find(const lce_exchange_dir *d, const char *id);

/* A runner's answer to case e into out (allocated by lce_outputs_alloc for (c, in)): first the inputs
 * in e->dir must be bit-identical to in, the tensors regenerated from the case id (a runner that
 * changed them, or a stale directory, is an error); then out/skip.txt is LCE_ESKIP with the
 * runner's reason; meta.json's "error" is an error with its message; outputs meta.json lists as
 * "missing" are marked in out->not_provided; a file that is absent without being declared missing,
 * unreadable, or of another dtype or shape is marked in out->unusable with a message naming it. */
lce_code lce_exchange_load_answer(const lce_exchange_case *e, const lce_case *c, const lce_tensors *in,
                                  lce_outputs *out, lce_status *st);

/* Removes path and everything under it (a directory written by lce_exchange_export). */
lce_code lce_exchange_remove_tree(const char *path, lce_status *st);

#endif
