/* test_quant_section.c - the v2 quantization section read by the integer ops: each op's zero points,
 * scales and derived scales (QMATMUL's s_a s_b / s_y, QADD's ratios, QGLOBAL_AVGPOOL's scale,
 * QSOFTMAX's floor(1 / s_y), QRESIZE's and QCONCAT's tables) against its tensors' entries; every disagreement refused with
 * HFX_ERR_QUANT at the op's operand or param, entries that break the section's own rules at the
 * entry's field; a program with its section runs to the same bytes as without it. */
#include <math.h>

#include "core.h"
#include "hexfuse/hexfuse.h"
#include "program_builder.h"
#include "test_util.h"
#include "../ref/ref_quant.h"

static hfx_pool *g_pool;

/* a program under construction and its section's entries */
typedef struct qcase {
    hfxb b;
    int32_t entries[16][4]; /* tensor, scale, zero point, axis */
    uint32_t n;
} qcase;

static void entry(qcase *c, uint32_t tensor, uint32_t scale, uint32_t zero, int32_t axis) {
    int32_t *e = c->entries[c->n++];
    e[0] = (int32_t)tensor, e[1] = (int32_t)scale, e[2] = (int32_t)zero, e[3] = axis;
}

/* a constant of dtype with numel values at data (kept valid until encoding) */
static uint32_t cst(hfxb *b, uint8_t dtype, uint32_t rank, const uint32_t *dims, const void *data) {
    return hfxb_set_dtype(b, hfxb_const(b, HFX_TASK_A, rank, dims, (const float *)data), dtype);
}

/* encodes c (with its section, or without it) into *bytes */
static size_t encode(qcase *c, bool with_section, uint8_t **bytes) {
    uint8_t sec[4 + 16 * 16];
    hfxb_put32(sec, c->n);
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t k = 0; k < 4; k++) hfxb_put32(sec + 4 + 16 * i + 4 * k, (uint32_t)c->entries[i][k]);
    c->b.v2 = 1;
    c->b.quant = with_section ? sec : NULL;
    c->b.quant_bytes = with_section ? 4 + 16 * c->n : 0;
    size_t n;
    *bytes = hfxb_encode(&c->b, &n);
    return n;
}

/* parses c: the status, the error, and where the op records and the section start */
static hfx_status parse(qcase *c, hfx_error *e, uint32_t *ops_off, uint32_t *q_off) {
    uint8_t *bytes;
    size_t n = encode(c, true, &bytes);
    *ops_off = hfx_rd_u32(bytes + HFX_HDR_OPS_OFFSET);
    *q_off = (uint32_t)(n - 4 - 16 * c->n);
    hfx_program *p = NULL;
    hfx_status st = hfx_program_parse(bytes, n, &p, e);
    hfx_program_free(p);
    free(bytes);
    return st;
}

enum where { OK, OP_INPUT, OP_OUTPUT, OP_PARAM, ENTRY };
/* c must be refused with `status` at op 0's input/output slot or param (or at entry k's field), with
 * a message naming op 0 for HFX_ERR_QUANT */
static void expect(qcase *c, hfx_status status, enum where w, uint32_t k, uint32_t field, const char *what) {
    hfx_error e;
    uint32_t ops_off, q_off;
    hfx_status st = parse(c, &e, &ops_off, &q_off);
    uint32_t at = w == OP_INPUT    ? ops_off + HFX_OREC_INPUTS + 4 * k
                  : w == OP_OUTPUT ? ops_off + HFX_OREC_OUTPUTS
                  : w == OP_PARAM  ? ops_off + HFX_OREC_PARAMS + 4 * k
                                   : q_off + HFX_QNT_ENTRIES + 16 * k + field;
    bool named = status != HFX_ERR_QUANT || strstr(e.message, "op 0 (");
    CHECK_MSG(st == status && (w == OK || e.byte_offset == at) && named, "%s: got %s at %u (%s), want %s at %u", what,
              hfx_status_name(st), e.byte_offset, st ? e.message : "", hfx_status_name(status), w == OK ? 0 : at);
}

/* ---- QMATMUL: A [3, 4] u8, B [4, 5] i8 per column, Y [3, 5] u8, bias [5] i32 ------------------ */

