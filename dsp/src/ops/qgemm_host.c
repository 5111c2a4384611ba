/* qgemm_host.c - see qgemm_host.h. The AVX2 and AVX-512 VNNI kernels are compiled with target attributes
 * and chosen per call from the CPU's features, so a baseline x86-64 build runs anywhere; every kernel
 * computes the same wrapping int32 sums, hence the same bits. */
#include "qgemm_host.h"

#include <string.h>

#include "../../ref/ref_qmatmul.h"
#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QGEMM_HAVE_AVX2 1
#if defined(__clang__) ? __clang_major__ >= 8 : __GNUC__ >= 9 /* their first with AVX-512 VNNI intrinsics */
#define QGEMM_HAVE_VNNI 1
#endif
#endif

int hfx_qgemm_max_isa = HFX_QGEMM_VNNI;

#define NR HFX_QGEMM_NR
#define MR HFX_QGEMM_MR

/* one row at a time: NR uint32 sums (wrapping) per panel */
static void rows_portable(const int16_t *a, size_t lda, int rows, const int16_t *b, size_t kp, size_t n, int32_t *acc,
                          size_t ldc) {
    size_t np = hfx_qgemm_np(n);
    for (size_t j = 0; j < np; j += NR) {
        const int16_t *panel = b + j * kp;
        for (int i = 0; i < rows; i++) {
            const int16_t *ar = a + (size_t)i * lda;
            uint32_t t[NR] = {0};
            for (size_t k = 0; k < kp; k += 2) {
                int32_t a0 = ar[k], a1 = ar[k + 1];
                const int16_t *bk = panel + k * NR;
                for (int c = 0; c < NR; c++) t[c] += (uint32_t)(a0 * bk[2 * c] + a1 * bk[2 * c + 1]);
            }
            for (int c = 0; c < NR; c++) acc[(size_t)i * ldc + j + (size_t)c] = (int32_t)t[c];
        }
    }
}

#ifdef QGEMM_HAVE_AVX2
__attribute__((target("avx2"))) static inline __m256i pair_of(const int16_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v); /* a[k], a[k + 1] as one 32-bit lane */
    return _mm256_set1_epi32(v);
}

/* MR rows x one panel per step: 8 accumulators, 2 loads of b and MR broadcasts of a per pair of k. A
 * missing row reads row 0 and is not stored. ACC(c, a, b) adds the pairwise products of a and b to c:
 * vpmaddwd + vpaddd on AVX2, one vpdpwssd (the same wrapping sum) with AVX-512 VNNI. */
#define QGEMM_ROWS_KERNEL(name, isa, ACC)                                                                              \
    __attribute__((target(isa))) static void name(const int16_t *a, size_t lda, int rows, const int16_t *b, size_t kp, \
                                                  size_t n, int32_t *acc, size_t ldc) {                                \
        const int16_t *a0 = a, *a1 = a + (rows > 1 ? lda : 0), *a2 = a + (rows > 2 ? 2 * lda : 0);                     \
        const int16_t *a3 = a + (rows > 3 ? 3 * lda : 0);                                                              \
        size_t np = hfx_qgemm_np(n);                                                                                   \
        for (size_t j = 0; j < np; j += NR) {                                                                          \
            const int16_t *panel = b + j * kp;                                                                         \
            __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00;    \
            __m256i c31 = c00;                                                                                         \
            for (size_t k = 0; k < kp; k += 2) {                                                                       \
                __m256i b0 = _mm256_loadu_si256((const __m256i *)(const void *)(panel + k * NR));                      \
                __m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)(panel + k * NR + 16));                 \
                __m256i v = pair_of(a0 + k);                                                                           \
                c00 = ACC(c00, v, b0), c01 = ACC(c01, v, b1);                                                          \
                v = pair_of(a1 + k);                                                                                   \
                c10 = ACC(c10, v, b0), c11 = ACC(c11, v, b1);                                                          \
                v = pair_of(a2 + k);                                                                                   \
                c20 = ACC(c20, v, b0), c21 = ACC(c21, v, b1);                                                          \
                v = pair_of(a3 + k);                                                                                   \
                c30 = ACC(c30, v, b0), c31 = ACC(c31, v, b1);                                                          \
            }                                                                                                          \
            int32_t *out = acc + j;                                                                                    \
            _mm256_storeu_si256((__m256i *)(void *)out, c00), _mm256_storeu_si256((__m256i *)(void *)(out + 8), c01);  \
            if (rows > 1)                                                                                              \
                _mm256_storeu_si256((__m256i *)(void *)(out + ldc), c10),                                              \
                    _mm256_storeu_si256((__m256i *)(void *)(out + ldc + 8), c11);                                      \
            if (rows > 2)                                                                                              \
                _mm256_storeu_si256((__m256i *)(void *)(out + 2 * ldc), c20),                                          \
                    _mm256_storeu_si256((__m256i *)(void *)(out + 2 * ldc + 8), c21);                                  \
            if (rows > 3)                                                                                              \
                _mm256_storeu_si256((__m256i *)(void *)(out + 3 * ldc), c30),                                          \
                    _mm256_storeu_si256((__m256i *)(void *)(out + 3 * ldc + 8), c31);                                  \
        }                                                                                                              \
    }
