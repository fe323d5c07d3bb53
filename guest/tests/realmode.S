/*
 * realmode.S - the real-mode half of the real-mode guest (realmode.c does the 32-bit half).
 *
 * Leaves protected mode the way kvm-unit-tests' realmode test does (a 16-bit code segment,
 * then CR0.PE = 0 and a far jump), points the IDTR at the IVT at 0, and counts PIT ticks on
 * the vector a BIOS leaves the master 8259 at (0x08). The 8259s are NOT reinitialised: only
 * their masks are written (OCW1), so a VMM whose "BIOS-like start" left IRQ0 elsewhere sends
 * it to one of the trap stubs below, which fail the test naming the vector.
 *
 * A watchdog bounds the wait: realmode.c arms the local APIC timer one-shot on vector
 * WATCHDOG_VECTOR before leaving protected mode, and its IVT entry here fails the test with
 * the ticks counted so far. So an IRQ0 that never comes is a failure, not a hang.
 *
 * All of it is in .lowmem: loaded above 1 MiB, copied by realmode.c to the low-memory window
 * it is linked for (0x2000, test_guest.ld), where CS = DS = SS = 0 reaches all of it.
 */
#include "layout.h"

#define PIT_CH0 0x40
#define PIT_CMD 0x43
#define PIC1_CMD 0x20
#define PIC1_DATA 0x21
#define PIC2_DATA 0xa1
#define WATCHDOG_VECTOR 0xf0

    .section .lowmem, "awx"
    .code32
    .globl enter_real_mode
enter_real_mode:
    cli
    ljmp $SEL_CODE16, $1f
    .code16
1:  movw $SEL_DATA16, %ax      /* 64 KiB limits before leaving protected mode */
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movl %cr0, %eax
    andl $~1, %eax
    movl %eax, %cr0
    ljmp $0, $2f
2:  xorw %ax, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movw $rm_stack_top, %sp
    lidt ivt_descriptor

    /* Trap stubs on every vector either 8259 could plausibly be at. */
    movw $trap_vectors, %si
    movw $trap_stubs, %dx
    movw $(trap_vectors_end - trap_vectors), %cx
3:  movzbw (%si), %bx
    shlw $2, %bx
    movw %dx, (%bx)
    movw $0, 2(%bx)
    addw $6, %dx
    incw %si
    loop 3b
    movzbw rm_vector, %bx
    shlw $2, %bx
    movw $tick_isr, (%bx)
    movw $0, 2(%bx)
    movw $watchdog_isr, (WATCHDOG_VECTOR * 4)
    movw $0, (WATCHDOG_VECTOR * 4 + 2)

    movw $msg_real, %si
    call puts

    /* PIT channel 0, mode 2 (rate generator), lobyte/hibyte. */
    movb $0x34, %al
    outb %al, $PIT_CMD
    movw rm_divisor, %ax
    outb %al, $PIT_CH0
    movb %ah, %al
    outb %al, $PIT_CH0
    /* Only IRQ0 unmasked (OCW1, rm_pic_mask); the vector bases stay as the firmware set them. */
    movb rm_pic_mask, %al
    outb %al, $PIC1_DATA
    movb $0xff, %al
    outb %al, $PIC2_DATA

4:  cli
    movw ticks, %ax
    cmpw rm_ticks, %ax
    jae 5f
    sti                         /* the sti shadow covers the hlt: no lost wakeup */
    hlt
    jmp 4b

5:  movb $0xff, %al             /* everything masked again */
    outb %al, $PIC1_DATA
    movw $msg_done1, %si
    call puts
    movw ticks, %ax
    call put_dec
    movw $msg_done2, %si
    call puts
    movb rm_vector, %al
    call put_hex8
    movw $msg_pass, %si
    call puts
    movb $EXIT_PASS, %al
    jmp rm_exit

/* IRQ0: count, EOI to the master, real-mode iret. */
tick_isr:
    pushw %ax
    incw %cs:ticks
    movb $0x20, %al
    outb %al, $PIC1_CMD
    popw %ax
    iret

/* The local APIC timer fired first: IRQ0 ticks missing. */
watchdog_isr:
    cli
    xorw %bx, %bx
    movw %bx, %ds
    movw $msg_timeout1, %si
    call puts
    movw ticks, %ax
    call put_dec
    movw $msg_timeout2, %si
    call puts
    movb $EXIT_FAIL, %al
    jmp rm_exit

