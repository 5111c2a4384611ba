/* rpc_loopback.c - libhexfuse_rpc_loopback.so: a TEST STAND-IN for libcdsprpc.so, not a FastRPC
 * implementation. It exports remote_handle64_open / _invoke / _close and hands every call, in the
 * same process, to the DSP-side skeleton dispatcher (dsp/hexagon/skel/hexfuse_rpc_skel.c) and
 * methods (hexfuse_rpc_imp.c), built for the host with the posix platform.
 *
 * What is real: the host client's marshalling (fastrpc_client.c), the skeleton's checks and the
 * kernel. What is not: the transport. Like FastRPC, it passes the skeleton copies of the input
 * buffers and fresh output buffers that it copies back after the call, so neither side can rely
 * on shared memory; it does not model the kernel driver, ION/rpcmem buffers, the DSP's address
 * space or its process, so it says nothing about a device.
 *
 * Used by tests with HEXFUSE_CDSPRPC_LIB=hexfuse_onnx/_lib/libhexfuse_rpc_loopback.so. */
#include <stdlib.h>
#include <string.h>

#include "hexfuse/rpc_abi.h"

/* exported by the version script rpc_loopback.map */
int remote_handle64_open(const char *uri, remote_handle64 *ph);
int remote_handle64_invoke(remote_handle64 h, uint32_t sc, remote_arg *pra);
int remote_handle64_close(remote_handle64 h);

/* What the FastRPC framework does with a URI: find the module and its invoke symbol. */
static int uri_names_the_skeleton(const char *uri)
{
    return strncmp(uri, HFX_RPC_URI_MODULE, strlen(HFX_RPC_URI_MODULE)) == 0 && strstr(uri, "&_dom=cdsp") != NULL;
}

static void free_copies(remote_arg *copy, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free(copy[i].buf.pv);
    free(copy);
}

/* Copies of the in buffers and fresh out buffers; handles as they are. NULL when out of memory. */
static remote_arg *copy_args(uint32_t sc, const remote_arg *pra)
{
    uint32_t n_in = REMOTE_SCALARS_INBUFS(sc), n_bufs = n_in + REMOTE_SCALARS_OUTBUFS(sc);
    uint32_t n = REMOTE_SCALARS_LENGTH(sc);
    remote_arg *copy = calloc(n ? n : 1, sizeof *copy);
    if (!copy)
        return NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (i >= n_bufs) {
            copy[i] = pra[i];
            continue;
        }
        size_t len = pra[i].buf.nLen;
        copy[i].buf.nLen = len;
        copy[i].buf.pv = len ? aligned_alloc(HFX_RPC_ALIGN, (len + HFX_RPC_ALIGN - 1) / HFX_RPC_ALIGN * HFX_RPC_ALIGN)
                             : NULL;
        if (len && !copy[i].buf.pv) {
            free_copies(copy, i);
            return NULL;
        }
        if (len && i < n_in)
            memcpy(copy[i].buf.pv, pra[i].buf.pv, len);
    }
    return copy;
}

static void copy_back(uint32_t sc, remote_arg *pra, const remote_arg *copy)
{
    uint32_t n_in = REMOTE_SCALARS_INBUFS(sc), n_bufs = n_in + REMOTE_SCALARS_OUTBUFS(sc);
    for (uint32_t i = n_in; i < n_bufs; i++)
        if (copy[i].buf.nLen)
            memcpy(pra[i].buf.pv, copy[i].buf.pv, copy[i].buf.nLen);
    for (uint32_t i = n_bufs + REMOTE_SCALARS_INHANDLES(sc); i < REMOTE_SCALARS_LENGTH(sc); i++)
        pra[i] = copy[i];
}

static int loopback_call(remote_handle64 h, uint32_t sc, remote_arg *pra)
{
    if (!pra && REMOTE_SCALARS_LENGTH(sc))
        return HFX_AEE_EBADPARM;
    for (uint32_t i = 0; i < REMOTE_SCALARS_INBUFS(sc) + REMOTE_SCALARS_OUTBUFS(sc); i++)
        if (pra[i].buf.nLen && !pra[i].buf.pv)
            return HFX_AEE_EBADPARM; /* FastRPC cannot map such a buffer either */
    remote_arg *copy = copy_args(sc, pra);
    if (!copy)
        return HFX_AEE_ENOMEMORY;
    int rc = hexfuse_rpc_skel_handle_invoke(h, sc, copy);
    if (rc == HFX_AEE_SUCCESS)
        copy_back(sc, pra, copy);
    free_copies(copy, REMOTE_SCALARS_INBUFS(sc) + REMOTE_SCALARS_OUTBUFS(sc));
    return rc;
}

int remote_handle64_open(const char *uri, remote_handle64 *ph)
{
    if (!uri || !ph)
        return HFX_AEE_EBADPARM;
    if (!uri_names_the_skeleton(uri))
        return HFX_AEE_EUNSUPPORTED;
    /* method 0, marshalled as the DSP framework does for a handle64 interface */
    uint32_t uri_len = (uint32_t)strlen(uri) + 1;
    remote_arg pra[3];
    pra[0].buf.pv = &uri_len;
    pra[0].buf.nLen = sizeof uri_len;
    pra[1].buf.pv = (void *)(uintptr_t)uri;
    pra[1].buf.nLen = uri_len;
    pra[2].h64 = 0;
    int rc = loopback_call(0, HFX_RPC_SC_OPEN, pra);
    if (rc == HFX_AEE_SUCCESS)
        *ph = pra[2].h64;
    return rc;
}

int remote_handle64_invoke(remote_handle64 h, uint32_t sc, remote_arg *pra)
{
    /* open and close go through remote_handle64_open/_close only, as with FastRPC */
    uint32_t method = REMOTE_SCALARS_METHOD(sc);
    if (method == HFX_RPC_METHOD_OPEN || method == HFX_RPC_METHOD_CLOSE)
        return HFX_AEE_EBADPARM;
    return loopback_call(h, sc, pra);
}

int remote_handle64_close(remote_handle64 h)
{
    remote_arg pra[1];
    pra[0].h64 = h;
    return loopback_call(h, HFX_RPC_SC_CLOSE, pra);
}
