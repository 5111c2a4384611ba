/* sgemm_ordered.h - C (+)= alpha op(A) op(B) with every element of C summed in one defined order:
 * its start (0, or C as it is), then (alpha a[i,k]) * b[k,j] added for k = 0, 1, ... one at a time
 * (no FMA: the builds set -ffp-contract=off). It is the order of the Hexagon builds' sgemm
 * (dsp/hexagon/rt/sgemm_ref.c); OpenBLAS on the host sums in blocks of its own. The host runs it
 * for every float Conv and Gemm when asked (hfx_program_sum_in_hexagon_order: emulate's reference),
 * so a float result, and a step of a quantized one, cannot differ between the builds. The Hexagon
 * builds keep sgemm_ref.c: the same sums. */
#ifndef HEXFUSE_OPS_SGEMM_ORDERED_H
#define HEXFUSE_OPS_SGEMM_ORDERED_H

#include <stdbool.h>
#include <stdint.h>

/* An operand read at element (r, c) = base[r * row + c * col]. */
typedef struct hfx_strided {
    const float *base;
    uint64_t row, col;
} hfx_strided;

void hfx_sgemm_ordered(uint64_t m, uint64_t n, uint64_t k, float alpha, hfx_strided a, hfx_strided b, bool accumulate,
                       float *c, uint64_t ldc);

#endif
