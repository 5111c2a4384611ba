/*
 * ref_qpool.h - the reference of the integer pooling ops of QDQ groups. Header only, plain C11
 * without libc (the host kernel, the host tests and the qemu-hexagon image use it).
 *
 *   QGLOBAL_AVGPOOL  acc = sum(x) - zx * count (int32, wrapping); y = QMATMUL's requantisation of
 *                    acc with scale = f32(s_x / f32(s_y * f32(count))): ONNX Runtime's
 *                    QLinearGlobalAveragePool (MlasQLinearGlobalAveragePool, SSE2), which its QDQ
 *                    fusion runs for DQ -> GlobalAveragePool -> Q
 *   QMAXPOOL         y = Q(DQ(max of the window)): the max commutes with DQ (scale > 0), so this
 *                    is the float group's result; with equal parameters it is the max itself,
 *                    what ORT runs on the integers
 */
#ifndef HEXFUSE_REF_QPOOL_H
#define HEXFUSE_REF_QPOOL_H

#include <stdint.h>

#include "ref_qmatmul.h"
#include "ref_quant.h"

static inline int32_t ref_qglobal_avgpool(int32_t sum, uint32_t count, int32_t zx, float scale, int32_t zy, int32_t lo,
                                          int32_t hi) {
    uint32_t acc = (uint32_t)sum - (uint32_t)zx * count;
    return ref_qmatmul_requant((int32_t)acc, scale, zy, lo, hi);
}

static inline int32_t ref_qmaxpool_requant(int32_t max, float sx, int32_t zx, float sy, int32_t zy, int32_t lo,
                                           int32_t hi) {
    return ref_quantize_linear(ref_dequantize_linear(max, sx, zx), sy, zy, lo, hi);
}

#endif
