/* qpool.c - the integer pooling ops of QDQ groups, exactly as dsp/ref/ref_qpool.h defines them:
 * QGLOBAL_AVGPOOL (an item is a block of (image, channel) rows) and QMAXPOOL (MAXPOOL's windows on
 * u8/i8, an item is a block of output rows) and QAVGPOOL (AVGPOOL's windows, the same items).
 * Portable C on the host; on Hexagon builds (HFX_HVX), hvx/hvx_qpool.c: QGLOBAL_AVGPOOL's sums by
 * vrmpy, QMAXPOOL rows of horizontal stride 1 or 2 by vmax with the requantisation as a 256-entry
 * table (windows with no tap inside X, dilations above 1 only, stay scalar). QAVGPOOL is C on both. */
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
    return st ? st : hfx_validate_global_avgpool(v, op);
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
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

/* [start, end) of one window along an axis of length n, clipped to it (ORT's hstart/hend) */
static void clip_window(int64_t start, int64_t kernel, int64_t n, int64_t *b, int64_t *e) {
    *e = start + kernel < n ? start + kernel : n;
    *b = start > 0 ? start : 0;
}

HFX_VECTOR_KERNEL
void hfx_run_qavgpool(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *x = &a->prog->tensors[op->in[0]], *y = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    qavgpool_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t r0, r1, oh_n = y->dims[2], ow_n = y->dims[3];
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &r0, &r1);
    int64_t H = x->dims[2], W = x->dims[3], kh = pr[HFX_P_POOL_KERNEL_H], kw = pr[HFX_P_POOL_KERNEL_W];
    float sx = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_X]), sy = hfx_f32_from_bits(pr[HFX_P_QPOOL_SCALE_Y]);
    int32_t zx = pr[HFX_P_QPOOL_ZERO_X], lo = type_min(y->dtype), hi = type_max(y->dtype);
    float tap[256]; /* the dequantized value of each code, indexed by x - the type's minimum */
    for (int32_t i = 0; i < 256; i++) tap[i] = ref_qavgpool_tap(i + type_min(x->dtype), sx, zx);
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t plane = (r / oh_n) * (uint64_t)(H * W);
        int64_t h0, h1, w0, w1;
        clip_window((int64_t)(r % oh_n) * pr[HFX_P_POOL_STRIDE_H] - pr[HFX_P_POOL_PAD_TOP], kh, H, &h0, &h1);
        for (uint64_t ow = 0; ow < ow_n; ow++) {
            clip_window((int64_t)ow * pr[HFX_P_POOL_STRIDE_W] - pr[HFX_P_POOL_PAD_LEFT], kw, W, &w0, &w1);
            float sum = 0.0f;
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++)
                    sum += tap[load_narrow(a->in[0], x->dtype, plane + (uint64_t)(h * W + w)) - type_min(x->dtype)];
            int64_t count = pr[HFX_P_POOL_COUNT_INCLUDE_PAD] ? kh * kw : (h1 - h0) * (w1 - w0);
            int32_t q = ref_qavgpool_out(sum, (float)count, sy, pr[HFX_P_QPOOL_ZERO_Y], lo, hi);
            store_narrow(a->out[0], y->dtype, r * ow_n + ow, q);
        }
    }
}
