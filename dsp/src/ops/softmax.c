/* softmax.c - Softmax and LogSoftmax over any axis. The tensor is seen as [outer, D, inner];
 * a line is one (outer, inner) pair; an item is a range of lines. Contiguous
 * lines (inner == 1, the usual last axis) take a SIMD-friendly path.
 * QSOFTMAX (u8/i8, ONNX Runtime's QLinearSoftmax: dsp/ref/ref_qsoftmax.h) has the same lines. */
#include <math.h>

#include "../../ref/ref_qsoftmax.h"
#include "mlas_math.h"
#include "kernels.h"
#include "vmath.h"
#include "vsum.h"
#ifdef HFX_HVX
#include "../../hvx/hvx_dequant.h"
#include "../../hvx/hvx_kernels.h"
#include "../../hvx/hvx_qpool.h"
#endif

typedef struct softmax_plan {
    uint64_t outer, d, inner; /* the tensor as [outer, D, inner], D the axis */
    uint64_t lines_per_item;
} softmax_plan;

hfx_status hfx_validate_softmax(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    uint32_t axis;
    if (x->rank == 0) return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u: Softmax of a scalar", v->index);
    hfx_status st = hfx_check_axis(v, op, x->rank, &axis);
    return st ? st : hfx_same_as_input(v, op);
}

hfx_status hfx_plan_softmax(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]];
    uint32_t axis = (uint32_t)op->params[HFX_P_AXIS];
    softmax_plan pl = {1, x->dims[axis], 1, 0};
    for (uint32_t i = 0; i < axis; i++) pl.outer *= x->dims[i];
    for (uint32_t i = axis + 1; i < x->rank; i++) pl.inner *= x->dims[i];
    pl.lines_per_item = hfx_per_item_for(pl.d, HFX_EW_CHUNK);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.outer * pl.inner, pl.lines_per_item));
}

/* o[k] = exp(x[k] - mx) and their sum, in one pass: 8 float lanes per block of 1024 elements, blocks added
 * in double. A lane adds at most 128 terms in (0, 1]: the sum's relative error stays under 1e-5 (typically
 * 1e-7; MLAS sums its exps in float too). */
