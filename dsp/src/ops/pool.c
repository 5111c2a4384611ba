/* pool.c - MaxPool, AveragePool (2-D, NCHW, pads / strides / dilations /
 * ceil_mode / count_include_pad), GlobalAveragePool and GlobalMaxPool (any spatial rank).
 *
 * MaxPool/AveragePool: an item is a range of output rows (n, c, oy), each of
 * OW outputs; MaxPool takes each row's column maxima first (column_max). A window's taps outside the input are skipped; a MaxPool
 * window without any tap inside the input (possible only with dilation)
 * gives -FLT_MAX, as ONNX Runtime. AveragePool divides by the taps inside
 * the input, or with count_include_pad by the taps inside the padded input
 * [-pad_begin, in + pad_end) (a ceil_mode window may reach beyond it), as
 * ONNX Runtime; a window with nothing to count gives 0.
 * GlobalAveragePool: an item is a range of (n, c) channels, each summed in
 * double (vsum.h). GlobalMaxPool: the same items, each channel's max. */
#include <string.h>

#include "kernels.h"
#include "mlas_math.h"
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

/* Output length of a 2-D pooling axis (ONNX Runtime's rule): floor, or with
 * ceil_mode ceil, of (in + pads - dilation (k - 1) - 1) / stride, + 1; with
 * ceil_mode a last window that would start in the bottom/right padding is
 * dropped. -1 when the kernel is larger than the padded input. */
int64_t hfx_pool_out_len(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin, int64_t pad_end,
                         bool ceil_mode) {
    int64_t span = in + pad_begin + pad_end - dil * (k - 1) - 1;
    if (span < 0) return -1;
    if (!ceil_mode) return span / stride + 1;
    int64_t out = (span + stride - 1) / stride + 1;
    if ((out - 1) * stride >= in + pad_begin) out--;
    return out;
}

typedef struct pool2d_plan {
    uint64_t rows, ow, rows_per_item; /* rows: output rows (N*C*OH) of OW outputs */
} pool2d_plan;

hfx_status hfx_validate_pool2d(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    for (int i = 4; i < 10; i++) { /* strides, dilations, kernel */
        if (pr[i] < 1 || pr[i] > 65535)
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: pool param %d = %d out of range", v->index,
                             i, (int)pr[i]);
    }
    for (int i = 0; i < 4; i++) { /* pads: ONNX Runtime wants them smaller than the kernel */
        int32_t k = pr[HFX_P_POOL_KERNEL_H + (i & 1)];
        if (pr[i] < 0 || pr[i] >= k)
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: pool pad %d = %d not in [0, kernel)",
                             v->index, i, (int)pr[i]);
    }
    for (int i = HFX_P_POOL_CEIL_MODE; i <= HFX_P_POOL_COUNT_INCLUDE_PAD; i++) {
        if (pr[i] != 0 && pr[i] != 1)
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i), "op %u: pool flag %d must be 0 or 1", v->index, i);
    }
    if (x->rank != 4)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u: 2-D pooling needs a rank-4 X", v->index);
    uint32_t od[4] = {x->dims[0], x->dims[1], 0, 0};
    for (int a = 0; a < 2; a++) {
        int64_t n = hfx_pool_out_len(x->dims[2 + a], pr[HFX_P_POOL_KERNEL_H + a], pr[HFX_P_POOL_STRIDE_H + a],
                                     pr[HFX_P_POOL_DILATION_H + a], pr[a], pr[2 + a], pr[HFX_P_POOL_CEIL_MODE] != 0);
        if (n < 1)
            return hfx_vfail(v, HFX_ERR_SHAPE, HFX_PARAM_OFF(v, HFX_P_POOL_KERNEL_H + a),
                             "op %u: pool kernel larger than the padded input", v->index);
        od[2 + a] = (uint32_t)n;
    }
    if (!hfx_same_shape(y, od, 4)) return hfx_shape_err(v, "the pooling");
    return hfx_no_empty_input(v, op);
}

