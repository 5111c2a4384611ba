/* vsum.h - vectorizable reductions over blocks of 1024 elements, blocks added
 * in double: plain sums in double lanes, sums of squared deviations in float
 * lanes (precise for long rows, SIMD-friendly). 16 lanes of each: with one
 * register of lanes the adds wait on each other (a LayerNorm row of 1024 ran
 * 1.6x longer); the lanes are then added pairwise. */
#ifndef HEXFUSE_OPS_VSUM_H
#define HEXFUSE_OPS_VSUM_H

#include <stdint.h>
#include <string.h>

/* sum of ((x[i] - shift) - shift2)^2 if squares, else of x[i] */
static inline double hfx_sum2(const float *x, uint64_t n, float shift, float shift2, int squares) {
    double total = 0.0;
    for (uint64_t b = 0; b < n; b += 1024) {
        uint64_t e = b + 1024 < n ? b + 1024 : n;
        float acc[16] = {0};
        uint64_t i = b;
        if (squares) {
            for (; i + 16 <= e; i += 16)
                for (int j = 0; j < 16; j++) {
                    float t = (x[i + (uint64_t)j] - shift) - shift2;
                    acc[j] += t * t;
                }
            for (; i < e; i++) {
                float t = (x[i] - shift) - shift2;
                acc[0] += t * t;
            }
        } else {
            /* plain sums accumulate in double lanes: a mean must keep the bits
             * that the deviations from it are made of */
            double dacc[16] = {0};
            for (; i + 16 <= e; i += 16)
                for (int j = 0; j < 16; j++) dacc[j] += (double)x[i + (uint64_t)j];
            for (; i < e; i++) dacc[0] += (double)x[i];
            for (int w = 8; w >= 1; w /= 2)
                for (int j = 0; j < w; j++) dacc[j] += dacc[j + w];
            total += dacc[0];
            continue;
        }
        for (int w = 8; w >= 1; w /= 2)
            for (int j = 0; j < w; j++) acc[j] += acc[j + w];
        total += (double)acc[0];
    }
    return total;
}

static inline double hfx_sum(const float *x, uint64_t n, float shift, int squares) {
    return hfx_sum2(x, n, shift, 0.0f, squares);
}

typedef float hfx_max_vec __attribute__((vector_size(32)));
typedef int32_t hfx_max_mask __attribute__((vector_size(32)));

/* m = v where v > m (a NaN v never taken). A macro: no vector type in a function signature (psABI). */
#define HFX_MAX_STEP(m, v)                                                           \
    do {                                                                             \
        hfx_max_mask gt_ = (v) > (m);                                                \
        (m) = (hfx_max_vec)((gt_ & (hfx_max_mask)(v)) | (~gt_ & (hfx_max_mask)(m))); \
    } while (0)

/* The largest of x[0..n) (n >= 1) by compare-and-select, so a NaN is never chosen over x[0]. Written with
 * vector types: GCC leaves the same loop over a float[8] scalar (two instructions per element). Four
 * accumulators: with one, each select waited on the last (a 4096-float row's max took as long as its exps). */
static inline float hfx_max(const float *x, uint64_t n) {
    hfx_max_vec m[4];
    m[0] = m[1] = m[2] = m[3] = (hfx_max_vec){0} + x[0];
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            hfx_max_vec v;
            memcpy(&v, x + i + 8 * k, sizeof v); /* unaligned load */
            HFX_MAX_STEP(m[k], v);
        }
    for (; i + 8 <= n; i += 8) {
        hfx_max_vec v;
        memcpy(&v, x + i, sizeof v);
        HFX_MAX_STEP(m[0], v);
    }
    HFX_MAX_STEP(m[0], m[1]);
    HFX_MAX_STEP(m[2], m[3]);
    HFX_MAX_STEP(m[0], m[2]);
    float r = m[0][0];
    for (int j = 1; j < 8; j++) r = m[0][j] > r ? m[0][j] : r;
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

#endif
