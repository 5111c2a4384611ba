/*
 * program.c - task program parser and validator.
 *
 * Reads the little-endian container described in dsp/README.md, checks every
 * field, infers every op's output shape and compares it with the program's,
 * then plans the ops (plan.c) and places scratch (arena.c). All reads go
 * through rd_*() after a bounds check against the buffer size.
 */
#include <stdarg.h>

#include "core.h"
#include "platform.h"

/* ---- error formatting ------------------------------------------------------- */

static size_t put_str(char *buf, size_t cap, size_t n, const char *s) {
    while (*s && n + 1 < cap) buf[n++] = *s++;
    return n;
}

static size_t put_u64(char *buf, size_t cap, size_t n, uint64_t v, bool neg) {
    char tmp[24];
    size_t k = 0;
    do {
        tmp[k++] = (char)('0' + (char)(v % 10u));
        v /= 10u;
    } while (v && k < sizeof tmp);
    if (neg && n + 1 < cap) buf[n++] = '-';
    while (k && n + 1 < cap) buf[n++] = tmp[--k];
    return n;
}

void hfx_error_set(hfx_error *err, hfx_status st, size_t offset, const char *fmt, ...) {
    if (!err) return;
    err->status = st;
    err->byte_offset = offset > 0xffffffffu ? 0xffffffffu : (uint32_t)offset;
    char *buf = err->message;
    size_t cap = sizeof err->message, n = 0;
    va_list ap;
    va_start(ap, fmt);
    for (const char *f = fmt; *f && n + 1 < cap; f++) {
        if (*f != '%' || !f[1]) {
            buf[n++] = *f;
            continue;
        }
        f++;
        switch (*f) {
        case 'u': n = put_u64(buf, cap, n, va_arg(ap, unsigned), false); break;
        case 'U': n = put_u64(buf, cap, n, va_arg(ap, uint64_t), false); break;
        case 'd': {
            int v = va_arg(ap, int);
            n = put_u64(buf, cap, n, v < 0 ? (uint64_t)(-(int64_t)v) : (uint64_t)v, v < 0);
            break;
        }
        case 'D': {
            int64_t v = va_arg(ap, int64_t);
            uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
            n = put_u64(buf, cap, n, m, v < 0);
            break;
        }
        case 's': n = put_str(buf, cap, n, va_arg(ap, const char *)); break;
        default: buf[n++] = *f; break;
        }
    }
    va_end(ap);
    buf[n] = '\0';
}

const char *hfx_status_name(hfx_status s) {
    switch (s) {
    case HFX_OK: return "HFX_OK";
    case HFX_ERR_ARG: return "HFX_ERR_ARG";
    case HFX_ERR_NOMEM: return "HFX_ERR_NOMEM";
    case HFX_ERR_TRUNCATED: return "HFX_ERR_TRUNCATED";
    case HFX_ERR_MAGIC: return "HFX_ERR_MAGIC";
    case HFX_ERR_VERSION: return "HFX_ERR_VERSION";
    case HFX_ERR_HEADER: return "HFX_ERR_HEADER";
    case HFX_ERR_TENSOR: return "HFX_ERR_TENSOR";
    case HFX_ERR_DTYPE: return "HFX_ERR_DTYPE";
    case HFX_ERR_SIZE: return "HFX_ERR_SIZE";
    case HFX_ERR_OP: return "HFX_ERR_OP";
    case HFX_ERR_PARAM: return "HFX_ERR_PARAM";
    case HFX_ERR_SHAPE: return "HFX_ERR_SHAPE";
    case HFX_ERR_GRAPH: return "HFX_ERR_GRAPH";
    case HFX_ERR_BUDGET: return "HFX_ERR_BUDGET";
    case HFX_ERR_PLATFORM: return "HFX_ERR_PLATFORM";
    case HFX_ERR_STATE: return "HFX_ERR_STATE";
    }
    return "HFX_ERR_?";
}

size_t hfx_dtype_size(uint32_t dtype) {
    switch (dtype) {
    case HFX_DTYPE_F32: return 4;
    case HFX_DTYPE_F16: return 2;
    case HFX_DTYPE_I32: return 4;
    case HFX_DTYPE_I64: return 8;
    case HFX_DTYPE_I8: return 1;
    case HFX_DTYPE_U8: return 1;
    default: return 0;
    }
}

/* ---- little-endian reads (callers checked bounds) ---------------------------- */

