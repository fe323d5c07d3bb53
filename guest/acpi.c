/*
 * acpi.c - the ACPI PM block at QEMU's PM_IO_BASE (layout.h): the PM timer
 * (pmtimer), soft power-off (poweroff) and suspend to RAM with its resume
 * (s3, s3=rtc). The FACS is found as kvm-unit-tests' lib/acpi.c finds it:
 * RSDP in the BIOS area, its XSDT, the FADT's FIRMWARE_CTRL.
 */
#include "guest.h"

static inline void outw(uint16_t port, uint16_t value)
{
    __asm__ volatile("outw %0, %1" : : "a"(value), "Nd"(port));
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t value;
    __asm__ volatile("inl %1, %0" : "=a"(value) : "Nd"(port));
    return value;
}

uint32_t pm_timer_read(void)
{
    return inl(ACPI_PM_TMR) & 0xffffff;
}

noreturn void acpi_poweroff(void)
{
    puts("acpi: poweroff\n");
    outw(ACPI_PM1A_CNT, ACPI_SLP_TYP_S5 | ACPI_SLP_EN);
    puts("acpi: nothing took the S5 write\n");
    debug_exit(EXIT_S5_UNHEARD);
}

/* The RSDP is 16-byte aligned in 0xe0000-0xfffff ("RSD PTR " as one word). */
static volatile uint8_t *find_facs(void)
{
    for (uint64_t a = 0xe0000; a < 0x100000; a += 16) {
        if (*(volatile uint64_t *)a != 0x2052545020445352ull)
            continue;
        uint64_t xsdt = *(volatile uint64_t *)(a + 24);
        uint32_t len = *(volatile uint32_t *)(xsdt + 4);
        for (uint64_t e = xsdt + 36; e + 8 <= xsdt + len; e += 8) {
            uint64_t table = *(volatile uint64_t *)e;
            if (*(volatile uint32_t *)table == 0x50434146u)   /* "FACP" */
                return (volatile uint8_t *)(uintptr_t)*(volatile uint32_t *)(table + 36);
        }
        return 0;
    }
    return 0;
}

extern const uint8_t s3_tramp[], s3_tramp_end[];
int acpi_s3_sleep(uint16_t pm1a_cnt, uint16_t value);

/* Copies the waking code below 1 MiB, points the FACS at it, and sleeps. With
 * rtc_wake the RTC alarm (every second: all fields don't-care) and RTC_EN wake
 * us, as kvm-unit-tests' s3 does; otherwise the VMM's own wake. */
int acpi_s3(int rtc_wake)
{
    volatile uint8_t *facs = find_facs();
    if (!facs)
        return -1;
    volatile uint8_t *dst = (volatile uint8_t *)S3_TRAMPOLINE;
    for (const uint8_t *p = s3_tramp; p < s3_tramp_end; p++)
        *dst++ = *p;
    *(volatile uint32_t *)(facs + ACPI_FACS_WAKING_VECTOR) = S3_TRAMPOLINE;
    if (rtc_wake) {
        for (uint8_t reg = 1; reg <= 5; reg += 2) {    /* seconds, minutes, hours alarm */
            outb(RTC_INDEX, reg);
            outb(RTC_DATA, 0xc0);
        }
        outb(RTC_INDEX, RTC_REG_B);
        uint8_t b = inb(RTC_DATA);
        outb(RTC_INDEX, RTC_REG_B);
        outb(RTC_DATA, b | 0x20);                      /* AIE */
        outw(ACPI_PM1A_EVT + 2, ACPI_RTC_EN);
    }
    __asm__ volatile("cli" ::: "memory");
    int woke = acpi_s3_sleep(ACPI_PM1A_CNT, ACPI_SLP_TYP_S3 | ACPI_SLP_EN);
    outw(ACPI_PM1A_EVT, 0x8400);                       /* WAK_STS, RTC_STS: write 1 to clear */
    __asm__ volatile("sti" ::: "memory");
    return woke;
}
