/* qmatmul.c - QMATMUL and QCONV2D: the integer MatMul and Conv of a QDQ group (u8/i8 x u8/i8,
 * int32 accumulation, requantised to u8/i8), exactly as dsp/ref/ref_qmatmul.h defines them; IMATMUL
 * (ONNX MatMulInteger) and ICONV2D (ONNX ConvInteger): QMATMUL's and QCONV2D's accumulators as they are,
 * int32, through the same item paths (ICONV2D: the GEMM ones, also for a depthwise conv).
 * On the host a GEMM item runs qgemm_host.c (operands packed as int16 with their zero points
 * subtracted, AVX2 where the CPU has it); on Hexagon builds (HFX_HVX) qmatmul_hvx.c's vrmpy kernel.
 * A QMATMUL item is a block of rows x a block of columns of A[rows, K] x B. A QCONV2D item is a block
 * of output pixels of one group over one or more images (several when an image has few pixels: one
 * per item on HFX_HVX), 1x1 convs reading X without im2col; on the host a depthwise conv runs a
 * direct loop instead, an item being a range of channels of every image. */
#include <string.h>

#include "../../ref/ref_qmatmul.h"
#include "kernels.h"
#include "qgemm_host.h"
#include "qmatmul_hvx.h"

#define QMM_WS_MAX (256u * 1024u) /* B^T of an item's columns + one row of A, int16 */

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

/* A and B u8/i8, each zero point of its operand's type (za_type, zb_type: how the messages name it) */
static hfx_status validate_operand_dtypes(hfx_vctx *v, const hfx_op *op, const char *za_type, const char *zb_type) {
    const hfx_tensor *t = v->p->tensors;
    uint32_t a = t[op->in[HFX_QMM_A]].dtype, b = t[op->in[HFX_QMM_B]].dtype;
    hfx_status st = want_dtype(v, op, HFX_QMM_A, narrow_int(a), "u8 or i8");
    if (!st) st = want_dtype(v, op, HFX_QMM_B, narrow_int(b), "u8 or i8");
    if (!st) st = want_dtype(v, op, HFX_QMM_ZA, t[op->in[HFX_QMM_ZA]].dtype == a, za_type);
    return st ? st : want_dtype(v, op, HFX_QMM_ZB, t[op->in[HFX_QMM_ZB]].dtype == b, zb_type);
}

static hfx_status validate_dtypes(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    uint32_t y = t[op->out[0]].dtype;
    hfx_status st = validate_operand_dtypes(v, op, "A's (its zero point)", "B's (its zero point)");
    if (!st) st = want_dtype(v, op, 99, narrow_int(y), "u8 or i8");
    if (!st) st = want_dtype(v, op, HFX_QMM_SCALE, t[op->in[HFX_QMM_SCALE]].dtype == HFX_DTYPE_F32, "f32 (the scale)");
    if (!st) st = want_dtype(v, op, HFX_QMM_ZY, t[op->in[HFX_QMM_ZY]].dtype == y, "Y's (its zero point)");
    if (!st && op->n_in > HFX_QMM_BIAS)
        st = want_dtype(v, op, HFX_QMM_BIAS, t[op->in[HFX_QMM_BIAS]].dtype == HFX_DTYPE_I32, "i32 (the bias)");
    return st;
}

/* one element, or (when per_column) a 1-D tensor of n */
static hfx_status want_size(hfx_vctx *v, const hfx_op *op, uint32_t slot, uint32_t n, bool per_column) {
    const hfx_tensor *t = &v->p->tensors[op->in[slot]];
    if (t->numel == 1 || (per_column && t->rank == 1 && t->dims[0] == n)) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, slot), "op %u (%s): input %u must have one element%s", v->index,
                     op->desc->label, slot, per_column ? " or one per column of B" : "");
}

/* zero points, scales and bias: one entry, or one per output channel (`channels`, named `name`) */
static hfx_status validate_channel_operands(hfx_vctx *v, hfx_op *op, uint32_t channels, const char *name) {
    hfx_status st = want_size(v, op, HFX_QMM_ZA, channels, false);
    if (!st) st = want_size(v, op, HFX_QMM_ZB, channels, true);
    if (!st) st = want_size(v, op, HFX_QMM_SCALE, channels, true);
    if (!st) st = want_size(v, op, HFX_QMM_ZY, channels, false);
    if (st || op->n_in <= HFX_QMM_BIAS) return st;
    const hfx_tensor *bias = &v->p->tensors[op->in[HFX_QMM_BIAS]];
    if (bias->rank != 1 || bias->dims[0] != channels)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, HFX_QMM_BIAS), "op %u (%s): the bias must be [%s]", v->index,
                         op->desc->label, name);
    return HFX_OK;
}

hfx_status hfx_validate_qmatmul(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_dtypes(v, op);
    if (st) return st;
    const hfx_tensor *a = &v->p->tensors[op->in[HFX_QMM_A]], *b = &v->p->tensors[op->in[HFX_QMM_B]];
    if (a->rank < 1 || b->rank != 2 || a->dims[a->rank - 1] != b->dims[0])
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, HFX_QMM_B), "op %u (%s): needs A[..., K] and B[K, N]",
                         v->index, op->desc->label);
    uint32_t n = b->dims[1];
    st = validate_channel_operands(v, op, n, "N");
    if (st) return st;
    uint32_t od[HFX_MAX_RANK];
    for (uint32_t i = 0; i + 1 < a->rank; i++) od[i] = a->dims[i];
    od[a->rank - 1] = n;
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, a->rank)) return hfx_shape_err(v, "QMatMul");
    return hfx_no_empty_input(v, op);
}

/* the dtypes of an op with int32 sums (IMATMUL, ICONV2D) */
static hfx_status validate_integer_dtypes(hfx_vctx *v, hfx_op *op, const char *za_type, const char *zb_type) {
    hfx_status st = validate_operand_dtypes(v, op, za_type, zb_type);
    return st ? st : want_dtype(v, op, 99, v->p->tensors[op->out[0]].dtype == HFX_DTYPE_I32, "i32");
}

