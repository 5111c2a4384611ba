/* norm.c - LayerNormalization and RMSNorm over the axes [axis, rank). An item
 * is a range of rows. Row statistics: SIMD-friendly float lanes per block of
 * 1024 elements, blocks summed in double (vsum.h). */
#include <math.h>

#include "kernels.h"
#include "vsum.h"

HFX_VECTOR_KERNEL
void hfx_k_norm(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const uint64_t *v = op->plan.v;
    uint64_t d = v[1];
    float eps = hfx_f32_from_bits(op->params[HFX_P_EPSILON]);
    const float *x = a->in[0], *scale = a->in[1];
    const float *bias = op->n_in == 3 ? a->in[2] : NULL;
    float *o = a->out[0];
    bool layer = op->opcode == HFX_OP_LAYERNORM;
    uint64_t b, e;
    hfx_plan_range(v[0], v[2], item, &b, &e);
    for (uint64_t r = b; r < e; r++) {
        const float *xr = x + r * d;
        float *orow = o + r * d;
        /* x - mean as (x - m) - c with m = float(mean), c = float(mean - m): x - m is
         * exact when x is near the mean, so small deviations keep their precision */
        double mean = layer ? hfx_sum(xr, d, 0.0f, 0) / (double)d : 0.0;
        float m = (float)mean, c = (float)(mean - (double)m);
        double ss = hfx_sum2(xr, d, m, c, 1);
        float inv = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        if (bias) {
            for (uint64_t k = 0; k < d; k++) orow[k] = ((xr[k] - m) - c) * inv * scale[k] + bias[k];
        } else {
            for (uint64_t k = 0; k < d; k++) orow[k] = ((xr[k] - m) - c) * inv * scale[k];
        }
    }
}
