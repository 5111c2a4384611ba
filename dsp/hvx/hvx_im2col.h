/*
 * hvx_im2col.h - the im2col rows of a u8/i8 convolution (QCONV2D, ICONV2D on HVX): for the taps k of
 * a group's window (channel, row, column) and a run of output pixels p,
 *
 *   T[k][p] = X's byte under tap k of output pixel p, zx (X's zero point) in the padding
 *
 * bytes as they are (i8 and u8 alike), vector by vector where a segment of an output row reads a
 * contiguous run of X (stride 1). The rows are hvx_qgemm_pack's V (dsp/hvx/hvx_qgemm.h).
 */
#ifndef HEXFUSE_HVX_IM2COL_H
#define HEXFUSE_HVX_IM2COL_H

#include <stddef.h>
#include <stdint.h>

/* One group's window over X[C][H][W]: cg channels, kh x kw taps, ow_n output columns; strides, dilations,
 * top and left pads as ONNX Conv's. */
typedef struct hvx_conv_geom {
    uint64_t cg, kh, kw, H, W, ow_n;
    int64_t sh, sw, dh, dw, pt, pl;
} hvx_conv_geom;

/* bytes of one im2col row of np pixels: whole 128-byte panels and 128 bytes of slack for the vector
 * stores' overshoot */
size_t hvx_im2col_ld(uint64_t np);

/* T[k][p] (rows of ld = hvx_im2col_ld(np) bytes) for output pixels [p0, p0 + np), xc: X at the group's
 * first channel; reads nothing at or past x_end, writes up to 127 bytes past np in each row. */
void hvx_im2col_rows(const uint8_t *xc, const uint8_t *x_end, const hvx_conv_geom *g, uint64_t p0, uint64_t np,
                     uint8_t zx, uint8_t *t, size_t ld);

#endif /* HEXFUSE_HVX_IM2COL_H */