/* IMATMUL: A, B u8/i8, zp_a A's type (one element), zp_b B's type (one element or one per column), Y i32 */
hfx_status hfx_validate_imatmul(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    hfx_status st = validate_integer_dtypes(v, op, "A's (its zero point)", "B's (its zero point)");
    if (st) return st;
    const hfx_tensor *ta = &t[op->in[HFX_QMM_A]], *tb = &t[op->in[HFX_QMM_B]];
    if (ta->rank < 1 || tb->rank != 2 || ta->dims[ta->rank - 1] != tb->dims[0])
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, HFX_QMM_B), "op %u (%s): needs A[..., K] and B[K, N]",
                         v->index, op->desc->label);
    st = want_size(v, op, HFX_QMM_ZA, tb->dims[1], false);
    if (!st) st = want_size(v, op, HFX_QMM_ZB, tb->dims[1], true);
    if (st) return st;
    uint32_t od[HFX_MAX_RANK];
    for (uint32_t i = 0; i + 1 < ta->rank; i++) od[i] = ta->dims[i];
    od[ta->rank - 1] = tb->dims[1];
    if (!hfx_same_shape(&t[op->out[0]], od, ta->rank)) return hfx_shape_err(v, "MatMulInteger");
    return hfx_no_empty_input(v, op);
}

/* host work space of a GEMM item of k x cols with a_rows rows of the broadcast operand: the
 * accumulators of HFX_QGEMM_MR rows, the packed columns, the rows, two rows of columns being packed */
static size_t qmm_host_ws(uint64_t k, uint64_t cols, uint64_t a_rows) {
    uint64_t np = hfx_qgemm_np(cols);
    return (size_t)(HFX_QGEMM_MR * np * 4 + (hfx_qgemm_packed_elems(k, cols) + a_rows * hfx_qgemm_kp(k) + 2 * np) * 2);
}

typedef struct qgemm_bufs {
    int32_t *acc;  /* HFX_QGEMM_MR rows of ldc */
    int16_t *b;    /* packed columns */
    int16_t *a;    /* rows of kp */
    int16_t *t[2]; /* two rows of ldc: rows k, k + 1 of the columns before hfx_qgemm_pack_pair */
    size_t kp, ldc;
} qgemm_bufs;

static qgemm_bufs qgemm_bufs_of(void *ws, uint64_t k, uint64_t cols, uint64_t a_rows) {
    qgemm_bufs w;
    w.kp = hfx_qgemm_kp(k);
    w.ldc = hfx_qgemm_np(cols);
    w.acc = ws;
    w.b = (int16_t *)(void *)(w.acc + HFX_QGEMM_MR * w.ldc);
    w.a = w.b + hfx_qgemm_packed_elems(k, cols);
    w.t[0] = w.a + a_rows * w.kp;
    w.t[1] = w.t[0] + w.ldc;
    return w;
}

hfx_status hfx_plan_qmatmul(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *a = &p->tensors[op->in[HFX_QMM_A]], *b = &p->tensors[op->in[HFX_QMM_B]];
    qmatmul_plan pl = {0};
    pl.k = b->dims[0];
    pl.n = b->dims[1];
    pl.rows = pl.k ? a->numel / pl.k : p->tensors[op->out[0]].numel / (pl.n ? pl.n : 1);
    uint64_t cap = QMM_WS_MAX / (2 * pl.k) - 1;
    pl.cols_per_item = pl.n < cap ? pl.n : (cap ? cap : 1);
#ifdef HFX_HVX /* whole 128-column panels: vrmpy and the packing cost a panel's whole width anyway */
    uint64_t panel_cols = hfx_ceil_div(pl.cols_per_item, HFX_QMM_HVX_PANEL) * HFX_QMM_HVX_PANEL;
    pl.cols_per_item = pl.n < panel_cols ? pl.n : panel_cols;
#endif
    pl.rows_per_item = hfx_per_item_for(2 * pl.cols_per_item * pl.k, HFX_GEMM_ITEM_FLOPS);
    pl.row_blocks = hfx_ceil_div(pl.rows ? pl.rows : 1, pl.rows_per_item);
#ifdef HFX_HVX /* validation admits u8/i8 only: every item runs hfx_qmatmul_hvx */
    op->plan.ws_bytes = hfx_qgemm_hvx_ws_bytes(pl.k, pl.cols_per_item);
#else
    op->plan.ws_bytes = qmm_host_ws(pl.k, pl.cols_per_item, HFX_QGEMM_MR);
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
    bool raw; /* IMATMUL, ICONV2D: Y is the int32 accumulators (no scale, zy, bias) */
} qmm_io;

static qmm_io qmm_io_of(const hfx_kernel_args *a) {
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors;
    qmm_io io = {0};
    io.a = a->in[HFX_QMM_A];
    io.b = a->in[HFX_QMM_B];
    io.zb = a->in[HFX_QMM_ZB];
    io.ta = t[op->in[HFX_QMM_A]].dtype;
    io.tb = t[op->in[HFX_QMM_B]].dtype;
    io.za = load_narrow(a->in[HFX_QMM_ZA], io.ta, 0);
    io.zb_cols = t[op->in[HFX_QMM_ZB]].numel > 1;
    io.y = a->out[0];
    io.raw = op->opcode == HFX_OP_IMATMUL || op->opcode == HFX_OP_ICONV2D;
    if (io.raw) return io;
    io.scale = a->in[HFX_QMM_SCALE];
    io.bias = op->n_in > HFX_QMM_BIAS ? a->in[HFX_QMM_BIAS] : NULL;
    io.ty = t[op->out[0]].dtype;
    io.zy = load_narrow(a->in[HFX_QMM_ZY], io.ty, 0);
    io.lo = io.ty == HFX_DTYPE_U8 ? 0 : INT8_MIN;
    io.hi = io.ty == HFX_DTYPE_U8 ? UINT8_MAX : INT8_MAX;
    io.scale_cols = t[op->in[HFX_QMM_SCALE]].numel > 1;
    return io;
}

/* dst[0, k) = src[0, k) - z as int16, and a 0 after an odd k */
HFX_VECTOR_KERNEL static void widen_row(const void *src, uint32_t dtype, int32_t z, uint64_t k, int16_t *dst) {
    if (dtype == HFX_DTYPE_U8)
        for (uint64_t i = 0; i < k; i++) dst[i] = (int16_t)(((const uint8_t *)src)[i] - z);
    else
        for (uint64_t i = 0; i < k; i++) dst[i] = (int16_t)(((const int8_t *)src)[i] - z);
    if (k & 1) dst[k] = 0;
}

/* t[c] = B[row, c0 + c] - zb for c < nc */
#define QMM_B_ROW(ctype)                                                                                            \
    static void b_row_##ctype(const ctype *B, const ctype *zb, bool zb_cols, uint64_t n, uint64_t row, uint64_t c0, \
                              uint64_t nc, int16_t *t) {                                                            \
        const ctype *src = B + row * n + c0;                                                                        \
        if (zb_cols)                                                                                                \
            for (uint64_t c = 0; c < nc; c++) t[c] = (int16_t)(src[c] - zb[c0 + c]);                                \
        else                                                                                                        \
            for (uint64_t c = 0; c < nc; c++) t[c] = (int16_t)(src[c] - zb[0]);                                     \
    }
QMM_B_ROW(uint8_t)
QMM_B_ROW(int8_t)

/* columns [c0, c0 + nc) of B[k, n] - zb, packed (qgemm_host.h) two rows at a time */
static void pack_b(const qmm_io *io, uint64_t k, uint64_t n, uint64_t c0, uint64_t nc, const qgemm_bufs *w) {
    for (uint64_t r = 0; r < k; r += 2) {
        for (uint64_t h = 0; h < 2 && r + h < k; h++) {
            if (io->tb == HFX_DTYPE_U8) b_row_uint8_t(io->b, io->zb, io->zb_cols, n, r + h, c0, nc, w->t[h]);
            else b_row_int8_t(io->b, io->zb, io->zb_cols, n, r + h, c0, nc, w->t[h]);
        }
        hfx_qgemm_pack_pair(w->t[0], r + 1 < k ? w->t[1] : NULL, nc, w->kp, r, w->b);
    }
}

/* row r's columns [c0, c0 + nc) of Y from their accumulators: IMATMUL's as they are, else requantised */
static void store_row(const qmm_io *io, const int32_t *acc, uint64_t n, uint64_t r, uint64_t c0, uint64_t nc) {
    if (io->raw) {
        memcpy((uint8_t *)io->y + (r * n + c0) * sizeof(int32_t), acc, nc * sizeof(int32_t)); /* Y may be unaligned */
        return;
    }
    hfx_qgemm_requant(acc, nc, io->bias ? io->bias + c0 : NULL, 1, io->scale + (io->scale_cols ? c0 : 0),
                      io->scale_cols, io->zy, io->ty == HFX_DTYPE_I8, (uint8_t *)io->y + r * n + c0, nc, 0);
}

/* Fewer columns than HFX_QGEMM_DOT_COLS: B's columns - zb as contiguous int16 (cols: nc x k), each row of
 * A dotted with them (hfx_qgemm_dot) and requantised. */
static void qmatmul_dot(const qmm_io *io, int16_t *cols, uint64_t k, uint64_t n, uint64_t r0, uint64_t r1, uint64_t c0,
                        uint64_t nc) {
    for (uint64_t c = 0; c < nc; c++) {
        int32_t zb = load_narrow(io->zb, io->tb, io->zb_cols ? c0 + c : 0);
        for (uint64_t i = 0; i < k; i++) cols[c * k + i] = (int16_t)(load_narrow(io->b, io->tb, i * n + c0 + c) - zb);
    }
    int32_t acc[HFX_QGEMM_DOT_COLS];
    for (uint64_t r = r0; r < r1; r++) {
        hfx_qgemm_dot((const uint8_t *)io->a + r * k, io->ta == HFX_DTYPE_I8, io->za, k, cols, k, (int)nc, acc);
        store_row(io, acc, n, r, c0, nc);
    }
}

/* y[r, c] for rows [r0, r1) and columns [c0, c1): B's columns packed once, then HFX_QGEMM_MR rows of A
 * at a time widened, multiplied and requantised. */
static void qmatmul_host(const qmm_io *io, void *ws, uint64_t k, uint64_t n, uint64_t r0, uint64_t r1, uint64_t c0,
                         uint64_t c1) {
    uint64_t nc = c1 - c0;
    qgemm_bufs w = qgemm_bufs_of(ws, k, nc, HFX_QGEMM_MR);
    if (nc < HFX_QGEMM_DOT_COLS) {
        qmatmul_dot(io, w.b, k, n, r0, r1, c0, nc);
        return;
    }
    pack_b(io, k, n, c0, nc, &w);
    for (uint64_t r = r0; r < r1; r += HFX_QGEMM_MR) {
        int rows = r1 - r < HFX_QGEMM_MR ? (int)(r1 - r) : HFX_QGEMM_MR;
        for (int i = 0; i < rows; i++) /* u8 and i8 are both one byte */
            widen_row((const uint8_t *)io->a + (r + (uint64_t)i) * k, io->ta, io->za, k, w.a + (size_t)i * w.kp);
        hfx_qgemm_rows(w.a, w.kp, rows, w.b, w.kp, nc, w.acc, w.ldc);
        for (int i = 0; i < rows; i++) store_row(io, w.acc + (size_t)i * w.ldc, n, r + (uint64_t)i, c0, nc);
    }
}

void hfx_run_qmatmul(const hfx_kernel_args *a, uint32_t item) {
    qmatmul_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    qmm_io io = qmm_io_of(a);
    uint64_t r0, r1, c0 = (item / pl.row_blocks) * pl.cols_per_item;
    uint64_t c1 = c0 + pl.cols_per_item < pl.n ? c0 + pl.cols_per_item : pl.n;
    hfx_plan_range(pl.rows, pl.rows_per_item, item % (uint32_t)pl.row_blocks, &r0, &r1);
#ifdef HFX_HVX
    if (hfx_qmatmul_hvx(a, pl.k, pl.n, r0, r1, c0, c1)) return;
#endif
    qmatmul_host(&io, a->ws, pl.k, pl.n, r0, r1, c0, c1);
}

