/* fused_host.h — the fused-host subject's run function (fused_host.c): the fused FLCE algorithm as
 * a GPU kernel runs it, on the CPU, emulating device precision exactly.
 *
 * The registry (lce_subject_registry.c) wraps it in an lce_subject. Mutant builds of fused_host.c
 * export the same function under another name (mutants.cmake passes -DLCE_FUSED_HOST_RUN=...), so
 * this declaration is only ever the production one. */
#ifndef FUSED_HOST_H
#define FUSED_HOST_H

#include "lce_subject.h"

lce_code lce_fused_host_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);

#endif
