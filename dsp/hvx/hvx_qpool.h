/*
 * hvx_qpool.h - the integer pooling ops' HVX steps on u8/i8 (128 bytes per vector), exact integer
 * arithmetic, so bit for bit the scalar loops:
 *   QMAXPOOL         the max over a window's input rows, column by column, then the max over the
 *                    window's taps along that row for 128 outputs at a time (strides 1 and 2), each
 *                    output optionally through a 256-entry table (vlut32)
 *   QGLOBAL_AVGPOOL  the sum of a plane's bytes (vrmpy by ones)
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

/* the sum of x[0, n) (signed bytes when is_signed), modulo 2^32; any alignment */
uint32_t hvx_sum_bytes(const uint8_t *x, size_t n, int is_signed);

#endif /* HEXFUSE_HVX_QPOOL_H */
