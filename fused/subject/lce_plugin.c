/* lce_plugin.c — `plugin:PATH[#NAME]` subjects: a shared library implementing
 * include/lcecheck/lcecheck_subject.h, loaded with dlopen (lce_plugin.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "lce_plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lcecheck/lcecheck_subject.h"

/* A library's subject array ends with a NULL name; this many entries without one means the array
 * is not one. */
#define PLUGIN_MAX_SUBJECTS 256

typedef struct lce_plugin {
  lce_subject subject; /* first: lce_plugin_close gets the plugin back from it */
  void *handle;
  const lcecheck_subject_v1 *table;
  char *spec;
  char *description;
} lce_plugin;

/* ---- capabilities ---------------------------------------------------------------------------- */

/* The public capability bits that lce_subject_supports decides on (a missing one skips the case
 * before anything runs), and their internal twins. */
static const struct {
  uint32_t pub;
  unsigned cap;
} CAP_MAP[] = {
    {LCECHECK_CAP_BF16, LCE_CAP_BF16},         {LCECHECK_CAP_FP16, LCE_CAP_FP16},
    {LCECHECK_CAP_FP32, LCE_CAP_FP32},         {LCECHECK_CAP_UNTIED, LCE_CAP_UNTIED},
    {LCECHECK_CAP_TP, LCE_CAP_TP},             {LCECHECK_CAP_PADDING, LCE_CAP_PADDING},
    {LCECHECK_CAP_RED_NONE, LCE_CAP_RED_NONE}, {LCECHECK_CAP_PRIOR_GRAD, LCE_CAP_PRIOR_GRAD},
    {LCECHECK_CAP_MUTANT, LCE_CAP_MUTANT},     {LCECHECK_CAP_NEEDS_GPU, LCE_CAP_NEEDS_GPU},
};

static unsigned map_caps(uint32_t pub) {
  unsigned caps = 0;
  for (size_t i = 0; i < sizeof CAP_MAP / sizeof CAP_MAP[0]; i++)
    if (pub & CAP_MAP[i].pub) caps |= CAP_MAP[i].cap;
  return caps;
}

/* The case options that lce_subject has no capability bit for: the trampoline checks them and
 * declines the case (LCE_ESKIP), which the engine reports as a skip with the reason. */
static int option_missing(const lcecheck_subject_v1 *t, const lce_case *c, char *why, size_t size) {
  const struct {
    int needed;
    uint32_t cap;
    const char *what;
  } need[] = {
      {c->smoothing != LCE_SMOOTH_NONE && c->smoothing_permille > 0, LCECHECK_CAP_SMOOTHING, "label smoothing"},
      {c->z_loss_e5 > 0, LCECHECK_CAP_Z_LOSS, "z-loss"},
      {c->softcap > 0, LCECHECK_CAP_SOFTCAP, "logit softcap"},
      {c->class_weights != 0, LCECHECK_CAP_CLASS_WEIGHTS, "class weights"},
      {c->gemm == LCE_GEMM_TF32, LCECHECK_CAP_TF32, "tf32 GEMMs"},
  };
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (need[i].needed && !(t->caps & need[i].cap)) {
      snprintf(why, size, "no %s support", need[i].what);
      return 1;
    }
  return 0;
}

/* ---- the trampoline: lce_* structs onto the public ones ----------------------------------------- */

static int32_t public_dtype(lce_dtype t) {
  return t == LCE_BF16 ? LCECHECK_DTYPE_BF16 : t == LCE_FP16 ? LCECHECK_DTYPE_FP16 : LCECHECK_DTYPE_FP32;
}

static int32_t public_reduction(lce_reduction r) {
  return r == LCE_RED_NONE ? LCECHECK_REDUCTION_NONE : r == LCE_RED_SUM ? LCECHECK_REDUCTION_SUM : LCECHECK_REDUCTION_MEAN;
}

