/*
 * test_scheduler_coop.c - the hexfuse core (program parser, plan, scheduler,
 * arena, trace, op kernels) built with the cooperative platform and run
 * under qemu-hexagon: the persistent "workers" (1 matrix + 3 vector) are
 * step functions interleaved on the one hardware thread.
 *
 * The task program pairs
 *   task A  X[16,32] @ W[32,24] -> Relu -> Transpose -> YA[24,16]
 *           (matrix item, vector items, copy items)
 *   task B  XB[8,64] + c -> * 3 -> Slice cols 8..40 -> Concat with itself
 *           along axis 1 -> Copy -> YB[8,64]    (vector and copy items)
 * with small integer values, so every float result is exact and the outputs
 * are compared bit for bit with a plain C computation of the same graph.
 *
 * Checked: parse errors on corrupt programs, a full run (outputs, items,
 * trace events and their engine/worker classes, both tasks interleaved in
 * the trace), a second run on the same persistent pool, a run forced serial,
 * a partial run resumed through a run state, and that the coop heap is
 * empty again after everything is freed.
 *
 * A second program runs the pooling, hard activation and resize kernels
 *   task A  X[1,4,8,8] -> MaxPool 3x3 s1 p1 -> HardSwish -> GlobalAveragePool -> YA0[1,4,1,1]
 *           X -> AveragePool 2x2 s2 (ceil_mode, count_include_pad, pads 1 1 0 0) -> YA1[1,4,5,5]
 *   task B  XB[1,2,4,5] -> Resize nearest x2 (asymmetric, floor) -> YB0[1,2,8,10]
 *           XB -> Resize linear x2 (half_pixel) -> YB1[1,2,8,10];  XB -> HardSigmoid -> YB2
 * against plain C: bit for bit where the result is exact (max, nearest, linear
 * weights 1/4 and 3/4 on integers), else within 1e-5 relative.
 *
 * ReduceSum and ReduceMean run over every axes mask of a [2,5,6,4] tensor of integers, bit for bit.
 *
 * A third runs the quantization ops, bit for bit against dsp/ref/ref_quant.h:
 *   task A  XQ[3,37] -> QuantizeLinear u8 (per tensor) -> QA; QA -> DequantizeLinear -> DA
 *   task B  XQ -> QuantizeLinear i8 per axis 0 (3 scales and zero points) -> QB
 * XQ holds ties at .5, saturating values, +-inf and NaN, then random values.
 *
 * The same with 16-bit types (a v2 program): u16 per tensor in task A, i16 per axis in task B.
 *
 * A fourth runs QMatMul and QConv2D (every u8/i8 combination of the operands and Y; odd sizes,
 * per-tensor and per-column zero points and scales, a bias that wraps int32, extremes only, buffers
 * at odd addresses), bit for bit against dsp/ref/ref_qmatmul.h: on Hexagon builds the HVX vrmpy path.
 * MatMulInteger the same way (every u8/i8 pair, per-tensor and per-column zero points, columns split
 * over items, an int32 Y at an odd address between guard bytes), ConvInteger on QConv2D's shapes and
 * depthwise ones, and its packets (qemu's counter) against QConv2D's on one conv: the same item path.
 *
 * A fifth runs the integer ops of a dynamically quantised conv's bias chain, bit for bit against
 * ref_cast_f32_i32 (dsp/ref/ref_quant.h) and wrapping arithmetic in C:
 *   task A  XC[37] (NaN, +-inf, ties, values past +-2^31, random) -> Cast -> YC i32;
 *           BIAS[7] -> Cast -> Copy [1,7,1,1] -> ACC[1,7,5,13] i32 + it (wraps) -> YS i32; YS * YS -> YM
 *   task B  D[5] i64 -> GatherRows by I[4] i64 (negative, one out of range: zeros) -> YG; D - D[0] -> YD i64
 */
#include <stdint.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "platform.h"
#include "program_builder.h"
#include "qtest.h"
#include "../../ref/ref_qmatmul.h"
#include "../../ref/ref_quant.h"

/* The builder's program encoded and parsed; the builder is freed. */
static hfx_status parse_built(hfxb *b, hfx_program **prog, hfx_error *err) {
    size_t size = 0;
    uint8_t *bytes = hfxb_encode(b, &size);
    hfxb_free(b);
    hfx_status st = hfx_program_parse(bytes, size, prog, err);
    free(bytes);
    return st;
}

#define MA 16
#define KA 32
#define NA 24
#define MB 8
#define NB 64
#define SL0 8
#define SL1 40

static qtest T;

static float x_a[MA * KA], w_a[KA * NA], x_b[MB * NB], c_b[NB], three[1] = {3.0f};
static float want_a[NA * MA], want_b[MB * NB];
static float got_a[NA * MA], got_b[MB * NB];

static void expect(int ok, const char *what)
{
    qt_case(&T, ok);
    if (!ok)
        hx_printf("FAIL %s\n", what);
}

static void make_data(void)
{
    qt_rng r = {12345};
    for (int i = 0; i < MA * KA; i++)
        x_a[i] = (float)((int)(qt_rand(&r) % 9) - 4);
    for (int i = 0; i < KA * NA; i++)
        w_a[i] = (float)((int)(qt_rand(&r) % 7) - 3);
    for (int i = 0; i < MB * NB; i++)
        x_b[i] = (float)((int)(qt_rand(&r) % 201) - 100);
    for (int i = 0; i < NB; i++)
        c_b[i] = (float)((int)(qt_rand(&r) % 11) - 5);
    /* task A: relu(X W), transposed */
    for (int m = 0; m < MA; m++)
        for (int n = 0; n < NA; n++) {
            float s = 0.0f;
            for (int k = 0; k < KA; k++)
                s += x_a[m * KA + k] * w_a[k * NA + n];
            want_a[n * MA + m] = s > 0.0f ? s : 0.0f;
        }
    /* task B: ((x + c) * 3)[:, 8:40] concatenated twice along axis 1 */
    for (int m = 0; m < MB; m++)
        for (int j = 0; j < NB; j++) {
            int src = SL0 + (j % (SL1 - SL0));
            want_b[m * NB + j] = (x_b[m * NB + src] + c_b[src]) * 3.0f;
        }
}

static uint8_t *build_program(size_t *size)
{
    hfxb b;
    hfxb_init(&b);
    /* task A */
    uint32_t xa = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(MA, KA));
    uint32_t wa = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(KA, NA), w_a);
    uint32_t ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(NA, MA));
    uint32_t g = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(MA, NA));
    uint32_t rl = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(MA, NA));
    hfxb_gemm(&b, HFX_TASK_A, xa, wa, HFXB_NONE, g, 0, 0, 1.0f, 0.0f);
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, g, rl);
    const int32_t perm[2] = {1, 0};
    hfxb_transpose(&b, HFX_TASK_A, rl, ya, perm, 2);
    /* task B */
    uint32_t xb = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t cb = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(NB), c_b);
    uint32_t k3 = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(1), three);
    uint32_t yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t s1 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t s2 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t s3 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, SL1 - SL0));
    uint32_t s4 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    hfxb_binary(&b, HFX_TASK_B, HFX_OP_ADD, xb, cb, s1);
    hfxb_binary(&b, HFX_TASK_B, HFX_OP_MUL, s1, k3, s2);
    const int32_t st[2] = {0, SL0}, en[2] = {MB, SL1}, sp[2] = {1, 1};
    hfxb_slice(&b, HFX_TASK_B, s2, s3, st, en, sp, 2);
    const uint32_t cat[2] = {s3, s3};
    hfxb_concat(&b, HFX_TASK_B, 2, cat, s4, 1);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_COPY, -1, 1, &s4, yb, NULL);
    uint8_t *bytes = hfxb_encode(&b, size);
    hfxb_free(&b);
    return bytes;
}

static int outputs_match(void)
{
    return memcmp(got_a, want_a, sizeof want_a) == 0 && memcmp(got_b, want_b, sizeof want_b) == 0;
}

static hfx_status run(hfx_pool *pool, const hfx_program *prog, const hfx_run_options *opt, hfx_runstate *rs,
                      hfx_run_result *res)
{
    const void *in[2] = {x_a, x_b};
    void *out[2] = {got_a, got_b};
    return hfx_run(pool, prog, in, 2, out, 2, opt, rs, res);
}

static hfx_trace_event events[4096];

/* ---- second program: pooling, hard activations, resize ---- */

#define PC 4
#define PH 8
#define RC 2
#define RH 4
#define RW 5

static float p_x[PC * PH * PH], p_xb[RC * RH * RW];
static float p_ya0[PC], p_ya1[PC * 5 * 5], p_yb0[RC * 8 * 10], p_yb1[RC * 8 * 10], p_yb2[RC * RH * RW];
static float w_ya0[PC], w_ya1[PC * 5 * 5], w_yb0[RC * 8 * 10], w_yb1[RC * 8 * 10], w_yb2[RC * RH * RW];

static float clamp01(float v)
{
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}

/* linear taps of output index o (half_pixel, scale 2) on an axis of length n */
static void taps2(int o, int n, int *i1, int *i2, float *w1, float *w2)
{
    float c = ((float)o + 0.5f) / 2.0f - 0.5f;
    c = c < 0.0f ? 0.0f : c > (float)(n - 1) ? (float)(n - 1) : c;
    *i1 = (int)c;
    *i2 = *i1 + 1 < n ? *i1 + 1 : n - 1;
    if (*i1 == *i2) {
        *w1 = *w2 = 0.5f;
    } else {
        *w1 = (float)*i2 - c;
        *w2 = c - (float)*i1;
    }
}

static void make_pool_data(void)
{
    qt_rng r = {777};
    for (int i = 0; i < PC * PH * PH; i++)
        p_x[i] = (float)((int)(qt_rand(&r) % 41) - 20);
    for (int i = 0; i < RC * RH * RW; i++)
        p_xb[i] = (float)((int)(qt_rand(&r) % 17) - 8);
    for (int c = 0; c < PC; c++) {
        const float *xc = p_x + c * PH * PH;
        double sum = 0.0;
        for (int y = 0; y < PH; y++)
            for (int x = 0; x < PH; x++) {
                float m = -3.4e38f;
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++) {
                        int iy = y + dy, ix = x + dx;
                        if (iy >= 0 && iy < PH && ix >= 0 && ix < PH && xc[iy * PH + ix] > m)
                            m = xc[iy * PH + ix];
                    }
                float t = m * (1.0f / 6.0f);
                sum += (double)(m * clamp01(t + 0.5f));
            }
        w_ya0[c] = (float)(sum / (double)(PH * PH));
        /* 2x2 s2, pads 1 1 0 0, ceil: ceil((8+1-1-1)/2) + 1 = 5 (floor: 4); the first window
         * counts its pad tap, the last one reaches beyond the padded input (not counted) */
        for (int oy = 0; oy < 5; oy++)
            for (int ox = 0; ox < 5; ox++) {
                float s = 0.0f;
                int count_y = 0, count_x = 0;
                for (int k = 0; k < 2; k++) {
                    count_y += 2 * oy - 1 + k < PH;
                    count_x += 2 * ox - 1 + k < PH;
                    for (int j = 0; j < 2; j++) {
                        int iy = 2 * oy - 1 + k, ix = 2 * ox - 1 + j;
                        if (iy >= 0 && iy < PH && ix >= 0 && ix < PH)
                            s += xc[iy * PH + ix];
                    }
                }
                w_ya1[(c * 5 + oy) * 5 + ox] = s / (float)(count_y * count_x);
            }
    }
    for (int c = 0; c < RC; c++) {
        const float *xc = p_xb + c * RH * RW;
        for (int oy = 0; oy < 2 * RH; oy++)
            for (int ox = 0; ox < 2 * RW; ox++) {
                w_yb0[(c * 2 * RH + oy) * 2 * RW + ox] = xc[(oy / 2) * RW + ox / 2];
                int y1, y2, x1, x2;
                float wy1, wy2, wx1, wx2;
                taps2(oy, RH, &y1, &y2, &wy1, &wy2);
                taps2(ox, RW, &x1, &x2, &wx1, &wx2);
                float top = wx1 * xc[y1 * RW + x1] + wx2 * xc[y1 * RW + x2];
                float bottom = wx1 * xc[y2 * RW + x1] + wx2 * xc[y2 * RW + x2];
                w_yb1[(c * 2 * RH + oy) * 2 * RW + ox] = wy1 * top + wy2 * bottom;
            }
    }
    for (int i = 0; i < RC * RH * RW; i++) {
        float t = 0.2f * p_xb[i];
        w_yb2[i] = clamp01(t + 0.5f);
    }
}

static uint8_t *build_pool_program(size_t *size)
{
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(1, PC, PH, PH));
    uint32_t ya0 = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(1, PC, 1, 1));
    uint32_t ya1 = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(1, PC, 5, 5));
    uint32_t s1 = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(1, PC, PH, PH));
    uint32_t s2 = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(1, PC, PH, PH));
    const int32_t p1[4] = {1, 1, 1, 1}, p0[4] = {1, 1, 0, 0}, s11[2] = {1, 1}, s22[2] = {2, 2}, k3[2] = {3, 3},
                  k2[2] = {2, 2};
    hfxb_pool(&b, HFX_TASK_A, HFX_OP_MAXPOOL, x, s1, p1, s11, s11, k3, 0, 0);
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_HARDSWISH, s1, s2);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_GLOBAL_AVGPOOL, HFX_ENGINE_VECTOR, 1, &s2, ya0, NULL);
    hfxb_pool(&b, HFX_TASK_A, HFX_OP_AVGPOOL, x, ya1, p0, s22, s11, k2, 1, 1);
    uint32_t xb = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(1, RC, RH, RW));
    uint32_t yb0 = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, RC, 2 * RH, 2 * RW));
    uint32_t yb1 = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, RC, 2 * RH, 2 * RW));
    uint32_t yb2 = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, RC, RH, RW));
    hfxb_resize(&b, HFX_TASK_B, xb, yb0, HFX_RESIZE_NEAREST, HFX_RESIZE_COORD_ASYMMETRIC, HFX_RESIZE_NEAREST_FLOOR,
                2.0f, 2.0f);
    hfxb_resize(&b, HFX_TASK_B, xb, yb1, HFX_RESIZE_LINEAR, HFX_RESIZE_COORD_HALF_PIXEL, 0, 2.0f, 2.0f);
    hfxb_hardsigmoid(&b, HFX_TASK_B, xb, yb2, 0.2f, 0.5f);
    uint8_t *bytes = hfxb_encode(&b, size);
    hfxb_free(&b);
    return bytes;
}

static int close_to(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++) {
        float d = got[i] - want[i], m = want[i] < 0.0f ? -want[i] : want[i];
        d = d < 0.0f ? -d : d;
        if (!(d <= 1e-5f * (m > 1.0f ? m : 1.0f)))
            return 0;
    }
    return 1;
}

static void test_pool_resize_program(hfx_pool *pool)
{
    char what[160];
    make_pool_data();
    size_t size = 0;
    uint8_t *bytes = build_pool_program(&size);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(bytes, size, &prog, &err);
    free(bytes);
    hx_snprintf(what, sizeof what, "pool/resize program parses: %s %s", hfx_status_name(st), st ? err.message : "");
    expect(st == HFX_OK, what);
    if (st != HFX_OK)
        return;
    const void *in[2] = {p_x, p_xb};
    void *out[5] = {p_ya0, p_ya1, p_yb0, p_yb1, p_yb2};
    hfx_run_result res;
    st = hfx_run(pool, prog, in, 2, out, 5, NULL, NULL, &res);
    hx_snprintf(what, sizeof what, "pool/resize run: %s", hfx_status_name(st));
    expect(st == HFX_OK && res.task_done[0] && res.task_done[1], what);
    expect(close_to(p_ya0, w_ya0, PC), "MaxPool 3x3 -> HardSwish -> GlobalAveragePool within 1e-5");
    expect(close_to(p_ya1, w_ya1, PC * 25), "AveragePool 2x2 s2 ceil_mode count_include_pad within 1e-5");
    expect(memcmp(p_yb0, w_yb0, sizeof w_yb0) == 0, "Resize nearest x2 bit-exact");
    expect(memcmp(p_yb1, w_yb1, sizeof w_yb1) == 0, "Resize linear x2 (half_pixel) bit-exact");
    expect(close_to(p_yb2, w_yb2, RC * RH * RW), "HardSigmoid within 1e-5");
    hfx_program_free(prog);
}

/* ---- ReduceSum / ReduceMean over every axes mask of a rank-4 tensor ---- */

#define RD0 2
#define RD1 5
#define RD2 6
#define RD3 4
#define RDN (RD0 * RD1 * RD2 * RD3)
static float r_x[RDN], r_y[RDN], r_want[RDN];

/* plain C: y at the kept axes' index = sum over the reduced axes (integers: exact in any order).
 * Each output is gathered in a register: the scatter form (sum[q] += x[i] over a double array)
 * gave wrong sums for masks 8-11 under qemu-hexagon 7.2 only, as clang-19 -O2 inlined it here: a
 * packet's slot-0 load missed its slot-1 store (dsp/HEXAGON.md, "qemu 7.2 and 10"). */
static void reduce_want(uint32_t mask, int mean)
{
    const uint32_t d[4] = {RD0, RD1, RD2, RD3};
    static uint32_t out_of[RDN]; /* the output index of each input element */
    uint32_t count = 1;
    for (int a = 0; a < 4; a++)
        if (mask & (1u << a)) count *= d[a];
    for (uint32_t i = 0; i < RDN; i++) {
        uint32_t rem = i, q = 0, scale = 1, idx[4];
        for (int a = 3; a >= 0; a--) idx[a] = rem % d[a], rem /= d[a];
        for (int a = 3; a >= 0; a--)
            if (!(mask & (1u << a))) q += idx[a] * scale, scale *= d[a];
        out_of[i] = q;
    }
    for (uint32_t q = 0; q < RDN / count; q++) {
        double sum = 0.0;
        for (uint32_t i = 0; i < RDN; i++)
            if (out_of[i] == q) sum += (double)r_x[i];
        r_want[q] = mean ? (float)(sum / (double)count) : (float)sum;
    }
}

/* the non-trailing masks once ran forever on Hexagon (the odometer loop as clang-19 compiled it) */
static void test_reduce_program(hfx_pool *pool)
{
    char what[96];
    const uint32_t d[4] = {RD0, RD1, RD2, RD3};
    for (uint32_t i = 0; i < RDN; i++) r_x[i] = (float)((int)((i * 37u) % 19u) - 9);
    for (uint32_t mask = 1; mask < 16; mask++)
        for (int mean = 0; mean < 2; mean++) {
            uint32_t od[4] = {1, 1, 1, 1}, on = 1;
            for (int a = 0; a < 4; a++)
                if (!(mask & (1u << a))) od[a] = d[a], on *= d[a];
            hfxb b;
            hfxb_init(&b);
            uint32_t x = hfxb_input(&b, HFX_TASK_A, 4, d), y = hfxb_output(&b, HFX_TASK_A, 4, od);
            hfxb_reduce(&b, HFX_TASK_A, mean ? HFX_OP_REDUCE_MEAN : HFX_OP_REDUCE_SUM, x, y, mask, 1);
            hfx_program *prog = NULL;
            hfx_error err;
            hfx_status st = parse_built(&b, &prog, &err);
            const void *in[1] = {r_x};
            void *out[1] = {r_y};
            st = st ? st : hfx_run(pool, prog, in, 1, out, 1, NULL, NULL, NULL);
            reduce_want(mask, mean);
            hx_snprintf(what, sizeof what, "Reduce%s axes mask %u: %s, bit-exact", mean ? "Mean" : "Sum",
                        (unsigned)mask, hfx_status_name(st));
            expect(st == HFX_OK && memcmp(r_y, r_want, on * sizeof(float)) == 0, what);
            hfx_program_free(prog);
        }
}

/* ReduceMax / ReduceMin over every axes mask (bit-exact: a max does not depend on the order), Log of
 * every power of two (k ln 2 within 1e-6) and its special values, in one program per mask */
static void extreme_want(uint32_t mask, int max)
{
    const uint32_t d[4] = {RD0, RD1, RD2, RD3};
    for (uint32_t q = 0; q < RDN; q++) r_want[q] = max ? -1e30f : 1e30f;
    for (uint32_t i = 0; i < RDN; i++) {
        uint32_t rem = i, q = 0, scale = 1, idx[4];
        for (int a = 3; a >= 0; a--) idx[a] = rem % d[a], rem /= d[a];
        for (int a = 3; a >= 0; a--)
            if (!(mask & (1u << a))) q += idx[a] * scale, scale *= d[a];
        if (max ? r_x[i] > r_want[q] : r_x[i] < r_want[q]) r_want[q] = r_x[i];
    }
}

static void test_reduce_extreme_program(hfx_pool *pool)
{
    char what[96];
    const uint32_t d[4] = {RD0, RD1, RD2, RD3};
    for (uint32_t i = 0; i < RDN; i++) r_x[i] = (float)((int)((i * 53u) % 23u) - 11) * 0.37f;
    int ok = 1;
    for (uint32_t mask = 1; mask < 16; mask++)
        for (int max = 0; max < 2; max++) {
            uint32_t od[4] = {1, 1, 1, 1}, on = 1;
            for (int a = 0; a < 4; a++)
                if (!(mask & (1u << a))) od[a] = d[a], on *= d[a];
            hfxb b;
            hfxb_init(&b);
            uint32_t x = hfxb_input(&b, HFX_TASK_A, 4, d), y = hfxb_output(&b, HFX_TASK_A, 4, od);
            hfxb_reduce(&b, HFX_TASK_A, max ? HFX_OP_REDUCE_MAX : HFX_OP_REDUCE_MIN, x, y, mask, 1);
            hfx_program *prog = NULL;
            hfx_error err;
            hfx_status st = parse_built(&b, &prog, &err);
            const void *in[1] = {r_x};
            void *out[1] = {r_y};
            st = st ? st : hfx_run(pool, prog, in, 1, out, 1, NULL, NULL, NULL);
            extreme_want(mask, max);
            if (st != HFX_OK || memcmp(r_y, r_want, on * sizeof(float)) != 0) {
                hx_snprintf(what, sizeof what, "Reduce%s axes mask %u: %s", max ? "Max" : "Min", (unsigned)mask,
                            hfx_status_name(st));
                expect(0, what);
                ok = 0;
            }
            hfx_program_free(prog);
        }
    expect(ok, "ReduceMax / ReduceMin over every axes mask bit-exact");
}

#define LOGN 290
static float l_x[LOGN], l_y[LOGN];

static void test_log_program(hfx_pool *pool)
{
    /* 2^k for k = -149 .. 127 (denormals included), then 1, 0, -0, -1, +inf, NaN */
    for (int k = -149; k <= 127; k++) {
        int32_t bits = k >= -126 ? (k + 127) << 23 : 1 << (k + 149);
        l_x[k + 149] = hfxb_f(bits);
    }
    const float special[] = {1.0f, 0.0f, hfxb_f((int32_t)0x80000000), -1.0f, hfxb_f(0x7f800000), hfxb_f(0x7fc00000)};
    for (int i = 0; i < 6; i++) l_x[277 + i] = special[i];
    for (int i = 283; i < LOGN; i++) l_x[i] = 1.0f;
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(LOGN)), y = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(LOGN));
    hfxb_unary(&b, HFX_TASK_B, HFX_OP_LOG, x, y);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[1] = {l_x};
    void *out[1] = {l_y};
    st = st ? st : hfx_run(pool, prog, in, 1, out, 1, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    for (int k = -149; ok && k <= 127; k++) {
        float want = (float)k * 0.693147180559945f, got = l_y[k + 149], diff = got - want;
        ok = (diff < 0 ? -diff : diff) <= 1e-6f * (want < 0 ? -want : want);
        if (!ok) hx_printf("Log(2^%d) = %g, want %g\n", k, (double)got, (double)want);
    }
    ok = ok && l_y[277] == 0.0f && l_y[278] == hfxb_f((int32_t)0xff800000) && l_y[279] == l_y[278];
    ok = ok && l_y[280] != l_y[280] && l_y[281] == hfxb_f(0x7f800000) && l_y[282] != l_y[282];
    expect(ok, "Log of 2^-149 .. 2^127 within 1e-6 of k ln 2; log 1 = 0, log +-0 = -inf, log -1 and NaN = NaN");
    hfx_program_free(prog);
}

/* Sin, Cos and InstanceNormalization give the host kernel's bits, which are ONNX Runtime's on x86-64 (its
 * Eigen order: src/ops/eigen_math.h, norm.c): the tables are ORT's outputs for these inputs (16 elements: no
 * scalar tail; the InstanceNormalization rows of 7 start at a 16-byte boundary and 12 bytes past one) */
