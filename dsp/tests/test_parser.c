/* test_parser.c - task program parser and validator. */
#include "core.h"
#include "hexfuse/hexfuse.h"
#include "platform.h"
#include "program_builder.h"
#include "test_util.h"

static float g_w[64 * 64];

/* Base program: task A: y = Gemm(x, W) + bias -> Relu -> out_a (via scratch)
 *               task B: softmax(xb) -> out_b               */
static void base_program(hfxb *b) {
    hfxb_init(b);
    uint32_t x = hfxb_input(b, HFX_TASK_A, HFXB_DIMS(16, 32));
    uint32_t w = hfxb_const(b, HFX_TASK_A, HFXB_DIMS(32, 8), g_w);
    uint32_t s = hfxb_scratch(b, HFX_TASK_A, HFXB_DIMS(16, 8));
    uint32_t ya = hfxb_output(b, HFX_TASK_A, HFXB_DIMS(16, 8));
    hfxb_gemm(b, HFX_TASK_A, x, w, HFXB_NONE, s, 0, 0, 1.0f, 0.0f);
    hfxb_unary(b, HFX_TASK_A, HFX_OP_RELU, s, ya);
    uint32_t xb = hfxb_input(b, HFX_TASK_B, HFXB_DIMS(4, 10));
    uint32_t yb = hfxb_output(b, HFX_TASK_B, HFXB_DIMS(4, 10));
    hfxb_softmax(b, HFX_TASK_B, xb, yb, -1);
}
/* tensor ids: 0 x, 1 w, 2 s, 3 ya, 4 xb, 5 yb; ops: 0 gemm, 1 relu, 2 softmax */
#define NT 6u
#define TREC(i) (HFX_HEADER_BYTES + (i) * HFX_TENSOR_RECORD_BYTES)
#define OREC(j) (HFX_HEADER_BYTES + NT * HFX_TENSOR_RECORD_BYTES + (j) * HFX_OP_RECORD_BYTES)

static uint8_t *g_bytes;
static size_t g_size;

static void put32(uint8_t *p, uint32_t v) { hfxb_put32(p, v); }

static hfx_status parse_bytes(const uint8_t *bytes, size_t n, hfx_error *err) {
    hfx_program *p = NULL;
    hfx_status st = hfx_program_parse(bytes, n, &p, err);
    if (st == HFX_OK) {
        CHECK(p != NULL);
        hfx_program_free(p);
    } else {
        CHECK(p == NULL);
        CHECK(err->status == st);
        CHECK(err->message[0] != '\0');
    }
    return st;
}

/* copy of the base bytes with one u32 / u8 changed */
static hfx_status with_u32(size_t off, uint32_t v, hfx_error *err) {
    uint8_t *c = malloc(g_size);
    memcpy(c, g_bytes, g_size);
    put32(c + off, v);
    hfx_status st = parse_bytes(c, g_size, err);
    free(c);
    return st;
}
static hfx_status with_u8(size_t off, uint8_t v, hfx_error *err) {
    uint8_t *c = malloc(g_size);
    memcpy(c, g_bytes, g_size);
    c[off] = v;
    hfx_status st = parse_bytes(c, g_size, err);
    free(c);
    return st;
}

