/* reference.h - straightforward C references of the v1 ops (double
 * accumulation, no blocking, no BLAS), used to check the kernels. */
#ifndef HEXFUSE_REFERENCE_H
#define HEXFUSE_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../ref/ref_qmatmul.h" /* QMATMUL: shared with the host kernel and the qemu image */
#include "../ref/ref_quant.h" /* QUANTIZE_LINEAR, DEQUANTIZE_LINEAR: shared with the qemu image */

typedef struct rshape {
    uint32_t rank;
    uint32_t d[8];
} rshape;

static inline uint64_t rs_numel(const rshape *s) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++) n *= s->d[i];
    return n;
}

/* offset in t (broadcast to out rank r) of the out multi-index idx */
static inline uint64_t rs_bcast_offset(const rshape *t, const uint32_t *idx, uint32_t r) {
    uint64_t off = 0, stride = 1;
    for (uint32_t i = t->rank; i-- > 0;) {
        uint32_t oi = i + r - t->rank;
        uint32_t x = t->d[i] == 1 ? 0 : idx[oi];
        off += x * stride;
        stride *= t->d[i];
    }
    return off;
}

static inline void rs_unflatten(const rshape *s, uint64_t flat, uint32_t *idx) {
    for (uint32_t i = s->rank; i-- > 0;) {
        idx[i] = (uint32_t)(flat % s->d[i]);
        flat /= s->d[i];
    }
}

static inline void ref_binary(int opc, const float *x, const rshape *xs, const float *y, const rshape *ys, float *o,
                              const rshape *os) {
    uint32_t idx[8] = {0};
    for (uint64_t f = 0; f < rs_numel(os); f++) {
        rs_unflatten(os, f, idx);
        double a = x[rs_bcast_offset(xs, idx, os->rank)], b = y[rs_bcast_offset(ys, idx, os->rank)];
        double r = opc == HFX_OP_ADD ? a + b : opc == HFX_OP_SUB ? a - b : opc == HFX_OP_MUL ? a * b : a / b;
        if (opc == HFX_OP_MAX || opc == HFX_OP_MIN) r = (opc == HFX_OP_MAX) == (a > b) ? a : b;
        o[f] = (float)r;
    }
}

/* max(0, min(1, v)), NaN stays NaN */
static inline double ref_clamp01(double v) { return v != v ? v : v < 0 ? 0 : v > 1 ? 1 : v; }

static inline void ref_hardsigmoid(const float *x, float *o, uint64_t n, float alpha, float beta) {
    for (uint64_t i = 0; i < n; i++) o[i] = (float)ref_clamp01((double)alpha * x[i] + beta);
}

static inline void ref_unary(int opc, const float *x, float *o, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        double v = x[i], r;
        switch (opc) {
        case HFX_OP_RELU: r = v > 0 ? v : 0; break;
        case HFX_OP_SIGMOID: r = 1.0 / (1.0 + exp(-v)); break;
        case HFX_OP_TANH: r = tanh(v); break;
        case HFX_OP_GELU: r = 0.5 * v * (1.0 + erf(v / sqrt(2.0))); break;
        case HFX_OP_SILU: r = v / (1.0 + exp(-v)); break;
        case HFX_OP_HARDSWISH: r = v * ref_clamp01(v / 6.0 + 0.5); break;
        default: r = exp(v); break;
        }
        o[i] = (float)r;
    }
}

/* Y = alpha op(A) op(B) + beta C with numpy batch broadcasting */
static inline void ref_gemm(const float *A, const rshape *as, const float *B, const rshape *bs, const float *C,
                            const rshape *cs, int ta, int tb, float alpha, float beta, float *Y, const rshape *ys) {
    uint32_t r = ys->rank;
    uint32_t m = ys->d[r - 2], n = ys->d[r - 1];
    uint32_t k = ta ? as->d[as->rank - 2] : as->d[as->rank - 1];
    rshape ab = *as, bb = *bs, yb = *ys;
    ab.rank -= 2;
    bb.rank -= 2;
    yb.rank -= 2;
    uint64_t batches = rs_numel(&yb);
    uint32_t idx[8] = {0};
    for (uint64_t b = 0; b < batches; b++) {
        rs_unflatten(&yb, b, idx);
        const float *Ab = A + rs_bcast_offset(&ab, idx, yb.rank) * (uint64_t)as->d[as->rank - 2] * as->d[as->rank - 1];
        const float *Bb = B + rs_bcast_offset(&bb, idx, yb.rank) * (uint64_t)bs->d[bs->rank - 2] * bs->d[bs->rank - 1];
        for (uint32_t i = 0; i < m; i++) {
            for (uint32_t j = 0; j < n; j++) {
                double s = 0;
                for (uint32_t q = 0; q < k; q++) {
                    double av = ta ? Ab[(uint64_t)q * m + i] : Ab[(uint64_t)i * k + q];
                    double bv = tb ? Bb[(uint64_t)j * k + q] : Bb[(uint64_t)q * n + j];
                    s += av * bv;
                }
                double v = alpha * s;
                if (C) {
                    idx[yb.rank] = i;
                    idx[yb.rank + 1] = j;
                    v += beta * C[rs_bcast_offset(cs, idx, r)];
                }
                Y[(b * m + i) * n + j] = (float)v;
            }
        }
    }
}

static inline void ref_conv(const float *X, const rshape *xs, const float *W, const rshape *ws, const float *Bias,
                            const int32_t *pads, const int32_t *st, const int32_t *dil, int32_t g, float *Y,
                            const rshape *ys) {
    uint32_t N = xs->d[0], C = xs->d[1], H = xs->d[2], Wd = xs->d[3];
    uint32_t M = ws->d[0], kh = ws->d[2], kw = ws->d[3], OH = ys->d[2], OW = ys->d[3];
    uint32_t cg = C / (uint32_t)g, mg = M / (uint32_t)g;
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t m = 0; m < M; m++) {
            uint32_t grp = m / mg;
            for (uint32_t oy = 0; oy < OH; oy++)
                for (uint32_t ox = 0; ox < OW; ox++) {
                    double s = Bias ? Bias[m] : 0.0;
                    for (uint32_t c = 0; c < cg; c++)
                        for (uint32_t i = 0; i < kh; i++)
                            for (uint32_t j = 0; j < kw; j++) {
                                int64_t iy = (int64_t)oy * st[0] - pads[0] + (int64_t)i * dil[0];
                                int64_t ix = (int64_t)ox * st[1] - pads[1] + (int64_t)j * dil[1];
                                if (iy < 0 || iy >= H || ix < 0 || ix >= Wd) continue;
                                s += (double)X[(((uint64_t)n * C + grp * cg + c) * H + (uint64_t)iy) * Wd + (uint64_t)ix] *
                                     W[(((uint64_t)m * cg + c) * kh + i) * kw + j];
                            }
                    Y[(((uint64_t)n * M + m) * OH + oy) * OW + ox] = (float)s;
                }
        }
}

static inline void ref_softmax(const float *x, const rshape *s, uint32_t axis, float *o) {
    uint64_t outer = 1, inner = 1, d = s->d[axis];
    for (uint32_t i = 0; i < axis; i++) outer *= s->d[i];
    for (uint32_t i = axis + 1; i < s->rank; i++) inner *= s->d[i];
    for (uint64_t a = 0; a < outer; a++)
        for (uint64_t c = 0; c < inner; c++) {
            double mx = -INFINITY, sum = 0;
            for (uint64_t k = 0; k < d; k++) mx = fmax(mx, x[(a * d + k) * inner + c]);
            for (uint64_t k = 0; k < d; k++) sum += exp(x[(a * d + k) * inner + c] - mx);
            for (uint64_t k = 0; k < d; k++) o[(a * d + k) * inner + c] = (float)(exp(x[(a * d + k) * inner + c] - mx) / sum);
        }
}

/* LogSoftmax in double, another formulation: log(exp(x - mx) / sum) with the exps in long double */
static inline void ref_log_softmax(const float *x, const rshape *s, uint32_t axis, float *o) {
    uint64_t outer = 1, inner = 1, d = s->d[axis];
    for (uint32_t i = 0; i < axis; i++) outer *= s->d[i];
    for (uint32_t i = axis + 1; i < s->rank; i++) inner *= s->d[i];
    for (uint64_t a = 0; a < outer; a++)
        for (uint64_t c = 0; c < inner; c++) {
            double mx = -INFINITY;
            long double sum = 0;
            for (uint64_t k = 0; k < d; k++) mx = fmax(mx, x[(a * d + k) * inner + c]);
            for (uint64_t k = 0; k < d; k++) sum += expl((long double)x[(a * d + k) * inner + c] - mx);
            for (uint64_t k = 0; k < d; k++)
                o[(a * d + k) * inner + c] = (float)logl(expl((long double)x[(a * d + k) * inner + c] - mx) / sum);
        }
}

static inline void ref_norm(int layer, const float *x, const rshape *s, uint32_t axis, const float *scale,
                            const float *bias, float eps, float *o) {
    uint64_t rows = 1, d = 1;
    for (uint32_t i = 0; i < axis; i++) rows *= s->d[i];
    for (uint32_t i = axis; i < s->rank; i++) d *= s->d[i];
    for (uint64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double mean = 0, var = 0;
        if (layer) {
            for (uint64_t k = 0; k < d; k++) mean += xr[k];
            mean /= (double)d;
        }
        for (uint64_t k = 0; k < d; k++) var += (xr[k] - mean) * (xr[k] - mean);
        var /= (double)d;
        for (uint64_t k = 0; k < d; k++)
            o[r * d + k] = (float)((xr[k] - mean) / sqrt(var + eps) * scale[k] + (bias ? bias[k] : 0.0));
    }
}

static inline void ref_reduce(int mean, const float *x, const rshape *s, uint32_t mask, float *o) {
    /* output in kept-axes order */
    rshape os = {0, {0}};
    for (uint32_t i = 0; i < s->rank; i++)
        if (!(mask & (1u << i))) os.d[os.rank++] = s->d[i];
    uint64_t on = rs_numel(&os);
    double *acc = calloc(on, sizeof(double));
    uint64_t cnt = rs_numel(s) / on;
    uint32_t idx[8] = {0};
    for (uint64_t f = 0; f < rs_numel(s); f++) {
        rs_unflatten(s, f, idx);
        uint64_t of = 0;
        for (uint32_t i = 0; i < s->rank; i++)
            if (!(mask & (1u << i))) of = of * s->d[i] + idx[i];
        acc[of] += x[f];
    }
    for (uint64_t i = 0; i < on; i++) o[i] = (float)(mean ? acc[i] / (double)cnt : acc[i]);
    free(acc);
}

/* ReduceMax (max) / ReduceMin: a NaN propagates, no element gives -inf / +inf; output in kept-axes order */
static inline void ref_reduce_extreme(int max, const float *x, const rshape *s, uint32_t mask, float *o) {
    rshape os = {0, {0}};
    for (uint32_t i = 0; i < s->rank; i++)
        if (!(mask & (1u << i))) os.d[os.rank++] = s->d[i];
    for (uint64_t i = 0; i < rs_numel(&os); i++) o[i] = max ? -INFINITY : INFINITY;
    uint32_t idx[8] = {0};
    for (uint64_t f = 0; f < rs_numel(s); f++) {
        rs_unflatten(s, f, idx);
        uint64_t of = 0;
        for (uint32_t i = 0; i < s->rank; i++)
            if (!(mask & (1u << i))) of = of * s->d[i] + idx[i];
        if (isnan(o[of])) continue;
        if (isnan(x[f]) || (max ? x[f] > o[of] : x[f] < o[of])) o[of] = x[f];
    }
}

/* ArgMax (max) / ArgMin as ONNX Runtime's CPU kernel, of values given as doubles: the extreme of the row's first
 * element and its other non-NaN elements (NaN when the first is NaN: index 0), then its first (last) index */
static inline void ref_arg_extreme(int max, int last, const double *x, const rshape *s, uint32_t axis, int64_t *o) {
    uint64_t inner = 1, len = s->d[axis];
    for (uint32_t i = axis + 1; i < s->rank; i++) inner *= s->d[i];
    uint64_t outer = rs_numel(s) / (len * inner);
    for (uint64_t p = 0; p < outer; p++)
        for (uint64_t q = 0; q < inner; q++) {
            const double *row = x + p * len * inner + q;
            double m = row[0];
            for (uint64_t i = 1; i < len; i++)
                if (!isnan(row[i * inner]) && (max ? row[i * inner] > m : row[i * inner] < m)) m = row[i * inner];
            int64_t arg = 0;
            for (uint64_t k = 0; k < len && !isnan(m); k++) {
                uint64_t i = last ? len - 1 - k : k;
                if (row[i * inner] == m) {
                    arg = (int64_t)i;
                    break;
                }
            }
            o[p * inner + q] = arg;
        }
}

static inline void ref_transpose(const float *x, const rshape *s, const int32_t *perm, float *o) {
    rshape os = {s->rank, {0}};
    for (uint32_t i = 0; i < s->rank; i++) os.d[i] = s->d[perm[i]];
    uint32_t oidx[8], iidx[8];
    for (uint64_t f = 0; f < rs_numel(&os); f++) {
        rs_unflatten(&os, f, oidx);
        for (uint32_t i = 0; i < s->rank; i++) iidx[perm[i]] = oidx[i];
        uint64_t off = 0;
        for (uint32_t i = 0; i < s->rank; i++) off = off * s->d[i] + iidx[i];
        o[f] = x[off];
    }
}

static inline void ref_slice(const float *x, const rshape *s, const int64_t *first, const int64_t *step, float *o,
                             const rshape *os) {
    uint32_t idx[8] = {0};
    for (uint64_t f = 0; f < rs_numel(os); f++) {
        rs_unflatten(os, f, idx);
        uint64_t off = 0;
        for (uint32_t i = 0; i < s->rank; i++) off = off * s->d[i] + (uint64_t)(first[i] + (int64_t)idx[i] * step[i]);
        o[f] = x[off];
    }
}

/* ONNX Gather on axis 0: output element (i..., j...) = x[idx[i...], j...]; `ni` indices, rows of
 * `row` elements out of `rows`; an index outside [-rows, rows) gives a row of NaN. */
static inline void ref_gather_rows(const float *x, uint64_t rows, uint64_t row, const int64_t *idx, uint64_t ni,
                                   float *o) {
    for (uint64_t i = 0; i < ni; i++) {
        int64_t k = idx[i] < 0 ? idx[i] + (int64_t)rows : idx[i];
        for (uint64_t j = 0; j < row; j++) o[i * row + j] = k < 0 || k >= (int64_t)rows ? NAN : x[(uint64_t)k * row + j];
    }
}

static inline void ref_concat(const float *const *xs, const rshape *ss, uint32_t n, uint32_t axis, float *o,
                              const rshape *os) {
    uint32_t idx[8] = {0};
    for (uint64_t f = 0; f < rs_numel(os); f++) {
        rs_unflatten(os, f, idx);
        uint32_t a = idx[axis], k = 0;
        while (a >= ss[k].d[axis]) a -= ss[k++].d[axis];
        idx[axis] = a;
        uint64_t off = 0;
        for (uint32_t i = 0; i < os->rank; i++) off = off * ss[k].d[i] + idx[i];
        o[f] = xs[k][off];
    }
    (void)n;
}

/* 2-D MaxPool / AveragePool, NCHW (ONNX Runtime semantics): p = {pads t, l, b, r,
 * strides h, w, dilations h, w, kernel h, w, ceil_mode, count_include_pad}.
 * Y is [N, C, OH, OW] as given. */
static inline void ref_pool2d(int is_max, const float *X, const rshape *xs, const int32_t *p, float *Y,
                              const rshape *ys) {
    uint32_t N = xs->d[0], C = xs->d[1], H = xs->d[2], W = xs->d[3], OH = ys->d[2], OW = ys->d[3];
    for (uint64_t nc = 0; nc < (uint64_t)N * C; nc++)
        for (uint32_t oy = 0; oy < OH; oy++)
            for (uint32_t ox = 0; ox < OW; ox++) {
                double m = -3.40282346638528859812e+38, s = 0;
                int64_t inside = 0, padded_y = 0, padded_x = 0;
                for (int32_t ky = 0; ky < p[8]; ky++) {
                    int64_t iy = (int64_t)oy * p[4] - p[0] + (int64_t)ky * p[6];
                    if (iy >= -p[0] && iy < (int64_t)H + p[2]) padded_y++;
                }
                for (int32_t kx = 0; kx < p[9]; kx++) {
                    int64_t ix = (int64_t)ox * p[5] - p[1] + (int64_t)kx * p[7];
                    if (ix >= -p[1] && ix < (int64_t)W + p[3]) padded_x++;
                }
                for (int32_t ky = 0; ky < p[8]; ky++)
                    for (int32_t kx = 0; kx < p[9]; kx++) {
                        int64_t iy = (int64_t)oy * p[4] - p[0] + (int64_t)ky * p[6];
                        int64_t ix = (int64_t)ox * p[5] - p[1] + (int64_t)kx * p[7];
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                        double v = X[(nc * H + (uint64_t)iy) * W + (uint64_t)ix];
                        m = (v > m || v != v) ? v : m;
                        s += v;
                        inside++;
                    }
                int64_t count = p[11] ? padded_y * padded_x : inside;
                double r = is_max ? m : count ? s / (double)count : 0.0;
                Y[(nc * OH + oy) * OW + ox] = (float)r;
            }
}

static inline void ref_global_avgpool(const float *X, const rshape *xs, float *Y) {
    uint64_t ch = (uint64_t)xs->d[0] * xs->d[1], sp = rs_numel(xs) / ch;
    for (uint64_t c = 0; c < ch; c++) {
        double s = 0;
        for (uint64_t i = 0; i < sp; i++) s += X[c * sp + i];
        Y[c] = (float)(s / (double)sp);
    }
}

