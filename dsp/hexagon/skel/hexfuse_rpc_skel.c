/*
 * hexfuse_rpc_skel.c - the skeleton of the hexfuse FastRPC interface, written
 * by hand in place of qaic's output: hexfuse_rpc_skel_handle_invoke() checks
 * the scalars word and every marshalled buffer of a call (hexfuse/rpc_abi.h)
 * before it touches them, then calls the method in hexfuse_rpc_imp.c.
 *
 * A malformed call (wrong method, wrong buffer or handle counts, a buffer
 * shorter or longer than its layout, a NULL buffer with a length) returns
 * HFX_AEE_EBADPARM or HFX_AEE_EUNSUPPORTED and never reads or writes it.
 * The attribute bits of the scalars word are ignored.
 */
#include <string.h>

#include "hexfuse/rpc_abi.h"
#include "hexfuse_rpc_imp.h"

#define SC_ATTR_MASK 0xe0000000u

static int sc_is(uint32_t sc, uint32_t want) { return (sc & ~SC_ATTR_MASK) == want; }

/* A buffer of exactly `len` bytes with memory behind it. */
static int buf_exact(const remote_arg *a, size_t len) { return a->buf.nLen == len && a->buf.pv != NULL; }

/* A buffer of min..max bytes; NULL only when empty. */
static int buf_within(const remote_arg *a, size_t min, size_t max)
{
    return a->buf.nLen >= min && a->buf.nLen <= max && (a->buf.pv != NULL || a->buf.nLen == 0);
}

static int skel_open(uint32_t sc, remote_arg *pra)
{
    if (!sc_is(sc, HFX_RPC_SC_OPEN) || !buf_exact(&pra[0], sizeof(uint32_t)))
        return HFX_AEE_EBADPARM;
    uint32_t uri_len;
    memcpy(&uri_len, pra[0].buf.pv, sizeof uri_len);
    if (uri_len == 0 || !buf_within(&pra[1], uri_len, HFX_RPC_MAX_IO_BYTES))
        return HFX_AEE_EBADPARM;
    const char *uri = pra[1].buf.pv;
    if (uri[uri_len - 1] != '\0')
        return HFX_AEE_EBADPARM;
    remote_handle64 h = 0;
    int rc = hexfuse_rpc_open(uri, &h);
    if (rc == HFX_AEE_SUCCESS)
        pra[2].h64 = h;
    return rc;
}

static int skel_close(uint32_t sc, remote_arg *pra)
{
    if (!sc_is(sc, HFX_RPC_SC_CLOSE))
        return HFX_AEE_EBADPARM;
    return hexfuse_rpc_close(pra[0].h64);
}

static int skel_load(remote_handle64 h, uint32_t sc, remote_arg *pra)
{
    if (!sc_is(sc, HFX_RPC_SC_LOAD) || !buf_within(&pra[0], 1, HFX_RPC_MAX_PROGRAM_BYTES) ||
        !buf_exact(&pra[1], sizeof(hfx_rpc_load_out)))
        return HFX_AEE_EBADPARM;
    int id = -1;
    int rc = hexfuse_rpc_load_program(h, pra[0].buf.pv, (int)pra[0].buf.nLen, &id);
    if (rc == HFX_AEE_SUCCESS) {
        hfx_rpc_load_out out = {id};
        memcpy(pra[1].buf.pv, &out, sizeof out);
    }
    return rc;
}

static int skel_unload(remote_handle64 h, uint32_t sc, remote_arg *pra)
{
    if (!sc_is(sc, HFX_RPC_SC_UNLOAD) || !buf_exact(&pra[0], sizeof(hfx_rpc_unload_in)))
        return HFX_AEE_EBADPARM;
    hfx_rpc_unload_in in;
    memcpy(&in, pra[0].buf.pv, sizeof in);
    return hexfuse_rpc_unload_program(h, in.program_id);
}

static int skel_run(remote_handle64 h, uint32_t sc, remote_arg *pra)
{
    if (!sc_is(sc, HFX_RPC_SC_RUN) || !buf_exact(&pra[0], sizeof(hfx_rpc_run_in)) ||
        !buf_within(&pra[1], 0, HFX_RPC_MAX_IO_BYTES) || !buf_within(&pra[2], 0, HFX_RPC_MAX_IO_BYTES) ||
        !buf_exact(&pra[3], HFX_RPC_STATS * sizeof(uint64_t)))
        return HFX_AEE_EBADPARM;
    hfx_rpc_run_in in;
    memcpy(&in, pra[0].buf.pv, sizeof in);
    uint64_t stats[HFX_RPC_STATS] = {0};
    int rc = hexfuse_rpc_run(h, in.program_id, in.share_a, pra[1].buf.pv, (int)pra[1].buf.nLen, pra[2].buf.pv,
                             (int)pra[2].buf.nLen, stats, HFX_RPC_STATS);
    if (rc == HFX_AEE_SUCCESS)
        memcpy(pra[3].buf.pv, stats, sizeof stats); /* the stats buffer may be unaligned */
    return rc;
}

int hexfuse_rpc_skel_handle_invoke(remote_handle64 handle, uint32_t sc, remote_arg *pra)
{
    if (pra == NULL && REMOTE_SCALARS_LENGTH(sc) != 0)
        return HFX_AEE_EBADPARM;
    switch (REMOTE_SCALARS_METHOD(sc)) {
    case HFX_RPC_METHOD_OPEN: return skel_open(sc, pra);
    case HFX_RPC_METHOD_CLOSE: return skel_close(sc, pra);
    case HFX_RPC_METHOD_LOAD: return skel_load(handle, sc, pra);
    case HFX_RPC_METHOD_UNLOAD: return skel_unload(handle, sc, pra);
    case HFX_RPC_METHOD_RUN: return skel_run(handle, sc, pra);
    default: return HFX_AEE_EUNSUPPORTED;
    }
}
