/* norm.c - LayerNormalization and RMSNorm over the axes [axis, rank), InstanceNormalization over [2, rank).
 * An item is a range of rows. Row statistics: SIMD-friendly float lanes per block of 1024 elements, blocks
 * summed in double (vsum.h); InstanceNormalization's as ONNX Runtime sums them (instancenorm_row_ort). */
#include <math.h>

#include "../../ref/ref_fma.h"
#include "kernels.h"
#include "vsum.h"

typedef struct norm_plan {
    uint64_t rows, d; /* d: elements of one row, the axes [axis, rank) */
    uint64_t rows_per_item;
} norm_plan;

/* scale/bias k: X.shape[axis:] up to leading 1s */
static bool fits_row(const hfx_tensor *s, const hfx_tensor *x, uint32_t axis, uint64_t d) {
    bool ok = s->numel == d && s->rank <= HFX_MAX_RANK;
    uint32_t sr = s->rank, xr = x->rank - axis;
    for (uint32_t i = 0; ok && i < (sr > xr ? sr : xr); i++) {
        uint32_t sd = i < sr ? s->dims[sr - 1 - i] : 1;
        uint32_t xd = i < xr ? x->dims[x->rank - 1 - i] : 1;
        if (sd != xd) ok = false;
    }
    return ok;
}

/* INSTANCENORM: X of rank >= 3 normalized over [2, rank) (axis 2), scale and bias [C] */
static hfx_status validate_instance(hfx_vctx *v, const hfx_op *op, uint32_t axis) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    if (x->rank < 3 || axis != 2)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_PARAM_OFF(v, HFX_P_AXIS),
                         "op %u: InstanceNormalization needs rank >= 3 "
                         "and axis 2",
                         v->index);
    for (uint32_t k = 1; k < 3; k++) {
        const hfx_tensor *t = &v->p->tensors[op->in[k]];
        if (t->rank != 1 || t->dims[0] != x->dims[1])
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, k), "op %u: scale/bias shape must be [C]", v->index);
    }
    return HFX_OK;
}

hfx_status hfx_validate_norm(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    uint32_t axis;
    if (x->rank == 0) return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u: norm of a scalar", v->index);
    hfx_status st = hfx_check_axis(v, op, x->rank, &axis);
    if (!st && op->opcode == HFX_OP_INSTANCENORM) st = validate_instance(v, op, axis);
    if (st) return st;
    if (op->params[HFX_P_NORM_SKIP] != 0 && op->params[HFX_P_NORM_SKIP] != 1) /* LAYERNORM: 0 (n_params) */
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_NORM_SKIP), "op %u: the skip flag must be 0/1",
                         v->index);
    int32_t eps = op->params[HFX_P_EPSILON];
    if (!hfx_finite_f32(eps) || !(hfx_f32_from_bits(eps) > 0.0f))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_EPSILON), "op %u: epsilon must be finite and > 0",
                         v->index);
    uint64_t d = 1;
    for (uint32_t i = axis; i < x->rank; i++) d *= x->dims[i];
    for (uint32_t k = 1; k < op->n_in && op->opcode != HFX_OP_INSTANCENORM; k++)
        if (!fits_row(&v->p->tensors[op->in[k]], x, axis, d))
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, k), "op %u: scale/bias shape must be X.shape[axis:]",
                             v->index);
    return hfx_same_as_input(v, op);
}

hfx_status hfx_plan_norm(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]];
    uint32_t axis = (uint32_t)op->params[HFX_P_AXIS];
    norm_plan pl = {1, 1, 0};
    for (uint32_t i = 0; i < axis; i++) pl.rows *= x->dims[i];
    for (uint32_t i = axis; i < x->rank; i++) pl.d *= x->dims[i];
    pl.rows_per_item = hfx_per_item_for(pl.d, HFX_EW_CHUNK);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

/* The squared deviations of a row from `mean` as ONNX Runtime 1.32's vectorized LayerNormalization and
 * RMSNormalization sum them on x86-64: in 8 float lanes by FMA (lane k % 8), the lanes reduced
 * ((0+4) + (2+6)) + ((1+5) + (3+7)); then groups of 4 added as products (two roundings), the last 1-3
 * by FMA. */
