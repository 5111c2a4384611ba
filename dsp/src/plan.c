/*
 * plan.c - cutting ops into work items. Shared by every build so that the
 * host and the DSP cut a program the same way. Items of one op write disjoint
 * parts of the output and never accumulate across items, so results do not
 * depend on which worker runs which item, or when.
 *
 * plan.v[] per opcode:
 *   GEMM      v0 batch, v1 M, v2 N, v3 K, v4 split (0 rows, 1 cols), v5 block, v6 blocks per batch
 *   CONV2D    v0 N, v1 group, v2 pixel block, v3 pixel blocks, v4 direct (1x1, no im2col), v5 K, v6 OH*OW
 *   binary/unary/CONCAT/COPY   v0 elements per item
 *   SOFTMAX   v0 outer, v1 D (axis length), v2 inner, v3 lines per item
 *   LAYERNORM/RMSNORM  v0 rows, v1 D, v2 rows per item
 *   REDUCE_*  v0 output elements, v1 output elements per item
 *   TRANSPOSE/SLICE/RESIZE  v0 output rows (all but the last axis), v1 last axis length, v2 rows per item
 *   MAXPOOL/AVGPOOL    v0 output rows (N*C*OH), v1 OW, v2 rows per item (about EW_CHUNK window taps)
 *   GLOBAL_AVGPOOL     v0 channels (N*C), v1 spatial size, v2 channels per item
 */
#include "core.h"

#define EW_CHUNK 32768u        /* elements per vector item (128 KiB of f32) */
#define COPY_CHUNK 262144u     /* elements per copy item (1 MiB of f32) */
#define GEMM_ITEM_FLOPS (1ull << 23) /* about 0.1 ms on one host core: small enough for two workers to share a GEMM */
#define GEMM_MIN_ROWS 64u
#define CONV_WS_MAX (512u * 1024u) /* im2col bytes per item */

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static hfx_status set_items(hfx_op *op, uint64_t n) {
    if (n == 0 || n > 0x7fffffffu) return HFX_ERR_SIZE;
    op->plan.n_items = (uint32_t)n;
    return HFX_OK;
}

static uint64_t per_item_for(uint64_t work_per_unit, uint64_t target) {
    if (work_per_unit == 0) work_per_unit = 1;
    uint64_t k = target / work_per_unit;
    return k ? k : 1;
}

hfx_status hfx_plan_op(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]];
    const hfx_tensor *y = &p->tensors[op->out[0]];
    hfx_plan *pl = &op->plan;
    memset(pl, 0, sizeof *pl);
    switch (op->opcode) {
    case HFX_OP_GEMM: {
        uint64_t m = y->dims[y->rank - 2], n = y->dims[y->rank - 1];
        uint64_t k = op->params[HFX_P_GEMM_TRANS_A] ? x->dims[x->rank - 2] : x->dims[x->rank - 1];
        uint64_t batch = y->numel / (m * n);
        uint64_t block, blocks, split;
        uint64_t flops_row = 2 * n * k;
        if (m >= 2 * GEMM_MIN_ROWS || n < 512) {
            split = 0;
            block = per_item_for(flops_row, GEMM_ITEM_FLOPS);
            if (block < GEMM_MIN_ROWS) block = GEMM_MIN_ROWS;
            block = ceil_div(block, 16) * 16;
            if (block >= m) block = m;
            else {
                /* even out the blocks */
                uint64_t nb = ceil_div(m, block);
                block = ceil_div(ceil_div(m, nb), 16) * 16;
                if (block > m) block = m;
            }
            blocks = ceil_div(m, block);
        } else {
            split = 1;
            block = per_item_for(2 * m * k, GEMM_ITEM_FLOPS);
            if (block < 256) block = 256;
            block = ceil_div(block, 64) * 64;
            if (block > n) block = n;
            blocks = ceil_div(n, block);
        }
        pl->v[0] = batch;
        pl->v[1] = m;
        pl->v[2] = n;
        pl->v[3] = k;
        pl->v[4] = split;
        pl->v[5] = block;
        pl->v[6] = blocks;
        return set_items(op, batch * blocks);
    }
    case HFX_OP_CONV2D: {
        const hfx_tensor *w = &p->tensors[op->in[1]];
        const int32_t *pr = op->params;
        uint64_t g = (uint64_t)pr[HFX_P_CONV_GROUP];
        uint64_t kk = (uint64_t)w->dims[1] * w->dims[2] * w->dims[3];
        uint64_t pix = (uint64_t)y->dims[2] * y->dims[3];
        uint64_t mg = w->dims[0] / g;
        bool direct = w->dims[2] == 1 && w->dims[3] == 1 && pr[0] == 0 && pr[1] == 0 && pr[2] == 0 && pr[3] == 0 &&
                      pr[4] == 1 && pr[5] == 1;
        uint64_t pb = per_item_for(2 * mg * kk, GEMM_ITEM_FLOPS);
        if (!direct) {
            uint64_t cap = CONV_WS_MAX / (kk * 4);
            if (cap == 0) cap = 1;
            if (pb > cap) pb = cap;
        }
        if (pb > pix) pb = pix;
        uint64_t nb = ceil_div(pix, pb);
        pb = ceil_div(pix, nb);
        pl->v[0] = x->dims[0];
        pl->v[1] = g;
        pl->v[2] = pb;
        pl->v[3] = nb;
        pl->v[4] = direct;
        pl->v[5] = kk;
        pl->v[6] = pix;
        pl->ws_bytes = direct ? 0 : (size_t)(kk * pb * 4);
        return set_items(op, (uint64_t)x->dims[0] * g * nb);
    }
    case HFX_OP_ADD:
    case HFX_OP_SUB:
    case HFX_OP_MUL:
    case HFX_OP_DIV:
    case HFX_OP_RELU:
    case HFX_OP_SIGMOID:
    case HFX_OP_TANH:
    case HFX_OP_GELU:
    case HFX_OP_SILU:
    case HFX_OP_EXP:
    case HFX_OP_HARDSIGMOID:
    case HFX_OP_HARDSWISH:
    case HFX_OP_CONCAT:
        pl->v[0] = EW_CHUNK;
        return set_items(op, ceil_div(y->numel, EW_CHUNK));
    case HFX_OP_COPY:
        pl->v[0] = COPY_CHUNK;
        return set_items(op, ceil_div(y->numel, COPY_CHUNK));
    case HFX_OP_SOFTMAX: {
        uint32_t axis = (uint32_t)op->params[HFX_P_AXIS];
        uint64_t outer = 1, inner = 1, d = x->dims[axis];
        for (uint32_t i = 0; i < axis; i++) outer *= x->dims[i];
        for (uint32_t i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
        uint64_t per = per_item_for(d, EW_CHUNK);
        pl->v[0] = outer;
        pl->v[1] = d;
        pl->v[2] = inner;
        pl->v[3] = per;
        return set_items(op, ceil_div(outer * inner, per));
    }
    case HFX_OP_LAYERNORM:
    case HFX_OP_RMSNORM: {
        uint32_t axis = (uint32_t)op->params[HFX_P_AXIS];
        uint64_t rows = 1, d = 1;
        for (uint32_t i = 0; i < axis; i++) rows *= x->dims[i];
        for (uint32_t i = axis; i < x->rank; i++) d *= x->dims[i];
        uint64_t per = per_item_for(d, EW_CHUNK);
        pl->v[0] = rows;
        pl->v[1] = d;
        pl->v[2] = per;
        return set_items(op, ceil_div(rows, per));
    }
    case HFX_OP_REDUCE_MEAN:
    case HFX_OP_REDUCE_SUM: {
        uint64_t r = x->numel / y->numel;
        uint64_t per = per_item_for(r, EW_CHUNK);
        pl->v[0] = y->numel;
        pl->v[1] = per;
        return set_items(op, ceil_div(y->numel, per));
    }
    case HFX_OP_MAXPOOL:
    case HFX_OP_AVGPOOL: {
        uint64_t ow = y->dims[3], rows = y->numel / ow;
        uint64_t taps = (uint64_t)op->params[HFX_P_POOL_KERNEL_H] * (uint64_t)op->params[HFX_P_POOL_KERNEL_W];
        uint64_t per = per_item_for(ow * taps, EW_CHUNK);
        pl->v[0] = rows;
        pl->v[1] = ow;
        pl->v[2] = per;
        return set_items(op, ceil_div(rows, per));
    }
    case HFX_OP_GLOBAL_AVGPOOL: {
        uint64_t ch = (uint64_t)x->dims[0] * x->dims[1], sp = x->numel / ch;
        uint64_t per = per_item_for(sp, EW_CHUNK);
        pl->v[0] = ch;
        pl->v[1] = sp;
        pl->v[2] = per;
        return set_items(op, ceil_div(ch, per));
    }
    case HFX_OP_TRANSPOSE:
    case HFX_OP_SLICE:
    case HFX_OP_RESIZE: {
        uint64_t last = y->rank ? y->dims[y->rank - 1] : 1;
        uint64_t rows = y->numel / last;
        uint64_t per = per_item_for(last, EW_CHUNK);
        pl->v[0] = rows;
        pl->v[1] = last;
        pl->v[2] = per;
        return set_items(op, ceil_div(rows, per));
    }
    default: break;
    }
    return HFX_ERR_OP;
}