#define SCN 16
static const uint32_t sc_x_bits[SCN] = {
    0x00000000u, 0x80000000u, 0x3f000000u, 0xbfc90fdbu, 0x40490fdbu, 0x40c90fdbu, 0x41200000u, 0xc2c80000u,
    0x44fa0000u, 0x46932e00u, 0x46932e66u, 0x46cadc00u, 0xc6cadc66u, 0x49742400u, 0x7149f2cau, 0xff7fc99eu};
static const uint32_t sc_sin_bits[SCN] = {
    0x00000000u, 0x80000000u, 0x3ef57744u, 0xbf800000u, 0xb3bbbd2eu, 0x343bbd2eu, 0xbf0b44f7u,
    0x3f01a12eu, 0x3f6e1712u, 0x3f67a77fu, 0x3f4d8248u, 0xbf2bff10u, 0x3f4e1ea4u, 0xbeb3325au,
    0xbf4a89b0u, 0x3e79f162u};
static const uint32_t sc_cos_bits[SCN] = {
    0x3f800000u, 0x3f800000u, 0x3f60a940u, 0xb33bbd2eu, 0xbf800000u, 0x3f800000u, 0xbf56cd64u,
    0x3f5cc0eeu, 0xbebc23a8u, 0xbed9eb8eu, 0xbf18a674u, 0xbf3d9d0bu, 0xbf17d312u, 0x3f6fcefdu,
    0xbf1c9221u, 0x3f7841cau};
static const float in_x[14] = {0.5f, -1.25f, 3.0f, 2.5f, -0.75f, 1.0f, 4.0f, -2.0f, 0.25f, 1.5f, -3.5f, 2.0f, 0.125f, -1.0f};
static const float in_scale[2] = {1.5f, -0.5f}, in_bias[2] = {0.25f, 2.0f};
static const uint32_t in_y_bits[14] = {
    0xbecc82a1u, 0xbfec467du, 0x3fd55e87u, 0x3fa0784bu, 0xbfb76040u, 0x3c62ca40u, 0x401f9580u,
    0x401cf1a6u, 0x3fe9bc46u, 0x3fbd34d1u, 0x4037a952u, 0x3fab6508u, 0x3fee3038u, 0x400b21ddu};
static float sc_in[SCN], sc_sin[SCN], sc_cos[SCN], in_y[14];

static void test_ort_float_ops_program(hfx_pool *pool)
{
    for (int i = 0; i < SCN; i++) sc_in[i] = hfxb_f((int32_t)sc_x_bits[i]);
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(SCN));
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_SIN, x, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(SCN)));
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_COS, x, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(SCN)));
    uint32_t ix = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(1, 2, 7)), iy = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, 2, 7));
    uint32_t sc = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(2), in_scale), bi = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(2), in_bias);
    hfxb_norm(&b, HFX_TASK_B, HFX_OP_INSTANCENORM, ix, sc, bi, iy, 2, 1e-5f);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[2] = {sc_in, in_x};
    void *out[3] = {sc_sin, sc_cos, in_y};
    st = st ? st : hfx_run(pool, prog, in, 2, out, 3, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    for (int i = 0; ok && i < SCN; i++) {
        ok = hfxb_bits(sc_sin[i]) == (int32_t)sc_sin_bits[i] && hfxb_bits(sc_cos[i]) == (int32_t)sc_cos_bits[i];
        if (!ok) hx_printf("sin/cos of %g: %g %g, want %g %g\n", (double)sc_in[i], (double)sc_sin[i], (double)sc_cos[i],
                           (double)hfxb_f((int32_t)sc_sin_bits[i]), (double)hfxb_f((int32_t)sc_cos_bits[i]));
    }
    for (int i = 0; ok && i < 14; i++) ok = hfxb_bits(in_y[i]) == (int32_t)in_y_bits[i];
    expect(ok, "Sin, Cos (16 values up to 3.4e38) and InstanceNormalization (rows of 7) give ORT's bits");
    hfx_program_free(prog);
}

/* DynamicQuantizeLinear as the lowering emits it (DYNAMIC_QPARAMS, then QUANTIZE_LINEAR reading its
 * outputs) and IMATMUL (MatMulInteger), bit for bit against ref_quant.h / ref_qmatmul.h */
#define DQN 1031
#define IMM 5
#define IMK 67
#define IMN 19
static float dq_x[DQN], dq_s;
static uint8_t dq_y[DQN], dq_z[4], im_a[IMM * IMK], im_b[IMK * IMN], im_zb[IMN];
static int32_t im_y[IMM * IMN], im_ai[IMM * IMK], im_bi[IMK * IMN];

static void test_dynamic_quant_program(hfx_pool *pool)
{
    qt_rng r = {99};
    for (int i = 0; i < DQN; i++) dq_x[i] = (float)qt_range(&r, -30000, 50000) / 4096.0f;
    dq_x[5] = 0.5f * (float)qt_range(&r, 0, 8); /* halves: ties */
    for (int i = 0; i < IMM * IMK; i++) im_ai[i] = (int8_t)(im_a[i] = (uint8_t)qt_range(&r, 0, 255));
    for (int i = 0; i < IMK * IMN; i++) im_bi[i] = im_b[i] = (uint8_t)qt_range(&r, 0, 255);
    for (int i = 0; i < IMN; i++) im_zb[i] = (uint8_t)qt_range(&r, 0, 255);
    const int8_t za = -7;
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(DQN));
    uint32_t s = hfxb_output(&b, HFX_TASK_A, HFXB_SCALAR);
    uint32_t z = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_A, HFXB_SCALAR), HFX_DTYPE_U8);
    uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(DQN)), HFX_DTYPE_U8);
    uint32_t op = hfxb_op_add(&b, HFX_TASK_A, HFX_OP_DYNAMIC_QPARAMS, -1, 1, &x, s, NULL);
    b.o[op].nout = 2, b.o[op].out[1] = z;
    hfxb_quant(&b, HFX_TASK_A, HFX_OP_QUANTIZE_LINEAR, x, s, z, y, 0);
    uint32_t in[4];
    in[0] = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(IMM, IMK)), HFX_DTYPE_I8);
    in[1] = hfxb_set_dtype(&b, hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(IMK, IMN), (const float *)(const void *)im_b),
                           HFX_DTYPE_U8);
    in[2] = hfxb_set_dtype(&b, hfxb_const(&b, HFX_TASK_B, HFXB_SCALAR, (const float *)(const void *)&za), HFX_DTYPE_I8);
    in[3] = hfxb_set_dtype(&b, hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(IMN), (const float *)(const void *)im_zb),
                           HFX_DTYPE_U8);
    uint32_t acc = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(IMM, IMN)), HFX_DTYPE_I32);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_IMATMUL, -1, 4, in, acc, NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *ins[2] = {dq_x, im_a};
    void *outs[4] = {&dq_s, dq_z, dq_y, im_y};
    st = st ? st : hfx_run(pool, prog, ins, 2, outs, 4, NULL, NULL, NULL);
    expect(st == HFX_OK, "DynamicQuantizeLinear + MatMulInteger program runs");
    float ws;
    int32_t wz;
    ref_dynamic_qparams(dq_x, DQN, &ws, &wz);
    int ok = st == HFX_OK && memcmp(&dq_s, &ws, 4) == 0 && dq_z[0] == wz;
    for (int i = 0; ok && i < DQN; i++) ok = dq_y[i] == ref_quantize_linear(dq_x[i], ws, wz, 0, 255);
    expect(ok, "DynamicQuantizeLinear (DYNAMIC_QPARAMS + QUANTIZE_LINEAR) bit-exact against ref_quant.h");
    ok = st == HFX_OK;
    for (int i = 0; ok && i < IMM * IMN; i++)
        ok = im_y[i] == ref_qmatmul_acc(im_ai + (i / IMN) * IMK, im_bi, IMK, IMN, (uint32_t)(i % IMN), za,
                                        im_zb[i % IMN], 0);
    expect(ok, "MatMulInteger i8 x u8 (per-column zero points) -> i32 bit-exact against ref_qmatmul_acc");
    hfx_program_free(prog);
}


/* ---- integer ops of a dynamically quantised conv's bias chain (see the header) ---- */
#define IC_N 37
#define IC_C 7
#define IC_P (5 * 13)
static float ic_x[IC_N], ic_bias[IC_C];
static int32_t ic_yc[IC_N], ic_acc[IC_C * IC_P], ic_ys[IC_C * IC_P], ic_ym[IC_C * IC_P];
static int64_t ic_d[5], ic_i[4], ic_yg[4], ic_yd[5];

static void test_integer_program(hfx_pool *pool)
{
    static const float special[] = {__builtin_nanf(""), __builtin_inff(), -__builtin_inff(), 2.5f, -2.5f, -0.5f, 0.99f, 2147483520.0f,
                                    2147483648.0f, -2147483648.0f, -2147483904.0f, 3e9f, -0.0f};
    qt_rng r = {1234};
    for (int i = 0; i < IC_N; i++)
        ic_x[i] = i < 13 ? special[i] : (float)qt_range(&r, -2000000, 2000000) * (i % 2 ? 1500.0f : 0.001f);
    for (int i = 0; i < IC_C; i++) ic_bias[i] = (float)qt_range(&r, -300000, 300000) / 7.0f;
    ic_bias[0] = 3e9f, ic_bias[1] = -2147483520.0f; /* INT32_MIN; the Add wraps below it */
    for (int i = 0; i < IC_C * IC_P; i++)
        ic_acc[i] = i % 5 == 0 ? INT32_MIN + qt_range(&r, 0, 9) : (int32_t)qt_range(&r, -2000000, 2000000) * 1000;
    for (int i = 0; i < 5; i++) ic_d[i] = (int64_t)qt_range(&r, -50000, 50000) * 4000000000LL;
    ic_d[4] = INT64_MIN;
    ic_i[0] = -1, ic_i[1] = 4, ic_i[2] = -5, ic_i[3] = 5;
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(IC_N));
    uint32_t yc = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(IC_N)), HFX_DTYPE_I32);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_CAST, -1, 1, &x, yc, NULL);
    uint32_t bias = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(IC_C));
    uint32_t bi = hfxb_set_dtype(&b, hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(IC_C)), HFX_DTYPE_I32);
    uint32_t br = hfxb_set_dtype(&b, hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(1, IC_C, 1, 1)), HFX_DTYPE_I32);
    uint32_t acc = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(1, IC_C, 5, 13)), HFX_DTYPE_I32);
    uint32_t ys = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(1, IC_C, 5, 13)), HFX_DTYPE_I32);
    uint32_t ym = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(1, IC_C, 5, 13)), HFX_DTYPE_I32);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_CAST, -1, 1, &bias, bi, NULL);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_COPY, -1, 1, &bi, br, NULL);
    hfxb_binary(&b, HFX_TASK_A, HFX_OP_ADD, acc, br, ys);
    hfxb_binary(&b, HFX_TASK_A, HFX_OP_MUL, ys, ys, ym);
    uint32_t d = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(5)), HFX_DTYPE_I64);
    uint32_t ix = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(4)), HFX_DTYPE_I64);
    uint32_t d0 = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_SCALAR), HFX_DTYPE_I64);
    uint32_t yg = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(4)), HFX_DTYPE_I64);
    uint32_t yd = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(5)), HFX_DTYPE_I64);
    uint32_t gin[2] = {d, ix};
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_GATHER_ROWS, -1, 2, gin, yg, NULL);
    hfxb_binary(&b, HFX_TASK_B, HFX_OP_SUB, d, d0, yd);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *ins[6] = {ic_x, ic_bias, ic_acc, ic_d, ic_i, &ic_d[0]};
    void *outs[5] = {ic_yc, ic_ys, ic_ym, ic_yg, ic_yd};
    st = st ? st : hfx_run(pool, prog, ins, 6, outs, 5, NULL, NULL, NULL);
    expect(st == HFX_OK, "integer bias-chain program runs");
    int ok = st == HFX_OK;
    for (int i = 0; ok && i < IC_N; i++) ok = ic_yc[i] == ref_cast_f32_i32(ic_x[i]);
    expect(ok && ic_yc[0] == INT32_MIN && ic_yc[4] == -2 && ic_yc[8] == INT32_MIN && ic_yc[7] == 2147483520,
           "Cast f32 -> i32 bit-exact against ref_cast_f32_i32 (NaN, inf, out of range: INT32_MIN)");
    ok = st == HFX_OK;
    for (int i = 0; ok && i < IC_C * IC_P; i++) {
        uint32_t s = (uint32_t)ic_acc[i] + (uint32_t)ref_cast_f32_i32(ic_bias[i / IC_P]);
        ok = ic_ys[i] == (int32_t)s && ic_ym[i] == (int32_t)(s * s);
    }
    expect(ok, "i32 Add of the reshaped bias (broadcast, wrapping) and i32 Mul bit-exact");
    ok = st == HFX_OK && ic_yg[0] == ic_d[4] && ic_yg[1] == ic_d[4] && ic_yg[2] == ic_d[0] && ic_yg[3] == 0;
    for (int i = 0; ok && i < 5; i++) ok = ic_yd[i] == (int64_t)((uint64_t)ic_d[i] - (uint64_t)ic_d[0]);
    expect(ok, "i64 GatherRows (negative indices, out of range: zeros) and i64 Sub (wrapping) bit-exact");
    hfx_program_free(prog);
}

