/* qmatmul.c - QMATMUL and QCONV2D: the integer MatMul and Conv of a QDQ group (u8/i8 x u8/i8,
 * int32 accumulation, requantised to u8/i8), exactly as dsp/ref/ref_qmatmul.h defines them.
 * Portable C on the host; on Hexagon builds (HFX_HVX) an item of u8/i8 runs qmatmul_hvx.c's vrmpy
 * kernel instead. A QMATMUL item is a block of rows x a block of columns of A[rows, K] x B; a QCONV2D
 * item a block of output pixels of one (image, group). The C kernels put the zero-point-subtracted
 * operands in the work space as int16 and take int32 dot products. */
#include "../../ref/ref_qmatmul.h"
#include "kernels.h"
#include "qmatmul_hvx.h"

#define QMM_WS_MAX (256u * 1024u) /* B^T of an item's columns + one row of A, int16 */

enum { QMM_A, QMM_B, QMM_ZA, QMM_ZB, QMM_SCALE, QMM_ZY, QMM_BIAS };

typedef struct qmatmul_plan {
    uint64_t rows, k, n;
    uint64_t rows_per_item, row_blocks;
    uint64_t cols_per_item; /* B^T - zb of these columns fits the work space */
} qmatmul_plan;

static bool narrow_int(uint32_t d) { return d == HFX_DTYPE_U8 || d == HFX_DTYPE_I8; }

static hfx_status want_dtype(hfx_vctx *v, const hfx_op *op, uint32_t slot, bool ok, const char *what) {
    if (ok) return HFX_OK;
    uint32_t id = slot == 99 ? op->out[0] : op->in[slot];
    return hfx_vfail(v, HFX_ERR_DTYPE, slot == 99 ? HFX_OUT_OFF(v, 0) : HFX_IN_OFF(v, slot),
                     "op %u (%s): tensor %u dtype %u, expected %s", v->index, op->desc->label, id,
                     v->p->tensors[id].dtype, what);
}

static hfx_status validate_dtypes(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    uint32_t a = t[op->in[QMM_A]].dtype, b = t[op->in[QMM_B]].dtype, y = t[op->out[0]].dtype;
    hfx_status st = want_dtype(v, op, QMM_A, narrow_int(a), "u8 or i8");
    if (!st) st = want_dtype(v, op, QMM_B, narrow_int(b), "u8 or i8");
    if (!st) st = want_dtype(v, op, 99, narrow_int(y), "u8 or i8");
    if (!st) st = want_dtype(v, op, QMM_ZA, t[op->in[QMM_ZA]].dtype == a, "A's (its zero point)");
    if (!st) st = want_dtype(v, op, QMM_ZB, t[op->in[QMM_ZB]].dtype == b, "B's (its zero point)");
    if (!st) st = want_dtype(v, op, QMM_SCALE, t[op->in[QMM_SCALE]].dtype == HFX_DTYPE_F32, "f32 (the scale)");
    if (!st) st = want_dtype(v, op, QMM_ZY, t[op->in[QMM_ZY]].dtype == y, "Y's (its zero point)");
    if (!st && op->n_in > QMM_BIAS)
        st = want_dtype(v, op, QMM_BIAS, t[op->in[QMM_BIAS]].dtype == HFX_DTYPE_I32, "i32 (the bias)");
    return st;
}

/* one element, or (when per_column) a 1-D tensor of n */
static hfx_status want_size(hfx_vctx *v, const hfx_op *op, uint32_t slot, uint32_t n, bool per_column) {
    const hfx_tensor *t = &v->p->tensors[op->in[slot]];
    if (t->numel == 1 || (per_column && t->rank == 1 && t->dims[0] == n)) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, slot), "op %u (%s): input %u must have one element%s", v->index,
                     op->desc->label, slot, per_column ? " or one per column of B" : "");
}

hfx_status hfx_validate_qmatmul(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_dtypes(v, op);
    if (st) return st;
    const hfx_tensor *a = &v->p->tensors[op->in[QMM_A]], *b = &v->p->tensors[op->in[QMM_B]];
    if (a->rank < 1 || b->rank != 2 || a->dims[a->rank - 1] != b->dims[0])
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, QMM_B), "op %u (%s): needs A[..., K] and B[K, N]", v->index,
                         op->desc->label);
    uint32_t n = b->dims[1];
    if (!st) st = want_size(v, op, QMM_ZA, n, false);
    if (!st) st = want_size(v, op, QMM_ZB, n, true);
    if (!st) st = want_size(v, op, QMM_SCALE, n, true);
    if (!st) st = want_size(v, op, QMM_ZY, n, false);
    if (!st && op->n_in > QMM_BIAS) {
        const hfx_tensor *bias = &v->p->tensors[op->in[QMM_BIAS]];
        if (bias->rank != 1 || bias->dims[0] != n)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, QMM_BIAS), "op %u (%s): the bias must be [N]", v->index,
                             op->desc->label);
    }
    if (st) return st;
    uint32_t od[HFX_MAX_RANK];
    for (uint32_t i = 0; i + 1 < a->rank; i++) od[i] = a->dims[i];
    od[a->rank - 1] = n;
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, a->rank)) return hfx_shape_err(v, "QMatMul");
    return hfx_no_empty_input(v, op);
}

