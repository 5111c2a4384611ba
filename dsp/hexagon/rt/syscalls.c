/*
 * syscalls.c - Linux syscalls through trap0 for qemu-hexagon linux-user, and
 * the C entry point called by crt0.S.
 *
 * Hexagon Linux ABI: syscall number in r6, arguments in r0..r5, result in r0,
 * `trap0(#1)`. Numbers are the asm-generic ones (openat 56, close 57, read 63,
 * write 64, exit_group 94, clock_gettime 113). qemu linux-user forwards the
 * file calls to the host.
 */
#include "hx_rt.h"

#define HX_NR_OPENAT 56
#define HX_NR_CLOSE 57
#define HX_NR_READ 63
#define HX_NR_WRITE 64
#define HX_NR_EXIT_GROUP 94
#define HX_NR_CLOCK_GETTIME 113
#define HX_CLOCK_MONOTONIC 1
#define HX_AT_FDCWD (-100)

static long hx_syscall3(long nr, long a, long b, long c)
{
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

static long hx_syscall4(long nr, long a, long b, long c, long d)
{
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3), "r"(r6) : "memory");
    return r0;
}

int hx_sys_open(const char *path, int flags, int mode)
{
    return (int)hx_syscall4(HX_NR_OPENAT, HX_AT_FDCWD, (long)path, flags, mode);
}

int hx_sys_close(int fd)
{
    return (int)hx_syscall3(HX_NR_CLOSE, fd, 0, 0);
}

long hx_sys_read(int fd, void *buf, size_t n)
{
    return hx_syscall3(HX_NR_READ, fd, (long)buf, (long)n);
}

long hx_sys_write(int fd, const void *buf, size_t n)
{
    const char *p = (const char *)buf;
    size_t left = n;
    while (left > 0) {
        long w = hx_syscall3(HX_NR_WRITE, fd, (long)p, (long)left);
        if (w <= 0)
            return w;
        p += w;
        left -= (size_t)w;
    }
    return (long)n;
}

void hx_exit(int code)
{
    for (;;)
        hx_syscall3(HX_NR_EXIT_GROUP, code, 0, 0);
}

uint64_t hx_clock_ns(void)
{
    /* 32-bit Linux: struct timespec { long tv_sec; long tv_nsec; } */
    long ts[2] = {0, 0};
    if (hx_syscall3(HX_NR_CLOCK_GETTIME, HX_CLOCK_MONOTONIC, (long)ts, 0) != 0)
        return 0;
    return (uint64_t)(uint32_t)ts[0] * 1000000000ull + (uint64_t)(uint32_t)ts[1];
}

int main(int argc, char **argv);

__attribute__((noreturn, used)) void hx_crt_main(int argc, char **argv)
{
    hx_exit(main(argc, argv));
}
