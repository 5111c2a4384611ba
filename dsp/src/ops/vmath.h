/* vmath.h - vectorizable float math for the host vector kernels (plain C
 * the compiler can turn into SIMD; no libm calls in the loops of the x86-64-v3
 * copy; products summed by ref_fmaf, one rounding on every build).
 * hfx_exp: Cephes-style range reduction + degree-6 polynomial (about 2 ulp),
 * 2^n applied in two halves so that overflow gives inf and underflow gives
 * denormals / 0; NaN in, NaN out (no float-to-int conversion of NaN).
 * hfx_exp_nonpositive: the same below 0 in fewer steps (one factor 2^n, no denormals). */
#ifndef HEXFUSE_OPS_VMATH_H
#define HEXFUSE_OPS_VMATH_H

#include <stdint.h>
#include <string.h>

#include "../../ref/ref_fma.h" /* ref_fmaf: an instruction in the x86-64-v3 copy of a vector kernel */

static inline float hfx_f32_of(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t hfx_u32_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* exp(r) for r = x - n ln2 in [-ln2/2, ln2/2] (fn = n as a float, |x - n ln2| reduced in two parts) */
static inline float hfx_exp_reduced(float x, float fn) {
    float r = ref_fmaf(fn, -0.693359375f, x);
    r = ref_fmaf(fn, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = ref_fmaf(p, r, 1.3981999507e-3f);
    p = ref_fmaf(p, r, 8.3334519073e-3f);
    p = ref_fmaf(p, r, 4.1665795894e-2f);
    p = ref_fmaf(p, r, 1.6666665459e-1f);
    p = ref_fmaf(p, r, 5.0000001201e-1f);
    return ref_fmaf(p, r * r, r) + 1.0f;
}

/* round(x / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold it (|x| < 2^22 ln2) */
#define HFX_EXP_ROUNDER 12582912.0f
static inline float hfx_exp_rounded(float x) { return ref_fmaf(x, 1.44269504088896341f, HFX_EXP_ROUNDER); }

static inline float hfx_exp(float x) {
    /* exp rounds to 0 from -104 down: those lanes compute exp(0) and take 0 at the end, so that a masked
     * -inf or -FLT_MAX (attention masks) costs no arithmetic on denormals, which x86 runs slowly */
    int low = x < -104.0f;
    float xc = low ? 0.0f : x;
    xc = xc > 89.0f ? 89.0f : xc; /* a NaN stays, and gives NaN through the arithmetic (no select for it) */
    float rounded = hfx_exp_rounded(xc);
    float p = hfx_exp_reduced(xc, rounded - HFX_EXP_ROUNDER);
    /* 2^n, n in [-150, 129], in two factors 2^n1 2^n2, n1 = floor(n / 2): exponent fields made from the
     * rounded sum's bits (no float-to-int conversion, which a NaN would make undefined) */
    uint32_t bits;
    memcpy(&bits, &rounded, sizeof bits);
    uint32_t n_field = bits << 23;                                       /* n << 23 */
    uint32_t n1_field = (uint32_t)((int32_t)n_field >> 1) & 0xff800000u; /* floor(n / 2) << 23 */
    float y = p * hfx_f32_of(n1_field + (127u << 23)) * hfx_f32_of(n_field - n1_field + (127u << 23));
    return low ? 0.0f : y;
}

/* exp for x <= 0 (Softmax's x - max), hfx_exp's bits from -87.3365 (about 2^-126, the smallest normal float)
 * up, by one factor 2^n, its exponent made from the rounded sum's bits; below it 0 (no denormals).
 * NaN in, NaN out (carried by the arithmetic: no select for it). */
#define HFX_EXP_NORMAL_MIN (-87.33654475f)
static inline float hfx_exp_nonpositive(float x) {
    float xc = x < HFX_EXP_NORMAL_MIN ? HFX_EXP_NORMAL_MIN : x; /* a NaN stays */
    float rounded = hfx_exp_rounded(xc);
    float p = hfx_exp_reduced(xc, rounded - HFX_EXP_ROUNDER);
    uint32_t bits;
    memcpy(&bits, &rounded, sizeof bits);
    /* n's low bits into the exponent field: 2^n, n in [-126, 0] */
    float scale = hfx_f32_of((bits << 23) + (127u << 23));
    return x < HFX_EXP_NORMAL_MIN ? 0.0f : p * scale;
}

/* tanh: ONNX Runtime's own, MLAS's MlasComputeTanhF32KernelFma3 (Eigen's rational polynomial and
 * constants, MlasTanhConstants) step for step: x clamped to [-9, 9], p and q by fma in its order, x * p,
 * one division. ORT's Tanh on x86 with FMA3 is this to the bit (checked on every u16 code of several
 * scales); a u16 QDQ group's Q(tanh(DQ(x))) then equals ORT's. About 7 ulp from the true tanh at most.
 * NaN in, NaN out (the clamps select). */
static inline float hfx_tanh(float x) {
    float c = x > 9.0f ? 9.0f : x;
    c = c < -9.0f ? -9.0f : c;
    float s = c * c;
    float p = ref_fmaf(s, -2.76076847742355e-16f, 2.00018790482477e-13f);
    p = ref_fmaf(s, p, -8.60467152213735e-11f);
    p = ref_fmaf(s, p, 5.12229709037114e-08f);
    p = ref_fmaf(s, p, 1.48572235717979e-05f);
    p = ref_fmaf(s, p, 6.37261928875436e-04f);
    p = ref_fmaf(s, p, 4.89352455891786e-03f);
    float q = ref_fmaf(s, 1.19825839466702e-06f, 1.18534705686654e-04f);
    q = ref_fmaf(s, q, 2.26843463243900e-03f);
    q = ref_fmaf(s, q, 4.89352518554385e-03f);
    return c * p / q;
}

/* erf: x P(x^2) below |x| = 0.921875, else 1 - exp(Q(|x|)) with Q(a) ~ log(erfc(a)) on a clamped to 4
 * (erf rounds to 1 from 3.99), its sign restored. Coefficients fitted here by weighted least squares
 * (erf(x) / x: 1.6e-8 relative; log(erfc): 1.2e-8 absolute, in double); in float, checked against every
 * float in [0, 10] (Horner by fma): at most 2 ulp, 0.63 on average; erf(±inf) = ±1, NaN in, NaN out. */
static inline float hfx_erf(float x) {
    float a = x < 0.0f ? -x : x;
    float s = x * x;
    float p = -5.991704529e-04f;
    p = ref_fmaf(p, s, 4.993353039e-03f);
    p = ref_fmaf(p, s, -2.676673792e-02f);
    p = ref_fmaf(p, s, 1.128181964e-01f);
    p = ref_fmaf(p, s, -3.761249483e-01f);
    p = ref_fmaf(p, s, 1.128379107e+00f);
    float c = a < 4.0f ? a : 4.0f;
    float q = 1.602716566e-06f;
    q = ref_fmaf(q, c, -4.535896005e-05f);
    q = ref_fmaf(q, c, 5.907511804e-04f);
    q = ref_fmaf(q, c, -4.730445333e-03f);
    q = ref_fmaf(q, c, 2.633598819e-02f);
    q = ref_fmaf(q, c, -1.099259406e-01f);
    q = ref_fmaf(q, c, -6.319945455e-01f);
    q = ref_fmaf(q, c, -1.130131960e+00f);
    q = ref_fmaf(q, c, 2.943751460e-04f);
    float big = 1.0f - hfx_exp(q);
    big = x < 0.0f ? -big : big;
    float r = a < 0.921875f ? x * p : big;
    return x == x ? r : x;
}

/* log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2 / 2 + f^3 P(f), f = m - 1 (Cephes logf's
 * polynomial, Horner by fma), e ln 2 added in two parts (0.693359375 exact, then -2.12194440e-4); denormals
 * scaled by 2^23 first. x < 0 and NaN give NaN, +-0 gives -inf, +inf gives +inf. */
static inline float hfx_log(float x) {
    int tiny = x < 1.17549435e-38f; /* below the smallest normal float (0 and negatives: replaced below) */
    float xs = tiny ? x * 8388608.0f : x;
    int32_t bits;
    memcpy(&bits, &xs, sizeof bits);
    int32_t e = ((bits >> 23) & 0xff) - 126 - (tiny ? 23 : 0);
    bits = (bits & 0x007fffff) | 0x3f000000; /* the mantissa as m in [0.5, 1) */
    float m;
    memcpy(&m, &bits, sizeof m);
    int low = m < 0.70710678118654752f;
    e = low ? e - 1 : e;
    float f = low ? m + m - 1.0f : m - 1.0f;
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = ref_fmaf(p, f, -1.1514610310e-1f);
    p = ref_fmaf(p, f, 1.1676998740e-1f);
    p = ref_fmaf(p, f, -1.2420140846e-1f);
    p = ref_fmaf(p, f, 1.4249322787e-1f);
    p = ref_fmaf(p, f, -1.6668057665e-1f);
    p = ref_fmaf(p, f, 2.0000714765e-1f);
    p = ref_fmaf(p, f, -2.4999993993e-1f);
    p = ref_fmaf(p, f, 3.3333331174e-1f);
    float fe = (float)e;
    float y = ref_fmaf(fe, -2.12194440e-4f, p * f * z);
    y = ref_fmaf(-0.5f, z, y);
    float r = ref_fmaf(fe, 0.693359375f, f + y);
    r = x > 0.0f ? r : x == 0.0f ? -__builtin_inff() : __builtin_nanf("");
    return x == __builtin_inff() ? x : r;
}

/* sigmoid: ONNX Runtime's own, MLAS's MlasComputeLogisticF32KernelFma3 (Eigen's rational polynomial,
 * MlasLogisticConstants) step for step: x clamped to [-18, 18], p and q by fma in its order,
 * x * p / q + 0.5, then max(0, .) (that kernel has no upper clamp; the sum never exceeds 1). ORT's
 * Sigmoid on x86 with FMA3 is this to the bit, so a u16 QDQ group's Q(sigmoid(DQ(x))) equals ORT's.
 * Within 6e-8 absolute of the true sigmoid (0 from x = -18 down). NaN in, NaN out. */
static inline float hfx_sigmoid(float x) {
    float c = x > 18.0f ? 18.0f : x;
    c = c < -18.0f ? -18.0f : c;
    float s = c * c;
    float p = ref_fmaf(s, 4.37031012579801e-11f, 1.15627324459942e-07f);
    p = ref_fmaf(s, p, 6.08574864600143e-05f);
    p = ref_fmaf(s, p, 8.51377133304701e-03f);
    p = ref_fmaf(s, p, 2.48287947061529e-01f);
    float q = ref_fmaf(s, 6.10247389755681e-13f, 5.76102136993427e-09f);
    q = ref_fmaf(s, q, 6.29106785017040e-06f);
    q = ref_fmaf(s, q, 1.70198817374094e-03f);
    q = ref_fmaf(s, q, 1.16817656904453e-01f);
    q = ref_fmaf(s, q, 9.93151921023180e-01f);
    float r = c * p / q + 0.5f;
    return r < 0.0f ? 0.0f : r;
}

#endif
