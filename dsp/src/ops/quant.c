/* quant.c - QuantizeLinear and DequantizeLinear, DynamicQuantizeLinear's scale and zero point, and Cast f32 -> i32,
 * ONNX semantics as ONNX Runtime's CPU kernels compute them (bit for bit):
 *
 *   Q:  t = x / scale; t = max(t, lo - zp) (NaN gives lo - zp); t = min(t, hi - zp);
 *       y = round_half_to_even(t) + zp            (MLAS on x86: divps, maxps, minps, cvtps2dq)
 *   DQ: y = f32(x - zp) * scale                   (x - zp in int32)
 *
 *   DYNAMIC_QPARAMS: u8 scale and zero point from the range of x and 0 (dsp/ref/ref_quant.h)
 *   CAST: y = (int32)x toward zero, INT32_MIN for NaN, +-inf and x out of range (ref_cast_f32_i32); f16 -> f32
 *         exact, f32 -> f16 to nearest, ties to even (ref_f16_to_f32, ref_f32_to_f16); i64 -> f32 to nearest,
 *         ties to even (C's conversion)
 *
 * Scale and zero point have one element (per tensor) or one per index of the axis (per axis).
 * An item is a chunk of elements; DYNAMIC_QPARAMS is one item. On Hexagon builds (HFX_HVX) Q (runs of 8
 * elements or more; its lanes near a rounding tie by the reference), DQ of 8/16-bit types, DYNAMIC_QPARAMS's range
 * and CAST to i32 run hvx/hvx_dequant.c, in integer arithmetic on the bit patterns (the f16 casts run the
 * reference everywhere). */
#include <stdint.h>

#include "../../ref/ref_quant.h"
#include "kernels.h"
#ifdef HFX_HVX
#include "../../hvx/hvx_dequant.h"
#endif

/* The integer types these ops quantize to and from: a row each, X(dtype, C type, min, max).
 * U16 and I16 exist in format v2 programs only (the parser refuses them in v1). */
#define HFX_QUANT_TYPES(X)                      \
    X(HFX_DTYPE_U8, uint8_t, 0, UINT8_MAX)      \
    X(HFX_DTYPE_I8, int8_t, INT8_MIN, INT8_MAX) \
    X(HFX_DTYPE_U16, uint16_t, 0, UINT16_MAX)   \
    X(HFX_DTYPE_I16, int16_t, INT16_MIN, INT16_MAX)
/* DequantizeLinear also reads int32 (the biases of QDQ models) and int64 (position ids, masks: the
 * low 32 bits as int32, exact below 2^31). */
#define HFX_DEQUANT_ONLY_TYPES(X)                   \
    X(HFX_DTYPE_I32, int32_t, INT32_MIN, INT32_MAX) \
    X(HFX_DTYPE_I64, int64_t, INT64_MIN, INT64_MAX)

#define HFX_IS_TYPE(dt, ctype, lo, hi) || d == (dt)
static bool quant_type(uint32_t d) { return false HFX_QUANT_TYPES(HFX_IS_TYPE); }
static bool dequant_type(uint32_t d) { return quant_type(d) HFX_DEQUANT_ONLY_TYPES(HFX_IS_TYPE); }
#undef HFX_IS_TYPE

typedef struct hfx_quant_plan {
    uint64_t elems_per_item;
    uint64_t inner;    /* elements per index of the axis (1 per tensor: see channels) */
    uint64_t channels; /* scale elements: 1 per tensor, X.dims[axis] per axis */
} hfx_quant_plan;

static hfx_status dtype_fail(hfx_vctx *v, const hfx_op *op, uint32_t slot, bool output, const char *want) {
    uint32_t id = output ? op->out[0] : op->in[slot];
    size_t at = output ? HFX_OUT_OFF(v, 0) : HFX_IN_OFF(v, slot);
    return hfx_vfail(v, HFX_ERR_DTYPE, at, "op %u (%s): tensor %u dtype %u, expected %s", v->index, op->desc->label, id,
                     v->p->tensors[id].dtype, want);
}