#define ACC_AVX2(c, a, b) _mm256_add_epi32(c, _mm256_madd_epi16(a, b))
#define ACC_VNNI(c, a, b) _mm256_dpwssd_epi32(c, a, b)
QGEMM_ROWS_KERNEL(rows_avx2, "avx2", ACC_AVX2)
#ifdef QGEMM_HAVE_VNNI
QGEMM_ROWS_KERNEL(rows_vnni, "avx2,avx512vl,avx512vnni", ACC_VNNI)
#endif
#endif

HFX_VECTOR_KERNEL
void hfx_qgemm_pack_pair(const int16_t *r0, const int16_t *r1, size_t n, size_t kp, size_t k, int16_t *b) {
    size_t full = n / NR * NR;
    for (size_t j = 0; j < full; j += NR) {
        int16_t *d = b + j * kp + k * NR;
        if (r1)
            for (int c = 0; c < NR; c++) d[2 * c] = r0[j + (size_t)c], d[2 * c + 1] = r1[j + (size_t)c];
        else
            for (int c = 0; c < NR; c++) d[2 * c] = r0[j + (size_t)c], d[2 * c + 1] = 0;
    }
    if (full == n) return;
    int16_t *d = b + full * kp + k * NR;
    for (size_t c = 0; c < NR; c++) {
        d[2 * c] = full + c < n ? r0[full + c] : 0;
        d[2 * c + 1] = r1 && full + c < n ? r1[full + c] : 0;
    }
}

static void dot_portable(const uint8_t *w, bool w_signed, int32_t zw, size_t kk, const int16_t *x, size_t ldx,
                         int ncols, int32_t *acc) {
    for (int q = 0; q < ncols; q++) {
        const int16_t *xq = x + (size_t)q * ldx;
        uint32_t s = 0;
        for (size_t k = 0; k < kk; k++) {
            int32_t wk = w_signed ? (int8_t)w[k] : w[k];
            s += (uint32_t)((wk - zw) * xq[k]);
        }
        acc[q] = (int32_t)s;
    }
}

#ifdef QGEMM_HAVE_AVX2
/* 16 k per step: the weights widened (vpmovzx/sx), zw subtracted, vpmaddwd with each column; the 8 lanes'
 * sums and the tail's added at the end (wrapping, as the reference) */
