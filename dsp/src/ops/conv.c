/* conv.c - Conv2D (NCHW) as im2col + GEMM on the matrix engine. An item is a
 * block of output pixels of one (image, group): Y[n, g*Mg:(g+1)*Mg, p0:p1]. */
#include <cblas.h>
#include <string.h>

#include "kernels.h"

#define CONV_WS_MAX (512u * 1024u) /* im2col bytes per item */

typedef struct conv_plan {
    uint64_t images, groups;
    uint64_t pixels_per_item, blocks; /* output pixels per item, items per (image, group) */
    uint64_t direct;                  /* 1x1, stride 1, no pads: no im2col */
    uint64_t kk;                      /* C/g * kh * kw */
    uint64_t pixels;                  /* OH * OW */
} conv_plan;

hfx_status hfx_validate_conv2d(hfx_vctx *v, hfx_op *op) {
    const hfx_program *p = v->p;
    const hfx_tensor *x = &p->tensors[op->in[0]], *w = &p->tensors[op->in[1]], *y = &p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    for (int i = 0; i <= HFX_P_CONV_GROUP; i++) {
        int32_t lo = i < HFX_P_CONV_STRIDE_H ? 0 : 1;
        if (pr[i] < lo || pr[i] > 65535)
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: conv param %d = %d out of range", v->index,
                             i, (int)pr[i]);
    }
    if (x->rank != 4 || w->rank != 4)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, x->rank != 4 ? 0 : 1), "op %u: Conv2D needs rank-4 X and W",
                         v->index);
    uint32_t g = (uint32_t)pr[HFX_P_CONV_GROUP];
    uint32_t c = x->dims[1], m = w->dims[0];
    if (c % g != 0 || m % g != 0 || w->dims[1] != c / g)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u: Conv2D channels/group mismatch", v->index);
    uint32_t od[4] = {x->dims[0], m, 0, 0};
    for (int a = 0; a < 2; a++) {
        int64_t in = x->dims[2 + a], k = w->dims[2 + a];
        int64_t pad = (int64_t)pr[HFX_P_CONV_PAD_TOP + a] + pr[HFX_P_CONV_PAD_BOTTOM + a];
        int64_t ek = (int64_t)pr[HFX_P_CONV_DILATION_H + a] * (k - 1) + 1;
        int64_t span = in + pad - ek;
        if (span < 0)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u: Conv2D kernel larger than padded input",
                             v->index);
        od[2 + a] = (uint32_t)(span / pr[HFX_P_CONV_STRIDE_H + a] + 1);
    }
    if (!hfx_same_shape(y, od, 4)) return hfx_shape_err(v, "Conv2D");
    if (op->n_in == 3) {
        const hfx_tensor *bias = &p->tensors[op->in[2]];
        if (bias->rank != 1 || bias->dims[0] != m)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 2), "op %u: Conv2D bias must be [M]", v->index);
    }
    return HFX_OK;
}

/* Blocks of output pixels of one (image, group) of about HFX_GEMM_ITEM_FLOPS, the im2col of a block
 * at most CONV_WS_MAX bytes, evened out. */
hfx_status hfx_plan_conv2d(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]], *w = &p->tensors[op->in[1]], *y = &p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    conv_plan pl = {0};
    pl.images = x->dims[0];
    pl.groups = (uint64_t)pr[HFX_P_CONV_GROUP];
    pl.kk = (uint64_t)w->dims[1] * w->dims[2] * w->dims[3];
    pl.pixels = (uint64_t)y->dims[2] * y->dims[3];
    uint64_t mg = w->dims[0] / pl.groups;
    pl.direct = w->dims[2] == 1 && w->dims[3] == 1 && pr[HFX_P_CONV_PAD_TOP] == 0 && pr[HFX_P_CONV_PAD_LEFT] == 0 &&
                pr[HFX_P_CONV_PAD_BOTTOM] == 0 && pr[HFX_P_CONV_PAD_RIGHT] == 0 && pr[HFX_P_CONV_STRIDE_H] == 1 &&
                pr[HFX_P_CONV_STRIDE_W] == 1;
    uint64_t pb = hfx_per_item_for(2 * mg * pl.kk, HFX_GEMM_ITEM_FLOPS);
    if (!pl.direct) {
        uint64_t cap = CONV_WS_MAX / (pl.kk * 4);
        if (cap == 0) cap = 1;
        if (pb > cap) pb = cap;
    }
    if (pb > pl.pixels) pb = pl.pixels;
    pl.blocks = hfx_ceil_div(pl.pixels, pb);
    pl.pixels_per_item = hfx_ceil_div(pl.pixels, pl.blocks);
    op->plan.ws_bytes = pl.direct ? 0 : (size_t)(pl.kk * pl.pixels_per_item * 4);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, pl.images * pl.groups * pl.blocks);
}

HFX_VECTOR_KERNEL
void hfx_run_conv2d(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_program *p = a->prog;
    const hfx_tensor *xt = &p->tensors[op->in[0]], *wt = &p->tensors[op->in[1]];
    const hfx_tensor *yt = &p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    conv_plan plan;
    HFX_PLAN_LOAD(plan, op);
    uint64_t groups = plan.groups, pb = plan.pixels_per_item, nb = plan.blocks, direct = plan.direct, kk = plan.kk;
    uint64_t pix = plan.pixels;
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
