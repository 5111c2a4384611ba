/*
 * hvx_dequant.h - DequantizeLinear of u8/i8 to f32 in HVX integer arithmetic, bit for bit
 * ref_dequantize_linear (dsp/ref/ref_quant.h): y = f32(x - zp) * scale, rounded to nearest even.
 *
 * |x - zp| <= 255 and the scale's 24-bit mantissa multiply exactly in 32 bits; the product is then
 * normalised (count leading zeros), rounded to 24 bits (ties to even) and given the scale's exponent.
 * A scale whose product could leave the normal range (exponent field 0, or above 245: subnormal,
 * zero, huge, inf, NaN) and the tail past the last 128 elements take the scalar path.
 *
 * Also the other f32 steps of the quant family done in integer arithmetic on the bit patterns:
 * DYNAMIC_QPARAMS's range and CAST f32 -> i32.
 */
#ifndef HEXFUSE_HVX_DEQUANT_H
#define HEXFUSE_HVX_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* y[i] = f32(x[i] - zp) * scale for i < n; x: u8 (x_signed 0) or i8; any alignment */
void hvx_dequant_i8_f32(const uint8_t *x, size_t n, int x_signed, int32_t zp, float scale, float *y);

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
