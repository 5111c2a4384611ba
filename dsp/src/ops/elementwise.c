/* elementwise.c - Add/Sub/Mul/Div/Max/Min and Compare with numpy broadcasting. An item is a
 * chunk of output elements. Max and Min propagate a NaN of either input. Add, Sub, Mul, Max and Min also
 * run on i32 or i64 (X, Y and the output of one type), wrapping as ONNX Runtime's integer ops
 * (dsp/ref/ref_eltwise_int.c): the arithmetic is done in the unsigned type. Div gives the quotient or a
 * remainder (ONNX Mod, enum hfx_div_mode) of f32, i32 or i64, C's fmod of f32 exact in integers (the
 * freestanding Hexagon builds have no libm). Max and Min of bools
 * are Or and And. Compare gives bools (0 or 1) from f32, i32, i64 or bool X and Y of one type
 * (a NaN compares false, but not-equal, as in C); a bool byte is read as true when it is not 0. Where picks X's or
 * Y's element (any dtype, its bytes) by a bool condition, the three broadcast; a float X of -0 picked
 * gives +0, as ONNX Runtime's Where (it merges the pick of X, 0 elsewhere, with Y's by x != 0). */
#include "kernels.h"
#include "vmath.h" /* hfx_f32_of, hfx_u32_of */

static void run_f32(uint16_t opc, const float *x, uint64_t sx, const float *y, uint64_t sy, float *o, uint64_t n) {
#define LOOP(EXPR)                                    \
    do {                                              \
        if (sx == 1 && sy == 1)                       \
            for (uint64_t i = 0; i < n; i++) {        \
                float a_ = x[i], b_ = y[i];           \
                o[i] = EXPR;                          \
            }                                         \
        else if (sx == 1 && sy == 0)                  \
            for (uint64_t i = 0; i < n; i++) {        \
                float a_ = x[i], b_ = y[0];           \
                o[i] = EXPR;                          \
            }                                         \
        else if (sx == 0 && sy == 1)                  \
            for (uint64_t i = 0; i < n; i++) {        \
                float a_ = x[0], b_ = y[i];           \
                o[i] = EXPR;                          \
            }                                         \
        else                                          \
            for (uint64_t i = 0; i < n; i++) {        \
                float a_ = x[i * sx], b_ = y[i * sy]; \
                o[i] = EXPR;                          \
            }                                         \
    } while (0)
    switch (opc) {
    case HFX_OP_ADD: LOOP(a_ + b_); break;
    case HFX_OP_SUB: LOOP(a_ - b_); break;
    case HFX_OP_MUL: LOOP(a_ * b_); break;
    case HFX_OP_DIV: LOOP(a_ / b_); break;
    case HFX_OP_MAX: LOOP(a_ > b_ || a_ != a_ ? a_ : b_); break;
    case HFX_OP_MIN: LOOP(a_ < b_ || a_ != a_ ? a_ : b_); break;
    }
#undef LOOP
}

/* ADD, SUB, MUL of signed integers of type T, wrapping: in U, the unsigned type of T's width; MAX, MIN */
#define HFX_INT_BINARY(name, T, U)                                                                            \
    static void name(uint16_t opc, const T *x, uint64_t sx, const T *y, uint64_t sy, T *o, uint64_t n) {       \
        for (uint64_t i = 0; i < n; i++) {                                                                    \
            T s_ = x[i * sx], t_ = y[i * sy];                                                                 \
            U a_ = (U)s_, b_ = (U)t_;                                                                         \
            o[i] = opc == HFX_OP_MAX   ? (s_ > t_ ? s_ : t_)                                                  \
                   : opc == HFX_OP_MIN ? (s_ < t_ ? s_ : t_)                                                  \
                                       : (T)(opc == HFX_OP_ADD   ? a_ + b_                                    \
                                             : opc == HFX_OP_SUB ? a_ - b_                                    \
                                                                 : (U)(a_ * b_));                             \
        }                                                                                                     \
    }
