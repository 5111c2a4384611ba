/* memory.c - Transpose, Concat, Slice, Copy, GatherRows, Expand, Trilu (the COPY/DMA engine class); they move
 * elements of any dtype.
 * Transpose/Slice/Expand/Trilu items are ranges of output rows (all axes but the last);
 * Concat/Copy items are ranges of output elements, GatherRows items ranges of indices. */
#include <math.h>

#include "kernels.h"
#ifdef HFX_HVX
#include "../../hvx/hvx_transpose.h"
#endif

/* The axes of a strided read of dense `dims` in place, as few as they can be: axes of size 1 dropped and each
 * axis merged into the next where both read one run (stride[i] == stride[i + 1] * dims[i + 1]); at least one
 * axis is kept. A slice of [1, 128, 20, 1] along axis 2 is then 128 runs of 19 floats, not 2432 of one. */
static uint32_t merged_axes(uint32_t rank, const uint32_t *dims, int64_t *stride, uint64_t *merged) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] == 1) continue;
        if (n > 0 && stride[n - 1] == stride[i] * (int64_t)dims[i]) {
            merged[n - 1] *= dims[i];
            stride[n - 1] = stride[i];
            continue;
        }
        merged[n] = dims[i];
        stride[n++] = stride[i];
    }
    if (n == 0) merged[0] = 1, stride[0] = 1, n = 1;
    return n;
}

/* ---- Transpose ---- */

/* Transpose and Slice move elements of any dtype: the output's must be the input's. */
static hfx_status same_dtype(hfx_vctx *v, const hfx_op *op, const char *label) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    if (y->dtype == x->dtype) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0), "op %u (%s): output dtype %u, expected the input's %u",
                     v->index, label, y->dtype, x->dtype);
}

hfx_status hfx_validate_transpose(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    if (same_dtype(v, op, "Transpose")) return HFX_ERR_DTYPE;
    uint32_t od[HFX_MAX_RANK], seen = 0;
    for (uint32_t i = 0; i < HFX_MAX_RANK; i++) {
        int32_t pi = op->params[HFX_P_PERM + i];
        if (i >= x->rank) {
            if (pi != 0)
                return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: perm[%u] beyond rank must be 0",
                                 v->index, i);
            continue;
        }
        if (pi < 0 || (uint32_t)pi >= x->rank || (seen & (1u << pi)))
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: perm is not a permutation", v->index);
        seen |= 1u << pi;
        od[i] = x->dims[pi];
    }
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, x->rank)) return hfx_shape_err(v, "the permuted input");
    return HFX_OK;
}

hfx_status hfx_plan_transpose(const hfx_program *p, hfx_op *op) {
#ifdef HFX_HVX
    op->plan.ws_bytes = hvx_transpose_ws_bytes();
#endif
    return hfx_plan_rows(p, op);
}

/* input offset of output row `row` (multi-index over output dims[:-1]) */
static uint64_t row_offset(const hfx_tensor *ot, uint64_t row, const uint64_t *in_stride_per_out_axis) {
    uint64_t off = 0;
    for (uint32_t i = ot->rank - 1u; i-- > 0;) {
        off += (row % ot->dims[i]) * in_stride_per_out_axis[i];
        row /= ot->dims[i];
    }
    return off;
}

/* Output rows [b, e) of a transpose of elements of `es` bytes; `s`: the input stride of each output axis.
 * Inlined once per element size, so each copy of an element is one load and store. */
