/*
 * hvx_util.h - small helpers shared by the HVX kernels (128-byte vectors).
 */
#ifndef HEXFUSE_HVX_UTIL_H
#define HEXFUSE_HVX_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hexagon_protos.h>
#include <hexagon_types.h>

#if !defined(__HVX__) || __HVX_LENGTH__ != 128
#error "dsp/hvx needs -mhvx -mhvx-length=128b"
#endif

#define HVX_BYTES 128

/* A vector at any byte address: loads and stores become vmemu. */
typedef long hvx_uvec __attribute__((__vector_size__(HVX_BYTES), __aligned__(1)));

static inline int hvx_aligned(const void *p)
{
    return ((uintptr_t)p & (HVX_BYTES - 1)) == 0;
}

/* Load the first `bytes` (< 128) bytes at p into a vector; the rest is zero.
 * Used for tails, so that no load reads past the end of a buffer. */
static inline HVX_Vector hvx_load_partial(const void *p, size_t bytes)
{
    HVX_Vector v = Q6_V_vzero();
    memcpy(&v, p, bytes);
    return v;
}

/* Store the first `bytes` (< 128) bytes of v at p. */
static inline void hvx_store_partial(void *p, HVX_Vector v, size_t bytes)
{
    memcpy(p, &v, bytes);
}

/* The `bytes` (1..128) bytes at p in the first lanes (the rest: p's neighbours), by two aligned
 * loads: an aligned vector never crosses a page, so nothing is read outside the pages of
 * [p, p + bytes), unlike a vmemu at p near the end of a buffer. No stack round trip. */
static inline HVX_Vector hvx_load_upto(const uint8_t *p, size_t bytes)
{
    const HVX_Vector *lo = (const HVX_Vector *)(const void *)((uintptr_t)p & ~(uintptr_t)(HVX_BYTES - 1));
    const HVX_Vector *hi = (const HVX_Vector *)(const void *)((uintptr_t)(p + bytes - 1) & ~(uintptr_t)(HVX_BYTES - 1));
    return Q6_V_valign_VVR(*hi, *lo, (int32_t)(uintptr_t)p);
}

/* Store the first `bytes` (1..127) bytes of v at p (any alignment) by predicated aligned stores. */
static inline void hvx_store_first(uint8_t *p, HVX_Vector v, size_t bytes)
{
    size_t off = (uintptr_t)p & (HVX_BYTES - 1), end = off + bytes;
    HVX_Vector *base = (HVX_Vector *)(void *)(p - off);
    HVX_Vector r = Q6_V_vror_VR(v, (int32_t)(HVX_BYTES - off)); /* r[off + i] = v[i] */
    HVX_VectorPred first = Q6_Q_vsetq2_R((int32_t)(end < HVX_BYTES ? end : HVX_BYTES));
    Q6_vmem_QRIV(Q6_Q_and_QQn(first, Q6_Q_vsetq_R((int32_t)off)), base, r);
    if (end > HVX_BYTES)
        Q6_vmem_QRIV(Q6_Q_vsetq_R((int32_t)(end - HVX_BYTES)), base + 1, r);
}

/* Interleave the 32-bit lanes of `even` and `odd`:
 * lo = e0 o0 e1 o1 ... e15 o15, hi = e16 o16 ... e31 o31.
 * (Used to put the even/odd lane results of a widening multiply back in
 * column order; integer-only, so it is tested under qemu.) */
static inline HVX_VectorPair hvx_interleave_words(HVX_Vector even, HVX_Vector odd)
{
    return Q6_W_vshuff_VVR(odd, even, -4);
}

/* 128 bytes through a 256-entry table prepared by hvx_lut_i8_prepare (t0, t1: its two vectors):
 * eight vlut32, each for the 32 indices of one value of bits 7..5. */
static inline HVX_Vector hvx_lut256(HVX_Vector x, HVX_Vector t0, HVX_Vector t1)
{
    HVX_Vector y = Q6_Vb_vlut32_VbVbR(x, t0, 0);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t0, 1);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t0, 2);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t0, 3);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t1, 4);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t1, 5);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t1, 6);
    y = Q6_Vb_vlut32or_VbVbVbR(y, x, t1, 7);
    return y;
}

#endif /* HEXFUSE_HVX_UTIL_H */