static const uint8_t g_za = 128, g_zy = 120, g_za_other = 127;
static const int8_t g_b[20] = {1, -2, 3, -4, 5, 6, -7, 8, -9, 10, 11, -12, 13, 14, -15, 16, 17, -18, 19, 20};
static const int8_t g_zb[5] = {0, 1, -1, 2, 0};
static const int32_t g_bias[5] = {100, -50, 7, 0, 3000}, g_zeros[5] = {0};
static float g_sa[1] = {0.02f}, g_sb[5] = {0.004f, 0.0051f, 0.0067f, 0.003f, 0.009f}, g_sy[1] = {0.05f};
static float g_scale[5], g_acc[5], g_sb4[4] = {0.004f, 0.004f, 0.004f, 0.004f};

typedef struct qmm_ids {
    uint32_t a, b, za, zb, scale, zy, bias, y, sa, sb, sy, acc, zbias;
} qmm_ids;

static qmm_ids qmatmul_case(qcase *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 5; i++) {
        g_acc[i] = g_sa[0] * g_sb[i];
        g_scale[i] = g_acc[i] / g_sy[0];
    }
    hfxb *b = &c->b;
    qmm_ids t;
    t.a = hfxb_set_dtype(b, hfxb_input(b, HFX_TASK_A, HFXB_DIMS(3, 4)), HFX_DTYPE_U8);
    t.b = cst(b, HFX_DTYPE_I8, HFXB_DIMS(4, 5), g_b);
    t.za = cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_za);
    t.zb = cst(b, HFX_DTYPE_I8, HFXB_DIMS(5), g_zb);
    t.scale = cst(b, HFX_DTYPE_F32, HFXB_DIMS(5), g_scale);
    t.zy = cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_zy);
    t.bias = cst(b, HFX_DTYPE_I32, HFXB_DIMS(5), g_bias);
    t.y = hfxb_set_dtype(b, hfxb_output(b, HFX_TASK_A, HFXB_DIMS(3, 5)), HFX_DTYPE_U8);
    uint32_t in[7] = {t.a, t.b, t.za, t.zb, t.scale, t.zy, t.bias};
    hfxb_op_add(b, HFX_TASK_A, HFX_OP_QMATMUL, HFX_ENGINE_VECTOR, 7, in, t.y, NULL);
    t.sa = cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_sa);
    t.sb = cst(b, HFX_DTYPE_F32, HFXB_DIMS(5), g_sb);
    t.sy = cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_sy);
    t.acc = cst(b, HFX_DTYPE_F32, HFXB_DIMS(5), g_acc);
    t.zbias = cst(b, HFX_DTYPE_I32, HFXB_DIMS(5), g_zeros);
    return t;
}

static void qmatmul_entries(qcase *c, const qmm_ids *t) {
    entry(c, t->a, t->sa, t->za, -1);
    entry(c, t->b, t->sb, t->zb, 1);
    entry(c, t->y, t->sy, t->zy, -1);
    entry(c, t->bias, t->acc, t->zbias, 0);
}

