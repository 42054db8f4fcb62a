/* fused_host.h — the fused-host subjects' run functions (fused_host.c): the fused FLCE algorithm as
 * a GPU kernel runs it, on the CPU, emulating device precision exactly.
 *
 * The registry (lce_subject_registry.c) wraps it in an lce_subject. Mutant builds of fused_host.c
 * export the same function under another name (mutants.cmake passes -DLCE_FUSED_HOST_RUN=...), so
 * these declarations are only ever the production ones (the sm90 run exists only there). */
#ifndef FUSED_HOST_H
#define FUSED_HOST_H

#include "lce_subject.h"

/* fused-host: every GEMM under the ieee model (sequential fmaf). */
lce_code lce_fused_host_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);
/* fused-host-sm90: bf16/fp16/tf32 GEMMs under the sm90 tensor-core model, plain fp32 under ieee. */
lce_code lce_fused_host_sm90_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);

#endif
