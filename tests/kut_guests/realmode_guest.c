/*
 * realmode_guest: drops from the multiboot protected-mode start to real mode (as
 * kvm-unit-tests' realmode.flat does: 16-bit protected mode, clear CR0.PE, far jump), then in
 * real mode: takes `int $0x42` through the IVT the VMM left (every vector at an IRET), checks
 * pc-testdev's echo register at byte, word and long width, prints on COM1, and exits through
 * isa-debug-exit. Exit: 0 ok, 1 echo mismatch, 0x7e bad multiboot magic.
 */
#include "guest_lib.h"

__asm__(
    "  .section .low, \"ax\"\n"
    "  .align 8\n"
    "rm_gdt:\n"
    "  .quad 0\n"
    "  .quad 0x00009b000000ffff\n" /* 0x08: 16-bit code, base 0, limit 64 KiB */
    "  .quad 0x000093000000ffff\n" /* 0x10: 16-bit data */
    "rm_gdt_end:\n"
    "rm_gdtr:\n"
    "  .word rm_gdt_end - rm_gdt - 1\n"
    "  .long rm_gdt\n"
    "rm_idtr:\n"
    "  .word 0x3ff\n" /* the real-mode IVT at 0 */
    "  .long 0\n"
    "  .code32\n"
    "  .globl enter_real_mode\n"
    "enter_real_mode:\n"
    "  cli\n"
    "  lgdt rm_gdtr\n"
    "  lidt rm_idtr\n"
    "  ljmp $0x08, $1f\n"
    "  .code16\n"
    "1:\n"
    "  movw $0x10, %ax\n"
    "  movw %ax, %ds\n"
    "  movw %ax, %es\n"
    "  movw %ax, %ss\n"
    "  movl %cr0, %eax\n"
    "  andl $~1, %eax\n"
    "  movl %eax, %cr0\n"
    "  ljmp $0, $2f\n"
    "2:\n"
    "  xorw %ax, %ax\n"
    "  movw %ax, %ds\n"
    "  movw %ax, %es\n"
    "  movw %ax, %ss\n"
    "  movl $0x7ff0, %esp\n"
    "  int $0x42\n" /* through the IVT to F000:FF53 and back */
    "  movb $0xa5, %al\n"
    "  outb %al, $0xe0\n"
    "  xorb %al, %al\n"
    "  inb $0xe0, %al\n"
    "  cmpb $0xa5, %al\n"
    "  jne rm_fail\n"
    "  movw $0x1234, %ax\n"
    "  movw $0xe0, %dx\n"
    "  outw %ax, %dx\n"
    "  xorw %ax, %ax\n"
    "  inw %dx, %ax\n"
    "  cmpw $0x1234, %ax\n"
    "  jne rm_fail\n"
    "  movl $0xdeadbeef, %eax\n"
    "  outl %eax, $0xe0\n"
    "  xorl %eax, %eax\n"
    "  inl $0xe0, %eax\n"
    "  cmpl $0xdeadbeef, %eax\n"
    "  jne rm_fail\n"
    "  movw $rm_msg, %si\n"
    "3:\n"
    "  movb (%si), %bl\n"
    "  testb %bl, %bl\n"
    "  jz 5f\n"
    "  movw $0x3fd, %dx\n"
    "4:\n"
    "  inb %dx, %al\n"
    "  testb $0x20, %al\n"
    "  jz 4b\n"
    "  movw $0x3f8, %dx\n"
    "  movb %bl, %al\n"
    "  outb %al, %dx\n"
    "  incw %si\n"
    "  jmp 3b\n"
    "5:\n"
    "  movb $0, %al\n"
    "  outb %al, $0xf4\n"
    "6: hlt\n"
    "  jmp 6b\n"
    "rm_fail:\n"
    "  movb $1, %al\n"
    "  outb %al, $0xf4\n"
    "  jmp 6b\n"
    "rm_msg: .asciz \"real mode: IVT and pc-testdev echo ok\\n\"\n"
    "  .code32\n"
    "  .text\n");

void enter_real_mode(void);

uint32_t guest_main(const struct mb_info* mb);
uint32_t guest_main(const struct mb_info* mb) {
  (void)mb;
  enter_real_mode(); /* does not return: real mode ends the run itself */
  return 0x7f;
}