hfx_status hfx_plan_imatmul(const hfx_program *p, hfx_op *op) { return hfx_plan_qmatmul(p, op); }

void hfx_run_imatmul(const hfx_kernel_args *a, uint32_t item) { hfx_run_qmatmul(a, item); }

/* ---- QCONV2D: X[N,C,H,W], W[M,C/g,kh,kw]; the inputs of QMATMUL with M for N, CONV2D's params ---- */

#define QCONV_WS_MAX (256u * 1024u)   /* packed columns per GEMM item */
#define QCONV_DW_ITEM_TAPS (1u << 18) /* depthwise: multiply-adds per item, as conv.c */
#define QCONV_DW_CHANNELS 256         /* depthwise: at most this many channels per item */

enum { QCONV_GEMM, QCONV_DEPTHWISE };

typedef struct qconv_plan {
    uint64_t groups, pixels, mode;          /* pixels = OH * OW */
    uint64_t images_per_item, image_blocks; /* GEMM: an item is images x pixels of one group */
    uint64_t pixels_per_item, blocks;       /* GEMM: output pixels per item, pixel blocks per image */
    uint64_t units_per_item;                /* DEPTHWISE: channels per item (of every image) */
} qconv_plan;

hfx_status hfx_validate_qconv(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_dtypes(v, op);
    if (!st) st = hfx_validate_conv2d(v, op); /* params and shapes of X, W, Y (its bias slot is not ours) */
    if (st) return st;
    return validate_channel_operands(v, op, v->p->tensors[op->in[HFX_QMM_B]].dims[0], "M");
}

/* ICONV2D: X, W u8/i8, zp_x X's type (one element), zp_w W's type (one element or one per channel), Y i32 */
hfx_status hfx_validate_iconv(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    hfx_status st = validate_integer_dtypes(v, op, "X's (its zero point)", "W's (its zero point)");
    if (!st) st = hfx_validate_conv2d(v, op); /* params and shapes of X, W, Y (4 inputs: no bias) */
    uint32_t m = t[op->in[HFX_QMM_B]].dims[0];
    if (!st) st = want_size(v, op, HFX_QMM_ZA, m, false);
    return st ? st : want_size(v, op, HFX_QMM_ZB, m, true);
}

#ifndef HFX_HVX /* HVX builds run depthwise convs as GEMMs */
/* work space of a depthwise item: its channels' weights and accumulators, the tap ranges of every output
 * row and column, a row of accumulators */
static size_t depthwise_ws(uint64_t kk, uint64_t cb, uint64_t oh_n, uint64_t ow_n) {
    return (size_t)(kk * cb + cb + 2 * (oh_n + ow_n) + ow_n) * 4; /* + a row of accumulators (dw_rows) */
}
#endif

/* GEMM items: blocks of output pixels of one group of about HFX_GEMM_ITEM_FLOPS, over as many images as
 * that allows when an image has fewer pixels (one image per item on HFX_HVX), the packed columns within
 * QCONV_WS_MAX bytes. Depthwise (host): ranges of channels of every image. */
hfx_status hfx_plan_qconv(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *w = &p->tensors[op->in[HFX_QMM_B]], *y = &p->tensors[op->out[0]];
    qconv_plan pl = {0};
    pl.groups = (uint64_t)op->params[HFX_P_CONV_GROUP];
    pl.pixels = (uint64_t)y->dims[2] * y->dims[3];
    uint64_t kk = (uint64_t)w->dims[1] * w->dims[2] * w->dims[3], images = y->dims[0];
    uint64_t mg = w->dims[0] / pl.groups, kp = hfx_qgemm_kp(kk);
#ifndef HFX_HVX
    if (mg == 1 && w->dims[1] == 1 && op->opcode != HFX_OP_ICONV2D) {
        pl.mode = QCONV_DEPTHWISE;
        pl.units_per_item = hfx_per_item_for(images * pl.pixels * kk, QCONV_DW_ITEM_TAPS);
        if (pl.units_per_item > QCONV_DW_CHANNELS) pl.units_per_item = QCONV_DW_CHANNELS;
        uint64_t blocks = hfx_ceil_div(pl.groups, pl.units_per_item);
        pl.units_per_item = hfx_ceil_div(pl.groups, blocks);
        op->plan.ws_bytes = depthwise_ws(kk, pl.units_per_item, y->dims[2], y->dims[3]);
        HFX_PLAN_STORE(op, pl);
        return hfx_plan_set_items(op, blocks);
    }
#endif
    pl.mode = QCONV_GEMM;
    uint64_t pb = hfx_per_item_for(2 * mg * kk, HFX_GEMM_ITEM_FLOPS), cap = QCONV_WS_MAX / (kp * 2);
#ifdef HFX_HVX
    uint64_t weights = mg * kk * 2; /* the HVX kernel's per-item budget, as before the host's GEMM */
    cap = weights < QCONV_WS_MAX ? (QCONV_WS_MAX - weights) / (kk * 2) : 0;
#endif
    if (pb > cap) pb = cap ? cap : 1;
    pl.images_per_item = 1;
#ifndef HFX_HVX
    if (pb >= 2 * pl.pixels) pl.images_per_item = pb / pl.pixels < images ? pb / pl.pixels : images;
#endif
    if (pb > pl.pixels) pb = pl.pixels;
    pl.blocks = hfx_ceil_div(pl.pixels, pb);
    pl.pixels_per_item = hfx_ceil_div(pl.pixels, pl.blocks);
    pl.image_blocks = hfx_ceil_div(images, pl.images_per_item);
    pl.images_per_item = hfx_ceil_div(images, pl.image_blocks);
    op->plan.ws_bytes = qmm_host_ws(kk, pl.images_per_item * pl.pixels_per_item, HFX_QGEMM_MR);
#ifdef HFX_HVX
    size_t hvx_ws = hfx_qconv_hvx_ws_bytes(kk, pl.pixels_per_item);
    if (hvx_ws > op->plan.ws_bytes) op->plan.ws_bytes = hvx_ws;
#endif
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, pl.groups * pl.image_blocks * pl.blocks);
}

typedef struct conv_geom {
    uint64_t cg, kh, kw, H, W, ow_n;
    int64_t sh, sw, dh, dw, pt, pl;
    bool direct; /* 1x1, stride 1, no padding: output pixel p reads input pixel p */
} conv_geom;

static conv_geom geom_of(const hfx_tensor *x, const hfx_tensor *w, const int32_t *pr, uint64_t ow_n) {
    conv_geom g = {w->dims[1], w->dims[2], w->dims[3], x->dims[2], x->dims[3], ow_n, 0, 0, 0, 0, 0, 0, false};
    g.sh = pr[HFX_P_CONV_STRIDE_H], g.sw = pr[HFX_P_CONV_STRIDE_W];
    g.dh = pr[HFX_P_CONV_DILATION_H], g.dw = pr[HFX_P_CONV_DILATION_W];
    g.pt = pr[HFX_P_CONV_PAD_TOP], g.pl = pr[HFX_P_CONV_PAD_LEFT];
    g.direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 &&
               pr[HFX_P_CONV_PAD_BOTTOM] == 0 && pr[HFX_P_CONV_PAD_RIGHT] == 0;
    return g;
}

/* [lo, hi): the output columns whose tap j reads inside X's row (0 <= ow * sw + j * dw - pl < W) */
static void out_range(const conv_geom *g, uint64_t j, uint64_t *lo, uint64_t *hi) {
    int64_t off = (int64_t)j * g->dw - g->pl, first = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t last = (int64_t)g->W - 1 - off; /* ow * sw <= last */
    int64_t end = last < 0 ? 0 : last / g->sw + 1;
    if (end > (int64_t)g->ow_n) end = (int64_t)g->ow_n;
    if (first > end) first = end;
    *lo = (uint64_t)first, *hi = (uint64_t)end;
}

/* t[im * np + p] = tap (c, i, j) of output pixel p0 + p of image im: X - zx, 0 in the padding. X is at the
 * first image's group channels. */
#define QCONV_TAP_ROW(ctype)                                                                                      \
    static void tap_row_##ctype(const ctype *X, uint64_t img_stride, int32_t zx, const conv_geom *g, uint64_t ni, \
                                uint64_t p0, uint64_t np, uint64_t c, uint64_t i, uint64_t j, int16_t *t) {       \
        uint64_t lo, hi;                                                                                          \
        out_range(g, j, &lo, &hi);                                                                                \
        int64_t off = (int64_t)j * g->dw - g->pl;                                                                 \
        for (uint64_t im = 0; im < ni; im++, t += np) {                                                           \
            const ctype *xc = X + im * img_stride + c * g->H * g->W;                                              \
            if (g->direct) {                                                                                      \
                for (uint64_t p = 0; p < np; p++) t[p] = (int16_t)(xc[p0 + p] - zx);                              \
                continue;                                                                                         \
            }                                                                                                     \
            for (uint64_t p = 0, oh = p0 / g->ow_n, ow = p0 % g->ow_n; p < np; oh++, ow = 0) {                    \
                uint64_t end = ow + (g->ow_n - ow < np - p ? g->ow_n - ow : np - p); /* this row: [ow, end) */    \
                int64_t ih = (int64_t)oh * g->sh + (int64_t)i * g->dh - g->pt;                                    \
                uint64_t a = lo > ow ? lo : ow, b = hi < end ? hi : end;                                          \
                if (ih < 0 || ih >= (int64_t)g->H || a >= b) a = b = end;                                         \
                int16_t *tr = t + p - ow;                                                                         \
                const ctype *xr = xc + (ih < 0 ? 0 : ih) * (int64_t)g->W + off;                                   \
                for (uint64_t q = ow; q < a; q++) tr[q] = 0;                                                      \
                if (g->sw == 1)                                                                                   \
                    for (uint64_t q = a; q < b; q++) tr[q] = (int16_t)(xr[q] - zx);                               \
                else                                                                                              \
                    for (uint64_t q = a; q < b; q++) tr[q] = (int16_t)(xr[q * (uint64_t)g->sw] - zx);             \
                for (uint64_t q = b; q < end; q++) tr[q] = 0;                                                     \
                p += end - ow;                                                                                    \
            }                                                                                                     \
        }                                                                                                         \
    }
QCONV_TAP_ROW(uint8_t)
QCONV_TAP_ROW(int8_t)

/* The packed columns (qgemm_host.h) of ni images x output pixels [p0, p0 + np): column im * np + p, tap
 * k = (c, i, j), two taps at a time (tap_row); below a panel's width of pixels a 1x1 conv's columns are
 * packed one at a time over every channel instead (one short row segment per image and channel costs
 * more than the values). */
static void pack_cols(const qmm_io *io, const uint8_t *X, uint64_t img_stride, const conv_geom *g, uint64_t ni,
                      uint64_t p0, uint64_t np, const qgemm_bufs *w) {
    bool u8 = io->ta == HFX_DTYPE_U8;
    int32_t zx = io->za;
    if (g->direct && np < HFX_QGEMM_NR) {
        for (uint64_t q = 0; q < ni * np; q++) {
            const uint8_t *xq = X + q / np * img_stride + p0 + q % np;
            int16_t *d = w->b + hfx_qgemm_at(w->kp, 0, q);
            for (uint64_t c = 0; c < g->cg; c++) {
                int32_t v = u8 ? xq[c * g->H * g->W] : ((const int8_t *)xq)[c * g->H * g->W];
                d[(c & ~(uint64_t)1) * HFX_QGEMM_NR + (c & 1)] = (int16_t)(v - zx);
            }
            if (g->cg & 1) d[(g->cg - 1) * HFX_QGEMM_NR + 1] = 0; /* the padding tap */
        }
        for (uint64_t q = ni * np; q < w->ldc; q++) /* the padding columns */
            for (uint64_t k = 0; k < w->kp; k++) w->b[hfx_qgemm_at(w->kp, k, q)] = 0;
        return;
    }
    uint64_t kk = g->cg * g->kh * g->kw;
    for (uint64_t k = 0; k < kk; k += 2) {
        for (uint64_t h = 0; h < 2 && k + h < kk; h++) {
            uint64_t c = (k + h) / (g->kh * g->kw), i = (k + h) / g->kw % g->kh, j = (k + h) % g->kw;
            if (u8) tap_row_uint8_t(X, img_stride, zx, g, ni, p0, np, c, i, j, w->t[h]);
            else tap_row_int8_t((const int8_t *)X, img_stride, zx, g, ni, p0, np, c, i, j, w->t[h]);
        }
        hfx_qgemm_pack_pair(w->t[0], k + 1 < kk ? w->t[1] : NULL, ni * np, w->kp, k, w->b);
    }
}

