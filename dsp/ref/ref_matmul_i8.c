/*
 * ref_matmul_i8.c - reference int8 matmul with int32 accumulation and
 * requantisation to int8 (semantics in ref_kernels.h).
 */
#include "ref_kernels.h"

int8_t ref_requant_i8(int32_t acc, const hx_requant *rq)
{
    /* rounding doubling high multiply, saturating (only INT32_MIN * INT32_MIN overflows) */
    int64_t p = (int64_t)acc * (int64_t)rq->multiplier + ((int64_t)1 << 30);
    int64_t q = p >> 31; /* arithmetic shift (floor) */
    if (q > INT32_MAX)
        q = INT32_MAX;
    /* rounding right shift: saturating add of the rounding term, then shift */
    int64_t s = q + (rq->shift > 0 ? ((int64_t)1 << (rq->shift - 1)) : 0);
    if (s > INT32_MAX)
        s = INT32_MAX;
    int64_t r = s >> rq->shift;
    int64_t y = r + rq->zero_point;
    if (y < rq->out_min)
        y = rq->out_min;
    if (y > rq->out_max)
        y = rq->out_max;
    return (int8_t)y;
}

void ref_requant_i32_i8(const int32_t *acc, int8_t *y, size_t n, const hx_requant *rq)
{
    for (size_t i = 0; i < n; i++)
        y[i] = ref_requant_i8(acc[i], rq);
}

void ref_matmul_i8(const int8_t *A, int lda, const int8_t *B, int ldb, const int32_t *bias,
                   int8_t *C, int ldc, int M, int N, int K, const hx_requant *rq)
{
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            uint32_t acc = bias ? (uint32_t)bias[n] : 0u; /* wrapping int32 */
            for (int k = 0; k < K; k++)
                acc += (uint32_t)((int32_t)A[(size_t)m * lda + k] * (int32_t)B[(size_t)k * ldb + n]);
            C[(size_t)m * ldc + n] = ref_requant_i8((int32_t)acc, rq);
        }
    }
}
