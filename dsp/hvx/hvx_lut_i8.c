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
 *
 * A table of 256 32-bit words is four such tables, one per byte of the words; their four lookups of the
 * same indices are interleaved back into words by two rounds of vshuff.
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

void hvx_lut_words_prepare(const uint32_t table[256], uint8_t prepared[1024])
{
    uint8_t plane[256];
    for (int b = 0; b < 4; b++) {
        for (int i = 0; i < 256; i++)
            plane[i] = (uint8_t)(table[i] >> (8 * b));
        hvx_lut_i8_prepare_xor(plane, 0, prepared + 256 * b);
    }
}

void hvx_lut_words(const uint8_t *x, size_t n, uint8_t add, const uint8_t prepared[1024], uint32_t *y)
{
    const HVX_Vector *t = (const HVX_Vector *)(const void *)prepared;
    HVX_Vector *vy = (HVX_Vector *)(void *)y;
    HVX_Vector va = Q6_Vb_vsplat_R(add);
    for (size_t i = 0; i < n; i += HVX_BYTES, vy += 4) {
        HVX_Vector v = n - i >= HVX_BYTES ? *(const hvx_uvec *)(const void *)(x + i) : hvx_load_upto(x + i, n - i);
        v = Q6_Vb_vadd_VbVb(v, va);
        HVX_VectorPair lo = Q6_W_vshuff_VVR(hvx_lut256(v, t[2], t[3]), hvx_lut256(v, t[0], t[1]), -1);
        HVX_VectorPair hi = Q6_W_vshuff_VVR(hvx_lut256(v, t[6], t[7]), hvx_lut256(v, t[4], t[5]), -1);
        HVX_VectorPair w0 = Q6_W_vshuff_VVR(Q6_V_lo_W(hi), Q6_V_lo_W(lo), -2); /* words 0..63 */
        HVX_VectorPair w1 = Q6_W_vshuff_VVR(Q6_V_hi_W(hi), Q6_V_hi_W(lo), -2); /* words 64..127 */
        vy[0] = Q6_V_lo_W(w0);
        vy[1] = Q6_V_hi_W(w0);
        vy[2] = Q6_V_lo_W(w1);
        vy[3] = Q6_V_hi_W(w1);
    }
}