/* Y[img, m, p] = v: ICONV2D's int32 accumulator (Y may be unaligned) */
static void store_acc(const qmm_io *io, int32_t v, uint64_t m_all, uint64_t pixels, uint64_t img, uint64_t m,
                      uint64_t p) {
    memcpy((uint8_t *)io->y + ((img * m_all + m) * pixels + p) * sizeof(int32_t), &v, sizeof v);
}

/* Fewer columns (images x pixels) than HFX_QGEMM_DOT_COLS: the columns as contiguous int16 (ncols x kk, in
 * the packed area), then each of the group's mg channels (from m0 of m_all; W at its first) dotted with
 * them (hfx_qgemm_dot), requantised 16 channels at a time per column (images from i0). */
static void qconv_dot(const qmm_io *io, const uint8_t *X, uint64_t img_stride, const conv_geom *g, const uint8_t *W,
                      uint64_t m0, uint64_t mg, uint64_t m_all, uint64_t pixels, uint64_t i0, uint64_t ni, uint64_t p0,
                      uint64_t np, const qgemm_bufs *b) {
    uint64_t kk = g->cg * g->kh * g->kw, ncols = ni * np;
    int16_t *xcol = b->b;
    int32_t *acc = b->acc, dot[HFX_QGEMM_DOT_COLS];     /* acc: ncols rows of 16 channels */
    for (uint64_t q = 0; q < ncols && g->direct; q++) { /* 1x1: a column is X's channels at one pixel */
        const uint8_t *xq = X + q / np * img_stride + p0 + q % np;
        for (uint64_t c = 0; c < kk; c++)
            xcol[q * kk + c] =
                (int16_t)((io->ta == HFX_DTYPE_U8 ? xq[c * g->H * g->W] : ((const int8_t *)xq)[c * g->H * g->W]) -
                          io->za);
    }
    for (uint64_t k = 0; k < kk && !g->direct; k++) {
        uint64_t c = k / (g->kh * g->kw), i = k / g->kw % g->kh, j = k % g->kw;
        if (io->ta == HFX_DTYPE_U8) tap_row_uint8_t(X, img_stride, io->za, g, ni, p0, np, c, i, j, b->t[0]);
        else tap_row_int8_t((const int8_t *)X, img_stride, io->za, g, ni, p0, np, c, i, j, b->t[0]);
        for (uint64_t q = 0; q < ncols; q++) xcol[q * kk + k] = b->t[0][q];
    }
    for (uint64_t mb = 0; mb < mg; mb += 16) {
        uint64_t nb = mg - mb < 16 ? mg - mb : 16, mm = m0 + mb;
        for (uint64_t i = 0; i < nb; i++) {
            int32_t zw = load_narrow(io->zb, io->tb, io->zb_cols ? mm + i : 0);
            hfx_qgemm_dot(W + (mb + i) * kk, io->tb == HFX_DTYPE_I8, zw, kk, xcol, kk, (int)ncols, dot);
            for (uint64_t q = 0; q < ncols; q++) acc[q * 16 + i] = dot[q];
        }
        for (uint64_t q = 0; q < ncols && io->raw; q++)
            for (uint64_t i = 0; i < nb; i++)
                store_acc(io, acc[q * 16 + i], m_all, pixels, i0 + q / np, mm + i, p0 + q % np);
        for (uint64_t q = 0; q < ncols && !io->raw; q++)
            hfx_qgemm_requant(acc + q * 16, nb, io->bias ? io->bias + mm : NULL, 1,
                              io->scale + (io->scale_cols ? mm : 0), io->scale_cols, io->zy, io->ty == HFX_DTYPE_I8,
                              (uint8_t *)io->y + ((i0 + q / np) * m_all + mm) * pixels + p0 + q % np, 1, pixels);
    }
}

/* Images [i0, i0 + ni) x output pixels [p0, p0 + np) of group g, all the group's channels: the
 * columns packed once, then HFX_QGEMM_MR channels at a time: their weights widened, multiplied, requantised. */
static void qconv_gemm(const hfx_kernel_args *a, const qmm_io *io, uint64_t i0, uint64_t ni, uint64_t g, uint64_t p0,
                       uint64_t np) {
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors, *x = &t[op->in[HFX_QMM_A]], *w = &t[op->in[HFX_QMM_B]], *y = &t[op->out[0]];
    uint64_t m_all = w->dims[0], mg = m_all / (uint64_t)op->params[HFX_P_CONV_GROUP];
    uint64_t kk = (uint64_t)w->dims[1] * w->dims[2] * w->dims[3], pixels = (uint64_t)y->dims[2] * y->dims[3];
    qgemm_bufs b = qgemm_bufs_of(a->ws, kk, ni * np, HFX_QGEMM_MR);
    conv_geom geo = geom_of(x, w, op->params, y->dims[3]);
    uint64_t img_stride = (uint64_t)x->dims[1] * x->dims[2] * x->dims[3];
    const uint8_t *xg = (const uint8_t *)io->a + i0 * img_stride + g * geo.cg * geo.H * geo.W;
    if (ni * np < HFX_QGEMM_DOT_COLS) {
        qconv_dot(io, xg, img_stride, &geo, (const uint8_t *)io->b + g * mg * kk, g * mg, mg, m_all, pixels, i0, ni, p0,
                  np, &b);
        return;
    }
    pack_cols(io, xg, img_stride, &geo, ni, p0, np, &b);
    bool y_signed = io->ty == HFX_DTYPE_I8;
    for (uint64_t m = 0; m < mg; m += HFX_QGEMM_MR) {
        int rows = mg - m < HFX_QGEMM_MR ? (int)(mg - m) : HFX_QGEMM_MR;
        for (int i = 0; i < rows; i++) {
            uint64_t mm = g * mg + m + (uint64_t)i;
            int32_t zw = load_narrow(io->zb, io->tb, io->zb_cols ? mm : 0);
            widen_row((const uint8_t *)io->b + mm * kk, io->tb, zw, kk, b.a + (size_t)i * b.kp);
        }
        hfx_qgemm_rows(b.a, b.kp, rows, b.b, b.kp, ni * np, b.acc, b.ldc);
        uint64_t mm = g * mg + m;
        if (io->raw) {
            for (int i = 0; i < rows; i++)
                for (uint64_t q = 0; q < ni * np; q++)
                    store_acc(io, b.acc[(size_t)i * b.ldc + q], m_all, pixels, i0 + q / np, mm + (uint64_t)i,
                              p0 + q % np);
            continue;
        }
        hfx_qgemm_requant_rows(b.acc, b.ldc, rows, ni * np, io->bias ? io->bias + mm : NULL,
                               io->scale + (io->scale_cols ? mm : 0), io->scale_cols, io->zy, y_signed,
                               (uint8_t *)io->y + (i0 * m_all + mm) * pixels + p0, pixels, np, m_all * pixels);
    }
}

