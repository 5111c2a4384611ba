/* test_shapes.c - task program v2: header, shape section (evaluator, rules, specialization),
 * quantization section. */
#include "core.h"
#include "hexfuse/hexfuse.h"
#include "platform.h"
#include "program_builder.h"
#include "reference.h"
#include "test_util.h"

static hfx_pool *g_pool;

/* ---- the evaluator ------------------------------------------------------------------ */

#define W_CONST(v) HFX_EXPR_CONST, (uint32_t)(int32_t)(v)
#define W_SYM(k) (HFX_EXPR_SYM | ((uint32_t)(k) << 8))

static hfx_expr_fault eval(const uint32_t *w, uint32_t n, int64_t *v) {
    static const int64_t sym[3] = {7, INT64_MAX, INT64_MIN};
    return hfx_expr_eval(w, n, sym, 3, v);
}

#define EXPECT_VALUE(want, ...)                                                                          \
    do {                                                                                                 \
        const uint32_t w_[] = {__VA_ARGS__};                                                             \
        int64_t v_ = 0;                                                                                  \
        hfx_expr_fault f_ = eval(w_, (uint32_t)(sizeof w_ / sizeof w_[0]), &v_);                         \
        CHECK_MSG(f_ == HFX_EXPR_OK && v_ == (int64_t)(want), "fault %d value %lld want %lld", (int)f_, \
                  (long long)v_, (long long)(want));                                                     \
    } while (0)
#define EXPECT_FAULT(fault, ...)                                                             \
    do {                                                                                     \
        const uint32_t w_[] = {__VA_ARGS__};                                                 \
        int64_t v_ = 0;                                                                      \
        hfx_expr_fault f_ = eval(w_, (uint32_t)(sizeof w_ / sizeof w_[0]), &v_);             \
        CHECK_MSG(f_ == (fault), "fault %s, want %s", hfx_expr_fault_text(f_), #fault);      \
    } while (0)

static void test_instructions(void) {
    EXPECT_VALUE(-5, W_CONST(-5));
    EXPECT_VALUE(7, W_SYM(0));
    EXPECT_VALUE(10, W_SYM(0), W_CONST(3), HFX_EXPR_ADD);
    EXPECT_VALUE(4, W_SYM(0), W_CONST(3), HFX_EXPR_SUB);
    EXPECT_VALUE(-21, W_SYM(0), W_CONST(-3), HFX_EXPR_MUL);
    EXPECT_VALUE(2, W_SYM(0), W_CONST(3), HFX_EXPR_FLOORDIV);
    EXPECT_VALUE(-3, W_CONST(-7), W_CONST(3), HFX_EXPR_FLOORDIV);
    EXPECT_VALUE(-3, W_CONST(7), W_CONST(-3), HFX_EXPR_FLOORDIV);
    EXPECT_VALUE(2, W_CONST(-7), W_CONST(-3), HFX_EXPR_FLOORDIV);
    EXPECT_VALUE(3, W_SYM(0), W_CONST(3), HFX_EXPR_CEILDIV);
    EXPECT_VALUE(-2, W_CONST(-7), W_CONST(3), HFX_EXPR_CEILDIV);
    EXPECT_VALUE(3, W_CONST(-7), W_CONST(-3), HFX_EXPR_CEILDIV);
    EXPECT_VALUE(2, W_CONST(6), W_CONST(3), HFX_EXPR_CEILDIV);
    EXPECT_VALUE(1, W_SYM(0), W_CONST(3), HFX_EXPR_MOD);
    EXPECT_VALUE(2, W_CONST(-7), W_CONST(3), HFX_EXPR_MOD);
    EXPECT_VALUE(-1, W_CONST(7), W_CONST(-2), HFX_EXPR_MOD);
    EXPECT_VALUE(0, W_SYM(2), W_CONST(-1), HFX_EXPR_MOD); /* INT64_MIN mod -1 */
    EXPECT_VALUE(-3, W_SYM(0), W_CONST(-3), HFX_EXPR_MIN);
    EXPECT_VALUE(7, W_SYM(0), W_CONST(-3), HFX_EXPR_MAX);
    EXPECT_VALUE(INT64_MIN, W_SYM(2), W_CONST(1), HFX_EXPR_CEILDIV);
    EXPECT_VALUE(INT64_MAX, W_SYM(2), W_CONST(1), HFX_EXPR_ADD, W_CONST(-1), HFX_EXPR_MUL);
    EXPECT_VALUE(INT32_MAX, HFX_EXPR_CONST, 0x7fffffffu);
    EXPECT_VALUE(INT32_MIN, HFX_EXPR_CONST, 0x80000000u);
    /* floor((h + 2 - 3) / 2) + 1 with h = 7 */
    EXPECT_VALUE(4, W_SYM(0), W_CONST(2), HFX_EXPR_ADD, W_CONST(3), HFX_EXPR_SUB, W_CONST(2), HFX_EXPR_FLOORDIV,
                 W_CONST(1), HFX_EXPR_ADD);
    /* instruction words ignore bits 8..31 except for SYM (as shape_expr.run) */
    EXPECT_VALUE(10, W_SYM(0), W_CONST(3), HFX_EXPR_ADD | 0x100u);
}

static void test_faults(void) {
    EXPECT_FAULT(HFX_EXPR_DIV_ZERO, W_SYM(0), W_CONST(0), HFX_EXPR_FLOORDIV);
    EXPECT_FAULT(HFX_EXPR_DIV_ZERO, W_SYM(0), W_CONST(0), HFX_EXPR_CEILDIV);
    EXPECT_FAULT(HFX_EXPR_DIV_ZERO, W_SYM(0), W_CONST(0), HFX_EXPR_MOD);
    EXPECT_FAULT(HFX_EXPR_INT_OVERFLOW, W_SYM(1), W_CONST(1), HFX_EXPR_ADD);
    EXPECT_FAULT(HFX_EXPR_INT_OVERFLOW, W_SYM(2), W_CONST(1), HFX_EXPR_SUB);
    EXPECT_FAULT(HFX_EXPR_INT_OVERFLOW, W_SYM(1), W_CONST(2), HFX_EXPR_MUL);
    EXPECT_FAULT(HFX_EXPR_INT_OVERFLOW, W_SYM(2), W_CONST(-1), HFX_EXPR_MUL);
    EXPECT_FAULT(HFX_EXPR_INT_OVERFLOW, W_SYM(2), W_CONST(-1), HFX_EXPR_FLOORDIV);
    EXPECT_FAULT(HFX_EXPR_INT_OVERFLOW, W_SYM(2), W_CONST(-1), HFX_EXPR_CEILDIV);
    EXPECT_FAULT(HFX_EXPR_UNDERFLOW, W_SYM(0), HFX_EXPR_ADD);
    EXPECT_FAULT(HFX_EXPR_UNDERFLOW, HFX_EXPR_MAX);
    EXPECT_FAULT(HFX_EXPR_LEFT, W_SYM(0), W_SYM(0));
    EXPECT_FAULT(HFX_EXPR_NO_CONST_VALUE, W_SYM(0), HFX_EXPR_CONST);
    EXPECT_FAULT(HFX_EXPR_BAD_SYMBOL, W_SYM(3));
    EXPECT_FAULT(HFX_EXPR_BAD_CODE, W_SYM(0), 0u);
    EXPECT_FAULT(HFX_EXPR_BAD_CODE, W_SYM(0), W_SYM(0), 11u);
    EXPECT_FAULT(HFX_EXPR_BAD_CODE, W_SYM(0), W_SYM(0), 255u);
    /* 16 values fit, the 17th overflows */
    uint32_t w[40];
    for (uint32_t i = 0; i < 17; i++) w[i] = W_SYM(0);
    for (uint32_t i = 0; i < 15; i++) w[16 + i] = HFX_EXPR_ADD;
    int64_t v = 0;
    CHECK(hfx_expr_eval(w, 31, (const int64_t[]){2}, 1, &v) == HFX_EXPR_OK && v == 32);
    w[16] = W_SYM(0);
    CHECK(hfx_expr_eval(w, 17, (const int64_t[]){2}, 1, &v) == HFX_EXPR_STACK_FULL);
    CHECK(hfx_expr_eval(w, 0, (const int64_t[]){2}, 1, &v) == HFX_EXPR_LEFT);
}

/* ---- a template ----------------------------------------------------------------------- *
 * task A: x[N,32] @ W[32,8] -> s -> Relu -> ya[N,8]
 * task B: xb[1,3,H,W] conv 3x3 pad 1 stride 2 -> c[1,4,OH,OW] -> Relu -> yb;
 *         xs[2,T] slice axis 1 [1, T-1) -> ys[2,T-2]
 * symbols: 0 N (input 0 axis 0), 1 H (input 1 axis 2), 2 W (input 1 axis 3), 3 T (input 2 axis 1) */

enum { T_X, T_W, T_S, T_YA, T_XB, T_WC, T_C, T_YB, T_XS, T_YS, N_TENSORS };
enum { O_GEMM, O_RELU_A, O_CONV, O_RELU_B, O_SLICE };
#define OUT_LEN(s) W_SYM(s), W_CONST(2), HFX_EXPR_ADD, W_CONST(3), HFX_EXPR_SUB, W_CONST(2), HFX_EXPR_FLOORDIV, W_CONST(1), HFX_EXPR_ADD
static float g_w[32 * 8], g_wc[4 * 3 * 3 * 3];

static void template_sections(hfxb_sec *s) {
    hfxb_sec_symbols(s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_input_dim(s, T_X, 0, 0);
    hfxb_sec_input_dim(s, T_XB, 2, 1);
    hfxb_sec_input_dim(s, T_XB, 3, 2);
    hfxb_sec_input_dim(s, T_XS, 1, 3);
    uint32_t n = W_SYM(0);
    hfxb_sec_patch(s, HFX_PATCH_TENSOR_DIM, T_S, 0, 1, &n);
    hfxb_sec_patch(s, HFX_PATCH_TENSOR_DIM, T_YA, 0, 1, &n);
    for (uint32_t t = T_C; t <= T_YB; t++)
        for (uint32_t a = 0; a < 2; a++) {
            const uint32_t len[] = {OUT_LEN(1 + a)};
            hfxb_sec_patch(s, HFX_PATCH_TENSOR_DIM, t, 2 + a, 13, len);
        }
    hfxb_sec_patch(s, HFX_PATCH_OP_PARAM, O_SLICE, HFX_P_SLICE_ENDS + 1, 4,
                   (const uint32_t[]){W_SYM(3), W_CONST(1), HFX_EXPR_SUB});
    hfxb_sec_patch(s, HFX_PATCH_TENSOR_DIM, T_YS, 1, 4, (const uint32_t[]){W_SYM(3), W_CONST(2), HFX_EXPR_SUB});
}

/* representative N 16, H 9, W 9, T 10 */
static uint8_t *template_program(size_t *size, int crc) {
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(16, 32));
    uint32_t w = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(32, 8), g_w);
    uint32_t s = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(16, 8));
    uint32_t ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(16, 8));
    hfxb_gemm(&b, HFX_TASK_A, x, w, HFXB_NONE, s, 0, 0, 1.0f, 0.0f);
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, s, ya);
    uint32_t xb = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(1, 3, 9, 9));
    uint32_t wc = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(4, 3, 3, 3), g_wc);
    uint32_t c = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(1, 4, 5, 5));
    uint32_t yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(1, 4, 5, 5));
    hfxb_conv(&b, HFX_TASK_B, xb, wc, HFXB_NONE, c, (const int32_t[]){1, 1, 1, 1}, (const int32_t[]){2, 2},
              (const int32_t[]){1, 1}, 1);
    hfxb_unary(&b, HFX_TASK_B, HFX_OP_RELU, c, yb);
    uint32_t xs = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(2, 10));
    uint32_t ys = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(2, 8));
    hfxb_slice(&b, HFX_TASK_B, xs, ys, (const int32_t[]){0, 1}, (const int32_t[]){INT32_MAX, 9},
               (const int32_t[]){1, 1}, 2);
    hfxb_sec sec = {0};
    template_sections(&sec);
    return hfxb_encode_shapes(&b, &sec, crc, size);
}

typedef struct shapes {
    int64_t d[3][4];
    uint32_t rank[3];
} shapes;

static shapes shapes_of(int64_t n, int64_t h, int64_t w, int64_t t) {
    shapes s = {{{n, 32}, {1, 3, h, w}, {2, t}}, {2, 4, 2}};
    return s;
}

static hfx_status specialize(const uint8_t *bytes, size_t size, const shapes *s, uint8_t *out, hfx_error *err) {
    const int64_t *dims[3] = {s->d[0], s->d[1], s->d[2]};
    return hfx_program_specialize(bytes, size, dims, s->rank, 3, out, err);
}

static void test_template_parses(void) {
    size_t n;
    uint8_t *t = template_program(&n, 1);
    hfx_program *p = NULL;
    hfx_error e;
    CHECK_MSG(hfx_program_parse(t, n, &p, &e) == HFX_OK, "%s at %u", e.message, e.byte_offset);
    CHECK(hfx_program_version(p) == 2 && hfx_program_num_symbols(p) == 4);
    hfx_program_free(p);
    /* at its own shapes the template specializes to itself */
    uint8_t *o = malloc(n);
    shapes s = shapes_of(16, 9, 9, 10);
    CHECK(specialize(t, n, &s, o, &e) == HFX_OK && memcmp(o, t, n) == 0);
    free(o);
    free(t);
}

/* runs program bytes at shapes s on the pool and checks every output against reference.h */
static void run_against_reference(const uint8_t *bytes, size_t size, const shapes *s) {
    hfx_program *p = NULL;
    hfx_error e;
    CHECK_MSG(hfx_program_parse(bytes, size, &p, &e) == HFX_OK, "%s", e.message);
    if (!p) return;
    rshape xs = {2, {(uint32_t)s->d[0][0], 32}}, ws = {2, {32, 8}}, ya_s = {2, {(uint32_t)s->d[0][0], 8}};
    uint32_t oh = (uint32_t)((s->d[1][2] - 1) / 2 + 1), ow = (uint32_t)((s->d[1][3] - 1) / 2 + 1);
    rshape xbs = {4, {1, 3, (uint32_t)s->d[1][2], (uint32_t)s->d[1][3]}}, wcs = {4, {4, 3, 3, 3}};
    rshape ybs = {4, {1, 4, oh, ow}}, xss = {2, {2, (uint32_t)s->d[2][1]}}, yss = {2, {2, (uint32_t)s->d[2][1] - 2}};
    hfx_tensor_info info;
    CHECK(hfx_program_output_info(p, 1, &info) == HFX_OK && info.dims[2] == oh && info.dims[3] == ow);
    float *x = rand_buf(rs_numel(&xs), -1, 1), *xb = rand_buf(rs_numel(&xbs), -1, 1), *xsl = rand_buf(rs_numel(&xss), -1, 1);
    float *ya = calloc(rs_numel(&ya_s), 4), *yb = calloc(rs_numel(&ybs), 4), *ys = calloc(rs_numel(&yss), 4);
    float *ra = calloc(rs_numel(&ya_s), 4), *rb = calloc(rs_numel(&ybs), 4), *rsl = calloc(rs_numel(&yss), 4);
    const void *ins[3] = {x, xb, xsl};
    void *outs[3] = {ya, yb, ys};
    CHECK(hfx_run(g_pool, p, ins, 3, outs, 3, NULL, NULL, NULL) == HFX_OK);
    ref_gemm(x, &xs, g_w, &ws, NULL, NULL, 0, 0, 1.0f, 0.0f, ra, &ya_s);
    ref_unary(HFX_OP_RELU, ra, ra, rs_numel(&ya_s));
    ref_conv(xb, &xbs, g_wc, &wcs, NULL, (const int32_t[]){1, 1, 1, 1}, (const int32_t[]){2, 2},
             (const int32_t[]){1, 1}, 1, rb, &ybs);
    ref_unary(HFX_OP_RELU, rb, rb, rs_numel(&ybs));
    ref_slice(xsl, &xss, (const int64_t[]){0, 1}, (const int64_t[]){1, 1}, rsl, &yss);
    CHECK(max_rel_err(ya, ra, rs_numel(&ya_s), 1e-3) <= 1e-4);
    CHECK(max_rel_err(yb, rb, rs_numel(&ybs), 1e-3) <= 1e-4);
    CHECK(memcmp(ys, rsl, rs_numel(&yss) * 4) == 0);
    free(x), free(xb), free(xsl), free(ya), free(yb), free(ys), free(ra), free(rb), free(rsl);
    hfx_program_free(p);
}

static void test_specialize_and_run(void) {
    size_t n;
    uint8_t *t = template_program(&n, 1);
    uint8_t *o = malloc(n), *o2 = malloc(n), *o3 = malloc(n);
    hfx_error e;
    /* the last: N = 0 empties task A, T = 2 empties the slice */
    const shapes cases[] = {shapes_of(16, 9, 9, 10), shapes_of(5, 13, 7, 20), shapes_of(1, 1, 2, 3),
                            shapes_of(300, 31, 64, 1000), shapes_of(0, 9, 9, 2)};
    const size_t n_cases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n_cases; i++) {
        CHECK_MSG(specialize(t, n, &cases[i], o, &e) == HFX_OK, "%s", e.message);
        run_against_reference(o, n, &cases[i]);
        /* the result is a template again: specialized twice equals specialized once */
        const shapes *next = &cases[(i + 1) % n_cases];
        CHECK(specialize(o, n, next, o2, &e) == HFX_OK);
        CHECK(specialize(t, n, next, o3, &e) == HFX_OK);
        CHECK(memcmp(o2, o3, n) == 0);
        CHECK(memcmp(t, o, HFX_HDR_N_TENSORS) == 0); /* header unchanged (CRC flag kept) */
        memcpy(o2, t, n); /* in place */
        CHECK(specialize(o2, n, &cases[i], o2, &e) == HFX_OK && memcmp(o2, o, n) == 0);
    }
    free(o), free(o2), free(o3);
    free(t);
}

#define EXPECT_SPEC_ERR(sh, status, text)                                                                   \
    do {                                                                                                   \
        shapes s_ = (sh);                                                                                  \
        hfx_status st_ = specialize(t, n, &s_, o, &e);                                                     \
        CHECK_MSG(st_ == (status) && strstr(e.message, (text)), "got %s (%s), want %s '%s'",              \
                  hfx_status_name(st_), e.message, #status, (text));                                       \
    } while (0)

static void test_specialize_errors(void) {
    size_t n;
    uint8_t *t = template_program(&n, 0);
    uint8_t *o = malloc(n);
    hfx_error e;
    shapes s = shapes_of(16, 9, 9, 10);
    s.d[0][1] = 33;
    EXPECT_SPEC_ERR(s, HFX_ERR_SHAPES, "input 0 axis 1: 33 but the program's static dim is 32");
    s = shapes_of(16, 9, 9, 10);
    s.rank[1] = 3;
    EXPECT_SPEC_ERR(s, HFX_ERR_SHAPES, "input 1: rank 3 but the program's input has rank 4");
    EXPECT_SPEC_ERR(shapes_of(-1, 9, 9, 10), HFX_ERR_SHAPES, "input 0 axis 0: -1 is not a dim");
    EXPECT_SPEC_ERR(shapes_of((int64_t)1 << 31, 9, 9, 10), HFX_ERR_SHAPES, "input 0 axis 0: 2147483648 is not");
    /* ys = [2, T - 2] */
    EXPECT_SPEC_ERR(shapes_of(16, 9, 9, 1), HFX_ERR_SHAPES, "tensor 9 dim 1): -1 at these input shapes is out of");
    /* a program that parses at the new shapes is not the specializer's business: the caller parses it */
    CHECK(specialize(t, n, &(shapes){{{4, 32}, {1, 3, 1, 1}, {2, 3}}, {2, 4, 2}}, o, &e) == HFX_OK);
    const int64_t *dims[3] = {s.d[0], s.d[1], s.d[2]};
    CHECK(hfx_program_specialize(t, n, dims, s.rank, 2, o, &e) == HFX_ERR_ARG);
    CHECK(hfx_program_specialize(NULL, n, dims, s.rank, 3, o, &e) == HFX_ERR_ARG);
    t[0] ^= 1;
    CHECK(hfx_program_specialize(t, n, dims, s.rank, 3, o, &e) == HFX_ERR_MAGIC);
    free(o);
    free(t);
}

/* a v1 program (no shape section) specializes to its own shapes only */
static void test_specialize_v1(void) {
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(4, 6));
    uint32_t y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4, 6));
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, x, y);
    for (int v2 = 0; v2 < 2; v2++) {
        b.v2 = v2;
        size_t n;
        uint8_t *t = hfxb_encode(&b, &n), *o = malloc(n);
        int64_t d[2] = {4, 6};
        const int64_t *dims[1] = {d};
        uint32_t rank = 2;
        hfx_error e;
        CHECK(hfx_program_specialize(t, n, dims, &rank, 1, o, &e) == HFX_OK && memcmp(o, t, n) == 0);
        d[0] = 5;
        CHECK(hfx_program_specialize(t, n, dims, &rank, 1, o, &e) == HFX_ERR_SHAPES &&
              strstr(e.message, "input 0 axis 0: 5 but the program's static dim is 4"));
        free(o);
        free(t);
    }
    hfxb_free(&b);
}

/* a specialized program the ops refuse: y's dim 0 is patched by a constant, x's follows N */
static void test_specialized_refused_by_ops(void) {
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(4, 6)), y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4, 6));
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, x, y);
    hfxb_sec sec = {0};
    hfxb_sec_symbols(&sec, 1, (const uint32_t[]){0, 0});
    hfxb_sec_input_dim(&sec, x, 0, 0);
    hfxb_sec_patch(&sec, HFX_PATCH_TENSOR_DIM, y, 0, 2, (const uint32_t[]){W_CONST(4)});
    size_t n;
    uint8_t *t = hfxb_encode_shapes(&b, &sec, 0, &n), *o = malloc(n);
    const int64_t d[2] = {5, 6};
    const int64_t *dims[1] = {d};
    hfx_error e;
    hfx_program *p = NULL;
    CHECK(hfx_program_specialize(t, n, dims, (const uint32_t[]){2}, 1, o, &e) == HFX_OK);
    CHECK(hfx_program_parse(o, n, &p, &e) == HFX_ERR_SHAPE && strstr(e.message, "op 0") && p == NULL);
    free(o);
    free(t);
}

/* ---- auto_pad SAME_* pads that follow the input ------------------------------------------ *
 * x[1,2,H,W] -> MAXPOOL 3x3 stride 2 SAME_LOWER -> p[1,2,ceil(H/2),ceil(W/2)] -> CONV2D 3x3 stride 2
 * SAME_UPPER (w[3,2,3,3]) -> y[1,3,ceil(ceil(H/2)/2),...]. Each pad is an OP_PARAM patch of the words
 * lowering.shapes writes (shape_expr.same_pads): total = max(0, (ceil(x/s) - 1) * s + k - x), its halves
 * floor(total/2) and ceil(total/2). Lowered at H = W = 8 (sides that are multiples of the strides). */

static float g_same_w[3 * 2 * 3 * 3];

/* the words of ceil(x/2) (depth 0: x itself, 1: ceil(x/2)) of symbol k; returns their count */
static uint32_t halved_side(uint32_t *w, uint32_t k, int halvings) {
    uint32_t n = 0;
    w[n++] = W_SYM(k);
    for (int i = 0; i < halvings; i++) {
        w[n++] = HFX_EXPR_CONST;
        w[n++] = 2;
        w[n++] = HFX_EXPR_CEILDIV;
    }
    return n;
}

/* a SAME pad of stride 2 and kernel 3 over `side`: floor(total / 2) (small) or ceil(total / 2) */
static uint32_t same_pad_words(uint32_t *w, const uint32_t *side, uint32_t n_side, int big) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_side; i++) w[n++] = side[i];
    const uint32_t mid[] = {W_CONST(2), HFX_EXPR_CEILDIV, W_CONST(1), HFX_EXPR_SUB, W_CONST(2), HFX_EXPR_MUL,
                            W_CONST(3), HFX_EXPR_ADD};
    for (uint32_t i = 0; i < sizeof mid / 4; i++) w[n++] = mid[i];
    for (uint32_t i = 0; i < n_side; i++) w[n++] = side[i];
    const uint32_t tail[] = {HFX_EXPR_SUB, W_CONST(0), HFX_EXPR_MAX, W_CONST(2)};
    for (uint32_t i = 0; i < sizeof tail / 4; i++) w[n++] = tail[i];
    w[n++] = big ? HFX_EXPR_CEILDIV : HFX_EXPR_FLOORDIV;
    return n;
}

/* patches op `op`'s pads (slots 0..3: top, left, bottom, right) over input axes 2, 3 halved `halvings` times */
static void same_pad_patches(hfxb_sec *s, uint32_t op, int halvings, int upper) {
    for (uint32_t axis = 0; axis < 2; axis++) {
        uint32_t side[8], w[64];
        uint32_t n_side = halved_side(side, axis, halvings);
        for (int end = 0; end < 2; end++) {
            uint32_t n = same_pad_words(w, side, n_side, upper ? end : !end);
            hfxb_sec_patch(s, HFX_PATCH_OP_PARAM, op, axis + 2u * (uint32_t)end, n, w);
        }
    }
}

static uint8_t *same_pads_program(size_t *size) {
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(1, 2, 8, 8));
    uint32_t p = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(1, 2, 4, 4));
    uint32_t w = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(3, 2, 3, 3), g_same_w);
    uint32_t y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(1, 3, 2, 2));
    const int32_t two[2] = {2, 2}, one[2] = {1, 1}, three[2] = {3, 3};
    hfxb_pool(&b, HFX_TASK_A, HFX_OP_MAXPOOL, x, p, (const int32_t[]){1, 1, 0, 0}, two, one, three, 0, 0);
    hfxb_conv(&b, HFX_TASK_A, p, w, HFXB_NONE, y, (const int32_t[]){0, 0, 1, 1}, two, one, 1);
    hfxb_sec sec = {0};
    hfxb_sec_symbols(&sec, 2, (const uint32_t[]){0, 2, 0, 3});
    hfxb_sec_input_dim(&sec, x, 2, 0);
    hfxb_sec_input_dim(&sec, x, 3, 1);
    for (uint32_t axis = 0; axis < 2; axis++) {
        uint32_t side[8];
        hfxb_sec_patch(&sec, HFX_PATCH_TENSOR_DIM, p, 2 + axis, halved_side(side, axis, 1), side);
        hfxb_sec_patch(&sec, HFX_PATCH_TENSOR_DIM, y, 2 + axis, halved_side(side, axis, 2), side);
    }
    same_pad_patches(&sec, 0, 0, 0);
    same_pad_patches(&sec, 1, 1, 1);
    return hfxb_encode_shapes(&b, &sec, 1, size);
}

/* ONNX Runtime's SAME pads of one axis (stride 2, kernel 3): [begin, end] */
static void ort_same_pads(int64_t x, int upper, int32_t *begin, int32_t *end) {
    int64_t total = ((x + 1) / 2 - 1) * 2 + 3 - x;
    total = total < 0 ? 0 : total;
    int32_t small = (int32_t)(total / 2), big = (int32_t)(total - total / 2);
    *begin = upper ? small : big;
    *end = upper ? big : small;
}

static void test_same_pads_follow_the_input(void) {
    for (size_t i = 0; i < sizeof g_same_w / 4; i++) g_same_w[i] = rng_f(-1, 1);
    size_t n;
    uint8_t *t = same_pads_program(&n), *o = malloc(n);
    const uint32_t sides[][2] = {{8, 8}, {45, 31}, {30, 50}, {1, 3}, {7, 2}, {33, 64}};
    for (size_t c = 0; c < sizeof sides / sizeof sides[0]; c++) {
        uint32_t H = sides[c][0], W = sides[c][1], PH = (H + 1) / 2, PW = (W + 1) / 2, YH = (PH + 1) / 2,
                 YW = (PW + 1) / 2;
        const int64_t d[4] = {1, 2, H, W};
        const int64_t *dims[1] = {d};
        hfx_error e;
        CHECK_MSG(hfx_program_specialize(t, n, dims, (const uint32_t[]){4}, 1, o, &e) == HFX_OK, "%s", e.message);
        hfx_program *prog = NULL;
        CHECK_MSG(hfx_program_parse(o, n, &prog, &e) == HFX_OK, "%ux%u: %s", H, W, e.message);
        if (!prog) continue;
        int32_t pool[12] = {0, 0, 0, 0, 2, 2, 1, 1, 3, 3, 0, 0}, conv[4];
        ort_same_pads(H, 0, &pool[0], &pool[2]);
        ort_same_pads(W, 0, &pool[1], &pool[3]);
        ort_same_pads(PH, 1, &conv[0], &conv[2]);
        ort_same_pads(PW, 1, &conv[1], &conv[3]);
        rshape xs = {4, {1, 2, H, W}}, ps = {4, {1, 2, PH, PW}}, ws = {4, {3, 2, 3, 3}}, ys = {4, {1, 3, YH, YW}};
        float *x = rand_buf(rs_numel(&xs), -1, 1), *y = calloc(rs_numel(&ys), 4);
        float *rp = calloc(rs_numel(&ps), 4), *ry = calloc(rs_numel(&ys), 4);
        const void *ins[1] = {x};
        void *outs[1] = {y};
        CHECK(hfx_run(g_pool, prog, ins, 1, outs, 1, NULL, NULL, NULL) == HFX_OK);
        ref_pool2d(1, x, &xs, pool, rp, &ps);
        ref_conv(rp, &ps, g_same_w, &ws, NULL, conv, (const int32_t[]){2, 2}, (const int32_t[]){1, 1}, 1, ry, &ys);
        CHECK_MSG(max_rel_err(y, ry, rs_numel(&ys), 1e-3) <= 1e-4, "%ux%u", H, W);
        free(x), free(y), free(rp), free(ry);
        hfx_program_free(prog);
    }
    free(o);
    free(t);
}

/* ---- the section rules, each refused with HFX_ERR_SHAPES at its offset ----------------- */

static uint8_t *g_t;
static size_t g_n, g_sec; /* template bytes (no CRC), size, shape section offset */

static void expect_refused(const uint8_t *bytes, size_t n, hfx_status want, size_t offset, const char *what) {
    hfx_program *p = NULL;
    hfx_error e;
    hfx_status st = hfx_program_parse(bytes, n, &p, &e);
    CHECK_MSG(st == want && e.byte_offset == offset, "%s: got %s at %u (%s), want %s at %zu", what,
              hfx_status_name(st), e.byte_offset, e.message, hfx_status_name(want), offset);
    CHECK(p == NULL);
    hfx_program_free(p);
}

/* the template with the u32 at `off` set to v (u8 when byte) */
static void expect_field(size_t off, uint32_t v, int byte, hfx_status want, size_t at, const char *what) {
    uint8_t *c = malloc(g_n);
    memcpy(c, g_t, g_n);
    if (byte)
        c[off] = (uint8_t)v;
    else
        hfxb_put32(c + off, v);
    expect_refused(c, g_n, want, at, what);
    free(c);
}

