/* activation.c - the unary elementwise ops: Relu, Sigmoid, Tanh, Gelu (erf),
 * SiLU, Exp, Log, HardSigmoid, HardSwish, Clip, Neg, Sqrt, Floor, Erf, ReplaceNaN, Abs, Sin, Cos, Softplus,
 * Round. An item is a chunk of elements. */
#include <math.h>

#include "eigen_math.h"
#include "mlas_math.h"
#include "kernels.h"
#include "vmath.h"

/* max(0, min(1, v)) by compare-and-select: a NaN stays NaN */
static inline float hfx_clamp01(float v) {
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}

/* floor(x) without libm (the bare Hexagon build has none): |x| >= 2^23 (and inf, NaN) is already whole;
 * else the truncation, one less where it rounded up; +-0 keeps its sign as ONNX Runtime's std::floor */
static inline float hfx_floor(float x) {
    if (!(x > -8388608.0f && x < 8388608.0f) || x == 0.0f) return x;
    float t = (float)(int32_t)x;
    return t > x ? t - 1.0f : t;
}

/* the nearest integer, ties to even, without libm: |x| + 2^23 rounds to it (the default rounding mode) for
 * |x| < 2^23; from 2^23 (and inf, NaN) x is already whole. x's sign kept: -0.3 gives -0, as nearbyintf. */
static inline float hfx_round_even(float x) {
    uint32_t sign = hfx_u32_of(x) & 0x80000000u;
    float a = hfx_f32_of(hfx_u32_of(x) ^ sign);
    if (!(a < 8388608.0f)) return x;
    return hfx_f32_of(hfx_u32_of((a + 8388608.0f) - 8388608.0f) | sign); /* no -ffast-math: not folded */
}

/* softplus as ONNX Runtime's CPU kernel computes it on x86-64 (its Eigen functor): x > 0 ? x + log1p(exp(-x)) :
 * log1p(exp(x)), Eigen's packet exp and log1p (eigen_math.h) up to the last n % 4 elements, those by the C library
 * (the Hexagon build has none: the packet path there too). +inf gives +inf, -inf 0; a NaN the C library's NaN, or
 * in a packet all bits set, whatever its bits (found against ORT 1.32: plog's invalid-input mask). */
static inline float hfx_softplus(float x, uint64_t i, uint64_t n) {
    float v = x > 0.0f ? -x : x;
#if !defined(__hexagon__)
    if (i >= n - n % 4) return x > 0.0f ? x + log1pf(expf(v)) : log1pf(expf(v));
#else
    (void)i, (void)n;
#endif
    if (x != x) return hfx_f32_of(0xffffffffu);
    float l = hfx_log1p_eigen(hfx_exp_eigen(v));
    return x > 0.0f ? x + l : l;
}

/* sin or cos of element i of n as ONNX Runtime computes it (eigen_math.h): Eigen's packet path up to the
 * last n % 4 elements, those by the C library (the Hexagon build has none: the packet path there too) */
static inline float hfx_sincos_ort(float x, uint64_t i, uint64_t n, int sine) {
#if !defined(__hexagon__)
    if (i >= n - n % 4) return sine ? sinf(x) : cosf(x);
#else
    (void)i, (void)n;
#endif
    return hfx_sincos_eigen(x, sine);
}

/* HARDSIGMOID: alpha, beta finite; CLIP: bounds not NaN */
static hfx_status validate_float_params(hfx_vctx *v, const hfx_op *op) {
    if (op->opcode == HFX_OP_HARDSIGMOID) {
        for (int i = 0; i < 2; i++)
            if (!hfx_finite_f32(op->params[i]))
                return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: HardSigmoid alpha/beta not finite",
                                 v->index);
    }
    if (op->opcode == HFX_OP_CLIP) {
        for (int i = HFX_P_CLIP_MIN; i <= HFX_P_CLIP_MAX; i++)
            if ((op->params[i] & 0x7fffffff) > 0x7f800000)
                return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: Clip min/max is NaN", v->index);
    }
    return HFX_OK;
}

hfx_status hfx_validate_unary(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_float_params(v, op);
    return st ? st : hfx_same_as_input(v, op);
}

hfx_status hfx_plan_unary(const hfx_program *p, hfx_op *op) {
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_EW_CHUNK);
}

