/*
 * hvx_qresize.c - QRESIZE's rows (hvx_qresize.h).
 */
#include "hvx_qresize.h"

#include "hvx_kernels.h"
#include "hvx_util.h"

static size_t round_up(size_t n) { return (n + HVX_BYTES - 1) / HVX_BYTES * HVX_BYTES; }

size_t hvx_qresize_ws_bytes(size_t w, size_t ncols)
{
    return 256 + HVX_QRESIZE_MAX_FACTOR * HVX_BYTES + round_up(w) + HVX_BYTES + ncols * sizeof(uint32_t);
}

void hvx_qresize_init(hvx_qresize *r, void *ws, size_t w, size_t ow, const uint8_t table[256], uint8_t flip, int f)
{
    uint8_t *p = ws;
    hvx_lut_i8_prepare_xor(table, flip, p);
    r->lut = p;
    r->idx = p + 256;
    r->t = p + 256 + HVX_QRESIZE_MAX_FACTOR * HVX_BYTES;
    r->cols = (uint32_t *)(void *)(r->t + round_up(w) + HVX_BYTES);
    r->w = w, r->ow = ow, r->f = f;
    for (int ph = 0; f >= 3 && ph < f; ph++) /* idx[128 ph + i] = (ph + i) / f, by counters */
        for (int i = 0, v = 0, k = ph; i < HVX_BYTES; i++) {
            r->idx[ph * HVX_BYTES + i] = (uint8_t)v;
            if (++k == f)
                k = 0, v++;
        }
}

static inline void store_upto(uint8_t *y, HVX_Vector v, size_t left)
{
    if (left >= HVX_BYTES)
        *(hvx_uvec *)(void *)y = v;
    else
        hvx_store_first(y, v, left);
}

static void copy_row(uint8_t *y, const uint8_t *src, size_t n)
{
    size_t q = 0;
    for (; q + HVX_BYTES <= n; q += HVX_BYTES)
        *(hvx_uvec *)(void *)(y + q) = *(const hvx_uvec *)(const void *)(src + q);
    if (q < n)
        hvx_store_first(y + q, hvx_load_upto(src + q, n - q), n - q);
}

/* y[q] = t[q / 2]: each vector of t is two of y (its bytes shuffled with themselves) */
static void spread2(const uint8_t *t, size_t n, uint8_t *y)
{
    for (size_t q = 0; q < n; q += 2 * HVX_BYTES) {
        HVX_Vector s = *(const HVX_Vector *)(const void *)(t + q / 2);
        HVX_VectorPair d = Q6_W_vshuff_VVR(s, s, -1);
        store_upto(y + q, Q6_V_lo_W(d), n - q);
        if (n - q > HVX_BYTES)
            store_upto(y + q + HVX_BYTES, Q6_V_hi_W(d), n - q - HVX_BYTES);
    }
}

/* y[q] = t[q / f], f >= 3: output vector j reads the bytes from base = 128 j / f, at base + (ph + i) / f
 * with ph = 128 j % f; those are < 64, so a vlut32 table of them is base's bytes at the even places
 * (each byte shuffled with itself) and two vlut32 (indices 0..31, 32..63) gather them. */
static void spread(const uint8_t *t, size_t n, int f, const uint8_t *idx, uint8_t *y)
{
    size_t step = HVX_BYTES / (size_t)f, base = 0;
    int ph = 0, dph = HVX_BYTES % f;
    for (size_t q = 0; q < n; q += HVX_BYTES) {
        HVX_Vector s = *(const hvx_uvec *)(const void *)(t + base);
        HVX_Vector tab = Q6_V_lo_W(Q6_W_vshuff_VVR(s, s, -1));
        HVX_Vector ix = ((const HVX_Vector *)(const void *)idx)[ph];
        HVX_Vector v = Q6_Vb_vlut32_VbVbR(ix, tab, 0);
        store_upto(y + q, Q6_Vb_vlut32or_VbVbVbR(v, ix, tab, 1), n - q);
        base += step, ph += dph;
        if (ph >= f)
            ph -= f, base++;
    }
}

/* y[0, n) = lut[x[0, n)]; the last partial vector stored whole when y has 128 bytes of slack, else
 * only its n % 128 bytes; x read by vectors within the pages of [x, x + n) */
static void lut_row(const uint8_t *x, size_t n, const uint8_t *lut, uint8_t *y, int slack)
{
    HVX_Vector t0 = ((const HVX_Vector *)(const void *)lut)[0], t1 = ((const HVX_Vector *)(const void *)lut)[1];
    size_t q = 0;
    for (; q + HVX_BYTES <= n; q += HVX_BYTES)
        *(hvx_uvec *)(void *)(y + q) = hvx_lut256(*(const hvx_uvec *)(const void *)(x + q), t0, t1);
    if (q == n)
        return;
    HVX_Vector v = hvx_lut256(hvx_load_upto(x + q, n - q), t0, t1);
    if (slack)
        *(hvx_uvec *)(void *)(y + q) = v;
    else
        hvx_store_first(y + q, v, n - q);
}

void hvx_qresize_rows(const hvx_qresize *r, const uint8_t *src, size_t reps, uint8_t *y)
{
    size_t ow = r->ow;
    if (r->f >= 2) {
        lut_row(src, r->w, r->lut, r->t, 1);
        for (size_t k = 0; k < reps; k++) /* spreading again costs about what a copy does */
            if (r->f == 2)
                spread2(r->t, ow, y + k * ow);
            else
                spread(r->t, ow, r->f, r->idx, y + k * ow);
        return;
    }
    if (r->f == 1) {
        lut_row(src, ow, r->lut, y, 0);
    } else {
        for (size_t q = 0; q < ow; q++)
            y[q] = src[r->cols[q]];
        lut_row(y, ow, r->lut, y, 0);
    }
    for (size_t k = 1; k < reps; k++)
        copy_row(y + k * ow, y, ow);
}
