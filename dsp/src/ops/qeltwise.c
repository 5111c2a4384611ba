/* qeltwise.c - the integer elementwise ops of QDQ groups, exactly as dsp/ref/ref_qeltwise.h
 * defines them: QADD and QMUL (u8/i8 with numpy broadcasting, requantised to u8/i8) and QLUT (a
 * 256-entry table on u8/i8). Portable C on the host; on Hexagon builds (HFX_HVX) QLUT runs vlut32
 * (hvx/hvx_lut_i8.c), and QADD/QMUL 128 outputs of a span of the innermost axis at a time in fixed
 * point (hvx/hvx_qeltwise.c), a block near a rounding tie by the reference. An item is a chunk of
 * output elements. */
#include "../../ref/ref_qeltwise.h"
#include "kernels.h"

#ifdef HFX_HVX
#include "../../hvx/hvx_kernels.h"
#include "../../hvx/hvx_qeltwise.h"
#endif

static bool narrow_int(uint32_t d) { return d == HFX_DTYPE_U8 || d == HFX_DTYPE_I8; }
static int32_t type_min(uint32_t d) { return d == HFX_DTYPE_U8 ? 0 : INT8_MIN; }
static int32_t type_max(uint32_t d) { return d == HFX_DTYPE_U8 ? UINT8_MAX : INT8_MAX; }

static hfx_status dtype_fail(hfx_vctx *v, const hfx_op *op, uint32_t slot, bool output, const char *want) {
    uint32_t id = output ? op->out[0] : op->in[slot];
    return hfx_vfail(v, HFX_ERR_DTYPE, output ? HFX_OUT_OFF(v, 0) : HFX_IN_OFF(v, slot),
                     "op %u (%s): tensor %u dtype %u, expected %s", v->index, op->desc->label, id,
                     v->p->tensors[id].dtype, want);
}

static hfx_status param_fail(hfx_vctx *v, const hfx_op *op, uint32_t slot, const char *why) {
    return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, slot), "op %u (%s): param %u %s", v->index, op->desc->label,
                     slot, why);
}

static bool in_range(int32_t x, uint32_t dtype) { return x >= type_min(dtype) && x <= type_max(dtype); }

static hfx_status validate_qbinary_params(hfx_vctx *v, const hfx_op *op) {
    const int32_t *p = op->params;
    uint32_t ta = v->p->tensors[op->in[0]].dtype, ty = v->p->tensors[op->out[0]].dtype;
    if (!hfx_finite_f32(p[HFX_P_QBIN_RATIO_A])) return param_fail(v, op, HFX_P_QBIN_RATIO_A, "must be finite");
    if (!hfx_finite_f32(p[HFX_P_QBIN_RATIO_B])) return param_fail(v, op, HFX_P_QBIN_RATIO_B, "must be finite");
    if (!in_range(p[HFX_P_QBIN_ZERO_A], ta)) return param_fail(v, op, HFX_P_QBIN_ZERO_A, "is outside A's type");
    if (!in_range(p[HFX_P_QBIN_ZERO_B], ta)) return param_fail(v, op, HFX_P_QBIN_ZERO_B, "is outside B's type");
    if (!in_range(p[HFX_P_QBIN_ZERO_Y], ty)) return param_fail(v, op, HFX_P_QBIN_ZERO_Y, "is outside Y's type");
    if (!in_range(p[HFX_P_QBIN_LO], ty) || !in_range(p[HFX_P_QBIN_HI], ty) || p[HFX_P_QBIN_LO] > p[HFX_P_QBIN_HI])
        return param_fail(v, op, HFX_P_QBIN_LO, "and the next must be lo <= hi within Y's type");
    return HFX_OK;
}

hfx_status hfx_validate_qbinary(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    uint32_t ta = t[op->in[0]].dtype;
    if (!narrow_int(ta)) return dtype_fail(v, op, 0, false, "u8 or i8");
    if (t[op->in[1]].dtype != ta) return dtype_fail(v, op, 1, false, "A's");
    if (!narrow_int(t[op->out[0]].dtype)) return dtype_fail(v, op, 0, true, "u8 or i8");
    hfx_status st = validate_qbinary_params(v, op);
    return st ? st : hfx_validate_binary(v, op);
}

typedef struct qbinary_plan {
    uint64_t elems_per_item;
    uint32_t swap; /* QADD: B is the first operand (A is the scalar of ONNX Runtime's broadcast span) */
} qbinary_plan;

/* ONNX Runtime's broadcast loop hands its kernel a scalar span when one input is constant along
 * the innermost output axis longer than 1; when that input is A it swaps the operands (and an A
 * of one element is its "input 0 scalar" case). */
