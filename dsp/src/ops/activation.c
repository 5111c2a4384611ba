/* activation.c - Relu, Sigmoid, Tanh, Gelu (erf), SiLU, Exp, HardSigmoid,
 * HardSwish. An item is a chunk of elements. */
#include <math.h>

#include "kernels.h"
#include "vmath.h"

/* max(0, min(1, v)) by compare-and-select: a NaN stays NaN */
static inline float hfx_clamp01(float v) {
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}

HFX_VECTOR_KERNEL
void hfx_k_unary(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *ot = &a->prog->tensors[op->out[0]];
    const float *x = a->in[0];
    float *o = a->out[0];
    uint64_t b, e;
    hfx_plan_range(ot->numel, op->plan.v[0], item, &b, &e);
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
        for (uint64_t i = b; i < e; i++) o[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
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
    default:
        for (uint64_t i = b; i < e; i++) o[i] = hfx_exp(x[i]);
        break;
    }
}
