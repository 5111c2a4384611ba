/* conv.c - Conv2D (NCHW) as im2col + GEMM on the matrix engine. An item is a
 * block of output pixels of one (image, group): Y[n, g*Mg:(g+1)*Mg, p0:p1]. */
#include <cblas.h>
#include <string.h>

#include "kernels.h"

HFX_VECTOR_KERNEL
void hfx_k_conv2d(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_program *p = a->prog;
    const hfx_tensor *xt = &p->tensors[op->in[0]], *wt = &p->tensors[op->in[1]];
    const hfx_tensor *yt = &p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    const uint64_t *v = op->plan.v;
    uint64_t groups = v[1], pb = v[2], nb = v[3], direct = v[4], kk = v[5], pix = v[6];
    uint64_t pbi = item % nb, g = (item / nb) % groups, n = item / nb / groups;
    uint64_t c = xt->dims[1], h = xt->dims[2], w = xt->dims[3];
    uint64_t m = wt->dims[0], mg = m / groups, cg = c / groups;
    uint64_t kh = wt->dims[2], kw = wt->dims[3], ow = yt->dims[3];
    uint64_t p0 = pbi * pb, p1 = p0 + pb < pix ? p0 + pb : pix, np = p1 - p0;

    const float *X = (const float *)a->in[0] + (n * c + g * cg) * h * w;
    const float *W = (const float *)a->in[1] + g * mg * kk;
    float *Y = (float *)a->out[0] + (n * m + g * mg) * pix + p0;

    float gb = 0.0f;
    if (op->n_in == 3) {
        const float *bias = (const float *)a->in[2] + g * mg;
        for (uint64_t r = 0; r < mg; r++)
            for (uint64_t q = 0; q < np; q++) Y[r * pix + q] = bias[r];
        gb = 1.0f;
    }
    const float *col;
    uint64_t ldb;
    if (direct) {
        col = X + p0;
        ldb = pix;
    } else {
        float *ws = a->ws;
        int64_t sh = pr[HFX_P_CONV_STRIDE_H], sw = pr[HFX_P_CONV_STRIDE_W];
        int64_t dh = pr[HFX_P_CONV_DILATION_H], dw = pr[HFX_P_CONV_DILATION_W];
        int64_t pt = pr[HFX_P_CONV_PAD_TOP], pl = pr[HFX_P_CONV_PAD_LEFT];
        for (uint64_t ci = 0; ci < cg; ci++) {
            const float *xc = X + ci * h * w;
            for (uint64_t ki = 0; ki < kh; ki++) {
                for (uint64_t kj = 0; kj < kw; kj++) {
                    float *row = ws + ((ci * kh + ki) * kw + kj) * np;
                    /* walk the block's pixels row by row: no division per pixel */
                    uint64_t oy = p0 / ow, ox = p0 % ow;
                    for (uint64_t q = 0; q < np;) {
                        uint64_t run = ow - ox < np - q ? ow - ox : np - q; /* pixels left in this row */
                        int64_t iy = (int64_t)oy * sh - pt + (int64_t)ki * dh;
                        if (iy < 0 || iy >= (int64_t)h) {
                            for (uint64_t r = 0; r < run; r++) row[q + r] = 0.0f;
                        } else {
                            const float *xr = xc + (uint64_t)iy * w;
                            int64_t ix0 = (int64_t)ox * sw - pl + (int64_t)kj * dw;
                            /* pixels r of the run read ix0 + r sw: zeros left of the row, a
                             * (strided) copy inside it, zeros right of it */
                            int64_t lo = ix0 >= 0 ? 0 : (-ix0 + sw - 1) / sw;
                            int64_t hi = ix0 >= (int64_t)w ? 0 : ((int64_t)w - ix0 + sw - 1) / sw;
                            if (lo > (int64_t)run) lo = (int64_t)run;
                            if (hi > (int64_t)run) hi = (int64_t)run;
                            if (hi < lo) hi = lo;
                            float *dst = row + q;
                            for (int64_t r = 0; r < lo; r++) dst[r] = 0.0f;
                            if (sw == 1) {
                                if (hi > lo) memcpy(dst + lo, xr + ix0 + lo, (size_t)(hi - lo) * sizeof(float));
                            } else {
                                for (int64_t r = lo; r < hi; r++) dst[r] = xr[ix0 + r * sw];
                            }
                            for (int64_t r = hi; r < (int64_t)run; r++) dst[r] = 0.0f;
                        }
                        q += run;
                        oy++;
                        ox = 0;
                    }
                }
            }
        }
        col = ws;
        ldb = np;
    }
    scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mg, (blasint)np, (blasint)kk, 1.0f, W,
                      (blasint)kk, col, (blasint)ldb, gb, Y, (blasint)pix);
}
