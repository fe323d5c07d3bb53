/*
 * serial.c - the guest's output: COM1 (a 16550 at 0x3f8) and the printing
 * helpers every other file uses. Output goes to virtio-console instead once
 * console=virtio has brought it up (virtio.c); everything printed passes
 * through puts() here, so the choice is made in one place.
 *
 * Every port access is a VM exit, so COM1 is written a FIFO's worth at a
 * time: one status read per 16 bytes rather than per byte.
 */
#include "guest.h"

/* Bytes the UART takes per THRE poll: 16 with its transmit FIFO, else 1. */
static uint8_t tx_burst = 1;
static uint8_t tx_room = 0;  /* explicit: only initialised data is in the image */

void serial_init(void)
{
    /* LCR = 8N1 with DLAB clear, so 0x3f8 is the transmit register and not
     * the divisor latch a firmware may have left selected. Then enable and
     * clear the FIFOs; IIR bits 7:6 read 11 only if a FIFO exists (16550
     * data sheet, "FIFO Control Register" / "Interrupt Identification
     * Register"). Baud rate is moot for a VMM's UART. */
    outb(COM1 + 3, 0x03);
    outb(COM1 + 2, 0x07);
    if ((inb(COM1 + 2) & 0xc0) == 0xc0)
        tx_burst = 16;
}

/* LSR bit 5 (THRE) means the holding register, or with the FIFO on the
 * whole 16-byte FIFO, is empty; writing more than that loses bytes. Returns
 * how many bytes may now be written. Out of line: it is the rare path. */
static __attribute__((noinline)) unsigned wait_tx_ready(void)
{
    while (!(inb(COM1 + 5) & 0x20)) {
    }
    return tx_burst;
}

/* One port read (a VM exit) per 16 bytes rather than per byte. */
void puts(const char *s)
{
    if (vcon_active) {
        vcon_puts(s);
        return;
    }
    unsigned room = tx_room;
    unsigned char c;
    while ((c = (unsigned char)*s++) != 0) {
        if (!room)
            room = wait_tx_ready();
        room--;
        outb(COM1, c);
    }
    tx_room = (uint8_t)room;
}

static void putc(char c)
{
    char buf[2] = {c, 0};
    puts(buf);
}

void put_range(const char *s, const char *end)
{
    while (s < end)
        putc(*s++);
}

void put_dec(uint64_t v)
{
    char buf[21];
    int i = 20;
    buf[20] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    puts(buf + i);
}

void put_hex(uint64_t v)
{
    char buf[17];
    int i = 16;
    buf[16] = 0;
    do {
        buf[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    puts("0x");
    puts(buf + i);
}
