/*
 * ref_float.c - float references of the v68+ HVX float kernels, and
 * portable binary16 <-> binary32 conversion.
 */
#include <string.h>

#include "ref_kernels.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf / nan */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return f32_from_bits(sign);
        /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        man &= 0x3ffu;
        return f32_from_bits(sign | (uint32_t)(127 - 15 - e) << 23 | (man << 13));
    }
    return f32_from_bits(sign | (exp + 127 - 15) << 23 | (man << 13));
}

uint16_t ref_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) /* inf / nan (keep a quiet nan) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (e <= 0) {
        /* subnormal or zero in binary16 */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = (uint32_t)e << 10 | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++; /* may carry into the exponent: still correct (up to inf) */
    return (uint16_t)(sign | half);
}

void ref_add_f32(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void ref_mul_f32(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

void ref_matmul_f16(const uint16_t *A, int lda, const uint16_t *B, int ldb, float *C, int ldc,
                    int M, int N, int K)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += ref_f16_to_f32(A[(size_t)m * lda + k]) * ref_f16_to_f32(B[(size_t)k * ldb + n]);
            C[(size_t)m * ldc + n] = acc;
        }
}