/* Mod on Hexagon (no libm, soft 64-bit division): DIV FMOD of f32 (exponent gaps up to 2^253, subnormals, a zero
 * divisor, +-inf) gives the bits of x86-64 glibc's fmodf (the tables: numpy's fmod there); DIV MOD of i64 the
 * divisor's sign (a zero divisor 0, INT64_MIN mod -1 0); CAST i64 -> f32 rounds to nearest, ties to even */
#define MDN 16
static const uint32_t md_x_bits[MDN] = {
    0x40e00000u, 0xc0e00000u, 0x40e00000u, 0x40b00000u, 0x80000000u, 0x00000001u, 0x7f7fc99eu, 0xff7fc99eu,
    0x3f800000u, 0x7f800000u, 0x40000000u, 0x7149f2cau, 0x3dcccccdu, 0x47f12065u, 0x00800000u, 0x40400000u};
static const uint32_t md_y_bits[MDN] = {
    0x40400000u, 0x40400000u, 0xc0400000u, 0x3dcccccdu, 0x3f800000u, 0x40400000u, 0x00000001u, 0x004c3927u,
    0x00000000u, 0x40000000u, 0x7f800000u, 0x0133ab49u, 0x3cf5c28fu, 0xba83126fu, 0x00000001u, 0x3fc00000u};
static const uint32_t md_r_bits[MDN] = {
    0x3f800000u, 0xbf800000u, 0x3f800000u, 0x3dccccc2u, 0x80000000u, 0x00000001u, 0x00000000u, 0x80163d68u,
    0xffc00000u, 0xffc00000u, 0x40000000u, 0x00bcd3d8u, 0x3c23d70eu, 0x395043f8u, 0x00000000u, 0x00000000u};
static const int64_t md_a[8] = {-7, 7, -9, INT64_MIN, INT64_MAX, (1LL << 62) + 3, 0, -1};
static const int64_t md_b[8] = {4, -4, 0, -1, 3, 160, 5, 2};
static const int64_t md_mod[8] = {1, -1, 0, 0, 1, 67, 0, 1};
static const int64_t md_c[8] = {(1 << 24) + 1, (1 << 24) + 3, (1LL << 62) + 3, INT64_MIN, INT64_MAX,
                                -(1LL << 53) - 1, 12345, -3};
static const uint32_t md_c_bits[8] = {0x4b800000u, 0x4b800002u, 0x5e800000u, 0xdf000000u,
                                      0x5f000000u, 0xda000000u, 0x4640e400u, 0xc0400000u};
static float md_x[MDN], md_y[MDN], md_r[MDN], md_cf[8];
static int64_t md_m[8];

static void test_mod_program(hfx_pool *pool)
{
    for (int i = 0; i < MDN; i++) md_x[i] = hfxb_f((int32_t)md_x_bits[i]), md_y[i] = hfxb_f((int32_t)md_y_bits[i]);
    hfxb b;
    hfxb_init(&b);
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_DIV_MODE] = HFX_DIV_FMOD;
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(MDN)), y = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(MDN));
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_DIV, -1, 2, (const uint32_t[]){x, y}, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(MDN)), p);
    uint32_t a = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(8)), HFX_DTYPE_I64);
    uint32_t d = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(8)), HFX_DTYPE_I64);
    uint32_t c = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(8)), HFX_DTYPE_I64);
    p[HFX_P_DIV_MODE] = HFX_DIV_MOD;
    uint32_t m = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(8)), HFX_DTYPE_I64);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_DIV, -1, 2, (const uint32_t[]){a, d}, m, p);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_CAST, -1, 1, &c, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(8)), NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[5] = {md_x, md_y, md_a, md_b, md_c};
    void *out[3] = {md_r, md_m, md_cf};
    st = st ? st : hfx_run(pool, prog, in, 5, out, 3, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    for (int i = 0; ok && i < MDN; i++) {
        ok = hfxb_bits(md_r[i]) == (int32_t)md_r_bits[i];
        if (!ok) hx_printf("fmod %d: %08x, want %08x\n", i, (unsigned)hfxb_bits(md_r[i]), (unsigned)md_r_bits[i]);
    }
    for (int i = 0; ok && i < 8; i++) ok = md_m[i] == md_mod[i] && hfxb_bits(md_cf[i]) == (int32_t)md_c_bits[i];
    expect(ok, "Mod: f32 fmod as glibc's, i64 mod with the divisor's sign, i64 -> f32 Cast to nearest");
    hfx_program_free(prog);
}

/* ArgMax / ArgMin on Hexagon: A an ArgMax of f32 rows (ties: the first; a NaN first in its row: 0, a NaN later
 * passed over), B an ArgMin of i64 down the columns with select_last_index (ties: the last), written by hand */
static const float am_x[3][5] = {
    {1.0f, 7.0f, 7.0f, -2.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 3.0f, 9.0f, 1.0f, 9.0f}};
static const int64_t am_want_a[3] = {1, 0, 0};
static const int64_t am_y[3][4] = {{5, -(1LL << 40), 2, 8}, {5, 7, 2, -8}, {-1, -(1LL << 40), 9, 8}};
static const int64_t am_want_b[4] = {2, 2, 1, 1};
static float am_xn[3][5];
static int64_t am_a[3], am_b[4];

static void test_arg_program(hfx_pool *pool)
{
    memcpy(am_xn, am_x, sizeof am_xn);
    am_xn[1][3] = hfxb_f(0x7fc00000); /* passed over: row 1 stays 0 */
    am_xn[2][0] = hfxb_f(0x7fc00000); /* first: row 2 gives 0 */
    hfxb b;
    hfxb_init(&b);
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_ARG_AXIS] = -1;
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(3, 5));
    uint32_t ya = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(3)), HFX_DTYPE_I64);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_ARGMAX, -1, 1, &x, ya, p);
    p[HFX_P_ARG_AXIS] = 0;
    p[HFX_P_ARG_KEEPDIMS] = 1;
    p[HFX_P_ARG_SELECT_LAST] = 1;
    uint32_t y = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(3, 4)), HFX_DTYPE_I64);
    uint32_t yb = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, 4)), HFX_DTYPE_I64);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_ARGMIN, -1, 1, &y, yb, p);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[2] = {am_xn, am_y};
    void *out[2] = {am_a, am_b};
    st = st ? st : hfx_run(pool, prog, in, 2, out, 2, NULL, NULL, NULL);
    int ok = st == HFX_OK && memcmp(am_a, am_want_a, sizeof am_a) == 0 && memcmp(am_b, am_want_b, sizeof am_b) == 0;
    expect(ok, "ArgMax of f32 (ties first, NaN first: 0, NaN later passed over), ArgMin of i64 (select_last_index)");
    hfx_program_free(prog);
}

/* LogSoftmax on Hexagon: A along the last axis of X [3, 9] (equal values: -log 9 each; one 0 among -inf: 0 there
 * and -inf elsewhere; all -inf: NaN, as ONNX Runtime), B along axis 0 of Y [4, 3] (strided; equal columns: -log 4) */
static float ls_x[3][9], ls_y[4][3], ls_a[3][9], ls_b[4][3];

static void test_log_softmax_program(hfx_pool *pool)
{
    for (int k = 0; k < 9; k++) ls_x[0][k] = 1.5f, ls_x[1][k] = ls_x[2][k] = hfxb_f((int32_t)0xff800000);
    ls_x[1][4] = 0.0f;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) ls_y[r][c] = (float)c * 7.0f - 3.0f;
    hfxb b;
    hfxb_init(&b);
    int32_t p[HFX_OP_PARAMS] = {-1};
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(3, 9)), ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(3, 9));
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_LOG_SOFTMAX, -1, 1, &x, ya, p);
    p[HFX_P_AXIS] = 0;
    uint32_t y = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(4, 3)), yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(4, 3));
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_LOG_SOFTMAX, -1, 1, &y, yb, p);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[2] = {ls_x, ls_y};
    void *out[2] = {ls_a, ls_b};
    st = st ? st : hfx_run(pool, prog, in, 2, out, 2, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    const float ln9 = 2.19722458f, ln4 = 1.38629436f, ninf = hfxb_f((int32_t)0xff800000);
    for (int k = 0; k < 9; k++) {
        float d = ls_a[0][k] + ln9;
        ok = ok && (d < 0 ? -d : d) <= 1e-6f * ln9 && ls_a[1][k] == (k == 4 ? 0.0f : ninf) && ls_a[2][k] != ls_a[2][k];
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) {
            float d = ls_b[r][c] + ln4;
            ok = ok && (d < 0 ? -d : d) <= 1e-6f * ln4;
        }
    expect(ok, "LogSoftmax along the last axis (equal values, one 0 among -inf, all -inf: NaN) and along axis 0");
    hfx_program_free(prog);
}

/* Softplus and Round on Hexagon (task A, one input into two outputs; Round's ties to even and -0 bit for bit) and
 * GlobalMaxPool (task B, [1, 2, 9]: channel 0's NaN at 7, the last of its last whole block of 4, survives as in
 * ONNX Runtime's MLAS; channel 1's at 2 is passed over) */
static float sr_x[10] = {-0.5f, 0.5f, 1.5f, 2.5f, -2.5f, -0.3f, 0.0f, 20.0f, -20.0f, 3.7f}, sr_sp[10], sr_rd[10];
static const float sr_want_sp[10] = {0.474076984f, 0.974076984f, 1.70141328f, 2.57888973f, 0.0788897343f,
                                     0.554355244f, 0.693147181f, 20.0f,       2.06115362e-09f, 3.72442285f};
static const float sr_want_rd[10] = {-0.0f, 0.0f, 2.0f, 2.0f, -2.0f, -0.0f, 0.0f, 20.0f, -20.0f, 4.0f};
static float gm_x[2][9] = {{1, 2, 3, 4, 5, 6, 7, 0, 8}, {1, 2, 0, 4, 9, 6, 7, 8, 3}}, gm_y[2];

static void test_softplus_round_maxpool_program(hfx_pool *pool)
{
    gm_x[0][7] = gm_x[1][2] = hfxb_f(0x7fc00000);
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(10));
    uint32_t sp = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(10)), rd = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(10));
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_SOFTPLUS, -1, 1, &x, sp, NULL);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_ROUND, -1, 1, &x, rd, NULL);
    uint32_t g = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(1, 2, 9)), gy = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, 2, 1));
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_GLOBAL_MAXPOOL, -1, 1, &g, gy, NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[2] = {sr_x, gm_x};
    void *out[3] = {sr_sp, sr_rd, gm_y};
    st = st ? st : hfx_run(pool, prog, in, 2, out, 3, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    for (int k = 0; k < 10; k++) {
        float d = sr_sp[k] - sr_want_sp[k];
        ok = ok && (d < 0 ? -d : d) <= 2e-6f * sr_want_sp[k];
    }
    expect(ok, "Softplus within 2e-6 of double");
    expect(st == HFX_OK && memcmp(sr_rd, sr_want_rd, sizeof sr_rd) == 0, "Round: ties to even, -0 kept");
    expect(st == HFX_OK && gm_y[0] != gm_y[0] && gm_y[1] == 9.0f, "GlobalMaxPool: MLAS's surviving NaN lane");
    hfx_program_free(prog);
}

/* Expand on Hexagon: A broadcasts X [1, 3] to [4, 3] (rows repeated), B fills [2, 70] from a constant scalar
 * (ConstantOfShape: one element repeated in doubling copies) */
static float ex_x[3] = {1.5f, -2.0f, 3.25f}, ex_fill[1] = {-0.5f}, ex_a[4][3], ex_b[2][70];