static int32_t public_smoothing(lce_smoothing s) {
  return s == LCE_SMOOTH_PYTORCH    ? LCECHECK_SMOOTHING_PYTORCH
         : s == LCE_SMOOTH_MEGATRON ? LCECHECK_SMOOTHING_MEGATRON
                                    : LCECHECK_SMOOTHING_NONE;
}

static lce_code plugin_run(void *ctx, const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  const lce_plugin *p = ctx;
  const char *name = p->subject.name;
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  char why[160];
  if (option_missing(p->table, c, why, sizeof why)) return lce_fail(st, LCE_ESKIP, __FILE__, __LINE__, "%s: %s", name, why);
  char id[192];
  lce_case_format(c, id, sizeof id);
  const lcecheck_case_v1 pc = {
      .id = id, .n = c->n, .h = c->h, .v = c->v, .vp = c->vp, .tp = c->tp, .dtype = public_dtype(c->dtype),
      .vocab_chunk = c->vocab_chunk, .token_chunk = c->token_chunk, .tied = c->tied != 0,
      .prior_grad = c->prior_grad != 0, .reduction = public_reduction(c->reduction),
      .smoothing = public_smoothing(c->smoothing), .ignore_index = c->ignore_index,
      .smoothing_eps = c->smoothing == LCE_SMOOTH_NONE ? 0.0 : c->smoothing_permille / 1000.0,
      .smoothing_e = lce_case_smoothing(c), .z_loss = lce_case_z_loss(c), .softcap = (double)c->softcap,
      .class_weights = c->class_weights != 0, .gemm_tf32 = c->gemm == LCE_GEMM_TF32, .seed = c->seed};
  const lcecheck_inputs_v1 pin = {in->hidden, in->embedding, c->tied ? NULL : in->weight, in->labels,
                                  in->grad_output, in->grad_embedding_prior, c->tied ? NULL : in->grad_weight_prior,
                                  c->class_weights ? in->class_weight : NULL};
  const lcecheck_outputs_v1 pout = {out->loss, out->loss_token, out->lse, out->d_hidden, out->grad_embedding,
                                    c->tied ? NULL : out->grad_weight};
  char msg[512] = "";
  const int rc = p->table->run(p->table->state, &pc, &pin, &pout, msg, sizeof msg);
  msg[sizeof msg - 1] = '\0';
  if (rc == LCECHECK_OK) return LCE_OK;
  if (rc == LCECHECK_NO_DEVICE)
    return lce_fail(st, LCE_ENODEV, __FILE__, __LINE__, "%s: %s", name, msg[0] ? msg : "no device (the plugin says)");
  return lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "%s: the plugin's run returned %d: %s", name, rc,
                  msg[0] ? msg : "(no message)");
}

/* ---- loading ----------------------------------------------------------------------------------- */

