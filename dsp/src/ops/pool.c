/* pool.c - MaxPool, AveragePool (2-D, NCHW, pads / strides / dilations /
 * ceil_mode / count_include_pad) and GlobalAveragePool (any spatial rank).
 *
 * MaxPool/AveragePool: an item is a range of output rows (n, c, oy), each of
 * OW outputs. A window's taps outside the input are skipped; a MaxPool
 * window without any tap inside the input (possible only with dilation)
 * gives -FLT_MAX, as ONNX Runtime. AveragePool divides by the taps inside
 * the input, or with count_include_pad by the taps inside the padded input
 * [-pad_begin, in + pad_end) (a ceil_mode window may reach beyond it), as
 * ONNX Runtime; a window with nothing to count gives 0.
 * GlobalAveragePool: an item is a range of (n, c) channels, each summed in
 * double (vsum.h). */
#include "kernels.h"
#include "vsum.h"

#define HFX_FLT_MAX 3.40282346638528859812e+38f

/* Taps k in [0, K) whose coordinate o*s - pb + k*d lies in [lo, hi): [*k0, *k1). */
static inline void tap_range(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi, int64_t *k0, int64_t *k1) {
    /* start + k d >= lo  <=>  k >= ceil((lo - start) / d) */
    int64_t a = lo - start, b = hi - start; /* want a <= k d < b */
    int64_t first, last;
    if (d == 1) { /* the common case, without the divisions (they dominated small pools) */
        first = a <= 0 ? 0 : a;
        last = b <= 0 ? 0 : b;
    } else {
        first = a <= 0 ? 0 : (a + d - 1) / d;
        last = b <= 0 ? 0 : (b - 1) / d + 1; /* number of k with k d < b (k >= 0) */
    }
    if (last > k) last = k;
    if (first > last) first = last;
    *k0 = first;
    *k1 = last;
}

HFX_VECTOR_KERNEL
void hfx_k_pool2d(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *yt = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    const float *X = a->in[0];
    float *Y = a->out[0];
    const uint64_t *v = op->plan.v;
    uint64_t ow = v[1];
    uint64_t b, e;
    hfx_plan_range(v[0], v[2], item, &b, &e);
    int64_t h = xt->dims[2], w = xt->dims[3], oh = yt->dims[2];
    int64_t kh = pr[HFX_P_POOL_KERNEL_H], kw = pr[HFX_P_POOL_KERNEL_W];
    int64_t sh = pr[HFX_P_POOL_STRIDE_H], sw = pr[HFX_P_POOL_STRIDE_W];
    int64_t dh = pr[HFX_P_POOL_DILATION_H], dw = pr[HFX_P_POOL_DILATION_W];
    int64_t pt = pr[HFX_P_POOL_PAD_TOP], pl = pr[HFX_P_POOL_PAD_LEFT];
    int64_t pb = pr[HFX_P_POOL_PAD_BOTTOM], pr_ = pr[HFX_P_POOL_PAD_RIGHT];
    bool is_max = op->opcode == HFX_OP_MAXPOOL;
    bool include_pad = pr[HFX_P_POOL_COUNT_INCLUDE_PAD] != 0;
    /* Outputs whose window lies inside the row, [q_lo, q_hi): computed tap by tap over the whole
     * range (contiguous, vectorizable); only the border outputs take the per-window path. Each
     * output still sees its taps in the same (ky, kx) order, so the results are unchanged. */
    int64_t q_lo = (pl + sw - 1) / sw, q_hi = (w - 1 - (kw - 1) * dw + pl) / sw + 1;
    if (w - 1 - (kw - 1) * dw + pl < 0) q_hi = 0;
    if (q_hi > (int64_t)ow) q_hi = (int64_t)ow;
    if (q_lo > q_hi) q_lo = q_hi;
    for (uint64_t r = b; r < e; r++) {
        int64_t oy = (int64_t)(r % (uint64_t)oh);
        const float *xc = X + (r / (uint64_t)oh) * (uint64_t)(h * w);
        float *yr = Y + r * ow;
        int64_t y0 = oy * sh - pt, ky0, ky1, py0, py1;
        tap_range(y0, kh, dh, 0, h, &ky0, &ky1);
        tap_range(y0, kh, dh, -pt, h + pb, &py0, &py1);
        for (int64_t q = q_lo; q < q_hi; q++) yr[q] = is_max ? -HFX_FLT_MAX : 0.0f;
        for (int64_t ky = ky0; ky < ky1; ky++) {
            const float *xr = xc + (y0 + ky * dh) * w - pl;
            for (int64_t kx = 0; kx < kw; kx++) {
                const float *src = xr + kx * dw;
                if (is_max) {
                    for (int64_t q = q_lo; q < q_hi; q++) {
                        float t = src[q * sw], m = yr[q];
                        yr[q] = (t > m || t != t) ? t : m; /* NaN propagates */
                    }
                } else {
                    for (int64_t q = q_lo; q < q_hi; q++) yr[q] += src[q * sw];
                }
            }
        }
        if (!is_max) {
            int64_t count = (include_pad ? py1 - py0 : ky1 - ky0) * kw;
            for (int64_t q = q_lo; q < q_hi; q++) yr[q] = count > 0 ? yr[q] / (float)count : 0.0f;
        }
        for (uint64_t q = 0; q < ow; q++) {
            if ((int64_t)q == q_lo) q = (uint64_t)q_hi;
            if (q >= ow) break;
            int64_t x0 = (int64_t)q * sw - pl, kx0, kx1;
            tap_range(x0, kw, dw, 0, w, &kx0, &kx1);
            if (is_max) {
                float m = -HFX_FLT_MAX;
                for (int64_t ky = ky0; ky < ky1; ky++) {
                    int64_t base = (y0 + ky * dh) * w + x0;
                    for (int64_t kx = kx0; kx < kx1; kx++) {
                        float t = xc[base + kx * dw];
                        m = (t > m || t != t) ? t : m; /* NaN propagates */
                    }
                }
                yr[q] = m;
            } else {
                float s = 0.0f;
                for (int64_t ky = ky0; ky < ky1; ky++) {
                    int64_t base = (y0 + ky * dh) * w + x0;
                    for (int64_t kx = kx0; kx < kx1; kx++) s += xc[base + kx * dw];
                }
                int64_t count;
                if (include_pad) {
                    int64_t px0, px1;
                    tap_range(x0, kw, dw, -pl, w + pr_, &px0, &px1);
                    count = (py1 - py0) * (px1 - px0);
                } else {
                    count = (ky1 - ky0) * (kx1 - kx0);
                }
                yr[q] = count > 0 ? s / (float)count : 0.0f;
            }
        }
    }
}

HFX_VECTOR_KERNEL
void hfx_k_global_avgpool(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const float *X = a->in[0];
    float *Y = a->out[0];
    uint64_t sp = op->plan.v[1];
    uint64_t b, e;
    hfx_plan_range(op->plan.v[0], op->plan.v[2], item, &b, &e);
    for (uint64_t c = b; c < e; c++) Y[c] = (float)(hfx_sum(X + c * sp, sp, 0.0f, 0) / (double)sp);
}
