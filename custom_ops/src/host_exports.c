/* host_exports.c - libhexfuse_host.so: the dsp/ kernel's C API (hexfuse.h) as a shared
 * library, for Python ctypes. The symbols come whole from libhexfuse.a; this file only
 * makes sure the library is not empty and records the format version it reads. */
#include "hexfuse/hexfuse.h"

unsigned hexfuse_host_program_version(void) { return HFX_PROGRAM_VERSION; }
