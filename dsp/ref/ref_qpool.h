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
 *   QAVGPOOL         ORT's QLinearAveragePool (contrib_ops/cpu/quantization/qlinear_pool.cc), which
 *                    its QDQ fusion runs for DQ -> AveragePool -> Q of one 8-bit type: each tap
 *                    f32(s_x * f32(x - zx)), a window's taps summed in f32 row by row from 0, the
 *                    sum divided by f32(count) (the kernel area with count_include_pad, else the
 *                    taps inside X), then y = sat(nearbyint(avg / s_y + zy)) with x86's conversion
 *                    (NaN or out of int32: the minimum). A kernel over the whole plane without
 *                    pads is ORT's QLinearGlobalAveragePool instead: the lowering emits that.
 */
#ifndef HEXFUSE_REF_QPOOL_H
#define HEXFUSE_REF_QPOOL_H

#include <stdint.h>

#include "ref_qeltwise.h"
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

static inline float ref_qavgpool_tap(int32_t x, float sx, int32_t zx) { return sx * (float)(x - zx); }

/* one output from the f32 sum of its window's taps and its count, as ORT's int64 count converted
 * (0 when no tap is inside without count_include_pad: 0 / 0 is NaN, the minimum) */
static inline int32_t ref_qavgpool_out(float sum, float count, float sy, int32_t zy, int32_t lo, int32_t hi) {
    float avg = sum / count;
    float t = avg / sy;
    t = t + (float)zy;
    return ref_qeltwise_round(t, lo, hi);
}

#endif
