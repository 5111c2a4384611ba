/* test_qeltwise.c - the integer ops of QDQ groups bit for bit against their references:
 * QADD, QMUL and QLUT (dsp/ref/ref_qeltwise.h): every (a, b) pair of the type through a broadcast,
 * odd sizes, sizes cut into several items, the broadcasts that swap QADD's operands, ties,
 * saturation, a folded output range, misaligned buffers; QGLOBAL_AVGPOOL, QMAXPOOL and QAVGPOOL
 * (dsp/ref/ref_qpool.h): odd and one-element planes, several items, padding, dilation, ceil mode,
 * equal and different quantization; QRESIZE in every coordinate and nearest mode against the f32
 * RESIZE's sources; QSOFTMAX (dsp/ref/ref_qsoftmax.h) on the last and a middle axis, saturation;
 * QCONCAT on every axis with odd sizes and per-input tables; and
 * the refusals of bad dtypes, params and tables. */
#include "core.h"
#include "hexfuse/hexfuse.h"
#include "program_builder.h"
#include "test_util.h"
#include "../ref/ref_qeltwise.h"
#include "../ref/ref_qpool.h"
#include "../ref/ref_qsoftmax.h"

static hfx_pool *g_pool;

static int32_t tmin(uint8_t d) { return d == HFX_DTYPE_U8 ? 0 : -128; }
static int32_t tmax(uint8_t d) { return d == HFX_DTYPE_U8 ? 255 : 127; }
static int32_t load(const uint8_t *p, uint8_t d, uint64_t i) { return d == HFX_DTYPE_U8 ? p[i] : (int8_t)p[i]; }
static int32_t qrand(uint8_t d) { return (int32_t)rng_range(0, 255) + tmin(d); }

static hfx_status parse(hfxb *b, hfx_program **p, hfx_error *e) {
    size_t n;
    uint8_t *bytes = hfxb_encode(b, &n);
    hfx_status st = hfx_program_parse(bytes, n, p, e);
    free(bytes);
    return st;
}

static int run(hfxb *b, const void *const *ins, size_t nin, void *const *outs) {
    hfx_program *p = NULL;
    hfx_error e;
    hfx_status st = parse(b, &p, &e);
    CHECK_MSG(st == HFX_OK, "parse: %s", e.message);
    if (st != HFX_OK) return 0;
    st = hfx_run(g_pool, p, ins, nin, outs, 1, NULL, NULL, NULL);
    CHECK_MSG(st == HFX_OK, "run: %s", hfx_status_name(st));
    hfx_program_free(p);
    return st == HFX_OK;
}

typedef struct qbin_cfg {
    uint32_t opcode;
    uint8_t tx, ty;
    uint32_t ra, a[4], rb, b[4]; /* ranks and dims of A and B (numpy broadcast) */
    int misalign, fold, exhaustive;
} qbin_cfg;

static int32_t want_qbin(const qbin_cfg *c, const int32_t *p, int swap, int32_t x, int32_t w) {
    float ra = hfxb_f(p[HFX_P_QBIN_RATIO_A]), rb = hfxb_f(p[HFX_P_QBIN_RATIO_B]);
    int32_t za = p[HFX_P_QBIN_ZERO_A], zb = p[HFX_P_QBIN_ZERO_B], zy = p[HFX_P_QBIN_ZERO_Y];
    int32_t lo = p[HFX_P_QBIN_LO], hi = p[HFX_P_QBIN_HI];
    if (c->opcode == HFX_OP_QMUL) return ref_qmul(x, w, ra, za, zb, zy, lo, hi);
    return swap ? ref_qadd(w, x, rb, ra, zb, za, zy, lo, hi) : ref_qadd(x, w, ra, rb, za, zb, zy, lo, hi);
}

/* the broadcast output shape and each element's A and B offsets */
static uint32_t out_shape(const qbin_cfg *c, uint32_t *od) {
    uint32_t r = c->ra > c->rb ? c->ra : c->rb;
    for (uint32_t i = 0; i < r; i++) {
        uint32_t da = i + c->ra >= r ? c->a[i + c->ra - r] : 1, db = i + c->rb >= r ? c->b[i + c->rb - r] : 1;
        od[i] = da > db ? da : db;
    }
    return r;
}

static uint64_t offset_of(uint64_t flat, const uint32_t *od, uint32_t r, uint32_t rank, const uint32_t *d) {
    uint64_t off = 0, stride = 1;
    for (uint32_t i = r; i-- > 0;) {
        uint64_t idx = flat % od[i];
        flat /= od[i];
        if (i + rank >= r) {
            uint32_t di = d[i + rank - r];
            off += (di == 1 ? 0 : idx) * stride;
            stride *= di;
        }
    }
    return off;
}

