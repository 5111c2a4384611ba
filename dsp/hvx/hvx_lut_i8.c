/*
 * hvx_lut_i8.c - int8 -> int8 lookup through a 256-entry table with vlut32.
 *
 * vlut32(Vu.b, Vv.b, Rt) (128-byte mode) looks up the 32 entries whose index
 * has bits 7..5 equal to Rt & 7; the entry for index i sits in halfword
 * (i % 64), byte ((Rt >> 1) & 1) of the table vector; other lanes give 0.
 * So one table vector holds 128 entries (halfword i % 64, byte (i >> 6) & 1)
 * and the full table is two vectors; eight vlut32 (the first plain, seven
 * OR-accumulating) cover the 8 index ranges. All eight use the permute
 * resource: 8 packets per 128 bytes at best.
 */
#include "hvx_kernels.h"
#include "hvx_util.h"

void hvx_lut_i8_prepare_xor(const uint8_t table[256], uint8_t flip, uint8_t prepared[256])
{
    for (int i = 0; i < 256; i++) {
        int vec = i >> 7;
        int pos = 2 * (i % 64) + ((i >> 6) & 1);
        prepared[vec * HVX_BYTES + pos] = table[i ^ flip];
    }
}

void hvx_lut_i8_prepare(const int8_t table[256], uint8_t prepared[256])
{
    hvx_lut_i8_prepare_xor((const uint8_t *)table, 0, prepared);
}

void hvx_lut_i8(const int8_t *x, int8_t *y, size_t n, const uint8_t prepared[256])
{
    const HVX_Vector t0 = ((const HVX_Vector *)(const void *)prepared)[0];
    const HVX_Vector t1 = ((const HVX_Vector *)(const void *)prepared)[1];
    size_t nv = n / HVX_BYTES, tail = n % HVX_BYTES;
    if (hvx_aligned(x) && hvx_aligned(y)) {
        const HVX_Vector *vx = (const HVX_Vector *)(const void *)x;
        HVX_Vector *vy = (HVX_Vector *)(void *)y;
        for (size_t i = 0; i < nv; i++)
            vy[i] = hvx_lut256(vx[i], t0, t1);
    } else {
        const hvx_uvec *vx = (const hvx_uvec *)(const void *)x;
        hvx_uvec *vy = (hvx_uvec *)(void *)y;
        for (size_t i = 0; i < nv; i++)
            vy[i] = hvx_lut256(vx[i], t0, t1);
    }
    if (tail) {
        size_t off = nv * HVX_BYTES;
        HVX_Vector tx = hvx_load_partial(x + off, tail);
        hvx_store_partial(y + off, hvx_lut256(tx, t0, t1), tail);
    }
}
