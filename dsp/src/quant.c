/*
 * quant.c - the v2 quantization section: per-tensor or per-channel scale and zero point of
 * integer tensors. Each entry is validated, then every integer op's quantization operands (zero
 * points, scales, the scale ratios derived from them) must agree with the entries of its tensors.
 */
#include "../ref/ref_quant.h"
#include "core.h"
#include "platform.h"

#define QFAIL(st, at, ...)                           \
    do {                                             \
        hfx_error_set(err, (st), (at), __VA_ARGS__); \
        return (st);                                 \
    } while (0)

static bool quantizable(uint32_t dtype) {
    return dtype == HFX_DTYPE_U8 || dtype == HFX_DTYPE_I8 || dtype == HFX_DTYPE_U16 || dtype == HFX_DTYPE_I16 ||
           dtype == HFX_DTYPE_I32;
}

/* a constant parameter tensor (scale or zero point) of `dtype` with `numel` elements */
static hfx_status check_param_tensor(const hfx_program *p, uint32_t e, const char *what, uint32_t id, uint32_t dtype,
                                     uint64_t numel, size_t at, hfx_error *err) {
    if (id >= p->n_tensors) QFAIL(HFX_ERR_TENSOR, at, "quant entry %u: %s tensor %u out of range", e, what, id);
    const hfx_tensor *T = &p->tensors[id];
    if (T->role != HFX_ROLE_CONSTANT)
        QFAIL(HFX_ERR_TENSOR, at, "quant entry %u: %s tensor %u is not a constant", e, what, id);
    if (T->dtype != dtype)
        QFAIL(HFX_ERR_DTYPE, at, "quant entry %u: %s tensor %u has dtype %u, expected %u", e, what, id, T->dtype,
              dtype);
    if (T->numel != numel)
        QFAIL(HFX_ERR_TENSOR, at, "quant entry %u: %s tensor %u has %U elements, expected %U", e, what, id, T->numel,
              numel);
    return HFX_OK;
}

static hfx_status check_entry(const hfx_program *p, uint32_t e, size_t at, uint32_t *seen, hfx_error *err) {
    const uint8_t *r = p->blob + at;
    uint32_t id = hfx_rd_u32(r + HFX_QREC_TENSOR), scale = hfx_rd_u32(r + HFX_QREC_SCALE);
    uint32_t zp = hfx_rd_u32(r + HFX_QREC_ZERO_POINT);
    int32_t axis = (int32_t)hfx_rd_u32(r + HFX_QREC_AXIS);
    if (id >= p->n_tensors)
        QFAIL(HFX_ERR_TENSOR, at + HFX_QREC_TENSOR, "quant entry %u: tensor %u out of range", e, id);
    const hfx_tensor *T = &p->tensors[id];
    if (!quantizable(T->dtype))
        QFAIL(HFX_ERR_DTYPE, at + HFX_QREC_TENSOR, "quant entry %u: tensor %u has dtype %u, not an integer type", e, id,
              T->dtype);
    if (seen[id]) QFAIL(HFX_ERR_TENSOR, at + HFX_QREC_TENSOR, "quant entry %u: tensor %u quantized twice", e, id);
    seen[id] = (uint32_t)at;
    if (axis < -1 || axis >= (int32_t)T->rank)
        QFAIL(HFX_ERR_TENSOR, at + HFX_QREC_AXIS, "quant entry %u: axis %d, expected -1 or below rank %u", e, (int)axis,
              T->rank);
    uint64_t numel = axis < 0 ? 1 : T->dims[axis];
    hfx_status st = check_param_tensor(p, e, "scale", scale, HFX_DTYPE_F32, numel, at + HFX_QREC_SCALE, err);
    if (!st && zp != HFX_NO_TENSOR)
        st = check_param_tensor(p, e, "zero point", zp, T->dtype, numel, at + HFX_QREC_ZERO_POINT, err);
    return st;
}