__attribute__((target("avx2"))) static void dot_avx2(const uint8_t *w, bool w_signed, int32_t zw, size_t kk,
                                                     const int16_t *x, size_t ldx, int ncols, int32_t *acc) {
    __m256i s[HFX_QGEMM_DOT_COLS];
    for (int q = 0; q < HFX_QGEMM_DOT_COLS; q++) s[q] = _mm256_setzero_si256();
    const __m256i z = _mm256_set1_epi16((int16_t)zw);
    size_t k = 0;
    for (; k + 16 <= kk; k += 16) {
        __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)(w + k));
        __m256i wv = _mm256_sub_epi16(w_signed ? _mm256_cvtepi8_epi16(raw) : _mm256_cvtepu8_epi16(raw), z);
        for (int q = 0; q < ncols; q++)
            s[q] = _mm256_add_epi32(
                s[q],
                _mm256_madd_epi16(wv, _mm256_loadu_si256((const __m256i *)(const void *)(x + (size_t)q * ldx + k))));
    }
    int32_t tail[HFX_QGEMM_DOT_COLS];
    dot_portable(w + k, w_signed, zw, kk - k, x + k, ldx, ncols, tail);
    for (int q = 0; q < ncols; q++) {
        int32_t lanes[8];
        _mm256_storeu_si256((__m256i *)(void *)lanes, s[q]);
        uint32_t sum = (uint32_t)tail[q];
        for (int l = 0; l < 8; l++) sum += (uint32_t)lanes[l];
        acc[q] = (int32_t)sum;
    }
}
#endif

void hfx_qgemm_dot(const uint8_t *w, bool w_signed, int32_t zw, size_t kk, const int16_t *x, size_t ldx, int ncols,
                   int32_t *acc) {
#ifdef QGEMM_HAVE_AVX2
    if (hfx_qgemm_max_isa >= HFX_QGEMM_AVX2 && __builtin_cpu_supports("avx2")) {
        dot_avx2(w, w_signed, zw, kk, x, ldx, ncols, acc);
        return;
    }
#endif
    dot_portable(w, w_signed, zw, kk, x, ldx, ncols, acc);
}

void hfx_qgemm_rows(const int16_t *a, size_t lda, int rows, const int16_t *b, size_t kp, size_t n, int32_t *acc,
                    size_t ldc) {
#ifdef QGEMM_HAVE_AVX2
#ifdef QGEMM_HAVE_VNNI
    if (hfx_qgemm_max_isa >= HFX_QGEMM_VNNI && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx512vl")) {
        rows_vnni(a, lda, rows, b, kp, n, acc, ldc);
        return;
    }
#endif
    if (hfx_qgemm_max_isa >= HFX_QGEMM_AVX2 && __builtin_cpu_supports("avx2")) {
        rows_avx2(a, lda, rows, b, kp, n, acc, ldc);
        return;
    }
#endif
    rows_portable(a, lda, rows, b, kp, n, acc, ldc);
}

/* q[c] = the reference's output byte for acc[c] (+ bias), c < n */
static void requant_portable(const int32_t *acc, size_t n, const int32_t *bias, size_t bias_step, const float *scale,
                             size_t scale_step, int32_t zy, int32_t lo, int32_t hi, uint8_t *q) {
    for (size_t c = 0; c < n; c++) {
        uint32_t s = (uint32_t)acc[c] + (bias ? (uint32_t)bias[c * bias_step] : 0u);
        q[c] = (uint8_t)ref_qmatmul_requant((int32_t)s, scale[c * scale_step], zy, lo, hi); /* i8: its bits */
    }
}

#ifdef QGEMM_HAVE_AVX2
/* 8 lanes of ref_qmatmul_requant: cvtdq2ps rounds as C's conversion does, mulps is the f32 product (no
 * FMA), maxps(t, lo) / minps(t, hi) give their second operand on NaN as the reference's selects do, and
 * the magic-number rounding is the same two additions. Steps are 0 or 1. */
__attribute__((target("avx2"))) static void requant_avx2(const int32_t *acc, size_t n, const int32_t *bias,
                                                         size_t bias_step, const float *scale, size_t scale_step,
                                                         int32_t zy, int32_t lo, int32_t hi, uint8_t *q) {
    const __m256 tlo = _mm256_set1_ps((float)(lo - zy)), thi = _mm256_set1_ps((float)(hi - zy));
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256i z = _mm256_set1_epi32(zy), bias1 = _mm256_set1_epi32(bias ? bias[0] : 0);
    const __m256 scale1 = _mm256_set1_ps(scale[0]);
    const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                               -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i halves = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(acc + c));
        if (bias)
            a = _mm256_add_epi32(a, bias_step ? _mm256_loadu_si256((const __m256i *)(const void *)(bias + c)) : bias1);
        __m256 s = scale_step ? _mm256_loadu_ps(scale + c) : scale1;
        __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(a), s);
        t = _mm256_min_ps(_mm256_max_ps(t, tlo), thi);
        t = _mm256_sub_ps(_mm256_add_ps(t, magic), magic);
        __m256i v = _mm256_add_epi32(_mm256_cvttps_epi32(t), z);
        v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, low_bytes), halves);
        _mm_storel_epi64((__m128i *)(void *)(q + c), _mm256_castsi256_si128(v));
    }
    requant_portable(acc + c, n - c, bias ? bias + c * bias_step : NULL, bias_step, scale + c * scale_step, scale_step,
                     zy, lo, hi, q + c);
}
#endif

/* q[0, n) from acc[0, n): AVX2 where allowed and present, else portable */
static void requant_bytes(const int32_t *acc, size_t n, const int32_t *bias, size_t bias_step, const float *scale,
                          size_t scale_step, int32_t zy, int32_t lo, int32_t hi, uint8_t *q) {
#ifdef QGEMM_HAVE_AVX2
    if (hfx_qgemm_max_isa >= HFX_QGEMM_AVX2 && __builtin_cpu_supports("avx2")) {
        requant_avx2(acc, n, bias, bias_step, scale, scale_step, zy, lo, hi, q);
        return;
    }
#endif
    requant_portable(acc, n, bias, bias_step, scale, scale_step, zy, lo, hi, q);
}

/* outputs c0 .. c0 + m of a row (runs of `run`, run_stride apart) from q */
static void scatter_runs(const uint8_t *q, size_t m, size_t c0, uint8_t *out, size_t run, size_t run_stride) {
    if (run == 1) { /* one output per run (1x1 images): a plain strided store */
        for (size_t c = 0; c < m; c++) out[(c0 + c) * run_stride] = q[c];
        return;
    }
    for (size_t c = 0, seg = c0 / run, off = c0 % run; c < m; c++) {
        out[seg * run_stride + off] = q[c];
        if (++off == run) off = 0, seg++;
    }
}

#define REQUANT_CHUNK 256

void hfx_qgemm_requant(const int32_t *acc, size_t n, const int32_t *bias, size_t bias_step, const float *scale,
                       size_t scale_step, int32_t zy, bool y_signed, void *y, size_t run, size_t run_stride) {
    int32_t lo = y_signed ? INT8_MIN : 0, hi = y_signed ? INT8_MAX : UINT8_MAX;
    uint8_t tmp[REQUANT_CHUNK], *out = y;
    for (size_t c0 = 0; c0 < n; c0 += REQUANT_CHUNK) {
        size_t m = n - c0 < REQUANT_CHUNK ? n - c0 : REQUANT_CHUNK;
        uint8_t *q = run >= n ? out + c0 : tmp; /* one run: straight into y */
        requant_bytes(acc + c0, m, bias ? bias + c0 * bias_step : NULL, bias_step, scale + c0 * scale_step, scale_step,
                      zy, lo, hi, q);
        if (q == tmp) scatter_runs(tmp, m, c0, out, run, run_stride);
    }
}

void hfx_qgemm_requant_rows(const int32_t *acc, size_t ldc, int rows, size_t n, const int32_t *bias, const float *scale,
                            size_t scale_step, int32_t zy, bool y_signed, uint8_t *y, size_t y_row, size_t run,
                            size_t run_stride) {
    int32_t lo = y_signed ? INT8_MIN : 0, hi = y_signed ? INT8_MAX : UINT8_MAX;
    uint8_t tmp[REQUANT_CHUNK];
    for (int i = 0; i < rows; i++)
        for (size_t c0 = 0; c0 < n; c0 += REQUANT_CHUNK) {
            size_t m = n - c0 < REQUANT_CHUNK ? n - c0 : REQUANT_CHUNK, whole = (m + 7) & ~(size_t)7;
            requant_bytes(acc + (size_t)i * ldc + c0, whole, bias ? bias + i : NULL, 0, scale + (size_t)i * scale_step,
                          0, zy, lo, hi, tmp);
            scatter_runs(tmp, m, c0, y + (size_t)i * y_row, run, run_stride);
        }
}
