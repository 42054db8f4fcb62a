/* fuzz_plugin_scripted.c — the scripted plugin of fuzz_parse_plugin (fuzz_plugin_script.h): a shared
 * library that exports lcecheck_subject_entry like any plugin, and fuzz_plugin_load, which decodes a
 * script into the plan every later answer follows: the subject table (ABI versions, names, golden
 * class, capabilities, inner hint, missing run functions), run()'s return code and message, and what
 * run() writes into each output (fused-host's values from the harness, nothing, one element or one
 * guard element changed). */
#include <lcecheck/lcecheck_subject.h>

#include <math.h>
#include <string.h>

#include "fuzz_plugin_script.h"

static fuzz_plugin_plan plan;
static lcecheck_subject_v1 table[FUZZ_PLUGIN_MAX_SUBJECTS + 1];

/* ---- the script --------------------------------------------------------------------------------- */

typedef struct reader {
  const uint8_t *p, *end;
} reader;

static uint8_t u8(reader *r) { return r->p < r->end ? *r->p++ : 0; }

static uint32_t u32(reader *r) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)u8(r) << (8 * i);
  return v;
}

/* A NUL-ended string of at most size - 1 bytes (the rest of a longer one is left in the script). */
static void str(reader *r, char *buf, size_t size) {
  size_t n = 0;
  for (uint8_t b; n + 1 < size && (b = u8(r)) != 0;) buf[n++] = (char)b;
  buf[n] = '\0';
}

static int run(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in, const lcecheck_outputs_v1 *out,
               char *msg, size_t msg_size);

LCECHECK_EXPORT fuzz_plugin_plan *fuzz_plugin_load(const uint8_t *data, size_t size) {
  reader r = {data, data + size};
  memset(&plan, 0, sizeof plan);
  memset(table, 0, sizeof table);
  for (size_t i = 0; i <= FUZZ_PLUGIN_MAX_SUBJECTS; i++) table[i].abi_version = LCECHECK_SUBJECT_ABI_VERSION;
  const uint8_t flags = u8(&r);
  for (int b = 0; b < FUZZ_BUFS; b++) plan.did[b].nonfinite = -1;
  plan.entry_null = flags & 1;
  plan.flaky = flags >> 1 & 1;
  plan.nsubjects = (u8(&r) + 1u) % (FUZZ_PLUGIN_MAX_SUBJECTS + 1);
  for (size_t i = 0; i < plan.nsubjects; i++) {
    fuzz_plugin_subject_plan *s = &plan.subject[i];
    const uint8_t sflags = u8(&r);
    s->abi_version = (sflags & 1) ? u32(&r) : LCECHECK_SUBJECT_ABI_VERSION;
    s->run_missing = sflags >> 1 & 1;
    s->golden_fused_host = sflags >> 2 & 1;
    str(&r, s->name, sizeof s->name);
    s->caps = LCECHECK_CAP_ALL_SEMANTICS ^ u32(&r);
    s->inner = u8(&r);
    table[i] = (lcecheck_subject_v1){.abi_version = s->abi_version, .name = s->name,
                                     .golden_class = s->golden_fused_host ? "fused-host" : NULL,
                                     .description = "fuzz_parse_plugin's scripted plugin", .caps = s->caps,
                                     .inner = s->inner, .run = s->run_missing ? NULL : run, .state = &plan};
  }
  const uint8_t want = u8(&r);
  plan.has_want = want != 0;
  if (want >= 1 && want <= FUZZ_PLUGIN_MAX_SUBJECTS)
    memcpy(plan.want, plan.subject[want - 1].name, sizeof plan.want); /* empty when that subject is absent */
  else if (want != 0)
    str(&r, plan.want, sizeof plan.want);
  plan.case_index = u8(&r);
  plan.rc = (int32_t)u32(&r);
  plan.msg_len = (size_t)(u8(&r) | u8(&r) << 8) % (FUZZ_PLUGIN_MSG_MAX + 1);
  for (size_t i = 0; i < plan.msg_len; i++) plan.msg[i] = (char)u8(&r);
  for (int b = 0; b < FUZZ_BUFS; b++) {
    plan.out[b].mode = u8(&r) % FUZZ_OUT_MODES;
    plan.out[b].index = (uint16_t)(u8(&r) | u8(&r) << 8);
    plan.out[b].bits = u32(&r);
  }
  return &plan;
}