/* about HFX_EW_CHUNK window taps per item */
hfx_status hfx_plan_pool2d(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    uint64_t taps = (uint64_t)op->params[HFX_P_POOL_KERNEL_H] * (uint64_t)op->params[HFX_P_POOL_KERNEL_W];
    pool2d_plan pl = {y->numel / y->dims[3], y->dims[3], hfx_per_item_for(y->dims[3] * taps, HFX_EW_CHUNK)};
    /* MaxPool's column maxima, and one more float: max_row_s2's last load reads a lane past its last tap */
    if (op->opcode == HFX_OP_MAXPOOL) op->plan.ws_bytes = ((size_t)p->tensors[op->in[0]].dims[3] + 1) * sizeof(float);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(pl.rows, pl.rows_per_item));
}

/* yr[q] += src[q sw] for q in [q_lo, q_hi). */
static inline void pool_sum_run(const float *src, int64_t sw, float *yr, int64_t q_lo, int64_t q_hi) {
    for (int64_t q = q_lo; q < q_hi; q++) yr[q] += src[q * sw];
}

typedef float pool_vec __attribute__((vector_size(32))); /* 8 lanes; plain SSE pairs without AVX */
typedef int32_t pool_ivec __attribute__((vector_size(32)));
#define POOL_LANES 8
#define POOL_BLOCK (2 * POOL_LANES)

/* MaxPool's select on 8 lanes: m = t where t is larger or NaN (NaN propagates). A macro: no vector type in
 * a function signature (psABI). */
#define POOL_VMAX(m, t)                                                         \
    do {                                                                        \
        pool_ivec take_ = ((t) > (m)) | ((t) != (t));                           \
        (m) = (pool_vec)(((pool_ivec)(t) & take_) | ((pool_ivec)(m) & ~take_)); \
    } while (0)

/* AveragePool's sum over the taps of POOL_BLOCK adjacent stride-1 windows whose taps all lie inside the
 * row: src at the first window's first tap, rows of taps row_step apart. Same (ky, kx) order per output as
 * the tap-by-tap loops, so the same values. */
static inline void pool_block(const float *src, int64_t rows, int64_t row_step, int64_t kw, int64_t dw, float *y) {
    pool_vec acc[2];
    acc[0] = acc[1] = (pool_vec){0};
    for (int64_t ky = 0; ky < rows; ky++) {
        for (int64_t kx = 0; kx < kw; kx++) {
            const float *t = src + ky * row_step + kx * dw;
            for (int i = 0; i < 2; i++) {
                pool_vec x;
                memcpy(&x, t + i * POOL_LANES, sizeof x); /* unaligned load; no vector in a signature (psABI) */
                acc[i] += x;
            }
        }
    }
    memcpy(y, acc, sizeof acc);
}

/* A max over a window is a max over its columns of the max down each column: vm[x], x in [0, w), is the
 * max of column x over the rows y0 + ky dh, ky in [ky0, ky1) (-FLT_MAX without rows). A KxK window then
 * costs K + K selects per output instead of K x K, with the same value (a max does not depend on the
 * order; of several NaNs another may be the one kept). */
static inline void column_max(const float *xc, int64_t w, int64_t y0, int64_t ky0, int64_t ky1, int64_t dh, float *vm) {
    int64_t x = 0;
    for (; x < w && w >= POOL_LANES; x += POOL_LANES) {
        int64_t x0 = x + POOL_LANES <= w ? x : w - POOL_LANES; /* last block overlaps: same values */
        pool_vec m = (pool_vec){0} - HFX_FLT_MAX;
        for (int64_t ky = ky0; ky < ky1; ky++) {
            pool_vec t;
            memcpy(&t, xc + (y0 + ky * dh) * w + x0, sizeof t);
            POOL_VMAX(m, t);
        }
        memcpy(vm + x0, &m, sizeof m);
    }
    for (; x < w; x++) { /* rows narrower than POOL_LANES */
        float m = -HFX_FLT_MAX;
        for (int64_t ky = ky0; ky < ky1; ky++) {
            float t = xc[(y0 + ky * dh) * w + x];
            m = (t > m || t != t) ? t : m;
        }
        vm[x] = m;
    }
    vm[w] = -HFX_FLT_MAX; /* read by max_row_s2 into a lane it drops */
}

/* MaxPool's stride-2 outputs [q_lo, q_hi) (every tap inside the row, at least POOL_LANES of them) from the
 * column maxima vm, POOL_LANES at a time: a tap's 8 columns are the even lanes of 16 adjacent ones. */
static inline void max_row_s2(const float *vm, int64_t kw, int64_t dw, int64_t pl, int64_t q_lo, int64_t q_hi,
                              float *yr) {
    for (int64_t q = q_lo; q < q_hi; q += POOL_LANES) {
        int64_t q0 = q + POOL_LANES <= q_hi ? q : q_hi - POOL_LANES; /* last block overlaps: same values */
        pool_vec m = (pool_vec){0} - HFX_FLT_MAX;
        for (int64_t kx = 0; kx < kw; kx++) {
            const float *src = vm + q0 * 2 - pl + kx * dw;
            pool_vec lo, hi;
            memcpy(&lo, src, sizeof lo);
            memcpy(&hi, src + POOL_LANES, sizeof hi);
            pool_vec t = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
            POOL_VMAX(m, t);
        }
        memcpy(yr + q0, &m, sizeof m);
    }
}

/* One MaxPool output row from the column maxima vm: outputs [q_lo, q_hi) (every tap inside the row) of
 * stride 1 POOL_LANES at a time, the others tap by tap over the taps inside the row. */
static inline void max_row(const float *vm, int64_t w, int64_t ow, int64_t kw, int64_t dw, int64_t sw, int64_t pl,
                           int64_t q_lo, int64_t q_hi, float *yr) {
    int64_t q = 0;
    while (q < ow) {
        if (sw == 2 && q == q_lo && q_hi - q_lo >= POOL_LANES) {
            max_row_s2(vm, kw, dw, pl, q_lo, q_hi, yr);
            q = q_hi;
            continue;
        }
        if (sw == 1 && q == q_lo && q_hi - q_lo >= POOL_LANES) {
            for (; q < q_hi; q += POOL_LANES) {
                int64_t q0 = q + POOL_LANES <= q_hi ? q : q_hi - POOL_LANES; /* last block overlaps: same values */
                pool_vec m = (pool_vec){0} - HFX_FLT_MAX;
                for (int64_t kx = 0; kx < kw; kx++) {
                    pool_vec t;
                    memcpy(&t, vm + q0 - pl + kx * dw, sizeof t);
                    POOL_VMAX(m, t);
                }
                memcpy(yr + q0, &m, sizeof m);
            }
            q = q_hi;
            continue;
        }
        int64_t x0 = q * sw - pl, kx0, kx1;
        tap_range(x0, kw, dw, 0, w, &kx0, &kx1);
        float m = -HFX_FLT_MAX;
        for (int64_t kx = kx0; kx < kx1; kx++) {
            float t = vm[x0 + kx * dw];
            m = (t > m || t != t) ? t : m;
        }
        yr[q++] = m;
    }
}

/* AveragePool's sums for outputs [q_lo, q_hi) of any stride, tap by tap over the whole range. */
static inline void pool_rows(const float *xc, int64_t w, int64_t y0, int64_t ky0, int64_t ky1, int64_t dh, int64_t pl,
                             int64_t kw, int64_t dw, int64_t sw, int64_t q_lo, int64_t q_hi, float *yr) {
    for (int64_t q = q_lo; q < q_hi; q++) yr[q] = 0.0f;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *xr = xc + (y0 + ky * dh) * w - pl;
        for (int64_t kx = 0; kx < kw; kx++) {
            const float *src = xr + kx * dw;
            /* strides 1 and 2 as constants: the compiler vectorizes their loads */
            if (sw == 1) {
                pool_sum_run(src, 1, yr, q_lo, q_hi);
            } else if (sw == 2) {
                pool_sum_run(src, 2, yr, q_lo, q_hi);
            } else {
                pool_sum_run(src, sw, yr, q_lo, q_hi);
            }
        }
    }
}