static void qbin_case(const qbin_cfg *c, int swap) {
    uint32_t od[4], r = out_shape(c, od);
    uint64_t na = 1, nb = 1, ny = 1;
    for (uint32_t i = 0; i < c->ra; i++) na *= c->a[i];
    for (uint32_t i = 0; i < c->rb; i++) nb *= c->b[i];
    for (uint32_t i = 0; i < r; i++) ny *= od[i];
    uint8_t *abuf = malloc(na + 4), *bbuf = malloc(nb + 4), *ybuf = malloc(ny + 4);
    uint8_t *A = abuf + c->misalign, *B = bbuf + c->misalign, *Y = ybuf + c->misalign;
    for (uint64_t i = 0; i < na; i++) A[i] = (uint8_t)(c->exhaustive ? i : (uint64_t)qrand(c->tx));
    for (uint64_t i = 0; i < nb; i++) B[i] = (uint8_t)(c->exhaustive ? i : (uint64_t)qrand(c->tx));
    int32_t p[HFX_OP_PARAMS] = {0};
    int mul = c->opcode == HFX_OP_QMUL;
    /* powers of two make ties common; 40 / 1e6 saturate; the rest is the usual range of QDQ models */
    uint32_t pick = rng_range(0, 5);
    float ra = pick == 0 ? 0.5f : pick == 1 ? 4.0e6f : rng_f(0.05f, 2.0f), rb = rng_f(0.05f, 2.0f);
    if (mul) ra = pick == 0 ? 0.0078125f : pick == 1 ? 40.0f : rng_f(1e-4f, 0.05f), rb = 0.0f;
    p[HFX_P_QBIN_RATIO_A] = hfxb_bits(ra), p[HFX_P_QBIN_RATIO_B] = hfxb_bits(rb);
    p[HFX_P_QBIN_ZERO_A] = qrand(c->tx), p[HFX_P_QBIN_ZERO_B] = qrand(c->tx), p[HFX_P_QBIN_ZERO_Y] = qrand(c->ty);
    p[HFX_P_QBIN_LO] = c->fold ? p[HFX_P_QBIN_ZERO_Y] : tmin(c->ty); /* a folded Relu */
    p[HFX_P_QBIN_HI] = c->fold == 2 ? p[HFX_P_QBIN_LO] + 3 < tmax(c->ty) ? p[HFX_P_QBIN_LO] + 3 : tmax(c->ty)
                                    : tmax(c->ty);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, c->ra, c->a), c->tx),
                      hfxb_set_dtype(&b, hfxb_input(&b, 0, c->rb, c->b), c->tx)};
    uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, r, od), c->ty);
    hfxb_op_add(&b, 0, c->opcode, -1, 2, in, y, p);
    const void *ins[2] = {A, B};
    void *outs[1] = {Y};
    if (run(&b, ins, 2, outs)) {
        uint64_t bad = ny;
        for (uint64_t i = 0; i < ny && bad == ny; i++) {
            int32_t x = load(A, c->tx, offset_of(i, od, r, c->ra, c->a));
            int32_t w = load(B, c->tx, offset_of(i, od, r, c->rb, c->b));
            if (load(Y, c->ty, i) != want_qbin(c, p, swap, x, w)) bad = i;
        }
        CHECK_MSG(bad == ny, "%s %u->%u ranks %u/%u swap %d: y[%u] = %d differs", mul ? "qmul" : "qadd", c->tx, c->ty,
                  c->ra, c->rb, swap, (unsigned)bad, bad < ny ? load(Y, c->ty, bad) : 0);
    }
    hfxb_free(&b);
    free(abuf), free(bbuf), free(ybuf);
}

static void test_ref(void) {
    /* ties go to even, the zero point is inside the rounding for QADD and after it for QMUL */
    CHECK(ref_qadd(1, 0, 0.5f, 0.0f, 0, 0, 0, 0, 255) == 0 && ref_qadd(3, 0, 0.5f, 0.0f, 0, 0, 0, 0, 255) == 2);
    CHECK(ref_qadd(3, 4, 0.5f, 0.25f, 1, 2, 10, 0, 255) == 12); /* 10 + 1 + 0.5 -> 12 (tie to even) */
    CHECK(ref_qmul(3, 1, 0.5f, 0, 0, 7, 0, 255) == 8 && ref_qmul(-3, 1, 0.5f, 0, 0, 0, -128, 127) == -2);
    CHECK(ref_qadd(255, 255, 1e9f, 1e9f, 0, 0, 0, 0, 255) == 0);     /* beyond int32: cvtps2dq's INT32_MIN */
    CHECK(ref_qadd(255, 255, 1e6f, 1e6f, 0, 0, 0, -128, 127) == 127); /* within int32: saturates */
    CHECK(ref_qmul(-128, -128, 1.0f, 0, 0, 0, 5, 9) == 9 && ref_qmul(0, 0, 1.0f, 0, 0, -100, 5, 9) == 5);
    CHECK(ref_qeltwise_round(2.5f, -128, 127) == 2 && ref_qeltwise_round(-3.5f, -128, 127) == -4);
}

static void test_qbinary(void) {
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (int t = 0; t < 4; t++)
        for (uint32_t opc = HFX_OP_QADD; opc <= HFX_OP_QMUL; opc++) {
            uint8_t tx = types[t & 1], ty = types[t >> 1];
            qbin_cfg all = {opc, tx, ty, 2, {256, 1}, 2, {1, 256}, 1, 0, 1}; /* every pair; A swaps */
            qbin_cfg allb = {opc, tx, ty, 2, {1, 256}, 2, {256, 1}, 0, 0, 1};
            qbin_cfg odd = {opc, tx, ty, 3, {3, 5, 7}, 3, {3, 5, 7}, 3, t & 1, 0};
            qbin_cfg big = {opc, tx, ty, 1, {70001}, 1, {70001}, 2, 2, 0}; /* several items */
            qbin_cfg se = {opc, tx, ty, 4, {2, 4, 3, 3}, 4, {2, 4, 1, 1}, 1, 0, 0};
            qbin_cfg se_a = {opc, tx, ty, 4, {1, 4, 1, 1}, 4, {2, 4, 3, 3}, 0, 1, 0};
            qbin_cfg sa = {opc, tx, ty, 1, {1}, 2, {5, 33}, 1, 0, 0}, sb = {opc, tx, ty, 2, {5, 33}, 1, {1}, 2, 0, 0};
            qbin_cfg mixed = {opc, tx, ty, 3, {4, 1, 6}, 3, {1, 5, 1}, 3, 0, 0};
            qbin_cfg inner1 = {opc, tx, ty, 2, {4, 1}, 2, {1, 1}, 0, 0, 0}, inner1s = {opc, tx, ty, 2, {1, 1}, 2, {4, 1}, 0, 0, 0};
            qbin_cfg one = {opc, tx, ty, 1, {1}, 1, {1}, 1, 0, 0};
            int add = opc == HFX_OP_QADD;
            qbin_case(&all, add), qbin_case(&allb, 0), qbin_case(&odd, 0), qbin_case(&big, 0);
            qbin_case(&se, 0), qbin_case(&se_a, add), qbin_case(&sa, add), qbin_case(&sb, 0);
            qbin_case(&mixed, 0), qbin_case(&inner1, 0), qbin_case(&inner1s, add), qbin_case(&one, add);
        }
}

