/*
 * smp.c - starts every application processor with INIT / SIPI / SIPI through the local
 * APIC's ICR (xAPIC MMIO) and collects the initial APIC id each one reports from real mode
 * (smp_trampoline.S). The BSP waits a bounded time (the APIC timer as a deadline) and checks
 * that exactly cpus-1 APs arrived, with distinct ids that are not its own.
 *
 * Command line:
 *   cpus=N        CPUs expected (default: fw_cfg key 0x05); the test fails when fewer arrive
 *   start=each    INIT/SIPI/SIPI to APIC ids 0..N-1 except the BSP's (default)
 *   start=all     the same IPIs broadcast to all-excluding-self
 *   timeout=MS    how long to wait for the APs (default 5000; only a failing run waits it out)
 *   rounds=N      then N rounds, 20 ms apart: the BSP sends each AP an NMI and waits until every
 *                 AP has counted it (smp_trampoline.S), printing "smp: round R" every 50th, then
 *                 "smp: N APs answered R rounds". A guest snapshotted and restored mid-way shows
 *                 that every vCPU carried on.
 */
#include "lib.h"

extern const uint8_t tramp_start[], tramp_end[], tramp_nmi[];

#define ICR_INIT 0x00004500    /* delivery mode INIT, level assert */
#define ICR_STARTUP 0x00004600 /* delivery mode start-up, vector in bits 7:0 */
#define ICR_ALL_BUT_SELF 0x000c0000
#define ICR_PENDING 0x00001000
#define ICR_NMI 0x00004400     /* delivery mode NMI, level assert */

static volatile uint16_t *const ap_rounds = (volatile uint16_t *)TRAMP_ROUNDS;

static volatile uint16_t *const ap_count = (volatile uint16_t *)TRAMP_COUNT;
static volatile uint8_t *const ap_table = (volatile uint8_t *)TRAMP_TABLE;

static bool send_ipi(uint32_t dest, uint32_t icr)
{
    lapic_write(LAPIC_ICR_HI, dest << 24);
    lapic_write(LAPIC_ICR_LO, icr);
    deadline_start_ms(10);
    while (lapic_read(LAPIC_ICR_LO) & ICR_PENDING) {
        if (deadline_passed()) {
            put_str("smp: FAIL ICR delivery status stuck at pending\n");
            return false;
        }
    }
    return true;
}

/* The sequence of the MP specification (B.4): INIT, 10 ms, SIPI, 200 us, SIPI. A second SIPI
 * is ignored by an AP that already left wait-for-SIPI. */
static bool start_aps(uint32_t dest, uint32_t shorthand)
{
    const uint32_t vector = TRAMP_ADDR >> 12;
    if (!send_ipi(dest, shorthand | ICR_INIT))
        return false;
    delay_ms(10);
    if (!send_ipi(dest, shorthand | ICR_STARTUP | vector))
        return false;
    delay_ms(1);
    return send_ipi(dest, shorthand | ICR_STARTUP | vector);
}

