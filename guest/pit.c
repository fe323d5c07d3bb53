/*
 * pit.c - timer=pit: the i8254's channel 0 as the tick, its IRQ0 taken
 * through the master 8259 (the default) or, with irq=ioapic, through the
 * I/O APIC as an APIC-based OS takes it.
 *
 * Only the set-up is C. The tick handler is isr_pit in boot.S (or isr_lapic
 * for irq=ioapic, for its LAPIC EOI): the static IDT needs every handler in
 * one 64 KiB window, and a handler in assembly costs ~6 emulated
 * instructions a tick.
 */
#include "guest.h"

#define PIT_INPUT_HZ 1193182u

/* i8254 channel 0, mode 2 (rate generator): one IRQ0 edge per `divisor`
 * input clocks. Control word 0x34 = channel 0, lobyte/hibyte, mode 2,
 * binary (i8254 data sheet, "Control Word Format"). PIC IRQ0 reaches the
 * CPU through LAPIC LINT0 in ExtINT mode (lapic_virtual_wire). */
void start_pit(uint32_t hz)
{
    uint32_t divisor = (PIT_INPUT_HZ + hz / 2) / hz;
    pic_init(0xfe, 0xff);
    lapic_virtual_wire();
    outb(PIT_CMD, 0x34);
    outb(PIT_CH0, (uint8_t)divisor);
    outb(PIT_CH0, (uint8_t)(divisor >> 8));
}

/* The same PIT ticks, the way an APIC-based OS takes them: both PICs masked, IRQ0 through
 * the I/O APIC's pin 0 (minivmm's MADT has no interrupt source override, so ISA IRQ0 is
 * GSI 0), edge-triggered, fixed delivery to the boot CPU. The vector is the LAPIC timer's,
 * whose handler ends with the LAPIC EOI that an I/O APIC interrupt needs; the LAPIC timer
 * itself stays off. This is the path on which KVM must report the guest's EOI for an
 * edge-triggered pin, which minivmm's PIT counts to find merged ticks. */
void start_pit_via_ioapic(uint32_t hz)
{
    uint32_t divisor = (PIT_INPUT_HZ + hz / 2) / hz;
    volatile uint32_t *regsel = (volatile uint32_t *)(uintptr_t)(IOAPIC_BASE + IOAPIC_REGSEL);
    volatile uint32_t *window = (volatile uint32_t *)(uintptr_t)(IOAPIC_BASE + IOAPIC_WINDOW);
    pic_init(0xff, 0xff);
    lapic_write(LAPIC_SVR, 0x100 | VEC_LAPIC_SPURIOUS);   /* software enable */
    lapic_write(LAPIC_TPR, 0);
    *regsel = 0x11;                 /* pin 0, high: destination APIC id 0 */
    *window = 0;
    *regsel = 0x10;                 /* pin 0, low: unmasked, edge, active high, fixed */
    *window = VEC_LAPIC_TIMER;
    outb(PIT_CMD, 0x34);
    outb(PIT_CH0, (uint8_t)divisor);
    outb(PIT_CH0, (uint8_t)(divisor >> 8));
}
