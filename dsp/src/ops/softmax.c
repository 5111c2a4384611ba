/* softmax.c - Softmax over any axis. The tensor is seen as [outer, D, inner];
 * a line is one (outer, inner) pair; an item is a range of lines. Contiguous
 * lines (inner == 1, the usual last axis) take a SIMD-friendly path. */
#include "kernels.h"
#include "vmath.h"
#include "vsum.h"

HFX_VECTOR_KERNEL
void hfx_k_softmax(const hfx_kernel_args *a, uint32_t item) {
    const uint64_t *v = a->op->plan.v;
    uint64_t outer = v[0], d = v[1], inner = v[2];
    const float *x = a->in[0];
    float *o = a->out[0];
    uint64_t b, e;
    hfx_plan_range(outer * inner, v[3], item, &b, &e);
    if (inner == 1) {
        for (uint64_t l = b; l < e; l++) {
            const float *xl = x + l * d;
            float *ol = o + l * d;
            float mx = hfx_max(xl, d);
            for (uint64_t k = 0; k < d; k++) ol[k] = hfx_exp(xl[k] - mx);
            float inv = (float)(1.0 / hfx_sum(ol, d, 0.0f, 0));
            for (uint64_t k = 0; k < d; k++) ol[k] *= inv;
        }
        return;
    }
    for (uint64_t l = b; l < e; l++) {
        uint64_t base = (l / inner) * d * inner + l % inner;
        const float *xl = x + base;
        float *ol = o + base;
        float mx = xl[0];
        for (uint64_t k = 1; k < d; k++)
            if (xl[k * inner] > mx) mx = xl[k * inner];
        double sum = 0.0;
        for (uint64_t k = 0; k < d; k++) {
            float ev = hfx_exp(xl[k * inner] - mx);
            ol[k * inner] = ev;
            sum += ev;
        }
        float inv = (float)(1.0 / sum);
        for (uint64_t k = 0; k < d; k++) ol[k * inner] *= inv;
    }
}