hfx_status hfx_quant_check(hfx_program *p, hfx_error *err) {
    size_t off = p->quant_off;
    if (p->quant_bytes < 4) QFAIL(HFX_ERR_HEADER, off, "quantization section of %u bytes has no count", p->quant_bytes);
    uint32_t n = hfx_rd_u32(p->blob + off + HFX_QNT_N_ENTRIES);
    if ((uint64_t)n * HFX_QREC_BYTES + HFX_QNT_ENTRIES != p->quant_bytes)
        QFAIL(HFX_ERR_HEADER, off + HFX_QNT_N_ENTRIES, "quantization section: %u entries need %U bytes, it has %u", n,
              (uint64_t)n * HFX_QREC_BYTES + HFX_QNT_ENTRIES, p->quant_bytes);
    uint32_t *seen = hfx_plat_alloc((size_t)p->n_tensors * sizeof *seen, 64);
    if (!seen) QFAIL(HFX_ERR_NOMEM, 0, "out of memory");
    memset(seen, 0, (size_t)p->n_tensors * sizeof *seen);
    p->quant_rec = seen; /* freed with the program */
    hfx_status st = HFX_OK;
    for (uint32_t e = 0; e < n && !st; e++)
        st = check_entry(p, e, off + HFX_QNT_ENTRIES + (size_t)e * HFX_QREC_BYTES, seen, err);
    return st;
}

/* ---- integer ops against the section ------------------------------------------------------- */

/* Scales and zero points of one side: a tensor's entry or an op's operands/params. n values, one
 * per index of `axis` when n > 1. */
typedef struct qvals {
    const uint8_t *scale; /* f32[n]; NULL: not known (an op without such an operand) */
    const uint8_t *zero;  /* zero points of dtype zdt; NULL: all 0 */
    uint8_t zdt;
    uint64_t n;
    int32_t axis;
    uint8_t own[8]; /* a param's scale (0..3) and zero point (4..7) */
} qvals;

static int32_t q_zero(const qvals *q, uint64_t i) {
    if (!q->zero) return 0;
    const uint8_t *z = q->zero;
    switch (q->zdt) {
    case HFX_DTYPE_U8: return z[i];
    case HFX_DTYPE_I8: return (int8_t)z[i];
    case HFX_DTYPE_U16: return hfx_rd_u16(z + 2 * i);
    case HFX_DTYPE_I16: return (int16_t)hfx_rd_u16(z + 2 * i);
    default: return (int32_t)hfx_rd_u32(z + 4 * i);
    }
}
static int32_t q_scale_bits(const qvals *q, uint64_t i) { return (int32_t)hfx_rd_u32(q->scale + 4 * i); }
static float q_scale(const qvals *q, uint64_t i) { return hfx_f32_from_bits(q_scale_bits(q, i)); }

/* the entry of tensor id; false without one */
static bool entry_of(const hfx_program *p, uint32_t id, qvals *q) {
    uint32_t at = p->quant_rec[id];
    if (!at) return false;
    const uint8_t *r = p->blob + at;
    const hfx_tensor *T = &p->tensors[id], *S = &p->tensors[hfx_rd_u32(r + HFX_QREC_SCALE)];
    uint32_t zp = hfx_rd_u32(r + HFX_QREC_ZERO_POINT);
    q->scale = p->blob + S->const_offset;
    q->zero = zp == HFX_NO_TENSOR ? NULL : p->blob + p->tensors[zp].const_offset;
    q->zdt = T->dtype;
    q->n = S->numel;
    q->axis = (int32_t)hfx_rd_u32(r + HFX_QREC_AXIS);
    return true;
}

/* an op's constant scale (slot s, or none) and zero point (slot z, or none) of quantized tensor x,
 * per index of `axis` when they have more than one element; false when one is not a constant */
static bool operands_of(const hfx_program *p, const hfx_op *op, uint32_t s, uint32_t z, int32_t axis, qvals *q) {
    const hfx_tensor *S = s < op->n_in ? &p->tensors[op->in[s]] : NULL;
    const hfx_tensor *Z = z < op->n_in ? &p->tensors[op->in[z]] : NULL;
    if ((S && S->role != HFX_ROLE_CONSTANT) || (Z && Z->role != HFX_ROLE_CONSTANT)) return false;
    q->scale = S ? p->blob + S->const_offset : NULL;
    q->zero = Z ? p->blob + Z->const_offset : NULL;
    q->zdt = Z ? Z->dtype : HFX_DTYPE_I32;
    q->n = S && S->numel > 1 ? S->numel : Z ? Z->numel : 1;
    q->axis = q->n > 1 ? axis : -1;
    return true;
}