HFX_KERNEL_HELPER float sumsq_ort(const float *x, uint64_t d, float mean) {
    float lane[8] = {0};
    uint64_t k = 0;
    for (; k + 8 <= d; k += 8)
        for (uint64_t j = 0; j < 8; j++) {
            float t = x[k + j] - mean;
            lane[j] = ref_fmaf(t, t, lane[j]);
        }
    float ss = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (; k + 4 <= d; k += 4)
        for (uint64_t j = 0; j < 4; j++) {
            float t = x[k + j] - mean;
            ss += t * t; /* -ffp-contract=off: the product rounds first */
        }
    for (; k < d; k++) {
        float t = x[k] - mean;
        ss = ref_fmaf(t, t, ss);
    }
    return ss;
}

/* One LayerNormalization row as ONNX Runtime 1.32 computes it on x86-64 (found against its Mean and
 * InvStdDev outputs, every row equal: d = 1..7, 256 rows each; 8..1000, 1024 rows each). d >= 8: the
 * mean is the row's sum in double, in order, divided by d and rounded; sumsq_ort; inv = 1 / sqrt(sum / d
 * + eps) in float; y = fma((x - mean) inv, scale, bias). d < 8: Welford's updates in float (delta = x -
 * mean, mean += delta / n, m2 += delta (x - mean)), sd = sqrt(m2 / d + eps), y = (x - mean) / sd * scale
 * + bias, each step rounded. */
HFX_KERNEL_HELPER void layernorm_row_ort(const float *x, const float *scale, const float *bias, float *o, uint64_t d,
                                         float eps) {
    if (d < 8) {
        float mean = 0.0f, m2 = 0.0f;
        for (uint64_t k = 0; k < d; k++) {
            float delta = x[k] - mean;
            mean += delta / (float)(k + 1);
            m2 += delta * (x[k] - mean);
        }
        float sd = sqrtf(m2 / (float)d + eps);
        for (uint64_t k = 0; k < d; k++) {
            float y = (x[k] - mean) / sd * scale[k];
            o[k] = bias ? y + bias[k] : y;
        }
        return;
    }
    double sum = 0.0;
    for (uint64_t k = 0; k < d; k++) sum += (double)x[k];
    float mean = (float)(sum / (double)d);
    float inv = 1.0f / sqrtf(sumsq_ort(x, d, mean) / (float)d + eps);
    for (uint64_t k = 0; k < d; k++) {
        float t = (x[k] - mean) * inv;
        o[k] = bias ? ref_fmaf(t, scale[k], bias[k]) : t * scale[k];
    }
}

/* One RMSNormalization / SimplifiedLayerNormalization row as ONNX Runtime 1.32 computes it on x86-64
 * (every row of d = 1..100 equal). d >= 16: inv = 1 / sqrt(sumsq_ort / d + eps), y = x inv scale. d < 16,
 * and at every d a SkipSimplifiedLayerNormalization's norm (`skip`, its own kernel): the products x x
 * rounded and added in order, rms = sqrt(sum / d + eps), y = x / rms * scale. */
HFX_KERNEL_HELPER void rmsnorm_row_ort(const float *x, const float *scale, float *o, uint64_t d, float eps, bool skip) {
    if (d >= 16 && !skip) {
        float inv = 1.0f / sqrtf(sumsq_ort(x, d, 0.0f) / (float)d + eps);
        for (uint64_t k = 0; k < d; k++) o[k] = x[k] * inv * scale[k];
        return;
    }
    float ss = 0.0f;
    for (uint64_t k = 0; k < d; k++) ss += x[k] * x[k];
    float rms = sqrtf(ss / (float)d + eps);
    for (uint64_t k = 0; k < d; k++) o[k] = x[k] / rms * scale[k];
}

/* element k of a row: x[k], or with `squares` (x[k] - mean)^2 (each step rounded) */
static inline float row_term(const float *x, uint64_t k, float mean, int squares) {
    if (!squares) return x[k];
    float t = x[k] - mean;
    return t * t;
}

