/*
 * rtc.c - timer=rtc: the MC146818's periodic interrupt as the tick, IRQ8
 * through the slave 8259. Its handler is isr_rtc in boot.S: it must read
 * register C to re-arm the interrupt and EOI both PICs, in assembly with the
 * others for the static IDT and the per-tick instruction count.
 */
#include "guest.h"

/* MC146818 periodic interrupt (data sheet, "Register A" / "Register B"):
 * rate select r gives 32768 >> (r - 1) Hz, so r = 16 - log2(hz) for
 * hz = 2 (r = 15) .. 8192 (r = 3); r = 1, 2 are special on real parts and
 * never chosen. Divider bits 010 = the 32.768 kHz time base. */
void start_rtc(uint32_t hz)
{
    uint8_t log2 = 0;
    while ((1u << log2) < hz)
        log2++;
    pic_init(0xfb, 0xfe);                       /* master: IRQ2 cascade; slave: IRQ8 */
    lapic_virtual_wire();
    outb(RTC_INDEX, RTC_REG_A);
    outb(RTC_DATA, (uint8_t)(0x20 | (16 - log2)));
    outb(RTC_INDEX, RTC_REG_B);
    uint8_t b = inb(RTC_DATA);
    outb(RTC_INDEX, RTC_REG_B);
    outb(RTC_DATA, b | 0x40);                   /* PIE */
    /* Reading C clears a flag raised before the PIC was ready, so IRQ8
     * drops and the next period makes a fresh edge. */
    outb(RTC_INDEX, RTC_REG_C);
    (void)inb(RTC_DATA);
}

/* rtc=show: the CMOS clock's time of day as "rtc: HH:MM:SS" (24-hour, whatever register B's
 * formats). Read between updates: wait while update-in-progress (register A bit 7) is set, and
 * read again if the seconds moved meanwhile. */
static uint8_t cmos(uint8_t reg)
{
    outb(RTC_INDEX, reg);
    return inb(RTC_DATA);
}

static uint8_t rtc_field(uint8_t raw, int bcd)
{
    return bcd ? (uint8_t)((raw >> 4) * 10 + (raw & 0x0f)) : raw;
}

void rtc_show(void)
{
    uint8_t s, m, h;
    do {
        while (cmos(RTC_REG_A) & 0x80)
            ;
        s = cmos(0x00);
        m = cmos(0x02);
        h = cmos(0x04);
    } while (s != cmos(0x00));
    const uint8_t b = cmos(RTC_REG_B);
    const int bcd = !(b & 0x04);
    const int pm = !(b & 0x02) && (h & 0x80);       /* 12-hour mode's PM flag */
    uint8_t hour = rtc_field(h & 0x7f, bcd);
    if (!(b & 0x02))
        hour = (uint8_t)(hour % 12 + (pm ? 12 : 0));
    const uint8_t parts[3] = {hour, rtc_field(m, bcd), rtc_field(s, bcd)};
    puts("rtc: ");
    for (int i = 0; i < 3; i++) {
        if (parts[i] < 10)
            puts("0");
        put_dec(parts[i]);
        if (i < 2)
            puts(":");
    }
    puts("\n");
}
