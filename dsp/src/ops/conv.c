/* conv.c - Conv2D (NCHW) as im2col + GEMM on the matrix engine. An item is a
 * block of output pixels of one (image, group): Y[n, g*Mg:(g+1)*Mg, p0:p1], or of a block of its
 * filters where a block of all of them would hold too few pixels (conv_filters_per_item).
 * Depthwise convs (one input and one output channel per group) run a direct
 * kernel instead, an item being a range of channels of one image: as a GEMM
 * they are a 1-row product after an im2col that costs more than the product. */
#include <cblas.h>
#include <string.h>

#include "kernels.h"
#include "sgemm_mlas.h"
#include "sgemm_ordered.h"

#define CONV_WS_MAX (1024u * 1024u)         /* im2col bytes per item */
#define CONV_DW_ITEM_TAPS (1u << 18)        /* depthwise: multiply-adds per item */
#define CONV_DW_WS_MAX (2u * 1024u * 1024u) /* depthwise: padded channel bytes; larger ones take im2col */
#define CONV_MIN_PIXELS 64u                 /* pixels per item at least where the filters can be cut instead */
#define CONV_FILTER_ROUND 64u               /* filters per item: a multiple of this where they are cut */
#define CONV_COL_OFFSET 128u                /* the im2col in the work space: after its conv_col_tag */

/* Which block of pixels the im2col in a worker's work space holds: the items of one block's filter blocks
 * are claimed one after another, so a worker often gets two of them in a row and builds it once. */
typedef struct conv_col_tag {
    uint64_t image, group, block;
} conv_col_tag;

enum { CONV_IM2COL, CONV_1X1, CONV_DEPTHWISE };

typedef struct conv_plan {
    uint64_t images, groups;
    uint64_t pixels_per_item, blocks; /* output pixels per item, items per (image, group) */
    uint64_t mode;                    /* CONV_IM2COL, CONV_1X1 (no im2col) or CONV_DEPTHWISE */
    uint64_t channels_per_item;       /* CONV_DEPTHWISE: channels of one image per item; else filters per item */
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
    if (pr[HFX_P_CONV_TRANSPOSED] != 0 && pr[HFX_P_CONV_TRANSPOSED] != 1)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_CONV_TRANSPOSED), "op %u: conv TRANSPOSED = %d",
                         v->index, (int)pr[HFX_P_CONV_TRANSPOSED]);
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
    return hfx_no_empty_input(v, op);
}

/* The planes a depthwise conv runs on. A conv over planes one column wide (W = KW = OW = 1, no horizontal
 * padding: a 1-D conv along H, as FSMN and TDNN layers are exported) runs on the transposed [1, H] planes,
 * whose outputs conv_depthwise vectorizes along the row: the same taps in the same order per output. */
typedef struct dw_dims {
    uint64_t in_hw[2], k_hw[2], out_hw[2];
    int32_t pr[HFX_P_CONV_GROUP + 1];
} dw_dims;

static dw_dims dw_dims_of(const hfx_tensor *x, const hfx_tensor *w, const hfx_tensor *y, const int32_t *pr) {
    dw_dims d = {{x->dims[2], x->dims[3]}, {w->dims[2], w->dims[3]}, {y->dims[2], y->dims[3]}, {0}};
    memcpy(d.pr, pr, sizeof d.pr);
    if (d.in_hw[1] != 1 || d.k_hw[1] != 1 || d.out_hw[1] != 1 || pr[HFX_P_CONV_PAD_LEFT] != 0 ||
        pr[HFX_P_CONV_PAD_RIGHT] != 0)
        return d;
    static const int swapped[][2] = {{HFX_P_CONV_PAD_TOP, HFX_P_CONV_PAD_LEFT},
                                     {HFX_P_CONV_PAD_BOTTOM, HFX_P_CONV_PAD_RIGHT},
                                     {HFX_P_CONV_STRIDE_H, HFX_P_CONV_STRIDE_W},
                                     {HFX_P_CONV_DILATION_H, HFX_P_CONV_DILATION_W}};
    for (size_t i = 0; i < sizeof swapped / sizeof swapped[0]; i++) {
        d.pr[swapped[i][0]] = pr[swapped[i][1]];
        d.pr[swapped[i][1]] = pr[swapped[i][0]];
    }
    uint64_t *pairs[] = {d.in_hw, d.k_hw, d.out_hw};
    for (size_t i = 0; i < 3; i++) {
        uint64_t t = pairs[i][0];
        pairs[i][0] = pairs[i][1];
        pairs[i][1] = t;
    }
    return d;
}