static void test_expand_program(hfx_pool *pool)
{
    hfxb b;
    hfxb_init(&b);
    uint32_t zero[1] = {0};
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(1, 3)), ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4, 3));
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_EXPAND, -1, 1, &x, ya, NULL);
    uint32_t c = hfxb_const(&b, HFX_TASK_B, 0, zero, ex_fill), yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(2, 70));
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_EXPAND, -1, 1, &c, yb, NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[1] = {ex_x};
    void *out[2] = {ex_a, ex_b};
    st = st ? st : hfx_run(pool, prog, in, 1, out, 2, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 3; k++) ok = ok && ex_a[r][k] == ex_x[k];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 70; k++) ok = ok && ex_b[r][k] == -0.5f;
    expect(ok, "Expand of a row to [4, 3] and of a constant scalar to [2, 70]");
    hfx_program_free(prog);
}

/* Range on Hexagon: A makes 0.5, 0.6, ... (f32, a running sum: each value the last plus 0.1) from constants, B makes
 * -5, -2, 1, ... (i64) from its inputs */
static float rg_fs[1] = {0.5f}, rg_fd[1] = {0.1f}, rg_a[300];
static int64_t rg_is = -5, rg_id = 3, rg_b[70];

static void test_range_program(hfx_pool *pool)
{
    hfxb b;
    hfxb_init(&b);
    b.v2 = 1;
    uint32_t ia[2] = {hfxb_const(&b, HFX_TASK_A, HFXB_SCALAR, rg_fs), hfxb_const(&b, HFX_TASK_A, HFXB_SCALAR, rg_fd)};
    uint32_t ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(300));
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_RANGE, -1, 2, ia, ya, NULL);
    uint32_t ib[2];
    for (int k = 0; k < 2; k++) ib[k] = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_B, HFXB_SCALAR), HFX_DTYPE_I64);
    uint32_t yb = hfxb_set_dtype(&b, hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(70)), HFX_DTYPE_I64);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_RANGE, -1, 2, ib, yb, NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[2] = {&rg_is, &rg_id};
    void *out[2] = {rg_a, rg_b};
    st = st ? st : hfx_run(pool, prog, in, 2, out, 2, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    float value = 0.5f;
    for (int i = 0; i < 300; i++, value += 0.1f) ok = ok && rg_a[i] == value;
    for (int i = 0; i < 70; i++) ok = ok && rg_b[i] == -5 + 3 * (int64_t)i;
    expect(ok, "Range of f32 constants (a running sum) and of i64 inputs");
    hfx_program_free(prog);
}

/* Trilu on Hexagon: A keeps the upper triangle above the diagonal of [5, 7] (k = 1: a causal mask), B the lower
 * triangle of [2, 4, 3] with its diagonal (k = 0) */
static float tr_a_in[5][7], tr_b_in[2][4][3], tr_a[5][7], tr_b[2][4][3];

static void test_trilu_program(hfx_pool *pool)
{
    for (int i = 0; i < 35; i++) tr_a_in[i / 7][i % 7] = (float)(i + 1);
    for (int i = 0; i < 24; i++) tr_b_in[i / 12][i / 3 % 4][i % 3] = (float)-(i + 1);
    hfxb b;
    hfxb_init(&b);
    int32_t pa[HFX_OP_PARAMS] = {0}, pb[HFX_OP_PARAMS] = {0};
    pa[HFX_P_TRILU_K] = 1, pa[HFX_P_TRILU_UPPER] = 1;
    uint32_t xa = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(5, 7)), ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(5, 7));
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_TRILU, -1, 1, &xa, ya, pa);
    uint32_t xb = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(2, 4, 3)), yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(2, 4, 3));
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_TRILU, -1, 1, &xb, yb, pb);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    const void *in[2] = {tr_a_in, tr_b_in};
    void *out[2] = {tr_a, tr_b};
    st = st ? st : hfx_run(pool, prog, in, 2, out, 2, NULL, NULL, NULL);
    int ok = st == HFX_OK;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 7; j++) ok = ok && tr_a[i][j] == (j - i >= 1 ? tr_a_in[i][j] : 0.0f);
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) ok = ok && tr_b[m][i][j] == (j <= i ? tr_b_in[m][i][j] : 0.0f);
    expect(ok, "Trilu: the upper triangle above the diagonal of [5, 7], the lower one of [2, 4, 3]");
    hfx_program_free(prog);
}

#define QR 3
#define QC 37
static float q_x[QR * QC], q_da[QR * QC];
static uint8_t q_qa[QR * QC];
static int8_t q_qb[QR * QC];

static void test_quant_program(hfx_pool *pool)
{
    static const float scale_a[1] = {0.5f}, scale_b[QR] = {0.5f, 0.0371f, 1.75f};
    static const uint8_t zp_a[1] = {7};
    static const int8_t zp_b[QR] = {0, -100, 3};
    const float special[] = {0.25f, 0.75f, -0.25f, -3.75f, 1e30f, -1e30f, hfxb_f(0x7f800000), hfxb_f((int32_t)0xff800000),
                             hfxb_f(0x7fc00000), 63.75f, -64.25f};
    qt_rng r = {777};
    for (int i = 0; i < QR * QC; i++)
        q_x[i] = i < 11 ? special[i] : (float)qt_range(&r, -40000, 40000) / 97.0f;
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(QR, QC)), xb = hfxb_input(&b, 1, HFXB_DIMS(QR, QC));
    uint32_t sa = hfxb_const(&b, 0, HFXB_SCALAR, scale_a);
    uint32_t za = hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_SCALAR, (const float *)(const void *)zp_a), HFX_DTYPE_U8);
    uint32_t qa = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(QR, QC)), HFX_DTYPE_U8);
    uint32_t da = hfxb_output(&b, 0, HFXB_DIMS(QR, QC));
    hfxb_quant(&b, 0, HFX_OP_QUANTIZE_LINEAR, x, sa, za, qa, 0);
    hfxb_quant(&b, 0, HFX_OP_DEQUANTIZE_LINEAR, qa, sa, za, da, 0);
    uint32_t sb = hfxb_const(&b, 1, HFXB_DIMS(QR), scale_b);
    uint32_t zb = hfxb_set_dtype(&b, hfxb_const(&b, 1, HFXB_DIMS(QR), (const float *)(const void *)zp_b), HFX_DTYPE_I8);
    uint32_t qb = hfxb_set_dtype(&b, hfxb_output(&b, 1, HFXB_DIMS(QR, QC)), HFX_DTYPE_I8);
    hfxb_quant(&b, 1, HFX_OP_QUANTIZE_LINEAR, xb, sb, zb, qb, 0);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    expect(st == HFX_OK, "quant program parses");
    if (st != HFX_OK)
        return;
    const void *in[2] = {q_x, q_x};
    void *out[3] = {q_qa, q_da, q_qb};
    hfx_run_result res;
    st = hfx_run(pool, prog, in, 2, out, 3, NULL, NULL, &res);
    expect(st == HFX_OK, "quant program runs");
    int qa_ok = 1, da_ok = 1, qb_ok = 1;
    for (int i = 0; i < QR * QC; i++) {
        int32_t wa = ref_quantize_linear(q_x[i], scale_a[0], zp_a[0], 0, 255);
        float wd = ref_dequantize_linear(wa, scale_a[0], zp_a[0]);
        int32_t wb = ref_quantize_linear(q_x[i], scale_b[i / QC], zp_b[i / QC], -128, 127);
        qa_ok &= q_qa[i] == wa;
        da_ok &= memcmp(&q_da[i], &wd, 4) == 0;
        qb_ok &= q_qb[i] == wb;
    }
    expect(qa_ok, "QuantizeLinear u8 per tensor bit-exact (ties, saturation, inf, NaN)");
    expect(da_ok, "DequantizeLinear u8 bit-exact");
    expect(qb_ok, "QuantizeLinear i8 per axis bit-exact");
    hfx_program_free(prog);
}

/* 16-bit types need a version 2 program: u16 per tensor (Q, then DQ of the result) in task A, i16 per
 * axis in task B, buffers one element past their alignment. */
static float q16_x[QR * QC + 1], q16_d[QR * QC + 1];
static uint16_t q16_qa[QR * QC + 1];
static int16_t q16_qb[QR * QC + 1];

static void test_quant16_program(hfx_pool *pool)
{
    static const float scale_a[1] = {0.0625f}, scale_b[QR] = {0.5f, 0.00371f, 1.75f};
    static const uint16_t zp_a[2] = {32771, 0};
    static const int16_t zp_b[4] = {0, -30000, 3, 0};
    const float special[] = {0.25f, 0.75f, -0.25f, -3.75f, 1e30f, -1e30f, hfxb_f(0x7f800000), hfxb_f((int32_t)0xff800000),
                             hfxb_f(0x7fc00000), 2047.96875f, -2048.03125f};
    qt_rng r = {4242};
    float *x = q16_x + 1;
    for (int i = 0; i < QR * QC; i++)
        x[i] = i < 11 ? special[i] : (float)qt_range(&r, -400000, 400000) / 97.0f;
    hfxb b;
    hfxb_init(&b);
    b.v2 = 1;
    uint32_t xa = hfxb_input(&b, 0, HFXB_DIMS(QR, QC)), xb = hfxb_input(&b, 1, HFXB_DIMS(QR, QC));
    uint32_t sa = hfxb_const(&b, 0, HFXB_SCALAR, scale_a);
    uint32_t za = hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_SCALAR, (const float *)(const void *)zp_a), HFX_DTYPE_U16);
    uint32_t qa = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(QR, QC)), HFX_DTYPE_U16);
    uint32_t da = hfxb_output(&b, 0, HFXB_DIMS(QR, QC));
    hfxb_quant(&b, 0, HFX_OP_QUANTIZE_LINEAR, xa, sa, za, qa, 0);
    hfxb_quant(&b, 0, HFX_OP_DEQUANTIZE_LINEAR, qa, sa, za, da, 0);
    uint32_t sb = hfxb_const(&b, 1, HFXB_DIMS(QR), scale_b);
    uint32_t zb = hfxb_set_dtype(&b, hfxb_const(&b, 1, HFXB_DIMS(QR), (const float *)(const void *)zp_b), HFX_DTYPE_I16);
    uint32_t qb = hfxb_set_dtype(&b, hfxb_output(&b, 1, HFXB_DIMS(QR, QC)), HFX_DTYPE_I16);
    hfxb_quant(&b, 1, HFX_OP_QUANTIZE_LINEAR, xb, sb, zb, qb, 0);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    expect(st == HFX_OK, "u16/i16 quant program (v2) parses");
    if (st != HFX_OK)
        return;
    const void *in[2] = {x, x};
    void *out[3] = {q16_qa + 1, q16_d + 1, q16_qb + 1};
    hfx_run_result res;
    st = hfx_run(pool, prog, in, 2, out, 3, NULL, NULL, &res);
    expect(st == HFX_OK, "u16/i16 quant program runs");
    int qa_ok = 1, da_ok = 1, qb_ok = 1;
    for (int i = 0; i < QR * QC; i++) {
        int32_t wa = ref_quantize_linear(x[i], scale_a[0], zp_a[0], 0, 65535);
        float wd = ref_dequantize_linear(wa, scale_a[0], zp_a[0]);
        int32_t wb = ref_quantize_linear(x[i], scale_b[i / QC], zp_b[i / QC], -32768, 32767);
        qa_ok &= q16_qa[1 + i] == wa;
        da_ok &= memcmp(&q16_d[1 + i], &wd, 4) == 0;
        qb_ok &= q16_qb[1 + i] == wb;
    }
    expect(qa_ok, "QuantizeLinear u16 per tensor bit-exact (ties, saturation, inf, NaN; misaligned buffers)");
    expect(da_ok, "DequantizeLinear u16 bit-exact");
    expect(qb_ok, "QuantizeLinear i16 per axis bit-exact");
    hfx_program_free(prog);
}

/* QMatMul of shape (m, k, n); edge: operands, zero points and bias only at their extremes */
typedef struct qm_shape {
    uint32_t m, k, n;
    int edge;
} qm_shape;

uint32_t hx_qemu_packets(void); /* qemu's executed-packet counter (dsp/hexagon/emulate/qemu_counters.S) */

static int32_t qm_load(const uint8_t *p, int is_u8, int i) { return is_u8 ? p[i] : (int8_t)p[i]; }

static uint8_t qm_byte(qt_rng *r, int edge)
{
    static const uint8_t extremes[4] = {0, 255, 127, 128}; /* u8 0/255, i8 127/-128 */
    return edge ? extremes[qt_rand(r) % 4] : (uint8_t)qt_range(r, 0, 255);
}

