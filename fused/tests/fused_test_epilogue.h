/* fused_test_epilogue.h — which rounding a GEMM epilogue d = alpha·acc + C (cuBLAS beta = 1) uses,
 * decided from its results: buffers C that tell the candidates of lce_gemm_model.h apart, and the
 * tally of which candidate a device's results follow. The CPU self-check (test_fused_epilogue.c)
 * and the GPU test (test_fused_cuda_epilogue.cu) share it.
 *
 * The accumulators acc are exact integers (integer operands, |acc| < 2^24: every model and every
 * summation order gives the same acc), so the only rounding left in d is the epilogue's. With alpha
 * not a power of two, alpha·acc needs rounding and fma(alpha, acc, C) differs from
 * round(round(alpha·acc) + C) on a good share of elements when |C| is near |alpha·acc|. */
#ifndef FUSED_TEST_EPILOGUE_H
#define FUSED_TEST_EPILOGUE_H

#include <stdint.h>

#include "lce_gemm_model.h"

/* C for the element (seed, index) with accumulator acc: alpha·acc times a random factor of either
 * sign, magnitude in [1/4, 2) with a random 24-bit significand (alpha itself where acc = 0). */
float epilogue_pick_c(float alpha, float acc, uint64_t seed, uint64_t index);

/* The error of alpha·acc + c evaluated in double (the product is exact there): 0 when the double
 * sum is the exact value. */
double epilogue_double_error(float alpha, float acc, float c);
/* 1 when the exact alpha·acc + c is an fp32 value (no rounding could show in it). */
int epilogue_exact(float alpha, float acc, float c);

typedef struct epilogue_tally {
  int64_t count;   /* elements */
  int64_t differ;  /* elements where the two candidates differ: they decide between them */
  int64_t inexact; /* elements whose exact alpha·acc + c is not an fp32: any rounding shows */
  int64_t fma;     /* elements equal to fma(alpha, acc, c), bit for bit */
  int64_t two;     /* elements equal to round(round(alpha·acc) + c) */
  int64_t neither; /* elements equal to no candidate */
} epilogue_tally;

/* Adds count elements got[i] = the device's alpha·acc[i] + c[i] to t. */
void epilogue_tally_add(epilogue_tally *t, float alpha, const float *acc, const float *c, const float *got,
                        int64_t count);

/* The candidate every element follows (LCE_EPILOGUE_FMA or LCE_EPILOGUE_TWO_ROUNDINGS), or -1: fewer
 * than min_differ deciding elements, some element following neither, or a mix. */
int epilogue_tally_verdict(const epilogue_tally *t, int64_t min_differ);

/* One line: the counts and what they say ("what" names the GEMM). */
void epilogue_tally_print(const char *what, float alpha, const epilogue_tally *t, int64_t min_differ);

#endif