/* Q: x f32, y u8/i8/u16/i16 (the zero point's type, u8 without one); DQ: x u8/i8/u16/i16/i32/i64, y f32, zp x's type */
static hfx_status validate_dtypes(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    bool q = op->opcode == HFX_OP_QUANTIZE_LINEAR;
    uint32_t x = t[op->in[0]].dtype, y = t[op->out[0]].dtype;
    uint32_t integer = q ? y : x;
    if (q && x != HFX_DTYPE_F32) return dtype_fail(v, op, 0, false, "f32");
    if (!q && !dequant_type(x)) return dtype_fail(v, op, 0, false, "an integer type");
    if (q && !quant_type(y)) return dtype_fail(v, op, 0, true, "an integer type");
    if (!q && y != HFX_DTYPE_F32) return dtype_fail(v, op, 0, true, "f32");
    if (t[op->in[1]].dtype != HFX_DTYPE_F32) return dtype_fail(v, op, 1, false, "f32 (the scale)");
    if (op->n_in == 3 && t[op->in[2]].dtype != integer)
        return dtype_fail(v, op, 2, false, "the quantized tensor's (the zero point)");
    if (op->n_in == 2 && q && y != HFX_DTYPE_U8) return dtype_fail(v, op, 0, true, "u8 (no zero point)");
    return HFX_OK;
}

/* scale (and zp, as many elements): one element with param 0, or 1-D of X.dims[axis] elements */
static hfx_status validate_quant_params(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *s = &v->p->tensors[op->in[1]];
    if (op->n_in == 3) {
        const hfx_tensor *zp = &v->p->tensors[op->in[2]];
        if (zp->numel != s->numel || (s->numel > 1 && zp->rank != 1)) /* a scalar and a [1] go together */
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 2), "op %u (%s): zero point and scale differ in size",
                             v->index, op->desc->label);
    }
    if (s->numel == 1 && op->params[HFX_P_QUANT_AXIS] == 0) return HFX_OK;
    uint32_t axis;
    hfx_status st = hfx_check_axis(v, op, x->rank, &axis);
    if (st) return st;
    if (s->rank != 1 || s->dims[0] != x->dims[axis])
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1),
                         "op %u (%s): scale must have one element or X.dims[axis] = %u elements", v->index,
                         op->desc->label, x->dims[axis]);
    return HFX_OK;
}

hfx_status hfx_validate_quant(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_dtypes(v, op);
    if (!st) st = validate_quant_params(v, op);
    return st ? st : hfx_same_as_input(v, op);
}

hfx_status hfx_plan_quant(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]], *s = &p->tensors[op->in[1]];
    hfx_quant_plan pl = {HFX_EW_CHUNK, 1, 1};
    if (s->numel > 1 || op->params[HFX_P_QUANT_AXIS] != 0) {
        uint32_t axis = (uint32_t)op->params[HFX_P_QUANT_AXIS];
        pl.channels = x->dims[axis];
        for (uint32_t i = axis + 1; i < x->rank; i++) pl.inner *= x->dims[i];
    }
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(x->numel, pl.elems_per_item));
}

/* round half to even of |t| < 2^22 (t is clamped to the integer range first): adding and
 * subtracting 1.5 * 2^23 leaves the integer nearest to t, ties to even, in the default rounding
 * mode; ISO C keeps the two operations (no reassociation without -ffast-math). */
static inline float round_half_even(float t) { return (t + 12582912.0f) - 12582912.0f; }

/* One run of elements [b, e) that share channel c's scale and zero point. */
#define HFX_Q_RUN(dt, ctype, lo, hi)                                              \
    case dt: {                                                                    \
        ctype *y = (ctype *)a->out[0];                                            \
        int32_t z = zp ? ((const ctype *)zp)[c] : 0;                              \
        float tlo = (float)((int32_t)(lo) - z), thi = (float)((int32_t)(hi) - z); \
        for (uint64_t i = b; i < e; i++) {                                        \
            float t = x[i] / sc;                                                  \
            t = t > tlo ? t : tlo; /* maxps: a NaN gives the lower bound */       \
            t = t < thi ? t : thi;                                                \
            y[i] = (ctype)((int32_t)round_half_even(t) + z);                      \
        }                                                                         \
        break;                                                                    \
    }
