/* qgemm_host.h - the integer GEMM of QMATMUL and QCONV2D on the host (and on Hexagon builds without HVX
 * dispatch): portable C, and AVX2 or AVX-512 VNNI where the CPU has them (picked at run time, bit-identical).
 *
 *   acc[r][c] = sum_k a[r][k] * b[k][c]      int32, wrapping
 *
 * Both operands hold their values with the zero point already subtracted, as int16: |v| <= 255, so
 * every product and every sum of two products fits int32 and AVX2's vpmaddwd (two int16 products
 * added in int32) is exact; the sums over k wrap as the reference's do. Subtracting the zero points
 * while packing costs nothing extra (the operands are widened and re-laid out anyway), so no row or
 * column sums are needed. b is packed in panels of HFX_QGEMM_NR columns with k in pairs (the two k of
 * a pair adjacent, as vpmaddwd takes them); a is rows of an even number of int16, zero-padded. */
#ifndef HEXFUSE_OPS_QGEMM_HOST_H
#define HEXFUSE_OPS_QGEMM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HFX_QGEMM_NR 16 /* columns per packed panel: two AVX2 vectors of 8 int32 */
#define HFX_QGEMM_MR 4  /* rows of a per hfx_qgemm_rows call */

/* k rounded up to even (the packed depth), n rounded up to whole panels */
static inline size_t hfx_qgemm_kp(size_t k) { return (k + 1) & ~(size_t)1; }
static inline size_t hfx_qgemm_np(size_t n) { return (n + HFX_QGEMM_NR - 1) / HFX_QGEMM_NR * HFX_QGEMM_NR; }

/* index of element (k, c) in a packed b of depth kp (even): panel, pair of k, column, k's parity */
static inline size_t hfx_qgemm_at(size_t kp, size_t k, size_t c) {
    return ((c / HFX_QGEMM_NR) * kp + (k & ~(size_t)1)) * HFX_QGEMM_NR + (c % HFX_QGEMM_NR) * 2 + (k & 1);
}

/* int16 elements of a packed b of k x n (its padding 0, as hfx_qgemm_pack_pair writes it) */
static inline size_t hfx_qgemm_packed_elems(size_t k, size_t n) { return hfx_qgemm_kp(k) * hfx_qgemm_np(n); }

/* Fewer columns than this take hfx_qgemm_dot: a panel of HFX_QGEMM_NR lanes would be mostly padding. */
#define HFX_QGEMM_DOT_COLS 4

/* acc[q] = sum_k (w[k] - zw) * x[q * ldx + k] for q < ncols (< HFX_QGEMM_DOT_COLS), k < kk: w are kk bytes
 * (u8, or i8 when w_signed), read as they are; x holds int16 columns with their zero point subtracted. */
void hfx_qgemm_dot(const uint8_t *w, bool w_signed, int32_t zw, size_t kk, const int16_t *x, size_t ldx, int ncols,
                   int32_t *acc);

/* Packs rows k and k + 1 (k even) of b from two int16 rows of n values (r1 NULL: zeros, the padding
 * row of an odd depth); columns n .. hfx_qgemm_np(n) get 0. */
void hfx_qgemm_pack_pair(const int16_t *r0, const int16_t *r1, size_t n, size_t kp, size_t k, int16_t *b);

/* acc[i * ldc + c] for rows i < rows (1..HFX_QGEMM_MR) of a (rows of lda int16, kp of them used) and
 * columns c < hfx_qgemm_np(n) of the packed b (columns past n give whatever their padding gives). */
void hfx_qgemm_rows(const int16_t *a, size_t lda, int rows, const int16_t *b, size_t kp, size_t n, int32_t *acc,
                    size_t ldc);

/* y[(c / run) * run_stride + c % run] = ref_qmatmul_requant(acc[c] + bias[c * bias_step],
 * scale[c * scale_step], zy) for c < n (runs of `run` outputs, run_stride apart), into u8 or i8 (y_signed);
 * bias may be NULL (0); the steps are 0 or 1. Bit for bit the reference (AVX2 where the CPU has it). */
void hfx_qgemm_requant(const int32_t *acc, size_t n, const int32_t *bias, size_t bias_step, const float *scale,
                       size_t scale_step, int32_t zy, bool y_signed, void *y, size_t run, size_t run_stride);

/* The same for rows i < rows of a GEMM's accumulators (ldc apart, ldc a multiple of 8: whole vectors are
 * computed past n), row i with bias[i] (bias may be NULL) and scale[i * scale_step] (step 0 or 1), into
 * y + i * y_row: the rows of one call of hfx_qgemm_rows when a row is an output channel (QCONV2D). */
void hfx_qgemm_requant_rows(const int32_t *acc, size_t ldc, int rows, size_t n, const int32_t *bias, const float *scale,
                            size_t scale_step, int32_t zy, bool y_signed, uint8_t *y, size_t y_row, size_t run,
                            size_t run_stride);

/* The widest kernels hfx_qgemm_rows / hfx_qgemm_requant may pick where the CPU has them (tests lower it
 * to reach the others): portable C, AVX2, AVX-512 VNNI (vpdpwssd, 256-bit; the requantisation stays AVX2). */
enum { HFX_QGEMM_PORTABLE, HFX_QGEMM_AVX2, HFX_QGEMM_VNNI };
extern int hfx_qgemm_max_isa;

#endif
