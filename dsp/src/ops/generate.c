/* generate.c - Range: values made from scalars, not read from a tensor (ONNX's generator ops). Its length is
 * Y's, which the shape section makes follow the input shapes (a rotary embedding's positions 0 .. seq - 1);
 * one item: the values are a running sum, as ONNX Runtime's CPU kernel adds them. */
#include "kernels.h"

/* ---- Range: in start, delta (one element each, Y's dtype: f32, i32 or i64) -> Y [n] ---- */

hfx_status hfx_validate_arange(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors, *y = &t[op->out[0]];
    if (y->dtype != HFX_DTYPE_F32 && y->dtype != HFX_DTYPE_I32 && y->dtype != HFX_DTYPE_I64)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0),
                         "op %u (Range): output dtype %u, expected f32, i32 or i64", v->index, y->dtype);
    for (uint32_t i = 0; i < 2; i++) {
        if (t[op->in[i]].dtype != y->dtype)
            return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, i),
                             "op %u (Range): input %u dtype %u, expected the output's %u", v->index, i,
                             t[op->in[i]].dtype, y->dtype);
        if (t[op->in[i]].numel != 1)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, i), "op %u (Range): input %u must have one element",
                             v->index, i);
    }
    return y->rank == 1 ? HFX_OK : hfx_shape_err(v, "a 1-D range");
}

hfx_status hfx_plan_arange(const hfx_program *p, hfx_op *op) {
    (void)p;
    return hfx_plan_set_items(op, 1);
}

/* y[i] = start + delta + ... (i terms): each value the last plus delta, rounded as ONNX Runtime rounds it (f32) */
void hfx_run_arange(const hfx_kernel_args *a, uint32_t item) {
    (void)item;
    const hfx_tensor *yt = &a->prog->tensors[a->op->out[0]];
    uint64_t n = yt->numel;
    if (yt->dtype == HFX_DTYPE_F32) {
        float value = *(const float *)a->in[0], delta = *(const float *)a->in[1], *y = a->out[0];
        for (uint64_t i = 0; i < n; i++, value += delta) y[i] = value;
    } else if (yt->dtype == HFX_DTYPE_I32) {
        uint32_t value = *(const uint32_t *)a->in[0], delta = *(const uint32_t *)a->in[1], *y = a->out[0];
        for (uint64_t i = 0; i < n; i++, value += delta) y[i] = value; /* wraps, as two's complement does */
    } else {
        uint64_t value = *(const uint64_t *)a->in[0], delta = *(const uint64_t *)a->in[1], *y = a->out[0];
        for (uint64_t i = 0; i < n; i++, value += delta) y[i] = value;
    }
}