/* The terms of x[0..n) summed as Eigen's vectorized sum does with SSE packets (ONNX Runtime's build): the
 * `head` elements before the first 16-byte boundary left out; the rest in 4 lanes by two accumulators, the
 * packets alternating between them, the accumulators added, then a last odd packet; the lanes reduced
 * (0 + 2) + (1 + 3); then the head and the last (n - head) % 4 terms added in order. Fewer than 4 terms after
 * the head: all of them in order. */
static float sum_eigen(const float *x, uint64_t n, uint64_t head, float mean, int squares) {
    head = head < n ? head : n;
    uint64_t body = (n - head) / 4 * 4, pairs = (n - head) / 8 * 8;
    if (body == 0) {
        float s = n ? row_term(x, 0, mean, squares) : 0.0f;
        for (uint64_t k = 1; k < n; k++) s += row_term(x, k, mean, squares);
        return s;
    }
    float p0[4], p1[4];
    for (uint64_t j = 0; j < 4; j++) p0[j] = row_term(x, head + j, mean, squares);
    if (body > 4) {
        for (uint64_t j = 0; j < 4; j++) p1[j] = row_term(x, head + 4 + j, mean, squares);
        for (uint64_t k = head + 8; k < head + pairs; k += 8)
            for (uint64_t j = 0; j < 4; j++) {
                p0[j] += row_term(x, k + j, mean, squares);
                p1[j] += row_term(x, k + 4 + j, mean, squares);
            }
        for (uint64_t j = 0; j < 4; j++) p0[j] += p1[j];
        if (body > pairs)
            for (uint64_t j = 0; j < 4; j++) p0[j] += row_term(x, head + pairs + j, mean, squares);
    }
    float s = (p0[0] + p0[2]) + (p0[1] + p0[3]);
    for (uint64_t k = 0; k < head; k++) s += row_term(x, k, mean, squares);
    for (uint64_t k = head + body; k < n; k++) s += row_term(x, k, mean, squares);
    return s;
}

/* Row r (channel c) of an InstanceNormalization as ONNX Runtime 1.32's CPU kernel computes it (Eigen, SSE, no
 * FMA): mean = the row's sum / d, its head the elements before a 16-byte boundary of a 16-byte aligned X (d r
 * floats in); the squared deviations summed from the row's start; inv = 1 / sqrt(sum / d + eps); y = x s + t
 * with s = inv scale[c], t = bias[c] - mean s. */
HFX_KERNEL_HELPER void instancenorm_row_ort(const float *x, float scale, float bias, float *o, uint64_t d, uint64_t r,
                                            float eps) {
    uint64_t head = (4 - (d * r) % 4) % 4;
    float mean = sum_eigen(x, d, head, 0.0f, 0) / (float)d;
    float inv = 1.0f / sqrtf(sum_eigen(x, d, 0, mean, 1) / (float)d + eps);
    float s = inv * scale, t = bias - mean * s;
    for (uint64_t k = 0; k < d; k++) o[k] = x[k] * s + t;
}

HFX_VECTOR_KERNEL
void hfx_run_norm(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    norm_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t d = pl.d;
    float eps = hfx_f32_from_bits(op->params[HFX_P_EPSILON]);
    const float *x = a->in[0], *scale = a->in[1];
    const float *bias = op->n_in == 3 ? a->in[2] : NULL;
    float *o = a->out[0];
    bool layer = op->opcode == HFX_OP_LAYERNORM;
    uint64_t b, e;
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &b, &e);
    if (op->opcode == HFX_OP_INSTANCENORM) {
        uint64_t channels = a->prog->tensors[op->in[1]].numel;
        for (uint64_t r = b; r < e; r++)
            instancenorm_row_ort(x + r * d, scale[r % channels], bias[r % channels], o + r * d, d, r, eps);
        return;
    }
    if (op->sum_order == HFX_SUM_ORT) { /* ORT's bits where a QUANTIZE_LINEAR reads them */
        bool skip = op->params[HFX_P_NORM_SKIP] != 0;
        for (uint64_t r = b; r < e; r++) {
            if (layer) layernorm_row_ort(x + r * d, scale, bias, o + r * d, d, eps);
            else rmsnorm_row_ort(x + r * d, scale, o + r * d, d, eps, skip);
        }
        return;
    }
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
