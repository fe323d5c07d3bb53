/*
 * kernel.c - the 64-bit part of the minivmm test guest: the command line,
 * the choice of timer, the idle loop that waits for its ticks, and the
 * report of a CPU exception. Entered from boot.S with our own GDT, IDT, page
 * tables and stack in place, interrupts off. The drivers it calls are one
 * file each (guest.h lists them): serial.c, pic.c, pit.c, lapic.c, rtc.c,
 * timing.c, and the virtio drivers (virtio*.c).
 *
 * Every instruction is emulated by the host's KVM (~0.5 us each), so: no
 * output per tick, no clearing of memory, no loops longer than the command
 * line, and only general-purpose registers (-mgeneral-regs-only).
 */
#include "guest.h"

/* ------------------------------------------------------- command line --- */

enum timer_kind { TIMER_PIT, TIMER_LAPIC, TIMER_RTC };

static const char *const timer_names[] = {"pit", "lapic", "rtc"};

#define HZ_MAX 10000u

struct config {
    enum timer_kind timer;
    uint32_t hz;
    uint64_t ticks;
    int fault;
    int unemulatable;
    int show_cpuid;
    int blk_check;
    int blk_again;                  /* blk=twice: the check again at tick N, before "done N" */
    int rtc_show;                   /* rtc=show: the CMOS time after the banner and at tick N */
    uint64_t fill_mib;              /* fill=N: N MiB from FILL_BASE written at boot, read at N */
    uint64_t dirty_kib;             /* dirty=KIB: a byte per page over KIB KiB, every tick */
    int virtio_console;
    int pit_via_ioapic;             /* irq=ioapic: IRQ0 through the I/O APIC, PICs masked */
    uint64_t blk_request_sectors;   /* blkreq=N: sectors per read request of blk=check */
    int stamps;                     /* stamps: time every tick (kvmclock), report at the end */
    int busy;                       /* busy: spin between ticks instead of halting */
    int panic;                      /* panic: say so through pvpanic after the banner */
    int net_echo;                   /* net=echo: answer ARP, ping and UDP port 7 */
    uint8_t ip[4];                  /* ip=A.B.C.D: net=echo's address */
    int pmtimer;                    /* pmtimer: the ACPI PM timer's count per second of ticks */
    int s3;                         /* s3 (1) / s3=rtc (2): suspend at the first report, resume */
    int poweroff;                   /* poweroff: ACPI S5 after the banner */
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

/* A dotted quad A.B.C.D, each part 1..3 digits of 0..255, ending the word. */
static int parse_ip(const char *s, uint8_t out[4])
{
    for (int i = 0; i < 4; i++) {
        const char *start = s;
        uint32_t v = 0;
        while (*s >= '0' && *s <= '9' && s - start < 3)
            v = v * 10 + (uint32_t)(*s++ - '0');
        if (s == start || v > 255)
            return 0;
        out[i] = (uint8_t)v;
        if (i < 3 && *s++ != '.')
            return 0;
    }
    return is_sep(*s);
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
        } else if (word_is(word, "blk=check")) {
            cfg->blk_check = 1;
        } else if ((v = after_key(word, "fill="))) {
            if (!parse_number(v, FILL_MAX_MIB, &n) || n == 0)
                reject(word, "fill must be a number of MiB in 1..512");
            cfg->fill_mib = n;
        } else if ((v = after_key(word, "dirty="))) {
            if (!parse_number(v, DIRTY_MAX_KIB, &n) || n < 4 || (n & 3) != 0)
                reject(word, "dirty must be a number of KiB in 4..524288, a multiple of 4");
            cfg->dirty_kib = n;
        } else if (word_is(word, "rtc=show")) {
            cfg->rtc_show = 1;
        } else if (word_is(word, "blk=twice")) {
            cfg->blk_check = 1;
            cfg->blk_again = 1;
        } else if (word_is(word, "console=virtio")) {
            cfg->virtio_console = 1;
        } else if (word_is(word, "irq=ioapic")) {
            cfg->pit_via_ioapic = 1;
        } else if (word_is(word, "stamps")) {
            cfg->stamps = 1;
        } else if (word_is(word, "busy")) {
            cfg->busy = 1;
        } else if (word_is(word, "panic")) {
            cfg->panic = 1;
        } else if (word_is(word, "pmtimer")) {
            cfg->pmtimer = 1;
        } else if (word_is(word, "s3")) {
            cfg->s3 = 1;
        } else if (word_is(word, "s3=rtc")) {
            cfg->s3 = 2;
        } else if (word_is(word, "poweroff")) {
            cfg->poweroff = 1;
        } else if (word_is(word, "net=echo")) {
            cfg->net_echo = 1;
        } else if ((v = after_key(word, "ip="))) {
            if (!parse_ip(v, cfg->ip))
                reject(word, "ip must be an IPv4 address A.B.C.D");
        } else if ((v = after_key(word, "virtio_mmio.device="))) {
            /* Linux's word (the VMM appends one per device): where virtio devices are. A
             * window this guest cannot use is skipped with a note, as Linux would. */
            const char *why = virtio_mmio_word(v);
            if (why) {
                puts("minivmm-guest: ignored ");
                put_range(word, word_end(word));
                puts(": ");
                puts(why);
                puts("\n");
            }
        } else if ((v = after_key(word, "blkreq="))) {
            if (!parse_number(v, BLK_CHUNK / 512, &n) || n == 0)
                reject(word, "blkreq must be a number of sectors in 1..2048");
            cfg->blk_request_sectors = n;
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
    if (cfg->pit_via_ioapic && cfg->timer != TIMER_PIT)
        why = "irq=ioapic routes the PIT's IRQ0 only: it needs timer=pit";
    if (cfg->dirty_kib && cfg->fill_mib)
        why = "dirty= writes over fill='s region: give one of them";
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

/* ---------------------------------------------------------------- main --- */

static noreturn void guest_panic(void);

/* Sleep until tick_count >= target. cli, because a tick between the test
 * and the hlt would otherwise sleep a full extra period; sti;hlt does not
 * open that window, as sti enables interrupts only after the next
 * instruction (SDM vol. 2B, STI). ~7 instructions per tick. With `busy`
 * the vCPU never halts: it computes (spins) between ticks, as a guest with
 * work to do keeps a host CPU busy. */
static void wait_for_tick(uint64_t target, int busy)
{
    if (busy) {
        __asm__ volatile("sti" ::: "memory");
        while (tick_count < target)
            __asm__ volatile("pause" ::: "memory");
        return;
    }
    for (;;) {
        __asm__ volatile("cli" ::: "memory");
        if (tick_count >= target)
            break;
        __asm__ volatile("sti; hlt" ::: "memory");
    }
    __asm__ volatile("sti" ::: "memory");
}

/* wait_for_tick for net=echo: whatever woke us (the NIC's interrupt, or the
 * tick when it has none) may have left frames; answer them with interrupts
 * on, then wait again. A loop of its own, so that without net=echo a tick
 * costs what it did. */
static void wait_for_tick_or_frame(uint64_t target, int busy)
{
    for (;;) {
        __asm__ volatile("cli" ::: "memory");
        if (tick_count >= target)
            break;
        if (net_pending()) {
            __asm__ volatile("sti" ::: "memory");
            net_poll();
            continue;
        }
        if (busy)
            __asm__ volatile("sti; pause" ::: "memory");
        else
            __asm__ volatile("sti; hlt" ::: "memory");
    }
    __asm__ volatile("sti" ::: "memory");
}

/* The timer's own file programs it and the PICs; its ticks then arrive at
 * the handler boot.S has for it. */
static void start_timer(const struct config *cfg)
{
    if (cfg->timer == TIMER_PIT && cfg->pit_via_ioapic)
        start_pit_via_ioapic(cfg->hz);
    else if (cfg->timer == TIMER_PIT)
        start_pit(cfg->hz);
    else if (cfg->timer == TIMER_LAPIC)
        start_lapic(cfg->hz);
    else
        start_rtc(cfg->hz);
}

/* fill=N: memory the guest has written, for the snapshot tests' clones. One `rep stosq` writes
 * it (KVM's emulator runs the repeats in one go, not as N/8 instructions); the check with every
 * `tick K` line reads one word of each page, so every page is in the guest's use (a restored
 * clone maps each from the snapshot then) for 2 loads per 4 KiB. */
static void fill_memory(uint64_t mib)
{
    uint64_t words = mib << 17, *dst = (uint64_t *)FILL_BASE;
    __asm__ volatile("rep stosq" : "+D"(dst), "+c"(words) : "a"(FILL_PATTERN) : "memory");
}

static void fill_check(uint64_t mib)
{
    const volatile uint64_t *p = (const volatile uint64_t *)FILL_BASE;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < (mib << 17); i += 512)
        bad += p[i] != FILL_PATTERN;
    puts(bad ? "fill: FAIL " : "fill: ok ");
    put_dec(mib);
    puts(" MiB\n");
}

/* dirty=KIB: one byte of each 4 KiB page over KIB KiB from DIRTY_BASE, written every tick, so a
 * VMM that resets the guest to a snapshot has that many pages to drop each time (the benchmark of
 * scripts/bench_snapshot.py). One store per page, not a fill: ~3 instructions per page. Then
 * the pass is counted at DIRTY_PASSES, so the host can tell when the pages are written. */
static void dirty_memory(uint64_t kib, uint64_t tick)
{
    volatile uint8_t *p = (volatile uint8_t *)DIRTY_BASE;
    volatile uint8_t *end = p + (kib << 10);
    for (; p < end; p += 4096)
        *p = (uint8_t)tick;
    /* Read from memory, not kept: a VMM's reset may have set it back or (a mailbox) not. */
    *(volatile uint64_t *)DIRTY_PASSES += 1;
}

noreturn void kmain(const uint8_t *boot_params)
{
    /* Designated: a field added to struct config must not shift the defaults of the others. */
    struct config cfg = {.timer = TIMER_PIT,
                         .hz = 250,
                         .blk_request_sectors = BLK_CHUNK / 512,
                         .ip = {10, 0, 2, 15}};
    uint32_t cmdline = *(const volatile uint32_t *)(boot_params + BP_CMD_LINE_PTR);

    serial_init();
    if (cmdline)
        parse_cmdline((const char *)(uintptr_t)cmdline, &cfg);
    check_config(&cfg);
    if (cfg.virtio_console)
        virtio_console_start();

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
    if (cfg.rtc_show)
        rtc_show();
    if (cfg.fill_mib)
        fill_memory(cfg.fill_mib);
    if (cfg.blk_check)
        blk_check(cfg.blk_request_sectors);
    if (cfg.fault)
        __asm__ volatile("ud2");    /* exercises the exception path */
    /* int3 in long mode is one of the instructions this host's KVM cannot emulate: it
     * exercises the VMM's "KVM internal error" report. On a host that can run it, the
     * breakpoint exception is reported like any other (exit value 0x7f). */
    if (cfg.unemulatable)
        __asm__ volatile("int3");
    if (cfg.panic)
        guest_panic();
    if (cfg.poweroff)
        acpi_poweroff();
    if (cfg.net_echo)
        net_start(cfg.ip);

    /* Stamping starts just before the timer is programmed: its first edge is due one period
     * after, so the span to tick N is N periods on time. */
    int stamping = cfg.stamps && stamps_start(cfg.hz);
    start_timer(&cfg);
    if (cfg.stamps && !stamping)
        puts("stamps: unavailable (no kvmclock)\n");

    /* One line per second of ticks (every hz-th tick), then "done N" at
     * tick N. Targets, not the counter, are printed, so the output does
     * not depend on how late a wakeup is. Stamping wakes for every tick. */
    uint64_t next_report = cfg.hz;
    uint64_t seen = 0;
    uint32_t pm_last = cfg.pmtimer ? pm_timer_read() : 0;
    for (;;) {
        uint64_t goal = next_report;
        if (cfg.ticks && cfg.ticks < goal)
            goal = cfg.ticks;
        /* Stamping and dirty= wake for every tick. */
        int per_tick = stamping || cfg.dirty_kib;
        uint64_t target = per_tick ? seen + 1 : goal;
        if (cfg.net_echo)
            wait_for_tick_or_frame(target, cfg.busy);
        else
            wait_for_tick(target, cfg.busy);
        if (per_tick) {
            uint64_t now = tick_count;
            if (stamping)
                stamps_tick(now - seen);
            if (cfg.dirty_kib)
                dirty_memory(cfg.dirty_kib, now);
            seen = now;
            if (now < goal)
                continue;
        }
        if (goal == next_report) {
            puts("tick ");
            put_dec(next_report);
            puts("\n");
            /* pmtimer: the count over the second of ticks since the last report (24 bits
             * wrap in 4.7 s, so the masked difference is exact). */
            if (cfg.pmtimer) {
                uint32_t now = pm_timer_read();
                puts("pmtimer: ");
                put_dec((now - pm_last) & 0xffffff);
                puts(" per second\n");
                pm_last = now;
            }
            /* s3: asleep after the first second, ticks go on where they stopped. */
            if (cfg.s3 && next_report == cfg.hz) {
                puts("s3: sleeping\n");
                int r = acpi_s3(cfg.s3 == 2);
                puts(r > 0 ? "s3: woke\n" : r == 0 ? "s3: not taken\n" : "s3: no FACS\n");
                if (cfg.pmtimer)
                    pm_last = pm_timer_read();
            }
            next_report += cfg.hz;
            /* Once a second, so the pages are in use while the guest runs (a clone's are
             * mapped from its snapshot then), not only at its last tick. */
            if (cfg.fill_mib)
                fill_check(cfg.fill_mib);
        }
        if (goal == cfg.ticks) {
            if (stamping)
                stamps_report();
            if (cfg.net_echo)
                net_report();
            if (cfg.blk_again)
                blk_check(cfg.blk_request_sectors);
            if (cfg.rtc_show)
                rtc_show();
            puts("done ");
            put_dec(cfg.ticks);
            puts("\n");
            debug_exit(EXIT_OK);
        }
    }
}

/* A kernel panic, the way Linux reports one to a VMM: write "panicked" to
 * QEMU's pvpanic port. A VMM with the device ends the run there; without
 * one the write goes nowhere, and the guest says so and exits. */
static noreturn void guest_panic(void)
{
    puts("minivmm-guest: panic\n");
    outb(PVPANIC_PORT, PVPANIC_PANICKED);
    puts("minivmm-guest: nothing took the pvpanic write\n");
    debug_exit(EXIT_PANIC_UNHEARD);
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
