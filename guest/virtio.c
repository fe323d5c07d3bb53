/*
 * virtio.c - the virtio-mmio transport (virtio 1.2, 4.2.2) and split
 * queues (2.7) that every driver here shares: finding a device, feature
 * negotiation, queue set-up, and running one request to completion by
 * polling the used ring. No interrupts, rings in fixed guest RAM
 * (layout.h). The drivers are a file each: virtio_console.c, virtio_blk.c.
 *
 * Devices are probed at the fixed windows minivmm uses, not parsed from
 * the command line.
 */
#include "virtio.h"

#define VQ_SIZE             4
#define VQ_AVAIL_OFF        0x100
#define VQ_USED_OFF         0x200

uintptr_t virtio_find(uint32_t device_id)
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
int virtio_start(uintptr_t r, struct vq *vq, uint32_t q, uintptr_t base, uint32_t want)
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
