/* lce_ref64_internal.cuh — what the tier-2 sources share (not part of the contract, lce_ref64.h):
 * the checked-call macros, the per-row statistics the row kernel hands the dz kernel, the kernel
 * launchers (lce_ref64_kernels.cu) and the bound arithmetic (derivation: lce_ref64_kernels.cu's header).
 *
 *   lce_ref64_device.cu   driver: uploads, cuBLAS DGEMMs, the order of the passes, the reduced loss
 *   lce_ref64_kernels.cu  fp64 kernels: input conversion, row statistics and loss, dz, errors, fixups
 *   lce_ref64_compare.cu  a subject's host output against the device reference, reduced on the device
 *   lce_ref64_host.c      the host-level oracle (lce_oracle_result) */
#ifndef LCE_REF64_INTERNAL_CUH
#define LCE_REF64_INTERNAL_CUH

#include <stdint.h>

#include "lce_cuda_status.cuh"

extern "C" {
#include "lce_ref64.h"
}

/* Checked calls (reference/device/lce_cuda_status.cuh): the enclosing function returns the code. */
#define R64_CUDA_CHECK(st, call) LCE_CUDA_ON_ERROR(st, "ref64", call, return lce_rc_)
#define R64_CUBLAS_CHECK(st, call) LCE_CUBLAS_ON_ERROR(st, "ref64", call, return lce_rc_)
#define R64_LAUNCH_CHECK(st, kernel) LCE_LAUNCH_ON_ERROR(st, "ref64", kernel, return lce_rc_)

/* Threads per row of the row kernel: the row sums then chain at most ceil(V / R64_ROW_THREADS)
 * sequential additions per thread plus log2(R64_ROW_THREADS) tree levels. */
#define R64_ROW_THREADS 256

/* ---- bound arithmetic (host and device) -------------------------------------------------------- */
#define R64_U 0x1p-53
/* gamma(k) = k u / (1 - k u), the classic bound on a k-term recursive sum's relative error. */
__host__ __device__ static inline double r64_gamma(double k) { return k * R64_U / (1.0 - k * R64_U); }
/* Every bound is finally multiplied by this, so its own double evaluation cannot undershoot. */
#define R64_SLACK (1.0 + 0x1p-40)
/* Longest addition chain of a row sum over v terms in the row kernel. */
__host__ __device__ static inline double r64_row_depth(int64_t v) {
  return (double)((v + R64_ROW_THREADS - 1) / R64_ROW_THREADS) + 9.0;
}

/* x correctly rounded to a format of p significant bits, exponents emin..emax (gradual underflow,
 * overflow to infinity at max + half an ulp), to nearest with ties to even: lce_round_to (lce_dtype.c)
 * on the device. x = r 2^q exactly for the quantum q of x's binade (not below the subnormal quantum),
 * r rounded to an integer; ldexp by q and -q is exact for every double these formats reach. */
__device__ static inline double r64_round_format(double x, int p, int emin, int emax) {
  if (!isfinite(x) || x == 0.0) return x;
  int e;
  (void)frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  const int q = (e - 1 > emin ? e - 1 : emin) - (p - 1);
  const double y = ldexp(rint(ldexp(x, -q)), q);
  return fabs(y) >= ldexp(1.0, emax + 1) ? copysign(INFINITY, x) : y;
}

/* An fp32 value rounded to tf32 as the tensor cores' cvt.rna does (lce_round_tf32): the magnitude
 * rounded half away to 10 mantissa bits, non-finite values kept. */
__device__ static inline float r64_round_tf32(float x) {
  unsigned bits = __float_as_uint(x);
  const unsigned mag = bits & 0x7fffffffu;
  if (mag < 0x7f800000u) bits = (bits & 0x80000000u) | ((mag + 0x1000u) & ~0x1fffu);
  return __uint_as_float(bits);
}

/* The case's constants as the kernels read them (all doubles computed on the host). */
typedef struct r64_consts {
  int64_t n, h, v, vp;
  int64_t ignore_index;
  double softcap;      /* c, 0: none */
  double lambda;       /* z-loss weight */
  double one_minus_e;  /* 1 - e */
  double ev;           /* e / V */
  double sw;           /* sum_v w_v */
  double sw_rel;       /* its relative error bound */
  double g_rel;        /* relative error bound of every g[n] */
  double az;           /* logit error per unit of logit terms: 1.01 gamma(H) + 7u */
  double dz_floor_unit;/* 2^emin(dtype): the unit of the dz floor (lce_dz_floor_of) */
  int want_mags;
  int smoothing;       /* e > 0 */
} r64_consts;

/* Per token row: what the row kernel finds and the dz kernel, the error kernels and the fixups use. */
typedef struct r64_row {
  double m;       /* the row's largest logit */
  double s;       /* sum_v exp(z_v - m) */
  double s_rest;  /* the same without the label's term (valid labels) */
  double lse;
  double k;       /* (e / V) sum w + 2 lambda lse: p_v's factor beyond cy */
  double kmag;    /* cy + (e / V) sum w + 2 lambda |lse|: its terms */
  double cy;      /* (1 - e) w_y, 0 for ignored tokens */
  double g;       /* d loss / d loss_token */
  double tmax;    /* largest (softcapped) logit terms: cond = 1 + tmax */
  double traw;    /* largest raw GEMM terms (softcap's factor error) */
  double a;       /* |dz - DZ| <= a dzterm + b */
  double b;
  int poisoned;   /* a non-finite hidden value in the row, or in W */
} r64_row;