/* [lo, hi): the taps t < k of a window whose input coordinate o * stride + t * dil - pad is in [0, n) */
static void tap_range(uint64_t o, int64_t stride, int64_t dil, int64_t pad, uint64_t k, uint64_t n, uint32_t *lo_hi) {
    uint32_t lo = 0, hi = 0;
    for (uint64_t t = 0; t < k; t++) {
        int64_t at = (int64_t)o * stride + (int64_t)t * dil - pad;
        if (at < 0 || at >= (int64_t)n) continue;
        if (hi == lo) lo = (uint32_t)t;
        hi = (uint32_t)t + 1;
    }
    lo_hi[0] = lo, lo_hi[1] = hi;
}

/* Depthwise (one input and one output channel per group), channels [c0, c0 + cb) of one output pixel of
 * one image: acc[c] = the sum over the window's taps inside X (a padding tap reads zx: it adds 0). x: X at
 * the image's channel c0, wt: the channels' weights - zw tap-major (kk x cb), hw: X's channel stride. */
#define QCONV_DEPTHWISE(ctype)                                                                             \
    static void depthwise_##ctype(const ctype *x, uint64_t hw, int32_t zx, const int32_t *wt, uint64_t cb, \
                                  const conv_geom *g, uint64_t oh, uint64_t ow, const uint32_t *rows,      \
                                  const uint32_t *cols, uint32_t *acc) {                                   \
        for (uint64_t c = 0; c < cb; c++) acc[c] = 0;                                                      \
        for (uint64_t i = rows[2 * oh]; i < rows[2 * oh + 1]; i++)                                         \
            for (uint64_t j = cols[2 * ow]; j < cols[2 * ow + 1]; j++) {                                   \
                int64_t ih = (int64_t)oh * g->sh + (int64_t)i * g->dh - g->pt;                             \
                int64_t iw = (int64_t)ow * g->sw + (int64_t)j * g->dw - g->pl;                             \
                const ctype *xt = x + (uint64_t)ih * g->W + (uint64_t)iw;                                  \
                const int32_t *w = wt + (i * g->kw + j) * cb;                                              \
                for (uint64_t c = 0; c < cb; c++) acc[c] += (uint32_t)(((int32_t)xt[c * hw] - zx) * w[c]); \
            }                                                                                              \
    }
QCONV_DEPTHWISE(uint8_t)
QCONV_DEPTHWISE(int8_t)

/* Depthwise, one channel of one image with OW >= DW_ROW_MIN: per output row, acc[ow] (row of OW) summed tap
 * by tap over the columns whose input is inside X (out_range; contiguous reads at stride 1), then the row
 * requantised at once. wv: the channel's weights - zw. */
#define DW_ROW_MIN 16
#define QCONV_DW_ROWS(ctype)                                                                                           \
    HFX_VECTOR_KERNEL static void dw_rows_##ctype(const ctype *xc, const int32_t *wv, const qmm_io *io,                \
                                                  const conv_geom *g, uint64_t oh_n, const uint32_t *rows, uint64_t c, \
                                                  uint32_t *acc, uint8_t *y) {                                         \
        for (uint64_t oh = 0; oh < oh_n; oh++) {                                                                       \
            for (uint64_t ow = 0; ow < g->ow_n; ow++) acc[ow] = 0;                                                     \
            for (uint64_t i = rows[2 * oh]; i < rows[2 * oh + 1]; i++) {                                               \
                const ctype *xr = xc + (uint64_t)((int64_t)oh * g->sh + (int64_t)i * g->dh - g->pt) * g->W;            \
                for (uint64_t j = 0; j < g->kw; j++) {                                                                 \
                    uint64_t lo, hi;                                                                                   \
                    out_range(g, j, &lo, &hi);                                                                         \
                    const ctype *xj = xr + ((int64_t)j * g->dw - g->pl);                                               \
                    uint32_t wij = (uint32_t)wv[i * g->kw + j];                                                        \
                    if (g->sw == 1)                                                                                    \
                        for (uint64_t ow = lo; ow < hi; ow++) acc[ow] += (uint32_t)((int32_t)xj[ow] - io->za) * wij;   \
                    else                                                                                               \
                        for (uint64_t ow = lo; ow < hi; ow++)                                                          \
                            acc[ow] += (uint32_t)((int32_t)xj[ow * (uint64_t)g->sw] - io->za) * wij;                   \
                }                                                                                                      \
            }                                                                                                          \
            hfx_qgemm_requant((const int32_t *)acc, g->ow_n, io->bias ? io->bias + c : NULL, 0,                        \
                              io->scale + (io->scale_cols ? c : 0), 0, io->zy, io->ty == HFX_DTYPE_I8,                 \
                              y + oh * g->ow_n, g->ow_n, 0);                                                           \
        }                                                                                                              \
    }