static void qlut_case(uint8_t tx, uint8_t ty, uint64_t n, int misalign) {
    uint8_t table[256], *xbuf = malloc(n + 4), *ybuf = malloc(n + 4), *X = xbuf + misalign, *Y = ybuf + misalign;
    for (int i = 0; i < 256; i++) table[i] = (uint8_t)rng_u32();
    for (uint64_t i = 0; i < n; i++) X[i] = (uint8_t)(i < 256 ? i : rng_u32());
    hfxb b;
    hfxb_init(&b);
    uint32_t dims[2] = {(uint32_t)(n / 7 ? 7 : 1), (uint32_t)(n / 7 ? n / 7 : n)}, tdim[1] = {256};
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 1, 2, dims), tx),
                      hfxb_set_dtype(&b, hfxb_const(&b, 1, 1, tdim, (const float *)(const void *)table), ty)};
    uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 1, 2, dims), ty);
    hfxb_op_add(&b, 1, HFX_OP_QLUT, -1, 2, in, y, NULL);
    const void *ins[1] = {X};
    void *outs[1] = {Y};
    uint64_t m = (uint64_t)dims[0] * dims[1];
    if (run(&b, ins, 1, outs)) {
        uint64_t bad = m;
        for (uint64_t i = 0; i < m && bad == m; i++)
            if (Y[i] != table[load(X, tx, i) - tmin(tx)]) bad = i;
        CHECK_MSG(bad == m, "qlut %u->%u n=%u: y[%u] differs", tx, ty, (unsigned)m, (unsigned)bad);
    }
    hfxb_free(&b);
    free(xbuf), free(ybuf);
}

static void test_qlut(void) {
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (int t = 0; t < 4; t++) {
        qlut_case(types[t & 1], types[t >> 1], 1, 0);
        qlut_case(types[t & 1], types[t >> 1], 7 * 37, 1);
        qlut_case(types[t & 1], types[t >> 1], 7 * 10001, 3); /* several items */
    }
}

static void qgap_case(uint8_t dt, uint32_t rank, const uint32_t *xd, int extreme) {
    uint32_t yd[HFX_MAX_RANK];
    uint64_t n = 1, rows = (uint64_t)xd[0] * xd[1];
    for (uint32_t i = 0; i < rank; i++) n *= xd[i], yd[i] = i < 2 ? xd[i] : 1;
    uint64_t count = n / rows;
    uint8_t *xbuf = malloc(n + 2), *ybuf = malloc(rows + 2), *X = xbuf + 1, *Y = ybuf + 1;
    for (uint64_t i = 0; i < n; i++) X[i] = (uint8_t)(extreme ? (uint32_t)tmax(dt) : rng_u32());
    int32_t p[HFX_OP_PARAMS] = {0};
    float scale = rng_range(0, 2) == 0 ? 0.5f : rng_f(0.2f, 3.0f) / (float)count;
    p[HFX_P_QGAP_SCALE] = hfxb_bits(scale), p[HFX_P_QGAP_ZERO_X] = qrand(dt), p[HFX_P_QGAP_ZERO_Y] = qrand(dt);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, rank, xd), dt)};
    hfxb_op_add(&b, 0, HFX_OP_QGLOBAL_AVGPOOL, -1, 1, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, rank, yd), dt), p);
    const void *ins[1] = {X};
    void *outs[1] = {Y};
    if (run(&b, ins, 1, outs)) {
        uint64_t bad = rows;
        for (uint64_t r = 0; r < rows && bad == rows; r++) {
            int32_t sum = 0;
            for (uint64_t i = 0; i < count; i++) sum += load(X, dt, r * count + i);
            int32_t want = ref_qglobal_avgpool(sum, (uint32_t)count, p[1], scale, p[2], tmin(dt), tmax(dt));
            if (load(Y, dt, r) != want) bad = r;
        }
        CHECK_MSG(bad == rows, "qgap %u rank %u count %u: y[%u] differs", dt, rank, (unsigned)count, (unsigned)bad);
    }
    hfxb_free(&b);
    free(xbuf), free(ybuf);
}

static void test_qglobal_avgpool(void) {
    CHECK(ref_qglobal_avgpool(10, 4, 2, 0.25f, 3, 0, 255) == 3 + 0); /* (10 - 8) / 4 = 0.5 -> 0 (even) */
    CHECK(ref_qglobal_avgpool(14, 4, 2, 0.25f, 3, 0, 255) == 3 + 2); /* 6 / 4 = 1.5 -> 2 */
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (int t = 0; t < 2; t++) {
        qgap_case(types[t], 4, (const uint32_t[]){2, 3, 5, 7}, 0);
        qgap_case(types[t], 4, (const uint32_t[]){1, 4, 1, 1}, 0);
        qgap_case(types[t], 3, (const uint32_t[]){2, 5, 17}, 0);
        qgap_case(types[t], 4, (const uint32_t[]){1, 3, 300, 300}, 1); /* several items, the largest sums */
        qgap_case(types[t], 4, (const uint32_t[]){2, 9, 13, 13}, 0);
    }
}

typedef struct qmp_cfg {
    uint32_t xd[4];
    int32_t k, s, pad, dil, ceil, oh, ow; /* square windows; the output size by ONNX's rule */
} qmp_cfg;

