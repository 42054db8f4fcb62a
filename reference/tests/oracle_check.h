/* oracle_check.h — what the oracle's test files (test_oracle.c, test_oracle_options.c; one binary,
 * test_oracle) share besides lce_test.h (EXPECT, the seed): case and run helpers, output comparison, the
 * finite-difference gradient check and the self-proof. Failures print the case id and a repro line. */
#ifndef ORACLE_CHECK_H
#define ORACLE_CHECK_H

#include <inttypes.h>
#include <stdio.h>

#include "lce_oracle_internal.h"
#include "lce_test.h"

const char *id_of(const lce_case *c);
/* Bit-identical doubles (NaN equals NaN; -0 differs from +0). */
int same(double a, double b);
lce_case make_case(lce_dtype t, int64_t n, int64_t h, int64_t v, lce_dist d, lce_reduction r, int tied);
void gen(const lce_case *c, lce_tensors *t);                                 /* exits on error */
void run(const lce_case *c, const lce_tensors *t, lce_oracle_result *r);    /* exits on error */
/* |value - x| <= err + slack, with x given in MPFR. */
int within(double value, double err, mpfr_srcptr x, double slack);

/* Values and format values bit-identical; error bounds identical when exact_err, else within
 * 1e-12 relative (their sums of magnitudes are evaluated in double, in row order). */
void expect_output_identical(const lce_oracle_result *a, const lce_oracle_result *b, lce_output_id o, int exact_err,
                             const char *what);

/* Central differences of J (lce_oracle_objective at 400 bits, inputs as the oracle reads them:
 * tf32-rounded for tf32) against `samples` d_hidden and d_weight elements of r; when naive is not
 * NULL it is the expected J itself, compared first. */
void check_gradients_fd(const lce_case *c, const lce_tensors *t, const lce_oracle_result *r, int samples,
                        uint64_t stream, mpfr_srcptr naive);

/* The oracle at 160 and 320 bits on the tensors of c: |v160 - v320| <= err160 + err320 for every
 * element, rounded == lce_mpfr_round_to(v), decisive > 98%, non-zero norms, bounds not loose,
 * |value| <= mag <= emag; non-finite elements exact, decisive and the same at both precisions. */
void self_proof(const lce_case *c);

/* The option tests (test_oracle_options.c). */
void test_option_values(void);
void test_option_gradients(void);
void test_option_closed_forms(void);
void test_option_invariance(void);
void test_tf32(void);
void test_poison(void);
void test_option_self_proof(void);

#endif
