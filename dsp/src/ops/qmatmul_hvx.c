/* qmatmul_hvx.c - QMATMUL, IMATMUL, QCONV2D and ICONV2D items on HVX (Hexagon builds with HFX_HVX), see
 * qmatmul_hvx.h. Per item: V (B's columns, or the im2col of the item's pixels) packed once, then 4 rows
 * of S (A's rows, or the group's weights) at a time through hvx_qgemm_rows, then each int32 accumulator
 * requantised by hvx_qgemm_requant (bit for bit ref_qmatmul_requant), or stored as it is (IMATMUL,
 * ICONV2D). */
#include "qmatmul_hvx.h"

#ifdef HFX_HVX
#include "../../hvx/hvx_im2col.h"
#include "../../hvx/hvx_qgemm.h"

enum { IN_A, IN_B, IN_ZA, IN_ZB, IN_SCALE, IN_ZY, IN_BIAS }; /* qmatmul.c's input slots */
_Static_assert(HFX_QMM_HVX_PANEL == HVX_QGEMM_PANEL, "qmatmul.c plans items of whole panels");

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
    bool raw; /* IMATMUL, ICONV2D: Y is the int32 accumulators (no scale, zy or bias inputs) */
} qgemm_io;

static bool io_of(const hfx_kernel_args *a, qgemm_io *io) {
    const hfx_tensor *t = a->prog->tensors;
    const hfx_op *op = a->op;
    io->ta = t[op->in[IN_A]].dtype, io->tb = t[op->in[IN_B]].dtype, io->ty = t[op->out[0]].dtype;
    io->raw = op->opcode == HFX_OP_IMATMUL || op->opcode == HFX_OP_ICONV2D;
    if (!narrow(io->ta) || !narrow(io->tb) || (!io->raw && !narrow(io->ty))) return false;
    io->za = load_narrow(a->in[IN_ZA], io->ta, 0);
    io->zb_cols = t[op->in[IN_ZB]].numel > 1;
    io->zy = io->raw ? 0 : load_narrow(a->in[IN_ZY], io->ty, 0);
    io->scale_cols = !io->raw && t[op->in[IN_SCALE]].numel > 1;
    return true;
}

bool hfx_qmatmul_hvx(const hfx_kernel_args *a, uint64_t k, uint64_t n, uint64_t r0, uint64_t r1, uint64_t c0,
                     uint64_t c1) {
    qgemm_io io;
    if (!io_of(a, &io)) return false;
    uint64_t nc = c1 - c0;
    qgemm_ws w = ws_of(a->ws, k, nc);
    const int32_t *bias = !io.raw && a->op->n_in > IN_BIAS ? a->in[IN_BIAS] : NULL;
    const float *scale = io.raw ? NULL : a->in[IN_SCALE];
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
        for (int i = 0; i < rows; i++) {
            uint64_t at = (r + (uint64_t)i) * n + c0;
            if (io.raw)
                hvx_qgemm_store_words(w.acc + (size_t)i * w.ldc, nc, (uint8_t *)a->out[0] + at * sizeof(int32_t));
            else
                hvx_qgemm_requant(w.acc + (size_t)i * w.ldc, nc, scale + (io.scale_cols ? c0 : 0), io.scale_cols, io.zy,
                                  io.ty == HFX_DTYPE_I8, (uint8_t *)a->out[0] + at);
        }
    }
    return true;
}

size_t hfx_qconv_hvx_ws_bytes(uint64_t kk, uint64_t pixels) {
    return hfx_qgemm_hvx_ws_bytes(kk, pixels) + kk * hvx_im2col_ld(pixels);
}

static hvx_conv_geom geom_of(const hfx_tensor *xt, const hfx_tensor *wt, const int32_t *pr, uint64_t ow_n) {
    hvx_conv_geom g = {wt->dims[1], wt->dims[2], wt->dims[3], xt->dims[2], xt->dims[3], ow_n, 0, 0, 0, 0, 0, 0};
    g.sh = pr[HFX_P_CONV_STRIDE_H], g.sw = pr[HFX_P_CONV_STRIDE_W];
    g.dh = pr[HFX_P_CONV_DILATION_H], g.dw = pr[HFX_P_CONV_DILATION_W];
    g.pt = pr[HFX_P_CONV_PAD_TOP], g.pl = pr[HFX_P_CONV_PAD_LEFT];
    return g;
}

bool hfx_qconv_hvx(const hfx_kernel_args *a, uint64_t img, uint64_t g, uint64_t p0, uint64_t np) {
    qgemm_io io;
    if (!io_of(a, &io)) return false;
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors, *xt = &t[op->in[IN_A]], *wt = &t[op->in[IN_B]], *yt = &t[op->out[0]];
    uint64_t groups = (uint64_t)op->params[HFX_P_CONV_GROUP], m_all = wt->dims[0], mg = m_all / groups;
    uint64_t kk = (uint64_t)wt->dims[1] * wt->dims[2] * wt->dims[3], pixels = (uint64_t)yt->dims[2] * yt->dims[3];
    qgemm_ws w = ws_of(a->ws, kk, np);
    const int32_t *bias = !io.raw && op->n_in > IN_BIAS ? a->in[IN_BIAS] : NULL;
    const float *scale = io.raw ? NULL : a->in[IN_SCALE];
    bool x_signed = io.ta == HFX_DTYPE_I8;
    int32_t zxp = io.za + hvx_qgemm_voff(x_signed);
    uint64_t x_at = (img * xt->dims[1] + g * wt->dims[1]) * xt->dims[2] * xt->dims[3];
    hvx_conv_geom geo = geom_of(xt, wt, op->params, yt->dims[3]);
    const uint8_t *x = a->in[IN_A];
    uint8_t *t_rows = (uint8_t *)a->ws + hfx_qgemm_hvx_ws_bytes(kk, np);
    hvx_im2col_rows(x + x_at, x + xt->numel, &geo, p0, np, (uint8_t)io.za, t_rows, hvx_im2col_ld(np));
    hvx_qgemm_pack(t_rows, hvx_im2col_ld(np), x_signed, kk, np, w.packed);
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
            uint64_t mm = g * mg + m + (uint64_t)i, at = (img * m_all + mm) * pixels + p0;
            if (io.raw)
                hvx_qgemm_store_words(w.acc + (size_t)i * w.ldc, np, (uint8_t *)a->out[0] + at * sizeof(int32_t));
            else
                hvx_qgemm_requant(w.acc + (size_t)i * w.ldc, np, scale + (io.scale_cols ? mm : 0), 0, io.zy,
                                  io.ty == HFX_DTYPE_I8, (uint8_t *)a->out[0] + at);
        }
    }
    return true;
}
#endif
