/*
 * ref_lut_i8.c - reference 256-entry int8 -> int8 table lookup.
 */
#include "ref_kernels.h"

void ref_lut_i8(const int8_t *x, int8_t *y, size_t n, const int8_t table[256])
{
    for (size_t i = 0; i < n; i++)
        y[i] = table[(uint8_t)x[i]];
}
