/*
 * ref_quant.h - the reference of QUANTIZE_LINEAR and DEQUANTIZE_LINEAR (ONNX QuantizeLinear /
 * DequantizeLinear as ONNX Runtime's x86 CPU kernels compute them). Header only, plain C11 without
 * libc: the host tests and the qemu-hexagon image use the same definition.
 *
 *   quantize    t = x / scale (an f32 division, not a multiplication by 1 / scale);
 *               NaN -> qmin; t >= qmax - zp -> qmax; t <= qmin - zp -> qmin (so +-inf saturate);
 *               else round half to even, + zp
 *   dequantize  f32(x - zp) * scale, x - zp in int32 (wrapping)
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

static inline float ref_dequantize_linear(int32_t x, float scale, int32_t zp) {
    return (float)(int32_t)((uint32_t)x - (uint32_t)zp) * scale;
}

#endif