static void qmaxpool_case(uint8_t tx, uint8_t ty, const qmp_cfg *c, int same) {
    uint32_t yd[4] = {c->xd[0], c->xd[1], (uint32_t)c->oh, (uint32_t)c->ow};
    uint64_t nx = (uint64_t)c->xd[0] * c->xd[1] * c->xd[2] * c->xd[3], ny = (uint64_t)yd[0] * yd[1] * yd[2] * yd[3];
    uint8_t *xbuf = malloc(nx + 2), *ybuf = malloc(ny + 2), *X = xbuf + 1, *Y = ybuf + 1;
    for (uint64_t i = 0; i < nx; i++) X[i] = (uint8_t)rng_u32();
    int32_t p[HFX_OP_PARAMS] = {c->pad, c->pad, c->pad, c->pad, c->s, c->s, c->dil, c->dil, c->k, c->k, c->ceil};
    float sx = rng_f(0.01f, 0.1f), sy = same && tx == ty ? sx : rng_f(0.01f, 0.1f);
    p[HFX_P_QPOOL_SCALE_X] = hfxb_bits(sx), p[HFX_P_QPOOL_ZERO_X] = qrand(tx);
    p[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(sy), p[HFX_P_QPOOL_ZERO_Y] = same && tx == ty ? p[HFX_P_QPOOL_ZERO_X] : qrand(ty);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, c->xd), tx)};
    hfxb_op_add(&b, 0, HFX_OP_QMAXPOOL, -1, 1, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, yd), ty), p);
    const void *ins[1] = {X};
    void *outs[1] = {Y};
    if (run(&b, ins, 1, outs)) {
        uint64_t bad = ny;
        int64_t H = c->xd[2], W = c->xd[3];
        for (uint64_t i = 0; i < ny && bad == ny; i++) {
            int64_t ow = (int64_t)(i % yd[3]), oh = (int64_t)(i / yd[3] % yd[2]);
            uint64_t plane = i / ((uint64_t)yd[2] * yd[3]) * (uint64_t)(H * W);
            int32_t m = INT32_MIN;
            for (int64_t u = 0; u < c->k; u++)
                for (int64_t v = 0; v < c->k; v++) {
                    int64_t h = oh * c->s - c->pad + u * c->dil, w = ow * c->s - c->pad + v * c->dil;
                    if (h >= 0 && h < H && w >= 0 && w < W && load(X, tx, plane + (uint64_t)(h * W + w)) > m)
                        m = load(X, tx, plane + (uint64_t)(h * W + w));
                }
            int32_t want = m == INT32_MIN ? tmin(ty)
                                          : ref_qmaxpool_requant(m, sx, p[HFX_P_QPOOL_ZERO_X], sy,
                                                                 p[HFX_P_QPOOL_ZERO_Y], tmin(ty), tmax(ty));
            if (same && tx == ty && m != INT32_MIN && want != m) bad = ny + 1; /* equal parameters: the max itself */
            else if (load(Y, ty, i) != want) bad = i;
        }
        CHECK_MSG(bad == ny, "qmaxpool %u->%u k%d s%d same %d: y[%u] differs", tx, ty, c->k, c->s, same,
                  (unsigned)bad);
    }
    hfxb_free(&b);
    free(xbuf), free(ybuf);
}

static void test_qmaxpool(void) {
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    static const qmp_cfg cfgs[] = {
        {{2, 3, 9, 11}, 3, 2, 1, 1, 0, 5, 6}, /* 3x3 s2 p1 */
        {{1, 2, 7, 7}, 2, 2, 0, 1, 1, 4, 4},  /* ceil mode: a partial last window */
        {{1, 3, 9, 8}, 3, 1, 2, 2, 0, 9, 8},  /* dilation 2, pad 2 */
        {{1, 1, 1, 1}, 1, 1, 0, 1, 0, 1, 1},
        {{1, 4, 120, 130}, 3, 1, 1, 1, 0, 120, 130}, /* several items */
    };
    for (int t = 0; t < 4; t++)
        for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) qmaxpool_case(types[t & 1], types[t >> 1], &cfgs[k], t % 3 == 0);
}

/* QAVGPOOL against windows taken here tap by tap, row by row (ORT's order) */
static void qavgpool_case(uint8_t tx, uint8_t ty, const qmp_cfg *c, int include_pad) {
    uint32_t yd[4] = {c->xd[0], c->xd[1], (uint32_t)c->oh, (uint32_t)c->ow};
    uint64_t nx = (uint64_t)c->xd[0] * c->xd[1] * c->xd[2] * c->xd[3], ny = (uint64_t)yd[0] * yd[1] * yd[2] * yd[3];
    uint8_t *xbuf = malloc(nx + 2), *ybuf = malloc(ny + 2), *X = xbuf + 1, *Y = ybuf + 1;
    for (uint64_t i = 0; i < nx; i++) X[i] = (uint8_t)rng_u32();
    int32_t p[HFX_OP_PARAMS] = {c->pad, c->pad, c->pad, c->pad, c->s, c->s, 1, 1, c->k, c->k, c->ceil, include_pad};
    float sx = rng_f(0.01f, 0.1f), sy = rng_f(0.005f, 0.1f);
    p[HFX_P_QPOOL_SCALE_X] = hfxb_bits(sx), p[HFX_P_QPOOL_ZERO_X] = qrand(tx);
    p[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(sy), p[HFX_P_QPOOL_ZERO_Y] = qrand(ty);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, c->xd), tx)};
    hfxb_op_add(&b, 0, HFX_OP_QAVGPOOL, -1, 1, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, yd), ty), p);
    const void *ins[1] = {X};
    void *outs[1] = {Y};
    if (run(&b, ins, 1, outs)) {
        uint64_t bad = ny;
        int64_t H = c->xd[2], W = c->xd[3];
        for (uint64_t i = 0; i < ny && bad == ny; i++) {
            int64_t ow = (int64_t)(i % yd[3]), oh = (int64_t)(i / yd[3] % yd[2]), inside = 0;
            uint64_t plane = i / ((uint64_t)yd[2] * yd[3]) * (uint64_t)(H * W);
            float sum = 0.0f;
            for (int64_t u = 0; u < c->k; u++)
                for (int64_t v = 0; v < c->k; v++) {
                    int64_t h = oh * c->s - c->pad + u, w = ow * c->s - c->pad + v;
                    if (h < 0 || h >= H || w < 0 || w >= W) continue;
                    sum += ref_qavgpool_tap(load(X, tx, plane + (uint64_t)(h * W + w)), sx, p[HFX_P_QPOOL_ZERO_X]);
                    inside++;
                }
            float count = (float)(include_pad ? c->k * c->k : inside);
            if (load(Y, ty, i) != ref_qavgpool_out(sum, count, sy, p[HFX_P_QPOOL_ZERO_Y], tmin(ty), tmax(ty))) bad = i;
        }
        CHECK_MSG(bad == ny, "qavgpool %u->%u k%d s%d pad %d include_pad %d: y[%u] differs", tx, ty, c->k, c->s,
                  c->pad, include_pad, (unsigned)bad);
    }
    hfxb_free(&b);
    free(xbuf), free(ybuf);
}

