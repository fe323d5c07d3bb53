/*
 * virtio.c - the virtio-mmio transport (virtio 1.2, 4.2.2) and split
 * queues (2.7) that every driver here shares: finding a device, feature
 * negotiation, queue set-up, and running one request to completion by
 * polling the used ring. No interrupts, rings in fixed guest RAM
 * (layout.h). The drivers are a file each: virtio_console.c, virtio_blk.c,
 * virtio_net.c (which runs its own two queues and takes interrupts).
 *
 * Devices are found where the command line's virtio_mmio.device= words say
 * (minivmm appends them, and so does QEMU's microvm without ACPI), else at
 * the fixed windows minivmm uses.
 */
#include "virtio.h"

#define VQ_SIZE             4

/* ------------------------------------------------------ finding devices --- */

/* The register windows the virtio_mmio.device= words named, in command-line
 * order. QEMU's microvm has 24 transports, minivmm 5: 32 is room for both. */
#define VIRTIO_WINDOWS_MAX  32
/* What a window must span: the registers (0x100) and the config space the
 * drivers read; both VMMs give at least 512 bytes. */
#define VIRTIO_WINDOW_MIN   0x200

static uintptr_t windows[VIRTIO_WINDOWS_MAX] = {0};
static uint32_t window_irqs[VIRTIO_WINDOWS_MAX] = {0};   /* the GSI each word gave */
static uint32_t window_count = 0;
/* virtio_find met a device of the id it looked for with the legacy
 * (version 1) registers: the error says so, as that is QEMU's default. */
static int legacy_seen = 0;

/* A number as Linux's memparse() reads one, for the forms VMMs write:
 * decimal or 0x-prefixed hex, then an optional K, M or G. Returns the
 * character after it, or 0 if there is none, it has more than 16 digits, or
 * the suffix overflows it. */
static const char *parse_mem(const char *s, uint64_t *out)
{
    uint64_t v = 0, base = 10;
    uint32_t digits = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    for (;; s++) {
        char c = (char)(*s | 0x20);   /* lower case; digits are unchanged */
        uint64_t d;
        if (*s >= '0' && *s <= '9')
            d = (uint64_t)(*s - '0');
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = (uint64_t)(c - 'a' + 10);
        else
            break;
        if (++digits > 16)
            return 0;
        v = v * base + d;
    }
    if (!digits)
        return 0;
    uint32_t shift = 0;
    char c = (char)(*s | 0x20);
    if (c == 'k')
        shift = 10;
    else if (c == 'm')
        shift = 20;
    else if (c == 'g')
        shift = 30;
    if (shift) {
        if (v >> (64 - shift))
            return 0;
        v <<= shift;
        s++;
    }
    *out = v;
    return s;
}

/* [addr, addr + size) lies inside the 2 MiB page at `page`. */
static int within(uint64_t addr, uint64_t size, uint64_t page)
{
    return addr >= page && size <= MMIO_PAGE_SIZE && addr - page <= MMIO_PAGE_SIZE - size;
}

const char *virtio_mmio_word(const char *v)
{
    uint64_t size, addr, irq, id;
    if (!(v = parse_mem(v, &size)) || *v++ != '@' || !(v = parse_mem(v, &addr)) ||
        *v++ != ':' || !(v = parse_mem(v, &irq)))
        return "expected SIZE@ADDR:IRQ";
    /* Linux also takes a platform device id after the IRQ; it means nothing here. */
    if (*v == ':' && !(v = parse_mem(v + 1, &id)))
        return "expected SIZE@ADDR:IRQ[:ID]";
    if ((unsigned char)*v > ' ')
        return "expected SIZE@ADDR:IRQ";
    if (size < VIRTIO_WINDOW_MIN || (addr & 3))
        return "window smaller than 0x200 bytes or not 4-byte aligned";
    /* Only what boot.S maps uncached can be touched: anything else would
     * fault, or be cached MMIO. */
    if (!within(addr, size, VIRTIO_MMIO_BASE) && !within(addr, size, MMIO_MICROVM_PAGE))
        return "window outside the MMIO this guest maps (0xd0000000 and 0xfea00000, 2 MiB each)";
    if (window_count == VIRTIO_WINDOWS_MAX)
        return "more than 32 virtio_mmio.device= words";
    windows[window_count] = (uintptr_t)addr;
    window_irqs[window_count++] = irq > 0xffff ? VIRTIO_NO_IRQ : (uint32_t)irq;
    return 0;
}

/* The windows named on the command line, else minivmm's fixed slots (mapped
 * uncached by boot.S; an empty slot reads all ones there). The id is read
 * before the version so that a legacy device of the right kind is noticed. */