HFX_VECTOR_KERNEL
void hfx_run_pool2d(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *yt = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    const float *X = a->in[0];
    float *Y = a->out[0];
    pool2d_plan plan;
    HFX_PLAN_LOAD(plan, op);
    uint64_t ow = plan.ow;
    uint64_t b, e;
    hfx_plan_range(plan.rows, plan.rows_per_item, item, &b, &e);
    int64_t h = xt->dims[2], w = xt->dims[3], oh = yt->dims[2];
    int64_t kh = pr[HFX_P_POOL_KERNEL_H], kw = pr[HFX_P_POOL_KERNEL_W];
    int64_t sh = pr[HFX_P_POOL_STRIDE_H], sw = pr[HFX_P_POOL_STRIDE_W];
    int64_t dh = pr[HFX_P_POOL_DILATION_H], dw = pr[HFX_P_POOL_DILATION_W];
    int64_t pt = pr[HFX_P_POOL_PAD_TOP], pl = pr[HFX_P_POOL_PAD_LEFT];
    int64_t pb = pr[HFX_P_POOL_PAD_BOTTOM], pr_ = pr[HFX_P_POOL_PAD_RIGHT];
    bool is_max = op->opcode == HFX_OP_MAXPOOL;
    bool include_pad = pr[HFX_P_POOL_COUNT_INCLUDE_PAD] != 0;
    /* Outputs whose window lies inside the row, [q_lo, q_hi): MaxPool from the column maxima (max_row);
     * AveragePool with stride 1 in blocks of POOL_BLOCK outputs held in registers, else tap by tap over
     * the whole range, only the border outputs taking the per-window path; each of its outputs sees its
     * taps in the same (ky, kx) order on every path. */
    int64_t q_lo = (pl + sw - 1) / sw, q_hi = (w - 1 - (kw - 1) * dw + pl) / sw + 1;
    if (w - 1 - (kw - 1) * dw + pl < 0) q_hi = 0;
    if (q_hi > (int64_t)ow) q_hi = (int64_t)ow;
    if (q_lo > q_hi) q_lo = q_hi;
    /* the row's (plane, oy) counted along, not divided out per row (two divisions cost a short row's work) */
    uint64_t plane = b / (uint64_t)oh;
    int64_t oy = (int64_t)(b % (uint64_t)oh) - 1;
    for (uint64_t r = b; r < e; r++) {
        if (++oy == oh) oy = 0, plane++;
        const float *xc = X + plane * (uint64_t)(h * w);
        float *yr = Y + r * ow;
        int64_t y0 = oy * sh - pt, ky0, ky1, py0, py1;
        tap_range(y0, kh, dh, 0, h, &ky0, &ky1);
        tap_range(y0, kh, dh, -pt, h + pb, &py0, &py1);
        if (is_max) { /* the usual windows (3x3 stride 1 or 2, 2x2 stride 2) as constants: the taps unrolled */
            if (ky1 - ky0 == 3) column_max(xc, w, y0 + ky0 * dh, 0, 3, dh, a->ws);
            else if (ky1 - ky0 == 2) column_max(xc, w, y0 + ky0 * dh, 0, 2, dh, a->ws);
            else column_max(xc, w, y0, ky0, ky1, dh, a->ws);
            if (kw == 3 && dw == 1 && sw == 1) max_row(a->ws, w, (int64_t)ow, 3, 1, 1, pl, q_lo, q_hi, yr);
            else if (kw == 3 && dw == 1 && sw == 2) max_row(a->ws, w, (int64_t)ow, 3, 1, 2, pl, q_lo, q_hi, yr);
            else if (kw == 2 && dw == 1 && sw == 2) max_row(a->ws, w, (int64_t)ow, 2, 1, 2, pl, q_lo, q_hi, yr);
            else max_row(a->ws, w, (int64_t)ow, kw, dw, sw, pl, q_lo, q_hi, yr);
            continue;
        }
        if (sw == 1 && q_hi - q_lo >= POOL_BLOCK) {
            for (int64_t q = q_lo; q < q_hi; q += POOL_BLOCK) {
                int64_t q0 = q + POOL_BLOCK <= q_hi ? q : q_hi - POOL_BLOCK; /* last block overlaps: same values */
                const float *src = ky1 > ky0 ? xc + (y0 + ky0 * dh) * w - pl + q0 : xc; /* no rows: unread */
                pool_block(src, ky1 - ky0, dh * w, kw, dw, yr + q0);
            }
        } else {
            pool_rows(xc, w, y0, ky0, ky1, dh, pl, kw, dw, sw, q_lo, q_hi, yr);
        }
        int64_t count = (include_pad ? py1 - py0 : ky1 - ky0) * kw;
        for (int64_t q = q_lo; q < q_hi; q++) yr[q] = count > 0 ? yr[q] / (float)count : 0.0f;
        for (uint64_t q = 0; q < ow; q++) {
            if ((int64_t)q == q_lo) q = (uint64_t)q_hi;
            if (q >= ow) break;
            int64_t x0 = (int64_t)q * sw - pl, kx0, kx1;
            tap_range(x0, kw, dw, 0, w, &kx0, &kx1);
            float s = 0.0f;
            for (int64_t ky = ky0; ky < ky1; ky++) {
                int64_t base = (y0 + ky * dh) * w + x0;
                for (int64_t kx = kx0; kx < kx1; kx++) s += xc[base + kx * dw];
            }
            int64_t count_q;
            if (include_pad) {
                int64_t px0, px1;
                tap_range(x0, kw, dw, -pl, w + pr_, &px0, &px1);
                count_q = (py1 - py0) * (px1 - px0);
            } else {
                count_q = (ky1 - ky0) * (kx1 - kx0);
            }
            yr[q] = count_q > 0 ? s / (float)count_q : 0.0f;
        }
    }
}