/* Whether MLAS runs the conv on its input as is, B transposed (MlasConvPrepare's GemmDirect with
 * CblasTrans, ldb = W): one input channel per group, unit strides and dilations, no padding, a kernel
 * as wide as the input and not 1x1 (a 1-D conv along a column: FSMN's). Output pixel j's taps are then
 * B's row j, the kk floats at X + j W; one filter per group runs MLAS's 1-row kernel over them
 * (hfx_dot_rows_mlas), another order than its im2col + 1-row kernel; more filters, the same sgemm. */
static bool mlas_direct_trans(const hfx_tensor *x, const hfx_tensor *w, const int32_t *pr) {
    for (int i = HFX_P_CONV_PAD_TOP; i <= HFX_P_CONV_PAD_RIGHT; i++)
        if (pr[i] != 0) return false;
    return w->dims[1] == 1 && w->dims[3] == x->dims[3] && w->dims[2] * w->dims[3] > 1 && pr[HFX_P_CONV_STRIDE_H] == 1 &&
           pr[HFX_P_CONV_STRIDE_W] == 1 && pr[HFX_P_CONV_DILATION_H] == 1 && pr[HFX_P_CONV_DILATION_W] == 1;
}

/* Filters per item for blocks of `pixels` pixels: about HFX_GEMM_ITEM_FLOPS each, a multiple of
 * CONV_FILTER_ROUND, evened out. A block of a few pixels over all filters reads every weight for a few
 * pixels: VGG's 512 x 4608 at 7x7 was 25 items of 2 pixels, its 9.4 MB of weights read 25 times, 14x
 * ORT's time; cut by filters too, each weight is read once per block of pixels. */
static uint64_t conv_filters_per_item(uint64_t mg, uint64_t kk, uint64_t pixels) {
    uint64_t per = hfx_per_item_for(2 * kk * pixels, HFX_GEMM_ITEM_FLOPS);
    uint64_t blocks = hfx_ceil_div(mg, per);
    per = hfx_ceil_div(hfx_ceil_div(mg, blocks), CONV_FILTER_ROUND) * CONV_FILTER_ROUND;
    return per < mg ? per : mg;
}

/* Blocks of output pixels of one (image, group) of about HFX_GEMM_ITEM_FLOPS, the im2col of a block
 * at most CONV_WS_MAX bytes, evened out; blocks of at least CONV_MIN_PIXELS where the filters are cut
 * into blocks instead (not a transposed product's: its A is W^T). */