uintptr_t virtio_find(uint32_t device_id)
{
    uint32_t n = window_count ? window_count : VIRTIO_MMIO_SLOTS;
    for (uint32_t i = 0; i < n; i++) {
        uintptr_t r = window_count ? windows[i] : VIRTIO_MMIO_BASE + i * VIRTIO_MMIO_STRIDE;
        if (vread(r, VR_MAGIC) != VIRTIO_MAGIC || vread(r, VR_DEVICE_ID) != device_id)
            continue;
        if (vread(r, VR_VERSION) == 2)
            return r;
        legacy_seen = 1;
    }
    return 0;
}

uint32_t virtio_irq(uintptr_t r)
{
    for (uint32_t i = 0; i < window_count; i++) {
        if (windows[i] == r)
            return window_irqs[i];
    }
    return VIRTIO_NO_IRQ;
}

void virtio_missing(const char *word, const char *device)
{
    puts("minivmm-guest: error: ");
    puts(word);
    puts(": no ");
    puts(device);
    puts("\n");
    if (legacy_seen) {
        puts("minivmm-guest: (there is a legacy virtio-mmio device, version 1; this driver "
             "needs version 2: QEMU -global virtio-mmio.force-legacy=false)\n");
    }
    debug_exit(EXIT_NO_DEVICE);
}

/* ------------------------------------------------------------- queues --- */

/* 3.1.1: reset, ACKNOWLEDGE|DRIVER, accept VERSION_1 and, of the low word,
 * only `want` where offered (blk: FLUSH, bit 9, for the flush it sends),
 * FEATURES_OK. Returns the low feature word accepted, or -1 if the device
 * refused. */
int64_t virtio_negotiate(uintptr_t r, uint32_t want)
{
    vwrite(r, VR_STATUS, 0);
    vwrite(r, VR_STATUS, 1);
    vwrite(r, VR_STATUS, 3);
    vwrite(r, VR_DEVICE_FSEL, 1);
    if (!(vread(r, VR_DEVICE_FEATURES) & 1))
        return -1;
    vwrite(r, VR_DEVICE_FSEL, 0);
    uint32_t low = vread(r, VR_DEVICE_FEATURES) & want;
    vwrite(r, VR_DRIVER_FSEL, 0);
    vwrite(r, VR_DRIVER_FEATURES, low);
    vwrite(r, VR_DRIVER_FSEL, 1);
    vwrite(r, VR_DRIVER_FEATURES, 1);
    vwrite(r, VR_STATUS, 0xb);
    if (!(vread(r, VR_STATUS) & 8))
        return -1;
    return low;
}

/* Queue q with `size` entries in the 4 KiB at base (vq_* offsets in
 * virtio.h), rings cleared. Returns 0 if the device has fewer entries. */
int virtio_queue(uintptr_t r, uint32_t q, uintptr_t base, uint32_t size)
{
    vwrite(r, VR_QUEUE_SEL, q);
    if (vread(r, VR_QUEUE_NUM_MAX) < size)
        return 0;
    /* The rings start empty: avail flags/idx and used idx are ours to clear. */
    *(volatile uint32_t *)(base + VQ_AVAIL_OFF) = 0;
    *(volatile uint32_t *)(base + VQ_USED_OFF) = 0;
    vwrite(r, VR_QUEUE_NUM, size);
    vwrite(r, VR_QUEUE_DESC, (uint32_t)base);
    vwrite(r, VR_QUEUE_DESC + 4, 0);
    vwrite(r, VR_QUEUE_DRIVER, (uint32_t)(base + VQ_AVAIL_OFF));
    vwrite(r, VR_QUEUE_DRIVER + 4, 0);
    vwrite(r, VR_QUEUE_DEVICE, (uint32_t)(base + VQ_USED_OFF));
    vwrite(r, VR_QUEUE_DEVICE + 4, 0);
    vwrite(r, VR_QUEUE_READY, 1);
    return 1;
}

/* DRIVER_OK; 0 if the device then asks for a reset (DEVICE_NEEDS_RESET). */
int virtio_driver_ok(uintptr_t r)
{
    vwrite(r, VR_STATUS, 0xf);
    return !(vread(r, VR_STATUS) & 0x40);
}

int virtio_start(uintptr_t r, struct vq *vq, uint32_t q, uintptr_t base, uint32_t want)
{
    if (virtio_negotiate(r, want) < 0 || !virtio_queue(r, q, base, VQ_SIZE) ||
        !virtio_driver_ok(r))
        return 0;
    vq->regs = r;
    vq->index = q;
    vq->base = base;
    vq->next = 0;
    return 1;
}

void vq_run(struct vq *vq)
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
