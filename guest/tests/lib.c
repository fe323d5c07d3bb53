/*
 * lib.c - the shared part of the 32-bit test guests. Kept small: the host's KVM emulates
 * every guest instruction, so output is short and nothing is cleared or copied in bulk.
 */
#include "lib.h"

/* ------------------------------------------------------------- serial --- */

void put_char(char c)
{
    /* Wait for THRE (LSR bit 5), bounded so a UART that never reports it cannot hang us. */
    for (int i = 0; i < 100000 && !(inb(COM1_PORT + 5) & 0x20); i++)
        cpu_relax();
    outb(COM1_PORT, (uint8_t)c);
}

void put_str(const char *s)
{
    while (*s) {
        if (*s == '\n')
            put_char('\r');
        put_char(*s++);
    }
}

void put_dec(uint32_t v)
{
    char buf[11];
    int n = 0;
    do {
        buf[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        put_char(buf[--n]);
}

void put_hex(uint32_t v, int digits)
{
    put_str("0x");
    for (int i = digits - 1; i >= 0; i--)
        put_char("0123456789abcdef"[(v >> (4 * i)) & 0xf]);
}

/* --------------------------------------------------------------- exit --- */

noreturn void debug_exit(uint32_t value)
{
    outb(DEBUG_EXIT_PORT, (uint8_t)value);
    halt_forever(); /* no isa-debug-exit: stop here */
}

/* ------------------------------------------------------- command line --- */

const char *mb_cmdline(uint32_t magic, const struct mb_info *mbi)
{
    if (magic != MB_BOOT_MAGIC || !(mbi->flags & MB_INFO_CMDLINE) || mbi->cmdline == 0)
        return "";
    return (const char *)mbi->cmdline;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

const char *cmdline_word(const char *cl, const char *key)
{
    for (const char *p = cl; *p;) {
        while (is_space(*p))
            p++;
        const char *k = key, *q = p;
        while (*k && *q == *k) {
            k++;
            q++;
        }
        if (!*k && *q == '=')
            return q + 1;
        while (*p && !is_space(*p))
            p++;
    }
    return NULL;
}

bool word_is(const char *w, const char *s)
{
    while (*s && *w == *s) {
        w++;
        s++;
    }
    return !*s && (*w == 0 || is_space(*w));
}

static int digit_value(char c, unsigned base)
{
    int d = -1;
    if (c >= '0' && c <= '9')
        d = c - '0';
    else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
    return d >= 0 && (unsigned)d < base ? d : -1;
}

bool cmdline_number(const char *cl, const char *key, bool suffix_ok, uint64_t *out, bool *bad)
{
    const char *p = cmdline_word(cl, key);
    if (!p)
        return false;
    unsigned base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    uint64_t v = 0;
    int n = 0;
    for (int d; (d = digit_value(*p, base)) >= 0; p++, n++) {
        if (v >> 56) /* would overflow: far beyond anything we compare with */
            n = -1000;
        v = v * base + (unsigned)d;
    }
    if (suffix_ok && (*p == 'K' || *p == 'k')) { v <<= 10; p++; }
    else if (suffix_ok && (*p == 'M' || *p == 'm')) { v <<= 20; p++; }
    else if (suffix_ok && (*p == 'G' || *p == 'g')) { v <<= 30; p++; }
    if (n <= 0 || !(*p == 0 || is_space(*p))) {
        put_str("error: ");
        put_str(key);
        put_str("= wants a number\n");
        *bad = true;
        return false;
    }
    *out = v;
    return true;
}

/* --------------------------------------------------------------- APIC --- */

void lapic_enable(void)
{
    /* Software-enable (SVR bit 8) with spurious vector 0xff: a disabled APIC accepts no
     * fixed interrupts and forces every LVT entry masked. */
    lapic_write(LAPIC_SVR, 0x1ff);
}

void deadline_start_ms(uint32_t ms)
{
    if (ms == 0)
        ms = 1;
    if (ms > 60000)
        ms = 60000;
    lapic_write(LAPIC_LVT_TIMER, 0x10000 | 0xef); /* masked, one-shot */
    lapic_write(LAPIC_TIMER_DIV, 0x3);            /* divide by 16: 62.5 MHz, 68 s max */
    lapic_write(LAPIC_TIMER_INIT, ms * 62500u);
}

bool deadline_passed(void) { return lapic_read(LAPIC_TIMER_CUR) == 0; }

void delay_ms(uint32_t ms)
{
    deadline_start_ms(ms);
    while (!deadline_passed())
        cpu_relax();
}

/* ------------------------------------------------------------- fw_cfg --- */

void fw_cfg_select(uint16_t key) { outw(FW_CFG_SELECTOR, key); }

uint8_t fw_cfg_byte(void) { return inb(FW_CFG_DATA); }

uint64_t fw_cfg_read_le(uint16_t key, int bytes)
{
    fw_cfg_select(key);
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)fw_cfg_byte() << (8 * i);
    return v;
}

bool fw_cfg_present(void)
{
    return fw_cfg_read_le(0x0000, 4) == 0x554d4551; /* "QEMU" */
}

/* ------------------------------------------------ compiler's helpers --- */

void *memcpy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    while (n--)
        *d++ = *s++;
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    while (n--)
        *d++ = (uint8_t)c;
    return dst;
}
