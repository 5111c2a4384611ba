/* kernels.c - dispatch of a work item to its op family (host build). */
#include "kernels.h"

void hfx_kernel_run_item(const hfx_kernel_args *a, uint32_t item) {
    switch (a->op->opcode) {
    case HFX_OP_GEMM: hfx_k_gemm(a, item); break;
    case HFX_OP_CONV2D: hfx_k_conv2d(a, item); break;
    case HFX_OP_ADD:
    case HFX_OP_SUB:
    case HFX_OP_MUL:
    case HFX_OP_DIV: hfx_k_binary(a, item); break;
    case HFX_OP_RELU:
    case HFX_OP_SIGMOID:
    case HFX_OP_TANH:
    case HFX_OP_GELU:
    case HFX_OP_SILU:
    case HFX_OP_EXP:
    case HFX_OP_HARDSIGMOID:
    case HFX_OP_HARDSWISH: hfx_k_unary(a, item); break;
    case HFX_OP_SOFTMAX: hfx_k_softmax(a, item); break;
    case HFX_OP_LAYERNORM:
    case HFX_OP_RMSNORM: hfx_k_norm(a, item); break;
    case HFX_OP_REDUCE_MEAN:
    case HFX_OP_REDUCE_SUM: hfx_k_reduce(a, item); break;
    case HFX_OP_TRANSPOSE: hfx_k_transpose(a, item); break;
    case HFX_OP_CONCAT: hfx_k_concat(a, item); break;
    case HFX_OP_SLICE: hfx_k_slice(a, item); break;
    case HFX_OP_COPY: hfx_k_copy(a, item); break;
    case HFX_OP_RESIZE: hfx_k_resize(a, item); break;
    case HFX_OP_MAXPOOL:
    case HFX_OP_AVGPOOL: hfx_k_pool2d(a, item); break;
    case HFX_OP_GLOBAL_AVGPOOL: hfx_k_global_avgpool(a, item); break;
    default: break; /* unreachable: the parser rejects unknown opcodes */
    }
}
