/*
 * hvx_qpool.h - the integer pooling ops' HVX steps on u8/i8 (128 bytes per vector), exact integer
 * arithmetic, so bit for bit the scalar loops:
 *   QMAXPOOL         the max over a window's input rows, column by column, then the max over the
 *                    window's taps along that row for 128 outputs at a time (strides 1 and 2), each
 *                    output optionally through a 256-entry table (vlut32)
 *   QGLOBAL_AVGPOOL  the sum of a plane's bytes (vrmpy by ones)
 *   QAVGPOOL         the sums over a window's input rows, column by column (u16, vmpy by ones), then
 *                    the sums over the window's taps along that row for 64 outputs at a time (strides
 *                    1 and 2)
 */
#ifndef HEXFUSE_HVX_QPOOL_H
#define HEXFUSE_HVX_QPOOL_H

#include <stddef.h>
#include <stdint.h>

/* bytes hvx_maxpool_taps may read past its last tap */
#define HVX_MAXPOOL_SLACK 256

/* t[0, n) = the max over r < nrows of row0[r * step + (0, n)] (signed bytes when is_signed); reads
 * nothing at or past x_end (nor outside the pages of the rows), writes nothing past n. nrows >= 1. */
void hvx_maxpool_rows(const uint8_t *row0, size_t step, int nrows, size_t n, int is_signed, const uint8_t *x_end,
                      uint8_t *t);

/* y[o] = lut[max over j < taps of t[o * stride + j * dilation]] for o < n; stride 1 or 2; lut: NULL
 * (none) or a table prepared by hvx_lut_i8_prepare (128-byte aligned), indexed by the max's byte.
 * y: any alignment, nothing written past n. */
void hvx_maxpool_taps(const uint8_t *t, size_t n, int stride, int taps, int dilation, int is_signed,
                      const uint8_t *lut, uint8_t *y);

/* halfwords hvx_avgpool_taps may read past its last tap */
#define HVX_AVGPOOL_SLACK 192

/* t[0, n) = the sum over r < nrows of row0[r * step + (0, n)] as u16, i8 bytes as x + 128; reads as
 * hvx_maxpool_rows; writes nothing past n. 1 <= nrows <= 257 (no sum wraps). t: any alignment. */
void hvx_avgpool_rows(const uint8_t *row0, size_t step, int nrows, size_t n, int is_signed, const uint8_t *x_end,
                      uint16_t *t);

/* y[o] = the sum over j < taps of t[o * stride + j], modulo 2^16, for o < n; stride 1 or 2. t, y: any
 * alignment; nothing written past n. */
void hvx_avgpool_taps(const uint16_t *t, size_t n, int stride, int taps, uint16_t *y);

/* QAVGPOOL's outputs in fixed point from n window sums u (as hvx_avgpool_taps gives them, of windows
 * of one tap count): S = u - bias, P = S * mul (the caller keeps |P| < 2^30), x = P + 2^(shift - 1),
 * y[o] = sat((x >> shift) + zy) (u8, or i8 when is_signed) and flag[o] = 1 when the fraction of x
 * (its low `shift` bits) is <= margin or >= 2^shift - margin (near a rounding tie), else 0.
 * 1 <= shift <= 30. u: reads up to 127 halfwords past n; y, flag: any alignment, nothing written past n. */
void hvx_avgpool_finish(const uint16_t *u, size_t n, int32_t bias, int32_t mul, int shift, int32_t margin, int32_t zy,
                        int is_signed, uint8_t *y, uint8_t *flag);

/* the sum of x[0, n) (signed bytes when is_signed), modulo 2^32; any alignment */
uint32_t hvx_sum_bytes(const uint8_t *x, size_t n, int is_signed);

/* the max of x[0, n) (signed bytes when is_signed; n >= 1), QSOFTMAX's line max; any alignment */
int32_t hvx_max_bytes(const uint8_t *x, size_t n, int is_signed);

#endif /* HEXFUSE_HVX_QPOOL_H */