hfx_status hfx_plan_conv2d(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]], *w = &p->tensors[op->in[1]], *y = &p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    conv_plan pl = {0};
    pl.images = x->dims[0];
    pl.groups = (uint64_t)pr[HFX_P_CONV_GROUP];
    pl.kk = (uint64_t)w->dims[1] * w->dims[2] * w->dims[3];
    pl.pixels = (uint64_t)y->dims[2] * y->dims[3];
    uint64_t mg = w->dims[0] / pl.groups;
    bool one_by_one = w->dims[2] == 1 && w->dims[3] == 1 && pr[HFX_P_CONV_PAD_TOP] == 0 &&
                      pr[HFX_P_CONV_PAD_LEFT] == 0 && pr[HFX_P_CONV_PAD_BOTTOM] == 0 && pr[HFX_P_CONV_PAD_RIGHT] == 0 &&
                      pr[HFX_P_CONV_STRIDE_H] == 1 && pr[HFX_P_CONV_STRIDE_W] == 1;
    dw_dims d = dw_dims_of(x, w, y, pr);
    uint64_t sw = (uint64_t)d.pr[HFX_P_CONV_STRIDE_W];
    uint64_t padded_row =
        hfx_ceil_div(d.in_hw[1] + (uint64_t)d.pr[HFX_P_CONV_PAD_LEFT] + (uint64_t)d.pr[HFX_P_CONV_PAD_RIGHT], sw) * sw;
    uint64_t padded_bytes =
        (d.in_hw[0] + (uint64_t)d.pr[HFX_P_CONV_PAD_TOP] + (uint64_t)d.pr[HFX_P_CONV_PAD_BOTTOM]) * padded_row * 4;
    if (mg == 1 && w->dims[1] == 1 && !one_by_one && padded_bytes <= CONV_DW_WS_MAX) {
        pl.mode = CONV_DEPTHWISE;
        pl.channels_per_item = hfx_per_item_for(pl.pixels * pl.kk, CONV_DW_ITEM_TAPS);
        if (pl.channels_per_item > pl.groups) pl.channels_per_item = pl.groups;
        pl.blocks = hfx_ceil_div(pl.groups, pl.channels_per_item);
        pl.pixels_per_item = pl.pixels;
        op->plan.ws_bytes = (size_t)padded_bytes;
        HFX_PLAN_STORE(op, pl);
        return hfx_plan_set_items(op, pl.images * pl.blocks);
    }
    pl.mode = one_by_one ? CONV_1X1 : CONV_IM2COL;
    bool cut_filters = mg >= 2 * CONV_FILTER_ROUND && pr[HFX_P_CONV_TRANSPOSED] == 0 && !mlas_direct_trans(x, w, pr);
    uint64_t pb = hfx_per_item_for(2 * mg * pl.kk, HFX_GEMM_ITEM_FLOPS);
    if (cut_filters && pb < CONV_MIN_PIXELS) pb = CONV_MIN_PIXELS;
    if (pl.mode == CONV_IM2COL) {
        uint64_t cap = CONV_WS_MAX / (pl.kk * 4);
        if (cap == 0) cap = 1;
        if (pb > cap) pb = cap;
    }
    if (pb > pl.pixels) pb = pl.pixels;
    pl.blocks = hfx_ceil_div(pl.pixels, pb);
    pl.pixels_per_item = hfx_ceil_div(pl.pixels, pl.blocks);
    pl.channels_per_item = cut_filters ? conv_filters_per_item(mg, pl.kk, pl.pixels_per_item) : mg;
    op->plan.ws_bytes = pl.mode == CONV_1X1 ? 0 : CONV_COL_OFFSET + (size_t)(pl.kk * pl.pixels_per_item * 4);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, pl.images * pl.groups * hfx_ceil_div(mg, pl.channels_per_item) * pl.blocks);
}

typedef float dw_vec __attribute__((vector_size(32))); /* 8 lanes; plain SSE pairs without AVX */
#define DW_LANES 8

/* One padded input row of a channel into its `sw` phase planes of wq floats each: padded column j goes
 * to plane j % sw at j / sw, so that every tap of a strided output run reads contiguous floats. */
static inline void dw_split_row(const float *x, int64_t w, int64_t pl, int64_t wp, int64_t sw, int64_t wq, float *dst) {
    if (sw == 1) {
        memset(dst, 0, (size_t)wp * sizeof(float));
        if (x) memcpy(dst + pl, x, (size_t)w * sizeof(float));
        return;
    }
    memset(dst, 0, (size_t)(sw * wq) * sizeof(float));
    if (!x) return;
    for (int64_t r = 0; r < sw; r++) {
        /* plane r, index q holds input column q sw + r - pl: inside the row for q in [lo, hi) */
        int64_t lo = pl - r <= 0 ? 0 : (pl - r + sw - 1) / sw, hi = (w + pl - r + sw - 1) / sw;
        if (hi > wq) hi = wq;
        for (int64_t q = lo; q < hi; q++) dst[r * wq + q] = x[q * sw + r - pl];
    }
}