/* one QMatMul of types (ta, tb, ty) (1: u8, 0: i8) on buffers at odd addresses; 1 if bit-exact */
static int qmatmul_case(hfx_pool *pool, qm_shape sh, int ta, int tb, int ty, int per_column, qt_rng *r)
{
    uint32_t M = sh.m, K = sh.k, N = sh.n;
    uint8_t *qa = malloc(M * K + 1), *qb = malloc(K * N + 1), *qy = malloc(M * N + 1), *zb = malloc(N);
    int32_t *ai = malloc(M * K * 4 + 4), *bi = malloc(K * N * 4 + 4), *bias = malloc(N * 4), *zbi = malloc(N * 4);
    float *sc = malloc(N * 4);
    uint8_t za[4], zy[4];
    for (uint32_t i = 0; i < M * K; i++)
        ai[i] = qm_load((qa[1 + i] = qm_byte(r, sh.edge), qa + 1), ta, (int)i);
    for (uint32_t i = 0; i < K * N; i++)
        bi[i] = qm_load((qb[1 + i] = qm_byte(r, sh.edge), qb + 1), tb, (int)i);
    for (uint32_t j = 0; j < N; j++) {
        zb[j] = qm_byte(r, sh.edge);
        sc[j] = j % 3 ? (float)qt_range(r, 1, 20000) * 1e-7f : 0.5f; /* 0.5: ties */
        bias[j] = j == 0 ? INT32_MAX : sh.edge ? (j % 2 ? INT32_MIN : INT32_MAX) : (int32_t)qt_range(r, -100000, 100000);
    }
    za[0] = qm_byte(r, sh.edge);
    zy[0] = qm_byte(r, sh.edge);
    uint8_t dt[2] = {HFX_DTYPE_I8, HFX_DTYPE_U8};
    uint32_t ncol = per_column ? N : 1;
    hfxb b;
    hfxb_init(&b);
    uint32_t in[7];
    in[0] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(M, K)), dt[ta]);
    in[1] = hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_DIMS(K, N), (const float *)(const void *)(qb + 1)), dt[tb]);
    in[2] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_SCALAR), dt[ta]);
    in[3] = hfxb_set_dtype(&b, hfxb_input(&b, 0, per_column ? 1 : 0, &ncol), dt[tb]);
    in[4] = hfxb_input(&b, 0, per_column ? 1 : 0, &ncol);
    in[5] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_SCALAR), dt[ty]);
    in[6] = hfxb_set_dtype(&b, hfxb_input(&b, 0, 1, &N), HFX_DTYPE_I32);
    uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(M, N)), dt[ty]);
    hfxb_op_add(&b, 0, HFX_OP_QMATMUL, -1, 7, in, y, NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = parse_built(&b, &prog, &err);
    int ok = st == HFX_OK;
    if (ok) {
        const void *ins[6] = {qa + 1, za, zb, sc, zy, bias};
        void *outs[1] = {qy + 1};
        hfx_run_result res;
        ok = hfx_run(pool, prog, ins, 6, outs, 1, NULL, NULL, &res) == HFX_OK;
        hfx_program_free(prog);
    }
    int32_t lo = ty ? 0 : -128, hi = ty ? 255 : 127;
    for (uint32_t j = 0; j < ncol; j++)
        zbi[j] = qm_load(zb, tb, (int)j);
    for (uint32_t i = 0; ok && i < M * N; i++) {
        uint32_t c = per_column ? i % N : 0;
        int32_t acc = ref_qmatmul_acc(ai + (i / N) * K, bi, K, N, i % N, qm_load(za, ta, 0), zbi[c], bias[i % N]);
        ok = qm_load(qy + 1, ty, (int)i) == ref_qmatmul_requant(acc, sc[c], qm_load(zy, ty, 0), lo, hi);
        if (!ok)
            hx_printf("QMatMul %ux%ux%u types %d%d%d edge %d: y[%u] differs\n", M, K, N, ta, tb, ty, sh.edge, i);
    }
    free(qa), free(qb), free(qy), free(zb), free(ai), free(bi), free(bias), free(zbi), free(sc);
    return ok;
}

/* The C reference's shapes plus the HVX kernel's corners: K and N not multiples of 4 or 128, rows not a
 * multiple of its 4-row tile, several 128-column panels, K = 1, N = 1, and extremes only. */
static void test_qmatmul_program(hfx_pool *pool)
{
    static const qm_shape shapes[] = {{7, 37, 19, 0}, {9, 131, 261, 0}, {1, 1, 1, 0},  {5, 4, 128, 0},
                                      {4, 256, 129, 0}, {3, 77, 33, 1}, {6, 130, 140, 1}};
    qt_rng r = {4242};
    int ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 8; t++)
            ok &= qmatmul_case(pool, shapes[s], t & 1, (t >> 1) & 1, (t >> 2) & 1, (t + (int)s) % 3 == 0, &r);
    expect(ok, "QMatMul u8/i8 x u8/i8 -> u8/i8 bit-exact against ref_qmatmul.h (7 shapes x 8 types)");
}

/* one MatMulInteger of types (ta, tb) (1: u8, 0: i8): A, B, zb and Y at odd addresses (Y 1 byte past a
 * word), a guard byte either side of Y; 1 if Y is bit-exact against ref_qmatmul_acc and the guards hold */
static int imatmul_case(hfx_pool *pool, qm_shape sh, int ta, int tb, int per_column, qt_rng *r)
{
    uint32_t M = sh.m, K = sh.k, N = sh.n, ncol = per_column ? N : 1;
    uint8_t *qa = malloc(M * K + 1), *qb = malloc(K * N + 3), *qy = malloc(M * N * 4 + 2), *zb = malloc(ncol + 1);
    int32_t *ai = malloc(M * K * 4 + 4), *bi = malloc(K * N * 4 + 4), *zbi = malloc(ncol * 4);
    uint8_t za[4];
    for (uint32_t i = 0; i < M * K; i++)
        ai[i] = qm_load((qa[1 + i] = qm_byte(r, sh.edge), qa + 1), ta, (int)i);
    for (uint32_t i = 0; i < K * N; i++)
        bi[i] = qm_load((qb[3 + i] = qm_byte(r, sh.edge), qb + 3), tb, (int)i);
    for (uint32_t j = 0; j < ncol; j++)
        zbi[j] = qm_load((zb[1 + j] = qm_byte(r, sh.edge), zb + 1), tb, (int)j);
    za[0] = qm_byte(r, sh.edge);
    memset(qy, 0xa5, M * N * 4 + 2);
    uint8_t dt[2] = {HFX_DTYPE_I8, HFX_DTYPE_U8};
    hfxb b;
    hfxb_init(&b);
    uint32_t in[4];
    in[0] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(M, K)), dt[ta]);
    in[1] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(K, N)), dt[tb]);
    in[2] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_SCALAR), dt[ta]);
    in[3] = hfxb_set_dtype(&b, hfxb_input(&b, 0, per_column ? 1 : 0, &ncol), dt[tb]);
    uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(M, N)), HFX_DTYPE_I32);
    hfxb_op_add(&b, 0, HFX_OP_IMATMUL, -1, 4, in, y, NULL);
    hfx_program *prog = NULL;
    hfx_error err;
    int ok = parse_built(&b, &prog, &err) == HFX_OK;
    if (ok) {
        const void *ins[4] = {qa + 1, qb + 3, za, zb + 1};
        void *outs[1] = {qy + 1};
        hfx_run_result res;
        ok = hfx_run(pool, prog, ins, 4, outs, 1, NULL, NULL, &res) == HFX_OK;
        hfx_program_free(prog);
    }
    if (!ok)
        hx_printf("MatMulInteger %ux%ux%u types %d%d: refused or failed (%s)\n", M, K, N, ta, tb, err.message);
    else if (qy[0] != 0xa5 || qy[1 + M * N * 4] != 0xa5)
        ok = 0, hx_printf("MatMulInteger %ux%ux%u types %d%d: a guard byte was written\n", M, K, N, ta, tb);
    for (uint32_t i = 0; ok && i < M * N; i++) {
        int32_t got, want = ref_qmatmul_acc(ai + (i / N) * K, bi, K, N, i % N, qm_load(za, ta, 0),
                                            zbi[per_column ? i % N : 0], 0);
        memcpy(&got, qy + 1 + 4 * i, 4);
        ok = got == want;
        if (!ok)
            hx_printf("MatMulInteger %ux%ux%u types %d%d edge %d: y[%u] = %d, want %d\n", M, K, N, ta, tb, sh.edge, i,
                      got, want);
    }
    free(qa), free(qb), free(qy), free(zb), free(ai), free(bi), free(zbi);
    return ok;
}

/* QMatMul's shapes, and columns split over items (K = 1000: 256 columns an item on HVX, 127 in C; K = 4099:
 * 128 and 31, extremes only). A K large enough to wrap int32 (> 33025) is left out: on HVX its work space
 * (128 columns of K bytes per worker) exceeds the coop heap. */
static void test_imatmul_program(hfx_pool *pool)
{
    static const qm_shape shapes[] = {{7, 37, 19, 0},  {9, 131, 261, 0}, {1, 1, 1, 0},      {5, 4, 128, 0},
                                      {4, 256, 129, 0}, {3, 77, 33, 1},   {6, 130, 140, 1}, {5, 1000, 261, 0},
                                      {2, 4099, 133, 1}};
    qt_rng r = {4343};
    int ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            ok &= imatmul_case(pool, shapes[s], t & 1, t >> 1, (t + (int)s) % 2, &r);
    expect(ok, "MatMulInteger u8/i8 x u8/i8 -> i32 bit-exact against ref_qmatmul_acc (9 shapes x 4 types), "
               "nothing written outside Y");
}

/* QConv2D of shape x[4] (NCHW), w[4]; params as CONV2D's; per_channel: zero points and scales per output
 * channel and a bias. Buffers at odd addresses; 1 if bit-exact against ref_qconv_acc. */
typedef struct qc_shape {
    uint32_t x[4], w[4];
    int32_t pr[9]; /* pads t l b r, strides h w, dilations h w, group */
    int per_channel, edge;
} qc_shape;

/* QCONV2D, or ICONV2D (ConvInteger: its int32 accumulators, no scale, zy or bias) when ty is 2; a guard
 * byte either side of Y. packets (may be NULL): qemu's executed packets of the hfx_run call. */
