/*
 * smp_trampoline.S - what an application processor runs after INIT/SIPI. smp.c copies it to
 * TRAMP_ADDR and sends SIPI vector TRAMP_ADDR >> 12, so it starts in real mode at
 * CS = TRAMP_ADDR >> 4, IP = 0. It stays in real mode (the minimum): CPUID leaf 1 gives the
 * initial APIC id in EBX[31:24], a locked xadd on TRAMP_COUNT takes a slot, the id goes into
 * TRAMP_TABLE[slot], and the AP halts with interrupts off. Position independent: only
 * relative jumps, and absolute data addresses below 64 KiB through DS = 0.
 *
 * rounds=N (smp.c): each NMI the BSP sends wakes the AP from hlt (an NMI ignores IF, and a
 * software-disabled local APIC still takes one), and tramp_nmi, which smp.c puts in the real-mode
 * IVT's vector 2, counts it in TRAMP_ROUNDS[slot] and returns to the hlt loop (16-bit iret).
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
    movw %si, %di
    shlw $1, %di             /* DI: this AP's TRAMP_ROUNDS entry, for tramp_nmi */
1:  hlt
    jmp 1b
    .globl tramp_nmi
tramp_nmi:
    lock incw TRAMP_ROUNDS(%di)
    iret
tramp_end:
    .code32
