/* fuzz_parse.c - libFuzzer target: the task program parser must reject any
 * bad byte with an error and never read out of bounds. Programs that parse
 * and are small are also run (coop platform, zeroed inputs) so that the
 * planner, the scheduler and the kernels see fuzzed-but-valid programs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "hexfuse/hexfuse.h"

static hfx_pool *g_pool;

static uint64_t op_work(const hfx_program *p, const hfx_op *op) {
    const hfx_tensor *y = &p->tensors[op->out[0]];
    const hfx_tensor *x = &p->tensors[op->in[0]];
    if (op->opcode == HFX_OP_GEMM) /* K multiply-adds per output */
        return y->numel * x->dims[op->params[HFX_P_GEMM_TRANS_A] ? x->rank - 2 : x->rank - 1];
    if (op->opcode == HFX_OP_CONV2D) { /* C/g * kh * kw per output */
        const hfx_tensor *w = &p->tensors[op->in[1]];
        return y->numel * w->dims[1] * w->dims[2] * w->dims[3];
    }
    if (op->opcode == HFX_OP_MAXPOOL || op->opcode == HFX_OP_AVGPOOL)
        return y->numel * (uint64_t)op->params[HFX_P_POOL_KERNEL_H] * (uint64_t)op->params[HFX_P_POOL_KERNEL_W];
    return x->numel + y->numel;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int one_input(const uint8_t *data, size_t size);

/* Each input is parsed as is, then as a copy whose header sizes and offsets
 * are made consistent with the input length: byte insertions and erasures
 * then still reach the tensor and op validation. A v2 copy keeps its section
 * sizes and drops the CRC flag (a CRC would refuse every mutation). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    if (size < HFX_HEADER_BYTES_V2 || size > (1u << 20)) return 0;
    int v2 = data[HFX_HDR_VERSION] == HFX_PROGRAM_VERSION_V2 && data[HFX_HDR_VERSION + 1] == 0;
    uint32_t header = v2 ? HFX_HEADER_BYTES_V2 : HFX_HEADER_BYTES;
    uint64_t tail = v2 ? (uint64_t)get32(data + HFX_HDR_SHAPES_BYTES) + get32(data + HFX_HDR_QUANT_BYTES) : 0;
    uint32_t nt = get32(data + 16), no = get32(data + 20);
    if (nt > HFX_MAX_TENSORS || no > HFX_MAX_OPS) return 0;
    uint64_t ops_off = header + (uint64_t)nt * HFX_TENSOR_RECORD_BYTES;
    uint64_t ops_end = ops_off + (uint64_t)no * HFX_OP_RECORD_BYTES;
    uint64_t data_off = (ops_end + 63) / 64 * 64;
    if (data_off + tail > size || (v2 && (size - data_off - tail) % 4 != 0)) return 0;
    uint8_t *c = malloc(size);
    memcpy(c, data, size);
    put32(c + 8, (uint32_t)size);
    if (v2) put32(c + HFX_HDR_FLAGS, get32(c + HFX_HDR_FLAGS) & ~HFX_PROGRAM_FLAG_CRC32);
    put32(c + 32, header);
    put32(c + 36, (uint32_t)ops_off);
    put32(c + 40, (uint32_t)data_off);
    put32(c + 44, (uint32_t)(size - data_off - tail));
    memset(c + ops_end, 0, (size_t)(data_off - ops_end));
    one_input(c, size);
    free(c);
    return 0;
}

/* A template specializes to its own shapes (to the same bytes) and to shapes whose symbolic dims
 * are derived from the input bytes; a result that parses specializes to itself. */
static void specialize_checks(const uint8_t *data, size_t size, const hfx_program *p) {
    uint32_t nin = p->n_inputs[0] + p->n_inputs[1];
    if (nin > 64) return;
    int64_t dims[64][HFX_MAX_RANK];
    const int64_t *ptrs[64];
    uint32_t ranks[64];
    for (uint32_t i = 0; i < nin; i++) {
        const hfx_tensor *t = &p->tensors[p->input_tensor[i]];
        for (uint32_t a = 0; a < t->rank; a++) dims[i][a] = t->dims[a];
        ranks[i] = t->rank;
        ptrs[i] = dims[i];
    }
    uint8_t *out = malloc(size), *again = malloc(size);
    hfx_error err;
    if (hfx_program_specialize(data, size, ptrs, ranks, nin, out, &err) != HFX_OK || memcmp(out, data, size)) abort();
    for (uint32_t i = 0; i < nin; i++) /* every dim a symbol may name: 1 .. 16 from the bytes */
        for (uint32_t a = 0; a < ranks[i]; a++) dims[i][a] = 1 + data[(i * 8 + a) % size] % 16;
    hfx_status st = hfx_program_specialize(data, size, ptrs, ranks, nin, out, &err);
    hfx_program *q = NULL;
    if (st == HFX_OK && hfx_program_parse(out, size, &q, &err) == HFX_OK) {
        for (uint32_t i = 0; i < nin; i++) {
            const hfx_tensor *t = &q->tensors[q->input_tensor[i]];
            for (uint32_t a = 0; a < t->rank; a++) dims[i][a] = t->dims[a];
        }
        if (hfx_program_specialize(out, size, ptrs, ranks, nin, again, &err) != HFX_OK || memcmp(out, again, size))
            abort();
        hfx_program_free(q);
    }
    free(out);
    free(again);
}

static int one_input(const uint8_t *data, size_t size) {
    hfx_program *p = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(data, size, &p, &err);
    if (st != HFX_OK) {
        if (p || err.status != st || err.message[0] == '\0') abort();
        return 0;
    }
    if (hfx_program_num_symbols(p)) specialize_checks(data, size, p);
    /* queries */
    hfx_tensor_info ti;
    hfx_op_info oi;
    for (uint32_t t = 0; t < hfx_program_num_tensors(p); t++)
        if (hfx_program_tensor_info(p, t, &ti) != HFX_OK) abort();
    for (uint32_t o = 0; o < hfx_program_num_ops(p); o++)
        if (hfx_program_op_info(p, o, &oi) != HFX_OK) abort();
    uint32_t nin = hfx_program_num_inputs(p, 0) + hfx_program_num_inputs(p, 1);
    uint32_t nout = hfx_program_num_outputs(p, 0) + hfx_program_num_outputs(p, 1);
    /* run it if small */
    uint64_t work = 0, bytes = 0;
    for (uint32_t o = 0; o < p->n_ops; o++) work += op_work(p, &p->ops[o]);
    for (uint32_t t = 0; t < p->n_tensors; t++) bytes += p->tensors[t].bytes;
    if (work <= (1u << 22) && bytes <= (1u << 22) && nin <= 64 && nout <= 64) {
        if (!g_pool) {
            hfx_pool_config cfg;
            hfx_pool_config_init(&cfg);
            cfg.arena_bytes = 4u << 20;
            if (hfx_pool_create(&cfg, &g_pool) != HFX_OK) abort();
        }
        const void *in[64];
        void *out[64];
        for (uint32_t i = 0; i < nin; i++) {
            hfx_program_input_info(p, i, &ti);
            in[i] = calloc(1, ti.bytes);
        }
        for (uint32_t i = 0; i < nout; i++) {
            hfx_program_output_info(p, i, &ti);
            out[i] = calloc(1, ti.bytes);
        }
        hfx_run_result r;
        st = hfx_run(g_pool, p, in, nin, out, nout, NULL, NULL, &r);
        if (st != HFX_OK && st != HFX_ERR_BUDGET) abort();
        if (st == HFX_OK && !(r.task_done[0] && r.task_done[1])) abort();
        for (uint32_t i = 0; i < nin; i++) free((void *)(uintptr_t)in[i]);
        for (uint32_t i = 0; i < nout; i++) free(out[i]);
    }
    hfx_program_free(p);
    return 0;
}