hfx_status hfx_plan_qmatmul(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *a = &p->tensors[op->in[QMM_A]], *b = &p->tensors[op->in[QMM_B]];
    qmatmul_plan pl = {0};
    pl.k = b->dims[0];
    pl.n = b->dims[1];
    pl.rows = pl.k ? a->numel / pl.k : p->tensors[op->out[0]].numel / (pl.n ? pl.n : 1);
    uint64_t cap = QMM_WS_MAX / (2 * pl.k) - 1;
    pl.cols_per_item = pl.n < cap ? pl.n : (cap ? cap : 1);
    pl.rows_per_item = hfx_per_item_for(2 * pl.cols_per_item * pl.k, HFX_GEMM_ITEM_FLOPS);
    pl.row_blocks = hfx_ceil_div(pl.rows ? pl.rows : 1, pl.rows_per_item);
    op->plan.ws_bytes = (size_t)((pl.cols_per_item + 1) * pl.k * 2);
#ifdef HFX_HVX
    size_t hvx_ws = hfx_qgemm_hvx_ws_bytes(pl.k, pl.cols_per_item);
    if (hvx_ws > op->plan.ws_bytes) op->plan.ws_bytes = hvx_ws;
#endif
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, pl.row_blocks * hfx_ceil_div(pl.n, pl.cols_per_item));
}

static inline int32_t load_narrow(const void *p, uint32_t dtype, uint64_t i) {
    return dtype == HFX_DTYPE_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

typedef struct qmm_io {
    const void *a, *b, *zb;
    const float *scale;
    const int32_t *bias;
    void *y;
    uint32_t ta, tb, ty;
    int32_t za, zy, lo, hi;
    bool zb_cols, scale_cols;
} qmm_io;

HFX_VECTOR_KERNEL static int32_t dot_i16(const int16_t *a, const int16_t *b, uint64_t n) {
    uint32_t acc = 0; /* |a|, |b| <= 255: each product fits; the sum wraps as int32 */
    for (uint64_t k = 0; k < n; k++) acc += (uint32_t)((int32_t)a[k] * (int32_t)b[k]);
    return (int32_t)acc;
}

static qmm_io qmm_io_of(const hfx_kernel_args *a) {
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors;
    qmm_io io = {0};
    io.a = a->in[QMM_A];
    io.b = a->in[QMM_B];
    io.zb = a->in[QMM_ZB];
    io.scale = a->in[QMM_SCALE];
    io.bias = op->n_in > QMM_BIAS ? a->in[QMM_BIAS] : NULL;
    io.y = a->out[0];
    io.ta = t[op->in[QMM_A]].dtype;
    io.tb = t[op->in[QMM_B]].dtype;
    io.ty = t[op->out[0]].dtype;
    io.za = load_narrow(a->in[QMM_ZA], io.ta, 0);
    io.zy = load_narrow(a->in[QMM_ZY], io.ty, 0);
    io.lo = io.ty == HFX_DTYPE_U8 ? 0 : INT8_MIN;
    io.hi = io.ty == HFX_DTYPE_U8 ? UINT8_MAX : INT8_MAX;
    io.zb_cols = t[op->in[QMM_ZB]].numel > 1;
    io.scale_cols = t[op->in[QMM_SCALE]].numel > 1;
    return io;
}

/* y[r, c] for rows [r0, r1) and columns [c0, c1): B^T - zb of the columns and each row of A - za in
 * the work space as int16, then one int32 dot product per output. */
HFX_VECTOR_KERNEL
void hfx_run_qmatmul(const hfx_kernel_args *a, uint32_t item) {
    qmatmul_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    qmm_io io = qmm_io_of(a);
    uint64_t k = pl.k, r0, r1, c0 = (item / pl.row_blocks) * pl.cols_per_item;
    uint64_t c1 = c0 + pl.cols_per_item < pl.n ? c0 + pl.cols_per_item : pl.n;
    hfx_plan_range(pl.rows, pl.rows_per_item, item % (uint32_t)pl.row_blocks, &r0, &r1);
#ifdef HFX_HVX
    if (hfx_qmatmul_hvx(a, k, pl.n, r0, r1, c0, c1)) return;
#endif
    int16_t *bt = (int16_t *)a->ws, *arow = bt + (c1 - c0) * k;
    for (uint64_t c = c0; c < c1; c++) {
        int32_t zb = load_narrow(io.zb, io.tb, io.zb_cols ? c : 0);
        for (uint64_t i = 0; i < k; i++) bt[(c - c0) * k + i] = (int16_t)(load_narrow(io.b, io.tb, i * pl.n + c) - zb);
    }
    for (uint64_t r = r0; r < r1; r++) {
        for (uint64_t i = 0; i < k; i++) arow[i] = (int16_t)(load_narrow(io.a, io.ta, r * k + i) - io.za);
        for (uint64_t c = c0; c < c1; c++) {
            uint32_t acc = (io.bias ? (uint32_t)io.bias[c] : 0u) + (uint32_t)dot_i16(arow, bt + (c - c0) * k, k);
            int32_t q = ref_qmatmul_requant((int32_t)acc, io.scale[io.scale_cols ? c : 0], io.zy, io.lo, io.hi);
            if (io.ty == HFX_DTYPE_U8) ((uint8_t *)io.y)[r * pl.n + c] = (uint8_t)q;
            else ((int8_t *)io.y)[r * pl.n + c] = (int8_t)q;
        }
    }
}

/* ---- QCONV2D: X[N,C,H,W], W[M,C/g,kh,kw]; the inputs of QMATMUL with M for N, CONV2D's params ---- */

#define QCONV_WS_MAX (256u * 1024u) /* im2col + weight bytes per item */

typedef struct qconv_plan {
    uint64_t groups, kk, pixels;      /* kk = C/g * kh * kw, pixels = OH * OW */
    uint64_t pixels_per_item, blocks; /* output pixels per item, items per (image, group) */
} qconv_plan;

hfx_status hfx_validate_qconv(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_dtypes(v, op);
    if (!st) st = hfx_validate_conv2d(v, op); /* params and shapes of X, W, Y (its bias slot is not ours) */
    if (st) return st;
    uint32_t m = v->p->tensors[op->in[QMM_B]].dims[0];
    if (!st) st = want_size(v, op, QMM_ZA, m, false);
    if (!st) st = want_size(v, op, QMM_ZB, m, true);
    if (!st) st = want_size(v, op, QMM_SCALE, m, true);
    if (!st) st = want_size(v, op, QMM_ZY, m, false);
    if (!st && op->n_in > QMM_BIAS) {
        const hfx_tensor *bias = &v->p->tensors[op->in[QMM_BIAS]];
        if (bias->rank != 1 || bias->dims[0] != m)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, QMM_BIAS), "op %u (%s): the bias must be [M]", v->index,
                             op->desc->label);
    }
    return st;
}

/* Blocks of output pixels of one (image, group) of about HFX_GEMM_ITEM_FLOPS, their im2col and the
 * group's weights (int16, zero points subtracted) within QCONV_WS_MAX bytes. */
hfx_status hfx_plan_qconv(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *w = &p->tensors[op->in[QMM_B]], *y = &p->tensors[op->out[0]];
    qconv_plan pl = {0};
    pl.groups = (uint64_t)op->params[HFX_P_CONV_GROUP];
    pl.kk = (uint64_t)w->dims[1] * w->dims[2] * w->dims[3];
    pl.pixels = (uint64_t)y->dims[2] * y->dims[3];
    uint64_t mg = w->dims[0] / pl.groups, weights = mg * pl.kk * 2;
    uint64_t pb = hfx_per_item_for(2 * mg * pl.kk, HFX_GEMM_ITEM_FLOPS);
    uint64_t cap = weights < QCONV_WS_MAX ? (QCONV_WS_MAX - weights) / (pl.kk * 2) : 0;
    if (pb > cap) pb = cap ? cap : 1;
    if (pb > pl.pixels) pb = pl.pixels;
    pl.blocks = hfx_ceil_div(pl.pixels, pb);
    pl.pixels_per_item = hfx_ceil_div(pl.pixels, pl.blocks);
    op->plan.ws_bytes = (size_t)(weights + pl.pixels_per_item * pl.kk * 2);
#ifdef HFX_HVX
    size_t hvx_ws = hfx_qconv_hvx_ws_bytes(pl.kk, pl.pixels_per_item);
    if (hvx_ws > op->plan.ws_bytes) op->plan.ws_bytes = hvx_ws;
#endif
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, (uint64_t)y->dims[0] * pl.groups * pl.blocks);
}

