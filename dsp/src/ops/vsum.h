/* vsum.h - vectorizable reductions over blocks of 1024 elements, blocks added
 * in double: plain sums in double lanes, sums of squared deviations in 8 float
 * lanes (precise for long rows, SIMD-friendly). */
#ifndef HEXFUSE_OPS_VSUM_H
#define HEXFUSE_OPS_VSUM_H

#include <stdint.h>
#include <string.h>

/* sum of ((x[i] - shift) - shift2)^2 if squares, else of x[i] */
static inline double hfx_sum2(const float *x, uint64_t n, float shift, float shift2, int squares) {
    double total = 0.0;
    for (uint64_t b = 0; b < n; b += 1024) {
        uint64_t e = b + 1024 < n ? b + 1024 : n;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t i = b;
        if (squares) {
            for (; i + 8 <= e; i += 8)
                for (int j = 0; j < 8; j++) {
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
            double dacc[4] = {0, 0, 0, 0};
            for (; i + 4 <= e; i += 4)
                for (int j = 0; j < 4; j++) dacc[j] += (double)x[i + (uint64_t)j];
            for (; i < e; i++) dacc[0] += (double)x[i];
            total += (dacc[0] + dacc[2]) + (dacc[1] + dacc[3]);
            continue;
        }
        total += (double)(((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
    }
    return total;
}

static inline double hfx_sum(const float *x, uint64_t n, float shift, int squares) {
    return hfx_sum2(x, n, shift, 0.0f, squares);
}

typedef float hfx_max_vec __attribute__((vector_size(32)));
typedef int32_t hfx_max_mask __attribute__((vector_size(32)));

/* The largest of x[0..n) (n >= 1) by compare-and-select, so a NaN is never chosen over x[0]. Written with
 * vector types: GCC leaves the same loop over a float[8] scalar (two instructions per element). */
static inline float hfx_max(const float *x, uint64_t n) {
    hfx_max_vec m = (hfx_max_vec){0} + x[0];
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        hfx_max_vec v;
        memcpy(&v, x + i, sizeof v); /* unaligned load */
        hfx_max_mask gt = v > m;
        m = (hfx_max_vec)((gt & (hfx_max_mask)v) | (~gt & (hfx_max_mask)m));
    }
    float r = m[0];
    for (int j = 1; j < 8; j++) r = m[j] > r ? m[j] : r;
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

#endif