static uint16_t rd_u16(const uint8_t *b) { return (uint16_t)(b[0] | (b[1] << 8)); }
static uint32_t rd_u32(const uint8_t *b) {
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

/* ---- ONNX slice axis ---------------------------------------------------------- */

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

/* ---- program free / queries ------------------------------------------------------ */

void hfx_program_free(hfx_program *p) {
    if (!p) return;
    hfx_plat_free(p->blob);
    hfx_plat_free(p->tensors);
    hfx_plat_free(p->ops);
    hfx_plat_free(p->input_tensor);
    hfx_plat_free(p->output_tensor);
    hfx_plat_free(p->task_ops[0]);
    hfx_plat_free(p->task_ops[1]);
    hfx_plat_free(p->deps);
    hfx_plat_free(p);
}

uint32_t hfx_program_num_tensors(const hfx_program *p) { return p ? p->n_tensors : 0; }
uint32_t hfx_program_num_ops(const hfx_program *p) { return p ? p->n_ops : 0; }
uint32_t hfx_program_num_task_ops(const hfx_program *p, int task) {
    return (p && task >= 0 && task < 2) ? p->n_task_ops[task] : 0;
}
uint32_t hfx_program_num_inputs(const hfx_program *p, int task) {
    return (p && task >= 0 && task < 2) ? p->n_inputs[task] : 0;
}
uint32_t hfx_program_num_outputs(const hfx_program *p, int task) {
    return (p && task >= 0 && task < 2) ? p->n_outputs[task] : 0;
}
uint64_t hfx_program_num_items(const hfx_program *p, int task) {
    return (p && task >= 0 && task < 2) ? p->task_items[task] : 0;
}
size_t hfx_program_scratch_bytes(const hfx_program *p, int task) {
    return (p && task >= 0 && task < 2) ? p->scratch_bytes[task] : 0;
}
size_t hfx_program_workspace_bytes(const hfx_program *p) { return p ? p->ws_bytes : 0; }

static void fill_tensor_info(const hfx_tensor *t, hfx_tensor_info *o) {
    memset(o, 0, sizeof *o);
    o->dtype = t->dtype;
    o->role = t->role;
    o->task = t->task;
    o->rank = t->rank;
    o->io_index = t->io_index;
    memcpy(o->dims, t->dims, sizeof o->dims);
    o->numel = t->numel;
    o->bytes = t->bytes;
}

hfx_status hfx_program_tensor_info(const hfx_program *p, uint32_t tensor, hfx_tensor_info *out) {
    if (!p || !out || tensor >= p->n_tensors) return HFX_ERR_ARG;
    fill_tensor_info(&p->tensors[tensor], out);
    return HFX_OK;
}

hfx_status hfx_program_input_info(const hfx_program *p, uint32_t io, hfx_tensor_info *out) {
    if (!p || !out || io >= p->n_inputs[0] + p->n_inputs[1]) return HFX_ERR_ARG;
    fill_tensor_info(&p->tensors[p->input_tensor[io]], out);
    return HFX_OK;
}

hfx_status hfx_program_output_info(const hfx_program *p, uint32_t io, hfx_tensor_info *out) {
    if (!p || !out || io >= p->n_outputs[0] + p->n_outputs[1]) return HFX_ERR_ARG;
    fill_tensor_info(&p->tensors[p->output_tensor[io]], out);
    return HFX_OK;
}

hfx_status hfx_program_op_info(const hfx_program *p, uint32_t op, hfx_op_info *out) {
    if (!p || !out || op >= p->n_ops) return HFX_ERR_ARG;
    const hfx_op *o = &p->ops[op];
    memset(out, 0, sizeof *out);
    out->opcode = o->opcode;
    out->engine = o->engine;
    out->task = o->task;
    out->n_inputs = o->n_in;
    out->n_outputs = o->n_out;
    memcpy(out->inputs, o->in, sizeof out->inputs);
    memcpy(out->outputs, o->out, sizeof out->outputs);
    out->task_index = o->task_index;
    out->n_items = o->plan.n_items;
    return HFX_OK;
}

/* ---- op validation ------------------------------------------------------------------ */

typedef struct opdesc {
    uint16_t opcode;
    const char *name;
    uint8_t min_in, max_in;
    uint8_t engines; /* bit mask of allowed engine classes */
    uint8_t n_params; /* params [n_params, 32) must be 0 (rank-dependent ops check more) */
} opdesc;

#define EM (1u << HFX_ENGINE_MATRIX)
#define EV (1u << HFX_ENGINE_VECTOR)
#define EC (1u << HFX_ENGINE_COPY)

static const opdesc k_ops[] = {
    {HFX_OP_GEMM, "Gemm", 2, 3, EM | EV, 4},
    {HFX_OP_CONV2D, "Conv2D", 2, 3, EM | EV, 9},
    {HFX_OP_ADD, "Add", 2, 2, EV, 0},
    {HFX_OP_SUB, "Sub", 2, 2, EV, 0},
    {HFX_OP_MUL, "Mul", 2, 2, EV, 0},
    {HFX_OP_DIV, "Div", 2, 2, EV, 0},
    {HFX_OP_RELU, "Relu", 1, 1, EV, 0},
    {HFX_OP_SIGMOID, "Sigmoid", 1, 1, EV, 0},
    {HFX_OP_TANH, "Tanh", 1, 1, EV, 0},
    {HFX_OP_GELU, "Gelu", 1, 1, EV, 0},
    {HFX_OP_SILU, "SiLU", 1, 1, EV, 0},
    {HFX_OP_EXP, "Exp", 1, 1, EV, 0},
    {HFX_OP_HARDSIGMOID, "HardSigmoid", 1, 1, EV, 2},
    {HFX_OP_HARDSWISH, "HardSwish", 1, 1, EV, 0},
    {HFX_OP_SOFTMAX, "Softmax", 1, 1, EV, 1},
    {HFX_OP_LAYERNORM, "LayerNormalization", 2, 3, EV, 2},
    {HFX_OP_RMSNORM, "RMSNorm", 2, 2, EV, 2},
    {HFX_OP_REDUCE_MEAN, "ReduceMean", 1, 1, EV, 2},
    {HFX_OP_REDUCE_SUM, "ReduceSum", 1, 1, EV, 2},
    {HFX_OP_TRANSPOSE, "Transpose", 1, 1, EC | EV, 8},
    {HFX_OP_CONCAT, "Concat", 1, 8, EC | EV, 1},
    {HFX_OP_SLICE, "Slice", 1, 1, EC | EV, 24},
    {HFX_OP_COPY, "Copy", 1, 1, EC | EV, 0},
    {HFX_OP_RESIZE, "Resize", 1, 1, EC | EV, 5}, /* LINEAR: VECTOR only (checked below) */
    {HFX_OP_MAXPOOL, "MaxPool", 1, 1, EV, 11},
    {HFX_OP_AVGPOOL, "AveragePool", 1, 1, EV, 12},
    {HFX_OP_GLOBAL_AVGPOOL, "GlobalAveragePool", 1, 1, EV, 0},
};

static const opdesc *find_op(uint32_t opcode) {
    for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++)
        if (k_ops[i].opcode == opcode) return &k_ops[i];
    return NULL;
}

typedef struct vctx {
    hfx_program *p;
    hfx_error *err;
    size_t rec; /* byte offset of the op record */
    uint32_t index;
} vctx;

#define PARAM_OFF(v, i) ((v)->rec + 48u + 4u * (size_t)(i))
#define IN_OFF(v, i) ((v)->rec + 8u + 4u * (size_t)(i))
#define OUT_OFF(v, i) ((v)->rec + 40u + 4u * (size_t)(i))

static bool same_shape(const hfx_tensor *a, const uint32_t *dims, uint32_t rank) {
    if (a->rank != rank) return false;
    for (uint32_t i = 0; i < rank; i++)
        if (a->dims[i] != dims[i]) return false;
    return true;
}

static hfx_status shape_err(vctx *v, const char *what) {
    hfx_error_set(v->err, HFX_ERR_SHAPE, OUT_OFF(v, 0), "op %u: output shape does not match %s", v->index, what);
    return HFX_ERR_SHAPE;
}

/* numpy broadcast of a and b into out; false if incompatible */
static bool broadcast2(const uint32_t *ad, uint32_t ar, const uint32_t *bd, uint32_t br,
                       uint32_t *od, uint32_t *orank) {
    uint32_t r = ar > br ? ar : br;
    for (uint32_t i = 0; i < r; i++) {
        uint32_t a = i < r - ar ? 1 : ad[i - (r - ar)];
        uint32_t b = i < r - br ? 1 : bd[i - (r - br)];
        if (a != b && a != 1 && b != 1) return false;
        od[i] = a == 1 ? b : a;
    }
    *orank = r;
    return true;
}

/* t broadcastable (unidirectionally) to dims[rank] */
static bool broadcastable_to(const hfx_tensor *t, const uint32_t *dims, uint32_t rank) {
    if (t->rank > rank) return false;
    for (uint32_t i = 0; i < t->rank; i++) {
        uint32_t d = t->dims[i], o = dims[rank - t->rank + i];
        if (d != o && d != 1) return false;
    }
    return true;
}

