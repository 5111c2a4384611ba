/*
 * hvx_im2col.c - im2col rows of a u8/i8 convolution (hvx_im2col.h): per tap, per segment of an
 * output row, its padding splatted and (stride 1) its run of X copied 128 bytes at a time.
 */
#include "hvx_im2col.h"

#include "hvx_qgemm.h"
#include "hvx_util.h"

size_t hvx_im2col_ld(uint64_t np)
{
    return (size_t)(np + HVX_QGEMM_PANEL - 1) / HVX_QGEMM_PANEL * HVX_QGEMM_PANEL + HVX_BYTES;
}

/* dst[0, n) = v; stores up to 127 bytes past n */
static void fill_bytes(uint8_t *dst, HVX_Vector v, size_t n)
{
    for (size_t q = 0; q < n; q += HVX_BYTES)
        *(hvx_uvec *)(void *)(dst + q) = v;
}

/* dst[0, n) = src[0, n); reads nothing at or past end, stores up to 127 bytes past n */
static void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t *end)
{
    for (size_t q = 0; q < n; q += HVX_BYTES) {
        size_t left = (size_t)(end - (src + q));
        HVX_Vector v = left >= HVX_BYTES ? *(const hvx_uvec *)(const void *)(src + q)
                                         : hvx_load_partial(src + q, n - q < left ? n - q : left);
        *(hvx_uvec *)(void *)(dst + q) = v;
    }
}

/* One tap's im2col row over output pixels [p0, p0 + np): one segment per output row, its padding and
 * (stride 1) its contiguous run of X, vector by vector. */
static void im2col_tap(const uint8_t *xc, const uint8_t *x_end, const hvx_conv_geom *g, uint64_t i, uint64_t j,
                       uint64_t p0, uint64_t np, uint8_t zx, uint8_t *row)
{
    HVX_Vector pad = Q6_Vb_vsplat_R(zx);
    for (uint64_t p = 0; p < np;) {
        uint64_t oh = (p0 + p) / g->ow_n, ow = (p0 + p) % g->ow_n;
        uint64_t len = g->ow_n - ow < np - p ? g->ow_n - ow : np - p;
        int64_t ih = (int64_t)oh * g->sh + (int64_t)i * g->dh - g->pt;
        int64_t iw0 = (int64_t)ow * g->sw + (int64_t)j * g->dw - g->pl; /* the segment's first input column */
        uint8_t *dst = row + p;
        const uint8_t *xrow = xc + (uint64_t)(ih < 0 ? 0 : ih) * g->W;
        if (ih < 0 || ih >= (int64_t)g->H) {
            fill_bytes(dst, pad, len);
        } else if (g->sw == 1) {
            int64_t lp = iw0 < 0 ? -iw0 : 0, end = (int64_t)g->W - iw0; /* valid q: [lp, end) */
            if (lp > (int64_t)len)
                lp = (int64_t)len;
            if (end > (int64_t)len)
                end = (int64_t)len;
            if (end < lp)
                end = lp;
            fill_bytes(dst, pad, (size_t)lp);
            copy_bytes(dst + lp, xrow + iw0 + lp, (size_t)(end - lp), x_end);
            fill_bytes(dst + end, pad, len - (uint64_t)end);
        } else {
            for (uint64_t q = 0; q < len; q++) {
                int64_t iw = iw0 + (int64_t)q * g->sw;
                dst[q] = iw >= 0 && iw < (int64_t)g->W ? xrow[iw] : zx;
            }
        }
        p += len;
    }
}

void hvx_im2col_rows(const uint8_t *xc, const uint8_t *x_end, const hvx_conv_geom *g, uint64_t p0, uint64_t np,
                     uint8_t zx, uint8_t *t, size_t ld)
{
    uint64_t k = 0;
    for (uint64_t c = 0; c < g->cg; c++)
        for (uint64_t i = 0; i < g->kh; i++)
            for (uint64_t j = 0; j < g->kw; j++, k++)
                im2col_tap(xc + c * g->H * g->W, x_end, g, i, j, p0, np, zx, t + k * ld);
}
