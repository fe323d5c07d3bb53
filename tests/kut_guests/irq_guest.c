/*
 * irq_guest: raises and lowers pc-testdev's ISA line 10 (port 0x200a) and checks that the
 * interrupt arrives through the IOAPIC (pin 10, level-triggered, vector 0x40, to APIC 0), as
 * kvm-unit-tests' ioapic test does with set_irq_line(). The 8259s are left as the VMM's BIOS
 * state leaves them (line 10 masked there), so only the IOAPIC can deliver it.
 * Exit: 0 ok, 2 no interrupt, 3 an interrupt while the line was low or the pin masked,
 * 4 a second interrupt for one raise, 0x7d a CPU exception.
 */
#include "guest_lib.h"

#define LAPIC 0xfee00000u
#define IOAPIC 0xfec00000u
#define VECTOR 0x40
#define LINE 10

volatile uint32_t irq_count;

struct idt_entry {
  uint16_t off_lo, sel;
  uint8_t zero, type;
  uint16_t off_hi;
} __attribute__((packed));
static struct idt_entry idt[256];
static struct {
  uint16_t limit;
  uint32_t base;
} __attribute__((packed)) idtr = {sizeof idt - 1, 0};

void irq_stub(void);
void fault_stub(void);
/* The handler lowers the line before the EOI, so a level-triggered pin does not fire again. */
__asm__(
    "  .text\n"
    "irq_stub:\n"
    "  pushl %eax\n"
    "  pushl %edx\n"
    "  lock incl irq_count\n"
    "  movb $0, %al\n"
    "  movw $0x200a, %dx\n"
    "  outb %al, %dx\n"
    "  movl $0, 0xfee000b0\n" /* LAPIC EOI */
    "  popl %edx\n"
    "  popl %eax\n"
    "  iret\n"
    "fault_stub:\n"
    "  movl $0x7d, %eax\n"
    "  outl %eax, $0xf4\n"
    "1: hlt\n"
    "  jmp 1b\n");

static void set_gate(int v, void (*fn)(void)) {
  const uint32_t a = (uint32_t)fn;
  uint16_t cs;
  __asm__ volatile("movw %%cs, %0" : "=r"(cs));
  idt[v] = (struct idt_entry){(uint16_t)a, cs, 0, 0x8e, (uint16_t)(a >> 16)};
}

static void ioapic_write(uint32_t reg, uint32_t v) {
  *(volatile uint32_t*)IOAPIC = reg;
  *(volatile uint32_t*)(IOAPIC + 0x10) = v;
}

static uint32_t wait_count(uint32_t want) {
  for (uint32_t t = 0; t < 50000000u && irq_count < want; ++t) {
  }
  return irq_count;
}

uint32_t guest_main(const struct mb_info* mb);
uint32_t guest_main(const struct mb_info* mb) {
  (void)mb;
  for (int v = 0; v < 256; ++v) set_gate(v, fault_stub);
  set_gate(VECTOR, irq_stub);
  idtr.base = (uint32_t)idt;
  __asm__ volatile("lidt %0" : : "m"(idtr));
  *(volatile uint32_t*)(LAPIC + 0xf0) |= 0x100; /* APIC software enable */
  /* Redirection entry: vector, fixed, physical, active high, level, masked; to APIC 0. */
  const uint32_t entry = VECTOR | (1u << 15);
  ioapic_write(0x11 + 2 * LINE, 0);
  ioapic_write(0x10 + 2 * LINE, entry | (1u << 16));
  __asm__ volatile("sti");

  outb(0x2000 + LINE, 1); /* raised while masked: nothing may arrive */
  if (wait_count(1) != 0) return 3;
  outb(0x2000 + LINE, 0);
  ioapic_write(0x10 + 2 * LINE, entry); /* unmasked, line low: still nothing */
  if (wait_count(1) != 0) return 3;

  outb(0x2000 + LINE, 1); /* the handler lowers it again */
  if (wait_count(1) != 1) return 2;
  if (wait_count(2) != 1) return 4;
  outb(0x2000 + LINE, 1); /* and a second time */
  if (wait_count(2) != 2) return 2;
  __asm__ volatile("cli");
  puts_com1("irq: line 10 delivered through the IOAPIC twice\n");
  return 0;
}
