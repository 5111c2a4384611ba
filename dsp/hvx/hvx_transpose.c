/*
 * hvx_transpose.c - a 2-D transpose of elements of 1..64 bytes by vdeal / vshuff passes over
 * power-of-two tiles (hvx_transpose.h).
 */
#include "hvx_transpose.h"

#include <stdbool.h>

#include "hvx_util.h"

size_t hvx_transpose_ws_bytes(void)
{
    return 2 * HVX_TRANSPOSE_TILE + HVX_BYTES;
}

/* A tile of tr x tc elements; `passes` deals (deal) or shuffles (!deal) transpose it. */
typedef struct tile_geom {
    size_t tr, tc;
    int passes;
    bool deal;
} tile_geom;

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

static int log2_of(size_t pow2)
{
    int k = 0;
    while (((size_t)1 << k) < pow2)
        k++;
    return k;
}

/* Columns up to 128 a tile (fewer for wide elements, so that a tile keeps rows), rows up to the tile's
 * bytes, at least 256 bytes (one vector pair). */
static tile_geom tile_geometry(size_t rows, size_t cols, size_t es)
{
    tile_geom t;
    size_t most = HVX_TRANSPOSE_TILE / es, cap = 128;
    while (cap * cap > 2 * most)
        cap >>= 1;
    t.tc = pow2_at_least(cols);
    if (t.tc > cap)
        t.tc = cap;
    t.tr = pow2_at_least(rows);
    if (t.tr > most / t.tc)
        t.tr = most / t.tc;
    while (t.tr * t.tc * es < 2 * HVX_BYTES)
        t.tr <<= 1;
    int a = log2_of(t.tr), b = log2_of(t.tc);
    /* the index bits [row a | column b] rotate right by b (b deals) or left by a (a shuffles) */
    t.deal = b <= a;
    t.passes = t.deal ? b : a;
    return t;
}

/* One pass over n bytes (a multiple of 256), a vector pair at a time: a deal (dst = src's even elements,
 * then its odd ones: the index bits rotated right by one) or a shuffle (dst interleaves the elements of
 * src's two halves: rotated left by one). V: the vector type, aligned (HVX_Vector: vmem) or not (vmemu);
 * indexed by vector, so that the compiler unrolls and pipelines the loops. */
#define TRANSPOSE_PASS(NAME, V)                                                                        \
    static void NAME(const uint8_t *src, uint8_t *dst, size_t n, int es, bool deal)                   \
    {                                                                                                  \
        const V *s = (const V *)(const void *)src;                                                     \
        V *d = (V *)(void *)dst;                                                                       \
        size_t h = n / 2 / HVX_BYTES;                                                                  \
        if (deal)                                                                                      \
            for (size_t i = 0; i < h; i++) {                                                           \
                HVX_VectorPair w = Q6_W_vdeal_VVR(s[2 * i + 1], s[2 * i], -es);                        \
                d[i] = Q6_V_lo_W(w);                                                                   \
                d[h + i] = Q6_V_hi_W(w);                                                               \
            }                                                                                          \
        else                                                                                           \
            for (size_t i = 0; i < h; i++) {                                                           \
                HVX_VectorPair w = Q6_W_vshuff_VVR(s[h + i], s[i], -es);                               \
                d[2 * i] = Q6_V_lo_W(w);                                                               \
                d[2 * i + 1] = Q6_V_hi_W(w);                                                           \
            }                                                                                          \
    }
TRANSPOSE_PASS(pass_aligned, HVX_Vector)
TRANSPOSE_PASS(pass_unaligned, hvx_uvec)

static void pass(const uint8_t *src, uint8_t *dst, size_t n, int es, bool deal)
{
    if (hvx_aligned(src) && hvx_aligned(dst))
        pass_aligned(src, dst, n, es, deal);
    else
        pass_unaligned(src, dst, n, es, deal);
}

