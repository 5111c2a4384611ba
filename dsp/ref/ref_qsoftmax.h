/*
 * ref_qsoftmax.h - QSOFTMAX, the Softmax of a QDQ group as ONNX Runtime's QLinearSoftmax
 * (contrib_ops/cpu/quantization/qlinear_softmax.cc), which its QDQ fusion runs for
 * DQ -> Softmax -> Q of one 8-bit type. Header only, plain C11 without libc.
 *
 * The lowering builds ORT's table of 256 f32: table[j] = f32(exp((j - 255 + b) s_x)) in double,
 * b = max(0, logf(FLT_MAX / D) - 5) / s_x, D the axis length (log of a float: logf). Per line:
 * m = max(x); each element takes t = table[255 - (m - x)]; sum = the f32 sum of the line's t in
 * order; then q = nearbyint(t * floor(1 / s_y) / sum) + zy (>= zy) in double, as ORT 1.32 (its
 * y_scale is a double; a quotient just under 5.5 rounds to 5.5 in f32, a tie that goes to 6:
 * svtrv2_captcha u8u8's one differing byte), saturated at the type's maximum. (An older ORT source casts an i8 q of 128 to -128; ORT 1.32 gives 127:
 * tests/test_qeltwise.py.)
 */
#ifndef HEXFUSE_REF_QSOFTMAX_H
#define HEXFUSE_REF_QSOFTMAX_H

#include <stdint.h>

#include "ref_qeltwise.h"

static inline uint32_t ref_qsoftmax_index(int32_t x, int32_t max) { return (uint32_t)(255 - (max - x)); }

/* one output from its table value t and the line's sum; `is_u8` picks ORT's cast */
static inline int32_t ref_qsoftmax_out(float t, float sum, float y_scale, int32_t zy, int is_u8) {
    float f = t * y_scale; /* two statements: no contraction */
    f = f / sum;           /* within 2^-23 relative of the exact quotient */
    f = f < 4194304.0f ? f : 4194304.0f;
    int32_t q = ref_qeltwise_round(f, 0, INT32_MAX);
    float tie = f - (float)q; /* exact (Sterbenz); the quotient's nearest half is q +- 0.5 */
    tie = tie < 0.0f ? -tie : tie;
    if (!(0.5f - tie > f * 0x1p-21f)) {         /* near a half (or NaN): the double quotient decides */
        double v = (double)t * (double)y_scale; /* exact: two 24-bit significands */
        v = v / (double)sum;
        v = v < 4194304.0 ? v : 4194304.0;
        double r = v + 6755399441055744.0; /* 1.5 * 2^52: rounds to the nearest integer, ties to even */
        q = (int32_t)(r - 6755399441055744.0);
    }
    q += zy;
    if (is_u8) return q > 255 ? 255 : q;
    return q > 127 ? 127 : q;
}

#endif
