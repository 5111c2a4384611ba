/* sgemm_ordered.c - see sgemm_ordered.h. C goes in tiles of TILE_ROWS x TILE_COLS whose sums stay in
 * registers (vectors of columns) while k runs; a tile changes which elements are summed together,
 * never the order of one element's sum. */
#include "sgemm_ordered.h"

#include <string.h>

#include "kernels.h"

typedef float v8 __attribute__((vector_size(32))); /* 8 columns; lane by lane, as the scalar sum */

#define TILE_ROWS 4
#define TILE_VECS 2
#define TILE_COLS (TILE_VECS * 8)
#define PANEL_K 256 /* rows of B packed at a time: 16 KB */

/* A full tile over k0..k0+kc, B's panel packed (kc rows of TILE_COLS), its sums in vectors of 8
 * columns. `start`: begin from 0 (or C with `accumulate`) rather than from this tile's partial sums. */
static inline void full_tile(uint64_t k0, uint64_t kc, float alpha, hfx_strided a, const float *panel, bool start,
                             bool accumulate, float *c, uint64_t ldc) {
    v8 acc[TILE_ROWS][TILE_VECS];
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < TILE_VECS; v++) {
            if (start && !accumulate) acc[r][v] = (v8){0};
            else memcpy(&acc[r][v], c + r * ldc + v * 8, sizeof(v8));
        }
    for (uint64_t kk = 0; kk < kc; kk++) {
        v8 bk[TILE_VECS];
        memcpy(bk, panel + kk * TILE_COLS, sizeof bk);
        for (int r = 0; r < TILE_ROWS; r++) {
            float av = a.base[r * a.row + (k0 + kk) * a.col] * alpha;
            v8 avv = {av, av, av, av, av, av, av, av};
            for (int v = 0; v < TILE_VECS; v++) acc[r][v] += avv * bk[v];
        }
    }
    for (int r = 0; r < TILE_ROWS; r++) memcpy(c + r * ldc, acc[r], sizeof acc[r]);
}

/* Any other block (the edges, or B transposed): sgemm_ref.c's loops, C's row as the sums. */
static void edge_tile(uint64_t rows, uint64_t cols, uint64_t k, float alpha, hfx_strided a, hfx_strided b,
                      bool accumulate, float *c, uint64_t ldc) {
    for (uint64_t r = 0; r < rows; r++) {
        float *crow = c + r * ldc;
        if (!accumulate)
            for (uint64_t j = 0; j < cols; j++) crow[j] = 0.0f;
        for (uint64_t kk = 0; kk < k; kk++) {
            float av = a.base[r * a.row + kk * a.col] * alpha;
            const float *bk = b.base + kk * b.row;
            for (uint64_t j = 0; j < cols; j++) crow[j] += av * bk[j * b.col];
        }
    }
}

/* The full tiles of TILE_COLS columns at j0, k in chunks of PANEL_K rows whose B panel is packed once
 * for every row tile (a float stored and reloaded is unchanged, so a chunk resumes the same sum). */
HFX_VECTOR_KERNEL
static void full_column(uint64_t m, uint64_t k, float alpha, hfx_strided a, hfx_strided b, bool accumulate, float *c,
                        uint64_t ldc) {
    float panel[PANEL_K * TILE_COLS];
    for (uint64_t k0 = 0; k0 < k; k0 += PANEL_K) {
        uint64_t kc = k - k0 < PANEL_K ? k - k0 : PANEL_K;
        for (uint64_t kk = 0; kk < kc; kk++)
            for (int j = 0; j < TILE_COLS; j++) panel[kk * TILE_COLS + j] = b.base[(k0 + kk) * b.row + j];
        for (uint64_t i0 = 0; i0 + TILE_ROWS <= m; i0 += TILE_ROWS) {
            hfx_strided ai = {a.base + i0 * a.row, a.row, a.col};
            full_tile(k0, kc, alpha, ai, panel, k0 == 0, accumulate, c + i0 * ldc, ldc);
        }
    }
}

void hfx_sgemm_ordered(uint64_t m, uint64_t n, uint64_t k, float alpha, hfx_strided a, hfx_strided b, bool accumulate,
                       float *c, uint64_t ldc) {
    uint64_t full_m = b.col == 1 && k > 0 ? m / TILE_ROWS * TILE_ROWS : 0; /* rows in full tiles */
    for (uint64_t j0 = 0; j0 < n; j0 += TILE_COLS) {
        uint64_t cols = n - j0 < TILE_COLS ? n - j0 : TILE_COLS;
        hfx_strided bj = {b.base + j0 * b.col, b.row, b.col};
        uint64_t done = cols == TILE_COLS ? full_m : 0;
        if (done) full_column(done, k, alpha, a, bj, accumulate, c + j0, ldc);
        hfx_strided rest = {a.base + done * a.row, a.row, a.col};
        if (done < m) edge_tile(m - done, cols, k, alpha, rest, bj, accumulate, c + done * ldc + j0, ldc);
    }
}