/* n (>= 1) bytes into the work space; up to 127 bytes after them may be overwritten */
static void copy_in(uint8_t *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i += HVX_BYTES)
        *(hvx_uvec *)(void *)(dst + i) =
            n - i >= HVX_BYTES ? *(const hvx_uvec *)(const void *)(src + i) : hvx_load_upto(src + i, n - i);
}

void hvx_copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n < HVX_BYTES) {
        hvx_store_first(dst, hvx_load_upto(src, n), n);
        return;
    }
    size_t i = 0;
    for (; i + HVX_BYTES <= n; i += HVX_BYTES)
        *(hvx_uvec *)(void *)(dst + i) = *(const hvx_uvec *)(const void *)(src + i);
    if (i < n) /* the last vector overlaps the one before */
        *(hvx_uvec *)(void *)(dst + n - HVX_BYTES) = *(const hvx_uvec *)(const void *)(src + n - HVX_BYTES);
}

/* One tile: rr x cc elements (rr <= tr, cc <= tc) at x (row stride ldx) to y (row stride ldy). A short
 * output row is stored as a whole vector where that ends by y_end: the bytes after it are elements the
 * transpose writes later. */
static void transpose_tile(const tile_geom *t, const uint8_t *x, size_t ldx, uint8_t *y, size_t ldy, size_t rr,
                           size_t cc, size_t es, uint8_t *ws, const uint8_t *y_end)
{
    size_t n = t->tr * t->tc * es;
    bool full = rr == t->tr && cc == t->tc && t->passes > 0;
    bool x_is_tile = full && ldx == t->tc, y_is_tile = full && ldy == t->tr;
    uint8_t *buf[2] = {ws, ws + HVX_TRANSPOSE_TILE};
    const uint8_t *cur = x;
    int k = 0; /* the next pass writes buf[k] */
    if (!x_is_tile) {
        for (size_t r = 0; r < rr; r++)
            copy_in(buf[0] + r * t->tc * es, x + r * ldx * es, cc * es);
        cur = buf[0];
        k = 1;
    }
    for (int p = 0; p < t->passes; p++) {
        uint8_t *next = p == t->passes - 1 && y_is_tile ? y : buf[k];
        pass(cur, next, n, (int)es, t->deal);
        cur = next;
        k ^= 1;
    }
    if (y_is_tile)
        return;
    size_t c = 0, room = y_end > y ? (size_t)(y_end - y) : 0, step = ldy * es;
    if (rr * es < HVX_BYTES && room >= HVX_BYTES) { /* rows c whose vector at y + c * step ends by y_end */
        size_t whole = (room - HVX_BYTES) / step + 1;
        for (; c < cc && c < whole; c++) /* the work space has a vector of slack */
            *(hvx_uvec *)(void *)(y + c * step) = *(const hvx_uvec *)(const void *)(cur + c * t->tr * es);
    }
    for (; c < cc; c++)
        hvx_copy_bytes(y + c * step, cur + c * t->tr * es, rr * es);
}

void hvx_transpose(const uint8_t *x, size_t ldx, uint8_t *y, size_t ldy, size_t rows, size_t cols, size_t es,
                   uint8_t *ws)
{
    tile_geom t = tile_geometry(rows, cols, es);
    /* one tile row with dense output rows: y is the elements alone, written in order */
    const uint8_t *y_end = rows <= t.tr && ldy == rows ? y + cols * ldy * es : y;
    for (size_t r0 = 0; r0 < rows; r0 += t.tr)
        for (size_t c0 = 0; c0 < cols; c0 += t.tc) {
            size_t rr = rows - r0 < t.tr ? rows - r0 : t.tr, cc = cols - c0 < t.tc ? cols - c0 : t.tc;
            transpose_tile(&t, x + (r0 * ldx + c0) * es, ldx, y + (c0 * ldy + r0) * es, ldy, rr, cc, es, ws,
                           y_end);
        }
}
