/*
 * entry.S - the multiboot v1 entry shared by the test guests.
 *
 * The loader (minivmm, QEMU -kernel, GRUB) enters in 32-bit protected mode, paging off,
 * EAX = 0x2badb002, EBX = the multiboot info; the GDTR and the stack are undefined
 * (Multiboot 0.6.96, 3.2), so load our own before anything else. Interrupts stay off: this
 * host's KVM cannot emulate a 32-bit protected-mode iret, so no guest takes one here.
 */
#include "layout.h"

#define MB_HEADER_FLAGS 0x00000000  /* an ELF: no load addresses, no video, no alignment */

    .section .multiboot, "a"
    .balign 4
    .long MB_HEADER_MAGIC, MB_HEADER_FLAGS, -(MB_HEADER_MAGIC + MB_HEADER_FLAGS)

    .text
    .code32
    .globl mb_entry
mb_entry:
    cli
    cld
    lgdt gdt_descriptor
    ljmp $SEL_CODE32, $1f
1:  movl $SEL_DATA32, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    movl %ecx, %ss
    movl %ecx, %fs
    movl %ecx, %gs
    movl $stack_top, %esp
    pushl %ebx
    pushl %eax
    call guest_main          /* returns the exit value */
    pushl %eax
    call debug_exit          /* does not return */

    .globl halt_forever
halt_forever:
    cli
2:  hlt
    jmp 2b

    .data
    .balign 8
    .globl gdt
gdt:
    .quad 0
    .quad 0x00cf9a000000ffff   /* 0x08: 32-bit code, base 0, 4 GiB */
    .quad 0x00cf92000000ffff   /* 0x10: data, base 0, 4 GiB */
    .quad 0x00009a000000ffff   /* 0x18: 16-bit code, base 0, 64 KiB (real-mode exit) */
    .quad 0x000092000000ffff   /* 0x20: 16-bit data, base 0, 64 KiB */
gdt_end:
    .balign 4
    .word 0
gdt_descriptor:
    .word gdt_end - gdt - 1
    .long gdt

    .section .bss
    .balign 16
    .space 2048
    .globl stack_top
stack_top:
