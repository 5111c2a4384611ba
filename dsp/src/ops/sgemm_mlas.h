/* sgemm_mlas.h - C (+)= alpha op(A) op(B) summed as ONNX Runtime's MLAS sums it on x86-64 (single
 * thread, as verification runs ORT), for a float Conv/Gemm/MatMul whose result a QUANTIZE_LINEAR reads
 * (HFX_SUM_ORT: the host build's default for them). ORT computes a 16-bit QDQ group as DQ -> f32 op -> Q;
 * any other order of the same sums lands a value on the other side of a 16-bit rounding tie now and then
 * (one step), and the later groups of a pair grow the step. MLAS's order (MlasSgemmOperation): K in
 * blocks of hfx_mlas_stride_k rows; each block's sum starts from 0 and adds a[i,k] b[k,j] with one
 * rounding (FMA) for k in order; the block's sum is then added to C (the first block's is C, unless C
 * holds a Gemm's bias). OpenBLAS does not: its Haswell kernel (OPENBLAS_CORETYPE=Haswell) sums
 * otherwise even within one block, its SkylakeX kernel for some shapes only. A 1-row product (M = 1, A not transposed, alpha 1, B not
 * transposed) is MLAS's SgemmKernelM1Avx instead: products 4 rows of B at a time, summed in order
 * without FMA, then added to C. */
#ifndef HEXFUSE_OPS_SGEMM_MLAS_H
#define HEXFUSE_OPS_SGEMM_MLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "sgemm_ordered.h"

/* K rows per block when MLAS multiplies a product with n output columns (a Conv: the output pixels of
 * one image) and k rows of B: 128, halved while it still holds K when n >= k (one block either way),
 * doubled while halving the 128 columns of N's slice still covers n, when A is not transposed. */
uint64_t hfx_mlas_stride_k(uint64_t n, uint64_t k, bool trans_a);

/* C[m x n] (+)= alpha op(A) op(B) (operands as sgemm_ordered.h reads them), K blocks of `stride_k`
 * rows (at most HFX_MLAS_MAX_STRIDE_K). `accumulate`: C holds a start (a Gemm's bias) the first block
 * is added to. */
#define HFX_MLAS_MAX_STRIDE_K 1024u
void hfx_sgemm_mlas(uint64_t m, uint64_t n, uint64_t k, float alpha, hfx_strided a, hfx_strided b, bool accumulate,
                    float *c, uint64_t ldc, uint64_t stride_k);

/* y[0:cols) (+)= x B[:, 0:cols) for one row x of k (contiguous), B's rows ldb apart, as SgemmKernelM1Avx:
 * y = (((x0 b0 + x1 b1) + x2 b2) + x3 b3) + y per 4 rows, then 2, then 1 (no FMA: the build's
 * -ffp-contract=off). `add`: y holds a start (a Gemm's bias). */
void hfx_sgemv_mlas(const float *x, const float *b, uint64_t ldb, uint64_t k, uint64_t cols, bool add, float *y);

/* y[j * incy] (+)= rows[j, :] . x for outputs j in [j0, j1) of n (rows ld apart, x contiguous, both k
 * long), as SgemmKernelM1TransposeBAvx: 8 lane sums (lane k % 8, no FMA), reduced by where j falls in
 * the kernel's blocks of 4, then 2, then 1 outputs of n, then added to y (`add`: y holds a start). MLAS
 * runs it for a 1-row product with B transposed, and for N = 1 (a 1-pixel Conv) with A and B swapped. */
void hfx_dot_rows_mlas(const float *x, const float *rows, uint64_t ld, uint64_t k, uint64_t j0, uint64_t j1, uint64_t n,
                       bool add, float *y, uint64_t incy);

/* hfx_dot_rows_mlas's sums of rows = B^T for B as written (k rows ldb apart, outputs j0 <= j < j1 of n):
 * ORT's MatMulNBits dequantizes B transposed and runs one row of A through that kernel. */
void hfx_dot_cols_mlas(const float *x, const float *b, uint64_t ldb, uint64_t k, uint64_t j0, uint64_t j1, uint64_t n,
                       bool add, float *y);

#endif
