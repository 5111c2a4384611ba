/*
 * hvx_kernels.h - HVX (128-byte) kernels of the Hexagon build.
 *
 * Integer kernels (v66+ HVX, run under qemu-hexagon): each matches its
 * portable reference in dsp/ref/ref_kernels.h bit for bit, for any length
 * (tails handled) and any element alignment of the pointers (aligned
 * pointers take the vmem path, others the vmemu path). y may equal a or b.
 *
 * Float kernels (v68+ HVX qf32/qf16): declared only when compiling for
 * __HVX_ARCH__ >= 68. qemu-hexagon 7.2 does not decode them: they are
 * compiled and linked for v68/v73, not run here.
 */
#ifndef HEXFUSE_HVX_KERNELS_H
#define HEXFUSE_HVX_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ref_kernels.h" /* hx_requant */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise int16 / int32 ---------------------------------------- */
void hvx_add_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n);
void hvx_add_sat_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n);
void hvx_mul_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n);
void hvx_relu_i16(const int16_t *x, int16_t *y, size_t n);

void hvx_add_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n);
void hvx_add_sat_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n);
void hvx_mul_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n);
void hvx_relu_i32(const int32_t *x, int32_t *y, size_t n);

/* ---- int8 -> int8 table lookup (vlut32) ---------------------------------- */
/* Rearranges a 256-entry table into the two vlut32 table vectors.
 * `prepared` must be 128-byte aligned and 256 bytes long. */
void hvx_lut_i8_prepare(const int8_t table[256], uint8_t prepared[256]);
/* The same with the entry for byte x at table[x ^ flip] (flip 0x80: a table indexed by x + 128). */
void hvx_lut_i8_prepare_xor(const uint8_t table[256], uint8_t flip, uint8_t prepared[256]);
void hvx_lut_i8(const int8_t *x, int8_t *y, size_t n, const uint8_t prepared[256]);

/* ---- 8-bit index -> 32-bit table lookup (vlut32 per byte plane) ---------- */
/* Rearranges a 256-entry table of 32-bit words into four byte planes of two vlut32 table vectors each.
 * `prepared` must be 128-byte aligned and 1024 bytes long. */
void hvx_lut_words_prepare(const uint32_t table[256], uint8_t prepared[1024]);
/* y[i] = table[(uint8_t)(x[i] + add)] for i < n (QSOFTMAX's table values: add = 255 - the line's max).
 * x: any alignment, nothing read outside its aligned vectors; y: 128-byte aligned, room for n rounded
 * up to 128 words (the words after n are overwritten). */
void hvx_lut_words(const uint8_t *x, size_t n, uint8_t add, const uint8_t prepared[1024], uint32_t *y);

/* ---- int8 matmul, int32 accumulation, requantised int8 output ----------
 *
 * C[M,N] = requant(A[M,K] x B[K,N] + bias[N]) exactly as ref_matmul_i8.
 *
 * B is packed once (weights) by hvx_matmul_i8_pack_b into column panels of
 * 128 columns: for each panel and each group of 4 rows of B, 4 vectors of
 * 32 columns x 4 bytes, biased by +128 (stored as uint8, so that the inner
 * loop can use vrmpy(Vu.ub, Rt.b) with the A bytes as the scalar operand).
 * Rows past K and columns past N are zero. The +128 bias is undone by
 * subtracting 128 * rowsum(A) once per row.
 *
 * A: any alignment and lda >= K; the fast path reads A one 32-bit word per
 * 4 k and needs A and lda 4-byte aligned and K % 4 == 0, else a byte path is
 * used. C: any alignment, ldc >= N. bias may be NULL. */
size_t hvx_matmul_i8_packed_bytes(int K, int N);
/* packed: 128-byte aligned, hvx_matmul_i8_packed_bytes(K, N) bytes. */
void hvx_matmul_i8_pack_b(const int8_t *B, int ldb, int K, int N, uint8_t *packed);
void hvx_matmul_i8(const int8_t *A, int lda, const uint8_t *packed_b, const int32_t *bias,
                   int8_t *C, int ldc, int M, int N, int K, const hx_requant *rq);

/* y[i] = requant(acc[i]) (ref_requant_i8) for int32 accumulators, e.g. from
 * the matrix engine. 128 outputs per iteration. y must not overlap acc. */
void hvx_requant_i32_i8(const int32_t *__restrict acc, int8_t *__restrict y, size_t n, const hx_requant *rq);

/* ---- v68+ float kernels (qf32 / qf16 arithmetic) ------------------------ */
#if defined(__HVX_ARCH__) && __HVX_ARCH__ >= 68
/* y = a + b, y = a * b (fp32 in and out, computed in qf32, converted back). */
void hvx_add_f32(const float *a, const float *b, float *y, size_t n);
void hvx_mul_f32(const float *a, const float *b, float *y, size_t n);
/* C[M,N] fp32 = A[M,K] fp16 x B[K,N] fp16 with qf32 accumulation.
 * Inner loop: for each k, splat A[m,k], one vmpy(hf,hf) -> qf32 pair and two
 * qf32 adds per 64 columns. B rows and C rows: any alignment. */
void hvx_matmul_f16(const uint16_t *A, int lda, const uint16_t *B, int ldb, float *C, int ldc,
                    int M, int N, int K);
#endif

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_HVX_KERNELS_H */
