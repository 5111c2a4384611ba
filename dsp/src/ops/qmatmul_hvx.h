/* qmatmul_hvx.h - QMATMUL, IMATMUL, QCONV2D and ICONV2D items on HVX (Hexagon builds, HFX_HVX): the accumulators
 * by vrmpy and ORT's float requantisation in fixed point with a scalar fallback near ties
 * (dsp/hvx/hvx_qgemm.h), bit for bit dsp/ref/ref_qmatmul.h; IMATMUL's and ICONV2D's accumulators as they are. */
#ifndef HEXFUSE_OPS_QMATMUL_HVX_H
#define HEXFUSE_OPS_QMATMUL_HVX_H

#include "kernels.h"

#ifdef HFX_HVX
#define HFX_QMM_HVX_PANEL 128 /* B's columns per packed panel (HVX_QGEMM_PANEL) */
/* work space of an item of K x cols (QMATMUL), of pixels output pixels with kk taps (QCONV2D) */
size_t hfx_qgemm_hvx_ws_bytes(uint64_t k, uint64_t cols);
/* Rows [r0, r1) x columns [c0, c1) of A[rows, k] x B[k, n] (QMATMUL, IMATMUL). false: not u8/i8 (the C
 * kernel runs). */
bool hfx_qmatmul_hvx(const hfx_kernel_args *a, uint64_t k, uint64_t n, uint64_t r0, uint64_t r1, uint64_t c0,
                     uint64_t c1);
/* Output pixels [p0, p0 + np) of (img, group g), all the group's channels (QCONV2D, ICONV2D). false: not
 * u8/i8. */
size_t hfx_qconv_hvx_ws_bytes(uint64_t kk, uint64_t pixels);
bool hfx_qconv_hvx(const hfx_kernel_args *a, uint64_t img, uint64_t g, uint64_t p0, uint64_t np);
#endif

#endif