#define EXPECT_U32(off, v, status)                                                                   \
    do {                                                                                             \
        hfx_error e_;                                                                                \
        hfx_status st_ = with_u32((off), (v), &e_);                                                  \
        CHECK_MSG(st_ == (status), "got %s (%s), want %s", hfx_status_name(st_), e_.message, #status); \
    } while (0)
#define EXPECT_U8(off, v, status)                                                                    \
    do {                                                                                             \
        hfx_error e_;                                                                                \
        hfx_status st_ = with_u8((off), (v), &e_);                                                   \
        CHECK_MSG(st_ == (status), "got %s (%s), want %s", hfx_status_name(st_), e_.message, #status); \
    } while (0)

static void test_valid(void) {
    hfx_program *p;
    hfx_error err;
    CHECK(hfx_program_parse(g_bytes, g_size, &p, &err) == HFX_OK);
    CHECK(hfx_program_num_tensors(p) == NT);
    CHECK(hfx_program_num_ops(p) == 3);
    CHECK(hfx_program_num_task_ops(p, HFX_TASK_A) == 2);
    CHECK(hfx_program_num_task_ops(p, HFX_TASK_B) == 1);
    CHECK(hfx_program_num_inputs(p, 0) == 1 && hfx_program_num_inputs(p, 1) == 1);
    CHECK(hfx_program_num_outputs(p, 0) == 1 && hfx_program_num_outputs(p, 1) == 1);
    hfx_tensor_info ti;
    CHECK(hfx_program_input_info(p, 1, &ti) == HFX_OK);
    CHECK(ti.task == HFX_TASK_B && ti.rank == 2 && ti.dims[0] == 4 && ti.dims[1] == 10 && ti.bytes == 160);
    CHECK(hfx_program_output_info(p, 0, &ti) == HFX_OK && ti.dims[1] == 8);
    CHECK(hfx_program_input_info(p, 2, &ti) == HFX_ERR_ARG);
    hfx_op_info oi;
    CHECK(hfx_program_op_info(p, 2, &oi) == HFX_OK);
    CHECK(oi.opcode == HFX_OP_SOFTMAX && oi.task == HFX_TASK_B && oi.task_index == 0 && oi.n_items >= 1);
    CHECK(hfx_program_op_info(p, 3, &oi) == HFX_ERR_ARG);
    CHECK(hfx_program_scratch_bytes(p, 0) == 16 * 8 * 4 + (HFX_ARENA_ALIGN - (16 * 8 * 4) % HFX_ARENA_ALIGN) % HFX_ARENA_ALIGN);
    CHECK(hfx_program_scratch_bytes(p, 1) == 0);
    CHECK(p->ops[2].params[HFX_P_AXIS] == 1); /* normalized */
    /* constants are copied: the caller's buffer may go */
    CHECK(memcmp(p->blob + p->tensors[1].const_offset, g_w, sizeof(float) * 32 * 8) == 0);
    CHECK(((uintptr_t)(p->blob + p->tensors[1].const_offset) % HFX_CONST_ALIGN) == 0);
    hfx_program_free(p);
    CHECK(hfx_program_parse(NULL, 10, &p, &err) == HFX_ERR_ARG);
    CHECK(hfx_program_parse(g_bytes, g_size, NULL, &err) == HFX_ERR_ARG);
    CHECK(hfx_program_parse(g_bytes, g_size, &p, NULL) == HFX_OK); /* err optional */
    hfx_program_free(p);
}

static void test_header(void) {
    hfx_error e;
    EXPECT_U32(0, 0x12345678u, HFX_ERR_MAGIC);
    EXPECT_U8(4, 3, HFX_ERR_VERSION);
    EXPECT_U8(4, 2, HFX_ERR_HEADER); /* v2 needs the 64-byte header */
    EXPECT_U8(4, 0, HFX_ERR_VERSION);
    EXPECT_U8(6, 40, HFX_ERR_HEADER);
    EXPECT_U32(8, (uint32_t)g_size + 1, HFX_ERR_TRUNCATED);
    EXPECT_U32(8, (uint32_t)g_size - 1, HFX_ERR_HEADER);
    EXPECT_U32(12, 1, HFX_ERR_HEADER);
    EXPECT_U32(16, 0, HFX_ERR_HEADER);
    EXPECT_U32(16, 0xffffffffu, HFX_ERR_HEADER);
    EXPECT_U32(16, NT + 1, HFX_ERR_HEADER);  /* op table offset no longer matches */
    EXPECT_U32(20, 0, HFX_ERR_HEADER);
    EXPECT_U32(20, 5000, HFX_ERR_HEADER);
    EXPECT_U32(20, 4000, HFX_ERR_TRUNCATED); /* tables beyond the buffer */
    EXPECT_U32(24, 0x00010002u, HFX_ERR_TENSOR); /* 2 A inputs: B's input index falls in A's range */
    EXPECT_U32(28, 0x00010000u, HFX_ERR_TENSOR); /* 0 A outputs: A's output index out of range */
    EXPECT_U32(24, 0x00011001u, HFX_ERR_HEADER); /* count > 4096 */
    EXPECT_U32(32, 0, HFX_ERR_HEADER);
    EXPECT_U32(36, 0, HFX_ERR_HEADER);
    EXPECT_U32(40, 3, HFX_ERR_HEADER);
    EXPECT_U32(40, 0xffffffc0u, HFX_ERR_HEADER);
    EXPECT_U32(44, 0, HFX_ERR_HEADER);
    /* nonzero padding between the op table and the data section */
    size_t ops_end = OREC(3);
    CHECK(ops_end % 64 != 0);
    EXPECT_U8(ops_end, 1, HFX_ERR_HEADER);
    (void)e;
    /* trailing garbage */
    uint8_t *c = calloc(1, g_size + 8);
    memcpy(c, g_bytes, g_size);
    CHECK(parse_bytes(c, g_size + 8, &e) == HFX_ERR_HEADER);
    free(c);
}

static void test_io_counts_consistent(void) {
    /* the first io-count case above sets the same counts (1,1): must stay valid */
    hfx_error e;
    CHECK(with_u32(24, 0x00010001u, &e) == HFX_OK);
}

static void test_truncated_every_byte(void) {
    int bad = 0;
    for (size_t n = 0; n < g_size; n++) {
        /* exact-size copy so that ASan catches any read past n */
        uint8_t *c = malloc(n ? n : 1);
        memcpy(c, g_bytes, n);
        hfx_error e;
        hfx_status st = parse_bytes(c, n, &e);
        if (st != HFX_ERR_TRUNCATED) bad++;
        /* same prefix but the header's total size patched to n: deeper checks must still fail cleanly */
        if (n >= HFX_HEADER_BYTES) {
            put32(c + 8, (uint32_t)n);
            st = parse_bytes(c, n, &e);
            if (st == HFX_OK) bad++;
        }
        free(c);
    }
    CHECK_MSG(bad == 0, "%d prefixes misparsed", bad);
}

static void test_tensors(void) {
    EXPECT_U8(TREC(0) + 0, 0, HFX_ERR_DTYPE);
    EXPECT_U8(TREC(0) + 0, 7, HFX_ERR_DTYPE);
    EXPECT_U8(TREC(0) + 0, HFX_DTYPE_BOOL, HFX_ERR_DTYPE); /* a v2 dtype in a v1 program */
    EXPECT_U8(TREC(0) + 0, HFX_DTYPE_BOOL + 1, HFX_ERR_DTYPE);
    EXPECT_U8(TREC(0) + 0, HFX_DTYPE_F16, HFX_ERR_DTYPE); /* known dtype, unsupported by Gemm */
    EXPECT_U8(TREC(0) + 0, HFX_DTYPE_U8, HFX_ERR_DTYPE);  /* integer: only the quantization ops take it */
    EXPECT_U8(TREC(0) + 1, 0, HFX_ERR_TENSOR);
    EXPECT_U8(TREC(0) + 1, 5, HFX_ERR_TENSOR);
    EXPECT_U8(TREC(0) + 2, 2, HFX_ERR_TENSOR);
    EXPECT_U8(TREC(0) + 3, 9, HFX_ERR_TENSOR);
    EXPECT_U8(TREC(0) + 3, 3, HFX_ERR_SHAPE); /* dim 2 = 0 within rank: a zero-size tensor, not Gemm's A */
    EXPECT_U32(TREC(0) + 8, 0, HFX_ERR_SHAPE); /* the same */
    EXPECT_U32(TREC(0) + 8, 0x80000000u, HFX_ERR_TENSOR);
    EXPECT_U32(TREC(0) + 20, 5, HFX_ERR_TENSOR); /* dim beyond rank */
    EXPECT_U32(TREC(0) + 4, 1, HFX_ERR_TENSOR);  /* A input with B's io index */
    EXPECT_U32(TREC(4) + 4, 0, HFX_ERR_TENSOR);  /* B input with A's io index */
    EXPECT_U32(TREC(4) + 4, 7, HFX_ERR_TENSOR);
    EXPECT_U32(TREC(2) + 4, 1, HFX_ERR_TENSOR);  /* io index on scratch */
    EXPECT_U8(TREC(4) + 1, HFX_ROLE_SCRATCH, HFX_ERR_TENSOR); /* input 1 has no tensor */
    EXPECT_U32(TREC(2) + 40, 64, HFX_ERR_TENSOR);   /* data offset on scratch */
    EXPECT_U32(TREC(1) + 40, 4, HFX_ERR_TENSOR);    /* misaligned constant */
    EXPECT_U32(TREC(1) + 40, 64, HFX_ERR_SIZE);     /* constant beyond the data section */
    EXPECT_U32(TREC(1) + 44, 16, HFX_ERR_SIZE);     /* constant bytes != shape */
    /* size overflow: 65536 x 65536 f32 */
    {
        uint8_t *c = malloc(g_size);
        memcpy(c, g_bytes, g_size);
        put32(c + TREC(2) + 8, 65536);
        put32(c + TREC(2) + 12, 65536);
        hfx_error e;
        CHECK(parse_bytes(c, g_size, &e) == HFX_ERR_SIZE);
        CHECK(e.byte_offset == TREC(2) + 12);
        /* 2^29 elements * 4 bytes = 2 GiB: over the byte limit */
        put32(c + TREC(2) + 8, 1u << 14);
        put32(c + TREC(2) + 12, 1u << 15);
        CHECK(parse_bytes(c, g_size, &e) == HFX_ERR_SIZE);
        free(c);
    }
    /* error offset points at the bad field */
    hfx_error e;
    CHECK(with_u8(TREC(3) + 0, 99, &e) == HFX_ERR_DTYPE && e.byte_offset == TREC(3));
    CHECK(strstr(e.message, "tensor 3") != NULL);
}

static void test_ops(void) {
    EXPECT_U32(OREC(0), 999, HFX_ERR_OP);                      /* opcode (u16) + engine/task */
    EXPECT_U8(OREC(0) + 0, 77, HFX_ERR_OP);                    /* unknown opcode */
    EXPECT_U8(OREC(0) + 2, HFX_ENGINE_COPY, HFX_ERR_OP);       /* Gemm on the copy engine */
    EXPECT_U8(OREC(1) + 2, HFX_ENGINE_MATRIX, HFX_ERR_OP);     /* Relu on the matrix engine */
    EXPECT_U8(OREC(0) + 2, 3, HFX_ERR_OP);
    EXPECT_U8(OREC(0) + 3, 2, HFX_ERR_OP);                     /* task 2 */
    EXPECT_U8(OREC(0) + 3, 1, HFX_ERR_GRAPH);                  /* task B op using A's tensors */
    EXPECT_U8(OREC(0) + 4, 1, HFX_ERR_OP);                     /* Gemm with 1 input */
    EXPECT_U8(OREC(0) + 4, 4, HFX_ERR_OP);
    EXPECT_U8(OREC(0) + 5, 0, HFX_ERR_OP);
    EXPECT_U8(OREC(0) + 5, 2, HFX_ERR_OP);
    EXPECT_U8(OREC(0) + 6, 1, HFX_ERR_OP);                     /* reserved */
    EXPECT_U32(OREC(0) + 8 + 4 * 2, 0, HFX_ERR_OP);            /* unused input slot */
    EXPECT_U32(OREC(0) + 8, 1000, HFX_ERR_OP);                 /* id out of range */
    EXPECT_U32(OREC(0) + 8, 4, HFX_ERR_GRAPH);                 /* other task's tensor */
    EXPECT_U32(OREC(0) + 40, 1000, HFX_ERR_OP);
    EXPECT_U32(OREC(0) + 44, 0, HFX_ERR_OP);                   /* unused output slot */
    EXPECT_U32(OREC(0) + 40, 0, HFX_ERR_GRAPH);                /* writes an input */
    EXPECT_U32(OREC(0) + 40, 1, HFX_ERR_GRAPH);                /* writes a constant */
    EXPECT_U32(OREC(1) + 40, 2, HFX_ERR_GRAPH);                /* relu writes its input */
    EXPECT_U32(OREC(1) + 8, 3, HFX_ERR_GRAPH);                 /* reads out_a before it is written */
    EXPECT_U32(OREC(0) + 40, 3, HFX_ERR_GRAPH);                /* scratch never written / output twice */
    EXPECT_U32(OREC(1) + 40, 2, HFX_ERR_GRAPH);
    EXPECT_U32(OREC(0) + 48 + 4 * 10, 1, HFX_ERR_PARAM);       /* unused Gemm param */
    EXPECT_U32(OREC(1) + 48, 1, HFX_ERR_PARAM);                /* Relu has no params */
}

static void test_params_and_shapes(void) {
    /* Gemm */
    EXPECT_U32(OREC(0) + 48 + 0, 2, HFX_ERR_PARAM);            /* transA */
    EXPECT_U32(OREC(0) + 48 + 4, 1, HFX_ERR_SHAPE);            /* transB: K mismatch 32 vs 8 */
    EXPECT_U32(OREC(0) + 48 + 8, 0x7f800000u, HFX_ERR_PARAM);  /* alpha inf */
    EXPECT_U32(OREC(0) + 48 + 12, 0x3f800000u, HFX_ERR_PARAM); /* beta without C */
    EXPECT_U32(OREC(0) + 48 + 16, 2, HFX_ERR_PARAM);           /* nbits */
    EXPECT_U32(TREC(1) + 8, 31, HFX_ERR_SIZE);                 /* K mismatch (constant size then wrong first) */
    EXPECT_U32(TREC(2) + 12, 9, HFX_ERR_SHAPE);                /* gemm output shape */
    EXPECT_U8(TREC(2) + 3, 1, HFX_ERR_TENSOR);                 /* rank 1 with dim1 set */
    /* softmax axis */
    EXPECT_U32(OREC(2) + 48, 2, HFX_ERR_PARAM);
    EXPECT_U32(OREC(2) + 48, (uint32_t)-3, HFX_ERR_PARAM);
    EXPECT_U32(OREC(2) + 48, (uint32_t)-2, HFX_OK);
    EXPECT_U32(TREC(5) + 8, 5, HFX_ERR_SHAPE);                 /* softmax output shape */
}

/* builds a one-op program for shape/param tests of other op families */
typedef uint32_t (*build_fn)(hfxb *b, int variant);

static hfx_status build_and_parse(build_fn f, int variant) {
    hfxb b;
    hfxb_init(&b);
    f(&b, variant);
    size_t n;
    uint8_t *bytes = hfxb_encode(&b, &n);
    hfx_error e;
    hfx_status st = parse_bytes(bytes, n, &e);
    free(bytes);
    hfxb_free(&b);
    return st;
}

static uint32_t conv_prog(hfxb *b, int v) {
    static float w[8 * 4 * 3 * 3];
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(1, 4, 10, 10));
    uint32_t wt = v == 1 ? hfxb_const(b, 0, HFXB_DIMS(8, 3, 3, 3), w) : hfxb_const(b, 0, HFXB_DIMS(8, 2, 3, 3), w);
    uint32_t y = v == 2 ? hfxb_output(b, 0, HFXB_DIMS(1, 8, 9, 9)) : hfxb_output(b, 0, HFXB_DIMS(1, 8, 5, 5));
    int32_t pads[4] = {1, 1, 1, 1}, st[2] = {2, 2}, dil[2] = {1, 1};
    if (v == 3) st[0] = 0;
    if (v == 4) pads[2] = -1;
    return hfxb_conv(b, 0, x, wt, HFXB_NONE, y, pads, st, dil, v == 5 ? 3 : 2);
}

static uint32_t binary_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(4, 1, 6));
    uint32_t y = v == 1 ? hfxb_input(b, 0, HFXB_DIMS(3, 5)) : hfxb_input(b, 0, HFXB_DIMS(3, 1));
    uint32_t o = v == 2 ? hfxb_output(b, 0, HFXB_DIMS(4, 3, 5)) : hfxb_output(b, 0, HFXB_DIMS(4, 3, 6));
    return hfxb_binary(b, 0, HFX_OP_ADD, x, y, o);
}