/* a template whose shape section is `sec` (built by the caller) */
static void expect_section(hfxb_sec *sec, size_t at_in_section, const char *what) {
    size_t n;
    uint8_t *bytes = NULL;
    {
        /* rebuild the template program around the section */
        size_t tn;
        uint8_t *t = template_program(&tn, 0);
        size_t body = g_sec;
        n = body + sec->n;
        bytes = malloc(n);
        memcpy(bytes, t, body);
        memcpy(bytes + body, sec->bytes, sec->n);
        hfxb_put32(bytes + HFX_HDR_TOTAL_BYTES, (uint32_t)n);
        hfxb_put32(bytes + HFX_HDR_SHAPES_BYTES, (uint32_t)sec->n);
        free(t);
    }
    expect_refused(bytes, n, HFX_ERR_SHAPES, g_sec + at_in_section, what);
    free(bytes);
    hfxb_sec_free(sec);
}

/* section offsets of the template's records */
#define SYM_AT(k) (HFX_SHP_SYMBOLS + (k) * HFX_SYM_RECORD_BYTES)
#define COUNT_AT SYM_AT(4)
#define PATCH0 (COUNT_AT + 4)

static void test_section_header_fields(void) {
    expect_field(g_sec + HFX_SHP_N_SYMBOLS, 0, 0, HFX_ERR_SHAPES, g_sec, "no symbols");
    expect_field(g_sec + HFX_SHP_N_SYMBOLS, 65, 0, HFX_ERR_SHAPES, g_sec, "65 symbols");
    expect_field(g_sec + SYM_AT(1) + HFX_SYM_IO_INDEX, 3, 0, HFX_ERR_SHAPES, g_sec + SYM_AT(1), "io index 3");
    expect_field(g_sec + SYM_AT(1) + HFX_SYM_AXIS, 4, 0, HFX_ERR_SHAPES, g_sec + SYM_AT(1) + 4, "axis = rank");
    expect_field(g_sec + SYM_AT(2) + HFX_SYM_AXIS, 2, 0, HFX_ERR_SHAPES, g_sec + SYM_AT(2), "duplicate symbol");
    expect_field(g_sec + COUNT_AT, 65536, 0, HFX_ERR_SHAPES, g_sec + COUNT_AT, "65536 patches");
    expect_field(g_sec + COUNT_AT, 14, 0, HFX_ERR_SHAPES, g_n, "more patches than the section holds");
    expect_field(g_sec + COUNT_AT, 11, 0, HFX_ERR_SHAPES, g_n - 28, "bytes after the last patch");
    expect_field(g_sec + PATCH0 + HFX_PATCH_TARGET, 0, 1, HFX_ERR_SHAPES, g_sec + PATCH0, "target 0");
    expect_field(g_sec + PATCH0 + HFX_PATCH_TARGET, 3, 1, HFX_ERR_SHAPES, g_sec + PATCH0, "target 3");
    expect_field(g_sec + PATCH0 + HFX_PATCH_RESERVED, 1, 1, HFX_ERR_SHAPES, g_sec + PATCH0 + 1, "reserved");
    expect_field(g_sec + PATCH0, HFX_PATCH_TENSOR_DIM, 0, HFX_ERR_SHAPES, g_sec + PATCH0 + 2, "0 words");
    expect_field(g_sec + PATCH0, HFX_PATCH_TENSOR_DIM | 65u << 16, 0, HFX_ERR_SHAPES, g_sec + PATCH0 + 2, "65 words");
    expect_field(g_n - 28, HFX_PATCH_TENSOR_DIM | 64u << 16, 0, HFX_ERR_SHAPES, g_n, "code beyond the section");
}

static void test_section_targets(void) {
    size_t p0 = g_sec + PATCH0;
    expect_field(p0 + HFX_PATCH_ID, N_TENSORS, 0, HFX_ERR_SHAPES, p0 + HFX_PATCH_ID, "tensor out of range");
    expect_field(p0 + HFX_PATCH_SLOT, 2, 0, HFX_ERR_SHAPES, p0 + HFX_PATCH_SLOT, "axis = rank");
    expect_field(p0 + HFX_PATCH_ID, T_W, 0, HFX_ERR_SHAPES, p0 + HFX_PATCH_ID, "constant patched");
    /* the input dim patch moved to another input's dim */
    expect_field(p0 + HFX_PATCH_ID, T_XS, 0, HFX_ERR_SHAPES, p0 + HFX_PATCH_CODE, "another symbol's input dim");
    hfxb_sec s = {0};
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_input_dim(&s, T_X, 0, 0);
    hfxb_sec_input_dim(&s, T_X, 0, 0);
    expect_section(&s, PATCH0 + 16, "input dim patched twice");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_TENSOR_DIM, T_X, 0, 4, (const uint32_t[]){W_SYM(0), W_CONST(0), HFX_EXPR_ADD});
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "input dim patched by an expression");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_input_dim(&s, T_X, 0, 3);
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "input dim patched by another symbol");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_OP_PARAM, 5, 0, 2, (const uint32_t[]){W_CONST(0)});
    expect_section(&s, PATCH0 + HFX_PATCH_ID, "op out of range");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_OP_PARAM, 0, 32, 2, (const uint32_t[]){W_CONST(0)});
    expect_section(&s, PATCH0 + HFX_PATCH_SLOT, "param slot 32");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_OP_PARAM, O_SLICE, 9, 2, (const uint32_t[]){W_CONST(9)});
    hfxb_sec_patch(&s, HFX_PATCH_OP_PARAM, O_SLICE, 9, 2, (const uint32_t[]){W_CONST(9)});
    expect_section(&s, PATCH0 + 20, "param patched twice");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_TENSOR_DIM, T_S, 0, 4, (const uint32_t[]){W_SYM(0), W_CONST(0), HFX_EXPR_FLOORDIV});
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "division by zero at the representative shapes");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_TENSOR_DIM, T_S, 0, 4, (const uint32_t[]){W_SYM(0), W_CONST(1), HFX_EXPR_ADD});
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "value differs from the stored dim");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_OP_PARAM, O_SLICE, 9, 2, (const uint32_t[]){W_CONST(8)});
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "value differs from the stored param");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_TENSOR_DIM, T_S, 0, 2, (const uint32_t[]){W_SYM(0), W_SYM(0)});
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "two values left");
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    hfxb_sec_patch(&s, HFX_PATCH_TENSOR_DIM, T_S, 0, 1, (const uint32_t[]){W_SYM(4)});
    expect_section(&s, PATCH0 + HFX_PATCH_CODE, "symbol 4 of 4");
    /* a section of fewer than 4 bytes: sizes are multiples of 4, so only 0 (no section) */
    hfxb_sec_symbols(&s, 4, (const uint32_t[]){0, 0, 1, 2, 1, 3, 2, 1});
    s.n -= 4; /* no patch count */
    expect_section(&s, SYM_AT(4), "section ends inside the symbol table");
    /* an unpatched input dim named by a symbol is static; no patch at all is fine */
    hfxb_sec_symbols(&s, 1, (const uint32_t[]){0, 0});
    {
        size_t tn;
        uint8_t *t = template_program(&tn, 0);
        uint8_t *c = malloc(g_sec + s.n);
        memcpy(c, t, g_sec);
        memcpy(c + g_sec, s.bytes, s.n);
        hfxb_put32(c + HFX_HDR_TOTAL_BYTES, (uint32_t)(g_sec + s.n));
        hfxb_put32(c + HFX_HDR_SHAPES_BYTES, (uint32_t)s.n);
        hfx_program *p = NULL;
        hfx_error e;
        CHECK_MSG(hfx_program_parse(c, g_sec + s.n, &p, &e) == HFX_OK, "%s", e.message);
        hfx_program_free(p);
        free(c);
        free(t);
    }
    hfxb_sec_free(&s);
}

static void test_v2_header(void) {
    expect_field(HFX_HDR_HEADER_BYTES, 48 | 2u << 16, 0, HFX_ERR_HEADER, HFX_HDR_HEADER_BYTES, "v2 with 48 bytes");
    expect_field(HFX_HDR_VERSION, 1 | 64u << 16, 0, HFX_ERR_HEADER, HFX_HDR_HEADER_BYTES, "v1 with 64 bytes");
    expect_field(HFX_HDR_TENSORS_OFFSET, 48, 0, HFX_ERR_HEADER, HFX_HDR_TENSORS_OFFSET, "tensors at 48");
    expect_field(HFX_HDR_SHAPES_BYTES, (uint32_t)(g_n - g_sec) - 2, 0, HFX_ERR_HEADER, HFX_HDR_SHAPES_BYTES,
                 "shapes not a multiple of 4");
    expect_field(HFX_HDR_QUANT_BYTES, 2, 0, HFX_ERR_HEADER, HFX_HDR_QUANT_BYTES, "quant not a multiple of 4");
    expect_field(HFX_HDR_RESERVED, 1, 0, HFX_ERR_HEADER, HFX_HDR_RESERVED, "reserved 0");
    expect_field(HFX_HDR_RESERVED + 4, 1, 0, HFX_ERR_HEADER, HFX_HDR_RESERVED + 4, "reserved 1");
    expect_field(HFX_HDR_SHAPES_BYTES, 0x7ffffffc, 0, HFX_ERR_HEADER, HFX_HDR_SHAPES_BYTES, "sections too big");
    expect_field(HFX_HDR_QUANT_BYTES, 4, 0, HFX_ERR_HEADER, HFX_HDR_DATA_BYTES, "data section shifted");
    /* data_bytes must be a multiple of 4: one more data byte, one fewer section byte is refused */
    uint32_t db = hfx_rd_u32(g_t + HFX_HDR_DATA_BYTES);
    expect_field(HFX_HDR_DATA_BYTES, db + 1, 0, HFX_ERR_HEADER, HFX_HDR_DATA_BYTES, "data not a multiple of 4");
    /* truncated below the v2 header */
    expect_refused(g_t, 60, HFX_ERR_TRUNCATED, 60, "60 bytes");
    for (size_t k = 0; k < g_n; k++) {
        hfx_program *p = NULL;
        hfx_error e;
        hfx_status st = hfx_program_parse(g_t, k, &p, &e);
        CHECK(st != HFX_OK && p == NULL);
    }
    /* the CRC covers the sections */
    size_t n;
    uint8_t *t = template_program(&n, 1);
    t[n - 12] ^= 1;
    expect_refused(t, n, HFX_ERR_HEADER, n - 4, "flipped section byte under CRC");
    free(t);
}

/* ---- dtypes and the quantization section ----------------------------------------------- */

static float g_q[64];

/* a v2 program with integer constants; entries: 4 words each */
static hfx_status quant_program(const int32_t *entries, uint32_t n, int v2_dtypes, hfx_error *e, uint32_t *q_off) {
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(4, 3));
    uint32_t y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4, 3));
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, x, y);
    /* 2 q [4,3] u8, 3 scale1 f32 [1], 4 scale4 f32 [4], 5 zp4 u8 [4], 6 zp1 i8 [1], 7 q16 [4,3] u16|i16 */
    static const uint8_t dtypes[6] = {HFX_DTYPE_U8, HFX_DTYPE_F32, HFX_DTYPE_F32, HFX_DTYPE_U8, HFX_DTYPE_I8, 0};
    const uint32_t dims[6][2] = {{4, 3}, {1, 1}, {4, 1}, {4, 1}, {1, 1}, {4, 3}};
    for (uint32_t i = 0; i < 6; i++) {
        uint32_t id = hfxb_const(&b, HFX_TASK_A, dims[i][1] == 1 ? 1 : 2, dims[i], g_q);
        uint8_t dt = dtypes[i] ? dtypes[i] : (uint8_t)(v2_dtypes == 1 ? HFX_DTYPE_U16 : HFX_DTYPE_I16);
        b.t[id].dtype = dt;
        size_t numel = dims[i][0] * dims[i][1];
        b.t[id].data_bytes = numel * (dt == HFX_DTYPE_F32 ? 4 : dt == HFX_DTYPE_U8 || dt == HFX_DTYPE_I8 ? 1 : 2);
    }
    uint8_t sec[4 + 16 * 8];
    hfxb_put32(sec, n);
    for (uint32_t i = 0; i < 4 * n; i++) hfxb_put32(sec + 4 + 4 * i, (uint32_t)entries[i]);
    b.v2 = v2_dtypes >= 0;
    b.quant = sec;
    b.quant_bytes = 4 + 16 * n;
    size_t size;
    uint8_t *bytes = hfxb_encode(&b, &size);
    *q_off = (uint32_t)(size - b.quant_bytes);
    hfx_program *p = NULL;
    hfx_status st = hfx_program_parse(bytes, size, &p, e);
    hfx_program_free(p);
    free(bytes);
    hfxb_free(&b);
    return st;
}