HFX_INT_BINARY(run_i32, int32_t, uint32_t)
HFX_INT_BINARY(run_i64, int64_t, uint64_t)
#undef HFX_INT_BINARY

/* DIV of signed integers of type T: the quotient toward zero or a remainder (enum hfx_div_mode); y = 0 gives 0,
 * y = -1 the wrapped negation (remainders 0) */
#define HFX_INT_DIV(name, T, U)                                                                               \
    static T name##_one(int32_t mode, T x, T y) {                                                             \
        if (y == 0) return 0;                                                                                 \
        if (y == -1) return mode == HFX_DIV_QUOTIENT ? (T)(0 - (U)x) : 0;                                     \
        if (mode == HFX_DIV_QUOTIENT) return x / y;                                                           \
        T r = x % y;                                                                                          \
        return mode == HFX_DIV_MOD && r != 0 && (r < 0) != (y < 0) ? r + y : r;                               \
    }                                                                                                         \
    static void name(int32_t mode, const T *x, uint64_t sx, const T *y, uint64_t sy, T *o, uint64_t n) {      \
        for (uint64_t i = 0; i < n; i++) o[i] = name##_one(mode, x[i * sx], y[i * sy]);                      \
    }
HFX_INT_DIV(div_i32, int32_t, uint32_t)
HFX_INT_DIV(div_i64, int64_t, uint64_t)
#undef HFX_INT_DIV

/* The NaN of fmod(x, y) when x or y is one, as ONNX Runtime's x86-64 build gives it (x87's rule: each made quiet;
 * of two, the larger significand, on a tie the positive one) */
static float fmod_nan(uint32_t ux, uint32_t uy) {
    uint32_t qx = ux | 0x400000u, qy = uy | 0x400000u, sx = qx & 0x7fffffu, sy = qy & 0x7fffffu;
    bool nx = (ux & 0x7fffffffu) > 0x7f800000u, ny = (uy & 0x7fffffffu) > 0x7f800000u;
    bool pick_x = nx && (!ny || sx > sy || (sx == sy && !(qx >> 31)));
    return hfx_f32_of(pick_x ? qx : qy);
}

/* C fmodf(x, y), exact: x's magnitude bits reduced modulo y's in integers, the dividend's sign; y = 0 or x = +-inf
 * give the default NaN, a NaN operand fmod_nan's. */
static float fmod_f32(float x, float y) {
    uint32_t ux = hfx_u32_of(x), uy = hfx_u32_of(y), ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
    if (ax > 0x7f800000u || ay > 0x7f800000u) return fmod_nan(ux, uy);
    if (ay == 0 || ax == 0x7f800000u) return hfx_f32_of(0xffc00000u);
    if (ax < ay) return x; /* y = +-inf too */
    /* |x| = mx 2^(ex - 150), |y| = my 2^(ey - 150), ex >= ey (a subnormal's exponent field 0 counts as 1) */
    int32_t ex = (int32_t)(ax >> 23), ey = (int32_t)(ay >> 23);
    uint32_t mx = ex ? (ax & 0x7fffffu) | 0x800000u : ax, my = ey ? (ay & 0x7fffffu) | 0x800000u : ay;
    ex += !ex, ey += !ey;
    uint64_t r = mx % my;
    for (int32_t k = ex - ey; k > 0; k -= 32) /* r 2^k mod my, 32 bits at a time (r < 2^24) */
        r = (r << (k < 32 ? k : 32)) % my;
    uint32_t m = (uint32_t)r, sign = ux & 0x80000000u;
    if (m == 0) return hfx_f32_of(sign);
    while (m < 0x800000u && ey > 1) m <<= 1, ey--; /* normalized, or subnormal at the least exponent */
    return hfx_f32_of(sign | (((uint32_t)(ey - 1) << 23) + m));
}