static void test_qavgpool(void) {
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    static const qmp_cfg cfgs[] = {
        {{2, 3, 9, 11}, 3, 2, 1, 1, 0, 5, 6}, /* 3x3 s2 p1 */
        {{1, 2, 7, 7}, 2, 2, 0, 1, 1, 4, 4},  /* ceil mode: a partial last window */
        {{1, 3, 8, 9}, 3, 2, 1, 1, 1, 5, 5},  /* ceil mode and padding */
        {{1, 1, 1, 1}, 1, 1, 0, 1, 0, 1, 1},
        {{1, 4, 120, 130}, 3, 1, 1, 1, 0, 120, 130}, /* several items */
        {{1, 2, 5, 5}, 5, 1, 0, 1, 0, 1, 1},         /* the whole plane */
    };
    for (int t = 0; t < 4; t++)
        for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) qavgpool_case(types[t & 1], types[t >> 1], &cfgs[k], t & 1);
    /* QLinearAveragePool has no dilations */
    uint32_t xd[4] = {1, 1, 6, 6}, yd[4] = {1, 1, 2, 2};
    int32_t p[HFX_OP_PARAMS] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 0, 0};
    p[HFX_P_QPOOL_SCALE_X] = p[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(0.5f);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, xd), HFX_DTYPE_U8)};
    hfxb_op_add(&b, 0, HFX_OP_QAVGPOOL, -1, 1, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, yd), HFX_DTYPE_U8), p);
    size_t size = 0;
    uint8_t *bytes = hfxb_encode(&b, &size);
    hfx_program *prog = NULL;
    hfx_error err;
    CHECK_MSG(hfx_program_parse(bytes, size, &prog, &err) == HFX_ERR_PARAM && strstr(err.message, "dilations"),
              "qavgpool with dilation 2 refused: %s", err.message);
    hfx_program_free(prog);
    free(bytes);
    hfxb_free(&b);
}

/* QRESIZE against the f32 RESIZE of the same codes (its nearest source) through the table */
static void qresize_case(uint8_t tx, uint8_t ty, uint32_t rank, const uint32_t *xd, const uint32_t *yd, int coord,
                         int nearest) {
    uint64_t nx = 1, ny = 1;
    for (uint32_t a = 0; a < rank; a++) nx *= xd[a], ny *= yd[a];
    float sh = (float)yd[rank - 2] / (float)xd[rank - 2], sw = (float)yd[rank - 1] / (float)xd[rank - 1];
    uint8_t *xbuf = malloc(nx + 1), *ybuf = malloc(ny + 1), *X = xbuf + 1, *Y = ybuf + 1, table[256];
    float *XF = malloc(nx * 4), *YF = malloc(ny * 4);
    for (uint64_t i = 0; i < nx; i++) X[i] = (uint8_t)rng_u32(), XF[i] = (float)load(X, tx, i);
    for (int i = 0; i < 256; i++) table[i] = (uint8_t)rng_u32();
    hfxb f;
    hfxb_init(&f);
    hfxb_resize(&f, 0, hfxb_input(&f, 0, rank, xd), hfxb_output(&f, 0, rank, yd), HFX_RESIZE_NEAREST, coord, nearest,
                sh, sw);
    const void *fins[1] = {XF};
    void *fouts[1] = {YF};
    int ok = run(&f, fins, 1, fouts);
    hfxb_free(&f);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, rank, xd), tx),
                      hfxb_set_dtype(&b, hfxb_const(&b, 0, 1, (const uint32_t[]){256}, (const float *)(const void *)table),
                                     ty)};
    int32_t by_dims = rank == 3; /* rank 3: scales 0, the kernel's f32(out) / f32(in) of the dims (a Resize by sizes) */
    int32_t p[HFX_OP_PARAMS] = {HFX_RESIZE_NEAREST, coord, nearest, by_dims ? 0 : hfxb_bits(sh),
                                by_dims ? 0 : hfxb_bits(sw)};
    hfxb_op_add(&b, 0, HFX_OP_QRESIZE, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, rank, yd), ty), p);
    const void *ins[1] = {X};
    void *outs[1] = {Y};
    if (ok && run(&b, ins, 1, outs)) {
        uint64_t bad = ny;
        for (uint64_t i = 0; i < ny && bad == ny; i++)
            if (Y[i] != table[(int32_t)YF[i] - tmin(tx)]) bad = i;
        CHECK_MSG(bad == ny, "qresize %u->%u coord %d nearest %d: y[%u] differs", tx, ty, coord, nearest,
                  (unsigned)bad);
    }
    hfxb_free(&b);
    free(xbuf), free(ybuf), free(XF), free(YF);
}

static void test_qresize(void) {
    const uint8_t U8 = HFX_DTYPE_U8, types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (int coord = HFX_RESIZE_COORD_HALF_PIXEL; coord <= HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC; coord++)
        for (int nearest = 0; nearest <= HFX_RESIZE_NEAREST_CEIL; nearest++)
            for (int t = 0; t < 4; t++) {
                qresize_case(types[t & 1], types[t >> 1], 4, (const uint32_t[]){2, 3, 7, 5},
                             (const uint32_t[]){2, 3, 14, 10}, coord, nearest);
                qresize_case(types[t & 1], types[t >> 1], 3, (const uint32_t[]){3, 10, 9},
                             (const uint32_t[]){3, 6, 17}, coord, nearest); /* down and odd */
            }
    qresize_case(U8, U8, 4, (const uint32_t[]){1, 4, 150, 300}, (const uint32_t[]){1, 4, 300, 600},
                 HFX_RESIZE_COORD_ASYMMETRIC, HFX_RESIZE_NEAREST_FLOOR); /* several items, several column chunks */
    /* linear is not an integer op */
    uint32_t xd[4] = {1, 1, 2, 2}, yd[4] = {1, 1, 4, 4};
    uint8_t table[256] = {0};
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, xd), U8),
                      hfxb_set_dtype(&b, hfxb_const(&b, 0, 1, (const uint32_t[]){256}, (const float *)(const void *)table),
                                     U8)};
    int32_t p[HFX_OP_PARAMS] = {HFX_RESIZE_LINEAR, 0, 0, hfxb_bits(2.0f), hfxb_bits(2.0f)};
    hfxb_op_add(&b, 0, HFX_OP_QRESIZE, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, yd), U8), p);
    hfx_program *prog = NULL;
    hfx_error err;
    CHECK_MSG(parse(&b, &prog, &err) == HFX_ERR_PARAM && strstr(err.message, "nearest"), "linear QRESIZE refused: %s",
              err.message);
    hfx_program_free(prog);
    hfxb_free(&b);
}

/* QSOFTMAX of X[2, d, inner] over axis 1 against lines taken here (any positive table will do) */
static void qsoftmax_case(uint8_t dt, uint32_t d, uint32_t inner, float y_scale) {
    uint32_t xd[3] = {2, d, inner};
    uint64_t n = 2ull * d * inner;
    uint8_t *xbuf = malloc(n + 1), *ybuf = malloc(n + 1), *X = xbuf + 1, *Y = ybuf + 1;
    float table[256];
    for (uint64_t i = 0; i < n; i++) X[i] = (uint8_t)rng_u32();
    for (int j = 0; j < 256; j++) table[j] = rng_f(0.0f, 1.0f) * (float)(j + 1) * (float)(j + 1);
    int32_t zy = dt == HFX_DTYPE_U8 ? (int32_t)rng_range(0, 3) : -128 + (int32_t)rng_range(0, 3);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 3, xd), dt),
                      hfxb_const(&b, 0, 1, (const uint32_t[]){256}, table)};
    int32_t p[HFX_OP_PARAMS] = {1, hfxb_bits(y_scale), zy};
    hfxb_op_add(&b, 0, HFX_OP_QSOFTMAX, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 3, xd), dt), p);
    const void *ins[1] = {X};
    void *outs[1] = {Y};
    if (run(&b, ins, 1, outs)) {
        uint64_t bad = n;
        for (uint64_t line = 0; line < 2ull * inner && bad == n; line++) {
            uint64_t base = line / inner * d * inner + line % inner;
            int32_t m = INT32_MIN;
            for (uint32_t k = 0; k < d; k++) m = load(X, dt, base + k * inner) > m ? load(X, dt, base + k * inner) : m;
            float sum = 0.0f;
            for (uint32_t k = 0; k < d; k++) sum += table[ref_qsoftmax_index(load(X, dt, base + k * inner), m)];
            for (uint32_t k = 0; k < d && bad == n; k++) {
                float t = table[ref_qsoftmax_index(load(X, dt, base + k * inner), m)];
                if (load(Y, dt, base + k * inner) != ref_qsoftmax_out(t, sum, y_scale, zy, dt == HFX_DTYPE_U8))
                    bad = base + k * inner;
            }
        }
        CHECK_MSG(bad == n, "qsoftmax %u d %u inner %u: y[%u] differs", dt, d, inner, (unsigned)bad);
    }
    hfxb_free(&b);
    free(xbuf), free(ybuf);
}

static void test_qsoftmax(void) {
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (int t = 0; t < 2; t++) {
        qsoftmax_case(types[t], 33, 1, 256.0f);
        qsoftmax_case(types[t], 7, 5, 255.0f);
        qsoftmax_case(types[t], 1, 3, 256.0f); /* one element: q = 256, saturated */
        qsoftmax_case(types[t], 40000, 1, 512.0f); /* a line longer than a chunk: one item */
    }
    /* the table must be 256 f32 */
    uint32_t xd[2] = {2, 8};
    float table[255] = {0};
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 2, xd), HFX_DTYPE_U8),
                      hfxb_const(&b, 0, 1, (const uint32_t[]){255}, table)};
    int32_t p[HFX_OP_PARAMS] = {1, hfxb_bits(256.0f), 0};
    hfxb_op_add(&b, 0, HFX_OP_QSOFTMAX, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 2, xd), HFX_DTYPE_U8), p);
    hfx_program *prog = NULL;
    hfx_error err;
    CHECK_MSG(parse(&b, &prog, &err) == HFX_ERR_SHAPE && strstr(err.message, "256 f32"), "short table refused: %s",
              err.message);
    hfx_program_free(prog);
    hfxb_free(&b);
}

/* QCONCAT of three inputs (sizes 1, 3, 2 on the axis) of X[2, *, 5, 3] permuted to put the axis at
 * `axis`; random tables (any requantisation is a table) */
