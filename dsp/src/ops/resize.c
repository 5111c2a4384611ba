/* resize.c - Resize (ONNX) of the last two axes, modes nearest and linear
 * (bilinear). An item is a range of output rows (all axes but the last).
 *
 * Coordinates follow ONNX Runtime exactly: x_in = f(x_out) in f32 with the
 * program's scale, or f32(L_out) / f32(L_in) of the run's dims where the scale
 * is 0 (a Resize by `sizes`) (enum hfx_resize_coord in ops.h), then
 *   nearest: rounded by the nearest mode, clamped to [0, L_in - 1];
 *   linear:  clamped to [0, L_in - 1], i1 = floor, i2 = min(i1 + 1, L_in - 1),
 *            weights (i2 - x, x - i1), or 1/2 and 1/2 when i1 == i2.
 * Columns are mapped in chunks of RESIZE_COLS into small tables on the stack
 * (no work space); rows are mapped as they come. Only f32 arithmetic and
 * integer conversions of clamped values: no libm.
 *
 * QRESIZE is the nearest mode on u8/i8 with a 256-entry table: each source byte
 * through it (a QDQ group's requantisation), the same coordinates. On Hexagon builds (HFX_HVX) its
 * rows run hvx/hvx_qresize.c: repeated rows copied by vector, the table by vlut32, an integer factor
 * along W spread by vector ops, any other column map gathered byte by byte. */
#include "kernels.h"

#ifdef HFX_HVX
#include "../../hvx/hvx_qresize.h"
#endif

#define RESIZE_COLS 256u

static float resize_coord(int32_t mode, int64_t out_index, float scale, int64_t len_in, int64_t len_out) {
    float x = (float)out_index;
    switch (mode) {
    case HFX_RESIZE_COORD_ASYMMETRIC: return x / scale;
    case HFX_RESIZE_COORD_ALIGN_CORNERS: {
        if (len_out == 1) return 0.0f;
        float t = x * (float)(len_in - 1);
        return t / (float)(len_out - 1);
    }
    case HFX_RESIZE_COORD_PYTORCH_HALF_PIXEL:
        if (len_out <= 1) return 0.0f;
        return (x + 0.5f) / scale - 0.5f;
    case HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC: {
        float width = scale * (float)len_in;
        float adjustment = (float)len_out / width;
        float center = (float)len_in / 2.0f;
        float offset = center * (1.0f - adjustment);
        float t = offset + (x + 0.5f) / scale;
        return t - 0.5f;
    }
    default: return (x + 0.5f) / scale - 0.5f; /* half_pixel */
    }
}

/* The scale of axis rank-2+a (a 0: H, 1: W): the param, or f32(out) / f32(in) when it is 0 (ops.h) */
static float resize_scale(const int32_t *pr, uint32_t a, int64_t len_in, int64_t len_out) {
    int32_t bits = pr[HFX_P_RESIZE_SCALE_H + a];
    return bits ? hfx_f32_from_bits(bits) : (float)len_out / (float)len_in;
}

/* floor of c, c already clamped to [-1, 2^31]; *frac = c - floor(c) */
static int64_t floor_frac(float c, float *frac) {
    int64_t f = (int64_t)c;
    if ((float)f > c) f--;
    *frac = c - (float)f;
    return f;
}

static uint32_t nearest_index(int32_t nearest_mode, float c, int64_t len) {
    if (c < -1.0f) c = -1.0f;
    if (c > (float)len) c = (float)len;
    float d;
    int64_t f = floor_frac(c, &d);
    switch (nearest_mode) {
    case HFX_RESIZE_NEAREST_ROUND_PREFER_CEIL: f += d >= 0.5f; break;
    case HFX_RESIZE_NEAREST_FLOOR: break;
    case HFX_RESIZE_NEAREST_CEIL: f += d > 0.0f; break;
    default: f += d > 0.5f; break; /* round_prefer_floor */
    }
    if (f < 0) f = 0;
    if (f > len - 1) f = len - 1;
    return (uint32_t)f;
}