HFX_KERNEL_HELPER double exp_shifted_sum(const float *restrict x, float *restrict o, uint64_t d, float mx) {
    double total = 0.0;
    for (uint64_t b = 0; b < d; b += 1024) {
        uint64_t e = b + 1024 < d ? b + 1024 : d, i = b;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (; i + 8 <= e; i += 8)
            for (int j = 0; j < 8; j++) {
                float ev = hfx_exp_nonpositive(x[i + (uint64_t)j] - mx);
                o[i + (uint64_t)j] = ev;
                acc[j] += ev;
            }
        for (; i < e; i++) {
            o[i] = hfx_exp_nonpositive(x[i] - mx);
            acc[0] += o[i];
        }
        total += (double)(((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
    }
    return total;
}

/* The line's exps o[k inner] = exp(x[k inner] - mx) and their sum: where a QUANTIZE_LINEAR reads the op
 * (HFX_SUM_ORT), MLAS's exp and sum order (its AVX512F kernel, or its FMA3 one: `avx512f`), else the kernel's own */
HFX_KERNEL_HELPER double exp_sum_line(uint8_t sum_order, int avx512f, const float *x, float *o, uint64_t d,
                                      uint64_t inner, float mx) {
    if (sum_order == HFX_SUM_ORT)
        return avx512f ? hfx_sum_exp_mlas(x, o, d, inner, -mx) : hfx_sum_exp_mlas_fma3(x, o, d, inner, -mx);
    if (inner == 1) return exp_shifted_sum(x, o, d, mx);
    double sum = 0.0;
    for (uint64_t k = 0; k < d; k++) {
        float ev = hfx_exp_nonpositive(x[k * inner] - mx);
        o[k * inner] = ev;
        sum += ev;
    }
    return sum;
}

/* The line's largest value: the first, then each one above it (a NaN is never taken, nor needed: its exp makes
 * the sum NaN, and every output with it) */
HFX_KERNEL_HELPER float line_max(const float *x, uint64_t d, uint64_t inner) {
    if (inner == 1) return hfx_max(x, d);
    float mx = x[0];
    for (uint64_t k = 1; k < d; k++)
        if (x[k * inner] > mx) mx = x[k * inner];
    return mx;
}

/* log(sum) as ORT takes it, the C library's logf, where the sums are ORT's (the host build); else hfx_log (Cephes'
 * logf, the same on every build: the Hexagon builds have no libm), now and then an ulp of log(sum) from it */
HFX_KERNEL_HELPER float line_log(uint8_t sum_order, double sum) {
#if !defined(__hexagon__)
    if (sum_order == HFX_SUM_ORT) return logf((float)sum);
#endif
    (void)sum_order;
    return hfx_log((float)sum);
}

/* o = exps times 1 / sum; a contiguous line (inner 1) in a loop of its own, which vectorizes */
HFX_KERNEL_HELPER void finish_line(float *o, uint64_t d, uint64_t inner, float inv) {
    if (inner == 1)
        for (uint64_t k = 0; k < d; k++) o[k] *= inv;
    else
        for (uint64_t k = 0; k < d; k++) o[k * inner] *= inv;
}

/* o = (x - mx) - lg, as finish_line */
HFX_KERNEL_HELPER void finish_log_line(const float *x, float *o, uint64_t d, uint64_t inner, float mx, float lg) {
    if (inner == 1)
        for (uint64_t k = 0; k < d; k++) o[k] = (x[k] - mx) - lg;
    else
        for (uint64_t k = 0; k < d; k++) o[k * inner] = (x[k * inner] - mx) - lg;
}

/* Softmax: each exp times 1 / sum. LogSoftmax as MlasComputeSoftmax's LogSoftmax: (x - max) - log(sum), the exps
 * written to o first (X and Y never alias) and overwritten: ORT's bits where the sums are ORT's. A line of all
 * -inf, or with a NaN or +inf, is NaN throughout, as ORT's. */
HFX_VECTOR_KERNEL
void hfx_run_softmax(const hfx_kernel_args *a, uint32_t item) {
    softmax_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    uint64_t d = pl.d, inner = pl.inner;
    const float *x = a->in[0];
    float *o = a->out[0];
    uint64_t b, e;
    hfx_plan_range(pl.outer * inner, pl.lines_per_item, item, &b, &e);
    uint8_t order = a->op->sum_order;
    int avx512f = order == HFX_SUM_ORT && hfx_mlas_avx512f(), log_softmax = a->op->opcode == HFX_OP_LOG_SOFTMAX;
    for (uint64_t l = b; l < e; l++) {
        uint64_t base = inner == 1 ? l * d : (l / inner) * d * inner + l % inner;
        const float *xl = x + base;
        float *ol = o + base;
        float mx = line_max(xl, d, inner);
        double sum = exp_sum_line(order, avx512f, xl, ol, d, inner, mx);
        if (log_softmax) finish_log_line(xl, ol, d, inner, mx, line_log(order, sum));
        else finish_line(ol, d, inner, (float)(1.0 / sum)); /* = 1.0f / sum of MLAS's float sum */
    }
}

/* ---- QSOFTMAX ---- */

hfx_status hfx_validate_qsoftmax(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors, *x = &t[op->in[0]], *table = &t[op->in[1]];
    if ((x->dtype != HFX_DTYPE_U8 && x->dtype != HFX_DTYPE_I8) || t[op->out[0]].dtype != x->dtype)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 0), "op %u (%s): X and Y must be one u8/i8 type", v->index,
                         op->desc->label);
    if (table->dtype != HFX_DTYPE_F32 || table->numel != 256)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u (%s): the table must be 256 f32", v->index,
                         op->desc->label);
    int32_t bits = op->params[HFX_P_QSOFTMAX_SCALE], zy = op->params[HFX_P_QSOFTMAX_ZERO_Y];
    if (!hfx_finite_f32(bits) || !(hfx_f32_from_bits(bits) >= 0.0f))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_QSOFTMAX_SCALE),
                         "op %u (%s): floor(1 / y_scale) must be finite and >= 0", v->index, op->desc->label);
    if (zy < (x->dtype == HFX_DTYPE_U8 ? 0 : -128) || zy > (x->dtype == HFX_DTYPE_U8 ? 255 : 127))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_QSOFTMAX_ZERO_Y),
                         "op %u (%s): zero point outside Y's type", v->index, op->desc->label);
    return hfx_validate_softmax(v, op);
}

#ifdef HFX_HVX
#define QSOFTMAX_LUT_BYTES 1024u /* hvx_lut_words_prepare's four byte planes */
#define QSOFTMAX_LUT_MIN 1024u   /* values an item looks up before the planes pay */
#endif