static uint32_t norm_prog(hfxb *b, int v) {
    static float s[64];
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 4, 5));
    uint32_t sc = v == 1 ? hfxb_const(b, 0, HFXB_DIMS(4), s) : hfxb_const(b, 0, HFXB_DIMS(4, 5), s);
    uint32_t o = hfxb_output(b, 0, HFXB_DIMS(3, 4, 5));
    if (v >= 3) { /* RMSNORM's skip flag (a SkipSimplifiedLayerNormalization's norm): 0 or 1 */
        int32_t p[HFX_OP_PARAMS] = {0};
        p[HFX_P_AXIS] = 1;
        p[HFX_P_EPSILON] = hfxb_bits(1e-5f);
        p[HFX_P_NORM_SKIP] = v - 2;
        uint32_t in[2] = {x, sc};
        return hfxb_op_add(b, 0, HFX_OP_RMSNORM, -1, 2, in, o, p);
    }
    return hfxb_norm(b, 0, HFX_OP_LAYERNORM, x, sc, HFXB_NONE, o, 1, v == 2 ? 0.0f : 1e-5f);
}

static uint32_t reduce_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 4, 5));
    uint32_t o = v == 1 ? hfxb_output(b, 0, HFXB_DIMS(3, 1, 5)) : hfxb_output(b, 0, HFXB_DIMS(3, 5));
    uint32_t mask = v == 2 ? 0u : v == 3 ? 8u : 2u;
    return hfxb_reduce(b, 0, HFX_OP_REDUCE_SUM, x, o, mask, 0);
}

/* ArgMax of X [3, 4, 5] f32 along axis 1 -> [3, 5] i64 unless said: 1 output i32, 2 X u8, 3 axis 3, 4 keepdims 2,
 * 5 select_last_index 2, 6 output [3, 1, 5] without keepdims, 7 X [3, 0, 5] (an index over no element), 8 axis -2
 * with keepdims and select_last_index into [3, 1, 5], 9 X [0, 4, 5] into [0, 5] (no work), 10 X i64, 11 two inputs */
static uint32_t arg_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(v == 9 ? 0u : 3u, v == 7 ? 0u : 4u, 5));
    hfxb_set_dtype(b, x, v == 2 ? HFX_DTYPE_U8 : v == 10 ? HFX_DTYPE_I64 : HFX_DTYPE_F32);
    uint32_t o = v == 6 || v == 8 ? hfxb_output(b, 0, HFXB_DIMS(3, 1, 5))
                                  : hfxb_output(b, 0, HFXB_DIMS(v == 9 ? 0u : 3u, 5));
    hfxb_set_dtype(b, o, v == 1 ? HFX_DTYPE_I32 : HFX_DTYPE_I64);
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_ARG_AXIS] = v == 3 ? 3 : v == 8 ? -2 : 1;
    p[HFX_P_ARG_KEEPDIMS] = v == 4 ? 2 : v == 8;
    p[HFX_P_ARG_SELECT_LAST] = v == 5 ? 2 : v == 8;
    uint32_t in[2] = {x, x};
    return hfxb_op_add(b, 0, HFX_OP_ARGMAX, -1, v == 11 ? 2u : 1u, in, o, p);
}

/* LogSoftmax of X [3, 4, 5] along axis 1 into [3, 4, 5] unless said: 1 axis 3, 2 axis -4, 3 output [3, 4, 6],
 * 4 X i32, 5 X a scalar, 6 two inputs, 7 axis -1, 8 on the matrix engine, 9 a second param, 10 X [3, 0, 5] */
static uint32_t log_softmax_prog(hfxb *b, int v) {
    uint32_t zero[1] = {0};
    uint32_t x = v == 5 ? hfxb_input(b, 0, 0, zero) : hfxb_input(b, 0, HFXB_DIMS(3, v == 10 ? 0u : 4u, 5));
    if (v == 4) hfxb_set_dtype(b, x, HFX_DTYPE_I32);
    uint32_t o = v == 5 ? hfxb_output(b, 0, 0, zero) : hfxb_output(b, 0, HFXB_DIMS(3, v == 10 ? 0u : 4u, v == 3 ? 6u : 5u));
    int32_t p[HFX_OP_PARAMS] = {0};
    p[HFX_P_AXIS] = v == 1 ? 3 : v == 2 ? -4 : v == 7 ? -1 : v == 5 ? 0 : 1;
    if (v == 9) p[1] = 1;
    uint32_t in[2] = {x, x};
    return hfxb_op_add(b, 0, HFX_OP_LOG_SOFTMAX, v == 8 ? HFX_ENGINE_MATRIX : -1, v == 6 ? 2u : 1u, in, o, p);
}

