/*
 * hvx_dequant.h - DequantizeLinear of u8/i8/u16/i16 to f32 in HVX integer arithmetic, bit for bit
 * ref_dequantize_linear (dsp/ref/ref_quant.h): y = f32(x - zp) * scale, rounded to nearest even.
 *
 * |x - zp| <= 255 and the scale's 24-bit mantissa multiply exactly in 32 bits; the product is then
 * normalised (count leading zeros), rounded to 24 bits (ties to even) and given the scale's exponent.
 * A scale whose product could leave the normal range (exponent field 0, or above 245: subnormal,
 * zero, huge, inf, NaN) and the tail past the last 128 elements take the scalar path.
 * u16/i16: |x - zp| < 2^16 times the mantissa (< 2^40) is formed in two 32-bit halves and shifted
 * into 32 bits with a sticky bit, then rounded the same way; scales up to exponent field 237.
 *
 * Also the other f32 steps of the quant family done in integer arithmetic on the bit patterns:
 * QuantizeLinear f32 -> u8/i8/u16/i16 (near rounding ties by the reference), DYNAMIC_QPARAMS's range
 * and CAST f32 -> i32.
 */
#ifndef HEXFUSE_HVX_DEQUANT_H
#define HEXFUSE_HVX_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* y[i] = f32(x[i] - zp) * scale for i < n; x: u8 (x_signed 0) or i8; any alignment */
void hvx_dequant_i8_f32(const uint8_t *x, size_t n, int x_signed, int32_t zp, float scale, float *y);

/* the same for x u16 (x_signed 0) or i16; x: 2-byte aligned, y: 4-byte aligned */
void hvx_dequant_i16_f32(const uint16_t *x, size_t n, int x_signed, int32_t zp, float scale, float *y);

/* y[i] = ref_quantize_linear(x[i], scale, zp, lo, hi) for i < n, [lo, hi] the range of y's type: 1 or
 * 2 bytes (y_bytes), signed or not. In fixed point from the bit patterns: with x = mx 2^ex and scale
 * = ms 2^es (24-bit mantissas), H = mx / ms 2^29 is estimated as h = (mx << 7) R / 2^31 (vmpye +
 * vmpyo, rounded), R = floor(2^53 / ms), within 2 units; x / scale = H 2^-sh, sh = 29 + es - ex, and
 * y = (h + 2^(sh - 1)) >> sh with x's sign, + zp, saturated by the packs. The f32 quotient the
 * reference rounds is within 2^-24 x / scale of the exact one (2^-23 if the division were only
 * faithful), 2^-23 H units of h; each k + 1/2 representable in f32 and the rounding monotonic, it
 * lies on the same side of every tie the exact quotient is farther from than that. So a lane whose h
 * lies within (h >> 23) + 4 units of a tie goes to the reference, as do inf and NaN; sh < 12
 * (|x / scale| >= 2^17) saturates by the sign, sh > 31 (|x / scale| < 1/4: subnormals too) gives zp.
 * Returns 0, nothing written, for a scale whose exponent field is below 3 (subnormal lanes could then
 * matter) or 255. x, y: any alignment; y may be x (in place). */
int hvx_quant_f32(const float *x, size_t n, float scale, int32_t zp, int y_bytes, int y_signed, void *y);

/* QSOFTMAX's outputs of one line from its table values t[0, n) and their f32 sum (ref_qsoftmax_out,
 * y_scale the op's floor(1 / s_y)): hvx_quant_f32's fixed point with t * y_scale / sum for x / scale,
 * u8 or i8 (is_u8 0) with zero point zy. The reference rounds that quotient exactly (its f32 quotient
 * decides only farther than 2^-21 from a half, the double one nearer and from 2^20 on, an f32 product
 * that overflows too), so the same near-tie lanes go to it. Returns 0, nothing written, when sum or
 * y_scale is not normal or their exponents leave the fixed point's range. */
int hvx_qsoftmax_out(const float *t, size_t n, float sum, float y_scale, int32_t zy, int is_u8, uint8_t *y);

/* DYNAMIC_QPARAMS's range (ref_dynamic_qparams): *lo = the least x[i] below 0, else +0; *hi = the
 * greatest x[i] above 0, else +0; NaN ignored. By integer min/max of the f32 bit patterns mapped to
 * an order of signed words (a negative pattern ^ 0x7fffffff; NaN to +0 first), -0 read as +0 at the
 * end: the same floats as the reference's f32 compares. x: any alignment; n: any (0 too). */
void hvx_range_f32(const float *x, size_t n, float *lo, float *hi);

/* y[i] = ref_cast_f32_i32(x[i]): x toward zero, INT32_MIN for NaN, +-inf and x outside
 * [-2^31, 2^31), from the bit patterns (the mantissa shifted by the exponent, then the sign).
 * x, y: any alignment, y may be x (in place); nothing written past n. */
void hvx_cast_f32_i32(const float *x, size_t n, int32_t *y);

#endif /* HEXFUSE_HVX_DEQUANT_H */