/* scalar params: the scale's f32 bits (or no scale) and the zero point, held in q itself */
static void params_of(qvals *q, bool has_scale, int32_t scale_bits, int32_t zero) {
    hfx_wr_u32(q->own, (uint32_t)scale_bits);
    hfx_wr_u32(q->own + 4, (uint32_t)zero);
    q->scale = has_scale ? q->own : NULL;
    q->zero = q->own + 4;
    q->zdt = HFX_DTYPE_I32;
    q->n = 1;
    q->axis = -1;
}

static hfx_status disagree(hfx_vctx *v, const hfx_op *op, size_t at, const char *what, uint32_t id, uint64_t c) {
    return hfx_vfail(v, HFX_ERR_QUANT, at,
                     "op %u (%s): %s of tensor %u (index %U) disagrees with its quantization entry", v->index,
                     op->desc->label, what, id, c);
}

/* Does the op's view `o` of tensor id agree with the tensor's entry (if it has one)? Both may be per
 * tensor or per channel; per channel on both sides needs the same axis. The error is at `at` (a
 * scale's at `at_scale`). */
static hfx_status agree(hfx_vctx *v, const hfx_op *op, uint32_t id, const qvals *o, size_t at, size_t at_scale) {
    qvals e;
    if (!entry_of(v->p, id, &e)) return HFX_OK;
    if (e.n > 1 && o->n > 1 && (e.axis != o->axis || e.n != o->n))
        return hfx_vfail(v, HFX_ERR_QUANT, at,
                         "op %u (%s): tensor %u is quantized per channel on axis %d, the op's operand on axis %d",
                         v->index, op->desc->label, id, (int)e.axis, (int)o->axis);
    uint64_t n = e.n > o->n ? e.n : o->n;
    for (uint64_t c = 0; c < n; c++) {
        uint64_t ie = e.n > 1 ? c : 0, io = o->n > 1 ? c : 0;
        if (q_zero(&e, ie) != q_zero(o, io)) return disagree(v, op, at, "zero point", id, c);
        if (o->scale && q_scale_bits(&e, ie) != q_scale_bits(o, io)) return disagree(v, op, at_scale, "scale", id, c);
    }
    return HFX_OK;
}

/* The one scale of tensor id's entry (*known false without an entry); HFX_ERR_QUANT at `at` when its
 * channels have several (the op has one). */
static hfx_status one_scale(hfx_vctx *v, const hfx_op *op, uint32_t id, size_t at, float *s, bool *known) {
    qvals e;
    *known = entry_of(v->p, id, &e);
    if (!*known) return HFX_OK;
    for (uint64_t c = 1; c < e.n; c++)
        if (q_scale_bits(&e, c) != q_scale_bits(&e, 0)) return disagree(v, op, at, "single scale", id, c);
    *s = q_scale(&e, 0);
    return HFX_OK;
}

/* f32 bits of the product a * b, or of the quotient num / den */
static int32_t mul_bits(float a, float b) { return hfx_bits_from_f32(a * b); }
static int32_t div_bits(float num, float den) { return hfx_bits_from_f32(num / den); }

/* QMATMUL / QCONV2D: zero points of A, B (per column/channel) and Y; the combined scale
 * f32(f32(s_a s_b) / s_y) when A, B and Y have entries; a bias entry: scale f32(s_a s_b), zero 0 */
