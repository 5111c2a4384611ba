/* qpool.c - the integer pooling ops of QDQ groups, exactly as dsp/ref/ref_qpool.h defines them:
 * QGLOBAL_AVGPOOL (an item is a block of (image, channel) rows) and QMAXPOOL (MAXPOOL's windows on
 * u8/i8, an item is a block of output rows) and QAVGPOOL (AVGPOOL's windows, the same items).
 * Portable C on the host; on Hexagon builds (HFX_HVX), hvx/hvx_qpool.c: QGLOBAL_AVGPOOL's sums by
 * vrmpy, QMAXPOOL rows of horizontal stride 1 or 2 by vmax with the requantisation as a 256-entry
 * table (windows with no tap inside X, dilations above 1 only, stay scalar); QAVGPOOL's window sums
 * as integers (u16, vmpy then vadd), each output from them in fixed point (or an f32 estimate) unless
 * it lies too near a rounding tie for that to be provably the reference's (then, and for kernels
 * above 257 taps, the f32 taps). */
#include "../../ref/ref_qpool.h"
#include "kernels.h"

#ifdef HFX_HVX
#include "../../hvx/hvx_kernels.h"
#include "../../hvx/hvx_qpool.h"
#endif

static bool narrow_int(uint32_t d) { return d == HFX_DTYPE_U8 || d == HFX_DTYPE_I8; }
static int32_t type_min(uint32_t d) { return d == HFX_DTYPE_U8 ? 0 : INT8_MIN; }
static int32_t type_max(uint32_t d) { return d == HFX_DTYPE_U8 ? UINT8_MAX : INT8_MAX; }

static inline int32_t load_narrow(const void *p, uint32_t dtype, uint64_t i) {
    return dtype == HFX_DTYPE_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

static inline void store_narrow(void *p, uint32_t dtype, uint64_t i, int32_t v) {
    if (dtype == HFX_DTYPE_U8) ((uint8_t *)p)[i] = (uint8_t)v;
    else ((int8_t *)p)[i] = (int8_t)v;
}

static hfx_status check_dtypes(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    bool in_ok = narrow_int(t[op->in[0]].dtype), out_ok = narrow_int(t[op->out[0]].dtype);
    if (in_ok && out_ok) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_DTYPE, in_ok ? HFX_OUT_OFF(v, 0) : HFX_IN_OFF(v, 0),
                     "op %u (%s): X and Y must be u8 or i8", v->index, op->desc->label);
}

/* zero point params in their tensor's range, scale params finite (and > 0 when `positive`) */
static hfx_status check_zero(hfx_vctx *v, const hfx_op *op, uint32_t slot, uint32_t tensor) {
    uint32_t d = v->p->tensors[tensor].dtype;
    if (op->params[slot] >= type_min(d) && op->params[slot] <= type_max(d)) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, slot), "op %u (%s): zero point param %u outside its type",
                     v->index, op->desc->label, slot);
}

static hfx_status check_scale(hfx_vctx *v, const hfx_op *op, uint32_t slot, bool positive) {
    int32_t bits = op->params[slot];
    if (hfx_finite_f32(bits) && (!positive || (bits > 0 && hfx_f32_from_bits(bits) > 0.0f))) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, slot), "op %u (%s): scale param %u must be finite%s",
                     v->index, op->desc->label, slot, positive ? " and > 0" : "");
}

/* ---- QGLOBAL_AVGPOOL ---- */

typedef struct qgap_plan {
    uint64_t rows, spatial, rows_per_item;
} qgap_plan;

hfx_status hfx_validate_qglobal_avgpool(hfx_vctx *v, hfx_op *op) {
    hfx_status st = check_dtypes(v, op);
    if (!st) st = check_scale(v, op, HFX_P_QGAP_SCALE, false);
    if (!st) st = check_zero(v, op, HFX_P_QGAP_ZERO_X, op->in[0]);
    if (!st) st = check_zero(v, op, HFX_P_QGAP_ZERO_Y, op->out[0]);
    return st ? st : hfx_validate_global_pool(v, op);
}

hfx_status hfx_plan_qglobal_avgpool(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]];
    qgap_plan pl = {(uint64_t)x->dims[0] * x->dims[1], 0, 0};
    pl.spatial = x->numel / pl.rows;
    pl.rows_per_item = hfx_per_item_for(pl.spatial, HFX_EW_CHUNK);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