int guest_main(uint32_t magic, const struct mb_info *mbi);
int guest_main(uint32_t magic, const struct mb_info *mbi)
{
    const char *cl = mb_cmdline(magic, mbi);
    if (magic != MB_BOOT_MAGIC) {
        put_str("smp: error: not started by a multiboot loader\n");
        return EXIT_BAD_ARGS;
    }
    bool bad = false;
    uint64_t cpus = 0, timeout_ms = 5000, rounds = 0;
    const bool have_cpus = cmdline_number(cl, "cpus", false, &cpus, &bad);
    cmdline_number(cl, "rounds", false, &rounds, &bad);
    if (rounds > 60000) {
        put_str("error: rounds=0..60000\n");
        bad = true;
    }
    cmdline_number(cl, "timeout", false, &timeout_ms, &bad);
    const char *start = cmdline_word(cl, "start");
    const bool broadcast = start && word_is(start, "all");
    if (start && !broadcast && !word_is(start, "each")) {
        put_str("error: start= wants each or all\n");
        bad = true;
    }
    const uint32_t fw_cpus = fw_cfg_present() ? (uint32_t)fw_cfg_read_le(0x05, 2) : 0;
    if (!have_cpus)
        cpus = fw_cpus;
    if (cpus == 0 || cpus > TRAMP_SLOTS || timeout_ms == 0 || timeout_ms > 60000) {
        put_str("error: need cpus=1..64 (or fw_cfg) and timeout=1..60000\n");
        bad = true;
    }
    if (bad)
        return EXIT_BAD_ARGS;

    uint32_t bsp_cpuid_id;
    {
        uint32_t a = 1, b, c = 0, d;
        __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
        bsp_cpuid_id = b >> 24;
    }
    lapic_enable();
    const uint32_t bsp_id = lapic_read(LAPIC_ID) >> 24;
    put_str("smp: bsp apic_id=");
    put_dec(bsp_id);
    put_str(" cpus=");
    put_dec((uint32_t)cpus);
    put_str(" fw_cfg_cpus=");
    put_dec(fw_cpus);
    put_str(broadcast ? " start=all\n" : " start=each\n");
    if (bsp_cpuid_id != bsp_id) {
        put_str("smp: FAIL CPUID leaf 1 APIC id ");
        put_dec(bsp_cpuid_id);
        put_str(" differs from the LAPIC ID register\n");
        return EXIT_FAIL;
    }

    memcpy((void *)TRAMP_ADDR, tramp_start, (size_t)(tramp_end - tramp_start));
    *ap_count = 0;
    for (int i = 0; i < TRAMP_SLOTS; i++) {
        ap_table[i] = 0xff;
        ap_rounds[i] = 0;
    }
    /* The real-mode IVT's NMI vector (physical 8: offset, then segment) -> tramp_nmi's copy.
     * Through asm: GCC takes a store to a constant address this low for a null dereference. */
    const uint32_t nmi_vector = ((uint32_t)(TRAMP_ADDR >> 4) << 16) |
                                (uint32_t)(tramp_nmi - tramp_start);
    __asm__ volatile("movl %0, 8" : : "r"(nmi_vector) : "memory");

    const uint32_t aps = (uint32_t)cpus - 1;
    if (broadcast) {
        if (aps && !start_aps(0, ICR_ALL_BUT_SELF))
            return EXIT_FAIL;
    } else {
        for (uint32_t id = 0, sent = 0; sent < aps; id++) {
            if (id == bsp_id)
                continue;
            if (!start_aps(id, 0))
                return EXIT_FAIL;
            sent++;
        }
    }

    /* Wait for every AP's slot and its table entry (the count goes up before the entry is
     * written). */
    deadline_start_ms((uint32_t)timeout_ms);
    for (;;) {
        uint32_t n = *ap_count, filled = 0;
        for (uint32_t i = 0; i < n && i < TRAMP_SLOTS; i++)
            filled += ap_table[i] != 0xff;
        if (n >= aps && filled >= aps)
            break;
        if (deadline_passed())
            break;
        cpu_relax();
    }
    const uint32_t arrived = *ap_count;

    /* Print sorted by id so the output does not depend on which AP ran first. */
    uint8_t ids[TRAMP_SLOTS];
    uint32_t n = arrived < TRAMP_SLOTS ? arrived : TRAMP_SLOTS;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t v = ap_table[i];
        uint32_t j = i;
        for (; j > 0 && ids[j - 1] > v; j--)
            ids[j] = ids[j - 1];
        ids[j] = v;
    }
    int failures = 0;
    for (uint32_t i = 0; i < n; i++) {
        put_str("smp: ap apic_id=");
        put_dec(ids[i]);
        if (ids[i] == 0xff) {
            put_str(" FAIL: slot taken but no id written");
            failures++;
        } else if (ids[i] == bsp_id) {
            put_str(" FAIL: the BSP's id");
            failures++;
        } else if (i > 0 && ids[i] == ids[i - 1]) {
            put_str(" FAIL: duplicate id");
            failures++;
        }
        put_str("\n");
    }
    put_str("smp: ");
    put_dec(arrived);
    put_str(" of ");
    put_dec(aps);
    put_str(" APs checked in\n");
    if (arrived != aps) {
        put_str(arrived < aps ? "smp: FAIL APs missing after the timeout\n"
                              : "smp: FAIL more APs than expected\n");
        failures++;
    }
    if (failures) {
        put_str("smp: FAIL\n");
        return EXIT_FAIL;
    }
    for (uint32_t r = 1; r <= rounds; r++) {
        for (uint32_t i = 0; i < n; i++) {
            if (!send_ipi(ids[i], ICR_NMI))
                return EXIT_FAIL;
        }
        deadline_start_ms(2000);
        for (;;) {
            uint32_t behind = 0;
            for (uint32_t i = 0; i < n; i++)
                behind += ap_rounds[i] != (uint16_t)r;
            if (!behind)
                break;
            if (deadline_passed()) {
                put_str("smp: FAIL ");
                put_dec(behind);
                put_str(" APs did not answer round ");
                put_dec(r);
                put_str("\n");
                return EXIT_FAIL;
            }
            cpu_relax();
        }
        if (r % 50 == 0) {
            put_str("smp: round ");
            put_dec(r);
            put_str("\n");
        }
        delay_ms(20);
    }
    if (rounds) {
        put_str("smp: ");
        put_dec(n);
        put_str(" APs answered ");
        put_dec((uint32_t)rounds);
        put_str(" rounds\n");
    }
    put_str("smp: PASS\n");
    return EXIT_PASS;
}
