/* fastrpc_client.h - host side of the hexfuse FastRPC interface (hexfuse/rpc_abi.h): loads
 * libcdsprpc.so at run time, opens the hexfuse skeleton on the cDSP and marshals load / run /
 * unload calls. Used by the ORT plugin's `hexagon` backend (custom_ops/src/hexagon.rs) and, for
 * the availability probe, by Python through libhexfuse_host.so.
 *
 * Every function returns HFX_RPC_CLIENT_OK or an error code and writes a one-line message naming
 * what failed into msg (capacity msg_cap, always NUL-terminated when msg_cap > 0). */
#ifndef HEXFUSE_FASTRPC_CLIENT_H
#define HEXFUSE_FASTRPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

enum hfx_rpc_client_status {
    HFX_RPC_CLIENT_OK = 0,
    HFX_RPC_CLIENT_NO_LIBRARY = 1, /* libcdsprpc.so (or HEXFUSE_CDSPRPC_LIB) cannot be loaded */
    HFX_RPC_CLIENT_NO_SYMBOL = 2,  /* it lacks remote_handle64_open/invoke/close */
    HFX_RPC_CLIENT_OPEN_FAILED = 3, /* remote_handle64_open of the skeleton failed (no cDSP answered) */
    HFX_RPC_CLIENT_CALL_FAILED = 4, /* a remote call returned an error */
    HFX_RPC_CLIENT_BAD_ARG = 5,     /* a bad argument on the host side */
    HFX_RPC_CLIENT_NO_MEMORY = 6,
};

#define HFX_RPC_CLIENT_ENV_LIB "HEXFUSE_CDSPRPC_LIB"
#define HFX_RPC_CLIENT_DEFAULT_LIB "libcdsprpc.so"

typedef struct hfx_rpc_client hfx_rpc_client;

/* Opens a session. library: the FastRPC library to dlopen; NULL or "" means $HEXFUSE_CDSPRPC_LIB,
 * else libcdsprpc.so. */
int hfx_rpc_client_open(const char *library, hfx_rpc_client **out, char *msg, size_t msg_cap);
/* Closes the session (the library stays loaded for the life of the process). NULL is a no-op. */
void hfx_rpc_client_close(hfx_rpc_client *c);
/* The library the session uses. */
const char *hfx_rpc_client_library(const hfx_rpc_client *c);

int hfx_rpc_client_load(hfx_rpc_client *c, const void *program, size_t size, int32_t *program_id, char *msg,
                        size_t msg_cap);
int hfx_rpc_client_unload(hfx_rpc_client *c, int32_t program_id, char *msg, size_t msg_cap);
/* Runs a loaded program: inputs[i] has in_bytes[i] bytes, outputs[j] out_bytes[j] (the program's
 * io order); stats receives HFX_RPC_STATS values (may be NULL). Safe from several threads: calls
 * on one session are serialized. */
int hfx_rpc_client_run(hfx_rpc_client *c, int32_t program_id, float share_a, const void *const *inputs,
                       const uint64_t *in_bytes, size_t n_in, void *const *outputs, const uint64_t *out_bytes,
                       size_t n_out, uint64_t *stats, char *msg, size_t msg_cap);

/* Open + close: HFX_RPC_CLIENT_OK when a cDSP answers through `library` (as for open). */
int hfx_rpc_probe(const char *library, char *msg, size_t msg_cap);

/* Layout facts the Rust plugin checks at registration (custom_ops/src/hexagon.rs):
 * {HFX_RPC_ABI_VERSION, HFX_RPC_STATS, sizeof(remote_arg), HFX_RPC_ALIGN}. */
extern const uint32_t hexfuse_rpc_client_abi[4];

#endif /* HEXFUSE_FASTRPC_CLIENT_H */