#define HFX_DQ_RUN(dt, ctype, lo, hi)                                                       \
    case dt: {                                                                              \
        const ctype *xi = (const ctype *)a->in[0];                                          \
        uint32_t z = zp ? (uint32_t)((const ctype *)zp)[c] : 0;                             \
        for (uint64_t i = b; i < e; i++) y[i] = (float)(int32_t)((uint32_t)xi[i] - z) * sc; \
        break;                                                                              \
    }

static void quantize_run(const hfx_kernel_args *a, uint32_t dtype, uint64_t b, uint64_t e, uint64_t c) {
    const float *x = a->in[0];
    float sc = ((const float *)a->in[1])[c];
    const void *zp = a->op->n_in == 3 ? a->in[2] : NULL;
#ifdef HFX_HVX
    if (e - b >= 8) { /* Hexagon: HVX, bit for bit the loop below (the reference near rounding ties) */
        int wide = dtype == HFX_DTYPE_U16 || dtype == HFX_DTYPE_I16, sgn = dtype == HFX_DTYPE_I8 || dtype == HFX_DTYPE_I16;
        int32_t z = !zp ? 0 : wide ? (sgn ? ((const int16_t *)zp)[c] : ((const uint16_t *)zp)[c])
                                   : (sgn ? ((const int8_t *)zp)[c] : ((const uint8_t *)zp)[c]);
        if (hvx_quant_f32(x + b, (size_t)(e - b), sc, z, wide ? 2 : 1, sgn, (uint8_t *)a->out[0] + b * (wide ? 2 : 1)))
            return;
    }
#endif
    switch (dtype) { HFX_QUANT_TYPES(HFX_Q_RUN) }
}

static void dequantize_run(const hfx_kernel_args *a, uint32_t dtype, uint64_t b, uint64_t e, uint64_t c) {
    float *y = a->out[0];
    float sc = ((const float *)a->in[1])[c];
    const void *zp = a->op->n_in == 3 ? a->in[2] : NULL;
#ifdef HFX_HVX
    if (dtype == HFX_DTYPE_U8 || dtype == HFX_DTYPE_I8) { /* Hexagon: HVX, bit for bit the loop below */
        int32_t z = !zp ? 0 : dtype == HFX_DTYPE_U8 ? ((const uint8_t *)zp)[c] : ((const int8_t *)zp)[c];
        hvx_dequant_i8_f32((const uint8_t *)a->in[0] + b, e - b, dtype == HFX_DTYPE_I8, z, sc, y + b);
        return;
    }
    if (dtype == HFX_DTYPE_U16 || dtype == HFX_DTYPE_I16) {
        int32_t z = !zp ? 0 : dtype == HFX_DTYPE_U16 ? ((const uint16_t *)zp)[c] : ((const int16_t *)zp)[c];
        hvx_dequant_i16_f32((const uint16_t *)a->in[0] + b, e - b, dtype == HFX_DTYPE_I16, z, sc, y + b);
        return;
    }
#endif
    switch (dtype) { HFX_QUANT_TYPES(HFX_DQ_RUN) HFX_DEQUANT_ONLY_TYPES(HFX_DQ_RUN) }
}

HFX_VECTOR_KERNEL
void hfx_run_quant(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *x = &a->prog->tensors[op->in[0]];
    bool q = op->opcode == HFX_OP_QUANTIZE_LINEAR;
    uint32_t dtype = q ? a->prog->tensors[op->out[0]].dtype : x->dtype;
    hfx_quant_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(x->numel, pl.elems_per_item, item, &b, &e);
    while (b < e) { /* runs of one channel */
        uint64_t c = (b / pl.inner) % pl.channels;
        uint64_t run_end = pl.channels == 1 ? e : (b / pl.inner + 1) * pl.inner;
        if (run_end > e) run_end = e;
        if (q) quantize_run(a, dtype, b, run_end, c);
        else dequantize_run(a, dtype, b, run_end, c);
        b = run_end;
    }
}

/* ---- DYNAMIC_QPARAMS: X f32 -> scale f32, zero point u8 (one element each) ---- */