#define NOZP -1 /* 0xffffffff */
#define EXPECT_QUANT(status, at_entry_field, ...)                                                              \
    do {                                                                                                       \
        const int32_t en_[] = {__VA_ARGS__};                                                                   \
        hfx_error e_;                                                                                          \
        uint32_t q_;                                                                                           \
        hfx_status st_ = quant_program(en_, (uint32_t)(sizeof en_ / 16), 1, &e_, &q_);                         \
        long want_at_ = (at_entry_field) < 0 ? -1 : (long)(q_ + (uint32_t)(at_entry_field));                   \
        CHECK_MSG(st_ == (status) && (want_at_ < 0 || e_.byte_offset == want_at_), "got %s at %u (%s), want %s", \
                  hfx_status_name(st_), e_.byte_offset, e_.message, #status);                                  \
    } while (0)
#define E(i, field) (HFX_QNT_ENTRIES + 16 * (i) + (field))

static void test_quant_section(void) {
    EXPECT_QUANT(HFX_OK, -1, 2, 4, 5, 0, 7, 3, NOZP, -1);
    EXPECT_QUANT(HFX_OK, -1, 2, 3, NOZP, -1);
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_TENSOR), 12, 3, NOZP, -1);
    EXPECT_QUANT(HFX_ERR_DTYPE, E(0, HFX_QREC_TENSOR), 0, 3, NOZP, -1); /* f32 input */
    EXPECT_QUANT(HFX_ERR_TENSOR, E(1, HFX_QREC_TENSOR), 2, 3, NOZP, -1, 2, 3, NOZP, -1);
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_AXIS), 2, 3, NOZP, -2);
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_AXIS), 2, 4, NOZP, 2);
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_SCALE), 2, 4, NOZP, -1);   /* 4 scales per tensor */
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_SCALE), 2, 4, NOZP, 1);    /* axis 1 has 3 channels */
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_SCALE), 2, 0, NOZP, -1);   /* an input as scale */
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_SCALE), 2, 99, NOZP, -1);
    EXPECT_QUANT(HFX_ERR_DTYPE, E(0, HFX_QREC_SCALE), 2, 6, NOZP, -1);    /* i8 scale */
    EXPECT_QUANT(HFX_ERR_DTYPE, E(0, HFX_QREC_ZERO_POINT), 2, 3, 6, -1);  /* i8 zero point of a u8 tensor */
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_ZERO_POINT), 2, 3, 5, -1); /* 4 zero points, 1 scale */
    EXPECT_QUANT(HFX_ERR_TENSOR, E(0, HFX_QREC_ZERO_POINT), 2, 3, 50, -1);
    /* count and size disagree */
    hfx_error e;
    uint32_t q;
    CHECK(quant_program((const int32_t[]){2, 3, NOZP, -1}, 1, 1, &e, &q) == HFX_OK);
    {
        hfxb b;
        hfxb_init(&b);
        uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(4));
        uint32_t y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4));
        hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, x, y);
        uint8_t sec[20] = {2}; /* says 2 entries, holds 1 */
        b.v2 = 1;
        b.quant = sec;
        b.quant_bytes = 20;
        size_t n;
        uint8_t *bytes = hfxb_encode(&b, &n);
        expect_refused(bytes, n, HFX_ERR_HEADER, n - 20, "2 entries in 20 bytes");
        free(bytes);
        hfxb_free(&b);
    }
    /* u16 / i16 are v2 tensor dtypes: parsed in v2, unknown in v1 */
    CHECK(quant_program((const int32_t[]){7, 3, NOZP, -1}, 1, 1, &e, &q) == HFX_OK);
    CHECK(quant_program((const int32_t[]){7, 3, NOZP, -1}, 1, 2, &e, &q) == HFX_OK);
    CHECK(quant_program((const int32_t[]){2, 3, NOZP, -1}, 0, -1, &e, &q) == HFX_ERR_DTYPE);
}

/* ops still refuse non-f32 (bool too) */
static void test_ops_refuse_int(void) {
    for (uint8_t dt = HFX_DTYPE_U16; dt <= HFX_DTYPE_BOOL; dt++) {
        hfxb b;
        hfxb_init(&b);
        uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(4));
        uint32_t y = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(4));
        hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, x, y);
        b.t[x].dtype = dt;
        b.v2 = 1;
        size_t n;
        uint8_t *bytes = hfxb_encode(&b, &n);
        hfx_error e;
        hfx_program *p = NULL;
        CHECK(hfx_program_parse(bytes, n, &p, &e) == HFX_ERR_DTYPE && strstr(e.message, "op 0"));
        free(bytes);
        hfxb_free(&b);
    }
}

int main(void) {
    for (size_t i = 0; i < sizeof g_w / 4; i++) g_w[i] = rng_f(-1, 1);
    for (size_t i = 0; i < sizeof g_wc / 4; i++) g_wc[i] = rng_f(-1, 1);
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    if (hfx_pool_create(&cfg, &g_pool) != HFX_OK) return 1;
    g_t = template_program(&g_n, 0);
    g_sec = hfx_rd_u32(g_t + HFX_HDR_DATA_OFFSET) + hfx_rd_u32(g_t + HFX_HDR_DATA_BYTES);
    RUN_TEST(test_instructions);
    RUN_TEST(test_faults);
    RUN_TEST(test_template_parses);
    RUN_TEST(test_specialize_and_run);
    RUN_TEST(test_specialize_errors);
    RUN_TEST(test_specialize_v1);
    RUN_TEST(test_specialized_refused_by_ops);
    RUN_TEST(test_same_pads_follow_the_input);
    RUN_TEST(test_section_header_fields);
    RUN_TEST(test_section_targets);
    RUN_TEST(test_v2_header);
    RUN_TEST(test_quant_section);
    RUN_TEST(test_ops_refuse_int);
    free(g_t);
    hfx_pool_destroy(g_pool);
    TEST_MAIN_END();
}