static void qconcat_case(uint8_t tx, uint8_t ty, int axis, int misalign) {
    static const uint32_t base[4] = {2, 0, 5, 3}, along[3] = {1, 3, 2};
    uint32_t xd[3][4], yd[4];
    uint8_t *bufs[3], *X[3], tables[3 * 256];
    uint64_t nx[3];
    for (int i = 0; i < 3; i++) {
        for (int a = 0; a < 4; a++) xd[i][a] = a == axis ? along[i] : base[(a + 1) % 4] ? base[(a + 1) % 4] : 4;
        nx[i] = (uint64_t)xd[i][0] * xd[i][1] * xd[i][2] * xd[i][3];
        bufs[i] = malloc(nx[i] + 4), X[i] = bufs[i] + misalign;
        for (uint64_t j = 0; j < nx[i]; j++) X[i][j] = (uint8_t)rng_u32();
    }
    for (int j = 0; j < 3 * 256; j++) tables[j] = (uint8_t)rng_u32();
    for (int a = 0; a < 4; a++) yd[a] = a == axis ? 6 : xd[0][a];
    uint64_t ny = (uint64_t)yd[0] * yd[1] * yd[2] * yd[3];
    uint8_t *ybuf = malloc(ny + 4), *Y = ybuf + misalign;
    hfxb b;
    hfxb_init(&b);
    uint32_t in[4], tdims[2] = {3, 256};
    for (int i = 0; i < 3; i++) in[i] = hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, xd[i]), tx);
    in[3] = hfxb_set_dtype(&b, hfxb_const(&b, 0, 2, tdims, (const float *)(const void *)tables), ty);
    int32_t p[HFX_OP_PARAMS] = {axis - 4}; /* a negative axis, normalized */
    hfxb_op_add(&b, 0, HFX_OP_QCONCAT, -1, 4, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, yd), ty), p);
    const void *ins[3] = {X[0], X[1], X[2]};
    void *outs[1] = {Y};
    if (run(&b, ins, 3, outs)) {
        uint64_t bad = ny;
        for (uint64_t i = 0; i < ny && bad == ny; i++) {
            uint32_t idx[4];
            uint64_t rem = i;
            for (int a = 3; a >= 0; a--) idx[a] = (uint32_t)(rem % yd[a]), rem /= yd[a];
            int src = idx[axis] < 1 ? 0 : idx[axis] < 4 ? 1 : 2;
            idx[axis] -= src == 0 ? 0 : src == 1 ? 1 : 4;
            uint64_t off = ((uint64_t)(idx[0] * xd[src][1] + idx[1]) * xd[src][2] + idx[2]) * xd[src][3] + idx[3];
            if (Y[i] != tables[256 * src + (uint32_t)(load(X[src], tx, off) - tmin(tx))]) bad = i;
        }
        CHECK_MSG(bad == ny, "qconcat %u->%u axis %d: y[%u] differs", tx, ty, axis, (unsigned)bad);
    }
    hfxb_free(&b);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    free(ybuf);
}

static void test_qconcat(void) {
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (int t = 0; t < 4; t++)
        for (int axis = 0; axis < 4; axis++) qconcat_case(types[t & 1], types[t >> 1], axis, axis & 1);
}

/* one QADD/QMUL/QLUT with a changed dtype, param or table size: refused with the given status */
static void refused(uint32_t opcode, uint8_t tb, uint8_t ty, uint32_t slot, int32_t value, uint32_t table_n,
                    hfx_status want) {
    hfxb b;
    hfxb_init(&b);
    int32_t p[HFX_OP_PARAMS] = {hfxb_bits(0.5f), hfxb_bits(0.25f), 0, 0, 0, 0, 255};
    if (opcode == HFX_OP_QLUT) memset(p, 0, sizeof p);
    p[slot] = value;
    static uint8_t table[256 * 4]; /* an f32 table too */
    uint32_t tdim[1] = {table_n};
    uint32_t x = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(3, 4)), HFX_DTYPE_U8);
    uint32_t w = opcode == HFX_OP_QLUT ? hfxb_set_dtype(&b, hfxb_const(&b, 0, 1, tdim, (const float *)(void *)table), tb)
                                       : hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(4)), tb);
    uint32_t in[2] = {x, w};
    hfxb_op_add(&b, 0, opcode, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(3, 4)), ty), p);
    hfx_program *prog = NULL;
    hfx_error e;
    hfx_status st = parse(&b, &prog, &e);
    CHECK_MSG(st == want, "op %u slot %u value %d: status %s (%s), want %s", opcode, slot, value, hfx_status_name(st),
              st ? e.message : "", hfx_status_name(want));
    if (prog) hfx_program_free(prog);
    hfxb_free(&b);
}

/* a QGLOBAL_AVGPOOL of X[1,2,4,4] or a 2x2 QMAXPOOL of it, with param `slot` (>= 0) set to `value` */
static void pool_refused(uint32_t opcode, uint8_t dt, int slot, int32_t value, hfx_status want) {
    int gap = opcode == HFX_OP_QGLOBAL_AVGPOOL;
    int32_t p[HFX_OP_PARAMS] = {0};
    if (gap) p[HFX_P_QGAP_SCALE] = hfxb_bits(0.5f);
    else {
        int32_t base[11] = {0, 0, 0, 0, 2, 2, 1, 1, 2, 2, 0};
        memcpy(p, base, sizeof base);
        p[HFX_P_QPOOL_SCALE_X] = p[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(0.5f);
    }
    if (slot >= 0) p[slot] = value;
    hfxb b;
    hfxb_init(&b);
    uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(1, 2, 4, 4)), dt)};
    uint32_t y = gap ? hfxb_output(&b, 0, HFXB_DIMS(1, 2, 1, 1)) : hfxb_output(&b, 0, HFXB_DIMS(1, 2, 2, 2));
    hfxb_op_add(&b, 0, opcode, -1, 1, in, hfxb_set_dtype(&b, y, dt), p);
    hfx_program *prog = NULL;
    hfx_error e;
    hfx_status st = parse(&b, &prog, &e);
    CHECK_MSG(st == want, "op %u slot %d value %d: status %s (%s), want %s", opcode, slot, value, hfx_status_name(st),
              st ? e.message : "", hfx_status_name(want));
    if (prog) hfx_program_free(prog);
    hfxb_free(&b);
}

