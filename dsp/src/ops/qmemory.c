/* qmemory.c - QCONCAT, the Concat of a QDQ group on u8/i8: each input's bytes through its 256-entry
 * table (its requantisation to Y's parameters, ONNX Runtime's QLinearConcat; the identity when they
 * are equal); on Hexagon builds (HFX_HVX) by vlut32 (hvx/hvx_lut_i8.c). An item is a block of outer
 * rows (the axes before the concat axis). */
#include "kernels.h"

#ifdef HFX_HVX
#include "../../hvx/hvx_kernels.h"
#endif

static bool narrow_int(uint32_t d) { return d == HFX_DTYPE_U8 || d == HFX_DTYPE_I8; }

typedef struct qconcat_plan {
    uint64_t outer, inner; /* outer rows; elements per unit of the axis */
    uint64_t rows_per_item;
} qconcat_plan;

static hfx_status qconcat_dtypes(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *t = v->p->tensors, *table = &t[op->in[op->n_in - 1]];
    uint32_t k = op->n_in - 1u;
    for (uint32_t i = 0; i < k; i++)
        if (!narrow_int(t[op->in[i]].dtype))
            return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, i), "op %u (%s): input %u must be u8 or i8", v->index,
                             op->desc->label, i);
    if (!narrow_int(table->dtype) || t[op->out[0]].dtype != table->dtype)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, k), "op %u (%s): the tables and Y must be one u8/i8 type",
                         v->index, op->desc->label);
    if (table->rank != 2 || table->dims[0] != k || table->dims[1] != 256)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, k), "op %u (%s): the tables must be [%u, 256]", v->index,
                         op->desc->label, k);
    return HFX_OK;
}

hfx_status hfx_validate_qconcat(hfx_vctx *v, hfx_op *op) {
    hfx_status st = qconcat_dtypes(v, op);
    if (st) return st;
    const hfx_tensor *t = v->p->tensors, *x0 = &t[op->in[0]];
    uint32_t axis, k = op->n_in - 1u;
    st = hfx_check_axis(v, op, x0->rank, &axis);
    if (st) return st;
    uint32_t od[HFX_MAX_RANK];
    for (uint32_t a = 0; a < x0->rank; a++) od[a] = a == axis ? 0 : x0->dims[a];
    for (uint32_t i = 0; i < k; i++) {
        const hfx_tensor *x = &t[op->in[i]];
        bool fits = x->rank == x0->rank;
        for (uint32_t a = 0; fits && a < x->rank; a++) fits = a == axis || x->dims[a] == x0->dims[a];
        if (!fits)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, i), "op %u (%s): input %u differs off the axis", v->index,
                             op->desc->label, i);
        od[axis] += x->dims[axis];
    }
    return hfx_same_shape(&t[op->out[0]], od, x0->rank) ? HFX_OK : hfx_shape_err(v, "the concatenation");
}

hfx_status hfx_plan_qconcat(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    uint32_t axis = (uint32_t)op->params[HFX_P_AXIS];
    qconcat_plan pl = {1, 1, 0};
    for (uint32_t a = 0; a < axis; a++) pl.outer *= y->dims[a];
    for (uint32_t a = axis + 1; a < y->rank; a++) pl.inner *= y->dims[a];
    pl.rows_per_item = hfx_per_item_for(y->numel / pl.outer, HFX_COPY_CHUNK);
    HFX_PLAN_STORE(op, pl);
#ifdef HFX_HVX
    op->plan.ws_bytes = 256u * (op->n_in - 1u); /* the tables prepared for vlut32 */
#endif
    return hfx_plan_set_items(op, hfx_ceil_div(pl.outer, pl.rows_per_item));
}

HFX_VECTOR_KERNEL
void hfx_run_qconcat(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *t = a->prog->tensors;
    qconcat_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint32_t k = op->n_in - 1u, axis = (uint32_t)op->params[HFX_P_AXIS];
    const uint8_t *tables = a->in[k];
    uint8_t *y = a->out[0];
    uint64_t r0, r1, row = t[op->out[0]].dims[axis] * pl.inner;
    hfx_plan_range(pl.outer, pl.rows_per_item, item, &r0, &r1);
#ifdef HFX_HVX
    for (uint32_t i = 0; i < k; i++)
        hvx_lut_i8_prepare_xor(tables + 256u * i, t[op->in[i]].dtype == HFX_DTYPE_I8 ? 0x80u : 0u,
                               (uint8_t *)a->ws + 256u * i);
#endif
    for (uint64_t r = r0; r < r1; r++) {
        uint8_t *dst = y + r * row;
        for (uint32_t i = 0; i < k; i++) {
            const hfx_tensor *x = &t[op->in[i]];
            uint64_t n = x->dims[axis] * pl.inner;
            if (n == 0) continue; /* an empty input (its pointer may be NULL) */
            const uint8_t *src = (const uint8_t *)a->in[i] + r * n;
#ifdef HFX_HVX
            hvx_lut_i8((const int8_t *)src, (int8_t *)dst, (size_t)n, (const uint8_t *)a->ws + 256u * i);
#else
            const uint8_t *table = tables + 256u * i;
            uint8_t flip = x->dtype == HFX_DTYPE_I8 ? 0x80u : 0u; /* i8: x - (-128) is the byte ^ 0x80 */
            for (uint64_t j = 0; j < n; j++) dst[j] = table[src[j] ^ flip];
#endif
            dst += n;
        }
    }
}
