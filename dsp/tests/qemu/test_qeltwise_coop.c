/*
 * test_qeltwise_coop.c - qemu-hexagon image: QADD, QMUL and QLUT through the hexfuse core on the
 * coop platform, bit for bit against dsp/ref/ref_qeltwise.h (the Hexagon build's fma is sfmpy's
 * fused accumulate). Every (a, b) pair of u8 and of i8 through a broadcast, both ways round (A as
 * the scalar span swaps QADD's operands), misaligned buffers, a folded output range; random values
 * through broadcast shapes (same shape, broadcast middle or innermost axis, one-element operands, two
 * items) and ratios outside the HVX path's range; QLUT over every input value (sizes across the vector
 * size and two items, misaligned); QGLOBAL_AVGPOOL and QMAXPOOL against dsp/ref/ref_qpool.h (odd
 * planes, padding, other output quantization; QGLOBAL_AVGPOOL also over plane sizes across the vector
 * size and extreme values; QMAXPOOL over random geometries: widths across the 128-byte vectors,
 * strides, dilations, pads); QAVGPOOL (padding counted or not, ceil mode; random geometries, exact-tie
 * and out-of-range scales; its packets) against windows summed here with ref_qpool.h's steps;
 * DYNAMIC_QPARAMS, CAST and DEQUANTIZE_LINEAR u16/i16 against ref_quant.h, and their packets; QRESIZE (integer factors along W, H only, other column maps; odd and long
 * rows, Y between guard bytes) against the f32 RESIZE of the codes through a table, and its packets;
 * QSOFTMAX on two axes with a saturating line; QCONCAT on axis 1 with per-input tables (spans below
 * and above a vector); TRANSPOSE of 1-, 2- and 4-byte elements (the zoo's permutations, odd shapes,
 * several items, misaligned) against an index loop, and its packets.
 */
#include <stdint.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "platform.h"
#include "program_builder.h"
#include "qtest.h"
#include "../../ref/ref_qeltwise.h"
#include "../../ref/ref_qpool.h"
#include "../../ref/ref_qsoftmax.h"
#include "../../ref/ref_quant.h"

uint32_t hx_qemu_packets(void); /* qemu's executed-packet counter (dsp/hexagon/emulate/qemu_counters.S) */

static qtest T;
static uint8_t g_a[256 + 1], g_b[256 + 1], g_y[256 * 256 + 1], g_table[256];

static void expect(int ok, const char *what)
{
    qt_case(&T, ok);
    if (!ok)
        hx_printf("FAIL %s\n", what);
}

static int32_t lo_of(uint8_t d) { return d == HFX_DTYPE_U8 ? 0 : -128; }
static int32_t hi_of(uint8_t d) { return d == HFX_DTYPE_U8 ? 255 : 127; }
static int32_t load(const uint8_t *p, uint8_t d, uint32_t i) { return d == HFX_DTYPE_U8 ? p[i] : (int8_t)p[i]; }

static hfx_status run_one(hfx_pool *pool, hfxb *b, const void *const *in, size_t nin, void *out)
{
    size_t size = 0;
    uint8_t *bytes = hfxb_encode(b, &size);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(bytes, size, &prog, &err);
    free(bytes);
    if (st != HFX_OK) {
        hx_printf("     parse: %s\n", err.message);
        return st;
    }
    void *outs[1] = {out};
    st = hfx_run(pool, prog, in, nin, outs, 1, NULL, NULL, NULL);
    hfx_program_free(prog);
    return st;
}

/* y[i, j] = op(a[i], b[j]) with A [256, 1] and B [1, 256] (or the other way round: `a_inner`) */
static void qbin_case(hfx_pool *pool, uint32_t opcode, uint8_t dt, int a_inner, int fold, qt_rng *r)
{
    int32_t p[HFX_OP_PARAMS] = {0};
    int mul = opcode == HFX_OP_QMUL;
    float ra = mul ? (float)qt_range(r, 1, 500) / 10000.0f : (float)qt_range(r, 50, 2000) / 1000.0f;
    float rb = mul ? 0.0f : (float)qt_range(r, 50, 2000) / 1000.0f;
    p[HFX_P_QBIN_RATIO_A] = hfxb_bits(ra), p[HFX_P_QBIN_RATIO_B] = hfxb_bits(rb);
    p[HFX_P_QBIN_ZERO_A] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    p[HFX_P_QBIN_ZERO_B] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    p[HFX_P_QBIN_ZERO_Y] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    p[HFX_P_QBIN_LO] = fold ? p[HFX_P_QBIN_ZERO_Y] : lo_of(dt);
    p[HFX_P_QBIN_HI] = hi_of(dt);
    uint8_t *A = g_a + 1, *B = g_b + 1, *Y = g_y + 1; /* misaligned */
    for (int i = 0; i < 256; i++)
        A[i] = B[i] = (uint8_t)i;
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(a_inner ? 1 : 256, a_inner ? 256 : 1)), dt),
                      hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(a_inner ? 256 : 1, a_inner ? 1 : 256)), dt)};
    hfxb_op_add(&b, 0, opcode, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(256, 256)), dt), p);
    const void *ins[2] = {A, B};
    hfx_status st = run_one(pool, &b, ins, 2, Y);
    hfxb_free(&b);
    int ok = st == HFX_OK, swap = !mul && !a_inner;
    for (uint32_t i = 0; ok && i < 256 * 256; i++) {
        int32_t x = load(A, dt, a_inner ? i % 256 : i / 256), w = load(B, dt, a_inner ? i / 256 : i % 256);
        int32_t want = mul ? ref_qmul(x, w, ra, p[2], p[3], p[4], p[5], p[6])
                           : swap ? ref_qadd(w, x, rb, ra, p[3], p[2], p[4], p[5], p[6])
                                  : ref_qadd(x, w, ra, rb, p[2], p[3], p[4], p[5], p[6]);
        ok = load(Y, dt, i) == want;
    }
    char what[96];
    hx_snprintf(what, sizeof what, "%s %s every pair, A %s, fold %d", mul ? "QMul" : "QAdd",
                dt == HFX_DTYPE_U8 ? "u8" : "i8", a_inner ? "inner" : "outer (swapped)", fold);
    expect(ok, what);
}

/* QADD/QMUL on random values through shapes (rank 3, numpy broadcasting) that make the kernel's
 * spans: same shape (two items at 40000), a broadcast middle axis, a broadcast innermost axis, a
 * one-element A (QADD swaps) or B, odd lengths and misaligned buffers; ratios in the HVX path's range
 * and, for `big`, outside it (the reference alone) */
static void qbin_shapes_case(hfx_pool *pool, uint32_t opcode, uint8_t dt, const uint32_t ad[3], const uint32_t bd[3],
                             int big, qt_rng *r)
{
    enum { MAX_N = 40000 };
    static uint8_t abuf[MAX_N + 8], bbuf[MAX_N + 8];
    uint32_t yd[3], na = ad[0] * ad[1] * ad[2], nb = bd[0] * bd[1] * bd[2];
    for (int i = 0; i < 3; i++)
        yd[i] = ad[i] > bd[i] ? ad[i] : bd[i];
    uint32_t ny = yd[0] * yd[1] * yd[2];
    int mul = opcode == HFX_OP_QMUL, swap = 1;
    for (int i = 3; i-- > 0;)
        if (yd[i] > 1) {
            swap = ad[i] == 1 && bd[i] != 1;
            break;
        }
    swap = swap && !mul;
    float ra = mul ? (float)qt_range(r, 1, 500) / 10000.0f : (float)qt_range(r, 50, 2000) / 1000.0f;
    float rb = mul ? 0.0f : (float)qt_range(r, 50, 2000) / 1000.0f;
    if (big)
        ra = mul ? 70000.0f : 100.0f;
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_QBIN_RATIO_A] = hfxb_bits(ra), p[HFX_P_QBIN_RATIO_B] = hfxb_bits(rb);
    p[HFX_P_QBIN_ZERO_A] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    p[HFX_P_QBIN_ZERO_B] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    p[HFX_P_QBIN_ZERO_Y] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    p[HFX_P_QBIN_LO] = lo_of(dt), p[HFX_P_QBIN_HI] = hi_of(dt);
    uint32_t off = (uint32_t)qt_range(r, 0, 7);
    uint8_t *A = abuf + off, *B = bbuf + 7 - off, *Y = g_y + 1 + off;
    for (uint32_t i = 0; i < na; i++)
        A[i] = (uint8_t)qt_rand(r);
    for (uint32_t i = 0; i < nb; i++)
        B[i] = (uint8_t)qt_rand(r);
    memset(Y, 0xa5, ny + 64);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(ad[0], ad[1], ad[2])), dt),
                      hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(bd[0], bd[1], bd[2])), dt)};
    hfxb_op_add(&b, 0, opcode, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(yd[0], yd[1], yd[2])), dt),
                p);
    const void *ins[2] = {A, B};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 2, Y) == HFX_OK;
    uint32_t used = hx_qemu_packets() - before;
    hfxb_free(&b);
    if (ad[2] == 64 && !big) /* a transformer's residual add, rows shorter than a vector */
        hx_printf("     packets of one %s call, [%u,%u,%u] same shape: %u\n", mul ? "QMul" : "QAdd", ad[0], ad[1], ad[2],
                  used);
    for (uint32_t i = 0; ok && i < ny; i++) {
        uint32_t i0 = i / (yd[1] * yd[2]), i1 = i / yd[2] % yd[1], i2 = i % yd[2];
        uint32_t ia = ((ad[0] > 1 ? i0 : 0) * ad[1] + (ad[1] > 1 ? i1 : 0)) * ad[2] + (ad[2] > 1 ? i2 : 0);
        uint32_t ib = ((bd[0] > 1 ? i0 : 0) * bd[1] + (bd[1] > 1 ? i1 : 0)) * bd[2] + (bd[2] > 1 ? i2 : 0);
        int32_t x = load(A, dt, ia), w = load(B, dt, ib);
        int32_t want = mul    ? ref_qmul(x, w, ra, p[2], p[3], p[4], p[5], p[6])
                       : swap ? ref_qadd(w, x, rb, ra, p[3], p[2], p[4], p[5], p[6])
                              : ref_qadd(x, w, ra, rb, p[2], p[3], p[4], p[5], p[6]);
        ok = load(Y, dt, i) == want;
    }
    for (uint32_t i = 0; ok && i < 64; i++)
        ok = Y[ny + i] == 0xa5;
    char what[112];
    hx_snprintf(what, sizeof what, "%s %s [%u,%u,%u] x [%u,%u,%u]%s", mul ? "QMul" : "QAdd",
                dt == HFX_DTYPE_U8 ? "u8" : "i8", ad[0], ad[1], ad[2], bd[0], bd[1], bd[2],
                big ? ", ratio outside the HVX range" : "");
    expect(ok, what);
}

