/*
 * core.h - internal structures shared by the core (program, plan, arena,
 * scheduler, trace) and the op kernels. Not a public header.
 *
 * The core is freestanding: it uses only <stddef.h>, <stdint.h>,
 * <stdbool.h>, <stdarg.h>, <string.h> (memcpy/memset/memcmp),
 * <stdatomic.h> and platform.h.
 */
#ifndef HEXFUSE_CORE_H
#define HEXFUSE_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "hexfuse/ops.h"

/* A validated tensor. */
typedef struct hfx_tensor {
    uint8_t dtype, role, task, rank;
    uint32_t io_index; /* global index among the node's inputs/outputs */
    uint32_t dims[HFX_MAX_RANK];
    uint64_t numel;
    size_t bytes;
    size_t const_offset;          /* CONSTANT: offset of the bytes in prog->blob */
    size_t arena_offset;          /* SCRATCH: offset within its task's arena region */
    uint32_t producer;            /* op writing it, or HFX_NO_TENSOR */
    uint32_t first_use, last_use; /* task op indices (SCRATCH lifetime) */
} hfx_tensor;

/* Plan of an op: how it is cut into work items (its family's hfx_plan_*). */
typedef struct hfx_plan {
    uint32_t n_items;
    size_t ws_bytes;  /* per-worker work space the op's items need */
    uint64_t data[8]; /* the family's named plan struct (HFX_PLAN_STORE / HFX_PLAN_LOAD) */
} hfx_plan;

struct hfx_op_desc;

enum { HFX_SUM_BLAS, HFX_SUM_HEXAGON, HFX_SUM_ORT };

typedef struct hfx_op {
    const struct hfx_op_desc *desc; /* its ops.def row */
    uint16_t opcode;
    uint8_t engine, task;
    uint8_t sum_order; /* a float op's sums: HFX_SUM_BLAS (the kernel's own), or, where a QUANTIZE_LINEAR's
                        * input depends on its output (program.c sum_quantized_in), HFX_SUM_ORT (ORT's CPU
                        * kernels': the host build's default); on every op, HFX_SUM_HEXAGON
                        * (hfx_program_sum_in_hexagon_order: the Hexagon builds' BLAS-free sums) */
    uint32_t n_in, n_out;
    uint32_t in[HFX_MAX_OP_INPUTS];
    uint32_t out[HFX_MAX_OP_OUTPUTS];
    int32_t params[HFX_OP_PARAMS];
    uint32_t task_index; /* position within its task */
    uint32_t dep_begin;  /* deps are prog->deps[dep_begin .. dep_begin + n_deps) */
    uint32_t n_deps;     /* global indices of earlier ops of the same task */
    hfx_plan plan;
} hfx_op;

struct hfx_program {
    uint8_t *blob; /* aligned private copy of the program bytes */
    size_t blob_size;
    uint32_t n_tensors, n_ops;
    hfx_tensor *tensors;
    hfx_op *ops;
    uint32_t n_inputs[HFX_NUM_TASKS], n_outputs[HFX_NUM_TASKS];
    uint32_t *input_tensor;  /* [n_inputs A + B] tensor id by io index */
    uint32_t *output_tensor; /* [n_outputs A + B] */
    uint32_t n_task_ops[HFX_NUM_TASKS];
    uint32_t *task_ops[HFX_NUM_TASKS]; /* global op ids in task order */
    uint32_t *deps;
    uint32_t n_deps_total;
    size_t scratch_bytes[HFX_NUM_TASKS];
    size_t ws_bytes;
    uint64_t task_items[HFX_NUM_TASKS];
    uint32_t version;                  /* 1 or 2 */
    uint32_t shapes_off, shapes_bytes; /* v2 shape section in blob (bytes 0: none) */
    uint32_t quant_off, quant_bytes;   /* v2 quantization section */
    uint32_t *quant_rec;               /* [n_tensors] blob offset of each tensor's quantization record, 0: none
                                          (NULL without a section) */
    uint32_t n_symbols;                /* of the shape section */
};

/* ---- helpers --------------------------------------------------------------- */

size_t hfx_dtype_size(uint32_t dtype); /* 0 for unknown */

/* little-endian fields (callers checked bounds) */
static inline uint16_t hfx_rd_u16(const uint8_t *b) { return (uint16_t)(b[0] | (b[1] << 8)); }
static inline uint32_t hfx_rd_u32(const uint8_t *b) {
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline void hfx_wr_u32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

/* CRC-32 as zlib computes it (program.c) */
uint32_t hfx_crc32(const uint8_t *b, size_t n);

static inline float hfx_f32_from_bits(int32_t bits) {
    float f;
    uint32_t u = (uint32_t)bits;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline int32_t hfx_bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (int32_t)u;
}

/* ONNX Slice normalization of one axis of size dim. Returns the output
 * length (may be 0) and the first input index. step != 0. */
uint64_t hfx_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first);

/* Output length of a 2-D pooling axis (ONNX Runtime's rule, ceil_mode
 * included); -1 when the dilated kernel is larger than the padded input. */
int64_t hfx_pool_out_len(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin, int64_t pad_end,
                         bool ceil_mode);

/* ---- op registry (ops.def, ops/registry.c) ------------------------------------ */

/* Where an op record is being validated: error messages and byte offsets. */
typedef struct hfx_vctx {
    hfx_program *p;
    hfx_error *err;
    size_t rec; /* byte offset of the op record */
    uint32_t index;
} hfx_vctx;

struct hfx_kernel_args;
typedef hfx_status (*hfx_validate_fn)(hfx_vctx *v, hfx_op *op);
typedef hfx_status (*hfx_plan_fn)(const hfx_program *p, hfx_op *op);
typedef void (*hfx_run_fn)(const struct hfx_kernel_args *a, uint32_t item);

typedef struct hfx_op_desc {
    uint16_t opcode;
    const char *label;
    uint8_t min_in, max_in, n_out;
    uint8_t engines;          /* mask of HFX_ENGINE_BIT()s */
    uint8_t n_params;         /* params [n_params, 32) must be 0 (rank-dependent ops check more) */
    bool typed;               /* validate checks the dtypes (HFX_OP_TYPED); else every tensor is f32 */
    hfx_validate_fn validate; /* checks params and shapes (may normalize params) */
    hfx_plan_fn plan;         /* fills op->plan from the op and its validated tensors */
    hfx_run_fn run;           /* runs one work item */
} hfx_op_desc;

/* The row of an opcode, NULL for an unknown one. */
const hfx_op_desc *hfx_op_desc_find(uint32_t opcode);

#define HFX_OP(NAME, label, min_in, max_in, n_out, engines, n_params, family) \
    hfx_status hfx_validate_##family(hfx_vctx *v, hfx_op *op);                \
    hfx_status hfx_plan_##family(const hfx_program *p, hfx_op *op);           \
    void hfx_run_##family(const struct hfx_kernel_args *a, uint32_t item);
#include "hexfuse/ops.def"

/* ---- validation helpers (program.c) ------------------------------------------- */

#define HFX_PARAM_OFF(v, i) ((v)->rec + HFX_OREC_PARAMS + 4u * (size_t)(i))
#define HFX_IN_OFF(v, i) ((v)->rec + HFX_OREC_INPUTS + 4u * (size_t)(i))
#define HFX_OUT_OFF(v, i) ((v)->rec + HFX_OREC_OUTPUTS + 4u * (size_t)(i))

/* Sets the error and returns st. */
hfx_status hfx_vfail(hfx_vctx *v, hfx_status st, size_t offset, const char *fmt, ...);
/* HFX_ERR_SHAPE: "op N: output shape does not match <what>" */
hfx_status hfx_shape_err(hfx_vctx *v, const char *what);
bool hfx_same_shape(const hfx_tensor *a, const uint32_t *dims, uint32_t rank);
/* numpy broadcast of a and b into od/orank; false if incompatible */
bool hfx_broadcast2(const uint32_t *ad, uint32_t ar, const uint32_t *bd, uint32_t br, uint32_t *od, uint32_t *orank);
/* t broadcastable (unidirectionally) to dims[rank] */
bool hfx_broadcastable_to(const hfx_tensor *t, const uint32_t *dims, uint32_t rank);
/* HFX_P_AXIS in [-rank, rank), normalized in place */
hfx_status hfx_check_axis(hfx_vctx *v, hfx_op *op, uint32_t rank, uint32_t *axis_out);
static inline bool hfx_finite_f32(int32_t bits) { return ((uint32_t)bits & 0x7f800000u) != 0x7f800000u; }
/* every output has 0 elements: the op has no work items (the family's plan is not called) */
bool hfx_outputs_empty(const hfx_program *p, const hfx_op *op);
/* for families without a rule for a non-empty output from an empty input: HFX_ERR_SHAPE naming it */
hfx_status hfx_no_empty_input(hfx_vctx *v, const hfx_op *op);
/* X must keep its shape: Y's shape equals X's */
hfx_status hfx_same_as_input(hfx_vctx *v, hfx_op *op);

/* ---- planning helpers ----------------------------------------------------------
 * Items of one op write disjoint parts of the output and never accumulate
 * across items, so results do not depend on which worker runs which item, or
 * when; host and DSP cut a program the same way. */

#define HFX_EW_CHUNK 32768u              /* elements per vector item (128 KiB of f32) */
#define HFX_COPY_CHUNK 262144u           /* elements per copy item (1 MiB of f32) */
#define HFX_GEMM_ITEM_FLOPS (1ull << 23) /* about 0.1 ms on one host core: two workers can share a GEMM */

static inline uint64_t hfx_ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* units per item so that an item does about `target` work */
static inline uint64_t hfx_per_item_for(uint64_t work_per_unit, uint64_t target) {
    if (work_per_unit == 0) work_per_unit = 1;
    uint64_t k = target / work_per_unit;
    return k ? k : 1;
}

static inline hfx_status hfx_plan_set_items(hfx_op *op, uint64_t n) {
    if (n == 0 || n > 0x7fffffffu) return HFX_ERR_SIZE;
    op->plan.n_items = (uint32_t)n;
    return HFX_OK;
}

/* A family's named plan struct in and out of op->plan.data. */
#define HFX_PLAN_STORE(op, s)                                                        \
    do {                                                                             \
        _Static_assert(sizeof(s) <= sizeof((op)->plan.data), "plan struct too big"); \
        memcpy((op)->plan.data, &(s), sizeof(s));                                    \
    } while (0)
#define HFX_PLAN_LOAD(s, op) memcpy(&(s), (op)->plan.data, sizeof(s))

/* Elementwise-style plan: items are chunks of `elems_per_item` output elements. */
typedef struct hfx_chunk_plan {
    uint64_t elems_per_item;
} hfx_chunk_plan;

static inline hfx_status hfx_plan_chunks(hfx_op *op, uint64_t numel, uint64_t chunk) {
    hfx_chunk_plan pl = {chunk};
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(numel, chunk));
}

/* Elementwise-style chunking: item i covers [begin, end) of `total` units. */
static inline void hfx_plan_range(uint64_t total, uint64_t per_item, uint32_t item, uint64_t *begin, uint64_t *end) {
    uint64_t b = (uint64_t)item * per_item;
    uint64_t e = b + per_item;
    *begin = b;
    *end = e < total ? e : total;
}

/* ---- arena.c ----------------------------------------------------------------- */

/* Places each task's scratch tensors (lifetime-based reuse, first fit,
 * HFX_ARENA_ALIGN) and sets p->scratch_bytes. Then computes the op
 * dependencies (RAW + WAR/WAW through reused memory). */
hfx_status hfx_arena_place(hfx_program *p, hfx_error *err);

/* ---- kernels (ops/ *.c on the host; HVX kernels on Hexagon) ------------------- */

typedef struct hfx_kernel_args {
    const hfx_program *prog;
    const hfx_op *op;
    const void *in[HFX_MAX_OP_INPUTS]; /* NULL for absent optional inputs */
    void *out[HFX_MAX_OP_OUTPUTS];
    void *ws; /* per-worker work space, >= op->plan.ws_bytes */
    size_t ws_bytes;
    bool ws_kept; /* the worker's previous item was of this op in this hfx_run call: ws holds what it left */
} hfx_kernel_args;

/* Once per process before any kernel runs (host: BLAS to one thread). */
void hfx_kernels_init(void);
/* Runs work item `item` of args->op. Items of one op write disjoint output. */
void hfx_kernel_run_item(const hfx_kernel_args *args, uint32_t item);

/* ---- v2 sections (shapes.c, quant.c) ------------------------------------------ */

/* Why a shape expression failed; the order and meaning follow hexfuse_onnx/shape_expr.run. */
typedef enum hfx_expr_fault {
    HFX_EXPR_OK = 0,
    HFX_EXPR_NO_CONST_VALUE = 1, /* CONST is the last word */
    HFX_EXPR_BAD_SYMBOL = 2,     /* SYM index >= number of symbols */
    HFX_EXPR_BAD_CODE = 3,       /* unknown instruction */
    HFX_EXPR_UNDERFLOW = 4,      /* a binary instruction with fewer than 2 values */
    HFX_EXPR_STACK_FULL = 5,     /* more than HFX_EXPR_STACK values */
    HFX_EXPR_DIV_ZERO = 6,       /* FLOORDIV, CEILDIV, MOD by 0 */
    HFX_EXPR_INT_OVERFLOW = 7,   /* a result outside int64 */
    HFX_EXPR_LEFT = 8            /* not exactly one value at the end */
} hfx_expr_fault;

/* Evaluates postfix `words` over int64 with `symbols`; the value in *value when HFX_EXPR_OK. */
hfx_expr_fault hfx_expr_eval(const uint32_t *words, uint32_t n_words, const int64_t *symbols, uint32_t n_symbols,
                             int64_t *value);
const char *hfx_expr_fault_text(hfx_expr_fault f);

/* The shape section of p (after the tensors are parsed): every rule of dsp/README.md, and
 * every expression reproduces its stored value. Sets p->n_symbols. HFX_ERR_SHAPES. */
hfx_status hfx_shapes_check(hfx_program *p, hfx_error *err);
/* The quantization section of p (after the tensors are parsed); sets p->quant_rec. */
hfx_status hfx_quant_check(hfx_program *p, hfx_error *err);
/* An integer op's quantization operands against the section's entries of its tensors (after the
 * op's validation): HFX_ERR_QUANT naming the op and the tensor where they disagree. */
hfx_status hfx_quant_check_op(hfx_vctx *v, const hfx_op *op);

/* ---- error formatting (program.c) -------------------------------------------- */

/* Minimal printf: %u (unsigned), %d (int), %U (uint64_t), %D (int64_t), %s. */
void hfx_error_set(hfx_error *err, hfx_status st, size_t offset, const char *fmt, ...);
void hfx_error_vset(hfx_error *err, hfx_status st, size_t offset, const char *fmt, va_list ap);

#endif /* HEXFUSE_CORE_H */
