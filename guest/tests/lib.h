/*
 * lib.h - what every 32-bit test guest needs: port and MMIO access, COM1 output, the
 * multiboot command line, the local APIC timer as a bounded wait, fw_cfg and debug-exit.
 */
#ifndef MINIVMM_TEST_GUEST_LIB_H
#define MINIVMM_TEST_GUEST_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"

#define noreturn __attribute__((noreturn))

static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outw(uint16_t port, uint16_t v) { __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}
static inline uint32_t mmio_read32(uint32_t addr) { return *(volatile uint32_t *)addr; }
static inline void mmio_write32(uint32_t addr, uint32_t v) { *(volatile uint32_t *)addr = v; }
static inline void cpu_relax(void) { __asm__ volatile("pause" ::: "memory"); }

/* Multiboot v1 information (Multiboot 0.6.96, 3.3), the part we read. */
struct mb_info {
    uint32_t flags;
    uint32_t mem_lower, mem_upper;
    uint32_t boot_device;
    uint32_t cmdline;
    uint32_t mods_count, mods_addr;
    uint32_t syms[4];
    uint32_t mmap_length, mmap_addr;
};
#define MB_INFO_MEMORY (1u << 0)
#define MB_INFO_CMDLINE (1u << 2)
#define MB_INFO_MMAP (1u << 6)
/* One memory map entry; `size` counts the bytes after itself (normally 20). */
struct mb_mmap_entry {
    uint32_t size;
    uint32_t addr_lo, addr_hi, len_lo, len_hi;
    uint32_t type; /* 1 = usable RAM */
} __attribute__((packed));

void put_char(char c);
void put_str(const char *s);
void put_dec(uint32_t v);
void put_hex(uint32_t v, int digits); /* "0x" and exactly `digits` digits */

noreturn void debug_exit(uint32_t value);
noreturn void halt_forever(void);

/* The command line, or "" without one. Call before touching memory the loader may have
 * used for it (QEMU puts it after the image, minivmm at 0x20000). */
const char *mb_cmdline(uint32_t magic, const struct mb_info *mbi);

/* Looks up word `key=VALUE` in `cmdline`. Returns false when absent; sets *bad (and prints
 * why) when present but not a number. Numbers are decimal or 0x hex, with an optional
 * K/M/G suffix (binary) where `suffix_ok`. */
bool cmdline_number(const char *cmdline, const char *key, bool suffix_ok, uint64_t *out, bool *bad);
/* Looks up `key=WORD`; returns a pointer to WORD (ending at space or NUL) or NULL. */
const char *cmdline_word(const char *cmdline, const char *key);
bool word_is(const char *word, const char *s);

/* Local APIC (xAPIC MMIO). The timer runs one-shot with its LVT masked, as a deadline to
 * poll: no interrupt is ever taken. Assumes the APIC timer's input clock is 1 GHz, as with
 * KVM's in-kernel LAPIC and QEMU's APIC (guest/README.md "Timers"). */
#define LAPIC_ID 0x020
#define LAPIC_SVR 0x0f0
#define LAPIC_TMR 0x180
#define LAPIC_IRR 0x200
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_CUR 0x390
#define LAPIC_TIMER_DIV 0x3e0
static inline uint32_t lapic_read(uint32_t reg) { return mmio_read32(LAPIC_BASE + reg); }
static inline void lapic_write(uint32_t reg, uint32_t v) { mmio_write32(LAPIC_BASE + reg, v); }
void lapic_enable(void);
void deadline_start_ms(uint32_t ms); /* 1..60000 */
bool deadline_passed(void);
void delay_ms(uint32_t ms);

/* fw_cfg through the legacy I/O ports. */
void fw_cfg_select(uint16_t key);
uint8_t fw_cfg_byte(void);
uint64_t fw_cfg_read_le(uint16_t key, int bytes);
bool fw_cfg_present(void); /* the signature key reads "QEMU" */

void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);

#endif