/* Geometry of a depthwise channel in the work space (see conv_depthwise). */
typedef struct dw_geom {
    int64_t kh, kw, dh, row; /* kernel, vertical dilation, floats per padded input row */
    int64_t wq, dws, dwr;    /* floats per phase plane; horizontal dilation = dws * sw + dwr */
    int64_t sw;
} dw_geom;

/* Outputs [ox, ox + n) of one output row (n <= 2 * DW_LANES), src at the row's first input row: the bias
 * plus every tap in (ki, kj) order. Full blocks use two 8-lane accumulators; a short block the same
 * order on a small array, so every output gets the same value whichever block computes it. */
static inline void dw_block(const float *restrict src, const float *restrict wc, float b, const dw_geom *g, int64_t ox,
                            int64_t n, float *restrict y) {
    dw_vec acc0 = (dw_vec){0} + b, acc1 = acc0;
    float acc[2 * DW_LANES];
    for (int64_t l = 0; l < n; l++) acc[l] = b;
    for (int64_t ki = 0; ki < g->kh; ki++) {
        int64_t r = 0, q = ox; /* the tap's phase plane and index in it */
        for (int64_t kj = 0; kj < g->kw; kj++) {
            const float *t = src + ki * g->dh * g->row + r * g->wq + q;
            float wv = wc[ki * g->kw + kj];
            if (n == 2 * DW_LANES) {
                dw_vec x0, x1; /* memcpy: unaligned loads, no dw_vec in a signature (psABI) */
                memcpy(&x0, t, sizeof x0);
                memcpy(&x1, t + DW_LANES, sizeof x1);
                acc0 += wv * x0;
                acc1 += wv * x1;
            } else {
                for (int64_t l = 0; l < n; l++) acc[l] += wv * t[l];
            }
            r += g->dwr, q += g->dws;
            if (r >= g->sw) r -= g->sw, q++;
        }
    }
    if (n == 2 * DW_LANES) {
        memcpy(y + ox, &acc0, sizeof acc0);
        memcpy(y + ox + DW_LANES, &acc1, sizeof acc1);
    } else {
        memcpy(y + ox, acc, (size_t)n * sizeof(float));
    }
}

#define DW_ROWS 4 /* output rows of a full block: 2 x DW_ROWS independent accumulators hide the add latency */

/* A full block: outputs [ox, ox + nvec DW_LANES) (nvec 1 or 2) of output rows oy .. oy + DW_ROWS - 1, same
 * order per output as dw_block. src is at output row oy's first input row, y at output row oy. */
static inline void dw_block_rows(const float *restrict src, const float *restrict wc, float b, const dw_geom *g,
                                 int64_t sh, int64_t ox, float *restrict y, int64_t ow, int nvec) {
    dw_vec acc[DW_ROWS][2];
    for (int i = 0; i < DW_ROWS; i++) acc[i][0] = acc[i][1] = (dw_vec){0} + b;
    for (int64_t ki = 0; ki < g->kh; ki++) {
        int64_t r = 0, q = ox;
        for (int64_t kj = 0; kj < g->kw; kj++) {
            const float *t = src + ki * g->dh * g->row + r * g->wq + q;
            float wv = wc[ki * g->kw + kj];
            for (int i = 0; i < DW_ROWS; i++) {
                for (int v = 0; v < nvec; v++) {
                    dw_vec x;
                    memcpy(&x, t + i * sh * g->row + v * DW_LANES, sizeof x);
                    acc[i][v] += wv * x;
                }
            }
            r += g->dwr, q += g->dws;
            if (r >= g->sw) r -= g->sw, q++;
        }
    }
    for (int i = 0; i < DW_ROWS; i++) memcpy(y + i * ow + ox, acc[i], (size_t)nvec * sizeof acc[i][0]);
}

