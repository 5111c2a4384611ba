/* reduce.c - ReduceMean / ReduceSum (the host build: as ONNX Runtime's CPU kernel sums, bit for bit; the Hexagon
 * builds and HFX_SUM_HEXAGON: accumulated in double) and ReduceMax / ReduceMin over any set of axes, and ArgMax /
 * ArgMin along one axis. An item is a range of output elements; each is reduced completely. */
#include "kernels.h"
#include "vsum.h"

typedef struct reduce_plan {
    uint64_t outputs, outputs_per_item;
} reduce_plan;

/* 0, or each of [0, rank) once in the low `rank` nibbles (HFX_P_REDUCE_ORT_PERM) */
static bool perm_valid(uint32_t perm, uint32_t rank) {
    uint32_t seen = 0;
    for (uint32_t k = 0; perm && k < 8; k++) {
        uint32_t j = (perm >> (4 * k)) & 15u;
        if (k >= rank ? j != 0 : j >= rank || (seen >> j) & 1u) return false;
        if (k < rank) seen |= 1u << j;
    }
    return true;
}

hfx_status hfx_validate_reduce(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    uint32_t mask = (uint32_t)op->params[HFX_P_REDUCE_AXES_MASK];
    int32_t keep = op->params[HFX_P_REDUCE_KEEPDIMS];
    if (mask == 0 || (x->rank < 32 && (mask >> x->rank) != 0))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_REDUCE_AXES_MASK),
                         "op %u: axes mask %u invalid for rank %u", v->index, mask, x->rank);
    if (keep != 0 && keep != 1)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_REDUCE_KEEPDIMS), "op %u: keepdims must be 0/1",
                         v->index);
    if (!perm_valid((uint32_t)op->params[HFX_P_REDUCE_ORT_PERM], x->rank))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_REDUCE_ORT_PERM),
                         "op %u: ORT's transpose %#x is no permutation of %u axes", v->index,
                         (uint32_t)op->params[HFX_P_REDUCE_ORT_PERM], x->rank);
    uint32_t od[HFX_MAX_RANK], orank = 0;
    for (uint32_t i = 0; i < x->rank; i++) {
        if (!(mask & (1u << i))) od[orank++] = x->dims[i];
        else if (keep) od[orank++] = 1;
    }
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, orank)) return hfx_shape_err(v, "the reduction");
    return HFX_OK;
}

/* items of whole outputs, about HFX_EW_CHUNK inputs reduced per item */
hfx_status hfx_plan_reduce(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]], *y = &p->tensors[op->out[0]];
    reduce_plan pl = {y->numel, hfx_per_item_for(x->numel / y->numel, HFX_EW_CHUNK)};
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.outputs, pl.outputs_per_item));
}

/* Sum, in row-major order of the reduced axes `red` (not only the trailing ones), of
 * the elements from x. Runs along the last reduced axis; each run's start comes from
 * its index by division. The odometer over all reduced axes it replaces (idx[r]++ ...
 * break) never ended as clang-19 -O2 compiled it for Hexagon: the 4x unrolled loop's
 * exit test read a register holding a dead value (seen in qemu's register dump). */
static double strided_sum(const float *x, const uint32_t *dims, const uint64_t *st, const uint32_t *red, uint32_t nr) {
    uint32_t last = red[nr - 1];
    uint64_t run = dims[last], step = st[last], runs = 1;
    for (uint32_t r = 0; r + 1 < nr; r++) runs *= dims[red[r]];
    double sum = 0.0;
    for (uint64_t j = 0; j < runs; j++) {
        uint64_t rem = j, off = 0;
        for (uint32_t r = nr - 1; r-- > 0;) {
            off += (rem % dims[red[r]]) * st[red[r]];
            rem /= dims[red[r]];
        }
        for (uint64_t i = 0; i < run; i++) sum += x[off + i * step];
    }
    return sum;
}

/* The largest (max) or smallest element, as strided_sum walks them; a NaN propagates, no element gives
 * -inf (max) or +inf (min), as ONNX Runtime. */
