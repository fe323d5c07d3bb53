/*
 * smp_guest: the boot CPU starts every AP with INIT + STARTUP IPIs through its local APIC
 * (Intel MP spec B.4: INIT, 10 ms, SIPI, 200 us, SIPI), as kvm-unit-tests' smp_init() does;
 * each AP runs a real-mode trampoline below 1 MiB that records its initial APIC id (CPUID leaf 1)
 * and halts. The boot CPU checks that ids 1..N-1, and only those, checked in.
 * Command line: cpus=N. Exit: 0 ok, 2 timeout, 3 wrong ids, 4 the BSP's id is not 0.
 */
#include "guest_lib.h"

#define LAPIC 0xfee00000u
#define LAPIC_ID 0x20
#define LAPIC_SVR 0xf0
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310

/* Written by the APs (real mode, DS = 0): must lie below 64 KiB. */
extern volatile uint32_t ap_count;
extern volatile uint8_t ap_seen[32];
void ap_trampoline(void);

__asm__(
    "  .section .low.sipi, \"ax\"\n"
    "  .code16\n"
    "  .globl ap_trampoline\n"
    "ap_trampoline:\n" /* 4 KiB aligned (guest.ld): SIPI vector = address >> 12 */
    "  cli\n"
    "  xorw %ax, %ax\n"
    "  movw %ax, %ds\n"
    "  movl $1, %eax\n"
    "  cpuid\n"
    "  shrl $24, %ebx\n"
    "  andw $31, %bx\n"
    "  movb $1, ap_seen(%bx)\n"
    "  lock incl ap_count\n"
    "1: hlt\n"
    "  jmp 1b\n"
    "  .align 4\n"
    "  .globl ap_count, ap_seen\n"
    "ap_count: .long 0\n"
    "ap_seen: .fill 32, 1, 0\n"
    "  .code32\n"
    "  .text\n");

static inline uint32_t lapic_read(uint32_t reg) { return *(volatile uint32_t*)(LAPIC + reg); }
static inline void lapic_write(uint32_t reg, uint32_t v) { *(volatile uint32_t*)(LAPIC + reg) = v; }

static void spin(uint32_t n) {
  for (volatile uint32_t i = 0; i < n; ++i) {
  }
}

static void send_ipi_all_but_self(uint32_t low) {
  lapic_write(LAPIC_ICR_HI, 0);
  lapic_write(LAPIC_ICR_LO, (3u << 18) | low); /* destination shorthand: all excluding self */
  while (lapic_read(LAPIC_ICR_LO) & (1u << 12)) { /* delivery status: pending */
  }
}

uint32_t guest_main(const struct mb_info* mb);
uint32_t guest_main(const struct mb_info* mb) {
  const uint32_t cpus = cmdline_u32(mb, "cpus", 1);
  if ((lapic_read(LAPIC_ID) >> 24) != 0) return 4;
  lapic_write(LAPIC_SVR, lapic_read(LAPIC_SVR) | 0x100); /* APIC software enable */
  send_ipi_all_but_self((1u << 14) | (5u << 8));          /* INIT, assert */
  spin(1000000);
  for (int i = 0; i < 2; ++i) {
    send_ipi_all_but_self((6u << 8) | ((uint32_t)ap_trampoline >> 12)); /* STARTUP */
    spin(100000);
  }
  for (uint32_t t = 0; ap_count < cpus - 1; ++t) {
    if (t > 200000000u) return 2;
  }
  spin(1000000); /* an AP too many would show up now */
  if (ap_count != cpus - 1 || ap_seen[0]) return 3;
  for (uint32_t id = 1; id < 32; ++id) {
    if (ap_seen[id] != (id < cpus)) return 3;
  }
  puts_com1("smp: ");
  putu_com1(ap_count);
  puts_com1(" APs checked in\n");
  return 0;
}