static lce_code find_entry(const lce_plugin *p, const char *path, const char *want, const lcecheck_subject_v1 **out,
                           lce_status *st) {
  void *sym = dlsym(p->handle, LCECHECK_SUBJECT_ENTRY);
  LCE_CHECK(st, sym != NULL, LCE_EINVAL, "plugin %s: no symbol %s (%s); a plugin exports it, see lcecheck/lcecheck_subject.h",
            path, LCECHECK_SUBJECT_ENTRY, dlerror());
  lcecheck_subject_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry); /* an object pointer to a function pointer, as POSIX allows */
  const lcecheck_subject_v1 *t = entry(LCECHECK_SUBJECT_ABI_VERSION);
  LCE_CHECK(st, t != NULL, LCE_EINVAL, "plugin %s: %s(%u) returned NULL (no subjects for ABI version %u)", path,
            LCECHECK_SUBJECT_ENTRY, LCECHECK_SUBJECT_ABI_VERSION, LCECHECK_SUBJECT_ABI_VERSION);
  LCE_CHECK(st, t[0].abi_version == LCECHECK_SUBJECT_ABI_VERSION, LCE_EINVAL,
            "plugin %s: built for lcecheck subject ABI version %u, this lcecheck speaks version %u: rebuild it "
            "against this lcecheck's lcecheck/lcecheck_subject.h",
            path, t[0].abi_version, LCECHECK_SUBJECT_ABI_VERSION);
  char names[512] = "";
  for (size_t i = 0; i < PLUGIN_MAX_SUBJECTS && t[i].name != NULL; i++) {
    LCE_CHECK(st, t[i].abi_version == LCECHECK_SUBJECT_ABI_VERSION, LCE_EINVAL,
              "plugin %s: subject %zu (%s) says ABI version %u, the first says %u", path, i, t[i].name,
              t[i].abi_version, LCECHECK_SUBJECT_ABI_VERSION);
    if (want == NULL || strcmp(t[i].name, want) == 0) {
      LCE_CHECK(st, t[i].run != NULL, LCE_EINVAL, "plugin %s: subject '%s' has no run function (run is NULL)", path,
                t[i].name);
      LCE_CHECK(st, t[i].inner == LCECHECK_INNER_UNCHUNKED || t[i].inner == LCECHECK_INNER_CHUNKED, LCE_EINVAL,
                "plugin %s: subject '%s' has inner %u (LCECHECK_INNER_UNCHUNKED or _CHUNKED)", path, t[i].name,
                t[i].inner);
      *out = &t[i];
      return LCE_OK;
    }
    snprintf(names + strlen(names), sizeof names - strlen(names), " %s", t[i].name);
  }
  if (want == NULL) return lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "plugin %s: no subjects (the first name is NULL)", path);
  return lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "plugin %s: no subject named '%s'; it has:%s", path, want, names);
}

lce_subject *lce_plugin_open(const char *spec, lce_status *st) {
  if (spec == NULL || spec[0] == '\0') {
    lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "plugin: no path (plugin:PATH[#NAME])");
    return NULL;
  }
  lce_plugin *p = calloc(1, sizeof *p);
  char *path = strdup(spec);
  if (p == NULL || path == NULL) {
    lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory loading plugin %s", spec);
    goto fail;
  }
  char *hash = strrchr(path, '#');
  const char *want = NULL;
  if (hash) {
    *hash = '\0';
    want = hash + 1;
  }
  dlerror();
  p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (p->handle == NULL) {
    lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "plugin %s: cannot load it: %s", path, dlerror());
    goto fail;
  }
  if (find_entry(p, path, want, &p->table, st) != LCE_OK) goto fail;
  const lcecheck_subject_v1 *t = p->table;
  const size_t dsize = strlen(t->name) + (t->description ? strlen(t->description) : 0) + strlen(path) + 32;
  p->spec = malloc(strlen(LCE_PLUGIN_PREFIX) + strlen(spec) + 1);
  p->description = malloc(dsize);
  if (p->spec == NULL || p->description == NULL) {
    lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory loading plugin %s", spec);
    goto fail;
  }
  sprintf(p->spec, "%s%s", LCE_PLUGIN_PREFIX, spec);
  snprintf(p->description, dsize, "%s: %s (plugin %s)", t->name, t->description ? t->description : "", path);
  p->subject = (lce_subject){.name = p->spec,
                             .golden_class = t->golden_class ? t->golden_class : "fused-host",
                             .description = p->description,
                             .caps = map_caps(t->caps),
                             .inner = t->inner == LCECHECK_INNER_CHUNKED ? lce_inner_chunked : lce_inner_unchunked,
                             .ctx = p,
                             .run_ctx = plugin_run};
  free(path);
  return &p->subject;
fail:
  free(path);
  lce_plugin_close(p ? &p->subject : NULL);
  return NULL;
}

void lce_plugin_close(lce_subject *s) {
  if (s == NULL) return;
  lce_plugin *p = (lce_plugin *)s; /* the subject is the plugin's first member */
  if (p->handle) dlclose(p->handle);
  free(p->spec);
  free(p->description);
  free(p);
}