static void test_qmatmul(void) {
    qcase c;
    qmm_ids t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    expect(&c, HFX_OK, OK, 0, 0, "every entry agrees");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[0][2] = (int32_t)cst(&c.b, HFX_DTYPE_U8, HFXB_SCALAR, &g_za_other);
    expect(&c, HFX_ERR_QUANT, OP_INPUT, HFX_QMM_ZA, 0, "A's zero point 127, the op's 128");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[2][2] = (int32_t)t.za;
    expect(&c, HFX_ERR_QUANT, OP_INPUT, HFX_QMM_ZY, 0, "Y's zero point 128, the op's 120");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    g_scale[3] = nextafterf(g_scale[3], 1.0f); /* the op's combined scale one ulp off in column 3 */
    expect(&c, HFX_ERR_QUANT, OP_INPUT, HFX_QMM_SCALE, 0, "s_a s_b / s_y of column 3");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[0][1] = (int32_t)t.sy; /* A's scale 0.05: the combined scale disagrees */
    expect(&c, HFX_ERR_QUANT, OP_INPUT, HFX_QMM_SCALE, 0, "A's scale");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[3][1] = (int32_t)t.sb; /* the bias's scale s_b, not s_a s_b */
    expect(&c, HFX_ERR_QUANT, OP_INPUT, HFX_QMM_BIAS, 0, "bias scale");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[1][1] = (int32_t)cst(&c.b, HFX_DTYPE_F32, HFXB_DIMS(4), g_sb4);
    c.entries[1][2] = (int32_t)HFX_NO_TENSOR;
    c.entries[1][3] = 0; /* B per row (axis 0), the op per column */
    expect(&c, HFX_ERR_QUANT, OP_INPUT, HFX_QMM_ZB, 0, "B per channel on the other axis");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[1][1] = (int32_t)cst(&c.b, HFX_DTYPE_F32, HFXB_DIMS(4), g_sb4); /* 4 scales for 5 columns */
    expect(&c, HFX_ERR_TENSOR, ENTRY, 1, HFX_QREC_SCALE, "per-channel numel wrong");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[2][0] = (int32_t)t.scale; /* an f32 tensor */
    expect(&c, HFX_ERR_DTYPE, ENTRY, 2, HFX_QREC_TENSOR, "entry of an f32 tensor");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[3][0] = 999;
    expect(&c, HFX_ERR_TENSOR, ENTRY, 3, HFX_QREC_TENSOR, "tensor out of range");
    hfxb_free(&c.b);

    t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    c.entries[1][2] = (int32_t)t.za; /* a u8 zero point of an i8 tensor */
    expect(&c, HFX_ERR_DTYPE, ENTRY, 1, HFX_QREC_ZERO_POINT, "zero point of the wrong dtype");
    hfxb_free(&c.b);

    t = qmatmul_case(&c); /* only some tensors have entries: the others are not compared */
    entry(&c, t.b, t.sb, t.zb, 1);
    expect(&c, HFX_OK, OK, 0, 0, "B's entry alone");
    hfxb_free(&c.b);
}

/* ---- QADD / QMUL, QMAXPOOL, QGLOBAL_AVGPOOL, QSOFTMAX, DEQUANTIZE_LINEAR per axis ---------------- */

static float g_s1[1] = {0.04f}, g_s2[1] = {0.01f}, g_s3[1] = {0.05f};
static const uint8_t g_z1 = 10, g_z2 = 200, g_z3 = 128;

/* a one-op program X (u8 [N, 3, 4, 4], N of Y) [, W] -> Y u8 with entries for X, (W,) Y */
static void unary_case(qcase *c, uint32_t opcode, const int32_t *params, const uint32_t *ydims) {
    memset(c, 0, sizeof *c);
    hfxb *b = &c->b;
    static float table[256];
    uint32_t x = hfxb_set_dtype(b, hfxb_input(b, HFX_TASK_A, HFXB_DIMS(ydims[0], 3, 4, 4)), HFX_DTYPE_U8);
    uint32_t in[2] = {x, 0};
    uint32_t nin = 1;
    if (opcode == HFX_OP_QADD || opcode == HFX_OP_QMUL) {
        in[nin++] = hfxb_set_dtype(b, hfxb_input(b, HFX_TASK_A, HFXB_DIMS(1, 3, 4, 4)), HFX_DTYPE_U8);
    } else if (opcode == HFX_OP_QSOFTMAX) {
        for (int i = 0; i < 256; i++) table[i] = (float)i / 256.0f;
        in[nin++] = cst(b, HFX_DTYPE_F32, HFXB_DIMS(256), table);
    }
    uint32_t y = hfxb_set_dtype(b, hfxb_output(b, HFX_TASK_A, 4, ydims), HFX_DTYPE_U8);
    hfxb_op_add(b, HFX_TASK_A, opcode, HFX_ENGINE_VECTOR, nin, in, y, params);
    entry(c, x, cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_s1), cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_z1), -1);
    if (nin == 2 && opcode != HFX_OP_QSOFTMAX)
        entry(c, in[1], cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_s2), cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_z2), -1);
    entry(c, y, cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_s3), cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_z3), -1);
}

/* params[slot] changed to `bad` must be refused at that slot; unchanged they parse */
static void expect_param(uint32_t opcode, int32_t *params, uint32_t slot, int32_t bad, const uint32_t *ydims,
                         const char *what) {
    qcase c;
    unary_case(&c, opcode, params, ydims);
    expect(&c, HFX_OK, OK, 0, 0, what);
    hfxb_free(&c.b);
    int32_t good = params[slot];
    params[slot] = bad;
    unary_case(&c, opcode, params, ydims);
    expect(&c, HFX_ERR_QUANT, OP_PARAM, slot, 0, what);
    hfxb_free(&c.b);
    params[slot] = good;
}

