/*
 * rpc_abi.h - the FastRPC interface of the hexfuse cDSP kernel, written by
 * hand (no qaic, no Hexagon SDK headers). Shared by both sides:
 *
 *   DSP side   dsp/hexagon/skel/hexfuse_rpc_skel.c   hexfuse_rpc_skel_handle_invoke()
 *              dsp/hexagon/skel/hexfuse_rpc_imp.c    the methods (session, programs, runs)
 *   host side  custom_ops/src/fastrpc_client.c        dlopen(libcdsprpc.so), remote_handle64_*
 *
 * 1. FastRPC types. remote_handle64, remote_buf, remote_arg and the scalars
 *    word are the public FastRPC ABI (libcdsprpc.so's remote_handle64_open /
 *    _invoke / _close). They are declared here from that ABI, not copied from
 *    an SDK header: do not include the SDK's remote.h in the same file.
 *
 *    The scalars word `sc` of an invocation:
 *      bits 31..29  attributes (ignored by this interface)
 *      bits 28..24  method index
 *      bits 23..16  number of input buffers
 *      bits 15..8   number of output buffers
 *      bits  7..4   number of input handles
 *      bits  3..0   number of output handles
 *    pra[] holds the input buffers, then the output buffers, then the input
 *    handles, then the output handles. FastRPC copies input buffers to the
 *    DSP and output buffers back; a skeleton must check every count and
 *    length itself.
 *
 * 2. Methods. Methods 0 and 1 are open and close of a handle64 interface:
 *    the DSP framework calls them when the host calls remote_handle64_open /
 *    _close with the URI below (the layout qaic gives open/close). Methods 2..4
 *    are called by the host through remote_handle64_invoke on the open handle.
 *    Multi-byte fields are little endian (host and Hexagon both are).
 *
 *    0 open    in  [0] uint32 uri_len (bytes of the URI including its NUL)
 *                  [1] the URI, NUL-terminated, nLen >= uri_len
 *              out handle [2].h64: the session handle
 *    1 close   in handle [0].h64: the session handle
 *    2 load    in  [0] the task-program bytes (dsp/README.md), 1 .. HFX_RPC_MAX_PROGRAM_BYTES
 *              out [1] hfx_rpc_load_out (the program id)
 *    3 unload  in  [0] hfx_rpc_unload_in
 *    4 run     in  [0] hfx_rpc_run_in
 *                  [1] the node's inputs in io order, input i at offset
 *                      hfx_rpc_align(end of input i-1) (128-byte steps), dense
 *                  [2] (out) the outputs, packed the same way
 *                  [3] (out) uint64[HFX_RPC_STATS], see enum hfx_rpc_stat
 *
 *    Every fixed-size buffer must have exactly its struct's size. Results
 *    are HFX_AEE_* codes (the values of the AEE error codes FastRPC uses).
 *
 * Nothing here has run on a device: the transport is exercised on the host
 * by a loopback stand-in for libcdsprpc.so (custom_ops/src/rpc_loopback.c)
 * and under qemu-hexagon by dsp/tests/qemu/test_rpc_skel.c.
 */
#ifndef HEXFUSE_RPC_ABI_H
#define HEXFUSE_RPC_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- FastRPC types (public ABI) ------------------------------------------ */

typedef uint32_t remote_handle;
typedef uint64_t remote_handle64;

typedef struct remote_buf {
    void *pv;    /* buffer */
    size_t nLen; /* its length in bytes */
} remote_buf;

typedef struct remote_dma_handle {
    int32_t fd;
    uint32_t offset;
} remote_dma_handle;

typedef union remote_arg {
    remote_buf buf;
    remote_handle h;
    remote_handle64 h64;
    remote_dma_handle dma;
} remote_arg;

#define REMOTE_SCALARS_ATTR(sc) (((uint32_t)(sc) >> 29) & 0x7u)
#define REMOTE_SCALARS_METHOD(sc) (((uint32_t)(sc) >> 24) & 0x1fu)
#define REMOTE_SCALARS_INBUFS(sc) (((uint32_t)(sc) >> 16) & 0xffu)
#define REMOTE_SCALARS_OUTBUFS(sc) (((uint32_t)(sc) >> 8) & 0xffu)
#define REMOTE_SCALARS_INHANDLES(sc) (((uint32_t)(sc) >> 4) & 0xfu)
#define REMOTE_SCALARS_OUTHANDLES(sc) ((uint32_t)(sc) & 0xfu)
#define REMOTE_SCALARS_LENGTH(sc)                                  \
    (REMOTE_SCALARS_INBUFS(sc) + REMOTE_SCALARS_OUTBUFS(sc) +      \
     REMOTE_SCALARS_INHANDLES(sc) + REMOTE_SCALARS_OUTHANDLES(sc))
