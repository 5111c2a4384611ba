/* sgemm_mlas.c - see sgemm_mlas.h. C goes in tiles of TILE_ROWS x TILE_COLS summed in registers over one
 * K block, B's block packed once per column of tiles (zeros past N) and a tile's short rows of A packed
 * with zeros, so that every tile runs the vector kernel; a tile changes which sums run together, never
 * the order of one. FMA is the same rounding at every width: AVX-512, AVX2 and fmaf agree. */
#include "sgemm_mlas.h"

#include <string.h>

#include "../../ref/ref_fma.h" /* ref_fmaf: an instruction in the x86-64-v3 copy, sfmpy on Hexagon */
#include "kernels.h"

#define MLAS_STRIDE_N 128u /* MLAS_SGEMM_STRIDEN */
#define MLAS_STRIDE_K 128u /* MLAS_SGEMM_STRIDEK */
#define TILE_ROWS 4
#define TILE_COLS 32

typedef float tile_sums[TILE_ROWS][TILE_COLS];

uint64_t hfx_mlas_stride_k(uint64_t n, uint64_t k, bool trans_a) {
    uint64_t sn = MLAS_STRIDE_N, sk = MLAS_STRIDE_K;
    if (n >= k) {
        while (sk / 2 >= k) sk /= 2;
    } else if (!trans_a) {
        while (sn > 16 && sn / 2 >= n) {
            sk *= 2;
            sn /= 2;
        }
    }
    return sk;
}

/* A tile's sums over the block's kc rows of the packed panel: sums[r][j] = sum_k a[r, k] panel[k, j]. */
static void tile_plain(uint64_t kc, hfx_strided a, const float *panel, tile_sums sums) {
    memset(sums, 0, sizeof(tile_sums));
    for (uint64_t kk = 0; kk < kc; kk++)
        for (int r = 0; r < TILE_ROWS; r++) {
            float av = a.base[(uint64_t)r * a.row + kk * a.col];
            for (int j = 0; j < TILE_COLS; j++) sums[r][j] = ref_fmaf(av, panel[kk * TILE_COLS + j], sums[r][j]);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdlib.h>

/* The compiler does not vectorize tile_plain's fmaf (one vfmadd132ps in 64): intrinsics, per ISA. */
__attribute__((target("avx512f"))) static void tile_avx512(uint64_t kc, hfx_strided a, const float *panel,
                                                           tile_sums sums) {
    __m512 c[TILE_ROWS][2];
    for (int r = 0; r < TILE_ROWS; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (uint64_t kk = 0; kk < kc; kk++) {
        __m512 b0 = _mm512_loadu_ps(panel + kk * TILE_COLS), b1 = _mm512_loadu_ps(panel + kk * TILE_COLS + 16);
        for (int r = 0; r < TILE_ROWS; r++) {
            __m512 av = _mm512_set1_ps(a.base[(uint64_t)r * a.row + kk * a.col]);
            c[r][0] = _mm512_fmadd_ps(av, b0, c[r][0]);
            c[r][1] = _mm512_fmadd_ps(av, b1, c[r][1]);
        }
    }
    for (int r = 0; r < TILE_ROWS; r++) {
        _mm512_storeu_ps(sums[r], c[r][0]);
        _mm512_storeu_ps(sums[r] + 16, c[r][1]);
    }
}

/* AVX2: the tile's two halves of 16 columns one after the other (8 sums in registers each). */
__attribute__((target("avx2,fma"))) static void tile_avx2(uint64_t kc, hfx_strided a, const float *panel,
                                                          tile_sums sums) {
    for (int half = 0; half < TILE_COLS; half += 16) {
        __m256 c[TILE_ROWS][2];
        for (int r = 0; r < TILE_ROWS; r++) c[r][0] = c[r][1] = _mm256_setzero_ps();
        for (uint64_t kk = 0; kk < kc; kk++) {
            const float *bk = panel + kk * TILE_COLS + half;
            __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
            for (int r = 0; r < TILE_ROWS; r++) {
                __m256 av = _mm256_set1_ps(a.base[(uint64_t)r * a.row + kk * a.col]);
                c[r][0] = _mm256_fmadd_ps(av, b0, c[r][0]);
                c[r][1] = _mm256_fmadd_ps(av, b1, c[r][1]);
            }
        }
        for (int r = 0; r < TILE_ROWS; r++) {
            _mm256_storeu_ps(sums[r] + half, c[r][0]);
            _mm256_storeu_ps(sums[r] + half + 8, c[r][1]);
        }
    }
}

typedef void tile_fn(uint64_t kc, hfx_strided a, const float *panel, tile_sums sums);

/* The widest kernel the CPU runs; HEXFUSE_SGEMM_ISA=avx2 or plain picks a narrower one (the tests run all
 * three: the same bits). */
static tile_fn *tile_kernel(void) {
    const char *isa = getenv("HEXFUSE_SGEMM_ISA");
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa && strcmp(isa, "plain") == 0) return tile_plain;
    if (isa && strcmp(isa, "avx2") == 0 && avx2) return tile_avx2;
    if (__builtin_cpu_supports("avx512f") && !isa) return tile_avx512;
    return avx2 ? tile_avx2 : tile_plain;
}
#else
typedef void tile_fn(uint64_t kc, hfx_strided a, const float *panel, tile_sums sums);
static tile_fn *tile_kernel(void) { return tile_plain; }
#endif

/* One block's sums into C: the first (C = alpha s) unless C holds a start, else C = alpha s + C, one
 * rounding (MLAS's kernel: vfmadd213ps). */
static inline void store(tile_sums sums, uint64_t rows, uint64_t cols, float alpha, bool first, float *c,
                         uint64_t ldc) {
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < cols; j++)
            c[r * ldc + j] = first ? alpha * sums[r][j] : ref_fmaf(sums[r][j], alpha, c[r * ldc + j]);
}

/* B's rows [k0, k0 + kc) x columns [j0, j0 + cols) into panel rows of TILE_COLS, zeros past cols. */
static void pack_b(hfx_strided b, uint64_t k0, uint64_t kc, uint64_t j0, uint64_t cols, float *panel) {
    for (uint64_t kk = 0; kk < kc; kk++)
        for (uint64_t j = 0; j < TILE_COLS; j++)
            panel[kk * TILE_COLS + j] = j < cols ? b.base[(k0 + kk) * b.row + (j0 + j) * b.col] : 0.0f;
}

HFX_VECTOR_KERNEL
void hfx_sgemm_mlas(uint64_t m, uint64_t n, uint64_t k, float alpha, hfx_strided a, hfx_strided b, bool accumulate,
                    float *c, uint64_t ldc, uint64_t stride_k) {
    float panel[HFX_MLAS_MAX_STRIDE_K * TILE_COLS];
    float short_a[HFX_MLAS_MAX_STRIDE_K * TILE_ROWS]; /* the last tile's rows of A, zeros past m */
    tile_sums sums;
    tile_fn *tile = tile_kernel();
    for (uint64_t j0 = 0; j0 < n; j0 += TILE_COLS) {
        uint64_t cols = n - j0 < TILE_COLS ? n - j0 : TILE_COLS;
        for (uint64_t k0 = 0; k0 < k; k0 += stride_k) {
            uint64_t kc = k - k0 < stride_k ? k - k0 : stride_k;
            pack_b(b, k0, kc, j0, cols, panel);
            bool first = k0 == 0 && !accumulate;
            for (uint64_t i0 = 0; i0 < m; i0 += TILE_ROWS) {
                uint64_t rows = m - i0 < TILE_ROWS ? m - i0 : TILE_ROWS;
                hfx_strided ai = {a.base + i0 * a.row + k0 * a.col, a.row, a.col};
                if (rows < TILE_ROWS) {
                    for (uint64_t kk = 0; kk < kc; kk++)
                        for (uint64_t r = 0; r < TILE_ROWS; r++)
                            short_a[kk * TILE_ROWS + r] = r < rows ? ai.base[r * ai.row + kk * ai.col] : 0.0f;
                    ai = (hfx_strided){short_a, 1, TILE_ROWS};
                }
                tile(kc, ai, panel, sums);
                store(sums, rows, cols, alpha, first, c + i0 * ldc + j0, ldc);
            }
        }
    }
}

HFX_VECTOR_KERNEL
void hfx_sgemv_mlas(const float *x, const float *b, uint64_t ldb, uint64_t k, uint64_t cols, bool add, float *y) {
    if (!add) memset(y, 0, cols * sizeof(float));
    uint64_t i = 0;
    for (; i + 4 <= k; i += 4) {
        const float *b0 = b + i * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
        for (uint64_t j = 0; j < cols; j++)
            y[j] = (((x[i] * b0[j] + x[i + 1] * b1[j]) + x[i + 2] * b2[j]) + x[i + 3] * b3[j]) + y[j];
    }
    if (k - i >= 2) {
        const float *b0 = b + i * ldb, *b1 = b0 + ldb;
        for (uint64_t j = 0; j < cols; j++) y[j] = (x[i] * b0[j] + x[i + 1] * b1[j]) + y[j];
        i += 2;
    }
    if (k - i == 1)
        for (uint64_t j = 0; j < cols; j++) y[j] = x[i] * b[i * ldb + j] + y[j];
}

/* The 8 lane sums reduced as the kernel's block of 4 outputs (4), 2 (2) or 1 (1) does. */
static float reduce_lanes(const float l[8], int block) {
    if (block == 4) return (((l[0] + l[1]) + l[2]) + l[3]) + (((l[4] + l[5]) + l[6]) + l[7]);
    if (block == 2) return ((l[0] + l[2]) + (l[4] + l[6])) + ((l[1] + l[3]) + (l[5] + l[7]));
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

HFX_VECTOR_KERNEL
void hfx_dot_rows_mlas(const float *x, const float *rows, uint64_t ld, uint64_t k, uint64_t j0, uint64_t j1, uint64_t n,
                       bool add, float *y, uint64_t incy) {
    uint64_t fours = n / 4 * 4; /* outputs in blocks of 4; then n & 2 in a block of 2, then 1 */
    for (uint64_t j = j0; j < j1; j++) {
        const float *r = rows + j * ld;
        float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t i = 0;
        for (; i + 8 <= k; i += 8)
            for (int l = 0; l < 8; l++) lanes[l] = lanes[l] + x[i + (uint64_t)l] * r[i + (uint64_t)l];
        for (; i < k; i++) lanes[i % 8] = lanes[i % 8] + x[i] * r[i];
        int block = j < fours ? 4 : (n & 2) && j < fours + 2 ? 2 : 1;
        float dot = reduce_lanes(lanes, block);
        y[(j - j0) * incy] = add ? dot + y[(j - j0) * incy] : dot;
    }
}

/* k outer, a chunk of outputs inner: each lane sums its k in order, as hfx_dot_rows_mlas does. Chunks
 * of 512 columns read B's rows 2 KiB at a time (64: 17x slower at 768 x 3072, B out of the cache). */
#define DOT_COLS 512u
HFX_VECTOR_KERNEL
void hfx_dot_cols_mlas(const float *x, const float *b, uint64_t ldb, uint64_t k, uint64_t j0, uint64_t j1, uint64_t n,
                       bool add, float *y) {
    uint64_t fours = n / 4 * 4;
    float lanes[8][DOT_COLS], l[8];
    for (uint64_t c0 = j0; c0 < j1; c0 += DOT_COLS) {
        uint64_t cols = j1 - c0 < DOT_COLS ? j1 - c0 : DOT_COLS;
        for (int t = 0; t < 8; t++) memset(lanes[t], 0, cols * sizeof(float));
        for (uint64_t i = 0; i < k; i++) {
            const float *restrict row = b + i * ldb + c0;
            float *restrict lane = lanes[i % 8];
            float xi = x[i];
            for (uint64_t j = 0; j < cols; j++) lane[j] = lane[j] + xi * row[j];
        }
        for (uint64_t j = 0; j < cols; j++) {
            uint64_t col = c0 + j;
            for (int t = 0; t < 8; t++) l[t] = lanes[t][j];
            float dot = reduce_lanes(l, col < fours ? 4 : (n & 2) && col < fours + 2 ? 2 : 1);
            y[col - j0] = add ? dot + y[col - j0] : dot;
        }
    }
}
