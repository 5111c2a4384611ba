/*
 * qemu_counters.S - read qemu-hexagon's executed-packet counter from the guest.
 *
 * qemu's Hexagon target keeps its execution counts in reserved control
 * registers (HEX_REG_QEMU_PKT_CNT = c20: packets executed so far, 32 bits,
 * wrapping), updated at the end of each translation block and readable with
 * `Rd = Cs`. The assembler has no name for c20, so the instruction is
 * encoded by hand: A2_tfrcrr `Rd = Cs` is 0x6a000000 | s << 16 | d, with the
 * parse bits 0xc000 of a packet's last instruction. Checked with qemu-hexagon
 * 7.2 and 10.0 (a counted loop gives the same figure on both). On hardware
 * c20 is reserved: this file is for qemu images only.
 *
 *   uint32_t hx_qemu_packets(void);
 */
        .text
        .p2align 4
        .globl  hx_qemu_packets
        .type   hx_qemu_packets,@function
hx_qemu_packets:
        .word   0x6a14c000              /* { r0 = c20 } */
        { jumpr r31 }
        .size   hx_qemu_packets, .-hx_qemu_packets