/* f32 DIV by `mode`: the quotient (run_f32's) or C's fmod */
static void div_f32(int32_t mode, const float *x, uint64_t sx, const float *y, uint64_t sy, float *o, uint64_t n) {
    if (mode == HFX_DIV_QUOTIENT) run_f32(HFX_OP_DIV, x, sx, y, sy, o, n);
    else
        for (uint64_t i = 0; i < n; i++) o[i] = fmod_f32(x[i * sx], y[i * sy]);
}

/* COMPARE of X and Y of type T (bools read as 0 or 1) */
#define HFX_COMPARE(name, T, READ)                                                                       \
    static void name(int32_t mode, const T *x, uint64_t sx, const T *y, uint64_t sy, uint8_t *o, uint64_t n) { \
        for (uint64_t i = 0; i < n; i++) {                                                               \
            T a_ = READ(x[i * sx]), b_ = READ(y[i * sy]);                                                \
            o[i] = mode == HFX_COMPARE_EQUAL  ? a_ == b_                                                 \
                   : mode == HFX_COMPARE_LESS ? a_ < b_                                                  \
                   : mode == HFX_COMPARE_GREATER ? a_ > b_                                               \
                   : mode == HFX_COMPARE_LESS_EQUAL ? a_ <= b_                                           \
                   : mode == HFX_COMPARE_GREATER_EQUAL ? a_ >= b_                                        \
                                                       : a_ != b_;                                       \
        }                                                                                                \
    }
#define HFX_AS_IS(v) (v)
#define HFX_TRUTH(v) ((uint8_t)((v) != 0))
HFX_COMPARE(compare_f32, float, HFX_AS_IS)
HFX_COMPARE(compare_i32, int32_t, HFX_AS_IS)
HFX_COMPARE(compare_i64, int64_t, HFX_AS_IS)
HFX_COMPARE(compare_bool, uint8_t, HFX_TRUTH)
#undef HFX_COMPARE
#undef HFX_AS_IS

/* MAX (Or) and MIN (And) of bools */
static void run_bool(uint16_t opc, const uint8_t *x, uint64_t sx, const uint8_t *y, uint64_t sy, uint8_t *o,
                     uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint8_t a_ = HFX_TRUTH(x[i * sx]), b_ = HFX_TRUTH(y[i * sy]);
        o[i] = opc == HFX_OP_MAX ? (a_ | b_) : (a_ & b_);
    }
}
#undef HFX_TRUTH

/* COMPARE: n output elements from element offsets ox of X, oy of Y (of `dtype`), oo of the output */
static void run_compare(int32_t mode, uint32_t dtype, const hfx_kernel_args *a, uint64_t ox, uint64_t sx, uint64_t oy,
                        uint64_t sy, uint64_t oo, uint64_t n) {
    uint8_t *o = (uint8_t *)a->out[0] + oo;
    if (dtype == HFX_DTYPE_F32)
        compare_f32(mode, (const float *)a->in[0] + ox, sx, (const float *)a->in[1] + oy, sy, o, n);
    else if (dtype == HFX_DTYPE_I32)
        compare_i32(mode, (const int32_t *)a->in[0] + ox, sx, (const int32_t *)a->in[1] + oy, sy, o, n);
    else if (dtype == HFX_DTYPE_I64)
        compare_i64(mode, (const int64_t *)a->in[0] + ox, sx, (const int64_t *)a->in[1] + oy, sy, o, n);
    else
        compare_bool(mode, (const uint8_t *)a->in[0] + ox, sx, (const uint8_t *)a->in[1] + oy, sy, o, n);
}

/* DIV by `mode`: n output elements from element offsets ox of X, oy of Y (of `dtype`), oo of the output */
static void run_div(int32_t mode, uint32_t dtype, const hfx_kernel_args *a, uint64_t ox, uint64_t sx, uint64_t oy,
                    uint64_t sy, uint64_t oo, uint64_t n) {
    if (dtype == HFX_DTYPE_I32)
        div_i32(mode, (const int32_t *)a->in[0] + ox, sx, (const int32_t *)a->in[1] + oy, sy, (int32_t *)a->out[0] + oo,
                n);
    else if (dtype == HFX_DTYPE_I64)
        div_i64(mode, (const int64_t *)a->in[0] + ox, sx, (const int64_t *)a->in[1] + oy, sy, (int64_t *)a->out[0] + oo,
                n);
    else
        div_f32(mode, (const float *)a->in[0] + ox, sx, (const float *)a->in[1] + oy, sy, (float *)a->out[0] + oo, n);
}

