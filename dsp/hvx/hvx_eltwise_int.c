/*
 * hvx_eltwise_int.c - int16 / int32 elementwise add, saturating add, mul and
 * relu on 128-byte HVX vectors.
 *
 * Each kernel: full vectors through an aligned (vmem) loop when all pointers
 * are 128-byte aligned, else an unaligned (vmemu) loop; the last partial
 * vector goes through a zero-padded local vector, so nothing reads or writes
 * past the caller's buffers. Results match dsp/ref/ref_eltwise_int.c bit for
 * bit.
 */
#include "hvx_kernels.h"
#include "hvx_util.h"

/* ---- the vector operations -------------------------------------------- */

static inline HVX_Vector op_add_i16(HVX_Vector a, HVX_Vector b) { return Q6_Vh_vadd_VhVh(a, b); }
static inline HVX_Vector op_add_sat_i16(HVX_Vector a, HVX_Vector b) { return Q6_Vh_vadd_VhVh_sat(a, b); }
/* low 16 bits of the product (uses both multiply resources) */
static inline HVX_Vector op_mul_i16(HVX_Vector a, HVX_Vector b) { return Q6_Vh_vmpyi_VhVh(a, b); }
static inline HVX_Vector op_relu_i16(HVX_Vector x) { return Q6_Vh_vmax_VhVh(x, Q6_V_vzero()); }

static inline HVX_Vector op_add_i32(HVX_Vector a, HVX_Vector b) { return Q6_Vw_vadd_VwVw(a, b); }
static inline HVX_Vector op_add_sat_i32(HVX_Vector a, HVX_Vector b) { return Q6_Vw_vadd_VwVw_sat(a, b); }
/* low 32 bits of a*b = a * b.uh[0] + (a.h[0] * b.h[1]) << 16 (mod 2^32):
 * vmpyieo(a, b) = (a.h[0] * b.h[1]) << 16, then += vmpyie(a, b.uh) = a * b.uh[0].
 * Two single-multiply-resource instructions per vector. */
static inline HVX_Vector op_mul_i32(HVX_Vector a, HVX_Vector b)
{
    return Q6_Vw_vmpyieacc_VwVwVuh(Q6_Vw_vmpyieo_VhVh(a, b), a, b);
}
static inline HVX_Vector op_relu_i32(HVX_Vector x) { return Q6_Vw_vmax_VwVw(x, Q6_V_vzero()); }

/* ---- loops --------------------------------------------------------------
 * Software pipelined by hand: the loads of vector i+1 are issued before the
 * store of vector i. This stays correct when y == a or y == b (in place)
 * because the store of vector i never overlaps the loads of vector i+1, and
 * it lets the compiler pair each store with a load of the next vector:
 * 2 packets per vector in the aligned binary loop (one vector load per
 * packet). */

#define HVX_BINARY_LOOP(VT, OP)                                                               \
    do {                                                                                      \
        const VT *va = (const VT *)(const void *)a;                                           \
        const VT *vb = (const VT *)(const void *)b;                                           \
        VT *vy = (VT *)(void *)y;                                                             \
        HVX_Vector x = va[0], w = vb[0];                                                      \
        for (size_t i = 0; i + 1 < nv; i++) {                                                 \
            HVX_Vector r = OP(x, w);                                                          \
            x = va[i + 1];                                                                    \
            w = vb[i + 1];                                                                    \
            vy[i] = r;                                                                        \
        }                                                                                     \
        vy[nv - 1] = OP(x, w);                                                                \
    } while (0)

#define HVX_UNARY_LOOP(VT, OP)                                                                \
    do {                                                                                      \
        const VT *vx = (const VT *)(const void *)x;                                           \
        VT *vy = (VT *)(void *)y;                                                             \
        HVX_Vector v = vx[0];                                                                 \
        for (size_t i = 0; i + 1 < nv; i++) {                                                 \
            HVX_Vector r = OP(v);                                                             \
            v = vx[i + 1];                                                                    \
            vy[i] = r;                                                                        \
        }                                                                                     \
        vy[nv - 1] = OP(v);                                                                   \
    } while (0)

#define HVX_BINARY_KERNEL(NAME, T, OP)                                                        \
    void NAME(const T *a, const T *b, T *y, size_t n)                                         \
    {                                                                                         \
        size_t bytes = n * sizeof(T);                                                         \
        size_t nv = bytes / HVX_BYTES, tail = bytes % HVX_BYTES;                              \
        if (nv > 0) {                                                                         \
            if (hvx_aligned(a) && hvx_aligned(b) && hvx_aligned(y))                           \
                HVX_BINARY_LOOP(HVX_Vector, OP);                                              \
            else                                                                              \
                HVX_BINARY_LOOP(hvx_uvec, OP);                                                \
        }                                                                                     \
        if (tail) {                                                                           \
            size_t off = nv * HVX_BYTES;                                                      \
            HVX_Vector ta = hvx_load_partial((const char *)(const void *)a + off, tail);      \
            HVX_Vector tb = hvx_load_partial((const char *)(const void *)b + off, tail);      \
            hvx_store_partial((char *)(void *)y + off, OP(ta, tb), tail);                     \
        }                                                                                     \
    }

#define HVX_UNARY_KERNEL(NAME, T, OP)                                                         \
    void NAME(const T *x, T *y, size_t n)                                                     \
    {                                                                                         \
        size_t bytes = n * sizeof(T);                                                         \
        size_t nv = bytes / HVX_BYTES, tail = bytes % HVX_BYTES;                              \
        if (nv > 0) {                                                                         \
            if (hvx_aligned(x) && hvx_aligned(y))                                             \
                HVX_UNARY_LOOP(HVX_Vector, OP);                                               \
            else                                                                              \
                HVX_UNARY_LOOP(hvx_uvec, OP);                                                 \
        }                                                                                     \
        if (tail) {                                                                           \
            size_t off = nv * HVX_BYTES;                                                      \
            HVX_Vector tx = hvx_load_partial((const char *)(const void *)x + off, tail);      \
            hvx_store_partial((char *)(void *)y + off, OP(tx), tail);                         \
        }                                                                                     \
    }

HVX_BINARY_KERNEL(hvx_add_i16, int16_t, op_add_i16)
HVX_BINARY_KERNEL(hvx_add_sat_i16, int16_t, op_add_sat_i16)
HVX_BINARY_KERNEL(hvx_mul_i16, int16_t, op_mul_i16)
HVX_UNARY_KERNEL(hvx_relu_i16, int16_t, op_relu_i16)

HVX_BINARY_KERNEL(hvx_add_i32, int32_t, op_add_i32)
HVX_BINARY_KERNEL(hvx_add_sat_i32, int32_t, op_add_sat_i32)
HVX_BINARY_KERNEL(hvx_mul_i32, int32_t, op_mul_i32)
HVX_UNARY_KERNEL(hvx_relu_i32, int32_t, op_relu_i32)