static float strided_extreme(const float *x, const uint32_t *dims, const uint64_t *st, const uint32_t *red, uint32_t nr,
                             bool max) {
    uint32_t last = red[nr - 1];
    uint64_t run = dims[last], step = st[last], runs = 1;
    for (uint32_t r = 0; r + 1 < nr; r++) runs *= dims[red[r]];
    float m = max ? -__builtin_inff() : __builtin_inff();
    for (uint64_t j = 0; j < runs; j++) {
        uint64_t rem = j, off = 0;
        for (uint32_t r = nr - 1; r-- > 0;) {
            off += (rem % dims[red[r]]) * st[red[r]];
            rem /= dims[red[r]];
        }
        for (uint64_t i = 0; i < run; i++) {
            float v = x[off + i * step];
            m = (max ? v > m : v < m) || v != v ? v : m; /* once NaN, no v compares above it */
        }
    }
    return m;
}

#if !defined(__hexagon__) /* the host's only: its build alone is held to ORT's bits */
/* ONNX Runtime 1.32's float ReduceSum / ReduceMean on x86-64 (reduction_ops.h), on every output the host build
 * computes (probed with values whose float sum depends on the order: tests/test_lower_reduce_order.py): the axes
 * of size 1 dropped, runs of reduced and of kept axes merged, its fast paths for the shapes R, KR, RK, KRK and RKR,
 * else its generic loop; the mean is the sum divided by the count in float. ORT reads the tensor it reduces, which
 * is x, or the tensor x is a Transpose of (HFX_P_REDUCE_ORT_PERM: ORT's optimizer moves a Transpose below a
 * ReduceMean): an ort_view, that tensor's dims and the strides of its axes in x. */
typedef struct ort_view {
    const float *x;
    uint32_t rank, mask, permuted; /* mask: the view's reduced axes */
    uint32_t dims[HFX_MAX_RANK];
    uint64_t st[HFX_MAX_RANK];
} ort_view;

/* x as the tensor T of which it is Transpose(T, perm), perm[k] in 4 bits at 4 k (0: x itself) */
static void ort_view_init(ort_view *v, const float *x, const hfx_tensor *xt, uint32_t mask, uint32_t perm) {
    uint64_t st[HFX_MAX_RANK];
    hfx_dense_strides(xt, st);
    v->x = x;
    v->rank = xt->rank;
    v->mask = 0;
    v->permuted = perm != 0;
    for (uint32_t k = 0; k < xt->rank; k++) {
        uint32_t j = perm ? (perm >> (4 * k)) & 15u : k; /* x's axis k is T's axis j */
        v->dims[j] = xt->dims[k];
        v->st[j] = st[k];
        v->mask |= ((mask >> k) & 1u) << j;
    }
}

/* The element at T's row-major index i */
static inline float ld(const ort_view *v, uint64_t i) {
    if (!v->permuted) return v->x[i];
    uint64_t off = 0;
    for (uint32_t j = v->rank; j-- > 0;) {
        off += (i % v->dims[j]) * v->st[j];
        i /= v->dims[j];
    }
    return v->x[off];
}

/* ORT's index of output q (x's kept axes in T's order) */
static uint64_t ort_output_index(const ort_view *v, const hfx_tensor *xt, uint32_t perm, uint64_t q) {
    if (!perm) return q;
    uint64_t digit[HFX_MAX_RANK] = {0}, qt = 0;
    for (uint32_t k = xt->rank; k-- > 0;) {
        uint32_t j = (perm >> (4 * k)) & 15u;
        if ((v->mask >> j) & 1u) continue;
        digit[j] = q % xt->dims[k];
        q /= xt->dims[k];
    }
    for (uint32_t j = 0; j < v->rank; j++)
        if (!((v->mask >> j) & 1u)) qt = qt * v->dims[j] + digit[j];
    return qt;
}

typedef struct ort_shape {
    uint64_t d[3];
    uint32_t n, reduced; /* reduced: bit i set when merged axis i is reduced */
} ort_shape;

static bool ort_fast_shape(const ort_view *v, ort_shape *f) {
    f->n = 0;
    f->reduced = 0;
    for (uint32_t i = 0; i < v->rank; i++) {
        if (v->dims[i] == 1) continue;
        uint32_t red = (v->mask >> i) & 1u;
        if (f->n && ((f->reduced >> (f->n - 1)) & 1u) == red) {
            f->d[f->n - 1] *= v->dims[i];
            continue;
        }
        if (f->n == 3) return false; /* RKRK and longer: ORT's generic loop (ort_generic_sum) */
        f->d[f->n] = v->dims[i];
        f->reduced |= red << f->n++;
    }
    return f->n > 0 && f->reduced != 0;
}