/* QLUT on X[n] at byte offset `off` of its buffer (the first 256 elements: every value), into Y at
 * offset off + 1; the bytes after Y must stay untouched */
static void qlut_case(hfx_pool *pool, uint8_t tx, uint8_t ty, uint32_t n, uint32_t off, qt_rng *r)
{
    enum { MAX_N = 40000 }; /* above HFX_EW_CHUNK: two items */
    static uint8_t x_all[MAX_N + 128];
    uint8_t *X = x_all + off, *Y = g_y + off + 1;
    for (int i = 0; i < 256; i++)
        g_table[i] = (uint8_t)qt_rand(r);
    for (uint32_t i = 0; i < n; i++)
        X[i] = (uint8_t)(i < 256 ? i : qt_rand(r));
    memset(Y, 0xa5, n + 64);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 1, HFXB_DIMS(n)), tx),
                      hfxb_set_dtype(&b, hfxb_const(&b, 1, HFXB_DIMS(256), (const float *)(const void *)g_table), ty)};
    hfxb_op_add(&b, 1, HFX_OP_QLUT, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 1, HFXB_DIMS(n)), ty), NULL);
    const void *ins[1] = {X};
    hfx_status st = run_one(pool, &b, ins, 1, Y);
    hfxb_free(&b);
    int ok = st == HFX_OK;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = Y[i] == g_table[load(X, tx, i) - lo_of(tx)];
    for (uint32_t i = 0; ok && i < 64; i++)
        ok = Y[n + i] == 0xa5;
    char what[64];
    hx_snprintf(what, sizeof what, "QLut %s -> %s, %u elements at offset %u", tx == HFX_DTYPE_U8 ? "u8" : "i8",
                ty == HFX_DTYPE_U8 ? "u8" : "i8", n, off);
    expect(ok, what);
}

/* X[2, 3, 9, 11] (misaligned): a QGLOBAL_AVGPOOL, and a 3x3 stride-2 pad-1 QMAXPOOL to [2, 3, 5, 6] */
static void qpool_case(hfx_pool *pool, uint8_t dt, qt_rng *r)
{
    enum { C = 6, H = 9, W = 11, OH = 5, OW = 6 };
    static uint8_t xbuf[C * H * W + 1];
    uint8_t *X = xbuf + 1, *Y = g_y + 1;
    for (int i = 0; i < C * H * W; i++)
        X[i] = (uint8_t)qt_rand(r);
    int32_t pg[HFX_OP_PARAMS] = {hfxb_bits(0.8f / (H * W)), (int32_t)qt_range(r, 0, 255) + lo_of(dt),
                                 (int32_t)qt_range(r, 0, 255) + lo_of(dt)};
    int32_t pm[HFX_OP_PARAMS] = {1, 1, 1, 1, 2, 2, 1, 1, 3, 3, 0};
    pm[HFX_P_QPOOL_SCALE_X] = hfxb_bits(0.03f), pm[HFX_P_QPOOL_ZERO_X] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    pm[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(0.05f), pm[HFX_P_QPOOL_ZERO_Y] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
    for (int maxpool = 0; maxpool < 2; maxpool++) {
        hfxb b;
        hfxb_init(&b);
        uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(2, 3, H, W)), dt)};
        uint32_t y = maxpool ? hfxb_output(&b, 0, HFXB_DIMS(2, 3, OH, OW)) : hfxb_output(&b, 0, HFXB_DIMS(2, 3, 1, 1));
        hfxb_op_add(&b, 0, maxpool ? HFX_OP_QMAXPOOL : HFX_OP_QGLOBAL_AVGPOOL, -1, 1, in, hfxb_set_dtype(&b, y, dt),
                    maxpool ? pm : pg);
        const void *ins[1] = {X};
        int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
        hfxb_free(&b);
        for (int c = 0; ok && c < C; c++) {
            const uint8_t *plane = X + c * H * W;
            if (!maxpool) {
                int32_t sum = 0;
                for (int i = 0; i < H * W; i++)
                    sum += load(plane, dt, (uint32_t)i);
                ok = load(Y, dt, (uint32_t)c) ==
                     ref_qglobal_avgpool(sum, H * W, pg[1], hfxb_f(pg[0]), pg[2], lo_of(dt), hi_of(dt));
                continue;
            }
            for (int oh = 0; ok && oh < OH; oh++)
                for (int ow = 0; ok && ow < OW; ow++) {
                    int32_t m = INT32_MIN;
                    for (int i = 0; i < 3; i++)
                        for (int j = 0; j < 3; j++) {
                            int h = oh * 2 - 1 + i, w = ow * 2 - 1 + j;
                            if (h >= 0 && h < H && w >= 0 && w < W && load(plane, dt, (uint32_t)(h * W + w)) > m)
                                m = load(plane, dt, (uint32_t)(h * W + w));
                        }
                    ok = load(Y, dt, (uint32_t)((c * OH + oh) * OW + ow)) ==
                         ref_qmaxpool_requant(m, 0.03f, pm[13], 0.05f, pm[15], lo_of(dt), hi_of(dt));
                }
        }
        char what[64];
        hx_snprintf(what, sizeof what, "%s %s", maxpool ? "QMaxPool" : "QGlobalAveragePool",
                    dt == HFX_DTYPE_U8 ? "u8" : "i8");
        expect(ok, what);
    }
}

/* QGLOBAL_AVGPOOL over X[1, 3, 1, S] (misaligned) for plane sizes across the vector size, values
 * random or all at one extreme of the type (the largest sums) */
static void qgap_sweep(hfx_pool *pool, qt_rng *r)
{
    static const uint32_t sizes[] = {1, 2, 127, 128, 129, 300, 1000, 4099};
    static uint8_t xbuf[3 * 4099 + 3];
    int failed = 0, run = 0;
    for (uint32_t t = 0; t < 4 * sizeof sizes / sizeof *sizes; t++, run++) {
        uint8_t dt = t & 1 ? HFX_DTYPE_I8 : HFX_DTYPE_U8;
        uint32_t S = sizes[t / 4], kind = t >> 1 & 1 ? (uint32_t)qt_range(r, 0, 3) : 0;
        uint8_t *X = xbuf + t % 3, *Y = g_y + 1;
        for (uint32_t i = 0; i < 3 * S; i++)
            X[i] = kind == 0 ? (uint8_t)qt_rand(r) : kind == 1 ? 0xff : kind == 2 ? 0x80 : 0x7f;
        int32_t pg[HFX_OP_PARAMS] = {hfxb_bits(0.8f / (float)S), (int32_t)qt_range(r, 0, 255) + lo_of(dt),
                                     (int32_t)qt_range(r, 0, 255) + lo_of(dt)};
        hfxb b;
        hfxb_init(&b);
        uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(1, 3, 1, S)), dt)};
        uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1, 3, 1, 1)), dt);
        hfxb_op_add(&b, 0, HFX_OP_QGLOBAL_AVGPOOL, -1, 1, in, y, pg);
        const void *ins[1] = {X};
        int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
        hfxb_free(&b);
        for (uint32_t c = 0; ok && c < 3; c++) {
            uint32_t sum = 0;
            for (uint32_t i = 0; i < S; i++)
                sum += (uint32_t)load(X + c * S, dt, i);
            ok = load(Y, dt, c) == ref_qglobal_avgpool((int32_t)sum, S, pg[1], hfxb_f(pg[0]), pg[2], lo_of(dt), hi_of(dt));
        }
        failed += !ok;
    }
    char what[64];
    hx_snprintf(what, sizeof what, "QGlobalAveragePool %d plane sizes and types (%d failed)", run, failed);
    expect(failed == 0, what);
}

/* ONNX's pooled length (as pool.c's hfx_pool_out_len) */
static int pool_len(int in, int k, int s, int d, int p0, int p1, int ceil_mode)
{
    int span = in + p0 + p1 - d * (k - 1) - 1;
    if (span < 0)
        return 0;
    if (!ceil_mode)
        return span / s + 1;
    int out = (span + s - 1) / s + 1;
    return (out - 1) * s >= in + p0 ? out - 1 : out;
}

/* the QMAXPOOL output of window (oh, ow) of plane x[H][W], straight from the definition */
static int32_t want_qmaxpool(const uint8_t *x, uint8_t tx, uint8_t ty, const int32_t *pm, int H, int W, int oh, int ow)
{
    int32_t m = INT32_MIN;
    for (int i = 0; i < pm[HFX_P_POOL_KERNEL_H]; i++)
        for (int j = 0; j < pm[HFX_P_POOL_KERNEL_W]; j++) {
            int h = oh * pm[HFX_P_POOL_STRIDE_H] + i * pm[HFX_P_POOL_DILATION_H] - pm[HFX_P_POOL_PAD_TOP];
            int w = ow * pm[HFX_P_POOL_STRIDE_W] + j * pm[HFX_P_POOL_DILATION_W] - pm[HFX_P_POOL_PAD_LEFT];
            if (h >= 0 && h < H && w >= 0 && w < W && load(x, tx, (uint32_t)(h * W + w)) > m)
                m = load(x, tx, (uint32_t)(h * W + w));
        }
    if (m == INT32_MIN)
        return lo_of(ty);
    return ref_qmaxpool_requant(m, hfxb_f(pm[HFX_P_QPOOL_SCALE_X]), pm[HFX_P_QPOOL_ZERO_X],
                                hfxb_f(pm[HFX_P_QPOOL_SCALE_Y]), pm[HFX_P_QPOOL_ZERO_Y], lo_of(ty), hi_of(ty));
}

