/* make_seeds.c - writes a seed corpus of valid task programs (every op) to
 * the directory given as argv[1]; exits 1 if the parser refuses a seed. */
#include <stdio.h>

#include "hexfuse/hexfuse.h"
#include "program_builder.h"

static float g_data[4096];

static void emit(const char *dir, const char *name, hfxb *b) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.hfxp", dir, name);
    size_t n;
    uint8_t *bytes = hfxb_encode(b, &n);
    hfx_program *p;
    hfx_error err;
    if (hfx_program_parse(bytes, n, &p, &err) != HFX_OK) {
        fprintf(stderr, "seed %s is invalid: %s at byte %u: %s\n", name, hfx_status_name(err.status), err.byte_offset,
                err.message);
        exit(1);
    }
    hfx_program_free(p);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
    free(bytes);
    hfxb_free(b);
}

/* Task A chains every elementwise op of the registry (ops.def), so a new one is seeded without an
 * edit here: unary ops on the running value, binary ones with the input. All-zero params are
 * valid for each (HardSigmoid 0, Clip [0, 0]). Task B copies. COMPARE, whose output is bool, is
 * logic_chain's. */
static void elementwise_chain(hfxb *b) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 5)), cur = x;
#define HFX_OP(NAME, label, min_in, max_in, n_out, engines, n_params, family)                                  \
    if ((strcmp(#family, "unary") == 0 || strcmp(#family, "binary") == 0) && HFX_OP_##NAME != HFX_OP_COMPARE) { \
        uint32_t in[2] = {cur, x}, next = hfxb_scratch(b, 0, HFXB_DIMS(3, 5)); \
        hfxb_op_add(b, 0, HFX_OP_##NAME, -1, min_in, in, next, NULL);          \
        cur = next;                                                            \
    }
#include "hexfuse/ops.def"
    hfxb_op_add(b, 0, HFX_OP_COPY, -1, 1, &cur, hfxb_output(b, 0, HFXB_DIMS(15)), NULL);
    uint32_t v = hfxb_input(b, 1, HFXB_DIMS(4));
    hfxb_op_add(b, 1, HFX_OP_COPY, -1, 1, &v, hfxb_output(b, 1, HFXB_DIMS(2, 2)), NULL);
}

/* v2, bools: A: Greater(x, y) And Not(Equal(x, 0)) Or LessOrEqual of int64s (p mod p, broadcast), concatenated to
 * itself; B: a bool copied */
static void logic_chain(hfxb *b) {
    static const int64_t zero64[1] = {0};
    static const uint8_t no[1] = {0};
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 5)), y = hfxb_input(b, 0, HFXB_DIMS(5));
    uint32_t zero = hfxb_const(b, 0, HFXB_SCALAR, g_data);
    uint32_t p = hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_DIMS(3, 1)), HFX_DTYPE_I64);
    uint32_t q = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_SCALAR, (const float *)(const void *)zero64), HFX_DTYPE_I64);
    uint32_t f = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_SCALAR, (const float *)(const void *)no), HFX_DTYPE_BOOL);
    uint32_t t[5];
    for (int k = 0; k < 5; k++) t[k] = hfxb_set_dtype(b, hfxb_scratch(b, 0, HFXB_DIMS(3, 5)), HFX_DTYPE_BOOL);
    uint32_t le = hfxb_set_dtype(b, hfxb_scratch(b, 0, HFXB_DIMS(3, 1)), HFX_DTYPE_BOOL);
    uint32_t rem = hfxb_set_dtype(b, hfxb_scratch(b, 0, HFXB_DIMS(3, 1)), HFX_DTYPE_I64);
    uint32_t out = hfxb_set_dtype(b, hfxb_output(b, 0, HFXB_DIMS(6, 5)), HFX_DTYPE_BOOL);
    int32_t mode[HFX_OP_PARAMS] = {0};
    mode[HFX_P_DIV_MODE] = HFX_DIV_MOD;
    hfxb_op_add(b, 0, HFX_OP_DIV, -1, 2, (const uint32_t[]){p, p}, rem, mode);
    mode[HFX_P_COMPARE_MODE] = HFX_COMPARE_GREATER;
    hfxb_op_add(b, 0, HFX_OP_COMPARE, -1, 2, (const uint32_t[]){x, y}, t[0], mode);
    mode[HFX_P_COMPARE_MODE] = HFX_COMPARE_EQUAL;
    hfxb_op_add(b, 0, HFX_OP_COMPARE, -1, 2, (const uint32_t[]){x, zero}, t[1], mode);
    hfxb_op_add(b, 0, HFX_OP_COMPARE, -1, 2, (const uint32_t[]){t[1], f}, t[2], mode); /* Not */
    hfxb_binary(b, 0, HFX_OP_MIN, t[0], t[2], t[3]);
    mode[HFX_P_COMPARE_MODE] = HFX_COMPARE_LESS_EQUAL;
    hfxb_op_add(b, 0, HFX_OP_COMPARE, -1, 2, (const uint32_t[]){rem, q}, le, mode);
    hfxb_binary(b, 0, HFX_OP_MAX, t[3], le, t[4]);
    hfxb_concat(b, 0, 2, (const uint32_t[]){t[4], t[4]}, out, 0);
    uint32_t v = hfxb_set_dtype(b, hfxb_input(b, 1, HFXB_DIMS(4)), HFX_DTYPE_BOOL);
    hfxb_op_add(b, 1, HFX_OP_COPY, -1, 1, &v, hfxb_set_dtype(b, hfxb_output(b, 1, HFXB_DIMS(2, 2)), HFX_DTYPE_BOOL),
                NULL);
    b->v2 = 1;
}

/* v2 with a shape section: A: x[N,6] @ W[6,4] -> y[N,4]; B: xs[2,T] slice [1, T-1) -> ys[2,T-2], and
 * xp[1,2,H,H] maxpool 3x3 stride 2 pad 1 -> [1,2,OH,OH], OH = (H - 1) // 2 + 1 (representative N 3,
 * T 7, H 5). With `crc`, the CRC flag; with `quant`, a quantization section over u8/i16 constants. */
static void v2_template(hfxb *b, hfxb_sec *sec, int crc, int quant) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 6)), w = hfxb_const(b, 0, HFXB_DIMS(6, 4), g_data);
    uint32_t y = hfxb_output(b, 0, HFXB_DIMS(3, 4));
    hfxb_gemm(b, 0, x, w, HFXB_NONE, y, 0, 0, 1.0f, 0.0f);
    uint32_t xs = hfxb_input(b, 1, HFXB_DIMS(2, 7)), ys = hfxb_output(b, 1, HFXB_DIMS(2, 5));
    uint32_t sl =
        hfxb_slice(b, 1, xs, ys, (const int32_t[]){0, 1}, (const int32_t[]){INT32_MAX, 6}, (const int32_t[]){1, 1}, 2);
    uint32_t xp = hfxb_input(b, 1, HFXB_DIMS(1, 2, 5, 5)), yp = hfxb_output(b, 1, HFXB_DIMS(1, 2, 3, 3));
    hfxb_pool(b, 1, HFX_OP_MAXPOOL, xp, yp, (const int32_t[]){1, 1, 1, 1}, (const int32_t[]){2, 2},
              (const int32_t[]){1, 1}, (const int32_t[]){3, 3}, 0, 0);
    hfxb_sec_symbols(sec, 3, (const uint32_t[]){0, 0, 1, 1, 2, 2});
    hfxb_sec_input_dim(sec, x, 0, 0);
    hfxb_sec_input_dim(sec, xs, 1, 1);
    hfxb_sec_input_dim(sec, xp, 2, 2);
    const uint32_t n = HFX_EXPR_SYM, t2[] = {HFX_EXPR_SYM | 1u << 8, HFX_EXPR_CONST, 2, HFX_EXPR_SUB};
    const uint32_t t1[] = {HFX_EXPR_SYM | 1u << 8, HFX_EXPR_CONST, 1, HFX_EXPR_SUB};
    const uint32_t oh[] = {HFX_EXPR_SYM | 2u << 8, HFX_EXPR_CONST, 1, HFX_EXPR_SUB, HFX_EXPR_CONST, 2,
                           HFX_EXPR_FLOORDIV,      HFX_EXPR_CONST, 1, HFX_EXPR_ADD};
    hfxb_sec_patch(sec, HFX_PATCH_TENSOR_DIM, y, 0, 1, &n);
    hfxb_sec_patch(sec, HFX_PATCH_TENSOR_DIM, ys, 1, 4, t2);
    hfxb_sec_patch(sec, HFX_PATCH_OP_PARAM, sl, HFX_P_SLICE_ENDS + 1, 4, t1);
    hfxb_sec_patch(sec, HFX_PATCH_TENSOR_DIM, yp, 2, 10, oh);
    hfxb_sec_patch(sec, HFX_PATCH_TENSOR_DIM, yp, 3, 10, oh);
    b->v2 = 1;
    b->crc = crc;
    b->shapes = sec->bytes;
    b->shapes_bytes = sec->n;
    if (!quant) return;
    uint32_t q8 = hfxb_const(b, 0, HFXB_DIMS(4, 2), g_data), q16 = hfxb_const(b, 1, HFXB_DIMS(3), g_data);
    uint32_t sc = hfxb_const(b, 0, HFXB_DIMS(4), g_data), zp = hfxb_const(b, 0, HFXB_DIMS(4), g_data);
    uint32_t sc1 = hfxb_const(b, 1, HFXB_DIMS(1), g_data);
    b->t[q8].dtype = b->t[zp].dtype = HFX_DTYPE_U8;
    b->t[q8].data_bytes = 8;
    b->t[zp].data_bytes = 4;
    b->t[q16].dtype = HFX_DTYPE_I16;
    b->t[q16].data_bytes = 6;
    static uint8_t qsec[4 + 2 * HFX_QREC_BYTES];
    const uint32_t words[] = {2, q8, sc, zp, 0, q16, sc1, HFX_NO_TENSOR, 0xffffffffu};
    for (uint32_t i = 0; i < 9; i++) hfxb_put32(qsec + 4 * i, words[i]);
    b->quant = qsec;
    b->quant_bytes = sizeof qsec;
}