static hfx_status check_qmatmul(hfx_vctx *v, const hfx_op *op) {
    const hfx_program *p = v->p;
    int32_t col_axis = op->opcode == HFX_OP_QCONV2D ? 0 : 1;
    qvals za, zb, zy;
    if (!operands_of(p, op, HFX_NO_TENSOR, HFX_QMM_ZA, -1, &za) ||
        !operands_of(p, op, HFX_NO_TENSOR, HFX_QMM_ZB, col_axis, &zb) ||
        !operands_of(p, op, HFX_NO_TENSOR, HFX_QMM_ZY, -1, &zy))
        return HFX_OK; /* zero points computed at run time: nothing to compare */
    hfx_status st = agree(v, op, op->in[HFX_QMM_A], &za, HFX_IN_OFF(v, HFX_QMM_ZA), 0);
    if (!st) st = agree(v, op, op->in[HFX_QMM_B], &zb, HFX_IN_OFF(v, HFX_QMM_ZB), 0);
    if (!st) st = agree(v, op, op->out[0], &zy, HFX_IN_OFF(v, HFX_QMM_ZY), 0);
    qvals sb, scale;
    float sa = 0, sy = 0;
    bool ka = false, ky = false;
    if (!st) st = one_scale(v, op, op->in[HFX_QMM_A], HFX_IN_OFF(v, HFX_QMM_A), &sa, &ka);
    if (!st) st = one_scale(v, op, op->out[0], HFX_OUT_OFF(v, 0), &sy, &ky);
    if (st || !ka || !entry_of(p, op->in[HFX_QMM_B], &sb) ||
        !operands_of(p, op, HFX_QMM_SCALE, HFX_NO_TENSOR, col_axis, &scale))
        return st;
    const hfx_tensor *B = &p->tensors[op->in[HFX_QMM_B]];
    uint64_t cols = B->dims[col_axis];
    if (sb.n > 1 && sb.axis != col_axis)
        return hfx_vfail(v, HFX_ERR_QUANT, HFX_IN_OFF(v, HFX_QMM_B),
                         "op %u (%s): tensor %u is quantized per channel on axis %d, not its columns' axis %d",
                         v->index, op->desc->label, op->in[HFX_QMM_B], (int)sb.axis, (int)col_axis);
    bool bias = op->n_in > HFX_QMM_BIAS && p->quant_rec[op->in[HFX_QMM_BIAS]];
    qvals eb;
    if (bias) entry_of(p, op->in[HFX_QMM_BIAS], &eb);
    for (uint64_t c = 0; c < cols; c++) {
        float acc = hfx_f32_from_bits(mul_bits(sa, q_scale(&sb, sb.n > 1 ? c : 0)));
        if (ky && div_bits(acc, sy) != q_scale_bits(&scale, scale.n > 1 ? c : 0))
            return disagree(v, op, HFX_IN_OFF(v, HFX_QMM_SCALE), "scale s_a s_b / s_y", op->out[0], c);
        uint64_t ib = bias && eb.n > 1 ? c : 0;
        if (bias && (q_scale_bits(&eb, ib) != hfx_bits_from_f32(acc) || q_zero(&eb, ib) != 0))
            return disagree(v, op, HFX_IN_OFF(v, HFX_QMM_BIAS), "scale s_a s_b or zero point 0", op->in[HFX_QMM_BIAS],
                            c);
    }
    return HFX_OK;
}

/* QUANTIZE_LINEAR (Y's entry) and DEQUANTIZE_LINEAR (X's entry): the scale and zero point operands */
static hfx_status check_q_dq(hfx_vctx *v, const hfx_op *op) {
    qvals o;
    if (!operands_of(v->p, op, 1, 2, op->params[HFX_P_QUANT_AXIS], &o)) return HFX_OK;
    bool q = op->opcode == HFX_OP_QUANTIZE_LINEAR;
    size_t at_zero = HFX_IN_OFF(v, op->n_in > 2 ? 2 : 1);
    return agree(v, op, q ? op->out[0] : op->in[0], &o, at_zero, HFX_IN_OFF(v, 1));
}

/* QADD / QMUL: zero points p2..p4; ratios s_a / s_y, s_b / s_y (QMUL: f32(s_a s_b) / s_y) */
static hfx_status check_qbinary(hfx_vctx *v, const hfx_op *op) {
    const int32_t *P = op->params;
    uint32_t ids[3] = {op->in[0], op->in[1], op->out[0]};
    for (uint32_t k = 0; k < 3; k++) {
        qvals z;
        params_of(&z, false, 0, P[HFX_P_QBIN_ZERO_A + k]);
        hfx_status st = agree(v, op, ids[k], &z, HFX_PARAM_OFF(v, HFX_P_QBIN_ZERO_A + k), 0);
        if (st) return st;
    }
    float s[3];
    bool known[3];
    for (uint32_t k = 0; k < 3; k++) {
        hfx_status st = one_scale(v, op, ids[k], k < 2 ? HFX_IN_OFF(v, k) : HFX_OUT_OFF(v, 0), &s[k], &known[k]);
        if (st) return st;
    }
    float sa = s[0], sb = s[1], sy = s[2];
    bool ka = known[0], kb = known[1];
    if (!known[2]) return HFX_OK;
    bool mul = op->opcode == HFX_OP_QMUL;
    if (mul && ka && kb && P[HFX_P_QBIN_RATIO_A] != div_bits(hfx_f32_from_bits(mul_bits(sa, sb)), sy))
        return disagree(v, op, HFX_PARAM_OFF(v, HFX_P_QBIN_RATIO_A), "ratio s_a s_b / s_y", ids[2], 0);
    if (!mul && ka && P[HFX_P_QBIN_RATIO_A] != div_bits(sa, sy))
        return disagree(v, op, HFX_PARAM_OFF(v, HFX_P_QBIN_RATIO_A), "ratio s_a / s_y", ids[0], 0);
    if (!mul && kb && P[HFX_P_QBIN_RATIO_B] != div_bits(sb, sy))
        return disagree(v, op, HFX_PARAM_OFF(v, HFX_P_QBIN_RATIO_B), "ratio s_b / s_y", ids[1], 0);
    return HFX_OK;
}

