/* softmax.c - Softmax over any axis. The tensor is seen as [outer, D, inner];
 * a line is one (outer, inner) pair; an item is a range of lines. Contiguous
 * lines (inner == 1, the usual last axis) take a SIMD-friendly path. */
#include "kernels.h"
#include "vmath.h"
#include "vsum.h"

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

HFX_VECTOR_KERNEL
void hfx_run_softmax(const hfx_kernel_args *a, uint32_t item) {
    softmax_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    uint64_t outer = pl.outer, d = pl.d, inner = pl.inner;
    const float *x = a->in[0];
    float *o = a->out[0];
    uint64_t b, e;
    hfx_plan_range(outer * inner, pl.lines_per_item, item, &b, &e);
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
