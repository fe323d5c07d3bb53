/*
 * layout.h - addresses and ports shared by the multiboot test guests (C and assembly).
 *
 * Low memory below 0x6000 is the one window free both under minivmm (its loader writes a GDT
 * at 0x1000-0x10e7 and the multiboot info at 0x6000, vmm/boot/boot_layout.h) and under QEMU
 * (multiboot info at 0x9000, command line after the image), so the real-mode guest's 16-bit
 * half (copied to 0x2000) and the SMP trampoline (copied to 0x3000) run there. Both are
 * loaded above 1 MiB: minivmm's ELF loader refuses segments below it.
 */
#ifndef MINIVMM_TEST_GUEST_LAYOUT_H
#define MINIVMM_TEST_GUEST_LAYOUT_H

#define MB_HEADER_MAGIC 0x1badb002
#define MB_BOOT_MAGIC 0x2badb002

/* Our own GDT (entry.S): flat 32-bit code/data, and 16-bit ones for the way back to real mode. */
#define SEL_CODE32 0x08
#define SEL_DATA32 0x10
#define SEL_CODE16 0x18
#define SEL_DATA16 0x20

#define COM1_PORT 0x3f8
#define DEBUG_EXIT_PORT 0xf4   /* isa-debug-exit: status = (value << 1) | 1 */
#define FW_CFG_SELECTOR 0x510  /* 16-bit write */
#define FW_CFG_DATA 0x511      /* byte stream */
#define TESTDEV_IRQ_PORT 0x2000 /* pc-testdev: 0x2000 + line, write 1 raise / 0 lower */

#define LAPIC_BASE 0xfee00000
#define IOAPIC_BASE 0xfec00000

/* SMP trampoline: one page, started by SIPI vector TRAMP_ADDR >> 12 in real mode. */
#define TRAMP_ADDR 0x3000
#define TRAMP_COUNT 0x3f00   /* u16: APs that checked in */
#define TRAMP_TABLE 0x3f10   /* u8[TRAMP_SLOTS]: their initial APIC ids, 0xff = empty */
#define TRAMP_SLOTS 64
#define TRAMP_ROUNDS 0x3e00  /* u16[TRAMP_SLOTS]: NMIs each AP took (smp.c rounds=N) */

/* Exit values written to DEBUG_EXIT_PORT (QEMU / minivmm status in brackets). */
#define EXIT_PASS 0x00     /* (1) */
#define EXIT_FAIL 0x01     /* (3) a check failed */
#define EXIT_BAD_ARGS 0x02 /* (5) the command line or the boot magic was wrong */

#endif