HFX_KERNEL_HELPER void transpose_rows(const uint8_t *x, uint8_t *o, size_t es, const hfx_tensor *ot, const uint64_t *s,
                                      uint64_t last, uint64_t b, uint64_t e) {
    uint64_t sl = s[ot->rank - 1];
    /* 2-D tiles: when the output's second-to-last axis is contiguous in the
     * input, 8 consecutive output rows read 8 consecutive input elements */
    uint64_t d2 = ot->rank >= 2 ? ot->dims[ot->rank - 2] : 1;
    bool tiled = ot->rank >= 2 && sl != 1 && s[ot->rank - 2] == 1;
    for (uint64_t r = b; r < e;) {
        const uint8_t *src = x + row_offset(ot, r, s) * es;
        uint8_t *dst = o + r * last * es;
        if (tiled && r + 8 <= e && r % d2 + 8 <= d2) {
            for (uint64_t k = 0; k < last; k++)
                for (uint64_t j = 0; j < 8; j++) memcpy(dst + (j * last + k) * es, src + (k * sl + j) * es, es);
            r += 8;
            continue;
        }
        if (sl == 1) memcpy(dst, src, last * es);
        else
            for (uint64_t k = 0; k < last; k++) memcpy(dst + k * es, src + k * sl * es, es);
        r++;
    }
}

/* Transpose's and Slice's item: its output rows [*b, *e) of `*last` elements each; false when the output is a
 * scalar, which it copies. */
static bool item_rows(const hfx_kernel_args *a, uint32_t item, uint64_t *last, uint64_t *b, uint64_t *e) {
    const hfx_tensor *ot = &a->prog->tensors[a->op->out[0]];
    hfx_rows_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    *last = pl.row_len;
    hfx_plan_range(pl.rows, pl.rows_per_item, item, b, e);
    if (ot->rank > 0) return true;
    memcpy(a->out[0], a->in[0], hfx_dtype_size(ot->dtype));
    return false;
}

#ifdef HFX_HVX
/* Output rows [b, e) of `last` elements on HVX when the output's axes merge into [batches..., d2, l]
 * with d2 contiguous in the input and l not: a batch of 2-D transposes of elements of es bytes, or,
 * when the last merged axis is contiguous in the input, of its runs as elements (up to 64 bytes:
 * [1, 64, 4, 16] -> [1, 4, 64, 16] moves 16-element runs); output rows contiguous in the input and
 * longer than 64 bytes are copied by vector. False for other permutations, and for items that cut a
 * row of the view, which stay C. */
static bool transpose_rows_hvx(const hfx_kernel_args *a, const uint8_t *x, uint8_t *o, size_t es, const uint64_t *s,
                               uint64_t last, uint64_t b, uint64_t e) {
    const hfx_tensor *ot = &a->prog->tensors[a->op->out[0]];
    if (s[ot->rank - 1] == 1 && last * es > 64) { /* rows too long to move as elements: one copy each */
        for (uint64_t r = b; r < e; r++)
            hvx_copy_bytes(o + r * last * es, x + row_offset(ot, r, s) * es, (size_t)(last * es));
        return true;
    }
    int64_t stride[HFX_MAX_RANK];
    uint64_t dims[HFX_MAX_RANK];
    for (uint32_t i = 0; i < ot->rank; i++) stride[i] = (int64_t)s[i];
    uint32_t n = merged_axes(ot->rank, ot->dims, stride, dims);
    uint64_t run = stride[n - 1] == 1 ? dims[n - 1] : 1; /* input elements that move as one */
    if (run > 1) n--;
    size_t ez = es * run;
    if (n < 2 || ez > 64 || (ez & (ez - 1)) || stride[n - 2] != (int64_t)run || stride[n - 1] % (int64_t)run)
        return false;
    uint64_t l = dims[n - 1], d2 = dims[n - 2], unit = run * l; /* input elements of a row of the view */
    if (b * last % unit || e * last % unit) return false;
    for (uint64_t r = b * last / unit, end = e * last / unit; r < end;) {
        uint64_t j = r % d2, cols = d2 - j < end - r ? d2 - j : end - r, batch = r / d2, off = j * run;
        for (uint32_t i = n - 2; i-- > 0;) {
            off += (batch % dims[i]) * (uint64_t)stride[i];
            batch /= dims[i];
        }
        hvx_transpose(x + off * es, (size_t)(stride[n - 1] / (int64_t)run), o + r * unit * es, (size_t)l, (size_t)l,
                      (size_t)cols, ez, a->ws);
        r += cols;
    }
    return true;
}
#endif

void hfx_run_transpose(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *ot = &a->prog->tensors[op->out[0]];
    const uint8_t *x = a->in[0];
    uint8_t *o = a->out[0];
    size_t es = hfx_dtype_size(ot->dtype);
    uint64_t last, b, e;
    if (!item_rows(a, item, &last, &b, &e)) return;
    uint64_t st[HFX_MAX_RANK], s[HFX_MAX_RANK];
    hfx_dense_strides(xt, st);
    for (uint32_t i = 0; i < ot->rank; i++) s[i] = st[op->params[HFX_P_PERM + i]];
#ifdef HFX_HVX
    if (transpose_rows_hvx(a, x, o, es, s, last, b, e)) return;
#endif
    if (es == 1) transpose_rows(x, o, 1, ot, s, last, b, e);
    else if (es == 2) transpose_rows(x, o, 2, ot, s, last, b, e);
    else if (es == 8) transpose_rows(x, o, 8, ot, s, last, b, e);
    else transpose_rows(x, o, 4, ot, s, last, b, e);
}

/* ---- Slice ---- */

uint64_t hfx_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first) {
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        if (start < 0) start = 0;
        if (start > dim) start = dim;
        if (end < 0) end = 0;
        if (end > dim) end = dim;
        *first = start;
        if (end <= start) return 0;
        return (uint64_t)((end - start + step - 1) / step);
    }
    if (start < 0) start = 0;
    if (start > dim - 1) start = dim - 1;
    if (end < -1) end = -1;
    if (end > dim - 1) end = dim - 1;
    *first = start;
    if (start <= end) return 0;
    return (uint64_t)((start - end + (-step) - 1) / (-step));
}

hfx_status hfx_validate_slice(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    if (same_dtype(v, op, "Slice")) return HFX_ERR_DTYPE;
    uint32_t od[HFX_MAX_RANK];
    for (uint32_t i = 0; i < HFX_MAX_RANK; i++) {
        int32_t s = op->params[HFX_P_SLICE_STARTS + i], e = op->params[HFX_P_SLICE_ENDS + i];
        int32_t st = op->params[HFX_P_SLICE_STEPS + i];
        if (i >= x->rank) {
            if (s || e || st)
                return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_SLICE_STARTS + i),
                                 "op %u: slice params beyond rank must be 0", v->index);
            continue;
        }
        if (st == 0)
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_SLICE_STEPS + i), "op %u: slice step is 0",
                             v->index);
        int64_t first;
        od[i] = (uint32_t)hfx_slice_axis(x->dims[i], s, e, st, &first);
    }
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, x->rank)) return hfx_shape_err(v, "the slice");
    return HFX_OK;
}

/* Dense output elements [e0, e1) of the strided read of x (axes as merged_axes gives them, elements of `es`
 * bytes), run by run of the last axis; a last axis of stride 0 (Expand's broadcast) repeats one element, copied
 * from the run's start in doubling spans. Inlined once per element size. */
HFX_KERNEL_HELPER void copy_strided(const uint8_t *x, uint8_t *o, size_t es, uint32_t n, const uint64_t *dims,
                                    const int64_t *stride, uint64_t e0, uint64_t e1) {
    uint64_t len = dims[n - 1];
    int64_t sl = stride[n - 1];
    for (uint64_t i = e0; i < e1;) {
        uint64_t k = i % len, run = len - k < e1 - i ? len - k : e1 - i, rem = i / len;
        int64_t off = (int64_t)k * sl;
        for (uint32_t j = n - 1; j-- > 0;) {
            off += (int64_t)(rem % dims[j]) * stride[j];
            rem /= dims[j];
        }
        if (sl == 1) memcpy(o + i * es, x + off * (int64_t)es, run * es);
        else if (sl == 0) {
            memcpy(o + i * es, x + off * (int64_t)es, es);
            for (uint64_t done = 1; done < run; done *= 2)
                memcpy(o + (i + done) * es, o + i * es, (done < run - done ? done : run - done) * es);
        } else
            for (uint64_t r = 0; r < run; r++) memcpy(o + (i + r) * es, x + (off + (int64_t)r * sl) * (int64_t)es, es);
        i += run;
    }
}

