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
 *   half        ONNX Cast between float16 and float32 (IEEE 754 binary16): widening is exact; narrowing rounds
 *               to nearest, ties to even (F16C's vcvtps2ph, numpy's astype), |x| >= 65520 to +-inf, a NaN
 *               stays a NaN (quiet, its top payload bits kept)
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

typedef union {
    float f;
    uint32_t u;
} ref_f32_bits;

static inline float ref_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    ref_f32_bits r;
    if (e == 0x1fu) r.u = sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0u); /* inf, NaN (quiet) */
    else if (e) r.u = sign | ((e + 112u) << 23) | (man << 13);
    else if (!man) r.u = sign;
    else { /* subnormal: man * 2^-24, normalised */
        uint32_t shift = 0;
        while (!(man & 0x400u)) man <<= 1, shift++;
        r.u = sign | ((113u - shift) << 23) | ((man & 0x3ffu) << 13);
    }
    return r.f;
}

static inline uint16_t ref_f32_to_f16(float x) {
    ref_f32_bits v = {x};
    uint32_t sign = (v.u >> 16) & 0x8000u, ax = v.u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN, quiet */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                       /* 65520 and up: inf */
    if (ax >= 0x38800000u) {                                                          /* a normal half */
        uint32_t r = ax - 0x38000000u;                                                /* exponent rebiased */
        r += 0xfffu + ((r >> 13) & 1u);                                               /* ties to even */
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax <= 0x33000000u) return (uint16_t)sign; /* 2^-25 and below: 0 (2^-25 ties to even 0) */
    uint32_t man = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23); /* a subnormal half: 14..24 */
    uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q); /* q = 0x400: the smallest normal, as its bits say */
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
