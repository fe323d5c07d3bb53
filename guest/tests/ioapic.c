/*
 * ioapic.c - drives ISA IRQ lines through pc-testdev (port 0x2000 + line: 1 raises, 0 lowers)
 * and checks what the IOAPIC (0xfec00000) delivers to the local APIC.
 *
 * Interrupts stay disabled (IF = 0) throughout: this host's KVM cannot emulate a 32-bit
 * iret, so instead of taking interrupts the guest polls the local APIC's IRR for the vector.
 * An interrupt never accepted cannot be EOIed, so its IRR bit stays set: every check therefore
 * uses a fresh vector (0x40, 0x41, ...), and a level entry's Remote IRR (set on delivery,
 * normally cleared by the EOI) is cleared the other documented way, by switching the entry to
 * edge-triggered (KVM and QEMU both do so; Linux relies on it).
 *
 * Command line:
 *   edge=N   the line for the edge-triggered checks (default 10)
 *   level=N  the line for the level-triggered checks (default 11)
 *   skip=N   never actually raise line N: a fault to show the test fails when an
 *            interrupt does not arrive
 */
#include "lib.h"

#define IOAPIC_REGSEL 0x00
#define IOAPIC_WINDOW 0x10
#define IOAPIC_VER 0x01
#define REDIR_MASKED (1u << 16)
#define REDIR_LEVEL (1u << 15)
#define REDIR_REMOTE_IRR (1u << 14)

#define NO_ARRIVAL_MS 10 /* how long "must not arrive" waits: delivery is synchronous */
#define ARRIVAL_MS 200

static uint32_t bsp_id;
static uint32_t skip_line = 0xffffffff;
static uint32_t next_vector = 0x40;

static uint32_t ioapic_read(uint32_t reg)
{
    mmio_write32(IOAPIC_BASE + IOAPIC_REGSEL, reg);
    return mmio_read32(IOAPIC_BASE + IOAPIC_WINDOW);
}

static void ioapic_write(uint32_t reg, uint32_t v)
{
    mmio_write32(IOAPIC_BASE + IOAPIC_REGSEL, reg);
    mmio_write32(IOAPIC_BASE + IOAPIC_WINDOW, v);
}

/* Fixed delivery, physical destination = the BSP, active high. */
static void redirect(uint32_t line, uint32_t vector, uint32_t flags)
{
    ioapic_write(0x10 + 2 * line, REDIR_MASKED);
    ioapic_write(0x11 + 2 * line, bsp_id << 24);
    ioapic_write(0x10 + 2 * line, vector | flags);
}

static uint32_t redirect_low(uint32_t line) { return ioapic_read(0x10 + 2 * line); }

static void set_line(uint32_t line, int level)
{
    if (line == skip_line)
        return;
    outb((uint16_t)(TESTDEV_IRQ_PORT + line), (uint8_t)level);
}

static bool apic_bit(uint32_t base, uint32_t vector)
{
    return (lapic_read(base + (vector / 32) * 0x10) >> (vector % 32)) & 1;
}

static bool irr_within(uint32_t vector, uint32_t ms)
{
    deadline_start_ms(ms);
    for (;;) {
        if (apic_bit(LAPIC_IRR, vector))
            return true;
        if (deadline_passed())
            return false;
        cpu_relax();
    }
}

static int fail(const char *step, uint32_t line, uint32_t vector, const char *what)
{
    put_str("ioapic: FAIL ");
    put_str(step);
    put_str(" (irq ");
    put_dec(line);
    put_str(", vector ");
    put_hex(vector, 2);
    put_str("): ");
    put_str(what);
    put_str("\n");
    return EXIT_FAIL;
}

static void pass(const char *step, uint32_t line)
{
    put_str("ioapic: ok ");
    put_str(step);
    put_str(" (irq ");
    put_dec(line);
    put_str(")\n");
}

static int edge_checks(uint32_t line)
{
    /* A rising edge on an unmasked edge entry delivers once, not as level (TMR clear). */
    uint32_t v = next_vector++;
    redirect(line, v, 0);
    if (apic_bit(LAPIC_IRR, v))
        return fail("edge", line, v, "pending before the line was raised");
    set_line(line, 1);
    if (!irr_within(v, ARRIVAL_MS))
        return fail("edge", line, v, "raised, never arrived");
    if (apic_bit(LAPIC_TMR, v))
        return fail("edge", line, v, "arrived marked level-triggered (TMR set)");
    set_line(line, 0);
    pass("edge raise", line);

    /* Lowered, the line gives nothing; raised again, a new edge. */
    v = next_vector++;
    redirect(line, v, 0);
    if (irr_within(v, NO_ARRIVAL_MS))
        return fail("edge again", line, v, "arrived while the line was low");
    set_line(line, 1);
    if (!irr_within(v, ARRIVAL_MS))
        return fail("edge again", line, v, "second edge never arrived");
    set_line(line, 0);
    pass("edge lower and raise again", line);

    /* A masked edge entry drops the edge (82093AA data sheet): nothing arrives, not even
     * after unmasking. */
    v = next_vector++;
    redirect(line, v, REDIR_MASKED);
    set_line(line, 1);
    if (irr_within(v, NO_ARRIVAL_MS))
        return fail("edge masked", line, v, "arrived through a masked entry");
    set_line(line, 0);
    redirect(line, v, 0);
    if (irr_within(v, NO_ARRIVAL_MS))
        return fail("edge masked", line, v, "masked edge delivered on unmask");
    redirect(line, v, REDIR_MASKED);
    pass("edge masked", line);
    return EXIT_PASS;
}

