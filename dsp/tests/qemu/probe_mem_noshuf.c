/*
 * probe_mem_noshuf.c - does this qemu-hexagon let a packet's slot-0 load see its slot-1 store?
 *
 * A packet { memd(a) = v; v = memd(a) } with the store first (mem_noshuf) must load v. qemu 7.2
 * loads the old memory when an earlier packet had its slot-1 instruction predicated off and this
 * packet has no predicated instruction (it keeps that "slot 1 cancelled" flag). clang-19 -O2
 * emits such packets for read-modify-write loops; this bug once failed the ReduceSum test's
 * reference (dsp/HEXAGON.md, "qemu 7.2 and 10"). run_qemu_tests.sh counts this image on
 * qemu >= 10 and names the bug on 7.2.
 */
#include "qtest.h"

static uint64_t cell[2];

/* cell[1] = v and reload it in one mem_noshuf packet, after a packet whose slot-1 instruction
 * (if (!p1) r5 = #0, p1 = cancel_slot1) is predicated off when cancel_slot1 is 1 */
static uint64_t store_then_load(uint64_t v, int cancel_slot1)
{
    uint64_t r;
    __asm__ volatile("r17 = %1\n r13 = #1\n r4 = #1\n r7:6 = %2\n p1 = cmp.eq(%3,#1)\n"
                     "{ r3:2 = bitsplit(r13,#0x2)\n r9:8 = dfadd(r7:6,r7:6)\n if (!p1) r5 = #0x0\n"
                     "  p2 = cmp.eq(r13,#0x0) }\n"
                     "{ memd(r17+r13<<#0x3) = r7:6\n r7:6 = memd(r17+r4<<#0x3) }:mem_noshuf\n"
                     "%0 = r7:6"
                     : "=r"(r)
                     : "r"(cell), "r"(v), "r"(cancel_slot1)
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r13", "r17", "p1", "p2", "memory");
    return r;
}

int main(void)
{
    qtest t = {0};
    qt_begin_group(&t);
    for (int cancel = 0; cancel < 2; cancel++) {
        cell[1] = 7;
        uint64_t got = store_then_load(42, cancel);
        if (got != 42)
            hx_printf("FAIL slot-0 load after its slot-1 store%s: %u, not 42\n",
                      cancel ? ", slot 1 predicated off in the packet before" : "", (unsigned)got);
        qt_case(&t, got == 42);
    }
    qt_end_group(&t, "mem_noshuf: a slot-0 load sees the slot-1 store of its packet");
    return qt_result(&t, "probe_mem_noshuf");
}
