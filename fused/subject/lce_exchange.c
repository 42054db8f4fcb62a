/* lce_exchange.c — writing an export and reading it back (lce_exchange.h). The case.json of a case
 * is one function of its id (lce_exchange_case_json): the writer writes that text and the reader
 * requires the file to hold exactly its value, so the two can never disagree on a field. */
#define _XOPEN_SOURCE 700 /* nftw, open_memstream, strdup */
#include "lce_exchange.h"
#include "lce_file.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *dtype_json_name(lce_dtype t) {
  return t == LCE_BF16 ? "bfloat16" : t == LCE_FP16 ? "float16" : "float32";
}
static lce_npy_descr dtype_descr(lce_dtype t) {
  return t == LCE_BF16 ? LCE_NPY_U2 : t == LCE_FP16 ? LCE_NPY_F2 : LCE_NPY_F4;
}

static lce_exchange_tensor tensor(const char *name, const char *dtype, lce_npy_descr d, int64_t d0, int64_t d1,
                                  const void *data, lce_output_id o) {
  lce_exchange_tensor t = {name, dtype, d, d1 >= 0 ? 2 : 1, {d0, d1 >= 0 ? d1 : 0}, data, o};
  return t;
}

size_t lce_exchange_inputs(const lce_case *c, const lce_tensors *in, lce_exchange_tensor *t) {
  const char *dt = dtype_json_name(c->dtype);
  const lce_npy_descr d = dtype_descr(c->dtype);
  const int none = c->reduction == LCE_RED_NONE;
  size_t k = 0;
  t[k++] = tensor("hidden", dt, d, c->n, c->h, in ? in->hidden : NULL, LCE_OUT_COUNT);
  t[k++] = tensor("embedding", dt, d, c->vp, c->h, in ? in->embedding : NULL, LCE_OUT_COUNT);
  if (!c->tied) t[k++] = tensor("weight", dt, d, c->vp, c->h, in ? in->weight : NULL, LCE_OUT_COUNT);
  t[k++] = tensor("labels", "int64", LCE_NPY_I8, c->n, -1, in ? in->labels : NULL, LCE_OUT_COUNT);
  t[k++] = tensor("grad_output", "float32", LCE_NPY_F4, none ? c->n : 1, -1, in ? in->grad_output : NULL, LCE_OUT_COUNT);
  t[k++] = tensor("grad_embedding_prior", "float32", LCE_NPY_F4, c->vp, c->h, in ? in->grad_embedding_prior : NULL,
                  LCE_OUT_COUNT);
  if (!c->tied)
    t[k++] = tensor("grad_weight_prior", "float32", LCE_NPY_F4, c->vp, c->h, in ? in->grad_weight_prior : NULL,
                    LCE_OUT_COUNT);
  if (c->class_weights)
    t[k++] = tensor("class_weight", "float32", LCE_NPY_F4, c->v, -1, in ? in->class_weight : NULL, LCE_OUT_COUNT);
  return k;
}

size_t lce_exchange_outputs(const lce_case *c, lce_exchange_tensor *t) {
  size_t k = 0;
  t[k++] = tensor("loss", "float32", LCE_NPY_F4, 1, -1, NULL, LCE_OUT_LOSS);
  t[k++] = tensor("loss_token", "float32", LCE_NPY_F4, c->n, -1, NULL, LCE_OUT_LOSS_TOKEN);
  t[k++] = tensor("lse", "float32", LCE_NPY_F4, c->n, -1, NULL, LCE_OUT_LSE);
  t[k++] = tensor("d_hidden", dtype_json_name(c->dtype), dtype_descr(c->dtype), c->n, c->h, NULL, LCE_OUT_D_HIDDEN);
  /* The output weight's gradient is d_weight wherever it lives; an untied embedding's is d_embedding. */
  t[k++] = tensor("grad_embedding", "float32", LCE_NPY_F4, c->vp, c->h, NULL,
                  c->tied ? LCE_OUT_D_WEIGHT : LCE_OUT_D_EMBEDDING);
  if (!c->tied) t[k++] = tensor("grad_weight", "float32", LCE_NPY_F4, c->vp, c->h, NULL, LCE_OUT_D_WEIGHT);
  return k;
}

/* ---- case.json -------------------------------------------------------------------------------- */

static void json_tensors(FILE *f, const lce_exchange_tensor *t, size_t n, const char *dir) {
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "  \"%s\": {\"file\": \"%s%s.npy\", \"dtype\": \"%s\", \"shape\": [%lld", t[i].name, dir, t[i].name,
            t[i].dtype, (long long)t[i].shape[0]);
    if (t[i].ndim == 2) fprintf(f, ", %lld", (long long)t[i].shape[1]);
    fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
  }
}

lce_code lce_exchange_case_json(const lce_case *c, char **text, lce_status *st) {
  static const char *const SMOOTHING[] = {"none", "pytorch", "megatron"};
  char id[192];
  lce_case_format(c, id, sizeof id);
  size_t size = 0;
  *text = NULL;
  FILE *f = open_memstream(text, &size);
  LCE_CHECK(st, f != NULL, LCE_ENOMEM, "case.json of %s: out of memory", id);
  fprintf(f, "{\"format\": \"lcecheck-case\", \"version\": %d,\n \"id\": \"%s\",\n", LCE_EXCHANGE_VERSION, id);
  fprintf(f, " \"n\": %lld, \"h\": %lld, \"v\": %lld, \"vp\": %lld, \"tp\": %d,\n", (long long)c->n, (long long)c->h,
          (long long)c->v, (long long)c->vp, c->tp);
  fprintf(f, " \"vocab_chunk\": %lld, \"token_chunk\": %lld,\n", (long long)c->vocab_chunk, (long long)c->token_chunk);
  fprintf(f, " \"dtype\": \"%s\", \"gemm\": \"%s\", \"tied\": %s, \"prior_grad\": %s,\n", dtype_json_name(c->dtype),
          c->gemm == LCE_GEMM_TF32 ? "tf32" : "ieee", c->tied ? "true" : "false", c->prior_grad ? "true" : "false");
  fprintf(f, " \"reduction\": \"%s\", \"ignore_index\": %lld,\n", lce_reduction_name(c->reduction),
          (long long)c->ignore_index);
  fprintf(f, " \"label_smoothing\": {\"form\": \"%s\", \"eps\": %.17g},\n",
          (unsigned)c->smoothing < 3 ? SMOOTHING[c->smoothing] : "?", c->smoothing_permille / 1000.0);
  fprintf(f, " \"z_loss\": %.17g, \"softcap\": %d, \"class_weights\": %s,\n", lce_case_z_loss(c), c->softcap,
          c->class_weights ? "true" : "false");
  fprintf(f, " \"output_weight\": \"%s\", \"output_weight_grad\": \"%s\",\n", c->tied ? "embedding" : "weight",
          c->tied ? "grad_embedding" : "grad_weight");
  lce_exchange_tensor t[8];
  fprintf(f, " \"inputs\": {\n");
  json_tensors(f, t, lce_exchange_inputs(c, NULL, t), "");
  fprintf(f, " },\n \"outputs\": {\n");
  json_tensors(f, t, lce_exchange_outputs(c, t), "out/");
  fprintf(f, " }\n}\n");
  const int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(*text);
    *text = NULL;
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "case.json of %s: out of memory", id);
  }
  return LCE_OK;
}

/* ---- files and directories -------------------------------------------------------------------- */

static char *path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

lce_code lce_exchange_remove_tree(const char *path, lce_status *st) {
  struct stat sb;
  if (lstat(path, &sb) != 0 && errno == ENOENT) return LCE_OK;
  LCE_CHECK(st, nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0, LCE_EIO, "%s: cannot remove: %s", path,
            strerror(errno));
  return LCE_OK;
}

/* A case directory named in a manifest must stay inside the export. */
static int safe_subdir(const char *s) {
  if (s[0] == '\0' || s[0] == '/') return 0;
  for (const char *p = s; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
    if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0')) return 0;
  return 1;
}

/* manifest.json of dir: its "cases" array, each entry checked to have a string id and a safe dir. */
static lce_code load_manifest(const char *dir, lce_json *m, const lce_json **cases, lce_status *st) {
  char *path = path_join(dir, "manifest.json");
  LCE_ALLOC_CHECK(st, path);
  lce_code rc = lce_json_load(path, m, st);
  const lce_json *format = lce_json_get(m, "format"), *version = lce_json_get(m, "version");
  *cases = lce_json_get(m, "cases");
  if (rc == LCE_OK && (!format || format->type != LCE_JSON_STRING || strcmp(format->string, "lcecheck-exchange") != 0 ||
                       !version || version->type != LCE_JSON_NUMBER || version->number != LCE_EXCHANGE_VERSION))
    rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: not an lcecheck-exchange version %d manifest", path,
                  LCE_EXCHANGE_VERSION);
  if (rc == LCE_OK && (*cases == NULL || (*cases)->type != LCE_JSON_ARRAY))
    rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: \"cases\" must be an array", path);
  for (size_t i = 0; rc == LCE_OK && i < (*cases)->count; i++) {
    const lce_json *e = &(*cases)->items[i], *id = lce_json_get(e, "id"), *sub = lce_json_get(e, "dir");
    if (!id || id->type != LCE_JSON_STRING || !sub || sub->type != LCE_JSON_STRING || !safe_subdir(sub->string))
      rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__,
                    "%s:%d:%d: each case needs a string \"id\" and a relative \"dir\" inside the export", path, e->line,
                    e->column);
  }
  free(path);
  if (rc != LCE_OK) lce_json_free(m);
  return rc;
}

static lce_code make_dirs(const char *dir, lce_status *st) {
  char *p = strdup(dir);
  LCE_ALLOC_CHECK(st, p);
  for (char *q = p + 1;; q++) {
    if (*q != '/' && *q != '\0') continue;
    const char save = *q;
    *q = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      lce_code rc = lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: cannot create: %s", p, strerror(errno));
      free(p);
      return rc;
    }
    if ((*q = save) == '\0') break;
  }
  free(p);
  return LCE_OK;
}

/* dir ready for an export: created, empty, or holding an earlier export, which is removed (said on
 * notice): never anything else. */
static lce_code prepare_dir(const char *dir, FILE *notice, lce_status *st) {
  struct stat sb;
  if (stat(dir, &sb) != 0) {
    LCE_CHECK(st, errno == ENOENT, LCE_EIO, "%s: %s", dir, strerror(errno));
    return make_dirs(dir, st);
  }
  LCE_CHECK(st, S_ISDIR(sb.st_mode), LCE_EINVAL, "%s exists and is not a directory", dir);
  DIR *d = opendir(dir);
  LCE_CHECK(st, d != NULL, LCE_EIO, "%s: cannot list: %s", dir, strerror(errno));
  size_t entries = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  if (entries == 0) return LCE_OK;
  lce_json m;
  const lce_json *cases;
  lce_status why;
  lce_status_clear(&why);
  LCE_CHECK(st, load_manifest(dir, &m, &cases, &why) == LCE_OK, LCE_EINVAL,
            "%s is not empty and holds no lcecheck export (%s); refusing to write into it: give an empty or new "
            "directory", dir, why.msg);
  fprintf(notice, "lcecheck export: %s holds an earlier lcecheck export (%zu cases): removing its case "
            "directories, with any runner outputs in them, and its manifest.json\n", dir, cases->count);
  lce_code rc = LCE_OK;
  for (size_t i = 0; rc == LCE_OK && i < cases->count; i++) {
    char *sub = path_join(dir, lce_json_get(&cases->items[i], "dir")->string);
    rc = sub ? lce_exchange_remove_tree(sub, st) : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
    free(sub);
  }
  lce_json_free(&m);
  char *manifest = path_join(dir, "manifest.json");
  LCE_ALLOC_CHECK(st, manifest);
  if (rc == LCE_OK && remove(manifest) != 0) rc = lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: cannot remove", manifest);
  free(manifest);
  return rc;
}

/* ---- export ----------------------------------------------------------------------------------- */

static lce_code write_case(const char *case_dir, const lce_case *c, lce_status *st) {
  LCE_CHECK(st, mkdir(case_dir, 0777) == 0, LCE_EIO, "%s: cannot create: %s", case_dir, strerror(errno));
  lce_tensors in;
  LCE_TRY(lce_case_generate(c, &in, st));
  lce_exchange_tensor t[8];
  const size_t n = lce_exchange_inputs(c, &in, t);
  lce_code rc = LCE_OK;
  for (size_t i = 0; rc == LCE_OK && i < n; i++) {
    char file[64];
    snprintf(file, sizeof file, "%s.npy", t[i].name);
    char *path = path_join(case_dir, file);
    rc = path ? lce_npy_write(path, t[i].descr, t[i].ndim, t[i].shape, t[i].data, st)
              : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
    free(path);
  }
  lce_tensors_free(&in);
  char *text = NULL, *path = path_join(case_dir, "case.json");
  if (rc == LCE_OK) rc = path ? lce_exchange_case_json(c, &text, st) : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
  if (rc == LCE_OK) rc = lce_file_replace(path, text, strlen(text), st);
  free(text);
  free(path);
  return rc;
}

lce_code lce_exchange_export(const char *dir, const lce_case *cases, size_t n, FILE *progress, FILE *notice,
                             lce_status *st) {
  LCE_TRY(prepare_dir(dir, notice, st));
  char *manifest = NULL;
  size_t size = 0;
  FILE *m = open_memstream(&manifest, &size);
  LCE_CHECK(st, m != NULL, LCE_ENOMEM, "manifest: out of memory");
  fprintf(m, "{\"format\": \"lcecheck-exchange\", \"version\": %d, \"cases\": [", LCE_EXCHANGE_VERSION);
  lce_code rc = LCE_OK;
  for (size_t i = 0; rc == LCE_OK && i < n; i++) {
    char id[192], sub[224];
    lce_case_format(&cases[i], id, sizeof id);
    snprintf(sub, sizeof sub, "%04zu-%s", i, id);
    char *case_dir = path_join(dir, sub);
    rc = case_dir ? write_case(case_dir, &cases[i], st) : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
    free(case_dir);
    fprintf(m, "%s\n {\"id\": \"%s\", \"dir\": \"%s\"}", i ? "," : "", id, sub);
    if (rc == LCE_OK && progress) fprintf(progress, "[%4zu/%zu] exported %s\n", i + 1, n, id);
  }
  fprintf(m, "\n]}\n");
  fclose(m);
  char *path = path_join(dir, "manifest.json");
  if (rc == LCE_OK)
    rc = path && manifest ? lce_file_replace(path, manifest, strlen(manifest), st)
                          : lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
  free(path);
  free(manifest);
  return rc;
}

/* ---- reading an export back ------------------------------------------------------------------- */

/* e->dir/case.json must hold exactly the value lce_exchange_case_json gives for e->c. */
static lce_code check_case_json(const lce_exchange_case *e, lce_status *st) {
  char *path = path_join(e->dir, "case.json"), *text = NULL;
  LCE_ALLOC_CHECK(st, path);
  lce_json have, want;
  memset(&want, 0, sizeof want);
  lce_code rc = lce_json_load(path, &have, st);
  if (rc == LCE_OK) {
    rc = lce_exchange_case_json(&e->c, &text, st);
    if (rc == LCE_OK) rc = lce_json_parse(text, strlen(text), "case.json (expected)", &want, st);
    char where[256];
    if (rc == LCE_OK && !lce_json_equal(&have, &want, where, sizeof where))
      rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__,
                    "%s: %s%s is not what case %s says (an edited or corrupted case.json, or another export's)", path,
                    where[0] ? "field " : "the file", where, e->id);
    lce_json_free(&have);
    lce_json_free(&want);
  }
  free(text);
  free(path);
  return rc;
}

lce_code lce_exchange_open(const char *dir, lce_exchange_dir *d, lce_status *st) {
  memset(d, 0, sizeof *d);
  lce_json m;
  const lce_json *cases;
  LCE_TRY(load_manifest(dir, &m, &cases, st));
  lce_code rc = LCE_OK;
  d->root = strdup(dir);
  d->cases = calloc(cases->count ? cases->count : 1, sizeof *d->cases);
  if (d->root == NULL || d->cases == NULL) rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
  for (size_t i = 0; rc == LCE_OK && i < cases->count; i++) {
    const lce_json *item = &cases->items[i];
    lce_exchange_case *e = &d->cases[d->count++];
    const char *id = lce_json_get(item, "id")->string;
    snprintf(e->id, sizeof e->id, "%s", id);
    e->dir = path_join(dir, lce_json_get(item, "dir")->string);
    lce_status why;
    lce_status_clear(&why);
    if (e->dir == NULL) rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
    else if (strlen(e->dir) >= LCE_EXCHANGE_MAX_PATH)
      rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "%.100s...: path longer than %d characters", e->dir,
                    LCE_EXCHANGE_MAX_PATH);
    else if (lce_case_parse(id, &e->c, &why) != LCE_OK)
      rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s/manifest.json:%d:%d: case id '%s': %s", dir, item->line,
                    item->column, id, why.msg);
    for (size_t k = 0; rc == LCE_OK && k + 1 < d->count; k++)
      if (strcmp(d->cases[k].id, e->id) == 0)
        rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s/manifest.json: case %s listed twice", dir, e->id);
    if (rc == LCE_OK) rc = check_case_json(e, st);
  }
  lce_json_free(&m);
  if (rc != LCE_OK) lce_exchange_close(d);
  return rc;
}

void lce_exchange_close(lce_exchange_dir *d) {
  if (d == NULL) return;
  for (size_t i = 0; i < d->count; i++) free(d->cases[i].dir);
  free(d->cases);
  free(d->root);
  memset(d, 0, sizeof *d);
}

const lce_exchange_case *lce_exchange_find(const lce_exchange_dir *d, const char *id) {
  for (size_t i = 0; i < d->count; i++)
    if (strcmp(d->cases[i].id, id) == 0) return &d->cases[i];
  return NULL;
}