/* QMAXPOOL / QAVGPOOL: p12..p15 are s_x, z_x, s_y, z_y */
static hfx_status check_qpool(hfx_vctx *v, const hfx_op *op) {
    const int32_t *P = op->params;
    qvals x, y;
    params_of(&x, true, P[HFX_P_QPOOL_SCALE_X], P[HFX_P_QPOOL_ZERO_X]);
    params_of(&y, true, P[HFX_P_QPOOL_SCALE_Y], P[HFX_P_QPOOL_ZERO_Y]);
    hfx_status st =
        agree(v, op, op->in[0], &x, HFX_PARAM_OFF(v, HFX_P_QPOOL_ZERO_X), HFX_PARAM_OFF(v, HFX_P_QPOOL_SCALE_X));
    return st ? st
              : agree(v, op, op->out[0], &y, HFX_PARAM_OFF(v, HFX_P_QPOOL_ZERO_Y),
                      HFX_PARAM_OFF(v, HFX_P_QPOOL_SCALE_Y));
}

/* QGLOBAL_AVGPOOL: zero points p1, p2; scale p0 = f32(s_x / f32(s_y f32(count))) */
static hfx_status check_qgap(hfx_vctx *v, const hfx_op *op) {
    const int32_t *P = op->params;
    qvals x, y;
    params_of(&x, false, 0, P[HFX_P_QGAP_ZERO_X]);
    params_of(&y, false, 0, P[HFX_P_QGAP_ZERO_Y]);
    hfx_status st = agree(v, op, op->in[0], &x, HFX_PARAM_OFF(v, HFX_P_QGAP_ZERO_X), 0);
    if (!st) st = agree(v, op, op->out[0], &y, HFX_PARAM_OFF(v, HFX_P_QGAP_ZERO_Y), 0);
    float sx = 0, sy = 0;
    bool kx = false, ky = false;
    if (!st) st = one_scale(v, op, op->in[0], HFX_IN_OFF(v, 0), &sx, &kx);
    if (!st) st = one_scale(v, op, op->out[0], HFX_OUT_OFF(v, 0), &sy, &ky);
    if (st || !kx || !ky) return st;
    const hfx_tensor *X = &v->p->tensors[op->in[0]];
    uint64_t plane = 1; /* the plane's size, also when the batch is empty */
    for (uint32_t i = 2; i < X->rank; i++) plane *= X->dims[i];
    float count = (float)plane;
    if (P[HFX_P_QGAP_SCALE] != div_bits(sx, hfx_f32_from_bits(mul_bits(sy, count))))
        return disagree(v, op, HFX_PARAM_OFF(v, HFX_P_QGAP_SCALE), "scale s_x / (s_y count)", op->out[0], 0);
    return HFX_OK;
}

/* floor of a float without libm (the core is freestanding) */
static float floor_f32(float x) {
    if (!(x > -8388608.0f && x < 8388608.0f)) return x; /* |x| >= 2^23 is an integer; NaN stays NaN */
    float t = (float)(int32_t)x;
    return t > x ? t - 1.0f : t;
}

/* QSOFTMAX: zero point p2, p1 = floor(1 / s_y) */
static hfx_status check_qsoftmax(hfx_vctx *v, const hfx_op *op) {
    const int32_t *P = op->params;
    qvals y;
    params_of(&y, false, 0, P[HFX_P_QSOFTMAX_ZERO_Y]);
    hfx_status st = agree(v, op, op->out[0], &y, HFX_PARAM_OFF(v, HFX_P_QSOFTMAX_ZERO_Y), 0);
    float sy = 0;
    bool ky = false;
    if (!st) st = one_scale(v, op, op->out[0], HFX_OUT_OFF(v, 0), &sy, &ky);
    if (st || !ky) return st;
    if (P[HFX_P_QSOFTMAX_SCALE] != hfx_bits_from_f32(floor_f32(1.0f / sy)))
        return disagree(v, op, HFX_PARAM_OFF(v, HFX_P_QSOFTMAX_SCALE), "floor(1 / s_y)", op->out[0], 0);
    return HFX_OK;
}

