/*
 * ref_qeltwise.h - the reference of the integer elementwise ops of QDQ groups (QADD, QMUL, QLUT):
 * DQ(a) [, DQ(b)] -> op -> Q as ONNX Runtime's CPU runs the group after its QDQ fusion on x86-64
 * with AVX2 (QLinearAdd, QLinearMul; a lookup table for the unary ops). Header only, plain C11
 * without libc: the host kernel, the host tests and the qemu-hexagon image use this definition.
 *
 *   QADD  fixed = zy - fma(za, ra, f32(rb * zb))        ra = f32(s_a / s_y), rb = f32(s_b / s_y)
 *         t     = fma(a, ra, fma(b, rb, fixed))
 *   QMUL  t     = f32(f32((a - za) * (b - zb)) * r) + zy  r = f32(f32(s_a * s_b) / s_y)
 *   both  y     = min(max(cvt(t), lo), hi)            cvt: round half to even, NaN or out of int32: lo
 *   QLUT  y     = table[x - the minimum of x's type]
 *
 * QADD is ONNX Runtime's AVX2 kernel (MlasQLinearAddKernelAvx2Helper as GCC compiles it: the two
 * products of its fixed part contracted into one fma); it runs with the operands swapped where A is
 * the scalar of a broadcast span (see HFX_P_QBIN_* in ops.h), which changes the rounding, so the
 * caller passes them in that order. QMUL is its SSE2 kernel (no fma). Measured against ORT 1.32 on
 * every (a, b) pair of u8 for 60 random scale/zero-point sets, same shapes and both broadcasts:
 * identical (tests/test_qeltwise.py keeps checking it). The Hexagon build computes the fma with
 * the fused sfmpy accumulate, the host with fmaf, so both give the single rounding.
 */
#ifndef HEXFUSE_REF_QELTWISE_H
#define HEXFUSE_REF_QELTWISE_H

#include <stdint.h>

#include "ref_fma.h"

/* cvtps2dq (round half to even; NaN and |t| >= 2^31 give INT32_MIN), then the saturating packs,
 * then the output range [lo, hi] */
static inline int32_t ref_qeltwise_round(float t, int32_t lo, int32_t hi) {
    if (!(t >= -2147483648.0f && t < 2147483648.0f)) return lo;
    t = t < 4194304.0f ? t : 4194304.0f; /* beyond 2^22 every output saturates: clamp, then round */
    t = t > -4194304.0f ? t : -4194304.0f;
    float r = t + 12582912.0f; /* 1.5 * 2^23: rounds to the nearest integer, ties to even */
    int32_t i = (int32_t)(r - 12582912.0f);
    return i < lo ? lo : i > hi ? hi : i;
}

static inline int32_t ref_qadd(int32_t a, int32_t b, float ra, float rb, int32_t za, int32_t zb, int32_t zy, int32_t lo,
                               int32_t hi) {
    float pb = rb * (float)zb;
    float fixed = (float)zy - ref_fmaf((float)za, ra, pb);
    float t = ref_fmaf((float)a, ra, ref_fmaf((float)b, rb, fixed));
    return ref_qeltwise_round(t, lo, hi);
}

static inline int32_t ref_qmul(int32_t a, int32_t b, float r, int32_t za, int32_t zb, int32_t zy, int32_t lo,
                               int32_t hi) {
    float p = (float)((a - za) * (b - zb)); /* |p| <= 2^16: exact */
    float t = p * r;                        /* two statements: no contraction into an fma */
    t = t + (float)zy;
    return ref_qeltwise_round(t, lo, hi);
}

#endif
