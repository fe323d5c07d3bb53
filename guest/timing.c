/*
 * timing.c - `stamps`: the guest measures its own ticks. Each wakeup for a
 * tick is stamped with kvmclock (KVM's paravirtual clock, in nanoseconds),
 * and at the end one line says how many ticks came over how long, the
 * largest and smallest gap between them, and how many arrived bunched.
 *
 * kvmclock, not the TSC: a VMM that pauses, or snapshots and restores, the
 * guest sets kvmclock back to where it stood (KVM_SET_CLOCK), so a restored
 * guest's gaps show only what the guest was owed; some hosts' TSC keeps
 * running through all of that. The clock is read only in this mode: it
 * costs ~25 emulated instructions a tick.
 */
#include "guest.h"

/* KVM's paravirtual clock (Documentation/virt/kvm/x86/msr.rst): MSR
 * KVM_SYSTEM_TIME_NEW takes the guest-physical address of this structure,
 * bit 0 set to enable it; the host fills it in. */
#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01u
#define KVM_CPUID_SIGNATURE     0x40000000u
#define KVM_CPUID_FEATURES      0x40000001u
#define KVM_FEATURE_CLOCKSOURCE2 (1u << 3)

struct pvclock {
    uint32_t version;     /* odd while the host updates it */
    uint32_t pad0;
    uint64_t tsc_timestamp;
    uint64_t system_time; /* ns at tsc_timestamp */
    uint32_t tsc_to_system_mul;
    int8_t tsc_shift;
    uint8_t flags;
    uint8_t pad[2];
} __attribute__((aligned(32)));

/* Initialised, so it is in .data (guest.ld rejects .bss). */
static volatile struct pvclock clock_page = {0, 0, 0, 0, 0, 0, 0, {0, 0}};

/* The stamps so far. */
static struct {
    uint64_t start_ns, first_ns, last_ns, gap_min, gap_max;
    uint64_t ticks, bunched, run, longest_run;
    uint64_t period_ns;
    uint64_t clock_max;     /* the latest kvmclock reading: see clock_ns() */
} st = {0, 0, 0, UINT64_MAX, 0, 0, 0, 0, 0, 0, 0};

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
    __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0));
}

static void wrmsr(uint32_t msr, uint64_t v)
{
    __asm__ volatile("wrmsr" : : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)));
}

static uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t clock_ns(void);

int stamps_start(uint32_t hz)
{
    uint32_t a, b, c, d;
    cpuid(KVM_CPUID_SIGNATURE, &a, &b, &c, &d);
    /* "KVMKVMKVM\0\0\0" in ebx, ecx, edx */
    if (b != 0x4b4d564b || c != 0x564b4d56 || d != 0x4d)
        return 0;
    cpuid(KVM_CPUID_FEATURES, &a, &b, &c, &d);
    if (!(a & KVM_FEATURE_CLOCKSOURCE2))
        return 0;
    wrmsr(MSR_KVM_SYSTEM_TIME_NEW, (uint64_t)(uintptr_t)&clock_page | 1);
    st.period_ns = 1000000000ull / hz;
    st.start_ns = clock_ns();
    return 1;
}

/* ns of kvmclock: system_time + (tsc - tsc_timestamp) scaled, read again if
 * the host changed the structure meanwhile. */
static uint64_t clock_ns(void)
{
    uint32_t version;
    uint64_t ns;
    do {
        version = clock_page.version;
        __asm__ volatile("" ::: "memory");
        uint64_t delta = rdtsc() - clock_page.tsc_timestamp;
        int8_t shift = clock_page.tsc_shift;
        if (shift < 0)
            delta >>= -shift;
        else
            delta <<= shift;
        ns = clock_page.system_time +
             (uint64_t)(((unsigned __int128)delta * clock_page.tsc_to_system_mul) >> 32);
        __asm__ volatile("" ::: "memory");
    } while ((version & 1) || version != clock_page.version);
    /* Without PVCLOCK_TSC_STABLE_BIT (flags bit 0) the host does not promise that readings
     * taken from its successive updates of the page never go back: when it rewrites the page
     * (as it does when the VMM sets the clock, at a resume or a restore), the new
     * system_time can be a little behind the old page's extrapolation. Linux's
     * pvclock_clocksource_read() then never returns less than its last value; so does this. */
    if (!(clock_page.flags & 1)) {
        if (ns < st.clock_max)
            ns = st.clock_max;
        st.clock_max = ns;
    }
    return ns;
}

/* A wakeup that found `ticks` new ticks. A tick is bunched when it came
 * less than half a period after the one before: several in one wakeup (they
 * arrived back to back while the vCPU was away), or a wakeup too soon after
 * the last. `run` is the longest stretch of bunched ticks: a catch-up burst. */
void stamps_tick(uint64_t ticks)
{
    uint64_t now = clock_ns();
    uint64_t bunched = ticks - 1;
    if (st.ticks > 0) {
        uint64_t gap = now - st.last_ns;
        if (gap < st.gap_min)
            st.gap_min = gap;
        if (gap > st.gap_max)
            st.gap_max = gap;
        if (gap < st.period_ns / 2)
            bunched++;
    } else {
        st.first_ns = now;
    }
    st.bunched += bunched;
    st.run = bunched ? st.run + bunched : 0;
    if (st.run > st.longest_run)
        st.longest_run = st.run;
    st.ticks += ticks;
    st.last_ns = now;
}

/* stamps: ticks=N elapsed_us=E gap_min_us=A gap_max_us=B bunched=K run=R
 * span_us=S. elapsed is from the first tick to the last, so N - 1 periods on
 * time; span is from just before the timer was programmed to the last tick,
 * so N periods on time: how far behind the guest is at its last tick. */
void stamps_report(void)
{
    puts("stamps: ticks=");
    put_dec(st.ticks);
    puts(" elapsed_us=");
    put_dec((st.last_ns - st.first_ns) / 1000);
    puts(" gap_min_us=");
    put_dec(st.ticks > 1 ? st.gap_min / 1000 : 0);
    puts(" gap_max_us=");
    put_dec(st.gap_max / 1000);
    puts(" bunched=");
    put_dec(st.bunched);
    puts(" run=");
    put_dec(st.longest_run);
    puts(" span_us=");
    put_dec((st.last_ns - st.start_ns) / 1000);
    puts("\n");
}
