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

static int vcon_active = 0;   /* console=virtio is up: output goes there */
static void vcon_puts(const char *s);

/* One port read (a VM exit) per 16 bytes rather than per byte. */
static void puts(const char *s)
{
    if (vcon_active) {
        vcon_puts(s);
        return;
    }
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
    int blk_check;
    int virtio_console;
    int pit_via_ioapic;             /* irq=ioapic: IRQ0 through the I/O APIC, PICs masked */
    uint64_t blk_request_sectors;   /* blkreq=N: sectors per read request of blk=check */
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
        } else if (word_is(word, "blk=check")) {
            cfg->blk_check = 1;
        } else if (word_is(word, "console=virtio")) {
            cfg->virtio_console = 1;
        } else if (word_is(word, "irq=ioapic")) {
            cfg->pit_via_ioapic = 1;
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

/* The same PIT ticks, the way an APIC-based OS takes them: both PICs masked, IRQ0 through
 * the I/O APIC's pin 0 (minivmm's MADT has no interrupt source override, so ISA IRQ0 is
 * GSI 0), edge-triggered, fixed delivery to the boot CPU. The vector is the LAPIC timer's,
 * whose handler ends with the LAPIC EOI that an I/O APIC interrupt needs; the LAPIC timer
 * itself stays off. This is the path on which KVM must report the guest's EOI for an
 * edge-triggered pin, which minivmm's PIT counts to find merged ticks. */
static void start_pit_via_ioapic(uint32_t hz)
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

/* ------------------------------------------------------------- virtio --- */

/* A polling virtio-mmio driver (virtio 1.2, 4.2.2 and 2.7): no interrupts,
 * one request in flight, queues of 4 entries. Devices are probed at the
 * fixed windows minivmm uses (layout.h), not parsed from the command line. */

#define VIRTIO_MAGIC        0x74726976
#define VR_MAGIC            0x000
#define VR_VERSION          0x004
#define VR_DEVICE_ID        0x008
#define VR_DEVICE_FEATURES  0x010
#define VR_DEVICE_FSEL      0x014
#define VR_DRIVER_FEATURES  0x020
#define VR_DRIVER_FSEL      0x024
#define VR_QUEUE_SEL        0x030
#define VR_QUEUE_NUM_MAX    0x034
#define VR_QUEUE_NUM        0x038
#define VR_QUEUE_READY      0x044
#define VR_QUEUE_NOTIFY     0x050
#define VR_STATUS           0x070
#define VR_QUEUE_DESC       0x080
#define VR_QUEUE_DRIVER     0x090
#define VR_QUEUE_DEVICE     0x0a0
#define VR_CONFIG           0x100
#define VQ_SIZE             4
#define VQ_AVAIL_OFF        0x100
#define VQ_USED_OFF         0x200
#define VDESC_NEXT          1
#define VDESC_WRITE         2

struct vdesc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
};

struct vq {
    uintptr_t regs;
    uint32_t index;
    uintptr_t base;
    uint16_t next;   /* avail idx we publish next; used idx we wait for */
};

static inline void barrier(void)
{
    __asm__ volatile("" ::: "memory");
}

static inline uint32_t vread(uintptr_t regs, uint32_t off)
{
    return *(volatile uint32_t *)(regs + off);
}

static inline void vwrite(uintptr_t regs, uint32_t off, uint32_t v)
{
    *(volatile uint32_t *)(regs + off) = v;
}

static uintptr_t virtio_find(uint32_t device_id)
{
    for (uint32_t i = 0; i < VIRTIO_MMIO_SLOTS; i++) {
        uintptr_t r = VIRTIO_MMIO_BASE + i * VIRTIO_MMIO_STRIDE;
        if (vread(r, VR_MAGIC) == VIRTIO_MAGIC && vread(r, VR_VERSION) == 2 &&
            vread(r, VR_DEVICE_ID) == device_id)
            return r;
    }
    return 0;
}

/* 3.1.1: reset, ACKNOWLEDGE|DRIVER, accept VERSION_1 and, of the low word,
 * only `want` where offered (blk: FLUSH, bit 9, for the flush it sends),
 * FEATURES_OK, queue `q`, DRIVER_OK. Returns 0 if the device refused. */
