/*
 * program_builder.h - build task programs in tests, benchmarks and the fuzz
 * seed generator. Header only; uses malloc.
 *
 *   hfxb b; hfxb_init(&b);
 *   uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(64, 32));
 *   uint32_t w = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(32, 16), weights);
 *   uint32_t y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(64, 16));
 *   hfxb_gemm(&b, HFX_TASK_A, x, w, HFXB_NONE, y, 0, 0, 1.0f, 0.0f);
 *   size_t n; uint8_t *bytes = hfxb_encode(&b, &n);
 *
 * Inputs/outputs get their io index in creation order within their task;
 * the encoder puts task A's first, then B's, as the format requires.
 */
#ifndef HEXFUSE_PROGRAM_BUILDER_H
#define HEXFUSE_PROGRAM_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hexfuse/ops.h"

#define HFXB_NONE 0xffffffffu
#define HFXB_DIMS(...) (uint32_t)(sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)), (const uint32_t[]){__VA_ARGS__}
#define HFXB_SCALAR 0u, (const uint32_t *)NULL

typedef struct hfxb_tensor {
    uint8_t dtype, role, task, rank;
    uint32_t io; /* index within its task and direction */
    uint32_t dims[HFX_MAX_RANK];
    const void *data; /* constants */
    size_t data_bytes;
} hfxb_tensor;

typedef struct hfxb_op {
    uint16_t opcode;
    uint8_t engine, task, nin, nout;
    uint32_t in[HFX_MAX_OP_INPUTS], out[HFX_MAX_OP_OUTPUTS];
    int32_t params[HFX_OP_PARAMS];
} hfxb_op;

typedef struct hfxb {
    hfxb_tensor *t;
    uint32_t nt, ct;
    hfxb_op *o;
    uint32_t no, co;
    uint32_t nio[4]; /* inputs A, B, outputs A, B */
    /* v2 (hfxb_encode writes version 2 when set): sections appended after the data, CRC flag */
    int v2, crc;
    const uint8_t *shapes, *quant; /* section bytes, valid until hfxb_encode */
    size_t shapes_bytes, quant_bytes;
} hfxb;

static inline void hfxb_init(hfxb *b) { memset(b, 0, sizeof *b); }
static inline void hfxb_free(hfxb *b) {
    free(b->t);
    free(b->o);
    memset(b, 0, sizeof *b);
}

static inline float hfxb_f(int32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static inline int32_t hfxb_bits(float f) {
    int32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline uint32_t hfxb_tensor_add(hfxb *b, int task, uint8_t role, uint32_t rank, const uint32_t *dims) {
    if (b->nt == b->ct) {
        b->ct = b->ct ? b->ct * 2 : 16;
        b->t = (hfxb_tensor *)realloc(b->t, sizeof *b->t * b->ct);
        if (!b->t) abort();
    }
    hfxb_tensor *t = &b->t[b->nt];
    memset(t, 0, sizeof *t);
    t->dtype = HFX_DTYPE_F32;
    t->role = role;
    t->task = (uint8_t)task;
    t->rank = (uint8_t)rank;
    for (uint32_t i = 0; i < rank && i < HFX_MAX_RANK; i++) t->dims[i] = dims[i];
    if (role == HFX_ROLE_INPUT) t->io = b->nio[task]++;
    if (role == HFX_ROLE_OUTPUT) t->io = b->nio[2 + task]++;
    return b->nt++;
}

static inline uint32_t hfxb_input(hfxb *b, int task, uint32_t rank, const uint32_t *dims) {
    return hfxb_tensor_add(b, task, HFX_ROLE_INPUT, rank, dims);
}
static inline uint32_t hfxb_output(hfxb *b, int task, uint32_t rank, const uint32_t *dims) {
    return hfxb_tensor_add(b, task, HFX_ROLE_OUTPUT, rank, dims);
}
static inline uint32_t hfxb_scratch(hfxb *b, int task, uint32_t rank, const uint32_t *dims) {
    return hfxb_tensor_add(b, task, HFX_ROLE_SCRATCH, rank, dims);
}
/* data must stay valid until hfxb_encode; holds numel f32 values */
static inline uint32_t hfxb_const(hfxb *b, int task, uint32_t rank, const uint32_t *dims, const float *data) {
    uint32_t id = hfxb_tensor_add(b, task, HFX_ROLE_CONSTANT, rank, dims);
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++) n *= dims[i];
    b->t[id].data = data;
    b->t[id].data_bytes = n * sizeof(float);
    return id;
}

static inline uint64_t hfxb_numel(const hfxb *b, uint32_t id) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < b->t[id].rank; i++) n *= b->t[id].dims[i];
    return n;
}

static inline size_t hfxb_dtype_size(uint8_t dtype) {
    if (dtype == HFX_DTYPE_I8 || dtype == HFX_DTYPE_U8 || dtype == HFX_DTYPE_BOOL) return 1;
    if (dtype == HFX_DTYPE_F16 || dtype == HFX_DTYPE_U16 || dtype == HFX_DTYPE_I16) return 2;
    return dtype == HFX_DTYPE_I64 ? 8 : 4;
}

/* Gives tensor id another dtype (the quantization ops' integer tensors); a constant's data then
 * holds numel values of that type. Returns id. */
static inline uint32_t hfxb_set_dtype(hfxb *b, uint32_t id, uint8_t dtype) {
    b->t[id].dtype = dtype;
    if (b->t[id].role == HFX_ROLE_CONSTANT) b->t[id].data_bytes = hfxb_numel(b, id) * hfxb_dtype_size(dtype);
    return id;
}

/* The engine class an op gets unless a test says otherwise: the first of MATRIX, COPY, VECTOR that
 * its ops.def row allows (a linear RESIZE must be given VECTOR). */
static inline int hfxb_default_engine(uint32_t opcode) {
    uint32_t engines = 0;
#define HFX_OP(NAME, label, min_in, max_in, n_out, engines_, ...) \
    if (opcode == HFX_OP_##NAME) engines = (engines_);
#include "hexfuse/ops.def"
    if (engines & HFX_ENGINE_BIT(MATRIX)) return HFX_ENGINE_MATRIX;
    if (engines & HFX_ENGINE_BIT(COPY)) return HFX_ENGINE_COPY;
    return HFX_ENGINE_VECTOR;
}

/* Generic op. params: 32 values or NULL (all 0). engine < 0: default class. */
static inline uint32_t hfxb_op_add(hfxb *b, int task, uint32_t opcode, int engine, uint32_t nin, const uint32_t *in,
                                   uint32_t out, const int32_t *params) {
    if (b->no == b->co) {
        b->co = b->co ? b->co * 2 : 16;
        b->o = (hfxb_op *)realloc(b->o, sizeof *b->o * b->co);
        if (!b->o) abort();
    }
    hfxb_op *o = &b->o[b->no];
    memset(o, 0, sizeof *o);
    o->opcode = (uint16_t)opcode;
    o->engine = (uint8_t)(engine < 0 ? hfxb_default_engine(opcode) : engine);
    o->task = (uint8_t)task;
    o->nin = (uint8_t)nin;
    o->nout = 1;
    for (uint32_t i = 0; i < HFX_MAX_OP_INPUTS; i++) o->in[i] = i < nin ? in[i] : HFX_NO_TENSOR;
    o->out[0] = out;
    o->out[1] = HFX_NO_TENSOR;
    if (params) memcpy(o->params, params, sizeof o->params);
    return b->no++;
}

static inline uint32_t hfxb_gemm(hfxb *b, int task, uint32_t A, uint32_t B, uint32_t C, uint32_t Y, int ta, int tb,
                                 float alpha, float beta) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_GEMM_TRANS_A] = ta;
    p[HFX_P_GEMM_TRANS_B] = tb;
    p[HFX_P_GEMM_ALPHA] = hfxb_bits(alpha);
    p[HFX_P_GEMM_BETA] = C == HFXB_NONE ? 0 : hfxb_bits(beta);
    uint32_t in[3] = {A, B, C};
    return hfxb_op_add(b, task, HFX_OP_GEMM, -1, C == HFXB_NONE ? 2u : 3u, in, Y, p);
}