HFX_VECTOR_KERNEL
void hfx_run_qglobal_avgpool(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    uint32_t tx = a->prog->tensors[op->in[0]].dtype, ty = a->prog->tensors[op->out[0]].dtype;
    qgap_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t r0, r1;
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &r0, &r1);
    float scale = hfx_f32_from_bits(op->params[HFX_P_QGAP_SCALE]);
    for (uint64_t r = r0; r < r1; r++) {
        uint32_t sum = 0;
#ifdef HFX_HVX
        sum = hvx_sum_bytes((const uint8_t *)a->in[0] + r * pl.spatial, (size_t)pl.spatial, tx == HFX_DTYPE_I8);
#else
        if (tx == HFX_DTYPE_U8)
            for (uint64_t i = 0; i < pl.spatial; i++) sum += ((const uint8_t *)a->in[0])[r * pl.spatial + i];
        else
            for (uint64_t i = 0; i < pl.spatial; i++)
                sum += (uint32_t)(int32_t)((const int8_t *)a->in[0])[r * pl.spatial + i];
#endif
        int32_t q = ref_qglobal_avgpool((int32_t)sum, (uint32_t)pl.spatial, op->params[HFX_P_QGAP_ZERO_X], scale,
                                        op->params[HFX_P_QGAP_ZERO_Y], type_min(ty), type_max(ty));
        store_narrow(a->out[0], ty, r, q);
    }
}

/* ---- QMAXPOOL ---- */

typedef struct qmaxpool_plan {
    uint64_t rows, rows_per_item; /* output rows (N*C*OH) */
} qmaxpool_plan;

hfx_status hfx_validate_qmaxpool(hfx_vctx *v, hfx_op *op) {
    hfx_status st = check_dtypes(v, op);
    if (!st && op->params[HFX_P_POOL_COUNT_INCLUDE_PAD] != 0)
        st = hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_POOL_COUNT_INCLUDE_PAD),
                       "op %u (%s): count_include_pad must be 0", v->index, op->desc->label);
    if (!st) st = check_scale(v, op, HFX_P_QPOOL_SCALE_X, true);
    if (!st) st = check_scale(v, op, HFX_P_QPOOL_SCALE_Y, true);
    if (!st) st = check_zero(v, op, HFX_P_QPOOL_ZERO_X, op->in[0]);
    if (!st) st = check_zero(v, op, HFX_P_QPOOL_ZERO_Y, op->out[0]);
    return st ? st : hfx_validate_pool2d(v, op);
}

hfx_status hfx_plan_qmaxpool(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    uint64_t taps = (uint64_t)op->params[HFX_P_POOL_KERNEL_H] * (uint64_t)op->params[HFX_P_POOL_KERNEL_W];
    qmaxpool_plan pl = {y->numel / y->dims[3], hfx_per_item_for(y->dims[3] * taps, HFX_EW_CHUNK)};
    HFX_PLAN_STORE(op, pl);
#ifdef HFX_HVX
    /* the prepared requantisation table, then one padded row of window-row maxima (its taps reach at
     * most stride - 1 past the right pad) and the slack of the vector loads and stores */
    const int32_t *pr = op->params;
    op->plan.ws_bytes = 256 + (size_t)p->tensors[op->in[0]].dims[3] + (size_t)pr[HFX_P_POOL_PAD_LEFT] +
                        (size_t)pr[HFX_P_POOL_PAD_RIGHT] + (size_t)pr[HFX_P_POOL_STRIDE_W] + HVX_MAXPOOL_SLACK + 128;
#endif
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

/* the max of one window of the plane x[H][W], or INT32_MIN when no tap is inside */
static int32_t window_max(const void *x, uint32_t tx, uint64_t plane, int64_t H, int64_t W, int64_t h0, int64_t w0,
                          const int32_t *pr) {
    int32_t m = INT32_MIN;
    for (int64_t i = 0; i < pr[HFX_P_POOL_KERNEL_H]; i++) {
        int64_t h = h0 + i * pr[HFX_P_POOL_DILATION_H];
        if (h < 0 || h >= H) continue;
        for (int64_t j = 0; j < pr[HFX_P_POOL_KERNEL_W]; j++) {
            int64_t w = w0 + j * pr[HFX_P_POOL_DILATION_W];
            if (w < 0 || w >= W) continue;
            int32_t t = load_narrow(x, tx, plane + (uint64_t)(h * W + w));
            m = t > m ? t : m;
        }
    }
    return m;
}

#ifdef HFX_HVX
/* Q(DQ(m)) is m itself when both sides have the same type and parameters and the scale keeps every
 * (m - z) * s normal: the quotient is then m - z within 2^-15 and rounds back to it. */
static bool requant_is_identity(const int32_t *pr, uint32_t tx, uint32_t ty) {
    float s = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_X]);
    return tx == ty && pr[HFX_P_QPOOL_SCALE_X] == pr[HFX_P_QPOOL_SCALE_Y] &&
           pr[HFX_P_QPOOL_ZERO_X] == pr[HFX_P_QPOOL_ZERO_Y] && s >= 0x1p-100f && s <= 0x1p100f;
}

/* the vlut32 table in ws of the output byte of each window-max byte; NULL when it is the identity */
static const uint8_t *requant_lut(const int32_t *pr, uint32_t tx, uint32_t ty, void *ws) {
    if (requant_is_identity(pr, tx, ty)) return NULL;
    float sx = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_X]), sy = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_Y]);
    int8_t rq[256];
    for (int b = 0; b < 256; b++) {
        int32_t m = tx == HFX_DTYPE_U8 ? b : (int8_t)b;
        rq[b] = (int8_t)ref_qmaxpool_requant(m, sx, pr[HFX_P_QPOOL_ZERO_X], sy, pr[HFX_P_QPOOL_ZERO_Y], type_min(ty),
                                             type_max(ty));
    }
    hvx_lut_i8_prepare(rq, ws);
    return ws;
}

/* QMAXPOOL's HVX row path as an item runs it: a row of ws holds the window rows' max between pads
 * of the type's minimum (no tap inside X is below it), written once per item; the taps' max over it
 * gives outputs [first, end) of each row: every output (dilation 1: pads are below the kernel, so
 * each window has a tap inside), the interior (every tap inside) with a larger dilation, none with a
 * stride above 2. */
typedef struct qmaxpool_hvx {
    const uint8_t *x, *x_end, *lut;
    uint8_t *t, *y;
    int64_t H, W, dh, kh, pl;
    int s, kw, dw, is_signed;
    uint64_t first, end;
} qmaxpool_hvx;

static qmaxpool_hvx qmaxpool_hvx_of(const hfx_kernel_args *a, const uint8_t *lut) {
    const hfx_tensor *x = &a->prog->tensors[a->op->in[0]];
    const int32_t *pr = a->op->params;
    qmaxpool_hvx h = {a->in[0], (const uint8_t *)a->in[0] + x->numel, lut, (uint8_t *)a->ws + 256, a->out[0],
                      x->dims[2], x->dims[3], pr[HFX_P_POOL_DILATION_H], pr[HFX_P_POOL_KERNEL_H],
                      pr[HFX_P_POOL_PAD_LEFT], pr[HFX_P_POOL_STRIDE_W], pr[HFX_P_POOL_KERNEL_W],
                      pr[HFX_P_POOL_DILATION_W], x->dtype == HFX_DTYPE_I8, 0, 0};
    int64_t ow_n = a->prog->tensors[a->op->out[0]].dims[3], first = 0, end = ow_n;
    if (h.s != 1 && h.s != 2) return h;
    if (h.dw > 1) { /* the interior: ow * s >= pl and ow * s <= last */
        int64_t last = h.W - 1 - (int64_t)(h.kw - 1) * h.dw + h.pl;
        first = (h.pl + h.s - 1) / h.s, end = last < 0 ? 0 : last / h.s + 1 < ow_n ? last / h.s + 1 : ow_n;
        if (end <= first) return h;
    }
    int64_t extent = (ow_n - 1) * h.s + (int64_t)(h.kw - 1) * h.dw + 1; /* the padded row's bytes the taps read */
    memset(h.t, h.is_signed ? 0x80 : 0, (size_t)h.pl);
    if (extent > h.pl + h.W) memset(h.t + h.pl + h.W, h.is_signed ? 0x80 : 0, (size_t)(extent - h.pl - h.W));
    h.first = (uint64_t)first, h.end = (uint64_t)end;
    return h;
}

/* One output row (window rows from h0 of the plane at `plane`, outputs at y_at): [*oa, *ob), the
 * outputs written, empty when the window has no row inside X */
static void qmaxpool_row_hvx(const qmaxpool_hvx *h, uint64_t plane, int64_t h0, uint64_t y_at, uint64_t *oa,
                             uint64_t *ob) {
    int64_t i0, i1; /* the window rows inside X; dilation 1 without a division (a library call here) */
    if (h->dh == 1) i0 = h0 < 0 ? -h0 : 0, i1 = h->H - h0;
    else i0 = h0 < 0 ? (-h0 + h->dh - 1) / h->dh : 0, i1 = h0 < h->H ? (h->H - h0 + h->dh - 1) / h->dh : 0;
    if (i1 > h->kh) i1 = h->kh;
    *oa = *ob = 0;
    if (h->first >= h->end || i0 >= i1) return;
    hvx_maxpool_rows(h->x + plane + (uint64_t)((h0 + i0 * h->dh) * h->W), (size_t)(h->dh * h->W), (int)(i1 - i0),
                     (size_t)h->W, h->is_signed, h->x_end, h->t + h->pl);
    hvx_maxpool_taps(h->t + h->first * (uint64_t)h->s, (size_t)(h->end - h->first), h->s, h->kw, h->dw, h->is_signed,
                     h->lut, h->y + y_at + h->first);
    *oa = h->first, *ob = h->end;
}
#endif

HFX_VECTOR_KERNEL
void hfx_run_qmaxpool(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *x = &a->prog->tensors[op->in[0]], *y = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    qmaxpool_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t r0, r1, oh_n = y->dims[2], ow_n = y->dims[3];
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &r0, &r1);
    float sx = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_X]), sy = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_Y]);
    int32_t lo = type_min(y->dtype), hi = type_max(y->dtype);
#ifdef HFX_HVX
    qmaxpool_hvx hv = qmaxpool_hvx_of(a, requant_lut(pr, x->dtype, y->dtype, a->ws));
#endif
    uint64_t plane_n = r0 / oh_n, oh = r0 % oh_n; /* row r is output row oh of plane plane_n */
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t plane = plane_n * x->dims[2] * x->dims[3], oa = 0, ob = 0; /* [oa, ob): done on HVX */
        int64_t h0 = (int64_t)oh * pr[HFX_P_POOL_STRIDE_H] - pr[HFX_P_POOL_PAD_TOP];
#ifdef HFX_HVX
        qmaxpool_row_hvx(&hv, plane, h0, r * ow_n, &oa, &ob);
#endif
        for (uint64_t ow = 0; ow < ow_n; ow++) {
            if (ow == oa && ob > oa) ow = ob;
            if (ow >= ow_n) break;
            int64_t w0 = (int64_t)ow * pr[HFX_P_POOL_STRIDE_W] - pr[HFX_P_POOL_PAD_LEFT];
            int32_t m = window_max(a->in[0], x->dtype, plane, x->dims[2], x->dims[3], h0, w0, pr);
            int32_t q = m == INT32_MIN ? lo
                                       : ref_qmaxpool_requant(m, sx, pr[HFX_P_QPOOL_ZERO_X], sy,
                                                              pr[HFX_P_QPOOL_ZERO_Y], lo, hi);
            store_narrow(a->out[0], y->dtype, r * ow_n + ow, q);
        }
        if (++oh == oh_n) oh = 0, plane_n++;
    }
}

/* ---- QAVGPOOL ---- */

typedef struct qavgpool_plan {
    uint64_t rows, rows_per_item; /* output rows (N*C*OH) */
} qavgpool_plan;

hfx_status hfx_validate_qavgpool(hfx_vctx *v, hfx_op *op) {
    hfx_status st = check_dtypes(v, op);
    for (uint32_t slot = HFX_P_POOL_DILATION_H; !st && slot <= HFX_P_POOL_DILATION_W; slot++)
        if (op->params[slot] != 1) /* QLinearAveragePool has no dilations */
            st = hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, slot), "op %u (%s): dilations must be 1", v->index,
                           op->desc->label);
    if (!st) st = check_scale(v, op, HFX_P_QPOOL_SCALE_X, false);
    if (!st) st = check_scale(v, op, HFX_P_QPOOL_SCALE_Y, true);
    if (!st) st = check_zero(v, op, HFX_P_QPOOL_ZERO_X, op->in[0]);
    if (!st) st = check_zero(v, op, HFX_P_QPOOL_ZERO_Y, op->out[0]);
    return st ? st : hfx_validate_pool2d(v, op);
}

