/*
 * pic.c - the two 8259A interrupt controllers. Every timer set-up starts
 * here (pit.c, lapic.c, rtc.c): the PICs are remapped above the CPU's
 * exception vectors and masked down to the one IRQ that timer uses, or to
 * none when its interrupt comes another way.
 */
#include "guest.h"

/* 8259A data sheet, "Initialization Command Words": ICW1 = edge triggered,
 * cascaded, ICW4 follows; ICW2 = vector base; ICW3 = the slave hangs on
 * master IRQ2; ICW4 = 8086 mode, normal (not automatic) EOI. Then OCW1, the
 * masks (bit set = masked). Re-initialising also drops whatever the firmware
 * left pending or in service. */
void pic_init(uint8_t master_mask, uint8_t slave_mask)
{
    outb(PIC1_CMD, 0x11);
    outb(PIC2_CMD, 0x11);
    outb(PIC1_DATA, VEC_PIC_MASTER);
    outb(PIC2_DATA, VEC_PIC_SLAVE);
    outb(PIC1_DATA, 0x04);
    outb(PIC2_DATA, 0x02);
    outb(PIC1_DATA, 0x01);
    outb(PIC2_DATA, 0x01);
    outb(PIC1_DATA, master_mask);
    outb(PIC2_DATA, slave_mask);
}
