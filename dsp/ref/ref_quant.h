/*
 * ref_quant.h - the reference of QUANTIZE_LINEAR and DEQUANTIZE_LINEAR (ONNX QuantizeLinear /
 * DequantizeLinear as ONNX Runtime's x86 CPU kernels compute them). Header only, plain C11 without
 * libc: the host tests and the qemu-hexagon image use the same definition.
 *
 *   quantize    t = x / scale (an f32 division, not a multiplication by 1 / scale);
 *               NaN -> qmin; t >= qmax - zp -> qmax; t <= qmin - zp -> qmin (so +-inf saturate);
 *               else round half to even, + zp
 *   dequantize  f32(x - zp) * scale, x - zp in int32 (wrapping)
 *   dynamic     DynamicQuantizeLinear's u8 scale and zero point from lo = min(x, 0), hi = max(x, 0) (NaN
 *               skipped): scale = hi == lo ? 1 : (hi - lo) / 255; zp = round half to even of
 *               0 - lo / scale clamped to [0, 255] as std::max(0, std::min(255, t)) (NaN: 255)
 *   cast        ONNX Cast f32 -> i32 as ONNX Runtime on x86 (cvttss2si): toward zero; NaN, +-inf and x
 *               outside [-2^31, 2^31) give INT32_MIN (the spec leaves them open; C leaves them undefined)
 */
#ifndef HEXFUSE_REF_QUANT_H
#define HEXFUSE_REF_QUANT_H

#include <stdint.h>

static inline int32_t ref_quantize_linear(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
    float t = x / scale;
    if (t != t) return qmin;
    if (t >= (float)(qmax - zp)) return qmax;
    if (t <= (float)(qmin - zp)) return qmin;
    int32_t i = (int32_t)t; /* toward zero; |t| < 2^17 here, so t - i is exact */
    float frac = t - (float)i;
    if (frac > 0.5f || (frac == 0.5f && (i & 1))) i++;
    if (frac < -0.5f || (frac == -0.5f && (i & 1))) i--;
    return i + zp;
}

static inline int32_t ref_cast_f32_i32(float x) {
    return x >= -2147483648.0f && x < 2147483648.0f ? (int32_t)x : INT32_MIN;
}

static inline float ref_dequantize_linear(int32_t x, float scale, int32_t zp) {
    return (float)(int32_t)((uint32_t)x - (uint32_t)zp) * scale;
}

/* DynamicQuantizeLinear's scale and zero point of a range [lo, hi] that holds 0 */
static inline void ref_range_qparams(float lo, float hi, float *scale, int32_t *zp) {
    float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float t = 0.0f - lo / s;
    t = t < 255.0f ? t : 255.0f; /* NaN (lo = -inf): 255 */
    t = 0.0f < t ? t : 0.0f;
    int32_t i = (int32_t)t; /* t in [0, 255]: round half to even by hand */
    float frac = t - (float)i;
    if (frac > 0.5f || (frac == 0.5f && (i & 1))) i++;
    *scale = s;
    *zp = i;
}

static inline void ref_dynamic_qparams(const float *x, uint64_t n, float *scale, int32_t *zp) {
    float lo = 0.0f, hi = 0.0f;
    for (uint64_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    ref_range_qparams(lo, hi, scale, zp);
}

#endif
