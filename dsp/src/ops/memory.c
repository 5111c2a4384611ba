/* memory.c - Transpose, Concat, Slice, Copy (the COPY/DMA engine class).
 * Transpose/Slice items are ranges of output rows (all axes but the last);
 * Concat/Copy items are ranges of output elements. */
#include "kernels.h"

/* input offset of output row `row` (multi-index over output dims[:-1]) */
static uint64_t row_offset(const hfx_tensor *ot, uint64_t row, const uint64_t *in_stride_per_out_axis) {
    uint64_t off = 0;
    for (uint32_t i = ot->rank - 1u; i-- > 0;) {
        off += (row % ot->dims[i]) * in_stride_per_out_axis[i];
        row /= ot->dims[i];
    }
    return off;
}

void hfx_k_transpose(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *ot = &a->prog->tensors[op->out[0]];
    const float *x = a->in[0];
    float *o = a->out[0];
    const uint64_t *v = op->plan.v;
    uint64_t last = v[1];
    uint64_t b, e;
    hfx_plan_range(v[0], v[2], item, &b, &e);
    if (ot->rank == 0) {
        o[0] = x[0];
        return;
    }
    uint64_t st[HFX_MAX_RANK], s[HFX_MAX_RANK];
    hfx_dense_strides(xt, st);
    for (uint32_t i = 0; i < ot->rank; i++) s[i] = st[op->params[HFX_P_PERM + i]];
    uint64_t sl = s[ot->rank - 1];
    /* 2-D tiles: when the output's second-to-last axis is contiguous in the
     * input, 8 consecutive output rows read 8 consecutive input elements */
    uint64_t d2 = ot->rank >= 2 ? ot->dims[ot->rank - 2] : 1;
    bool tiled = ot->rank >= 2 && sl != 1 && s[ot->rank - 2] == 1;
    for (uint64_t r = b; r < e;) {
        const float *src = x + row_offset(ot, r, s);
        float *dst = o + r * last;
        if (tiled && r + 8 <= e && r % d2 + 8 <= d2) {
            for (uint64_t k = 0; k < last; k++) {
                const float *col = src + k * sl;
                for (uint64_t j = 0; j < 8; j++) dst[j * last + k] = col[j];
            }
            r += 8;
            continue;
        }
        if (sl == 1) memcpy(dst, src, last * sizeof(float));
        else
            for (uint64_t k = 0; k < last; k++) dst[k] = src[k * sl];
        r++;
    }
}

void hfx_k_slice(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *ot = &a->prog->tensors[op->out[0]];
    const float *x = a->in[0];
    float *o = a->out[0];
    const uint64_t *v = op->plan.v;
    uint64_t last = v[1];
    uint64_t b, e;
    hfx_plan_range(v[0], v[2], item, &b, &e);
    if (ot->rank == 0) {
        o[0] = x[0];
        return;
    }
    uint64_t st[HFX_MAX_RANK];
    int64_t s[HFX_MAX_RANK], base = 0;
    hfx_dense_strides(xt, st);
    for (uint32_t i = 0; i < ot->rank; i++) {
        int64_t first;
        int64_t step = op->params[HFX_P_SLICE_STEPS + i];
        (void)hfx_slice_axis(xt->dims[i], op->params[HFX_P_SLICE_STARTS + i], op->params[HFX_P_SLICE_ENDS + i], step,
                             &first);
        base += first * (int64_t)st[i];
        s[i] = step * (int64_t)st[i];
    }
    int64_t sl = s[ot->rank - 1];
    for (uint64_t r = b; r < e; r++) {
        int64_t off = base;
        uint64_t rem = r;
        for (uint32_t i = ot->rank - 1u; i-- > 0;) {
            off += (int64_t)(rem % ot->dims[i]) * s[i];
            rem /= ot->dims[i];
        }
        float *dst = o + r * last;
        if (sl == 1) memcpy(dst, x + off, last * sizeof(float));
        else
            for (uint64_t k = 0; k < last; k++) dst[k] = x[off + (int64_t)k * sl];
    }
}

void hfx_k_concat(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_program *p = a->prog;
    const hfx_tensor *ot = &p->tensors[op->out[0]];
    uint32_t axis = (uint32_t)op->params[HFX_P_AXIS];
    uint64_t inner = 1;
    for (uint32_t i = axis + 1; i < ot->rank; i++) inner *= ot->dims[i];
    uint64_t row = (uint64_t)ot->dims[axis] * inner; /* output elements per outer index */
    uint64_t seg[HFX_MAX_OP_INPUTS], start[HFX_MAX_OP_INPUTS + 1];
    start[0] = 0;
    for (uint32_t k = 0; k < op->n_in; k++) {
        seg[k] = (uint64_t)p->tensors[op->in[k]].dims[axis] * inner;
        start[k + 1] = start[k] + seg[k];
    }
    float *o = a->out[0];
    uint64_t b, e;
    hfx_plan_range(ot->numel, op->plan.v[0], item, &b, &e);
    uint64_t pos = b;
    while (pos < e) {
        uint64_t outer = pos / row, within = pos % row;
        uint32_t k = 0;
        while (within >= start[k + 1]) k++;
        uint64_t off = within - start[k];
        uint64_t n = seg[k] - off;
        if (n > e - pos) n = e - pos;
        const float *src = (const float *)a->in[k] + outer * seg[k] + off;
        memcpy(o + pos, src, n * sizeof(float));
        pos += n;
    }
}

void hfx_k_copy(const hfx_kernel_args *a, uint32_t item) {
    const hfx_tensor *ot = &a->prog->tensors[a->op->out[0]];
    uint64_t b, e;
    hfx_plan_range(ot->numel, a->op->plan.v[0], item, &b, &e);
    memcpy((float *)a->out[0] + b, (const float *)a->in[0] + b, (e - b) * sizeof(float));
}
