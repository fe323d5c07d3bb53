/*
 * kernel.c - the 64-bit part of the minivmm test guest: command line, serial
 * output, timer programming and the idle loop. Entered from boot.S with our
 * own GDT, IDT, page tables and stack in place, interrupts off.
 *
 * Every instruction is emulated by the host's KVM (~0.5 us each), so: no
 * output per tick, no clearing of memory, no loops longer than the command
 * line, and only general-purpose registers (-mgeneral-regs-only).
 */
#include <stdint.h>

#include "layout.h"

#define noreturn __attribute__((noreturn))

extern volatile uint64_t tick_count;   /* boot.S; the tick handlers count it */

noreturn void kmain(const uint8_t *boot_params);
noreturn void exception_report(uint64_t vector, uint64_t error_code, uint64_t rip);
noreturn void halt_forever(void);

/* ---------------------------------------------------------------- I/O --- */

static inline void outb(uint16_t port, uint8_t value)
{
    __asm__ volatile("outb %0, %1" : : "a"(value), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t value;
    __asm__ volatile("inb %1, %0" : "=a"(value) : "Nd"(port));
    return value;
}

static inline void lapic_write(uint32_t reg, uint32_t value)
{
    *(volatile uint32_t *)(uintptr_t)(LAPIC_BASE + reg) = value;
}

/* isa-debug-exit (QEMU) / minivmm's port 0xf4: the VMM exits with status
 * (value << 1) | 1. Without such a device the write is ignored; stop then. */
static noreturn void debug_exit(uint8_t value)
{
    outb(DEBUG_EXIT_PORT, value);
    halt_forever();
}

/* ------------------------------------------------------------- serial --- */

/* Bytes the UART takes per THRE poll: 16 with its transmit FIFO, else 1. */
static uint8_t tx_burst = 1;
static uint8_t tx_room = 0;  /* explicit: only initialised data is in the image */

static void serial_init(void)
{
    /* LCR = 8N1 with DLAB clear, so 0x3f8 is the transmit register and not
     * the divisor latch a firmware may have left selected. Then enable and
     * clear the FIFOs; IIR bits 7:6 read 11 only if a FIFO exists (16550
     * data sheet, "FIFO Control Register" / "Interrupt Identification
     * Register"). Baud rate is moot for a VMM's UART. */
    outb(COM1 + 3, 0x03);
    outb(COM1 + 2, 0x07);
    if ((inb(COM1 + 2) & 0xc0) == 0xc0)
        tx_burst = 16;
}

/* LSR bit 5 (THRE) means the holding register, or with the FIFO on the
 * whole 16-byte FIFO, is empty; writing more than that loses bytes. Returns
 * how many bytes may now be written. Out of line: it is the rare path. */
static __attribute__((noinline)) unsigned wait_tx_ready(void)
{
    while (!(inb(COM1 + 5) & 0x20)) {
    }
    return tx_burst;
}

/* One port read (a VM exit) per 16 bytes rather than per byte. */
static void puts(const char *s)
{
    unsigned room = tx_room;
    unsigned char c;
    while ((c = (unsigned char)*s++) != 0) {
        if (!room)
            room = wait_tx_ready();
        room--;
        outb(COM1, c);
    }
    tx_room = (uint8_t)room;
}

static void putc(char c)
{
    char buf[2] = {c, 0};
    puts(buf);
}

static void put_range(const char *s, const char *end)
{
    while (s < end)
        putc(*s++);
}

static void put_dec(uint64_t v)
{
    char buf[21];
    int i = 20;
    buf[20] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    puts(buf + i);
}

static void put_hex(uint64_t v)
{
    char buf[17];
    int i = 16;
    buf[16] = 0;
    do {
        buf[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    puts("0x");
    puts(buf + i);
}

/* ------------------------------------------------------- command line --- */

enum timer_kind { TIMER_PIT, TIMER_LAPIC, TIMER_RTC };

static const char *const timer_names[] = {"pit", "lapic", "rtc"};

#define HZ_MAX 10000u
/* 1193182 / 19 = 62799 is the lowest rate whose divisor fits the PIT's
 * 16-bit counter (i8254 data sheet; 0 would mean 65536, i.e. 18.2 Hz). */
#define PIT_HZ_MIN 19u
#define PIT_INPUT_HZ 1193182u
/* The APIC timer's input clock before the divider. Not discoverable: KVM's
 * in-kernel LAPIC counts in nanoseconds (APIC_BUS_CYCLE_NS = 1 by default)
 * and so does QEMU's TCG APIC, i.e. 1 GHz. Other VMMs may differ. */
#define LAPIC_TIMER_HZ 1000000000u

struct config {
    enum timer_kind timer;
    uint32_t hz;
    uint64_t ticks;
    int fault;
    int unemulatable;
    int show_cpuid;
};

/* Blanks and control characters separate words, as isspace() does for
 * Linux's next_arg(); NUL ends the line and is a separator too. */
static int is_sep(char c)
{
    return (unsigned char)c <= ' ';
}

static const char *word_end(const char *s)
{
    while (!is_sep(*s))
        s++;
    return s;
}

/* If s starts with key, the rest of the word after it; else 0. A separator
 * never matches a key character, so this cannot run past the word. */
static const char *after_key(const char *s, const char *key)
{
    for (; *key; s++, key++) {
        if (*s != *key)
            return 0;
    }
    return s;
}

/* The word at s is exactly `literal`. */
static int word_is(const char *s, const char *literal)
{
    const char *rest = after_key(s, literal);
    return rest && is_sep(*rest);
}

/* A word of decimal digits only, 1..18 of them (so no u64 overflow), value
 * <= max. */
static int parse_number(const char *s, uint64_t max, uint64_t *out)
{
    const char *start = s;
    uint64_t v = 0;
    for (; !is_sep(*s); s++) {
        if (*s < '0' || *s > '9' || s - start >= 18)
            return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (s == start || v > max)
        return 0;
    *out = v;
    return 1;
}

static noreturn void reject(const char *word, const char *why)
{
    puts("minivmm-guest: error: ");
    put_range(word, word_end(word));
    puts(": ");
    puts(why);
    puts("\n");
    debug_exit(EXIT_BAD_CMDLINE);
}

/* Linux-style: words separated by blanks; words we do not know are somebody
 * else's (console=, earlyprintk=, ...) and are skipped. Later words win.
 * Keys are matched in place, so a known word is read once (the line is
 * ~30 bytes but every instruction is emulated). */
static void parse_cmdline(const char *p, struct config *cfg)
{
    for (;;) {
        while (*p && is_sep(*p))
            p++;
        if (!*p)
            return;
        const char *word = p;
        const char *v;
        uint64_t n = 0;
        if ((v = after_key(word, "timer="))) {
            if (word_is(v, "pit"))
                cfg->timer = TIMER_PIT;
            else if (word_is(v, "lapic"))
                cfg->timer = TIMER_LAPIC;
            else if (word_is(v, "rtc"))
                cfg->timer = TIMER_RTC;
            else
                reject(word, "timer must be pit, lapic or rtc");
        } else if ((v = after_key(word, "hz="))) {
            if (!parse_number(v, HZ_MAX, &n) || n == 0)
                reject(word, "hz must be a number in 1..10000");
            cfg->hz = (uint32_t)n;
        } else if ((v = after_key(word, "ticks="))) {
            if (!parse_number(v, UINT64_MAX, &n))
                reject(word, "ticks must be a number of up to 18 digits (0 = run forever)");
            cfg->ticks = n;
        } else if (word_is(word, "fault")) {
            cfg->fault = 1;
        } else if (word_is(word, "unemulatable")) {
            cfg->unemulatable = 1;
        } else if (word_is(word, "cpuid")) {
            cfg->show_cpuid = 1;
        }
        p = word_end(v ? v : word);
    }
}

/* Checks that need more than one word. */
static void check_config(const struct config *cfg)
{
    const char *why = 0;
    if (cfg->timer == TIMER_PIT && cfg->hz < PIT_HZ_MIN)
        why = "timer=pit needs hz >= 19 (16-bit PIT divisor)";
    if (cfg->timer == TIMER_RTC &&
        (cfg->hz < 2 || cfg->hz > 8192 || (cfg->hz & (cfg->hz - 1)) != 0))
        why = "timer=rtc needs hz a power of two in 2..8192";
    if (why) {
        puts("minivmm-guest: error: hz=");
        put_dec(cfg->hz);
        puts(" timer=");
        puts(timer_names[cfg->timer]);
        puts(": ");
        puts(why);
        puts("\n");
        debug_exit(EXIT_BAD_CMDLINE);
    }
}

/* -------------------------------------------------------------- timers --- */

/* 8259A data sheet, "Initialization Command Words": ICW1 = edge triggered,
 * cascaded, ICW4 follows; ICW2 = vector base; ICW3 = the slave hangs on
 * master IRQ2; ICW4 = 8086 mode, normal (not automatic) EOI. Then OCW1, the
 * masks (bit set = masked). Re-initialising also drops whatever the firmware
 * left pending or in service. */
static void pic_init(uint8_t master_mask, uint8_t slave_mask)
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

/* i8254 channel 0, mode 2 (rate generator): one IRQ0 edge per `divisor`
 * input clocks. Control word 0x34 = channel 0, lobyte/hibyte, mode 2,
 * binary (i8254 data sheet, "Control Word Format"). PIC IRQ0 reaches the
 * CPU through LAPIC LINT0 in ExtINT mode, which both KVM (quirk
 * LINT0_REENABLED) and QEMU set up at reset for the boot CPU. */
static void start_pit(uint32_t hz)
{
    uint32_t divisor = (PIT_INPUT_HZ + hz / 2) / hz;
    pic_init(0xfe, 0xff);
    outb(PIT_CMD, 0x34);
    outb(PIT_CH0, (uint8_t)divisor);
    outb(PIT_CH0, (uint8_t)(divisor >> 8));
}

/* Local APIC timer, periodic (Intel SDM vol. 3A, "APIC Timer"). The PICs are
 * remapped and fully masked so none of their IRQs lands on an exception
 * vector. Divide by 1 (DCR = 0xb): the count for 1 Hz, 1e9, still fits
 * the 32-bit initial-count register. KVM raises periods below
 * min_timer_period_us (200 us by default), so hz > 5000 runs at 5000. */
static void start_lapic(uint32_t hz)
{
    pic_init(0xff, 0xff);
    lapic_write(LAPIC_SVR, 0x100 | VEC_LAPIC_SPURIOUS);   /* software enable */
    lapic_write(LAPIC_TPR, 0);                            /* accept all classes */
    lapic_write(LAPIC_TIMER_DCR, 0xb);
    lapic_write(LAPIC_LVT_TIMER, (1u << 17) | VEC_LAPIC_TIMER);  /* periodic */
    lapic_write(LAPIC_TIMER_ICR, (LAPIC_TIMER_HZ + hz / 2) / hz);  /* starts it */
}

/* MC146818 periodic interrupt (data sheet, "Register A" / "Register B"):
 * rate select r gives 32768 >> (r - 1) Hz, so r = 16 - log2(hz) for
 * hz = 2 (r = 15) .. 8192 (r = 3); r = 1, 2 are special on real parts and
 * never chosen. Divider bits 010 = the 32.768 kHz time base. */
static void start_rtc(uint32_t hz)
{
    uint8_t log2 = 0;
    while ((1u << log2) < hz)
        log2++;
    pic_init(0xfb, 0xfe);                       /* master: IRQ2 cascade; slave: IRQ8 */
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

/* ---------------------------------------------------------------- main --- */

/* Sleep until tick_count >= target. cli, because a tick between the test
 * and the hlt would otherwise sleep a full extra period; sti;hlt does not
 * open that window, as sti enables interrupts only after the next
 * instruction (SDM vol. 2B, STI). ~7 instructions per tick. */
static void wait_for_tick(uint64_t target)
{
    for (;;) {
        __asm__ volatile("cli" ::: "memory");
        if (tick_count >= target)
            break;
        __asm__ volatile("sti; hlt" ::: "memory");
    }
    __asm__ volatile("sti" ::: "memory");
}

noreturn void kmain(const uint8_t *boot_params)
{
    struct config cfg = {TIMER_PIT, 250, 0, 0};
    uint32_t cmdline = *(const volatile uint32_t *)(boot_params + BP_CMD_LINE_PTR);

    serial_init();
    if (cmdline)
        parse_cmdline((const char *)(uintptr_t)cmdline, &cfg);
    check_config(&cfg);

    puts("minivmm-guest: timer=");
    puts(timer_names[cfg.timer]);
    puts(" hz=");
    put_dec(cfg.hz);
    puts(" ticks=");
    put_dec(cfg.ticks);
    puts("\n");

    if (cfg.show_cpuid) {
        /* What the VMM's CPUID policy exposes, for its tests. */
        uint32_t a = 1, b, c = 0, d;
        __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
        puts("cpuid1.ecx=");
        put_hex(c);
        puts(" cpuid1.ebx=");
        put_hex(b);
        puts("\n");
    }
    if (cfg.fault)
        __asm__ volatile("ud2");    /* exercises the exception path */
    /* int3 in long mode is one of the instructions this host's KVM cannot emulate: it
     * exercises the VMM's "KVM internal error" report. On a host that can run it, the
     * breakpoint exception is reported like any other (exit value 0x7f). */
    if (cfg.unemulatable)
        __asm__ volatile("int3");

    if (cfg.timer == TIMER_PIT)
        start_pit(cfg.hz);
    else if (cfg.timer == TIMER_LAPIC)
        start_lapic(cfg.hz);
    else
        start_rtc(cfg.hz);

    /* One line per second of ticks (every hz-th tick), then "done N" at
     * tick N. Targets, not the counter, are printed, so the output does
     * not depend on how late a wakeup is. */
    uint64_t next_report = cfg.hz;
    for (;;) {
        uint64_t target = next_report;
        if (cfg.ticks && cfg.ticks < target)
            target = cfg.ticks;
        wait_for_tick(target);
        if (target == next_report) {
            puts("tick ");
            put_dec(next_report);
            puts("\n");
            next_report += cfg.hz;
        }
        if (target == cfg.ticks) {
            puts("done ");
            put_dec(cfg.ticks);
            puts("\n");
            debug_exit(EXIT_OK);
        }
    }
}

noreturn void exception_report(uint64_t vector, uint64_t error_code, uint64_t rip)
{
    puts("exception ");
    put_dec(vector);
    puts(" err=");
    put_hex(error_code);
    puts(" rip=");
    put_hex(rip);
    puts("\n");
    debug_exit(EXIT_EXCEPTION);
}
