/*
 * ref_kernels.h - portable C references of the HVX kernels in dsp/hvx/.
 *
 * These functions define the exact results of the HVX kernels: every
 * integer kernel in dsp/hvx/ must match its reference bit for bit (checked
 * under qemu-hexagon by dsp/tests/qemu/). Plain C11, no HVX, no libc beyond
 * <stddef.h>/<stdint.h>; they build for the host and for Hexagon alike.
 *
 * Integer semantics
 *   add / mul            wrap modulo 2^16 or 2^32 (ONNX integer Add/Mul)
 *   add_sat              saturate to the type's range
 *   relu                 max(x, 0)
 *   lut_i8               y = table[(uint8_t)x]
 *   matmul_i8            see hx_requant below
 */
#ifndef HEXFUSE_REF_KERNELS_H
#define HEXFUSE_REF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ref_quant.h" /* ref_f16_to_f32, ref_f32_to_f16: IEEE binary16 <-> binary32, to nearest even */

#ifdef __cplusplus
extern "C" {
#endif

/* Requantisation of an int32 accumulator to int8 (per tensor):
 *
 *   acc = bias[n] + sum_k A[m,k] * B[k,n]              (int32, wrapping)
 *   q   = sat32((acc * multiplier + 2^30) >> 31)        (rounding doubling high mul)
 *   r   = sat32(q + (shift ? 2^(shift-1) : 0)) >> shift (round half up, arithmetic)
 *   y   = clamp(r + zero_point, out_min, out_max)       (int8)
 *
 * The real scale is multiplier * 2^-31 * 2^-shift. A zero point of A or B is
 * folded into the bias by the caller (bias[n] -= za * sum_k B[k,n] etc.).
 * Constraints: 0 <= shift <= 31, -128 <= zero_point <= 127,
 * -128 <= out_min <= out_max <= 127. */
typedef struct hx_requant {
    int32_t multiplier;
    int32_t shift;
    int32_t zero_point;
    int32_t out_min;
    int32_t out_max;
} hx_requant;

/* Apply the requantisation above to one accumulator. */
int8_t ref_requant_i8(int32_t acc, const hx_requant *rq);

/* y[i] = ref_requant_i8(acc[i], rq). */
void ref_requant_i32_i8(const int32_t *acc, int8_t *y, size_t n, const hx_requant *rq);

/* C[m*ldc + n] = requant(bias[n] + sum_k A[m*lda + k] * B[k*ldb + n]).
 * bias may be NULL (zeros). */
void ref_matmul_i8(const int8_t *A, int lda, const int8_t *B, int ldb, const int32_t *bias,
                   int8_t *C, int ldc, int M, int N, int K, const hx_requant *rq);

void ref_add_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n);
void ref_add_sat_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n);
void ref_mul_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n);
void ref_relu_i16(const int16_t *x, int16_t *y, size_t n);

void ref_add_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n);
void ref_add_sat_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n);
void ref_mul_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n);
void ref_relu_i32(const int32_t *x, int32_t *y, size_t n);

void ref_lut_i8(const int8_t *x, int8_t *y, size_t n, const int8_t table[256]);

/* Float references of the v68+ HVX float kernels (those use qf32/qf16
 * arithmetic, whose rounding differs from IEEE: compare with a tolerance). */
void ref_add_f32(const float *a, const float *b, float *y, size_t n);
void ref_mul_f32(const float *a, const float *b, float *y, size_t n);
/* C[M,N] (fp32) = A[M,K] (fp16 bits) x B[K,N] (fp16 bits), fp32 accumulation. */
void ref_matmul_f16(const uint16_t *A, int lda, const uint16_t *B, int ldb, float *C, int ldc,
                    int M, int N, int K);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_REF_KERNELS_H */