static uint32_t swaps_operands(const hfx_tensor *a, const hfx_tensor *b, const hfx_tensor *y) {
    uint64_t sa[HFX_MAX_RANK], sb[HFX_MAX_RANK];
    hfx_bcast_strides(a, y->rank, sa);
    hfx_bcast_strides(b, y->rank, sb);
    for (uint32_t i = y->rank; i-- > 0;)
        if (y->dims[i] > 1) return sa[i] == 0 && sb[i] != 0;
    return 1;
}

hfx_status hfx_plan_qbinary(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    qbinary_plan pl = {HFX_EW_CHUNK, 0};
    if (op->opcode == HFX_OP_QADD) pl.swap = swaps_operands(&p->tensors[op->in[0]], &p->tensors[op->in[1]], y);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(y->numel, pl.elems_per_item));
}

static inline int32_t load_narrow(const void *p, uint32_t dtype, uint64_t i) {
    return dtype == HFX_DTYPE_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

typedef struct qbinary_io {
    const void *a, *b;
    void *y;
    uint32_t tab, ty;
    float ra, rb;
    int32_t za, zb, zy, lo, hi;
    uint16_t opcode;
    uint32_t swap;
#ifdef HFX_HVX
    hvx_qbin hv;
    int hvx_ok; /* the ratios are in the HVX path's range */
#endif
} qbinary_io;

static qbinary_io qbinary_io_of(const hfx_kernel_args *a, const qbinary_plan *pl) {
    const hfx_op *op = a->op;
    const int32_t *p = op->params;
    qbinary_io io = {a->in[0], a->in[1], a->out[0], a->prog->tensors[op->in[0]].dtype,
                     a->prog->tensors[op->out[0]].dtype, hfx_f32_from_bits(p[HFX_P_QBIN_RATIO_A]),
                     hfx_f32_from_bits(p[HFX_P_QBIN_RATIO_B]), p[HFX_P_QBIN_ZERO_A], p[HFX_P_QBIN_ZERO_B],
                     p[HFX_P_QBIN_ZERO_Y], p[HFX_P_QBIN_LO], p[HFX_P_QBIN_HI], op->opcode, pl->swap
#ifdef HFX_HVX
                     , {0}, 0
#endif
    };
#ifdef HFX_HVX
    io.hvx_ok = hvx_qbin_init(&io.hv, op->opcode == HFX_OP_QMUL, io.tab == HFX_DTYPE_I8, io.ty == HFX_DTYPE_I8, io.ra,
                              io.rb, io.za, io.zb, io.zy, io.lo, io.hi);
#endif
    return io;
}

static int32_t qbinary_one(const qbinary_io *io, int32_t x, int32_t w) {
    if (io->opcode == HFX_OP_QMUL) return ref_qmul(x, w, io->ra, io->za, io->zb, io->zy, io->lo, io->hi);
    if (io->swap) return ref_qadd(w, x, io->rb, io->ra, io->zb, io->za, io->zy, io->lo, io->hi);
    return ref_qadd(x, w, io->ra, io->rb, io->za, io->zb, io->zy, io->lo, io->hi);
}

/* y[pos + k] for k in [k0, k1), A's element oa + k * as, B's ob + k * bs */
static void qbinary_scalar(const qbinary_io *io, uint64_t oa, uint64_t as, uint64_t ob, uint64_t bs, uint64_t pos,
                           uint64_t k0, uint64_t k1) {
    for (uint64_t k = k0; k < k1; k++) {
        int32_t q = qbinary_one(io, load_narrow(io->a, io->tab, oa + k * as), load_narrow(io->b, io->tab, ob + k * bs));
        if (io->ty == HFX_DTYPE_U8) ((uint8_t *)io->y)[pos + k] = (uint8_t)q;
        else ((int8_t *)io->y)[pos + k] = (int8_t)q;
    }
}

/* n outputs along the innermost axis: A and B advance by as, bs (1, or 0 when broadcast) */
static void qbinary_span(const qbinary_io *io, uint64_t oa, uint64_t as, uint64_t ob, uint64_t bs, uint64_t pos,
                         uint64_t n) {
    uint64_t k = 0;
#ifdef HFX_HVX
    /* 128 outputs a block; those near a rounding tie by the reference */
    uint8_t near_tie[128];
    for (; io->hvx_ok && k + 128 <= n; k += 128)
        if (hvx_qbin_block(&io->hv, (const uint8_t *)io->a + oa + k * as, (int)as, (const uint8_t *)io->b + ob + k * bs,
                           (int)bs, (uint8_t *)io->y + pos + k, near_tie))
            for (uint64_t j = 0; j < 128; j++)
                if (near_tie[j]) qbinary_scalar(io, oa, as, ob, bs, pos, k + j, k + j + 1);
#endif
    qbinary_scalar(io, oa, as, ob, bs, pos, k, n);
}

/* output elements [b, e), a span of the innermost axis at a time, walking the broadcast
 * multi-index of A and B */
HFX_VECTOR_KERNEL
void hfx_run_qbinary(const hfx_kernel_args *a, uint32_t item) {
    const hfx_tensor *t = a->prog->tensors, *yt = &t[a->op->out[0]];
    qbinary_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    qbinary_io io = qbinary_io_of(a, &pl);
    uint64_t b, e, sa[HFX_MAX_RANK], sb[HFX_MAX_RANK], idx[HFX_MAX_RANK], oa = 0, ob = 0;
    hfx_plan_range(yt->numel, pl.elems_per_item, item, &b, &e);
    uint32_t r = yt->rank;
    if (r == 0) {
        qbinary_span(&io, 0, 0, 0, 0, 0, e - b);
        return;
    }
    const hfx_tensor *ta = &t[a->op->in[0]], *tb = &t[a->op->in[1]];
    if ((ta->numel == yt->numel || ta->numel == 1) && (tb->numel == yt->numel || tb->numel == 1)) {
        uint64_t as = ta->numel != 1, bs = tb->numel != 1; /* no broadcast walk: one span (HVX blocks across rows) */
        qbinary_span(&io, b * as, as, b * bs, bs, b, e - b);
        return;
    }
    hfx_bcast_strides(ta, r, sa);
    hfx_bcast_strides(tb, r, sb);
    uint64_t rem = b;
    for (uint32_t i = r; i-- > 0;) {
        idx[i] = rem % yt->dims[i];
        rem /= yt->dims[i];
        oa += idx[i] * sa[i];
        ob += idx[i] * sb[i];
    }
    uint32_t last = r - 1;
    for (uint64_t pos = b; pos < e;) {
        uint64_t n = yt->dims[last] - idx[last] < e - pos ? yt->dims[last] - idx[last] : e - pos;
        qbinary_span(&io, oa, sa[last], ob, sb[last], pos, n);
        pos += n, oa += n * sa[last], ob += n * sb[last], idx[last] += n;
        for (uint32_t i = last + 1; i-- > 0 && idx[i] == yt->dims[i];) { /* carry into the outer axes */
            oa -= idx[i] * sa[i], ob -= idx[i] * sb[i], idx[i] = 0;
            if (i > 0) idx[i - 1]++, oa += sa[i - 1], ob += sb[i - 1];
        }
    }
}

/* ---- QLUT: X u8/i8, table[256] of Y's dtype ---- */

hfx_status hfx_validate_qlut(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors, *table = &t[op->in[1]];
    if (!narrow_int(t[op->in[0]].dtype)) return dtype_fail(v, op, 0, false, "u8 or i8");
    if (!narrow_int(table->dtype)) return dtype_fail(v, op, 1, false, "u8 or i8 (the table)");
    if (t[op->out[0]].dtype != table->dtype) return dtype_fail(v, op, 0, true, "the table's");
    if (table->numel != 256)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u (%s): the table must have 256 elements",
                         v->index, op->desc->label);
    return hfx_same_as_input(v, op);
}

hfx_status hfx_plan_qlut(const hfx_program *p, hfx_op *op) {
#ifdef HFX_HVX
    op->plan.ws_bytes = 256; /* the table prepared for vlut32 */
#endif
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_EW_CHUNK);
}

HFX_VECTOR_KERNEL
void hfx_run_qlut(const hfx_kernel_args *a, uint32_t item) {
    const hfx_tensor *t = a->prog->tensors;
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    uint64_t b, e;
    hfx_plan_range(t[a->op->out[0]].numel, pl.elems_per_item, item, &b, &e);
    const uint8_t *x = a->in[0], *table = a->in[1]; /* one byte each; the table's bytes are Y's */
    uint8_t *y = a->out[0];
    uint8_t flip = t[a->op->in[0]].dtype == HFX_DTYPE_I8 ? 0x80u : 0u; /* i8: x - (-128) is the byte ^ 0x80 */
#ifdef HFX_HVX
    hvx_lut_i8_prepare_xor(table, flip, a->ws);
    hvx_lut_i8((const int8_t *)x + b, (int8_t *)y + b, (size_t)(e - b), a->ws);
#else
    for (uint64_t i = b; i < e; i++) y[i] = table[x[i] ^ flip];
#endif
}