/* n output elements from element offsets ox of X (stride sx), oy of Y (sy), oo of the output, of `dtype`
 * (COMPARE: of X and Y) */
static void run(const hfx_op *op, uint32_t dtype, const hfx_kernel_args *a, uint64_t ox, uint64_t sx, uint64_t oy,
                uint64_t sy, uint64_t oo, uint64_t n) {
    uint16_t opc = op->opcode;
    if (opc == HFX_OP_COMPARE)
        run_compare(op->params[HFX_P_COMPARE_MODE], dtype, a, ox, sx, oy, sy, oo, n);
    else if (opc == HFX_OP_DIV)
        run_div(op->params[HFX_P_DIV_MODE], dtype, a, ox, sx, oy, sy, oo, n);
    else if (dtype == HFX_DTYPE_BOOL)
        run_bool(opc, (const uint8_t *)a->in[0] + ox, sx, (const uint8_t *)a->in[1] + oy, sy, (uint8_t *)a->out[0] + oo,
                 n);
    else if (dtype == HFX_DTYPE_I32)
        run_i32(opc, (const int32_t *)a->in[0] + ox, sx, (const int32_t *)a->in[1] + oy, sy, (int32_t *)a->out[0] + oo,
                n);
    else if (dtype == HFX_DTYPE_I64)
        run_i64(opc, (const int64_t *)a->in[0] + ox, sx, (const int64_t *)a->in[1] + oy, sy, (int64_t *)a->out[0] + oo,
                n);
    else
        run_f32(opc, (const float *)a->in[0] + ox, sx, (const float *)a->in[1] + oy, sy, (float *)a->out[0] + oo, n);
}

/* the dtypes X and Y may have: ADD, SUB, MUL f32, i32 or i64; DIV by its mode (enum hfx_div_mode); MAX, MIN those
 * or bool; COMPARE any of those */
static bool operand_dtype(const hfx_op *op, uint32_t d) {
    uint16_t opc = op->opcode;
    bool ints = d == HFX_DTYPE_I32 || d == HFX_DTYPE_I64;
    if (opc == HFX_OP_MAX || opc == HFX_OP_MIN) return d == HFX_DTYPE_F32 || d == HFX_DTYPE_BOOL || ints;
    if (opc == HFX_OP_DIV && op->params[HFX_P_DIV_MODE] == HFX_DIV_MOD) return ints;
    if (opc == HFX_OP_DIV && op->params[HFX_P_DIV_MODE] == HFX_DIV_FMOD)
        return d == HFX_DTYPE_F32 || d == HFX_DTYPE_I32; /* ORT's i64 fmod goes through double */
    return d == HFX_DTYPE_F32 || ints || (opc == HFX_OP_COMPARE && d == HFX_DTYPE_BOOL);
}

/* COMPARE's and DIV's mode param in range */
static hfx_status validate_mode(hfx_vctx *v, const hfx_op *op) {
    uint32_t mode = (uint32_t)op->params[0]; /* HFX_P_COMPARE_MODE, HFX_P_DIV_MODE */
    uint32_t last = op->opcode == HFX_OP_COMPARE ? (uint32_t)HFX_COMPARE_NOT_EQUAL
                    : op->opcode == HFX_OP_DIV   ? (uint32_t)HFX_DIV_FMOD
                                                 : 0u;
    if (mode > last)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, 0), "op %u (%s): unknown mode %u", v->index,
                         op->desc->label, mode);
    return HFX_OK;
}