/* One output of a row too short for blocks of lanes (ow < DW_LANES) under a wide, unit-stride, undilated
 * kernel (kw >= DW_LANES): a dot product over its taps in DW_LANES lanes, the lanes then added in order to
 * the bias. A 1-D conv along a column at one frame (FSMN streaming) is one such output per channel. */
static inline float dw_dot(const float *restrict src, const float *restrict wc, float b, const dw_geom *g) {
    float acc[DW_LANES] = {0};
    for (int64_t ki = 0; ki < g->kh; ki++) {
        const float *t = src + ki * g->dh * g->row, *wk = wc + ki * g->kw;
        int64_t kj = 0;
        for (; kj + DW_LANES <= g->kw; kj += DW_LANES)
            for (int l = 0; l < DW_LANES; l++) acc[l] += wk[kj + l] * t[kj + l];
        for (; kj < g->kw; kj++) acc[kj % DW_LANES] += wk[kj] * t[kj];
    }
    for (int l = 0; l < DW_LANES; l++) b += acc[l];
    return b;
}

/* One output row of a channel as ORT computes a depthwise conv (im2col, then MLAS's 1-row kernel over
 * the taps, the bias added after: sgemm_mlas.h), src at the row's first input row in the work space's
 * layout: tap t = (ki, kj) of output ox is at src + ki dh row + (kj dw % sw) wq + kj dw / sw + ox. */
HFX_VECTOR_KERNEL
static void dw_mlas_row(const float *src, const float *wc, float b, const dw_geom *g, int64_t ow, float *restrict y) {
    int64_t taps = g->kh * g->kw, dw = g->dws * g->sw + g->dwr;
    const float *restrict tp[4];
    memset(y, 0, (size_t)ow * sizeof(float));
    for (int64_t t0 = 0; t0 < taps;) {
        int64_t n = taps - t0 >= 4 ? 4 : taps - t0 >= 2 ? 2 : 1; /* 4 taps at a time, then 2, then 1 */
        for (int64_t i = 0; i < n; i++) {
            int64_t ki = (t0 + i) / g->kw, j = (t0 + i) % g->kw * dw;
            tp[i] = src + ki * g->dh * g->row + j % g->sw * g->wq + j / g->sw;
        }
        const float *w = wc + t0;
        if (n == 4)
            for (int64_t x = 0; x < ow; x++)
                y[x] = (((w[0] * tp[0][x] + w[1] * tp[1][x]) + w[2] * tp[2][x]) + w[3] * tp[3][x]) + y[x];
        else if (n == 2)
            for (int64_t x = 0; x < ow; x++) y[x] = (w[0] * tp[0][x] + w[1] * tp[1][x]) + y[x];
        else
            for (int64_t x = 0; x < ow; x++) y[x] = w[0] * tp[0][x] + y[x];
        t0 += n;
    }
    for (int64_t x = 0; x < ow; x++) y[x] += b;
}

/* Channels [c0, c1) of one image of a depthwise conv. Each channel is first rewritten into the work
 * space xp: zero-padded and split into stride phases, so that no tap needs a bounds check and every
 * load is contiguous (an unpadded channel with horizontal stride 1 is read where it is). Then the
 * output is computed in blocks of DW_ROWS rows x 16 (or, in rows under 16, 8) outputs; the last block
 * of a row or column overlaps the previous one rather than running short (same values: same order per
 * output), and planes under DW_ROWS x DW_LANES go row by row; rows under DW_LANES outputs with a wide
 * kernel go output by output (dw_dot). Not inlined (too big), hence its own AVX2 copy. */