static void test_elementwise_and_pools(void) {
    static const uint32_t same[4] = {1, 3, 4, 4}, pooled[4] = {1, 3, 2, 2}, global[4] = {1, 3, 1, 1};
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_QBIN_RATIO_A] = hfxb_bits(g_s1[0] / g_s3[0]);
    p[HFX_P_QBIN_RATIO_B] = hfxb_bits(g_s2[0] / g_s3[0]);
    p[HFX_P_QBIN_ZERO_A] = g_z1, p[HFX_P_QBIN_ZERO_B] = g_z2, p[HFX_P_QBIN_ZERO_Y] = g_z3;
    p[HFX_P_QBIN_LO] = 0, p[HFX_P_QBIN_HI] = 255;
    expect_param(HFX_OP_QADD, p, HFX_P_QBIN_ZERO_B, 201, same, "QAdd zero point of B");
    expect_param(HFX_OP_QADD, p, HFX_P_QBIN_RATIO_A, p[HFX_P_QBIN_RATIO_A] + 1, same, "QAdd ratio a");
    expect_param(HFX_OP_QADD, p, HFX_P_QBIN_RATIO_B, hfxb_bits(g_s1[0] / g_s3[0]), same, "QAdd ratio b");
    p[HFX_P_QBIN_RATIO_A] = hfxb_bits((g_s1[0] * g_s2[0]) / g_s3[0]);
    p[HFX_P_QBIN_RATIO_B] = 0;
    expect_param(HFX_OP_QMUL, p, HFX_P_QBIN_RATIO_A, hfxb_bits(g_s1[0] / g_s3[0]), same, "QMul ratio");
    expect_param(HFX_OP_QMUL, p, HFX_P_QBIN_ZERO_Y, 0, same, "QMul zero point of Y");

    memset(p, 0, sizeof p);
    p[HFX_P_POOL_STRIDE_H] = p[HFX_P_POOL_STRIDE_W] = 2;
    p[HFX_P_POOL_DILATION_H] = p[HFX_P_POOL_DILATION_W] = 1;
    p[HFX_P_POOL_KERNEL_H] = p[HFX_P_POOL_KERNEL_W] = 2;
    p[HFX_P_QPOOL_SCALE_X] = hfxb_bits(g_s1[0]), p[HFX_P_QPOOL_ZERO_X] = g_z1;
    p[HFX_P_QPOOL_SCALE_Y] = hfxb_bits(g_s3[0]), p[HFX_P_QPOOL_ZERO_Y] = g_z3;
    expect_param(HFX_OP_QMAXPOOL, p, HFX_P_QPOOL_SCALE_Y, hfxb_bits(g_s2[0]), pooled, "QMaxPool scale of Y");
    expect_param(HFX_OP_QMAXPOOL, p, HFX_P_QPOOL_ZERO_X, 11, pooled, "QMaxPool zero point of X");
    expect_param(HFX_OP_QAVGPOOL, p, HFX_P_QPOOL_SCALE_X, hfxb_bits(g_s2[0]), pooled, "QAveragePool scale of X");

    memset(p, 0, sizeof p);
    p[HFX_P_QGAP_SCALE] = hfxb_bits(g_s1[0] / (g_s3[0] * 16.0f));
    p[HFX_P_QGAP_ZERO_X] = g_z1, p[HFX_P_QGAP_ZERO_Y] = g_z3;
    expect_param(HFX_OP_QGLOBAL_AVGPOOL, p, HFX_P_QGAP_SCALE, hfxb_bits(g_s1[0] / g_s3[0]), global,
                 "QGlobalAveragePool scale");
    expect_param(HFX_OP_QGLOBAL_AVGPOOL, p, HFX_P_QGAP_ZERO_X, 0, global, "QGlobalAveragePool zero point of X");
    static const uint32_t empty_batch[4] = {0, 3, 1, 1}; /* the count is the plane's, not numel / N C */
    expect_param(HFX_OP_QGLOBAL_AVGPOOL, p, HFX_P_QGAP_SCALE, hfxb_bits(g_s1[0] / g_s3[0]), empty_batch,
                 "QGlobalAveragePool of an empty batch");

    memset(p, 0, sizeof p);
    p[HFX_P_AXIS] = 3;
    p[HFX_P_QSOFTMAX_SCALE] = hfxb_bits(floorf(1.0f / g_s3[0]));
    p[HFX_P_QSOFTMAX_ZERO_Y] = g_z3;
    expect_param(HFX_OP_QSOFTMAX, p, HFX_P_QSOFTMAX_SCALE, hfxb_bits(21.0f), same, "QSoftmax floor(1 / s_y)");
    expect_param(HFX_OP_QSOFTMAX, p, HFX_P_QSOFTMAX_ZERO_Y, 0, same, "QSoftmax zero point of Y");
}

/* QRESIZE (nearest, x2) and QCONCAT (two inputs on axis 1): their tables against Q_y(DQ_x(x)) of
 * the entries; `bad_entry` >= 0 changes that table entry by one */
static uint8_t g_tables[2][256];

static void table_case(qcase *c, uint32_t opcode, int bad_entry) {
    memset(c, 0, sizeof *c);
    hfxb *b = &c->b;
    const float sx[2] = {g_s1[0], g_s2[0]};
    const int32_t zx[2] = {g_z1, g_z2};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 256; j++)
            g_tables[i][j] =
                (uint8_t)ref_quantize_linear(ref_dequantize_linear(j, sx[i], zx[i]), g_s3[0], g_z3, 0, 255);
    if (bad_entry >= 0) g_tables[opcode == HFX_OP_QCONCAT][bad_entry] ^= 1;
    uint32_t x[2], in[3], nin;
    for (int i = 0; i < 2; i++)
        x[i] = hfxb_set_dtype(b, hfxb_input(b, HFX_TASK_A, HFXB_DIMS(1, 3, 4, 4)), HFX_DTYPE_U8);
    int32_t p[HFX_OP_PARAMS] = {0};
    uint32_t y;
    if (opcode == HFX_OP_QRESIZE) {
        p[HFX_P_RESIZE_COORD] = HFX_RESIZE_COORD_ASYMMETRIC;
        p[HFX_P_RESIZE_NEAREST_MODE] = HFX_RESIZE_NEAREST_FLOOR;
        p[HFX_P_RESIZE_SCALE_H] = p[HFX_P_RESIZE_SCALE_W] = hfxb_bits(2.0f);
        in[0] = x[0], in[1] = cst(b, HFX_DTYPE_U8, HFXB_DIMS(256), g_tables[0]), nin = 2;
        y = hfxb_set_dtype(b, hfxb_output(b, HFX_TASK_A, HFXB_DIMS(1, 3, 8, 8)), HFX_DTYPE_U8);
    } else {
        p[HFX_P_AXIS] = 1;
        in[0] = x[0], in[1] = x[1], in[2] = cst(b, HFX_DTYPE_U8, HFXB_DIMS(2, 256), g_tables), nin = 3;
        y = hfxb_set_dtype(b, hfxb_output(b, HFX_TASK_A, HFXB_DIMS(1, 6, 4, 4)), HFX_DTYPE_U8);
    }
    hfxb_op_add(b, HFX_TASK_A, opcode, HFX_ENGINE_VECTOR, nin, in, y, p);
    for (int i = 0; i < 2; i++)
        entry(c, x[i], cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), i ? g_s2 : g_s1),
              cst(b, HFX_DTYPE_U8, HFXB_SCALAR, i ? &g_z2 : &g_z1), -1);
    entry(c, y, cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_s3), cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_z3), -1);
}

static void test_tables(void) {
    static const uint32_t opcodes[2] = {HFX_OP_QRESIZE, HFX_OP_QCONCAT};
    for (int k = 0; k < 2; k++) {
        qcase c;
        table_case(&c, opcodes[k], -1);
        expect(&c, HFX_OK, OK, 0, 0, "tables of the entries");
        hfxb_free(&c.b);
        table_case(&c, opcodes[k], 77);
        expect(&c, HFX_ERR_QUANT, OP_INPUT, opcodes[k] == HFX_OP_QRESIZE ? 1 : 2, 0, "one table entry off");
        hfxb_free(&c.b);
    }
}