static hfx_status check_axis(vctx *v, hfx_op *op, uint32_t rank, uint32_t *axis_out) {
    int32_t a = op->params[HFX_P_AXIS];
    if (a < -(int32_t)rank || a >= (int32_t)rank) {
        hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_AXIS), "op %u: axis %d out of range for rank %u",
                      v->index, (int)a, rank);
        return HFX_ERR_PARAM;
    }
    if (a < 0) a += (int32_t)rank;
    op->params[HFX_P_AXIS] = a; /* normalized */
    *axis_out = (uint32_t)a;
    return HFX_OK;
}

static bool finite_f32(int32_t bits) { return ((uint32_t)bits & 0x7f800000u) != 0x7f800000u; }

/* ---- pooling / resize validation -------------------------------------------------- */

/* Output length of a 2-D pooling axis (ONNX Runtime's rule): floor, or with
 * ceil_mode ceil, of (in + pads - dilation (k - 1) - 1) / stride, + 1; with
 * ceil_mode a last window that would start in the bottom/right padding is
 * dropped. -1 when the kernel is larger than the padded input. */
int64_t hfx_pool_out_len(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin, int64_t pad_end,
                         bool ceil_mode) {
    int64_t span = in + pad_begin + pad_end - dil * (k - 1) - 1;
    if (span < 0) return -1;
    if (!ceil_mode) return span / stride + 1;
    int64_t out = (span + stride - 1) / stride + 1;
    if ((out - 1) * stride >= in + pad_begin) out--;
    return out;
}

static hfx_status validate_pool(vctx *v, hfx_op *op, const hfx_tensor *x, const hfx_tensor *y) {
    const int32_t *pr = op->params;
    for (int i = 4; i < 10; i++) { /* strides, dilations, kernel */
        if (pr[i] < 1 || pr[i] > 65535) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: pool param %d = %d out of range",
                          v->index, i, (int)pr[i]);
            return HFX_ERR_PARAM;
        }
    }
    for (int i = 0; i < 4; i++) { /* pads: ONNX Runtime wants them smaller than the kernel */
        int32_t k = pr[HFX_P_POOL_KERNEL_H + (i & 1)];
        if (pr[i] < 0 || pr[i] >= k) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: pool pad %d = %d not in [0, kernel)",
                          v->index, i, (int)pr[i]);
            return HFX_ERR_PARAM;
        }
    }
    for (int i = HFX_P_POOL_CEIL_MODE; i <= HFX_P_POOL_COUNT_INCLUDE_PAD; i++) {
        if (pr[i] != 0 && pr[i] != 1) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: pool flag %d must be 0 or 1", v->index, i);
            return HFX_ERR_PARAM;
        }
    }
    if (x->rank != 4) {
        hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 0), "op %u: 2-D pooling needs a rank-4 X", v->index);
        return HFX_ERR_SHAPE;
    }
    uint32_t od[4] = {x->dims[0], x->dims[1], 0, 0};
    for (int a = 0; a < 2; a++) {
        int64_t n = hfx_pool_out_len(x->dims[2 + a], pr[HFX_P_POOL_KERNEL_H + a], pr[HFX_P_POOL_STRIDE_H + a],
                                     pr[HFX_P_POOL_DILATION_H + a], pr[a], pr[2 + a], pr[HFX_P_POOL_CEIL_MODE] != 0);
        if (n < 1) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, PARAM_OFF(v, HFX_P_POOL_KERNEL_H + a),
                          "op %u: pool kernel larger than the padded input", v->index);
            return HFX_ERR_SHAPE;
        }
        od[2 + a] = (uint32_t)n;
    }
    if (!same_shape(y, od, 4)) return shape_err(v, "the pooling");
    return HFX_OK;
}

static hfx_status validate_resize(vctx *v, hfx_op *op, const hfx_tensor *x, const hfx_tensor *y) {
    const int32_t *pr = op->params;
    int32_t mode = pr[HFX_P_RESIZE_MODE], coord = pr[HFX_P_RESIZE_COORD], nm = pr[HFX_P_RESIZE_NEAREST_MODE];
    if (mode != HFX_RESIZE_NEAREST && mode != HFX_RESIZE_LINEAR) {
        hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_RESIZE_MODE), "op %u: resize mode %d unknown",
                      v->index, (int)mode);
        return HFX_ERR_PARAM;
    }
    if (mode == HFX_RESIZE_LINEAR && op->engine != HFX_ENGINE_VECTOR) {
        hfx_error_set(v->err, HFX_ERR_OP, v->rec + 2u, "op %u: linear Resize runs on the vector engine only",
                      v->index);
        return HFX_ERR_OP;
    }
    if (coord < HFX_RESIZE_COORD_HALF_PIXEL || coord > HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC) {
        hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_RESIZE_COORD),
                      "op %u: resize coordinate mode %d unknown", v->index, (int)coord);
        return HFX_ERR_PARAM;
    }
    int32_t nm_max = mode == HFX_RESIZE_NEAREST ? HFX_RESIZE_NEAREST_CEIL : 0;
    if (nm < 0 || nm > nm_max) {
        hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_RESIZE_NEAREST_MODE),
                      "op %u: resize nearest mode %d invalid (0 for linear)", v->index, (int)nm);
        return HFX_ERR_PARAM;
    }
    for (int i = HFX_P_RESIZE_SCALE_H; i <= HFX_P_RESIZE_SCALE_W; i++) {
        float sc = hfx_f32_from_bits(pr[i]);
        if (!finite_f32(pr[i]) || !(sc > 0.0f)) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: resize scale must be finite and > 0",
                          v->index);
            return HFX_ERR_PARAM;
        }
    }
    if (x->rank < 2) {
        hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 0), "op %u: Resize needs rank >= 2", v->index);
        return HFX_ERR_SHAPE;
    }
    if (y->rank != x->rank) return shape_err(v, "the input's rank");
    for (uint32_t i = 0; i + 2 < x->rank; i++)
        if (y->dims[i] != x->dims[i]) return shape_err(v, "the input on the axes not resized");
    for (uint32_t a = 0; a < 2; a++) {
        /* out = floor(in * scale); a scale given as out / in in f32 may land just below */
        double want = (double)x->dims[x->rank - 2 + a] * (double)hfx_f32_from_bits(pr[HFX_P_RESIZE_SCALE_H + a]);
        double got = (double)y->dims[x->rank - 2 + a];
        bool ok = got <= want ? want - got < 1.0 : got - want <= 1e-5 * got;
        if (!ok) return shape_err(v, "floor(input * scale) on the resized axes");
    }
    return HFX_OK;
}

