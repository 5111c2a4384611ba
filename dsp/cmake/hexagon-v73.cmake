# hexagon-v73.cmake - Hexagon v73 + HVX 128-byte, freestanding (clang-19/lld-19).
# Compiles and links everything (integer and v68+ float HVX kernels, the
# core with the cooperative platform, the test images). Not runnable under
# qemu-hexagon 7.2. QuRT/FastRPC/HMX need HEXAGON_SDK_ROOT (see
# dsp/hexagon/CMakeLists.txt).
set(HEXFUSE_HEXAGON_ARCH v73)
include(${CMAKE_CURRENT_LIST_DIR}/hexagon-common.cmake)