hfx_status hfx_plan_qsoftmax(const hfx_program *p, hfx_op *op) {
    hfx_status st = hfx_plan_softmax(p, op);
#ifdef HFX_HVX
    softmax_plan pl;
    HFX_PLAN_LOAD(pl, op);
    /* the table's byte planes, then a line's table values (whole vectors) */
    if (pl.inner == 1) op->plan.ws_bytes = QSOFTMAX_LUT_BYTES + 4 * ((pl.d + 127) / 128 * 128);
#endif
    return st;
}

#ifdef HFX_HVX
/* a contiguous line on Hexagon: its max, table values and outputs by HVX (hvx_max_bytes, hvx_lut_words
 * through the table's byte planes `lut` when the item prepared them, hvx_qsoftmax_out); the values' sum
 * stays C, f32 in order as the reference's */
static void qsoftmax_line_hvx(const uint8_t *x, uint64_t d, int is_u8, const float *table, const uint8_t *lut,
                              float y_scale, int32_t zy, float *t, uint8_t *y) {
    int32_t m = hvx_max_bytes(x, (size_t)d, !is_u8);
    float sum = 0.0f;
    if (lut) {
        hvx_lut_words(x, (size_t)d, (uint8_t)(255 - m), lut, (uint32_t *)(void *)t);
        for (uint64_t k = 0; k < d; k++) sum += t[k];
    } else {
        for (uint64_t k = 0; k < d; k++) {
            t[k] = table[ref_qsoftmax_index(is_u8 ? x[k] : (int8_t)x[k], m)];
            sum += t[k];
        }
    }
    if (hvx_qsoftmax_out(t, (size_t)d, sum, y_scale, zy, is_u8, y)) return;
    for (uint64_t k = 0; k < d; k++) y[k] = (uint8_t)ref_qsoftmax_out(t[k], sum, y_scale, zy, is_u8);
}
#endif

HFX_VECTOR_KERNEL
void hfx_run_qsoftmax(const hfx_kernel_args *a, uint32_t item) {
    softmax_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    int is_u8 = a->prog->tensors[a->op->in[0]].dtype == HFX_DTYPE_U8;
    const uint8_t *x = a->in[0];
    const float *table = a->in[1];
    uint8_t *y = a->out[0];
    float y_scale = hfx_f32_from_bits(a->op->params[HFX_P_QSOFTMAX_SCALE]);
    int32_t zy = a->op->params[HFX_P_QSOFTMAX_ZERO_Y];
    uint64_t b, e;
    hfx_plan_range(pl.outer * pl.inner, pl.lines_per_item, item, &b, &e);
#ifdef HFX_HVX
    /* preparing the byte planes costs about as much as looking up QSOFTMAX_LUT_MIN values in C */
    const uint8_t *lut = NULL;
    if (pl.inner == 1 && (e - b) * pl.d >= QSOFTMAX_LUT_MIN) {
        hvx_lut_words_prepare((const uint32_t *)(const void *)table, a->ws);
        lut = a->ws;
    }
    float *t = (float *)(void *)((uint8_t *)a->ws + QSOFTMAX_LUT_BYTES);
#endif
    for (uint64_t line = b; line < e; line++) {
#ifdef HFX_HVX
        if (pl.inner == 1) { /* (no 64-bit division on Hexagon: a helper call per line) */
            qsoftmax_line_hvx(x + line * pl.d, pl.d, is_u8, table, lut, y_scale, zy, t, y + line * pl.d);
            continue;
        }
#endif
        uint64_t base = (line / pl.inner) * pl.d * pl.inner + line % pl.inner;
        int32_t m = INT32_MIN;
        for (uint64_t k = 0; k < pl.d; k++) {
            uint8_t c = x[base + k * pl.inner];
            int32_t v = is_u8 ? c : (int8_t)c;
            m = v > m ? v : m;
        }
        float sum = 0.0f;
        for (uint64_t k = 0; k < pl.d; k++) {
            uint8_t c = x[base + k * pl.inner];
            sum += table[ref_qsoftmax_index(is_u8 ? c : (int8_t)c, m)];
        }
        for (uint64_t k = 0; k < pl.d; k++) {
            uint8_t c = x[base + k * pl.inner];
            float t = table[ref_qsoftmax_index(is_u8 ? c : (int8_t)c, m)];
            y[base + k * pl.inner] = (uint8_t)ref_qsoftmax_out(t, sum, y_scale, zy, is_u8);
        }
    }
}