static int level_checks(uint32_t line)
{
    /* Raised: delivered as level (TMR set), Remote IRR set until the EOI. */
    uint32_t v = next_vector++;
    redirect(line, v, REDIR_LEVEL);
    set_line(line, 1);
    if (!irr_within(v, ARRIVAL_MS))
        return fail("level", line, v, "raised, never arrived");
    if (!apic_bit(LAPIC_TMR, v))
        return fail("level", line, v, "arrived marked edge-triggered (TMR clear)");
    if (!(redirect_low(line) & REDIR_REMOTE_IRR))
        return fail("level", line, v, "Remote IRR clear after delivery");
    pass("level raise", line);

    /* No EOI yet: Remote IRR holds back the still-asserted line, even on a new vector. */
    v = next_vector++;
    ioapic_write(0x10 + 2 * line, v | REDIR_LEVEL);
    if (irr_within(v, NO_ARRIVAL_MS))
        return fail("level remote irr", line, v, "delivered again before any EOI");
    if (!(redirect_low(line) & REDIR_REMOTE_IRR))
        return fail("level remote irr", line, v, "rewriting the entry cleared Remote IRR");
    pass("level held by remote irr", line);

    /* Switching to edge clears Remote IRR; back to level with the line still high, it is
     * delivered again (what an EOI would do). */
    v = next_vector++;
    ioapic_write(0x10 + 2 * line, v | REDIR_MASKED);
    if (redirect_low(line) & REDIR_REMOTE_IRR)
        return fail("level redeliver", line, v, "edge mode kept Remote IRR");
    ioapic_write(0x10 + 2 * line, v | REDIR_LEVEL);
    if (!irr_within(v, ARRIVAL_MS))
        return fail("level redeliver", line, v, "asserted line not delivered again");
    pass("level still asserted delivers again", line);

    /* Lowered: the same sequence delivers nothing. */
    set_line(line, 0);
    v = next_vector++;
    ioapic_write(0x10 + 2 * line, v | REDIR_MASKED);
    ioapic_write(0x10 + 2 * line, v | REDIR_LEVEL);
    if (irr_within(v, NO_ARRIVAL_MS))
        return fail("level lower", line, v, "delivered after the line was lowered");
    ioapic_write(0x10 + 2 * line, v | REDIR_MASKED);
    pass("level lower", line);
    return EXIT_PASS;
}

int guest_main(uint32_t magic, const struct mb_info *mbi);
int guest_main(uint32_t magic, const struct mb_info *mbi)
{
    const char *cl = mb_cmdline(magic, mbi);
    if (magic != MB_BOOT_MAGIC) {
        put_str("ioapic: error: not started by a multiboot loader\n");
        return EXIT_BAD_ARGS;
    }
    bool bad = false;
    uint64_t edge = 10, level = 11, skip = 0;
    cmdline_number(cl, "edge", false, &edge, &bad);
    cmdline_number(cl, "level", false, &level, &bad);
    if (cmdline_number(cl, "skip", false, &skip, &bad))
        skip_line = (uint32_t)skip;
    if (edge > 23 || level > 23 || edge == level) {
        put_str("error: edge= and level= want two different lines 0..23\n");
        bad = true;
    }
    if (bad)
        return EXIT_BAD_ARGS;

    /* The 8259s stay out of it: mask every line (OCW1; their vectors are left alone). */
    outb(0x21, 0xff);
    outb(0xa1, 0xff);
    lapic_enable();
    bsp_id = lapic_read(LAPIC_ID) >> 24;
    const uint32_t ver = ioapic_read(IOAPIC_VER);
    const uint32_t pins = ((ver >> 16) & 0xff) + 1;
    put_str("ioapic: version ");
    put_hex(ver & 0xff, 2);
    put_str(" pins ");
    put_dec(pins);
    put_str(" bsp apic_id=");
    put_dec(bsp_id);
    put_str(" edge=");
    put_dec((uint32_t)edge);
    put_str(" level=");
    put_dec((uint32_t)level);
    put_str("\n");
    if (pins < 24) {
        put_str("ioapic: FAIL fewer than 24 redirection entries\n");
        return EXIT_FAIL;
    }
    for (uint32_t v = 0x40; v < 0x48; v++) {
        if (apic_bit(LAPIC_IRR, v))
            return fail("start", 0, v, "vector already pending");
    }

    int r = edge_checks((uint32_t)edge);
    if (r == EXIT_PASS)
        r = level_checks((uint32_t)level);
    put_str(r == EXIT_PASS ? "ioapic: PASS\n" : "ioapic: FAIL\n");
    return r;
}