/* Output elements [e0, e1) of ot read from x at element strides `s` per output axis */
static void copy_rows(const uint8_t *x, uint8_t *o, size_t es, const hfx_tensor *ot, int64_t *s, uint64_t e0,
                      uint64_t e1) {
    uint64_t md[HFX_MAX_RANK];
    uint32_t n = merged_axes(ot->rank, ot->dims, s, md);
    if (es == 1) copy_strided(x, o, 1, n, md, s, e0, e1);
    else if (es == 2) copy_strided(x, o, 2, n, md, s, e0, e1);
    else if (es == 8) copy_strided(x, o, 8, n, md, s, e0, e1);
    else copy_strided(x, o, 4, n, md, s, e0, e1);
}

hfx_status hfx_plan_slice(const hfx_program *p, hfx_op *op) { return hfx_plan_rows(p, op); }

void hfx_run_slice(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *ot = &a->prog->tensors[op->out[0]];
    const uint8_t *x = a->in[0];
    uint8_t *o = a->out[0];
    size_t es = hfx_dtype_size(ot->dtype);
    uint64_t last, b, e;
    if (!item_rows(a, item, &last, &b, &e)) return;
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
    copy_rows(x + base * (int64_t)es, o, es, ot, s, b * last, e * last);
}

/* ---- Concat ---- */

/* every input of the output's dtype */
static hfx_status concat_dtypes(hfx_vctx *v, const hfx_op *op) {
    uint32_t d = v->p->tensors[op->out[0]].dtype;
    for (uint32_t k = 0; k < op->n_in; k++)
        if (v->p->tensors[op->in[k]].dtype != d)
            return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, k), "op %u (Concat): input %u dtype %u, the output's %u",
                             v->index, k, v->p->tensors[op->in[k]].dtype, d);
    return HFX_OK;
}

hfx_status hfx_validate_concat(hfx_vctx *v, hfx_op *op) {
    const hfx_program *p = v->p;
    const hfx_tensor *x = &p->tensors[op->in[0]];
    uint32_t axis, od[HFX_MAX_RANK];
    hfx_status dt = concat_dtypes(v, op);
    if (dt) return dt;
    if (x->rank == 0) return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u: Concat of scalars", v->index);
    hfx_status st = hfx_check_axis(v, op, x->rank, &axis);
    if (st) return st;
    memcpy(od, x->dims, sizeof(uint32_t) * x->rank);
    uint64_t total = x->dims[axis];
    for (uint32_t k = 1; k < op->n_in; k++) {
        const hfx_tensor *t = &p->tensors[op->in[k]];
        bool ok = t->rank == x->rank;
        for (uint32_t i = 0; ok && i < x->rank; i++)
            if (i != axis && t->dims[i] != x->dims[i]) ok = false;
        if (!ok)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, k), "op %u: Concat input %u shape mismatch", v->index, k);
        total += t->dims[axis];
    }
    if (total > 0x7fffffffu) return hfx_shape_err(v, "Concat (too large)");
    od[axis] = (uint32_t)total;
    if (!hfx_same_shape(&p->tensors[op->out[0]], od, x->rank)) return hfx_shape_err(v, "the concatenation");
    return HFX_OK;
}

hfx_status hfx_plan_concat(const hfx_program *p, hfx_op *op) {
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_EW_CHUNK);
}