LCECHECK_EXPORT const lcecheck_subject_v1 *lcecheck_subject_entry(uint32_t abi_version) {
  (void)abi_version;
  return plan.entry_null ? NULL : table;
}

/* ---- run() ------------------------------------------------------------------------------------- */

static int finite_element(const void *buf, size_t elem, int32_t dtype, int64_t i) {
  if (elem == 4) {
    float f;
    memcpy(&f, (const char *)buf + i * 4, 4);
    return isfinite(f);
  }
  uint16_t h;
  memcpy(&h, (const char *)buf + i * 2, 2);
  const uint16_t exp_mask = dtype == LCECHECK_DTYPE_BF16 ? 0x7f80 : 0x7c00;
  return (h & exp_mask) != exp_mask;
}

/* Writes buffer b of count elements of elem bytes as the plan says, and records what it did. */
static void write_buffer(int b, void *dst, int64_t count, size_t elem, int32_t dtype) {
  const void *tmpl = plan.tmpl[b];
  plan.did[b].nonfinite = -1;
  plan.did[b].guard_changed = 0;
  const size_t bytes = (size_t)count * elem;
  const int mode = tmpl ? plan.out[b].mode : FUZZ_OUT_UNWRITTEN;
  if (mode != FUZZ_OUT_UNWRITTEN) memcpy(dst, tmpl, bytes);
  const uint32_t bits = plan.out[b].bits;
  if (mode == FUZZ_OUT_ELEMENT) {
    const int64_t i = plan.out[b].index % count;
    memcpy((char *)dst + i * (int64_t)elem, &bits, elem); /* the low bytes: little-endian */
    if (!finite_element(dst, elem, dtype, i) && finite_element(tmpl, elem, dtype, i)) plan.did[b].nonfinite = i;
  } else if (mode == FUZZ_OUT_GUARD) {
    char *at = (plan.out[b].index & 1) ? (char *)dst + bytes : (char *)dst - elem;
    plan.did[b].guard_changed = memcmp(at, &bits, elem) != 0;
    memcpy(at, &bits, elem);
  }
  plan.did[b].differs = tmpl == NULL || memcmp(dst, tmpl, bytes) != 0;
}

static int run(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in, const lcecheck_outputs_v1 *out,
               char *msg, size_t msg_size) {
  (void)state, (void)in;
  plan.runs++;
  if (plan.rc != LCECHECK_OK) {
    memcpy(msg, plan.msg, plan.msg_len < msg_size ? plan.msg_len : msg_size); /* no terminator */
    return plan.rc;
  }
  const size_t dh_elem = c->dtype == LCECHECK_DTYPE_FP32 ? 4 : 2;
  void *const buf[FUZZ_BUFS] = {out->loss, out->loss_token, out->lse, out->d_hidden, out->grad_embedding,
                                out->grad_weight};
  const int64_t count[FUZZ_BUFS] = {1, c->n, c->n, c->n * c->h, c->vp * c->h, c->vp * c->h};
  for (int b = 0; b < FUZZ_BUFS; b++) {
    if (buf[b] == NULL) continue; /* grad_weight when tied */
    write_buffer(b, buf[b], count[b], b == FUZZ_BUF_D_HIDDEN ? dh_elem : 4, c->dtype);
  }
  if (plan.flaky && plan.runs % 2 == 0) ((unsigned char *)out->d_hidden)[0] ^= 1;
  return LCECHECK_OK;
}
