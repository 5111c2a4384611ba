/*
 * sgemm_ref.c - scipy_cblas_sgemm as a plain C loop nest for the Hexagon
 * builds without a BLAS (see include/cblas.h). C = alpha op(A) op(B) + beta C.
 * Column-major calls are mapped to row-major by computing C^T = op(B)^T op(A)^T.
 * As in BLAS, beta == 0 does not read C (NaNs in C are not propagated).
 */
#include <cblas.h>
#include <stddef.h>

void scipy_openblas_set_num_threads(int n)
{
    (void)n;
}

static void sgemm_rowmajor(int ta, int tb, blasint M, blasint N, blasint K, float alpha, const float *A,
                           blasint lda, const float *B, blasint ldb, float beta, float *C, blasint ldc)
{
    for (blasint i = 0; i < M; i++) {
        float *crow = C + (size_t)i * (size_t)ldc;
        if (beta == 0.0f)
            for (blasint j = 0; j < N; j++)
                crow[j] = 0.0f;
        else if (beta != 1.0f)
            for (blasint j = 0; j < N; j++)
                crow[j] *= beta;
        for (blasint k = 0; k < K; k++) {
            float a = ta ? A[(size_t)k * (size_t)lda + (size_t)i] : A[(size_t)i * (size_t)lda + (size_t)k];
            a *= alpha;
            if (!tb) {
                const float *brow = B + (size_t)k * (size_t)ldb;
                for (blasint j = 0; j < N; j++)
                    crow[j] += a * brow[j];
            } else {
                for (blasint j = 0; j < N; j++)
                    crow[j] += a * B[(size_t)j * (size_t)ldb + (size_t)k];
            }
        }
    }
}

void scipy_cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint M,
                       blasint N, blasint K, float alpha, const float *A, blasint lda, const float *B,
                       blasint ldb, float beta, float *C, blasint ldc)
{
    if (M <= 0 || N <= 0)
        return;
    int at = ta != CblasNoTrans, bt = tb != CblasNoTrans;
    if (order == CblasRowMajor)
        sgemm_rowmajor(at, bt, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else /* C^T (N x M, row-major with ldc) = op(B)^T op(A)^T */
        sgemm_rowmajor(bt, at, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
}
