/*
 * hexfuse_rpc_imp.h - the methods of the hexfuse FastRPC interface on the DSP
 * side (hexfuse_rpc_imp.c), called by the skeleton dispatcher
 * (hexfuse_rpc_skel.c) after it has checked the marshalled buffers.
 * Results are HFX_AEE_* codes (hexfuse/rpc_abi.h).
 */
#ifndef HEXFUSE_RPC_IMP_H
#define HEXFUSE_RPC_IMP_H

#include <stdint.h>

#include "hexfuse/rpc_abi.h"

int hexfuse_rpc_open(const char *uri, remote_handle64 *handle);
int hexfuse_rpc_close(remote_handle64 handle);
int hexfuse_rpc_load_program(remote_handle64 handle, const unsigned char *program, int programLen, int *program_id);
int hexfuse_rpc_unload_program(remote_handle64 handle, int program_id);
int hexfuse_rpc_run(remote_handle64 handle, int program_id, float share_a, const unsigned char *inputs,
                    int inputsLen, unsigned char *outputs, int outputsLen, uint64_t *stats, int statsLen);

#endif /* HEXFUSE_RPC_IMP_H */
