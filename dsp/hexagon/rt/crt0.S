/*
 * crt0.S - entry point of the freestanding Hexagon test images (no libc).
 *
 * qemu-hexagon (linux-user) enters _start with r29 (sp) pointing at argc,
 * followed by argv[] and envp[]. We pass argc/argv to hx_crt_main(), which
 * calls main() and exits through the exit_group syscall; it never returns.
 * The loader has already zeroed .bss (p_memsz > p_filesz is zero-filled).
 */
        .text
        .p2align 4
        .globl  _start
        .type   _start,@function
_start:
        r0 = memw(r29+#0)           /* argc */
        r1 = add(r29,#4)            /* argv */
        r29 = and(r29,#-64)         /* align the stack for vector spills */
        r30 = #0                    /* end of the frame chain */
        r31 = #0
        call hx_crt_main
1:
        jump 1b
        .size   _start, .-_start