HFX_VECTOR_KERNEL
static void conv_depthwise(const float *restrict X, const float *restrict W, const float *restrict bias,
                           float *restrict Y, float *restrict xp, uint64_t c0, uint64_t c1, const uint64_t in_hw[2],
                           const uint64_t k_hw[2], const uint64_t out_hw[2], const int32_t *pr, bool mlas) {
    int64_t h = (int64_t)in_hw[0], w = (int64_t)in_hw[1], oh = (int64_t)out_hw[0], ow = (int64_t)out_hw[1];
    int64_t sh = pr[HFX_P_CONV_STRIDE_H], sw = pr[HFX_P_CONV_STRIDE_W], dw = pr[HFX_P_CONV_DILATION_W];
    int64_t pt = pr[HFX_P_CONV_PAD_TOP], pl = pr[HFX_P_CONV_PAD_LEFT];
    int64_t hp = h + pt + pr[HFX_P_CONV_PAD_BOTTOM], wp = w + pl + pr[HFX_P_CONV_PAD_RIGHT];
    int64_t wq = (wp + sw - 1) / sw;
    dw_geom g = {(int64_t)k_hw[0], (int64_t)k_hw[1], pr[HFX_P_CONV_DILATION_H], sw * wq, wq, dw / sw, dw % sw, sw};
    int nvec = ow >= 2 * DW_LANES ? 2 : 1; /* vectors per row of a full block */
    bool full = oh >= DW_ROWS && ow >= DW_LANES;
    int64_t block = full ? nvec * DW_LANES : ow < 2 * DW_LANES ? ow : 2 * DW_LANES;
    /* unpadded with horizontal stride 1, a channel already has the work space's layout */
    bool in_place = hp == h && wp == w && sw == 1;
    bool dot = ow < DW_LANES && g.kw >= DW_LANES && sw == 1 && dw == 1;
    for (uint64_t c = c0; c < c1; c++) {
        const float *xc = X + c * (uint64_t)(h * w), *wc = W + c * (uint64_t)(g.kh * g.kw);
        const float *src = in_place ? xc : xp;
        for (int64_t iy = 0; iy < hp && !in_place; iy++)
            dw_split_row(iy >= pt && iy < pt + h ? xc + (iy - pt) * w : NULL, w, pl, wp, sw, wq, xp + iy * g.row);
        float b = bias ? bias[c] : 0.0f;
        float *yc = Y + c * (uint64_t)(oh * ow);
        if (mlas) {
            for (int64_t oy = 0; oy < oh; oy++) dw_mlas_row(src + oy * sh * g.row, wc, b, &g, ow, yc + oy * ow);
            continue;
        }
        if (dot) {
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) yc[oy * ow + ox] = dw_dot(src + oy * sh * g.row + ox, wc, b, &g);
            continue;
        }
        int64_t rows = full ? DW_ROWS : 1;
        for (int64_t oy = 0; oy < oh; oy += rows) {
            int64_t y0 = oy + rows <= oh ? oy : oh - rows;
            for (int64_t ox = 0; ox < ow; ox += block) {
                int64_t x0 = ox + block <= ow ? ox : ow - block;
                if (full && nvec == 2) dw_block_rows(src + y0 * sh * g.row, wc, b, &g, sh, x0, yc + y0 * ow, ow, 2);
                else if (full) dw_block_rows(src + y0 * sh * g.row, wc, b, &g, sh, x0, yc + y0 * ow, ow, 1);
                else dw_block(src + y0 * sh * g.row, wc, b, &g, x0, block, yc + y0 * ow);
            }
        }
    }
}

/* Output pixels [p0, p1) of pix of one filter as mlas_direct_trans's GEMM: X the filter's input channel
 * (rows w floats long), Y at pixel p0, the bias added after the sums. */
static void conv_direct_row(const float *X, uint64_t w, const float *f, uint64_t kk, uint64_t p0, uint64_t p1,
                            uint64_t pix, const float *bias, float *Y) {
    hfx_dot_rows_mlas(f, X, w, kk, p0, p1, pix, false, Y, 1);
    if (bias)
        for (uint64_t q = 0; q < p1 - p0; q++) Y[q] += *bias;
}

/* Filters [f0, f0 + rows) of a group's mg: Y[rows x np] (+)= W[f0:f0 + rows, kk] col[kk x np] in the op's sum
 * order, W the group's filters, Y and bias at filter f0. MLAS (ORT's Conv: im2col + its sgemm over the image's
 * `pix` output pixels, its B's rows mlas_ldb apart; a ConvTranspose's W^T X: A transposed, `ta`) adds the bias
 * after the sums, the others start from it (gb); which of its kernels runs follows the group's mg, whichever
 * of its filters an item has (each filter's sums are its own in every kernel). */
static void conv_sum(uint8_t order, uint64_t mlas_ldb, bool ta, uint64_t mg, uint64_t f0, uint64_t rows, uint64_t np,
                     uint64_t kk, uint64_t pix, const float *W, const float *col, uint64_t ldb, const float *bias,
                     float gb, float *Y) {
    const float *Wf = W + f0 * kk;
    if (order == HFX_SUM_HEXAGON) {
        hfx_sgemm_ordered(rows, np, kk, 1.0f, (hfx_strided){Wf, kk, 1}, (hfx_strided){col, ldb, 1}, gb != 0.0f, Y, pix);
        return;
    }
    if (order == HFX_SUM_BLAS) {
        scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)np, (blasint)kk, 1.0f, Wf,
                          (blasint)kk, col, (blasint)ldb, gb, Y, (blasint)pix);
        return;
    }
    bool column = pix == 1 && mlas_ldb == 1; /* one output pixel, B a column: MLAS swaps A and B */
    if (mg == 1 && !ta)                      /* one filter per group: MLAS's 1-row kernel */
        hfx_sgemv_mlas(W, col, ldb, kk, np, false, Y);
    else if (column && ta) /* A transposed: its 1-row kernel, per filter (never cut into blocks) */
        for (uint64_t r = 0; r < mg; r++) hfx_sgemv_mlas(col, W + r * kk, 1, kk, 1, false, Y + r * pix);
    else if (column) /* its 1-row kernel, B transposed, over the filters */
        hfx_dot_rows_mlas(col, W, kk, kk, f0, f0 + rows, mg, false, Y, pix);
    else
        hfx_sgemm_mlas(rows, np, kk, 1.0f, (hfx_strided){Wf, kk, 1}, (hfx_strided){col, ldb, 1}, false, Y, pix,
                       hfx_mlas_stride_k(pix, kk, ta));
    if (bias)
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t q = 0; q < np; q++) Y[r * pix + q] += bias[r];
}

/* The im2col of output pixels [p0, p0 + np) of one (image, group): X its cg input channels (h x w),
 * col[(ci kh + ki) kw + kj][q] the tap's input for pixel p0 + q, zero outside the image. */
