/* registry.c - the op descriptors and the opcode switch, generated from
 * hexfuse/ops.def. A row missing for an opcode of enum hfx_opcode is a
 * -Wswitch-enum error here; a row twice is a duplicate case. */
#include "kernels.h"

#define HFX_OP_ROW(NAME, label_, min_in_, max_in_, n_out_, engines_, n_params_, family, typed_) \
    static const hfx_op_desc k_##NAME = {.opcode = HFX_OP_##NAME,                   \
                                         .label = label_,                           \
                                         .min_in = min_in_,                         \
                                         .max_in = max_in_,                         \
                                         .n_out = n_out_,                           \
                                         .engines = engines_,                       \
                                         .n_params = n_params_,                     \
                                         .typed = typed_,                           \
                                         .validate = hfx_validate_##family,         \
                                         .plan = hfx_plan_##family,                 \
                                         .run = hfx_run_##family};
#define HFX_OP(...) HFX_OP_ROW(__VA_ARGS__, false)
#define HFX_OP_TYPED(...) HFX_OP_ROW(__VA_ARGS__, true)
#include "hexfuse/ops.def"
#undef HFX_OP_ROW

const hfx_op_desc *hfx_op_desc_find(uint32_t opcode) {
    if (opcode > 0xffffu) return NULL;
    switch ((enum hfx_opcode)opcode) {
#define HFX_OP(NAME, ...) \
    case HFX_OP_##NAME: return &k_##NAME;
#include "hexfuse/ops.def"
    }
    return NULL; /* not an opcode */
}

void hfx_kernel_run_item(const hfx_kernel_args *a, uint32_t item) { a->op->desc->run(a, item); }
