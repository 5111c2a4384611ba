# sdk.cmake - the parts of the Hexagon build that need the Hexagon SDK:
# the QuRT platform (qurt/platform_qurt.c, needs qurt.h) and the shared
# object the cDSP loads, libhexfuse_rpc_skel.so (the hand-written skeleton
# skel/hexfuse_rpc_skel.c + skel/hexfuse_rpc_imp.c + the hexfuse core on QuRT).
# No qaic: the marshalling is dsp/include/hexfuse/rpc_abi.h. The skeleton
# and methods themselves compile without the SDK (CMakeLists.txt,
# hexfuse_rpc_skel_coop) and run under qemu in a loopback.
#
# Included by CMakeLists.txt only when HEXAGON_SDK_ROOT is set. NOT exercised
# in this repository's CI (no SDK there): written against the SDK 4.x/5.x
# layout (incs, rtos/qurt/computev<NN>), never run.
# HMX: no HMX kernel exists in this tree yet; nothing HMX is built here.

if(HEXFUSE_HEXAGON_ARCH STREQUAL "v67")
  message(STATUS "QuRT/FastRPC: not built for the qemu (v67) build")
  return()
endif()

set(HEXFUSE_QURT_DIR ${HEXAGON_SDK_ROOT}/rocm/qurt/compute${HEXFUSE_HEXAGON_ARCH})
if(NOT EXISTS ${HEXFUSE_QURT_DIR})
  set(HEXFUSE_QURT_DIR ${HEXAGON_SDK_ROOT}/rtos/qurt/compute${HEXFUSE_HEXAGON_ARCH})
endif()
set(HEXFUSE_SDK_INCLUDES
  ${HEXAGON_SDK_ROOT}/incs ${HEXAGON_SDK_ROOT}/incs/stddef ${HEXAGON_SDK_ROOT}/ipc/fastrpc/incs
  ${HEXFUSE_QURT_DIR}/include ${HEXFUSE_QURT_DIR}/include/qurt ${HEXFUSE_QURT_DIR}/include/posix)

if(NOT EXISTS ${HEXFUSE_QURT_DIR})
  message(WARNING "QuRT/FastRPC: not built: ${HEXFUSE_QURT_DIR} not found under HEXAGON_SDK_ROOT=${HEXAGON_SDK_ROOT}")
  return()
endif()

# The device build of the core: the SDK's libc and QuRT replace
# dsp/hexagon/rt; the platform is QuRT. Position independent for the
# skeleton shared object.
file(GLOB HEXFUSE_DEVICE_CORE CONFIGURE_DEPENDS ${DSP_DIR}/src/*.c ${DSP_DIR}/src/ops/*.c)
list(FILTER HEXFUSE_DEVICE_CORE EXCLUDE REGEX "platform_(posix|coop)\\.c$")
add_library(hexfuse_rpc_skel SHARED
  ${CMAKE_CURRENT_SOURCE_DIR}/skel/hexfuse_rpc_skel.c
  ${CMAKE_CURRENT_SOURCE_DIR}/skel/hexfuse_rpc_imp.c
  ${CMAKE_CURRENT_SOURCE_DIR}/qurt/platform_qurt.c
  ${HEXFUSE_DEVICE_CORE}
  ${CMAKE_CURRENT_SOURCE_DIR}/rt/sgemm_ref.c
  ${DSP_DIR}/hvx/hvx_eltwise_int.c ${DSP_DIR}/hvx/hvx_lut_i8.c ${DSP_DIR}/hvx/hvx_matmul_i8.c
  ${DSP_DIR}/hvx/hvx_float_v68.c)
target_include_directories(hexfuse_rpc_skel BEFORE PRIVATE ${HEXFUSE_SDK_INCLUDES}
  ${CMAKE_CURRENT_SOURCE_DIR}/skel ${DSP_DIR}/include ${DSP_DIR}/src ${DSP_DIR}/hvx ${DSP_DIR}/ref)
# the SDK's headers, not the freestanding ones in rt/include (except cblas.h:
# still no BLAS on the DSP; the matrix worker uses the C sgemm until HMX)
target_compile_options(hexfuse_rpc_skel PRIVATE -fPIC ${HEXFUSE_WARNINGS})
target_link_options(hexfuse_rpc_skel PRIVATE -shared -fPIC -nostdlib -Wl,--no-undefined-version)
# the DSP loader looks up the symbol named in the URI (HFX_RPC_SKEL_SYMBOL)
set_target_properties(hexfuse_rpc_skel PROPERTIES OUTPUT_NAME hexfuse_rpc_skel)
message(STATUS "QuRT/FastRPC: building libhexfuse_rpc_skel.so with HEXAGON_SDK_ROOT=${HEXAGON_SDK_ROOT} (never verified against a real SDK)")