void hfx_run_concat(const hfx_kernel_args *a, uint32_t item) {
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
    uint8_t *o = a->out[0];
    size_t es = hfx_dtype_size(ot->dtype);
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(ot->numel, pl.elems_per_item, item, &b, &e);
    uint64_t pos = b;
    while (pos < e) {
        uint64_t outer = pos / row, within = pos % row;
        uint32_t k = 0;
        while (within >= start[k + 1]) k++;
        uint64_t off = within - start[k];
        uint64_t n = seg[k] - off;
        if (n > e - pos) n = e - pos;
        const uint8_t *src = (const uint8_t *)a->in[k] + (outer * seg[k] + off) * es;
        memcpy(o + pos * es, src, n * es);
        pos += n;
    }
}

/* ---- Copy ---- */

hfx_status hfx_validate_copy(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    if (y->dtype != x->dtype)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0), "op %u (Copy): output dtype %u, expected the input's %u",
                         v->index, y->dtype, x->dtype);
    return y->numel == x->numel ? HFX_OK : hfx_shape_err(v, "the input's element count");
}

hfx_status hfx_plan_copy(const hfx_program *p, hfx_op *op) {
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_COPY_CHUNK);
}

void hfx_run_copy(const hfx_kernel_args *a, uint32_t item) {
    const hfx_tensor *ot = &a->prog->tensors[a->op->out[0]];
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    uint64_t b, e;
    hfx_plan_range(ot->numel, pl.elems_per_item, item, &b, &e);
    size_t es = hfx_dtype_size(ot->dtype);
    memcpy((uint8_t *)a->out[0] + b * es, (const uint8_t *)a->in[0] + b * es, (e - b) * es);
}

/* ---- Expand: X broadcast to Y's dims ---- */

hfx_status hfx_validate_expand(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    if (same_dtype(v, op, "Expand")) return HFX_ERR_DTYPE;
    return hfx_broadcastable_to(x, y->dims, y->rank) ? HFX_OK : hfx_shape_err(v, "a broadcast of the input");
}

hfx_status hfx_plan_expand(const hfx_program *p, hfx_op *op) { return hfx_plan_rows(p, op); }

void hfx_run_expand(const hfx_kernel_args *a, uint32_t item) {
    const hfx_tensor *xt = &a->prog->tensors[a->op->in[0]], *ot = &a->prog->tensors[a->op->out[0]];
    uint64_t last, b, e, bs[HFX_MAX_RANK];
    if (!item_rows(a, item, &last, &b, &e)) return;
    hfx_bcast_strides(xt, ot->rank, bs);
    int64_t s[HFX_MAX_RANK];
    for (uint32_t i = 0; i < ot->rank; i++) s[i] = (int64_t)bs[i];
    copy_rows(a->in[0], a->out[0], hfx_dtype_size(ot->dtype), ot, s, b * last, e * last);
}

/* ---- Trilu: X's rows copied, the elements outside the kept triangle of the last two axes zero ---- */

hfx_status hfx_validate_trilu(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    if (same_dtype(v, op, "Trilu")) return HFX_ERR_DTYPE;
    uint32_t upper = (uint32_t)op->params[HFX_P_TRILU_UPPER];
    if (upper > 1)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_TRILU_UPPER), "op %u (Trilu): upper must be 0 or 1",
                         v->index);
    if (x->rank < 2) return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u (Trilu): rank %u < 2", v->index, x->rank);
    return hfx_same_as_input(v, op);
}

hfx_status hfx_plan_trilu(const hfx_program *p, hfx_op *op) { return hfx_plan_rows(p, op); }

void hfx_run_trilu(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *ot = &a->prog->tensors[op->out[0]];
    size_t es = hfx_dtype_size(ot->dtype);
    uint64_t last, b, e, rows = ot->dims[ot->rank - 2];
    if (!item_rows(a, item, &last, &b, &e)) return;
    int64_t k = op->params[HFX_P_TRILU_K], cols = (int64_t)last;
    const uint8_t *x = a->in[0];
    uint8_t *o = a->out[0];
    for (uint64_t r = b; r < e; r++) {
        int64_t edge = (int64_t)(r % rows) + k; /* upper keeps j >= edge, lower keeps j <= edge */
        int64_t z0 = op->params[HFX_P_TRILU_UPPER] ? 0 : edge + 1, z1 = op->params[HFX_P_TRILU_UPPER] ? edge : cols;
        z0 = z0 < 0 ? 0 : z0 > cols ? cols : z0;
        z1 = z1 < z0 ? z0 : z1 > cols ? cols : z1;
        memcpy(o + r * last * es, x + r * last * es, last * es);
        memset(o + (r * last + (uint64_t)z0) * es, 0, (uint64_t)(z1 - z0) * es);
    }
}