/* Random QMAXPOOL geometries on X[1, 2, H, W] (misaligned, W up to 300: full vectors, tails and
 * rows under one vector): kernels 1..4, strides 1..3, dilations 1..3, each pad 0 .. kernel - 1,
 * ceil mode, extreme values, all-negative i8, and requantisations: the identity, another scale, the other output
 * type. The bytes after Y must stay untouched. */
static void qmaxpool_sweep(hfx_pool *pool, qt_rng *r)
{
    enum { C = 2, MAX_W = 300, MAX_H = 7, CASES = 96 };
    static const int widths[] = {1, 2, 5, 17, 64, 127, 128, 129, 200, 255, 257, MAX_W};
    static uint8_t xbuf[C * MAX_H * MAX_W + 3];
    int failed = 0, run = 0;
    for (int t = 0; t < CASES; t++) {
        uint8_t tx = t & 1 ? HFX_DTYPE_I8 : HFX_DTYPE_U8, ty = t % 7 == 3 ? (uint8_t)(HFX_DTYPE_U8 + HFX_DTYPE_I8 - tx) : tx;
        int H = (int)qt_range(r, 1, MAX_H), W = widths[qt_range(r, 0, sizeof widths / sizeof *widths - 1)];
        int32_t pm[HFX_OP_PARAMS] = {0};
        pm[HFX_P_POOL_KERNEL_H] = (int32_t)qt_range(r, 1, 4), pm[HFX_P_POOL_KERNEL_W] = (int32_t)qt_range(r, 1, 4);
        pm[HFX_P_POOL_STRIDE_H] = (int32_t)qt_range(r, 1, 3), pm[HFX_P_POOL_STRIDE_W] = (int32_t)qt_range(r, 1, 3);
        pm[HFX_P_POOL_DILATION_H] = (int32_t)qt_range(r, 1, 3), pm[HFX_P_POOL_DILATION_W] = (int32_t)qt_range(r, 1, 3);
        for (int a = 0; a < 4; a++)
            pm[a] = (int32_t)qt_range(r, 0, pm[HFX_P_POOL_KERNEL_H + (a & 1)] - 1);
        pm[HFX_P_POOL_CEIL_MODE] = (int32_t)qt_range(r, 0, 1);
        pm[HFX_P_QPOOL_SCALE_X] = hfxb_bits(0.03f), pm[HFX_P_QPOOL_ZERO_X] = (int32_t)qt_range(r, 0, 255) + lo_of(tx);
        pm[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(t % 3 ? 0.03f : 0.05f);
        pm[HFX_P_QPOOL_ZERO_Y] = t % 3 && ty == tx ? pm[HFX_P_QPOOL_ZERO_X] : (int32_t)qt_range(r, 0, 255) + lo_of(ty);
        int OH = pool_len(H, pm[8], pm[4], pm[6], pm[0], pm[2], pm[10]);
        int OW = pool_len(W, pm[9], pm[5], pm[7], pm[1], pm[3], pm[10]);
        if (OH < 1 || OW < 1)
            continue;
        uint8_t *X = xbuf + 1 + t % 3, *Y = g_y + 1 + t % 2;
        for (int i = 0; i < C * H * W; i++)
            X[i] = (uint8_t)(t % 5 == 0   ? (i % 3 ? 0x80 : 0x7f) /* the extremes of both types */
                             : t % 5 == 1 ? qt_rand(r) | 0x80    /* i8: all negative, a max below 0 */
                                          : qt_rand(r));
        memset(Y, 0xa5, (size_t)(C * OH * OW + 64));
        hfxb b;
        hfxb_init(&b);
        uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(1, C, (uint32_t)H, (uint32_t)W)), tx)};
        uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1, C, (uint32_t)OH, (uint32_t)OW)), ty);
        hfxb_op_add(&b, 0, HFX_OP_QMAXPOOL, -1, 1, in, y, pm);
        const void *ins[1] = {X};
        int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
        hfxb_free(&b);
        for (int i = 0; ok && i < C * OH * OW; i++) {
            int c = i / (OH * OW), oh = i / OW % OH, ow = i % OW;
            ok = load(Y, ty, (uint32_t)i) == want_qmaxpool(X + c * H * W, tx, ty, pm, H, W, oh, ow);
            if (!ok)
                hx_printf("     QMaxPool case %d (H %d W %d k %dx%d s %d,%d d %d,%d pads %d,%d,%d,%d): y[%d] %d\n", t, H,
                          W, pm[8], pm[9], pm[4], pm[5], pm[6], pm[7], pm[0], pm[1], pm[2], pm[3], i,
                          load(Y, ty, (uint32_t)i));
        }
        for (int i = 0; ok && i < 64; i++)
            ok = Y[C * OH * OW + i] == 0xa5;
        failed += !ok;
        run++;
    }
    char what[64];
    hx_snprintf(what, sizeof what, "QMaxPool %d random geometries (%d failed)", run, failed);
    expect(failed == 0 && run > CASES / 2, what);
}

/* X[6, 9, 11] as [1, 6, 9, 11] (misaligned): a 3x3 stride-2 pad-1 QAVGPOOL to [1, 6, 5, 6], the
 * padding counted or not, then with ceil mode and no pads, 2x2 stride 2 to [1, 6, 5, 6] */
static void qavgpool_case(hfx_pool *pool, uint8_t dt, int include_pad, qt_rng *r)
{
    enum { C = 6, H = 9, W = 11, OH = 5, OW = 6 };
    static uint8_t xbuf[C * H * W + 1];
    uint8_t *X = xbuf + 1, *Y = g_y + 1;
    for (int i = 0; i < C * H * W; i++)
        X[i] = (uint8_t)qt_rand(r);
    for (int ceil = 0; ceil < 2; ceil++) {
        int k = ceil ? 2 : 3, pad = ceil ? 0 : 1;
        int32_t p[HFX_OP_PARAMS] = {pad, pad, pad, pad, 2, 2, 1, 1, k, k, ceil, include_pad};
        float sx = (float)qt_range(r, 10, 100) / 1000.0f, sy = (float)qt_range(r, 5, 100) / 1000.0f;
        p[HFX_P_QPOOL_SCALE_X] = hfxb_bits(sx), p[HFX_P_QPOOL_ZERO_X] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
        p[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(sy), p[HFX_P_QPOOL_ZERO_Y] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
        hfxb b;
        hfxb_init(&b);
        uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(1, C, H, W)), dt)};
        uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1, C, OH, OW)), dt);
        hfxb_op_add(&b, 0, HFX_OP_QAVGPOOL, -1, 1, in, y, p);
        const void *ins[1] = {X};
        int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
        hfxb_free(&b);
        for (int i = 0; ok && i < C * OH * OW; i++) {
            int c = i / (OH * OW), oh = i / OW % OH, ow = i % OW, inside = 0;
            float sum = 0.0f;
            for (int u = 0; u < k; u++)
                for (int v = 0; v < k; v++) {
                    int h = oh * 2 - pad + u, w = ow * 2 - pad + v;
                    if (h < 0 || h >= H || w < 0 || w >= W)
                        continue;
                    sum += ref_qavgpool_tap(load(X, dt, (uint32_t)((c * H + h) * W + w)), sx, p[HFX_P_QPOOL_ZERO_X]);
                    inside++;
                }
            float count = (float)(include_pad ? k * k : inside);
            ok = load(Y, dt, (uint32_t)i) == ref_qavgpool_out(sum, count, sy, p[HFX_P_QPOOL_ZERO_Y], lo_of(dt), hi_of(dt));
        }
        char what[64];
        hx_snprintf(what, sizeof what, "QAveragePool %s k%d ceil %d include_pad %d", dt == HFX_DTYPE_U8 ? "u8" : "i8", k,
                    ceil, include_pad);
        expect(ok, what);
    }
}

/* the QAVGPOOL output of window (oh, ow) of plane x[H][W], straight from the definition (ref_qpool.h's steps) */
static int32_t want_qavgpool(const uint8_t *x, uint8_t dt, const int32_t *pm, int H, int W, int oh, int ow)
{
    float sum = 0.0f, sx = hfxb_f(pm[HFX_P_QPOOL_SCALE_X]);
    int inside = 0;
    for (int i = 0; i < pm[HFX_P_POOL_KERNEL_H]; i++)
        for (int j = 0; j < pm[HFX_P_POOL_KERNEL_W]; j++) {
            int h = oh * pm[HFX_P_POOL_STRIDE_H] + i - pm[HFX_P_POOL_PAD_TOP];
            int w = ow * pm[HFX_P_POOL_STRIDE_W] + j - pm[HFX_P_POOL_PAD_LEFT];
            if (h < 0 || h >= H || w < 0 || w >= W)
                continue;
            sum += ref_qavgpool_tap(load(x, dt, (uint32_t)(h * W + w)), sx, pm[HFX_P_QPOOL_ZERO_X]);
            inside++;
        }
    int count = pm[HFX_P_POOL_COUNT_INCLUDE_PAD] ? pm[HFX_P_POOL_KERNEL_H] * pm[HFX_P_POOL_KERNEL_W] : inside;
    return ref_qavgpool_out(sum, (float)count, hfxb_f(pm[HFX_P_QPOOL_SCALE_Y]), pm[HFX_P_QPOOL_ZERO_Y], lo_of(dt),
                            hi_of(dt));
}

