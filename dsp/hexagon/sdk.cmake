# sdk.cmake - the parts of the Hexagon build that need the Hexagon SDK:
# the QuRT platform (qurt/platform_qurt.c) and the FastRPC skeleton
# (skel/hexfuse_rpc.idl -> qaic -> libhexfuse_rpc_skel.so with
# skel/hexfuse_rpc_imp.c and the hexfuse core).
#
# Included by CMakeLists.txt only when HEXAGON_SDK_ROOT is set. NOT exercised
# in this repository's CI (no SDK there): written against the SDK 4.x/5.x
# layout (ipc/fastrpc/qaic, incs, rtos/qurt/computev<NN>), never run.
# HMX: no HMX kernel exists in this tree yet; nothing HMX is built here.

if(HEXFUSE_HEXAGON_ARCH STREQUAL "v67")
  message(STATUS "QuRT/FastRPC: not built for the qemu (v67) build")
  return()
endif()

find_program(HEXFUSE_QAIC qaic
  PATHS ${HEXAGON_SDK_ROOT}/ipc/fastrpc/qaic/bin ${HEXAGON_SDK_ROOT}/ipc/fastrpc/qaic/Ubuntu
        ${HEXAGON_SDK_ROOT}/tools/qaic/bin NO_DEFAULT_PATH)
set(HEXFUSE_QURT_DIR ${HEXAGON_SDK_ROOT}/rocm/qurt/compute${HEXFUSE_HEXAGON_ARCH})
if(NOT EXISTS ${HEXFUSE_QURT_DIR})
  set(HEXFUSE_QURT_DIR ${HEXAGON_SDK_ROOT}/rtos/qurt/compute${HEXFUSE_HEXAGON_ARCH})
endif()
set(HEXFUSE_SDK_INCLUDES
  ${HEXAGON_SDK_ROOT}/incs ${HEXAGON_SDK_ROOT}/incs/stddef ${HEXAGON_SDK_ROOT}/ipc/fastrpc/incs
  ${HEXFUSE_QURT_DIR}/include ${HEXFUSE_QURT_DIR}/include/qurt ${HEXFUSE_QURT_DIR}/include/posix)

if(NOT HEXFUSE_QAIC OR NOT EXISTS ${HEXFUSE_QURT_DIR})
  message(WARNING "QuRT/FastRPC: not built: qaic or ${HEXFUSE_QURT_DIR} not found under HEXAGON_SDK_ROOT=${HEXAGON_SDK_ROOT}")
  return()
endif()

set(HEXFUSE_GEN ${CMAKE_BINARY_DIR}/qaic)
add_custom_command(
  OUTPUT ${HEXFUSE_GEN}/hexfuse_rpc.h ${HEXFUSE_GEN}/hexfuse_rpc_skel.c ${HEXFUSE_GEN}/hexfuse_rpc_stub.c
  COMMAND ${CMAKE_COMMAND} -E make_directory ${HEXFUSE_GEN}
  COMMAND ${HEXFUSE_QAIC} -mdll -o ${HEXFUSE_GEN} -I${HEXAGON_SDK_ROOT}/incs -I${HEXAGON_SDK_ROOT}/incs/stddef
          ${CMAKE_CURRENT_SOURCE_DIR}/skel/hexfuse_rpc.idl
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/skel/hexfuse_rpc.idl
  COMMENT "qaic hexfuse_rpc.idl")

# The device build of the core: the SDK's libc and QuRT replace
# dsp/hexagon/rt; the platform is QuRT. Position independent for the
# skeleton shared object.
file(GLOB HEXFUSE_DEVICE_CORE CONFIGURE_DEPENDS ${DSP_DIR}/src/*.c ${DSP_DIR}/src/ops/*.c)
list(FILTER HEXFUSE_DEVICE_CORE EXCLUDE REGEX "platform_(posix|coop)\\.c$")
add_library(hexfuse_rpc_skel SHARED
  ${HEXFUSE_GEN}/hexfuse_rpc_skel.c
  ${CMAKE_CURRENT_SOURCE_DIR}/skel/hexfuse_rpc_imp.c
  ${CMAKE_CURRENT_SOURCE_DIR}/qurt/platform_qurt.c
  ${HEXFUSE_DEVICE_CORE}
  ${CMAKE_CURRENT_SOURCE_DIR}/rt/sgemm_ref.c
  ${DSP_DIR}/hvx/hvx_eltwise_int.c ${DSP_DIR}/hvx/hvx_lut_i8.c ${DSP_DIR}/hvx/hvx_matmul_i8.c
  ${DSP_DIR}/hvx/hvx_float_v68.c)
target_include_directories(hexfuse_rpc_skel BEFORE PRIVATE ${HEXFUSE_SDK_INCLUDES} ${HEXFUSE_GEN}
  ${DSP_DIR}/include ${DSP_DIR}/src ${DSP_DIR}/hvx ${DSP_DIR}/ref)
# the SDK's headers, not the freestanding ones in rt/include (except cblas.h:
# still no BLAS on the DSP; the matrix worker uses the C sgemm until HMX)
target_compile_options(hexfuse_rpc_skel PRIVATE -fPIC ${HEXFUSE_WARNINGS})
target_link_options(hexfuse_rpc_skel PRIVATE -shared -fPIC -nostdlib -Wl,--no-undefined-version)
message(STATUS "QuRT/FastRPC: building libhexfuse_rpc_skel.so with HEXAGON_SDK_ROOT=${HEXAGON_SDK_ROOT} (never verified against a real SDK)")