static int qconv_case(hfx_pool *pool, const qc_shape *sh, int tx, int tw, int ty, qt_rng *r, uint64_t *packets)
{
    int raw = ty == 2;
    const uint32_t *xd = sh->x, *wd = sh->w;
    const int32_t *pr = sh->pr;
    uint32_t oh = (xd[2] + (uint32_t)(pr[0] + pr[2]) - (uint32_t)pr[6] * (wd[2] - 1) - 1) / (uint32_t)pr[4] + 1;
    uint32_t ow = (xd[3] + (uint32_t)(pr[1] + pr[3]) - (uint32_t)pr[7] * (wd[3] - 1) - 1) / (uint32_t)pr[5] + 1;
    uint32_t yd[4] = {xd[0], wd[0], oh, ow}, m = wd[0], ncol = sh->per_channel ? m : 1;
    uint32_t nx = xd[0] * xd[1] * xd[2] * xd[3], nw = wd[0] * wd[1] * wd[2] * wd[3], ny = yd[0] * m * oh * ow;
    uint8_t *X = malloc(nx + 1), *Wb = malloc(nw + 1), *Y = malloc(ny * 4 + 2), *zwb = malloc(m), zx[4], zy[4];
    int32_t *Xi = malloc(nx * 4), *Wi = malloc(nw * 4), *bias = malloc(m * 4), *zw = malloc(m * 4);
    float *sc = malloc(m * 4);
    uint8_t dt[3] = {HFX_DTYPE_I8, HFX_DTYPE_U8, HFX_DTYPE_I32};
    for (uint32_t i = 0; i < nx; i++)
        Xi[i] = qm_load((X[1 + i] = qm_byte(r, sh->edge), X + 1), tx, (int)i);
    for (uint32_t i = 0; i < nw; i++)
        Wi[i] = qm_load((Wb[1 + i] = qm_byte(r, sh->edge), Wb + 1), tw, (int)i);
    zx[0] = qm_byte(r, sh->edge);
    zy[0] = qm_byte(r, sh->edge);
    for (uint32_t j = 0; j < m; j++) {
        zw[j] = qm_load((zwb[j] = qm_byte(r, sh->edge), zwb), tw, (int)j);
        sc[j] = j % 2 ? 0.5f : (float)qt_range(r, 1, 10000) * 1e-6f;
        bias[j] = sh->edge ? (j % 2 ? INT32_MIN : INT32_MAX) : (int32_t)qt_range(r, -10000, 10000);
    }
    uint32_t ybytes = raw ? ny * 4 : ny;
    memset(Y, 0xa5, ny * 4 + 2);
    hfxb b;
    hfxb_init(&b);
    uint32_t in[7];
    in[0] = hfxb_set_dtype(&b, hfxb_input(&b, 0, 4, xd), dt[tx]);
    in[1] = hfxb_set_dtype(&b, hfxb_const(&b, 0, 4, wd, (const float *)(const void *)(Wb + 1)), dt[tw]);
    in[2] = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_SCALAR), dt[tx]);
    in[3] = hfxb_set_dtype(&b, hfxb_input(&b, 0, sh->per_channel ? 1 : 0, &ncol), dt[tw]);
    in[4] = raw ? HFXB_NONE : hfxb_input(&b, 0, sh->per_channel ? 1 : 0, &ncol);
    in[5] = raw ? HFXB_NONE : hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_SCALAR), dt[ty]);
    int bias_in = sh->per_channel && !raw;
    in[6] = bias_in ? hfxb_set_dtype(&b, hfxb_input(&b, 0, 1, &m), HFX_DTYPE_I32) : HFXB_NONE;
    uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, 4, yd), dt[ty]);
    int32_t params[HFX_OP_PARAMS] = {0};
    memcpy(params, pr, sizeof sh->pr);
    hfxb_op_add(&b, 0, raw ? HFX_OP_ICONV2D : HFX_OP_QCONV2D, -1, raw ? 4 : bias_in ? 7 : 6, in, y, params);
    hfx_program *prog = NULL;
    hfx_error err;
    int ok = parse_built(&b, &prog, &err) == HFX_OK;
    if (!ok)
        hx_printf("QConv2D program refused: %s\n", err.message);
    if (ok) {
        const void *ins[6] = {X + 1, zx, zwb, sc, zy, bias};
        void *outs[1] = {Y + 1};
        hfx_run_result res;
        uint32_t before = hx_qemu_packets();
        ok = hfx_run(pool, prog, ins, raw ? 3 : bias_in ? 6 : 5, outs, 1, NULL, NULL, &res) == HFX_OK;
        if (packets)
            *packets = (uint32_t)(hx_qemu_packets() - before);
        hfx_program_free(prog);
    }
    if (ok && (Y[0] != 0xa5 || Y[1 + ybytes] != 0xa5))
        ok = 0, hx_printf("QConv2D types %d%d%d: a guard byte of Y was written\n", tx, tw, ty);
    int32_t lo = ty ? 0 : -128, hi = ty ? 255 : 127, p6[6] = {pr[0], pr[1], pr[4], pr[5], pr[6], pr[7]};
    int32_t zxv = qm_load(zx, tx, 0), zyv = raw ? 0 : qm_load(zy, ty, 0);
    uint32_t cg = wd[1], mg = m / (uint32_t)pr[8];
    for (uint32_t i = 0; ok && i < ny; i++) {
        uint32_t ox = i % ow, oy = i / ow % oh, mm = i / (ow * oh) % m, img = i / (ow * oh * m);
        uint32_t c = sh->per_channel ? mm : 0;
        int32_t acc = ref_qconv_acc(Xi + img * xd[1] * xd[2] * xd[3], xd[2], xd[3], Wi + mm * cg * wd[2] * wd[3], cg,
                                    wd[2], wd[3], (mm / mg) * cg, oy, ox, p6, zxv, zw[c],
                                    bias_in ? bias[mm] : 0);
        int32_t got;
        memcpy(&got, Y + 1 + 4 * i, 4); /* ICONV2D's int32, at an odd address */
        ok = raw ? got == acc : qm_load(Y + 1, ty, (int)i) == ref_qmatmul_requant(acc, sc[c], zyv, lo, hi);
        if (!ok)
            hx_printf("QConv2D x %ux%ux%ux%u w %ux%ux%ux%u types %d%d%d: y[%u] differs\n", xd[0], xd[1], xd[2], xd[3],
                      wd[0], wd[1], wd[2], wd[3], tx, tw, ty, i);
    }
    free(X), free(Wb), free(Y), free(zwb), free(Xi), free(Wi), free(bias), free(zw), free(sc);
    return ok;
}

/* test_kernels.c's host shapes (grouped with pads, strides and dilations; a 1x1 per tensor) plus
 * channels not a multiple of the 4-row tile, taps not a multiple of 4, more than 128 pixels, extremes,
 * stride 2 in both axes, rows of 300 pixels (im2col runs of several vectors up to X's end), and
 * depthwise convs (3x3 padded; stride 2 on extremes). */
static void test_qconv_program(hfx_pool *pool)
{
    static const qc_shape shapes[] = {
        {{2, 6, 7, 9}, {4, 3, 3, 3}, {1, 0, 2, 1, 2, 1, 1, 2, 2}, 1, 0},
        {{1, 5, 4, 4}, {3, 5, 1, 1}, {0, 0, 0, 0, 1, 1, 1, 1, 1}, 0, 0},
        {{1, 3, 13, 17}, {7, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 0},
        {{1, 8, 9, 9}, {5, 8, 2, 2}, {0, 1, 1, 0, 1, 1, 1, 1, 1}, 1, 1},
        {{1, 4, 11, 12}, {6, 4, 3, 3}, {1, 1, 1, 1, 2, 2, 1, 1, 1}, 1, 0},
        {{1, 2, 5, 300}, {3, 2, 1, 3}, {0, 1, 0, 1, 1, 1, 1, 1, 1}, 0, 0},
        {{2, 6, 10, 13}, {6, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 6}, 1, 0},
        {{1, 5, 9, 11}, {5, 1, 3, 3}, {1, 1, 1, 1, 2, 2, 1, 1, 5}, 0, 1},
    };
    enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };
    qt_rng r = {777};
    int ok = 1;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int t = 0; t < 8; t++)
            ok &= qconv_case(pool, &shapes[s], t & 1, (t >> 1) & 1, (t >> 2) & 1, &r, NULL);
    expect(ok, "QConv2D u8/i8 x u8/i8 -> u8/i8 bit-exact against ref_qmatmul.h (8 shapes x 8 types)");
    ok = 1;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int t = 0; t < 4; t++)
            ok &= qconv_case(pool, &shapes[s], t & 1, (t >> 1) & 1, 2, &r, NULL);
    expect(ok, "ConvInteger u8/i8 x u8/i8 -> i32 bit-exact against ref_qconv_acc (8 shapes x 4 types), "
               "nothing written outside Y");
}

/* ConvInteger takes QConv2D's item path (on Hexagon builds the HVX one: im2col and vrmpy), only the
 * int32 sums stored instead of requantised: on the same conv (16 -> 32 channels, 3x3 padded, 480
 * pixels) its packets stay within 1.25x of QConv2D's. The C path costs several times more. */
static void test_iconv_path(hfx_pool *pool)
{
    static const qc_shape sh = {{1, 16, 20, 24}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 0};
    qt_rng r = {4242};
    uint64_t q = 0, i = 0;
    int ok = qconv_case(pool, &sh, 1, 0, 1, &r, &q);
    ok &= qconv_case(pool, &sh, 1, 0, 2, &r, &i);
    hx_printf("     packets of one call: QConv2D %llu, ConvInteger %llu (%u MACs)\n", (unsigned long long)q,
              (unsigned long long)i, 32u * 16u * 9u * 480u);
    expect(ok && q > 0 && i * 4 <= q * 5, "ConvInteger u8 x i8 runs QConv2D's item path: bit-exact, packets "
                                          "within 1.25x of QConv2D's on the same conv");
}

/* ---- task program v2: a template specialized to other shapes, parsed and run ----
 * A: x[N,8] -> Relu -> y[N,8]; B: xs[2,T] slice [1, T-1) -> ys[2,T-2]; representative N 4, T 6 */
static uint8_t *build_v2_template(size_t *size)
{
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(4, 8)), y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4, 8));
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, x, y);
    uint32_t xs = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(2, 6)), ys = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(2, 4));
    const int32_t starts[2] = {0, 1}, ends[2] = {INT32_MAX, 5}, steps[2] = {1, 1};
    uint32_t sl = hfxb_slice(&b, HFX_TASK_B, xs, ys, starts, ends, steps, 2);
    hfxb_sec sec = {0};
    const uint32_t io_axis[4] = {0, 0, 1, 1}, n = HFX_EXPR_SYM;
    const uint32_t t_minus_1[4] = {HFX_EXPR_SYM | 1u << 8, HFX_EXPR_CONST, 1, HFX_EXPR_SUB};
    const uint32_t t_minus_2[4] = {HFX_EXPR_SYM | 1u << 8, HFX_EXPR_CONST, 2, HFX_EXPR_SUB};
    hfxb_sec_symbols(&sec, 2, io_axis);
    hfxb_sec_input_dim(&sec, x, 0, 0);
    hfxb_sec_input_dim(&sec, xs, 1, 1);
    hfxb_sec_patch(&sec, HFX_PATCH_TENSOR_DIM, y, 0, 1, &n);
    hfxb_sec_patch(&sec, HFX_PATCH_OP_PARAM, sl, HFX_P_SLICE_ENDS + 1, 4, t_minus_1);
    hfxb_sec_patch(&sec, HFX_PATCH_TENSOR_DIM, ys, 1, 4, t_minus_2);
    return hfxb_encode_shapes(&b, &sec, 1, size);
}

static hfx_status specialize_to(const uint8_t *bytes, size_t size, int64_t n, int64_t t, uint8_t *out, hfx_error *err)
{
    const int64_t dx[2] = {n, 8}, ds[2] = {2, t};
    const int64_t *dims[2] = {dx, ds};
    const uint32_t ranks[2] = {2, 2};
    return hfx_program_specialize(bytes, size, dims, ranks, 2, out, err);
}

static int contains(const char *s, const char *sub)
{
    size_t n = strlen(sub);
    for (; *s; s++)
        if (strncmp(s, sub, n) == 0)
            return 1;
    return 0;
}

static float v2_x[7 * 8], v2_y[7 * 8], v2_xs[2 * 11], v2_ys[2 * 9];

static void test_v2_program(hfx_pool *pool)
{
    size_t size = 0;
    uint8_t *tmpl = build_v2_template(&size), *spec = malloc(size), *twice = malloc(size);
    hfx_error err;
    hfx_status st = specialize_to(tmpl, size, 7, 11, spec, &err);
    expect(st == HFX_OK, "v2: template specialized to N 7, T 11");
    hfx_program *prog = NULL;
    st = st ? st : hfx_program_parse(spec, size, &prog, &err);
    expect(st == HFX_OK, "v2: the specialized program parses");
    hfx_tensor_info info;
    expect(prog && hfx_program_output_info(prog, 1, &info) == HFX_OK && info.dims[1] == 9, "v2: ys is [2, 9]");
    for (int i = 0; i < 7 * 8; i++) v2_x[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < 2 * 11; i++) v2_xs[i] = (float)i;
    const void *in[2] = {v2_x, v2_xs};
    void *out[2] = {v2_y, v2_ys};
    st = prog ? hfx_run(pool, prog, in, 2, out, 2, NULL, NULL, NULL) : HFX_ERR_ARG;
    int ok = st == HFX_OK;
    for (int i = 0; ok && i < 7 * 8; i++) ok = v2_y[i] == (v2_x[i] > 0.0f ? v2_x[i] : 0.0f);
    for (int r = 0; ok && r < 2; r++)
        for (int c = 0; ok && c < 9; c++) ok = v2_ys[r * 9 + c] == v2_xs[r * 11 + 1 + c];
    expect(ok, "v2: Relu and Slice at the new shapes bit-exact");
    hfx_program_free(prog);
    int again = specialize_to(spec, size, 3, 5, twice, &err) == HFX_OK;
    again = again && specialize_to(tmpl, size, 3, 5, spec, &err) == HFX_OK;
    expect(again && memcmp(spec, twice, size) == 0,
           "v2: specialized twice = specialized once");
    const int64_t dx[2] = {3, 9}, ds[2] = {2, 6};
    const int64_t *dims[2] = {dx, ds};
    const uint32_t ranks[2] = {2, 2};
    st = hfx_program_specialize(tmpl, size, dims, ranks, 2, spec, &err);
    expect(st == HFX_ERR_SHAPES && contains(err.message, "input 0 axis 1: 9 but the program's static dim is 8"),
           "v2: a static dim that differs is refused, input and axis named");
    free(tmpl);
    free(spec);
    free(twice);
}

