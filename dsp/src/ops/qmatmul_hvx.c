/* qmatmul_hvx.c - QMATMUL and QCONV2D items on HVX (Hexagon builds with HFX_HVX), see qmatmul_hvx.h.
 * Per item: V (B's columns, or the im2col of the item's pixels) packed once, then 4 rows of S (A's
 * rows, or the group's weights) at a time through hvx_qgemm_rows, then each int32 accumulator
 * requantised by hvx_qgemm_requant (bit for bit ref_qmatmul_requant). */
#include "qmatmul_hvx.h"

#ifdef HFX_HVX
#include "../../hvx/hvx_qgemm.h"
#include "../../hvx/hvx_util.h"

enum { IN_A, IN_B, IN_ZA, IN_ZB, IN_SCALE, IN_ZY, IN_BIAS }; /* qmatmul.c's input slots */

typedef struct qgemm_ws {
    uint8_t *packed, *srows;
    int32_t *bcol, *zvp, *vsum, *acc;
    size_t ldc, rb;
} qgemm_ws;

static size_t ldc_of(uint64_t cols) { return (size_t)(cols + HVX_QGEMM_PANEL - 1) / HVX_QGEMM_PANEL * HVX_QGEMM_PANEL; }

/* packed V, bcol, zv', vsum, 4 copied S rows, 4 accumulator rows; every part a multiple of 128 bytes */
size_t hfx_qgemm_hvx_ws_bytes(uint64_t k, uint64_t cols) {
    return hvx_qgemm_packed_bytes(k, cols) + 7 * 4 * ldc_of(cols) + 4 * hvx_qgemm_row_bytes(k);
}

static qgemm_ws ws_of(void *ws, uint64_t k, uint64_t cols) {
    qgemm_ws w;
    w.ldc = ldc_of(cols);
    w.rb = hvx_qgemm_row_bytes(k);
    w.packed = ws;
    w.bcol = (int32_t *)(void *)(w.packed + hvx_qgemm_packed_bytes(k, cols));
    w.zvp = w.bcol + w.ldc;
    w.vsum = w.zvp + w.ldc;
    w.acc = w.vsum + w.ldc;
    w.srows = (uint8_t *)(w.acc + 4 * w.ldc);
    return w;
}

static bool narrow(uint32_t d) { return d == HFX_DTYPE_U8 || d == HFX_DTYPE_I8; }
static int32_t load_narrow(const void *p, uint32_t dtype, uint64_t i) {
    return dtype == HFX_DTYPE_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

typedef struct qgemm_io {
    uint32_t ta, tb, ty;
    int32_t za, zy;
    bool zb_cols, scale_cols;
} qgemm_io;

static bool io_of(const hfx_kernel_args *a, qgemm_io *io) {
    const hfx_tensor *t = a->prog->tensors;
    const hfx_op *op = a->op;
    io->ta = t[op->in[IN_A]].dtype, io->tb = t[op->in[IN_B]].dtype, io->ty = t[op->out[0]].dtype;
    if (!narrow(io->ta) || !narrow(io->tb) || !narrow(io->ty)) return false;
    io->za = load_narrow(a->in[IN_ZA], io->ta, 0);
    io->zy = load_narrow(a->in[IN_ZY], io->ty, 0);
    io->zb_cols = t[op->in[IN_ZB]].numel > 1;
    io->scale_cols = t[op->in[IN_SCALE]].numel > 1;
    return true;
}

bool hfx_qmatmul_hvx(const hfx_kernel_args *a, uint64_t k, uint64_t n, uint64_t r0, uint64_t r1, uint64_t c0,
                     uint64_t c1) {
    qgemm_io io;
    if (!io_of(a, &io)) return false;
    uint64_t nc = c1 - c0;
    qgemm_ws w = ws_of(a->ws, k, nc);
    const int32_t *bias = a->op->n_in > IN_BIAS ? a->in[IN_BIAS] : NULL;
    const float *scale = a->in[IN_SCALE];
    int32_t voff = hvx_qgemm_voff(io.tb == HFX_DTYPE_I8);
    hvx_qgemm_pack((const uint8_t *)a->in[IN_B] + c0, n, io.tb == HFX_DTYPE_I8, k, nc, w.packed);
    hvx_qgemm_col_sums(w.packed, k, nc, w.vsum);
    for (uint64_t c = 0; c < w.ldc; c++) {
        bool in = c < nc;
        w.bcol[c] = bias && in ? bias[c0 + c] : 0;
        w.zvp[c] = in ? load_narrow(a->in[IN_ZB], io.tb, io.zb_cols ? c0 + c : 0) + voff : 0;
    }
    hvx_qgemm_cols cols = {w.bcol, w.zvp, w.vsum};
    int32_t zs[4] = {io.za, io.za, io.za, io.za}, brow[4] = {0, 0, 0, 0};
    for (uint64_t r = r0; r < r1; r += 4) {
        int rows = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int i = 0; i < rows; i++)
            hvx_qgemm_copy_row((const uint8_t *)a->in[IN_A] + (r + (uint64_t)i) * k, k, w.srows + i * w.rb);
        hvx_qgemm_rows(w.srows, rows, io.ta == HFX_DTYPE_I8, zs, brow, w.packed, &cols, k, nc, w.acc);
        for (int i = 0; i < rows; i++)
            hvx_qgemm_requant(w.acc + (size_t)i * w.ldc, nc, scale + (io.scale_cols ? c0 : 0), io.scale_cols, io.zy,
                              io.ty == HFX_DTYPE_I8, (uint8_t *)a->out[0] + (r + (uint64_t)i) * n + c0);
    }
    return true;
}

