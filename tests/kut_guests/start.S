/*
 * start.S - multiboot v1 entry shared by minivmm's kvm-unit-tests-style test guests.
 *
 * The loader starts us in 32-bit protected mode, paging off, EAX = 0x2badb002 and EBX = the
 * multiboot info (Multiboot Specification 0.6.96, 3.2). We take our own stack and call
 * guest_main(info); its return value goes to isa-debug-exit (port 0xf4), which makes the VMM
 * exit with (value << 1) | 1: 0 is success (status 1), as kvm-unit-tests' exit().
 */
        .set    MB_MAGIC, 0x1badb002
        .set    MB_FLAGS, 0x00000003    /* page-align modules, memory info */

        .section .multiboot, "a"
        .align  4
        .long   MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS)

        .text
        .code32
        .globl  _start
_start:
        cli
        movl    $stack_top, %esp
        cmpl    $0x2badb002, %eax
        jne     bad_magic
        pushl   %ebx
        call    guest_main
        outl    %eax, $0xf4
        jmp     halt
bad_magic:
        movl    $0x7e, %eax
        outl    %eax, $0xf4
halt:
        hlt
        jmp     halt

        .bss
        .align  16
        .space  8192
stack_top:
