/* vmath.h - vectorizable float math for the host vector kernels (plain C
 * the compiler can turn into SIMD; no libm calls in the loops).
 * hfx_exp: Cephes-style range reduction + degree-6 polynomial (about 2 ulp),
 * 2^n applied in two halves so that overflow gives inf and underflow gives
 * denormals / 0; NaN in, NaN out (no float-to-int conversion of NaN). */
#ifndef HEXFUSE_OPS_VMATH_H
#define HEXFUSE_OPS_VMATH_H

#include <stdint.h>
#include <string.h>

static inline float hfx_pow2i(int32_t n) { /* 2^n for n in [-126, 127] */
    int32_t e = (n + 127) * (1 << 23);
    float f;
    memcpy(&f, &e, sizeof f);
    return f;
}

static inline float hfx_exp(float x) {
    float xc = x < 89.0f ? x : 89.0f; /* NaN -> 89, replaced by NaN at the end */
    xc = xc > -104.0f ? xc : -104.0f;
    /* n = round(x / ln2) with the 1.5 * 2^23 trick */
    float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t n = (int32_t)fn; /* in [-150, 129] */
    int32_t n1 = n / 2, n2 = n - n1;
    float y = p * hfx_pow2i(n1) * hfx_pow2i(n2);
    return x == x ? y : x;
}

/* tanh: odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above (Cephes tanhf) */
static inline float hfx_tanh(float x) {
    float ax = x < 0.0f ? -x : x;
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float e = hfx_exp(2.0f * (ax > 9.0f ? 9.0f : ax));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0.0f ? -big : big;
    return ax < 0.625f ? small : big;
}

static inline float hfx_sigmoid(float x) { return 1.0f / (1.0f + hfx_exp(-x)); }

#endif
