/* fused_test_accuracy.h — one subject run judged against the unfused double computation
 * (fused_test_util.h) with error bounds a correct fp32 fused algorithm meets: shared by the fused-host
 * tests of the base semantics (test_fused_host.c) and of the options (test_fused_options.c). */
#ifndef FUSED_TEST_ACCURACY_H
#define FUSED_TEST_ACCURACY_H

#include "fused_test_util.h"

/* Runs subject `name` on case c (inputs must be finite) and EXPECTs every output within its bound:
 * forward outputs within 8·u32·sqrt(h) of the logit scale, gradients within 3 units of the d_logits
 * format (the dtype, or tf32 with tf32 GEMMs) plus sqrt(h)·u32 times the reference's condition
 * scale; padded gradient rows hold their prior. Prints one line per case with the errors and the %
 * of the gradient bounds used. */
void check_accuracy(const char *name, const lce_case *c);

/* Normwise difference ||a - b|| / ||a|| of two fp32 arrays; EXPECTs ||a|| > 0. */
double float_rel_diff(const float *a, const float *b, int64_t count);

#endif
