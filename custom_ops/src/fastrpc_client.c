/* fastrpc_client.c - host side of the hexfuse FastRPC interface (see fastrpc_client.h and the
 * marshalling in dsp/include/hexfuse/rpc_abi.h). libcdsprpc.so is loaded with dlopen, so the
 * plugin links and runs on machines without it; the `auto` backend then falls back to host.
 *
 * Inputs and outputs travel packed in one buffer each (tensor i at a 128-byte aligned offset),
 * which FastRPC copies to and from the DSP. Never run on a device: on this machine the
 * transport is the loopback stand-in (rpc_loopback.c). */
#define _GNU_SOURCE
#include "fastrpc_client.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexfuse/rpc_abi.h"

typedef int (*open_fn)(const char *uri, remote_handle64 *h);
typedef int (*invoke_fn)(remote_handle64 h, uint32_t sc, remote_arg *pra);
typedef int (*close_fn)(remote_handle64 h);

struct hfx_rpc_client {
    open_fn open;
    invoke_fn invoke;
    close_fn close;
    remote_handle64 handle;
    pthread_mutex_t lock; /* the DSP session's slots and trace buffer are not locked there */
    char library[512];
};

const uint32_t hexfuse_rpc_client_abi[4] = {HFX_RPC_ABI_VERSION, HFX_RPC_STATS, (uint32_t)sizeof(remote_arg),
                                            HFX_RPC_ALIGN};

static int fail(int status, char *msg, size_t cap, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return status;
}

static const char *library_name(const char *library)
{
    if (library && *library)
        return library;
    const char *env = getenv(HFX_RPC_CLIENT_ENV_LIB);
    return env && *env ? env : HFX_RPC_CLIENT_DEFAULT_LIB;
}

/* dlopen + dlsym. The library is never unloaded: FastRPC libraries keep threads of their own. */
static int load_library(hfx_rpc_client *c, char *msg, size_t cap)
{
    const char *env = getenv(HFX_RPC_CLIENT_ENV_LIB);
    int from_env = env && *env && strcmp(env, c->library) == 0;
    void *lib = dlopen(c->library, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return fail(HFX_RPC_CLIENT_NO_LIBRARY, msg, cap,
                    "no cDSP: cannot load the FastRPC library %s%s (%s)", c->library,
                    from_env ? " given by " HFX_RPC_CLIENT_ENV_LIB " in place of libcdsprpc.so" : "", dlerror());
    static const char *const names[3] = {"remote_handle64_open", "remote_handle64_invoke", "remote_handle64_close"};
    void *fns[3];
    for (int i = 0; i < 3; i++) {
        fns[i] = dlsym(lib, names[i]);
        if (!fns[i])
            return fail(HFX_RPC_CLIENT_NO_SYMBOL, msg, cap, "the FastRPC library %s has no symbol %s",
                        c->library, names[i]);
    }
    /* POSIX guarantees that dlsym's object pointers convert to function pointers */
    memcpy(&c->open, &fns[0], sizeof c->open);
    memcpy(&c->invoke, &fns[1], sizeof c->invoke);
    memcpy(&c->close, &fns[2], sizeof c->close);
    return HFX_RPC_CLIENT_OK;
}

int hfx_rpc_client_open(const char *library, hfx_rpc_client **out, char *msg, size_t cap)
{
    if (!out)
        return fail(HFX_RPC_CLIENT_BAD_ARG, msg, cap, "hfx_rpc_client_open: no output pointer");
    *out = NULL;
    hfx_rpc_client *c = calloc(1, sizeof *c);
    if (!c)
        return fail(HFX_RPC_CLIENT_NO_MEMORY, msg, cap, "out of memory opening a FastRPC session");
    snprintf(c->library, sizeof c->library, "%s", library_name(library));
    int st = load_library(c, msg, cap);
    if (st == HFX_RPC_CLIENT_OK) {
        int rc = c->open(HFX_RPC_URI_CDSP, &c->handle);
        if (rc != 0)
            st = fail(HFX_RPC_CLIENT_OPEN_FAILED, msg, cap,
                      "no cDSP answered: remote_handle64_open(\"%s\") through %s failed with code %d (%s)",
                      HFX_RPC_URI_CDSP, c->library, rc, hfx_rpc_error_name(rc));
    }
    if (st != HFX_RPC_CLIENT_OK) {
        free(c);
        return st;
    }
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return HFX_RPC_CLIENT_OK;
}

void hfx_rpc_client_close(hfx_rpc_client *c)
{
    if (!c)
        return;
    c->close(c->handle);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *hfx_rpc_client_library(const hfx_rpc_client *c) { return c ? c->library : ""; }

/* One remote call under the session lock; a failure names the method. */
static int call(hfx_rpc_client *c, const char *method, uint32_t sc, remote_arg *pra, char *msg, size_t cap)
{
    pthread_mutex_lock(&c->lock);
    int rc = c->invoke(c->handle, sc, pra);
    pthread_mutex_unlock(&c->lock);
    if (rc != 0)
        return fail(HFX_RPC_CLIENT_CALL_FAILED, msg, cap, "cDSP call hexfuse_rpc %s failed with code %d (%s)",
                    method, rc, hfx_rpc_error_name(rc));
    return HFX_RPC_CLIENT_OK;
}

int hfx_rpc_client_load(hfx_rpc_client *c, const void *program, size_t size, int32_t *program_id, char *msg,
                        size_t cap)
{
    if (!c || !program || !program_id || size == 0 || size > HFX_RPC_MAX_PROGRAM_BYTES)
        return fail(HFX_RPC_CLIENT_BAD_ARG, msg, cap, "load_program: no session, no program or a bad size (%zu)",
                    size);
    hfx_rpc_load_out res = {-1};
    remote_arg pra[2];
    pra[0].buf.pv = (void *)(uintptr_t)program; /* an input buffer: never written */
    pra[0].buf.nLen = size;
    pra[1].buf.pv = &res;
    pra[1].buf.nLen = sizeof res;
    int st = call(c, "load_program", HFX_RPC_SC_LOAD, pra, msg, cap);
    if (st == HFX_RPC_CLIENT_OK)
        *program_id = res.program_id;
    return st;
}

int hfx_rpc_client_unload(hfx_rpc_client *c, int32_t program_id, char *msg, size_t cap)
{
    if (!c)
        return fail(HFX_RPC_CLIENT_BAD_ARG, msg, cap, "unload_program: no session");
    hfx_rpc_unload_in in = {program_id};
    remote_arg pra[1];
    pra[0].buf.pv = &in;
    pra[0].buf.nLen = sizeof in;
    return call(c, "unload_program", HFX_RPC_SC_UNLOAD, pra, msg, cap);
}

/* Total bytes of n tensors packed at 128-byte steps; 0 on overflow of the interface's limit. */
static uint64_t packed_bytes(const uint64_t *bytes, size_t n, int *too_big)
{
    uint64_t end = 0;
    for (size_t i = 0; i < n; i++) {
        end = hfx_rpc_align(end) + bytes[i];
        if (end > HFX_RPC_MAX_IO_BYTES)
            *too_big = 1;
    }
    return end;
}

static void copy_packed(unsigned char *packed, const void *const *ptrs, const uint64_t *bytes, size_t n)
{
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (bytes[i]) /* an empty tensor may have no buffer */
            memcpy(packed + off, ptrs[i], bytes[i]);
        off = hfx_rpc_align(off + bytes[i]);
    }
}

static void copy_unpacked(void *const *ptrs, const unsigned char *packed, const uint64_t *bytes, size_t n)
{
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (bytes[i])
            memcpy(ptrs[i], packed + off, bytes[i]);
        off = hfx_rpc_align(off + bytes[i]);
    }
}

int hfx_rpc_client_run(hfx_rpc_client *c, int32_t program_id, float share_a, const void *const *inputs,
                       const uint64_t *in_bytes, size_t n_in, void *const *outputs, const uint64_t *out_bytes,
                       size_t n_out, uint64_t *stats, char *msg, size_t cap)
{
    if (!c || (n_in && (!inputs || !in_bytes)) || (n_out && (!outputs || !out_bytes)))
        return fail(HFX_RPC_CLIENT_BAD_ARG, msg, cap, "run: no session or missing input/output arrays");
    int too_big = 0;
    uint64_t in_total = packed_bytes(in_bytes, n_in, &too_big);
    uint64_t out_total = packed_bytes(out_bytes, n_out, &too_big);
    if (too_big)
        return fail(HFX_RPC_CLIENT_BAD_ARG, msg, cap, "run: inputs or outputs exceed %u bytes",
                    (unsigned)HFX_RPC_MAX_IO_BYTES);
    /* one allocation for both packed buffers, each 128-byte aligned */
    uint64_t out_at = hfx_rpc_align(in_total);
    unsigned char *buf = aligned_alloc(HFX_RPC_ALIGN, (size_t)hfx_rpc_align(out_at + out_total + 1));
    if (!buf)
        return fail(HFX_RPC_CLIENT_NO_MEMORY, msg, cap, "run: out of memory for %llu bytes of packed tensors",
                    (unsigned long long)(out_at + out_total));
    copy_packed(buf, inputs, in_bytes, n_in);
    hfx_rpc_run_in in = {program_id, share_a};
    uint64_t st_buf[HFX_RPC_STATS] = {0};
    remote_arg pra[4];
    pra[0].buf.pv = &in;
    pra[0].buf.nLen = sizeof in;
    pra[1].buf.pv = buf;
    pra[1].buf.nLen = (size_t)in_total;
    pra[2].buf.pv = buf + out_at;
    pra[2].buf.nLen = (size_t)out_total;
    pra[3].buf.pv = st_buf;
    pra[3].buf.nLen = sizeof st_buf;
    int st = call(c, "run", HFX_RPC_SC_RUN, pra, msg, cap);
    if (st == HFX_RPC_CLIENT_OK) {
        copy_unpacked(outputs, buf + out_at, out_bytes, n_out);
        if (stats)
            memcpy(stats, st_buf, sizeof st_buf);
    }
    free(buf);
    return st;
}

int hfx_rpc_probe(const char *library, char *msg, size_t cap)
{
    hfx_rpc_client *c = NULL;
    int st = hfx_rpc_client_open(library, &c, msg, cap);
    if (st == HFX_RPC_CLIENT_OK) {
        fail(HFX_RPC_CLIENT_OK, msg, cap, "a cDSP answered through %s", c->library);
        hfx_rpc_client_close(c);
    }
    return st;
}