/* rows[p][k] = X[img, c0 + c, ih, iw] - zx for output pixel p0 + p and tap k = (c, i, j); 0 in the padding */
#define QCONV_IM2COL(ctype)                                                                                    \
    static void im2col_##ctype(const ctype *X, int32_t zx, const hfx_tensor *x, const hfx_tensor *w,           \
                               const int32_t *pr, uint64_t ow_n, uint64_t p0, uint64_t np, int16_t *rows) {    \
        uint64_t cg = w->dims[1], kh = w->dims[2], kw = w->dims[3], H = x->dims[2], W = x->dims[3];            \
        int64_t sh = pr[HFX_P_CONV_STRIDE_H], sw = pr[HFX_P_CONV_STRIDE_W], dh = pr[HFX_P_CONV_DILATION_H];    \
        int64_t dw = pr[HFX_P_CONV_DILATION_W], pt = pr[HFX_P_CONV_PAD_TOP], pl = pr[HFX_P_CONV_PAD_LEFT];     \
        for (uint64_t p = 0; p < np; p++) {                                                                    \
            int64_t oh = (int64_t)((p0 + p) / ow_n), ow = (int64_t)((p0 + p) % ow_n);                          \
            int16_t *row = rows + p * cg * kh * kw;                                                            \
            for (uint64_t c = 0; c < cg; c++)                                                                  \
                for (uint64_t i = 0; i < kh; i++) {                                                            \
                    int64_t ih = oh * sh + (int64_t)i * dh - pt;                                               \
                    const ctype *xrow = X + (c * H + (uint64_t)(ih < 0 ? 0 : ih)) * W;                         \
                    bool row_in = ih >= 0 && ih < (int64_t)H;                                                  \
                    for (uint64_t j = 0; j < kw; j++) {                                                        \
                        int64_t iw = ow * sw + (int64_t)j * dw - pl;                                           \
                        *row++ = (int16_t)(row_in && iw >= 0 && iw < (int64_t)W ? (int32_t)xrow[iw] - zx : 0); \
                    }                                                                                          \
                }                                                                                              \
        }                                                                                                      \
    }
QCONV_IM2COL(uint8_t)
QCONV_IM2COL(int8_t)

/* rows[p][k] = X[img, c0 + c, ih, iw] - zx for output pixel p0 + p and tap k = (c, i, j); 0 in the padding */
static void qconv_im2col(const qmm_io *io, const hfx_tensor *x, const hfx_tensor *w, const int32_t *pr, uint64_t img,
                         uint64_t c0, uint64_t ow_n, uint64_t p0, uint64_t np, int16_t *rows) {
    uint64_t at = (img * x->dims[1] + c0) * x->dims[2] * x->dims[3];
    if (io->ta == HFX_DTYPE_U8) im2col_uint8_t((const uint8_t *)io->a + at, io->za, x, w, pr, ow_n, p0, np, rows);
    else im2col_int8_t((const int8_t *)io->a + at, io->za, x, w, pr, ow_n, p0, np, rows);
}

HFX_VECTOR_KERNEL
void hfx_run_qconv(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors, *x = &t[op->in[QMM_A]], *w = &t[op->in[QMM_B]], *y = &t[op->out[0]];
    qconv_plan pl;
    HFX_PLAN_LOAD(pl, op);
    qmm_io io = qmm_io_of(a);
    uint64_t blk = item % pl.blocks, g = (item / pl.blocks) % pl.groups, img = item / pl.blocks / pl.groups;
    uint64_t mg = w->dims[0] / pl.groups, kk = pl.kk, p0 = blk * pl.pixels_per_item;
    uint64_t np = p0 + pl.pixels_per_item < pl.pixels ? pl.pixels_per_item : pl.pixels - p0;
#ifdef HFX_HVX
    if (hfx_qconv_hvx(a, img, g, p0, np)) return;
#endif
    int16_t *wts = (int16_t *)a->ws, *rows = wts + mg * kk;
    for (uint64_t m = 0; m < mg; m++) {
        uint64_t mm = g * mg + m;
        int32_t zb = load_narrow(io.zb, io.tb, io.zb_cols ? mm : 0);
        for (uint64_t k = 0; k < kk; k++) wts[m * kk + k] = (int16_t)(load_narrow(io.b, io.tb, mm * kk + k) - zb);
    }
    qconv_im2col(&io, x, w, op->params, img, g * w->dims[1], y->dims[3], p0, np, rows);
    for (uint64_t m = 0; m < mg; m++) {
        uint64_t mm = g * mg + m;
        float s = io.scale[io.scale_cols ? mm : 0];
        uint32_t bias = io.bias ? (uint32_t)io.bias[mm] : 0u;
        uint64_t at = (img * w->dims[0] + mm) * pl.pixels + p0;
        for (uint64_t p = 0; p < np; p++) {
            uint32_t acc = bias + (uint32_t)dot_i16(rows + p * kk, wts + m * kk, kk);
            int32_t q = ref_qmatmul_requant((int32_t)acc, s, io.zy, io.lo, io.hi);
            if (io.ty == HFX_DTYPE_U8) ((uint8_t *)io.y)[at + p] = (uint8_t)q;
            else ((int8_t *)io.y)[at + p] = (int8_t)q;
        }
    }
}