#define REMOTE_SCALARS_MAKEX(attr, method, n_in, n_out, n_hin, n_hout)       \
    ((((uint32_t)(attr) & 0x7u) << 29) | (((uint32_t)(method) & 0x1fu) << 24) | \
     (((uint32_t)(n_in) & 0xffu) << 16) | (((uint32_t)(n_out) & 0xffu) << 8) |  \
     (((uint32_t)(n_hin) & 0xfu) << 4) | ((uint32_t)(n_hout) & 0xfu))

/* ---- error codes (the AEE values FastRPC reports) -------------------------- */

#define HFX_AEE_SUCCESS 0
#define HFX_AEE_EFAILED 1      /* the kernel failed (hfx_run, pool creation) */
#define HFX_AEE_ENOMEMORY 2    /* out of memory, or no free program slot */
#define HFX_AEE_EBADSTATE 13   /* unknown or closed session handle */
#define HFX_AEE_EBADPARM 14    /* wrong buffer counts or lengths, bad program id, invalid program */
#define HFX_AEE_EUNSUPPORTED 20 /* unknown method */

static inline const char *hfx_rpc_error_name(int code)
{
    switch (code) {
    case HFX_AEE_SUCCESS: return "AEE_SUCCESS";
    case HFX_AEE_EFAILED: return "AEE_EFAILED";
    case HFX_AEE_ENOMEMORY: return "AEE_ENOMEMORY";
    case HFX_AEE_EBADSTATE: return "AEE_EBADSTATE";
    case HFX_AEE_EBADPARM: return "AEE_EBADPARM";
    case HFX_AEE_EUNSUPPORTED: return "AEE_EUNSUPPORTED";
    default: return "a FastRPC or DSP error";
    }
}

/* ---- the interface ------------------------------------------------------- */

#define HFX_RPC_ABI_VERSION 1u
#define HFX_RPC_SKEL_SYMBOL "hexfuse_rpc_skel_handle_invoke"
/* The URI of remote_handle64_open: the skeleton library on the DSP, its invoke
 * symbol, the interface version, the domain (cDSP). */
#define HFX_RPC_URI_MODULE "file:///libhexfuse_rpc_skel.so?" HFX_RPC_SKEL_SYMBOL "&_modver=1.0"
#define HFX_RPC_URI_CDSP HFX_RPC_URI_MODULE "&_dom=cdsp"

enum hfx_rpc_method {
    HFX_RPC_METHOD_OPEN = 0,
    HFX_RPC_METHOD_CLOSE = 1,
    HFX_RPC_METHOD_LOAD = 2,
    HFX_RPC_METHOD_UNLOAD = 3,
    HFX_RPC_METHOD_RUN = 4,
};

#define HFX_RPC_SC_OPEN REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_OPEN, 2, 0, 0, 1)
#define HFX_RPC_SC_CLOSE REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_CLOSE, 0, 0, 1, 0)
#define HFX_RPC_SC_LOAD REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_LOAD, 1, 1, 0, 0)
#define HFX_RPC_SC_UNLOAD REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_UNLOAD, 1, 0, 0, 0)
#define HFX_RPC_SC_RUN REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_RUN, 2, 2, 0, 0)

#define HFX_RPC_MAX_PROGRAMS 64                    /* loaded programs per session */
#define HFX_RPC_MAX_PROGRAM_BYTES 0x7fffffffu       /* the imp takes int lengths */
#define HFX_RPC_MAX_IO_BYTES 0x7fffffffu
#define HFX_RPC_ALIGN 128u                          /* packing step of inputs / outputs */

typedef struct hfx_rpc_load_out {
    int32_t program_id; /* >= 0 */
} hfx_rpc_load_out;

typedef struct hfx_rpc_unload_in {
    int32_t program_id;
} hfx_rpc_unload_in;

typedef struct hfx_rpc_run_in {
    int32_t program_id;
    float share_a; /* vector/copy share of task A in [0, 1] (hfx_run_options.share_a) */
} hfx_rpc_run_in;

enum hfx_rpc_stat {
    HFX_RPC_STAT_WALL_NS = 0,
    HFX_RPC_STAT_BUSY_MATRIX_NS,
    HFX_RPC_STAT_BUSY_VECTOR_NS,
    HFX_RPC_STAT_BUSY_COPY_NS,
    HFX_RPC_STAT_MATRIX_VECTOR_OVERLAP_NS,
    HFX_RPC_STAT_TASK_OVERLAP_NS,
    HFX_RPC_STAT_ITEMS_A,
    HFX_RPC_STAT_ITEMS_B,
    HFX_RPC_STAT_SERIALIZED,
    HFX_RPC_STATS /* = 9 values, the length of run's stats buffer / 8 */
};

/* Offset of the next packed tensor after `end` bytes. */
static inline uint64_t hfx_rpc_align(uint64_t end)
{
    return (end + HFX_RPC_ALIGN - 1u) & ~(uint64_t)(HFX_RPC_ALIGN - 1u);
}

/* The DSP-side entry point named in the URI. */
int hexfuse_rpc_skel_handle_invoke(remote_handle64 handle, uint32_t sc, remote_arg *pra);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_RPC_ABI_H */