static uint32_t transpose_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(2, 3, 4));
    uint32_t o = hfxb_output(b, 0, HFXB_DIMS(4, 2, 3));
    int32_t perm[3] = {2, 0, 1};
    if (v == 1) perm[1] = 2;
    if (v == 2) perm[0] = 3;
    if (v == 3) perm[0] = 1, perm[1] = 2, perm[2] = 0;
    return hfxb_transpose(b, 0, x, o, perm, 3);
}

static uint32_t concat_prog(hfxb *b, int v) {
    uint32_t x0 = hfxb_input(b, 0, HFXB_DIMS(2, 3));
    uint32_t x1 = v == 1 ? hfxb_input(b, 0, HFXB_DIMS(3, 3)) : hfxb_input(b, 0, HFXB_DIMS(2, 5));
    uint32_t o = v == 2 ? hfxb_output(b, 0, HFXB_DIMS(2, 9)) : hfxb_output(b, 0, HFXB_DIMS(2, 8));
    uint32_t xs[2] = {x0, x1};
    return hfxb_concat(b, 0, 2, xs, o, v == 3 ? 2 : 1);
}

static uint32_t slice_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(10, 8));
    uint32_t o = v == 4 ? hfxb_output(b, 0, HFXB_DIMS(0, 3)) : hfxb_output(b, 0, HFXB_DIMS(4, 3));
    int32_t st[2] = {1, -1}, en[2] = {9, -100}, sp[2] = {2, -3}; /* rows 1,3,5,7 ; cols 7,4,1 */
    if (v == 1) sp[0] = 0;
    if (v == 2 || v == 4) en[0] = 1; /* empty: the output must be [0, 3] */
    if (v == 3) sp[1] = -2; /* 4 columns */
    return hfxb_slice(b, 0, x, o, st, en, sp, 2);
}

static uint32_t hardsigmoid_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 4));
    uint32_t o = v == 2 ? hfxb_output(b, 0, HFXB_DIMS(4, 3)) : hfxb_output(b, 0, HFXB_DIMS(3, 4));
    float nan = hfxb_f(0x7fc00000);
    if (v == 3) return hfxb_op_add(b, 0, HFX_OP_HARDSWISH, -1, 1, &x, o, NULL);
    if (v == 4) { /* HardSwish has no params */
        int32_t p[HFX_OP_PARAMS] = {0};
        p[0] = 1;
        return hfxb_op_add(b, 0, HFX_OP_HARDSWISH, -1, 1, &x, o, p);
    }
    if (v == 5) return hfxb_op_add(b, 0, HFX_OP_HARDSWISH, HFX_ENGINE_COPY, 1, &x, o, NULL);
    return hfxb_hardsigmoid(b, 0, x, o, v == 1 ? nan : 0.2f, 0.5f);
}

/* Clip (v 0..4), Neg (5..7), Sqrt (8..10) on [3,4] */
static uint32_t clip_neg_sqrt_prog(hfxb *b, int v) {
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(3, 4));
    uint32_t o = v == 3 || v == 7 ? hfxb_output(b, 0, HFXB_DIMS(4, 3)) : hfxb_output(b, 0, HFXB_DIMS(3, 4));
    int32_t p[HFX_OP_PARAMS] = {0};
    uint32_t opc = v <= 4 ? HFX_OP_CLIP : v <= 7 ? HFX_OP_NEG : v <= 10 ? HFX_OP_SQRT : v <= 12 ? HFX_OP_SOFTPLUS
                                                                                       : HFX_OP_ROUND;
    if (v == 14) o = hfxb_output(b, 0, HFXB_DIMS(3, 5));
    if (opc == HFX_OP_CLIP) {
        p[HFX_P_CLIP_MIN] = hfxb_bits(v == 2 ? -INFINITY : 0.0f); /* an infinite bound is no bound */
        p[HFX_P_CLIP_MAX] = v == 1 ? (int32_t)0x7fc00000 : hfxb_bits(6.0f); /* NaN */
        if (v == 4) p[2] = 1; /* beyond Clip's two params */
    }
    if (v == 6 || v == 10 || v == 12 || v == 15) p[0] = 1; /* Neg, Sqrt, Softplus, Round have no params */
    int engine = v == 9 ? HFX_ENGINE_MATRIX : -1;
    return hfxb_op_add(b, 0, opc, engine, 1, &x, o, p);
}

/* MaxPool / AveragePool on [1,2,9,8]: k 3x2, s 2x2, pads t 1 l 0 b 1 r 1 -> [1,2,5,4]:
 * H (9+2-2-1)/2+1 = 5, W (8+1-1-1)/2+1 = 4 */
static uint32_t pool_prog(hfxb *b, int v) {
    int32_t pads[4] = {1, 0, 1, 1}, st[2] = {2, 2}, dil[2] = {1, 1}, k[2] = {3, 2};
    uint32_t opc = v >= 20 ? HFX_OP_AVGPOOL : HFX_OP_MAXPOOL;
    int ceil = 0, cip = 0;
    uint32_t odims[4] = {1, 2, 5, 4};
    switch (v % 20) {
    case 1: st[0] = 0; break;                     /* stride 0 */
    case 2: dil[1] = 0; break;                    /* dilation 0 */
    case 3: k[0] = 0; break;                      /* kernel 0 */
    case 4: k[1] = 70000; break;                  /* kernel > 65535 */
    case 5: pads[0] = 3; break;                   /* pad == kernel */
    case 6: pads[3] = -1; break;                  /* negative pad */
    case 7: ceil = 2; break;                      /* ceil_mode not 0/1 */
    case 8: cip = 1; break;                       /* MaxPool: param 11 must be 0; AveragePool: ok */
    case 9: odims[3] = 5; break;                  /* output width */
    case 10: ceil = 1; break;                     /* W: ceil(7/2)+1 = 5, but window 4 would start at 8 >= 8 + 0: 4 */
    case 11: ceil = 1, odims[3] = 5; break;       /* (what ONNX shape inference says; ONNX Runtime gives 4) */
    case 12: k[0] = 12; pads[0] = 0; break;       /* kernel larger than the padded input */
    case 13: dil[0] = 6; break;                   /* dilated kernel larger than the padded input */
    case 14: dil[0] = 2; odims[2] = 4; break;     /* (9+2-4-1)/2+1 = 4 */
    case 15: pads[2] = 0; ceil = 1; break;        /* H: ceil(7/2)+1 = 5, window 4 starts at 7 < 9 + 1: kept */
    case 16: pads[2] = 0; break;                  /* H: floor(7/2)+1 = 4 != 5 */
    default: break;
    }
    uint32_t x = hfxb_input(b, 0, HFXB_DIMS(1, 2, 9, 8));
    uint32_t o = hfxb_output(b, 0, 4, odims);
    if (v % 20 == 17) {  /* rank 3 input */
        uint32_t x3 = hfxb_input(b, 0, HFXB_DIMS(2, 9, 8));
        return hfxb_pool(b, 0, opc, x3, o, pads, st, dil, k, ceil, cip);
    }
    uint32_t id = hfxb_pool(b, 0, opc, x, o, pads, st, dil, k, ceil, cip);
    if (v % 20 == 18) b->o[id].engine = HFX_ENGINE_COPY;
    return id;
}

/* GlobalAveragePool, or from v = 10 GlobalMaxPool, of variant v % 10 */
static uint32_t gap_prog(hfxb *b, int v) {
    uint32_t opc = v >= 10 ? HFX_OP_GLOBAL_MAXPOOL : HFX_OP_GLOBAL_AVGPOOL;
    v %= 10;
    uint32_t x = v == 1 ? hfxb_input(b, 0, HFXB_DIMS(2, 3)) : hfxb_input(b, 0, HFXB_DIMS(2, 3, 4, 5));
    uint32_t o = v == 2 ? hfxb_output(b, 0, HFXB_DIMS(2, 3)) : v == 3 ? hfxb_output(b, 0, HFXB_DIMS(2, 3, 1, 2))
                 : v == 1 ? hfxb_output(b, 0, HFXB_DIMS(2, 3)) : hfxb_output(b, 0, HFXB_DIMS(2, 3, 1, 1));
    int32_t p[HFX_OP_PARAMS] = {0};
    if (v == 4) p[0] = 1;
    return hfxb_op_add(b, 0, opc, v == 5 ? HFX_ENGINE_MATRIX : HFX_ENGINE_VECTOR, 1, &x, o, p);
}