static int virtio_start(uintptr_t r, struct vq *vq, uint32_t q, uintptr_t base,
                        uint32_t want)
{
    vwrite(r, VR_STATUS, 0);
    vwrite(r, VR_STATUS, 1);
    vwrite(r, VR_STATUS, 3);
    vwrite(r, VR_DEVICE_FSEL, 1);
    if (!(vread(r, VR_DEVICE_FEATURES) & 1))
        return 0;
    vwrite(r, VR_DEVICE_FSEL, 0);
    uint32_t low = vread(r, VR_DEVICE_FEATURES) & want;
    vwrite(r, VR_DRIVER_FSEL, 0);
    vwrite(r, VR_DRIVER_FEATURES, low);
    vwrite(r, VR_DRIVER_FSEL, 1);
    vwrite(r, VR_DRIVER_FEATURES, 1);
    vwrite(r, VR_STATUS, 0xb);
    if (!(vread(r, VR_STATUS) & 8))
        return 0;
    vwrite(r, VR_QUEUE_SEL, q);
    if (vread(r, VR_QUEUE_NUM_MAX) < VQ_SIZE)
        return 0;
    /* The rings start empty: avail flags/idx and used idx are ours to clear. */
    *(volatile uint32_t *)(base + VQ_AVAIL_OFF) = 0;
    *(volatile uint32_t *)(base + VQ_USED_OFF) = 0;
    vwrite(r, VR_QUEUE_NUM, VQ_SIZE);
    vwrite(r, VR_QUEUE_DESC, (uint32_t)base);
    vwrite(r, VR_QUEUE_DESC + 4, 0);
    vwrite(r, VR_QUEUE_DRIVER, (uint32_t)(base + VQ_AVAIL_OFF));
    vwrite(r, VR_QUEUE_DRIVER + 4, 0);
    vwrite(r, VR_QUEUE_DEVICE, (uint32_t)(base + VQ_USED_OFF));
    vwrite(r, VR_QUEUE_DEVICE + 4, 0);
    vwrite(r, VR_QUEUE_READY, 1);
    vwrite(r, VR_STATUS, 0xf);
    if (vread(r, VR_STATUS) & 0x40)
        return 0;
    vq->regs = r;
    vq->index = q;
    vq->base = base;
    vq->next = 0;
    return 1;
}

/* Publishes the chain at descriptor 0, notifies and polls the used ring
 * until the device returns it. */
static void vq_run(struct vq *vq)
{
    volatile uint16_t *avail = (volatile uint16_t *)(vq->base + VQ_AVAIL_OFF);
    volatile uint16_t *used = (volatile uint16_t *)(vq->base + VQ_USED_OFF);
    avail[2 + vq->next % VQ_SIZE] = 0;
    barrier();
    vq->next++;
    avail[1] = vq->next;
    barrier();
    vwrite(vq->regs, VR_QUEUE_NOTIFY, vq->index);
    while (used[1] != vq->next)
        __asm__ volatile("pause" ::: "memory");
    barrier();
}

static struct vq vcon = {0, 0, 0, 0};

static void vcon_puts(const char *s)
{
    struct vdesc *d = (struct vdesc *)VQ_CON_BASE;
    char *buf = (char *)CON_BUF_ADDR;
    uint32_t n = 0;
    while (s[n] && n < CON_BUF_SIZE) {
        buf[n] = s[n];
        n++;
    }
    d[0].addr = CON_BUF_ADDR;
    d[0].len = n;
    d[0].flags = 0;
    d[0].next = 0;
    vq_run(&vcon);
    if (s[n])
        vcon_puts(s + n);
}

static void virtio_console_start(void)
{
    uintptr_t r = virtio_find(3);
    if (!r || !virtio_start(r, &vcon, 1, VQ_CON_BASE, 0)) {
        puts("minivmm-guest: error: console=virtio: no virtio-console\n");
        debug_exit(EXIT_NO_DEVICE);
    }
    vcon_active = 1;
}

static struct vq vblk = {0, 0, 0, 0};

/* One virtio-blk request: header, data (if any), status. Returns the
 * status byte. */
static uint8_t blk_request(uint32_t type, uint64_t sector, uintptr_t data, uint32_t len)
{
    struct vdesc *d = (struct vdesc *)VQ_BLK_BASE;
    volatile uint32_t *hdr = (volatile uint32_t *)BLK_HDR_ADDR;
    volatile uint8_t *status = (volatile uint8_t *)BLK_STATUS_ADDR;
    hdr[0] = type;
    hdr[1] = 0;
    *(volatile uint64_t *)(BLK_HDR_ADDR + 8) = sector;
    *status = 0xff;
    uint16_t i = 0;
    d[i].addr = BLK_HDR_ADDR;
    d[i].len = 16;
    d[i].flags = VDESC_NEXT;
    d[i].next = 1;
    i++;
    if (len) {
        d[i].addr = data;
        d[i].len = len;
        d[i].flags = (uint16_t)((type == 0 ? VDESC_WRITE : 0) | VDESC_NEXT);
        d[i].next = 2;
        i++;
    }
    d[i].addr = BLK_STATUS_ADDR;
    d[i].len = 1;
    d[i].flags = VDESC_WRITE;
    d[i].next = 0;
    vq_run(&vblk);
    return *status;
}

