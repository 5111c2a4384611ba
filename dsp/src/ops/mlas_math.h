/* mlas_math.h - exp, erf and Softmax's sum of exps as ONNX Runtime's MLAS computes them on x86-64 with
 * AVX512F (MlasComputeExpF32KernelAvx512F, MlasComputeSumExpF32KernelAvx512F; erf below), for an Exp, Erf,
 * Gelu, Softmax or LogSoftmax whose result a QUANTIZE_LINEAR reads (HFX_SUM_ORT, the host build's default for them: a
 * 16-bit QDQ group's op, which ORT computes as DQ -> f32 op -> Q; hfx_exp's other polynomial lands a
 * value on the other side of a 16-bit rounding tie now and then). Each step rounds as MLAS's does:
 * x clamped below at -103.972 (a NaN stays), m = round(x / ln2) by the 1.5 * 2^23 trick, x - m ln2 in
 * two FMAs, a degree-6 polynomial by FMAs (its last two coefficients both 1), then p 2^m with one
 * rounding (VSCALEFPS: denormals, inf). The sum: 16 lane sums (lane i % 16, in order), then lanes
 * l + 8 added to l, then pairs of pairs; Softmax multiplies each exp by 1 / sum, LogSoftmax subtracts log(sum)
 * from x - max (MlasComputeSoftmax; softmax.c).
 * A CPU without AVX512F (AVX2 and FMA3) runs MlasComputeSumExpF32KernelFma3 instead: its own exp (x clamped
 * at -88.376, 2^m one factor from m's bits: 0 from m = -127) and 8 lane sums reduced as VHADDPS twice does;
 * hfx_mlas_avx512f picks the kernel as MLAS's platform init does. (MlasComputeExpF32KernelFma3, ORT's Exp
 * there, gives hfx_exp_mlas's bits: 2^m in two normal factors, one rounding; checked on an AVX2 host.) */
#ifndef HEXFUSE_OPS_MLAS_MATH_H
#define HEXFUSE_OPS_MLAS_MATH_H

#include <stdint.h>
#include <string.h>

#include "vmath.h"

/* p 2^m for m a whole float >= -150 (or NaN, with p NaN), rounded once: 2^m in two normal factors,
 * the first product exact. m above 129 is 129: p is at least 0.7, the result inf either way. */
static inline float hfx_scalef_mlas(float p, float m) {
    float mc = m > 129.0f ? 129.0f : m;
    int32_t n = mc == mc ? (int32_t)mc : 0, n1 = n >= 0 ? n / 2 : -((1 - n) / 2), n2 = n - n1;
    return p * hfx_f32_of((uint32_t)(n1 + 127) << 23) * hfx_f32_of((uint32_t)(n2 + 127) << 23);
}

/* MLAS's exp polynomial: x reduced by m ln2 (in two parts), then p(x) ~ exp(x) by fma, MLAS's order */
static inline float hfx_exp_poly_mlas(float x, float m) {
    x = ref_fmaf(m, -6.93145752e-1f, x);
    x = ref_fmaf(m, -1.42860677e-6f, x);
    float p = 0x1.694000p-10f;
    p = ref_fmaf(p, x, 0x1.125edcp-7f);
    p = ref_fmaf(p, x, 0x1.555b5ap-5f);
    p = ref_fmaf(p, x, 0x1.555450p-3f);
    p = ref_fmaf(p, x, 0x1.fffff6p-2f);
    p = ref_fmaf(p, x, 1.0f);
    p = ref_fmaf(p, x, 1.0f);
    return p;
}

static inline float hfx_exp_mlas(float x) {
    x = x < -103.9720840454f ? -103.9720840454f : x; /* VMAXPS keeps a NaN x */
    float m = ref_fmaf(x, 1.44269504088896341f, HFX_EXP_ROUNDER) - HFX_EXP_ROUNDER;
    return hfx_scalef_mlas(hfx_exp_poly_mlas(x, m), m);
}

/* Whether ORT's MLAS runs its AVX512F exp-sum kernel here (the CPU and the OS's saved state have AVX512F,
 * which __builtin_cpu_supports checks), else its FMA3 one. Not x86-64 (Hexagon): AVX512F's, as before. */
static inline int hfx_mlas_avx512f(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f");
#else
    return 1;
#endif
}

