/*
 * hvx_qeltwise.h - QADD and QMUL (dsp/ref/ref_qeltwise.h) on HVX, 128 outputs at a time, bit for bit:
 * the exact value in 16.16 fixed point (hvx_requant.h) rounded to the integer, and the outputs within
 * the float reference's error of a tie flagged; the caller runs the reference on those.
 *
 *   QMUL  t = (a - za)(b - zb) r + zy: the product exact in int32, times r as QMATMUL's requantisation
 *         (the same margin of 8 / 2^16: below saturation f32's two roundings, p r and + zy, are
 *         within 3 / 2^16 and the fixed-point product within 1 / 2^16)
 *   QADD  t = (a - za) ra + (b - zb) rb + zy: both products in fixed point, within 1 / 2^16 each; the
 *         reference's five f32 roundings are each within 2^-24 S, S = 510 (|ra| + |rb|) + 256 bounding
 *         every intermediate (whichever operand order ORT's broadcast takes), so the margin is
 *         5 S / 2^8 + 3 units of 2^-16; taken for normal |ra|, |rb| below 2^6 (the sum fits int32)
 */
#ifndef HEXFUSE_HVX_QELTWISE_H
#define HEXFUSE_HVX_QELTWISE_H

#include <stdint.h>

typedef struct hvx_qbin {
    int mul, x_signed, y_signed;
    int32_t za, zb, zy, lo, hi, margin;
    uint32_t ra_bits, rb_bits; /* QMUL: ra_bits is r */
} hvx_qbin;

/* Fills q for an op whose inputs are i8 (x_signed) or u8, its output i8 (y_signed) or u8, range
 * [lo, hi]; QMUL uses ra as r. Returns 0 when its ratios are outside the range the HVX path takes. */
int hvx_qbin_init(hvx_qbin *q, int mul, int x_signed, int y_signed, float ra, float rb, int32_t za, int32_t zb,
                  int32_t zy, int32_t lo, int32_t hi);

/* y[k] = op(a[k * a_step], b[k * b_step]) for k < 128, steps 0 (a broadcast element) or 1; any
 * alignment. Returns 1 when some output is near a tie: near_tie[k] is then 1 for those (y[k] is to
 * be redone by the reference), 0 for the others; returns 0 (near_tie untouched) when none is. */
int hvx_qbin_block(const hvx_qbin *q, const uint8_t *a, int a_step, const uint8_t *b, int b_step, uint8_t *y,
                   uint8_t near_tie[128]);

#endif /* HEXFUSE_HVX_QELTWISE_H */