/* typed rows: X and Y of one dtype the op takes; the output of theirs (COMPARE: bool, and a mode) */
static hfx_status validate_dtypes(hfx_vctx *v, const hfx_op *op) {
    const hfx_tensor *t = v->p->tensors;
    uint32_t d = t[op->in[0]].dtype, od = t[op->out[0]].dtype;
    hfx_status st = validate_mode(v, op);
    if (st) return st;
    if (!operand_dtype(op, d))
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 0), "op %u (%s): input dtype %u is not one it takes", v->index,
                         op->desc->label, d);
    if (t[op->in[1]].dtype != d)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 1), "op %u (%s): input 1 dtype %u, expected input 0's %u",
                         v->index, op->desc->label, t[op->in[1]].dtype, d);
    uint32_t want = op->opcode == HFX_OP_COMPARE ? (uint32_t)HFX_DTYPE_BOOL : d;
    if (od != want)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0), "op %u (%s): output dtype %u, expected %u", v->index,
                         op->desc->label, od, want);
    return HFX_OK;
}

hfx_status hfx_validate_binary(hfx_vctx *v, hfx_op *op) {
    /* QADD, QMUL: shapes only, their dtypes checked */
    bool own = op->desc->typed && op->opcode != HFX_OP_QADD && op->opcode != HFX_OP_QMUL;
    hfx_status st = own ? validate_dtypes(v, op) : HFX_OK;
    if (st) return st;
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *b = &v->p->tensors[op->in[1]];
    uint32_t od[HFX_MAX_RANK], orank = 0;
    if (!hfx_broadcast2(x->dims, x->rank, b->dims, b->rank, od, &orank))
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u: inputs do not broadcast", v->index);
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, orank)) return hfx_shape_err(v, "the broadcast of the inputs");
    return HFX_OK;
}

hfx_status hfx_plan_binary(const hfx_program *p, hfx_op *op) {
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_EW_CHUNK);
}

HFX_VECTOR_KERNEL
void hfx_run_binary(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_program *p = a->prog;
    const hfx_tensor *xt = &p->tensors[op->in[0]], *yt = &p->tensors[op->in[1]];
    const hfx_tensor *ot = &p->tensors[op->out[0]];
    uint32_t dt = xt->dtype;
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(ot->numel, pl.elems_per_item, item, &b, &e);
    if (xt->numel == ot->numel && yt->numel == ot->numel) {
        run(op, dt, a, b, 1, b, 1, b, e - b);
        return;
    }
    if (yt->numel == 1 && xt->numel == ot->numel) {
        run(op, dt, a, b, 1, 0, 0, b, e - b);
        return;
    }
    if (xt->numel == 1 && yt->numel == ot->numel) {
        run(op, dt, a, 0, 0, b, 1, b, e - b);
        return;
    }
    uint32_t r = ot->rank;
    uint64_t sx[HFX_MAX_RANK], sy[HFX_MAX_RANK], idx[HFX_MAX_RANK];
    hfx_bcast_strides(xt, r, sx);
    hfx_bcast_strides(yt, r, sy);
    uint64_t rem = b, ox = 0, oy = 0;
    for (uint32_t i = r; i-- > 0;) {
        idx[i] = rem % ot->dims[i];
        rem /= ot->dims[i];
        ox += idx[i] * sx[i];
        oy += idx[i] * sy[i];
    }
    uint64_t last = ot->dims[r - 1];
    uint64_t pos = b;
    while (pos < e) {
        uint64_t run_len = last - idx[r - 1];
        if (run_len > e - pos) run_len = e - pos;
        run(op, dt, a, ox, sx[r - 1], oy, sy[r - 1], pos, run_len);
        pos += run_len;
        /* advance the multi-index by run_len (which ends a row or the chunk) */
        idx[r - 1] += run_len;
        ox += run_len * sx[r - 1];
        oy += run_len * sy[r - 1];
        for (uint32_t i = r - 1; i > 0 && idx[i] == ot->dims[i]; i--) {
            ox -= idx[i] * sx[i];
            oy -= idx[i] * sy[i];
            idx[i] = 0;
            idx[i - 1]++;
            ox += sx[i - 1];
            oy += sy[i - 1];
        }
    }
}

