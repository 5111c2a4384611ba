/* test_util.h - minimal test harness: CHECK macros, RNG, float compare. */
#ifndef HEXFUSE_TEST_UTIL_H
#define HEXFUSE_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures, g_checks;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        g_checks++;                                                                 \
        if (!(cond)) {                                                              \
            g_failures++;                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        g_checks++;                                                                 \
        if (!(cond)) {                                                              \
            g_failures++;                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

#define RUN_TEST(fn)                                         \
    do {                                                     \
        int before_ = g_failures;                            \
        fn();                                                \
        printf("%-48s %s\n", #fn, g_failures == before_ ? "ok" : "FAILED"); \
        fflush(stdout);                                      \
    } while (0)

#define TEST_MAIN_END()                                                          \
    do {                                                                         \
        printf("%d checks, %d failures\n", g_checks, g_failures);                \
        return g_failures ? 1 : 0;                                               \
    } while (0)

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static inline uint32_t rng_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}
static inline float rng_f(float lo, float hi) { return lo + (hi - lo) * (float)(rng_u32() & 0xffffff) / 16777216.0f; }
static inline uint32_t rng_range(uint32_t lo, uint32_t hi) { return lo + rng_u32() % (hi - lo + 1); }
static inline float *rand_buf(size_t n, float lo, float hi) {
    float *p = (float *)malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) p[i] = rng_f(lo, hi);
    return p;
}

/* max relative error with an absolute floor: |a-b| / max(|b|, floor) */
static inline double max_rel_err(const float *a, const float *b, size_t n, double floor_) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double s = fabs((double)b[i]);
        if (s < floor_) s = floor_;
        if (!(d / s <= worst)) worst = d / s; /* NaN propagates as failure */
        if (isnan(a[i]) != isnan(b[i])) worst = INFINITY;
    }
    return worst;
}

#endif