/* a QCONCAT of two X[2, 3] (u8) on axis 1 with `rows` tables of `table_dt`, Y of `y_dt` */
static void concat_refused(uint32_t rows, uint8_t table_dt, uint8_t y_dt, int32_t axis, hfx_status want) {
    static uint8_t tables[3 * 256];
    hfxb b;
    hfxb_init(&b);
    uint32_t tdims[2] = {rows, 256};
    uint32_t in[3] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(2, 3)), HFX_DTYPE_U8),
                      hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(2, 3)), HFX_DTYPE_U8),
                      hfxb_set_dtype(&b, hfxb_const(&b, 0, 2, tdims, (const float *)(void *)tables), table_dt)};
    int32_t p[HFX_OP_PARAMS] = {axis};
    hfxb_op_add(&b, 0, HFX_OP_QCONCAT, -1, 3, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(2, 6)), y_dt), p);
    hfx_program *prog = NULL;
    hfx_error e;
    hfx_status st = parse(&b, &prog, &e);
    CHECK_MSG(st == want, "qconcat rows %u axis %d: status %s (%s), want %s", rows, axis, hfx_status_name(st),
              st ? e.message : "", hfx_status_name(want));
    if (prog) hfx_program_free(prog);
    hfxb_free(&b);
}

static void test_refusals(void) {
    const uint8_t U8 = HFX_DTYPE_U8, I8 = HFX_DTYPE_I8, F32 = HFX_DTYPE_F32;
    refused(HFX_OP_QADD, U8, U8, 7, 0, 0, HFX_OK); /* the base program parses */
    refused(HFX_OP_QMUL, I8, U8, 7, 0, 0, HFX_ERR_DTYPE);  /* B's dtype is not A's */
    refused(HFX_OP_QADD, U8, F32, 7, 0, 0, HFX_ERR_DTYPE); /* a float output */
    refused(HFX_OP_QADD, U8, U8, HFX_P_QBIN_RATIO_A, 0x7fc00000, 0, HFX_ERR_PARAM); /* NaN ratio */
    refused(HFX_OP_QMUL, U8, U8, HFX_P_QBIN_RATIO_B, 0x7f800000, 0, HFX_ERR_PARAM); /* inf */
    refused(HFX_OP_QADD, U8, U8, HFX_P_QBIN_ZERO_A, 256, 0, HFX_ERR_PARAM);
    refused(HFX_OP_QADD, U8, I8, HFX_P_QBIN_ZERO_Y, 200, 0, HFX_ERR_PARAM); /* outside i8 */
    refused(HFX_OP_QADD, U8, U8, HFX_P_QBIN_LO, 256, 0, HFX_ERR_PARAM);       /* lo > hi */
    refused(HFX_OP_QMUL, U8, U8, 7, 1, 0, HFX_ERR_PARAM);                     /* a param beyond the row's 7 */
    refused(HFX_OP_QLUT, U8, U8, 0, 0, 256, HFX_OK);
    refused(HFX_OP_QLUT, U8, U8, 0, 0, 255, HFX_ERR_SHAPE);    /* a short table */
    refused(HFX_OP_QLUT, I8, U8, 0, 0, 256, HFX_ERR_DTYPE);    /* Y is not the table's type */
    refused(HFX_OP_QLUT, F32, F32, 0, 0, 256, HFX_ERR_DTYPE);  /* a float table */
    refused(HFX_OP_QLUT, U8, U8, 0, 1, 256, HFX_ERR_PARAM);    /* QLUT has no params */
    pool_refused(HFX_OP_QGLOBAL_AVGPOOL, U8, -1, 0, HFX_OK);
    pool_refused(HFX_OP_QGLOBAL_AVGPOOL, F32, -1, 0, HFX_ERR_DTYPE);
    pool_refused(HFX_OP_QGLOBAL_AVGPOOL, U8, HFX_P_QGAP_SCALE, 0x7f800000, HFX_ERR_PARAM);
    pool_refused(HFX_OP_QGLOBAL_AVGPOOL, I8, HFX_P_QGAP_ZERO_Y, 128, HFX_ERR_PARAM);
    pool_refused(HFX_OP_QMAXPOOL, U8, -1, 0, HFX_OK);
    pool_refused(HFX_OP_QMAXPOOL, U8, HFX_P_QPOOL_SCALE_Y, hfxb_bits(-1.0f), HFX_ERR_PARAM);
    pool_refused(HFX_OP_QMAXPOOL, U8, HFX_P_QPOOL_ZERO_X, -1, HFX_ERR_PARAM);
    pool_refused(HFX_OP_QMAXPOOL, U8, HFX_P_POOL_COUNT_INCLUDE_PAD, 1, HFX_ERR_PARAM);
    pool_refused(HFX_OP_QMAXPOOL, U8, HFX_P_POOL_KERNEL_H, 0, HFX_ERR_PARAM); /* MAXPOOL's own checks */
    pool_refused(HFX_OP_QMAXPOOL, U8, 16, 1, HFX_ERR_PARAM);                  /* beyond the row's 16 */
    concat_refused(2, U8, U8, 1, HFX_OK);
    concat_refused(3, U8, U8, 1, HFX_ERR_SHAPE);  /* a table per input, no more */
    concat_refused(2, U8, I8, 1, HFX_ERR_DTYPE);  /* Y is not the tables' type */
    concat_refused(2, U8, U8, 0, HFX_ERR_SHAPE);  /* [2, 3] twice on axis 0 is [4, 3] */
    concat_refused(2, U8, U8, 2, HFX_ERR_PARAM);  /* axis out of range */
}

int main(void) {
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    cfg.arena_bytes = 16u << 20;
    if (hfx_pool_create(&cfg, &g_pool) != HFX_OK) return 1;
    RUN_TEST(test_ref);
    RUN_TEST(test_qbinary);
    RUN_TEST(test_qlut);
    RUN_TEST(test_qglobal_avgpool);
    RUN_TEST(test_qmaxpool);
    RUN_TEST(test_qavgpool);
    RUN_TEST(test_qresize);
    RUN_TEST(test_qsoftmax);
    RUN_TEST(test_qconcat);
    RUN_TEST(test_refusals);
    hfx_pool_destroy(g_pool);
    TEST_MAIN_END();
}
