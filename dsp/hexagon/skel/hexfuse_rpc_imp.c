/*
 * hexfuse_rpc_imp.c - DSP side of the hexfuse FastRPC interface
 * (hexfuse/rpc_abi.h): the methods the skeleton dispatcher
 * (hexfuse_rpc_skel.c) calls once it has checked the marshalled buffers.
 *
 * One session (remote_handle64) owns one persistent worker pool and up to
 * HFX_RPC_MAX_PROGRAMS parsed programs. hfx_run serializes runs on one pool;
 * the host client (custom_ops/src/fastrpc_client.c) also serializes its
 * calls per session, since the session's trace buffer and program slots are
 * not locked here.
 *
 * Built with the platform of the build: posix in the host loopback
 * (custom_ops/CMakeLists.txt), coop in the qemu-hexagon image, QuRT
 * (dsp/hexagon/qurt/platform_qurt.c) only in an SDK build. Only the
 * definitions of hexfuse/rpc_abi.h are used: no SDK header.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "hexfuse/rpc_abi.h"
#include "hexfuse_rpc_imp.h"

#define HEXFUSE_RPC_TRACE 4096
#define HEXFUSE_RPC_MAX_SESSIONS 16

typedef struct session {
    hfx_pool *pool;
    hfx_program *programs[HFX_RPC_MAX_PROGRAMS];
    hfx_trace_event trace[HEXFUSE_RPC_TRACE];
} session;

/* Live sessions: a handle is used only if it was returned by open and not
 * closed yet, so a stale or forged handle is an error, not a wild pointer. */
static _Atomic(uintptr_t) live_sessions[HEXFUSE_RPC_MAX_SESSIONS];

static session *session_of(remote_handle64 handle)
{
    if (handle == 0)
        return NULL;
    for (int i = 0; i < HEXFUSE_RPC_MAX_SESSIONS; i++)
        if ((remote_handle64)atomic_load(&live_sessions[i]) == handle)
            return (session *)(uintptr_t)handle;
    return NULL;
}

static int register_session(session *s)
{
    for (int i = 0; i < HEXFUSE_RPC_MAX_SESSIONS; i++) {
        uintptr_t empty = 0;
        if (atomic_compare_exchange_strong(&live_sessions[i], &empty, (uintptr_t)s))
            return 1;
    }
    return 0;
}

static int unregister_session(remote_handle64 handle)
{
    for (int i = 0; i < HEXFUSE_RPC_MAX_SESSIONS; i++) {
        uintptr_t h = (uintptr_t)handle;
        if (handle != 0 && atomic_compare_exchange_strong(&live_sessions[i], &h, 0))
            return 1;
    }
    return 0;
}

static const hfx_program *program_of(const session *s, int program_id)
{
    if (program_id < 0 || program_id >= HFX_RPC_MAX_PROGRAMS)
        return NULL;
    return s->programs[program_id];
}

int hexfuse_rpc_open(const char *uri, remote_handle64 *handle)
{
    (void)uri;
    if (!handle)
        return HFX_AEE_EBADPARM;
    session *s = calloc(1, sizeof *s);
    if (!s)
        return HFX_AEE_ENOMEMORY;
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
#ifdef HEXFUSE_RPC_ARENA_BYTES /* builds whose heap cannot hold the default arena (qemu image) */
    cfg.arena_bytes = HEXFUSE_RPC_ARENA_BYTES;
#endif
    if (hfx_pool_create(&cfg, &s->pool) != HFX_OK) {
        free(s);
        return HFX_AEE_EFAILED;
    }
    if (!register_session(s)) {
        hfx_pool_destroy(s->pool);
        free(s);
        return HFX_AEE_ENOMEMORY;
    }
    *handle = (remote_handle64)(uintptr_t)s;
    return HFX_AEE_SUCCESS;
}

int hexfuse_rpc_close(remote_handle64 handle)
{
    session *s = session_of(handle);
    if (!s || !unregister_session(handle))
        return HFX_AEE_EBADSTATE;
    for (int i = 0; i < HFX_RPC_MAX_PROGRAMS; i++)
        hfx_program_free(s->programs[i]);
    hfx_pool_destroy(s->pool);
    free(s);
    return HFX_AEE_SUCCESS;
}

int hexfuse_rpc_load_program(remote_handle64 handle, const unsigned char *program, int programLen, int *program_id)
{
    session *s = session_of(handle);
    if (!s)
        return HFX_AEE_EBADSTATE;
    if (!program || programLen <= 0 || !program_id)
        return HFX_AEE_EBADPARM;
    for (int i = 0; i < HFX_RPC_MAX_PROGRAMS; i++) {
        if (s->programs[i])
            continue;
        hfx_error err;
        if (hfx_program_parse(program, (size_t)programLen, &s->programs[i], &err) != HFX_OK) {
            s->programs[i] = NULL;
            return HFX_AEE_EBADPARM;
        }
        *program_id = i;
        return HFX_AEE_SUCCESS;
    }
    return HFX_AEE_ENOMEMORY;
}

int hexfuse_rpc_unload_program(remote_handle64 handle, int program_id)
{
    session *s = session_of(handle);
    if (!s)
        return HFX_AEE_EBADSTATE;
    if (!program_of(s, program_id))
        return HFX_AEE_EBADPARM;
    hfx_program_free(s->programs[program_id]);
    s->programs[program_id] = NULL;
    return HFX_AEE_SUCCESS;
}

