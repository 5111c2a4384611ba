/* eigen_math.h - sin and cos of f32 as ONNX Runtime 1.32's CPU Sin and Cos compute them on x86-64: Eigen's
 * packet sin/cos (SSE, no FMA: every product and sum rounds) over each 4-element packet, and the C
 * library's sinf/cosf over the last numel % 4 elements (Eigen's scalar tail). The packet path, per element:
 * q = nearest integer of |x| 2/pi (by the 1.5 * 2^23 rounding trick), r = |x| - q pi/2 in four rounded steps
 * (pi/2 split in four parts), or, for |x| at or above a threshold (sin 25966, cos 18838), r and q from x times
 * 192 bits of 2/pi in fixed point (Payne-Hanek); then cos or sin polynomial of r by q's low bit, the sign by
 * q's second bit (sin: xor x's sign). Found against ORT: every element equal on 2e4 values in [-10, 10],
 * 3e3 in [-3e4, 3e4], 3.5e3 of every exponent up to 3.4e38, +-0, +-inf, NaN. */
#ifndef HEXFUSE_OPS_EIGEN_MATH_H
#define HEXFUSE_OPS_EIGEN_MATH_H

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
    uint32_t sign = (sine ? hfx_u32_of(x) ^ ((uint32_t)q << 30) : (uint32_t)(q + 1) << 30) & 0x80000000u;
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

#endif