static void linear_taps(float c, int64_t len, uint32_t *i1, uint32_t *i2, float *w1, float *w2) {
    if (c < 0.0f) c = 0.0f;
    if (c > (float)(len - 1)) c = (float)(len - 1);
    float d;
    int64_t a = floor_frac(c, &d);
    if (a > len - 1) a = len - 1;
    int64_t b = a + 1 < len ? a + 1 : len - 1;
    *i1 = (uint32_t)a;
    *i2 = (uint32_t)b;
    if (a == b) {
        *w1 = 0.5f;
        *w2 = 0.5f;
    } else {
        *w1 = (float)b - c; /* weight of i1 */
        *w2 = c - (float)a; /* weight of i2 */
    }
}

/* One bilinear output as ONNX Runtime 1.32's UpsampleBilinear computes it for a 2-D or 4-D X: each of the
 * 4 taps times the product of its x and y weights (each product rounded), added in the order (y1, x1),
 * (y1, x2), (y2, x1), (y2, x2), no FMA. */
static float bilinear_ort(const float *r1, const float *r2, uint32_t x1, uint32_t x2, float wx1, float wx2, float wy1,
                          float wy2) {
    float s = (wx1 * wy1) * r1[x1] + (wx2 * wy1) * r1[x2];
    s += (wx1 * wy2) * r2[x1];
    return s + (wx2 * wy2) * r2[x2];
}

hfx_status hfx_validate_resize(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *x = &v->p->tensors[op->in[0]], *y = &v->p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    int32_t mode = pr[HFX_P_RESIZE_MODE], coord = pr[HFX_P_RESIZE_COORD], nm = pr[HFX_P_RESIZE_NEAREST_MODE];
    if (mode != HFX_RESIZE_NEAREST && mode != HFX_RESIZE_LINEAR)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_RESIZE_MODE), "op %u: resize mode %d unknown",
                         v->index, (int)mode);
    if (mode == HFX_RESIZE_LINEAR && op->engine != HFX_ENGINE_VECTOR)
        return hfx_vfail(v, HFX_ERR_OP, v->rec + HFX_OREC_ENGINE, "op %u: linear Resize runs on the vector engine only",
                         v->index);
    if (coord < HFX_RESIZE_COORD_HALF_PIXEL || coord > HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_RESIZE_COORD),
                         "op %u: resize coordinate mode %d unknown", v->index, (int)coord);
    int32_t nm_max = mode == HFX_RESIZE_NEAREST ? HFX_RESIZE_NEAREST_CEIL : 0;
    if (nm < 0 || nm > nm_max)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_RESIZE_NEAREST_MODE),
                         "op %u: resize nearest mode %d invalid (0 for linear)", v->index, (int)nm);
    for (int i = HFX_P_RESIZE_SCALE_H; i <= HFX_P_RESIZE_SCALE_W; i++) {
        float sc = hfx_f32_from_bits(pr[i]);
        if (pr[i] != 0 && (!hfx_finite_f32(pr[i]) || !(sc > 0.0f)))
            return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, i),
                             "op %u: resize scale must be finite and > 0, or 0 (out / in)", v->index);
    }
    if (x->rank < 2) return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 0), "op %u: Resize needs rank >= 2", v->index);
    if (y->rank != x->rank) return hfx_shape_err(v, "the input's rank");
    for (uint32_t i = 0; i + 2 < x->rank; i++)
        if (y->dims[i] != x->dims[i]) return hfx_shape_err(v, "the input on the axes not resized");
    for (uint32_t i = x->rank - 2; i < x->rank; i++) /* no source index to read */
        if (x->dims[i] == 0 && y->dims[i] != 0) return hfx_shape_err(v, "an input axis resized from 0");
    for (uint32_t a = 0; a < 2; a++) {
        if (pr[HFX_P_RESIZE_SCALE_H + a] == 0) continue; /* the scale follows the dims */
        /* out = floor(in * scale); a scale given as out / in in f32 may land just below */
        double want = (double)x->dims[x->rank - 2 + a] * (double)hfx_f32_from_bits(pr[HFX_P_RESIZE_SCALE_H + a]);
        double got = (double)y->dims[x->rank - 2 + a];
        bool ok = got <= want ? want - got < 1.0 : got - want <= 1e-5 * got;
        if (!ok) return hfx_shape_err(v, "floor(input * scale) on the resized axes");
    }
    return HFX_OK;
}

hfx_status hfx_plan_resize(const hfx_program *p, hfx_op *op) { return hfx_plan_rows(p, op); }

HFX_VECTOR_KERNEL
void hfx_run_resize(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *yt = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    const float *X = a->in[0];
    float *Y = a->out[0];
    uint32_t r = yt->rank;
    int64_t h = xt->dims[r - 2], w = xt->dims[r - 1];
    int64_t oh = yt->dims[r - 2], ow = yt->dims[r - 1];
    float sh = resize_scale(pr, 0, h, oh), sw = resize_scale(pr, 1, w, ow);
    int32_t coord = pr[HFX_P_RESIZE_COORD], nm = pr[HFX_P_RESIZE_NEAREST_MODE];
    bool linear = pr[HFX_P_RESIZE_MODE] == HFX_RESIZE_LINEAR;
    /* ORT's bits where a QUANTIZE_LINEAR reads them; ORT runs ranks 3 and 5 through other kernels */
    bool ort = op->sum_order == HFX_SUM_ORT && (r == 2 || r == 4);
    hfx_rows_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &b, &e);

    uint32_t c1[RESIZE_COLS], c2[RESIZE_COLS];
    float cw1[RESIZE_COLS], cw2[RESIZE_COLS];
    for (int64_t q0 = 0; q0 < ow; q0 += RESIZE_COLS) {
        int64_t nq = ow - q0 < (int64_t)RESIZE_COLS ? ow - q0 : (int64_t)RESIZE_COLS;
        for (int64_t q = 0; q < nq; q++) {
            float c = resize_coord(coord, q0 + q, sw, w, ow);
            if (linear) linear_taps(c, w, &c1[q], &c2[q], &cw1[q], &cw2[q]);
            else c1[q] = nearest_index(nm, c, w);
        }
        uint64_t prev_plane = UINT64_MAX;
        uint32_t prev_iy = 0;
        const float *prev_out = NULL;
        for (uint64_t row = b; row < e; row++) {
            uint64_t plane = row / (uint64_t)oh;
            int64_t oy = (int64_t)(row % (uint64_t)oh);
            const float *xp = X + plane * (uint64_t)(h * w);
            float *dst = Y + row * (uint64_t)ow + q0;
            float cy = resize_coord(coord, oy, sh, h, oh);
            if (!linear) {
                uint32_t iy = nearest_index(nm, cy, h);
                if (prev_out && plane == prev_plane && iy == prev_iy) {
                    memcpy(dst, prev_out, (size_t)nq * sizeof(float)); /* same source row */
                } else {
                    const float *src = xp + (uint64_t)iy * (uint64_t)w;
                    for (int64_t q = 0; q < nq; q++) dst[q] = src[c1[q]];
                }
                prev_plane = plane;
                prev_iy = iy;
                prev_out = dst;
                continue;
            }
            uint32_t y1, y2;
            float wy1, wy2;
            linear_taps(cy, h, &y1, &y2, &wy1, &wy2);
            const float *r1 = xp + (uint64_t)y1 * (uint64_t)w, *r2 = xp + (uint64_t)y2 * (uint64_t)w;
            if (ort) {
                for (int64_t q = 0; q < nq; q++) dst[q] = bilinear_ort(r1, r2, c1[q], c2[q], cw1[q], cw2[q], wy1, wy2);
                continue;
            }
            for (int64_t q = 0; q < nq; q++) {
                float top = cw1[q] * r1[c1[q]] + cw2[q] * r1[c2[q]];
                float bottom = cw1[q] * r2[c1[q]] + cw2[q] * r2[c2[q]];
                dst[q] = wy1 * top + wy2 * bottom;
            }
        }
    }
}

/* ---- QRESIZE ---- */

static bool narrow_int(uint32_t d) { return d == HFX_DTYPE_U8 || d == HFX_DTYPE_I8; }

