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
#define VR_STATUS           0x070
#define VR_QUEUE_DESC       0x080
#define VR_QUEUE_DRIVER     0x090
#define VR_QUEUE_DEVICE     0x0a0
#define VR_CONFIG           0x100

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

/* The register window of the first virtio device (version 2) with this id,
 * or 0. */
uintptr_t virtio_find(uint32_t device_id);
/* "minivmm-guest: error: WORD: no DEVICE" (and a hint if only a legacy
 * device was found), then the debug exit EXIT_NO_DEVICE. */
noreturn void virtio_missing(const char *word, const char *device);
/* Brings the device at r up with one queue, q, of VQ_SIZE entries at base,
 * accepting VERSION_1 and `want` of the low feature word. 0 if refused. */
int virtio_start(uintptr_t r, struct vq *vq, uint32_t q, uintptr_t base, uint32_t want);
/* Publishes the chain at descriptor 0, notifies, and polls until it is used. */
void vq_run(struct vq *vq);

#endif
