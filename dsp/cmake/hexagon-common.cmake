# hexagon-common.cmake - shared part of the Hexagon toolchain files
# (hexagon-v68.cmake, hexagon-v73.cmake, hexagon-qemu.cmake).
#
# clang-19 + lld-19 (Debian) target Hexagon directly; there is no libc or
# sysroot for Hexagon here, so everything is built freestanding against the
# small runtime in dsp/hexagon/rt (headers in dsp/hexagon/rt/include).
# The caller sets HEXFUSE_HEXAGON_ARCH (v67, v68, v73) before including this.

set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR hexagon)

find_program(HEXFUSE_CLANG NAMES clang-19 clang REQUIRED)
find_program(HEXFUSE_LLVM_AR NAMES llvm-ar-19 llvm-ar REQUIRED)
find_program(HEXFUSE_LLVM_RANLIB NAMES llvm-ranlib-19 llvm-ranlib REQUIRED)
find_program(HEXFUSE_LLD NAMES ld.lld-19 ld.lld REQUIRED)

set(CMAKE_C_COMPILER ${HEXFUSE_CLANG})
set(CMAKE_ASM_COMPILER ${HEXFUSE_CLANG})
set(CMAKE_C_COMPILER_TARGET hexagon)
set(CMAKE_ASM_COMPILER_TARGET hexagon)
set(CMAKE_AR ${HEXFUSE_LLVM_AR})
set(CMAKE_RANLIB ${HEXFUSE_LLVM_RANLIB})

# No libc to link a test program against: check the compiler with a library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

get_filename_component(_hexfuse_dsp_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
string(REPLACE "v" "" _hexfuse_arch_num "${HEXFUSE_HEXAGON_ARCH}")

# -G0: no GP-relative small data (there is no startup code that sets GP).
# -nostdlibinc: never pick up the host's /usr/include.
set(_hexfuse_flags "-m${HEXFUSE_HEXAGON_ARCH} -mhvx -mhvx-length=128b -G0 -ffreestanding -nostdlibinc")
set(_hexfuse_flags "${_hexfuse_flags} -isystem ${_hexfuse_dsp_dir}/hexagon/rt/include")
set(CMAKE_C_FLAGS_INIT "${_hexfuse_flags}")
set(CMAKE_ASM_FLAGS_INIT "-m${HEXFUSE_HEXAGON_ARCH}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-nostdlib -static -fuse-ld=lld")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