/* Resize [2,3,5,7] -> [2,3,10,3]: scales 2 and 0.5 (7 * 0.5 = 3.5 -> 3) */
static uint32_t resize_prog(hfxb *b, int v) {
    uint32_t xdims[4] = {2, 3, 5, 7}, odims[4] = {2, 3, 10, 3};
    int mode = HFX_RESIZE_NEAREST, coord = HFX_RESIZE_COORD_HALF_PIXEL, nm = HFX_RESIZE_NEAREST_ROUND_PREFER_FLOOR;
    float sh = 2.0f, sw = 0.5f;
    switch (v) {
    case 1: mode = 2; break;                          /* unknown mode (cubic) */
    case 2: coord = 5; break;                         /* unknown coordinate mode */
    case 3: nm = 4; break;                            /* unknown nearest mode */
    case 4: mode = HFX_RESIZE_LINEAR; nm = 1; break;  /* nearest mode set with linear */
    case 5: sh = -0.0f; break;                        /* -0: only +0 takes out / in */
    case 6: sw = hfxb_f(0x7f800000); break;           /* inf */
    case 7: sh = -2.0f; break;
    case 8: odims[3] = 4; break;                      /* 3.5 -> 3, not 4 */
    case 9: odims[2] = 9; break;
    case 10: odims[0] = 1; break;                     /* an axis not resized changed */
    case 11: mode = HFX_RESIZE_LINEAR; break;         /* linear: vector engine only (op is on COPY) */
    case 12: mode = HFX_RESIZE_LINEAR; break;         /* ... and valid on VECTOR */
    case 13: sh = 10.0f / 5.0f + 1e-7f; break;        /* 10.0000005 -> 10 */
    case 14: odims[3] = 7; sw = (float)7 / (float)7; coord = HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC; break;
    case 15: odims[2] = 7; sh = 7.0f / 5.0f; coord = HFX_RESIZE_COORD_ALIGN_CORNERS; break; /* 5 * f32(7/5) < 7 */
    case 18: odims[2] = 11; sh = 0.0f; break;         /* 0: f32(11) / f32(5) of the dims, any length */
    case 19: xdims[3] = 0; sw = 0.0f; break;          /* W 0 -> 3: no source column to read */
    case 20: xdims[2] = 0; odims[2] = 0; sh = 0.0f; mode = HFX_RESIZE_LINEAR; break; /* 0 -> 0: nothing read */
    default: break;
    }
    uint32_t x = hfxb_input(b, 0, 4, xdims);
    uint32_t o = hfxb_output(b, 0, 4, odims);
    if (v == 16) { /* rank 1 */
        uint32_t x1 = hfxb_input(b, 0, HFXB_DIMS(7));
        uint32_t o1 = hfxb_output(b, 0, HFXB_DIMS(3));
        (void)o;
        uint32_t id = hfxb_resize(b, 0, x1, o1, mode, coord, nm, sh, sw);
        /* o is never written: the shape error comes first */
        return id;
    }
    uint32_t id = hfxb_resize(b, 0, x, o, mode, coord, nm, sh, sw);
    if (v == 11) b->o[id].engine = HFX_ENGINE_COPY;
    if (v == 17) b->o[id].params[7] = 1; /* unused param */
    return id;
}

static void test_other_ops(void) {
    CHECK(build_and_parse(conv_prog, 0) == HFX_OK);
    CHECK(build_and_parse(conv_prog, 1) == HFX_ERR_SHAPE); /* C/g mismatch */
    CHECK(build_and_parse(conv_prog, 2) == HFX_ERR_SHAPE); /* output size */
    CHECK(build_and_parse(conv_prog, 3) == HFX_ERR_PARAM); /* stride 0 */
    CHECK(build_and_parse(conv_prog, 4) == HFX_ERR_PARAM); /* negative pad */
    CHECK(build_and_parse(conv_prog, 5) == HFX_ERR_SHAPE); /* group 3 does not divide 4 */
    CHECK(build_and_parse(binary_prog, 0) == HFX_OK);
    CHECK(build_and_parse(binary_prog, 1) == HFX_ERR_SHAPE); /* 6 vs 5 do not broadcast */
    CHECK(build_and_parse(binary_prog, 2) == HFX_ERR_SHAPE); /* wrong output */
    CHECK(build_and_parse(norm_prog, 0) == HFX_OK);
    CHECK(build_and_parse(norm_prog, 1) == HFX_ERR_SHAPE);
    CHECK(build_and_parse(norm_prog, 2) == HFX_ERR_PARAM);
    CHECK(build_and_parse(norm_prog, 3) == HFX_OK);
    CHECK(build_and_parse(norm_prog, 4) == HFX_ERR_PARAM);
    CHECK(build_and_parse(reduce_prog, 0) == HFX_OK);
    CHECK(build_and_parse(reduce_prog, 1) == HFX_ERR_SHAPE); /* keepdims=0 but output kept the axis */
    CHECK(build_and_parse(reduce_prog, 2) == HFX_ERR_PARAM);
    CHECK(build_and_parse(reduce_prog, 3) == HFX_ERR_PARAM);
    CHECK(build_and_parse(transpose_prog, 0) == HFX_OK);
    CHECK(build_and_parse(transpose_prog, 1) == HFX_ERR_PARAM);
    CHECK(build_and_parse(transpose_prog, 2) == HFX_ERR_PARAM);
    CHECK(build_and_parse(transpose_prog, 3) == HFX_ERR_SHAPE);
    CHECK(build_and_parse(concat_prog, 0) == HFX_OK);
    CHECK(build_and_parse(concat_prog, 1) == HFX_ERR_SHAPE);
    CHECK(build_and_parse(concat_prog, 2) == HFX_ERR_SHAPE);
    CHECK(build_and_parse(concat_prog, 3) == HFX_ERR_PARAM);
    CHECK(build_and_parse(slice_prog, 0) == HFX_OK);
    CHECK(build_and_parse(slice_prog, 1) == HFX_ERR_PARAM);
    CHECK(build_and_parse(slice_prog, 2) == HFX_ERR_SHAPE);
    CHECK(build_and_parse(slice_prog, 3) == HFX_ERR_SHAPE);
    CHECK(build_and_parse(slice_prog, 4) == HFX_OK);
}

/* Zero-size tensors: an op whose output is empty parses (with no work items); a family without a
 * rule for a non-empty output from an empty input refuses it. */
static uint32_t zero_size_prog(hfxb *b, int v) {
    static float w[8 * 4 * 3 * 3];
    int32_t pads[4] = {1, 1, 1, 1}, st[2] = {2, 2}, dil[2] = {1, 1}, one[2] = {1, 1}, k2[2] = {2, 2};
    switch (v) {
    case 0: /* Conv2D of an empty batch */
        return hfxb_conv(b, 0, hfxb_input(b, 0, HFXB_DIMS(0, 4, 10, 10)), hfxb_const(b, 0, HFXB_DIMS(8, 2, 3, 3), w),
                         HFXB_NONE, hfxb_output(b, 0, HFXB_DIMS(0, 8, 5, 5)), pads, st, dil, 2);
    case 1: /* Conv2D over 0 input channels into a non-empty output */
        return hfxb_conv(b, 0, hfxb_input(b, 0, HFXB_DIMS(1, 0, 10, 10)), hfxb_const(b, 0, HFXB_DIMS(8, 0, 3, 3), w),
                         HFXB_NONE, hfxb_output(b, 0, HFXB_DIMS(1, 8, 5, 5)), pads, st, dil, 2);
    case 2: /* MaxPool of an empty map whose padding alone makes a window */
        return hfxb_pool(b, 0, HFX_OP_MAXPOOL, hfxb_input(b, 0, HFXB_DIMS(1, 1, 0, 3)),
                         hfxb_output(b, 0, HFXB_DIMS(1, 1, 1, 4)), pads, one, one, k2, 0, 0);
    case 3: { /* GlobalAveragePool over an empty map */
        uint32_t x = hfxb_input(b, 0, HFXB_DIMS(1, 2, 0));
        return hfxb_op_add(b, 0, HFX_OP_GLOBAL_AVGPOOL, -1, 1, &x, hfxb_output(b, 0, HFXB_DIMS(1, 2, 1)), NULL);
    }
    default: { /* GlobalAveragePool of an empty batch */
        uint32_t x = hfxb_input(b, 0, HFXB_DIMS(0, 2, 5));
        return hfxb_op_add(b, 0, HFX_OP_GLOBAL_AVGPOOL, -1, 1, &x, hfxb_output(b, 0, HFXB_DIMS(0, 2, 1)), NULL);
    }
    }
}

