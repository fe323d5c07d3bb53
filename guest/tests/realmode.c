/*
 * realmode.c - the 32-bit half of the real-mode guest: reads the command line while the
 * multiboot info is reachable and still intact, then drops to real mode (realmode.S) for
 * good. The real-mode half (.lowmem) is copied to where it is linked, below 0x6000, so
 * everything it touches stays within real mode's first 64 KiB.
 *
 * Command line:
 *   ticks=N     IRQ0 ticks to count (default 20, 1..10000)
 *   hz=N        PIT rate (default 100, 19..10000: the divisor is 16 bits)
 *   vector=V    where IRQ0 is expected (default 0x08, where a BIOS leaves the master 8259);
 *               any other value makes the test fail on a BIOS-like start
 *   mask=M      the master 8259's mask while counting (default 0xfe: IRQ0 only); 0xff
 *               starves the count, to show the watchdog failing the test
 *
 * The watchdog (the local APIC timer, one-shot, vector 0xf0, handled in real mode) expires
 * after 2 s plus twice the time the ticks should take (slack for a loaded host).
 */
#include "lib.h"

extern char lowmem_load[], lowmem_start[], lowmem_end[]; /* test_guest.ld */
extern uint16_t rm_ticks, rm_divisor;
extern uint8_t rm_vector, rm_pic_mask;
noreturn void enter_real_mode(void);

int guest_main(uint32_t magic, const struct mb_info *mbi);
int guest_main(uint32_t magic, const struct mb_info *mbi)
{
    const char *cl = mb_cmdline(magic, mbi);
    if (magic != MB_BOOT_MAGIC) {
        put_str("realmode: error: not started by a multiboot loader\n");
        return EXIT_BAD_ARGS;
    }
    bool bad = false;
    uint64_t ticks = 20, hz = 100, vector = 0x08, mask = 0xfe;
    cmdline_number(cl, "ticks", false, &ticks, &bad);
    cmdline_number(cl, "hz", false, &hz, &bad);
    cmdline_number(cl, "vector", false, &vector, &bad);
    cmdline_number(cl, "mask", false, &mask, &bad);
    if (ticks < 1 || ticks > 10000 || hz < 19 || hz > 10000 || vector < 0x08 || vector > 0xef ||
        mask > 0xff || (uint32_t)ticks * 1000 / (uint32_t)hz > 20000) {
        put_str("error: need ticks=1..10000 hz=19..10000 vector=0x08..0xef mask=0..0xff"
                " and at most 20 s of ticks\n");
        bad = true;
    }
    if (bad)
        return EXIT_BAD_ARGS;
    /* Copy the real-mode half down first: the rm_* variables live in it. */
    memcpy(lowmem_start, lowmem_load, (size_t)(lowmem_end - lowmem_start));
    rm_ticks = (uint16_t)ticks;
    rm_divisor = (uint16_t)((1193182u + (uint32_t)hz / 2) / (uint32_t)hz);
    rm_vector = (uint8_t)vector;
    rm_pic_mask = (uint8_t)mask;

    uint32_t ivt8 = 0x08 * 4;
    __asm__("" : "+r"(ivt8)); /* address 0x20 is real, whatever gcc's bounds checks think */
    const uint32_t old = mmio_read32(ivt8);
    put_str("realmode: ticks=");
    put_dec((uint32_t)ticks);
    put_str(" hz=");
    put_dec((uint32_t)hz);
    put_str(" vector=");
    put_hex((uint32_t)vector, 2);
    put_str(" firmware ivt[0x08]=");
    put_hex(old >> 16, 4);
    put_str(":");
    put_hex(old & 0xffff, 4);
    put_str("\n");

    /* The watchdog: pending in the IRR until the first sti, taken in real mode. */
    const uint32_t watchdog_ms = 2000 + 2 * ((uint32_t)ticks * 1000 / (uint32_t)hz);
    lapic_enable();
    lapic_write(LAPIC_TIMER_DIV, 0x3); /* divide by 16: 62.5 MHz at a 1 GHz APIC clock */
    lapic_write(LAPIC_LVT_TIMER, 0xf0); /* one-shot, unmasked */
    lapic_write(LAPIC_TIMER_INIT, watchdog_ms * 62500u);
    enter_real_mode();
}