static hfx_status validate_op_shapes(vctx *v, hfx_op *op) {
    hfx_program *p = v->p;
    const hfx_tensor *x = &p->tensors[op->in[0]];
    const hfx_tensor *y = &p->tensors[op->out[0]];
    uint32_t od[HFX_MAX_RANK * 2];
    uint32_t orank = 0;

    switch (op->opcode) {
    case HFX_OP_GEMM: {
        const hfx_tensor *b = &p->tensors[op->in[1]];
        int32_t ta = op->params[HFX_P_GEMM_TRANS_A], tb = op->params[HFX_P_GEMM_TRANS_B];
        if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, ta != 0 && ta != 1 ? 0 : 1),
                          "op %u: transA/transB must be 0 or 1", v->index);
            return HFX_ERR_PARAM;
        }
        if (!finite_f32(op->params[HFX_P_GEMM_ALPHA]) || !finite_f32(op->params[HFX_P_GEMM_BETA])) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_GEMM_ALPHA), "op %u: alpha/beta not finite",
                          v->index);
            return HFX_ERR_PARAM;
        }
        if (op->n_in == 2 && op->params[HFX_P_GEMM_BETA] != 0) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_GEMM_BETA), "op %u: beta set without C",
                          v->index);
            return HFX_ERR_PARAM;
        }
        if (x->rank < 2 || b->rank < 2) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, x->rank < 2 ? 0 : 1),
                          "op %u: Gemm operands need rank >= 2", v->index);
            return HFX_ERR_SHAPE;
        }
        uint32_t m = ta ? x->dims[x->rank - 1] : x->dims[x->rank - 2];
        uint32_t ka = ta ? x->dims[x->rank - 2] : x->dims[x->rank - 1];
        uint32_t kb = tb ? b->dims[b->rank - 1] : b->dims[b->rank - 2];
        uint32_t n = tb ? b->dims[b->rank - 2] : b->dims[b->rank - 1];
        if (ka != kb) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 1), "op %u: Gemm K mismatch %u vs %u", v->index, ka, kb);
            return HFX_ERR_SHAPE;
        }
        if (!broadcast2(x->dims, x->rank - 2u, b->dims, b->rank - 2u, od, &orank)) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 1), "op %u: Gemm batch dims do not broadcast", v->index);
            return HFX_ERR_SHAPE;
        }
        if (orank + 2 > HFX_MAX_RANK) return shape_err(v, "Gemm (rank too high)");
        od[orank++] = m;
        od[orank++] = n;
        if (!same_shape(y, od, orank)) return shape_err(v, "Gemm");
        if (op->n_in == 3 && !broadcastable_to(&p->tensors[op->in[2]], od, orank)) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 2), "op %u: Gemm C does not broadcast to the output",
                          v->index);
            return HFX_ERR_SHAPE;
        }
        return HFX_OK;
    }
    case HFX_OP_CONV2D: {
        const hfx_tensor *w = &p->tensors[op->in[1]];
        const int32_t *pr = op->params;
        for (int i = 0; i < 9; i++) {
            int32_t lo = i < 4 ? 0 : 1;
            if (pr[i] < lo || pr[i] > 65535) {
                hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: conv param %d = %d out of range",
                              v->index, i, (int)pr[i]);
                return HFX_ERR_PARAM;
            }
        }
        if (x->rank != 4 || w->rank != 4) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, x->rank != 4 ? 0 : 1), "op %u: Conv2D needs rank-4 X and W",
                          v->index);
            return HFX_ERR_SHAPE;
        }
        uint32_t g = (uint32_t)pr[HFX_P_CONV_GROUP];
        uint32_t c = x->dims[1], m = w->dims[0];
        if (c % g != 0 || m % g != 0 || w->dims[1] != c / g) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 1), "op %u: Conv2D channels/group mismatch", v->index);
            return HFX_ERR_SHAPE;
        }
        int64_t oh[2];
        for (int a = 0; a < 2; a++) {
            int64_t in = x->dims[2 + a], k = w->dims[2 + a];
            int64_t pad = (int64_t)pr[a] + pr[2 + a];
            int64_t ek = (int64_t)pr[6 + a] * (k - 1) + 1;
            int64_t span = in + pad - ek;
            if (span < 0) {
                hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 1), "op %u: Conv2D kernel larger than padded input",
                              v->index);
                return HFX_ERR_SHAPE;
            }
            oh[a] = span / pr[4 + a] + 1;
        }
        od[0] = x->dims[0];
        od[1] = m;
        od[2] = (uint32_t)oh[0];
        od[3] = (uint32_t)oh[1];
        if (!same_shape(y, od, 4)) return shape_err(v, "Conv2D");
        if (op->n_in == 3) {
            const hfx_tensor *bias = &p->tensors[op->in[2]];
            if (bias->rank != 1 || bias->dims[0] != m) {
                hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 2), "op %u: Conv2D bias must be [M]", v->index);
                return HFX_ERR_SHAPE;
            }
        }
        return HFX_OK;
    }
    case HFX_OP_ADD:
    case HFX_OP_SUB:
    case HFX_OP_MUL:
    case HFX_OP_DIV: {
        const hfx_tensor *b = &p->tensors[op->in[1]];
        if (!broadcast2(x->dims, x->rank, b->dims, b->rank, od, &orank)) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 1), "op %u: inputs do not broadcast", v->index);
            return HFX_ERR_SHAPE;
        }
        if (!same_shape(y, od, orank)) return shape_err(v, "the broadcast of the inputs");
        return HFX_OK;
    }
    case HFX_OP_HARDSIGMOID:
        for (int i = 0; i < 2; i++) {
            if (!finite_f32(op->params[i])) {
                hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: HardSigmoid alpha/beta not finite",
                              v->index);
                return HFX_ERR_PARAM;
            }
        }
        if (!same_shape(y, x->dims, x->rank)) return shape_err(v, "the input");
        return HFX_OK;
    case HFX_OP_RELU:
    case HFX_OP_SIGMOID:
    case HFX_OP_TANH:
    case HFX_OP_GELU:
    case HFX_OP_SILU:
    case HFX_OP_EXP:
    case HFX_OP_HARDSWISH:
        if (!same_shape(y, x->dims, x->rank)) return shape_err(v, "the input");
        return HFX_OK;
    case HFX_OP_MAXPOOL:
    case HFX_OP_AVGPOOL:
        return validate_pool(v, op, x, y);
    case HFX_OP_GLOBAL_AVGPOOL: {
        if (x->rank < 3) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 0), "op %u: GlobalAveragePool needs rank >= 3 (N, C, spatial)",
                          v->index);
            return HFX_ERR_SHAPE;
        }
        od[0] = x->dims[0];
        od[1] = x->dims[1];
        for (uint32_t i = 2; i < x->rank; i++) od[i] = 1;
        if (!same_shape(y, od, x->rank)) return shape_err(v, "[N, C, 1, ...]");
        return HFX_OK;
    }
    case HFX_OP_RESIZE:
        return validate_resize(v, op, x, y);
    case HFX_OP_SOFTMAX: {
        uint32_t axis;
        if (x->rank == 0) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 0), "op %u: Softmax of a scalar", v->index);
            return HFX_ERR_SHAPE;
        }
        hfx_status st = check_axis(v, op, x->rank, &axis);
        if (st) return st;
        if (!same_shape(y, x->dims, x->rank)) return shape_err(v, "the input");
        return HFX_OK;
    }
    case HFX_OP_LAYERNORM:
    case HFX_OP_RMSNORM: {
        uint32_t axis;
        if (x->rank == 0) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 0), "op %u: norm of a scalar", v->index);
            return HFX_ERR_SHAPE;
        }
        hfx_status st = check_axis(v, op, x->rank, &axis);
        if (st) return st;
        int32_t eps = op->params[HFX_P_EPSILON];
        float e = hfx_f32_from_bits(eps);
        if (!finite_f32(eps) || !(e > 0.0f)) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_EPSILON), "op %u: epsilon must be finite and > 0",
                          v->index);
            return HFX_ERR_PARAM;
        }
        uint64_t d = 1;
        for (uint32_t i = axis; i < x->rank; i++) d *= x->dims[i];
        for (uint32_t k = 1; k < op->n_in; k++) {
            const hfx_tensor *s = &p->tensors[op->in[k]];
            /* scale/bias: X.shape[axis:] up to leading 1s */
            bool ok = s->numel == d && s->rank <= HFX_MAX_RANK;
            uint32_t sr = s->rank, xr = x->rank - axis;
            for (uint32_t i = 0; ok && i < (sr > xr ? sr : xr); i++) {
                uint32_t sd = i < sr ? s->dims[sr - 1 - i] : 1;
                uint32_t xd = i < xr ? x->dims[x->rank - 1 - i] : 1;
                if (sd != xd) ok = false;
            }
            if (!ok) {
                hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, k), "op %u: scale/bias shape must be X.shape[axis:]",
                              v->index);
                return HFX_ERR_SHAPE;
            }
        }
        if (!same_shape(y, x->dims, x->rank)) return shape_err(v, "the input");
        return HFX_OK;
    }
    case HFX_OP_REDUCE_MEAN:
    case HFX_OP_REDUCE_SUM: {
        uint32_t mask = (uint32_t)op->params[HFX_P_REDUCE_AXES_MASK];
        int32_t keep = op->params[HFX_P_REDUCE_KEEPDIMS];
        if (mask == 0 || (x->rank < 32 && (mask >> x->rank) != 0)) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_REDUCE_AXES_MASK),
                          "op %u: axes mask %u invalid for rank %u", v->index, mask, x->rank);
            return HFX_ERR_PARAM;
        }
        if (keep != 0 && keep != 1) {
            hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_REDUCE_KEEPDIMS), "op %u: keepdims must be 0/1",
                          v->index);
            return HFX_ERR_PARAM;
        }
        for (uint32_t i = 0; i < x->rank; i++) {
            if (mask & (1u << i)) {
                if (keep) od[orank++] = 1;
            } else {
                od[orank++] = x->dims[i];
            }
        }
        if (!same_shape(y, od, orank)) return shape_err(v, "the reduction");
        return HFX_OK;
    }
    case HFX_OP_TRANSPOSE: {
        uint32_t seen = 0;
        for (uint32_t i = 0; i < HFX_MAX_RANK; i++) {
            int32_t pi = op->params[HFX_P_PERM + i];
            if (i >= x->rank) {
                if (pi != 0) {
                    hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: perm[%u] beyond rank must be 0",
                                  v->index, i);
                    return HFX_ERR_PARAM;
                }
                continue;
            }
            if (pi < 0 || (uint32_t)pi >= x->rank || (seen & (1u << pi))) {
                hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, i), "op %u: perm is not a permutation", v->index);
                return HFX_ERR_PARAM;
            }
            seen |= 1u << pi;
            od[i] = x->dims[pi];
        }
        if (!same_shape(y, od, x->rank)) return shape_err(v, "the permuted input");
        return HFX_OK;
    }
    case HFX_OP_CONCAT: {
        uint32_t axis;
        if (x->rank == 0) {
            hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, 0), "op %u: Concat of scalars", v->index);
            return HFX_ERR_SHAPE;
        }
        hfx_status st = check_axis(v, op, x->rank, &axis);
        if (st) return st;
        memcpy(od, x->dims, sizeof(uint32_t) * x->rank);
        uint64_t total = x->dims[axis];
        for (uint32_t k = 1; k < op->n_in; k++) {
            const hfx_tensor *t = &p->tensors[op->in[k]];
            bool ok = t->rank == x->rank;
            for (uint32_t i = 0; ok && i < x->rank; i++)
                if (i != axis && t->dims[i] != x->dims[i]) ok = false;
            if (!ok) {
                hfx_error_set(v->err, HFX_ERR_SHAPE, IN_OFF(v, k), "op %u: Concat input %u shape mismatch", v->index,
                              k);
                return HFX_ERR_SHAPE;
            }
            total += t->dims[axis];
        }
        if (total > 0x7fffffffu) return shape_err(v, "Concat (too large)");
        od[axis] = (uint32_t)total;
        if (!same_shape(y, od, x->rank)) return shape_err(v, "the concatenation");
        return HFX_OK;
    }
    case HFX_OP_SLICE: {
        for (uint32_t i = 0; i < HFX_MAX_RANK; i++) {
            int32_t s = op->params[HFX_P_SLICE_STARTS + i], e = op->params[HFX_P_SLICE_ENDS + i];
            int32_t st = op->params[HFX_P_SLICE_STEPS + i];
            if (i >= x->rank) {
                if (s || e || st) {
                    hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_SLICE_STARTS + i),
                                  "op %u: slice params beyond rank must be 0", v->index);
                    return HFX_ERR_PARAM;
                }
                continue;
            }
            if (st == 0) {
                hfx_error_set(v->err, HFX_ERR_PARAM, PARAM_OFF(v, HFX_P_SLICE_STEPS + i), "op %u: slice step is 0",
                              v->index);
                return HFX_ERR_PARAM;
            }
            int64_t first;
            uint64_t len = hfx_slice_axis(x->dims[i], s, e, st, &first);
            if (len == 0) {
                hfx_error_set(v->err, HFX_ERR_SHAPE, PARAM_OFF(v, HFX_P_SLICE_STARTS + i),
                              "op %u: slice of axis %u is empty (unsupported)", v->index, i);
                return HFX_ERR_SHAPE;
            }
            od[i] = (uint32_t)len;
        }
        if (!same_shape(y, od, x->rank)) return shape_err(v, "the slice");
        return HFX_OK;
    }
    case HFX_OP_COPY:
        if (y->numel != x->numel) return shape_err(v, "the input's element count");
        return HFX_OK;
    default: break;
    }
    hfx_error_set(v->err, HFX_ERR_OP, v->rec, "op %u: unknown opcode", v->index);
    return HFX_ERR_OP;
}

