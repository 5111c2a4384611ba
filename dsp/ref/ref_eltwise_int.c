/*
 * ref_eltwise_int.c - reference int16 / int32 elementwise kernels.
 * Wrapping arithmetic is done in unsigned types (no signed overflow UB).
 */
#include "ref_kernels.h"

void ref_add_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (int16_t)(uint16_t)((uint16_t)a[i] + (uint16_t)b[i]);
}

void ref_add_sat_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int32_t s = (int32_t)a[i] + (int32_t)b[i];
        y[i] = (int16_t)(s > INT16_MAX ? INT16_MAX : s < INT16_MIN ? INT16_MIN : s);
    }
}

void ref_mul_i16(const int16_t *a, const int16_t *b, int16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (int16_t)(uint16_t)((uint32_t)(int32_t)a[i] * (uint32_t)(int32_t)b[i]);
}

void ref_relu_i16(const int16_t *x, int16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
}

void ref_add_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
}

void ref_add_sat_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t s = (int64_t)a[i] + (int64_t)b[i];
        y[i] = (int32_t)(s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : s);
    }
}

void ref_mul_i32(const int32_t *a, const int32_t *b, int32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (int32_t)((uint32_t)a[i] * (uint32_t)b[i]);
}

void ref_relu_i32(const int32_t *x, int32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
}