/* Eigen's sum of the n elements from b as ORT's build computes it (4-float SSE packets): the elements before
 * the first 16-byte boundary (b: the run's offset in the 64-byte aligned tensor) and after the last whole packet
 * are added one by one after the packets; the packets summed in 2 accumulators, 8 elements per step, then one
 * more packet, reduced (0 + 2) + (1 + 3). Shorter than a packet: in order. */
static float eigen_sum(const ort_view *v, uint64_t b, uint64_t n) {
    uint64_t start = (4 - b % 4) % 4 < n ? (4 - b % 4) % 4 : n;
    uint64_t end = start + (n - start) / 4 * 4, end2 = start + (n - start) / 8 * 8;
    float s = ld(v, b);
    if (end == start) {
        for (uint64_t i = 1; i < n; i++) s += ld(v, b + i);
        return s;
    }
    float p0[4], p1[4];
    for (uint32_t j = 0; j < 4; j++) p0[j] = ld(v, b + start + j);
    if (end - start > 4) {
        for (uint32_t j = 0; j < 4; j++) p1[j] = ld(v, b + start + 4 + j);
        for (uint64_t i = start + 8; i < end2; i += 8)
            for (uint32_t j = 0; j < 4; j++) {
                p0[j] += ld(v, b + i + j);
                p1[j] += ld(v, b + i + 4 + j);
            }
        for (uint32_t j = 0; j < 4; j++) p0[j] += p1[j];
        if (end > end2)
            for (uint32_t j = 0; j < 4; j++) p0[j] += ld(v, b + end2 + j);
    }
    s = (p0[0] + p0[2]) + (p0[1] + p0[3]);
    for (uint64_t i = 0; i < start; i++) s += ld(v, b + i);
    for (uint64_t i = end; i < n; i++) s += ld(v, b + i);
    return s;
}

/* Column b of rows r (N apart) summed as ORT's KRK path does (a MatMul of ones by the block: MLAS's
 * SgemmKernelM1Avx, hfx_sgemv_mlas with x = 1): groups of 4 rows summed in order, each added to the
 * running sum, then 2, then 1. */
static float m1_column_sum(const ort_view *v, uint64_t b, uint64_t rows, uint64_t N) {
    float y = 0.0f;
    uint64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        y = (((ld(v, b + r * N) + ld(v, b + (r + 1) * N)) + ld(v, b + (r + 2) * N)) + ld(v, b + (r + 3) * N)) + y;
    if (r + 2 <= rows) {
        y = (ld(v, b + r * N) + ld(v, b + (r + 1) * N)) + y;
        r += 2;
    }
    if (r < rows) y = ld(v, b + r * N) + y;
    return y;
}

/* ORT's generic loop (NoTransposeReduce1Loop): output q's elements from 0 in the row-major order of T's reduced
 * axes, one float add each */
static float ort_generic_sum(const ort_view *v, uint64_t q, uint64_t count) {
    float s = 0.0f;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t off = 0, kr = k, qr = q;
        for (uint32_t j = v->rank; j-- > 0;) {
            uint64_t *from = (v->mask >> j) & 1u ? &kr : &qr;
            off += (*from % v->dims[j]) * v->st[j];
            *from /= v->dims[j];
        }
        s += v->x[off];
    }
    return s;
}

/* Output q's sum as ORT computes it, for the fast shape f. */
static float ort_sum(const ort_view *v, const ort_shape *f, uint64_t q) {
    const uint64_t *d = f->d;
    switch (f->n * 8 + f->reduced) {
    case 1 * 8 + 1: /* R */
        return eigen_sum(v, 0, d[0]);
    case 2 * 8 + 2: /* KR */
        return eigen_sum(v, q * d[1], d[1]);
    case 2 * 8 + 1: { /* RK: rows added to the first in order */
        float s = ld(v, q);
        for (uint64_t r = 1; r < d[0]; r++) s += ld(v, r * d[1] + q);
        return s;
    }
    case 3 * 8 + 2: /* KRK */
        return m1_column_sum(v, (q / d[2]) * d[1] * d[2] + q % d[2], d[1], d[2]);
    default: { /* RKR: each block's Eigen sum added in order */
        float s = 0.0f;
        for (uint64_t i = 0; i < d[0]; i++) s += eigen_sum(v, (i * d[1] + q) * d[2], d[2]);
        return s;
    }
    }
}

