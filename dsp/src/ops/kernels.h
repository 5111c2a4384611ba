/* kernels.h - host op kernels (one C file per op family) and shared helpers. */
#ifndef HEXFUSE_OPS_KERNELS_H
#define HEXFUSE_OPS_KERNELS_H

#include "../core.h"

/* On x86-64 Linux each vector kernel is also compiled for AVX2 and the best copy is picked when
 * the library loads (GNU ifunc), so a baseline x86-64 build runs anywhere and still uses AVX2
 * (measured: sigmoid/tanh over 16 Ki floats 2.2-2.5x faster). No FMA: ISO C mode does not
 * contract, so every copy gives bit-identical results. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(HFX_NO_TARGET_CLONES)
#define HFX_VECTOR_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define HFX_VECTOR_KERNEL
#endif

void hfx_k_gemm(const hfx_kernel_args *a, uint32_t item);      /* matmul.c */
void hfx_k_conv2d(const hfx_kernel_args *a, uint32_t item);    /* conv.c */
void hfx_k_binary(const hfx_kernel_args *a, uint32_t item);    /* elementwise.c */
void hfx_k_unary(const hfx_kernel_args *a, uint32_t item);     /* activation.c */
void hfx_k_softmax(const hfx_kernel_args *a, uint32_t item);   /* softmax.c */
void hfx_k_norm(const hfx_kernel_args *a, uint32_t item);      /* norm.c */
void hfx_k_reduce(const hfx_kernel_args *a, uint32_t item);    /* reduce.c */
void hfx_k_transpose(const hfx_kernel_args *a, uint32_t item); /* memory.c */
void hfx_k_concat(const hfx_kernel_args *a, uint32_t item);
void hfx_k_slice(const hfx_kernel_args *a, uint32_t item);
void hfx_k_copy(const hfx_kernel_args *a, uint32_t item);
void hfx_k_resize(const hfx_kernel_args *a, uint32_t item);         /* resize.c */
void hfx_k_pool2d(const hfx_kernel_args *a, uint32_t item);         /* pool.c: MaxPool, AveragePool */
void hfx_k_global_avgpool(const hfx_kernel_args *a, uint32_t item);

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
