/*
 * virtio.h - the virtio-mmio transport and split-queue code that
 * virtio.c holds, for the device drivers beside it (virtio_console.c,
 * virtio_blk.c). Only those files include it; what the rest of the kernel
 * calls is in guest.h.
 */
#ifndef MINIVMM_GUEST_VIRTIO_H
#define MINIVMM_GUEST_VIRTIO_H

#include "guest.h"

/* virtio-mmio registers, version 2 layout (virtio 1.2, 4.2.2). */
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
#define VR_INTERRUPT_STATUS 0x060
#define VR_INTERRUPT_ACK    0x064
#define VR_STATUS           0x070
#define VR_QUEUE_DESC       0x080
#define VR_QUEUE_DRIVER     0x090
#define VR_QUEUE_DEVICE     0x0a0
#define VR_CONFIG           0x100

#define VDESC_NEXT          1
#define VDESC_WRITE         2

/* A queue's rings in its 4 KiB of guest RAM: descriptors at 0 (up to 64
 * entries), the driver (avail) ring at 0x400, the device (used) ring at
 * 0x800. */
#define VQ_AVAIL_OFF        0x400
#define VQ_USED_OFF         0x800
#define VQ_MAX_ENTRIES      64
/* Ring flags (2.7.7, 2.7.10): the driver asks for no interrupt, the device
 * for no notification. */
#define VRING_AVAIL_F_NO_INTERRUPT 1
#define VRING_USED_F_NO_NOTIFY     1

/* The IRQ of a window whose virtio_mmio.device= word gave none usable. */
#define VIRTIO_NO_IRQ       0xffffffffu

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

/* The register window of the first virtio device (version 2) with this id,
 * or 0. */
uintptr_t virtio_find(uint32_t device_id);
/* "minivmm-guest: error: WORD: no DEVICE" (and a hint if only a legacy
 * device was found), then the debug exit EXIT_NO_DEVICE. */
noreturn void virtio_missing(const char *word, const char *device);
/* The IRQ (GSI) the virtio_mmio.device= word for window r named, or
 * VIRTIO_NO_IRQ (a window found by probing minivmm's fixed slots). */
uint32_t virtio_irq(uintptr_t r);
/* Brings the device at r up with one queue, q, of VQ_SIZE entries at base,
 * accepting VERSION_1 and `want` of the low feature word. 0 if refused. */
int virtio_start(uintptr_t r, struct vq *vq, uint32_t q, uintptr_t base, uint32_t want);
/* virtio_start in steps, for a driver with several queues: features (the
 * low word accepted, or -1 if refused), each queue (0 if the device's are
 * smaller than `size`), then DRIVER_OK (0 if refused). */
int64_t virtio_negotiate(uintptr_t r, uint32_t want);
int virtio_queue(uintptr_t r, uint32_t q, uintptr_t base, uint32_t size);
int virtio_driver_ok(uintptr_t r);
/* Publishes the chain at descriptor 0, notifies, and polls until it is used. */
void vq_run(struct vq *vq);

#endif