hfx_status hfx_plan_qavgpool(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    uint64_t taps = (uint64_t)op->params[HFX_P_POOL_KERNEL_H] * (uint64_t)op->params[HFX_P_POOL_KERNEL_W];
    qavgpool_plan pl = {y->numel / y->dims[3], hfx_per_item_for(y->dims[3] * taps, HFX_EW_CHUNK)};
    HFX_PLAN_STORE(op, pl);
#ifdef HFX_HVX
    /* one padded row of column sums (its taps reach at most stride - 1 past the right pad), one row
     * of window sums (u16), each with the slack of the vector loads, one row of near-tie flags */
    const int32_t *pr = op->params;
    op->plan.ws_bytes = 2 * ((size_t)p->tensors[op->in[0]].dims[3] + (size_t)pr[HFX_P_POOL_PAD_LEFT] +
                             (size_t)pr[HFX_P_POOL_PAD_RIGHT] + (size_t)pr[HFX_P_POOL_STRIDE_W] + HVX_AVGPOOL_SLACK +
                             (size_t)y->dims[3] + 128) +
                        (size_t)y->dims[3] + 136;
#endif
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

/* [start, end) of one window along an axis of length n, clipped to it (ORT's hstart/hend) */
static void clip_window(int64_t start, int64_t kernel, int64_t n, int64_t *b, int64_t *e) {
    *e = start + kernel < n ? start + kernel : n;
    *b = start > 0 ? start : 0;
}

/* the dequantized value of each code, indexed by x - the type's minimum; filled when first needed */
typedef struct qavg_taps {
    float v[256];
    bool ready;
} qavg_taps;

/* the reference output of one window [h0, h1) x [w0, w1) of the plane at `plane`: its taps summed in
 * f32 row by row */
static int32_t window_avg(const hfx_kernel_args *a, qavg_taps *tp, uint64_t plane, int64_t h0, int64_t h1, int64_t w0,
                          int64_t w1) {
    const hfx_tensor *x = &a->prog->tensors[a->op->in[0]], *y = &a->prog->tensors[a->op->out[0]];
    const int32_t *pr = a->op->params;
    if (!tp->ready) {
        float sx = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_X]);
        for (int32_t i = 0; i < 256; i++) tp->v[i] = ref_qavgpool_tap(i + type_min(x->dtype), sx, pr[HFX_P_QPOOL_ZERO_X]);
    }
    tp->ready = true;
    float sum = 0.0f;
    const uint8_t *row = (const uint8_t *)a->in[0] + plane + (uint64_t)(h0 * x->dims[3] + w0);
    uint8_t flip = x->dtype == HFX_DTYPE_I8 ? 0x80 : 0; /* the byte's index: x - the type's minimum */
    for (int64_t h = h0; h < h1; h++, row += x->dims[3])
        for (int32_t j = 0; j < (int32_t)(w1 - w0); j++) sum += tp->v[row[j] ^ flip];
    int64_t count = pr[HFX_P_POOL_COUNT_INCLUDE_PAD] ? (int64_t)pr[HFX_P_POOL_KERNEL_H] * pr[HFX_P_POOL_KERNEL_W]
                                                     : (h1 - h0) * (w1 - w0);
    return ref_qavgpool_out(sum, (float)count, hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_Y]), pr[HFX_P_QPOOL_ZERO_Y],
                            type_min(y->dtype), type_max(y->dtype));
}

#ifdef HFX_HVX
/* QAVGPOOL's HVX path. The reference sums the f32 taps s_x (x - z_x); here S, the sum of the
 * integers x - z_x, comes from the vector sums (u16: at most 257 taps), and an estimate e of
 * R = s_x S / (c s_y) + z_y (real) is rounded instead of the reference's t when both provably round
 * alike. t is within d of R: the reference's taps and sum are off by at most 1.01 n u |s_x| K (n taps,
 * K = sum of |x - z_x| <= n k, k: the largest |x - z_x|, u = 2^-24), its division by c >= n and by
 * s_y make this <= 1.01 N u k r (N = kh kw, r = |s_x / s_y|), and three roundings of the result add
 * 4 u A, A = k r + |z_y| + 1 >= |R| + 1. e is one of
 *   scalar: f32(S m) + z_y, m = f32(s_x / f32(c s_y)): within 8 u A of R;
 *   vector: (S M) / 2^shift + z_y exactly (hvx_avgpool_finish), M = m rounded to 30 - b bits (S < 2^b):
 *           within 2^-(shift+1) S + 3 u A of R.
 * An e farther than both bounds (and 2^-20 A more) from every half-integer rounds as t. Other
 * outputs, windows of no tap, and scales outside [2^-60, 2^60] or ratios outside [2^-40, 2^40]
 * (where subnormals could appear) take the reference's f32 loop. */
typedef struct qavgpool_hvx {
    const uint8_t *x, *x_end;
    uint16_t *t, *sums; /* the padded row of column sums; the window sums of one output row */
    uint8_t *flags;     /* the near-tie flags of the vector outputs */
    int64_t W, pl;
    int s, kw, is_signed, on;
    int32_t zxu, full, k; /* z_x minus the type's minimum (the bias of the sums); kh kw; max |x - z_x| */
    float sx, sy, zy, m_full, lim, d, A;
    uint64_t first, end; /* the output columns whose windows lie inside X along W */
    int64_t fx_rows;     /* the window rows of the vector outputs' parameters below (0: none yet) */
    int32_t fx_ok, fx_mul, fx_shift, fx_margin;
} qavgpool_hvx;

static bool scale_in_range(float s) { return (s >= 0x1p-60f && s <= 0x1p60f) || (s <= -0x1p-60f && s >= -0x1p60f); }

/* the bounds of the estimates; false when they leave no room */
static bool qavgpool_bounds(qavgpool_hvx *h) {
    if (h->full > 257 || !scale_in_range(h->sx) || !scale_in_range(h->sy)) return false;
    float r = h->sx / h->sy, k = (float)h->k;
    r = r < 0.0f ? -r : r;
    if (r < 0x1p-40f || r > 0x1p40f) return false;
    h->A = (k * r + (h->zy < 0.0f ? -h->zy : h->zy) + 1.0f) * 1.001f;
    h->d = 1.03f * (float)h->full * k * r * 0x1p-24f + h->A * 0x1p-22f;
    h->lim = 0.5f - h->d - h->A * 0x1p-21f - h->A * 0x1p-20f;
    if (h->A >= 0x1p21f || h->lim < 0.25f) return false;
    float cs = (float)h->full * h->sy; /* the steps of m: two roundings */
    h->m_full = h->sx / cs;
    return true;
}

static qavgpool_hvx qavgpool_hvx_of(const hfx_kernel_args *a) {
    const hfx_tensor *x = &a->prog->tensors[a->op->in[0]];
    const int32_t *pr = a->op->params;
    int64_t ow_n = a->prog->tensors[a->op->out[0]].dims[3];
    int32_t zxu = pr[HFX_P_QPOOL_ZERO_X] - type_min(x->dtype);
    qavgpool_hvx h = {.x = a->in[0], .x_end = (const uint8_t *)a->in[0] + x->numel, .t = a->ws, .W = x->dims[3],
                      .pl = pr[HFX_P_POOL_PAD_LEFT], .s = pr[HFX_P_POOL_STRIDE_W], .kw = pr[HFX_P_POOL_KERNEL_W],
                      .is_signed = x->dtype == HFX_DTYPE_I8, .zxu = zxu,
                      .full = pr[HFX_P_POOL_KERNEL_H] * pr[HFX_P_POOL_KERNEL_W], .k = zxu > 255 - zxu ? zxu : 255 - zxu,
                      .sx = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_X]), .sy = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_Y]),
                      .zy = (float)pr[HFX_P_QPOOL_ZERO_Y]};
    if ((int64_t)pr[HFX_P_POOL_KERNEL_H] * pr[HFX_P_POOL_KERNEL_W] > 257 || !qavgpool_bounds(&h)) return h;
    int64_t extent = (ow_n - 1) * h.s + h.kw; /* the padded row's halfwords the taps read */
    int64_t row = h.pl + h.W > extent ? h.pl + h.W : extent, last = h.W - h.kw + h.pl;
    h.sums = h.t + row + HVX_AVGPOOL_SLACK;
    h.flags = (uint8_t *)(h.sums + ow_n + 128);
    memset(h.t, 0, 2 * (size_t)h.pl);
    if (extent > h.pl + h.W) memset(h.t + h.pl + h.W, 0, 2 * (size_t)(extent - h.pl - h.W));
    h.first = (uint64_t)((h.pl + h.s - 1) / h.s);
    h.end = last < 0 ? 0 : (uint64_t)(last / h.s + 1 < ow_n ? last / h.s + 1 : ow_n);
    h.on = 1;
    return h;
}

/* the window sums (biased) of one output row whose window rows inside X are [h0, h1), in h->sums */
static bool qavgpool_row_hvx(const qavgpool_hvx *h, uint64_t plane, int64_t h0, int64_t h1, uint64_t ow_n) {
    if (!h->on || h1 <= h0) return false;
    hvx_avgpool_rows(h->x + plane + (uint64_t)(h0 * h->W), (size_t)h->W, (int)(h1 - h0), (size_t)h->W, h->is_signed,
                     h->x_end, h->t + h->pl);
    if (h->s == 1 || h->s == 2) {
        hvx_avgpool_taps(h->t, (size_t)ow_n, h->s, h->kw, h->sums);
        return true;
    }
    for (uint64_t o = 0; o < ow_n; o++) {
        uint32_t u = 0;
        for (int j = 0; j < h->kw; j++) u += h->t[o * (uint64_t)h->s + (uint64_t)j];
        h->sums[o] = (uint16_t)u;
    }
    return true;
}

/* hvx_avgpool_finish's parameters for windows of `rows` rows inside X and every column; false when
 * the fixed point cannot hold them (S of 15 bits or more, a shift outside 1..30, a wide margin) */
static bool qavgpool_fixed(qavgpool_hvx *h, int64_t rows, const int32_t *pr) {
    int32_t n = (int32_t)rows * h->kw, c = pr[HFX_P_POOL_COUNT_INCLUDE_PAD] ? h->full : n, smax = n * h->k, b = 0;
    if (n > 128) return false;
    while (smax >> b) b++; /* smax < 2^b, b >= 8 (k >= 128) */
    float m = h->m_full;
    if (c != h->full) {
        float cs = (float)c * h->sy;
        m = h->sx / cs;
    }
    uint32_t bits = (uint32_t)hfx_bits_from_f32(m), e = bits >> 23 & 0xffu, mant = (bits & 0x7fffffu) | 0x800000u;
    int32_t shift = 156 - (int32_t)e - b, M = (int32_t)((mant + (1u << (b - 7))) >> (b - 6));
    if (shift < 1 || shift > 30) return false;
    float unit = (float)(1u << shift), margin = 2.0f * h->d + h->A * 0x1p-20f + h->A * 0x1p-21f;
    margin = margin * unit + (float)smax * 0.5f + 1.0f;
    if (margin >= unit * 0.25f) return false;
    h->fx_mul = bits >> 31 ? -M : M, h->fx_shift = shift, h->fx_margin = (int32_t)margin;
    return true;
}

/* the outputs [*fa, *fb) of a row of windows with `rows` rows inside X: its inside columns by
 * hvx_avgpool_finish into yrow (near-tie flags in h->flags), when the fixed point holds them */
static void qavgpool_finish_hvx(qavgpool_hvx *h, int64_t rows, const int32_t *pr, uint8_t *yrow, uint64_t *fa,
                                uint64_t *fb) {
    *fa = *fb = 0;
    if (h->first >= h->end) return;
    if (rows != h->fx_rows) h->fx_rows = rows, h->fx_ok = qavgpool_fixed(h, rows, pr);
    if (!h->fx_ok) return;
    hvx_avgpool_finish(h->sums + h->first, (size_t)(h->end - h->first), (int32_t)rows * h->kw * h->zxu, h->fx_mul,
                       h->fx_shift, h->fx_margin, pr[HFX_P_QPOOL_ZERO_Y], h->is_signed, yrow + h->first, h->flags);
    *fa = h->first, *fb = h->end;
}

/* the output of a window of n taps, count c, from its biased sum u; false when e is too near a tie */
static bool qavgpool_out_hvx(const qavgpool_hvx *h, uint32_t u, int32_t n, int32_t c, int32_t lo, int32_t hi,
                             int32_t *q) {
    if (c == 0) return false;
    float m = h->m_full;
    if (c != h->full) {
        float cs = (float)c * h->sy;
        m = h->sx / cs;
    }
    float e = (float)((int32_t)u - n * h->zxu) * m; /* |S| <= 257 * 255: exact */
    e = e + h->zy;
    float r = e + 12582912.0f; /* |e| < 2^21: the nearest integer, ties to even */
    r = r - 12582912.0f;
    float dist = e - r;
    if (!(dist < h->lim && dist > -h->lim)) return false;
    int32_t i = (int32_t)r;
    *q = i < lo ? lo : i > hi ? hi : i;
    return true;
}
#endif

/* one output row of QAVGPOOL: row r (window rows [h0, h1) inside X) of the plane at `plane` */
typedef struct qavg_row {
    const hfx_kernel_args *a;
    qavg_taps *tp;
    uint64_t r, plane, ow_n;
    int64_t h0, h1;
#ifdef HFX_HVX
    const qavgpool_hvx *hv;
    bool vec; /* its window sums are in hv->sums */
#endif
} qavg_row;

/* output ow of the row; `exact`: straight by the reference (the vector estimate was near a tie) */
static void qavg_one(const qavg_row *w, uint64_t ow, bool exact) {
    const int32_t *pr = w->a->op->params;
    uint32_t ty = w->a->prog->tensors[w->a->op->out[0]].dtype;
    int64_t w0, w1;
    clip_window((int64_t)ow * pr[HFX_P_POOL_STRIDE_W] - pr[HFX_P_POOL_PAD_LEFT], pr[HFX_P_POOL_KERNEL_W],
                w->a->prog->tensors[w->a->op->in[0]].dims[3], &w0, &w1);
    int32_t q;
#ifdef HFX_HVX
    int32_t n = (int32_t)((w->h1 - w->h0) * (w1 - w0)), c = pr[HFX_P_POOL_COUNT_INCLUDE_PAD] ? w->hv->full : n;
    if (exact || !w->vec || !qavgpool_out_hvx(w->hv, w->hv->sums[ow], n, c, type_min(ty), type_max(ty), &q))
#endif
        q = window_avg(w->a, w->tp, w->plane, w->h0, w->h1, w0, w1);
    (void)exact;
    store_narrow(w->a->out[0], ty, w->r * w->ow_n + ow, q);
}

HFX_VECTOR_KERNEL
void hfx_run_qavgpool(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *x = &a->prog->tensors[op->in[0]], *y = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    qavgpool_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t r0, r1, oh_n = y->dims[2];
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &r0, &r1);
    qavg_taps tp;
    tp.ready = false;
#ifdef HFX_HVX
    qavgpool_hvx hv = qavgpool_hvx_of(a);
    qavg_row w = {a, &tp, 0, 0, y->dims[3], 0, 0, &hv, false};
#else
    qavg_row w = {a, &tp, 0, 0, y->dims[3], 0, 0};
#endif
    uint64_t plane_n = r0 / oh_n, oh = r0 % oh_n; /* row r is output row oh of plane plane_n */
    for (w.r = r0; w.r < r1; w.r++) {
        w.plane = plane_n * x->dims[2] * x->dims[3];
        clip_window((int64_t)oh * pr[HFX_P_POOL_STRIDE_H] - pr[HFX_P_POOL_PAD_TOP], pr[HFX_P_POOL_KERNEL_H], x->dims[2],
                    &w.h0, &w.h1);
        uint64_t fa = 0, fb = 0; /* [fa, fb): written by the vector finish, but its flagged outputs */
#ifdef HFX_HVX
        w.vec = qavgpool_row_hvx(&hv, w.plane, w.h0, w.h1, w.ow_n);
        if (w.vec) qavgpool_finish_hvx(&hv, w.h1 - w.h0, pr, (uint8_t *)a->out[0] + w.r * w.ow_n, &fa, &fb);
        for (uint64_t o = fa; o < fb; o += 8) { /* the flags, 8 at a time */
            uint64_t f;
            memcpy(&f, hv.flags + (o - fa), sizeof f);
            for (uint64_t j = o; f && j < o + 8 && j < fb; j++)
                if (hv.flags[j - fa]) qavg_one(&w, j, true);
        }
#endif
        for (uint64_t ow = 0; ow < w.ow_n; ow++) {
            if (ow == fa && fb > fa) ow = fb;
            if (ow >= w.ow_n) break;
            qavg_one(&w, ow, false);
        }
        if (++oh == oh_n) oh = 0, plane_n++;
    }
}