/* Device state of one run (the priv_ of lce_ref64_device). Row-major matrices. */
typedef struct r64_state {
  cublasHandle_t blas;
  cudaStream_t stream;
  r64_consts k;
  double *hid, *hid_abs, *hid_cond;  /* [n*h] inputs as the math reads them, |.|, cond_n |.| */
  double *w, *w_abs;                 /* [v*h] */
  double *z;                         /* [n*v] logits, then dz */
  double *term;                      /* [n*v] logit terms, then dz terms (mags only) */
  int64_t *labels;                   /* [n] */
  float *class_weight;               /* [v] or NULL */
  double *g;                         /* [n] */
  r64_row *rows;                     /* [n] */
  int *bad_h;                        /* [n] */
  int *bad_w;                        /* [1] */
  double *vec_w_abs;                 /* [h] sum_v |W_vk| */
  double *vec_h_floor, *vec_h_b;     /* [h] sum_n floor_n |h_nk|, sum_n b_n |h_nk| over active rows */
  double *row_vec;                   /* [3n + v]: cond_n, floor_n, b_n (active rows), then v ones */
  double *scratch;                   /* [n*h] d_hidden's M1 before it becomes err/mag/emag */
  float *prior_w;                    /* [vp*h] the output weight's prior */
  void *raw;                         /* staging for raw dtype uploads */
} r64_state;

/* ---- launchers (lce_ref64_kernels.cu); each checks its launch ---------------------------------- */

/* dst[i] = the value of raw[i] (format t) as the math reads it (tf32-rounded when tf32), non-finite
 * values replaced by 0 with bad[i / row_len] = 1 (bad_all: one flag for the whole matrix);
 * dst_abs[i] = |dst[i]| when not NULL. */
lce_code r64_launch_convert(const void *raw, lce_dtype t, int tf32, int64_t count, int64_t row_len, double *dst,
                            double *dst_abs, int *bad, int bad_all, cudaStream_t s, lce_status *st);
/* Per row: softcap, terms, max, sums, lse, the token loss (value, err, mag), the row's r64_row. */
lce_code r64_launch_rows(const r64_state *x, lce_ref64_device *ref, cudaStream_t s, lce_status *st);
/* rel[n tp + r]: the softmax-sum replay of token n's shard r (of vocab rows [r per, (r + 1) per)), from the
 * logits in z; 0 where the host's replay has no finite value. */
lce_code r64_launch_rsum(const r64_state *x, int tp, int64_t per, double *rel, cudaStream_t s, lce_status *st);
/* z (logits) → dz in place, term → dz terms (mags), per element. */
lce_code r64_launch_dz(const r64_state *x, cudaStream_t s, lce_status *st);
/* dz -> the d_logits rnd multiplies (lce_ref_output.rnd): t = dz / g rounded to dtype (then tf32), times g,
 * in place in z. */
lce_code r64_launch_dzr(const r64_state *x, lce_dtype dtype, int tf32, cudaStream_t s, lce_status *st);
/* d_hidden's err/mag/emag from M1 = dzterm · |W| (in x->scratch) and the row statistics. */
lce_code r64_launch_dh_bounds(const r64_state *x, lce_ref64_device *ref, cudaStream_t s, lce_status *st);
/* d_weight's err/mag/emag from M2, EM2 (already in mag, emag) and the priors; alpha, bmax: see the
 * bound; na: active rows. */
lce_code r64_launch_dw_bounds(const r64_state *x, lce_ref64_device *ref, double alpha, int64_t na,
                              cudaStream_t s, lce_status *st);
/* The classes tier 0 reports for non-finite inputs and exact elements (lce_oracle.c's header). */
lce_code r64_launch_fixups(const r64_state *x, lce_ref64_device *ref, int poisoned_grad, cudaStream_t s,
                           lce_status *st);
/* dst[i] = fp32 src[i] as double. */
lce_code r64_launch_widen(const float *src, int64_t count, double *dst, cudaStream_t s, lce_status *st);
/* dst[n*h + k] = scale[n] * src[n*h + k] (a row scaling of an [n x h] matrix). */
lce_code r64_launch_scale_rows(const double *src, const double *scale, int64_t n, int64_t h, double *dst,
                               cudaStream_t s, lce_status *st);
/* x[i] = value for count elements. */
lce_code r64_launch_fill(double *x, int64_t count, double value, cudaStream_t s, lce_status *st);
/* The gemm floor of lce_oracle.c: terms 2^-126 + 2^emin(format). */
static inline double r64_gemm_floor(lce_dtype fmt, double terms) {
  return terms * 0x1p-126 + ldexp(1.0, lce_dtype_emin(fmt));
}

#endif
