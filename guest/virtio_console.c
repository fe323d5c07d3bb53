/*
 * virtio_console.c - console=virtio: all output, from the banner on, goes
 * to the virtio-console's transmitq (queue 1 of port 0) instead of COM1,
 * one buffer of up to CON_BUF_SIZE bytes per request. serial.c's puts()
 * switches here once vcon_active is set.
 */
#include "virtio.h"

int vcon_active = 0;   /* explicit: only initialised data is in the image */

static struct vq vcon = {0, 0, 0, 0};

void vcon_puts(const char *s)
{
    struct vdesc *d = (struct vdesc *)VQ_CON_BASE;
    char *buf = (char *)CON_BUF_ADDR;
    uint32_t n = 0;
    while (s[n] && n < CON_BUF_SIZE) {
        buf[n] = s[n];
        n++;
    }
    d[0].addr = CON_BUF_ADDR;
    d[0].len = n;
    d[0].flags = 0;
    d[0].next = 0;
    vq_run(&vcon);
    if (s[n])
        vcon_puts(s + n);
}

void virtio_console_start(void)
{
    uintptr_t r = virtio_find(3);
    if (!r || !virtio_start(r, &vcon, 1, VQ_CON_BASE, 0))
        virtio_missing("console=virtio", "virtio-console");
    vcon_active = 1;
}