/* DEQUANTIZE_LINEAR per axis 1 of X [2, 3] u8, and QUANTIZE_LINEAR per tensor */
static float g_s_axis[3] = {0.1f, 0.2f, 0.3f};
static const uint8_t g_z_axis[3] = {1, 2, 3}, g_z_other[3] = {1, 2, 4};

static void dq_case(qcase *c, const uint8_t *entry_zero, int32_t entry_axis) {
    memset(c, 0, sizeof *c);
    hfxb *b = &c->b;
    uint32_t x = hfxb_set_dtype(b, hfxb_input(b, HFX_TASK_A, HFXB_DIMS(2, 3)), HFX_DTYPE_U8);
    uint32_t s = cst(b, HFX_DTYPE_F32, HFXB_DIMS(3), g_s_axis), z = cst(b, HFX_DTYPE_U8, HFXB_DIMS(3), g_z_axis);
    uint32_t y = hfxb_output(b, HFX_TASK_A, HFXB_DIMS(2, 3));
    hfxb_quant(b, HFX_TASK_A, HFX_OP_DEQUANTIZE_LINEAR, x, s, z, y, 1);
    entry(c, x, s, cst(b, HFX_DTYPE_U8, HFXB_DIMS(3), entry_zero), entry_axis);
}

static void test_quantize_ops(void) {
    qcase c;
    dq_case(&c, g_z_axis, 1);
    expect(&c, HFX_OK, OK, 0, 0, "DequantizeLinear per axis");
    hfxb_free(&c.b);
    dq_case(&c, g_z_other, 1);
    expect(&c, HFX_ERR_QUANT, OP_INPUT, 2, 0, "DequantizeLinear zero point of channel 2");
    hfxb_free(&c.b);

    memset(&c, 0, sizeof c); /* QuantizeLinear per tensor without a zero point: the entry's is 0 */
    hfxb *b = &c.b;
    uint32_t x = hfxb_input(b, HFX_TASK_A, HFXB_DIMS(2, 3));
    uint32_t s = cst(b, HFX_DTYPE_F32, HFXB_DIMS(1), g_s1);
    uint32_t y = hfxb_set_dtype(b, hfxb_output(b, HFX_TASK_A, HFXB_DIMS(2, 3)), HFX_DTYPE_U8);
    hfxb_quant(b, HFX_TASK_A, HFX_OP_QUANTIZE_LINEAR, x, s, HFXB_NONE, y, 0);
    entry(&c, y, s, cst(b, HFX_DTYPE_U8, HFXB_SCALAR, &g_z1), -1);
    expect(&c, HFX_ERR_QUANT, OP_INPUT, 1, 0, "QuantizeLinear without a zero point, the entry's 10");
    c.entries[0][2] = (int32_t)HFX_NO_TENSOR;
    expect(&c, HFX_OK, OK, 0, 0, "QuantizeLinear, entry without a zero point");
    hfxb_free(&c.b);
}

/* the section changes no result: QMATMUL with and without it, bit for bit */
static void test_section_runs_the_same(void) {
    qcase c;
    qmm_ids t = qmatmul_case(&c);
    qmatmul_entries(&c, &t);
    uint8_t a[12], y[2][15];
    for (int i = 0; i < 12; i++) a[i] = (uint8_t)rng_range(0, 255);
    for (int with = 0; with < 2; with++) {
        uint8_t *bytes;
        size_t n = encode(&c, with, &bytes);
        hfx_program *p = NULL;
        hfx_error e;
        CHECK_MSG(hfx_program_parse(bytes, n, &p, &e) == HFX_OK, "%s", e.message);
        const void *ins[1] = {a};
        void *outs[1] = {y[with]};
        if (p) CHECK(hfx_run(g_pool, p, ins, 1, outs, 1, NULL, NULL, NULL) == HFX_OK);
        hfx_program_free(p);
        free(bytes);
    }
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0);
    hfxb_free(&c.b);
}

int main(void) {
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    if (hfx_pool_create(&cfg, &g_pool) != HFX_OK) return 1;
    RUN_TEST(test_qmatmul);
    RUN_TEST(test_elementwise_and_pools);
    RUN_TEST(test_tables);
    RUN_TEST(test_quantize_ops);
    RUN_TEST(test_section_runs_the_same);
    hfx_pool_destroy(g_pool);
    TEST_MAIN_END();
}