static void test_zero_size_ops(void) {
    static const hfx_status want[] = {HFX_OK, HFX_ERR_SHAPE, HFX_ERR_SHAPE, HFX_ERR_SHAPE, HFX_OK};
    for (int v = 0; v < 5; v++) {
        hfxb b;
        hfxb_init(&b);
        zero_size_prog(&b, v);
        size_t n;
        uint8_t *bytes = hfxb_encode(&b, &n);
        hfx_program *p = NULL;
        hfx_error e;
        hfx_status st = hfx_program_parse(bytes, n, &p, &e);
        CHECK_MSG(st == want[v], "zero-size variant %d: got %s (%s)", v, hfx_status_name(st), e.message);
        if (st == HFX_ERR_SHAPE) CHECK_MSG(strstr(e.message, "is empty but the output is not"), "%s", e.message);
        if (p) CHECK(hfx_program_num_items(p, 0) == 0);
        hfx_program_free(p);
        free(bytes);
        hfxb_free(&b);
    }
}

static void expect_parse(build_fn f, int variant, hfx_status want, const char *what) {
    hfx_status got = build_and_parse(f, variant);
    CHECK_MSG(got == want, "%s variant %d: got %s, want %s", what, variant, hfx_status_name(got), hfx_status_name(want));
}

static void test_pool_resize_activation_ops(void) {
    expect_parse(hardsigmoid_prog, 0, HFX_OK, "hardsigmoid");
    expect_parse(hardsigmoid_prog, 1, HFX_ERR_PARAM, "hardsigmoid");  /* alpha NaN */
    expect_parse(hardsigmoid_prog, 2, HFX_ERR_SHAPE, "hardsigmoid");
    expect_parse(hardsigmoid_prog, 3, HFX_OK, "hardswish");
    expect_parse(hardsigmoid_prog, 4, HFX_ERR_PARAM, "hardswish");
    expect_parse(hardsigmoid_prog, 5, HFX_ERR_OP, "hardswish");       /* copy engine */
    static const hfx_status clip_neg_sqrt[] = {HFX_OK, HFX_ERR_PARAM, HFX_OK,        HFX_ERR_SHAPE,
                                               HFX_ERR_PARAM, HFX_OK, HFX_ERR_PARAM, HFX_ERR_SHAPE,
                                               HFX_OK, HFX_ERR_OP, HFX_ERR_PARAM};
    for (int v = 0; v < 11; v++) expect_parse(clip_neg_sqrt_prog, v, clip_neg_sqrt[v], "clip/neg/sqrt");
    static const hfx_status softplus_round[] = {HFX_OK, HFX_ERR_PARAM, HFX_OK, HFX_ERR_SHAPE, HFX_ERR_PARAM};
    for (int v = 11; v < 16; v++) expect_parse(clip_neg_sqrt_prog, v, softplus_round[v - 11], "softplus/round");
    for (int base = 0; base <= 20; base += 20) {
        const char *name = base ? "avgpool" : "maxpool";
        expect_parse(pool_prog, base + 0, HFX_OK, name);
        for (int v = 1; v <= 7; v++) expect_parse(pool_prog, base + v, HFX_ERR_PARAM, name);
        expect_parse(pool_prog, base + 8, base ? HFX_OK : HFX_ERR_PARAM, name); /* count_include_pad */
        expect_parse(pool_prog, base + 9, HFX_ERR_SHAPE, name);
        expect_parse(pool_prog, base + 10, HFX_OK, name);
        expect_parse(pool_prog, base + 11, HFX_ERR_SHAPE, name);
        expect_parse(pool_prog, base + 12, HFX_ERR_SHAPE, name);
        expect_parse(pool_prog, base + 13, HFX_ERR_SHAPE, name);
        expect_parse(pool_prog, base + 14, HFX_OK, name);
        expect_parse(pool_prog, base + 15, HFX_OK, name);
        expect_parse(pool_prog, base + 16, HFX_ERR_SHAPE, name);
        expect_parse(pool_prog, base + 17, HFX_ERR_SHAPE, name);
        expect_parse(pool_prog, base + 18, HFX_ERR_OP, name);
    }
    for (int base = 0; base <= 10; base += 10) {
        const char *name = base ? "global maxpool" : "global avgpool";
        expect_parse(gap_prog, base + 0, HFX_OK, name);
        expect_parse(gap_prog, base + 1, HFX_ERR_SHAPE, name); /* rank 2 */
        expect_parse(gap_prog, base + 2, HFX_ERR_SHAPE, name); /* output rank */
        expect_parse(gap_prog, base + 3, HFX_ERR_SHAPE, name);
        expect_parse(gap_prog, base + 4, HFX_ERR_PARAM, name);
        expect_parse(gap_prog, base + 5, HFX_ERR_OP, name);    /* matrix engine */
    }
    expect_parse(resize_prog, 0, HFX_OK, "resize");
    for (int v = 1; v <= 7; v++) expect_parse(resize_prog, v, HFX_ERR_PARAM, "resize");
    for (int v = 8; v <= 10; v++) expect_parse(resize_prog, v, HFX_ERR_SHAPE, "resize");
    expect_parse(resize_prog, 11, HFX_ERR_OP, "resize");
    for (int v = 12; v <= 15; v++) expect_parse(resize_prog, v, HFX_OK, "resize");
    expect_parse(resize_prog, 16, HFX_ERR_SHAPE, "resize");
    expect_parse(resize_prog, 17, HFX_ERR_PARAM, "resize");
    expect_parse(resize_prog, 18, HFX_OK, "resize");
    expect_parse(resize_prog, 19, HFX_ERR_SHAPE, "resize");
    expect_parse(resize_prog, 20, HFX_OK, "resize");
    /* the pool output length rule */
    CHECK(hfx_pool_out_len(9, 3, 2, 1, 1, 1, false) == 5);
    CHECK(hfx_pool_out_len(8, 2, 2, 1, 1, 1, true) == 5);  /* 8/2+1 = 5: window 4 starts at 8 - 1 < 8 */
    CHECK(hfx_pool_out_len(5, 2, 2, 1, 1, 1, true) == 3);  /* ceil(5/2)+1 = 4, but window 3 starts at 6 - 1 >= 5 */
    CHECK(hfx_pool_out_len(2, 5, 1, 1, 1, 1, false) == -1);
    CHECK(hfx_pool_out_len(1, 1, 1, 1, 0, 0, true) == 1);
}


/* QuantizeLinear (v < 20) / DequantizeLinear (v >= 20) of X[3,4], u8 unless said:
 * v%20: 0 per tensor, 1 per axis 1 (4 scales), 2 per axis -2 (3 scales), 3 i8, 4 no zero point,
 *       5 scale i32, 6 zp of the other int type, 7 X of the wrong type, 8 Y of the wrong type,
 *       9 per-axis scale of the wrong length, 10 axis out of range, 11 zp size != scale size,
 *       12 output shape, 13 axis 5 with a one-element scale, 14 i32 (DQ only) */
