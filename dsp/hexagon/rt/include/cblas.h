/*
 * cblas.h - the one BLAS entry point the hexfuse core's host kernels call
 * (scipy-openblas32 names), for the Hexagon builds without the Hexagon SDK.
 *
 * There is no BLAS for Hexagon here. dsp/hexagon/rt/sgemm_ref.c implements
 * scipy_cblas_sgemm as a plain C loop nest (all four transpose cases, alpha,
 * beta, leading dimensions) so that the core's matrix-engine ops (GEMM,
 * CONV2D) compile, link and run in the freestanding images. With the SDK
 * the matrix engine is HMX; this file is not used there.
 */
#ifndef HEXFUSE_RT_CBLAS_H
#define HEXFUSE_RT_CBLAS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int blasint;

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };

void scipy_cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint M,
                       blasint N, blasint K, float alpha, const float *A, blasint lda, const float *B,
                       blasint ldb, float beta, float *C, blasint ldc);
/* No BLAS threads here: accepted and ignored (always one thread). */
void scipy_openblas_set_num_threads(int n);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_RT_CBLAS_H */