static inline uint32_t hfxb_conv(hfxb *b, int task, uint32_t X, uint32_t W, uint32_t Bias, uint32_t Y,
                                 const int32_t pads[4], const int32_t strides[2], const int32_t dil[2], int32_t group) {
    int32_t p[HFX_OP_PARAMS] = {0};
    for (int i = 0; i < 4; i++) p[HFX_P_CONV_PAD_TOP + i] = pads[i];
    p[HFX_P_CONV_STRIDE_H] = strides[0];
    p[HFX_P_CONV_STRIDE_W] = strides[1];
    p[HFX_P_CONV_DILATION_H] = dil[0];
    p[HFX_P_CONV_DILATION_W] = dil[1];
    p[HFX_P_CONV_GROUP] = group;
    uint32_t in[3] = {X, W, Bias};
    return hfxb_op_add(b, task, HFX_OP_CONV2D, -1, Bias == HFXB_NONE ? 2u : 3u, in, Y, p);
}

static inline uint32_t hfxb_binary(hfxb *b, int task, uint32_t opcode, uint32_t x, uint32_t y, uint32_t out) {
    uint32_t in[2] = {x, y};
    return hfxb_op_add(b, task, opcode, -1, 2, in, out, NULL);
}

static inline uint32_t hfxb_unary(hfxb *b, int task, uint32_t opcode, uint32_t x, uint32_t out) {
    return hfxb_op_add(b, task, opcode, -1, 1, &x, out, NULL);
}

static inline uint32_t hfxb_softmax(hfxb *b, int task, uint32_t x, uint32_t out, int32_t axis) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_AXIS] = axis;
    return hfxb_op_add(b, task, HFX_OP_SOFTMAX, -1, 1, &x, out, p);
}

/* opcode HFX_OP_LAYERNORM (bias may be HFXB_NONE) or HFX_OP_RMSNORM (bias must be HFXB_NONE) */
static inline uint32_t hfxb_norm(hfxb *b, int task, uint32_t opcode, uint32_t x, uint32_t scale, uint32_t bias,
                                 uint32_t out, int32_t axis, float eps) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_AXIS] = axis;
    p[HFX_P_EPSILON] = hfxb_bits(eps);
    uint32_t in[3] = {x, scale, bias};
    return hfxb_op_add(b, task, opcode, -1, bias == HFXB_NONE ? 2u : 3u, in, out, p);
}

static inline uint32_t hfxb_reduce(hfxb *b, int task, uint32_t opcode, uint32_t x, uint32_t out, uint32_t axes_mask,
                                   int keepdims) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_REDUCE_AXES_MASK] = (int32_t)axes_mask;
    p[HFX_P_REDUCE_KEEPDIMS] = keepdims;
    return hfxb_op_add(b, task, opcode, -1, 1, &x, out, p);
}

static inline uint32_t hfxb_transpose(hfxb *b, int task, uint32_t x, uint32_t out, const int32_t *perm, uint32_t rank) {
    int32_t p[HFX_OP_PARAMS] = {0};
    for (uint32_t i = 0; i < rank; i++) p[HFX_P_PERM + i] = perm[i];
    return hfxb_op_add(b, task, HFX_OP_TRANSPOSE, -1, 1, &x, out, p);
}

static inline uint32_t hfxb_concat(hfxb *b, int task, uint32_t n, const uint32_t *xs, uint32_t out, int32_t axis) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_AXIS] = axis;
    return hfxb_op_add(b, task, HFX_OP_CONCAT, -1, n, xs, out, p);
}

static inline uint32_t hfxb_slice(hfxb *b, int task, uint32_t x, uint32_t out, const int32_t *starts,
                                  const int32_t *ends, const int32_t *steps, uint32_t rank) {
    int32_t p[HFX_OP_PARAMS] = {0};
    for (uint32_t i = 0; i < rank; i++) {
        p[HFX_P_SLICE_STARTS + i] = starts[i];
        p[HFX_P_SLICE_ENDS + i] = ends[i];
        p[HFX_P_SLICE_STEPS + i] = steps[i];
    }
    return hfxb_op_add(b, task, HFX_OP_SLICE, -1, 1, &x, out, p);
}