hfx_status hfx_validate_dynamic_qparams(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    if (t[op->in[0]].dtype != HFX_DTYPE_F32) return dtype_fail(v, op, 0, false, "f32");
    if (t[op->out[0]].dtype != HFX_DTYPE_F32) return dtype_fail(v, op, 0, true, "f32 (the scale)");
    if (t[op->out[1]].dtype != HFX_DTYPE_U8)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 1),
                         "op %u (%s): tensor %u dtype %u, expected u8 (the zero point)", v->index, op->desc->label,
                         op->out[1], t[op->out[1]].dtype);
    for (uint32_t i = 0; i < 2; i++)
        if (t[op->out[i]].numel != 1)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_OUT_OFF(v, i), "op %u (%s): output %u must have one element",
                             v->index, op->desc->label, i);
    return HFX_OK;
}

hfx_status hfx_plan_dynamic_qparams(const hfx_program *p, hfx_op *op) {
    (void)p;
    return hfx_plan_set_items(op, 1);
}

/* ref_dynamic_qparams with the range found by selects the compiler vectorizes (min and max are exact in
 * any order: the result does not depend on it); on Hexagon builds by HVX integer min/max of the bit
 * patterns (hvx_range_f32) */
HFX_VECTOR_KERNEL
void hfx_run_dynamic_qparams(const hfx_kernel_args *a, uint32_t item) {
    (void)item;
    const float *x = a->in[0];
    uint64_t n = a->prog->tensors[a->op->in[0]].numel;
    float lo = 0.0f, hi = 0.0f;
#ifdef HFX_HVX
    hvx_range_f32(x, (size_t)n, &lo, &hi);
#else
    for (uint64_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
#endif
    int32_t zp;
    ref_range_qparams(lo, hi, (float *)a->out[0], &zp);
    *(uint8_t *)a->out[1] = (uint8_t)zp;
}

/* ---- CAST: X f32 -> Y i32 (a bias chain's Floor -> Cast of dynamically quantised convs); X f16 -> Y f32 and
 * X f32 -> Y f16 (a float16 network's tensors at a pair's boundary: the ops between run in f32); X i64 -> Y f32
 * (lengths made float) ---- */

hfx_status hfx_validate_cast(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    uint32_t x = t[op->in[0]].dtype, y = t[op->out[0]].dtype;
    if (x != HFX_DTYPE_F32 && x != HFX_DTYPE_F16 && x != HFX_DTYPE_I64)
        return dtype_fail(v, op, 0, false, "f32, f16 or i64");
    if (x != HFX_DTYPE_F32 && y != HFX_DTYPE_F32) return dtype_fail(v, op, 0, true, "f32 (of f16 or i64)");
    if (x == HFX_DTYPE_F32 && y != HFX_DTYPE_I32 && y != HFX_DTYPE_F16)
        return dtype_fail(v, op, 0, true, "i32 or f16 (of f32)");
    return hfx_same_as_input(v, op);
}

hfx_status hfx_plan_cast(const hfx_program *p, hfx_op *op) {
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_EW_CHUNK);
}

HFX_VECTOR_KERNEL
void hfx_run_cast(const hfx_kernel_args *a, uint32_t item) {
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    uint64_t b, e;
    const hfx_tensor *t = a->prog->tensors;
    hfx_plan_range(t[a->op->out[0]].numel, pl.elems_per_item, item, &b, &e);
    if (t[a->op->in[0]].dtype == HFX_DTYPE_F16) {
        const uint16_t *h = a->in[0];
        float *y = a->out[0];
        for (uint64_t i = b; i < e; i++) y[i] = ref_f16_to_f32(h[i]);
        return;
    }
    if (t[a->op->in[0]].dtype == HFX_DTYPE_I64) {
        const int64_t *w = a->in[0];
        float *y = a->out[0];
        for (uint64_t i = b; i < e; i++) y[i] = (float)w[i];
        return;
    }
    const float *x = a->in[0];
    if (t[a->op->out[0]].dtype == HFX_DTYPE_F16) {
        uint16_t *h = a->out[0];
        for (uint64_t i = b; i < e; i++) h[i] = ref_f32_to_f16(x[i]);
        return;
    }
    int32_t *y = a->out[0];
#ifdef HFX_HVX
    hvx_cast_f32_i32(x + b, (size_t)(e - b), y + b);
#else
    for (uint64_t i = b; i < e; i++) y[i] = ref_cast_f32_i32(x[i]);
#endif
}