/* Random QAVGPOOL geometries on X[1, 2, H, W] (misaligned, W up to 300: full vectors, tails and rows
 * under one vector): kernels 1..5 (and 17x17: above the u16 sums' 257 taps), strides 1..3, each pad
 * 0 .. kernel - 1, ceil mode, padding counted or not, extreme values (every code), and scales: random,
 * equal powers of two (exact ties: every output near one takes the f32 taps), negative s_x, a tiny
 * ratio, scales outside the vector path's range. The bytes after Y must stay untouched. */
static void qavgpool_sweep(hfx_pool *pool, qt_rng *r)
{
    enum { C = 2, MAX_W = 300, MAX_H = 20, CASES = 96 };
    static const int widths[] = {1, 2, 5, 17, 64, 127, 128, 129, 200, 255, 257, MAX_W};
    static uint8_t xbuf[C * MAX_H * MAX_W + 3];
    int failed = 0, run = 0;
    for (int t = 0; t < CASES; t++) {
        uint8_t dt = t & 1 ? HFX_DTYPE_I8 : HFX_DTYPE_U8;
        int big = t % 16 == 5, H = big ? MAX_H : (int)qt_range(r, 1, 7);
        int W = big ? 40 : widths[qt_range(r, 0, sizeof widths / sizeof *widths - 1)];
        int32_t pm[HFX_OP_PARAMS] = {0};
        pm[HFX_P_POOL_KERNEL_H] = big ? 17 : (int32_t)qt_range(r, 1, 5);
        pm[HFX_P_POOL_KERNEL_W] = big ? 17 : (int32_t)qt_range(r, 1, 5);
        pm[HFX_P_POOL_STRIDE_H] = (int32_t)qt_range(r, 1, 3), pm[HFX_P_POOL_STRIDE_W] = (int32_t)qt_range(r, 1, 3);
        pm[HFX_P_POOL_DILATION_H] = pm[HFX_P_POOL_DILATION_W] = 1;
        for (int a = 0; a < 4; a++)
            pm[a] = (int32_t)qt_range(r, 0, pm[HFX_P_POOL_KERNEL_H + (a & 1)] - 1);
        pm[HFX_P_POOL_CEIL_MODE] = (int32_t)qt_range(r, 0, 1), pm[HFX_P_POOL_COUNT_INCLUDE_PAD] = t >> 1 & 1;
        static const float ties[] = {0.25f, 0.5f, 1.0f, 0.0078125f};
        float sx = (float)qt_range(r, 1, 100000) / 1.0e6f, sy = (float)qt_range(r, 1, 100000) / 1.0e6f;
        if (t % 6 == 2)
            sx = sy = ties[qt_range(r, 0, 3)];
        else if (t % 6 == 4)
            sx = -sx;
        else if (t % 12 == 7)
            sx = 1.0e-9f, sy = 100.0f; /* a tiny ratio: every output is z_y */
        else if (t % 12 == 11)
            sy = sx * 1.0e-6f; /* every output saturates */
        pm[HFX_P_QPOOL_SCALE_X] = hfxb_bits(sx), pm[HFX_P_QPOOL_ZERO_X] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
        pm[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(sy), pm[HFX_P_QPOOL_ZERO_Y] = (int32_t)qt_range(r, 0, 255) + lo_of(dt);
        int OH = pool_len(H, pm[8], pm[4], 1, pm[0], pm[2], pm[10]);
        int OW = pool_len(W, pm[9], pm[5], 1, pm[1], pm[3], pm[10]);
        if (OH < 1 || OW < 1)
            continue;
        uint8_t *X = xbuf + 1 + t % 3, *Y = g_y + 1 + t % 2;
        for (int i = 0; i < C * H * W; i++)
            X[i] = (uint8_t)(t % 5 == 0 ? (i % 3 ? 0x80 : 0x7f) : t % 5 == 1 ? (i % 2 ? 0x00 : 0xff) : qt_rand(r));
        memset(Y, 0xa5, (size_t)(C * OH * OW + 64));
        hfxb b;
        hfxb_init(&b);
        uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(1, C, (uint32_t)H, (uint32_t)W)), dt)};
        uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1, C, (uint32_t)OH, (uint32_t)OW)), dt);
        hfxb_op_add(&b, 0, HFX_OP_QAVGPOOL, -1, 1, in, y, pm);
        const void *ins[1] = {X};
        int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
        hfxb_free(&b);
        for (int i = 0; ok && i < C * OH * OW; i++) {
            int c = i / (OH * OW), oh = i / OW % OH, ow = i % OW;
            ok = load(Y, dt, (uint32_t)i) == want_qavgpool(X + c * H * W, dt, pm, H, W, oh, ow);
            if (!ok)
                hx_printf("     QAveragePool case %d (H %d W %d k %dx%d s %d,%d pads %d,%d,%d,%d ceil %d incl %d): y[%d] "
                          "%d, want %d\n",
                          t, H, W, pm[8], pm[9], pm[4], pm[5], pm[0], pm[1], pm[2], pm[3], pm[10], pm[11], i,
                          load(Y, dt, (uint32_t)i), want_qavgpool(X + c * H * W, dt, pm, H, W, oh, ow));
        }
        for (int i = 0; ok && i < 64; i++)
            ok = Y[C * OH * OW + i] == 0xa5;
        failed += !ok;
        run++;
    }
    char what[64];
    hx_snprintf(what, sizeof what, "QAveragePool %d random geometries (%d failed)", run, failed);
    expect(failed == 0 && run > CASES / 2, what);
}

/* The path taken: packets of one QAVGPOOL call (qemu's counter), Y checked against the definition:
 * 3x3 stride 1 pad 1 (padding not counted) on u8 1x32x28x28, and ppocr_rec_qdq_u8u8's AveragePool
 * (u8 1x480x3x80, kernel 3x2, strides 3x2, s_x = s_y, z_x = z_y: a sixth of its outputs are exact
 * ties, which take the f32 taps). Prints the packets. */
static void qavgpool_packets(hfx_pool *pool, qt_rng *r, int C, int H, int W, const int32_t *geom, float s, int32_t zx,
                             int32_t zy)
{
    int OH = pool_len(H, geom[8], geom[4], 1, geom[0], geom[2], 0), OW = pool_len(W, geom[9], geom[5], 1, geom[1], geom[3], 0);
    uint8_t *X = malloc((size_t)(C * H * W)), *Y = malloc((size_t)(C * OH * OW));
    for (int i = 0; i < C * H * W; i++)
        X[i] = (uint8_t)qt_rand(r);
    int32_t pm[HFX_OP_PARAMS] = {0};
    memcpy(pm, geom, 12 * sizeof *pm);
    pm[HFX_P_QPOOL_SCALE_X] = hfxb_bits(s), pm[HFX_P_QPOOL_ZERO_X] = zx;
    pm[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(zx == zy ? s : 0.0196078f), pm[HFX_P_QPOOL_ZERO_Y] = zy;
    hfxb b;
    hfxb_init(&b);
    uint32_t in[1] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(1, (uint32_t)C, (uint32_t)H, (uint32_t)W)), HFX_DTYPE_U8)};
    hfxb_op_add(&b, 0, HFX_OP_QAVGPOOL, -1, 1, in,
                hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1, (uint32_t)C, (uint32_t)OH, (uint32_t)OW)), HFX_DTYPE_U8),
                pm);
    const void *ins[1] = {X};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
    uint32_t packets = hx_qemu_packets() - before;
    hfxb_free(&b);
    for (int i = 0; ok && i < C * OH * OW; i++)
        ok = Y[i] == want_qavgpool(X + i / (OH * OW) * H * W, HFX_DTYPE_U8, pm, H, W, i / OW % OH, i % OW);
    char what[96];
    hx_snprintf(what, sizeof what, "QAveragePool %dx%d s%d,%d u8 1x%dx%dx%d: bit-exact", geom[8], geom[9], geom[4],
                geom[5], C, H, W);
    hx_printf("     packets of one QAveragePool call, %dx%d s%d,%d u8 1x%dx%dx%d: %u (%u output bytes)\n", geom[8],
              geom[9], geom[4], geom[5], C, H, W, packets, (uint32_t)(C * OH * OW));
    expect(ok, what);
    free(X), free(Y);
}

/* DYNAMIC_QPARAMS (DynamicQuantizeLinear's scale and zero point) of 16000 f32 with a NaN, -0 and a
 * subnormal among them, through the core: its packets (qemu's counter) and its outputs against
 * ref_dynamic_qparams bit for bit; then ranges of one sign (the other bound 0). */
static void dynamic_qparams_case(hfx_pool *pool, qt_rng *r)
{
    enum { N = 16000 };
    float *X = malloc(N * sizeof *X);
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < N; i++) {
            float v = (float)(int32_t)(qt_rand(r) % 2000001u - 1000000) * 1.0e-5f;
            X[i] = t == 1 ? (v < 0 ? -v : v) : t == 2 ? (v > 0 ? -v : v) : v;
        }
        uint32_t nan = 0x7fc00001u, neg_zero = 0x80000000u, sub = 0x80000005u;
        memcpy(&X[17], &nan, 4), memcpy(&X[N - 1], &neg_zero, 4), memcpy(&X[N / 2], &sub, 4);
        hfxb b;
        hfxb_init(&b);
        uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(N)), s = hfxb_output(&b, 0, HFXB_SCALAR);
        uint32_t z = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1)), HFX_DTYPE_U8);
        uint32_t op = hfxb_op_add(&b, 0, HFX_OP_DYNAMIC_QPARAMS, -1, 1, &x, s, NULL);
        b.o[op].nout = 2, b.o[op].out[1] = z;
        size_t size = 0;
        uint8_t *bytes = hfxb_encode(&b, &size);
        hfxb_free(&b);
        hfx_program *prog = NULL;
        hfx_error err;
        float scale = 0.0f, want_scale;
        uint8_t zp = 0;
        int32_t want_zp;
        uint32_t packets = 0;
        int ok = hfx_program_parse(bytes, size, &prog, &err) == HFX_OK;
        free(bytes);
        if (ok) {
            const void *ins[1] = {X};
            void *outs[2] = {&scale, &zp};
            uint32_t before = hx_qemu_packets();
            ok = hfx_run(pool, prog, ins, 1, outs, 2, NULL, NULL, NULL) == HFX_OK;
            packets = hx_qemu_packets() - before;
            hfx_program_free(prog);
        }
        ref_dynamic_qparams(X, N, &want_scale, &want_zp);
        ok = ok && memcmp(&scale, &want_scale, 4) == 0 && zp == want_zp;
        if (t == 0)
            hx_printf("     packets of one DynamicQParams call, %d f32: %u\n", N, packets);
        char what[64];
        hx_snprintf(what, sizeof what, "DynamicQParams %d f32 (%s)", N, t == 0 ? "both signs" : t == 1 ? ">= 0" : "<= 0");
        expect(ok, what);
    }
    free(X);
}

/* CAST f32 -> i32 of 16000 values (random patterns: every exponent, NaN and inf among them) through
 * the core: its packets (qemu's counter) and its outputs against ref_cast_f32_i32 bit for bit */
static void cast_case(hfx_pool *pool, qt_rng *r)
{
    enum { N = 16000 };
    uint32_t *X = malloc(N * sizeof *X);
    int32_t *Y = malloc(N * sizeof *Y);
    for (int i = 0; i < N; i++)
        X[i] = i % 2 ? qt_rand(r) : (uint32_t)qt_range(r, 120, 160) << 23 | (qt_rand(r) & 0x807fffffu);
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(N));
    hfxb_op_add(&b, 0, HFX_OP_CAST, -1, 1, &x, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(N)), HFX_DTYPE_I32),
                NULL);
    const void *ins[1] = {X};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
    uint32_t packets = hx_qemu_packets() - before;
    hfxb_free(&b);
    for (int i = 0; ok && i < N; i++) {
        float v;
        memcpy(&v, &X[i], 4);
        ok = Y[i] == ref_cast_f32_i32(v);
    }
    hx_printf("     packets of one Cast f32 -> i32 call, %d values: %u\n", N, packets);
    expect(ok, "Cast f32 -> i32 16000 values: bit-exact");
    free(X), free(Y);
}

/* QUANTIZE_LINEAR f32 -> u8/i8/u16/i16 of X [c, n / c] through the core, per tensor or per axis 0
 * (scales 0.0235294 / 2^-3 / a random one alternating, zero points across the range), its outputs
 * against ref_quantize_linear bit for bit; values over the range and a little past it, ties of the
 * power-of-two scale, and unless `packets` every special kind (NaN, +-inf, +-0, subnormals).
 * `packets`: prints the call's packets (qemu's counter). */
static void quantize_case(hfx_pool *pool, qt_rng *r, uint8_t dt, uint32_t c, uint32_t n, int packets)
{
    int wide = dt == HFX_DTYPE_U16 || dt == HFX_DTYPE_I16, is_signed = dt == HFX_DTYPE_I8 || dt == HFX_DTYPE_I16;
    int32_t lo = is_signed ? (wide ? INT16_MIN : INT8_MIN) : 0, hi = wide ? (is_signed ? INT16_MAX : UINT16_MAX)
                                                                        : (is_signed ? INT8_MAX : UINT8_MAX);
    float *X = malloc(n * sizeof *X), S[16];
    uint8_t *Y = malloc(n * 2 + 1), Zb[32];
    int32_t Z[16];
    for (uint32_t k = 0; k < c; k++) {
        S[k] = k % 3 == 0 ? 0.0235294f : k % 3 == 1 ? 0.125f : (float)qt_range(r, 1, 100000) * 1.0e-6f;
        Z[k] = lo + (int32_t)qt_range(r, 0, (uint32_t)(hi - lo));
        if (wide)
            Zb[2 * k] = (uint8_t)Z[k], Zb[2 * k + 1] = (uint8_t)(Z[k] >> 8);
        else
            Zb[k] = (uint8_t)Z[k];
    }
    static const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800000u, 0xff800000u, 0x00000000u,
                                       0x80000000u, 0x00000001u, 0x807fffffu, 0x3e800000u, 0xbe800000u};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = i / (n / c);
        float span = (float)(hi - lo) * 1.2f * S[k];
        X[i] = ((float)qt_rand(r) / 4294967296.0f - 0.5f) * span + (float)(lo + hi) * 0.5f * S[k] - (float)Z[k] * S[k];
        if (i % 97 < 10 && !packets) /* (NaN and inf take the reference: not in the timed calls) */
            memcpy(&X[i], &special[i % 97], 4);
        if (i % 89 == 0) /* a tie of the power-of-two scale */
            X[i] = ((float)(int32_t)qt_range(r, 0, 600) - 300.0f + 0.5f) * 0.125f;
    }
    hfxb b;
    hfxb_init(&b);
    b.v2 = wide;
    uint32_t sd[1] = {c};
    uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(c, n / c)), s = hfxb_input(&b, 0, c > 1, sd);
    uint32_t z = hfxb_set_dtype(&b, hfxb_input(&b, 0, c > 1, sd), dt);
    hfxb_quant(&b, 0, HFX_OP_QUANTIZE_LINEAR, x, s, z, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(c, n / c)), dt), 0);
    const void *ins[3] = {X, S, Zb};
    uint8_t *out = Y + 1; /* misaligned */
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 3, out) == HFX_OK;
    uint32_t used = hx_qemu_packets() - before;
    hfxb_free(&b);
    uint32_t bad = n;
    for (uint32_t i = 0; ok && i < n; i++) {
        int32_t got = wide ? (int32_t)(out[2 * i] | out[2 * i + 1] << 8) : out[i];
        if (is_signed)
            got = wide ? (int16_t)got : (int8_t)got;
        ok = got == ref_quantize_linear(X[i], S[i / (n / c)], Z[i / (n / c)], lo, hi);
        bad = ok ? bad : i;
    }
    const char *name = dt == HFX_DTYPE_U8 ? "u8" : dt == HFX_DTYPE_I8 ? "i8" : dt == HFX_DTYPE_U16 ? "u16" : "i16";
    if (packets)
        hx_printf("     packets of one QuantizeLinear f32 -> %s call, %u x %u: %u\n", name, c, n / c, used);
    if (bad < n)
        hx_printf("     x[%u] = %08x: wrong\n", bad, ((const uint32_t *)(const void *)X)[bad]);
    char what[64];
    hx_snprintf(what, sizeof what, "QuantizeLinear f32 -> %s %u x %u", name, c, n / c);
    expect(ok, what);
    free(X), free(Y);
}

/* DEQUANTIZE_LINEAR u16/i16 -> f32 of X [c, n / c] through the core, per tensor or per axis 0 (scales
 * 0.0235294 / 2^-3 / a random one alternating, zero points across the range; X misaligned by 2 bytes),
 * its outputs against ref_dequantize_linear bit for bit; every third value an extreme of the type.
 * `packets`: prints the call's packets (qemu's counter). */
static void dequantize16_case(hfx_pool *pool, qt_rng *r, uint8_t dt, uint32_t c, uint32_t n, int packets)
{
    int is_signed = dt == HFX_DTYPE_I16;
    int32_t lo = is_signed ? INT16_MIN : 0, hi = is_signed ? INT16_MAX : UINT16_MAX;
    uint16_t *xbuf = malloc(n * 2 + 2), *X = xbuf + 1;
    float *Y = malloc(n * sizeof *Y), S[16];
    uint8_t Zb[32];
    int32_t Z[16];
    for (uint32_t k = 0; k < c; k++) {
        S[k] = k % 3 == 0 ? 0.0235294f : k % 3 == 1 ? 0.125f : (float)qt_range(r, 1, 100000) * 1.0e-6f;
        Z[k] = lo + (int32_t)qt_range(r, 0, (uint32_t)(hi - lo));
        Zb[2 * k] = (uint8_t)Z[k], Zb[2 * k + 1] = (uint8_t)(Z[k] >> 8);
    }
    for (uint32_t i = 0; i < n; i++)
        X[i] = (uint16_t)(i % 3 ? qt_rand(r) : i % 2 ? (uint32_t)lo : (uint32_t)hi);
    hfxb b;
    hfxb_init(&b);
    b.v2 = 1;
    uint32_t sd[1] = {c};
    uint32_t x = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(c, n / c)), dt), s = hfxb_input(&b, 0, c > 1, sd);
    uint32_t z = hfxb_set_dtype(&b, hfxb_input(&b, 0, c > 1, sd), dt);
    hfxb_quant(&b, 0, HFX_OP_DEQUANTIZE_LINEAR, x, s, z, hfxb_output(&b, 0, HFXB_DIMS(c, n / c)), 0);
    const void *ins[3] = {X, S, Zb};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 3, Y) == HFX_OK;
    uint32_t used = hx_qemu_packets() - before;
    hfxb_free(&b);
    uint32_t bad = n;
    for (uint32_t i = 0; ok && i < n; i++) {
        uint32_t k = i / (n / c);
        float want = ref_dequantize_linear(is_signed ? (int16_t)X[i] : X[i], S[k], Z[k]);
        ok = memcmp(&want, &Y[i], 4) == 0;
        bad = ok ? bad : i;
    }
    const char *name = is_signed ? "i16" : "u16";
    if (packets)
        hx_printf("     packets of one DequantizeLinear %s -> f32 call, %u x %u: %u\n", name, c, n / c, used);
    if (bad < n)
        hx_printf("     x[%u] = %u: wrong\n", bad, X[bad]);
    char what[64];
    hx_snprintf(what, sizeof what, "DequantizeLinear %s -> f32 %u x %u", name, c, n / c);
    expect(ok, what);
    free(xbuf), free(Y);
}

/* QRESIZE of X[n, c, h, w] to [n, c, oh, ow] against the f32 RESIZE of the same codes (the portable
 * kernel in every build: its nearest source) through the table: x2, x3, x5 and H only (the vector
 * spreads), x1.5, a downscale and round_prefer_ceil's map (the byte gather); Y at an odd offset between
 * guard bytes. `extreme`: X holds every code, the table only 0x00, 0x7f, 0x80 and 0xff. */
typedef struct qresize_shape {
    uint32_t x[4], y[4];
    int coord, nearest;
} qresize_shape;

static void qresize_case(hfx_pool *pool, const qresize_shape *sh, uint8_t tx, uint8_t ty, int extreme, qt_rng *r)
{
    enum { GUARD = 64 };
    uint32_t nx = sh->x[0] * sh->x[1] * sh->x[2] * sh->x[3], ny = sh->y[0] * sh->y[1] * sh->y[2] * sh->y[3];
    float sh_h = (float)sh->y[2] / (float)sh->x[2], sh_w = (float)sh->y[3] / (float)sh->x[3];
    uint32_t off = 1 + (uint32_t)qt_range(r, 0, 126);
    uint8_t *xbuf = malloc(nx + 1), *ybuf = malloc(ny + off + 2 * GUARD), table[256];
    float *XF = malloc(nx * sizeof(float)), *YF = malloc(ny * sizeof(float));
    uint8_t *X = xbuf + 1, *Y = ybuf + GUARD + off;
    static const uint8_t ends[4] = {0x00, 0x7f, 0x80, 0xff};
    for (uint32_t i = 0; i < nx; i++)
        X[i] = (uint8_t)(extreme ? i * 7 : qt_rand(r)), XF[i] = (float)load(X, tx, i);
    for (int i = 0; i < 256; i++)
        table[i] = extreme ? ends[qt_rand(r) & 3] : (uint8_t)qt_rand(r);
    memset(ybuf, 0xa5, ny + off + 2 * GUARD);
    hfxb f;
    hfxb_init(&f);
    hfxb_resize(&f, 0, hfxb_input(&f, 0, 4, sh->x), hfxb_output(&f, 0, 4, sh->y), HFX_RESIZE_NEAREST, sh->coord,
                sh->nearest, sh_h, sh_w);
    const void *fins[1] = {XF};
    int ok = run_one(pool, &f, fins, 1, YF) == HFX_OK;
    hfxb_free(&f);
    int by_dims = (int)(qt_rand(r) & 1); /* scales 0: the kernel's f32(out) / f32(in) of the dims (a Resize by sizes) */
    int32_t p[HFX_OP_PARAMS] = {HFX_RESIZE_NEAREST, sh->coord, sh->nearest, by_dims ? 0 : hfxb_bits(sh_h),
                                by_dims ? 0 : hfxb_bits(sh_w)};
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, sh->x), tx),
                      hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_DIMS(256), (const float *)(const void *)table), ty)};
    hfxb_op_add(&b, 0, HFX_OP_QRESIZE, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, sh->y), ty), p);
    const void *ins[1] = {X};
    ok = ok && run_one(pool, &b, ins, 1, Y) == HFX_OK;
    hfxb_free(&b);
    for (uint32_t i = 0; ok && i < ny; i++)
        ok = Y[i] == table[(int32_t)YF[i] - lo_of(tx)];
    for (uint32_t i = 0; ok && i < GUARD + off; i++)
        ok = ybuf[i] == 0xa5 && (i >= GUARD || Y[ny + i] == 0xa5);
    char what[96];
    hx_snprintf(what, sizeof what, "QResize %ux%u -> %ux%u coord %d nearest %d %s -> %s%s", sh->x[2], sh->x[3], sh->y[2],
                sh->y[3], sh->coord, sh->nearest, tx == HFX_DTYPE_U8 ? "u8" : "i8", ty == HFX_DTYPE_U8 ? "u8" : "i8",
                extreme ? " extreme" : "");
    expect(ok, what);
    free(xbuf), free(ybuf), free(XF), free(YF);
}

static void qresize_sweep(hfx_pool *pool, qt_rng *r)
{
    enum { ASYM = HFX_RESIZE_COORD_ASYMMETRIC, HALF = HFX_RESIZE_COORD_HALF_PIXEL };
    enum { FLOOR = HFX_RESIZE_NEAREST_FLOOR, PFLOOR = HFX_RESIZE_NEAREST_ROUND_PREFER_FLOOR };
    static const qresize_shape shapes[] = {
        {{2, 3, 5, 7}, {2, 3, 10, 14}, ASYM, FLOOR},               /* x2, odd W (ppocr_det's) */
        {{2, 3, 5, 7}, {2, 3, 15, 21}, HALF, PFLOOR},              /* x3 */
        {{1, 2, 4, 200}, {1, 2, 8, 400}, HALF, PFLOOR},            /* x2, W across vectors */
        {{1, 2, 3, 129}, {1, 2, 9, 387}, ASYM, FLOOR},             /* x3, 3 vectors and 3 bytes */
        {{1, 1, 3, 300}, {1, 1, 6, 1500}, ASYM, FLOOR},            /* x5 along W */
        {{1, 2, 5, 131}, {1, 2, 10, 131}, HALF, PFLOOR},           /* H only */
        {{1, 2, 6, 100}, {1, 2, 9, 150}, HALF, PFLOOR},            /* x1.5: the gather */
        {{1, 2, 8, 260}, {1, 2, 4, 130}, ASYM, FLOOR},             /* /2: the gather */
        {{1, 2, 4, 70}, {1, 2, 8, 140}, HALF, HFX_RESIZE_NEAREST_ROUND_PREFER_CEIL}, /* not q / 2 */
        {{1, 1, 2, 40}, {1, 1, 32, 640}, ASYM, FLOOR},             /* x16 */
        {{2, 24, 15, 20}, {2, 24, 30, 40}, ASYM, FLOOR},           /* several items */
    };
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    for (uint32_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            qresize_case(pool, &shapes[s], types[t & 1], types[t >> 1], 0, r);
    for (int t = 0; t < 4; t++)
        qresize_case(pool, &shapes[t & 1 ? 3 : 6], types[t & 1], types[t >> 1], 1, r);
}

/* The path taken: packets of one QRESIZE call (qemu's counter) on an FPN upsample, 1x24x60x80 -> x2
 * (asymmetric, floor), Y checked against its source o / 2. The C path costs 5.8 packets per output byte
 * (v67 image), the HVX rows under 0.5: the test asks for under 1. */
static void qresize_packets(hfx_pool *pool, qt_rng *r)
{
    enum { C = 24, H = 60, W = 80 };
    uint8_t *X = malloc(C * H * W), *Y = malloc(4 * C * H * W), table[256];
    for (int i = 0; i < C * H * W; i++)
        X[i] = (uint8_t)qt_rand(r);
    for (int i = 0; i < 256; i++)
        table[i] = (uint8_t)qt_rand(r);
    int32_t p[HFX_OP_PARAMS] = {HFX_RESIZE_NEAREST, HFX_RESIZE_COORD_ASYMMETRIC, HFX_RESIZE_NEAREST_FLOOR,
                                hfxb_bits(2.0f), hfxb_bits(2.0f)};
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_input(&b, 0, HFXB_DIMS(1, C, H, W)),
                      hfxb_const(&b, 0, HFXB_DIMS(256), (const float *)(const void *)table)};
    in[0] = hfxb_set_dtype(&b, in[0], HFX_DTYPE_U8), in[1] = hfxb_set_dtype(&b, in[1], HFX_DTYPE_U8);
    hfxb_op_add(&b, 0, HFX_OP_QRESIZE, -1, 2, in,
                hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(1, C, 2 * H, 2 * W)), HFX_DTYPE_U8), p);
    const void *ins[1] = {X};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
    uint32_t packets = hx_qemu_packets() - before;
    hfxb_free(&b);
    for (int i = 0; ok && i < 4 * C * H * W; i++) {
        int plane = i / (4 * H * W), oy = i / (2 * W) % (2 * H), ox = i % (2 * W);
        ok = Y[i] == table[X[(plane * H + oy / 2) * W + ox / 2]];
    }
    hx_printf("     packets of one QResize call, 1x%dx%dx%d -> x2 u8: %u (%u output bytes)\n", C, H, W, packets,
              4u * C * H * W);
    expect(ok && packets < 4u * C * H * W, "QResize x2 runs the HVX rows: bit-exact, under 1 packet per output byte");
    free(X), free(Y);
}

/* TRANSPOSE of X (random bytes, any dtype: a transpose moves elements) against the index loop here; X at
 * an odd offset, Y at another between guard bytes; `packets`: print the call's packets (qemu's counter) */
static void transpose_case(hfx_pool *pool, qt_rng *r, uint8_t dt, uint32_t rank, const uint32_t *dims,
                           const int32_t *perm, int packets)
{
    enum { GUARD = 64 };
    uint32_t od[HFX_MAX_RANK];
    uint64_t n = 1, st[HFX_MAX_RANK];
    size_t es = hfxb_dtype_size(dt);
    for (uint32_t i = rank; i-- > 0;)
        st[i] = n, n *= dims[i];
    for (uint32_t i = 0; i < rank; i++)
        od[i] = dims[perm[i]];
    uint32_t xo = 1 + (uint32_t)qt_range(r, 0, 126), yo = 1 + (uint32_t)qt_range(r, 0, 126);
    uint8_t *xbuf = malloc(n * es + xo), *ybuf = malloc(n * es + yo + 2 * GUARD), *want = malloc(n * es);
    uint8_t *X = xbuf + xo, *Y = ybuf + GUARD + yo;
    for (uint64_t i = 0; i < n * es; i++)
        X[i] = (uint8_t)qt_rand(r);
    memset(ybuf, 0xa5, n * es + yo + 2 * GUARD);
    for (uint64_t o = 0; o < n; o++) {
        uint64_t rem = o, src = 0;
        for (uint32_t i = rank; i-- > 0;)
            src += rem % od[i] * st[perm[i]], rem /= od[i];
        memcpy(want + o * es, X + src * es, es);
    }
    hfxb b;
    hfxb_init(&b);
    b.v2 = dt == HFX_DTYPE_U16 || dt == HFX_DTYPE_I16;
    uint32_t x = hfxb_set_dtype(&b, hfxb_input(&b, 0, rank, dims), dt);
    hfxb_transpose(&b, 0, x, hfxb_set_dtype(&b, hfxb_output(&b, 0, rank, od), dt), perm, rank);
    const void *ins[1] = {X};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
    uint32_t used = hx_qemu_packets() - before;
    hfxb_free(&b);
    ok = ok && memcmp(Y, want, n * es) == 0;
    for (uint32_t i = 0; ok && i < GUARD + yo; i++)
        ok = ybuf[i] == 0xa5 && (i >= GUARD || Y[n * es + i] == 0xa5);
    char what[128];
    int len = hx_snprintf(what, sizeof what, "Transpose %zu-byte [", es);
    for (uint32_t i = 0; i < rank; i++)
        len += hx_snprintf(what + len, sizeof what - (size_t)len, "%s%u", i ? "," : "", dims[i]);
    len += hx_snprintf(what + len, sizeof what - (size_t)len, "] perm ");
    for (uint32_t i = 0; i < rank; i++)
        len += hx_snprintf(what + len, sizeof what - (size_t)len, "%d", perm[i]);
    if (packets)
        hx_printf("     packets of one call, %s: %u\n", what, used);
    expect(ok, what);
    free(xbuf), free(ybuf), free(want);
}

static void transpose_sweep(hfx_pool *pool, qt_rng *r)
{
    typedef struct {
        uint8_t dt;
        uint32_t rank, dims[4];
        int32_t perm[4];
        int packets;
    } tcase;
    enum { U8 = HFX_DTYPE_U8, I8 = HFX_DTYPE_I8, U16 = HFX_DTYPE_U16, I16 = HFX_DTYPE_I16, F32 = HFX_DTYPE_F32 };
    static const tcase cases[] = {
        {U8, 3, {1, 64, 64}, {0, 2, 1}, 1},        /* whisper_encoder's */
        {U8, 4, {1, 64, 4, 16}, {0, 2, 3, 1}, 1},  /* its keys: [64, 64] after merging */
        {U8, 4, {1, 64, 4, 16}, {0, 2, 1, 3}, 1},  /* its heads: 16-byte runs as elements */
        {U8, 4, {1, 4, 64, 16}, {0, 2, 1, 3}, 1},  /* and back */
        {U8, 4, {1, 4, 16, 2100}, {0, 2, 1, 3}, 1}, /* a detector's: runs of 2100 (vector copies) */
        {U8, 3, {1, 10, 7600}, {0, 2, 1}, 1},      /* layout_cdla's heads: output rows of 10 bytes */
        {U8, 3, {1, 32, 1900}, {0, 2, 1}, 1},
        {I16, 3, {3, 37, 129}, {0, 2, 1}, 0},
        {U16, 3, {7, 9, 11}, {2, 0, 1}, 0},
        {F32, 4, {2, 5, 7, 3}, {3, 1, 0, 2}, 0},
        {F32, 3, {2, 64, 64}, {0, 2, 1}, 1},
        {U8, 2, {5, 300}, {1, 0}, 0},
        {I8, 3, {2, 200, 300}, {0, 2, 1}, 0},      /* several items */
        {U8, 3, {256, 8, 32}, {1, 0, 2}, 0},       /* 32-byte runs, two items */
        {U8, 3, {1000, 3, 16}, {1, 0, 2}, 0},      /* items cut the view's rows: C */
        {I16, 4, {3, 5, 7, 9}, {0, 3, 1, 2}, 0},
        {U8, 4, {2, 3, 129, 65}, {0, 1, 3, 2}, 0},
    };
    for (uint32_t i = 0; i < sizeof cases / sizeof *cases; i++)
        transpose_case(pool, r, cases[i].dt, cases[i].rank, cases[i].dims, cases[i].perm, cases[i].packets);
}

/* QSOFTMAX of X[3, 9, 4] (misaligned) over axis 1 and of X[3, 9, 4] over axis 2, a random positive table,
 * against lines taken here with ref_qsoftmax.h's steps; line 0 of axis 1 has one value taking all (q = 256:
 * saturated) */
static void qsoftmax_case(hfx_pool *pool, uint8_t dt, qt_rng *r)
{
    enum { A = 3, B = 9, C = 4 };
    static uint8_t xbuf[A * B * C + 1];
    static float table[256];
    uint8_t *X = xbuf + 1, *Y = g_y + 1;
    for (int i = 0; i < A * B * C; i++)
        X[i] = (uint8_t)qt_rand(r);
    float t = (float)qt_range(r, 1, 1000) / 1000.0f; /* growing as exp does: table[255] / table[0] = 3.4e9 */
    for (int j = 0; j < 256; j++, t *= 1.09f)
        table[j] = t;
    for (int i = 0; i < B; i++)
        X[i * C] = (uint8_t)lo_of(dt);
    X[2 * C] = (uint8_t)hi_of(dt);
    for (int axis = 1; axis <= 2; axis++) {
        int d = axis == 1 ? B : C, inner = axis == 1 ? C : 1;
        int32_t zy = lo_of(dt) + (int32_t)qt_range(r, 0, 2);
        int32_t p[HFX_OP_PARAMS] = {axis, hfxb_bits(256.0f), zy};
        hfxb b;
        hfxb_init(&b);
        uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(A, B, C)), dt),
                          hfxb_const(&b, 0, HFXB_DIMS(256), table)};
        hfxb_op_add(&b, 0, HFX_OP_QSOFTMAX, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(A, B, C)), dt), p);
        const void *ins[1] = {X};
        int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
        hfxb_free(&b);
        for (int line = 0; ok && line < A * B * C / d; line++) {
            int base = line / inner * d * inner + line % inner, m = INT32_MIN;
            for (int k = 0; k < d; k++)
                m = load(X, dt, (uint32_t)(base + k * inner)) > m ? load(X, dt, (uint32_t)(base + k * inner)) : m;
            float sum = 0.0f;
            for (int k = 0; k < d; k++)
                sum += table[ref_qsoftmax_index(load(X, dt, (uint32_t)(base + k * inner)), m)];
            for (int k = 0; ok && k < d; k++) {
                float t = table[ref_qsoftmax_index(load(X, dt, (uint32_t)(base + k * inner)), m)];
                ok = load(Y, dt, (uint32_t)(base + k * inner)) ==
                     ref_qsoftmax_out(t, sum, 256.0f, zy, dt == HFX_DTYPE_U8);
            }
        }
        char what[64];
        hx_snprintf(what, sizeof what, "QSoftmax %s axis %d", dt == HFX_DTYPE_U8 ? "u8" : "i8", axis);
        expect(ok, what);
    }
}

/* QSOFTMAX over the last axis (contiguous lines: the HVX path) of X [lines, d] (misaligned), a table
 * growing by `ratio` up to `top` (ORT's: exp of the codes times s_x, shifted up to FLT_MAX / (d e^5)),
 * or flat (ratio 1: every quotient y_scale / d, exact ties when that is k + 1/2), against lines
 * taken here with ref_qsoftmax.h's steps. `packets`: prints the call's packets. */
static void qsoftmax_lines(hfx_pool *pool, qt_rng *r, uint8_t dt, uint32_t lines, uint32_t d, float ratio, float top,
                           float y_scale, int packets)
{
    static float table[256];
    uint8_t *xbuf = malloc(lines * d + 1), *ybuf = malloc(lines * d + 1), *X = xbuf + 1, *Y = ybuf + 1;
    for (uint32_t i = 0; i < lines * d; i++)
        X[i] = (uint8_t)(qt_rand(r) % 4 ? qt_rand(r) : (uint32_t)hi_of(dt) - qt_rand(r) % 8);
    float t = top;
    for (int j = 255; j >= 0; j--, t /= ratio)
        table[j] = t;
    int32_t zy = lo_of(dt) + (int32_t)qt_range(r, 0, 3);
    int32_t p[HFX_OP_PARAMS] = {1, hfxb_bits(y_scale), zy};
    hfxb b;
    hfxb_init(&b);
    uint32_t in[2] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(lines, d)), dt), hfxb_const(&b, 0, HFXB_DIMS(256), table)};
    hfxb_op_add(&b, 0, HFX_OP_QSOFTMAX, -1, 2, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(lines, d)), dt), p);
    const void *ins[1] = {X};
    uint32_t before = hx_qemu_packets();
    int ok = run_one(pool, &b, ins, 1, Y) == HFX_OK;
    uint32_t used = hx_qemu_packets() - before;
    hfxb_free(&b);
    for (uint32_t line = 0; ok && line < lines; line++) {
        const uint8_t *x = X + line * d;
        int32_t m = INT32_MIN;
        for (uint32_t k = 0; k < d; k++)
            m = load(x, dt, k) > m ? load(x, dt, k) : m;
        float sum = 0.0f;
        for (uint32_t k = 0; k < d; k++)
            sum += table[ref_qsoftmax_index(load(x, dt, k), m)];
        for (uint32_t k = 0; ok && k < d; k++)
            ok = load(Y + line * d, dt, k) ==
                 ref_qsoftmax_out(table[ref_qsoftmax_index(load(x, dt, k), m)], sum, y_scale, zy, dt == HFX_DTYPE_U8);
    }
    if (packets)
        hx_printf("     packets of one QSoftmax call, %s %u lines of %u: %u\n", dt == HFX_DTYPE_U8 ? "u8" : "i8", lines,
                  d, used);
    char what[80];
    hx_snprintf(what, sizeof what, "QSoftmax %s %u x %u, ratio %d/1000, y_scale %d", dt == HFX_DTYPE_U8 ? "u8" : "i8",
                lines, d, (int)(ratio * 1000.0f), (int)y_scale);
    expect(ok, what);
    free(xbuf), free(ybuf);
}

