/*
 * ref_float.c - float references of the v68+ HVX float kernels (binary16 <-> binary32: ref_quant.h).
 */
#include "ref_kernels.h"

void ref_add_f32(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void ref_mul_f32(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

void ref_matmul_f16(const uint16_t *A, int lda, const uint16_t *B, int ldb, float *C, int ldc,
                    int M, int N, int K)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += ref_f16_to_f32(A[(size_t)m * lda + k]) * ref_f16_to_f32(B[(size_t)k * ldb + n]);
            C[(size_t)m * ldc + n] = acc;
        }
}