/* exp(x) for x = a value minus its line's maximum, as MlasComputeSumExpF32KernelFma3: clamped below at
 * -88.376 (a NaN stays), the reduction and polynomial of hfx_exp_mlas, then times 2^m built from the
 * rounded sum's bits (m in [-127, 0]; 2^-127's field is 0: such exps are 0). */
static inline float hfx_sum_exp_term_fma3(float x) {
    x = -88.3762626647949f > x ? -88.3762626647949f : x;
    float biased = ref_fmaf(x, 1.44269504088896341f, HFX_EXP_ROUNDER), m = biased - HFX_EXP_ROUNDER;
    float p = hfx_exp_poly_mlas(x, m);
    uint32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    return p * hfx_f32_of((bits << 23) + (127u << 23));
}

/* The FMA3 kernel's sum: 8 lane sums (lane k % 8, in order; a short tail's other lanes add 0), reduced
 * ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)) */
static inline float hfx_sum_exp_mlas_fma3(const float *x, float *o, uint64_t d, uint64_t stride, float neg_max) {
    float lane[8] = {0};
    for (uint64_t k = 0; k < d; k++) {
        float e = hfx_sum_exp_term_fma3(x[k * stride] + neg_max);
        o[k * stride] = e;
        lane[k % 8] += e;
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* o[k * stride] = exp(x[k * stride] + neg_max) for k < d, and their sum in MLAS's AVX512F order */
static inline float hfx_sum_exp_mlas(const float *x, float *o, uint64_t d, uint64_t stride, float neg_max) {
    float lane[16] = {0};
    for (uint64_t k = 0; k < d; k++) {
        float e = hfx_exp_mlas(x[k * stride] + neg_max);
        o[k * stride] = e;
        lane[k % 16] += e;
    }
    float s[8];
    for (int l = 0; l < 8; l++) s[l] = lane[l + 8] + lane[l];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* erf as MLAS's MlasErfKernelFma3 computes it (ORT's Erf, and its Gelu: 0.5 x (erf(x / sqrt 2) + 1)), but
 * without its clamp of |x| at 3.725, which ORT 1.32 does not apply (checked against it: 1.0 from 3.78 up):
 * below 0.921875 an odd polynomial, from it 1 - exp(-q(|x|)) by its own exp (clamped at -88.38, 2^trunc(m)
 * as one normal factor); the sign copied back. */
static inline float hfx_erf_mlas(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    float a = hfx_f32_of(bits & 0x7fffffffu);
    float s = a * a, r;
    if (!(0.921875f <= a)) {
        r = -5.99104969e-4f;
        r = ref_fmaf(r, s, 4.99339588e-3f);
        r = ref_fmaf(r, s, -2.67667342e-2f);
        r = ref_fmaf(r, s, 1.12818025e-1f);
        r = ref_fmaf(r, s, -3.76124859e-1f);
        r = ref_fmaf(r, s, 1.28379151e-1f);
        r = ref_fmaf(r, a, a);
    } else {
        float q = 1.72948930e-5f;
        q = ref_fmaf(q, a, -3.83208680e-4f);
        q = ref_fmaf(q, a, 3.88393435e-3f);
        q = ref_fmaf(q, a, -2.42545605e-2f);
        q = ref_fmaf(q, a, 1.06777847e-1f);
        q = ref_fmaf(q, a, 6.34846687e-1f);
        q = ref_fmaf(q, a, 1.28717512e-1f);
        q = ref_fmaf(q, a, a);
        float e = -q > -88.3762626647949f ? -q : -88.3762626647949f;
        float m = ref_fmaf(e, 1.44269504088896341f, HFX_EXP_ROUNDER) - HFX_EXP_ROUNDER;
        float f = ref_fmaf(m, -6.93145752e-1f, e);
        f = ref_fmaf(m, -1.42860677e-6f, f);
        float y = 1.38319808e-3f;
        y = ref_fmaf(y, f, 8.37550033e-3f);
        y = ref_fmaf(y, f, 4.16689515e-2f);
        y = ref_fmaf(y, f, 1.66664466e-1f);
        y = ref_fmaf(y, f, 4.99999851e-1f);
        y = ref_fmaf(y, f, 1.0f);
        y = ref_fmaf(y, f, 1.0f);
        r = 1.0f - y * hfx_f32_of((uint32_t)((int32_t)m + 127) << 23);
    }
    uint32_t rb;
    memcpy(&rb, &r, sizeof rb);
    return hfx_f32_of(rb | (bits & 0x80000000u));
}

#endif
