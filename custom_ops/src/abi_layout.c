/* abi_layout.c - the C compiler's layout of the hexfuse.h structs the Rust plugin declares by
 * hand (custom_ops/src/hfx.rs). The plugin compares this table with its own at registration
 * and refuses to load on a mismatch, so a change to hexfuse.h cannot go unnoticed. Keep the
 * order in step with rust_layout() in hfx.rs. */
#include <stddef.h>
#include <stdint.h>

#include "hexfuse/hexfuse.h"

const uint32_t hexfuse_abi_layout[24] = {
    sizeof(hfx_error),
    offsetof(hfx_error, message),
    sizeof(hfx_tensor_info),
    offsetof(hfx_tensor_info, io_index),
    offsetof(hfx_tensor_info, dims),
    offsetof(hfx_tensor_info, numel),
    offsetof(hfx_tensor_info, bytes),
    sizeof(hfx_pool_config),
    offsetof(hfx_pool_config, arena_bytes),
    offsetof(hfx_pool_config, flags),
    sizeof(hfx_trace_event),
    offsetof(hfx_trace_event, op),
    offsetof(hfx_trace_event, start_ns),
    sizeof(hfx_trace_summary),
    offsetof(hfx_trace_summary, matrix_vector_overlap_ns),
    sizeof(hfx_run_options),
    offsetof(hfx_run_options, budget_bytes),
    offsetof(hfx_run_options, max_items),
    offsetof(hfx_run_options, flags),
    offsetof(hfx_run_options, trace),
    sizeof(hfx_run_result),
    offsetof(hfx_run_result, items_run),
    offsetof(hfx_run_result, trace_events),
    sizeof(hfx_status),
};