/* Table `tab` of dtype ty (256 entries) maps each value of X's dtype tx to Q_y(DQ_x(x)) with the
 * entries of x and y (QCONCAT, QRESIZE: ref_quant.h's arithmetic); checked when both have one. */
static hfx_status check_table(hfx_vctx *v, const hfx_op *op, uint32_t x, uint32_t y, const uint8_t *tab, size_t at) {
    float sx, sy;
    bool kx, ky;
    hfx_status st = one_scale(v, op, x, at, &sx, &kx);
    if (!st) st = one_scale(v, op, y, at, &sy, &ky);
    qvals ex, ey;
    if (st || !kx || !ky || !entry_of(v->p, x, &ex) || !entry_of(v->p, y, &ey)) return st;
    int32_t zx = q_zero(&ex, 0), zy = q_zero(&ey, 0);
    bool x_signed = v->p->tensors[x].dtype == HFX_DTYPE_I8, y_signed = v->p->tensors[y].dtype == HFX_DTYPE_I8;
    int32_t ylo = y_signed ? -128 : 0;
    for (int32_t j = 0; j < 256; j++) {
        float f = ref_dequantize_linear(j + (x_signed ? -128 : 0), sx, zx);
        int32_t want = ref_quantize_linear(f, sy, zy, ylo, ylo + 255);
        int32_t got = y_signed ? (int8_t)tab[j] : tab[j];
        if (got != want) return disagree(v, op, at, "table Q_y(DQ_x(x))", x, (uint64_t)j);
    }
    return HFX_OK;
}

/* QCONCAT: each input's table [k, 256] row against its entry and Y's */
static hfx_status check_qconcat(hfx_vctx *v, const hfx_op *op) {
    uint32_t k = op->n_in - 1;
    const hfx_tensor *T = &v->p->tensors[op->in[k]];
    if (T->role != HFX_ROLE_CONSTANT) return HFX_OK;
    hfx_status st = HFX_OK;
    for (uint32_t i = 0; i < k && !st; i++)
        st = check_table(v, op, op->in[i], op->out[0], v->p->blob + T->const_offset + 256u * i, HFX_IN_OFF(v, k));
    return st;
}

/* QRESIZE: its table [256] against X's and Y's entries */
static hfx_status check_qresize(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *T = &v->p->tensors[op->in[1]];
    if (T->role != HFX_ROLE_CONSTANT) return HFX_OK;
    return check_table(v, op, op->in[0], op->out[0], v->p->blob + T->const_offset, HFX_IN_OFF(v, 1));
}

/* The ops whose quantization the section checks. QLUT's table is ONNX Runtime's own run of the
 * group and QSOFTMAX's an exp table: not rederived here. */
static const struct {
    uint16_t opcode;
    hfx_status (*check)(hfx_vctx *v, const hfx_op *op);
} g_quant_checks[] = {
    {HFX_OP_QMATMUL, check_qmatmul},        {HFX_OP_QCONV2D, check_qmatmul}, {HFX_OP_QUANTIZE_LINEAR, check_q_dq},
    {HFX_OP_DEQUANTIZE_LINEAR, check_q_dq}, {HFX_OP_QADD, check_qbinary},    {HFX_OP_QMUL, check_qbinary},
    {HFX_OP_QMAXPOOL, check_qpool},         {HFX_OP_QAVGPOOL, check_qpool},  {HFX_OP_QGLOBAL_AVGPOOL, check_qgap},
    {HFX_OP_QSOFTMAX, check_qsoftmax},      {HFX_OP_QCONCAT, check_qconcat}, {HFX_OP_QRESIZE, check_qresize},
};

hfx_status hfx_quant_check_op(hfx_vctx *v, const hfx_op *op) {
    for (size_t k = 0; k < sizeof g_quant_checks / sizeof g_quant_checks[0]; k++)
        if (g_quant_checks[k].opcode == op->opcode) return g_quant_checks[k].check(v, op);
    return HFX_OK;
}
