/*
 * hvx_transpose.h - a 2-D transpose of elements of 1..64 bytes on HVX (TRANSPOSE's items: any
 * permutation whose axes merge into batches of one, a contiguous run of the input as one element). The matrix goes through tiles of tr x tc
 * elements (powers of two, at least 256 bytes): a transpose of a tile is a rotation of its element
 * index bits [row | column] by log2(tc), and one deal (vdeal) or shuffle (vshuff) of the whole tile,
 * 256 bytes at a time, rotates them by one bit. min(log2 tr, log2 tc) passes between two buffers;
 * a full tile whose rows are contiguous is read (written) in place. Exact byte moves: bit for bit the
 * scalar loops of dsp/src/ops/memory.c.
 */
#ifndef HEXFUSE_HVX_TRANSPOSE_H
#define HEXFUSE_HVX_TRANSPOSE_H

#include <stddef.h>
#include <stdint.h>

#define HVX_TRANSPOSE_TILE 8192 /* bytes of one tile */

/* The work space hvx_transpose needs (128-byte aligned): two tiles and a vector of slack. */
size_t hvx_transpose_ws_bytes(void);

/* y[c * ldy + r] = x[r * ldx + c] for r < rows, c < cols (element strides ldx, ldy); es: 1, 2, 4,
 * ..., 64 bytes. x and y: any alignment, not overlapping; nothing of y is written but those elements. */
void hvx_transpose(const uint8_t *x, size_t ldx, uint8_t *y, size_t ldy, size_t rows, size_t cols, size_t es,
                   uint8_t *ws);

/* n (>= 1) bytes from src to dst (any alignment, not overlapping); nothing outside them written, nothing
 * read outside the aligned vectors they lie in. */
void hvx_copy_bytes(uint8_t *dst, const uint8_t *src, size_t n);

#endif /* HEXFUSE_HVX_TRANSPOSE_H */