/* FNV-1a over 64-bit little-endian words: cheap per byte read, and the
 * host recomputes it from the file (tests/integration/virtio_test.cc). */
static uint64_t fnv64_words(uint64_t c, const uint64_t *p, uint64_t words)
{
    const uint64_t prime = 0x100000001b3ull;
    uint64_t i = 0;
    /* Eight words a turn: this host's KVM emulates each guest instruction (about 0.5 us), so
     * the loop's count, compare and branch are paid once per 64 bytes instead of per word.
     * blk=check of a 64 MiB disk took 56 s with the plain loop (6 instructions a word) and
     * takes 24 s with this one (2.6). */
    for (; i + 8 <= words; i += 8) {
        c = (c ^ p[i]) * prime;
        c = (c ^ p[i + 1]) * prime;
        c = (c ^ p[i + 2]) * prime;
        c = (c ^ p[i + 3]) * prime;
        c = (c ^ p[i + 4]) * prime;
        c = (c ^ p[i + 5]) * prime;
        c = (c ^ p[i + 6]) * prime;
        c = (c ^ p[i + 7]) * prime;
    }
    for (; i < words; i++)
        c = (c ^ p[i]) * prime;
    return c;
}

static uint64_t scratch_word(uint64_t j)
{
    return j * 0x9e3779b97f4a7c15ull + 1;
}

/* blk=check: read the whole disk (1 MiB requests, or blkreq=N sectors) into a checksum, then
 * write a pattern over the last 64 sectors, flush, read it back, compare. */
static void blk_check(uint64_t request_sectors)
{
    uintptr_t r = virtio_find(2);
    if (!r || !virtio_start(r, &vblk, 0, VQ_BLK_BASE, 1u << 9)) {
        puts("minivmm-guest: error: blk=check: no virtio-blk\n");
        debug_exit(EXIT_NO_DEVICE);
    }
    uint64_t sectors = (uint64_t)vread(r, VR_CONFIG) | ((uint64_t)vread(r, VR_CONFIG + 4) << 32);
    uint64_t csum = 0xcbf29ce484222325ull;
    for (uint64_t s = 0; s < sectors;) {
        uint64_t n = sectors - s;
        if (n > request_sectors)
            n = request_sectors;
        uint8_t st = blk_request(0, s, BLK_DATA_ADDR, (uint32_t)(n * 512));
        if (st) {
            puts("blk: read failed sector=");
            put_dec(s);
            puts(" status=");
            put_dec(st);
            puts("\n");
            return;
        }
        csum = fnv64_words(csum, (const uint64_t *)BLK_DATA_ADDR, n * 64);
        s += n;
    }
    puts("blk: sectors=");
    put_dec(sectors);
    puts(" checksum=");
    put_hex(csum);
    puts("\n");
    if (sectors < BLK_SCRATCH_SECTORS) {
        puts("blk: disk too small for the scratch range\n");
        return;
    }
    uint64_t first = sectors - BLK_SCRATCH_SECTORS;
    uint64_t words = BLK_SCRATCH_SECTORS * 64;
    uint64_t *out = (uint64_t *)BLK_DATA_ADDR;
    for (uint64_t j = 0; j < words; j++)
        out[j] = scratch_word(j);
    uint8_t st = blk_request(1, first, BLK_DATA_ADDR, BLK_SCRATCH_SECTORS * 512);
    if (st) {
        puts("blk: write status=");
        put_dec(st);
        puts("\n");
        return;
    }
    st = blk_request(4, 0, 0, 0);
    if (st) {
        puts("blk: flush status=");
        put_dec(st);
        puts("\n");
        return;
    }
    st = blk_request(0, first, BLK_CHECK_ADDR, BLK_SCRATCH_SECTORS * 512);
    const uint64_t *back = (const uint64_t *)BLK_CHECK_ADDR;
    uint64_t j = 0;
    while (st == 0 && j < words && back[j] == scratch_word(j))
        j++;
    puts(j == words ? "blk: scratch ok\n" : "blk: scratch mismatch\n");
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
    struct config cfg = {TIMER_PIT, 250, 0, 0, 0, 0, 0, 0, 0, BLK_CHUNK / 512};
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
    if (cfg.blk_check)
        blk_check(cfg.blk_request_sectors);
    if (cfg.fault)
        __asm__ volatile("ud2");    /* exercises the exception path */
    /* int3 in long mode is one of the instructions this host's KVM cannot emulate: it
     * exercises the VMM's "KVM internal error" report. On a host that can run it, the
     * breakpoint exception is reported like any other (exit value 0x7f). */
    if (cfg.unemulatable)
        __asm__ volatile("int3");

    if (cfg.timer == TIMER_PIT && cfg.pit_via_ioapic)
        start_pit_via_ioapic(cfg.hz);
    else if (cfg.timer == TIMER_PIT)
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
