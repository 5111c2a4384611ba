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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "hexfuse/ops.h"

/* A validated tensor. */
typedef struct hfx_tensor {
    uint8_t dtype, role, task, rank;
    uint32_t io_index;             /* global index among the node's inputs/outputs */
    uint32_t dims[HFX_MAX_RANK];
    uint64_t numel;
    size_t bytes;
    size_t const_offset;           /* CONSTANT: offset of the bytes in prog->blob */
    size_t arena_offset;           /* SCRATCH: offset within its task's arena region */
    uint32_t producer;             /* op writing it, or HFX_NO_TENSOR */
    uint32_t first_use, last_use;  /* task op indices (SCRATCH lifetime) */
} hfx_tensor;

/* Plan of an op: how it is cut into work items (plan.c). */
typedef struct hfx_plan {
    uint32_t n_items;
    size_t ws_bytes;    /* per-worker work space the op's items need */
    uint64_t v[8];      /* op specific, see plan.c */
} hfx_plan;

typedef struct hfx_op {
    uint16_t opcode;
    uint8_t engine, task;
    uint32_t n_in, n_out;
    uint32_t in[HFX_MAX_OP_INPUTS];
    uint32_t out[HFX_MAX_OP_OUTPUTS];
    int32_t params[HFX_OP_PARAMS];
    uint32_t task_index;  /* position within its task */
    uint32_t dep_begin;   /* deps are prog->deps[dep_begin .. dep_begin + n_deps) */
    uint32_t n_deps;      /* global indices of earlier ops of the same task */
    hfx_plan plan;
} hfx_op;

struct hfx_program {
    uint8_t *blob;        /* aligned private copy of the program bytes */
    size_t blob_size;
    uint32_t n_tensors, n_ops;
    hfx_tensor *tensors;
    hfx_op *ops;
    uint32_t n_inputs[HFX_NUM_TASKS], n_outputs[HFX_NUM_TASKS];
    uint32_t *input_tensor;   /* [n_inputs A + B] tensor id by io index */
    uint32_t *output_tensor;  /* [n_outputs A + B] */
    uint32_t n_task_ops[HFX_NUM_TASKS];
    uint32_t *task_ops[HFX_NUM_TASKS]; /* global op ids in task order */
    uint32_t *deps;
    uint32_t n_deps_total;
    size_t scratch_bytes[HFX_NUM_TASKS];
    size_t ws_bytes;
    uint64_t task_items[HFX_NUM_TASKS];
};

/* ---- helpers --------------------------------------------------------------- */

size_t hfx_dtype_size(uint32_t dtype); /* 0 for unknown */

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

/* ---- plan.c ------------------------------------------------------------------ */

/* Fills op->plan from the op and its (validated) tensors. */
hfx_status hfx_plan_op(const hfx_program *p, hfx_op *op);

/* Elementwise-style chunking: item i covers [begin, end) of `total` units. */
static inline void hfx_plan_range(uint64_t total, uint64_t per_item, uint32_t item,
                                  uint64_t *begin, uint64_t *end) {
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
    const void *in[HFX_MAX_OP_INPUTS];  /* NULL for absent optional inputs */
    void *out[HFX_MAX_OP_OUTPUTS];
    void *ws;                           /* per-worker work space, >= op->plan.ws_bytes */
    size_t ws_bytes;
} hfx_kernel_args;

/* Once per process before any kernel runs (host: BLAS to one thread). */
void hfx_kernels_init(void);
/* Runs work item `item` of args->op. Items of one op write disjoint output. */
void hfx_kernel_run_item(const hfx_kernel_args *args, uint32_t item);

/* ---- error formatting (program.c) -------------------------------------------- */

/* Minimal printf: %u (unsigned), %d (int), %U (uint64_t), %D (int64_t), %s. */
void hfx_error_set(hfx_error *err, hfx_status st, size_t offset, const char *fmt, ...);

#endif /* HEXFUSE_CORE_H */