static uint32_t quant_prog(hfxb *b, int v) {
    int dq = v >= 20;
    v %= 20;
    uint8_t it = v == 3 ? HFX_DTYPE_I8 : v == 14 ? HFX_DTYPE_I32 : HFX_DTYPE_U8;
    uint8_t xt = dq ? it : HFX_DTYPE_F32, yt = dq ? HFX_DTYPE_F32 : it;
    if (v == 7) xt = dq ? HFX_DTYPE_F32 : HFX_DTYPE_U8;
    if (v == 8) yt = dq ? HFX_DTYPE_U8 : HFX_DTYPE_F32;
    uint32_t x = hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_DIMS(3, 4)), xt);
    uint32_t ns = v == 1 || v == 10 ? 4 : v == 2 ? 3 : v == 9 ? 5 : 1;
    uint32_t s = ns == 1 ? hfxb_input(b, 0, HFXB_SCALAR) : hfxb_input(b, 0, 1, &ns);
    if (v == 5) hfxb_set_dtype(b, s, HFX_DTYPE_I32);
    uint32_t zt = v == 6 ? (it == HFX_DTYPE_U8 ? HFX_DTYPE_I8 : HFX_DTYPE_U8) : it;
    uint32_t z = v == 4 ? HFXB_NONE
                 : v == 11 ? hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_DIMS(2)), (uint8_t)zt)
                 : ns == 1 ? hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_SCALAR), (uint8_t)zt)
                           : hfxb_set_dtype(b, hfxb_input(b, 0, 1, &ns), (uint8_t)zt);
    uint32_t y = v == 12 ? hfxb_output(b, 0, HFXB_DIMS(4, 3)) : hfxb_output(b, 0, HFXB_DIMS(3, 4));
    hfxb_set_dtype(b, y, yt);
    int32_t axis = v == 1 || v == 9 ? 1 : v == 2 ? -2 : v == 10 ? 2 : v == 13 ? 5 : 0;
    return hfxb_quant(b, 0, dq ? HFX_OP_DEQUANTIZE_LINEAR : HFX_OP_QUANTIZE_LINEAR, x, s, z, y, axis);
}

static void test_quant_ops(void) {
    for (int dq = 0; dq <= 20; dq += 20) {
        const char *name = dq ? "dequantize" : "quantize";
        for (int v = 0; v <= 3; v++) expect_parse(quant_prog, dq + v, HFX_OK, name);
        expect_parse(quant_prog, dq + 4, HFX_OK, name); /* u8 without a zero point */
        for (int v = 5; v <= 8; v++) expect_parse(quant_prog, dq + v, HFX_ERR_DTYPE, name);
        expect_parse(quant_prog, dq + 9, HFX_ERR_SHAPE, name);
        expect_parse(quant_prog, dq + 10, HFX_ERR_PARAM, name);
        expect_parse(quant_prog, dq + 11, HFX_ERR_SHAPE, name);
        expect_parse(quant_prog, dq + 12, HFX_ERR_SHAPE, name);
        expect_parse(quant_prog, dq + 13, HFX_ERR_PARAM, name);
        expect_parse(quant_prog, dq + 14, dq ? HFX_OK : HFX_ERR_DTYPE, name); /* i32: DequantizeLinear only */
    }
}

/* QMatMul of A[2,3,4] u8 x B[4,5] i8 -> Y[2,3,5] u8 unless said:
 * 0 per tensor, 1 per column (zp_b and scale [5]), 2 with a bias, 3 A f32, 4 zp_a of B's type,
 * 5 scale u8, 6 Y i32, 7 bias f32, 8 B [3,5] (K mismatch), 9 B rank 3, 10 scale [4],
 * 11 zp_a [2], 12 bias [4], 13 output [2,3,4], 14 8 inputs, 15 5 inputs, 16 a param set */
static uint32_t qmatmul_prog(hfxb *b, int v) {
    uint32_t adims[3] = {v == 18 ? 0u : 2u, 3, v == 17 ? 0u : 4u}, bdims[3] = {v == 8 ? 3u : v == 17 ? 0u : 4u, 5, 1};
    uint32_t ydims[3] = {v == 18 ? 0u : 2u, 3, v == 13 ? 4u : 5u};
    uint32_t ncol = v == 1 ? 5 : v == 10 ? 4 : 1, nb = v == 12 ? 4 : 5, two = 2;
    uint32_t in[8];
    in[0] = hfxb_set_dtype(b, hfxb_input(b, 0, 3, adims), v == 3 ? HFX_DTYPE_F32 : HFX_DTYPE_U8);
    in[1] = hfxb_set_dtype(b, hfxb_input(b, 0, v == 9 ? 3 : 2, bdims), HFX_DTYPE_I8);
    in[2] = hfxb_set_dtype(b, v == 11 ? hfxb_input(b, 0, 1, &two) : hfxb_input(b, 0, HFXB_SCALAR),
                           v == 4 ? HFX_DTYPE_I8 : HFX_DTYPE_U8);
    in[3] = hfxb_set_dtype(b, ncol > 1 ? hfxb_input(b, 0, 1, &ncol) : hfxb_input(b, 0, HFXB_SCALAR), HFX_DTYPE_I8);
    in[4] = ncol > 1 ? hfxb_input(b, 0, 1, &ncol) : hfxb_input(b, 0, HFXB_SCALAR);
    if (v == 5) hfxb_set_dtype(b, in[4], HFX_DTYPE_U8);
    in[5] = hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_SCALAR), HFX_DTYPE_U8);
    in[6] = hfxb_set_dtype(b, hfxb_input(b, 0, 1, &nb), v == 7 ? HFX_DTYPE_F32 : HFX_DTYPE_I32);
    in[7] = hfxb_input(b, 0, HFXB_SCALAR);
    uint32_t y = hfxb_set_dtype(b, hfxb_output(b, 0, 3, ydims), v == 6 ? HFX_DTYPE_I32 : HFX_DTYPE_U8);
    int32_t p[HFX_OP_PARAMS] = {0};
    p[0] = v == 16;
    uint32_t nin = v == 14 ? 8 : v == 15 ? 5 : v == 2 || v == 7 || v == 12 ? 7 : 6;
    return hfxb_op_add(b, 0, HFX_OP_QMATMUL, -1, nin, in, y, p);
}

static void test_qmatmul_op(void) {
    for (int v = 0; v <= 2; v++) expect_parse(qmatmul_prog, v, HFX_OK, "qmatmul");
    for (int v = 3; v <= 7; v++) expect_parse(qmatmul_prog, v, HFX_ERR_DTYPE, "qmatmul");
    for (int v = 8; v <= 13; v++) expect_parse(qmatmul_prog, v, HFX_ERR_SHAPE, "qmatmul");
    expect_parse(qmatmul_prog, 14, HFX_ERR_OP, "qmatmul");
    expect_parse(qmatmul_prog, 15, HFX_ERR_OP, "qmatmul");
    expect_parse(qmatmul_prog, 16, HFX_ERR_PARAM, "qmatmul");
    expect_parse(qmatmul_prog, 17, HFX_ERR_SHAPE, "qmatmul"); /* K = 0: no rule for it */
    expect_parse(qmatmul_prog, 18, HFX_OK, "qmatmul");        /* an empty batch */
}

/* QConv2D of X[1,4,5,5] u8 * W[6,2,3,3] i8, group 2, pads 1 -> Y[1,6,5,5] u8 unless said:
 * 0 per tensor, 1 per channel + bias, 2 W f32, 3 zp_w [5], 4 bias [5], 5 group 3, 6 output [1,6,3,3] */
static uint32_t qconv_prog(hfxb *b, int v) {
    uint32_t xd[4] = {1, 4, 5, 5}, wd[4] = {6, 2, 3, 3}, yd[4] = {1, 6, v == 6 ? 3u : 5u, v == 6 ? 3u : 5u};
    uint32_t nc = v == 1 || v == 4 ? 6 : v == 3 ? 5 : 1, nb = v == 4 ? 5 : 6;
    uint32_t in[7];
    in[0] = hfxb_set_dtype(b, hfxb_input(b, 0, 4, xd), HFX_DTYPE_U8);
    in[1] = hfxb_set_dtype(b, hfxb_input(b, 0, 4, wd), v == 2 ? HFX_DTYPE_F32 : HFX_DTYPE_I8);
    in[2] = hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_SCALAR), HFX_DTYPE_U8);
    in[3] = hfxb_set_dtype(b, nc > 1 ? hfxb_input(b, 0, 1, &nc) : hfxb_input(b, 0, HFXB_SCALAR), HFX_DTYPE_I8);
    in[4] = nc > 1 ? hfxb_input(b, 0, 1, &nc) : hfxb_input(b, 0, HFXB_SCALAR);
    if (v == 3) in[4] = hfxb_input(b, 0, HFXB_SCALAR);
    in[5] = hfxb_set_dtype(b, hfxb_input(b, 0, HFXB_SCALAR), HFX_DTYPE_U8);
    in[6] = hfxb_set_dtype(b, hfxb_input(b, 0, 1, &nb), HFX_DTYPE_I32);
    uint32_t y = hfxb_set_dtype(b, hfxb_output(b, 0, 4, yd), HFX_DTYPE_U8);
    int32_t p[HFX_OP_PARAMS] = {1, 1, 1, 1, 1, 1, 1, 1, v == 5 ? 3 : 2};
    return hfxb_op_add(b, 0, HFX_OP_QCONV2D, -1, v == 1 || v == 4 ? 7 : 6, in, y, p);
}

