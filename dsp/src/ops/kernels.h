/* kernels.h - shared by the op family files (one per family: its validation, plan and kernels;
 * their entry points are declared from hexfuse/ops.def in core.h). */
#ifndef HEXFUSE_OPS_KERNELS_H
#define HEXFUSE_OPS_KERNELS_H

#include "../core.h"

/* On x86-64 Linux each vector kernel is also compiled for x86-64-v3 (AVX2 and FMA) and the best copy
 * is picked when the library loads (GNU ifunc), so a baseline x86-64 build runs anywhere and still
 * uses AVX2 (measured: sigmoid/tanh over 16 Ki floats 2.2-2.5x faster). ISO C mode does not
 * contract, so only vmath.h's explicit ref_fmaf (ref/ref_fma.h) is fused: an instruction in the v3
 * copy, a libm fmaf call in the baseline one, the fused sfmpy accumulate on Hexagon; every copy
 * and the Hexagon build give bit-identical results. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(HFX_NO_TARGET_CLONES)
#define HFX_VECTOR_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HFX_VECTOR_KERNEL
#endif
/* A helper of a vector kernel that does its arithmetic: inlined into every copy of the kernel. A helper the
 * compiler leaves out of line is compiled once, for the baseline, its ref_fmaf a libm call in every copy
 * (a Softmax's exps in such a helper ran two_branch's pair 53x slower: 18 ms for 0.34). */
#define HFX_KERNEL_HELPER static inline __attribute__((always_inline))

/* Plan of the ops cut into ranges of output rows (all axes but the last):
 * Transpose, Slice, Resize; about HFX_EW_CHUNK elements per item. */
typedef struct hfx_rows_plan {
    uint64_t rows, row_len, rows_per_item;
} hfx_rows_plan;

static inline hfx_status hfx_plan_rows(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    uint64_t last = y->rank ? y->dims[y->rank - 1] : 1;
    hfx_rows_plan pl = {y->numel / last, last, hfx_per_item_for(last, HFX_EW_CHUNK)};
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

/* Row-major element strides of t aligned to an output of rank `rank`:
 * strides[i] = 0 where t broadcasts (missing or size-1 axis). */
static inline void hfx_bcast_strides(const hfx_tensor *t, uint32_t rank, uint64_t *strides) {
    uint64_t s = 1;
    uint32_t off = rank - t->rank;
    for (uint32_t i = rank; i-- > 0;) {
        if (i < off) {
            strides[i] = 0;
            continue;
        }
        uint32_t d = t->dims[i - off];
        strides[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

/* Dense row-major strides of t. */
static inline void hfx_dense_strides(const hfx_tensor *t, uint64_t *strides) {
    uint64_t s = 1;
    for (uint32_t i = t->rank; i-- > 0;) {
        strides[i] = s;
        s *= t->dims[i];
    }
}

#endif