/* WHERE: the condition bool, X, Y and the output of one dtype; the three broadcast (numpy) */
hfx_status hfx_validate_where(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors, *c = &t[op->in[0]], *x = &t[op->in[1]], *y = &t[op->in[2]];
    if (c->dtype != HFX_DTYPE_BOOL)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 0), "op %u (Where): condition dtype %u, expected bool",
                         v->index, c->dtype);
    if (y->dtype != x->dtype || t[op->out[0]].dtype != x->dtype)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_OUT_OFF(v, 0), "op %u (Where): X, Y and the output must share a dtype",
                         v->index);
    uint32_t xy[HFX_MAX_RANK], od[HFX_MAX_RANK], rxy = 0, ro = 0;
    if (!hfx_broadcast2(x->dims, x->rank, y->dims, y->rank, xy, &rxy) ||
        !hfx_broadcast2(c->dims, c->rank, xy, rxy, od, &ro))
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 2), "op %u: inputs do not broadcast", v->index);
    if (!hfx_same_shape(&t[op->out[0]], od, ro)) return hfx_shape_err(v, "the broadcast of the inputs");
    return HFX_OK;
}

hfx_status hfx_plan_where(const hfx_program *p, hfx_op *op) {
    return hfx_plan_chunks(op, p->tensors[op->out[0]].numel, HFX_EW_CHUNK);
}

/* *p, an f32 or f16 of `dtype`, is +0 or -0 */
static bool zero_float(const uint8_t *p, uint32_t dtype) {
    if (dtype == HFX_DTYPE_F16) return ((p[0] | (p[1] << 8)) & 0x7fff) == 0;
    uint32_t u;
    memcpy(&u, p, 4);
    return (u & 0x7fffffffu) == 0;
}

/* Output elements [b, e): a multi-index walked one element at a time, each input's offset by its broadcast
 * strides; the element's bytes copied from X or Y */
HFX_VECTOR_KERNEL
void hfx_run_where(const hfx_kernel_args *a, uint32_t item) {
    const hfx_program *p = a->prog;
    const hfx_tensor *ot = &p->tensors[a->op->out[0]];
    size_t es = hfx_dtype_size(ot->dtype);
    hfx_chunk_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    uint64_t b, e;
    hfx_plan_range(ot->numel, pl.elems_per_item, item, &b, &e);
    uint32_t r = ot->rank;
    uint64_t st[3][HFX_MAX_RANK], off[3] = {0, 0, 0}, idx[HFX_MAX_RANK], rem = b;
    for (int k = 0; k < 3; k++) hfx_bcast_strides(&p->tensors[a->op->in[k]], r, st[k]);
    for (uint32_t i = r; i-- > 0;) {
        idx[i] = rem % ot->dims[i];
        rem /= ot->dims[i];
        for (int k = 0; k < 3; k++) off[k] += idx[i] * st[k][i];
    }
    const uint8_t *cond = a->in[0], *x = a->in[1], *y = a->in[2];
    uint8_t *o = a->out[0];
    static const uint8_t zeros[8] = {0};
    uint32_t dt = ot->dtype;
    for (uint64_t pos = b; pos < e; pos++) {
        const uint8_t *src = cond[off[0]] ? x + off[1] * es : y + off[2] * es;
        if (cond[off[0]] && (dt == HFX_DTYPE_F32 || dt == HFX_DTYPE_F16) && zero_float(src, dt)) src = zeros;
        if (es == 4) memcpy(o + pos * 4, src, 4); /* a move, not a call */
        else if (es == 1) o[pos] = *src;
        else memcpy(o + pos * es, src, es);
        for (uint32_t i = r; i-- > 0;) { /* the next multi-index */
            for (int k = 0; k < 3; k++) off[k] += st[k][i];
            if (++idx[i] < ot->dims[i]) break;
            for (int k = 0; k < 3; k++) off[k] -= idx[i] * st[k][i];
            idx[i] = 0;
        }
    }
}
