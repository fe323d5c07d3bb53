/*
 * lapic.c - timer=lapic: the local APIC timer in periodic mode as the tick.
 * Its handler is isr_lapic in boot.S (count, then a write to the EOI
 * register), kept in assembly with the others for the static IDT and for
 * its ~6 emulated instructions a tick.
 */
#include "guest.h"

/* The APIC timer's input clock before the divider. Not discoverable: KVM's
 * in-kernel LAPIC counts in nanoseconds (APIC_BUS_CYCLE_NS = 1 by default)
 * and so does QEMU's TCG APIC, i.e. 1 GHz. Other VMMs may differ. */
#define LAPIC_TIMER_HZ 1000000000u

/* Local APIC timer, periodic (Intel SDM vol. 3A, "APIC Timer"). The PICs are
 * remapped and fully masked so none of their IRQs lands on an exception
 * vector. Divide by 1 (DCR = 0xb): the count for 1 Hz, 1e9, still fits
 * the 32-bit initial-count register. KVM raises periods below
 * min_timer_period_us (200 us by default), so hz > 5000 runs at 5000. */
void start_lapic(uint32_t hz)
{
    pic_init(0xff, 0xff);
    lapic_write(LAPIC_SVR, 0x100 | VEC_LAPIC_SPURIOUS);   /* software enable */
    lapic_write(LAPIC_TPR, 0);                            /* accept all classes */
    lapic_write(LAPIC_TIMER_DCR, 0xb);
    lapic_write(LAPIC_LVT_TIMER, (1u << 17) | VEC_LAPIC_TIMER);  /* periodic */
    lapic_write(LAPIC_TIMER_ICR, (LAPIC_TIMER_HZ + hz / 2) / hz);  /* starts it */
}

/* The 8259's output reaches the CPU through LINT0 in ExtINT mode ("virtual
 * wire", Intel MP spec 3.6.2.2). KVM (quirk LINT0_REENABLED) and a PC
 * firmware leave it so at reset, but QEMU's microvm has no firmware that
 * does, and there LINT0 stays masked and no PIT or RTC tick arrives. So set
 * it, as an OS that keeps the 8259s does: software-enable the APIC first, as
 * LVT writes keep the mask bit while it is disabled (SDM vol. 3A, "Local
 * APIC State After It Has Been Software Disabled"). */
void lapic_virtual_wire(void)
{
    lapic_write(LAPIC_SVR, 0x100 | VEC_LAPIC_SPURIOUS);
    lapic_write(LAPIC_LVT_LINT0, 0x700);   /* ExtINT, edge, unmasked */
}