/* ONNX Resize coordinate of output index o (f32 arithmetic, as ONNX Runtime) */
static inline float ref_resize_coord(int coord, uint32_t o, float scale, uint32_t lin, uint32_t lout) {
    float x = (float)o;
    volatile float t; /* one rounding per operation, as written */
    switch (coord) {
    case HFX_RESIZE_COORD_ASYMMETRIC: return x / scale;
    case HFX_RESIZE_COORD_ALIGN_CORNERS:
        if (lout == 1) return 0.0f;
        t = x * (float)(lin - 1);
        return t / (float)(lout - 1);
    case HFX_RESIZE_COORD_PYTORCH_HALF_PIXEL:
        if (lout <= 1) return 0.0f;
        t = (x + 0.5f) / scale;
        return t - 0.5f;
    case HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC: {
        float adj = (float)lout / (scale * (float)lin);
        float off = (float)lin / 2.0f * (1.0f - adj);
        t = (x + 0.5f) / scale;
        t = off + t;
        return t - 0.5f;
    }
    default:
        t = (x + 0.5f) / scale;
        return t - 0.5f;
    }
}

static inline uint32_t ref_resize_nearest(int mode, float c, uint32_t n) {
    double f = floor((double)c), d = (double)c - f, i;
    switch (mode) {
    case HFX_RESIZE_NEAREST_ROUND_PREFER_CEIL: i = d >= 0.5 ? f + 1 : f; break;
    case HFX_RESIZE_NEAREST_FLOOR: i = f; break;
    case HFX_RESIZE_NEAREST_CEIL: i = d > 0 ? f + 1 : f; break;
    default: i = d > 0.5 ? f + 1 : f; break;
    }
    if (i < 0) i = 0;
    if (i > n - 1.0) i = n - 1.0;
    return (uint32_t)i;
}

/* linear: clamp to [0, n-1], neighbours floor and floor + 1 (clamped) */
static inline double ref_resize_linear(const float *row_or_col, uint64_t stride, float c, uint32_t n) {
    double x = c < 0 ? 0.0 : c > n - 1.0 ? n - 1.0 : (double)c;
    uint32_t a = (uint32_t)floor(x), b = a + 1 < n ? a + 1 : n - 1;
    double w = x - a;
    if (a == b) return row_or_col[a * stride];
    return (1 - w) * row_or_col[a * stride] + w * row_or_col[b * stride];
}

/* Resize of the last two axes of X (rank >= 2) into Y (shape ys) */
static inline void ref_resize(int linear, int coord, int nearest_mode, float sh, float sw, const float *X,
                              const rshape *xs, float *Y, const rshape *ys) {
    uint32_t r = xs->rank, H = xs->d[r - 2], W = xs->d[r - 1], OH = ys->d[r - 2], OW = ys->d[r - 1];
    uint64_t planes = rs_numel(xs) / ((uint64_t)H * W);
    double *tmp = malloc(sizeof(double) * W);
    for (uint64_t pl = 0; pl < planes; pl++) {
        const float *xp = X + pl * H * W;
        for (uint32_t oy = 0; oy < OH; oy++) {
            float cy = ref_resize_coord(coord, oy, sh, H, OH);
            if (linear) { /* interpolate along H first, then W (bilinear is separable) */
                for (uint32_t x = 0; x < W; x++) tmp[x] = ref_resize_linear(xp + x, W, cy, H);
                for (uint32_t ox = 0; ox < OW; ox++) {
                    float cx = ref_resize_coord(coord, ox, sw, W, OW);
                    double xx = cx < 0 ? 0.0 : cx > W - 1.0 ? W - 1.0 : (double)cx;
                    uint32_t a = (uint32_t)floor(xx), b = a + 1 < W ? a + 1 : W - 1;
                    double w = xx - a;
                    Y[(pl * OH + oy) * OW + ox] = (float)(a == b ? tmp[a] : (1 - w) * tmp[a] + w * tmp[b]);
                }
            } else {
                uint32_t iy = ref_resize_nearest(nearest_mode, cy, H);
                for (uint32_t ox = 0; ox < OW; ox++) {
                    float cx = ref_resize_coord(coord, ox, sw, W, OW);
                    Y[(pl * OH + oy) * OW + ox] = xp[(uint64_t)iy * W + ref_resize_nearest(nearest_mode, cx, W)];
                }
            }
        }
    }
    free(tmp);
}

#endif