/* Outputs [b, e) of a REDUCE_SUM / REDUCE_MEAN (`mean`) over `count` elements each, as ORT computes them */
static void ort_reduce(const hfx_kernel_args *a, uint64_t count, bool mean, uint64_t b, uint64_t e) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]];
    uint32_t perm = (uint32_t)op->params[HFX_P_REDUCE_ORT_PERM];
    ort_view v;
    ort_view_init(&v, a->in[0], xt, (uint32_t)op->params[HFX_P_REDUCE_AXES_MASK], perm);
    ort_shape f;
    bool fast = ort_fast_shape(&v, &f);
    float *o = a->out[0];
    for (uint64_t q = b; q < e; q++) {
        uint64_t qt = ort_output_index(&v, xt, perm, q);
        float s = fast ? ort_sum(&v, &f, qt) : ort_generic_sum(&v, qt, count);
        o[q] = mean ? s / (float)count : s;
    }
}
#endif

HFX_VECTOR_KERNEL
void hfx_run_reduce(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]];
    uint32_t mask = (uint32_t)op->params[HFX_P_REDUCE_AXES_MASK];
    const float *x = a->in[0];
    float *o = a->out[0];
    uint64_t st[HFX_MAX_RANK];
    hfx_dense_strides(xt, st);
    uint32_t kept[HFX_MAX_RANK], red[HFX_MAX_RANK], nk = 0, nr = 0;
    uint64_t rcount = 1;
    for (uint32_t i = 0; i < xt->rank; i++) {
        if (mask & (1u << i)) {
            red[nr++] = i;
            rcount *= xt->dims[i];
        } else {
            kept[nk++] = i;
        }
    }
    /* trailing contiguous reduction: reduced axes are exactly the last nr axes */
    bool trailing = nr > 0 && red[0] == xt->rank - nr;
    reduce_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(pl.outputs, pl.outputs_per_item, item, &b, &e);
    bool extreme = op->opcode == HFX_OP_REDUCE_MAX || op->opcode == HFX_OP_REDUCE_MIN;
    if (rcount == 0) { /* over no element (x may be NULL): 0, ReduceMean too; -inf / +inf (as ONNX Runtime) */
        float none = op->opcode == HFX_OP_REDUCE_MAX ? -__builtin_inff() : extreme ? __builtin_inff() : 0.0f;
        for (uint64_t q = b; q < e; q++) o[q] = none;
        return;
    }
#if !defined(__hexagon__)
    /* Hexagon builds compile none of this: with it, clang-19's v67 code of the strided loop below faulted
     * under qemu (test_scheduler_coop's ReduceSum, a load out of x; cause not found) */
    if (!extreme && op->sum_order != HFX_SUM_HEXAGON) { /* ORT's bits, wherever the pair's output goes */
        ort_reduce(a, rcount, op->opcode == HFX_OP_REDUCE_MEAN, b, e);
        return;
    }
#endif
    for (uint64_t q = b; q < e; q++) {
        uint64_t rem = q, base = 0;
        for (uint32_t k = nk; k-- > 0;) {
            base += (rem % xt->dims[kept[k]]) * st[kept[k]];
            rem /= xt->dims[kept[k]];
        }
        if (extreme) {
            o[q] = strided_extreme(x + base, xt->dims, st, red, nr, op->opcode == HFX_OP_REDUCE_MAX);
            continue;
        }
        double sum = trailing ? hfx_sum(x + base, rcount, 0.0f, 0) : strided_sum(x + base, xt->dims, st, red, nr);
        o[q] = op->opcode == HFX_OP_REDUCE_MEAN ? (float)(sum / (double)rcount) : (float)sum;
    }
}

