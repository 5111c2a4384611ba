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

void hfx_error_vset(hfx_error *err, hfx_status st, size_t offset, const char *fmt, va_list ap) {
    if (!err) return;
    err->status = st;
    err->byte_offset = offset > 0xffffffffu ? 0xffffffffu : (uint32_t)offset;
    char *buf = err->message;
    size_t cap = sizeof err->message, n = 0;
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
    buf[n] = '\0';
}

void hfx_error_set(hfx_error *err, hfx_status st, size_t offset, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hfx_error_vset(err, st, offset, fmt, ap);
    va_end(ap);
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
    case HFX_ERR_SHAPES: return "HFX_ERR_SHAPES";
    case HFX_ERR_QUANT: return "HFX_ERR_QUANT";
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
    case HFX_DTYPE_U16: return 2;
    case HFX_DTYPE_I16: return 2;
    case HFX_DTYPE_BOOL: return 1;
    default: return 0;
    }
}

/* ---- little-endian reads (callers checked bounds) ---------------------------- */

#define rd_u16 hfx_rd_u16
#define rd_u32 hfx_rd_u32

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
    hfx_plat_free(p->quant_rec);
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
uint32_t hfx_program_version(const hfx_program *p) { return p ? p->version : 0; }
uint32_t hfx_program_num_symbols(const hfx_program *p) { return p ? p->n_symbols : 0; }

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

/* ---- validation helpers shared by the op families ------------------------------------ */

hfx_status hfx_vfail(hfx_vctx *v, hfx_status st, size_t offset, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hfx_error_vset(v->err, st, offset, fmt, ap);
    va_end(ap);
    return st;
}

bool hfx_same_shape(const hfx_tensor *a, const uint32_t *dims, uint32_t rank) {
    if (a->rank != rank) return false;
    for (uint32_t i = 0; i < rank; i++)
        if (a->dims[i] != dims[i]) return false;
    return true;
}

hfx_status hfx_shape_err(hfx_vctx *v, const char *what) {
    return hfx_vfail(v, HFX_ERR_SHAPE, HFX_OUT_OFF(v, 0), "op %u: output shape does not match %s", v->index, what);
}

hfx_status hfx_same_as_input(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    return hfx_same_shape(y, x->dims, x->rank) ? HFX_OK : hfx_shape_err(v, "the input");
}

bool hfx_broadcast2(const uint32_t *ad, uint32_t ar, const uint32_t *bd, uint32_t br, uint32_t *od, uint32_t *orank) {
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

bool hfx_broadcastable_to(const hfx_tensor *t, const uint32_t *dims, uint32_t rank) {
    if (t->rank > rank) return false;
    for (uint32_t i = 0; i < t->rank; i++) {
        uint32_t d = t->dims[i], o = dims[rank - t->rank + i];
        if (d != o && d != 1) return false;
    }
    return true;
}

bool hfx_outputs_empty(const hfx_program *p, const hfx_op *op) {
    for (uint32_t i = 0; i < op->n_out; i++)
        if (p->tensors[op->out[i]].numel != 0) return false;
    return true;
}

hfx_status hfx_no_empty_input(hfx_vctx *v, const hfx_op *op) {
    if (hfx_outputs_empty(v->p, op)) return HFX_OK;
    for (uint32_t i = 0; i < op->n_in; i++)
        if (v->p->tensors[op->in[i]].numel == 0)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, i),
                             "op %u (%s): input %u is empty but the output is not (unsupported)", v->index,
                             op->desc->label, i);
    return HFX_OK;
}

hfx_status hfx_check_axis(hfx_vctx *v, hfx_op *op, uint32_t rank, uint32_t *axis_out) {
    int32_t a = op->params[HFX_P_AXIS];
    if (a < -(int32_t)rank || a >= (int32_t)rank)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_AXIS), "op %u: axis %d out of range for rank %u",
                         v->index, (int)a, rank);
    if (a < 0) a += (int32_t)rank;
    op->params[HFX_P_AXIS] = a; /* normalized */
    *axis_out = (uint32_t)a;
    return HFX_OK;
}

/* ---- parse --------------------------------------------------------------------------- */

#define FAIL(st, off, ...)                            \
    do {                                              \
        hfx_error_set(err, (st), (off), __VA_ARGS__); \
        return (st);                                  \
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
uint32_t hfx_crc32(const uint8_t *b, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* The header's fields, read and checked against the buffer. */
typedef struct header {
    uint32_t version, header_bytes;
    uint32_t flags, n_tensors, n_ops;
    uint32_t n_io[4]; /* inputs A, B, outputs A, B */
    uint32_t tensors_off, ops_off, data_off, data_bytes;
    uint32_t shapes_bytes, quant_bytes; /* v2 */
    uint32_t data_end;                  /* where the data section must end */
    uint64_t ops_end;
} header;

static void read_fields(const uint8_t *b, header *h) {
    h->flags = rd_u32(b + HFX_HDR_FLAGS);
    h->n_tensors = rd_u32(b + HFX_HDR_N_TENSORS);
    h->n_ops = rd_u32(b + HFX_HDR_N_OPS);
    for (int i = 0; i < 4; i++) h->n_io[i] = rd_u16(b + HFX_HDR_N_IO + 2 * i);
    h->tensors_off = rd_u32(b + HFX_HDR_TENSORS_OFFSET);
    h->ops_off = rd_u32(b + HFX_HDR_OPS_OFFSET);
    h->data_off = rd_u32(b + HFX_HDR_DATA_OFFSET);
    h->data_bytes = rd_u32(b + HFX_HDR_DATA_BYTES);
    h->shapes_bytes = h->quant_bytes = 0;
}

/* v2: the section sizes and the reserved words (size >= HFX_HEADER_BYTES_V2) */
static hfx_status read_v2_fields(const uint8_t *b, header *h, hfx_error *err) {
    h->shapes_bytes = rd_u32(b + HFX_HDR_SHAPES_BYTES);
    h->quant_bytes = rd_u32(b + HFX_HDR_QUANT_BYTES);
    if (h->shapes_bytes % 4 != 0)
        FAIL(HFX_ERR_HEADER, HFX_HDR_SHAPES_BYTES, "shape section size %u not a multiple of 4", h->shapes_bytes);
    if (h->quant_bytes % 4 != 0)
        FAIL(HFX_ERR_HEADER, HFX_HDR_QUANT_BYTES, "quantization section size %u not a multiple of 4", h->quant_bytes);
    for (uint32_t i = 0; i < 2; i++)
        if (rd_u32(b + HFX_HDR_RESERVED + 4 * i) != 0)
            FAIL(HFX_ERR_HEADER, HFX_HDR_RESERVED + 4 * i, "reserved header word %u must be 0", i);
    return HFX_OK;
}

/* the CRC-32 trailer (flag set): strips it from h->data_end */
static hfx_status check_crc(const uint8_t *b, header *h, hfx_error *err) {
    h->data_end -= HFX_PROGRAM_CRC_BYTES; /* total >= the header size here */
    uint32_t want = rd_u32(b + h->data_end), got = hfx_crc32(b, h->data_end);
    if (got != want)
        FAIL(HFX_ERR_HEADER, h->data_end, "checksum mismatch: the program is corrupted (CRC-32 %u, stored %u)", got,
             want);
    return HFX_OK;
}

/* magic, version, sizes, flags and checksum; the fields into h */
static hfx_status read_header(const uint8_t *b, size_t size, header *h, hfx_error *err) {
    if (size < 4) FAIL(HFX_ERR_TRUNCATED, size, "program shorter than its magic (%U bytes)", (uint64_t)size);
    if (rd_u32(b + HFX_HDR_MAGIC) != HFX_PROGRAM_MAGIC) FAIL(HFX_ERR_MAGIC, 0, "bad magic (expected 'HFXP')");
    if (size < HFX_HEADER_BYTES) FAIL(HFX_ERR_TRUNCATED, size, "program shorter than the header");
    h->version = rd_u16(b + HFX_HDR_VERSION);
    if (h->version != HFX_PROGRAM_VERSION && h->version != HFX_PROGRAM_VERSION_V2)
        FAIL(HFX_ERR_VERSION, HFX_HDR_VERSION, "unsupported version %u (this build reads 1 and 2)", h->version);
    bool v2 = h->version == HFX_PROGRAM_VERSION_V2;
    h->header_bytes = v2 ? HFX_HEADER_BYTES_V2 : HFX_HEADER_BYTES;
    if (size < h->header_bytes) FAIL(HFX_ERR_TRUNCATED, size, "program shorter than the v2 header");
    uint32_t header_bytes = rd_u16(b + HFX_HDR_HEADER_BYTES);
    uint32_t total = rd_u32(b + HFX_HDR_TOTAL_BYTES);
    read_fields(b, h);
    if (header_bytes != h->header_bytes)
        FAIL(HFX_ERR_HEADER, HFX_HDR_HEADER_BYTES, "header size %u, expected %u", header_bytes, h->header_bytes);
    if (total > size) FAIL(HFX_ERR_TRUNCATED, size, "program has %U bytes, header says %u", (uint64_t)size, total);
    if (total != size)
        FAIL(HFX_ERR_HEADER, HFX_HDR_TOTAL_BYTES, "total size %u but %U bytes given", total, (uint64_t)size);
    if (h->flags & ~HFX_PROGRAM_FLAG_CRC32)
        FAIL(HFX_ERR_HEADER, HFX_HDR_FLAGS, "unknown flags %u", h->flags & ~HFX_PROGRAM_FLAG_CRC32);
    h->data_end = total;
    hfx_status st = (h->flags & HFX_PROGRAM_FLAG_CRC32) ? check_crc(b, h, err) : HFX_OK;
    if (!st && v2) st = read_v2_fields(b, h, err);
    return st;
}

/* v2: the sections sit between the data section and the CRC */
static hfx_status place_sections(header *h, hfx_error *err) {
    uint64_t tail = (uint64_t)h->shapes_bytes + h->quant_bytes;
    if (tail + h->header_bytes > h->data_end)
        FAIL(HFX_ERR_HEADER, HFX_HDR_SHAPES_BYTES, "sections of %U bytes do not fit the %u program bytes", tail,
             h->data_end);
    h->data_end -= (uint32_t)tail;
    if (h->data_bytes % 4 != 0)
        FAIL(HFX_ERR_HEADER, HFX_HDR_DATA_BYTES, "data section size %u not a multiple of 4 (v2)", h->data_bytes);
    return HFX_OK;
}

/* counts, and the tables and the data section laid out back to back */
static hfx_status check_layout(const uint8_t *b, size_t size, header *h, hfx_error *err) {
    if (h->n_tensors == 0 || h->n_tensors > HFX_MAX_TENSORS)
        FAIL(HFX_ERR_HEADER, HFX_HDR_N_TENSORS, "tensor count %u out of range", h->n_tensors);
    if (h->n_ops == 0 || h->n_ops > HFX_MAX_OPS)
        FAIL(HFX_ERR_HEADER, HFX_HDR_N_OPS, "op count %u out of range", h->n_ops);
    for (int i = 0; i < 4; i++)
        if (h->n_io[i] > HFX_MAX_IO)
            FAIL(HFX_ERR_HEADER, (size_t)(HFX_HDR_N_IO + 2 * i), "io count %u out of range", h->n_io[i]);
    if (h->tensors_off != h->header_bytes)
        FAIL(HFX_ERR_HEADER, HFX_HDR_TENSORS_OFFSET, "tensor table offset %u, expected %u", h->tensors_off,
             h->header_bytes);
    uint64_t tensors_end = (uint64_t)h->tensors_off + (uint64_t)h->n_tensors * HFX_TENSOR_RECORD_BYTES;
    if (h->ops_off != tensors_end)
        FAIL(HFX_ERR_HEADER, HFX_HDR_OPS_OFFSET, "op table offset %u, expected %U", h->ops_off, tensors_end);
    h->ops_end = (uint64_t)h->ops_off + (uint64_t)h->n_ops * HFX_OP_RECORD_BYTES;
    if (h->ops_end > size)
        FAIL(HFX_ERR_TRUNCATED, size, "tables end at %U, beyond the %U program bytes", h->ops_end, (uint64_t)size);
    if (h->version == HFX_PROGRAM_VERSION_V2) {
        hfx_status st = place_sections(h, err);
        if (st) return st;
    }
    uint64_t data_min = (h->ops_end + HFX_CONST_ALIGN - 1) / HFX_CONST_ALIGN * HFX_CONST_ALIGN;
    if (h->data_off < h->ops_end || h->data_off % HFX_CONST_ALIGN != 0 || h->data_off > data_min)
        FAIL(HFX_ERR_HEADER, HFX_HDR_DATA_OFFSET, "data offset %u, expected %U", h->data_off, data_min);
    if ((uint64_t)h->data_off + h->data_bytes != h->data_end)
        FAIL(HFX_ERR_HEADER, HFX_HDR_DATA_BYTES, "data section %u+%u does not end at %u", h->data_off, h->data_bytes,
             h->data_end);
    for (uint64_t i = h->ops_end; i < h->data_off; i++)
        if (b[i] != 0) FAIL(HFX_ERR_HEADER, (size_t)i, "padding before the data section must be 0");
    return HFX_OK;
}

static hfx_program *alloc_program(const uint8_t *b, size_t size, const header *h) {
    hfx_program *p = zalloc(1, sizeof *p);
    if (!p) return NULL;
    uint32_t n_in = h->n_io[0] + h->n_io[1], n_out = h->n_io[2] + h->n_io[3];
    p->blob = hfx_plat_alloc(size, 128);
    p->tensors = zalloc(h->n_tensors, sizeof *p->tensors);
    p->ops = zalloc(h->n_ops, sizeof *p->ops);
    p->input_tensor = zalloc(n_in, sizeof(uint32_t));
    p->output_tensor = zalloc(n_out, sizeof(uint32_t));
    p->task_ops[0] = zalloc(h->n_ops, sizeof(uint32_t));
    p->task_ops[1] = zalloc(h->n_ops, sizeof(uint32_t));
    if (!p->blob || !p->tensors || !p->ops || !p->input_tensor || !p->output_tensor || !p->task_ops[0] ||
        !p->task_ops[1]) {
        hfx_program_free(p);
        return NULL;
    }
    memcpy(p->blob, b, size);
    p->blob_size = size;
    p->n_tensors = h->n_tensors;
    p->n_ops = h->n_ops;
    p->n_inputs[0] = h->n_io[0];
    p->n_inputs[1] = h->n_io[1];
    p->n_outputs[0] = h->n_io[2];
    p->n_outputs[1] = h->n_io[3];
    p->version = h->version;
    p->shapes_off = (uint32_t)h->data_off + h->data_bytes;
    p->shapes_bytes = h->shapes_bytes;
    p->quant_off = p->shapes_off + h->shapes_bytes;
    p->quant_bytes = h->quant_bytes;
    for (uint32_t i = 0; i < n_in; i++) p->input_tensor[i] = HFX_NO_TENSOR;
    for (uint32_t i = 0; i < n_out; i++) p->output_tensor[i] = HFX_NO_TENSOR;
    return p;
}

/* dims, element count and byte size of tensor record t at byte r */
static hfx_status parse_dims(const uint8_t *rec, size_t r, uint32_t t, hfx_tensor *T, hfx_error *err) {
    size_t es = hfx_dtype_size(T->dtype);
    uint64_t numel = 1;
    for (uint32_t i = 0; i < HFX_MAX_RANK; i++) {
        size_t at = HFX_TREC_DIMS + 4u * i;
        uint32_t d = rd_u32(rec + at);
        if (i < T->rank) {
            if (d > 0x7fffffffu) FAIL(HFX_ERR_TENSOR, r + at, "tensor %u: dim %u = %u out of range", t, i, d);
            numel *= d;
            if (numel > HFX_MAX_TENSOR_BYTES)
                FAIL(HFX_ERR_SIZE, r + at, "tensor %u: element count overflows the size limit", t);
        } else if (d != 0) {
            FAIL(HFX_ERR_TENSOR, r + at, "tensor %u: dim %u beyond rank must be 0", t, i);
        }
        T->dims[i] = d;
    }
    if (numel * es > HFX_MAX_TENSOR_BYTES)
        FAIL(HFX_ERR_SIZE, r + HFX_TREC_DIMS, "tensor %u: byte size over the limit", t);
    T->numel = numel;
    T->bytes = (size_t)(numel * es);
    return HFX_OK;
}

/* a constant's bytes, or none for the other roles */
static hfx_status parse_data_ref(const uint8_t *rec, size_t r, uint32_t t, hfx_tensor *T, const header *h,
                                 hfx_error *err) {
    uint32_t doff = rd_u32(rec + HFX_TREC_DATA_OFFSET), dbytes = rd_u32(rec + HFX_TREC_DATA_BYTES);
    if (T->role != HFX_ROLE_CONSTANT) {
        if (doff != 0 || dbytes != 0)
            FAIL(HFX_ERR_TENSOR, r + HFX_TREC_DATA_OFFSET, "tensor %u: data offset/size set on a non-constant", t);
        return HFX_OK;
    }
    if (doff % HFX_CONST_ALIGN != 0)
        FAIL(HFX_ERR_TENSOR, r + HFX_TREC_DATA_OFFSET, "tensor %u: constant offset %u not %u-aligned", t, doff,
             HFX_CONST_ALIGN);
    if (dbytes != T->bytes)
        FAIL(HFX_ERR_SIZE, r + HFX_TREC_DATA_BYTES, "tensor %u: constant has %u bytes, shape needs %U", t, dbytes,
             (uint64_t)T->bytes);
    if ((uint64_t)doff + dbytes > h->data_bytes)
        FAIL(HFX_ERR_SIZE, r + HFX_TREC_DATA_OFFSET, "tensor %u: constant bytes beyond the data section", t);
    T->const_offset = (size_t)h->data_off + doff;
    return HFX_OK;
}

/* an input's or output's io slot within its task's range */
static hfx_status parse_io_index(hfx_program *p, size_t r, uint32_t t, const hfx_tensor *T, const header *h,
                                 hfx_error *err) {
    size_t at = r + HFX_TREC_IO_INDEX;
    if (T->role != HFX_ROLE_INPUT && T->role != HFX_ROLE_OUTPUT) {
        if (T->io_index != 0) FAIL(HFX_ERR_TENSOR, at, "tensor %u: io index set on a constant/scratch", t);
        return HFX_OK;
    }
    bool in = T->role == HFX_ROLE_INPUT;
    uint32_t na = in ? h->n_io[0] : h->n_io[2], nb = in ? h->n_io[1] : h->n_io[3];
    uint32_t lo = T->task == 0 ? 0 : na, hi = T->task == 0 ? na : na + nb;
    if (T->io_index < lo || T->io_index >= hi)
        FAIL(HFX_ERR_TENSOR, at, "tensor %u: io index %u outside task %u's range [%u, %u)", t, T->io_index, T->task, lo,
             hi);
    uint32_t *slot = in ? &p->input_tensor[T->io_index] : &p->output_tensor[T->io_index];
    if (*slot != HFX_NO_TENSOR) FAIL(HFX_ERR_TENSOR, at, "tensor %u: io index %u used twice", t, T->io_index);
    *slot = t;
    return HFX_OK;
}

static hfx_status parse_tensor(hfx_program *p, const header *h, uint32_t t, hfx_error *err) {
    size_t r = h->tensors_off + (size_t)t * HFX_TENSOR_RECORD_BYTES;
    const uint8_t *rec = p->blob + r;
    hfx_tensor *T = &p->tensors[t];
    T->dtype = rec[HFX_TREC_DTYPE];
    T->role = rec[HFX_TREC_ROLE];
    T->task = rec[HFX_TREC_TASK];
    T->rank = rec[HFX_TREC_RANK];
    T->io_index = rd_u32(rec + HFX_TREC_IO_INDEX);
    T->producer = HFX_NO_TENSOR;
    T->first_use = T->last_use = HFX_NO_TENSOR;
    bool v2_dtype = T->dtype == HFX_DTYPE_U16 || T->dtype == HFX_DTYPE_I16 || T->dtype == HFX_DTYPE_BOOL;
    if (hfx_dtype_size(T->dtype) == 0 || (v2_dtype && h->version != HFX_PROGRAM_VERSION_V2))
        FAIL(HFX_ERR_DTYPE, r + HFX_TREC_DTYPE, "tensor %u: unknown dtype %u", t, T->dtype);
    if (T->role < HFX_ROLE_INPUT || T->role > HFX_ROLE_SCRATCH)
        FAIL(HFX_ERR_TENSOR, r + HFX_TREC_ROLE, "tensor %u: bad role %u", t, T->role);
    if (T->task > 1) FAIL(HFX_ERR_TENSOR, r + HFX_TREC_TASK, "tensor %u: bad task %u", t, T->task);
    if (T->rank > HFX_MAX_RANK)
        FAIL(HFX_ERR_TENSOR, r + HFX_TREC_RANK, "tensor %u: rank %u > %u", t, T->rank, HFX_MAX_RANK);
    hfx_status st = parse_dims(rec, r, t, T, err);
    if (!st) st = parse_data_ref(rec, r, t, T, h, err);
    if (!st) st = parse_io_index(p, r, t, T, h, err);
    return st;
}

static hfx_status parse_tensors(hfx_program *p, const header *h, hfx_error *err) {
    for (uint32_t t = 0; t < h->n_tensors; t++) {
        hfx_status st = parse_tensor(p, h, t, err);
        if (st) return st;
    }
    for (uint32_t i = 0; i < h->n_io[0] + h->n_io[1]; i++)
        if (p->input_tensor[i] == HFX_NO_TENSOR) FAIL(HFX_ERR_TENSOR, HFX_HDR_N_IO, "no tensor for input %u", i);
    for (uint32_t i = 0; i < h->n_io[2] + h->n_io[3]; i++)
        if (p->output_tensor[i] == HFX_NO_TENSOR) FAIL(HFX_ERR_TENSOR, HFX_HDR_N_IO + 4, "no tensor for output %u", i);
    return HFX_OK;
}

/* the op's input tensor ids: in range, same task, already written, f32 (typed ops: their validation) */
static hfx_status parse_op_inputs(const hfx_program *p, const uint8_t *rec, size_t r, uint32_t o, hfx_op *op,
                                  const uint8_t *written, hfx_error *err) {
    for (uint32_t i = 0; i < HFX_MAX_OP_INPUTS; i++) {
        size_t at = r + HFX_OREC_INPUTS + 4u * i;
        uint32_t id = rd_u32(rec + HFX_OREC_INPUTS + 4u * i);
        op->in[i] = id;
        if (i >= op->n_in) {
            if (id != HFX_NO_TENSOR) FAIL(HFX_ERR_OP, at, "op %u: unused input slot %u must be 0xffffffff", o, i);
            continue;
        }
        if (id >= p->n_tensors) FAIL(HFX_ERR_OP, at, "op %u: input %u tensor id %u out of range", o, i, id);
        const hfx_tensor *T = &p->tensors[id];
        if (T->task != op->task) FAIL(HFX_ERR_GRAPH, at, "op %u: input tensor %u belongs to the other task", o, id);
        if ((T->role == HFX_ROLE_SCRATCH || T->role == HFX_ROLE_OUTPUT) && !written[id])
            FAIL(HFX_ERR_GRAPH, at, "op %u: reads tensor %u before any op writes it", o, id);
        if (T->dtype != HFX_DTYPE_F32 && !op->desc->typed)
            FAIL(HFX_ERR_DTYPE, at, "op %u: tensor %u dtype %u unsupported (v1: f32)", o, id, T->dtype);
    }
    return HFX_OK;
}

/* the op's output tensor ids: in range, same task, scratch or output, written once, not an input, f32 */
static hfx_status parse_op_outputs(const hfx_program *p, const uint8_t *rec, size_t r, uint32_t o, hfx_op *op,
                                   const uint8_t *written, hfx_error *err) {
    for (uint32_t i = 0; i < HFX_MAX_OP_OUTPUTS; i++) {
        size_t at = r + HFX_OREC_OUTPUTS + 4u * i;
        uint32_t id = rd_u32(rec + HFX_OREC_OUTPUTS + 4u * i);
        op->out[i] = id;
        if (i >= op->n_out) {
            if (id != HFX_NO_TENSOR) FAIL(HFX_ERR_OP, at, "op %u: unused output slot must be 0xffffffff", o);
            continue;
        }
        if (id >= p->n_tensors) FAIL(HFX_ERR_OP, at, "op %u: output tensor id %u out of range", o, id);
        const hfx_tensor *T = &p->tensors[id];
        if (T->task != op->task) FAIL(HFX_ERR_GRAPH, at, "op %u: output tensor %u belongs to the other task", o, id);
        if (T->role != HFX_ROLE_SCRATCH && T->role != HFX_ROLE_OUTPUT)
            FAIL(HFX_ERR_GRAPH, at, "op %u: writes tensor %u which is an input or constant", o, id);
        if (written[id]) FAIL(HFX_ERR_GRAPH, at, "op %u: tensor %u written twice", o, id);
        for (uint32_t k = 0; k < op->n_in; k++)
            if (op->in[k] == id) FAIL(HFX_ERR_GRAPH, at, "op %u: tensor %u is input and output", o, id);
        if (T->dtype != HFX_DTYPE_F32 && !op->desc->typed)
            FAIL(HFX_ERR_DTYPE, at, "op %u: tensor %u dtype %u unsupported (v1: f32)", o, id, T->dtype);
    }
    return HFX_OK;
}

/* the fixed fields of op record o against its ops.def row */
static hfx_status parse_op_fields(const uint8_t *rec, size_t r, uint32_t o, hfx_op *op, hfx_error *err) {
    op->opcode = rd_u16(rec + HFX_OREC_OPCODE);
    op->engine = rec[HFX_OREC_ENGINE];
    op->task = rec[HFX_OREC_TASK];
    op->n_in = rec[HFX_OREC_N_IN];
    op->n_out = rec[HFX_OREC_N_OUT];
    const hfx_op_desc *d = op->desc = hfx_op_desc_find(op->opcode);
    if (!d) FAIL(HFX_ERR_OP, r + HFX_OREC_OPCODE, "op %u: unknown opcode %u", o, op->opcode);
    if (op->engine >= HFX_NUM_ENGINES || !(d->engines & (1u << op->engine)))
        FAIL(HFX_ERR_OP, r + HFX_OREC_ENGINE, "op %u (%s): engine class %u not allowed", o, d->label, op->engine);
    if (op->task > 1) FAIL(HFX_ERR_OP, r + HFX_OREC_TASK, "op %u: bad task %u", o, op->task);
    if (op->n_in < d->min_in || op->n_in > d->max_in)
        FAIL(HFX_ERR_OP, r + HFX_OREC_N_IN, "op %u (%s): %u inputs, expected %u..%u", o, d->label, op->n_in, d->min_in,
             d->max_in);
    if (op->n_out != d->n_out)
        FAIL(HFX_ERR_OP, r + HFX_OREC_N_OUT, "op %u (%s): %u outputs, expected %u", o, d->label, op->n_out, d->n_out);
    if (rd_u16(rec + HFX_OREC_RESERVED) != 0)
        FAIL(HFX_ERR_OP, r + HFX_OREC_RESERVED, "op %u: reserved field must be 0", o);
    return HFX_OK;
}

static hfx_status parse_op_params(const uint8_t *rec, size_t r, uint32_t o, hfx_op *op, hfx_error *err) {
    for (uint32_t i = 0; i < HFX_OP_PARAMS; i++) {
        op->params[i] = (int32_t)rd_u32(rec + HFX_OREC_PARAMS + 4u * i);
        if (i >= op->desc->n_params && op->params[i] != 0)
            FAIL(HFX_ERR_PARAM, r + HFX_OREC_PARAMS + 4u * i, "op %u (%s): param %u must be 0", o, op->desc->label, i);
    }
    return HFX_OK;
}

/* appends op o to its task and records the tensors' producer and lifetimes */
static void commit_dataflow(hfx_program *p, uint32_t o, hfx_op *op, uint8_t *written) {
    op->task_index = p->n_task_ops[op->task];
    p->task_ops[op->task][p->n_task_ops[op->task]++] = o;
    for (uint32_t i = 0; i < op->n_in; i++) p->tensors[op->in[i]].last_use = op->task_index;
    for (uint32_t i = 0; i < op->n_out; i++) {
        hfx_tensor *T = &p->tensors[op->out[i]];
        written[op->out[i]] = 1;
        T->producer = o;
        T->first_use = op->task_index;
        T->last_use = op->task_index;
    }
}

static hfx_status parse_op(hfx_program *p, const header *h, uint32_t o, uint8_t *written, hfx_error *err) {
    size_t r = h->ops_off + (size_t)o * HFX_OP_RECORD_BYTES;
    const uint8_t *rec = p->blob + r;
    hfx_op *op = &p->ops[o];
    hfx_status st = parse_op_fields(rec, r, o, op, err);
    if (!st) st = parse_op_inputs(p, rec, r, o, op, written, err);
    if (!st) st = parse_op_outputs(p, rec, r, o, op, written, err);
    if (!st) st = parse_op_params(rec, r, o, op, err);
    hfx_vctx v = {p, err, r, o};
    if (!st) st = op->desc->validate(&v, op);
    if (!st && p->quant_rec) st = hfx_quant_check_op(&v, op);
    if (st) return st;
    commit_dataflow(p, o, op, written);
    memset(&op->plan, 0, sizeof op->plan);
    if (hfx_outputs_empty(p, op)) return HFX_OK; /* nothing to write: no work items */
    st = op->desc->plan(p, op);
    if (st) FAIL(st, r, "op %u (%s): cannot plan work items", o, op->desc->label);
    p->task_items[op->task] += op->plan.n_items;
    if (op->plan.ws_bytes > p->ws_bytes) p->ws_bytes = op->plan.ws_bytes;
    return HFX_OK;
}

static hfx_status parse_ops(hfx_program *p, const header *h, hfx_error *err) {
    uint8_t *written = zalloc(h->n_tensors, 1);
    if (!written) FAIL(HFX_ERR_NOMEM, 0, "out of memory");
    hfx_status st = HFX_OK;
    for (uint32_t o = 0; o < h->n_ops && !st; o++) st = parse_op(p, h, o, written, err);
    for (uint32_t t = 0; t < h->n_tensors && !st; t++) {
        const hfx_tensor *T = &p->tensors[t];
        if ((T->role == HFX_ROLE_OUTPUT || T->role == HFX_ROLE_SCRATCH) && !written[t]) {
            hfx_error_set(err, HFX_ERR_GRAPH, h->tensors_off + (size_t)t * HFX_TENSOR_RECORD_BYTES + HFX_TREC_ROLE,
                          "tensor %u (%s) is never written", t, T->role == HFX_ROLE_OUTPUT ? "output" : "scratch");
            st = HFX_ERR_GRAPH;
        }
    }
    hfx_plat_free(written);
    return st;
}

#if !defined(__hexagon__)
/* The sums of every op a QUANTIZE_LINEAR's X depends on (a DynamicQuantizeLinear's too), in ORT's order: one ulp
 * of difference anywhere up there may move a code, and a code one step off moves what follows by a step
 * (e5-small-v2's Softmax into the attention MatMul, its GELU's Erf and its LayerNorm's ReduceMeans, each a few
 * exact ops before a DynamicQuantizeLinear: 1.5e-3 relative at the next LayerNorm). A walk up from each
 * QUANTIZE_LINEAR's X with a stack of ops (each op pushed once). */
static void sum_quantized_in(hfx_program *p) {
    uint32_t n = p->n_ops ? p->n_ops : 1;
    uint8_t *seen = zalloc(n, 1);
    uint32_t *stack = zalloc(n, sizeof *stack);
    uint32_t top = 0;
    for (uint32_t o = 0; seen && stack && o < p->n_ops; o++) { /* a QUANTIZE_LINEAR has its input X (validated) */
        if (p->ops[o].opcode != HFX_OP_QUANTIZE_LINEAR) continue;
        uint32_t producer = p->tensors[p->ops[o].in[0]].producer;
        if (producer != HFX_NO_TENSOR && !seen[producer]) {
            seen[producer] = 1;
            stack[top++] = producer;
        }
        while (top) {
            hfx_op *op = &p->ops[stack[--top]];
            op->sum_order = HFX_SUM_ORT;
            for (uint32_t k = 0; k < op->n_in; k++) {
                uint32_t up = op->in[k] == HFX_NO_TENSOR ? HFX_NO_TENSOR : p->tensors[op->in[k]].producer;
                if (up != HFX_NO_TENSOR && !seen[up]) {
                    seen[up] = 1;
                    stack[top++] = up;
                }
            }
        }
    }
    hfx_plat_free(seen); /* out of memory: the sums keep their own order, as before any marking */
    hfx_plat_free(stack);
}

#endif

/* Every op, not only those a QUANTIZE_LINEAR reads: a float output no QUANTIZE_LINEAR reads (llama_gqa_contrib's
 * fp32 MatMul branches) is then the Hexagon build's bits too, not OpenBLAS's (4.3e-7 relative away). */
void hfx_program_sum_in_hexagon_order(hfx_program *p) {
    for (uint32_t o = 0; o < p->n_ops; o++) p->ops[o].sum_order = HFX_SUM_HEXAGON;
}

hfx_status hfx_program_parse(const void *bytes, size_t size, hfx_program **out, hfx_error *err) {
    hfx_error local;
    if (!err) err = &local;
    memset(err, 0, sizeof *err);
    if (out) *out = NULL;
    if (!out || (!bytes && size)) FAIL(HFX_ERR_ARG, 0, "null argument");
    header h;
    hfx_status st = read_header(bytes, size, &h, err);
    if (!st) st = check_layout(bytes, size, &h, err);
    if (st) return st;
    hfx_program *p = alloc_program(bytes, size, &h);
    if (!p) FAIL(HFX_ERR_NOMEM, 0, "out of memory");
    st = parse_tensors(p, &h, err);
    if (!st && p->shapes_bytes) st = hfx_shapes_check(p, err);
    if (!st && p->quant_bytes) st = hfx_quant_check(p, err);
    if (!st) st = parse_ops(p, &h, err);
    if (!st) st = hfx_arena_place(p, err);
    if (st) {
        hfx_program_free(p);
        return st;
    }
#if !defined(__hexagon__)
    sum_quantized_in(p); /* the host holds a quantized result to ORT's (sgemm_mlas.h) */
#endif
    *out = p;
    return HFX_OK;
}