/* ---- GatherRows: ONNX Gather on axis 0 with run-time indices ----
 * Data of any dtype (the output's). Indices are i32/i64, or f32 holding integers (positions a program
 * computes in float: exact below 2^24); an index that is not an integer in [-R, R) gives a row of NaN
 * (f32 data) or zeros (integer data): ONNX Runtime fails such a run, the kernel has no run-time error. */

static int64_t gather_index(const hfx_tensor *t, const void *data, uint64_t r, int64_t rows) {
    if (t->dtype == HFX_DTYPE_I64) return ((const int64_t *)data)[r];
    if (t->dtype == HFX_DTYPE_I32) return ((const int32_t *)data)[r];
    float f = ((const float *)data)[r];
    if (!(f >= (float)-rows && f < (float)rows)) return INT64_MIN; /* NaN fails too */
    int64_t k = (int64_t)f;
    return (float)k == f ? k : INT64_MIN;
}

hfx_status hfx_validate_gather_rows(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *ix = &v->p->tensors[op->in[1]];
    const hfx_tensor *y = &v->p->tensors[op->out[0]];
    if (y->dtype != x->dtype)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0),
                         "op %u (GatherRows): output dtype %u, expected the data's %u", v->index, y->dtype, x->dtype);
    if (ix->dtype != HFX_DTYPE_I32 && ix->dtype != HFX_DTYPE_I64 && ix->dtype != HFX_DTYPE_F32)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 1), "op %u (GatherRows): indices must be i32, i64 or f32",
                         v->index);
    if (x->rank == 0 || ix->rank + x->rank - 1u > HFX_MAX_RANK)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u (GatherRows): data rank %u, indices rank %u",
                         v->index, x->rank, ix->rank);
    uint32_t od[HFX_MAX_RANK];
    memcpy(od, ix->dims, sizeof(uint32_t) * ix->rank);
    memcpy(od + ix->rank, x->dims + 1, sizeof(uint32_t) * (x->rank - 1u));
    if (!hfx_same_shape(y, od, ix->rank + x->rank - 1u)) return hfx_shape_err(v, "indices.shape + data.shape[1:]");
    return hfx_no_empty_input(v, op);
}

hfx_status hfx_plan_gather_rows(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]];
    uint64_t row_len = x->numel / x->dims[0];
    hfx_rows_plan pl = {p->tensors[op->in[1]].numel, row_len, hfx_per_item_for(row_len, HFX_EW_CHUNK)};
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

void hfx_run_gather_rows(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *it = &a->prog->tensors[op->in[1]];
    const uint8_t *x = a->in[0];
    uint8_t *o = a->out[0];
    hfx_rows_plan pl;
    HFX_PLAN_LOAD(pl, op);
    size_t row = pl.row_len * hfx_dtype_size(xt->dtype); /* bytes */
    uint64_t b, e;
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &b, &e);
    int64_t rows = xt->dims[0];
    for (uint64_t r = b; r < e; r++) {
        int64_t k = gather_index(it, a->in[1], r, rows);
        if (k < 0 && k != INT64_MIN) k += rows;
        uint8_t *dst = o + r * row;
        if (k >= 0 && k < rows) memcpy(dst, x + (uint64_t)k * row, row);
        else if (xt->dtype == HFX_DTYPE_F32)
            for (uint64_t j = 0; j < pl.row_len; j++) ((float *)(void *)dst)[j] = NAN;
        else memset(dst, 0, row);
    }
}
