/* eigen_math.h - sin and cos of f32 as ONNX Runtime 1.32's CPU Sin and Cos compute them on x86-64 (and Eigen's
 * exp, log and log1p, Softplus's: below): Eigen's
 * packet sin/cos (SSE, no FMA: every product and sum rounds) over each 4-element packet, and the C
 * library's sinf/cosf over the last numel % 4 elements (Eigen's scalar tail). The packet path, per element:
 * q = nearest integer of |x| 2/pi (by the 1.5 * 2^23 rounding trick), r = |x| - q pi/2 in four rounded steps
 * (pi/2 split in four parts), or, for |x| at or above a threshold (sin 25966, cos 18838), r and q from x times
 * 192 bits of 2/pi in fixed point (Payne-Hanek); then cos or sin polynomial of r by q's low bit, the sign by
 * q's second bit (sin: xor x's sign). Found against ORT: every element equal on 2e4 values in [-10, 10],
 * 3e3 in [-3e4, 3e4], 3.5e3 of every exponent up to 3.4e38, +-0, +-inf, NaN. */
#ifndef HEXFUSE_OPS_EIGEN_MATH_H
#define HEXFUSE_OPS_EIGEN_MATH_H

#include <stdbool.h>
#include <stdint.h>

#include "vmath.h" /* hfx_f32_of, hfx_u32_of */

/* |x| (finite, >= the threshold) reduced by the nearest multiple q of pi/2: returns |x| - q pi/2, q in *quadrant.
 * |x| 2/pi in fixed point with 2 integer and 62 fraction bits, from three 32-bit windows of 2/pi's bits chosen by
 * |x|'s exponent (each window starts 8 bits after the previous word's). */
static inline float hfx_reduce_huge(float ax, int32_t *quadrant) {
    static const uint32_t two_over_pi[26] = {
        0x00000028u, 0x000028beu, 0x0028be60u, 0x28be60dbu, 0xbe60db93u, 0x60db9391u, 0xdb939105u,
        0x9391054au, 0x91054a7fu, 0x054a7f09u, 0x4a7f09d5u, 0x7f09d5f4u, 0x09d5f47du, 0xd5f47d4du,
        0xf47d4d37u, 0x7d4d3770u, 0x4d377036u, 0x377036d8u, 0x7036d8a5u, 0x36d8a566u, 0xd8a5664fu,
        0xa5664f10u, 0x664f10e4u, 0x4f10e410u, 0x10e41000u, 0xe4100000u};
    uint32_t bits = hfx_u32_of(ax);
    uint32_t e = (bits >> 23) - 118u; /* the exponent + 8: 2/pi's bits are taken 8 at a time */
    uint32_t m = ((bits & 0x007fffffu) | 0x00800000u) << (e & 7u);
    uint32_t w = e >> 3;
    uint64_t p = (uint64_t)m * two_over_pi[w + 7];
    p = (uint64_t)m * two_over_pi[w + 3] + (p >> 32);
    p += (uint64_t)(uint32_t)(m * two_over_pi[w - 1]) << 32;
    uint64_t q = (p + (UINT64_C(1) << 61)) >> 62; /* to nearest: + 0.5 */
    *quadrant = (int32_t)q;
    p -= q << 62;
    return (float)((double)(int64_t)p * 3.4061215800865545e-19); /* (p - q) pi/2 in 2^-62 units */
}

/* sin (sine != 0) or cos of x, Eigen's packet path for one element */
static inline float hfx_sincos_eigen(float x, int sine) {
    float ax = hfx_f32_of(hfx_u32_of(x) & 0x7fffffffu);
    float shifted = ax * 0.636619746685028076171875f + 12582912.0f; /* |x| 2/pi + 1.5 * 2^23 */
    int32_t q = (int32_t)hfx_u32_of(shifted);                       /* the nearest integer in the low bits */
    float n = shifted - 12582912.0f;
    float r = ax + n * -1.5703125f;
    r = r + n * -0.000483989715576171875f;
    r = r + n * 1.62865035235881805419921875e-07f;
    r = r + n * 5.5644315544167710640977020375430583953857421875e-11f;
    float huge = sine ? 25966.0f : 18838.0f;
    if (ax >= huge && ax - ax == 0.0f) r = hfx_reduce_huge(ax, &q); /* finite and large */
    uint32_t sign = (sine ? hfx_u32_of(x) ^ ((uint32_t)q << 30) : ((uint32_t)q + 1u) << 30) & 0x80000000u;
    float r2 = r * r;
    float c = 2.4372266125283204019069671630859375e-05f;
    c = c * r2 + -0.00138865201734006404876708984375f;
    c = c * r2 + 0.041666619479656219482421875f;
    c = c * r2 + -0.5f;
    c = c * r2 + 1.0f;
    float s = -0.0001959234114083702898469196984621021329076029360294342041015625f;
    s = s * r2 + 0.0083326873655616851693794799871284340042620897293090820312500000f;
    s = s * r2 + -0.1666666203982298255503735617821803316473960876464843750000000000f;
    s = s * r2;
    s = s * r + r;
    int even = (q & 1) == 0;
    float y = sine == even ? s : c; /* sin: s where q is even; cos: c where q is even */
    return hfx_f32_of(hfx_u32_of(y) ^ sign);
}

/* exp of f32 as Eigen's packet pexp_float (ORT 1.32's Eigen, SSE, no FMA: each product and sum rounds): below -104
 * 0; x clamped to 88.723; m = floor(x log2(e) + 1/2), r = x - m ln2 in two steps, exp(r) by a degree-6 polynomial
 * in its even and odd halves, times 2^m as pldexp does (2^b three times, b = floor(m / 4), then 2^(m - 3b): only the
 * last product may round), then the larger of that and x. */
static inline float hfx_exp_eigen(float x0) {
    if (x0 < -104.0f) return 0.0f;
    if (x0 != x0) return x0; /* a NaN (the floor's cast below would be undefined) */
    float x = 88.723f < x0 ? 88.723f : x0;
    float v = x * 1.44269504088896341f + 0.5f;
    float m = (float)(int32_t)v; /* floor: |v| < 2^31 here */
    m = m > v ? m - 1.0f : m;
    float r = m * -0.693359375f + x;
    r = m * 2.12194440e-4f + r;
    float r2 = r * r;
    float even = r2 * 1.37449637986719608306884765625e-3f + 4.166965186595916748046875e-2f;
    float odd = r2 * 8.36894474923610687255859375e-3f + 0.16666518151760101318359375f;
    even = r2 * even + 0.49999988079071044921875f;
    float y = r * odd + even;
    y = r2 * y + (r + 1.0f);
    int32_t e = (int32_t)m, b = e >> 2;
    float c = hfx_f32_of((uint32_t)(b + 127) << 23);
    float out = y * c * c * c * hfx_f32_of((uint32_t)(e - 3 * b + 127) << 23);
    return x0 > out ? x0 : out;
}

/* log of f32 as Eigen's packet plog_float (the same build): x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by a
 * (3,3) rational function of m - 1, plus e ln2; 0 gives -inf, +inf +inf, below 0 or NaN all bits set (a NaN). */
static inline float hfx_log_eigen(float x0) {
    uint32_t bits = hfx_u32_of(x0);
    if (x0 == 0.0f) return -__builtin_inff();
    if (!(x0 >= 0.0f)) return hfx_f32_of(0xffffffffu);
    if (x0 == __builtin_inff()) return x0;
    float e = (float)((int32_t)((bits >> 23) & 0xffu) - 126);
    float x = hfx_f32_of((bits & 0x807fffffu) | 0x3f000000u);
    bool low = x < 0.707106781186547524f;
    float tmp = low ? x : 0.0f;
    x = x - 1.0f;
    e = e - (low ? 1.0f : 0.0f);
    x = x + tmp;
    float p = 0.18256296349849254f;
    p = p * x + 1.0000000190281063f;
    p = p * x + 1.0000000190281136f;
    p = x * p;
    float q = 0.049616247954120038f;
    q = q * x + 0.59923249590823520f;
    q = q * x + 1.4999999999999927f;
    q = q * x + 1.0f;
    return e * 0.693147180559945309f + p / q;
}

/* log1p of f32 as Eigen's generic_plog1p: u where 1 + u rounds to 1 (or to its log: inf), else u log(1 + u) /
 * ((1 + u) - 1) */
static inline float hfx_log1p_eigen(float u) {
    float w = 1.0f + u, l = hfx_log_eigen(w);
    return w == 1.0f || w == l ? u : u * (l / (w - 1.0f));
}

#endif
