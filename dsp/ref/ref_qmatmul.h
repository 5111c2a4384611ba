/*
 * ref_qmatmul.h - the reference of QMATMUL: the integer MatMul of a QDQ group
 * DQ(A) x DQ(B) [+ DQ(bias)] -> Q, as ONNX Runtime's CPU runs the group after its QDQ fusion
 * (QLinearMatMul / QGemm: MlasGemm to int32, then MlasRequantizeOutput). Header only, plain
 * C11 without libc: the host kernel, the host tests and the qemu-hexagon image use this
 * definition.
 *
 *   acc[m,n] = bias[n] + sum_k (A[m,k] - za) * (B[k,n] - zb[n])     int32, wrapping
 *   t        = f32(acc) * scale[n]                                    scale = f32(f32(sa * sb[n]) / sy)
 *   t        = min(max(t, qmin - zy), qmax - zy)                       in f32
 *   y        = round_half_to_even(t) + zy
 *
 * A float multiplier with round half to even, not a fixed-point multiplier and shift: this is
 * what ORT computes (one f32 multiply, cvtps2dq), so the results agree bit for bit when ORT's
 * own accumulation is exact (on AVX2 without VNNI its u8 x s8 kernel may saturate int16 pairs).
 * zb and scale have one element (per tensor) or N (per column of B).
 *
 * QCONV2D is the same with acc[n,m,oh,ow] = bias[m] + sum over the window of the group's channels of
 * (X - zx) * (W[m] - zw[m]): a tap in the padding reads zx (adds 0), as ORT's QLinearConv pads.
 */
#ifndef HEXFUSE_REF_QMATMUL_H
#define HEXFUSE_REF_QMATMUL_H

#include <stdint.h>

/* the requantisation of one accumulator; lo, hi: the output type's range */
static inline int32_t ref_qmatmul_requant(int32_t acc, float scale, int32_t zy, int32_t lo, int32_t hi) {
    float t = (float)acc * scale;
    float tlo = (float)(lo - zy), thi = (float)(hi - zy);
    t = t > tlo ? t : tlo; /* a NaN (scale NaN) gives the lower bound, as maxps does */
    t = t < thi ? t : thi;
    /* |t| <= 255: adding and subtracting 1.5 * 2^23 rounds to the nearest integer, ties to even */
    return (int32_t)((t + 12582912.0f) - 12582912.0f) + zy;
}

/* One output element; A and B are read through their element getters so that u8 and i8 share
 * one definition. a_row: A[m, 0..K), b: B[K, N] row-major (ldb = N). */
static inline int32_t ref_qmatmul_acc(const int32_t *a_row, const int32_t *b, uint32_t K, uint32_t N, uint32_t n,
                                      int32_t za, int32_t zb, int32_t bias) {
    uint32_t acc = (uint32_t)bias;
    for (uint32_t k = 0; k < K; k++) acc += (uint32_t)(a_row[k] - za) * (uint32_t)(b[(uint64_t)k * N + n] - zb);
    return (int32_t)acc;
}

/* One QCONV2D accumulator. x: X[n] as [C][H][W]; w: W[m] as [C/g][kh][kw]; c0 the group's first
 * channel; p: pads top, left, strides h, w, dilations h, w. */
static inline int32_t ref_qconv_acc(const int32_t *x, uint32_t H, uint32_t W, const int32_t *w, uint32_t cg,
                                    uint32_t kh, uint32_t kw, uint32_t c0, uint32_t oh, uint32_t ow, const int32_t p[6],
                                    int32_t zx, int32_t zw, int32_t bias) {
    uint32_t acc = (uint32_t)bias;
    for (uint32_t c = 0; c < cg; c++)
        for (uint32_t i = 0; i < kh; i++)
            for (uint32_t j = 0; j < kw; j++) {
                int64_t ih = (int64_t)oh * p[2] + (int64_t)i * p[4] - p[0];
                int64_t iw = (int64_t)ow * p[3] + (int64_t)j * p[5] - p[1];
                int32_t xv = ih < 0 || ih >= H || iw < 0 || iw >= W
                                 ? zx
                                 : x[((uint64_t)(c0 + c) * H + (uint64_t)ih) * W + (uint64_t)iw];
                acc += (uint32_t)(xv - zx) * (uint32_t)(w[((uint64_t)c * kh + i) * kw + j] - zw);
            }
    return (int32_t)acc;
}

#endif