HFX_VECTOR_KERNEL
void hfx_run_unary(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *ot = &a->prog->tensors[op->out[0]];
    const float *x = a->in[0];
    float *o = a->out[0];
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(ot->numel, pl.elems_per_item, item, &b, &e);
    switch (op->opcode) {
    case HFX_OP_RELU:
        for (uint64_t i = b; i < e; i++) o[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case HFX_OP_SIGMOID:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_sigmoid(x[i]);
        break;
    case HFX_OP_TANH:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_tanh(x[i]);
        break;
    case HFX_OP_GELU:
        if (op->sum_order == HFX_SUM_ORT) /* ORT's bits where a QUANTIZE_LINEAR reads them (mlas_math.h) */
            for (uint64_t i = b; i < e; i++) o[i] = 0.5f * x[i] * (1.0f + hfx_erf_mlas(x[i] * 0.70710678118654752f));
        else
            for (uint64_t i = b; i < e; i++) o[i] = 0.5f * x[i] * (1.0f + hfx_erf(x[i] * 0.70710678118654752f));
        break;
    case HFX_OP_SILU:
        for (uint64_t i = b; i < e; i++) o[i] = x[i] * hfx_sigmoid(x[i]);
        break;
    case HFX_OP_HARDSIGMOID: {
        float alpha = hfx_f32_from_bits(op->params[HFX_P_HARDSIGMOID_ALPHA]);
        float beta = hfx_f32_from_bits(op->params[HFX_P_HARDSIGMOID_BETA]);
        for (uint64_t i = b; i < e; i++) {
            float t = alpha * x[i];
            o[i] = hfx_clamp01(t + beta);
        }
        break;
    }
    case HFX_OP_HARDSWISH:
        for (uint64_t i = b; i < e; i++) {
            float t = x[i] * (1.0f / 6.0f);
            o[i] = x[i] * hfx_clamp01(t + 0.5f);
        }
        break;
    case HFX_OP_EXP:
        if (op->sum_order == HFX_SUM_ORT) /* ORT's bits where a QUANTIZE_LINEAR reads them (mlas_math.h) */
            for (uint64_t i = b; i < e; i++) o[i] = hfx_exp_mlas(x[i]);
        else
            for (uint64_t i = b; i < e; i++) o[i] = hfx_exp(x[i]);
        break;
    case HFX_OP_CLIP: {
        float lo = hfx_f32_from_bits(op->params[HFX_P_CLIP_MIN]);
        float hi = hfx_f32_from_bits(op->params[HFX_P_CLIP_MAX]);
        for (uint64_t i = b; i < e; i++) {
            float t = x[i] < lo ? lo : x[i]; /* compare-and-select: a NaN stays NaN */
            o[i] = t > hi ? hi : t;
        }
        break;
    }
    case HFX_OP_NEG:
        for (uint64_t i = b; i < e; i++) o[i] = -x[i];
        break;
    case HFX_OP_FLOOR:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_floor(x[i]);
        break;
    case HFX_OP_SQRT:
        for (uint64_t i = b; i < e; i++) o[i] = sqrtf(x[i]);
        break;
    case HFX_OP_LOG:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_log(x[i]);
        break;
    case HFX_OP_ERF:
        if (op->sum_order == HFX_SUM_ORT)
            for (uint64_t i = b; i < e; i++) o[i] = hfx_erf_mlas(x[i]);
        else
            for (uint64_t i = b; i < e; i++) o[i] = hfx_erf(x[i]);
        break;
    case HFX_OP_ABS:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_f32_of(hfx_u32_of(x[i]) & 0x7fffffffu);
        break;
    case HFX_OP_SIN:
    case HFX_OP_COS:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_sincos_ort(x[i], i, ot->numel, op->opcode == HFX_OP_SIN);
        break;
    case HFX_OP_SOFTPLUS:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_softplus(x[i], i, ot->numel);
        break;
    case HFX_OP_ROUND:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_round_even(x[i]);
        break;
    case HFX_OP_REPLACE_NAN: {
        float value = hfx_f32_from_bits(op->params[HFX_P_REPLACE_NAN_VALUE]);
        for (uint64_t i = b; i < e; i++) o[i] = x[i] != x[i] ? value : x[i];
        break;
    }
    }
}