/* ---- ArgMax / ArgMin ---------------------------------------------------------------------------------------------
 * The i64 index along one axis as ONNX Runtime's CPU kernel finds it (reduction_ops.h, ReduceAggregatorArgMax and
 * its LastIndex twin): the row's first element, then each element that compares above it (>; >= for
 * select_last_index), or below it for ArgMin. So of ties the first (the last) index wins; a NaN at the row's index 0
 * gives 0, a NaN elsewhere never compares and is passed over. */

typedef struct arg_plan {
    uint64_t outputs, outputs_per_item, len, inner; /* len: the axis' length; inner: elements per step along it */
} arg_plan;

hfx_status hfx_validate_arg_reduce(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    if (x->dtype != HFX_DTYPE_F32 && x->dtype != HFX_DTYPE_I32 && x->dtype != HFX_DTYPE_I64)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 0), "op %u (%s): input dtype %u, expected f32, i32 or i64",
                         v->index, op->desc->label, x->dtype);
    if (y->dtype != HFX_DTYPE_I64)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0), "op %u (%s): output dtype %u, expected i64", v->index,
                         op->desc->label, y->dtype);
    uint32_t axis;
    hfx_status st = hfx_check_axis(v, op, x->rank, &axis); /* HFX_P_ARG_AXIS is HFX_P_AXIS's slot */
    if (st) return st;
    for (uint32_t k = HFX_P_ARG_KEEPDIMS; k <= HFX_P_ARG_SELECT_LAST; k++)
        if (op->params[k] != 0 && op->params[k] != 1)
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, k), "op %u (%s): param %u must be 0/1", v->index,
                             op->desc->label, k);
    uint32_t od[HFX_MAX_RANK], orank = 0;
    for (uint32_t i = 0; i < x->rank; i++)
        if (i != axis || op->params[HFX_P_ARG_KEEPDIMS]) od[orank++] = i == axis ? 1 : x->dims[i];
    if (!hfx_same_shape(y, od, orank)) return hfx_shape_err(v, "the reduction along the axis");
    return hfx_no_empty_input(v, op); /* an index over no element: ONNX Runtime fails the run */
}

hfx_status hfx_plan_arg_reduce(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]], *y = &p->tensors[op->out[0]];
    uint32_t axis = (uint32_t)op->params[HFX_P_ARG_AXIS];
    uint64_t inner = 1;
    for (uint32_t i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
    arg_plan pl = {y->numel, hfx_per_item_for(x->dims[axis], HFX_EW_CHUNK), x->dims[axis], inner};
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.outputs, pl.outputs_per_item));
}

/* The index of the winner of the `len` elements of x `step` apart: see above */
#define HFX_ARG_ROW(name, T)                                                                                     \
    static int64_t name(const T *x, uint64_t len, uint64_t step, bool max, bool last) {                          \
        T best = x[0];                                                                                           \
        int64_t arg = 0;                                                                                         \
        for (uint64_t i = 1; i < len; i++) {                                                                     \
            T v = x[i * step];                                                                                   \
            if (max ? (last ? v >= best : v > best) : (last ? v <= best : v < best)) best = v, arg = (int64_t)i; \
        }                                                                                                        \
        return arg;                                                                                              \
    }
HFX_ARG_ROW(arg_f32, float)
HFX_ARG_ROW(arg_i32, int32_t)
HFX_ARG_ROW(arg_i64, int64_t)
#undef HFX_ARG_ROW

HFX_VECTOR_KERNEL
void hfx_run_arg_reduce(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    arg_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(pl.outputs, pl.outputs_per_item, item, &b, &e);
    bool max = op->opcode == HFX_OP_ARGMAX, last = op->params[HFX_P_ARG_SELECT_LAST] != 0;
    uint32_t dtype = a->prog->tensors[op->in[0]].dtype;
    int64_t *o = a->out[0];
    for (uint64_t q = b; q < e; q++) {
        uint64_t at = q / pl.inner * pl.len * pl.inner + q % pl.inner;
        if (dtype == HFX_DTYPE_F32) o[q] = arg_f32((const float *)a->in[0] + at, pl.len, pl.inner, max, last);
        else if (dtype == HFX_DTYPE_I32) o[q] = arg_i32((const int32_t *)a->in[0] + at, pl.len, pl.inner, max, last);
        else o[q] = arg_i64((const int64_t *)a->in[0] + at, pl.len, pl.inner, max, last);
    }
}
