/*
 * hvx_qgemm.h - the int32 accumulators of an integer GEMM with zero points, u8/i8 operands (HVX vrmpy):
 *
 *   acc[r][c] = brow[r] + bcol[c] + sum_k (S[r][k] - zs[r]) * (V[k][c] - zv)      wrapping int32
 *
 * exactly as dsp/ref/ref_qmatmul.h accumulates (QMATMUL: S = A, V = B; QCONV2D: S = the weights,
 * V = the im2col of the input). S is the scalar operand of vrmpy (4 k of one row in a register),
 * V the vector operand, packed by columns. With V' = V + voff (i8 stored +128 as u8):
 *
 *   sum (s - zs)(v' - zv') = sum s v' + zv' (K zs - rowsum s) - zs colsum v',   zv' = zv + voff
 *
 * so vrmpy gives sum s v' and the zero points cost one vector multiply per row and panel. The
 * identity holds modulo 2^32, hence bit for bit. hvx_qgemm_requant then gives ORT's float
 * requantisation, bit for bit.
 */
#ifndef HEXFUSE_HVX_QGEMM_H
#define HEXFUSE_HVX_QGEMM_H

#include <stddef.h>
#include <stdint.h>

#define HVX_QGEMM_PANEL 128 /* columns per packed panel: 4 vectors of 32 word lanes */

/* Packed V: per panel, per 4 k, 4 vectors of 32 columns x 4 consecutive k (one word lane per
 * column); rows k >= K are 0, columns >= N are don't-care (their accumulators are never read).
 * 128-byte aligned. */
size_t hvx_qgemm_packed_bytes(size_t K, size_t N);

static inline size_t hvx_qgemm_packed_at(size_t K, size_t k, size_t c)
{
    size_t kg_n = (K + 3) / 4, p = c / HVX_QGEMM_PANEL, cc = c % HVX_QGEMM_PANEL;
    return ((p * kg_n + k / 4) * 4 + cc / 32) * 128 + (cc % 32) * 4 + k % 4;
}

/* the offset that stores a V element as an unsigned byte: 128 for i8, 0 for u8 */
static inline int32_t hvx_qgemm_voff(int v_signed) { return v_signed ? 128 : 0; }

/* Packs V[k][c0 + c] (row-major bytes, ld per row) for k < K, c < N, adding voff. */
void hvx_qgemm_pack(const uint8_t *V, size_t ld, int v_signed, size_t K, size_t N, uint8_t *packed);

/* vsum[c] = sum_k V'[k][c], from the packed V; vsum holds ceil(N/128)*128 words, 128-byte aligned. */
void hvx_qgemm_col_sums(const uint8_t *packed, size_t K, size_t N, int32_t *vsum);

/* Copies S[r][0, K) to a 128-byte aligned row of hvx_qgemm_row_bytes(K) bytes, zero-padded. */
size_t hvx_qgemm_row_bytes(size_t K);
void hvx_qgemm_copy_row(const uint8_t *s, size_t K, uint8_t *row);

/* The per-column terms: bcol (may be NULL: 0), zv' (the packed domain) and vsum, each
 * ceil(N/128)*128 words, 128-byte aligned. */
typedef struct hvx_qgemm_cols {
    const int32_t *bcol, *zvp, *vsum;
} hvx_qgemm_cols;

/* acc[i][c] for rows i < rows (1..4) of S (copied rows, stride hvx_qgemm_row_bytes(K)), columns c < N
 * (ceil(N/128)*128 words per acc row, 128-byte aligned). zs[i], brow[i]: per row. */
void hvx_qgemm_rows(const uint8_t *s, int rows, int s_signed, const int32_t *zs, const int32_t *brow,
                    const uint8_t *packed, const hvx_qgemm_cols *cols, size_t K, size_t N, int32_t *acc);

/* y[0, 4 n) = the bytes of acc[0, n) (int32, MatMulInteger's output as it is); y at any address,
 * nothing written outside it. acc: 128-byte aligned. */
void hvx_qgemm_store_words(const int32_t *acc, size_t n, uint8_t *y);

/* y[i] = ref_qmatmul_requant(acc[i], scale[i * scale_step], zy, lo, hi) for an u8 (y_signed 0) or i8
 * output, bit for bit. ORT's f32 multiply has no exact HVX form (no float on v67; qf32 does not round as
 * IEEE f32), but its result is known to within 3 / 2^16 (two f32 roundings of a product below 2^9): HVX
 * computes round(acc * scale * 2^16) in fixed point from the scale's bits (exact mantissa, error 1/2^16),
 * and rounds that to the integer. A block of 128 outputs with a lane within 8 / 2^16 of a tie (where the
 * f32 rounding could decide), or a scale that is 0, subnormal, >= 2^15, inf or NaN, and the tail, are
 * done in scalar code, exactly as the reference (convert_sf2w rounds to nearest, ties to even: the USR
 * mode). acc: 128-byte aligned for the HVX path. */
void hvx_qgemm_requant(const int32_t *acc, size_t n, const float *scale, size_t scale_step, int32_t zy, int y_signed,
                       uint8_t *y);

#endif /* HEXFUSE_HVX_QGEMM_H */
