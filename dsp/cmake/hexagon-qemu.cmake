# hexagon-qemu.cmake - Hexagon v67 + HVX 128-byte, freestanding, for the test
# images that run under qemu-hexagon 7.2 (linux-user): integer HVX only.
set(HEXFUSE_HEXAGON_ARCH v67)
set(HEXFUSE_HEXAGON_QEMU ON CACHE BOOL "build for qemu-hexagon" FORCE)
include(${CMAKE_CURRENT_LIST_DIR}/hexagon-common.cmake)