/* the packed im2col of pixels [p0, p0 + np): X's byte (+128 if i8) at each tap, zx's in the padding */
static void im2col_packed(const uint8_t *x, const hfx_tensor *xt, const hfx_tensor *wt, const int32_t *pr,
                          uint64_t ow_n, uint64_t p0, uint64_t np, uint8_t pad, uint8_t flip, uint8_t *packed) {
    uint64_t cg = wt->dims[1], kh = wt->dims[2], kw = wt->dims[3], H = xt->dims[2], W = xt->dims[3];
    uint64_t kk = cg * kh * kw;
    int64_t sh = pr[HFX_P_CONV_STRIDE_H], sw = pr[HFX_P_CONV_STRIDE_W], dh = pr[HFX_P_CONV_DILATION_H];
    int64_t dw = pr[HFX_P_CONV_DILATION_W], pt = pr[HFX_P_CONV_PAD_TOP], pl = pr[HFX_P_CONV_PAD_LEFT];
    for (uint64_t p = 0; p < np; p++) {
        int64_t oh = (int64_t)((p0 + p) / ow_n), ow = (int64_t)((p0 + p) % ow_n);
        uint8_t *col = packed + hvx_qgemm_packed_at(kk, 0, p);
        uint64_t tap = 0;
        for (uint64_t c = 0; c < cg; c++)
            for (uint64_t i = 0; i < kh; i++) {
                int64_t ih = oh * sh + (int64_t)i * dh - pt;
                bool row_in = ih >= 0 && ih < (int64_t)H;
                const uint8_t *xrow = x + (c * H + (uint64_t)(row_in ? ih : 0)) * W;
                for (uint64_t j = 0; j < kw; j++, tap++) {
                    int64_t iw = ow * sw + (int64_t)j * dw - pl;
                    col[tap / 4 * 4 * HVX_BYTES + tap % 4] =
                        row_in && iw >= 0 && iw < (int64_t)W ? xrow[iw] ^ flip : pad;
                }
            }
    }
}

static void zero_vectors(void *p, size_t bytes) {
    HVX_Vector *v = (HVX_Vector *)p;
    for (size_t i = 0; i < bytes / HVX_BYTES; i++) v[i] = Q6_V_vzero();
}

bool hfx_qconv_hvx(const hfx_kernel_args *a, uint64_t img, uint64_t g, uint64_t p0, uint64_t np) {
    qgemm_io io;
    if (!io_of(a, &io)) return false;
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors, *xt = &t[op->in[IN_A]], *wt = &t[op->in[IN_B]], *yt = &t[op->out[0]];
    uint64_t groups = (uint64_t)op->params[HFX_P_CONV_GROUP], m_all = wt->dims[0], mg = m_all / groups;
    uint64_t kk = (uint64_t)wt->dims[1] * wt->dims[2] * wt->dims[3], pixels = (uint64_t)yt->dims[2] * yt->dims[3];
    qgemm_ws w = ws_of(a->ws, kk, np);
    const int32_t *bias = op->n_in > IN_BIAS ? a->in[IN_BIAS] : NULL;
    const float *scale = a->in[IN_SCALE];
    bool x_signed = io.ta == HFX_DTYPE_I8;
    int32_t zxp = io.za + hvx_qgemm_voff(x_signed);
    uint64_t x_at = (img * xt->dims[1] + g * wt->dims[1]) * xt->dims[2] * xt->dims[3];
    zero_vectors(w.packed, hvx_qgemm_packed_bytes(kk, np));
    im2col_packed((const uint8_t *)a->in[IN_A] + x_at, xt, wt, op->params, yt->dims[3], p0, np, (uint8_t)zxp,
                  x_signed ? 0x80 : 0, w.packed);
    hvx_qgemm_col_sums(w.packed, kk, np, w.vsum);
    for (uint64_t c = 0; c < w.ldc; c++) w.zvp[c] = zxp;
    hvx_qgemm_cols cols = {NULL, w.zvp, w.vsum};
    for (uint64_t m = 0; m < mg; m += 4) {
        int rows = mg - m < 4 ? (int)(mg - m) : 4;
        int32_t zs[4], brow[4];
        for (int i = 0; i < rows; i++) {
            uint64_t mm = g * mg + m + (uint64_t)i;
            hvx_qgemm_copy_row((const uint8_t *)a->in[IN_B] + mm * kk, kk, w.srows + i * w.rb);
            zs[i] = load_narrow(a->in[IN_ZB], io.tb, io.zb_cols ? mm : 0);
            brow[i] = bias ? bias[mm] : 0;
        }
        hvx_qgemm_rows(w.srows, rows, io.tb == HFX_DTYPE_I8, zs, brow, w.packed, &cols, kk, np, w.acc);
        for (int i = 0; i < rows; i++) {
            uint64_t mm = g * mg + m + (uint64_t)i;
            hvx_qgemm_requant(w.acc + (size_t)i * w.ldc, np, scale + (io.scale_cols ? mm : 0), 0, io.zy,
                              io.ty == HFX_DTYPE_I8, (uint8_t *)a->out[0] + (img * m_all + mm) * pixels + p0);
        }
    }
    return true;
}
#endif