/* Every trap stub pushes its vector and jumps here. */
unexpected:
    cli
    popw %ax
    xorw %bx, %bx
    movw %bx, %ds
    movw $msg_unexpected, %si
    call puts
    call put_hex8
    movw $msg_fail, %si
    call puts
    movb $EXIT_FAIL, %al
rm_exit:
    outb %al, $DEBUG_EXIT_PORT
6:  cli
    hlt
    jmp 6b

/* COM1 output, THRE polled with a bound. putc: AL. puts: DS:SI. */
putc:
    pushw %ax
    pushw %cx
    pushw %dx
    movb %al, %ah
    movw $(COM1_PORT + 5), %dx
    movw $0xffff, %cx
7:  inb %dx, %al
    testb $0x20, %al
    jnz 8f
    loop 7b
8:  movb %ah, %al
    movw $COM1_PORT, %dx
    outb %al, %dx
    popw %dx
    popw %cx
    popw %ax
    ret

puts:
    pushw %ax
9:  lodsb
    testb %al, %al
    jz 10f
    cmpb $'\n', %al
    jne 11f
    movb $'\r', %al
    call putc
    movb $'\n', %al
11: call putc
    jmp 9b
10: popw %ax
    ret

put_dec:                        /* AX, unsigned */
    pushw %ax
    pushw %bx
    pushw %cx
    pushw %dx
    movw $10, %bx
    xorw %cx, %cx
12: xorw %dx, %dx
    divw %bx
    pushw %dx
    incw %cx
    testw %ax, %ax
    jnz 12b
13: popw %ax
    addb $'0', %al
    call putc
    loop 13b
    popw %dx
    popw %cx
    popw %bx
    popw %ax
    ret

put_hex8:                       /* AL as 0xNN */
    pushw %ax
    pushw %bx
    movb %al, %bl
    movb $'0', %al
    call putc
    movb $'x', %al
    call putc
    movb %bl, %al
    shrb $4, %al
    call hex_digit
    movb %bl, %al
    call hex_digit
    popw %bx
    popw %ax
    ret
hex_digit:
    andb $0xf, %al
    addb $'0', %al
    cmpb $'9', %al
    jbe 14f
    addb $('a' - '9' - 1), %al
14: jmp putc

/* Six bytes each: push imm16 (68 iw), jmp rel16 (e9 cw). */
trap_stubs:
    .irp v, 0x08,0x09,0x0a,0x0b,0x0c,0x0d,0x0e,0x0f, 0x20,0x21,0x22,0x23,0x24,0x25,0x26,0x27, 0x28,0x29,0x2a,0x2b,0x2c,0x2d,0x2e,0x2f, 0x70,0x71,0x72,0x73,0x74,0x75,0x76,0x77
    .byte 0x68
    .word \v
    .byte 0xe9
    .word unexpected - (. + 2)
    .endr
    .code32

trap_vectors:
    .byte 0x08,0x09,0x0a,0x0b,0x0c,0x0d,0x0e,0x0f, 0x20,0x21,0x22,0x23,0x24,0x25,0x26,0x27
    .byte 0x28,0x29,0x2a,0x2b,0x2c,0x2d,0x2e,0x2f, 0x70,0x71,0x72,0x73,0x74,0x75,0x76,0x77
trap_vectors_end:
    .balign 2
ivt_descriptor:
    .word 0x3ff
    .long 0
ticks:
    .word 0
    .globl rm_ticks, rm_divisor, rm_vector, rm_pic_mask
rm_ticks:
    .word 0
rm_divisor:
    .word 0
rm_vector:
    .byte 0
rm_pic_mask:
    .byte 0xfe
msg_real:
    .asciz "realmode: in real mode, IVT installed, counting\n"
msg_done1:
    .asciz "realmode: "
msg_done2:
    .asciz " ticks on vector "
msg_pass:
    .asciz "\nrealmode: PASS\n"
msg_unexpected:
    .asciz "realmode: FAIL unexpected interrupt on vector "
msg_timeout1:
    .asciz "realmode: FAIL watchdog expired after "
msg_timeout2:
    .asciz " ticks\nrealmode: FAIL\n"
msg_fail:
    .asciz "\nrealmode: FAIL\n"

    .balign 16
    .space 1024
rm_stack_top:
