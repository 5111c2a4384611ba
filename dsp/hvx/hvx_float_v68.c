/*
 * hvx_float_v68.c - fp32 add/mul and an fp16 matmul using the v68+ HVX
 * "qfloat" instructions (qf32 / qf16).
 *
 * Built only for __HVX_ARCH__ >= 68. qemu-hexagon 7.2 does not decode these
 * instructions, so here they are compiled and linked (v68, v73), not run;
 * the qemu test says so. On a device they should be checked against
 * dsp/ref/ref_float.c with a tolerance (qf32 is not IEEE-rounded).
 */
#include "hvx_kernels.h"
#include "hvx_util.h"

#if __HVX_ARCH__ >= 68

static inline HVX_Vector op_add_f32(HVX_Vector a, HVX_Vector b)
{
    return Q6_Vsf_equals_Vqf32(Q6_Vqf32_vadd_VsfVsf(a, b));
}

static inline HVX_Vector op_mul_f32(HVX_Vector a, HVX_Vector b)
{
    return Q6_Vsf_equals_Vqf32(Q6_Vqf32_vmpy_VsfVsf(a, b));
}

#define HVX_F32_BINARY(NAME, OP)                                                              \
    void NAME(const float *a, const float *b, float *y, size_t n)                             \
    {                                                                                         \
        size_t bytes = n * sizeof(float);                                                     \
        size_t nv = bytes / HVX_BYTES, tail = bytes % HVX_BYTES;                              \
        const hvx_uvec *va = (const hvx_uvec *)(const void *)a;                               \
        const hvx_uvec *vb = (const hvx_uvec *)(const void *)b;                               \
        hvx_uvec *vy = (hvx_uvec *)(void *)y;                                                 \
        for (size_t i = 0; i < nv; i++)                                                       \
            vy[i] = OP(va[i], vb[i]);                                                         \
        if (tail) {                                                                           \
            size_t off = nv * HVX_BYTES;                                                      \
            HVX_Vector ta = hvx_load_partial((const char *)(const void *)a + off, tail);      \
            HVX_Vector tb = hvx_load_partial((const char *)(const void *)b + off, tail);      \
            hvx_store_partial((char *)(void *)y + off, OP(ta, tb), tail);                     \
        }                                                                                     \
    }

HVX_F32_BINARY(hvx_add_f32, op_add_f32)
HVX_F32_BINARY(hvx_mul_f32, op_mul_f32)

/* C[m, n0 .. n0+63] for one row: 64 fp16 columns per vector. vmpy(hf, hf)
 * gives a qf32 pair: v0 = products of the even lanes, v1 = the odd lanes. */
static void matmul_f16_row_block(const uint16_t *arow, const uint16_t *B, int ldb, float *crow,
                                 int cols, int K)
{
    HVX_Vector acc_even = Q6_V_vzero(), acc_odd = Q6_V_vzero(); /* qf32 zero */
    for (int k = 0; k < K; k++) {
        HVX_Vector a = Q6_Vh_vsplat_R(arow[k]);
        const uint16_t *brow = B + (size_t)k * ldb;
        HVX_Vector b = cols == 64 ? *(const hvx_uvec *)(const void *)brow
                                  : hvx_load_partial(brow, (size_t)cols * 2);
        HVX_VectorPair p = Q6_Wqf32_vmpy_VhfVhf(a, b);
        acc_even = Q6_Vqf32_vadd_Vqf32Vqf32(acc_even, Q6_V_lo_W(p));
        acc_odd = Q6_Vqf32_vadd_Vqf32Vqf32(acc_odd, Q6_V_hi_W(p));
    }
    HVX_Vector even = Q6_Vsf_equals_Vqf32(acc_even);
    HVX_Vector odd = Q6_Vsf_equals_Vqf32(acc_odd);
    HVX_VectorPair c = hvx_interleave_words(even, odd); /* columns 0..31, 32..63 */
    size_t bytes = (size_t)cols * sizeof(float);
    if (bytes >= HVX_BYTES) {
        *(hvx_uvec *)(void *)crow = Q6_V_lo_W(c);
        if (bytes == 2 * HVX_BYTES)
            *(hvx_uvec *)(void *)(crow + 32) = Q6_V_hi_W(c);
        else
            hvx_store_partial(crow + 32, Q6_V_hi_W(c), bytes - HVX_BYTES);
    } else {
        hvx_store_partial(crow, Q6_V_lo_W(c), bytes);
    }
}

void hvx_matmul_f16(const uint16_t *A, int lda, const uint16_t *B, int ldb, float *C, int ldc,
                    int M, int N, int K)
{
    for (int m = 0; m < M; m++)
        for (int n0 = 0; n0 < N; n0 += 64) {
            int cols = N - n0 < 64 ? N - n0 : 64;
            matmul_f16_row_block(A + (size_t)m * lda, B + n0, ldb, C + (size_t)m * ldc + n0, cols, K);
        }
}

#endif /* __HVX_ARCH__ >= 68 */
