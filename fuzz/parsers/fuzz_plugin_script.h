/* fuzz_plugin_script.h — the scripted plugin of fuzz_parse_plugin: a shared library
 * (fuzz_plugin_scripted.c) that implements include/lcecheck/lcecheck_subject.h and takes every answer
 * from bytes the harness hands it. The harness dlopens the library once and calls its
 * FUZZ_PLUGIN_LOAD function with each input; the library decodes the bytes (the one decoder of the
 * script) into the plan below and returns it, so the harness knows what the plugin will answer. The
 * harness then points tmpl at fused-host's outputs for the chosen case; after each run() the plugin
 * records in did[] what it did to every output buffer.
 *
 * The script, read front to back (bytes past the input's end read as 0, so a truncated input still
 * means one thing; zero bytes mean a well-formed plugin that copies fused-host's answer):
 *   flags (1 byte): bit 0 the entry returns NULL, bit 1 run() changes d_hidden on every second call
 *   subject count (1 byte b: (b + 1) % 4; 0: the array's first name is NULL)
 *   each subject: flags (1 byte: bit 0 abi_version from the next 4 bytes instead of the right one,
 *     bit 1 no run function, bit 2 golden_class "fused-host" instead of NULL), name (NUL-ended, at most
 *     FUZZ_PLUGIN_NAME_MAX - 1 bytes), caps (4 bytes, XORed into every semantic capability), inner (1 byte)
 *   the spec's #NAME (1 byte: 0 plain PATH, 1..3 the name of that subject, else a NUL-ended name)
 *   the case (1 byte, index into the harness's cases)
 *   run()'s return code (4 bytes), message length (2 bytes) and message bytes (no terminator)
 *   each of the FUZZ_BUFS buffers: mode (1 byte, % FUZZ_OUT_MODES), element index (2 bytes), value
 *     bits (4 bytes: an fp32, or the low 16 bits of a bf16/fp16 d_hidden element) */
#ifndef FUZZ_PLUGIN_SCRIPT_H
#define FUZZ_PLUGIN_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_PLUGIN_LOAD "fuzz_plugin_load" /* fuzz_plugin_load_fn */
#define FUZZ_PLUGIN_MAX_SUBJECTS 3
#define FUZZ_PLUGIN_NAME_MAX 24
#define FUZZ_PLUGIN_MSG_MAX 1024 /* more than the trampoline's message buffer */

/* What run() does to one output buffer. */
enum {
  FUZZ_OUT_EXACT,     /* fused-host's values */
  FUZZ_OUT_UNWRITTEN, /* nothing: a value output keeps its poison, a gradient buffer its prior */
  FUZZ_OUT_ELEMENT,   /* fused-host's values, then one element set to the script's bits */
  FUZZ_OUT_GUARD,     /* fused-host's values, then the element just before or after the buffer set */
  FUZZ_OUT_MODES
};

/* The buffers of lcecheck_outputs_v1, in its order. */
enum { FUZZ_BUF_LOSS, FUZZ_BUF_LOSS_TOKEN, FUZZ_BUF_LSE, FUZZ_BUF_D_HIDDEN, FUZZ_BUF_GRAD_EMBEDDING, FUZZ_BUF_GRAD_WEIGHT,
       FUZZ_BUFS };

typedef struct fuzz_plugin_subject_plan {
  uint32_t abi_version;
  char name[FUZZ_PLUGIN_NAME_MAX];
  int run_missing;
  int golden_fused_host; /* golden_class "fused-host"; otherwise NULL */
  uint32_t caps, inner;
} fuzz_plugin_subject_plan;

typedef struct fuzz_plugin_plan {
  int entry_null, flaky;
  size_t nsubjects;
  fuzz_plugin_subject_plan subject[FUZZ_PLUGIN_MAX_SUBJECTS];
  int has_want; /* the spec is PATH#want; otherwise plain PATH */
  char want[FUZZ_PLUGIN_NAME_MAX];
  size_t case_index; /* not reduced: the harness takes it modulo its case count */
  int32_t rc;
  char msg[FUZZ_PLUGIN_MSG_MAX];
  size_t msg_len;
  struct {
    int mode;
    uint16_t index;
    uint32_t bits;
  } out[FUZZ_BUFS];
  /* Set by the harness after loading: fused-host's outputs of the case (NULL where none), with the
   * element size of d_hidden's format. */
  const void *tmpl[FUZZ_BUFS];
  /* Set by run(), for the last call: whether the buffer's bytes differ from tmpl, the element made
   * non-finite where tmpl's is finite (-1: none), whether a guard element changed. */
  struct {
    int differs;
    int64_t nonfinite;
    int guard_changed;
  } did[FUZZ_BUFS];
  unsigned runs; /* run() calls since the load */
} fuzz_plugin_plan;

typedef fuzz_plugin_plan *(*fuzz_plugin_load_fn)(const uint8_t *data, size_t size);

#endif