typedef struct global_pool_plan {
    uint64_t channels, spatial, channels_per_item; /* channels: N*C */
} global_pool_plan;

hfx_status hfx_validate_global_pool(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]];
    if (x->rank < 3)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u: %s needs rank >= 3 (N, C, spatial)", v->index,
                         op->desc->label);
    uint32_t od[HFX_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (uint32_t i = 2; i < x->rank; i++) od[i] = 1;
    if (!hfx_same_shape(&v->p->tensors[op->out[0]], od, x->rank)) return hfx_shape_err(v, "[N, C, 1, ...]");
    return hfx_no_empty_input(v, op);
}

hfx_status hfx_plan_global_pool(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]];
    uint64_t ch = (uint64_t)x->dims[0] * x->dims[1], sp = x->numel / ch;
    global_pool_plan pl = {ch, sp, hfx_per_item_for(sp, HFX_EW_CHUNK)};
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, hfx_ceil_div(ch, pl.channels_per_item));
}

/* A channel's mean as ONNX Runtime's MlasPoolGlobalKernel computes it (x86-64, any spatial rank): 4 float
 * lanes summed in order (lane k % 4), reduced (0 + 2) + (1 + 3), the last 1-3 elements added one by one,
 * the sum divided by n in float. */
static float mean_ort(const float *x, uint64_t n) {
    float lane[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (uint64_t j = 0; j < 4; j++) lane[j] += x[k + j];
    float s = (lane[0] + lane[2]) + (lane[1] + lane[3]);
    for (; k < n; k++) s += x[k];
    return s / (float)n;
}

/* ORT's NchwcTransformer (its default optimization level) turns a rank-4 GlobalAveragePool whose channel
 * count is a multiple of MLAS's NCHWc block (8 floats, 16 with AVX512F) into its NCHWc pool, which adds a
 * channel's values one by one, in order, and divides the sum by n (MlasNchwcPool, SpoolKernelAvxCommon.h).
 * Not one that reads a DequantizeLinear's output (a QDQ model's): ORT 1.32 keeps its plain pool there
 * (ppocr_det u16u8's 192 channels, AVX2; so it does after a Relu or an Add, not a graph input). */
static bool nchwc_pool(const hfx_program *p, const hfx_tensor *x) {
    if (x->producer != HFX_NO_TENSOR && p->ops[x->producer].opcode == HFX_OP_DEQUANTIZE_LINEAR) return false;
    return x->rank == 4 && x->dims[1] % (hfx_mlas_avx512f() ? 16u : 8u) == 0;
}

static float mean_nchwc(const float *x, uint64_t n) {
    float s = 0.0f;
    for (uint64_t k = 0; k < n; k++) s += x[k];
    return s / (float)n;
}

/* _mm_max_ps of one lane: a where a > b, else b (b where either is NaN, b of +-0 and -+0). Selected by bit masks:
 * clang for Hexagon makes a float select on a > b its sfmax, IEEE maxNum, which drops a NaN of either side. */
static inline float max_ps(float a, float b) {
    uint32_t take_a = 0u - (uint32_t)(a > b);
    return hfx_f32_of((hfx_u32_of(a) & take_a) | (hfx_u32_of(b) & ~take_a));
}

/* A channel's max as ONNX Runtime's MlasPoolGlobalKernel computes it (x86-64): 4 lanes from -FLT_MAX over the
 * whole blocks of 4 (lane k % 4), each max_ps(lane, x), reduced max_ps(max_ps(0, 2), max_ps(1, 3)), then the last
 * 1-3 elements by std::max(m, x). So a NaN survives only as the last element of the last whole block (found
 * against ORT 1.32 at every position, 7 to 1024 elements); a channel of -inf gives -FLT_MAX. */
static float channel_max(const float *x, uint64_t n) {
    float l[4] = {-HFX_FLT_MAX, -HFX_FLT_MAX, -HFX_FLT_MAX, -HFX_FLT_MAX};
    uint64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (uint64_t j = 0; j < 4; j++) l[j] = max_ps(l[j], x[k + j]);
    float m = max_ps(max_ps(l[0], l[2]), max_ps(l[1], l[3]));
    for (; k < n; k++) m = max_ps(x[k], m); /* std::max(m, x): x where m < x */
    return m;
}

HFX_VECTOR_KERNEL
void hfx_run_global_pool(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const float *X = a->in[0];
    float *Y = a->out[0];
    global_pool_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t sp = pl.spatial;
    uint64_t b, e;
    hfx_plan_range(pl.channels, pl.channels_per_item, item, &b, &e);
    if (op->opcode == HFX_OP_GLOBAL_MAXPOOL) {
        for (uint64_t c = b; c < e; c++) Y[c] = channel_max(X + c * sp, sp);
        return;
    }
    if (op->sum_order == HFX_SUM_ORT) { /* ORT's bits where a QUANTIZE_LINEAR reads them */
        bool nchwc = nchwc_pool(a->prog, &a->prog->tensors[op->in[0]]);
        for (uint64_t c = b; c < e; c++) Y[c] = nchwc ? mean_nchwc(X + c * sp, sp) : mean_ort(X + c * sp, sp);
        return;
    }
    for (uint64_t c = b; c < e; c++) Y[c] = (float)(hfx_sum(X + c * sp, sp, 0.0f, 0) / (double)sp);
}