static void test_qconv_op(void) {
    expect_parse(qconv_prog, 0, HFX_OK, "qconv");
    expect_parse(qconv_prog, 1, HFX_OK, "qconv");
    expect_parse(qconv_prog, 2, HFX_ERR_DTYPE, "qconv");
    for (int v = 3; v <= 6; v++) expect_parse(qconv_prog, v, HFX_ERR_SHAPE, "qconv");
}

static void test_slice_axis(void) {
    int64_t f;
    CHECK(hfx_slice_axis(10, 0, INT32_MAX, 1, &f) == 10 && f == 0);
    CHECK(hfx_slice_axis(10, -3, INT32_MAX, 1, &f) == 3 && f == 7);
    CHECK(hfx_slice_axis(10, INT32_MAX, INT32_MIN, -1, &f) == 10 && f == 9);
    CHECK(hfx_slice_axis(10, 8, 2, -2, &f) == 3 && f == 8);
    CHECK(hfx_slice_axis(10, 2, 8, -1, &f) == 0);
    CHECK(hfx_slice_axis(10, -100, 100, 3, &f) == 4 && f == 0);
}

/* every byte flipped to a few values: the parser must never crash or read
 * out of bounds (ASan build), whatever it decides */
static void test_byte_flips(void) {
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    uint8_t *c = malloc(g_size);
    int ok = 0;
    for (size_t i = 0; i < g_size; i++) {
        for (size_t k = 0; k < sizeof vals; k++) {
            memcpy(c, g_bytes, g_size);
            if (c[i] == vals[k]) continue;
            c[i] = vals[k];
            hfx_error e;
            if (parse_bytes(c, g_size, &e) == HFX_OK) ok++;
        }
    }
    free(c);
    CHECK(ok > 0); /* some flips (e.g. in constant data) stay valid */
}

static void test_graph_errors(void) {
    /* scratch never written */
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(4));
    (void)hfxb_scratch(&b, 0, HFXB_DIMS(4));
    uint32_t o = hfxb_output(&b, 0, HFXB_DIMS(4));
    hfxb_unary(&b, 0, HFX_OP_RELU, x, o);
    size_t n;
    uint8_t *bytes = hfxb_encode(&b, &n);
    hfx_error e;
    CHECK(parse_bytes(bytes, n, &e) == HFX_ERR_GRAPH);
    free(bytes);
    hfxb_free(&b);
    /* output read by a later op of its task is fine */
    hfxb_init(&b);
    x = hfxb_input(&b, 0, HFXB_DIMS(4));
    uint32_t o1 = hfxb_output(&b, 0, HFXB_DIMS(4));
    uint32_t o2 = hfxb_output(&b, 0, HFXB_DIMS(4));
    hfxb_unary(&b, 0, HFX_OP_RELU, x, o1);
    hfxb_unary(&b, 0, HFX_OP_EXP, o1, o2);
    bytes = hfxb_encode(&b, &n);
    CHECK(parse_bytes(bytes, n, &e) == HFX_OK);
    free(bytes);
    hfxb_free(&b);
}

/* arena placement reuses dead scratch and orders the reuse */
static void test_arena_and_deps(void) {
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, 0, HFXB_DIMS(1000));
    uint32_t s1 = hfxb_scratch(&b, 0, HFXB_DIMS(1000));
    uint32_t s2 = hfxb_scratch(&b, 0, HFXB_DIMS(1000));
    uint32_t s3 = hfxb_scratch(&b, 0, HFXB_DIMS(1000));
    uint32_t o = hfxb_output(&b, 0, HFXB_DIMS(1000));
    hfxb_unary(&b, 0, HFX_OP_RELU, x, s1);  /* op 0 */
    hfxb_unary(&b, 0, HFX_OP_EXP, s1, s2);  /* op 1 */
    hfxb_unary(&b, 0, HFX_OP_TANH, s2, s3); /* op 2: s3 may reuse s1 */
    hfxb_unary(&b, 0, HFX_OP_RELU, s3, o);  /* op 3 */
    uint32_t xb = hfxb_input(&b, 1, HFXB_DIMS(10));
    uint32_t ob = hfxb_output(&b, 1, HFXB_DIMS(10));
    hfxb_unary(&b, 1, HFX_OP_RELU, xb, ob);
    size_t n;
    uint8_t *bytes = hfxb_encode(&b, &n);
    hfx_program *p;
    hfx_error e;
    CHECK(hfx_program_parse(bytes, n, &p, &e) == HFX_OK);
    CHECK(hfx_program_scratch_bytes(p, 0) == 2 * 4096);
    CHECK(p->tensors[s1].arena_offset == p->tensors[s3].arena_offset);
    CHECK(p->tensors[s1].arena_offset != p->tensors[s2].arena_offset);
    /* op 2 depends on op 1 (RAW) and on op 1 again as reader of s1 (WAR) and on op 0 (WAW) */
    const hfx_op *op2 = &p->ops[2];
    int has0 = 0, has1 = 0;
    for (uint32_t i = 0; i < op2->n_deps; i++) {
        has0 |= p->deps[op2->dep_begin + i] == 0;
        has1 |= p->deps[op2->dep_begin + i] == 1;
    }
    CHECK(has0 && has1 && op2->n_deps == 2);
    CHECK(p->ops[0].n_deps == 0 && p->ops[4].n_deps == 0);
    hfx_program_free(p);
    free(bytes);
    hfxb_free(&b);
}

static void test_arg_op(void) {
    static const hfx_status want[] = {HFX_OK,        HFX_ERR_DTYPE, HFX_ERR_DTYPE, HFX_ERR_PARAM,
                                      HFX_ERR_PARAM, HFX_ERR_PARAM, HFX_ERR_SHAPE, HFX_ERR_SHAPE,
                                      HFX_OK,        HFX_OK,        HFX_OK,        HFX_ERR_OP};
    for (int v = 0; v < 12; v++) expect_parse(arg_prog, v, want[v], "argmax");
}

static void test_log_softmax_op(void) {
    static const hfx_status want[] = {HFX_OK,        HFX_ERR_PARAM, HFX_ERR_PARAM, HFX_ERR_SHAPE,
                                      HFX_ERR_DTYPE, HFX_ERR_SHAPE, HFX_ERR_OP,    HFX_OK,
                                      HFX_ERR_OP,    HFX_ERR_PARAM, HFX_OK};
    for (int v = 0; v < 11; v++) expect_parse(log_softmax_prog, v, want[v], "log softmax");
}

int main(void) {
    for (size_t i = 0; i < sizeof g_w / sizeof g_w[0]; i++) g_w[i] = (float)i * 0.5f;
    hfxb b;
    base_program(&b);
    g_bytes = hfxb_encode(&b, &g_size);
    hfxb_free(&b);
    size_t heap0 = hfx_plat_coop_heap_in_use();
    RUN_TEST(test_valid);
    RUN_TEST(test_header);
    RUN_TEST(test_io_counts_consistent);
    RUN_TEST(test_truncated_every_byte);
    RUN_TEST(test_tensors);
    RUN_TEST(test_ops);
    RUN_TEST(test_params_and_shapes);
    RUN_TEST(test_other_ops);
    RUN_TEST(test_arg_op);
    RUN_TEST(test_log_softmax_op);
    RUN_TEST(test_pool_resize_activation_ops);
    RUN_TEST(test_slice_axis);
    RUN_TEST(test_quant_ops);
    RUN_TEST(test_qmatmul_op);
    RUN_TEST(test_zero_size_ops);
    RUN_TEST(test_qconv_op);
    RUN_TEST(test_byte_flips);
    RUN_TEST(test_graph_errors);
    RUN_TEST(test_arena_and_deps);
    CHECK(hfx_plat_coop_heap_in_use() == heap0); /* no leak on any error path (coop) */
    free(g_bytes);
    TEST_MAIN_END();
}