static void conv_im2col(const float *X, uint64_t cg, uint64_t h, uint64_t w, uint64_t kh, uint64_t kw, uint64_t ow,
                        const int32_t *pr, uint64_t p0, uint64_t np, float *col) {
    int64_t sh = pr[HFX_P_CONV_STRIDE_H], sw = pr[HFX_P_CONV_STRIDE_W];
    int64_t dh = pr[HFX_P_CONV_DILATION_H], dw = pr[HFX_P_CONV_DILATION_W];
    int64_t pt = pr[HFX_P_CONV_PAD_TOP], pl = pr[HFX_P_CONV_PAD_LEFT];
    for (uint64_t ci = 0; ci < cg; ci++) {
        const float *xc = X + ci * h * w;
        for (uint64_t ki = 0; ki < kh; ki++) {
            for (uint64_t kj = 0; kj < kw; kj++) {
                float *row = col + ((ci * kh + ki) * kw + kj) * np;
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
    uint64_t groups = plan.groups, pb = plan.pixels_per_item, nb = plan.blocks, kk = plan.kk;
    uint64_t pix = plan.pixels;
    if (plan.mode == CONV_DEPTHWISE) {
        uint64_t n = item / nb, c0 = (item % nb) * plan.channels_per_item;
        uint64_t c1 = c0 + plan.channels_per_item < groups ? c0 + plan.channels_per_item : groups;
        dw_dims d = dw_dims_of(xt, wt, yt, pr);
        const float *bias = op->n_in == 3 ? (const float *)a->in[2] : NULL;
        if (op->sum_order == HFX_SUM_ORT && mlas_direct_trans(xt, wt, pr)) {
            uint64_t hw = xt->dims[2] * xt->dims[3];
            const float *X = (const float *)a->in[0] + n * groups * hw, *W = (const float *)a->in[1];
            for (uint64_t c = c0; c < c1; c++)
                conv_direct_row(X + c * hw, xt->dims[3], W + c * kk, kk, 0, pix, pix, bias ? bias + c : NULL,
                                (float *)a->out[0] + (n * groups + c) * pix);
            return;
        }
        conv_depthwise((const float *)a->in[0] + n * groups * d.in_hw[0] * d.in_hw[1], (const float *)a->in[1], bias,
                       (float *)a->out[0] + n * groups * pix, a->ws, c0, c1, d.in_hw, d.k_hw, d.out_hw, d.pr,
                       op->sum_order == HFX_SUM_ORT);
        return;
    }
    uint64_t c = xt->dims[1], h = xt->dims[2], w = xt->dims[3];
    uint64_t m = wt->dims[0], mg = m / groups, cg = c / groups;
    uint64_t fpi = plan.channels_per_item, fblocks = hfx_ceil_div(mg, fpi);
    /* a block's filter blocks one after another: see conv_col_tag */
    uint64_t fbi = item % fblocks, pbi = (item / fblocks) % nb, g = (item / fblocks / nb) % groups;
    uint64_t n = item / fblocks / nb / groups, f0 = fbi * fpi, rows = f0 + fpi < mg ? fpi : mg - f0;
    uint64_t kh = wt->dims[2], kw = wt->dims[3], ow = yt->dims[3];
    uint64_t p0 = pbi * pb, p1 = p0 + pb < pix ? p0 + pb : pix, np = p1 - p0;

    const float *X = (const float *)a->in[0] + (n * c + g * cg) * h * w;
    const float *W = (const float *)a->in[1] + g * mg * kk;
    float *Y = (float *)a->out[0] + (n * m + g * mg + f0) * pix + p0;

    const float *bias = op->n_in == 3 ? (const float *)a->in[2] + g * mg + f0 : NULL;
    bool direct = op->sum_order == HFX_SUM_ORT && mlas_direct_trans(xt, wt, pr);
    if (direct && mg == 1) {
        conv_direct_row(X, w, W, kk, p0, p1, pix, bias, Y);
        return;
    }
    float gb = 0.0f;
    if (bias && op->sum_order != HFX_SUM_ORT) { /* MLAS adds the bias to the sums (conv_sum) */
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t q = 0; q < np; q++) Y[r * pix + q] = bias[r];
        gb = 1.0f;
    }
    const float *col;
    uint64_t ldb;
    if (plan.mode == CONV_1X1) {
        col = X + p0;
        ldb = pix;
    } else {
        conv_col_tag *tag = a->ws, want = {n, g, pbi};
        float *ws = (float *)((uint8_t *)a->ws + CONV_COL_OFFSET);
        bool built = a->ws_kept && memcmp(tag, &want, sizeof want) == 0;
        *tag = want;
        if (!built) conv_im2col(X, cg, h, w, kh, kw, ow, pr, p0, np, ws);
        col = ws;
        ldb = np;
    }
    conv_sum(op->sum_order, direct ? w : pix, pr[HFX_P_CONV_TRANSPOSED] != 0, mg, f0, rows, np, kk, pix, W, col, ldb,
             bias, gb, Y);
}