hfx_status hfx_validate_qresize(hfx_vctx *v, hfx_op *op) {
    const hfx_tensor *t = v->p->tensors, *table = &t[op->in[1]];
    if (!narrow_int(t[op->in[0]].dtype))
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 0), "op %u (%s): X must be u8 or i8", v->index,
                         op->desc->label);
    if (!narrow_int(table->dtype) || t[op->out[0]].dtype != table->dtype)
        return hfx_vfail(v, HFX_ERR_DTYPE, HFX_IN_OFF(v, 1), "op %u (%s): the table and Y must be one u8/i8 type",
                         v->index, op->desc->label);
    if (table->numel != 256)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u (%s): the table must have 256 elements", v->index,
                         op->desc->label);
    if (op->params[HFX_P_RESIZE_MODE] != HFX_RESIZE_NEAREST)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_RESIZE_MODE), "op %u (%s): the mode must be nearest",
                         v->index, op->desc->label);
    return hfx_validate_resize(v, op);
}

#ifdef HFX_HVX
/* QRESIZE's plan on HVX: the rows plan, and along H and W the factor f when the nearest source of
 * every output index o is o / f (f <= HVX_QRESIZE_MAX_FACTOR; 0: the map is computed as it is used) */
typedef struct qresize_plan {
    hfx_rows_plan rows;
    uint32_t fh, fw;
} qresize_plan;

static uint32_t nearest_factor(int32_t coord, int32_t nm, float scale, int64_t len_in, int64_t len_out) {
    int64_t f = 0;
    while (f < len_out && f <= HVX_QRESIZE_MAX_FACTOR &&
           nearest_index(nm, resize_coord(coord, f, scale, len_in, len_out), len_in) == 0)
        f++;
    if (f == 0 || f > HVX_QRESIZE_MAX_FACTOR) return 0;
    for (int64_t o = 0, k = 0, src = 0; o < len_out; o++) {
        if (nearest_index(nm, resize_coord(coord, o, scale, len_in, len_out), len_in) != (uint64_t)src) return 0;
        if (++k == f) k = 0, src++;
    }
    return (uint32_t)f;
}
#endif

hfx_status hfx_plan_qresize(const hfx_program *p, hfx_op *op) {
    hfx_status st = hfx_plan_rows(p, op);
#ifdef HFX_HVX
    const hfx_tensor *x = &p->tensors[op->in[0]], *y = &p->tensors[op->out[0]];
    const int32_t *pr = op->params;
    uint32_t r = x->rank;
    qresize_plan pl;
    HFX_PLAN_LOAD(pl.rows, op);
    pl.fh = nearest_factor(pr[HFX_P_RESIZE_COORD], pr[HFX_P_RESIZE_NEAREST_MODE],
                           resize_scale(pr, 0, x->dims[r - 2], y->dims[r - 2]), x->dims[r - 2], y->dims[r - 2]);
    pl.fw = nearest_factor(pr[HFX_P_RESIZE_COORD], pr[HFX_P_RESIZE_NEAREST_MODE],
                           resize_scale(pr, 1, x->dims[r - 1], y->dims[r - 1]), x->dims[r - 1], y->dims[r - 1]);
    HFX_PLAN_STORE(op, pl);
    op->plan.ws_bytes = hvx_qresize_ws_bytes((size_t)x->dims[r - 1], pl.fw ? 0 : (size_t)y->dims[r - 1]);
#endif
    return st;
}

#ifdef HFX_HVX
/* QRESIZE's item on HVX: each run of output rows that read one source row written at once; the maps
 * by counters where the plan found a factor, else by coordinates */
static void qresize_hvx(const hfx_kernel_args *a, uint64_t b, uint64_t e) {
    const hfx_op *op = a->op;
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *yt = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    uint32_t r = yt->rank;
    int64_t h = xt->dims[r - 2], w = xt->dims[r - 1], oh = yt->dims[r - 2], ow = yt->dims[r - 1];
    float sh = resize_scale(pr, 0, h, oh), sw = resize_scale(pr, 1, w, ow);
    int32_t coord = pr[HFX_P_RESIZE_COORD], nm = pr[HFX_P_RESIZE_NEAREST_MODE];
    qresize_plan pl;
    HFX_PLAN_LOAD(pl, op);
    hvx_qresize hv;
    hvx_qresize_init(&hv, a->ws, (size_t)w, (size_t)ow, a->in[1], xt->dtype == HFX_DTYPE_U8 ? 0u : 0x80u, (int)pl.fw);
    for (int64_t q = 0; !pl.fw && q < ow; q++) hv.cols[q] = nearest_index(nm, resize_coord(coord, q, sw, w, ow), w);
    const uint8_t *X = a->in[0];
    uint8_t *Y = a->out[0];
    uint64_t plane = b / (uint64_t)oh, oy = b % (uint64_t)oh, iy = 0, k = 0, next = UINT64_MAX;
    if (pl.fh) iy = oy / pl.fh, k = oy % pl.fh; /* then counters: output row oy is k rows into iy's run */
    for (uint64_t row = b; row < e;) {
        uint64_t n = 1, most = (uint64_t)oh - oy < e - row ? (uint64_t)oh - oy : e - row;
        if (pl.fh) {
            n = pl.fh - k;
        } else { /* next: the source of output row oy, when the run before found it */
            iy = next != UINT64_MAX ? next : nearest_index(nm, resize_coord(coord, (int64_t)oy, sh, h, oh), h);
            for (next = UINT64_MAX; n < most; n++)
                if ((next = nearest_index(nm, resize_coord(coord, (int64_t)(oy + n), sh, h, oh), h)) != iy) break;
            if (n >= most) next = UINT64_MAX;
        }
        n = n < most ? n : most;
        hvx_qresize_rows(&hv, X + (plane * (uint64_t)h + iy) * (uint64_t)w, (size_t)n, Y + row * (uint64_t)ow);
        row += n, oy += n, k += n;
        if (pl.fh && k == pl.fh) k = 0, iy++;
        if (oy == (uint64_t)oh) oy = 0, plane++, iy = 0, k = 0, next = UINT64_MAX;
    }
}
#endif

HFX_VECTOR_KERNEL
void hfx_run_qresize(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    hfx_rows_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t b, e;
    hfx_plan_range(pl.rows, pl.rows_per_item, item, &b, &e);
#ifdef HFX_HVX
    qresize_hvx(a, b, e);
#else
    const hfx_tensor *xt = &a->prog->tensors[op->in[0]], *yt = &a->prog->tensors[op->out[0]];
    const int32_t *pr = op->params;
    const uint8_t *X = a->in[0], *table = a->in[1];
    uint8_t *Y = a->out[0];
    uint32_t r = yt->rank, bias = xt->dtype == HFX_DTYPE_U8 ? 0u : 128u; /* x - the type's minimum, as a byte */
    int64_t h = xt->dims[r - 2], w = xt->dims[r - 1], oh = yt->dims[r - 2], ow = yt->dims[r - 1];
    float sh = resize_scale(pr, 0, h, oh), sw = resize_scale(pr, 1, w, ow);
    int32_t coord = pr[HFX_P_RESIZE_COORD], nm = pr[HFX_P_RESIZE_NEAREST_MODE];
    uint32_t cols[RESIZE_COLS];
    for (int64_t q0 = 0; q0 < ow; q0 += RESIZE_COLS) {
        int64_t nq = ow - q0 < (int64_t)RESIZE_COLS ? ow - q0 : (int64_t)RESIZE_COLS;
        for (int64_t q = 0; q < nq; q++) cols[q] = nearest_index(nm, resize_coord(coord, q0 + q, sw, w, ow), w);
        for (uint64_t row = b; row < e; row++) {
            uint64_t plane = row / (uint64_t)oh;
            uint32_t iy = nearest_index(nm, resize_coord(coord, (int64_t)(row % (uint64_t)oh), sh, h, oh), h);
            const uint8_t *src = X + (plane * (uint64_t)h + iy) * (uint64_t)w;
            uint8_t *dst = Y + row * (uint64_t)ow + q0;
            for (int64_t q = 0; q < nq; q++) dst[q] = table[(uint8_t)(src[cols[q]] ^ bias)];
        }
    }
#endif
}