/* v2 quantization section: a DequantizeLinear per axis whose entry agrees parses and runs; one
 * whose entry's zero point differs in channel 2 is refused with HFX_ERR_QUANT at the op's zero point */
static uint8_t qs_x[6];
static float qs_y[6];
static const float qs_scale[3] = {0.5f, 0.25f, 2.0f};
static const uint8_t qs_zero[3] = {1, 2, 3}, qs_other[3] = {1, 2, 4};

static uint8_t *quant_section_program(const uint8_t *entry_zero, size_t *size)
{
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_set_dtype(&b, hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(2, 3)), HFX_DTYPE_U8);
    uint32_t s = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(3), qs_scale);
    uint32_t z = hfxb_set_dtype(&b, hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(3), (const float *)qs_zero), HFX_DTYPE_U8);
    uint32_t ez = hfxb_set_dtype(&b, hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(3), (const float *)entry_zero), HFX_DTYPE_U8);
    hfxb_quant(&b, HFX_TASK_A, HFX_OP_DEQUANTIZE_LINEAR, x, s, z, hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(2, 3)), 1);
    static uint8_t sec[4 + HFX_QREC_BYTES];
    const uint32_t words[5] = {1, x, s, ez, 1};
    for (int i = 0; i < 5; i++)
        hfxb_put32(sec + 4 * i, words[i]);
    b.v2 = 1;
    b.quant = sec;
    b.quant_bytes = sizeof sec;
    uint8_t *bytes = hfxb_encode(&b, size);
    hfxb_free(&b);
    return bytes;
}

static void test_quant_section(hfx_pool *pool)
{
    size_t size = 0;
    uint8_t *good = quant_section_program(qs_zero, &size);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(good, size, &prog, &err);
    expect(st == HFX_OK, "quant section: entries that agree parse");
    for (int i = 0; i < 6; i++)
        qs_x[i] = (uint8_t)(i * 41);
    const void *in[1] = {qs_x};
    void *out[1] = {qs_y};
    st = prog ? hfx_run(pool, prog, in, 1, out, 1, NULL, NULL, NULL) : HFX_ERR_ARG;
    int ok = st == HFX_OK;
    for (int i = 0; ok && i < 6; i++)
        ok = qs_y[i] == (float)(qs_x[i] - qs_zero[i % 3]) * qs_scale[i % 3];
    expect(ok, "quant section: the program runs as without it");
    hfx_program_free(prog);
    uint8_t *bad = quant_section_program(qs_other, &size);
    const uint8_t *ops = bad + HFX_HDR_OPS_OFFSET;
    uint32_t at = (uint32_t)(ops[0] | ops[1] << 8 | ops[2] << 16 | ops[3] << 24) + HFX_OREC_INPUTS + 8;
    st = hfx_program_parse(bad, size, &prog, &err);
    expect(st == HFX_ERR_QUANT && err.byte_offset == at && contains(err.message, "op 0 (DequantizeLinear): zero point"),
           "quant section: a zero point that disagrees is refused at the op's operand");
    free(good);
    free(bad);
}

int main(void)
{
    char what[160];
    hx_printf("hexfuse core on the coop platform (\"%s\", workers interleaved on one thread)\n", hfx_plat_name());
    make_data();
    size_t size = 0;
    uint8_t *bytes = build_program(&size);

    /* ---- parser: corrupt programs are rejected ---- */
    qt_begin_group(&T);
    {
        hfx_program *bad = NULL;
        hfx_error err;
        uint8_t saved = bytes[0];
        bytes[0] ^= 0xff;
        expect(hfx_program_parse(bytes, size, &bad, &err) == HFX_ERR_MAGIC && bad == NULL, "bad magic rejected");
        bytes[0] = saved;
        expect(hfx_program_parse(bytes, HFX_HEADER_BYTES - 1, &bad, &err) != HFX_OK && bad == NULL,
               "truncated header rejected");
        expect(hfx_program_parse(bytes, size - 1, &bad, &err) != HFX_OK && bad == NULL,
               "truncated program rejected");
    }
    qt_end_group(&T, "parser errors");

    /* ---- parse ---- */
    qt_begin_group(&T);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(bytes, size, &prog, &err);
    free(bytes);
    hx_snprintf(what, sizeof what, "parse: %s %s", hfx_status_name(st), st ? err.message : "");
    expect(st == HFX_OK, what);
    if (st != HFX_OK)
        return qt_result(&T, "test_scheduler");
    expect(hfx_program_num_ops(prog) == 8 && hfx_program_num_task_ops(prog, HFX_TASK_A) == 3 &&
               hfx_program_num_task_ops(prog, HFX_TASK_B) == 5,
           "op counts");
    uint64_t items_a = hfx_program_num_items(prog, HFX_TASK_A), items_b = hfx_program_num_items(prog, HFX_TASK_B);
    hx_printf("     program: %zu bytes, %u ops, items A=%llu B=%llu, scratch A=%zu B=%zu bytes\n", size,
              (unsigned)hfx_program_num_ops(prog), (unsigned long long)items_a, (unsigned long long)items_b,
              hfx_program_scratch_bytes(prog, HFX_TASK_A), hfx_program_scratch_bytes(prog, HFX_TASK_B));
    qt_end_group(&T, "parse");

    /* ---- persistent pool: 1 matrix + 3 vector workers ---- */
    qt_begin_group(&T);
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    cfg.n_vector_workers = 3;
    cfg.n_matrix_workers = 1;
    cfg.arena_bytes = 1u << 20;
    hfx_pool *pool = NULL;
    st = hfx_pool_create(&cfg, &pool);
    expect(st == HFX_OK && pool && hfx_pool_num_workers(pool) == 4, "pool of 4 workers");
    if (st != HFX_OK)
        return qt_result(&T, "test_scheduler");
    expect(hfx_pool_worker_engine(pool, 0) == HFX_ENGINE_MATRIX && hfx_pool_worker_engine(pool, 1) == HFX_ENGINE_VECTOR,
           "worker 0 is the matrix worker");
    qt_end_group(&T, "pool");

    /* ---- full run with a trace ---- */
    qt_begin_group(&T);
    hfx_run_options opt;
    hfx_run_options_init(&opt);
    opt.trace = events;
    opt.trace_capacity = sizeof events / sizeof events[0];
    hfx_run_result res;
    memset(got_a, 0, sizeof got_a);
    memset(got_b, 0, sizeof got_b);
    uint64_t t0 = hx_clock_ns();
    st = run(pool, prog, &opt, NULL, &res);
    uint64_t host_ns = hx_clock_ns() - t0;
    hx_snprintf(what, sizeof what, "run: %s", hfx_status_name(st));
    expect(st == HFX_OK, what);
    expect(outputs_match(), "outputs bit-exact vs plain C (run 1)");
    expect(res.task_done[0] && res.task_done[1] && !res.serialized, "both tasks done, fused");
    expect(res.items_run[0] == items_a && res.items_run[1] == items_b, "every item ran once");
    expect(res.trace_events == items_a + items_b && res.trace_dropped == 0, "one trace event per item");
    int engine_ok = 1, a_first = -1, a_last = -1, b_between = 0;
    for (size_t i = 0; i < res.trace_events; i++) {
        const hfx_trace_event *e = &events[i];
        int weng = hfx_pool_worker_engine(pool, e->worker);
        /* matrix items only on the matrix worker; vector workers never run matrix items */
        if (e->engine == HFX_ENGINE_MATRIX && weng != HFX_ENGINE_MATRIX)
            engine_ok = 0;
        if (e->end_ns < e->start_ns)
            engine_ok = 0;
        if (e->task == HFX_TASK_A) {
            if (a_first < 0)
                a_first = (int)i;
            a_last = (int)i;
        }
    }
    for (int i = a_first; i >= 0 && i <= a_last; i++)
        if (events[i].task == HFX_TASK_B)
            b_between++;
    expect(engine_ok, "trace: engine classes on the right workers, end >= start");
    hx_snprintf(what, sizeof what, "trace: task B items interleaved with task A's (%d between A's first and last)",
                b_between);
    expect(b_between > 0, what);
    hfx_trace_summary sum;
    expect(hfx_trace_summarize(events, res.trace_events, &sum) == HFX_OK && sum.wall_ns > 0, "trace summary");
    hx_printf("     trace: %zu events, wall %llu ns (virtual clock), busy matrix %llu vector %llu copy %llu ns;"
              " emulated run took %llu us of host time\n",
              res.trace_events, (unsigned long long)sum.wall_ns, (unsigned long long)sum.busy_ns[HFX_ENGINE_MATRIX],
              (unsigned long long)sum.busy_ns[HFX_ENGINE_VECTOR], (unsigned long long)sum.busy_ns[HFX_ENGINE_COPY],
              (unsigned long long)(host_ns / 1000u));
    qt_end_group(&T, "fused run");

    /* ---- the pool persists: run again ---- */
    qt_begin_group(&T);
    memset(got_a, 0, sizeof got_a);
    memset(got_b, 0, sizeof got_b);
    st = run(pool, prog, NULL, NULL, &res);
    expect(st == HFX_OK && outputs_match(), "second run on the same pool");
    hfx_run_options_init(&opt);
    opt.flags = HFX_RUN_FORCE_SERIAL;
    memset(got_a, 0, sizeof got_a);
    memset(got_b, 0, sizeof got_b);
    st = run(pool, prog, &opt, NULL, &res);
    expect(st == HFX_OK && res.serialized && outputs_match(), "forced serial run");
    qt_end_group(&T, "reruns");

    /* ---- partial run: first op of each task, then resume ---- */
    qt_begin_group(&T);
    hfx_runstate *rs = NULL;
    st = hfx_runstate_create(pool, prog, &rs);
    expect(st == HFX_OK && rs, "run state");
    if (rs) {
        memset(got_a, 0, sizeof got_a);
        memset(got_b, 0, sizeof got_b);
        hfx_run_options_init(&opt);
        opt.stop_op[0] = 1;
        opt.stop_op[1] = 1;
        st = run(pool, prog, &opt, rs, &res);
        expect(st == HFX_OK && res.ops_done[0] == 1 && res.ops_done[1] == 1 && !hfx_runstate_done(rs),
               "partial run stops after one op per task");
        st = run(pool, prog, NULL, rs, &res);
        expect(st == HFX_OK && hfx_runstate_done(rs) && outputs_match(), "resumed run finishes, outputs exact");
        hfx_runstate_destroy(rs);
    }
    qt_end_group(&T, "partial run");

    /* ---- pooling, hard activations, resize on the same pool ---- */
    qt_begin_group(&T);
    test_pool_resize_program(pool);
    qt_end_group(&T, "pool/resize/hard activations");

    qt_begin_group(&T);
    test_reduce_program(pool);
    qt_end_group(&T, "ReduceSum / ReduceMean");

    qt_begin_group(&T);
    test_reduce_extreme_program(pool);
    test_log_program(pool);
    test_ort_float_ops_program(pool);
    test_dynamic_quant_program(pool);
    test_integer_program(pool);
    test_mod_program(pool);
    test_arg_program(pool);
    test_log_softmax_program(pool);
    test_expand_program(pool);
    test_softplus_round_maxpool_program(pool);
    test_range_program(pool);
    test_trilu_program(pool);
    qt_end_group(&T, "ReduceMax / ReduceMin, Log, Sin / Cos / InstanceNorm, DynamicQuantizeLinear, MatMulInteger, "
                     "integer Cast/Add/Gather, Mod, ArgMax / ArgMin, LogSoftmax, Expand, Softplus / Round / "
                     "GlobalMaxPool, Range, Trilu");

    qt_begin_group(&T);
    test_quant_program(pool);
    test_quant16_program(pool);
    qt_end_group(&T, "QuantizeLinear / DequantizeLinear");

    qt_begin_group(&T);
    test_qmatmul_program(pool);
    test_imatmul_program(pool);
    test_qconv_program(pool);
    test_iconv_path(pool);
    qt_end_group(&T, "QMatMul / MatMulInteger / QConv2D / ConvInteger");
    /* ---- task program v2: specialize on the DSP side too ---- */
    qt_begin_group(&T);
    test_v2_program(pool);
    test_quant_section(pool);
    qt_end_group(&T, "program v2");

    /* ---- teardown ---- */
    qt_begin_group(&T);
    hfx_pool_destroy(pool);
    hfx_program_free(prog);
    hx_snprintf(what, sizeof what, "coop heap empty after teardown (%zu bytes in use)", hfx_plat_coop_heap_in_use());
    expect(hfx_plat_coop_heap_in_use() == 0, what);
    qt_end_group(&T, "teardown");
    return qt_result(&T, "test_scheduler");
}