/* Task A: QMatMul of u8 A [2,3,4] x constant i8 B [4,5], per-column zero point and scale, i32 bias;
 * task B: QConv2D of X u8 [1,4,5,5] * W i8 [6,2,3,3], group 2, pads 1, per tensor, no bias. With
 * `with_section`, v2 with every integer tensor's entry: s_a 0.5, s_y 1 and s_b twice the ops'
 * combined scales, so that f32(f32(s_a s_b) / s_y) is exactly them. */
static void qmatmul_pair(hfxb *b, int with_section) {
    static const int8_t w[20] = {1, -2, 3, -4, 5, 127, -128, 0, 7, 9, -9, 11, 2, 3, 4, 5, 6, 7, 8, 9};
    static const uint8_t za[1] = {128}, zy[1] = {3};
    static const int8_t zb[5] = {0, 1, -1, 2, 0};
    static const float sc[5] = {0.01f, 0.02f, 0.5f, 0.25f, 0.001f};
    static const int32_t bias[5] = {100, -100, 0, 7, INT32_MAX};
    uint32_t in[7];
    in[0] = hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_DIMS(2, 3, 4)), HFX_DTYPE_U8);
    in[1] = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_DIMS(4, 5), (const float *)w), HFX_DTYPE_I8);
    in[2] = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_SCALAR, (const float *)za), HFX_DTYPE_U8);
    in[3] = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_DIMS(5), (const float *)zb), HFX_DTYPE_I8);
    in[4] = hfxb_const(b, 0, HFXB_DIMS(5), sc);
    in[5] = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_SCALAR, (const float *)zy), HFX_DTYPE_U8);
    in[6] = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_DIMS(5), (const float *)bias), HFX_DTYPE_I32);
    uint32_t y = hfxb_set_dtype(b, hfxb_output(b, 0, HFXB_DIMS(2, 3, 5)), HFX_DTYPE_U8);
    hfxb_op_add(b, 0, HFX_OP_QMATMUL, -1, 7, in, y, NULL);
    static const float sc1[1] = {0.02f};
    static const int8_t zb1[1] = {0};
    uint32_t cin[6];
    cin[0] = hfxb_set_dtype(b, hfxb_input(b, 1, HFXB_DIMS(1, 4, 5, 5)), HFX_DTYPE_U8);
    cin[1] = hfxb_set_dtype(b, hfxb_const(b, 1, HFXB_DIMS(6, 2, 3, 3), g_data), HFX_DTYPE_I8);
    cin[2] = hfxb_set_dtype(b, hfxb_const(b, 1, HFXB_SCALAR, (const float *)za), HFX_DTYPE_U8);
    cin[3] = hfxb_set_dtype(b, hfxb_const(b, 1, HFXB_SCALAR, (const float *)zb1), HFX_DTYPE_I8);
    cin[4] = hfxb_const(b, 1, HFXB_SCALAR, sc1);
    cin[5] = hfxb_set_dtype(b, hfxb_const(b, 1, HFXB_SCALAR, (const float *)zy), HFX_DTYPE_U8);
    int32_t cp[HFX_OP_PARAMS] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    uint32_t cy = hfxb_set_dtype(b, hfxb_output(b, 1, HFXB_DIMS(1, 6, 5, 5)), HFX_DTYPE_U8);
    hfxb_op_add(b, 1, HFX_OP_QCONV2D, -1, 6, cin, cy, cp);
    if (!with_section) return;
    static const float sa[1] = {0.5f}, sy[1] = {1.0f}, sb[5] = {0.02f, 0.04f, 1.0f, 0.5f, 0.002f}, sw[1] = {0.04f};
    static const int32_t zeros[5] = {0};
    uint32_t s_a = hfxb_const(b, 0, HFXB_DIMS(1), sa), s_y = hfxb_const(b, 0, HFXB_DIMS(1), sy);
    uint32_t s_b = hfxb_const(b, 0, HFXB_DIMS(5), sb), s_w = hfxb_const(b, 1, HFXB_DIMS(1), sw);
    uint32_t z_bias = hfxb_set_dtype(b, hfxb_const(b, 0, HFXB_DIMS(5), (const float *)zeros), HFX_DTYPE_I32);
    const uint32_t per_tensor = 0xffffffffu; /* axis -1 */
    const uint32_t entries[7][4] = {
        {in[0], s_a, in[2], per_tensor},   {in[1], s_b, in[3], 1},
        {y, s_y, in[5], per_tensor},       {in[6], in[4], z_bias, 0},
        {cin[0], s_a, cin[2], per_tensor}, {cin[1], s_w, cin[3], per_tensor},
        {cy, s_y, cin[5], per_tensor},
    };
    static uint8_t qsec[4 + 7 * HFX_QREC_BYTES];
    hfxb_put32(qsec, 7);
    for (uint32_t e = 0; e < 7; e++)
        for (uint32_t k = 0; k < 4; k++) hfxb_put32(qsec + 4 + HFX_QREC_BYTES * e + 4 * k, entries[e][k]);
    b->v2 = 1;
    b->quant = qsec;
    b->quant_bytes = sizeof qsec;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    for (int i = 0; i < 4096; i++) g_data[i] = (float)(i % 17) * 0.125f - 1.0f;
    hfxb b;
    /* gemm + bias + gelu | softmax + layernorm */
    hfxb_init(&b);
    {
        uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(2, 8, 16));
        uint32_t w = hfxb_const(&b, 0, HFXB_DIMS(16, 12), g_data);
        uint32_t c = hfxb_const(&b, 0, HFXB_DIMS(12), g_data);
        uint32_t s = hfxb_scratch(&b, 0, HFXB_DIMS(2, 8, 12));
        uint32_t y = hfxb_output(&b, 0, HFXB_DIMS(2, 8, 12));
        hfxb_gemm(&b, 0, x, w, c, s, 0, 0, 1.0f, 0.5f);
        hfxb_unary(&b, 0, HFX_OP_GELU, s, y);
        uint32_t v = hfxb_input(&b, 1, HFXB_DIMS(4, 10));
        uint32_t sc = hfxb_const(&b, 1, HFXB_DIMS(10), g_data);
        uint32_t t = hfxb_scratch(&b, 1, HFXB_DIMS(4, 10));
        uint32_t o = hfxb_output(&b, 1, HFXB_DIMS(4, 10));
        hfxb_softmax(&b, 1, v, t, -1);
        hfxb_norm(&b, 1, HFX_OP_LAYERNORM, t, sc, sc, o, 1, 1e-5f);
    }
    emit(dir, "gemm_softmax", &b);
    /* conv + relu | rmsnorm + reduce */
    hfxb_init(&b);
    {
        int32_t pads[4] = {1, 1, 1, 1}, st[2] = {1, 2}, dil[2] = {1, 1};
        uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(1, 4, 6, 6));
        uint32_t w = hfxb_const(&b, 0, HFXB_DIMS(4, 2, 3, 3), g_data);
        uint32_t bi = hfxb_const(&b, 0, HFXB_DIMS(4), g_data);
        uint32_t s = hfxb_scratch(&b, 0, HFXB_DIMS(1, 4, 6, 3));
        uint32_t y = hfxb_output(&b, 0, HFXB_DIMS(1, 4, 6, 3));
        hfxb_conv(&b, 0, x, w, bi, s, pads, st, dil, 2);
        hfxb_unary(&b, 0, HFX_OP_RELU, s, y);
        uint32_t v = hfxb_input(&b, 1, HFXB_DIMS(3, 5, 7));
        uint32_t sc = hfxb_const(&b, 1, HFXB_DIMS(7), g_data);
        uint32_t t = hfxb_scratch(&b, 1, HFXB_DIMS(3, 5, 7));
        uint32_t o = hfxb_output(&b, 1, HFXB_DIMS(3, 1, 7));
        hfxb_norm(&b, 1, HFX_OP_RMSNORM, v, sc, HFXB_NONE, t, 2, 1e-6f);
        hfxb_reduce(&b, 1, HFX_OP_REDUCE_MEAN, t, o, 2u, 1);
    }
    emit(dir, "conv_rmsnorm", &b);
    /* elementwise with broadcast | memory ops */
    hfxb_init(&b);
    {
        uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(3, 1, 5));
        uint32_t y = hfxb_input(&b, 0, HFXB_DIMS(4, 1));
        uint32_t s1 = hfxb_scratch(&b, 0, HFXB_DIMS(3, 4, 5)), s2 = hfxb_scratch(&b, 0, HFXB_DIMS(3, 4, 5));
        uint32_t s3 = hfxb_scratch(&b, 0, HFXB_DIMS(3, 4, 5)), s4 = hfxb_scratch(&b, 0, HFXB_DIMS(3, 4, 5));
        uint32_t o = hfxb_output(&b, 0, HFXB_DIMS(3, 4, 5));
        hfxb_binary(&b, 0, HFX_OP_ADD, x, y, s1);
        hfxb_binary(&b, 0, HFX_OP_MUL, s1, y, s2);
        hfxb_binary(&b, 0, HFX_OP_SUB, s2, x, s3);
        hfxb_binary(&b, 0, HFX_OP_DIV, s3, y, s4);
        hfxb_unary(&b, 0, HFX_OP_SILU, s4, o);
        uint32_t v = hfxb_input(&b, 1, HFXB_DIMS(2, 3, 4));
        uint32_t u = hfxb_input(&b, 1, HFXB_DIMS(2, 3, 2));
        uint32_t t = hfxb_scratch(&b, 1, HFXB_DIMS(4, 2, 3));
        uint32_t c = hfxb_scratch(&b, 1, HFXB_DIMS(2, 3, 6));
        uint32_t sl = hfxb_scratch(&b, 1, HFXB_DIMS(1, 3, 3));
        uint32_t o1 = hfxb_output(&b, 1, HFXB_DIMS(4, 2, 3));
        uint32_t o2 = hfxb_output(&b, 1, HFXB_DIMS(9));
        int32_t perm[3] = {2, 0, 1};
        hfxb_transpose(&b, 1, v, t, perm, 3);
        hfxb_unary(&b, 1, HFX_OP_TANH, t, o1);
        uint32_t cin[2] = {v, u};
        hfxb_concat(&b, 1, 2, cin, c, 2);
        int32_t st[3] = {1, 0, -1}, en[3] = {2, INT32_MAX, -7}, sp[3] = {1, 1, -2};
        hfxb_slice(&b, 1, c, sl, st, en, sp, 3);
        hfxb_op_add(&b, 1, HFX_OP_COPY, -1, 1, &sl, o2, NULL);
    }
    emit(dir, "elementwise_memory", &b);
    /* sigmoid / exp / reduce sum on task B only, task A empty */
    hfxb_init(&b);
    {
        uint32_t v = hfxb_input(&b, 1, HFXB_DIMS(5, 6));
        uint32_t t = hfxb_scratch(&b, 1, HFXB_DIMS(5, 6)), t2 = hfxb_scratch(&b, 1, HFXB_DIMS(5, 6));
        uint32_t o = hfxb_output(&b, 1, HFXB_DIMS(6));
        hfxb_unary(&b, 1, HFX_OP_SIGMOID, v, t);
        hfxb_unary(&b, 1, HFX_OP_EXP, t, t2);
        hfxb_reduce(&b, 1, HFX_OP_REDUCE_SUM, t2, o, 1u, 0);
    }
    emit(dir, "task_b_only", &b);
    /* pooling + hard activations | resize nearest + linear */
    hfxb_init(&b);
    {
        int32_t pads[4] = {1, 1, 1, 1}, st[2] = {2, 1}, dil[2] = {1, 2}, k[2] = {3, 2};
        uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(1, 3, 7, 6));
        uint32_t s1 = hfxb_scratch(&b, 0, HFXB_DIMS(1, 3, 4, 6));
        uint32_t s2 = hfxb_scratch(&b, 0, HFXB_DIMS(1, 3, 4, 6));
        uint32_t s3 = hfxb_scratch(&b, 0, HFXB_DIMS(1, 3, 4, 6));
        uint32_t s4 = hfxb_scratch(&b, 0, HFXB_DIMS(1, 3, 4, 6));
        uint32_t o = hfxb_output(&b, 0, HFXB_DIMS(1, 3, 1, 1));
        hfxb_pool(&b, 0, HFX_OP_MAXPOOL, x, s1, pads, st, dil, k, 1, 0);
        hfxb_pool(&b, 0, HFX_OP_AVGPOOL, x, s2, pads, st, dil, k, 0, 1);
        hfxb_binary(&b, 0, HFX_OP_ADD, s1, s2, s3);
        hfxb_hardsigmoid(&b, 0, s3, s4, 0.2f, 0.5f);
        uint32_t s5 = hfxb_scratch(&b, 0, HFXB_DIMS(1, 3, 4, 6));
        hfxb_unary(&b, 0, HFX_OP_HARDSWISH, s4, s5);
        hfxb_op_add(&b, 0, HFX_OP_GLOBAL_AVGPOOL, HFX_ENGINE_VECTOR, 1, &s5, o, NULL);
        uint32_t v = hfxb_input(&b, 1, HFXB_DIMS(2, 3, 5));
        uint32_t t = hfxb_scratch(&b, 1, HFXB_DIMS(2, 6, 10));
        uint32_t o1 = hfxb_output(&b, 1, HFXB_DIMS(2, 3, 2));
        hfxb_resize(&b, 1, v, t, HFX_RESIZE_NEAREST, HFX_RESIZE_COORD_ASYMMETRIC, HFX_RESIZE_NEAREST_FLOOR, 2.0f, 2.0f);
        hfxb_resize(&b, 1, t, o1, HFX_RESIZE_LINEAR, HFX_RESIZE_COORD_HALF_PIXEL, 0, 0.5f, 0.25f);
    }
    emit(dir, "pool_resize", &b);
    hfxb_init(&b);
    elementwise_chain(&b);
    emit(dir, "elementwise_chain", &b);
    hfxb_init(&b);
    logic_chain(&b);
    emit(dir, "logic_chain", &b);
    /* QDQ: DequantizeLinear u8 (constant scale and zero point) -> Relu -> QuantizeLinear i8 per
     * axis | DequantizeLinear of an int32 input */
    hfxb_init(&b);
    {
        static const uint8_t zp_u8[1] = {128};
        static const int8_t zp_i8[3] = {0, -1, 5};
        static const float scales[3] = {0.5f, 0.25f, 0.125f};
        uint32_t x = hfxb_set_dtype(&b, hfxb_input(&b, 0, HFXB_DIMS(2, 3, 4)), HFX_DTYPE_U8);
        uint32_t s = hfxb_const(&b, 0, HFXB_SCALAR, scales);
        uint32_t z = hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_SCALAR, (const float *)zp_u8), HFX_DTYPE_U8);
        uint32_t f = hfxb_scratch(&b, 0, HFXB_DIMS(2, 3, 4)), r = hfxb_scratch(&b, 0, HFXB_DIMS(2, 3, 4));
        hfxb_quant(&b, 0, HFX_OP_DEQUANTIZE_LINEAR, x, s, z, f, 0);
        hfxb_unary(&b, 0, HFX_OP_RELU, f, r);
        uint32_t s3 = hfxb_const(&b, 0, HFXB_DIMS(3), scales);
        uint32_t z3 = hfxb_set_dtype(&b, hfxb_const(&b, 0, HFXB_DIMS(3), (const float *)zp_i8), HFX_DTYPE_I8);
        uint32_t y = hfxb_set_dtype(&b, hfxb_output(&b, 0, HFXB_DIMS(2, 3, 4)), HFX_DTYPE_I8);
        hfxb_quant(&b, 0, HFX_OP_QUANTIZE_LINEAR, r, s3, z3, y, 1);
        uint32_t bx = hfxb_set_dtype(&b, hfxb_input(&b, 1, HFXB_DIMS(7)), HFX_DTYPE_I32);
        uint32_t bs = hfxb_input(&b, 1, HFXB_SCALAR);
        hfxb_quant(&b, 1, HFX_OP_DEQUANTIZE_LINEAR, bx, bs, HFXB_NONE, hfxb_output(&b, 1, HFXB_DIMS(7)), 0);
    }
    emit(dir, "quant", &b);
    for (int with_section = 0; with_section < 2; with_section++) {
        hfxb_init(&b);
        qmatmul_pair(&b, with_section);
        emit(dir, with_section ? "qmatmul_quant" : "qmatmul", &b);
    }
    for (int v = 0; v < 3; v++) {
        hfxb_sec sec = {0};
        hfxb_init(&b);
        v2_template(&b, &sec, v == 1, v == 2);
        emit(dir, v == 0 ? "v2_shapes" : v == 1 ? "v2_shapes_crc" : "v2_shapes_quant", &b);
        hfxb_sec_free(&sec);
    }
    printf("seeds written to %s\n", dir);
    return 0;
}
