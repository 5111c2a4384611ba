/*
 * hx_rt.h - the freestanding runtime of the qemu-hexagon test images.
 *
 * No libc exists for Hexagon here. This runtime gives a test image what it
 * needs: an entry point (crt0.S), Linux syscalls through trap0 (open, read,
 * write, close, exit_group, clock_gettime), <string.h> functions, a small formatted print,
 * the compiler's integer division helpers and the few math functions the
 * code uses. It is only linked into images run by qemu-hexagon's linux-user
 * mode; a device build uses the Hexagon SDK's libc and QuRT instead.
 */
#ifndef HEXFUSE_HX_RT_H
#define HEXFUSE_HX_RT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- syscalls (Linux asm-generic numbers, as qemu-hexagon implements) ---- */
long hx_sys_write(int fd, const void *buf, size_t n); /* all of buf, or the failing result */
/* Return the kernel's result: >= 0 on success, -errno on failure. */
#define HX_O_RDONLY 0
#define HX_O_WRONLY 1
#define HX_O_CREAT 0100
#define HX_O_TRUNC 01000
int hx_sys_open(const char *path, int flags, int mode);
int hx_sys_close(int fd);
long hx_sys_read(int fd, void *buf, size_t n); /* one read(2): may return fewer bytes */
__attribute__((noreturn)) void hx_exit(int code);
/* CLOCK_MONOTONIC in ns from the host (via qemu); 0 if the syscall fails. */
uint64_t hx_clock_ns(void);

/* ---- formatted output: %d %i %u %x %X %c %s %p %% with l/ll/z, width,
 *      "-" and "0" flags; no floating point) ---- */
int hx_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int hx_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hx_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hx_puts(const char *s); /* writes s and a newline */

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_HX_RT_H */