QCONV_DW_ROWS(uint8_t)
QCONV_DW_ROWS(int8_t)

/* Channels [c0, c1) of every image, wide output rows: channel by channel, row by row (dw_rows). */
static void qconv_depthwise_rows(const hfx_kernel_args *a, const qmm_io *io, const conv_geom *geo, uint64_t c0,
                                 uint64_t c1, int32_t *wv, uint32_t *rows, uint32_t *acc) {
    const hfx_tensor *y = &a->prog->tensors[a->op->out[0]];
    uint64_t channels = y->dims[1], kk = geo->kh * geo->kw, hw = geo->H * geo->W, oh_n = y->dims[2];
    for (uint64_t c = c0; c < c1; c++) {
        int32_t zw = load_narrow(io->zb, io->tb, io->zb_cols ? c : 0);
        for (uint64_t k = 0; k < kk; k++) wv[k] = load_narrow(io->b, io->tb, c * kk + k) - zw;
        for (uint64_t img = 0; img < y->dims[0]; img++) {
            uint64_t xy = img * channels + c;
            uint8_t *yc = (uint8_t *)io->y + xy * oh_n * geo->ow_n;
            if (io->ta == HFX_DTYPE_U8)
                dw_rows_uint8_t((const uint8_t *)io->a + xy * hw, wv, io, geo, oh_n, rows, c, acc, yc);
            else dw_rows_int8_t((const int8_t *)io->a + xy * hw, wv, io, geo, oh_n, rows, c, acc, yc);
        }
    }
}

/* Channels [c0, c1) of every image. Narrow output rows (below DW_ROW_MIN): their weights widened tap-major
 * once, then per image and output pixel the channels' accumulators and one requantisation of them
 * (scattered a channel plane apart); wide ones: qconv_depthwise_rows. */
static void qconv_depthwise(const hfx_kernel_args *a, const qmm_io *io, const qconv_plan *pl, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors, *x = &t[op->in[HFX_QMM_A]], *w = &t[op->in[HFX_QMM_B]], *y = &t[op->out[0]];
    conv_geom geo = geom_of(x, w, op->params, y->dims[3]);
    uint64_t channels = pl->groups, kk = geo.kh * geo.kw, hw = geo.H * geo.W, oh_n = y->dims[2], c0, c1;
    hfx_plan_range(channels, pl->units_per_item, item, &c0, &c1);
    uint64_t cb = c1 - c0;
    int32_t *wt = a->ws;
    uint32_t *acc = (uint32_t *)(void *)(wt + kk * pl->units_per_item), *rows = acc + pl->units_per_item;
    uint32_t *cols = rows + 2 * oh_n;
    for (uint64_t o = 0; o < oh_n; o++) tap_range(o, geo.sh, geo.dh, geo.pt, geo.kh, geo.H, rows + 2 * o);
    if (geo.ow_n >= DW_ROW_MIN) {
        qconv_depthwise_rows(a, io, &geo, c0, c1, wt, rows, cols + 2 * geo.ow_n);
        return;
    }
    for (uint64_t o = 0; o < geo.ow_n; o++) tap_range(o, geo.sw, geo.dw, geo.pl, geo.kw, geo.W, cols + 2 * o);
    for (uint64_t c = 0; c < cb; c++) {
        int32_t zw = load_narrow(io->zb, io->tb, io->zb_cols ? c0 + c : 0);
        for (uint64_t k = 0; k < kk; k++) wt[k * cb + c] = load_narrow(io->b, io->tb, (c0 + c) * kk + k) - zw;
    }
    const int32_t *bias = io->bias ? io->bias + c0 : NULL;
    const float *scale = io->scale + (io->scale_cols ? c0 : 0);
    for (uint64_t img = 0; img < y->dims[0]; img++)
        for (uint64_t oh = 0, p = 0; oh < oh_n; oh++)
            for (uint64_t ow = 0; ow < geo.ow_n; ow++, p++) {
                uint64_t xy = img * channels + c0;
                if (io->ta == HFX_DTYPE_U8)
                    depthwise_uint8_t((const uint8_t *)io->a + xy * hw, hw, io->za, wt, cb, &geo, oh, ow, rows, cols,
                                      acc);
                else
                    depthwise_int8_t((const int8_t *)io->a + xy * hw, hw, io->za, wt, cb, &geo, oh, ow, rows, cols,
                                     acc);
                hfx_qgemm_requant((const int32_t *)acc, cb, bias, 1, scale, io->scale_cols, io->zy,
                                  io->ty == HFX_DTYPE_I8, (uint8_t *)io->y + xy * pl->pixels + p, 1, pl->pixels);
            }
}

HFX_VECTOR_KERNEL
void hfx_run_qconv(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    qconv_plan pl;
    HFX_PLAN_LOAD(pl, op);
    qmm_io io = qmm_io_of(a);
    if (pl.mode == QCONV_DEPTHWISE) {
        qconv_depthwise(a, &io, &pl, item);
        return;
    }
    uint64_t images = a->prog->tensors[op->out[0]].dims[0];
    uint64_t blk = item % pl.blocks, ib = item / pl.blocks % pl.image_blocks, g = item / pl.blocks / pl.image_blocks;
    uint64_t i0 = ib * pl.images_per_item, p0 = blk * pl.pixels_per_item;
    uint64_t ni = i0 + pl.images_per_item < images ? pl.images_per_item : images - i0;
    uint64_t np = p0 + pl.pixels_per_item < pl.pixels ? pl.pixels_per_item : pl.pixels - p0;
#ifdef HFX_HVX
    if (hfx_qconv_hvx(a, i0, g, p0, np)) return; /* one image per item on HFX_HVX */
#endif
    qconv_gemm(a, &io, i0, ni, g, p0, np);
}

hfx_status hfx_plan_iconv(const hfx_program *p, hfx_op *op) { return hfx_plan_qconv(p, op); }

void hfx_run_iconv(const hfx_kernel_args *a, uint32_t item) { hfx_run_qconv(a, item); }
