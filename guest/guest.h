/*
 * guest.h - what the guest kernel's C files share: port and MMIO access,
 * the debug exit, the symbols boot.S defines or calls, and each file's entry
 * points. One header rather than one per file: the kernel is small and every
 * file needs the I/O helpers. The helpers are static inline so that each use
 * stays the single instruction it was when everything was in kernel.c.
 *
 * Nothing here may define data: each C file is its own object now, and a
 * variable lives in exactly one of them (initialised: guest.ld rejects .bss).
 */
#ifndef MINIVMM_GUEST_GUEST_H
#define MINIVMM_GUEST_GUEST_H

#include <stdint.h>

#include "layout.h"

#define noreturn __attribute__((noreturn))

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

/* ------------------------------------------------------------- boot.S --- */

extern volatile uint64_t tick_count;   /* the tick handlers count it */
extern volatile uint64_t net_irqs;     /* isr_net counts the NIC's interrupts */

noreturn void halt_forever(void);
/* Called by boot.S: the 64-bit entry, and the CPU exception stubs. */
noreturn void kmain(const uint8_t *boot_params);
noreturn void exception_report(uint64_t vector, uint64_t error_code, uint64_t rip);

/* isa-debug-exit (QEMU) / minivmm's port 0xf4: the VMM exits with status
 * (value << 1) | 1. Without such a device the write is ignored; stop then. */
static inline noreturn void debug_exit(uint8_t value)
{
    outb(DEBUG_EXIT_PORT, value);
    halt_forever();
}

/* ------------------------------------------------------------- acpi.c --- */

uint32_t pm_timer_read(void);          /* the PM timer's 24-bit count */
noreturn void acpi_poweroff(void);     /* S5; exits EXIT_S5_UNHEARD if nothing takes it */
/* S3 and back: 1 woke, 0 the VMM ignored SLP_EN, -1 no FACS. */
int acpi_s3(int rtc_wake);

/* ----------------------------------------------------------- serial.c --- */

void serial_init(void);
/* Output goes to COM1, or to virtio-console once that is up. No libc here:
 * puts() writes the string as it is, without adding a newline. */
void puts(const char *s);
void put_range(const char *s, const char *end);
void put_dec(uint64_t v);
void put_hex(uint64_t v);

/* ------------------------------------------ pic.c, pit.c, lapic.c, rtc.c --- */

/* 1193182 / 19 = 62799 is the lowest rate whose divisor fits the PIT's
 * 16-bit counter (i8254 data sheet; 0 would mean 65536, i.e. 18.2 Hz). */
#define PIT_HZ_MIN 19u

void pic_init(uint8_t master_mask, uint8_t slave_mask);
void start_pit(uint32_t hz);
void start_pit_via_ioapic(uint32_t hz);
void start_lapic(uint32_t hz);
/* LINT0 in ExtINT mode, for the timers whose ticks come through the 8259. */
void lapic_virtual_wire(void);
void start_rtc(uint32_t hz);
void rtc_show(void);

/* ----------------------------------------------------------- timing.c --- */

/* stamps: 1 if kvmclock is there to stamp ticks with (then call stamps_tick
 * for every wakeup and stamps_report at the end). */
int stamps_start(uint32_t hz);
void stamps_tick(uint64_t new_ticks);
void stamps_report(void);

/* ---------------------------------------------- virtio*.c, virtio.h --- */

/* The value of a virtio_mmio.device= word (SIZE@ADDR:IRQ[:ID]): the window
 * is where virtio_find looks from then on. Returns 0, or why the word was
 * ignored. */
const char *virtio_mmio_word(const char *value);
extern int vcon_active;   /* console=virtio is up: output goes there */
void vcon_puts(const char *s);
void virtio_console_start(void);
void blk_check(uint64_t request_sectors);
/* net=echo (virtio_net.c): bring the NIC up with address ip (network order)
 * and print its MAC and address; net_pending says whether net_poll has
 * work (cheap: three memory reads), net_poll answers what arrived,
 * net_report prints the counts. */
void net_start(const uint8_t ip[4]);
int net_pending(void);
void net_poll(void);
void net_report(void);

#endif