/* Points ptrs[i] at tensor i of a packed buffer; 0 if the buffer is too short. */
static int unpack(const hfx_program *p, int outputs, unsigned char *base, size_t len, void **ptrs, size_t n)
{
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        hfx_tensor_info ti;
        hfx_status st = outputs ? hfx_program_output_info(p, (uint32_t)i, &ti)
                                : hfx_program_input_info(p, (uint32_t)i, &ti);
        if (st != HFX_OK || off + ti.bytes > len)
            return 0;
        ptrs[i] = base + off;
        off = hfx_rpc_align(off + ti.bytes);
    }
    return 1;
}

static void fill_stats(session *s, const hfx_run_result *res, uint64_t *stats, int statsLen)
{
    hfx_trace_summary sum;
    memset(&sum, 0, sizeof sum);
    hfx_trace_summarize(s->trace, res->trace_events, &sum);
    uint64_t v[HFX_RPC_STATS] = {0};
    v[HFX_RPC_STAT_WALL_NS] = res->wall_ns;
    v[HFX_RPC_STAT_BUSY_MATRIX_NS] = sum.busy_ns[HFX_ENGINE_MATRIX];
    v[HFX_RPC_STAT_BUSY_VECTOR_NS] = sum.busy_ns[HFX_ENGINE_VECTOR];
    v[HFX_RPC_STAT_BUSY_COPY_NS] = sum.busy_ns[HFX_ENGINE_COPY];
    v[HFX_RPC_STAT_MATRIX_VECTOR_OVERLAP_NS] = sum.matrix_vector_overlap_ns;
    v[HFX_RPC_STAT_TASK_OVERLAP_NS] = sum.task_overlap_ns;
    v[HFX_RPC_STAT_ITEMS_A] = res->items_run[HFX_TASK_A];
    v[HFX_RPC_STAT_ITEMS_B] = res->items_run[HFX_TASK_B];
    v[HFX_RPC_STAT_SERIALIZED] = (uint64_t)res->serialized;
    for (int i = 0; i < statsLen && i < HFX_RPC_STATS; i++)
        stats[i] = v[i];
}

/* A program with a shape section, specialized to larger shapes than it was
 * lowered for, may hold a task whose scratch alone exceeds the pool's on-chip
 * arena (HFX_ERR_BUDGET): run the tasks one after the other with their
 * scratch in a run state's own heap arena (DDR on the DSP), as the host
 * backend does (custom_ops/src/hfx.rs), rather than fail. A program without
 * one was checked against the budget by the pass and still fails. */
static hfx_status run_fitting(session *s, const hfx_program *p, void **in, size_t n_in, void **out, size_t n_out,
                              hfx_run_options *opt, hfx_run_result *res)
{
    hfx_status st = hfx_run(s->pool, p, (const void *const *)in, n_in, (void *const *)out, n_out, opt, NULL, res);
    if (st != HFX_ERR_BUDGET || hfx_program_num_symbols(p) == 0)
        return st;
    size_t a = hfx_program_scratch_bytes(p, HFX_TASK_A), b = hfx_program_scratch_bytes(p, HFX_TASK_B);
    hfx_runstate *rs = NULL;
    st = hfx_runstate_create(s->pool, p, &rs);
    if (st != HFX_OK)
        return st;
    opt->flags |= HFX_RUN_FORCE_SERIAL;
    opt->budget_bytes = a > b ? a : b;
    st = hfx_run(s->pool, p, (const void *const *)in, n_in, (void *const *)out, n_out, opt, rs, res);
    hfx_runstate_destroy(rs);
    return st;
}

int hexfuse_rpc_run(remote_handle64 handle, int program_id, float share_a, const unsigned char *inputs,
                    int inputsLen, unsigned char *outputs, int outputsLen, uint64_t *stats, int statsLen)
{
    session *s = session_of(handle);
    if (!s)
        return HFX_AEE_EBADSTATE;
    const hfx_program *p = program_of(s, program_id);
    if (!p || !(share_a >= 0.0f && share_a <= 1.0f) || inputsLen < 0 || outputsLen < 0 || statsLen < 0)
        return HFX_AEE_EBADPARM;
    size_t n_in = hfx_program_num_inputs(p, HFX_TASK_A) + hfx_program_num_inputs(p, HFX_TASK_B);
    size_t n_out = hfx_program_num_outputs(p, HFX_TASK_A) + hfx_program_num_outputs(p, HFX_TASK_B);
    void **in = calloc(n_in ? n_in : 1, sizeof *in);
    void **out = calloc(n_out ? n_out : 1, sizeof *out);
    int rc = HFX_AEE_SUCCESS;
    if (!in || !out) {
        rc = HFX_AEE_ENOMEMORY;
        goto done;
    }
    /* the kernel only reads inputs: the cast drops const for the shared helper */
    if (!unpack(p, 0, (unsigned char *)(uintptr_t)inputs, (size_t)inputsLen, in, n_in) ||
        !unpack(p, 1, outputs, (size_t)outputsLen, out, n_out)) {
        rc = HFX_AEE_EBADPARM;
        goto done;
    }
    hfx_run_options opt;
    hfx_run_options_init(&opt);
    opt.share_a = share_a;
    opt.trace = s->trace;
    opt.trace_capacity = HEXFUSE_RPC_TRACE;
    hfx_run_result res;
    if (run_fitting(s, p, in, n_in, out, n_out, &opt, &res) != HFX_OK) {
        rc = HFX_AEE_EFAILED;
        goto done;
    }
    fill_stats(s, &res, stats, statsLen);
done:
    free(in);
    free(out);
    return rc;
}
