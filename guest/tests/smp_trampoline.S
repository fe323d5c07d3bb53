/*
 * smp_trampoline.S - what an application processor runs after INIT/SIPI. smp.c copies it to
 * TRAMP_ADDR and sends SIPI vector TRAMP_ADDR >> 12, so it starts in real mode at
 * CS = TRAMP_ADDR >> 4, IP = 0. It stays in real mode (the minimum): CPUID leaf 1 gives the
 * initial APIC id in EBX[31:24], a locked xadd on TRAMP_COUNT takes a slot, the id goes into
 * TRAMP_TABLE[slot], and the AP halts with interrupts off. Position independent: only
 * relative jumps, and absolute data addresses below 64 KiB through DS = 0.
 */
#include "layout.h"

    .text
    .code16
    .globl tramp_start, tramp_end
tramp_start:
    cli
    xorw %ax, %ax
    movw %ax, %ds
    movl $1, %eax
    cpuid
    shrl $24, %ebx
    movw $1, %ax
    lock xaddw %ax, TRAMP_COUNT
    cmpw $TRAMP_SLOTS, %ax
    jae 1f
    movw %ax, %si
    movb %bl, TRAMP_TABLE(%si)
1:  hlt
    jmp 1b
tramp_end:
    .code32