/* ---- parse --------------------------------------------------------------------------- */

#define FAIL(st, off, ...)                                  \
    do {                                                    \
        hfx_error_set(err, (st), (off), __VA_ARGS__);       \
        status = (st);                                      \
        goto fail;                                          \
    } while (0)

static void *zalloc(size_t n, size_t size) {
    if (n == 0) n = 1;
    if (size && n > SIZE_MAX / size) return NULL;
    void *q = hfx_plat_alloc(n * size, 64);
    if (q) memset(q, 0, n * size);
    return q;
}

/* CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), bit by bit: a program is parsed
 * once per session, so speed does not matter and there is no table to keep. */
static uint32_t crc32_ieee(const uint8_t *b, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

hfx_status hfx_program_parse(const void *bytes, size_t size, hfx_program **out, hfx_error *err) {
    hfx_error local;
    if (!err) err = &local;
    memset(err, 0, sizeof *err);
    if (out) *out = NULL;
    if (!out || (!bytes && size)) {
        hfx_error_set(err, HFX_ERR_ARG, 0, "null argument");
        return HFX_ERR_ARG;
    }
    const uint8_t *b = bytes;
    hfx_status status = HFX_OK;
    hfx_program *p = NULL;
    uint8_t *written = NULL;

    if (size < 4) {
        hfx_error_set(err, HFX_ERR_TRUNCATED, size, "program shorter than its magic (%U bytes)", (uint64_t)size);
        return HFX_ERR_TRUNCATED;
    }
    if (rd_u32(b) != HFX_PROGRAM_MAGIC) {
        hfx_error_set(err, HFX_ERR_MAGIC, 0, "bad magic (expected 'HFXP')");
        return HFX_ERR_MAGIC;
    }
    if (size < HFX_HEADER_BYTES) {
        hfx_error_set(err, HFX_ERR_TRUNCATED, size, "program shorter than the header");
        return HFX_ERR_TRUNCATED;
    }
    uint32_t version = rd_u16(b + 4);
    if (version != HFX_PROGRAM_VERSION) {
        hfx_error_set(err, HFX_ERR_VERSION, 4, "unsupported version %u (this build reads %u)", version,
                      HFX_PROGRAM_VERSION);
        return HFX_ERR_VERSION;
    }
    uint32_t header_bytes = rd_u16(b + 6);
    uint32_t total = rd_u32(b + 8);
    uint32_t flags = rd_u32(b + 12);
    uint32_t n_tensors = rd_u32(b + 16);
    uint32_t n_ops = rd_u32(b + 20);
    uint32_t n_io[4] = {rd_u16(b + 24), rd_u16(b + 26), rd_u16(b + 28), rd_u16(b + 30)};
    uint32_t tensors_off = rd_u32(b + 32), ops_off = rd_u32(b + 36);
    uint32_t data_off = rd_u32(b + 40), data_bytes = rd_u32(b + 44);

    if (header_bytes != HFX_HEADER_BYTES) {
        hfx_error_set(err, HFX_ERR_HEADER, 6, "header size %u, expected %u", header_bytes, HFX_HEADER_BYTES);
        return HFX_ERR_HEADER;
    }
    if (total > size) {
        hfx_error_set(err, HFX_ERR_TRUNCATED, size, "program has %U bytes, header says %u", (uint64_t)size, total);
        return HFX_ERR_TRUNCATED;
    }
    if (total != size) {
        hfx_error_set(err, HFX_ERR_HEADER, 8, "total size %u but %U bytes given", total, (uint64_t)size);
        return HFX_ERR_HEADER;
    }
    if (flags & ~HFX_PROGRAM_FLAG_CRC32) {
        hfx_error_set(err, HFX_ERR_HEADER, 12, "unknown flags %u", flags & ~HFX_PROGRAM_FLAG_CRC32);
        return HFX_ERR_HEADER;
    }
    uint32_t end = total; /* where the data section must end */
    if (flags & HFX_PROGRAM_FLAG_CRC32) {
        end = total - HFX_PROGRAM_CRC_BYTES; /* total >= HFX_HEADER_BYTES here */
        uint32_t want = rd_u32(b + end), got = crc32_ieee(b, end);
        if (got != want) {
            hfx_error_set(err, HFX_ERR_HEADER, end, "checksum mismatch: the program is corrupted (CRC-32 %u, stored %u)",
                          got, want);
            return HFX_ERR_HEADER;
        }
    }
    if (n_tensors == 0 || n_tensors > HFX_MAX_TENSORS) {
        hfx_error_set(err, HFX_ERR_HEADER, 16, "tensor count %u out of range", n_tensors);
        return HFX_ERR_HEADER;
    }
    if (n_ops == 0 || n_ops > HFX_MAX_OPS) {
        hfx_error_set(err, HFX_ERR_HEADER, 20, "op count %u out of range", n_ops);
        return HFX_ERR_HEADER;
    }
    for (int i = 0; i < 4; i++) {
        if (n_io[i] > HFX_MAX_IO) {
            hfx_error_set(err, HFX_ERR_HEADER, (size_t)(24 + 2 * i), "io count %u out of range", n_io[i]);
            return HFX_ERR_HEADER;
        }
    }
    if (tensors_off != HFX_HEADER_BYTES) {
        hfx_error_set(err, HFX_ERR_HEADER, 32, "tensor table offset %u, expected %u", tensors_off, HFX_HEADER_BYTES);
        return HFX_ERR_HEADER;
    }
    uint64_t tensors_end = (uint64_t)tensors_off + (uint64_t)n_tensors * HFX_TENSOR_RECORD_BYTES;
    if (ops_off != tensors_end) {
        hfx_error_set(err, HFX_ERR_HEADER, 36, "op table offset %u, expected %U", ops_off, tensors_end);
        return HFX_ERR_HEADER;
    }
    uint64_t ops_end = (uint64_t)ops_off + (uint64_t)n_ops * HFX_OP_RECORD_BYTES;
    if (ops_end > size) {
        hfx_error_set(err, HFX_ERR_TRUNCATED, size, "tables end at %U, beyond the %U program bytes", ops_end,
                      (uint64_t)size);
        return HFX_ERR_TRUNCATED;
    }
    uint64_t data_min = (ops_end + HFX_CONST_ALIGN - 1) / HFX_CONST_ALIGN * HFX_CONST_ALIGN;
    if (data_off < ops_end || data_off % HFX_CONST_ALIGN != 0 || data_off > data_min) {
        hfx_error_set(err, HFX_ERR_HEADER, 40, "data offset %u, expected %U", data_off, data_min);
        return HFX_ERR_HEADER;
    }
    if ((uint64_t)data_off + data_bytes != end) {
        hfx_error_set(err, HFX_ERR_HEADER, 44, "data section %u+%u does not end at %u", data_off, data_bytes, end);
        return HFX_ERR_HEADER;
    }
    for (uint64_t i = ops_end; i < data_off; i++) {
        if (b[i] != 0) {
            hfx_error_set(err, HFX_ERR_HEADER, (size_t)i, "padding before the data section must be 0");
            return HFX_ERR_HEADER;
        }
    }

    p = zalloc(1, sizeof *p);
    if (!p) FAIL(HFX_ERR_NOMEM, 0, "out of memory");
    p->blob = hfx_plat_alloc(size, 128);
    p->tensors = zalloc(n_tensors, sizeof *p->tensors);
    p->ops = zalloc(n_ops, sizeof *p->ops);
    p->input_tensor = zalloc(n_io[0] + n_io[1], sizeof(uint32_t));
    p->output_tensor = zalloc(n_io[2] + n_io[3], sizeof(uint32_t));
    p->task_ops[0] = zalloc(n_ops, sizeof(uint32_t));
    p->task_ops[1] = zalloc(n_ops, sizeof(uint32_t));
    written = zalloc(n_tensors, 1);
    if (!p->blob || !p->tensors || !p->ops || !p->input_tensor || !p->output_tensor || !p->task_ops[0] ||
        !p->task_ops[1] || !written)
        FAIL(HFX_ERR_NOMEM, 0, "out of memory");
    memcpy(p->blob, b, size);
    p->blob_size = size;
    p->n_tensors = n_tensors;
    p->n_ops = n_ops;
    p->n_inputs[0] = n_io[0];
    p->n_inputs[1] = n_io[1];
    p->n_outputs[0] = n_io[2];
    p->n_outputs[1] = n_io[3];
    for (uint32_t i = 0; i < n_io[0] + n_io[1]; i++) p->input_tensor[i] = HFX_NO_TENSOR;
    for (uint32_t i = 0; i < n_io[2] + n_io[3]; i++) p->output_tensor[i] = HFX_NO_TENSOR;

    /* ---- tensors ---- */
    for (uint32_t t = 0; t < n_tensors; t++) {
        size_t r = tensors_off + (size_t)t * HFX_TENSOR_RECORD_BYTES;
        const uint8_t *rec = b + r;
        hfx_tensor *T = &p->tensors[t];
        T->dtype = rec[0];
        T->role = rec[1];
        T->task = rec[2];
        T->rank = rec[3];
        T->io_index = rd_u32(rec + 4);
        T->producer = HFX_NO_TENSOR;
        T->first_use = T->last_use = HFX_NO_TENSOR;
        size_t es = hfx_dtype_size(T->dtype);
        if (es == 0) FAIL(HFX_ERR_DTYPE, r, "tensor %u: unknown dtype %u", t, T->dtype);
        if (T->role < HFX_ROLE_INPUT || T->role > HFX_ROLE_SCRATCH)
            FAIL(HFX_ERR_TENSOR, r + 1, "tensor %u: bad role %u", t, T->role);
        if (T->task > 1) FAIL(HFX_ERR_TENSOR, r + 2, "tensor %u: bad task %u", t, T->task);
        if (T->rank > HFX_MAX_RANK) FAIL(HFX_ERR_TENSOR, r + 3, "tensor %u: rank %u > %u", t, T->rank, HFX_MAX_RANK);
        uint64_t numel = 1;
        for (uint32_t i = 0; i < HFX_MAX_RANK; i++) {
            uint32_t d = rd_u32(rec + 8 + 4 * i);
            if (i < T->rank) {
                if (d == 0 || d > 0x7fffffffu) FAIL(HFX_ERR_TENSOR, r + 8 + 4 * i, "tensor %u: dim %u = %u out of range", t, i, d);
                numel *= d;
                if (numel > HFX_MAX_TENSOR_BYTES)
                    FAIL(HFX_ERR_SIZE, r + 8 + 4 * i, "tensor %u: element count overflows the size limit", t);
            } else if (d != 0) {
                FAIL(HFX_ERR_TENSOR, r + 8 + 4 * i, "tensor %u: dim %u beyond rank must be 0", t, i);
            }
            T->dims[i] = d;
        }
        if (numel * es > HFX_MAX_TENSOR_BYTES) FAIL(HFX_ERR_SIZE, r + 8, "tensor %u: byte size over the limit", t);
        T->numel = numel;
        T->bytes = (size_t)(numel * es);
        uint32_t doff = rd_u32(rec + 40), dbytes = rd_u32(rec + 44);
        if (T->role == HFX_ROLE_CONSTANT) {
            if (doff % HFX_CONST_ALIGN != 0)
                FAIL(HFX_ERR_TENSOR, r + 40, "tensor %u: constant offset %u not %u-aligned", t, doff, HFX_CONST_ALIGN);
            if (dbytes != T->bytes)
                FAIL(HFX_ERR_SIZE, r + 44, "tensor %u: constant has %u bytes, shape needs %U", t, dbytes,
                     (uint64_t)T->bytes);
            if ((uint64_t)doff + dbytes > data_bytes)
                FAIL(HFX_ERR_SIZE, r + 40, "tensor %u: constant bytes beyond the data section", t);
            T->const_offset = (size_t)data_off + doff;
        } else if (doff != 0 || dbytes != 0) {
            FAIL(HFX_ERR_TENSOR, r + 40, "tensor %u: data offset/size set on a non-constant", t);
        }
        if (T->role == HFX_ROLE_INPUT || T->role == HFX_ROLE_OUTPUT) {
            bool in = T->role == HFX_ROLE_INPUT;
            uint32_t na = in ? n_io[0] : n_io[2], nb = in ? n_io[1] : n_io[3];
            uint32_t lo = T->task == 0 ? 0 : na, hi = T->task == 0 ? na : na + nb;
            if (T->io_index < lo || T->io_index >= hi)
                FAIL(HFX_ERR_TENSOR, r + 4, "tensor %u: io index %u outside task %u's range [%u, %u)", t, T->io_index,
                     T->task, lo, hi);
            uint32_t *slot = in ? &p->input_tensor[T->io_index] : &p->output_tensor[T->io_index];
            if (*slot != HFX_NO_TENSOR) FAIL(HFX_ERR_TENSOR, r + 4, "tensor %u: io index %u used twice", t, T->io_index);
            *slot = t;
        } else if (T->io_index != 0) {
            FAIL(HFX_ERR_TENSOR, r + 4, "tensor %u: io index set on a constant/scratch", t);
        }
    }
    for (uint32_t i = 0; i < n_io[0] + n_io[1]; i++)
        if (p->input_tensor[i] == HFX_NO_TENSOR) FAIL(HFX_ERR_TENSOR, 24, "no tensor for input %u", i);
    for (uint32_t i = 0; i < n_io[2] + n_io[3]; i++)
        if (p->output_tensor[i] == HFX_NO_TENSOR) FAIL(HFX_ERR_TENSOR, 28, "no tensor for output %u", i);

    /* ---- ops ---- */
    for (uint32_t o = 0; o < n_ops; o++) {
        size_t r = ops_off + (size_t)o * HFX_OP_RECORD_BYTES;
        const uint8_t *rec = b + r;
        hfx_op *op = &p->ops[o];
        op->opcode = rd_u16(rec);
        op->engine = rec[2];
        op->task = rec[3];
        op->n_in = rec[4];
        op->n_out = rec[5];
        const opdesc *d = find_op(op->opcode);
        if (!d) FAIL(HFX_ERR_OP, r, "op %u: unknown opcode %u", o, op->opcode);
        if (op->engine >= HFX_NUM_ENGINES || !(d->engines & (1u << op->engine)))
            FAIL(HFX_ERR_OP, r + 2, "op %u (%s): engine class %u not allowed", o, d->name, op->engine);
        if (op->task > 1) FAIL(HFX_ERR_OP, r + 3, "op %u: bad task %u", o, op->task);
        if (op->n_in < d->min_in || op->n_in > d->max_in)
            FAIL(HFX_ERR_OP, r + 4, "op %u (%s): %u inputs, expected %u..%u", o, d->name, op->n_in, d->min_in,
                 d->max_in);
        if (op->n_out != 1) FAIL(HFX_ERR_OP, r + 5, "op %u (%s): %u outputs, expected 1", o, d->name, op->n_out);
        if (rd_u16(rec + 6) != 0) FAIL(HFX_ERR_OP, r + 6, "op %u: reserved field must be 0", o);
        for (uint32_t i = 0; i < HFX_MAX_OP_INPUTS; i++) {
            uint32_t id = rd_u32(rec + 8 + 4 * i);
            op->in[i] = id;
            if (i >= op->n_in) {
                if (id != HFX_NO_TENSOR) FAIL(HFX_ERR_OP, r + 8 + 4 * i, "op %u: unused input slot %u must be 0xffffffff", o, i);
                continue;
            }
            if (id >= n_tensors) FAIL(HFX_ERR_OP, r + 8 + 4 * i, "op %u: input %u tensor id %u out of range", o, i, id);
            const hfx_tensor *T = &p->tensors[id];
            if (T->task != op->task)
                FAIL(HFX_ERR_GRAPH, r + 8 + 4 * i, "op %u: input tensor %u belongs to the other task", o, id);
            if ((T->role == HFX_ROLE_SCRATCH || T->role == HFX_ROLE_OUTPUT) && !written[id])
                FAIL(HFX_ERR_GRAPH, r + 8 + 4 * i, "op %u: reads tensor %u before any op writes it", o, id);
            if (T->dtype != HFX_DTYPE_F32)
                FAIL(HFX_ERR_DTYPE, r + 8 + 4 * i, "op %u: tensor %u dtype %u unsupported (v1: f32)", o, id, T->dtype);
        }
        for (uint32_t i = 0; i < HFX_MAX_OP_OUTPUTS; i++) {
            uint32_t id = rd_u32(rec + 40 + 4 * i);
            op->out[i] = id;
            if (i >= op->n_out) {
                if (id != HFX_NO_TENSOR) FAIL(HFX_ERR_OP, r + 40 + 4 * i, "op %u: unused output slot must be 0xffffffff", o);
                continue;
            }
            if (id >= n_tensors) FAIL(HFX_ERR_OP, r + 40 + 4 * i, "op %u: output tensor id %u out of range", o, id);
            const hfx_tensor *T = &p->tensors[id];
            if (T->task != op->task)
                FAIL(HFX_ERR_GRAPH, r + 40 + 4 * i, "op %u: output tensor %u belongs to the other task", o, id);
            if (T->role != HFX_ROLE_SCRATCH && T->role != HFX_ROLE_OUTPUT)
                FAIL(HFX_ERR_GRAPH, r + 40 + 4 * i, "op %u: writes tensor %u which is an input or constant", o, id);
            if (written[id]) FAIL(HFX_ERR_GRAPH, r + 40 + 4 * i, "op %u: tensor %u written twice", o, id);
            for (uint32_t k = 0; k < op->n_in; k++)
                if (op->in[k] == id) FAIL(HFX_ERR_GRAPH, r + 40 + 4 * i, "op %u: tensor %u is input and output", o, id);
            if (T->dtype != HFX_DTYPE_F32)
                FAIL(HFX_ERR_DTYPE, r + 40 + 4 * i, "op %u: tensor %u dtype %u unsupported (v1: f32)", o, id, T->dtype);
        }
        for (uint32_t i = 0; i < HFX_OP_PARAMS; i++) {
            op->params[i] = (int32_t)rd_u32(rec + 48 + 4 * i);
            if (i >= d->n_params && op->params[i] != 0)
                FAIL(HFX_ERR_PARAM, r + 48 + 4 * i, "op %u (%s): param %u must be 0", o, d->name, i);
        }
        vctx v = {p, err, r, o};
        status = validate_op_shapes(&v, op);
        if (status) goto fail;
        /* commit dataflow */
        op->task_index = p->n_task_ops[op->task];
        p->task_ops[op->task][p->n_task_ops[op->task]++] = o;
        for (uint32_t i = 0; i < op->n_in; i++) {
            hfx_tensor *T = &p->tensors[op->in[i]];
            T->last_use = op->task_index;
        }
        for (uint32_t i = 0; i < op->n_out; i++) {
            hfx_tensor *T = &p->tensors[op->out[i]];
            written[op->out[i]] = 1;
            T->producer = o;
            T->first_use = op->task_index;
            T->last_use = op->task_index;
        }
        status = hfx_plan_op(p, op);
        if (status) FAIL(status, r, "op %u (%s): cannot plan work items", o, d->name);
        p->task_items[op->task] += op->plan.n_items;
        if (op->plan.ws_bytes > p->ws_bytes) p->ws_bytes = op->plan.ws_bytes;
    }
    for (uint32_t t = 0; t < n_tensors; t++) {
        const hfx_tensor *T = &p->tensors[t];
        if ((T->role == HFX_ROLE_OUTPUT || T->role == HFX_ROLE_SCRATCH) && !written[t])
            FAIL(HFX_ERR_GRAPH, tensors_off + (size_t)t * HFX_TENSOR_RECORD_BYTES + 1,
                 "tensor %u (%s) is never written", t, T->role == HFX_ROLE_OUTPUT ? "output" : "scratch");
    }
    status = hfx_arena_place(p, err);
    if (status) goto fail;
    hfx_plat_free(written);
    *out = p;
    return HFX_OK;

fail:
    hfx_plat_free(written);
    hfx_program_free(p);
    if (status == HFX_OK) status = HFX_ERR_NOMEM;
    return status;
}