/* X1[2, 3, W], X2[2, 4, W] (misaligned) concatenated on axis 1 through random tables; W 77: spans of
 * 231 and 308 bytes (vectors and tails) */
static void qconcat_case(hfx_pool *pool, uint8_t dt, uint32_t W, qt_rng *r)
{
    enum { MAX_W = 77 };
    static uint8_t x1[6 * MAX_W + 1], x2[8 * MAX_W + 1], tables[2 * 256];
    uint8_t *X1 = x1 + 1, *X2 = x2 + 1, *Y = g_y + 1;
    for (uint32_t i = 0; i < 6 * W; i++)
        X1[i] = (uint8_t)qt_rand(r);
    for (uint32_t i = 0; i < 8 * W; i++)
        X2[i] = (uint8_t)qt_rand(r);
    for (int i = 0; i < 2 * 256; i++)
        tables[i] = (uint8_t)qt_rand(r);
    memset(Y, 0xa5, 14 * W + 64);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[3] = {hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(2, 3, W)), dt),
                      hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(2, 4, W)), dt),
                      hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_DIMS(2, 256), (const float *)(const void *)tables), dt)};
    int32_t p[HFX_OP_PARAMS] = {1};
    hfxb_op_add(&b, 0, HFX_OP_QCONCAT, -1, 3, in, hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(2, 7, W)), dt), p);
    const void *ins[2] = {X1, X2};
    int ok = run_one(pool, &b, ins, 2, Y) == HFX_OK;
    hfxb_free(&b);
    for (uint32_t i = 0; ok && i < 14 * W; i++) {
        uint32_t n = i / (7 * W), c = i / W % 7, w = i % W;
        const uint8_t *x = c < 3 ? X1 + (n * 3 + c) * W : X2 + (n * 4 + c - 3) * W;
        ok = Y[i] == tables[(c < 3 ? 0 : 256) + (uint32_t)(load(x, dt, w) - lo_of(dt))];
    }
    for (uint32_t i = 0; ok && i < 64; i++)
        ok = Y[14 * W + i] == 0xa5;
    char what[48];
    hx_snprintf(what, sizeof what, "QConcat %s, W %u", dt == HFX_DTYPE_U8 ? "u8" : "i8", W);
    expect(ok, what);
}

int main(void)
{
    hx_printf("QAdd/QMul/QLut on the coop platform (\"%s\")\n", hfx_plat_name());
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    cfg.n_vector_workers = 2;
    cfg.n_matrix_workers = 1;
    cfg.arena_bytes = 1u << 20;
    hfx_pool *pool = NULL;
    qt_begin_group(&T);
    expect(hfx_pool_create(&cfg, &pool) == HFX_OK, "pool");
    if (!pool)
        return qt_result(&T, "test_qeltwise");
    qt_end_group(&T, "pool");
    qt_rng r = {4242};
    static const uint8_t types[2] = {HFX_DTYPE_U8, HFX_DTYPE_I8};
    qt_begin_group(&T);
    expect(ref_fmaf(3.0f, 1.0f / 3.0f, -1.0f) != (3.0f * (1.0f / 3.0f)) - 1.0f, "fma is fused (one rounding)");
    for (int t = 0; t < 2; t++)
        for (int a_inner = 0; a_inner < 2; a_inner++) {
            qbin_case(pool, HFX_OP_QADD, types[t], a_inner, t, &r);
            qbin_case(pool, HFX_OP_QMUL, types[t], a_inner, a_inner, &r);
        }
    static const uint32_t shapes[][2][3] = {
        {{3, 5, 300}, {3, 5, 300}}, {{3, 5, 300}, {3, 1, 300}}, {{2, 1, 257}, {2, 4, 1}}, {{1, 1, 1000}, {1, 1, 1}},
        {{1, 1, 1}, {1, 1, 1000}},  {{1, 1, 40000}, {1, 1, 40000}}, {{1, 64, 64}, {1, 64, 64}},
    };
    for (uint32_t t = 0; t < 4 * sizeof shapes / sizeof *shapes; t++)
        qbin_shapes_case(pool, t & 1 ? HFX_OP_QMUL : HFX_OP_QADD, types[t >> 1 & 1], shapes[t / 4][0],
                         shapes[t / 4][1], 0, &r);
    for (uint32_t t = 0; t < 4; t++)
        qbin_shapes_case(pool, t & 1 ? HFX_OP_QMUL : HFX_OP_QADD, types[t >> 1], shapes[0][0], shapes[1][1], 1, &r);
    qt_end_group(&T, "QAdd/QMul");
    qt_begin_group(&T);
    static const uint32_t lut_sizes[] = {3 * 7 * 13, 1, 127, 128, 129, 256, 259, 1000, 40000};
    for (uint32_t t = 0; t < 4 * sizeof lut_sizes / sizeof *lut_sizes; t++)
        qlut_case(pool, types[t & 1], types[t >> 1 & 1], lut_sizes[t / 4], t % 5 * 31, &r);
    qt_end_group(&T, "QLut");
    qt_begin_group(&T);
    for (int t = 0; t < 2; t++)
        qpool_case(pool, types[t], &r);
    qgap_sweep(pool, &r);
    qmaxpool_sweep(pool, &r);
    qt_end_group(&T, "QGlobalAveragePool/QMaxPool");
    qt_begin_group(&T);
    for (int t = 0; t < 4; t++)
        qavgpool_case(pool, types[t & 1], t >> 1, &r);
    qavgpool_sweep(pool, &r);
    static const int32_t k3s1p1[12] = {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}, k3x2s3x2[12] = {0, 0, 0, 0, 3, 2, 1, 1, 3, 2, 0, 0};
    qavgpool_packets(pool, &r, 32, 28, 28, k3s1p1, 0.0235294f, 3, 0);
    qavgpool_packets(pool, &r, 480, 3, 80, k3x2s3x2, 0.2280418f, 6, 6);
    qt_end_group(&T, "QAveragePool");
    qt_begin_group(&T);
    dynamic_qparams_case(pool, &r);
    cast_case(pool, &r);
    qt_end_group(&T, "DynamicQParams/Cast");
    qt_begin_group(&T);
    static const uint8_t qtypes[4] = {HFX_DTYPE_U8, HFX_DTYPE_I8, HFX_DTYPE_U16, HFX_DTYPE_I16};
    for (int t = 0; t < 4; t++) {
        quantize_case(pool, &r, qtypes[t], 1, 16000, 1);
        quantize_case(pool, &r, qtypes[t], 1, 1003, 0);
        quantize_case(pool, &r, qtypes[t], 6, 6 * 515, 0);
    }
    quantize_case(pool, &r, HFX_DTYPE_U8, 1, 64 * 80 * 80, 1); /* an FPN level after a Resize */
    qt_end_group(&T, "QuantizeLinear");
    qt_begin_group(&T);
    for (int t = 2; t < 4; t++) {
        dequantize16_case(pool, &r, qtypes[t], 1, 16000, 1);
        dequantize16_case(pool, &r, qtypes[t], 1, 1003, 0);
        dequantize16_case(pool, &r, qtypes[t], 6, 6 * 515, 0);
    }
    qt_end_group(&T, "DequantizeLinear u16/i16");
    qt_begin_group(&T);
    qresize_sweep(pool, &r);
    qresize_packets(pool, &r);
    qt_end_group(&T, "QResize");
    qt_begin_group(&T);
    transpose_sweep(pool, &r);
    qt_end_group(&T, "Transpose");
    qt_begin_group(&T);
    for (int t = 0; t < 2; t++)
        qsoftmax_case(pool, types[t], &r);
    static const uint32_t qs_d[] = {1, 4, 5, 64, 127, 128, 129, 300, 1500};
    for (uint32_t t = 0; t < 2 * sizeof qs_d / sizeof *qs_d; t++) {
        uint32_t d = qs_d[t / 2];
        float top = 3.4e38f / ((float)d * 148.5f); /* ORT's table[255] */
        qsoftmax_lines(pool, &r, types[t & 1], 7, d, 1.0137f, top, 256.0f, 0);
        qsoftmax_lines(pool, &r, types[t & 1], 3, d, 1.09f, 1.0f, (float)qt_range(&r, 1, 1000), 0);
        qsoftmax_lines(pool, &r, types[t & 1], 3, d, 1.0f, 1.0f, (float)(d * (2 * (t % 5) + 1) / 2), 0); /* ties */
        qsoftmax_lines(pool, &r, types[t & 1], 2, d, 1.0137f, top, 1.0e5f, 0); /* t * y_scale overflows */
    }
    /* t * y_scale overflows f32 where t * y_scale / sum = 66.7: the reference's double quotient decides */
    qsoftmax_lines(pool, &r, HFX_DTYPE_U8, 2, 1500, 1.0f, 1.0e35f, 1.0e5f, 0);
    qsoftmax_lines(pool, &r, HFX_DTYPE_U8, 4 * 64, 64, 1.0137f, 3.4e38f / (64 * 148.5f), 256.0f, 1); /* whisper's */
    qt_end_group(&T, "QSoftmax");
    qt_begin_group(&T);
    for (int t = 0; t < 4; t++)
        qconcat_case(pool, types[t & 1], t < 2 ? 5 : 77, &r);
    qt_end_group(&T, "QConcat");
    hfx_pool_destroy(pool);
    return qt_result(&T, "test_qeltwise");
}