static inline uint32_t hfxb_hardsigmoid(hfxb *b, int task, uint32_t x, uint32_t out, float alpha, float beta) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_HARDSIGMOID_ALPHA] = hfxb_bits(alpha);
    p[HFX_P_HARDSIGMOID_BETA] = hfxb_bits(beta);
    return hfxb_op_add(b, task, HFX_OP_HARDSIGMOID, -1, 1, &x, out, p);
}

/* HFX_OP_MAXPOOL / HFX_OP_AVGPOOL; pads t, l, b, r; strides, dilations, kernel as [h, w] */
static inline uint32_t hfxb_pool(hfxb *b, int task, uint32_t opcode, uint32_t x, uint32_t out, const int32_t pads[4],
                                 const int32_t strides[2], const int32_t dil[2], const int32_t kernel[2], int ceil_mode,
                                 int count_include_pad) {
    int32_t p[HFX_OP_PARAMS] = {0};
    for (int i = 0; i < 4; i++) p[HFX_P_POOL_PAD_TOP + i] = pads[i];
    for (int i = 0; i < 2; i++) {
        p[HFX_P_POOL_STRIDE_H + i] = strides[i];
        p[HFX_P_POOL_DILATION_H + i] = dil[i];
        p[HFX_P_POOL_KERNEL_H + i] = kernel[i];
    }
    p[HFX_P_POOL_CEIL_MODE] = ceil_mode;
    p[HFX_P_POOL_COUNT_INCLUDE_PAD] = count_include_pad;
    return hfxb_op_add(b, task, opcode, HFX_ENGINE_VECTOR, 1, &x, out, p);
}

/* mode HFX_RESIZE_NEAREST (copy engine) or HFX_RESIZE_LINEAR (vector engine) */
static inline uint32_t hfxb_resize(hfxb *b, int task, uint32_t x, uint32_t out, int mode, int coord,
                                   int nearest_mode, float scale_h, float scale_w) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_RESIZE_MODE] = mode;
    p[HFX_P_RESIZE_COORD] = coord;
    p[HFX_P_RESIZE_NEAREST_MODE] = nearest_mode;
    p[HFX_P_RESIZE_SCALE_H] = hfxb_bits(scale_h);
    p[HFX_P_RESIZE_SCALE_W] = hfxb_bits(scale_w);
    return hfxb_op_add(b, task, HFX_OP_RESIZE, mode == HFX_RESIZE_LINEAR ? HFX_ENGINE_VECTOR : HFX_ENGINE_COPY, 1, &x,
                       out, p);
}

/* QUANTIZE_LINEAR / DEQUANTIZE_LINEAR; zp may be HFXB_NONE; axis 0 for per tensor */
static inline uint32_t hfxb_quant(hfxb *b, int task, uint32_t opcode, uint32_t x, uint32_t scale, uint32_t zp,
                                  uint32_t out, int32_t axis) {
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_QUANT_AXIS] = axis;
    uint32_t in[3] = {x, scale, zp};
    return hfxb_op_add(b, task, opcode, -1, zp == HFXB_NONE ? 2 : 3, in, out, p);
}

static inline void hfxb_put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void hfxb_put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t hfxb_crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* Encodes the program (malloc'd; caller frees). */
static inline uint8_t *hfxb_encode(const hfxb *b, size_t *size_out) {
    size_t ops_off = HFX_HEADER_BYTES + (size_t)b->nt * HFX_TENSOR_RECORD_BYTES;
    size_t ops_end = ops_off + (size_t)b->no * HFX_OP_RECORD_BYTES;
    size_t data_off = (ops_end + HFX_CONST_ALIGN - 1) / HFX_CONST_ALIGN * HFX_CONST_ALIGN;
    size_t data_bytes = 0;
    for (uint32_t i = 0; i < b->nt; i++)
        if (b->t[i].role == HFX_ROLE_CONSTANT)
            data_bytes += (b->t[i].data_bytes + HFX_CONST_ALIGN - 1) / HFX_CONST_ALIGN * HFX_CONST_ALIGN;
    size_t header = b->v2 ? HFX_HEADER_BYTES_V2 : HFX_HEADER_BYTES;
    ops_off += header - HFX_HEADER_BYTES;
    ops_end += header - HFX_HEADER_BYTES;
    data_off = (ops_end + HFX_CONST_ALIGN - 1) / HFX_CONST_ALIGN * HFX_CONST_ALIGN;
    size_t sections = b->v2 ? b->shapes_bytes + b->quant_bytes : 0;
    size_t total = data_off + data_bytes + sections + (b->crc ? HFX_PROGRAM_CRC_BYTES : 0);
    uint8_t *p = (uint8_t *)calloc(1, total);
    if (!p) abort();
    hfxb_put32(p, HFX_PROGRAM_MAGIC);
    hfxb_put16(p + 4, b->v2 ? HFX_PROGRAM_VERSION_V2 : HFX_PROGRAM_VERSION);
    hfxb_put16(p + 6, (uint32_t)header);
    hfxb_put32(p + 8, (uint32_t)total);
    hfxb_put32(p + 16, b->nt);
    hfxb_put32(p + 20, b->no);
    for (int i = 0; i < 4; i++) hfxb_put16(p + 24 + 2 * i, b->nio[i]);
    hfxb_put32(p + 12, b->crc ? HFX_PROGRAM_FLAG_CRC32 : 0);
    hfxb_put32(p + 32, (uint32_t)header);
    hfxb_put32(p + 36, (uint32_t)ops_off);
    hfxb_put32(p + 40, (uint32_t)data_off);
    hfxb_put32(p + 44, (uint32_t)data_bytes);
    size_t dpos = 0;
    for (uint32_t i = 0; i < b->nt; i++) {
        const hfxb_tensor *t = &b->t[i];
        uint8_t *r = p + header + (size_t)i * HFX_TENSOR_RECORD_BYTES;
        r[0] = t->dtype;
        r[1] = t->role;
        r[2] = t->task;
        r[3] = t->rank;
        uint32_t io = 0;
        if (t->role == HFX_ROLE_INPUT) io = t->io + (t->task ? b->nio[0] : 0);
        if (t->role == HFX_ROLE_OUTPUT) io = t->io + (t->task ? b->nio[2] : 0);
        hfxb_put32(r + 4, io);
        for (uint32_t d = 0; d < t->rank && d < HFX_MAX_RANK; d++) hfxb_put32(r + 8 + 4 * d, t->dims[d]);
        if (t->role == HFX_ROLE_CONSTANT) {
            hfxb_put32(r + 40, (uint32_t)dpos);
            hfxb_put32(r + 44, (uint32_t)t->data_bytes);
            if (t->data) memcpy(p + data_off + dpos, t->data, t->data_bytes);
            dpos += (t->data_bytes + HFX_CONST_ALIGN - 1) / HFX_CONST_ALIGN * HFX_CONST_ALIGN;
        }
    }
    for (uint32_t i = 0; i < b->no; i++) {
        const hfxb_op *o = &b->o[i];
        uint8_t *r = p + ops_off + (size_t)i * HFX_OP_RECORD_BYTES;
        hfxb_put16(r, o->opcode);
        r[2] = o->engine;
        r[3] = o->task;
        r[4] = o->nin;
        r[5] = o->nout;
        for (uint32_t k = 0; k < HFX_MAX_OP_INPUTS; k++) hfxb_put32(r + 8 + 4 * k, o->in[k]);
        for (uint32_t k = 0; k < HFX_MAX_OP_OUTPUTS; k++) hfxb_put32(r + 40 + 4 * k, o->out[k]);
        for (uint32_t k = 0; k < HFX_OP_PARAMS; k++) hfxb_put32(r + 48 + 4 * k, (uint32_t)o->params[k]);
    }
    if (b->v2) {
        hfxb_put32(p + HFX_HDR_SHAPES_BYTES, (uint32_t)b->shapes_bytes);
        hfxb_put32(p + HFX_HDR_QUANT_BYTES, (uint32_t)b->quant_bytes);
        if (b->shapes_bytes) memcpy(p + data_off + data_bytes, b->shapes, b->shapes_bytes);
        if (b->quant_bytes) memcpy(p + data_off + data_bytes + b->shapes_bytes, b->quant, b->quant_bytes);
    }
    if (b->crc) hfxb_put32(p + total - 4, hfxb_crc32(p, total - 4));
    *size_out = total;
    return p;
}


/* ---- v2 sections ----------------------------------------------------------------------
 *   hfxb_sec s = {0};
 *   hfxb_sec_symbols(&s, 2, (uint32_t[]){0, 0, 0, 1});   symbol 0 = input 0 axis 0, ...
 *   hfxb_sec_patch(&s, HFX_PATCH_TENSOR_DIM, x, 0, 1, (uint32_t[]){HFX_EXPR_SYM | 0 << 8});
 *   uint8_t *bytes = hfxb_encode_shapes(&b, &s, 0, &n);      v2 with the section; frees s and b
 * Patches are counted as they are added (the count word follows the symbols). */
typedef struct hfxb_sec {
    uint8_t *bytes;
    size_t n, cap;
    size_t count_at; /* n_patches word */
} hfxb_sec;

static inline void hfxb_sec_u32(hfxb_sec *s, uint32_t v) {
    if (s->n + 4 > s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->bytes = (uint8_t *)realloc(s->bytes, s->cap);
        if (!s->bytes) abort();
    }
    hfxb_put32(s->bytes + s->n, v);
    s->n += 4;
}
static inline void hfxb_sec_free(hfxb_sec *s) {
    free(s->bytes);
    memset(s, 0, sizeof *s);
}
/* io_axis: n pairs (io_index, axis) */
static inline void hfxb_sec_symbols(hfxb_sec *s, uint32_t n, const uint32_t *io_axis) {
    hfxb_sec_u32(s, n);
    for (uint32_t k = 0; k < 2 * n; k++) hfxb_sec_u32(s, io_axis[k]);
    s->count_at = s->n;
    hfxb_sec_u32(s, 0);
}
static inline void hfxb_sec_patch(hfxb_sec *s, uint32_t target, uint32_t id, uint32_t slot, uint32_t n_words,
                                  const uint32_t *code) {
    hfxb_sec_u32(s, target | (n_words << 16));
    hfxb_sec_u32(s, id);
    hfxb_sec_u32(s, slot);
    for (uint32_t i = 0; i < n_words; i++) hfxb_sec_u32(s, code[i]);
    uint32_t count = (uint32_t)s->bytes[s->count_at] | (uint32_t)s->bytes[s->count_at + 1] << 8;
    hfxb_put32(s->bytes + s->count_at, count + 1);
}
/* the lone SYM k that patches an input dim */
static inline void hfxb_sec_input_dim(hfxb_sec *s, uint32_t tensor, uint32_t axis, uint32_t k) {
    uint32_t code = HFX_EXPR_SYM | (k << 8);
    hfxb_sec_patch(s, HFX_PATCH_TENSOR_DIM, tensor, axis, 1, &code);
}
/* Encodes the program as v2 with the shape section `s` (and a CRC when crc), then frees s and b
 * (the program is malloc'd; caller frees). */
static inline uint8_t *hfxb_encode_shapes(hfxb *b, hfxb_sec *s, int crc, size_t *size_out) {
    b->v2 = 1;
    b->crc = crc;
    b->shapes = s->bytes;
    b->shapes_bytes = s->n;
    uint8_t *bytes = hfxb_encode(b, size_out);
    hfxb_sec_free(s);
    hfxb_free(b);
    return bytes;
}

#endif /* HEXFUSE_PROGRAM_BUILDER_H */
